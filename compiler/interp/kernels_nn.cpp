// Neural-network kernels: GEMM-shaped ops, convolution, pooling, normalisation, softmax, resize.
// The hot loops (gemm, im2col) run over contiguous memory in the innermost loop; this file is built
// with -O3 so they vectorise.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "compiler/interp/kernels.h"
#include "isa/ceil_div.h"

namespace npusim::compiler::interp {

void gemm(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
          int64_t ldc, bool accumulate) {
  if (!accumulate)
    for (int64_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, 0.0f);
  constexpr int64_t kBn = 512, kBk = 128;
  for (int64_t j0 = 0; j0 < n; j0 += kBn) {
    const int64_t j1 = std::min(n, j0 + kBn);
    for (int64_t p0 = 0; p0 < k; p0 += kBk) {
      const int64_t p1 = std::min(k, p0 + kBk);
      for (int64_t i = 0; i < m; ++i) {
        float* __restrict crow = c + i * ldc;
        const float* arow = a + i * lda;
        int64_t p = p0;
        for (; p + 4 <= p1; p += 4) {
          const float a0 = arow[p], a1 = arow[p + 1], a2 = arow[p + 2], a3 = arow[p + 3];
          const float* __restrict b0 = b + p * ldb;
          const float* __restrict b1 = b0 + ldb;
          const float* __restrict b2 = b1 + ldb;
          const float* __restrict b3 = b2 + ldb;
          for (int64_t j = j0; j < j1; ++j) crow[j] += a0 * b0[j] + a1 * b1[j] + a2 * b2[j] + a3 * b3[j];
        }
        for (; p < p1; ++p) {
          const float av = arow[p];
          const float* __restrict brow = b + p * ldb;
          for (int64_t j = j0; j < j1; ++j) crow[j] += av * brow[j];
        }
      }
    }
  }
}

namespace {

// ---- Gemm / MatMul -----------------------------------------------------------------------------------

void k_gemm(KernelContext& c) {
  const Tensor& a = c.finput(0);
  const Tensor& b = c.finput(1);
  if (a.rank() != 2 || b.rank() != 2) c.fail("A and B must be 2-D");
  const bool ta = c.node.attr_int("transA", 0) != 0, tb = c.node.attr_int("transB", 0) != 0;
  const float alpha = c.node.attr_float("alpha", 1.0f), beta = c.node.attr_float("beta", 1.0f);
  const int64_t m = ta ? a.shape[1] : a.shape[0], k = ta ? a.shape[0] : a.shape[1];
  const int64_t kb = tb ? b.shape[1] : b.shape[0], n = tb ? b.shape[0] : b.shape[1];
  if (k != kb)
    c.fail("inner dimensions differ: " + shape_to_string(a.shape) + " and " + shape_to_string(b.shape));
  // Materialise the transposes once; then one blocked GEMM.
  std::vector<float> at, bt;
  const float* pa = a.f.data();
  const float* pb = b.f.data();
  if (ta) {
    at.resize(m * k);
    for (int64_t i = 0; i < k; ++i)
      for (int64_t j = 0; j < m; ++j) at[j * k + i] = a.f[i * m + j];
    pa = at.data();
  }
  if (tb) {
    bt.resize(k * n);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < k; ++j) bt[j * n + i] = b.f[i * k + j];
    pb = bt.data();
  }
  Tensor y(DataType::kFloat32, {m, n});
  gemm(m, n, k, pa, k, pb, n, y.f.data(), n, false);
  if (alpha != 1.0f)
    for (auto& v : y.f) v *= alpha;
  if (c.has(2) && beta != 0.0f) {
    const Tensor& cc = c.finput(2);
    Shape bs = broadcast_shapes(c, cc.shape, y.shape);
    if (bs != y.shape) c.fail("C of shape " + shape_to_string(cc.shape) + " does not broadcast to [M, N]");
    std::array<const Shape*, 1> sh{&cc.shape};
    broadcast_loop<1>(y.shape, sh,
                      [&](int64_t o, const std::array<int64_t, 1>& p) { y.f[o] += beta * cc.f[p[0]]; });
  }
  c.out[0] = std::move(y);
}

// Batched matmul with numpy semantics. A and B as doubles accessor lambdas to share with MatMulInteger.
struct BatchPlan {
  Shape out_shape;
  int64_t m, n, k, batch;
  std::vector<int64_t> a_off, b_off;  // per batch, element offset of the matrix
};

BatchPlan plan_matmul(KernelContext& c, Shape as, Shape bs) {
  BatchPlan p;
  const bool a1 = as.size() == 1, b1 = bs.size() == 1;
  if (as.empty() || bs.empty()) c.fail("MatMul operands must have rank >= 1");
  if (a1) as.insert(as.begin(), 1);
  if (b1) bs.push_back(1);
  p.m = as[as.size() - 2];
  p.k = as.back();
  p.n = bs.back();
  if (bs[bs.size() - 2] != p.k)
    c.fail("inner dimensions differ: " + shape_to_string(as) + " and " + shape_to_string(bs));
  Shape ab(as.begin(), as.end() - 2), bb(bs.begin(), bs.end() - 2);
  Shape batch = broadcast_shapes(c, ab, bb);
  p.batch = num_elements(batch);
  Shape idx_a = ab, idx_b = bb;
  p.a_off.resize(p.batch);
  p.b_off.resize(p.batch);
  std::array<const Shape*, 2> sh{&ab, &bb};
  broadcast_loop<2>(batch, sh, [&](int64_t o, const std::array<int64_t, 2>& q) {
    p.a_off[o] = q[0] * p.m * p.k;
    p.b_off[o] = q[1] * p.k * p.n;
  });
  if (p.batch == 1 && batch.empty()) {
    p.a_off.assign(1, 0);
    p.b_off.assign(1, 0);
  }
  p.out_shape = batch;
  if (!a1) p.out_shape.push_back(p.m);
  if (!b1) p.out_shape.push_back(p.n);
  return p;
}

void k_matmul(KernelContext& c) {
  const Tensor& a = c.input(0);
  const Tensor& b = c.input(1);
  BatchPlan p = plan_matmul(c, a.shape, b.shape);
  if (a.floating()) {
    Tensor y(DataType::kFloat32, p.out_shape);
    for (int64_t t = 0; t < p.batch; ++t)
      gemm(p.m, p.n, p.k, a.f.data() + p.a_off[t], p.k, b.f.data() + p.b_off[t], p.n,
           y.f.data() + t * p.m * p.n, p.n, false);
    c.out[0] = std::move(y);
  } else {
    Tensor y(a.dtype, p.out_shape);
    for (int64_t t = 0; t < p.batch; ++t)
      for (int64_t i = 0; i < p.m; ++i)
        for (int64_t q = 0; q < p.k; ++q) {
          const int64_t av = a.i[p.a_off[t] + i * p.k + q];
          for (int64_t j = 0; j < p.n; ++j)
            y.i[t * p.m * p.n + i * p.n + j] += av * b.i[p.b_off[t] + q * p.n + j];
        }
    for (auto& v : y.i) v = wrap_integer(a.dtype, v);
    c.out[0] = std::move(y);
  }
}

void k_matmul_integer(KernelContext& c) {
  const Tensor& a = c.input(0);
  const Tensor& b = c.input(1);
  BatchPlan p = plan_matmul(c, a.shape, b.shape);
  // Zero points: scalar, or per row of A ([M]) / per column of B ([N]).
  auto zp = [&](size_t k, int64_t idx) -> int64_t {
    if (!c.has(k)) return 0;
    const Tensor& z = c.input(k);
    if (z.size() == 1) return z.as_int(0);
    if (idx >= z.size()) c.fail("zero point has too few values");
    return z.as_int(idx);
  };
  Tensor y(DataType::kInt32, p.out_shape);
  for (int64_t t = 0; t < p.batch; ++t)
    for (int64_t i = 0; i < p.m; ++i)
      for (int64_t q = 0; q < p.k; ++q) {
        const int64_t av = a.i[p.a_off[t] + i * p.k + q] - zp(2, i);
        for (int64_t j = 0; j < p.n; ++j)
          y.i[t * p.m * p.n + i * p.n + j] += av * (b.i[p.b_off[t] + q * p.n + j] - zp(3, j));
      }
  for (auto& v : y.i) v = wrap_integer(DataType::kInt32, v);
  c.out[0] = std::move(y);
}

// Requantizes int accumulators as ONNX's QLinear ops define it: y = saturate(round_half_even(acc *
// (a_scale * b_scale / y_scale)) + y_zero_point), in double precision; `scale_at(k)` is the combined
// input scale of accumulator k (per row / column / channel when the model has per-axis scales).
template <class ScaleAt>
Tensor requantize_linear(KernelContext& c, const std::vector<int64_t>& acc, const Shape& shape,
                         ScaleAt scale_at, size_t y_scale, size_t y_zp) {
  const DataType to = c.has(y_zp) ? c.input(y_zp).dtype : DataType::kUInt8;
  const double ys = c.scalar(y_scale);
  const double zp = c.has(y_zp) ? static_cast<double>(c.iscalar(y_zp)) : 0.0;
  if (!(ys > 0)) c.fail("y_scale must be positive");
  int64_t lo, hi;
  integer_range(to, lo, hi);
  Tensor y(to, shape);
  for (size_t k = 0; k < acc.size(); ++k) {
    const double v =
        std::nearbyint(static_cast<double>(acc[k]) * (scale_at(static_cast<int64_t>(k)) / ys)) + zp;
    if (!std::isfinite(v)) c.fail("the scales must be positive and finite");
    y.i[k] = static_cast<int64_t>(std::clamp<double>(v, static_cast<double>(lo), static_cast<double>(hi)));
  }
  return y;
}

// A per-tensor (one value) or per-index (`count` values) scale or zero point of input k.
double param_at(KernelContext& c, size_t k, int64_t idx, double absent) {
  if (!c.has(k)) return absent;
  const Tensor& t = c.input(k);
  if (t.size() == 1) return t.as_double(0);
  if (idx >= t.size()) c.fail("a scale or zero point has too few values");
  return t.as_double(idx);
}

void k_qlinear_matmul(KernelContext& c) {
  const Tensor& a = c.input(0);
  const Tensor& b = c.input(3);
  BatchPlan p = plan_matmul(c, a.shape, b.shape);
  // Scales and zero points: per tensor, or per row of A ([M]) / per column of B ([N]).
  std::vector<int64_t> acc(static_cast<size_t>(p.batch * p.m * p.n), 0);
  for (int64_t t = 0; t < p.batch; ++t)
    for (int64_t i = 0; i < p.m; ++i)
      for (int64_t q = 0; q < p.k; ++q) {
        const int64_t av = a.i[p.a_off[t] + i * p.k + q] - static_cast<int64_t>(param_at(c, 2, i, 0));
        for (int64_t j = 0; j < p.n; ++j)
          acc[t * p.m * p.n + i * p.n + j] +=
              av * (b.i[p.b_off[t] + q * p.n + j] - static_cast<int64_t>(param_at(c, 5, j, 0)));
      }
  c.out[0] = requantize_linear(
      c, acc, p.out_shape,
      [&](int64_t k) {
        const int64_t j = k % p.n, i = (k / p.n) % p.m;
        return param_at(c, 1, i, 1) * param_at(c, 4, j, 1);
      },
      6, 7);
}

// ---- convolution and pooling geometry --------------------------------------------------------------

// Spatial geometry of a conv/pool, padded to 3 spatial dims (leading dims of size 1) so one set of
// loops serves 1-D, 2-D and 3-D.
struct Geometry {
  int nd = 0;  // real number of spatial dims
  std::array<int64_t, 3> in{1, 1, 1}, out{1, 1, 1}, k{1, 1, 1}, s{1, 1, 1}, d{1, 1, 1}, pb{0, 0, 0},
      pe{0, 0, 0};
};

// Fills pads from auto_pad/pads and computes the output size. `ceil_mode` only for pooling.
Geometry conv_geometry(KernelContext& c, const Shape& x, const std::vector<int64_t>& kernel, bool ceil_mode) {
  Geometry g;
  g.nd = static_cast<int>(x.size()) - 2;
  if (g.nd < 1 || g.nd > 3) c.fail("supports 1 to 3 spatial dimensions, input is " + shape_to_string(x));
  if (static_cast<int>(kernel.size()) != g.nd) c.fail("kernel rank does not match the input");
  auto strides = c.node.attr_ints("strides", std::vector<int64_t>(g.nd, 1));
  auto dil = c.node.attr_ints("dilations", std::vector<int64_t>(g.nd, 1));
  auto pads = c.node.attr_ints("pads", std::vector<int64_t>(2 * g.nd, 0));
  if (static_cast<int>(strides.size()) != g.nd || static_cast<int>(dil.size()) != g.nd ||
      static_cast<int>(pads.size()) != 2 * g.nd)
    c.fail("strides/dilations/pads do not match the spatial rank");
  const std::string auto_pad = c.node.attr_string("auto_pad", "NOTSET");
  const int off = 3 - g.nd;
  for (int i = 0; i < g.nd; ++i) {
    const int j = off + i;
    g.in[j] = x[2 + i];
    g.k[j] = kernel[i];
    g.s[j] = strides[i];
    g.d[j] = dil[i];
    if (g.s[j] <= 0 || g.d[j] <= 0 || g.k[j] <= 0) c.fail("strides, dilations and kernel must be positive");
    const int64_t ek = (g.k[j] - 1) * g.d[j] + 1;
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      g.out[j] = ceil_div(g.in[j], g.s[j]);
      const int64_t total = std::max<int64_t>(0, (g.out[j] - 1) * g.s[j] + ek - g.in[j]);
      g.pb[j] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      g.pe[j] = total - g.pb[j];
      continue;
    }
    if (auto_pad == "VALID") {
      g.pb[j] = g.pe[j] = 0;
    } else if (auto_pad == "NOTSET") {
      g.pb[j] = pads[i];
      g.pe[j] = pads[g.nd + i];
    } else {
      c.fail("unknown auto_pad '" + auto_pad + "'");
    }
    const int64_t span = g.in[j] + g.pb[j] + g.pe[j] - ek;
    if (span < 0) c.fail("the kernel is larger than the padded input");
    if (ceil_mode) {
      g.out[j] = ceil_div(span, g.s[j]) + 1;
      if ((g.out[j] - 1) * g.s[j] >= g.in[j] + g.pb[j]) --g.out[j];  // last window must start inside
    } else {
      g.out[j] = span / g.s[j] + 1;
    }
  }
  return g;
}

