#pragma once
// From calibration statistics to a complete int8 plan: activation QParams per value, and per int8
// matrix node its integer weights, int32 bias and requantization multipliers (precision.h states the
// arithmetic those numbers feed).
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "compiler/quant/calibration.h"
#include "compiler/quant/precision.h"

namespace npusim::compiler::quant {

// The range a symmetric int8 weight scale covers: max |w| of its channel (or tensor), or the clip
// t = a * max |w| (a on a grid of 0.01 from 1 down to 0.5; ties keep the larger range) minimising, with
// d_k = w_k - q(w_k) * t / 127 (q clamping to [-127, 127]) over the weights it covers:
//   kMse:       sum d_k^2 (the weights' own error);
//   kOutputMse: sum d_k^2 Var[x_k] + (sum d_k E[x_k])^2 per output channel, the expected squared error
//               of one output when the inputs x_k the weights multiply are independent, with each input
//               channel's mean and variance from the calibration inputs (kMse where they are unknown).
enum class WeightRange { kMinMax, kMse, kOutputMse };
std::string to_string(WeightRange r);
// "minmax" | "mse" | "output-mse"; throws std::invalid_argument.
WeightRange parse_weight_range(const std::string& text);

// Which int8 matrix layers' biases absorb their weight-rounding shift (QuantOptions::bias_correction).
// CLI: --bias-correction (kAll), --bias-correction-nonnegative (kNonNegativeInputs).
enum class BiasCorrection { kNone, kNonNegativeInputs, kAll };

struct QuantOptions {
  CalibrationOptions calibration;
  bool per_channel = true;  // weights: one scale per output channel, else one per tensor
  // How each weight scale's range is chosen (quantize_weights): max |w|, or the clipped range that
  // minimises the squared rounding-plus-clipping error of the weights it covers.
  WeightRange weight_range = WeightRange::kMinMax;
  bool symmetric_activations = false;  // true: int8, zero point 0; false: asymmetric with a zero point
  isa::DType asymmetric_dtype = isa::DType::kUint8;  // kUint8 or kInt8 for asymmetric activations
  // Bias correction (Nagel et al., "Data-Free Quantization", 2019, the empirical variant): rounding the
  // weights shifts each output channel's mean by sum_k (w_q[k] scale - w[k]) E[x_k]; the int32 bias
  // absorbs that shift, with E[x] per input channel from the calibration inputs. kNonNegativeInputs (the
  // default): only layers whose input is never negative on the calibration inputs (after a ReLU, ReLU6,
  // Sigmoid...), where the inputs' means are large and the shift systematic; kAll: every layer (costs
  // PP-OCRv4 det 1 dB at 320x320). Empirical bias correction supersedes it: with empirical_bias_correction
  // no analytic correction is applied, the measured correction removes the whole shift (docs/quantization.md,
  // "Bias correction as the default, measured").
  BiasCorrection bias_correction = BiasCorrection::kNonNegativeInputs;
  // Empirical bias correction (correct_output_bias, emulate.h): after quantizing, each int8 matrix layer's
  // mean output error per channel, measured against fp32 on the first `empirical_bias_samples`
  // calibration inputs layer by layer, is folded into its int32 bias. Off by default; measured in
  // docs/quantization.md ("Empirical bias correction").
  bool empirical_bias_correction = false;
  int empirical_bias_samples = 8;  // all of the samples run in step: memory grows with this
  // Range search by the model's error (search_ranges, emulate.h): each activation range the calibration
  // method clipped is chosen among {the method's, the least-squared-error one, min-max} by the SQNR of the
  // model's outputs (the logits before a final Softmax) against fp32 on the first `range_search_samples`
  // calibration inputs, greedily in the order of the graph, a change kept only when it gains beyond the
  // input-to-input noise. Off by default (it costs about 45-95 runs of the model over those inputs);
  // measured in docs/quantization.md ("Ranges chosen on the model's error (cls36)").
  bool range_search = false;
  int range_search_samples = 8;
  // Ranges that replace the calibration method's, by value (what search_ranges chose).
  std::map<std::string, ClipRange> range_overrides;
  // Cross-layer equalisation (passes::equalize_cross_layer) of the lowered graph before calibration: the
  // caller that owns the graph applies it (sim/model compile_graph) and records the result in the plan's
  // CalibrationInfo. Off by default; measured in docs/quantization.md ("Cross-layer equalisation").
  bool cross_layer_equalization = false;
  // SmoothQuant (passes::smooth_linear_inputs, smooth_activations in recipe.h) with this migration strength,
  // applied like cross-layer equalisation by the caller that owns the graph. Off (nullopt) by default.
  std::optional<double> smoothquant_alpha;
  // How int8 vector nodes compute (precision.h's Int8Vector; --int8-vector): the plan carries it.
  Int8Vector int8_vector = Int8Vector::kInteger;
};

// The analytic bias correction build_layer applies: options.bias_correction, kNone under empirical bias
// correction (which measures and removes the whole shift, the weights' rounding included).
BiasCorrection effective_bias_correction(const QuantOptions& options);
// The bias correction the options ask for, for the report: "empirical", "nonnegative-inputs", "all", "none".
std::string bias_correction_name(const QuantOptions& options);

// Activation parameters for a clipping range. The range is widened to contain 0 (so zero padding and
// ReLU are exact) and a degenerate range gets scale 1. Symmetric: int8, scale = max|range| / 127,
// zero point 0. Asymmetric: scale = (hi - lo) / (qmax - qmin), zero point = qmin - round(lo / scale)
// clamped to the dtype.
QParams qparams_for_range(ClipRange r, bool symmetric, isa::DType asymmetric_dtype);

// int16 activation parameters (int16 activations, precision.h): symmetric, zero point 0, scale =
// max |range| / 32767 (scale 1 for a degenerate range).
QParams int16_qparams(ClipRange r);

// Why node n (an int16-requested int8 matrix node) cannot take int16 activations, "" when it can: its
// input must be a float activation without a model's own scales, its weights constant, and every int8
// node that writes or reads that value an int8 matrix node (which reads int16 codes as its A operand or
// residual and writes them from its output stage); float nodes convert any codes.
std::string int16_input_problem(const Graph& g, const PrecisionPlan& plan, const Node& n);

// Symmetric int8 weights: scale = range / 127 over the whole tensor or per slice of `axis` (range: see
// WeightRange), codes round_half_even(w / scale) clamped to [-127, 127]. An all-zero slice gets scale 1.
struct QuantizedWeights {
  std::vector<int8_t> q;
  std::vector<float> scale;  // one per index of `axis` (per tensor: repeated)
};
// `input_mean` / `input_var` (kOutputMse): per weight element, the mean and variance of the input value
// it multiplies (weight_input_channels maps elements to input channels); empty: kMse's objective.
QuantizedWeights quantize_weights(const Tensor& w, int axis, bool per_channel,
                                  WeightRange range = WeightRange::kMinMax,
                                  const std::vector<double>& input_mean = {},
                                  const std::vector<double>& input_var = {});

// The input channel (Conv: dim 1 of its input, grouped convolutions included; Gemm / MatMul: K) each
// element of a matrix node's weight `w` multiplies; `inputs` is that channel count. Empty when the
// layout does not fit.
std::vector<int64_t> weight_input_channels(const Node& n, const Tensor& w, int channel_axis, int64_t inputs);

// Ops whose int8 output takes its input's QParams (they select or move values, so they are exact on
// the codes).
bool shares_input_qparams(const Node& n);

// Fills plan.values and plan.layers for every node whose effective precision is int8, from `stats`
// (collect_statistics on the same graph). A node int8 cannot express (a ConvTranspose that is not 2-D
// with constant weights, Gemm with transA or alpha/beta != 1, a bias that is not per output channel) is
// demoted to fp16 with a reason.
// Values that already have QParams in the plan (a pre-quantized model's own scales) keep them (`stats`
// need not cover them); layers already in the plan with weights keep their weights; a node named in
// `given` takes those weight codes and scales (a pre-quantized model's own, see qdq.h) instead of
// quantizing its float weights.
// A value whose QParams quantize_plan chose from its own calibration range (not inherited from another
// value, not int16, not the model's own): what a range search may change.
struct RangedValue {
  std::string value;
  bool symmetric = false;
  bool saturating = false;  // a Softmax / Sigmoid / ... output, ranged by min-max whatever the method
};
// `ranged`, when given, receives those values in the order their ranges were chosen.
void quantize_plan(const Graph& g, PrecisionPlan& plan, const std::map<std::string, TensorStats>& stats,
                   const QuantOptions& options, const std::map<std::string, QuantizedWeights>& given = {},
                   std::vector<RangedValue>* ranged = nullptr);

// The values quantize_plan(g, plan, ...) needs calibration statistics for: inputs and outputs of int8
// nodes that have no QParams in the plan yet and do not inherit their input's.
std::vector<std::string> values_to_calibrate(const Graph& g, const PrecisionPlan& plan);

// Builds the LayerQuant of one int8 matrix node from the QParams already in plan.values and, when
// `given` is non-null, pre-quantized weight codes/scales (QDQ models); returns false with `reason` when
// the node cannot run in int8. With options.bias_correction (kNonNegativeInputs: when the input's
// calibrated minimum is >= 0), weights it quantizes itself and
// `input_stats` (the calibration statistics of the node's input) holding per-channel means, the bias
// is corrected for the weights' rounding (see QuantOptions). `pre_stats` (the statistics of the node's
// output before its fused activation, calibration.h's pre_activation_key) lets a fused activation other
// than Relu / Clip run as a lookup-table epilogue under Int8Vector::kInteger (precision.h).
bool build_layer(const Graph& g, const Node& n, PrecisionPlan& plan, const QuantOptions& options,
                 const QuantizedWeights* given, std::string& reason, const TensorStats* input_stats = nullptr,
                 const TensorStats* pre_stats = nullptr);

// The shift of each output channel's mean that rounding a matrix node's weights causes:
// delta[c] = sum_k (w_q[k] * scale[c] - w[k]) * mean[input channel of k]. `means` is indexed by the
// node's input channels (Conv: dim 1 of its input, grouped convolutions included; Gemm / MatMul: K).
// Empty when the weight layout or the means do not fit (then no correction). A Conv given its input
// shape `x` weighs each kernel tap by the fraction of output positions where it reads inside the input
// (the rest read zero padding), so borders of small maps are not over-corrected.
std::vector<double> weight_rounding_shift(const Node& n, const Tensor& w, const QuantizedWeights& q,
                                          int channel_axis, const std::vector<double>& means,
                                          const Shape& x = {});

// The dim of a matrix node's weight (rank `weight_rank`) that holds its output channels: W's dim 0 for
// Conv and for Gemm with transB, else the last dim (MatMul's and normalised Gemm's B).
int weight_channel_axis(const Node& n, int weight_rank);

// True for the ops the int8 pipeline runs on the matrix unit.
bool is_matrix_op(const Node& n);
// is_matrix_op or a ConvTranspose: the nodes that get a LayerQuant in an int8 plan.
bool is_int8_layer_op(const Node& n);

// A 2-D ConvTranspose's constant weights as those of the stride-1 conv over its zero-inserted input
// (compiler/ops/conv_transpose.h): [M][C/group][kh][kw], flipped. An int8 ConvTranspose's LayerQuant
// holds them (weight_shape, weight_q, per-output-channel scales on dim 0) and the back end and the
// reference run that conv. nullopt with `reason` for a form the int8 path does not take.
std::optional<Tensor> conv_transpose_weights(const Graph& g, const Node& n, std::string& reason);

}  // namespace npusim::compiler::quant
