#pragma once
// Moving tensors between the user's files, the compiler's Tensor and the NPU's DRAM bytes: dtype
// conversion (fp32/fp16/bf16/int8/int32 storage) and layout permutation (a DRAM tensor may be stored
// in a physical dim order other than ONNX's, e.g. NHWC).
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "compiler/ir/tensor.h"
#include "isa/isa.h"
#include "isa/program.h"

namespace npusim::sim {

// A user's input file that is missing, unreadable or of the wrong shape (exit 2).
class TensorIoError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Logical (row-major, ONNX order) float values -> the bytes of `dtype` laid out in `layout` (the
// logical dims in memory order; empty = ONNX order). Integer dtypes saturate.
std::vector<uint8_t> to_device_bytes(const std::vector<float>& logical, const compiler::Shape& shape,
                                     const std::vector<int>& layout, isa::DType dtype);
// The inverse: device bytes -> logical float values.
std::vector<float> from_device_bytes(const uint8_t* bytes, const compiler::Shape& shape,
                                     const std::vector<int>& layout, isa::DType dtype);

// The file name a tensor is read from / written to: its name with path separators replaced.
std::string tensor_file_stem(const std::string& name);

// Reads `dir/NAME.npy` or `dir/NAME.pb` (ONNX TensorProto) for every input binding of `program`,
// checks the element count against the binding's dims and returns logical float values by name.
std::map<std::string, std::vector<float>> read_inputs(const isa::Program& program, const std::string& dir);
// Seeded standard-normal values for every input binding (when the user gives no --inputs).
std::map<std::string, std::vector<float>> random_inputs(const isa::Program& program, uint32_t seed);
// Writes `dir/NAME.npy` (float32, the binding's dims) for each value.
void write_outputs(const std::string& dir, const std::map<std::string, std::vector<float>>& values,
                   const isa::Program& program);

}  // namespace npusim::sim
