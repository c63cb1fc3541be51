#include "compiler/quant/emulate.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <optional>
#include <set>
#include <stdexcept>
#include <type_traits>

#include "compiler/interp/kernels.h"
#include "compiler/ops/conv_transpose.h"
#include "compiler/passes/lowered.h"
#include "compiler/quant/quantize.h"
#include "compiler/quant/recipe.h"
#include "isa/numerics.h"

namespace npusim::compiler::quant {

namespace num = isa::numerics;

namespace {

[[noreturn]] void fail(const Node& n, const std::string& what) {
  throw InterpretError("node '" + n.name + "' (" + n.op_type + "): " + what);
}

}  // namespace

// ---- int8 matrix kernels -----------------------------------------------------------------------

ConvGeom conv_geometry(const Node& node, const Shape& x, const Shape& wshape) {
  const int nd = static_cast<int>(x.size()) - 2;
  if (nd < 1 || nd > 2)
    fail(node, "int8 Conv supports 1 or 2 spatial dimensions, input is " + shape_to_string(x));
  ConvGeom g{};
  g.n = x[0];
  g.c = x[1];
  g.h = nd == 2 ? x[2] : 1;
  g.w = x[nd == 2 ? 3 : 2];
  g.m = wshape[0];
  g.kh = nd == 2 ? wshape[2] : 1;
  g.kw = wshape[nd == 2 ? 3 : 2];
  auto strides = node.attr_ints("strides", std::vector<int64_t>(nd, 1));
  auto dil = node.attr_ints("dilations", std::vector<int64_t>(nd, 1));
  auto pads = node.attr_ints("pads", std::vector<int64_t>(2 * nd, 0));
  g.group = node.attr_int("group", 1);
  const std::string auto_pad = node.attr_string("auto_pad", "NOTSET");
  int64_t in[2] = {g.h, g.w}, k[2] = {g.kh, g.kw}, s[2] = {1, 1}, d[2] = {1, 1}, pb[2] = {0, 0},
          pe[2] = {0, 0}, out[2] = {1, 1};
  const int off = 2 - nd;
  for (int i = 0; i < nd; ++i) {
    const int j = off + i;
    s[j] = strides[i];
    d[j] = dil[i];
    const int64_t ek = (k[j] - 1) * d[j] + 1;
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      out[j] = (in[j] + s[j] - 1) / s[j];
      const int64_t total = std::max<int64_t>(0, (out[j] - 1) * s[j] + ek - in[j]);
      pb[j] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      pe[j] = total - pb[j];
      continue;
    }
    if (auto_pad == "NOTSET") {
      pb[j] = pads[i];
      pe[j] = pads[nd + i];
    }
    out[j] = (in[j] + pb[j] + pe[j] - ek) / s[j] + 1;
  }
  g.sh = s[0];
  g.sw = s[1];
  g.dh = d[0];
  g.dw = d[1];
  g.pt = pb[0];
  g.pl = pb[1];
  g.oh = out[0];
  g.ow = out[1];
  return g;
}

namespace {

// A fused activation in fp32 (the shared isa::numerics functions the datapath's vector unit runs), its
// kind and attributes resolved once per layer: it runs per element, where comparing the name and reading
// the attributes was a fifth of an int8 accuracy run of PP-OCR det.
class FusedAct {
 public:
  FusedAct(const Node& n, const std::string& a) {
    if (a == "Relu") {
      kind_ = Kind::kRelu;
    } else if (a == "Clip") {
      kind_ = Kind::kClip;
      lo_ = n.attr_float(kActMin, -INFINITY);
      hi_ = n.attr_float(kActMax, INFINITY);
    } else if (a == "Sigmoid") {
      kind_ = Kind::kSigmoid;
    } else if (a == "Tanh") {
      kind_ = Kind::kTanh;
    } else if (a == "LeakyRelu") {
      kind_ = Kind::kLeakyRelu;
      alpha_ = n.attr_float(kAlpha, 0.01f);
    } else if (a == "HardSigmoid") {
      kind_ = Kind::kHardSigmoid;
      alpha_ = n.attr_float(kAlpha, 0.2f);
      beta_ = n.attr_float(kBeta, 0.5f);
    } else if (a == "HardSwish") {
      kind_ = Kind::kHardSwish;
    } else if (a == "Gelu") {
      kind_ = Kind::kGelu;
    } else if (a == "Silu") {
      kind_ = Kind::kSilu;
    } else {
      fail(n, "unknown fused activation '" + a + "'");
    }
  }
  float operator()(float x) const {
    switch (kind_) {
      case Kind::kRelu:
        return x < 0 ? 0.0f : x;
      case Kind::kClip:
        return std::min(std::max(x, lo_), hi_);
      case Kind::kSigmoid:
        return num::sigmoid(x);
      case Kind::kTanh:
        return std::tanh(x);
      case Kind::kLeakyRelu:
        return x < 0 ? alpha_ * x : x;
      case Kind::kHardSigmoid:
        return num::hard_sigmoid(x, alpha_, beta_);
      case Kind::kHardSwish:
        return num::hard_swish(x);
      case Kind::kGelu:
        return num::gelu(x);
      case Kind::kSilu:
        return x * num::sigmoid(x);  // the vector unit's sigmoid, then its multiply
    }
    return x;
  }

 private:
  enum class Kind { kRelu, kClip, kSigmoid, kTanh, kLeakyRelu, kHardSigmoid, kHardSwish, kGelu, kSilu };
  Kind kind_ = Kind::kRelu;
  float lo_ = 0, hi_ = 0, alpha_ = 0, beta_ = 0;
};

// The per-output-channel epilogue: acc -> output code (precision.h's contract). int8 inputs: int32 sums
// (the wrapped uint32); int16 inputs: int64 sums, the residual added without saturation (int64 sums of
// int16 x int8 products never come near it) and the 64-bit requantize, as the datapath runs them.
struct Epilogue {
  const LayerQuant& L;
  const QParams& y;
  const Node& node;
  // Acc: uint32_t (int32 sums, wrapped) or uint64_t (int64 sums).
  template <class Acc>
  int32_t operator()(Acc acc_wrapped, int64_t c, int32_t residual_centered) const {
    constexpr bool wide = std::is_same_v<Acc, uint64_t>;
    auto requantize = [](int64_t x, const num::QuantizedMultiplier& m, int32_t zp) {
      return wide ? num::requantize_unsaturated_64(x, m.multiplier, m.shift, zp)
                  : num::requantize_unsaturated(static_cast<int32_t>(x), m.multiplier, m.shift, zp);
    };
    int64_t acc = wide ? static_cast<int64_t>(acc_wrapped) : static_cast<int32_t>(acc_wrapped);
    if (!L.residual.empty()) {
      acc += requantize(residual_centered, L.residual_rescale[c], 0);
      if (!wide) acc = num::saturate_int32(acc);
    }
    if (!L.float_epilogue) {
      const int64_t v = requantize(acc, L.requant[c], L.requant_target(y).zero_point);
      const auto code = static_cast<int32_t>(num::clamp_i64(v, L.clamp_min, L.clamp_max));
      if (!L.lut_epilogue) return code;
      return L
          .epilogue_lut[static_cast<size_t>(code - L.clamp_min)];  // the table starts at the clamp's low end
    }
    const float pre = static_cast<float>(acc) * L.acc_scale[c];
    return y.quantize(activation(pre));
  }
  float activation(float x) const { return (*act)(x); }
  std::optional<FusedAct> act =
      L.float_epilogue ? std::optional<FusedAct>(FusedAct(node, L.activation)) : std::nullopt;
};

// The int8 conv of geometry cg over NCHW codes x (zero point zx): im2col of the centred codes, sums in
// the wrapping unsigned accumulator Acc (uint32_t: int32 sums of int8 inputs; uint64_t: int64 sums of
// int16 inputs), the epilogue per output channel.
template <class Acc>
std::vector<int32_t> conv_codes(const Node& n, const ConvGeom& cg, const std::vector<int32_t>& x, int32_t zx,
                                const LayerQuant& L, const Epilogue& epi, const Int8Tensor* residual) {
  const int64_t cpg = cg.c / cg.group, mpg = cg.m / cg.group;
  const int64_t K = cpg * cg.kh * cg.kw, P = cg.oh * cg.ow;
  std::vector<int32_t> out(static_cast<size_t>(cg.n * cg.m * P), 0);
  if (residual && residual->codes.size() != out.size()) fail(n, "residual shape does not match the output");
  auto res = [&](int64_t idx) -> int32_t {
    return residual ? residual->codes[idx] - residual->qparams.zero_point : 0;
  };
  std::vector<int16_t> col(K * P);
  std::vector<Acc> acc(P);
  for (int64_t b = 0; b < cg.n; ++b) {
    for (int64_t gi = 0; gi < cg.group; ++gi) {
      // im2col of (x_q - zx); padding is the zero point, i.e. 0 after centring.
      for (int64_t ci = 0; ci < cpg; ++ci)
        for (int64_t i = 0; i < cg.kh; ++i)
          for (int64_t j = 0; j < cg.kw; ++j) {
            int16_t* row = &col[((ci * cg.kh + i) * cg.kw + j) * P];
            const int32_t* xc = &x[((b * cg.c) + gi * cpg + ci) * cg.h * cg.w];
            for (int64_t oy = 0; oy < cg.oh; ++oy) {
              const int64_t iy = oy * cg.sh - cg.pt + i * cg.dh;
              for (int64_t ox = 0; ox < cg.ow; ++ox) {
                const int64_t ix = ox * cg.sw - cg.pl + j * cg.dw;
                const bool inside = iy >= 0 && iy < cg.h && ix >= 0 && ix < cg.w;
                row[oy * cg.ow + ox] = inside ? static_cast<int16_t>(xc[iy * cg.w + ix] - zx) : 0;
              }
            }
          }
      for (int64_t mi = 0; mi < mpg; ++mi) {
        const int64_t m = gi * mpg + mi;
        const int8_t* wm = &L.weight_q[m * K];
        std::fill(acc.begin(), acc.end(), static_cast<Acc>(static_cast<int64_t>(L.bias[m])));
        for (int64_t k = 0; k < K; ++k) {
          const int32_t wv = wm[k];
          if (wv == 0) continue;
          const int16_t* row = &col[k * P];
          for (int64_t p = 0; p < P; ++p)
            acc[p] += static_cast<Acc>(static_cast<int64_t>(wv * static_cast<int32_t>(row[p])));
        }
        const int64_t base = (b * cg.m + m) * P;
        for (int64_t p = 0; p < P; ++p) out[base + p] = epi(acc[p], m, res(base + p));
      }
    }
  }
  return out;
}

}  // namespace

