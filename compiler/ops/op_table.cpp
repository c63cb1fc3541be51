#include "compiler/ops/op_table.h"

#include <algorithm>

namespace npusim::compiler {

std::string_view to_string(Placement p) {
  switch (p) {
    case Placement::kNpuMatrix:
      return "npu-matrix";
    case Placement::kNpuVector:
      return "npu-vector";
    case Placement::kFree:
      return "free";
    case Placement::kHost:
      return "host";
  }
  return "?";
}

std::string_view placement_name(Placement p) {
  switch (p) {
    case Placement::kNpuMatrix:
      return "matrix";
    case Placement::kNpuVector:
      return "vector";
    case Placement::kFree:
      return "free";
    case Placement::kHost:
      return "host";
  }
  return "host";
}

std::optional<Placement> parse_placement(std::string_view text) {
  for (Placement p : {Placement::kNpuMatrix, Placement::kNpuVector, Placement::kFree, Placement::kHost}) {
    if (placement_name(p) == text) return p;
  }
  return std::nullopt;
}

namespace {

constexpr Placement M = Placement::kNpuMatrix;
constexpr Placement V = Placement::kNpuVector;
constexpr Placement F = Placement::kFree;
constexpr Placement H = Placement::kHost;

std::vector<OpSupport> build() {
  std::vector<OpSupport> t = {
      // Matrix unit.
      {"Conv", M,
       "2-D with constant weights and bias: any group (block-diagonal blocks), strides, dilations, pads, "
       "auto_pad; 1-D convs as 2-D convs of height 1; 3-D convs and runtime weights run on the host"},
      {"ConvTranspose", M,
       "2-D with constant weights: a stride-1 conv over a zero-inserted copy of the input (DMA), any group, "
       "strides, dilations, pads, output_padding, output_shape, auto_pad; 1-D/3-D on the host"},
      {"Gemm", M,
       "alpha/beta/transA/transB folded into constant operands; C constant (scalar, [N], [M,1] or [M,N]); a "
       "runtime C runs on the host"},
      {"MatMul", M,
       "batched with broadcasting (activation x activation, or shared 2-D constant weights); batched "
       "constant weights run on the host"},
      {"MatMulInteger", H,
       "int32 result without scales (dynamic quantization): exact integer kernel on the host"},
      {"ConvInteger", H,
       "int32 result without scales (dynamic quantization): exact integer kernel on the host"},
      {"QLinearConv", H,
       "constant scales: imported as an int8 Conv with the model's scales (docs/quantization.md); runtime "
       "scales run on the host"},
      {"QLinearMatMul", H,
       "constant scales: imported as an int8 MatMul with the model's scales; runtime scales run on the host"},
      // Vector unit: element-wise arithmetic and activations.
      {"Add", V, "numpy broadcasting of one operand; float"},
      {"Sub", V, "numpy broadcasting of one operand; float"},
      {"Mul", V, "numpy broadcasting of one operand; float"},
      {"Div", V, "numpy broadcasting of one operand; float (integer division on the host)"},
      {"Pow", V, "numpy broadcasting of one operand; float base and exponent"},
      {"Sqrt", V, "lookup table"},
      {"Reciprocal", V, "lookup table"},
      {"Neg", V, ""},
      {"Abs", V, ""},
      {"Exp", V, "lookup table"},
      {"Log", H, "no VecOp"},
      {"Floor", H, "no VecOp"},
      {"Ceil", H, "no VecOp"},
      {"Round", H, "no VecOp"},
      {"Sign", H, "no VecOp"},
      {"Erf", V, "lookup table"},
      {"Relu", V, ""},
      {"LeakyRelu", V, ""},
      {"PRelu", V, "decomposed to Relu(x) + slope * Min(x, 0)"},
      {"Clip", V, "min/max as attributes (opset < 11) or constant inputs; runtime bounds run on the host"},
      {"Sigmoid", V, "lookup table"},
      {"Tanh", V, "lookup table"},
      {"HardSigmoid", V, ""},
      {"HardSwish", V, ""},
      {"Elu", H, "no VecOp"},
      {"Selu", H, "no VecOp"},
      {"Celu", H, "no VecOp"},
      {"Softplus", H, "no VecOp"},
      {"Softsign", H, "no VecOp"},
      {"ThresholdedRelu", H, "no VecOp"},
      {"Shrink", H, "no VecOp"},
      {"Min", V, "two float inputs, broadcasting of one; other arities on the host"},
      {"Max", V, "two float inputs, broadcasting of one; other arities on the host"},
      {"Sum", V, "decomposed to an Add chain"},
      {"Mean", V, "decomposed to an Add chain and a Mul"},
      {"Mod", H, "no VecOp"},
      // Vector unit: normalisation, pooling, reductions.
      {"Softmax", V,
       "one row-wise layer over the trailing axes when a row fits the SRAM, else decomposed to "
       "ReduceMax/Sub/Exp/ReduceSum/Div"},
      {"LogSoftmax", H, "no Log VecOp"},
      {"LayerNormalization", V,
       "constant scale/bias: one row-wise layer when a row fits the SRAM, else decomposed; Mean/InvStdDev "
       "outputs on the host"},
      {"BatchNormalization", V,
       "inference form with constant statistics: folded into a preceding Conv/Gemm, else one per-channel "
       "affine vector layer (with a fused activation); runtime statistics or training mode on the host"},
      {"InstanceNormalization", V,
       "decomposed (reductions over the innermost axes) with constant scale/bias"},
      {"LRN", H, "no VecOp for the windowed square sum"},
      {"MaxPool", V, "2-D, pads, ceil_mode, auto_pad; dilations, 1-D/3-D and the Indices output on the host"},
      {"AveragePool", V,
       "2-D, pads, ceil_mode, count_include_pad, auto_pad (divisor corrected per pixel); 1-D/3-D on the "
       "host"},
      {"GlobalAveragePool", V, ""},
      {"GlobalMaxPool", V, ""},
      {"ReduceMean", V, "constant axes that are the innermost in memory; keepdims"},
      {"ReduceSum", V, "constant axes that are the innermost in memory; keepdims"},
      {"ReduceMax", V, "constant axes that are the innermost in memory; keepdims"},
      {"ReduceMin", H, "no reduce_min VecOp"},
      {"ReduceProd", H, "no reduce_prod VecOp"},
      {"ReduceL1", V, "decomposed to Abs + ReduceSum (as ReduceSum)"},
      {"ReduceL2", V, "decomposed to Mul + ReduceSum + Sqrt (as ReduceSum)"},
      {"ReduceSumSquare", V, "decomposed to Mul + ReduceSum (as ReduceSum)"},
      {"ReduceLogSum", H, "no Log VecOp"},
      {"ReduceLogSumExp", H, "no Log VecOp"},
      {"ArgMax", H, "integer result"},
      {"ArgMin", H, "integer result"},
      {"CumSum", H, "no scan VecOp"},
      // Vector unit: data movement.
      {"Concat", V, "any axis, any element type; strided DMA, constant operands as data segments"},
      {"Split", V, "any axis, constant split sizes; strided DMA"},
      {"Slice", V, "constant starts/ends/axes/steps, any step (DMA from a compile-time index map)"},
      {"Gather", V,
       "constant indices (index select): DMA rows; runtime indices run on the host (no data-dependent "
       "addressing)"},
      {"GatherElements", V, "constant indices: DMA; runtime indices on the host"},
      {"Pad", V,
       "constant pads: constant, reflect and edge modes (DMA, fill from a data segment); runtime pads on the "
       "host"},
      {"Resize", V,
       "nearest (all nearest_modes and coordinate modes) with constant scales/sizes as DMA; linear and cubic "
       "run on the host"},
      {"Upsample", V, "nearest with constant scales as DMA; linear on the host"},
      {"Transpose", V, "any permutation: strided DMA, VEC transpose when the innermost dim moves"},
      {"Expand", V, "constant shape: DMA broadcast copy; runtime shape on the host"},
      {"Tile", V, "constant repeats: DMA"},
      {"Where", V, "constant condition: DMA select from X/Y; runtime condition on the host"},
      {"Trilu", V, "constant k: DMA with zero fill"},
      {"DepthToSpace", V, "DCR and CRD: DMA"},
      {"SpaceToDepth", V, "DMA"},
      {"QuantizeLinear", H,
       "a Q -> DQ pair with constant scales becomes an int8 activation with the model's scales; a lone one "
       "runs on the host"},
      {"DequantizeLinear", H,
       "constant weights fold to int8 weight codes, pairs become int8 activations; a lone one runs on the "
       "host"},
      {"DynamicQuantizeLinear", H, "runtime scale: on the host"},
      // Free: views and metadata.
      {"Reshape", F, "allowzero honoured"},
      {"Flatten", F, ""},
      {"Squeeze", F, "axes as attribute (opset < 13) or input"},
      {"Unsqueeze", F, "axes as attribute (opset < 13) or input"},
      {"Identity", F, ""},
      {"Dropout", F, "inference only: identity, mask all true"},
      {"Cast", F, "free on constants (folded); a runtime Cast runs on the host"},
      // Host: shape arithmetic, comparisons, logic and everything else.
      {"Shape", H, "folded to a constant when shapes are static"},
      {"Size", H, "folded to a constant when shapes are static"},
      {"Constant", H, "folded into a constant"},
      {"ConstantOfShape", H, "folded when the shape is constant"},
      {"Range", H, "folded when its inputs are constant"},
      {"Equal", H, ""},
      {"Less", H, ""},
      {"LessOrEqual", H, ""},
      {"Greater", H, ""},
      {"GreaterOrEqual", H, ""},
      {"Not", H, ""},
      {"And", H, ""},
      {"Or", H, ""},
      {"Xor", H, ""},
      {"BitShift", H, ""},
      {"IsNaN", H, ""},
      {"IsInf", H, ""},
      {"Sin", H, ""},
      {"Cos", H, ""},
      {"Tan", H, ""},
      {"Asin", H, ""},
      {"Acos", H, ""},
      {"Atan", H, ""},
      {"Sinh", H, ""},
      {"Cosh", H, ""},
      {"Asinh", H, ""},
      {"Acosh", H, ""},
      {"Atanh", H, ""},
      {"Hardmax", H, ""},
      // Control flow and recurrent layers.
      {"If", H,
       "a condition known once input shapes and --input-value constants are bound: replaced by the branch it "
       "takes (fold-constants); a data-dependent condition runs the whole If on the host"},
      {"Loop", H, "runs its body on the host"},
      {"Scan", H, "runs its body on the host"},
      {"LSTM", H,
       "constant W, R, B, P and sequence_lens covering the sequence: decomposed (decompose-recurrent) into "
       "one input-projection MatMul over all steps and, per step, a recurrent MatMul and the gates on the "
       "vector unit; otherwise on the host"},
      {"GRU", H, "as LSTM"},
      {"RNN", H, "as LSTM"},
      // Indexing, selection, losses and the rest the interpreter computes on the host.
      {"ScatterElements", H, "data-dependent addressing"},
      {"Scatter", H, "data-dependent addressing (ScatterElements before opset 11)"},
      {"ScatterND", H, "data-dependent addressing"},
      {"GatherND", H, "data-dependent addressing"},
      {"OneHot", H, "data-dependent addressing"},
      {"Compress", H, "output size depends on the data"},
      {"NonZero", H, "output size depends on the data"},
      {"TopK", H, "sorting"},
      {"Unique", H, "output size depends on the data"},
      {"ReverseSequence", H, "per-sequence lengths from the data"},
      {"EyeLike", H, "a constant of the input's shape"},
      {"NegativeLogLikelihoodLoss", H, "a training loss"},
      {"SoftmaxCrossEntropyLoss", H, "a training loss"},
      {"Det", H, "LU factorisation"},
      {"Einsum", H, "general contractions (a MatMul-shaped equation is a candidate for the matrix unit)"},
      {"HannWindow", H, "a constant of the given size"},
      {"HammingWindow", H, "a constant of the given size"},
      {"BlackmanWindow", H, "a constant of the given size"},
      {"MeanVarianceNormalization", H,
       "no VecOp form (decompose it as LayerNormalization to run it on the NPU)"},
      {"CastLike", H, ""},
      {"NonMaxSuppression", H, "data-dependent output size and a sort: CPU post-processing"},
      {"MaxUnpool", H, "a scatter to data-dependent indices (the ISA has no data-dependent addressing)"},
      {"GridSample", H, "data-dependent gathers (the ISA has no data-dependent addressing)"},
      {"RoiAlign", H, "data-dependent gathers from runtime boxes (the ISA has no data-dependent addressing)"},
      {"DFT", H, "no VecOp form (a DFT of constant length is a MatMul by a constant basis on the array)"},
      {"STFT", H,
       "no VecOp form (write it as a Conv with a DFT basis, as log-mel front ends do, to run it on the "
       "array)"},
      {"MelWeightMatrix", H, "a constant of the given sizes"},
      {"TfIdfVectorizer", H, "n-gram counting over token ids: CPU preprocessing"},
  };
  std::sort(t.begin(), t.end(), [](const OpSupport& a, const OpSupport& b) { return a.op < b.op; });
  return t;
}

}  // namespace

const std::vector<OpSupport>& op_table() {
  static const std::vector<OpSupport> table = build();
  return table;
}

const OpSupport* find_op(std::string_view op) {
  const auto& t = op_table();
  auto it = std::lower_bound(t.begin(), t.end(), op,
                             [](const OpSupport& r, std::string_view o) { return r.op < o; });
  return it != t.end() && it->op == op ? &*it : nullptr;
}

}  // namespace npusim::compiler