Shape out_shape(const Shape& x, int64_t channels, const Geometry& g) {
  Shape s{x[0], channels};
  for (int i = 0; i < g.nd; ++i) s.push_back(g.out[3 - g.nd + i]);
  return s;
}

// im2col for one image and one group: col[(c*K0*K1*K2 + kpos) x (O0*O1*O2)].
void im2col(const float* x, int64_t channels, const Geometry& g, float* col) {
  const int64_t opix = g.out[0] * g.out[1] * g.out[2];
  const int64_t ipix = g.in[0] * g.in[1] * g.in[2];
  int64_t row = 0;
  for (int64_t ch = 0; ch < channels; ++ch) {
    const float* xc = x + ch * ipix;
    for (int64_t k0 = 0; k0 < g.k[0]; ++k0)
      for (int64_t k1 = 0; k1 < g.k[1]; ++k1)
        for (int64_t k2 = 0; k2 < g.k[2]; ++k2, ++row) {
          float* dst = col + row * opix;
          for (int64_t o0 = 0; o0 < g.out[0]; ++o0) {
            const int64_t i0 = o0 * g.s[0] - g.pb[0] + k0 * g.d[0];
            for (int64_t o1 = 0; o1 < g.out[1]; ++o1) {
              float* drow = dst + (o0 * g.out[1] + o1) * g.out[2];
              const int64_t i1 = o1 * g.s[1] - g.pb[1] + k1 * g.d[1];
              if (i0 < 0 || i0 >= g.in[0] || i1 < 0 || i1 >= g.in[1]) {
                std::fill(drow, drow + g.out[2], 0.0f);
                continue;
              }
              const float* srow = xc + (i0 * g.in[1] + i1) * g.in[2];
              const int64_t base = k2 * g.d[2] - g.pb[2];
              if (g.s[2] == 1) {
                // Valid output range where 0 <= o2 + base < in2.
                const int64_t lo = std::clamp<int64_t>(-base, 0, g.out[2]);
                const int64_t hi = std::clamp<int64_t>(g.in[2] - base, lo, g.out[2]);
                std::fill(drow, drow + lo, 0.0f);
                std::copy(srow + lo + base, srow + hi + base, drow + lo);
                std::fill(drow + hi, drow + g.out[2], 0.0f);
              } else {
                for (int64_t o2 = 0; o2 < g.out[2]; ++o2) {
                  const int64_t i2 = o2 * g.s[2] + base;
                  drow[o2] = (i2 >= 0 && i2 < g.in[2]) ? srow[i2] : 0.0f;
                }
              }
            }
          }
        }
  }
}