std::vector<int32_t> run_int8_layer(const Graph& /*g*/, const Node& n, const PrecisionPlan& plan,
                                    const Int8Tensor& x, const Int8Tensor* runtime_b,
                                    const Int8Tensor* residual, Shape& out_shape) {
  const LayerQuant& L = plan.layers.at(n.name);
  const QParams& yq = plan.values.at(L.output);
  const Epilogue epi{L, yq, n};
  const int32_t zx = x.qparams.zero_point;
  const bool wide = x.qparams.dtype == isa::DType::kInt16;  // int16 x int8: int64 sums
  std::vector<int32_t> out;
  auto res = [&](int64_t idx) -> int32_t {
    return residual ? residual->codes[idx] - residual->qparams.zero_point : 0;
  };
  if (n.op_type == "Conv") {
    const ConvGeom cg = conv_geometry(n, x.shape, L.weight_shape);
    out_shape = x.shape.size() == 4 ? Shape{cg.n, cg.m, cg.oh, cg.ow} : Shape{cg.n, cg.m, cg.ow};
    return wide ? conv_codes<uint64_t>(n, cg, x.codes, zx, L, epi, residual)
                : conv_codes<uint32_t>(n, cg, x.codes, zx, L, epi, residual);
  }
  if (n.op_type == "ConvTranspose") {
    // The stride-1 conv over the zero-inserted input (compiler/ops/conv_transpose.h), as the back end
    // runs it: the inserted values and the padding are the zero point, which contributes nothing.
    if (x.shape.size() != 4 || L.weight_shape.size() != 4) fail(n, "int8 ConvTranspose supports 2-D only");
    const ConvTransposeForm f =
        conv_transpose_form(n, x.shape[2], x.shape[3], L.weight_shape[2], L.weight_shape[3]);
    ConvGeom cg{};
    cg.n = x.shape[0], cg.c = x.shape[1], cg.h = f.hp, cg.w = f.wp, cg.m = L.weight_shape[0];
    cg.kh = f.kh, cg.kw = f.kw, cg.oh = f.oh, cg.ow = f.ow, cg.sh = cg.sw = 1, cg.dh = f.dh, cg.dw = f.dw;
    cg.pt = cg.pl = 0, cg.group = n.attr_int("group", 1);
    std::vector<int32_t> padded(static_cast<size_t>(cg.n * cg.c * f.hp * f.wp), zx);
    for (int64_t bc = 0; bc < cg.n * cg.c; ++bc)
      for (int64_t iy = 0; iy < f.h; ++iy) {
        const int64_t py = f.lead_h + iy * f.sh;
        if (py < 0 || py >= f.hp) continue;
        for (int64_t ix = 0; ix < f.w; ++ix) {
          const int64_t px = f.lead_w + ix * f.sw;
          if (px >= 0 && px < f.wp)
            padded[(bc * f.hp + py) * f.wp + px] = x.codes[(bc * f.h + iy) * f.w + ix];
        }
      }
    out_shape = Shape{cg.n, cg.m, cg.oh, cg.ow};
    return wide ? conv_codes<uint64_t>(n, cg, padded, zx, L, epi, residual)
                : conv_codes<uint32_t>(n, cg, padded, zx, L, epi, residual);
  }
  // MatMul / Gemm: A [..., M, K] x B [..., K, N] (Gemm transB: B [N, K]).
  if (x.shape.size() < 2) fail(n, "int8 MatMul needs an input of rank >= 2");
  const bool transb = n.op_type == "Gemm" && n.attr_int("transB", 0) != 0;
  const Shape& bs = runtime_b ? runtime_b->shape : L.weight_shape;
  if (bs.size() < 2) fail(n, "int8 MatMul needs a weight of rank >= 2");
  const int64_t M = x.shape[x.shape.size() - 2], K = x.shape.back();
  const int64_t N = transb ? bs[0] : bs.back();
  const int64_t KB = transb ? bs[1] : bs[bs.size() - 2];
  if (K != KB) fail(n, "inner dimensions do not match");
  const int64_t batch_a = num_elements(x.shape) / (M * K);
  const int64_t batch_b = num_elements(bs) / (KB * N);
  if (batch_b != 1 && batch_b != batch_a) fail(n, "int8 MatMul broadcasts only a shared 2-D weight");
  out_shape = x.shape;
  out_shape.back() = N;
  if (bs.size() > x.shape.size()) {
    out_shape = bs;
    out_shape[bs.size() - 2] = M;
  }
  out.assign(batch_a * M * N, 0);
  if (residual && residual->codes.size() != out.size()) fail(n, "residual shape does not match the output");
  // B centred as int32 [batch][K][N].
  std::vector<int32_t> bc(batch_b * K * N);
  const int32_t zb = runtime_b ? runtime_b->qparams.zero_point : 0;
  for (int64_t bb = 0; bb < batch_b; ++bb)
    for (int64_t k = 0; k < K; ++k)
      for (int64_t j = 0; j < N; ++j) {
        const int64_t src = transb ? (j * K + k) : (bb * K * N + k * N + j);
        bc[(bb * K + k) * N + j] = (runtime_b ? runtime_b->codes[src] : L.weight_q[src]) - zb;
      }
  auto run = [&](auto zero) {
    using Acc = decltype(zero);
    std::vector<Acc> acc(N);
    for (int64_t ba = 0; ba < batch_a; ++ba) {
      const int32_t* bm = &bc[(batch_b == 1 ? 0 : ba) * K * N];
      for (int64_t i = 0; i < M; ++i) {
        for (int64_t j = 0; j < N; ++j) acc[j] = static_cast<Acc>(static_cast<int64_t>(L.bias[j]));
        const int32_t* arow = &x.codes[(ba * M + i) * K];
        for (int64_t k = 0; k < K; ++k) {
          const int32_t av = arow[k] - zx;
          if (av == 0) continue;
          const int32_t* brow = &bm[k * N];
          for (int64_t j = 0; j < N; ++j) acc[j] += static_cast<Acc>(static_cast<int64_t>(av * brow[j]));
        }
        const int64_t base = (ba * M + i) * N;
        for (int64_t j = 0; j < N; ++j) out[base + j] = epi(acc[j], j, res(base + j));
      }
    }
  };
  if (wide) {
    run(uint64_t{0});
  } else {
    run(uint32_t{0});
  }
  return out;
}

