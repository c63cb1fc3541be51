#pragma once
// The contract between the graph passes and the back end (tiling, memory planning, codegen): what a
// graph looks like after `lower()`. The back end may rely on every statement below; a pass that
// breaks one is a bug in compiler/passes.
//
// ---------------------------------------------------------------------------------------------------
// Post-condition of lower(g, options) (options at their defaults unless said otherwise)
// ---------------------------------------------------------------------------------------------------
// Values are still logical ONNX tensors: a node's semantics are ONNX's (opset g.opset) plus the npu.*
// attributes below, and the FP32 interpreter run on reference_graph(g) computes the same graph
// outputs as on the imported graph (within float rounding). Physical layout is an annotation
// (Value::layout), never a change of logical shapes.
//
// 1. Placement. Every node carries kPlacement = "matrix" | "vector" | "free" | "host": the op table's
//    placement (compiler/ops, find_op) with the constraints the table states checked on the node as
//    lowered: Gather with neither data nor indices constant -> host; Cast -> free on a constant, else
//    vector; Reshape/Flatten/Squeeze/Unsqueeze -> free when their input is in ONNX order (always, after
//    the layout pass), else vector; a matrix op with non-float operands -> host; npu.Gelu, npu.Silu,
//    npu.RMSNormalization and the layout npu.Transpose -> vector; ops the table does not list (and other
//    domains) -> host.
//
// 2. Matrix nodes: Conv (any group, dilation, stride, pads, incl. depthwise), ConvTranspose, Gemm,
//    MatMul (batched, broadcasting as ONNX). Their inputs are uniform:
//      inputs[0] = activation (X / A), inputs[1] = weights (W / B),
//      inputs[2] = bias or "" (Conv/ConvTranspose: [M] per output channel; Gemm/MatMul: [N], or for
//                  Gemm a C that broadcasts to [M,N] as ONNX allows),
//      inputs[3] = residual, present iff attribute kResidualInput (int) is set, and then it is 3.
//    MatMul may therefore carry a bias and a residual, which ONNX's MatMul does not have.
//    Gemm is normalised: transA = transB = 0, alpha = beta = 1 (those attributes are absent). A
//    constant B is pre-transposed and pre-scaled (a constant C pre-scaled); a non-constant transposed
//    operand gets an explicit Transpose node in front, a non-constant scaled one a Mul (vector ops).
//    Epilogue, in this order: y = act(matmul_or_conv(x, w) + bias + residual), where act is given by
//      kActivation (string, absent = none): "Relu", "Clip" (kActMin, kActMax), "Sigmoid", "Tanh",
//      "LeakyRelu" (kAlpha), "HardSigmoid" (kAlpha, kBeta), "HardSwish", "Gelu" (erf form), "Silu"
//      (x * sigmoid(x); after matrix nodes only). A Clip bound the model leaves open is float
//      lowest()/max(); Relu followed by Clip(lo >= 0, hi) (torch's relu6) is one "Clip".
//    The residual has exactly the node's output shape (no broadcasting); it is fused only when the
//    matrix output had no other consumer. No epilogue absorbs a value marked Value::materialized (a
//    pre-quantized model's quantization point): the chain stops there, and the consumer stays a node.
//    An element-wise binary node (Add, Sub, Mul, Div, Max, Min; two inputs, float) that no matrix node
//    absorbed may carry kActivation (same attributes as above) when its output's only consumer was
//    that activation: y = act(a op b). So may a BatchNormalization that stays (point 3; not Silu):
//    y = act(x * scale + shift).
//
// 3. BatchNormalization directly after a Conv / ConvTranspose / Gemm (or a 2-D MatMul with a constant
//    weight, which then becomes a Gemm carrying the folded bias) whose output has no other consumer and
//    is not materialized is folded into that node's weights and bias (new constants; the old ones are
//    removed when unused); so is a constant per-channel Mul / Div / Add / Sub there. Other chains of
//    two or more of those on a 4-D value become one BatchNormalization (mean 0, var 1, epsilon 0), and
//    a BatchNormalization read only by an unpadded Conv with constant weights is folded into that
//    conv's weights and bias. An unfused BatchNormalization stays a vector node (batchnorm_affine gives
//    its per-channel affine map when its parameters are constant; the back end lowers it as one pass
//    over the tensor) and may carry a fused activation (point 2). It is not decomposed.
//
// 4. Recognised patterns (from the sequences torch.onnx.export emits):
//      ReduceMean, Sub, Pow(2), ReduceMean, Add(eps), Sqrt, Div [, Mul(gamma)] [, Add(beta)]
//          -> LayerNormalization (domain "", axis = the normalised last axis, epsilon; a missing gamma
//             becomes ones, a missing beta becomes absent)
//      Pow(2) | Mul(x, x), ReduceMean, Add(eps), Sqrt, then Div(x, .) or Mul(x, Div(1, .) | Reciprocal)
//      [, Mul(gamma)]
//          -> RMSNormalization (domain "npu"; inputs x, scale (a missing gamma becomes ones); attributes
//             axis = the normalised last axis, epsilon: x * scale / sqrt(mean(x^2 over the axes) + eps),
//             ONNX opset 23's RMSNormalization, which ONNX 1.12 lacks)
//      Div(sqrt2), Erf, Add(1), Mul(x), Mul(0.5) (either Mul order)      -> Gelu   (domain "npu")
//      HardSigmoid(alpha 1/6, beta 1/2) then Mul with its own input     -> HardSwish (domain "")
//      Sigmoid then Mul with its own input                              -> Silu   (domain "npu")
//    Gelu has no ONNX 1.12 schema, hence domain "npu" (attribute approximate = "none").
//
// 5. Decomposition (options.decompose, default on): the composite ops below, which have no single
//    isa::VecOp but are made of ops that do (elementwise add/sub/mul/div/max/min/pow, Relu, LeakyRelu,
//    Clip, Sigmoid, Tanh, Gelu, Erf, Exp, Sqrt, Reciprocal, Abs, Neg, HardSigmoid, HardSwish, pooling,
//    ReduceSum / ReduceMax / ReduceMean, transposes), are rewritten into those. Vector ops the ISA has
//    no VecOp for and that cannot be built from VecOps (Log, Elu, Softplus, Floor, CumSum, ArgMax, ...:
//    the op table still places them on the vector unit) and data-movement ops (Concat, Slice, Pad,
//    Split, Gather, Resize, ...) are left as they are for the back end (or its host fallback). Rewritten:
//      Softmax(axis)           -> ReduceMax, Sub, Exp, ReduceSum, Div      (keepdims=1 reductions)
//      LayerNormalization      -> ReduceMean, Sub, Mul, ReduceMean, Add(eps), Sqrt, Div, Mul(gamma),
//                                 Add(beta)
//      npu.Silu                -> Sigmoid, Mul
//      npu.RMSNormalization    -> Mul(x, x), ReduceMean, Add(eps), Sqrt, Div, Mul(scale)
//      InstanceNormalization   -> as LayerNormalization over the spatial axes, [C,1,..] scale/bias
//      ReduceSumSquare/L1/L2   -> Mul(x, x) | Abs, ReduceSum [, Sqrt]
//      Sum / Mean (variadic)   -> Add chain [, Mul(1/n)]
//      PRelu                   -> Relu(x) + slope * Min(x, 0)
//    With options.decompose = false those nodes stay as they are.
//    Exception (options.whole_row_limit > 0): a Softmax, LayerNormalization or RMSNormalization in row-wise
//    form (rowwise_form below) whose row has at most whole_row_limit elements stays one node, for the back
//    end's row-wise kernel (compiler/backend/rowwise.h: rows loaded once, every step in SRAM). Other
//    axes, longer rows and non-constant scale/bias are decomposed as above, and then each piece carries
//    kDecomposedWhy (string): why its node was not kept whole (the back end adds it to the layer's
//    mapping description).
//
// 6. Constant folding: no node has only constant inputs unless the interpreter cannot run it (such
//    nodes are evaluated with the FP32 interpreter, compiler/interp, and replaced by constants), which
//    removes the exporters' shape arithmetic (Shape -> Gather -> Cast/Concat/Unsqueeze -> Reshape)
//    once input shapes are bound. Value shapes that import left unknown behind that arithmetic are
//    filled in as it folds (Value::shape_known), so the back end sees static shapes. An If whose
//    condition folds is replaced by the branch it takes (nested Ifs too); an If left has a condition
//    computed from the data and runs on the host (placement "host"), its captures as inputs.
//
// 6b. Recurrent layers (options.decompose): an LSTM / GRU / RNN with a static X, constant W, R, B, P and
//    no sequence shorter than X's is gone: per direction one input-projection MatMul over all steps
//    ([seq*batch, input] x [input, gates*hidden] + biases), then per step a MatMul of the state with
//    R^T plus that step's projected rows, Slices of the gate block, Clip, the activations and the
//    element-wise state updates. Other recurrent nodes are left whole (host).
//
// 7. Layout (options.nhwc, default on). Value::layout gives every value's physical order: the
//    logical dims in memory order, outermost first; empty = ONNX order. 4-D activations produced by
//    conv-like ops (Conv, ConvTranspose, pooling, BatchNormalization, LRN, InstanceNormalization) and
//    by the layout-agnostic ops after them (elementwise, activations, Concat, Pad, Resize, Upsample:
//    NHWC when any 4-D runtime operand is, all such operands then NHWC) are NHWC = {0, 2, 3, 1}. A 4-D
//    constant operand of an NHWC elementwise node gets the same layout (the back end writes its data
//    in that order). Every other value is in ONNX order. Where a value's layout differs from what
//    its consumer needs (graph inputs/outputs are ONNX order; Reshape, Flatten, Transpose, MatMul,
//    Gemm, reductions, Softmax ... need ONNX order on 4-D inputs; conv-like ops need NHWC), a node
//      op_type "Transpose", domain "npu", attrs kLayoutChange = 1, "perm" = the memory permutation
//    is inserted: it is a logical identity (same logical shape in and out) that only moves data from
//    the input's layout to the output's. A conversion whose moved dims are all of size 1 is a no-op
//    and is not inserted. layout_changes() lists them for the compile report.
//
// 8. Free ops. Reshape, Flatten, Squeeze, Unsqueeze whose input is in ONNX order, and Identity /
//    Dropout (inference) are placement "free": output[0] aliases inputs[0]'s bytes (the memory
//    planner must give them one buffer). Identity and Dropout are removed outright unless their
//    output is a graph output; so is a Pad whose pads are all zero (it is then removed, its readers
//    read its input). Cast of a constant is folded (point 6).
//
// 9. Dead nodes (no output consumed and none a graph output) and unused constants are removed; nodes
//    are in topological order; Graph::verify() holds.
#include <optional>
#include <string>
#include <vector>

