#pragma once
// Precision plan: which number format every node of a graph runs in, and, for int8 nodes, the exact
// quantization parameters (scales, zero points, integer weights, int32 biases, requantization
// multipliers and shifts) the NPU must use. The back end reads it to choose instruction dtypes and to
// emit REQUANTIZE immediates; the quantized reference (compiler/quant/emulate.h) computes with the same
// numbers, so a compiled int8 program must reproduce the reference's int8 tensors bit for bit.
//
// Contract for the back end (codegen), per node n of the graph the plan was resolved on:
//   plan.precision_of(n.name)   fp32 | fp16 | bf16 | int8: the format of n's matrix/vector work and of
//                               the activations it writes to DRAM.
//   fp16/bf16: operands (activations and constant weights/biases) are rounded to the format
//     (isa::numerics::round_to_precision), products accumulate in fp32, outputs are rounded again.
//   int8: every non-constant float input and output value v of n has plan.values.at(v) (QParams):
//     codes q relate to reals by real = (q - zero_point) * scale; a real is quantized as ONNX
//     QuantizeLinear does: q = saturate(round_half_even(real / scale) + zero_point) (fp32 division).
//     A value produced by a non-int8 node (or a graph input) and read by an int8 node is quantized so on
//     entry; a value produced by an int8 node is stored as codes and dequantized (fp32 multiply) when a
//     non-int8 node reads it.
//   int8 matrix nodes (Conv, ConvTranspose, Gemm, MatMul) have plan.layers.at(n.name)
//     (LayerQuant): the accumulator is
//        acc[n] = bias[n] + sum_k (x_q[k] - x.zero_point) * w_q[k][n]        (int32, wrapping)
//     with zero-valued padding meaning x.zero_point (LOAD's halo pad value). For a constant weight,
//     sum_k x_q * w_q + bias_folded[n] is the same number (bias_folded absorbs -zero_point * sum w_q).
//     A fused residual r (kResidualInput) is added after the bias, rescaled into the accumulator's
//     scale: acc[n] = sat32(acc[n] + requantize_unsaturated(r_q - r.zero_point, residual_rescale[n], 0)).
//     Then, when float_epilogue is false (no activation, Relu or Clip):
//        y_q = clamp(requantize_unsaturated(acc[n], requant[n], out.zero_point), clamp_min, clamp_max)
//     and when it is true (any other fused activation, under Int8Vector::kFloat or without the
//     pre-activation's calibration):
//        y_q = quantize(act(float(acc[n]) * acc_scale[n]))     (fp32 multiply, activation in fp32).
//     When lut_epilogue is true (any other fused activation under Int8Vector::kInteger), the sums are
//     requantized to the pre-activation's own codes (QParams pre_activation, calibrated on the value
//     before the activation), then looked up in a 256-entry table, as TFLite runs a conv followed by its
//     HardSwish / Logistic:
//        p_q = clamp(requantize_unsaturated(acc[n], requant[n], pre.zero_point), clamp_min, clamp_max)
//        y_q = epilogue_lut[p_q - clamp_min]     (requant = acc_scale / pre.scale)
//     pre is an int16 code (emulate.h's refined_table_grid: the 8-bit grid refined kLutEpilogueRefine
//     times) and [clamp_min, clamp_max] the table's window of epilogue_lut.size() codes.
//     requant / residual_rescale have one entry per output channel (per-tensor weights: all equal).
//     Output channels are W's dim 0 for Conv, the last dim of B for MatMul and normalised Gemm. A 2-D
//     ConvTranspose is the stride-1 conv over its input with the zero point inserted between pixels
//     and around them (compiler/ops/conv_transpose.h); its LayerQuant holds that conv's weights
//     ([M][C/group][kh][kw], flipped: quant::conv_transpose_weights), so the formulas above hold as
//     for a Conv.
//   int8 vector nodes: inputs dequantized, the op computed in fp32, the result quantized with the
//     output's QParams. Ops that only move or select values (pooling max, Relu, reshapes, transposes,
//     slices, pads) share their input's QParams, so for them this is exact on the codes. An unfolded
//     BatchNormalization computes AffineArith (below) instead, at every precision.
#include <cmath>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/ir/graph.h"
#include "compiler/passes/cross_layer_equalization.h"
#include "compiler/passes/smoothquant.h"
#include "isa/isa.h"
#include "isa/numerics.h"