std::vector<int64_t> kernel_shape_from(KernelContext& c, const Tensor& w) {
  auto ks = c.node.attr_ints("kernel_shape", {});
  if (ks.empty()) ks.assign(w.shape.begin() + 2, w.shape.end());
  return ks;
}

void k_conv(KernelContext& c) {
  const Tensor& x = c.finput(0);
  const Tensor& w = c.finput(1);
  if (x.rank() < 3 || w.rank() != x.rank()) c.fail("X and W must have the same rank >= 3");
  const int64_t group = c.node.attr_int("group", 1);
  const int64_t n = x.shape[0], cin = x.shape[1], cout = w.shape[0];
  if (group <= 0 || cin % group != 0 || cout % group != 0 || w.shape[1] * group != cin)
    c.fail("channels (" + std::to_string(cin) + " in, " + std::to_string(cout) + " out, W " +
           shape_to_string(w.shape) + ") do not match group=" + std::to_string(group));
  Geometry g = conv_geometry(c, x.shape, kernel_shape_from(c, w), false);
  Tensor y(DataType::kFloat32, out_shape(x.shape, cout, g));
  const int64_t cg = cin / group, kg = cout / group;
  const int64_t kvol = g.k[0] * g.k[1] * g.k[2];
  const int64_t opix = g.out[0] * g.out[1] * g.out[2], ipix = g.in[0] * g.in[1] * g.in[2];
  const int64_t rows = cg * kvol;
  const bool direct = kvol == 1 && g.s == std::array<int64_t, 3>{1, 1, 1} &&
                      g.pb == std::array<int64_t, 3>{0, 0, 0} && g.pe == std::array<int64_t, 3>{0, 0, 0};
  std::vector<float> col(direct ? 0 : static_cast<size_t>(rows * opix));
  for (int64_t b = 0; b < n; ++b)
    for (int64_t gr = 0; gr < group; ++gr) {
      const float* xin = x.f.data() + (b * cin + gr * cg) * ipix;
      const float* src = xin;
      if (!direct) {
        im2col(xin, cg, g, col.data());
        src = col.data();
      }
      float* yout = y.f.data() + (b * cout + gr * kg) * opix;
      gemm(kg, opix, rows, w.f.data() + gr * kg * rows, rows, src, opix, yout, opix, false);
    }
  if (c.has(2)) {
    const Tensor& bias = c.finput(2);
    if (bias.size() != cout)
      c.fail("bias has " + std::to_string(bias.size()) + " values for " + std::to_string(cout) + " channels");
    for (int64_t b = 0; b < n; ++b)
      for (int64_t ch = 0; ch < cout; ++ch) {
        float* p = y.f.data() + (b * cout + ch) * opix;
        const float bv = bias.f[ch];
        for (int64_t q = 0; q < opix; ++q) p[q] += bv;
      }
  }
  c.out[0] = std::move(y);
}

