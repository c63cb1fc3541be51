#pragma once
// Internal to compiler/passes: composite ops spelled as primitive ONNX ops. The decomposition pass
// uses them to reach vector-unit primitives; reference_graph() uses them to turn npu-domain ops back
// into ONNX the interpreter runs. Each returns the nodes (in order) computing node.outputs[0] under
// the same name, adding the constants and intermediate values they need to g; nullopt when the node
// cannot be expanded (unknown rank, extra outputs in use, non-constant parameters).
#include <optional>
#include <vector>

#include "compiler/ir/graph.h"

namespace npusim::compiler::passes::detail {

std::optional<std::vector<Node>> expand_softmax(Graph& g, const Node& n);
std::optional<std::vector<Node>> expand_layernorm(Graph& g, const Node& n);
// npu.RMSNormalization -> Mul(x, x), ReduceMean, Add(eps), Sqrt, Div, Mul(scale).
std::optional<std::vector<Node>> expand_rmsnorm(Graph& g, const Node& n);
std::optional<std::vector<Node>> expand_silu(Graph& g, const Node& n);
// Erf form: 0.5 * x * (1 + erf(x / sqrt 2)).
std::optional<std::vector<Node>> expand_gelu(Graph& g, const Node& n);
// Over the spatial axes, with per-channel scale and bias constants.
std::optional<std::vector<Node>> expand_instancenorm(Graph& g, const Node& n);
// ReduceSumSquare / ReduceL1 / ReduceL2 -> Mul | Abs, ReduceSum [, Sqrt].
std::optional<std::vector<Node>> expand_reduce_norm(Graph& g, const Node& n);
// Sum / Mean of two or more inputs -> a chain of Adds [, Mul(1/n)].
std::optional<std::vector<Node>> expand_variadic_sum(Graph& g, const Node& n);
// PRelu -> Relu(x) + slope * Min(x, 0).
std::optional<std::vector<Node>> expand_prelu(Graph& g, const Node& n);
// x * HardSigmoid(x; 1/6, 1/2).
std::optional<std::vector<Node>> expand_hardswish(Graph& g, const Node& n);

}  // namespace npusim::compiler::passes::detail
