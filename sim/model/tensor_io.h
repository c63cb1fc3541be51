#pragma once
// Moving a model's inputs and outputs between the user's files and the NPU's DRAM bytes: dtype
// conversion (fp32/fp16/bf16/int8/int32 storage). Bound tensors are in ONNX order (the compiler
// guarantees it), so no layout permutation happens here.
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "compiler/io/preprocess.h"
#include "compiler/ir/graph.h"
#include "compiler/ir/tensor.h"
#include "isa/isa.h"
#include "isa/program.h"

namespace npusim::sim {

// A user's input file that is missing, unreadable or of the wrong shape (exit 2).
class TensorIoError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Float values -> the bytes of `dtype` (integer dtypes saturate), and back.
std::vector<uint8_t> to_device_bytes(const std::vector<float>& values, isa::DType dtype);
std::vector<float> from_device_bytes(const std::vector<uint8_t>& bytes, isa::DType dtype);

// The file name a tensor is read from / written to: its name with path separators replaced.
std::string tensor_file_stem(const std::string& name);

// Reads `dir/NAME.npy` or `dir/NAME.pb` (ONNX TensorProto) -- or, as ONNX's test data names them,
// `dir/input_K.pb` for the K-th input (from 0) -- for every input binding of `program`,
// checks the element count against the binding's dims and returns logical float values by name.
// With `preprocess`, an image `dir/NAME.png|.jpg|.jpeg` (or, for a model with one input, the folder's
// only image) is pre-processed into the input instead; with `graph`, the pre-processing's dtype must be the
// input's element type there (compiler::check_image_dtype).
std::map<std::string, std::vector<float>> read_inputs(const isa::Program& program, const std::string& dir,
                                                      const compiler::Preprocess* preprocess = nullptr,
                                                      const compiler::Graph* graph = nullptr);
// Seeded standard-normal values for every input binding (when the user gives no --inputs).
std::map<std::string, std::vector<float>> random_inputs(const isa::Program& program, uint32_t seed);
// Writes `dir/NAME.npy` (float32, the binding's dims) for each value; returns "PATH (SHAPE)" of each
// file written, in binding order.
std::vector<std::string> write_outputs(const std::string& dir,
                                       const std::map<std::string, std::vector<float>>& values,
                                       const isa::Program& program);

}  // namespace npusim::sim