namespace npusim::compiler::quant {

// A precision request the user got wrong (unknown format, override naming no node): exit code 2.
class PrecisionError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// kInt16 is a per-layer request only (--precision-override NODE=int16): a matrix layer whose activation
// input is int16 codes (int16 x int8 weights, int64 sums, isa.h's DType). Such a node resolves to
// effective kInt8 -- the integer datapath and every int8 rule below -- with NodePrecision::int16 set.
enum class Precision { kFp32, kFp16, kBf16, kInt8, kInt16 };
std::string_view to_string(Precision p);
// "fp32" | "fp16" | "bf16" | "int8" | "int16" (case-insensitive); throws PrecisionError naming the text.
Precision parse_precision(const std::string& text);
// The operand dtype of the matrix unit for a precision (int8 activations may be uint8: see QParams).
isa::DType to_dtype(Precision p);

// One per-layer override: `key` is an ONNX node name or an op type.
struct PrecisionOverride {
  std::string key;
  Precision precision = Precision::kFp32;
};

// The user's request: a whole-model precision plus overrides (`--precision int8 --precision-override
// conv1=fp16,Softmax=fp32`, or the same pairs from YAML).
struct PrecisionSpec {
  Precision model = Precision::kFp32;
  std::vector<PrecisionOverride> overrides;  // later entries win over earlier ones for the same node
};

// Parses an override list. Entries are separated by commas or newlines; each is `KEY=PREC` or
// `KEY: PREC`, optionally prefixed by "- " (so a YAML block list of one-key maps or a YAML mapping of
// keys to precisions reads as is); '#' starts a comment. This is not a YAML parser: sim/ owns YAML,
// and hands a YAML list's entries here (or to PrecisionSpec directly). Throws PrecisionError naming
// the bad entry.
std::vector<PrecisionOverride> parse_overrides(const std::string& text);
// The inverse: "conv1=fp16,Softmax=fp32".
std::string format_overrides(const std::vector<PrecisionOverride>& overrides);

// Quantization parameters of one int8 (or int16) tensor: real = (q - zero_point) * scale.
struct QParams {
  float scale = 1.0f;
  int32_t zero_point = 0;
  isa::DType dtype =
      isa::DType::kInt8;  // kInt8 or kUint8; kInt16 (symmetric, zero point 0) for int16 activations
  int32_t qmin() const { return static_cast<int32_t>(isa::numerics::dtype_min(dtype)); }
  int32_t qmax() const { return static_cast<int32_t>(isa::numerics::dtype_max(dtype)); }
  // ONNX QuantizeLinear / DequantizeLinear semantics (see the contract above).
  int32_t quantize(float real) const;
  float dequantize(int32_t q) const { return static_cast<float>(q - zero_point) * scale; }
};

// How the NPU computes a BatchNormalization (the per-channel affine map y = act(x * scale + shift) of
// compiler/passes/lowered.h's batchnorm_affine) under a plan; the back end emits it, the quantized
// reference runs it. With d = x_q - x.zero_point (exact) for codes in, else the real x:
//   u = fl(fl(d * mul[c]) + add[c])                               (two fp32 operations)
//   codes_out: y_q = saturate(round_half_even(clamp(u, lo, hi)))  (u is already in code space)
//   else:      y = act(u), quantized with y's QParams when it has them.
// Codes in and a Relu/Clip (or no) activation with codes out fold both conversions into mul/add (one
// pass instead of dequantize, affine, activation, quantize): mul = scale * x.scale / y.scale, add =
// shift / y.scale + y.zero_point, lo/hi = the activation's bounds / y.scale + y.zero_point (computed in
// double, rounded to fp32 once). Otherwise mul = scale (* x.scale for codes in), add = shift.
struct AffineArith {
  std::vector<float> mul, add;
  bool codes_out = false;
  float lo = -INFINITY, hi = INFINITY;
};
// x / y: the QParams of codes read / written (nullptr: real values); act as kActivation ("" = none)
// with its Clip bounds act_lo / act_hi.
AffineArith affine_arith(const std::vector<float>& scale, const std::vector<float>& shift, const QParams* x,
                         const QParams* y, const std::string& act, float act_lo, float act_hi);

// The integer form of one int8 matrix node (see the contract above).
struct LayerQuant {
  std::string node;
  std::string op;                               // Conv, Gemm, MatMul
  std::string input, weight, output, residual;  // value names; residual "" when none
  bool weight_is_constant = true;  // false: a runtime B (attention), quantized per tensor at run time
  bool per_channel = false;
  int weight_channel_axis = 0;  // the dim of the weight holding output channels
  Shape weight_shape;
  std::vector<int8_t> weight_q;      // constant weights, same shape/order as the ONNX weight, symmetric
  std::vector<float> weight_scale;   // one per output channel (per-tensor: all entries equal)
  std::vector<int32_t> bias;         // round(bias / (x.scale * weight_scale[n])), zeros when no bias
  std::vector<int32_t> bias_folded;  // bias[n] - x.zero_point * sum_k w_q[k][n] (constant weights)
  std::vector<float> acc_scale;      // x.scale * weight_scale[n]: real value of one accumulator unit
  std::vector<isa::numerics::QuantizedMultiplier> requant;           // acc_scale[n] / y.scale
  std::vector<isa::numerics::QuantizedMultiplier> residual_rescale;  // r.scale / acc_scale[n]
  std::string activation;  // the fused activation (kActivation), "" when none
  bool float_epilogue = false;
  bool lut_epilogue = false;          // see the contract: requantize to pre_activation, then the table
  QParams pre_activation;             // lut_epilogue: the (int16) codes the table reads
  std::vector<int32_t> epilogue_lut;  // lut_epilogue: y.quantize(act(pre.dequantize(clamp_min + k)))
  // The codes the requantize writes: pre_activation under lut_epilogue, else the output's.
  const QParams& requant_target(const QParams& y) const { return lut_epilogue ? pre_activation : y; }
  int32_t clamp_min = -128, clamp_max = 127;  // output codes: the dtype's range narrowed by Relu/Clip
};

// How the int8 parameters were obtained, for the report.
// The PTQ recipe chosen by measurement (build_plan_choosing_recipe, recipe.h): each candidate's output SQNR
// against fp32 on the first calibration inputs, and the one taken.
struct RecipeCandidate {
  std::string name;                       // "none", "bias-correction-nonnegative", "cle+bias-correction", ...
  double calibration_sqnr_db = 0;         // output SQNR over the scoring inputs
  std::vector<double> per_input_sqnr_db;  // on each scoring input alone (what the choice compares)
};
struct RecipeChoice {
  bool chosen = false;                      // false: the recipe was imposed (options) or nothing was int8
  std::string recipe;                       // the candidate taken
  std::vector<RecipeCandidate> candidates;  // in the order tried (simplest first)
  int scoring_inputs = 0;                   // the first calibration inputs the candidates were scored on
  bool held_out = false;  // the candidates were calibrated on the other inputs (false: on all of them)
  double seconds = 0;     // wall time of the choice (calibration of the CLE graph included)
};

// What the range search did (QuantOptions::range_search, emulate.h's search_ranges), for the report.
struct RangeSearchInfo {
  bool applied = false;
  int samples = 0;                             // calibration inputs scored
  int values = 0;                              // clipped values searched
  int candidates = 0;                          // candidate plans run
  int changed = 0;                             // values whose range changed
  std::vector<std::string> changed_values;     // their names, in graph order
  double graph_runs = 0;                       // the cost, in runs of the whole model over the scored inputs
  double default_error = 0, chosen_error = 0;  // scored outputs' squared error, before and after
  double seconds = 0;
};

struct CalibrationInfo {
  std::string method;      // "minmax", "percentile", "entropy", or "model" (pre-quantized QDQ)
  double percentile = 0;   // "percentile": the share of magnitudes kept inside the range, in %; else 0
  int inputs = 0;          // calibration inputs used
  bool synthetic = false;  // true: seeded random inputs, not user data (the report says so loudly)
  std::string source;      // folder of the inputs, or "synthetic seed N"
  // The bias correction applied (bias_correction_name, quantize.h): "nonnegative-inputs" by default.
  std::string bias_correction;
  // Cross-layer equalisation applied to the graph before calibration (QuantOptions::
  // cross_layer_equalization, --cle); `applied` false when it was not asked for.
  passes::Equalization equalization;
  // SmoothQuant applied to the graph before calibration (QuantOptions::smoothquant_alpha, --smoothquant, or
  // taken by the recipe choice); `applied` false otherwise.
  passes::Smoothing smoothing;
  RecipeChoice recipe;
  RangeSearchInfo range_search;
};

// A node's resolved precision.
struct NodePrecision {
  Precision requested = Precision::kFp32;  // what the spec asked for
  Precision effective = Precision::kFp32;  // what runs (int8 may fall back, see reason); never kInt16
  std::string reason;                      // why effective != requested (and not int16), else ""
  bool overridden = false;                 // a per-layer override chose `requested`
  // int16 activations (effective is kInt8): the node's activation input is int16 codes, its MACs int16 x
  // int8 with int64 sums. Set by resolve_plan for a requested kInt16 matrix node; quantize_plan clears it
  // (with a reason) where the input cannot be int16, and sets it on every matrix node reading an int16
  // value (the array then runs it in int16 too).
  bool int16 = false;
  // What the node runs in, for reports: kInt16 for int16 activations, else effective.
  Precision reported() const { return int16 ? Precision::kInt16 : effective; }
  // effective differs from requested for a reason worth reporting (not int16 resolving to kInt8).
  bool fell_back() const { return effective != requested && !(requested == Precision::kInt16 && int16); }
};

// How int8 vector nodes compute (--int8-vector). kInteger: on the codes, as int8 NPUs run them -- an
// element-wise function of one input (Sigmoid, HardSwish, Gelu, ...) is one 256-entry table lookup
// (isa::VecOp::kLut; emulate.h's activation_lut), a matrix node's fused activation other than Relu/Clip a
// table on its pre-activation's codes (LayerQuant::lut_epilogue), the SE Mul and GlobalAveragePool integer
// arithmetic with one rounding (emulate.h's integer_mul, integer_global_average_pool); kFloat: every int8
// vector node between a dequantize and a quantize in fp32 (the contract's general rule above) and the float
// epilogue, kept for comparison. A standalone table holds exactly the codes the float rule computes, and the
// integer Mul and pool differ from it only at ties; the table epilogue rounds the pre-activation to 8 bits,
// which the float epilogue does not.
enum class Int8Vector { kInteger, kFloat };
std::string_view to_string(Int8Vector s);
// "integer" | "float"; throws PrecisionError naming the text.
Int8Vector parse_int8_vector(const std::string& text);

struct PrecisionPlan {
  Precision model = Precision::kFp32;
  Int8Vector int8_vector = Int8Vector::kInteger;
  std::map<std::string, NodePrecision> nodes;  // every node of the graph, by name
  std::map<std::string, QParams> values;       // int8 activation values (filled by quantize_plan)
  std::map<std::string, LayerQuant> layers;    // int8 matrix nodes (filled by quantize_plan)
  CalibrationInfo calibration;