namespace {

// A value during emulation: its real value, and the codes when an int8 node produced it.
struct EValue {
  Tensor real;
  bool has_codes = false;
  Int8Tensor q;
};

float round_p(float v, Precision p) {
  switch (p) {
    case Precision::kFp16:
      return num::round_to_precision(v, isa::DType::kFp16);
    case Precision::kBf16:
      return num::round_to_precision(v, isa::DType::kBf16);
    default:
      return v;
  }
}

Tensor rounded(const Tensor& t, Precision p) {
  if (!t.floating() || (p != Precision::kFp16 && p != Precision::kBf16)) return t;
  Tensor r = t;
  for (auto& v : r.f) v = round_p(v, p);
  return r;
}

// The back end's row-wise Softmax / LayerNormalization / RMSNormalization (compiler/backend/vector/rowwise.h)
// as the vector unit computes it: the VecOps it runs, in order, each in fp32 with its result rounded to the
// compute format (fp16/bf16; int8 layers compute in fp32 between one dequantize and one quantize), reductions
// summed in row order as the datapath does. With `out` (an int8 layer writing codes) the output scale is
// folded in as the kernel does: the per-row factor divided by it, beta divided by it, the last step rounded
// to int32 (half to even, saturated) and the zero point added (saturated to the codes); `codes` receives them
// and the returned tensor holds their real values.
Tensor rowwise_layer(const Node& n, const RowwiseForm& f, const std::vector<const Tensor*>& ins, Precision p,
                     const QParams* out = nullptr, std::vector<int32_t>* codes = nullptr) {
  const Tensor& x = *ins.at(0);
  const int64_t D = f.row;
  const auto r = [p](float v) { return round_p(v, p); };
  const auto row_param = [&](size_t k, float absent) {
    std::vector<float> v(static_cast<size_t>(D), absent);
    if (k < ins.size() && ins[k])
      for (int64_t i = 0; i < D; ++i)
        v[static_cast<size_t>(i)] = ins[k]->f[ins[k]->f.size() == 1 ? 0 : static_cast<size_t>(i)];
    return v;
  };
  const bool softmax = n.op_type == "Softmax", rms = is_rmsnorm(n);
  const std::vector<float> gamma = softmax ? std::vector<float>{} : row_param(1, 1.0f);
  const std::vector<float> beta = softmax ? std::vector<float>{} : row_param(2, 0.0f);
  const bool has_gamma = !softmax && n.has_input(1), has_beta = !softmax && n.has_input(2);
  const float eps = r(n.attr_float("epsilon", 1e-5f));
  Tensor y(DataType::kFloat32, x.shape);
  if (out) codes->assign(y.f.size(), 0);
  // The result: a real value, or (out) the code of the pre-scaled value v.
  const auto put = [&](int64_t at, float v) {
    if (!out) {
      y.f[static_cast<size_t>(at)] = r(v);
      return;
    }
    const int64_t q = num::float_to_int(v, isa::DType::kInt32) + out->zero_point;
    const auto code = static_cast<int32_t>(num::clamp_i64(q, out->qmin(), out->qmax()));
    (*codes)[static_cast<size_t>(at)] = code;
    y.f[static_cast<size_t>(at)] = out->dequantize(code);
  };
  const float out_scale = out ? out->scale : 1.0f;
  std::vector<float> t(static_cast<size_t>(D));
  for (int64_t row = 0; row < f.rows; ++row) {
    const float* xp = x.f.data() + row * D;
    float* yp = y.f.data() + row * D;
    if (softmax) {
      float m = xp[0];
      for (int64_t i = 1; i < D; ++i)
        m = std::isnan(m) ? m : std::isnan(xp[i]) ? xp[i] : (m < xp[i] ? xp[i] : m);
      for (int64_t i = 0; i < D; ++i) yp[i] = r(std::exp(r(xp[i] - m)));
      float acc = yp[0];
      for (int64_t i = 1; i < D; ++i) acc += yp[i];
      float inv = r(1.0f / r(acc));
      if (out) inv = inv / out_scale;
      for (int64_t i = 0; i < D; ++i) put(row * D + i, yp[i] * inv);
      continue;
    }
    float acc = xp[0];
    for (int64_t i = 1; i < D; ++i) acc += xp[i];
    const float mean = rms ? 0.0f : r(acc / static_cast<float>(D));  // RMSNorm: no centring step
    for (int64_t i = 0; i < D; ++i) {
      yp[i] = rms ? xp[i] : r(xp[i] - mean);
      t[static_cast<size_t>(i)] = r(yp[i] * yp[i]);
    }
    acc = t[0];
    for (int64_t i = 1; i < D; ++i) acc += t[static_cast<size_t>(i)];
    float inv = r(1.0f / std::sqrt(r(r(acc / static_cast<float>(D)) + eps)));
    if (out) inv = inv / out_scale;
    for (int64_t i = 0; i < D; ++i) {
      float v = yp[i] * inv;
      if (has_gamma) v = r(v) * gamma[static_cast<size_t>(i)];
      if (has_beta)
        v = r(v) + (out ? beta[static_cast<size_t>(i)] / out_scale : beta[static_cast<size_t>(i)]);
      put(row * D + i, v);
    }
  }
  return y;
}

class Emulator {
 public:
  Emulator(const Graph& g, const PrecisionPlan& plan) : g_(g), plan_(plan) {}

  std::map<std::string, EValue> env;

  void run(const Sample& inputs, const EmulationObserver& observer,
           const PreActivationObserver& pre_observer = nullptr) {
    pre_observer_ = pre_observer;
    begin(inputs);
    for (const Node& n : g_.nodes) {
      run_node(n);
      if (observer) {
        std::vector<const Tensor*> outs;
        for (const auto& o : n.outputs) outs.push_back(o.empty() ? nullptr : &env.at(o).real);
        observer(n, outs);
      }
      release_dead(n);
    }
  }

  void keep_all() { keep_all_ = true; }

  // Node n's fp32 outputs on `ins` (the float rule's function, fused epilogue included).
  std::vector<Tensor> fp32_outputs(const Node& n, const std::vector<const Tensor*>& ins) {
    return compute_fp32(n, ins);
  }

  // Node-by-node use (run() is begin() then, per node, run_node() and release_dead()).
  void begin(const Sample& inputs) {
    for (const auto& o : g_.outputs) outputs_.insert(o);
    for (const Node& n : g_.nodes)
      for (const auto& in : n.inputs)
        if (!in.empty()) ++uses_[in];
    for (const auto& in : g_.inputs) {
      auto it = inputs.find(in);
      if (it == inputs.end()) throw InterpretError("no value given for graph input '" + in + "'");
      env[in].real = it->second;
    }
  }
  void run_node(const Node& n) {
    const Precision p = plan_.precision_of(n.name);
    if (p == Precision::kInt8 && plan_.layers.count(n.name)) {
      run_int8_matrix(n);
      return;
    }
    run_other(n);
  }
  // Drops values no later node reads (graph outputs and, for the test hook, everything else stay), so
  // emulating ResNet-50 holds a few activations at a time, not all of them.
  void release_dead(const Node& n) {
    if (keep_all_) return;
    for (const auto& in : n.inputs) {
      if (in.empty()) continue;
      auto it = uses_.find(in);
      if (it != uses_.end() && --it->second == 0 && !outputs_.count(in)) env.erase(in);
    }
  }

 private:
  const Tensor& input_real(const std::string& name) {
    const Value& v = g_.value(name);
    if (v.is_constant()) return *v.constant;
    auto it = env.find(name);
    if (it == env.end()) throw InterpretError("value '" + name + "' is used before it is computed");
    return it->second.real;
  }

  // The codes of a value as an int8 node reads it: reuses the producer's codes when its QParams match,
  // else quantizes the real value on entry.
  Int8Tensor codes_of(const std::string& name) {
    const QParams& qp = plan_.values.at(name);
    EValue& ev = env.at(name);
    if (ev.has_codes && ev.q.qparams.scale == qp.scale && ev.q.qparams.zero_point == qp.zero_point &&
        ev.q.qparams.dtype == qp.dtype)
      return ev.q;
    Int8Tensor t;
    t.shape = ev.real.shape;
    t.qparams = qp;
    t.codes.resize(ev.real.f.size());
    for (size_t k = 0; k < t.codes.size(); ++k) t.codes[k] = qp.quantize(ev.real.f[k]);
    return t;
  }

  void set_codes(const std::string& name, Int8Tensor q) {
    EValue& ev = env[name];
    ev.real = Tensor(DataType::kFloat32, q.shape);
    for (size_t k = 0; k < q.codes.size(); ++k) ev.real.f[k] = q.qparams.dequantize(q.codes[k]);
    ev.q = std::move(q);
    ev.has_codes = true;
  }

  bool runtime_float(const std::string& name) const {
    return !name.empty() && g_.has_value(name) && !g_.value(name).is_constant() &&
           is_float(g_.value(name).dtype);
  }

  void run_int8_matrix(const Node& n) {
    const LayerQuant& L = plan_.layers.at(n.name);
    Int8Tensor x = codes_of(L.input);
    Int8Tensor b, r;
    if (!L.weight_is_constant) b = codes_of(L.weight);
    if (!L.residual.empty()) r = codes_of(L.residual);
    Int8Tensor y;
    y.qparams = plan_.values.at(L.output);
    y.codes = run_int8_layer(g_, n, plan_, x, L.weight_is_constant ? nullptr : &b,
                             L.residual.empty() ? nullptr : &r, y.shape);
    set_codes(L.output, std::move(y));
  }

