#include "compiler/quant/quantize.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <set>
#include <stdexcept>

#include "compiler/ops/conv_transpose.h"
#include "compiler/passes/lowered.h"
#include "compiler/quant/emulate.h"

namespace npusim::compiler::quant {

using isa::numerics::try_quantize_multiplier;

QParams qparams_for_range(ClipRange r, bool symmetric, isa::DType asymmetric_dtype) {
  QParams q;
  double lo = std::min<double>(0.0, r.lo), hi = std::max<double>(0.0, r.hi);
  if (symmetric) {
    q.dtype = isa::DType::kInt8;
    const double amax = std::max(-lo, hi);
    q.scale = amax > 0 ? static_cast<float>(amax / 127.0) : 1.0f;
    q.zero_point = 0;
    return q;
  }
  q.dtype = asymmetric_dtype;
  const double qmin = static_cast<double>(q.qmin()), qmax = static_cast<double>(q.qmax());
  if (hi - lo <= 0) {
    q.scale = 1.0f;
    q.zero_point = asymmetric_dtype == isa::DType::kUint8 ? 0 : 0;
    return q;
  }
  q.scale = static_cast<float>((hi - lo) / (qmax - qmin));
  const double zp = qmin - std::nearbyint(lo / q.scale);
  q.zero_point = static_cast<int32_t>(std::clamp(zp, qmin, qmax));
  return q;
}

static bool float_value(const Graph& g, const std::string& name);

QParams int16_qparams(ClipRange r) {
  QParams q;
  q.dtype = isa::DType::kInt16;
  q.zero_point = 0;
  const double amax = std::max(-std::min<double>(0.0, r.lo), std::max<double>(0.0, r.hi));
  q.scale = amax > 0 ? static_cast<float>(amax / 32767.0) : 1.0f;
  return q;
}

std::string int16_input_problem(const Graph& g, const PrecisionPlan& plan, const Node& n) {
  const std::string& x = n.inputs.at(0);
  if (!float_value(g, x)) return "its input '" + x + "' is not a floating-point activation";
  if (plan.values.count(x)) return "its input '" + x + "' carries the model's own int8 scales";
  if (n.inputs.size() < 2 || !g.value(n.inputs[1]).is_constant())
    return "int16 activations need constant weights (a runtime B operand is int8)";
  const int p = g.producer(x);
  if (p >= 0) {
    const Node& w = g.nodes[static_cast<size_t>(p)];
    if (plan.precision_of(w.name) == Precision::kInt8 && !is_int8_layer_op(w))
      return "its input '" + x + "' is written by '" + w.name + "' (" + w.op_type +
             "), an int8 vector node, which writes 8-bit codes only";
  }
  for (int r : g.consumers(x)) {
    const Node& m = g.nodes[static_cast<size_t>(r)];
    if (plan.precision_of(m.name) != Precision::kInt8) continue;  // float readers dequantize any codes
    const bool as_input = is_int8_layer_op(m) && m.inputs.at(0) == x && m.inputs.size() >= 2 &&
                          g.value(m.inputs[1]).is_constant() && m.inputs[1] != x;
    const bool as_residual = is_int8_layer_op(m) && m.has_attr(kResidualInput) && m.inputs.size() > 3 &&
                             m.inputs[3] == x && m.inputs.at(0) != x;
    if (!as_input && !as_residual)
      return "its input '" + x + "' is also read by '" + m.name + "' (" + m.op_type +
             "), an int8 node that reads 8-bit codes only";
  }
  return "";
}

std::string to_string(WeightRange r) {
  return r == WeightRange::kMse ? "mse" : r == WeightRange::kOutputMse ? "output-mse" : "minmax";
}

WeightRange parse_weight_range(const std::string& text) {
  if (text == "minmax" || text == "min-max") return WeightRange::kMinMax;
  if (text == "mse") return WeightRange::kMse;
  if (text == "output-mse") return WeightRange::kOutputMse;
  throw std::invalid_argument("unknown weight range '" + text + "' (expected minmax, mse or output-mse)");
}

BiasCorrection effective_bias_correction(const QuantOptions& options) {
  return options.empirical_bias_correction ? BiasCorrection::kNone : options.bias_correction;
}

std::string bias_correction_name(const QuantOptions& options) {
  if (options.empirical_bias_correction) return "empirical";
  switch (options.bias_correction) {
    case BiasCorrection::kNonNegativeInputs:
      return "nonnegative-inputs";
    case BiasCorrection::kAll:
      return "all";
    case BiasCorrection::kNone:
      break;
  }
  return "none";
}

std::vector<int64_t> weight_input_channels(const Node& n, const Tensor& w, int channel_axis, int64_t inputs) {
  const int64_t size = w.size();
  std::vector<int64_t> in(static_cast<size_t>(size));
  if (n.op_type == "Conv") {
    // W = [O, C_in / groups, k...]: output o reads the input channels of its group.
    if (w.rank() < 3 || channel_axis != 0 || w.shape[1] <= 0 || inputs % w.shape[1] != 0) return {};
    const int64_t per_group_in = w.shape[1], groups = inputs / per_group_in;
    if (w.shape[0] % groups != 0) return {};
    const int64_t out_per_group = w.shape[0] / groups, window = size / (w.shape[0] * per_group_in);
    for (int64_t k = 0; k < size; ++k) {
      const int64_t o = k / (per_group_in * window);
      in[k] = (o / out_per_group) * per_group_in + (k / window) % per_group_in;
    }
    return in;
  }
  if (w.rank() < 2) return {};
  if (channel_axis == 0) {  // Gemm with transB: [N, K]
    if (w.rank() != 2 || w.shape[1] != inputs) return {};
    for (int64_t k = 0; k < size; ++k) in[k] = k % inputs;
    return in;
  }
  const int64_t cols = w.shape.back(), rows = w.shape[w.rank() - 2];  // [..., K, N]
  if (rows != inputs) return {};
  for (int64_t k = 0; k < size; ++k) in[k] = (k / cols) % rows;
  return in;
}

// The clip of `values` (max |value| = amax > 0) that WeightRange::kMse / kOutputMse chooses; `mean` and
// `var` (the inputs' statistics per value, or empty) select kOutputMse's objective.
static double mse_weight_clip(const std::vector<float>& values, const std::vector<double>& mean,
                              const std::vector<double>& var, double amax) {
  const bool output = !mean.empty();
  double best = amax, best_err = std::numeric_limits<double>::infinity();
  for (int step = 100; step >= 50; --step) {
    const double t = amax * step / 100.0;
    const float s = static_cast<float>(t / 127.0);
    double err = 0, shift = 0;
    for (size_t k = 0; k < values.size(); ++k) {
      const float v = values[k];
      const double q = std::clamp(std::nearbyint(static_cast<double>(v / s)), -127.0, 127.0);
      const double d = v - q * s;
      err += output ? d * d * var[k] : d * d;
      if (output) shift += d * mean[k];
    }
    err += shift * shift;
    if (err < best_err) {
      best_err = err;
      best = t;
    }
  }
  return best;
}

QuantizedWeights quantize_weights(const Tensor& w, int axis, bool per_channel, WeightRange range,
                                  const std::vector<double>& input_mean,
                                  const std::vector<double>& input_var) {
  QuantizedWeights r;
  const int64_t n = w.size();
  r.q.resize(n);
  const int64_t channels = w.rank() ? w.shape[axis] : 1;
  int64_t inner = 1;
  for (int64_t d = axis + 1; d < w.rank(); ++d) inner *= w.shape[d];
  auto channel_of = [&](int64_t k) { return (k / inner) % channels; };
  auto group_of = [&](int64_t k) { return per_channel ? channel_of(k) : 0; };
  std::vector<float> amax(channels, 0.0f);
  for (int64_t k = 0; k < n; ++k) {
    float& a = amax[group_of(k)];
    a = std::max(a, std::fabs(w.f[k]));
  }
  if (range != WeightRange::kMinMax) {
    // Per tensor, the output-error objective's mean term would mix output channels: kMse's there.
    const bool output = range == WeightRange::kOutputMse && per_channel &&
                        static_cast<int64_t>(input_mean.size()) == n &&
                        static_cast<int64_t>(input_var.size()) == n;
    const size_t groups = per_channel ? static_cast<size_t>(channels) : 1;
    std::vector<std::vector<float>> values(groups);
    std::vector<std::vector<double>> mean(groups), var(groups);
    for (int64_t k = 0; k < n; ++k) {
      const auto c = static_cast<size_t>(group_of(k));
      values[c].push_back(w.f[k]);
      if (output) {
        mean[c].push_back(input_mean[k]);
        var[c].push_back(input_var[k]);
      }
    }
    for (size_t c = 0; c < groups; ++c)
      if (amax[c] > 0) amax[c] = static_cast<float>(mse_weight_clip(values[c], mean[c], var[c], amax[c]));
  }
  if (!per_channel)
    for (auto& a : amax) a = amax[0];
  r.scale.resize(channels);
  for (int64_t c = 0; c < channels; ++c) r.scale[c] = amax[c] > 0 ? amax[c] / 127.0f : 1.0f;
  for (int64_t k = 0; k < n; ++k) {
    const float s = r.scale[channel_of(k)];
    const double v = std::nearbyint(static_cast<double>(w.f[k] / s));
    r.q[k] = static_cast<int8_t>(std::clamp(v, -127.0, 127.0));
  }
  return r;
}

bool shares_input_qparams(const Node& n) {
  static const std::set<std::string> ops = {
      "MaxPool",   "GlobalMaxPool", "Relu",         "Reshape",      "Flatten", "Squeeze",
      "Unsqueeze", "Transpose",     "Identity",     "Dropout",      "Slice",   "Split",
      "Pad",       "ReduceMax",     "DepthToSpace", "SpaceToDepth", "Expand",  "Tile"};
  if (n.domain == kNpuDomain && n.op_type == "Transpose") return true;
  if (!n.domain.empty()) return false;
  // A nearest-neighbour Resize only copies values (tf_crop_and_resize may also write a fill value).
  if (n.op_type == "Resize" || n.op_type == "Upsample")
    return n.attr_string("mode", "nearest") == "nearest" &&
           n.attr_string("coordinate_transformation_mode", "half_pixel") != "tf_crop_and_resize";
  return ops.count(n.op_type) > 0;
}

int weight_channel_axis(const Node& n, int weight_rank) {
  if (n.op_type == "Conv" || (n.op_type == "Gemm" && n.attr_int("transB", 0) != 0)) return 0;
  return weight_rank - 1;
}

bool is_matrix_op(const Node& n) {
  return n.domain.empty() && (n.op_type == "Conv" || n.op_type == "Gemm" || n.op_type == "MatMul");
}

bool is_int8_layer_op(const Node& n) {
  return is_matrix_op(n) || (n.domain.empty() && n.op_type == "ConvTranspose");
}

static bool float_value(const Graph& g, const std::string& name) {
  return !name.empty() && g.has_value(name) && !g.value(name).is_constant() && is_float(g.value(name).dtype);
}

std::vector<double> weight_rounding_shift(const Node& n, const Tensor& w, const QuantizedWeights& q,
                                          int channel_axis, const std::vector<double>& means,
                                          const Shape& x) {
  if (w.f.empty() || q.q.size() != w.f.size() || means.empty()) return {};
  const int64_t channels = w.shape[channel_axis];
  if (static_cast<int64_t>(q.scale.size()) != channels) return {};
  std::vector<double> shift(static_cast<size_t>(channels), 0.0);
  const int64_t n_in = static_cast<int64_t>(means.size());
  if (n.op_type == "Conv") {
    // W = [O, C_in / groups, k...]: output o reads input channels of its group.
    if (w.rank() < 3 || channel_axis != 0) return {};
    const int64_t per_group_in = w.shape[1];
    if (per_group_in <= 0 || n_in % per_group_in != 0) return {};
    const int64_t groups = n_in / per_group_in;
    if (channels % groups != 0) return {};
    const int64_t out_per_group = channels / groups;
    int64_t window = 1;
    for (int64_t d = 2; d < w.rank(); ++d) window *= w.shape[d];
    // Per kernel tap: the fraction of output positions where it reads inside the input.
    std::vector<double> inside(static_cast<size_t>(window), 1.0);
    if (x.size() == w.shape.size() && (x.size() == 3 || x.size() == 4)) {
      const ConvGeom c = conv_geometry(n, x, w.shape);
      auto count = [](int64_t out, int64_t stride, int64_t pad, int64_t tap, int64_t size) {
        int64_t k = 0;
        for (int64_t o = 0; o < out; ++o) {
          const int64_t at = o * stride - pad + tap;
          if (at >= 0 && at < size) ++k;
        }
        return k;
      };
      for (int64_t a = 0; a < c.kh; ++a)
        for (int64_t b = 0; b < c.kw; ++b)
          inside[static_cast<size_t>(a * c.kw + b)] =
              static_cast<double>(count(c.oh, c.sh, c.pt, a * c.dh, c.h) *
                                  count(c.ow, c.sw, c.pl, b * c.dw, c.w)) /
              static_cast<double>(c.oh * c.ow);
    }
    for (size_t k = 0; k < w.f.size(); ++k) {
      const int64_t o = static_cast<int64_t>(k) / (per_group_in * window);
      const int64_t i =
          (o / out_per_group) * per_group_in + (static_cast<int64_t>(k) / window) % per_group_in;
      const double err = static_cast<double>(q.q[k]) * q.scale[static_cast<size_t>(o)] - w.f[k];
      shift[static_cast<size_t>(o)] += err * means[static_cast<size_t>(i)] * inside[k % window];
    }
    return shift;
  }
  // Gemm / MatMul with a 2-D weight: [K, N] (channels last) or [N, K] (transB, channels first).
  if (w.rank() != 2) return {};
  const bool channels_first = channel_axis == 0;
  const int64_t K = channels_first ? w.shape[1] : w.shape[0];
  if (K != n_in) return {};
  for (size_t k = 0; k < w.f.size(); ++k) {
    const int64_t row = static_cast<int64_t>(k) / w.shape[1], col = static_cast<int64_t>(k) % w.shape[1];
    const int64_t c = channels_first ? row : col, i = channels_first ? col : row;
    const double err = static_cast<double>(q.q[k]) * q.scale[static_cast<size_t>(c)] - w.f[k];
    shift[static_cast<size_t>(c)] += err * means[static_cast<size_t>(i)];
  }
  return shift;
}

std::optional<Tensor> conv_transpose_weights(const Graph& g, const Node& n, std::string& reason) {
  const Value& xv = g.value(n.inputs.at(0));
  const Value& wv = g.value(n.inputs.at(1));
  if (!wv.is_constant() || !wv.constant->floating() || wv.constant->rank() != 4 || xv.shape.size() != 4 ||
      !xv.fully_known()) {
    reason = "int8 ConvTranspose needs a 2-D input of known shape and constant floating-point weights";
    return std::nullopt;
  }
  const Tensor& w = *wv.constant;
  const int64_t groups = n.attr_int("group", 1);
  if (groups <= 0 || xv.shape[1] % groups != 0 || w.shape[0] != xv.shape[1]) {
    reason = "ConvTranspose weights do not match the input channels and group";
    return std::nullopt;
  }
  try {
    (void)conv_transpose_form(n, xv.shape[2], xv.shape[3], w.shape[2], w.shape[3]);
  } catch (const std::invalid_argument& e) {
    reason = e.what();
    return std::nullopt;
  }
  const int64_t cg = w.shape[0] / groups, mg = w.shape[1];
  Tensor t(w.dtype, Shape{mg * groups, cg, w.shape[2], w.shape[3]});
  t.f = conv_transpose_conv_weights(w.f, groups, cg, mg, w.shape[2], w.shape[3]);
  return t;
}

bool build_layer(const Graph& g, const Node& n, PrecisionPlan& plan, const QuantOptions& options,
                 const QuantizedWeights* given, std::string& reason, const TensorStats* input_stats,
                 const TensorStats* pre_stats) {
  LayerQuant L;
  L.node = n.name;
  L.op = n.op_type;
  L.input = n.inputs.at(0);
  L.weight = n.inputs.at(1);
  L.output = n.outputs.at(0);
  const Value& wv = g.value(L.weight);
  L.weight_is_constant = wv.is_constant();
  if (n.op_type == "Gemm") {
    if (n.attr_int("transA", 0) != 0 || n.attr_float("alpha", 1.0f) != 1.0f ||
        n.attr_float("beta", 1.0f) != 1.0f) {
      reason = "int8 Gemm needs transA=0, alpha=beta=1 (run the passes' normalize_gemm first)";
      return false;
    }
  }
  if ((n.op_type == "Conv" || n.op_type == "ConvTranspose") && !L.weight_is_constant) {
    reason = "int8 " + n.op_type + " needs constant weights";
    return false;
  }
  const auto& xq = plan.values.at(L.input);
  int64_t channels = 1;
  std::vector<double> rounding_shift;  // bias correction, empty for none
  if (L.weight_is_constant) {
    Tensor as_conv;  // a ConvTranspose's weights as its equivalent conv's (conv_transpose_weights)
    if (n.op_type == "ConvTranspose") {
      std::optional<Tensor> t = conv_transpose_weights(g, n, reason);
      if (!t) return false;
      as_conv = std::move(*t);
    }
    const Tensor& w = n.op_type == "ConvTranspose" ? as_conv : *wv.constant;
    if (!w.floating()) {
      reason = "weights are not floating point";
      return false;
    }
    L.weight_shape = w.shape;
    L.weight_channel_axis =
        n.op_type == "ConvTranspose" ? 0 : weight_channel_axis(n, static_cast<int>(w.rank()));
    if (w.rank() < 1) {
      reason = "scalar weights";
      return false;
    }
    channels = w.shape[L.weight_channel_axis];
    std::vector<double> tap_mean, tap_var;  // WeightRange::kOutputMse: per weight element
    if (!given && options.weight_range == WeightRange::kOutputMse && input_stats) {
      const bool conv = n.op_type == "Conv";
      const auto mean = conv ? input_stats->channel_means() : input_stats->last_dim_means();
      const auto m2 = conv ? input_stats->channel_second_moments() : input_stats->last_dim_second_moments();
      const auto in = weight_input_channels(n, w, L.weight_channel_axis, static_cast<int64_t>(mean.size()));
      if (!in.empty() && m2.size() == mean.size()) {
        tap_mean.reserve(in.size());
        tap_var.reserve(in.size());
        for (int64_t c : in) {
          tap_mean.push_back(mean[c]);
          tap_var.push_back(std::max(0.0, m2[c] - mean[c] * mean[c]));
        }
      }
    }
    QuantizedWeights qw = given ? *given
                                : quantize_weights(w, L.weight_channel_axis, options.per_channel,
                                                   options.weight_range, tap_mean, tap_var);
    const BiasCorrection mode = effective_bias_correction(options);
    const bool correct = mode == BiasCorrection::kAll || (mode == BiasCorrection::kNonNegativeInputs &&
                                                          input_stats && input_stats->min() >= 0);
    if (!given && correct && input_stats)
      rounding_shift = weight_rounding_shift(
          n, w, qw, L.weight_channel_axis,
          n.op_type == "Conv" ? input_stats->channel_means() : input_stats->last_dim_means(),
          input_stats->channel_shape());
    L.per_channel =
        given ? qw.scale.size() > 1 && std::adjacent_find(qw.scale.begin(), qw.scale.end(),
                                                          std::not_equal_to<float>()) != qw.scale.end()
              : options.per_channel;
    if (qw.scale.size() == 1) qw.scale.assign(channels, qw.scale[0]);
    L.weight_q = std::move(qw.q);
    L.weight_scale = std::move(qw.scale);
  } else {
    const auto& bq = plan.values.at(L.weight);
    const Value& bv = g.value(L.weight);
    channels = bv.shape_known && !bv.shape.empty() ? bv.shape.back() : -1;
    if (channels < 0) {
      reason = "runtime MatMul operand without a known shape";
      return false;
    }
    L.weight_shape = bv.shape;
    L.weight_channel_axis = static_cast<int>(bv.shape.size()) - 1;
    L.weight_scale.assign(channels, bq.scale);
  }
  // Bias: one value per output channel (or a scalar), else int8 cannot fold it into the accumulator.
  L.bias.assign(channels, 0);
  std::vector<float> bias(channels, 0.0f);
  if (n.has_input(2)) {
    const Value& bv = g.value(n.inputs[2]);
    if (!bv.is_constant() || !bv.constant->floating() ||
        !(bv.constant->size() == channels || bv.constant->size() == 1)) {
      reason = "the bias is not a constant per output channel";
      return false;
    }
    for (int64_t c = 0; c < channels; ++c) bias[c] = bv.constant->f[bv.constant->size() == 1 ? 0 : c];
  }
  std::vector<double> corrected(bias.begin(), bias.end());
  if (static_cast<int64_t>(rounding_shift.size()) == channels)
    for (int64_t c = 0; c < channels; ++c) corrected[c] -= rounding_shift[c];
  const QParams& yq = plan.values.at(L.output);
  // A fused activation other than Relu / Clip: under the integer scheme, a table on the pre-activation's
  // own codes (precision.h's lut_epilogue) when that value was calibrated; else the float epilogue.
  L.activation = n.attr_string(kActivation, "");
  const bool table_activation = !L.activation.empty() && L.activation != "Relu" && L.activation != "Clip";
  L.lut_epilogue = table_activation && plan.int8_vector == Int8Vector::kInteger && pre_stats &&
                   xq.dtype != isa::DType::kInt16 && yq.dtype != isa::DType::kInt16;
  if (L.lut_epilogue) {
    const bool sym = options.symmetric_activations;
    L.pre_activation = qparams_for_range(
        table_input_range(n, L.activation, choose_range(*pre_stats, options.calibration, sym), yq), sym,
        options.asymmetric_dtype);
    // Read by the table as a 16-bit code (emulate.h's refined_table_grid).
    L.pre_activation = refined_table_grid(L.pre_activation, kLutEpilogueRefine);
  }
  const QParams& target = L.requant_target(yq);
  L.acc_scale.resize(channels);
  L.requant.resize(channels);
  L.bias_folded.resize(channels);
  for (int64_t c = 0; c < channels; ++c) {
    L.acc_scale[c] = xq.scale * L.weight_scale[c];
    const double real = static_cast<double>(L.acc_scale[c]) / target.scale;
    const auto m = try_quantize_multiplier(real);
    if (!(L.acc_scale[c] > 0.0f) || !std::isfinite(L.acc_scale[c]) || !m) {
      reason = "the requantization scale " + std::to_string(real) +
               " (input x weight / output scale) is out of the "
               "int8 path's range";
      return false;
    }
    const double b = std::nearbyint(corrected[c] / static_cast<double>(L.acc_scale[c]));
    if (xq.dtype == isa::DType::kInt16 && std::fabs(b) > 2147483647.0) {
      // int16 inputs make an accumulator unit 256x finer than int8's; the bias records are int32.
      reason = "the bias of output channel " + std::to_string(c) +
               " exceeds int32 in the int16 layer's "
               "accumulator units";
      return false;
    }
    L.bias[c] = static_cast<int32_t>(std::clamp(b, -2147483648.0, 2147483647.0));
    L.requant[c] = *m;
  }
  if (L.weight_is_constant) {
    // sum_k w_q[k][c] per output channel, for the zero-point fold.
    std::vector<int64_t> wsum(channels, 0);
    int64_t inner = 1;
    for (int64_t d = L.weight_channel_axis + 1; d < static_cast<int64_t>(L.weight_shape.size()); ++d)
      inner *= L.weight_shape[d];
    for (size_t k = 0; k < L.weight_q.size(); ++k) wsum[(k / inner) % channels] += L.weight_q[k];
    for (int64_t c = 0; c < channels; ++c)
      L.bias_folded[c] = static_cast<int32_t>(static_cast<uint32_t>(
          static_cast<int64_t>(L.bias[c]) - static_cast<int64_t>(xq.zero_point) * wsum[c]));
  } else {
    L.bias_folded = L.bias;
  }
  if (n.has_attr(kResidualInput)) {
    L.residual = n.inputs.at(3);
    const QParams& rq = plan.values.at(L.residual);
    L.residual_rescale.resize(channels);
    for (int64_t c = 0; c < channels; ++c) {
      const auto m = try_quantize_multiplier(static_cast<double>(rq.scale) / L.acc_scale[c]);
      if (!m) {
        reason = "the residual's rescale is out of the int8 path's range";
        return false;
      }
      L.residual_rescale[c] = *m;
    }
  }
  L.clamp_min = target.qmin();
  L.clamp_max = target.qmax();
  if (L.lut_epilogue) {
    // The table's window of int16 codes; the table starts at clamp_min.
    const int entries = lut_epilogue_entries(kLutEpilogueRefine);
    L.clamp_min = lut_epilogue_base(kLutEpilogueRefine);
    L.clamp_max = L.clamp_min + entries - 1;
    L.epilogue_lut = epilogue_lut(n, L.activation, L.pre_activation, yq, L.clamp_min, entries);
  } else if (L.activation == "Relu") {
    L.clamp_min = std::max(L.clamp_min, yq.zero_point);
  } else if (L.activation == "Clip") {
    L.clamp_min = std::max(L.clamp_min, yq.quantize(n.attr_float(kActMin, -INFINITY)));
    L.clamp_max = std::min(L.clamp_max, yq.quantize(n.attr_float(kActMax, INFINITY)));
  } else if (!L.activation.empty()) {
    L.float_epilogue = true;
  }
  plan.layers[n.name] = std::move(L);
  return true;
}

std::vector<std::string> values_to_calibrate(const Graph& g, const PrecisionPlan& plan) {
  std::set<std::string> known;
  for (const auto& [v, q] : plan.values) known.insert(v);
  std::vector<std::string> need;
  auto want = [&](const std::string& v) {
    if (known.insert(v).second) need.push_back(v);
  };
  for (const Node& n : g.nodes) {
    if (plan.precision_of(n.name) != Precision::kInt8) continue;
    for (const auto& in : n.inputs)
      if (float_value(g, in)) want(in);
    const bool inherits = shares_input_qparams(n) && float_value(g, n.inputs.at(0));
    for (const auto& out : n.outputs) {
      if (!float_value(g, out)) continue;
      if (inherits)
        known.insert(out);
      else
        want(out);
    }
  }
  return need;
}

// A value computed by a saturating function (Softmax, Sigmoid, HardSigmoid, Tanh; standalone or fused
// as an epilogue): its range is bounded by the function and its largest values are its most confident
// ones (a recogniser's class probabilities near 1), so clipping them -- as entropy or percentile
// calibration does with a long tail -- flattens exactly the values an argmax reads. Measured on
// PP-OCRv4 rec (int8, entropy, 32 rendered lines): the final Softmax dropped the output SQNR from
// 14.4 dB to 2.6 dB. These values are calibrated by min-max.
static bool saturating_output(const Graph& g, const std::string& v) {
  const int p = g.producer(v);
  if (p < 0) return false;
  const Node& n = g.nodes[static_cast<size_t>(p)];
  static const std::set<std::string> kBounded = {"Softmax", "Sigmoid", "HardSigmoid", "Tanh"};
  if (n.domain.empty() && kBounded.count(n.op_type)) return true;
  return kBounded.count(n.attr_string(kActivation, "")) > 0;
}

void quantize_plan(const Graph& g, PrecisionPlan& plan, const std::map<std::string, TensorStats>& stats,
                   const QuantOptions& options, const std::map<std::string, QuantizedWeights>& given,
                   std::vector<RangedValue>* ranged) {
  // The inputs and outputs of int8 Concats share one QParams, as TensorRT and TFLite arrange: then a
  // Concat only moves codes and no input needs requantizing. Values joined through Concats (DenseNet
  // concatenates every earlier feature map again and again) form one group, quantized with the range
  // of its widest member.
  std::map<std::string, std::string> parent;
  std::function<std::string(const std::string&)> find = [&](const std::string& v) -> std::string {
    auto it = parent.find(v);
    if (it == parent.end() || it->second == v) return v;
    return it->second = find(it->second);
  };
  for (const Node& n : g.nodes) {
    if (!(n.domain.empty() && n.op_type == "Concat" && plan.precision_of(n.name) == Precision::kInt8))
      continue;
    const std::string& out = n.outputs.at(0);
    if (!float_value(g, out) || g.value(out).materialized) continue;
    for (const auto& in : n.inputs)
      if (float_value(g, in) && !g.value(in).materialized && stats.count(in) && stats.count(out))
        parent[find(in)] = find(out);
  }
  auto width = [&](const std::string& v) {
    const TensorStats& t = stats.at(v);
    return std::max(std::fabs(static_cast<double>(t.min())), std::fabs(static_cast<double>(t.max())));
  };
  std::map<std::string, std::string> widest;  // group root -> its widest member
  for (const auto& [v, p] : parent) {
    for (const std::string& m : {v, p}) {
      const std::string r = find(m);
      auto it = widest.find(r);
      if (it == widest.end() || width(m) > width(it->second)) widest[r] = m;
    }
  }
  std::map<std::string, std::string> share;  // member -> the member whose QParams it takes
  for (const auto& [v, p] : parent)
    for (const std::string& m : {v, p})
      if (widest.at(find(m)) != m) share[m] = widest.at(find(m));
  auto root = [&](const std::string& v) { return share.at(v); };
  // int16 activations: the inputs of the int16 matrix nodes whose input can be int16 (a request that
  // cannot be honoured runs with int8 activations, and says why); every int8 matrix node reading such a
  // value as its input runs int16 too (its A operand is int16 codes).
  std::set<std::string> wide;
  for (const Node& n : g.nodes) {
    auto pit = plan.nodes.find(n.name);
    if (pit == plan.nodes.end() || !pit->second.int16 || pit->second.effective != Precision::kInt8) continue;
    const std::string problem = int16_input_problem(g, plan, n);
    if (problem.empty()) {
      wide.insert(n.inputs[0]);
    } else {
      pit->second.int16 = false;
      pit->second.reason = problem + "; runs with int8 activations";
    }
  }
  for (const Node& n : g.nodes)
    if (is_int8_layer_op(n) && plan.precision_of(n.name) == Precision::kInt8 && wide.count(n.inputs.at(0)))
      plan.nodes[n.name].int16 = true;
  std::set<std::string> symmetric;  // values quantized with zero point 0 (filled below, before any assign)
  std::function<void(const std::string&, bool)> assign = [&](const std::string& v, bool force_symmetric) {
    if (plan.values.count(v)) return;
    if (wide.count(v)) {
      // int16: symmetric over the min-max range. With 32767 steps a side, rounding costs 256x less than in
      // int8 and clipping would cost more than it saves (TFLite's 16x8 mode calibrates min/max too).
      auto it = stats.find(v);
      if (it == stats.end())
        throw std::runtime_error("quantize_plan: no calibration statistics for value '" + v + "'");
      CalibrationOptions co = options.calibration;
      co.method = CalibrationMethod::kMinMax;
      plan.values[v] = int16_qparams(choose_range(it->second, co, true));
      return;
    }
    if (share.count(v)) {
      const std::string r = root(v);
      assign(r, force_symmetric || symmetric.count(r) > 0);
      plan.values[v] = plan.values.at(r);
      return;
    }
    auto it = stats.find(v);
    if (it == stats.end())
      throw std::runtime_error("quantize_plan: no calibration statistics for value '" + v + "'");
    const bool sym = options.symmetric_activations || force_symmetric;
    CalibrationOptions co = options.calibration;
    const bool saturating = saturating_output(g, v);
    if (saturating) co.method = CalibrationMethod::kMinMax;
    if (ranged) ranged->push_back({v, sym, saturating});
    auto chosen = options.range_overrides.find(v);
    plan.values[v] = qparams_for_range(
        chosen != options.range_overrides.end() ? chosen->second : choose_range(it->second, co, sym), sym,
        options.asymmetric_dtype);
  };
  // Both operands of an int8 MatMul of two runtime values (attention) are symmetric: with zero points
  // 0 the array's integer sums need no runtime column-sum correction, so the NPU runs it in int8.
  for (const Node& n : g.nodes)
    if (plan.precision_of(n.name) == Precision::kInt8 && is_matrix_op(n) && n.op_type == "MatMul" &&
        float_value(g, n.inputs.at(1))) {
      symmetric.insert(n.inputs[0]);
      symmetric.insert(n.inputs[1]);
    }
  // ... and so is what they inherit their QParams from (K -> Reshape -> Transpose -> MatMul).
  for (auto it = g.nodes.rbegin(); it != g.nodes.rend(); ++it)
    if (shares_input_qparams(*it) && float_value(g, it->inputs.at(0)))
      for (const auto& out : it->outputs)
        if (symmetric.count(out)) symmetric.insert(it->inputs[0]);
  // ... and so is a Concat group one of them belongs to (a decode step's KV cache: the past K/V inputs and
  // the new position's, concatenated), through the group's root whose QParams every member takes.
  for (const auto& [member, r] : share)
    if (symmetric.count(member)) symmetric.insert(r);
  for (const Node& n : g.nodes) {
    auto pit = plan.nodes.find(n.name);
    if (pit == plan.nodes.end() || pit->second.effective != Precision::kInt8) continue;
    const bool matrix = is_int8_layer_op(n);
    // Inputs first (the producer may be int8 already, then its QParams stay).
    for (size_t k = 0; k < n.inputs.size(); ++k)
      if (float_value(g, n.inputs[k])) assign(n.inputs[k], symmetric.count(n.inputs[k]) > 0);
    for (const auto& out : n.outputs) {
      if (!float_value(g, out) || plan.values.count(out)) continue;
      if (shares_input_qparams(n) && float_value(g, n.inputs.at(0)))
        plan.values[out] = plan.values.at(n.inputs[0]);
      else
        assign(out, symmetric.count(out) > 0);
    }
    if (!matrix) continue;
    if (plan.layers.count(n.name) && !plan.layers.at(n.name).weight_q.empty()) continue;
    std::string reason;
    auto gw = given.find(n.name);
    auto st = stats.find(n.inputs.at(0));
    auto pre = stats.find(pre_activation_key(n.outputs.at(0)));
    if (!build_layer(g, n, plan, options, gw == given.end() ? nullptr : &gw->second, reason,
                     st == stats.end() ? nullptr : &st->second,
                     pre == stats.end() ? nullptr : &pre->second)) {
      pit->second.effective = Precision::kFp16;
      pit->second.int16 = false;
      pit->second.reason = reason + "; runs in fp16";
    }
  }
}

}  // namespace npusim::compiler::quant
