#pragma once
// The individual graph passes of the lowering pipeline (compiler/passes/lowered.h states what the whole
// pipeline guarantees). Each pass is a plain function on the graph so tests can run one at a time;
// each leaves a graph that verify()s, in topological order, computing the same graph outputs.
#include <string>
#include <vector>

#include "compiler/ir/graph.h"
#include "compiler/passes/lowered.h"

namespace npusim::compiler::passes {

// Evaluates every node whose inputs are all constants (and Shape/Size of a fully known value) with
// the FP32 interpreter and replaces its outputs by constants; repeats until nothing changes, so
// shape arithmetic chains collapse. Nodes the interpreter cannot run are left alone.
void fold_constants(Graph& g);

// Removes nodes none of whose outputs is used (consumed or a graph output) and constants no node
// reads.
void eliminate_dead_nodes(Graph& g);

// LSTM / GRU / RNN with a static X and constant weights -> per direction one input-projection MatMul over
// all steps, then per step a recurrent MatMul plus the gates as element-wise ops and activations
// (compiler/ops/recurrent.h describes the layers). Others stay whole (host); recurrent_host_reason says why.
void decompose_recurrent(Graph& g);
std::string recurrent_host_reason(const Graph& g, const Node& n);

// The If nodes left after folding: their conditions depend on the data. Names, in graph order.
std::vector<std::string> data_dependent_ifs(const Graph& g);
// Replaces If `name` by the branch `then_branch` (true) or else_branch (false) and folds what that
// makes constant: the program of that path, for timing each path of a data-dependent If.
void take_branch(Graph& g, const std::string& name, bool then_branch);

// A Conv over a 3-D input with constant 3-D weights -> the same Conv of height 1 between two Reshapes
// (free), so the back end's 2-D lowerings run it on the array.
void conv1d_as_2d(Graph& g);

// Gemm to transA = transB = 0, alpha = beta = 1: constant operands are rewritten, a non-constant
// transposed operand gets a Transpose node.
void normalize_gemm(Graph& g);

// Folds per-channel affine maps (a BatchNormalization, constant Mul / Div / Add / Sub) into the Conv /
// ConvTranspose / Gemm / 2-D-constant-weight MatMul that feeds them (when that node's output has no other
// use); merges other chains of them into one BatchNormalization, which folds into an unpadded Conv
// that is its only reader.
void fold_batchnorm(Graph& g);

// LayerNorm, GELU, HardSwish, HardSigmoid and SiLU as torch.onnx.export and paddle2onnx spell them -> one
// node each.
void recognize_patterns(Graph& g);

// Bias Add, residual Add and activation after a matrix node -> the node's epilogue attributes; an
// activation after an element-wise binary node or an unfused BatchNormalization -> its kActivation.
void fuse_epilogues(Graph& g);

// Softmax, LayerNormalization, InstanceNormalization, npu.Silu, ... -> vector-unit primitives; a Softmax
// or LayerNormalization in rowwise_form with rows of at most `whole_row_limit` elements (> 0) stays whole,
// and an unfused BatchNormalization stays whole (the back end lowers it as one per-channel affine pass).
void decompose(Graph& g, int64_t whole_row_limit = 0);

// An element-wise op against one constant value whose runtime operand a Transpose or Reshape made (and
// only it reads) moves in front of that node, repeatedly: it reads the tensor in the order it was written,
// and the data movement after it becomes a view its reader takes (backend/memory/strided_views.h).
void scalar_ops_first(Graph& g);

// A MatMul or Gemm against constant weights whose input a Transpose keeping the last axis made (and only it
// reads) runs before that Transpose, which then permutes its output's rows: where the Transpose moves rows
// (not only dims of extent 1, which is free) and its new readers take views (Slices, Reshapes, Transposes:
// torch's batch_first attention) or the rows it moves are no longer.
void transposes_after_matmuls(Graph& g);

// NHWC for conv activations, layout conversions where a consumer needs another order (options.nhwc).
void assign_layouts(Graph& g);

// Identity / Dropout removed; Reshape-like ops on ONNX-order data become free aliases.
void alias_free_ops(Graph& g);

// Sets npu.placement on every node from the op table and the node's constraints.
void assign_placement(Graph& g);

// The placement of one node of g.
Placement placement_of(const Graph& g, const Node& n);

}  // namespace npusim::compiler::passes