  void run_other(const Node& n) {
    const Precision p = plan_.precision_of(n.name);
    if (const auto a = batchnorm_affine(g_, n)) {
      run_affine(n, *a, p);
      return;
    }
    if (const auto m = integer_mul(g_, plan_, n)) {
      run_integer_mul(n, *m);
      return;
    }
    if (const auto m = integer_global_average_pool(g_, plan_, n)) {
      run_integer_global_average_pool(n, *m);
      return;
    }
    if (const auto m = integer_add(g_, plan_, n)) {
      run_integer_add(n, *m);
      return;
    }
    if (const auto m = integer_average_pool(g_, plan_, n)) {
      run_integer_average_pool(n, *m);
      return;
    }
    if (const auto m = integer_concat(g_, plan_, n)) {
      run_integer_concat(n, *m);
      return;
    }
    if (p == Precision::kInt8 && is_code_function(g_, n) && runtime_float(n.inputs[0]) &&
        plan_.values.count(n.inputs[0]) && plan_.values.count(n.outputs[0])) {
      run_lut(n);
      return;
    }
    // Float path: operands as the node reads them.
    std::vector<Tensor> holders(n.inputs.size());
    std::vector<const Tensor*> ins(n.inputs.size(), nullptr);
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      if (n.inputs[k].empty()) continue;
      const Tensor& t = input_real(n.inputs[k]);
      if (p == Precision::kInt8 && runtime_float(n.inputs[k]) && plan_.values.count(n.inputs[k])) {
        Int8Tensor q = codes_of(n.inputs[k]);
        holders[k] = Tensor(DataType::kFloat32, q.shape);
        for (size_t j = 0; j < q.codes.size(); ++j) holders[k].f[j] = q.qparams.dequantize(q.codes[j]);
        ins[k] = &holders[k];
      } else if ((p == Precision::kFp16 || p == Precision::kBf16) && t.floating()) {
        holders[k] = rounded(t, p);
        ins[k] = &holders[k];
      } else {
        ins[k] = &t;
      }
    }
    // The NPU runs a whole Softmax / LayerNormalization in its row-wise kernel (fp32 layers: the
    // reference interpreter's kernel, as everywhere in fp32).
    const std::optional<RowwiseForm> rows = p == Precision::kFp32 ? std::nullopt : rowwise_form(g_, n);
    std::vector<Tensor> outs;
    if (rows && p == Precision::kInt8 && plan_.values.count(n.outputs[0])) {
      Int8Tensor q;
      q.shape = ins[0]->shape;
      q.qparams = plan_.values.at(n.outputs[0]);
      rowwise_layer(n, *rows, ins, p, &q.qparams, &q.codes);
      set_codes(n.outputs[0], std::move(q));
      // A LayerNormalization's Mean / InvStdDev outputs, unused (rowwise_form), as the interpreter has them.
      if (n.outputs.size() > 1) {
        std::vector<Tensor> extra = compute_fp32(n, ins);
        for (size_t k = 1; k < n.outputs.size(); ++k)
          if (!n.outputs[k].empty()) env[n.outputs[k]].real = std::move(extra[k]);
      }
      return;
    }
    if (rows && n.outputs.size() == 1) {
      outs.push_back(rowwise_layer(n, *rows, ins, p));
    } else {
      outs = compute_fp32(n, ins);  // (unused Mean / InvStdDev outputs of a LayerNormalization: from here)
      if (rows) outs[0] = rowwise_layer(n, *rows, ins, p);
    }
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      if (n.outputs[k].empty()) continue;
      Tensor& t = outs[k];
      if (p == Precision::kInt8 && t.floating() && plan_.values.count(n.outputs[k])) {
        Int8Tensor q;
        q.shape = t.shape;
        q.qparams = plan_.values.at(n.outputs[k]);
        q.codes.resize(t.f.size());
        for (size_t j = 0; j < t.f.size(); ++j) q.codes[j] = q.qparams.quantize(t.f[j]);
        set_codes(n.outputs[k], std::move(q));
        continue;
      }
      if (p == Precision::kFp16 || p == Precision::kBf16)
        for (auto& v : t.f) v = round_p(v, p);
      EValue& ev = env[n.outputs[k]];
      ev.real = std::move(t);
      ev.has_codes = false;
    }
  }

  // An element-wise function of one input on int8 codes: a table lookup per element (activation_lut).
  void run_lut(const Node& n) {
    Int8Tensor x = codes_of(n.inputs[0]);
    Int8Tensor y;
    y.shape = x.shape;
    y.qparams = plan_.values.at(n.outputs[0]);
    const std::vector<int32_t> table = activation_lut(g_, n, x.qparams, y.qparams);
    y.codes.resize(x.codes.size());
    for (size_t k = 0; k < x.codes.size(); ++k)
      y.codes[k] = table[static_cast<size_t>(x.codes[k] - x.qparams.qmin())];
    set_codes(n.outputs[0], std::move(y));
  }

  // integer_mul: the centred codes multiplied exactly (in fp32, which holds every product of two 8-bit
  // centred codes, through the interpreter's broadcasting Mul), then one requantize.
  void run_integer_mul(const Node& n, const num::QuantizedMultiplier& m) {
    Tensor centred[2];
    for (int k = 0; k < 2; ++k) {
      const Int8Tensor q = codes_of(n.inputs[static_cast<size_t>(k)]);
      centred[k] = Tensor(DataType::kFloat32, q.shape);
      for (size_t j = 0; j < q.codes.size(); ++j)
        centred[k].f[j] = static_cast<float>(q.codes[j] - q.qparams.zero_point);
    }
    const std::vector<Tensor> prod = call_kernel(n, {&centred[0], &centred[1]});
    Int8Tensor y;
    y.shape = prod.at(0).shape;
    y.qparams = plan_.values.at(n.outputs[0]);
    y.codes.resize(prod[0].f.size());
    for (size_t j = 0; j < y.codes.size(); ++j) {
      const int64_t v = num::requantize_unsaturated(static_cast<int32_t>(prod[0].f[j]), m.multiplier, m.shift,
                                                    y.qparams.zero_point);
      y.codes[j] = static_cast<int32_t>(num::clamp_i64(v, y.qparams.qmin(), y.qparams.qmax()));
    }
    set_codes(n.outputs[0], std::move(y));
  }

  // integer_add: each input's centred codes rescaled to the common grid in int32, added (or subtracted) with
  // broadcasting, one requantize.
  void run_integer_add(const Node& n, const IntegerAdd& m) {
    const Int8Tensor a = codes_of(n.inputs[0]), b = codes_of(n.inputs[1]);
    auto rescaled = [](const Int8Tensor& t, const num::QuantizedMultiplier& r) {
      std::vector<int32_t> v(t.codes.size());
      for (size_t j = 0; j < v.size(); ++j)
        v[j] = num::saturate_int32(
            num::requantize_unsaturated(t.codes[j] - t.qparams.zero_point, r.multiplier, r.shift, 0));
      return v;
    };
    const std::vector<int32_t> sa = rescaled(a, m.a), sb = rescaled(b, m.b);
    Int8Tensor y;
    y.qparams = plan_.values.at(n.outputs[0]);
    const size_t rank = std::max(a.shape.size(), b.shape.size());
    y.shape.assign(rank, 1);
    for (const Shape* s : {&a.shape, &b.shape})
      for (size_t d = 0; d < s->size(); ++d) {
        int64_t& o = y.shape[rank - s->size() + d];
        if ((*s)[d] != 1) {
          if (o != 1 && o != (*s)[d]) fail(n, "operand shapes do not broadcast");
          o = (*s)[d];
        }
      }
    y.codes.resize(static_cast<size_t>(num_elements(y.shape)));
    interp::broadcast_loop<2>(y.shape, {&a.shape, &b.shape}, [&](int64_t o, const std::array<int64_t, 2>& p) {
      const int64_t x = m.subtract ? int64_t{sa[static_cast<size_t>(p[0])]} - sb[static_cast<size_t>(p[1])]
                                   : int64_t{sa[static_cast<size_t>(p[0])]} + sb[static_cast<size_t>(p[1])];
      const int64_t v = num::requantize_unsaturated(num::saturate_int32(x), m.out.multiplier, m.out.shift,
                                                    y.qparams.zero_point);
      y.codes[static_cast<size_t>(o)] = static_cast<int32_t>(num::clamp_i64(v, m.lo, m.hi));
    });
    set_codes(n.outputs[0], std::move(y));
  }

  // integer_average_pool: each window's exact sum of centred codes inside the input, one requantize per
  // pixel.
  void run_integer_average_pool(const Node& n, const IntegerAveragePool& m) {
    const Int8Tensor x = codes_of(n.inputs[0]);
    const int64_t H = x.shape[2], W = x.shape[3];
    Int8Tensor y;
    y.qparams = plan_.values.at(n.outputs[0]);
    y.shape = {x.shape[0], x.shape[1], m.oh, m.ow};
    y.codes.resize(static_cast<size_t>(num_elements(y.shape)));
    size_t o = 0;
    for (int64_t plane = 0; plane < x.shape[0] * x.shape[1]; ++plane) {
      const int32_t* xp = x.codes.data() + plane * H * W;
      for (int64_t oy = 0; oy < m.oh; ++oy) {
        for (int64_t ox = 0; ox < m.ow; ++ox, ++o) {
          int64_t sum = 0;
          for (int64_t i = oy * m.sh - m.pt; i < oy * m.sh - m.pt + m.kh; ++i)
            for (int64_t j = ox * m.sw - m.pl; j < ox * m.sw - m.pl + m.kw; ++j)
              if (i >= 0 && i < H && j >= 0 && j < W) sum += xp[i * W + j] - x.qparams.zero_point;
          const num::QuantizedMultiplier& q = m.scale[static_cast<size_t>(oy * m.ow + ox)];
          const int64_t v = num::requantize_unsaturated(static_cast<int32_t>(sum), q.multiplier, q.shift,
                                                        y.qparams.zero_point);
          y.codes[o] = static_cast<int32_t>(num::clamp_i64(v, y.qparams.qmin(), y.qparams.qmax()));
        }
      }
    }
    set_codes(n.outputs[0], std::move(y));
  }

  // integer_concat: each input's codes requantized once into the output's (or copied), then concatenated.
  void run_integer_concat(const Node& n, const IntegerConcat& m) {
    const QParams& qy = plan_.values.at(n.outputs[0]);
    std::vector<Tensor> codes(n.inputs.size());
    std::vector<const Tensor*> ins;
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      const Int8Tensor x = codes_of(n.inputs[k]);
      codes[k] = Tensor(DataType::kFloat32, x.shape);  // codes, exact in fp32
      for (size_t j = 0; j < x.codes.size(); ++j) {
        int64_t v = x.codes[j];
        if (m[k])
          v = num::clamp_i64(num::requantize_unsaturated(x.codes[j] - x.qparams.zero_point, m[k]->multiplier,
                                                         m[k]->shift, qy.zero_point),
                             qy.qmin(), qy.qmax());
        codes[k].f[j] = static_cast<float>(v);
      }
      ins.push_back(&codes[k]);
    }
    const std::vector<Tensor> out = call_kernel(n, ins);
    Int8Tensor y;
    y.shape = out.at(0).shape;
    y.qparams = qy;
    y.codes.assign(out[0].f.begin(), out[0].f.end());
    set_codes(n.outputs[0], std::move(y));
  }

  // integer_global_average_pool: the exact sum of each channel's codes, one requantize.
  void run_integer_global_average_pool(const Node& n, const num::QuantizedMultiplier& m) {
    const Int8Tensor x = codes_of(n.inputs[0]);
    Int8Tensor y;
    y.qparams = plan_.values.at(n.outputs[0]);
    y.shape = {x.shape[0], x.shape[1], 1, 1};
    const int64_t hw = x.shape[2] * x.shape[3];
    const auto planes = static_cast<size_t>(x.shape[0] * x.shape[1]);
    y.codes.resize(planes);
    for (size_t p = 0; p < planes; ++p) {
      int64_t sum = -hw * x.qparams.zero_point;
      for (int64_t k = 0; k < hw; ++k) sum += x.codes[p * static_cast<size_t>(hw) + static_cast<size_t>(k)];
      const int64_t v =
          num::requantize_unsaturated(static_cast<int32_t>(sum), m.multiplier, m.shift, y.qparams.zero_point);
      y.codes[p] = static_cast<int32_t>(num::clamp_i64(v, y.qparams.qmin(), y.qparams.qmax()));
    }
    set_codes(n.outputs[0], std::move(y));
  }

  // A BatchNormalization as the back end lowers it: precision.h's AffineArith, with the fp16/bf16
  // constants and every vector result rounded to the format.
  void run_affine(const Node& n, const ChannelAffine& a, Precision p) {
    const std::string& xn = n.inputs[0];
    const std::string& yn = n.outputs[0];
    const bool int8 = p == Precision::kInt8;
    const bool x_codes = int8 && runtime_float(xn) && plan_.values.count(xn);
    const bool y_codes = int8 && plan_.values.count(yn);
    Int8Tensor xq;
    Tensor xr;
    if (x_codes) {
      xq = codes_of(xn);
    } else {
      xr = rounded(input_real(xn), p);
    }
    const std::string act = n.attr_string(kActivation, "");
    const QParams* qy = y_codes ? &plan_.values.at(yn) : nullptr;
    const AffineArith ar = affine_arith(a.scale, a.shift, x_codes ? &xq.qparams : nullptr, qy, act,
                                        n.attr_float(kActMin, -INFINITY), n.attr_float(kActMax, INFINITY));
    const Shape shape = x_codes ? xq.shape : xr.shape;
    if (shape.size() < 2) fail(n, "BatchNormalization of rank < 2");
    const std::optional<FusedAct> fused =
        act.empty() ? std::nullopt : std::optional<FusedAct>(FusedAct(n, act));
    const int64_t channels = shape[1];
    int64_t inner = 1;
    for (size_t d = 2; d < shape.size(); ++d) inner *= shape[d];
    const int64_t count = num_elements(shape);
    Tensor y(DataType::kFloat32, shape);
    Int8Tensor yq;
    if (qy) {
      yq.shape = shape;
      yq.qparams = *qy;
      yq.codes.resize(static_cast<size_t>(count));
    }
    for (int64_t k = 0; k < count; ++k) {
      const size_t c = static_cast<size_t>((k / inner) % channels), i = static_cast<size_t>(k);
      const float d = x_codes ? static_cast<float>(xq.codes[i] - xq.qparams.zero_point) : xr.f[i];
      const float u = round_p(round_p(d * round_p(ar.mul[c], p), p) + round_p(ar.add[c], p), p);
      if (ar.codes_out) {
        yq.codes[i] = static_cast<int32_t>(num::float_to_int(std::min(std::max(u, ar.lo), ar.hi), qy->dtype));
        continue;
      }
      const float v = round_p(fused ? (*fused)(u) : u, p);
      if (qy)
        yq.codes[i] = qy->quantize(v);
      else
        y.f[i] = v;
    }
    if (qy) {
      set_codes(yn, std::move(yq));
      return;
    }
    EValue& ev = env[yn];
    ev.real = std::move(y);
    ev.has_codes = false;
  }

  std::vector<Tensor> call_kernel(const Node& n, const std::vector<const Tensor*>& ins) {
    const auto& table = interp::kernel_table();
    auto it = table.find(n.op_type);
    if (!n.domain.empty() || it == table.end())
      fail(n, "the reference interpreter has no kernel for this op");
    interp::KernelContext ctx{n, g_.opset, ins, std::vector<Tensor>(n.outputs.size())};
    it->second(ctx);
    return std::move(ctx.out);
  }

  std::vector<Tensor> compute_fp32(const Node& n, const std::vector<const Tensor*>& ins) {
    if (n.domain == kNpuDomain) {
      if (n.op_type == "Transpose" && n.attr_int(kLayoutChange, 0)) return {*ins.at(0)};
      if (n.op_type == "Gelu" || n.op_type == "Silu") {
        Tensor t = *ins.at(0);
        for (auto& v : t.f) v = n.op_type == "Gelu" ? num::gelu(v) : v * num::sigmoid(v);
        return {t};
      }
      // The interpreter has no RMSNormalization (ONNX 1.12): the row-wise kernel's steps in fp32.
      if (const auto rows = rowwise_form(g_, n); rows && is_rmsnorm(n))
        return {rowwise_layer(n, *rows, ins, Precision::kFp32)};
      fail(n, "unknown npu-domain op");
    }
    const bool matrix = is_matrix_op(n) || (n.domain.empty() && n.op_type == "ConvTranspose");
    const bool elementwise_act = !matrix && n.has_attr(kActivation);  // e.g. Add -> Relu fused
    const bool epilogue =
        elementwise_act || (matrix && (n.has_attr(kActivation) || n.has_attr(kResidualInput) ||
                                       (n.op_type == "MatMul" && n.has_input(2))));
    if (!epilogue) return call_kernel(n, ins);
    // Fused node: core, then + bias (MatMul), + residual, activation.
    Node core = n;
    const size_t core_inputs = elementwise_act         ? n.inputs.size()
                               : n.op_type == "MatMul" ? 2
                                                       : std::min<size_t>(3, n.inputs.size());
    core.inputs.resize(core_inputs);
    core.attrs.erase(kActivation);
    core.attrs.erase(kResidualInput);
    std::vector<const Tensor*> core_ins(ins.begin(), ins.begin() + core_inputs);
    std::vector<Tensor> out = call_kernel(core, core_ins);
    Tensor& y = out.at(0);
    if (matrix && n.op_type == "MatMul" && n.has_input(2)) {
      const Tensor& b = *ins[2];
      const int64_t N = y.shape.back();
      for (size_t k = 0; k < y.f.size(); ++k) y.f[k] += b.f[b.size() == 1 ? 0 : k % N];
    }
    if (n.has_attr(kResidualInput)) {
      const Tensor& r = *ins.at(3);
      if (r.f.size() != y.f.size()) fail(n, "residual shape does not match the output");
      for (size_t k = 0; k < y.f.size(); ++k) y.f[k] += r.f[k];
    }
    const std::string a = n.attr_string(kActivation, "");
    if (matrix && !a.empty() && pre_observer_) pre_observer_(n, y);
    if (!a.empty()) {
      const FusedAct f(n, a);
      for (auto& v : y.f) v = f(v);
    }
    return out;
  }

  const Graph& g_;
  const PrecisionPlan& plan_;
  bool keep_all_ = false;
  PreActivationObserver pre_observer_;
  std::map<std::string, int> uses_;
  std::set<std::string> outputs_;
};

}  // namespace