#include "compiler/ir/graph.h"
#include "compiler/ops/op_table.h"

namespace npusim::compiler {

// Attribute keys the passes set (see the contract above).
inline constexpr const char* kPlacement = "npu.placement";
inline constexpr const char* kActivation = "npu.activation";
inline constexpr const char* kActMin = "npu.act_min";
inline constexpr const char* kActMax = "npu.act_max";
inline constexpr const char* kAlpha = "npu.alpha";
inline constexpr const char* kBeta = "npu.beta";
inline constexpr const char* kResidualInput = "npu.residual_input";
inline constexpr const char* kLayoutChange = "npu.layout_change";
// Why a layout change was inserted (a sentence for the compile report).
inline constexpr const char* kLayoutReason = "npu.layout_reason";
// On the pieces of a Softmax / LayerNormalization decomposed although the row-wise kernel was on: why.
inline constexpr const char* kDecomposedWhy = "npu.decomposed_why";
// The domain of npusim's own ops (Gelu, Silu, the layout Transpose).
inline constexpr const char* kNpuDomain = "npu";

// The placement the placement pass set on n (its kPlacement attribute); nullopt when n has none.
std::optional<Placement> assigned_placement(const Node& n);

// The NHWC memory order of a logical NCHW tensor.
inline const std::vector<int> kNhwc = {0, 2, 3, 1};

struct PipelineOptions {
  bool fold_constants = true;
  bool fold_batchnorm = true;
  bool recognize_patterns = true;
  bool fuse_epilogues = true;
  // Split composite vector ops (Softmax, LayerNormalization, Silu, ...) into VecOp
  // primitives; false keeps them whole (for a back end with its own kernels for them).
  bool decompose = true;
  // Softmax / LayerNormalization rows of up to this many elements are left whole for the back end's
  // row-wise kernel (compile.h: rowwise_row_limit(config) gives the target's figure); 0 decomposes them.
  int64_t whole_row_limit = 0;
  // Choose NHWC for conv activations and insert layout conversions; false keeps ONNX order everywhere.
  bool nhwc = true;
};

// A Softmax over its trailing axes (since opset 13: the axis and only 1s after it; before: the axes
// from `axis` on, which it flattens) or a LayerNormalization (the axes from `axis` on; Mean/InvStdDev
// outputs unused; scale and bias absent or constants of one element or of the whole row) or an
// npu.RMSNormalization (the same, scale only), seen as
// `rows` independent rows of `row` contiguous elements (ONNX order). nullopt for anything else.
struct RowwiseForm {
  int64_t rows = 0;  // product of the leading axes
  int64_t row = 0;   // product of the normalised axes
};
std::optional<RowwiseForm> rowwise_form(const Graph& g, const Node& n);

// npu.RMSNormalization (point 4).
inline bool is_rmsnorm(const Node& n) { return n.domain == kNpuDomain && n.op_type == "RMSNormalization"; }

// The passes in the order lower() runs them, given the options.
std::vector<Pass> standard_pipeline(const PipelineOptions& options);

// Runs standard_pipeline(options) on g through a PassManager (re-verifying after every pass and calling
// `observer` with the graph after each: `npusim compile -v`). Throws std::runtime_error naming the pass
// on a broken invariant; a model the passes cannot handle throws ModelError (compiler/import/import.h).
void lower(Graph& g, const PipelineOptions& options = {}, PassManager::Observer observer = {});

// An inference BatchNormalization with constant parameters is the per-channel affine map
// y = x * scale[c] + shift[c] (channel axis 1) with scale = gamma / sqrt(var + eps) and
// shift = beta - mean * scale, computed in double and rounded to float once. Both fold-batchnorm and
// the back end's BatchNormalization layer (and the quantized reference, which must compute what that
// layer computes) take the constants from here. nullopt for any other node (training mode, runtime
// parameters, a used Mean/Var output).
struct ChannelAffine {
  std::vector<float> scale, shift;
};
std::optional<ChannelAffine> batchnorm_affine(const Graph& g, const Node& bn);

// One inserted layout conversion, for the compile report.
struct LayoutChange {
  std::string node;                         // the npu.Transpose node's name
  std::string input;                        // the value converted
  std::string output;                       // its copy in the new layout
  Shape shape;                              // logical shape
  std::vector<int> from_layout, to_layout;  // memory orders (empty = ONNX order)
  std::string reason;
};
std::vector<LayoutChange> layout_changes(const Graph& g);

// A graph of plain ONNX ops (opset g.opset) that computes the same values as a lowered graph: fused
// epilogues become separate Add / activation nodes, npu-domain ops (Gelu, Silu, layout Transposes)
// become their ONNX equivalents, MatMul bias/residual inputs become Adds, npu.* attributes and
// layouts are dropped. Used to check lowering numerically with the FP32 interpreter, and by anyone
// who wants to run a lowered graph on a plain ONNX evaluator.
Graph reference_graph(const Graph& lowered);

}  // namespace npusim::compiler