// Integer convolution of ConvInteger / QLinearConv: acc = sum (x - x_zp) * (w - w_zp[m]) in int64 (the
// input's zero point pads, so padding adds nothing), with x at input `xi` and w at input `wi`.
std::vector<int64_t> conv_integer(KernelContext& c, size_t xi, size_t xzp, size_t wi, size_t wzp,
                                  Shape& shape) {
  const Tensor& x = c.input(xi);
  const Tensor& w = c.input(wi);
  if (x.floating() || w.floating()) c.fail("x and w must be integer tensors");
  if (x.rank() < 3 || w.rank() != x.rank()) c.fail("x and w must have the same rank >= 3");
  const int64_t group = c.node.attr_int("group", 1);
  const int64_t n = x.shape[0], cin = x.shape[1], cout = w.shape[0];
  if (group <= 0 || cin % group != 0 || cout % group != 0 || w.shape[1] * group != cin)
    c.fail("channels (" + std::to_string(cin) + " in, " + std::to_string(cout) + " out, W " +
           shape_to_string(w.shape) + ") do not match group=" + std::to_string(group));
  const Geometry g = conv_geometry(c, x.shape, kernel_shape_from(c, w), false);
  shape = out_shape(x.shape, cout, g);
  const int64_t cg = cin / group, kg = cout / group;
  const int64_t x_zp = static_cast<int64_t>(param_at(c, xzp, 0, 0));
  std::vector<int64_t> acc(static_cast<size_t>(num_elements(shape)), 0);
  int64_t o = 0;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t m = 0; m < cout; ++m) {
      const int64_t w_zp = static_cast<int64_t>(param_at(c, wzp, m, 0));
      const int64_t gr = m / kg;
      for (int64_t o0 = 0; o0 < g.out[0]; ++o0)
        for (int64_t o1 = 0; o1 < g.out[1]; ++o1)
          for (int64_t o2 = 0; o2 < g.out[2]; ++o2, ++o) {
            int64_t sum = 0;
            for (int64_t ch = 0; ch < cg; ++ch) {
              const int64_t* xc = x.i.data() + ((b * cin + gr * cg + ch) * g.in[0]) * g.in[1] * g.in[2];
              const int64_t* wc = w.i.data() + ((m * cg + ch) * g.k[0]) * g.k[1] * g.k[2];
              for (int64_t k0 = 0; k0 < g.k[0]; ++k0) {
                const int64_t i0 = o0 * g.s[0] - g.pb[0] + k0 * g.d[0];
                if (i0 < 0 || i0 >= g.in[0]) continue;
                for (int64_t k1 = 0; k1 < g.k[1]; ++k1) {
                  const int64_t i1 = o1 * g.s[1] - g.pb[1] + k1 * g.d[1];
                  if (i1 < 0 || i1 >= g.in[1]) continue;
                  for (int64_t k2 = 0; k2 < g.k[2]; ++k2) {
                    const int64_t i2 = o2 * g.s[2] - g.pb[2] + k2 * g.d[2];
                    if (i2 < 0 || i2 >= g.in[2]) continue;
                    sum += (xc[(i0 * g.in[1] + i1) * g.in[2] + i2] - x_zp) *
                           (wc[(k0 * g.k[1] + k1) * g.k[2] + k2] - w_zp);
                  }
                }
              }
            }
            acc[static_cast<size_t>(o)] = sum;
          }
    }
  return acc;
}

void k_conv_integer(KernelContext& c) {
  Shape shape;
  const std::vector<int64_t> acc = conv_integer(c, 0, 2, 1, 3, shape);
  Tensor y(DataType::kInt32, shape);
  for (size_t k = 0; k < acc.size(); ++k) y.i[k] = wrap_integer(DataType::kInt32, acc[k]);
  c.out[0] = std::move(y);
}

void k_qlinear_conv(KernelContext& c) {
  Shape shape;
  std::vector<int64_t> acc = conv_integer(c, 0, 2, 3, 5, shape);
  const int64_t cout = shape[1];
  int64_t opix = 1;
  for (size_t d = 2; d < shape.size(); ++d) opix *= shape[d];
  if (c.has(8)) {  // int32 bias, scale x_scale * w_scale[m]
    const Tensor& bias = c.input(8);
    if (bias.size() != cout)
      c.fail("bias has " + std::to_string(bias.size()) + " values for " + std::to_string(cout) + " channels");
    for (size_t k = 0; k < acc.size(); ++k) acc[k] += bias.as_int((static_cast<int64_t>(k) / opix) % cout);
  }
  c.out[0] = requantize_linear(
      c, acc, shape, [&](int64_t k) { return param_at(c, 1, 0, 1) * param_at(c, 4, (k / opix) % cout, 1); },
      6, 7);
}

void k_conv_transpose(KernelContext& c) {
  const Tensor& x = c.finput(0);
  const Tensor& w = c.finput(1);
  if (x.rank() < 3 || w.rank() != x.rank()) c.fail("X and W must have the same rank >= 3");
  const int nd = static_cast<int>(x.rank()) - 2;
  if (nd > 3) c.fail("supports 1 to 3 spatial dimensions");
  const int64_t group = c.node.attr_int("group", 1);
  const int64_t n = x.shape[0], cin = x.shape[1];
  if (group <= 0 || cin % group != 0 || w.shape[0] != cin)
    c.fail("W does not match the input channels and group");
  const int64_t cg_out = w.shape[1], cout = cg_out * group, cg_in = cin / group;
  auto ks = kernel_shape_from(c, w);
  auto strides = c.node.attr_ints("strides", std::vector<int64_t>(nd, 1));
  auto dil = c.node.attr_ints("dilations", std::vector<int64_t>(nd, 1));
  auto opad = c.node.attr_ints("output_padding", std::vector<int64_t>(nd, 0));
  auto pads = c.node.attr_ints("pads", std::vector<int64_t>(2 * nd, 0));
  auto oshape = c.node.attr_ints("output_shape", {});
  const std::string auto_pad = c.node.attr_string("auto_pad", "NOTSET");
  if (static_cast<int>(ks.size()) != nd || static_cast<int>(strides.size()) != nd ||
      static_cast<int>(dil.size()) != nd || static_cast<int>(opad.size()) != nd ||
      static_cast<int>(pads.size()) != 2 * nd)
    c.fail("attribute ranks do not match the spatial rank");
  if (!oshape.empty() && static_cast<int>(oshape.size()) > nd)
    oshape.erase(oshape.begin(), oshape.end() - nd);
  Geometry g;  // here `in` is the conv-transpose input (the small side), `out` its output
  g.nd = nd;
  const int off = 3 - nd;
  for (int i = 0; i < nd; ++i) {
    const int j = off + i;
    g.in[j] = x.shape[2 + i];
    g.k[j] = ks[i];
    g.s[j] = strides[i];
    g.d[j] = dil[i];
    const int64_t full = g.s[j] * (g.in[j] - 1) + opad[i] + (g.k[j] - 1) * g.d[j] + 1;
    if (!oshape.empty() || auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      const int64_t target = !oshape.empty() ? oshape[i] : g.in[j] * g.s[j];
      const int64_t total = full - target;
      // Floor division as ONNX's reference: a negative total (output_shape beyond the natural size)
      // extends the far end.
      const int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);
      if (auto_pad == "SAME_UPPER") {
        g.pb[j] = half;
        g.pe[j] = total - half;
      } else {
        g.pb[j] = total - half;
        g.pe[j] = half;
      }
      g.out[j] = target;
    } else {
      if (auto_pad == "NOTSET") {
        g.pb[j] = pads[i];
        g.pe[j] = pads[nd + i];
      }
      g.out[j] = full - g.pb[j] - g.pe[j];
    }
    if (g.out[j] <= 0) c.fail("output size is not positive");
  }
  Shape ysh{n, cout};
  for (int i = 0; i < nd; ++i) ysh.push_back(g.out[off + i]);
  Tensor y(DataType::kFloat32, ysh);
  const int64_t kvol = g.k[0] * g.k[1] * g.k[2];
  const int64_t ipix = g.in[0] * g.in[1] * g.in[2], opix = g.out[0] * g.out[1] * g.out[2];
  const int64_t rows = cg_out * kvol;
  // W is [Cin, Cout/g, k...]; per group the GEMM is col[rows x ipix] = W_g^T[rows x cg_in] * X_g[cg_in x
  // ipix].
  std::vector<float> wt(static_cast<size_t>(rows * cg_in)), col(static_cast<size_t>(rows * ipix));
  for (int64_t gr = 0; gr < group; ++gr) {
    const float* wg = w.f.data() + gr * cg_in * rows;
    for (int64_t ci = 0; ci < cg_in; ++ci)
      for (int64_t r = 0; r < rows; ++r) wt[r * cg_in + ci] = wg[ci * rows + r];
    for (int64_t b = 0; b < n; ++b) {
      gemm(rows, ipix, cg_in, wt.data(), cg_in, x.f.data() + (b * cin + gr * cg_in) * ipix, ipix, col.data(),
           ipix, false);
      // col2im: scatter-add each (channel, kernel position, input pixel) to its output pixel.
      float* yb = y.f.data() + (b * cout + gr * cg_out) * opix;
      int64_t r = 0;
      for (int64_t co = 0; co < cg_out; ++co)
        for (int64_t k0 = 0; k0 < g.k[0]; ++k0)
          for (int64_t k1 = 0; k1 < g.k[1]; ++k1)
            for (int64_t k2 = 0; k2 < g.k[2]; ++k2, ++r) {
              const float* src = col.data() + r * ipix;
              float* yc = yb + co * opix;
              for (int64_t i0 = 0; i0 < g.in[0]; ++i0) {
                const int64_t o0 = i0 * g.s[0] - g.pb[0] + k0 * g.d[0];
                if (o0 < 0 || o0 >= g.out[0]) continue;
                for (int64_t i1 = 0; i1 < g.in[1]; ++i1) {
                  const int64_t o1 = i1 * g.s[1] - g.pb[1] + k1 * g.d[1];
                  if (o1 < 0 || o1 >= g.out[1]) continue;
                  const float* s = src + (i0 * g.in[1] + i1) * g.in[2];
                  float* dst = yc + (o0 * g.out[1] + o1) * g.out[2];
                  for (int64_t i2 = 0; i2 < g.in[2]; ++i2) {
                    const int64_t o2 = i2 * g.s[2] - g.pb[2] + k2 * g.d[2];
                    if (o2 >= 0 && o2 < g.out[2]) dst[o2] += s[i2];
                  }
                }
              }
            }
    }
  }
  if (c.has(2)) {
    const Tensor& bias = c.finput(2);
    if (bias.size() != cout) c.fail("bias size does not match the output channels");
    for (int64_t b = 0; b < n; ++b)
      for (int64_t ch = 0; ch < cout; ++ch)
        for (int64_t q = 0; q < opix; ++q) y.f[(b * cout + ch) * opix + q] += bias.f[ch];
  }
  c.out[0] = std::move(y);
}