std::map<std::string, Tensor> emulate(const Graph& g, const PrecisionPlan& plan, const Sample& inputs,
                                      const EmulationObserver& observer,
                                      const PreActivationObserver& pre_observer) {
  Emulator e(g, plan);
  e.run(inputs, observer, pre_observer);
  std::map<std::string, Tensor> out;
  for (const auto& o : g.outputs) {
    const Value& v = g.value(o);
    out[o] = v.is_constant() ? *v.constant : e.env.at(o).real;
  }
  return out;
}

bool is_code_function(const Graph& g, const Node& n) {
  static const std::set<std::string> onnx = {
      "Sigmoid",     "Tanh",      "Exp",       "Erf",  "Sqrt", "Reciprocal",     "Abs",      "Neg",
      "HardSigmoid", "HardSwish", "LeakyRelu", "Clip", "Relu", "Gelu",           "Softplus", "Softsign",
      "Elu",         "Selu",      "Celu",      "Mish", "Log",  "ThresholdedRelu"};
  const bool known = n.domain.empty()
                         ? onnx.count(n.op_type) && interp::kernel_table().count(n.op_type)
                         : n.domain == kNpuDomain && (n.op_type == "Gelu" || n.op_type == "Silu");
  if (!known || n.outputs.size() != 1 || n.inputs.empty() || n.inputs[0].empty() || n.has_attr(kActivation))
    return false;
  for (size_t k = 1; k < n.inputs.size(); ++k)
    if (!n.inputs[k].empty() && !g.value(n.inputs[k]).is_constant()) return false;
  return !g.value(n.inputs[0]).is_constant();
}

