#include "compiler/ir/tensor.h"

#include <stdexcept>

namespace npusim::compiler {

std::string_view to_string(DataType t) {
  switch (t) {
    case DataType::kUndefined:
      return "undefined";
    case DataType::kFloat32:
      return "float32";
    case DataType::kUInt8:
      return "uint8";
    case DataType::kInt8:
      return "int8";
    case DataType::kUInt16:
      return "uint16";
    case DataType::kInt16:
      return "int16";
    case DataType::kInt32:
      return "int32";
    case DataType::kInt64:
      return "int64";
    case DataType::kString:
      return "string";
    case DataType::kBool:
      return "bool";
    case DataType::kFloat16:
      return "float16";
    case DataType::kFloat64:
      return "float64";
    case DataType::kUInt32:
      return "uint32";
    case DataType::kUInt64:
      return "uint64";
    case DataType::kBFloat16:
      return "bfloat16";
  }
  return "unknown";
}

int64_t element_size(DataType t) {
  switch (t) {
    case DataType::kUInt8:
    case DataType::kInt8:
    case DataType::kBool:
      return 1;
    case DataType::kUInt16:
    case DataType::kInt16:
    case DataType::kFloat16:
    case DataType::kBFloat16:
      return 2;
    case DataType::kFloat32:
    case DataType::kInt32:
    case DataType::kUInt32:
      return 4;
    case DataType::kInt64:
    case DataType::kUInt64:
    case DataType::kFloat64:
      return 8;
    default:
      return 0;
  }
}

bool is_float(DataType t) {
  return t == DataType::kFloat32 || t == DataType::kFloat16 || t == DataType::kFloat64 ||
         t == DataType::kBFloat16;
}

bool interpretable(DataType t) {
  switch (t) {
    case DataType::kFloat32:
    case DataType::kUInt8:
    case DataType::kInt8:
    case DataType::kUInt16:
    case DataType::kInt16:
    case DataType::kInt32:
    case DataType::kInt64:
    case DataType::kUInt32:
    case DataType::kFloat64:  // computed in float32 precision (Tensor::f)
    case DataType::kFloat16:  // computed in float32, each node's results rounded to the type (the
                              // interpreter)
    case DataType::kBFloat16:
    case DataType::kBool:
      return true;
    default:
      return false;  // uint64 does not fit int64 storage exactly
  }
}

int64_t num_elements(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

std::string shape_to_string(const Shape& s) {
  if (s.empty()) return "scalar";
  std::string out;
  for (size_t k = 0; k < s.size(); ++k) {
    if (k) out += 'x';
    out += s[k] < 0 ? std::string("?") : std::to_string(s[k]);
  }
  return out;
}

Tensor::Tensor(DataType t, Shape s) : dtype(t), shape(std::move(s)) {
  int64_t n = num_elements(shape);
  if (n < 0) throw std::invalid_argument("tensor shape " + shape_to_string(shape) + " is not concrete");
  if (is_float(t))
    f.assign(static_cast<size_t>(n), 0.0f);
  else
    i.assign(static_cast<size_t>(n), 0);
}

Tensor Tensor::from_floats(Shape s, std::vector<float> v) {
  Tensor t;
  t.dtype = DataType::kFloat32;
  t.shape = std::move(s);
  t.f = std::move(v);
  if (static_cast<int64_t>(t.f.size()) != num_elements(t.shape))
    throw std::invalid_argument("tensor data size does not match shape " + shape_to_string(t.shape));
  return t;
}

Tensor Tensor::from_ints(DataType dt, Shape s, std::vector<int64_t> v) {
  Tensor t;
  t.dtype = dt;
  t.shape = std::move(s);
  t.i = std::move(v);
  if (static_cast<int64_t>(t.i.size()) != num_elements(t.shape))
    throw std::invalid_argument("tensor data size does not match shape " + shape_to_string(t.shape));
  return t;
}

Tensor Tensor::shape_only(DataType t, Shape s) {
  if (num_elements(s) < 0)
    throw std::invalid_argument("tensor shape " + shape_to_string(s) + " is not concrete");
  Tensor out;
  out.dtype = t;
  out.shape = std::move(s);
  out.values_elided = true;
  return out;
}

void Tensor::throw_elided() const {
  throw std::logic_error("a " + shape_to_string(shape) +
                         " constant carries its shape only (a timing-only compile) but its values were read");
}

std::vector<int64_t> Tensor::to_int_vector() const {
  if (values_elided) throw_elided();
  if (!floating()) return i;
  std::vector<int64_t> out(f.size());
  for (size_t k = 0; k < f.size(); ++k) out[k] = static_cast<int64_t>(f[k]);
  return out;
}

std::vector<float> Tensor::to_float_vector() const {
  if (values_elided) throw_elided();
  if (floating()) return f;
  std::vector<float> out(i.size());
  for (size_t k = 0; k < i.size(); ++k) out[k] = static_cast<float>(i[k]);
  return out;
}

int64_t wrap_integer(DataType t, int64_t v) {
  switch (t) {
    case DataType::kInt8:
      return static_cast<int8_t>(v);
    case DataType::kUInt8:
      return static_cast<uint8_t>(v);
    case DataType::kInt16:
      return static_cast<int16_t>(v);
    case DataType::kUInt16:
      return static_cast<uint16_t>(v);
    case DataType::kInt32:
      return static_cast<int32_t>(v);
    case DataType::kUInt32:
      return static_cast<uint32_t>(v);
    case DataType::kBool:
      return v != 0;
    default:
      return v;
  }
}

}  // namespace npusim::compiler
