// Element-wise kernels: arithmetic with broadcasting, activations, comparisons, logic, casts.
#include <cmath>
#include <limits>

#include "compiler/interp/kernels.h"
#include "isa/numerics.h"

namespace npusim::compiler::interp {
namespace {

// ---- binary arithmetic ---------------------------------------------------------------------------

template <class FF, class FI>
Tensor binary(KernelContext& ctx, const Tensor& a, const Tensor& b, FF ff, FI fi) {
  if (a.dtype != b.dtype)
    ctx.fail("operand types differ (" + std::string(to_string(a.dtype)) + " vs " +
             std::string(to_string(b.dtype)) + ")");
  Shape os = broadcast_shapes(ctx, a.shape, b.shape);
  Tensor out(a.dtype, os);
  std::array<const Shape*, 2> sh{&a.shape, &b.shape};
  if (a.floating()) {
    const float* pa = a.f.data();
    const float* pb = b.f.data();
    float* po = out.f.data();
    if (a.shape == b.shape) {
      for (int64_t k = 0, n = out.size(); k < n; ++k) po[k] = ff(pa[k], pb[k]);
    } else {
      broadcast_loop<2>(os, sh,
                        [&](int64_t o, const std::array<int64_t, 2>& p) { po[o] = ff(pa[p[0]], pb[p[1]]); });
    }
  } else {
    const DataType dt = a.dtype;
    broadcast_loop<2>(os, sh, [&](int64_t o, const std::array<int64_t, 2>& p) {
      out.i[o] = wrap_integer(dt, fi(a.i[p[0]], b.i[p[1]]));
    });
  }
  return out;
}

void k_add(KernelContext& c) {
  c.out[0] = binary(
      c, c.input(0), c.input(1), [](float x, float y) { return x + y; },
      [](int64_t x, int64_t y) { return x + y; });
}
void k_sub(KernelContext& c) {
  c.out[0] = binary(
      c, c.input(0), c.input(1), [](float x, float y) { return x - y; },
      [](int64_t x, int64_t y) { return x - y; });
}
void k_mul(KernelContext& c) {
  c.out[0] = binary(
      c, c.input(0), c.input(1), [](float x, float y) { return x * y; },
      [](int64_t x, int64_t y) { return x * y; });
}
void k_div(KernelContext& c) {
  c.out[0] = binary(
      c, c.input(0), c.input(1), [](float x, float y) { return x / y; },
      [&](int64_t x, int64_t y) -> int64_t {
        if (y == 0) c.fail("integer division by zero");
        return x / y;
      });
}
void k_mod(KernelContext& c) {
  const bool fm = c.node.attr_int("fmod", 0) != 0;
  const Tensor& a = c.input(0);
  if (a.floating() && !fm) c.fail("fmod=0 is not defined for floating inputs");
  c.out[0] = binary(
      c, a, c.input(1), [](float x, float y) { return std::fmod(x, y); },
      [&](int64_t x, int64_t y) -> int64_t {
        if (y == 0) c.fail("integer modulo by zero");
        int64_t r = x % y;
        if (!fm && r != 0 && ((r < 0) != (y < 0))) r += y;  // sign of the divisor
        return r;
      });
}
void k_pow(KernelContext& c) {
  const Tensor& a = c.input(0);
  const Tensor& b = c.input(1);
  Shape os = broadcast_shapes(c, a.shape, b.shape);
  Tensor out(a.dtype, os);
  std::array<const Shape*, 2> sh{&a.shape, &b.shape};
  broadcast_loop<2>(os, sh, [&](int64_t o, const std::array<int64_t, 2>& p) {
    double v = std::pow(a.as_double(p[0]), b.as_double(p[1]));
    if (out.floating())
      out.f[o] = static_cast<float>(v);
    else
      out.i[o] = wrap_integer(out.dtype, static_cast<int64_t>(v));
  });
  c.out[0] = std::move(out);
}
void k_bitshift(KernelContext& c) {
  const bool left = c.node.attr_string("direction", "") == "LEFT";
  c.out[0] = binary(
      c, c.input(0), c.input(1), [](float x, float) { return x; },
      [&](int64_t x, int64_t y) -> int64_t {
        uint64_t u = static_cast<uint64_t>(x);
        if (y >= 64) return 0;
        return static_cast<int64_t>(left ? u << y : u >> y);
      });
}

void k_prelu(KernelContext& c) {
  c.out[0] = binary(
      c, c.input(0), c.input(1), [](float x, float s) { return x < 0 ? x * s : x; },
      [](int64_t x, int64_t s) { return x < 0 ? x * s : x; });
}

// ---- comparisons and logic -------------------------------------------------------------------------

template <class F>
void compare(KernelContext& c, F f) {
  const Tensor& a = c.input(0);
  const Tensor& b = c.input(1);
  Shape os = broadcast_shapes(c, a.shape, b.shape);
  Tensor out(DataType::kBool, os);
  std::array<const Shape*, 2> sh{&a.shape, &b.shape};
  if (a.floating())
    broadcast_loop<2>(
        os, sh, [&](int64_t o, const std::array<int64_t, 2>& p) { out.i[o] = f(a.f[p[0]], b.f[p[1]]); });
  else
    broadcast_loop<2>(
        os, sh, [&](int64_t o, const std::array<int64_t, 2>& p) { out.i[o] = f(a.i[p[0]], b.i[p[1]]); });
  c.out[0] = std::move(out);
}
void k_equal(KernelContext& c) {
  compare(c, [](auto x, auto y) { return x == y; });
}
void k_less(KernelContext& c) {
  compare(c, [](auto x, auto y) { return x < y; });
}
void k_less_eq(KernelContext& c) {
  compare(c, [](auto x, auto y) { return x <= y; });
}
void k_greater(KernelContext& c) {
  compare(c, [](auto x, auto y) { return x > y; });
}
void k_greater_eq(KernelContext& c) {
  compare(c, [](auto x, auto y) { return x >= y; });
}
void k_and(KernelContext& c) {
  compare(c, [](auto x, auto y) { return (x != 0) && (y != 0); });
}
void k_or(KernelContext& c) {
  compare(c, [](auto x, auto y) { return (x != 0) || (y != 0); });
}
void k_xor(KernelContext& c) {
  compare(c, [](auto x, auto y) { return (x != 0) != (y != 0); });
}
void k_not(KernelContext& c) {
  const Tensor& a = c.input(0);
  Tensor out(DataType::kBool, a.shape);
  for (int64_t k = 0; k < a.size(); ++k) out.i[k] = a.i[k] == 0;
  c.out[0] = std::move(out);
}

// ---- unary -------------------------------------------------------------------------------------------

template <class F>
void unary_float(KernelContext& c, F f) {
  const Tensor& a = c.input(0);
  if (!a.floating()) c.fail("expects a floating input, got " + std::string(to_string(a.dtype)));
  Tensor out(a.dtype, a.shape);
  const float* pa = a.f.data();
  float* po = out.f.data();
  for (int64_t k = 0, n = a.size(); k < n; ++k) po[k] = f(pa[k]);
  c.out[0] = std::move(out);
}

template <class F, class G>
void unary_any(KernelContext& c, F f, G g) {
  const Tensor& a = c.input(0);
  if (a.floating()) return unary_float(c, f);
  Tensor out(a.dtype, a.shape);
  for (int64_t k = 0, n = a.size(); k < n; ++k) out.i[k] = wrap_integer(a.dtype, g(a.i[k]));
  c.out[0] = std::move(out);
}

#define UNARY(NAME, EXPR)                                  \
  void NAME(KernelContext& c) {                            \
    unary_float(c, [](float x) -> float { return EXPR; }); \
  }
UNARY(k_sqrt, std::sqrt(x))
UNARY(k_reciprocal, 1.0f / x)
UNARY(k_exp, std::exp(x))
UNARY(k_log, std::log(x))
UNARY(k_floor, std::floor(x))
UNARY(k_ceil, std::ceil(x))
UNARY(k_round, std::nearbyint(x))
UNARY(k_erf, std::erf(x))
UNARY(k_sigmoid, isa::numerics::sigmoid(x))
UNARY(k_tanh, std::tanh(x))
UNARY(k_softsign, x / (1.0f + std::fabs(x)))
UNARY(k_softplus, x > 20.0f ? x : std::log1p(std::exp(x)))
UNARY(k_sin, std::sin(x))
UNARY(k_cos, std::cos(x))
UNARY(k_tan, std::tan(x))
UNARY(k_asin, std::asin(x))
UNARY(k_acos, std::acos(x))
UNARY(k_atan, std::atan(x))
UNARY(k_sinh, std::sinh(x))
UNARY(k_cosh, std::cosh(x))
UNARY(k_asinh, std::asinh(x))
UNARY(k_acosh, std::acosh(x))
UNARY(k_atanh, std::atanh(x))
UNARY(k_hardswish, isa::numerics::hard_swish(x))
#undef UNARY

void k_neg(KernelContext& c) {
  unary_any(
      c, [](float x) { return -x; }, [](int64_t x) { return -x; });
}
void k_abs(KernelContext& c) {
  unary_any(
      c, [](float x) { return std::fabs(x); }, [](int64_t x) { return x < 0 ? -x : x; });
}
void k_sign(KernelContext& c) {
  unary_any(
      c, [](float x) { return x > 0 ? 1.0f : (x < 0 ? -1.0f : 0.0f); },
      [](int64_t x) -> int64_t { return x > 0 ? 1 : (x < 0 ? -1 : 0); });
}
void k_relu(KernelContext& c) {
  unary_any(
      c, [](float x) { return x > 0 ? x : 0.0f; }, [](int64_t x) { return x > 0 ? x : 0; });
}
void k_leaky_relu(KernelContext& c) {
  const float alpha = c.node.attr_float("alpha", 0.01f);
  unary_float(c, [=](float x) { return x >= 0 ? x : alpha * x; });
}
void k_elu(KernelContext& c) {
  const float alpha = c.node.attr_float("alpha", 1.0f);
  unary_float(c, [=](float x) { return x >= 0 ? x : alpha * (std::exp(x) - 1.0f); });
}
void k_celu(KernelContext& c) {
  const float alpha = c.node.attr_float("alpha", 1.0f);
  unary_float(
      c, [=](float x) { return std::max(0.0f, x) + std::min(0.0f, alpha * (std::exp(x / alpha) - 1.0f)); });
}
void k_selu(KernelContext& c) {
  const float alpha = c.node.attr_float("alpha", 1.67326319217681884765625f);
  const float gamma = c.node.attr_float("gamma", 1.05070102214813232421875f);
  unary_float(c, [=](float x) { return x > 0 ? gamma * x : gamma * (alpha * std::exp(x) - alpha); });
}
void k_thresholded_relu(KernelContext& c) {
  const float alpha = c.node.attr_float("alpha", 1.0f);
  unary_float(c, [=](float x) { return x > alpha ? x : 0.0f; });
}
void k_hard_sigmoid(KernelContext& c) {
  const float alpha = c.node.attr_float("alpha", 0.2f), beta = c.node.attr_float("beta", 0.5f);
  unary_float(c, [=](float x) { return isa::numerics::hard_sigmoid(x, alpha, beta); });
}
void k_shrink(KernelContext& c) {
  const float bias = c.node.attr_float("bias", 0.0f), lambd = c.node.attr_float("lambd", 0.5f);
  unary_any(
      c, [=](float x) { return x < -lambd ? x + bias : (x > lambd ? x - bias : 0.0f); },
      [=](int64_t x) -> int64_t {
        double v = static_cast<double>(x);
        return static_cast<int64_t>(v < -lambd ? v + bias : (v > lambd ? v - bias : 0.0));
      });
}

void k_clip(KernelContext& c) {
  const Tensor& a = c.input(0);
  double lo, hi;
  if (c.opset < 11) {
    lo = c.node.attr_float("min", -std::numeric_limits<float>::max());
    hi = c.node.attr_float("max", std::numeric_limits<float>::max());
  } else {
    lo = c.has(1) ? c.input(1).as_double(0) : -std::numeric_limits<double>::infinity();
    hi = c.has(2) ? c.input(2).as_double(0) : std::numeric_limits<double>::infinity();
  }
  if (a.floating()) {
    const float flo = static_cast<float>(std::max(lo, -double(std::numeric_limits<float>::infinity())));
    const float fhi = static_cast<float>(hi);
    unary_float(c, [=](float x) { return std::min(std::max(x, flo), fhi); });
  } else {
    Tensor out(a.dtype, a.shape);
    for (int64_t k = 0; k < a.size(); ++k) {
      double v = static_cast<double>(a.i[k]);
      out.i[k] = static_cast<int64_t>(std::min(std::max(v, lo), hi));
    }
    c.out[0] = std::move(out);
  }
}

void k_isnan(KernelContext& c) {
  const Tensor& a = c.input(0);
  Tensor out(DataType::kBool, a.shape);
  for (int64_t k = 0; k < a.size(); ++k) out.i[k] = std::isnan(a.f[k]);
  c.out[0] = std::move(out);
}
void k_isinf(KernelContext& c) {
  const Tensor& a = c.input(0);
  const bool pos = c.node.attr_int("detect_positive", 1) != 0,
             neg = c.node.attr_int("detect_negative", 1) != 0;
  Tensor out(DataType::kBool, a.shape);
  for (int64_t k = 0; k < a.size(); ++k)
    out.i[k] = std::isinf(a.f[k]) && ((a.f[k] > 0 && pos) || (a.f[k] < 0 && neg));
  c.out[0] = std::move(out);
}

// ---- variadic --------------------------------------------------------------------------------------

template <class FF, class FI>
void variadic(KernelContext& c, FF ff, FI fi, bool mean) {
  if (c.in.empty() || !c.has(0)) c.fail("needs at least one input");
  Tensor acc = c.input(0);
  for (size_t k = 1; k < c.in.size(); ++k) acc = binary(c, acc, c.input(k), ff, fi);
  if (mean) {
    const float n = static_cast<float>(c.in.size());
    for (auto& v : acc.f) v /= n;
    for (auto& v : acc.i) v /= static_cast<int64_t>(c.in.size());
  }
  c.out[0] = std::move(acc);
}
void k_sum(KernelContext& c) {
  variadic(
      c, [](float x, float y) { return x + y; }, [](int64_t x, int64_t y) { return x + y; }, false);
}
void k_mean(KernelContext& c) {
  variadic(
      c, [](float x, float y) { return x + y; }, [](int64_t x, int64_t y) { return x + y; }, true);
}
void k_max(KernelContext& c) {
  variadic(
      c, [](float x, float y) { return std::isnan(x) || x > y ? x : y; },
      [](int64_t x, int64_t y) { return std::max(x, y); }, false);
}
void k_min(KernelContext& c) {
  variadic(
      c, [](float x, float y) { return std::isnan(x) || x < y ? x : y; },
      [](int64_t x, int64_t y) { return std::min(x, y); }, false);
}

void k_where(KernelContext& c) {
  const Tensor& cond = c.input(0);
  const Tensor& x = c.input(1);
  const Tensor& y = c.input(2);
  if (x.dtype != y.dtype) c.fail("X and Y types differ");
  Shape os = broadcast_shapes(c, broadcast_shapes(c, cond.shape, x.shape), y.shape);
  Tensor out(x.dtype, os);
  std::array<const Shape*, 3> sh{&cond.shape, &x.shape, &y.shape};
  if (x.floating())
    broadcast_loop<3>(os, sh, [&](int64_t o, const std::array<int64_t, 3>& p) {
      out.f[o] = cond.i[p[0]] ? x.f[p[1]] : y.f[p[2]];
    });
  else
    broadcast_loop<3>(os, sh, [&](int64_t o, const std::array<int64_t, 3>& p) {
      out.i[o] = cond.i[p[0]] ? x.i[p[1]] : y.i[p[2]];
    });
  c.out[0] = std::move(out);
}

// ---- casts -------------------------------------------------------------------------------------------

Tensor cast_to(KernelContext& c, const Tensor& a, DataType to) {
  if (!interpretable(to))
    c.fail("cannot cast to " + std::string(to_string(to)) + " (not computed by the interpreter)");
  Tensor out(to, a.shape);
  const int64_t n = a.size();
  if (is_float(to)) {
    for (int64_t k = 0; k < n; ++k) out.f[k] = a.floating() ? a.f[k] : static_cast<float>(a.i[k]);
  } else if (a.floating()) {
    for (int64_t k = 0; k < n; ++k) {
      float v = a.f[k];
      if (to == DataType::kBool)
        out.i[k] = v != 0.0f;
      else if (std::isnan(v) || std::isinf(v))
        out.i[k] = to == DataType::kInt64 ? std::numeric_limits<int64_t>::min() : 0;
      else
        out.i[k] = wrap_integer(to, static_cast<int64_t>(v));
    }
  } else {
    for (int64_t k = 0; k < n; ++k) out.i[k] = wrap_integer(to, a.i[k]);
  }
  return out;
}
void k_cast(KernelContext& c) {
  c.out[0] = cast_to(c, c.input(0), static_cast<DataType>(c.node.attr_int("to", 1)));
}
void k_cast_like(KernelContext& c) { c.out[0] = cast_to(c, c.input(0), c.input(1).dtype); }

// ---- quantisation ------------------------------------------------------------------------------------

// Index along `axis` of flat element k, for per-axis scale/zero point.
struct AxisIndexer {
  int64_t inner = 1, dim = 1;
  int64_t operator()(int64_t k) const { return (k / inner) % dim; }
};
AxisIndexer axis_indexer(const KernelContext& c, const Tensor& x, const Tensor& scale) {
  AxisIndexer ix;
  if (scale.size() <= 1) return ix;
  int64_t axis = norm_axis(c, c.node.attr_int("axis", 1), x.rank());
  ix.dim = x.shape[axis];
  for (int64_t d = axis + 1; d < x.rank(); ++d) ix.inner *= x.shape[d];
  if (scale.size() != ix.dim)
    c.fail("per-axis scale has " + std::to_string(scale.size()) + " values for axis size " +
           std::to_string(ix.dim));
  return ix;
}
void k_quantize_linear(KernelContext& c) {
  const Tensor& x = c.input(0);
  const Tensor& scale = c.input(1);
  const DataType to = c.has(2) ? c.input(2).dtype : DataType::kUInt8;
  AxisIndexer ix = axis_indexer(c, x, scale);
  int64_t lo, hi;
  integer_range(to, lo, hi);
  Tensor out(to, x.shape);
  for (int64_t k = 0; k < scale.size(); ++k)
    if (!(std::isfinite(scale.as_double(k)) && scale.as_double(k) > 0))
      c.fail("y_scale must be positive and finite");
  for (int64_t k = 0; k < x.size(); ++k) {
    int64_t a = ix(k);
    double zp = c.has(2) ? c.input(2).as_double(c.input(2).size() > 1 ? a : 0) : 0.0;
    double v = std::nearbyint(x.as_double(k) / scale.as_double(scale.size() > 1 ? a : 0)) + zp;
    if (std::isnan(v)) v = zp;  // NaN input: ONNX leaves it undefined; saturate-free and defined here
    out.i[k] = static_cast<int64_t>(std::min<double>(std::max<double>(v, lo), hi));
  }
  c.out[0] = std::move(out);
}
// y_scale = (max(x, 0) - min(x, 0)) / 255, y_zero_point = saturate(round(-min / y_scale)), y =
// saturate(round(x / y_scale) + y_zero_point), uint8; scale and zero point computed in float32 as the
// ONNX definition (and its expanded function body) does.
void k_dynamic_quantize_linear(KernelContext& c) {
  const Tensor& x = c.finput(0);
  float lo = 0.0f, hi = 0.0f;
  for (float v : x.f) {
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  const float scale = (hi - lo) / 255.0f;
  if (!std::isfinite(scale)) c.fail("the input has infinite or NaN values");
  const float zp = scale > 0.0f ? std::clamp(std::nearbyint((0.0f - lo) / scale), 0.0f, 255.0f) : 0.0f;
  Tensor y(DataType::kUInt8, x.shape);
  for (int64_t k = 0; k < x.size(); ++k) {
    float q = scale > 0.0f ? std::nearbyint(x.f[k] / scale) + zp : zp;
    if (std::isnan(q)) q = zp;
    y.i[k] = static_cast<int64_t>(std::clamp(q, 0.0f, 255.0f));
  }
  c.out[0] = std::move(y);
  if (c.wants(1)) c.out[1] = Tensor::scalar_float(scale);
  if (c.wants(2)) c.out[2] = Tensor::scalar_int(DataType::kUInt8, static_cast<int64_t>(zp));
}
void k_dequantize_linear(KernelContext& c) {
  const Tensor& x = c.input(0);
  const Tensor& scale = c.input(1);
  AxisIndexer ix = axis_indexer(c, x, scale);
  Tensor out(DataType::kFloat32, x.shape);
  for (int64_t k = 0; k < x.size(); ++k) {
    int64_t a = ix(k);
    double zp = c.has(2) ? c.input(2).as_double(c.input(2).size() > 1 ? a : 0) : 0.0;
    out.f[k] = static_cast<float>((x.as_double(k) - zp) * scale.as_double(scale.size() > 1 ? a : 0));
  }
  c.out[0] = std::move(out);
}

}  // namespace

void register_elementwise(KernelTable& t) {
  t["Add"] = k_add;
  t["Sub"] = k_sub;
  t["Mul"] = k_mul;
  t["Div"] = k_div;
  t["Mod"] = k_mod;
  t["Pow"] = k_pow;
  t["BitShift"] = k_bitshift;
  t["PRelu"] = k_prelu;
  t["Equal"] = k_equal;
  t["Less"] = k_less;
  t["LessOrEqual"] = k_less_eq;
  t["Greater"] = k_greater;
  t["GreaterOrEqual"] = k_greater_eq;
  t["And"] = k_and;
  t["Or"] = k_or;
  t["Xor"] = k_xor;
  t["Not"] = k_not;
  t["Sqrt"] = k_sqrt;
  t["Reciprocal"] = k_reciprocal;
  t["Exp"] = k_exp;
  t["Log"] = k_log;
  t["Floor"] = k_floor;
  t["Ceil"] = k_ceil;
  t["Round"] = k_round;
  t["Erf"] = k_erf;
  t["Sigmoid"] = k_sigmoid;
  t["Tanh"] = k_tanh;
  t["Softsign"] = k_softsign;
  t["Softplus"] = k_softplus;
  t["Sin"] = k_sin;
  t["Cos"] = k_cos;
  t["Tan"] = k_tan;
  t["Asin"] = k_asin;
  t["Acos"] = k_acos;
  t["Atan"] = k_atan;
  t["Sinh"] = k_sinh;
  t["Cosh"] = k_cosh;
  t["Asinh"] = k_asinh;
  t["Acosh"] = k_acosh;
  t["Atanh"] = k_atanh;
  t["HardSwish"] = k_hardswish;
  t["Neg"] = k_neg;
  t["Abs"] = k_abs;
  t["Sign"] = k_sign;
  t["Relu"] = k_relu;
  t["LeakyRelu"] = k_leaky_relu;
  t["Elu"] = k_elu;
  t["Celu"] = k_celu;
  t["Selu"] = k_selu;
  t["ThresholdedRelu"] = k_thresholded_relu;
  t["HardSigmoid"] = k_hard_sigmoid;
  t["Shrink"] = k_shrink;
  t["Clip"] = k_clip;
  t["IsNaN"] = k_isnan;
  t["IsInf"] = k_isinf;
  t["Sum"] = k_sum;
  t["Mean"] = k_mean;
  t["Max"] = k_max;
  t["Min"] = k_min;
  t["Where"] = k_where;
  t["Cast"] = k_cast;
  t["CastLike"] = k_cast_like;
  t["QuantizeLinear"] = k_quantize_linear;
  t["DynamicQuantizeLinear"] = k_dynamic_quantize_linear;
  t["DequantizeLinear"] = k_dequantize_linear;
}

}  // namespace npusim::compiler::interp