namespace {

// Node n of `op_type` (ONNX domain, no fused activation, these many inputs and outputs) is int8 under the
// integer scheme with every input and output a runtime value stored as int8/uint8 codes: their QParams, in
// node order (inputs, then outputs); empty otherwise.
std::vector<const QParams*> integer_operands(const Graph& g, const PrecisionPlan& plan, const Node& n,
                                             const char* op_type, size_t inputs, bool clamp_ok = false) {
  if (plan.int8_vector != Int8Vector::kInteger || plan.precision_of(n.name) != Precision::kInt8) return {};
  const std::string act = n.attr_string(kActivation, "");
  if (!n.domain.empty() || n.op_type != op_type || n.inputs.size() != inputs || n.outputs.size() != 1 ||
      !(act.empty() || (clamp_ok && (act == "Relu" || act == "Clip"))))
    return {};
  std::vector<const QParams*> q;
  for (const std::vector<std::string>* names : {&n.inputs, &n.outputs}) {
    for (const std::string& v : *names) {
      if (v.empty() || !g.has_value(v) || g.value(v).is_constant() || !is_float(g.value(v).dtype)) return {};
      auto it = plan.values.find(v);
      if (it == plan.values.end() ||
          !(it->second.dtype == isa::DType::kInt8 || it->second.dtype == isa::DType::kUint8))
        return {};
      q.push_back(&it->second);
    }
  }
  return q;
}

}  // namespace

std::optional<num::QuantizedMultiplier> integer_mul(const Graph& g, const PrecisionPlan& plan,
                                                    const Node& n) {
  const std::vector<const QParams*> q = integer_operands(g, plan, n, "Mul", 2);
  if (q.empty()) return std::nullopt;
  return single_rounding_multiplier(static_cast<double>(q[0]->scale) * q[1]->scale / q[2]->scale);
}

std::optional<num::QuantizedMultiplier> integer_global_average_pool(const Graph& g, const PrecisionPlan& plan,
                                                                    const Node& n) {
  const std::vector<const QParams*> q = integer_operands(g, plan, n, "GlobalAveragePool", 1);
  if (q.empty()) return std::nullopt;
  const Value& x = g.value(n.inputs[0]);
  if (!x.shape_known || x.shape.size() != 4) return std::nullopt;
  const int64_t hw = x.shape[2] * x.shape[3];
  if (hw < 1 || hw > (int64_t{1} << 23)) return std::nullopt;  // 255 * H*W in int32
  const double real = static_cast<double>(q[0]->scale) / (static_cast<double>(q[1]->scale) * hw);
  if (!(real < 1.0)) return std::nullopt;
  return single_rounding_multiplier(real);
}

std::optional<IntegerAdd> integer_add(const Graph& g, const PrecisionPlan& plan, const Node& n) {
  const bool sub = n.op_type == "Sub";
  const std::vector<const QParams*> q = integer_operands(g, plan, n, sub ? "Sub" : "Add", 2, true);
  if (q.empty()) return std::nullopt;
  const double m = 2.0 * std::max(q[0]->scale, q[1]->scale);
  IntegerAdd r;
  r.subtract = sub;
  for (size_t k = 0; k < 2; ++k) {
    std::optional<num::QuantizedMultiplier> s = num::try_quantize_multiplier(q[k]->scale / m);
    // A scale 2^20 times below the other's rounds to nothing on the common grid: the float rule then.
    if (!s || s->multiplier == 0 || s->shift < 0 || s->shift > kAddLeftShift) return std::nullopt;
    s->shift -= kAddLeftShift;
    (k == 0 ? r.a : r.b) = *s;
  }
  const std::optional<num::QuantizedMultiplier> o =
      num::try_quantize_multiplier(m / (std::ldexp(1.0, kAddLeftShift) * q[2]->scale));
  if (!o || o->multiplier == 0 || o->shift < -31 || o->shift > 31) return std::nullopt;
  r.out = *o;
  // A fused Relu / Clip: the clamp in y's codes (quantize is monotone, so clamping the codes is quantizing
  // the clamped value).
  const std::string act = n.attr_string(kActivation, "");
  r.lo = q[2]->qmin(), r.hi = q[2]->qmax();
  if (act == "Relu") r.lo = std::max(r.lo, q[2]->zero_point);
  if (act == "Clip") {
    r.lo = std::max(r.lo, q[2]->quantize(n.attr_float(kActMin, -INFINITY)));
    r.hi = std::min(r.hi, q[2]->quantize(n.attr_float(kActMax, INFINITY)));
  }
  return r;
}

std::optional<IntegerAveragePool> integer_average_pool(const Graph& g, const PrecisionPlan& plan,
                                                       const Node& n) {
  const std::vector<const QParams*> q = integer_operands(g, plan, n, "AveragePool", 1);
  if (q.empty()) return std::nullopt;
  const Value &x = g.value(n.inputs[0]), &y = g.value(n.outputs[0]);
  if (!x.shape_known || !y.shape_known || x.shape.size() != 4 || y.shape.size() != 4) return std::nullopt;
  const std::vector<int64_t> k = n.attr_ints("kernel_shape", {}), st = n.attr_ints("strides", {1, 1});
  const std::vector<int64_t> dil = n.attr_ints("dilations", {1, 1});
  if (k.size() != 2 || st.size() != 2 || dil != std::vector<int64_t>{1, 1}) return std::nullopt;
  const int64_t H = x.shape[2], W = x.shape[3];
  IntegerAveragePool r;
  r.kh = k[0], r.kw = k[1], r.sh = st[0], r.sw = st[1], r.oh = y.shape[2], r.ow = y.shape[3];
  if (r.kh * r.kw > (int64_t{1} << 23)) return std::nullopt;  // 255 * the window in int32
  int64_t pb = 0, pr = 0;
  const std::string ap = n.attr_string("auto_pad", "NOTSET");
  if (ap == "SAME_UPPER" || ap == "SAME_LOWER") {
    const int64_t ph = std::max<int64_t>(0, (r.oh - 1) * r.sh + r.kh - H);
    const int64_t pw = std::max<int64_t>(0, (r.ow - 1) * r.sw + r.kw - W);
    r.pt = ap == "SAME_UPPER" ? ph / 2 : ph - ph / 2;
    r.pl = ap == "SAME_UPPER" ? pw / 2 : pw - pw / 2;
    pb = ph - r.pt, pr = pw - r.pl;
  } else if (ap == "NOTSET") {
    const std::vector<int64_t> p = n.attr_ints("pads", {0, 0, 0, 0});
    if (p.size() != 4) return std::nullopt;
    r.pt = p[0], r.pl = p[1], pb = p[2], pr = p[3];
  }
  const bool include_pad = n.attr_int("count_include_pad", 0) != 0;
  // The divisor at one output coordinate along one axis: the window's extent inside [lo, hi).
  auto extent = [](int64_t start, int64_t size, int64_t lo, int64_t hi) {
    return std::max<int64_t>(0, std::min(start + size, hi) - std::max(start, lo));
  };
  const double ratio = static_cast<double>(q[0]->scale) / q[1]->scale;
  for (int64_t oy = 0; oy < r.oh; ++oy) {
    for (int64_t ox = 0; ox < r.ow; ++ox) {
      const int64_t y0 = oy * r.sh - r.pt, x0 = ox * r.sw - r.pl;
      const int64_t d = include_pad ? extent(y0, r.kh, -r.pt, H + pb) * extent(x0, r.kw, -r.pl, W + pr)
                                    : extent(y0, r.kh, 0, H) * extent(x0, r.kw, 0, W);
      std::optional<num::QuantizedMultiplier> m =
          d > 0 ? single_rounding_multiplier(ratio / static_cast<double>(d)) : num::QuantizedMultiplier{};
      if (!m) return std::nullopt;
      r.scale.push_back(*m);
    }
  }
  return r;
}

std::optional<IntegerConcat> integer_concat(const Graph& g, const PrecisionPlan& plan, const Node& n) {
  if (plan.int8_vector != Int8Vector::kInteger || plan.precision_of(n.name) != Precision::kInt8) return {};
  if (!n.domain.empty() || n.op_type != "Concat" || n.outputs.size() != 1 || n.inputs.empty()) return {};
  auto codes = [&](const std::string& v) -> const QParams* {
    if (v.empty() || !g.has_value(v) || g.value(v).is_constant() || !is_float(g.value(v).dtype))
      return nullptr;
    auto it = plan.values.find(v);
    return it != plan.values.end() &&
                   (it->second.dtype == isa::DType::kInt8 || it->second.dtype == isa::DType::kUint8)
               ? &it->second
               : nullptr;
  };
  const QParams* qy = codes(n.outputs[0]);
  if (!qy) return {};
  IntegerConcat r;
  for (const std::string& in : n.inputs) {
    const QParams* qx = codes(in);
    if (!qx) return {};
    if (qx->scale == qy->scale && qx->zero_point == qy->zero_point && qx->dtype == qy->dtype) {
      r.emplace_back();
      continue;
    }
    const std::optional<num::QuantizedMultiplier> m =
        single_rounding_multiplier(static_cast<double>(qx->scale) / qy->scale);
    if (!m) return {};
    r.push_back(*m);
  }
  return r;
}

