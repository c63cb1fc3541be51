#pragma once
// How the node tests' data files (libonnx-testdata, ONNX 1.12) are read against their model, shared by
// compiler_node_tests and compiled_node_tests.
#include <cstdint>
#include <cstring>
#include <utility>

#include "compiler/ir/tensor.h"

namespace npusim::compiler::testing {

// A tensor of a data file as the type the model declares for it. ONNX 1.12's generator wrote bfloat16
// tensors with element type uint16 holding the bit patterns (test_cast_FLOAT_to_BFLOAT16's input
// element 16117 is 0.478516): they are the bfloat16 values of those bits. Any other tensor is as read.
inline Tensor as_declared(Tensor t, DataType declared) {
  if (declared != DataType::kBFloat16 || t.dtype != DataType::kUInt16) return t;
  Tensor r(DataType::kBFloat16, t.shape);
  for (size_t k = 0; k < r.f.size(); ++k) {
    const uint32_t bits = static_cast<uint32_t>(t.i[k]) << 16;
    std::memcpy(&r.f[k], &bits, sizeof(float));
  }
  return r;
}

}  // namespace npusim::compiler::testing