void pool(KernelContext& c, bool is_max) {
  const Tensor& x = c.finput(0);
  if (x.rank() < 3) c.fail("input must have rank >= 3");
  auto ks = c.node.attr_ints("kernel_shape", {});
  if (ks.empty()) c.fail("kernel_shape is required");
  const bool ceil_mode = c.node.attr_int("ceil_mode", 0) != 0;
  Geometry g = conv_geometry(c, x.shape, ks, ceil_mode);
  if (!is_max && c.node.has_attr("dilations") && g.d != std::array<int64_t, 3>{1, 1, 1} && c.opset < 19)
    c.fail("AveragePool has no dilations before opset 19");
  const bool count_pad = c.node.attr_int("count_include_pad", 0) != 0;
  const int64_t storage_order = c.node.attr_int("storage_order", 0);
  const int64_t nc = x.shape[0] * x.shape[1];
  Tensor y(DataType::kFloat32, out_shape(x.shape, x.shape[1], g));
  const bool want_idx = is_max && c.wants(1);
  Tensor idx;
  if (want_idx) idx = Tensor(DataType::kInt64, y.shape);
  const int64_t ipix = g.in[0] * g.in[1] * g.in[2], opix = g.out[0] * g.out[1] * g.out[2];
  for (int64_t p = 0; p < nc; ++p) {
    const float* xp = x.f.data() + p * ipix;
    int64_t o = p * opix;
    for (int64_t o0 = 0; o0 < g.out[0]; ++o0)
      for (int64_t o1 = 0; o1 < g.out[1]; ++o1)
        for (int64_t o2 = 0; o2 < g.out[2]; ++o2, ++o) {
          float best = -std::numeric_limits<float>::infinity();
          int64_t best_i = -1;
          double sum = 0;
          int64_t count = 0, pad_count = 0;
          for (int64_t k0 = 0; k0 < g.k[0]; ++k0) {
            const int64_t i0 = o0 * g.s[0] - g.pb[0] + k0 * g.d[0];
            const bool in0 = i0 >= 0 && i0 < g.in[0], pin0 = i0 >= -g.pb[0] && i0 < g.in[0] + g.pe[0];
            for (int64_t k1 = 0; k1 < g.k[1]; ++k1) {
              const int64_t i1 = o1 * g.s[1] - g.pb[1] + k1 * g.d[1];
              const bool in1 = i1 >= 0 && i1 < g.in[1], pin1 = i1 >= -g.pb[1] && i1 < g.in[1] + g.pe[1];
              for (int64_t k2 = 0; k2 < g.k[2]; ++k2) {
                const int64_t i2 = o2 * g.s[2] - g.pb[2] + k2 * g.d[2];
                const bool in2 = i2 >= 0 && i2 < g.in[2], pin2 = i2 >= -g.pb[2] && i2 < g.in[2] + g.pe[2];
                if (pin0 && pin1 && pin2) ++pad_count;
                if (!(in0 && in1 && in2)) continue;
                const int64_t flat = (i0 * g.in[1] + i1) * g.in[2] + i2;
                const float v = xp[flat];
                if (is_max) {
                  if (v > best || best_i < 0) {
                    best = v;
                    best_i = storage_order == 0 ? flat : i0 * g.in[1] * g.in[2] + i2 * g.in[1] + i1;
                  }
                } else {
                  sum += v;
                  ++count;
                }
              }
            }
          }
          if (is_max) {
            y.f[o] = best;
            if (want_idx) idx.i[o] = p * ipix + best_i;
          } else {
            const int64_t div = count_pad ? pad_count : count;
            y.f[o] = div > 0 ? static_cast<float>(sum / div) : 0.0f;
          }
        }
  }
  c.out[0] = std::move(y);
  if (want_idx) c.out[1] = std::move(idx);
}
void k_maxpool(KernelContext& c) {
  const Tensor& x = c.input(0);
  if (x.floating() || x.dtype == DataType::kInt64 || x.dtype == DataType::kInt32 ||
      x.dtype == DataType::kUInt32)
    return pool(c, true);
  // 8/16-bit integers are exact in float: pool in float, convert back.
  Tensor xf(DataType::kFloat32, x.shape);
  for (int64_t k = 0; k < x.size(); ++k) xf.f[k] = static_cast<float>(x.i[k]);
  KernelContext fc{c.node, c.opset, c.in, {}};
  fc.in[0] = &xf;
  fc.out.resize(c.out.size());
  pool(fc, true);
  Tensor y(x.dtype, fc.out[0].shape);
  for (int64_t k = 0; k < y.size(); ++k) y.i[k] = static_cast<int64_t>(fc.out[0].f[k]);
  c.out[0] = std::move(y);
  if (c.out.size() > 1) c.out[1] = std::move(fc.out[1]);
}
void k_avgpool(KernelContext& c) { pool(c, false); }