std::optional<num::QuantizedMultiplier> single_rounding_multiplier(double real) {
  // A shift >= 0 would round twice (SaturatingRoundingDoublingHighMul, then RoundingDivideByPOT): below 1 the
  // whole scale goes into the multiplier, unnormalised, and the shift stays 0. At or above 1 the
  // normalised form shifts left first (exact for the int32 products it is given), then rounds once.
  if (!(real >= 0.0) || !std::isfinite(real)) return std::nullopt;
  if (real >= 1.0) return num::try_quantize_multiplier(real);
  num::QuantizedMultiplier m;
  m.multiplier = static_cast<int32_t>(std::min<long long>(std::llround(std::ldexp(real, 31)), INT32_MAX));
  m.shift = 0;
  return m;
}

ClipRange table_input_range(const Node& n, const std::string& act, ClipRange r, const QParams& y) {
  constexpr int kPoints = 4096;
  const double step = (static_cast<double>(r.hi) - r.lo) / kPoints;
  if (!(step > 0) || !std::isfinite(step)) return r;
  const FusedAct f(n, act);
  auto code = [&](int i) { return y.quantize(f(static_cast<float>(r.lo + step * i))); };
  int a = 0, b = kPoints;  // [lo, lo + a step] and [lo + b step, hi] each give one code
  while (a < kPoints && code(a + 1) == code(0)) ++a;
  while (b > a && code(b - 1) == code(kPoints)) --b;
  const double lo = r.lo + step * a, hi = r.lo + step * b;
  const double margin = (hi - lo) / 255.0;
  return ClipRange{static_cast<float>(std::max<double>(r.lo, lo - margin)),
                   static_cast<float>(std::min<double>(r.hi, hi + margin))};
}

std::vector<int32_t> epilogue_lut(const Node& n, const std::string& act, const QParams& pre,
                                  const QParams& y) {
  return epilogue_lut(n, act, pre, y, pre.qmin(), isa::kLutEntries);
}

std::vector<int32_t> epilogue_lut(const Node& n, const std::string& act, const QParams& pre, const QParams& y,
                                  int32_t base, int entries) {
  std::vector<int32_t> table(static_cast<size_t>(entries));
  const FusedAct f(n, act);
  for (int k = 0; k < entries; ++k) table[static_cast<size_t>(k)] = y.quantize(f(pre.dequantize(base + k)));
  return table;
}

QParams refined_table_grid(const QParams& q8, int refine) {
  QParams q;
  q.dtype = isa::DType::kInt16;
  q.scale = static_cast<float>(static_cast<double>(q8.scale) / refine);
  q.zero_point = lut_epilogue_base(refine) + (q8.zero_point - q8.qmin()) * refine;
  return q;
}

std::vector<int32_t> activation_lut(const Graph& g, const Node& n, const QParams& x, const QParams& y) {
  if (x.dtype != isa::DType::kInt8 && x.dtype != isa::DType::kUint8)
    fail(n, "a lookup table reads int8 or uint8 codes");
  Tensor codes(DataType::kFloat32, {isa::kLutEntries});
  for (int k = 0; k < isa::kLutEntries; ++k) codes.f[static_cast<size_t>(k)] = x.dequantize(x.qmin() + k);
  std::vector<const Tensor*> ins(n.inputs.size(), nullptr);
  ins[0] = &codes;
  for (size_t k = 1; k < n.inputs.size(); ++k)
    if (!n.inputs[k].empty()) ins[k] = g.value(n.inputs[k]).constant.get();
  static const PrecisionPlan kFp32;
  const std::vector<Tensor> out = Emulator(g, kFp32).fp32_outputs(n, ins);
  std::vector<int32_t> table(static_cast<size_t>(isa::kLutEntries));
  for (size_t k = 0; k < table.size(); ++k) table[k] = y.quantize(out.at(0).f[k]);
  return table;
}

std::vector<Tensor> emulate_node(const Graph& g, const PrecisionPlan& plan, const Node& node,
                                 const std::function<const Tensor&(const std::string& name)>& input) {
  Emulator e(g, plan);
  for (const std::string& in : node.inputs)
    if (!in.empty() && !g.value(in).is_constant()) e.env[in].real = input(in);
  e.run_node(node);
  std::vector<Tensor> out;
  for (const std::string& o : node.outputs) out.push_back(o.empty() ? Tensor() : std::move(e.env.at(o).real));
  return out;
}

int correct_output_bias(const Graph& g, PrecisionPlan& plan, const std::vector<Sample>& samples) {
  if (samples.empty()) return 0;
  PrecisionPlan fp32;
  fp32.model = Precision::kFp32;
  std::vector<Emulator> ref, quant;
  ref.reserve(samples.size());
  quant.reserve(samples.size());
  for (const Sample& s : samples) {
    ref.emplace_back(g, fp32);
    ref.back().begin(s);
    quant.emplace_back(g, plan);
    quant.back().begin(s);
  }
  int corrected = 0;
  for (const Node& n : g.nodes) {
    for (size_t k = 0; k < samples.size(); ++k) {
      ref[k].run_node(n);
      quant[k].run_node(n);
    }
    auto it = plan.layers.find(n.name);
    // The fused activation's linear piece: the values strictly inside (lo, hi), where the output is
    // slope * accumulator + constant, so a mean output shift there is slope x the accumulator's.
    double lo = -INFINITY, hi = INFINITY, slope = 1.0;
    bool linear_piece = it != plan.layers.end();
    if (linear_piece) {
      const std::string& act = it->second.activation;
      if (act == "Relu") {
        lo = 0;
      } else if (act == "Clip") {
        lo = n.attr_float(kActMin, -INFINITY);
        hi = n.attr_float(kActMax, INFINITY);
      } else if (act == "HardSigmoid") {
        lo = 0, hi = 1, slope = n.attr_float(kAlpha, 0.2f);
      } else if (!act.empty()) {
        linear_piece = false;
      }
    }
    if (linear_piece && plan.precision_of(n.name) == Precision::kInt8 && it->second.weight_is_constant &&
        !it->second.weight_q.empty() && slope > 0) {
      LayerQuant& L = it->second;
      const bool conv = n.op_type == "Conv" || n.op_type == "ConvTranspose";  // channels on dim 1
      std::vector<double> diff(L.bias.size(), 0.0);
      std::vector<int64_t> count(L.bias.size(), 0);
      bool fits = true;
      for (size_t k = 0; k < samples.size() && fits; ++k) {
        const Tensor& q = quant[k].env.at(L.output).real;
        const Tensor& r = ref[k].env.at(L.output).real;
        if (q.f.size() != r.f.size() || q.shape.empty()) {
          fits = false;
          break;
        }
        const int64_t channels = conv ? q.shape.at(1) : q.shape.back();
        if (channels != static_cast<int64_t>(diff.size())) {
          fits = false;
          break;
        }
        int64_t inner = 1;
        if (conv)
          for (size_t d = 2; d < q.shape.size(); ++d) inner *= q.shape[d];
        for (size_t e = 0; e < q.f.size(); ++e) {
          const double qv = q.f[e], rv = r.f[e];
          if (!(qv > lo && qv < hi && rv > lo && rv < hi)) continue;
          const size_t c = static_cast<size_t>((static_cast<int64_t>(e) / inner) % channels);
          diff[c] += qv - rv;
          ++count[c];
        }
      }
      if (fits) {
        for (size_t c = 0; c < diff.size(); ++c) {
          if (count[c] == 0) continue;
          const double shift =
              std::nearbyint(diff[c] / static_cast<double>(count[c]) / slope / L.acc_scale[c]);
          const double b = std::clamp(static_cast<double>(L.bias[c]) - shift, -2147483648.0, 2147483647.0);
          const int64_t applied = static_cast<int64_t>(L.bias[c]) - static_cast<int64_t>(b);
          L.bias[c] = static_cast<int32_t>(b);
          L.bias_folded[c] =
              static_cast<int32_t>(static_cast<uint32_t>(L.bias_folded[c]) - static_cast<uint32_t>(applied));
        }
        for (auto& e : quant) e.run_node(n);  // again, with the corrected bias
        ++corrected;
      }
    }
    for (size_t k = 0; k < samples.size(); ++k) {
      ref[k].release_dead(n);
      quant[k].release_dead(n);
    }
  }
  return corrected;
}

