#pragma once
// The one dense row-major strides helper (elements per step of each dimension; the last is 1): the
// interpreter, the host calls and the back end index tensors with it.
#include <cstdint>
#include <vector>

namespace npusim {

inline std::vector<int64_t> dense_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> st(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) st[i - 1] = st[i] * shape[i];
  return st;
}

}  // namespace npusim