void global_pool(KernelContext& c, bool is_max) {
  const Tensor& x = c.finput(0);
  if (x.rank() < 3) c.fail("input must have rank >= 3");
  Shape ys{x.shape[0], x.shape[1]};
  int64_t pix = 1;
  for (int64_t d = 2; d < x.rank(); ++d) {
    ys.push_back(1);
    pix *= x.shape[d];
  }
  Tensor y(DataType::kFloat32, ys);
  for (int64_t p = 0; p < x.shape[0] * x.shape[1]; ++p) {
    const float* xp = x.f.data() + p * pix;
    if (is_max) {
      float m = -std::numeric_limits<float>::infinity();
      for (int64_t q = 0; q < pix; ++q) m = std::max(m, xp[q]);
      y.f[p] = m;
    } else {
      double s = 0;
      for (int64_t q = 0; q < pix; ++q) s += xp[q];
      y.f[p] = static_cast<float>(s / pix);
    }
  }
  c.out[0] = std::move(y);
}
void k_global_avg(KernelContext& c) { global_pool(c, false); }
void k_global_max(KernelContext& c) { global_pool(c, true); }

// ---- normalisation -----------------------------------------------------------------------------------

void k_batchnorm(KernelContext& c) {
  const Tensor& x = c.finput(0);
  const Tensor& scale = c.finput(1);
  const Tensor& bias = c.finput(2);
  const Tensor& mean = c.finput(3);
  const Tensor& var = c.finput(4);
  const float eps = c.node.attr_float("epsilon", 1e-5f);
  const float momentum = c.node.attr_float("momentum", 0.9f);
  const bool training = c.opset >= 14 ? c.node.attr_int("training_mode", 0) != 0
                                      : (c.opset < 9 ? false : c.node.outputs.size() > 1 && c.wants(1));
  if (x.rank() < 2) c.fail("input must have rank >= 2");
  const int64_t n = x.shape[0], ch = x.shape[1], pix = x.size() / std::max<int64_t>(1, n * ch);
  std::vector<double> m(ch), v(ch);
  if (training) {
    for (int64_t cc = 0; cc < ch; ++cc) {
      double s = 0, s2 = 0;
      for (int64_t b = 0; b < n; ++b)
        for (int64_t q = 0; q < pix; ++q) {
          double val = x.f[(b * ch + cc) * pix + q];
          s += val;
          s2 += val * val;
        }
      const double cnt = static_cast<double>(n * pix);
      m[cc] = s / cnt;
      v[cc] = s2 / cnt - m[cc] * m[cc];
    }
  } else {
    for (int64_t cc = 0; cc < ch; ++cc) {
      m[cc] = mean.f[cc];
      v[cc] = var.f[cc];
    }
  }
  Tensor y(DataType::kFloat32, x.shape);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t cc = 0; cc < ch; ++cc) {
      const float a = static_cast<float>(scale.f[cc] / std::sqrt(v[cc] + eps));
      const float sh = static_cast<float>(bias.f[cc] - m[cc] * a);
      const float* xp = x.f.data() + (b * ch + cc) * pix;
      float* yp = y.f.data() + (b * ch + cc) * pix;
      for (int64_t q = 0; q < pix; ++q) yp[q] = xp[q] * a + sh;
    }
  c.out[0] = std::move(y);
  if (training) {
    if (c.wants(1)) {
      Tensor rm(DataType::kFloat32, {ch});
      for (int64_t cc = 0; cc < ch; ++cc)
        rm.f[cc] = static_cast<float>(mean.f[cc] * momentum + m[cc] * (1 - momentum));
      c.out[1] = std::move(rm);
    }
    if (c.wants(2)) {
      Tensor rv(DataType::kFloat32, {ch});
      for (int64_t cc = 0; cc < ch; ++cc)
        rv.f[cc] = static_cast<float>(var.f[cc] * momentum + v[cc] * (1 - momentum));
      c.out[2] = std::move(rv);
    }
  }
}

void k_instancenorm(KernelContext& c) {
  const Tensor& x = c.finput(0);
  const Tensor& scale = c.finput(1);
  const Tensor& bias = c.finput(2);
  const float eps = c.node.attr_float("epsilon", 1e-5f);
  const int64_t n = x.shape[0], ch = x.shape[1], pix = x.size() / std::max<int64_t>(1, n * ch);
  Tensor y(DataType::kFloat32, x.shape);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t cc = 0; cc < ch; ++cc) {
      const float* xp = x.f.data() + (b * ch + cc) * pix;
      double s = 0, s2 = 0;
      for (int64_t q = 0; q < pix; ++q) s += xp[q];
      const double m = s / pix;
      for (int64_t q = 0; q < pix; ++q) s2 += (xp[q] - m) * (xp[q] - m);
      const double inv = 1.0 / std::sqrt(s2 / pix + eps);
      float* yp = y.f.data() + (b * ch + cc) * pix;
      for (int64_t q = 0; q < pix; ++q)
        yp[q] = static_cast<float>((xp[q] - m) * inv * scale.f[cc] + bias.f[cc]);
    }
  c.out[0] = std::move(y);
}

void k_layernorm(KernelContext& c) {
  const Tensor& x = c.finput(0);
  const Tensor& scale = c.finput(1);
  const int64_t axis = norm_axis(c, c.node.attr_int("axis", -1), x.rank());
  const float eps = c.node.attr_float("epsilon", 1e-5f);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < x.rank(); ++d) (d < axis ? outer : inner) *= x.shape[d];
  Shape norm_shape(x.shape.begin() + axis, x.shape.end());
  Tensor y(DataType::kFloat32, x.shape);
  Shape stat_shape = x.shape;
  for (int64_t d = axis; d < x.rank(); ++d) stat_shape[d] = 1;
  Tensor mean_t(DataType::kFloat32, stat_shape), inv_t(DataType::kFloat32, stat_shape);
  // Scale and bias broadcast to the normalised shape.
  std::vector<float> sc(inner), bi(inner, 0.0f);
  {
    std::array<const Shape*, 1> sh{&scale.shape};
    broadcast_loop<1>(norm_shape, sh,
                      [&](int64_t o, const std::array<int64_t, 1>& p) { sc[o] = scale.f[p[0]]; });
    if (c.has(2)) {
      const Tensor& b = c.finput(2);
      std::array<const Shape*, 1> shb{&b.shape};
      broadcast_loop<1>(norm_shape, shb,
                        [&](int64_t o, const std::array<int64_t, 1>& p) { bi[o] = b.f[p[0]]; });
    }
  }
  for (int64_t r = 0; r < outer; ++r) {
    const float* xp = x.f.data() + r * inner;
    double s = 0, s2 = 0;
    for (int64_t q = 0; q < inner; ++q) s += xp[q];
    const double m = s / inner;
    for (int64_t q = 0; q < inner; ++q) s2 += (xp[q] - m) * (xp[q] - m);
    const double inv = 1.0 / std::sqrt(s2 / inner + eps);
    float* yp = y.f.data() + r * inner;
    for (int64_t q = 0; q < inner; ++q) yp[q] = static_cast<float>((xp[q] - m) * inv) * sc[q] + bi[q];
    mean_t.f[r] = static_cast<float>(m);
    inv_t.f[r] = static_cast<float>(inv);
  }
  c.out[0] = std::move(y);
  if (c.wants(1)) c.out[1] = std::move(mean_t);
  if (c.wants(2)) c.out[2] = std::move(inv_t);
}

