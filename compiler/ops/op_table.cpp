#include "compiler/ops/op_table.h"

#include <algorithm>

namespace npusim::compiler {

std::string_view to_string(Placement p) {
  switch (p) {
    case Placement::kNpuMatrix: return "npu-matrix";
    case Placement::kNpuVector: return "npu-vector";
    case Placement::kFree: return "free";
    case Placement::kHost: return "host";
  }
  return "?";
}

namespace {

constexpr Placement M = Placement::kNpuMatrix;
constexpr Placement V = Placement::kNpuVector;
constexpr Placement F = Placement::kFree;
constexpr Placement H = Placement::kHost;

std::vector<OpSupport> build() {
  std::vector<OpSupport> t = {
      // Matrix unit.
      {"Conv", M, "1-D/2-D/3-D, any group, strides, dilations, pads, auto_pad; float32 data"},
      {"ConvTranspose", M, "lowered to a GEMM plus col2im scatter; output_shape/output_padding honoured"},
      {"Gemm", M, "alpha/beta/transA/transB; C broadcast to [M, N]"},
      {"MatMul", M, "batched with broadcasting; 1-D operands promoted as numpy does"},
      {"MatMulInteger", M, "int8/uint8 operands with scalar or per-row/column zero points, int32 result"},
      // Vector unit: element-wise arithmetic and activations.
      {"Add", V, "numpy broadcasting"},
      {"Sub", V, "numpy broadcasting"},
      {"Mul", V, "numpy broadcasting"},
      {"Div", V, "numpy broadcasting; integer division truncates"},
      {"Pow", V, "numpy broadcasting; lookup-table exponent on the NPU"},
      {"Sqrt", V, "lookup table"},
      {"Reciprocal", V, "lookup table"},
      {"Neg", V, ""},
      {"Abs", V, ""},
      {"Exp", V, "lookup table"},
      {"Log", V, "lookup table"},
      {"Floor", V, ""},
      {"Ceil", V, ""},
      {"Round", V, "half to even"},
      {"Sign", V, ""},
      {"Erf", V, "lookup table"},
      {"Relu", V, ""},
      {"LeakyRelu", V, ""},
      {"PRelu", V, "slope broadcast to the input"},
      {"Clip", V, "min/max as attributes (opset < 11) or inputs"},
      {"Sigmoid", V, "lookup table"},
      {"Tanh", V, "lookup table"},
      {"HardSigmoid", V, ""},
      {"HardSwish", V, ""},
      {"Elu", V, "lookup table"},
      {"Selu", V, "lookup table"},
      {"Celu", V, "lookup table"},
      {"Softplus", V, "lookup table"},
      {"Softsign", V, ""},
      {"ThresholdedRelu", V, ""},
      {"Shrink", V, ""},
      {"Min", V, "variadic, broadcasting"},
      {"Max", V, "variadic, broadcasting"},
      {"Sum", V, "variadic, broadcasting"},
      {"Mean", V, "variadic, broadcasting"},
      {"Mod", V, "fmod=0 (sign of divisor) or fmod=1"},
      // Vector unit: normalisation, pooling, reductions.
      {"Softmax", V, "opset < 13 flattens at axis, opset >= 13 one axis"},
      {"LogSoftmax", V, "as Softmax"},
      {"LayerNormalization", V, "axis, epsilon; optional Mean/InvStdDev outputs"},
      {"BatchNormalization", V, "inference form (running statistics); folded into a preceding Conv when possible"},
      {"InstanceNormalization", V, ""},
      {"LRN", V, "across channels"},
      {"MaxPool", V, "1-D/2-D/3-D, pads, dilations, ceil_mode, auto_pad; optional Indices output"},
      {"AveragePool", V, "1-D/2-D/3-D, pads, ceil_mode, count_include_pad, auto_pad"},
      {"GlobalAveragePool", V, ""},
      {"GlobalMaxPool", V, ""},
      {"ReduceMean", V, "axes as attribute or input; keepdims"},
      {"ReduceSum", V, "axes as attribute (opset < 13) or input; noop_with_empty_axes"},
      {"ReduceMax", V, "axes as attribute or input; keepdims"},
      {"ReduceMin", V, "axes as attribute or input; keepdims"},
      {"ReduceProd", V, "axes as attribute or input; keepdims"},
      {"ReduceL1", V, "axes as attribute or input; keepdims"},
      {"ReduceL2", V, "axes as attribute or input; keepdims"},
      {"ReduceSumSquare", V, "axes as attribute or input; keepdims"},
      {"ReduceLogSum", V, "axes as attribute or input; keepdims"},
      {"ReduceLogSumExp", V, "axes as attribute or input; keepdims"},
      {"ArgMax", V, "keepdims, select_last_index"},
      {"ArgMin", V, "keepdims, select_last_index"},
      {"CumSum", V, "exclusive, reverse"},
      // Vector unit: data movement.
      {"Concat", V, ""},
      {"Split", V, "split sizes as attribute (opset < 13) or input, or equal parts"},
      {"Slice", V, "starts/ends/axes/steps as attributes (opset < 10) or inputs; negative steps"},
      {"Gather", V, "on the NPU when the data or the indices are constants; otherwise host"},
      {"GatherElements", V, ""},
      {"Pad", V, "constant, reflect and edge modes"},
      {"Resize", V, "nearest (all nearest_modes), linear and cubic; every coordinate_transformation_mode"},
      {"Upsample", V, "opset 9 form: nearest and linear, asymmetric coordinates"},
      {"Transpose", V, "any permutation"},
      {"Expand", V, "broadcast copy"},
      {"Tile", V, ""},
      {"Where", V, "broadcasting"},
      {"Trilu", V, ""},
      {"DepthToSpace", V, "DCR and CRD"},
      {"SpaceToDepth", V, ""},
      {"QuantizeLinear", V, "per-tensor or per-axis scale/zero point; int8/uint8 result"},
      {"DequantizeLinear", V, "per-tensor or per-axis scale/zero point"},
      // Free: views and metadata.
      {"Reshape", F, "allowzero honoured"},
      {"Flatten", F, ""},
      {"Squeeze", F, "axes as attribute (opset < 13) or input"},
      {"Unsqueeze", F, "axes as attribute (opset < 13) or input"},
      {"Identity", F, ""},
      {"Dropout", F, "inference only: identity, mask all true"},
      {"Cast", F, "free on constants (folded); otherwise the vector unit converts"},
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
      {"CastLike", H, ""},
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
  auto it = std::lower_bound(t.begin(), t.end(), op, [](const OpSupport& r, std::string_view o) { return r.op < o; });
  return it != t.end() && it->op == op ? &*it : nullptr;
}

}  // namespace npusim::compiler