namespace {

bool same_qparams(const QParams& a, const QParams& b) {
  return a.scale == b.scale && a.zero_point == b.zero_point && a.dtype == b.dtype;
}

// The first node (index into g.nodes) one of whose inputs or outputs has other QParams in `b` than in `a`;
// g.nodes.size() when none has.
size_t first_changed_node(const Graph& g, const PrecisionPlan& a, const PrecisionPlan& b) {
  auto differs = [&](const std::string& v) {
    if (v.empty()) return false;
    auto ia = a.values.find(v), ib = b.values.find(v);
    if ((ia == a.values.end()) != (ib == b.values.end())) return true;
    return ia != a.values.end() && !same_qparams(ia->second, ib->second);
  };
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    for (const auto& v : n.inputs)
      if (differs(v)) return i;
    for (const auto& v : n.outputs)
      if (differs(v)) return i;
  }
  return g.nodes.size();
}

bool same_range(ClipRange a, ClipRange b) {
  const double tol =
      1e-6 * std::max({1e-30f, std::fabs(a.lo), std::fabs(a.hi), std::fabs(b.lo), std::fabs(b.hi)});
  return std::fabs(a.lo - b.lo) <= tol && std::fabs(a.hi - b.hi) <= tol;
}

}  // namespace

RangeSearch search_ranges(const Graph& g, const PrecisionPlan& unquantized,
                          const std::map<std::string, TensorStats>& stats, const QuantOptions& options,
                          const std::map<std::string, QuantizedWeights>& given,
                          const std::vector<Sample>& samples) {
  const auto t0 = std::chrono::steady_clock::now();
  RangeSearch result;
  if (samples.empty()) return result;
  QuantOptions opts = options;
  opts.range_overrides.clear();
  std::vector<RangedValue> ranged;
  PrecisionPlan plan = unquantized;
  quantize_plan(g, plan, stats, opts, given, &ranged);
  // The candidates of each value, the method's range first, ordered by the first node reading or writing it.
  std::map<std::string, size_t> first_use;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    for (const auto& v : g.nodes[i].inputs) first_use.emplace(v, i);
    for (const auto& v : g.nodes[i].outputs) first_use.emplace(v, i);
  }
  struct Search {
    size_t order;
    std::string value;
    std::vector<ClipRange> ranges;
  };
  std::vector<Search> searches;
  for (const RangedValue& r : ranged) {
    auto st = stats.find(r.value);
    if (r.saturating || st == stats.end() || !first_use.count(r.value)) continue;
    CalibrationOptions co = opts.calibration;
    std::vector<ClipRange> ranges = {choose_range(st->second, co, r.symmetric)};
    co.method = CalibrationMethod::kMinMax;
    const ClipRange minmax = choose_range(st->second, co, r.symmetric);
    if (same_range(ranges[0], minmax)) continue;  // nothing clipped
    co.method = CalibrationMethod::kMse;
    for (const ClipRange c : {choose_range(st->second, co, r.symmetric), minmax})
      if (std::none_of(ranges.begin(), ranges.end(), [&](ClipRange x) { return same_range(x, c); }))
        ranges.push_back(c);
    searches.push_back({first_use.at(r.value), r.value, std::move(ranges)});
  }
  std::stable_sort(searches.begin(), searches.end(),
                   [](const Search& a, const Search& b) { return a.order < b.order; });
  // The values scored: each graph output, or the logits a final Softmax / LogSoftmax reads (the
  // probabilities' error is concentrated on the few inputs near a tie, so scoring them fits the ranges to
  // those few: on PP-OCR cls it cut the probabilities' error on the 8 scoring inputs 22x and lost lines
  // elsewhere, docs/quantization.md "Ranges chosen on the model's error").
  std::set<std::string> scored;
  for (const auto& o : g.outputs) {
    const int p = g.producer(o);
    const Node* n = p >= 0 ? &g.nodes[static_cast<size_t>(p)] : nullptr;
    const bool softmax = n && n->domain.empty() && (n->op_type == "Softmax" || n->op_type == "LogSoftmax") &&
                         !n->inputs.empty() && g.has_value(n->inputs[0]) &&
                         !g.value(n->inputs[0]).is_constant();
    scored.insert(softmax ? n->inputs[0] : o);
  }
  // fp32 values scored, per sample.
  PrecisionPlan fp32;
  fp32.model = Precision::kFp32;
  std::vector<std::map<std::string, Tensor>> refs(samples.size());
  for (size_t k = 0; k < samples.size(); ++k)
    emulate(g, fp32, samples[k], [&](const Node& n, const std::vector<const Tensor*>& outs) {
      for (size_t j = 0; j < outs.size() && j < n.outputs.size(); ++j)
        if (outs[j] && scored.count(n.outputs[j])) refs[k][n.outputs[j]] = *outs[j];
    });
  // The node after which every scored value is known: the runs stop there.
  size_t last = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (const auto& o : g.nodes[i].outputs)
      if (scored.count(o)) last = i;
  // `plan` is what the emulators read: the committed plan, or a candidate while it is scored.
  std::vector<Emulator> at;  // all samples, run up to node `pos` under the committed plan
  at.reserve(samples.size());
  for (const Sample& s : samples) {
    at.emplace_back(g, plan);
    at.back().begin(s);
  }
  size_t pos = 0;
  // Per sample, the scored values' squared error when the emulators (at node `start`) run on under `plan`.
  auto error_from = [&](size_t start) {
    std::vector<double> errs(samples.size(), 0.0);
    for (size_t k = 0; k < samples.size(); ++k) {
      double& err = errs[k];
      Emulator e = at[k];
      for (size_t i = start; i <= last && i < g.nodes.size(); ++i) {
        const Node& n = g.nodes[i];
        e.run_node(n);
        ++result.node_runs;
        for (const auto& o : n.outputs) {
          if (!scored.count(o)) continue;
          const Tensor& q = e.env.at(o).real;
          const Tensor& r = refs[k].at(o);
          if (!r.floating() || q.f.size() != r.f.size()) continue;
          for (size_t j = 0; j < q.f.size(); ++j) {
            const double d = static_cast<double>(q.f[j]) - r.f[j];
            err += d * d;
          }
        }
        e.release_dead(n);
      }
    }
    return errs;
  };
  std::vector<double> signal(samples.size(), 0.0);
  for (size_t k = 0; k < samples.size(); ++k)
    for (const auto& [v, r] : refs[k])
      for (float x : r.f) signal[k] += static_cast<double>(x) * x;
  auto sqnr_db = [&](const std::vector<double>& errs) {
    std::vector<double> db(errs.size());
    for (size_t k = 0; k < errs.size(); ++k)
      db[k] = 10 * std::log10(std::max(signal[k], 1e-300) / std::max(errs[k], 1e-30 * signal[k] + 1e-300));
    return db;
  };
  auto total = [](const std::vector<double>& errs) {
    double t = 0;
    for (double e : errs) t += e;
    return t;
  };
  auto advance = [&](size_t to) {
    for (; pos < to; ++pos)
      for (Emulator& e : at) {
        e.run_node(g.nodes[pos]);
        e.release_dead(g.nodes[pos]);
      }
  };
  std::vector<double> committed_error = error_from(0);
  result.default_error = total(committed_error);
  for (const Search& s : searches) {
    const PrecisionPlan committed = plan;
    std::vector<PrecisionPlan> plans;
    size_t start = g.nodes.size();
    for (size_t c = 1; c < s.ranges.size(); ++c) {
      QuantOptions o = opts;
      o.range_overrides[s.value] = s.ranges[c];
      PrecisionPlan p = unquantized;
      quantize_plan(g, p, stats, o, given);
      start = std::min(start, first_changed_node(g, committed, p));
      plans.push_back(std::move(p));
    }
    // A value whose candidates change no QParams, or whose first changed node has already run (a Concat
    // group quantized with an earlier member's range), is left.
    if (start > last || start < pos) continue;
    ++result.values;
    advance(start);
    std::vector<std::vector<double>> errors = {committed_error};
    for (size_t c = 0; c < plans.size(); ++c) {
      plan = plans[c];
      ++result.candidates;
      errors.push_back(error_from(start));
    }
    // A candidate replaces the method's range only when it gains beyond the input-to-input noise (the
    // recipe choice's rule): a gain on one or two of the scoring inputs fits the ranges to them.
    std::vector<std::vector<double>> db;
    for (const auto& e : errors) db.push_back(sqnr_db(e));
    const size_t best = choose_recipe(db, kRecipeMarginDb);
    if (best == 0) {
      plan = committed;
      continue;
    }
    plan = std::move(plans[best - 1]);
    opts.range_overrides[s.value] = s.ranges[best];
    committed_error = errors[best];
  }
  result.ranges = opts.range_overrides;
  result.chosen_error = total(committed_error);
  result.graph_runs = static_cast<double>(result.node_runs) /
                      static_cast<double>(std::max<size_t>(1, g.nodes.size() * samples.size()));
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return result;
}

std::map<std::string, Int8Tensor> expected_int8_tensors(const Graph& g, const PrecisionPlan& plan,
                                                        const Sample& inputs) {
  Emulator e(g, plan);
  e.keep_all();
  e.run(inputs, nullptr);
  std::map<std::string, Int8Tensor> out;
  for (const Node& n : g.nodes) {
    if (plan.precision_of(n.name) != Precision::kInt8) continue;
    for (const auto& o : n.outputs) {
      auto it = e.env.find(o);
      if (it != e.env.end() && it->second.has_codes) out[o] = it->second.q;
    }
  }
  return out;
}

}  // namespace npusim::compiler::quant