void k_lrn(KernelContext& c) {
  const Tensor& x = c.finput(0);
  const float alpha = c.node.attr_float("alpha", 1e-4f), beta = c.node.attr_float("beta", 0.75f),
              bias = c.node.attr_float("bias", 1.0f);
  const int64_t size = c.node.attr_int("size", 1);
  const int64_t n = x.shape[0], ch = x.shape[1], pix = x.size() / std::max<int64_t>(1, n * ch);
  const int64_t lo = (size - 1) / 2, hi = (size - 1) - lo;  // floor and ceil halves
  Tensor y(DataType::kFloat32, x.shape);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t cc = 0; cc < ch; ++cc)
      for (int64_t q = 0; q < pix; ++q) {
        double s = 0;
        for (int64_t j = std::max<int64_t>(0, cc - lo); j <= std::min(ch - 1, cc + hi); ++j) {
          const double v = x.f[(b * ch + j) * pix + q];
          s += v * v;
        }
        const int64_t at = (b * ch + cc) * pix + q;
        y.f[at] = static_cast<float>(x.f[at] / std::pow(bias + alpha / size * s, beta));
      }
  c.out[0] = std::move(y);
}

// ---- softmax family ------------------------------------------------------------------------------------

enum class SoftKind { kSoftmax, kLogSoftmax, kHardmax };

void softmax_like(KernelContext& c, SoftKind kind) {
  const Tensor& x = c.finput(0);
  const int64_t r = x.rank();
  const bool legacy = c.opset < 13;
  const int64_t axis = norm_axis(c, c.node.attr_int("axis", legacy ? 1 : -1), r);
  // Legacy: coerce to 2-D [prod(shape[:axis]), prod(shape[axis:])], softmax over rows. Since 13: over
  // one axis, i.e. outer x dim x inner with a stride.
  int64_t outer = 1, dim = 1, inner = 1;
  for (int64_t d = 0; d < r; ++d) {
    if (d < axis)
      outer *= x.shape[d];
    else if (d == axis || legacy)
      dim *= x.shape[d];
    else
      inner *= x.shape[d];
  }
  Tensor y(DataType::kFloat32, x.shape);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      const float* xp = x.f.data() + o * dim * inner + i;
      float* yp = y.f.data() + o * dim * inner + i;
      float mx = -std::numeric_limits<float>::infinity();
      int64_t arg = 0;
      for (int64_t k = 0; k < dim; ++k)
        if (xp[k * inner] > mx) {
          mx = xp[k * inner];
          arg = k;
        }
      if (kind == SoftKind::kHardmax) {
        for (int64_t k = 0; k < dim; ++k) yp[k * inner] = k == arg ? 1.0f : 0.0f;
        continue;
      }
      double s = 0;
      for (int64_t k = 0; k < dim; ++k) s += std::exp(static_cast<double>(xp[k * inner] - mx));
      if (kind == SoftKind::kSoftmax)
        for (int64_t k = 0; k < dim; ++k)
          yp[k * inner] = static_cast<float>(std::exp(static_cast<double>(xp[k * inner] - mx)) / s);
      else
        for (int64_t k = 0; k < dim; ++k)
          yp[k * inner] = static_cast<float>(xp[k * inner] - mx - std::log(s));
    }
  c.out[0] = std::move(y);
}
void k_softmax(KernelContext& c) { softmax_like(c, SoftKind::kSoftmax); }
void k_log_softmax(KernelContext& c) { softmax_like(c, SoftKind::kLogSoftmax); }
void k_hardmax(KernelContext& c) { softmax_like(c, SoftKind::kHardmax); }

// ---- resize -------------------------------------------------------------------------------------------

struct Tap {
  int64_t index;
  double weight;
};

// One output coordinate's taps along one axis.
std::vector<Tap> taps_for(double xo, int64_t in_len, const std::string& mode, const std::string& nearest_mode,
                          double cubic_a, bool exclude_outside) {
  std::vector<Tap> t;
  auto clampi = [&](int64_t i) { return std::clamp<int64_t>(i, 0, in_len - 1); };
  if (mode == "nearest") {
    int64_t i;
    if (nearest_mode == "floor")
      i = static_cast<int64_t>(std::floor(xo));
    else if (nearest_mode == "ceil")
      i = static_cast<int64_t>(std::ceil(xo));
    else if (nearest_mode == "round_prefer_ceil")
      i = static_cast<int64_t>(std::floor(xo + 0.5));
    else  // round_prefer_floor
      i = static_cast<int64_t>(xo == std::floor(xo) + 0.5 ? std::floor(xo) : std::round(xo));
    t.push_back({clampi(i), 1.0});
    return t;
  }
  const double f = std::floor(xo);
  const double r = xo - f;
  const int64_t i0 = static_cast<int64_t>(f);
  if (mode == "linear") {
    t.push_back({clampi(i0), 1.0 - r});
    t.push_back({clampi(i0 + 1), r});
    return t;
  }
  // cubic (Keys kernel with coefficient a)
  auto w = [&](double d) {
    d = std::fabs(d);
    if (d <= 1) return ((cubic_a + 2) * d - (cubic_a + 3)) * d * d + 1;
    if (d < 2) return ((cubic_a * d - 5 * cubic_a) * d + 8 * cubic_a) * d - 4 * cubic_a;
    return 0.0;
  };
  double total = 0;
  for (int64_t k = -1; k <= 2; ++k) {
    const int64_t idx = i0 + k;
    double wt = w(r - k);
    if (exclude_outside && (idx < 0 || idx >= in_len)) wt = 0;
    t.push_back({clampi(idx), wt});
    total += wt;
  }
  if (exclude_outside && total != 0)
    for (auto& tp : t) tp.weight /= total;
  return t;
}

// The largest output dimension a Resize may ask for: beyond it, scales or sizes are nonsense (garbage
// runtime inputs), not a tensor to allocate.
constexpr int64_t kMaxResizedDim = int64_t{1} << 24;
// ... and the most elements (4 GiB of floats) its axes may multiply to.
constexpr int64_t kMaxResizedElements = int64_t{1} << 30;