  // Effective precision of node `name`; the model precision for a node the plan does not list.
  Precision precision_of(const std::string& name) const;
  // NodePrecision::reported of node `name` (kInt16 for int16 activations); precision_of when unlisted.
  Precision reported_precision(const std::string& name) const;
  bool has_int8() const;
  // The quantization of activation value `name`; nullptr when the plan does not quantize it.
  const QParams* qparams(const std::string& name) const;
};

// Resolves `spec` on every node of `g`: a key equal to a node's name applies to it and to the nodes a
// pass derived from it (named "KEY_..."), a key equal to an op type applies to the nodes of that type.
// Node-name keys win over op-type keys; among keys of one kind the later override wins. An int16 key
// applies to matrix nodes (Conv, ConvTranspose, Gemm, MatMul); naming another node or op type with int16,
// or int16 as the model precision, is a PrecisionError; other nodes a key reaches only through a pass's
// derivation take int8. When `g` is a
// lowered graph, pass the imported graph as `original` so op-type keys also match ops the passes
// rewrote (Softmax decomposed into ReduceMax/Sub/Exp/..., found through the original node names).
// Throws PrecisionError listing every key that matches nothing.
PrecisionPlan resolve_plan(const Graph& g, const PrecisionSpec& spec, const Graph* original = nullptr);

// Node names grouped per precision, for logs: "int8: 52 nodes, fp16: conv1, fc".
std::string plan_summary(const PrecisionPlan& plan);

}  // namespace npusim::compiler::quant
