#pragma once
// Tensor values of the compiler: constants in the graph IR and the values the FP32 reference
// interpreter computes. Floating tensors keep their values as float, integer and bool tensors keep
// exact values as int64, so one tensor type serves ONNX's float32, int8/uint8/int32/int64 and bool
// without a template per element type.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace npusim::compiler {

// Element types, numbered as ONNX's TensorProto.DataType so conversion is a cast.
enum class DataType : int {
  kUndefined = 0,
  kFloat32 = 1,
  kUInt8 = 2,
  kInt8 = 3,
  kUInt16 = 4,
  kInt16 = 5,
  kInt32 = 6,
  kInt64 = 7,
  kString = 8,
  kBool = 9,
  kFloat16 = 10,
  kFloat64 = 11,
  kUInt32 = 12,
  kUInt64 = 13,
  kBFloat16 = 16,
};

std::string_view to_string(DataType t);
// Bytes per element as stored in ONNX/DRAM (0 for string/undefined).
int64_t element_size(DataType t);
// True for the floating types (their values live in Tensor::f).
bool is_float(DataType t);
// True for the types the interpreter computes with: float32, float64 (in float32 precision), float16 and
// bfloat16 (in float32, each node's results rounded to the type), the integer types up to 64 bits and bool.
bool interpretable(DataType t);

using Shape = std::vector<int64_t>;

// Product of the dimensions (1 for a scalar).
int64_t num_elements(const Shape& s);
// "1x3x224x224", "scalar" for rank 0.
std::string shape_to_string(const Shape& s);

// A dense row-major tensor. Exactly one of `f` (floating types) or `i` (integer types and bool)
// holds num_elements(shape) values; the other is empty. A shape-only tensor (values_elided) holds
// neither: a constant whose values a timing-only compile leaves out (ImportOptions::weight_values),
// since no cycle count depends on them. Its type and shape are exact; reading its values through
// to_float_vector, to_int_vector, as_double or as_int throws std::logic_error.
struct Tensor {
  DataType dtype = DataType::kFloat32;
  Shape shape;
  std::vector<float> f;
  std::vector<int64_t> i;
  bool values_elided = false;

  Tensor() = default;
  // A zero-filled tensor of the given type and shape.
  Tensor(DataType t, Shape s);

  static Tensor from_floats(Shape s, std::vector<float> v);
  static Tensor from_ints(DataType t, Shape s, std::vector<int64_t> v);
  static Tensor scalar_float(float v) { return from_floats({}, {v}); }
  static Tensor scalar_int(DataType t, int64_t v) { return from_ints(t, {}, {v}); }
  // A tensor of this type and shape without values (values_elided).
  static Tensor shape_only(DataType t, Shape s);

  int64_t size() const { return num_elements(shape); }
  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
  bool floating() const { return is_float(dtype); }
  bool has_values() const { return !values_elided; }
  // Element k as double / int64 whatever the storage (for shapes, indices and attributes).
  double as_double(int64_t k) const {
    if (values_elided) throw_elided();
    return floating() ? f[k] : static_cast<double>(i[k]);
  }
  int64_t as_int(int64_t k) const {
    if (values_elided) throw_elided();
    return floating() ? static_cast<int64_t>(f[k]) : i[k];
  }
  std::vector<int64_t> to_int_vector() const;
  std::vector<float> to_float_vector() const;

 private:
  [[noreturn]] void throw_elided() const;
};

// Wrap an integer to the range of `t` the way a C cast of two's complement does (int8 -> [-128,127]).
int64_t wrap_integer(DataType t, int64_t v);

}  // namespace npusim::compiler