void resize_impl(KernelContext& c, const Tensor& x, std::vector<double> scales, Shape out_sizes,
                 bool legacy) {
  const int64_t r = x.rank();
  if (!x.floating()) c.fail("X must be floating");
  std::string mode = c.node.attr_string("mode", "nearest");
  if (mode != "nearest" && mode != "linear" && mode != "cubic" && mode != "bilinear")
    c.fail("unsupported mode '" + mode + "'");
  if (mode == "bilinear") mode = "linear";
  const std::string ctm =
      legacy ? "asymmetric" : c.node.attr_string("coordinate_transformation_mode", "half_pixel");
  const std::string nearest_mode =
      legacy ? "floor" : c.node.attr_string("nearest_mode", "round_prefer_floor");
  const double cubic_a = c.node.attr_float("cubic_coeff_a", -0.75f);
  const bool exclude = c.node.attr_int("exclude_outside", 0) != 0;
  const double extrapolation = c.node.attr_float("extrapolation_value", 0.0f);
  std::vector<double> roi;
  if (!legacy && c.has(1) && c.input(1).size() > 0)
    for (int64_t k = 0; k < c.input(1).size(); ++k) roi.push_back(c.input(1).as_double(k));
  Shape os(r);
  for (int64_t d = 0; d < r; ++d) {
    if (!out_sizes.empty()) {
      os[d] = out_sizes[d];
      scales[d] = static_cast<double>(os[d]) / x.shape[d];
    } else {
      os[d] = static_cast<int64_t>(std::floor(x.shape[d] * scales[d]));
    }
    // Runtime scales or sizes (an input, not a constant) may say anything.
    if (out_sizes.empty() && !(scales[d] > 0 && scales[d] * x.shape[d] <= kMaxResizedDim))
      c.fail(fmt::format("scale {} of axis {} is not positive or gives more than {} elements", scales[d], d,
                         kMaxResizedDim));
    if (os[d] < 0 || os[d] > kMaxResizedDim)
      c.fail(fmt::format("size {} of axis {} is not in 0..{}", os[d], d, kMaxResizedDim));
  }
  // ... and each axis within bounds may still multiply to more elements than a tensor can hold.
  int64_t elements = 1;
  for (int64_t d = 0; d < r && elements > 0; ++d) {
    if (os[d] > kMaxResizedElements / elements)
      c.fail(
          fmt::format("the output {} has more than {} elements", shape_to_string(os), kMaxResizedElements));
    elements *= os[d];
  }
  // Per axis, per output coordinate: the taps (or -1 index for extrapolation).
  std::vector<std::vector<std::vector<Tap>>> taps(r);
  for (int64_t d = 0; d < r; ++d) {
    taps[d].resize(os[d]);
    // With scales, ONNX measures the resized length before flooring (in * scale), which matters for
    // align_corners and pytorch_half_pixel.
    const double in_len = static_cast<double>(x.shape[d]);
    const double out_len = out_sizes.empty() ? in_len * scales[d] : static_cast<double>(os[d]);
    for (int64_t o = 0; o < os[d]; ++o) {
      double xo;
      const double s = scales[d];
      if (ctm == "half_pixel")
        xo = (o + 0.5) / s - 0.5;
      else if (ctm == "pytorch_half_pixel")
        xo = out_len > 1 ? (o + 0.5) / s - 0.5 : 0.0;
      else if (ctm == "align_corners")
        xo = out_len == 1 ? 0.0 : o * (in_len - 1) / (out_len - 1);
      else if (ctm == "asymmetric")
        xo = o / s;
      else if (ctm == "tf_half_pixel_for_nn")
        xo = (o + 0.5) / s;
      else if (ctm == "tf_crop_and_resize") {
        if (static_cast<int64_t>(roi.size()) != 2 * r)
          c.fail("tf_crop_and_resize needs a roi of 2 x rank values");
        const double st = roi[d], en = roi[r + d];
        xo = out_len > 1 ? st * (in_len - 1) + o * (en - st) * (in_len - 1) / (out_len - 1)
                         : 0.5 * (st + en) * (in_len - 1);
        if (xo < 0 || xo > in_len - 1) {
          taps[d][o] = {{-1, 0.0}};
          continue;
        }
      } else
        c.fail("unsupported coordinate_transformation_mode '" + ctm + "'");
      if (x.shape[d] == os[d] && ctm != "tf_crop_and_resize" && mode != "nearest" && scales[d] == 1.0) {
        taps[d][o] = {{o, 1.0}};
        continue;
      }
      taps[d][o] = taps_for(xo, x.shape[d], mode, nearest_mode, cubic_a, exclude);
    }
  }
  Tensor y(DataType::kFloat32, os);
  auto xst = dense_strides(x.shape);
  std::vector<int64_t> idx(r, 0);
  for (int64_t o = 0; o < y.size(); ++o) {
    // Sum over the product of taps of every axis (recursive via an explicit stack).
    bool extrap = false;
    for (int64_t d = 0; d < r && !extrap; ++d) extrap = taps[d][idx[d]][0].index < 0;
    if (extrap) {
      y.f[o] = static_cast<float>(extrapolation);
    } else {
      double acc = 0;
      std::vector<size_t> sel(r, 0);
      while (true) {
        double w = 1;
        int64_t off = 0;
        for (int64_t d = 0; d < r; ++d) {
          const Tap& t = taps[d][idx[d]][sel[d]];
          w *= t.weight;
          off += t.index * xst[d];
        }
        acc += w * x.f[off];
        int64_t d = r - 1;
        for (; d >= 0; --d) {
          if (++sel[d] < taps[d][idx[d]].size()) break;
          sel[d] = 0;
        }
        if (d < 0) break;
      }
      y.f[o] = static_cast<float>(acc);
    }
    for (int64_t d = r - 1; d >= 0; --d) {
      if (++idx[d] < os[d]) break;
      idx[d] = 0;
    }
  }
  c.out[0] = std::move(y);
}

void k_resize(KernelContext& c) {
  const Tensor& x = c.input(0);
  std::vector<double> scales(x.rank(), 1.0);
  Shape sizes;
  if (c.opset < 11) {
    const Tensor& s = c.input(1);
    for (int64_t k = 0; k < s.size(); ++k) scales[k] = s.as_double(k);
    return resize_impl(c, x, scales, {}, true);
  }
  if (c.has(3) && c.input(3).size() > 0) {
    sizes = c.input(3).to_int_vector();
    if (static_cast<int64_t>(sizes.size()) != x.rank()) c.fail("sizes must have one value per dimension");
  } else if (c.has(2) && c.input(2).size() > 0) {
    const Tensor& s = c.input(2);
    if (s.size() != x.rank()) c.fail("scales must have one value per dimension");
    for (int64_t k = 0; k < s.size(); ++k) scales[k] = s.as_double(k);
  } else {
    c.fail("needs scales or sizes");
  }
  resize_impl(c, x, scales, sizes, false);
}

void k_upsample(KernelContext& c) {
  const Tensor& x = c.input(0);
  std::vector<double> scales(x.rank(), 1.0);
  if (c.has(1)) {
    const Tensor& s = c.input(1);
    for (int64_t k = 0; k < s.size(); ++k) scales[k] = s.as_double(k);
  } else {
    auto f = c.node.attr_floats("scales", {});
    for (size_t k = 0; k < f.size() && k < scales.size(); ++k) scales[k] = f[k];
  }
  resize_impl(c, x, scales, {}, true);
}

}  // namespace

void register_nn(KernelTable& t) {
  t["Gemm"] = k_gemm;
  t["MatMul"] = k_matmul;
  t["MatMulInteger"] = k_matmul_integer;
  t["QLinearMatMul"] = k_qlinear_matmul;
  t["ConvInteger"] = k_conv_integer;
  t["QLinearConv"] = k_qlinear_conv;
  t["Conv"] = k_conv;
  t["ConvTranspose"] = k_conv_transpose;
  t["MaxPool"] = k_maxpool;
  t["AveragePool"] = k_avgpool;
  t["GlobalAveragePool"] = k_global_avg;
  t["GlobalMaxPool"] = k_global_max;
  t["BatchNormalization"] = k_batchnorm;
  t["InstanceNormalization"] = k_instancenorm;
  t["LayerNormalization"] = k_layernorm;
  t["LRN"] = k_lrn;
  t["Softmax"] = k_softmax;
  t["LogSoftmax"] = k_log_softmax;
  t["Hardmax"] = k_hardmax;
  t["Resize"] = k_resize;
  t["Upsample"] = k_upsample;
}

}  // namespace npusim::compiler::interp
