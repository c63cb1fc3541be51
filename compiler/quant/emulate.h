#pragma once
// The quantized reference: what the NPU computes for a graph under a PrecisionPlan, emulated on the
// host with the datapath's exact integer semantics (isa/numerics.h). int8 matrix nodes are
// integer-exact (int8 x int8 -> int32, int32 bias, gemmlowp requantize, zero points, clamps); int8
// vector nodes dequantize, compute in fp32 and quantize (ONNX QuantizeLinear rounding); fp16/bf16
// nodes round their operands and results to the format and compute in fp32 (the array's fp32
// accumulation). precision.h states the arithmetic; this file runs it.
//
// It accepts an imported graph or one lowered by compiler/passes (fused epilogues: bias, residual,
// activation; npu.Transpose layout changes are identities; npu.Gelu / npu.Silu are computed here).
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "compiler/ir/graph.h"
#include "compiler/quant/calibration.h"
#include "compiler/quant/precision.h"
#include "compiler/quant/quantize.h"

namespace npusim::compiler::quant {

// Called after each node with its outputs as real values (int8 results dequantized), in node.outputs
// order (nullptr for an omitted output).
using EmulationObserver = std::function<void(const Node& node, const std::vector<const Tensor*>& outputs)>;
// Called, in an fp32 run, with a matrix node's output before its fused activation (bias and residual added):
// the value a lookup-table epilogue reads (precision.h's lut_epilogue), which the graph does not name.
using PreActivationObserver = std::function<void(const Node& node, const Tensor& pre_activation)>;

// Runs `g` under `plan` on one sample; returns the graph outputs (real values) by name. A plan with
// every node fp32 computes what the FP32 reference interpreter computes. Throws InterpretError
// (compiler/interp) naming the node on an op it cannot run, std::out_of_range when an int8 node lacks
// its QParams (run quantize_plan first).
std::map<std::string, Tensor> emulate(const Graph& g, const PrecisionPlan& plan, const Sample& inputs,
                                      const EmulationObserver& observer = nullptr,
                                      const PreActivationObserver& pre_observer = nullptr);

// One node alone under `plan`, fed real values (`input(name)` for each of its runtime inputs; constants come
// from the graph): what emulate computes for it when its inputs hold those values. An int8 node quantizes
// them with the QParams its producers would have written them in, an fp16/bf16 node rounds them. Returns
// its outputs as real values (int8 results dequantized), in node.outputs order (empty for an omitted one).
// The accuracy report's own-error figures (accuracy.h) feed it the fp32 reference's inputs.
std::vector<Tensor> emulate_node(const Graph& g, const PrecisionPlan& plan, const Node& node,
                                 const std::function<const Tensor&(const std::string& name)>& input);

// Whether node n computes each element of its output from the element of its one runtime input at the
// same place alone (Sigmoid, Tanh, Exp, Erf, HardSigmoid, HardSwish, Gelu, npu.Silu, Softplus, Mish, ...;
// further inputs constant, no fused epilogue): on int8 codes it is a table of 256 entries.
bool is_code_function(const Graph& g, const Node& n);
// That table for input codes of `x` (int8 or uint8) and output codes of `y`: entry k holds
// y.quantize(f(x.dequantize(x.qmin() + k))), f the node's fp32 function exactly as emulate computes it
// (so the table's codes are the float rule's codes). The back end loads it for a VEC lut
// (isa::VecOp::kLut) and emulate looks codes up in it.
std::vector<int32_t> activation_lut(const Graph& g, const Node& n, const QParams& x, const QParams& y);

// The table of a lookup-table epilogue (precision.h's lut_epilogue): entry k holds
// y.quantize(act(pre.dequantize(pre.qmin() + k))), act the fused activation `act` of matrix node n in fp32
// exactly as the float epilogue computes it.
std::vector<int32_t> epilogue_lut(const Node& n, const std::string& act, const QParams& pre,
                                  const QParams& y);
// The same for a table read with 16-bit codes (an int16 `pre`): `entries` entries from code `base`.
std::vector<int32_t> epilogue_lut(const Node& n, const std::string& act, const QParams& pre, const QParams& y,
                                  int32_t base, int entries);

// A lookup-table epilogue reads its pre-activation as a 16-bit code: the 8-bit grid q8 (uint8 or int8,
// its range narrowed by table_input_range) refined kLutEpilogueRefine times -- scale q8.scale / R, every
// 8-bit code's value on the finer grid (so the table is never coarser than the 8-bit one) -- over
// R * 255 + 1 int16 codes from lut_epilogue_base(R) = -(R * 255 + 1) / 2 (the output stage clamps the
// requantized sums to them). The 8-bit rounding of the pre-activation before the function costs det's
// HardSwish / Sigmoid epilogues accuracy (docs/quantization.md, "16-bit table epilogues"); an int8 NPU
// reads such a table with int16 codes as Ethos-U's int16 LUT and TFLite's int16 activations do.
inline constexpr int kLutEpilogueRefine = 4;
inline constexpr int lut_epilogue_entries(int refine) { return refine * 255 + 1; }
inline constexpr int32_t lut_epilogue_base(int refine) { return -(lut_epilogue_entries(refine) / 2); }
QParams refined_table_grid(const QParams& q8, int refine);

// The part of a lookup-table epilogue's calibrated input range r where the table's output can still change:
// y.quantize(act(x)) is one code for every x in [r.lo, a] and one for every x in [b, r.hi] (an activation
// constant there, HardSwish below -3, HardSigmoid outside its ramp, or one saturating y's codes, a Sigmoid's
// tails), so the pre-activation's 256 codes need only span [a, b]: a value below a (above b) clamps to the
// grid's end, whose entry is that same code. Widened by one step of the narrowed grid on each side (the
// grid's ends move by up to half a step when its zero point rounds), never beyond r. Scans 4096 points of r.
ClipRange table_input_range(const Node& n, const std::string& act, ClipRange r, const QParams& y);

// The integer scheme's Mul (plan.int8_vector == kInteger): an int8 Mul of two runtime inputs stored as
// int8/uint8 codes, writing codes, without a fused activation (a squeeze-and-excitation block's Mul):
//   y = saturate(requantize((a - a.zero_point) * (b - b.zero_point), M, shift, y.zero_point))
// with int32 products (|product| <= 255^2), broadcasting as ONNX's Mul, and (M, shift) =
// single_rounding_multiplier(a.scale * b.scale / y.scale): TFLite's integer Mul with one rounding
// (TFLITE_SINGLE_ROUNDING), as isa/numerics.h's requantize computes it with that multiplier.
// Returns (M, shift), or nullopt when n is not such a Mul (it then follows the float rule).
std::optional<isa::numerics::QuantizedMultiplier> integer_mul(const Graph& g, const PrecisionPlan& plan,
                                                              const Node& n);
// The integer scheme's GlobalAveragePool (plan.int8_vector == kInteger): an int8 GlobalAveragePool of a
// 4-D value stored as int8/uint8 codes, writing codes, as TFLite's integer Mean runs it: per image and
// channel the exact int32 sum S of the H*W codes, then
//   y = saturate(requantize(S - H*W * x.zero_point, M, 0, y.zero_point)),
// M = single_rounding_multiplier(x.scale / (y.scale * H*W)) (one rounding). Returns M, or nullopt when n is
// not such a pool or that scale is not below 1 (it then follows the float rule).
std::optional<isa::numerics::QuantizedMultiplier> integer_global_average_pool(const Graph& g,
                                                                              const PrecisionPlan& plan,
                                                                              const Node& n);

// The integer scheme's Add / Sub (plan.int8_vector == kInteger): an int8 Add or Sub of two runtime inputs
// stored as int8/uint8 codes, writing codes, with no fused activation or a fused Relu / Clip (then clamped in
// y's codes; a feature pyramid's Add of two maps, a residual Add the passes did not fuse into its conv), as
// TFLite's integer-only add
// (tensorflow/lite/kernels/internal/reference/integer_ops/add.h, add.cc's Prepare) computes it: with
// m = 2 max(a.scale, b.scale) each input's centred codes are rescaled to the common grid m / 2^20 in int32,
//   sa = requantize(a - a.zero_point, Ma, -(20 - ea), 0) ~ (a - a.zero_point) * 2^20 a.scale / m
// ((Ma, ea) = quantize_multiplier(a.scale / m), a scale at most 1/2; TFLite shifts left by 20, multiplies
// and shifts right by ea; here the two shifts are folded into one left shift, so each rescale is one
// SaturatingRoundingDoublingHighMul and rounds once, as TFLite's single-rounding build does), likewise sb,
// then the int32 sum (Sub: the difference sa - sb, as TFLite's reference Sub) is requantized once:
//   y = saturate(requantize(sa +- sb, Mo, so, y.zero_point)), (Mo, so) = quantize_multiplier(m / (2^20
//   y.scale))
// (TFLite's MultiplyByQuantizedMultiplierSmallerThanOneExp, its default build's two roundings, the first at
// 2^-so of a code). Broadcasting as ONNX's Add. |sa|, |sb| < 2^27, so nothing wraps. Returns the three
// multipliers, or nullopt when n is not such a node or a multiplier falls outside the requantize's range (it
// then follows the float rule).
inline constexpr int kAddLeftShift = 20;
struct IntegerAdd {
  isa::numerics::QuantizedMultiplier a, b;  // input k's rescale to the common grid (shift <= 0: left)
  isa::numerics::QuantizedMultiplier out;   // the sum's requantize to y's codes
  bool subtract = false;                    // Sub: sa - sb
  int32_t lo = 0, hi = 0;                   // y's codes, clamped to a fused Relu / Clip's bounds
};
std::optional<IntegerAdd> integer_add(const Graph& g, const PrecisionPlan& plan, const Node& n);

// The integer scheme's AveragePool (plan.int8_vector == kInteger): a 2-D int8 AveragePool (no dilation) of a
// value stored as int8/uint8 codes, writing codes, as TFLite's integer average pool with a requantize: per
// image, channel and output pixel p the exact int32 sum S_p of (code - x.zero_point) over the window's
// elements inside the input, then
//   y = saturate(requantize(S_p, M_p, s_p, y.zero_point)),
// (M_p, s_p) = single_rounding_multiplier(x.scale / (y.scale d_p)), d_p ONNX's divisor at p (the window's
// elements inside the input, or, with count_include_pad, inside the padded input; ceil_mode's overhang never
// counts): the pixel's real mean in y's codes rounded once. Returns the geometry and the per-pixel
// multipliers, or nullopt when n is not such a pool (it then follows the float rule).
struct IntegerAveragePool {
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, pt = 0,
          pl = 0;                                         // window, strides, leading pads (auto_pad resolved)
  int64_t oh = 0, ow = 0;                                 // output pixels
  std::vector<isa::numerics::QuantizedMultiplier> scale;  // per output pixel, row-major (oh * ow)
};
std::optional<IntegerAveragePool> integer_average_pool(const Graph& g, const PrecisionPlan& plan,
                                                       const Node& n);

// The integer scheme's Concat (plan.int8_vector == kInteger): an int8 Concat whose inputs are all runtime
// values stored as int8/uint8 codes, writing codes. An input of the output's QParams is copied; any other
// is requantized on its way, y = saturate(requantize(x - x.zero_point, M, s, y.zero_point)) with (M, s) =
// single_rounding_multiplier(x.scale / y.scale): its real values in y's codes rounded once (TFLite
// requantizes such inputs in float). Returns one entry per input (nullopt: copied), or nullopt when n is not
// such a Concat or a ratio has no multiplier (it then follows the float rule).
using IntegerConcat = std::vector<std::optional<isa::numerics::QuantizedMultiplier>>;
std::optional<IntegerConcat> integer_concat(const Graph& g, const PrecisionPlan& plan, const Node& n);

// A requantization multiplier whose VEC requantize rounds once: y = round_half_up(x * M / 2^31) for a real
// scale below 1 (M = round(real * 2^31), shift 0: SaturatingRoundingDoublingHighMul alone, whose nudge rounds
// halves up, as TFLite's single-rounding MultiplyByQuantizedMultiplier does), quantize_multiplier's
// (left-shifting) form at or above 1. The normalised form of a scale below 1 shifts right after the multiply
// and so rounds twice. M keeps real to 2^-32 absolute, i.e. under 2^-16 of a code for |x| <= 2^16.
// nullopt for a negative or non-finite real, or one quantize_multiplier rejects.
std::optional<isa::numerics::QuantizedMultiplier> single_rounding_multiplier(double real);

// An int8 tensor as the NPU holds it: codes with their parameters.
struct Int8Tensor {
  Shape shape;  // logical (ONNX) shape
  QParams qparams;
  std::vector<int32_t> codes;  // values in [qparams.qmin(), qparams.qmax()], row-major logical order
};

// Empirical bias correction (Nagel et al. 2019's empirical variant, as AIMET and OpenVINO apply it): runs
// `plan` and the fp32 graph over `samples` (the calibration inputs) node by node, all samples in step, and
// at each int8 matrix layer with constant weights moves the mean of the quantized output per channel onto
// fp32's by changing its int32 bias (bias and bias_folded), before the layers below it are computed. A
// fused Relu, Clip or HardSigmoid is measured on its linear piece (values both runs put strictly inside
// its bounds, divided by its slope); other fused activations leave the layer as it is. The error it removes
// is whatever made the mean drift -- rounded weights, and the clipped or coarse activations of the layers
// above -- and each layer sees the corrections above it, so none is counted twice. Holds every sample's live
// activations at once. Returns the layers corrected.
int correct_output_bias(const Graph& g, PrecisionPlan& plan, const std::vector<Sample>& samples);

// Range search by the model's error (QuantOptions::range_search), as vendor calibrators choose ranges on
// the network's output rather than on each tensor's own histogram: for each activation value whose range
// quantize_plan chose by the calibration method and where that range clips (narrower than min-max; the
// saturating outputs, ranged by min-max, are left), the candidates are the method's range, the least
// expected squared error one (CalibrationMethod::kMse) and min-max. Greedily, in the order of the first
// node each value concerns, each candidate's plan (quantize_plan from `unquantized` with the ranges chosen
// so far and the candidate's) runs from the first node whose QParams it changes to the scored values on
// `samples` (all in step, the nodes above computed once). Scored: the graph outputs, or the logits a final
// Softmax / LogSoftmax reads. A candidate replaces the range kept so far only when its per-sample SQNR of
// the scored values is higher by more than kRecipeMarginDb on average and by more than twice the standard
// error of that paired gain (choose_recipe, recipe.h). Returns the ranges that differ from the method's
// (QuantOptions::range_overrides) and what the search cost.
struct RangeSearch {
  std::map<std::string, ClipRange> ranges;     // the values whose range changed, with their new range
  int values = 0;                              // values with more than one candidate
  int candidates = 0;                          // candidate plans run (the method's own not counted)
  int64_t node_runs = 0;                       // node executions of those runs, over all samples
  double graph_runs = 0;                       // node_runs / (nodes x samples): the cost in whole-model runs
  double default_error = 0, chosen_error = 0;  // outputs' squared error on `samples`, before and after
  double seconds = 0;
};
RangeSearch search_ranges(const Graph& g, const PrecisionPlan& unquantized,
                          const std::map<std::string, TensorStats>& stats, const QuantOptions& options,
                          const std::map<std::string, QuantizedWeights>& given,
                          const std::vector<Sample>& samples);

// The test hook for the compiled program: the int8 codes of every value an int8 node writes, by value
// name, as the functional datapath must produce them bit for bit (in logical ONNX order; a compiled
// program's NHWC buffers are compared after reordering).
std::map<std::string, Int8Tensor> expected_int8_tensors(const Graph& g, const PrecisionPlan& plan,
                                                        const Sample& inputs);

// A 1-D or 2-D Conv's geometry in NCHW terms (1-D: h = kh = 1): sizes, strides, dilations, the leading
// pads (auto_pad resolved) and the output size. Throws InterpretError for other ranks.
struct ConvGeom {
  int64_t n, c, h, w, m, kh, kw, oh, ow, sh, sw, dh, dw, pt, pl, group;
};
ConvGeom conv_geometry(const Node& node, const Shape& x, const Shape& wshape);

// The integer core of one int8 matrix node, exposed for tests: given the input codes (and residual
// codes when the layer has one), the output codes. Conv inputs are NCHW (or NCL), MatMul/Gemm [..., M, K].
std::vector<int32_t> run_int8_layer(const Graph& g, const Node& n, const PrecisionPlan& plan,
                                    const Int8Tensor& x, const Int8Tensor* runtime_b,
                                    const Int8Tensor* residual, Shape& out_shape);

}  // namespace npusim::compiler::quant
