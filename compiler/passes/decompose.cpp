// Decomposition into vector-unit primitives: the vector unit executes one isa::VecOp per instruction,
// and Softmax, LayerNormalization, RMSNormalization, InstanceNormalization, SiLU, PRelu, the norm reductions
// (ReduceSumSquare/L1/L2) and variadic Sum/Mean are not among them. Spelling
// them as the primitives here lets tiling and codegen treat every vector node as one VecOp (and shows
// the true number of passes over the data in the report). Softmax and LayerNormalization whose rows
// the back end's row-wise kernel holds in SRAM stay whole (and RMSNormalization) (whole_row_limit):
// decomposed, each step would load its operands from DRAM and store its result back. An unfused
// BatchNormalization is left whole: the back end streams its per-channel affine map (and a fused activation)
// in one pass.
#include "compiler/passes/expand.h"
#include "compiler/passes/pass_util.h"
#include "compiler/passes/passes.h"

namespace npusim::compiler {

std::optional<RowwiseForm> rowwise_form(const Graph& g, const Node& n) {
  const bool softmax = n.domain.empty() && n.op_type == "Softmax";
  const bool layernorm = (n.domain.empty() && n.op_type == "LayerNormalization") || is_rmsnorm(n);
  if ((!softmax && !layernorm) || n.inputs.empty() || n.outputs.empty()) return std::nullopt;
  const Value& x = g.value(n.inputs[0]);
  if (!x.shape_known || x.shape.empty() || !(is_float(x.dtype) || x.dtype == DataType::kUndefined))
    return std::nullopt;
  const auto r = static_cast<int64_t>(x.shape.size());
  int64_t axis = passes::detail::norm_axis(n.attr_int("axis", softmax && g.opset < 13 ? 1 : -1), r);
  if (axis < 0 || axis >= r) return std::nullopt;
  if (softmax && g.opset >= 13) {
    // One axis: the row is contiguous when every axis after it has extent 1.
    for (int64_t d = axis + 1; d < r; ++d)
      if (x.shape[static_cast<size_t>(d)] != 1) return std::nullopt;
  }
  RowwiseForm f{1, 1};
  for (int64_t d = 0; d < r; ++d) (d < axis ? f.rows : f.row) *= x.shape[static_cast<size_t>(d)];
  if (f.rows <= 0 || f.row <= 0) return std::nullopt;
  for (size_t o = 1; o < n.outputs.size(); ++o)
    if (!n.outputs[o].empty() &&
        (passes::detail::use_count(g, n.outputs[o]) || passes::detail::is_graph_output(g, n.outputs[o])))
      return std::nullopt;
  if (layernorm) {
    for (size_t k = 1; k <= 2; ++k) {
      if (!n.has_input(k)) continue;
      const Tensor* t = passes::detail::constant_of(g, n.inputs[k]);
      if (!t || !t->floating() || (t->size() != 1 && t->size() != f.row)) return std::nullopt;
    }
  }
  return f;
}

namespace passes {

void decompose(Graph& g, int64_t whole_row_limit) {
  std::vector<Node> out;
  out.reserve(g.nodes.size());
  // Expansions append values and constants to g but never touch g.nodes until the end.
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    const Node& n = g.nodes[k];
    std::optional<std::vector<Node>> parts;
    std::string why;  // why a Softmax / LayerNormalization is decomposed although the row-wise kernel is on
    if (whole_row_limit > 0 &&
        ((n.domain.empty() && (n.op_type == "Softmax" || n.op_type == "LayerNormalization")) ||
         is_rmsnorm(n))) {
      const std::optional<RowwiseForm> f = rowwise_form(g, n);
      if (f && f->row <= whole_row_limit) {
        out.push_back(n);
        continue;
      }
      why = "piece of " + n.op_type + " '" + n.name + "', decomposed: " +
            (f ? "a row of " + std::to_string(f->row) + " elements is longer than the " +
                     std::to_string(whole_row_limit) + " the row-wise kernel holds in SRAM"
               : std::string("not in row-wise form (another axis, a runtime scale/bias, used Mean/InvStdDev "
                             "outputs or an unknown shape)"));
    }
    if (n.domain.empty() && n.op_type == "Softmax")
      parts = detail::expand_softmax(g, n);
    else if (n.domain.empty() && n.op_type == "LayerNormalization")
      parts = detail::expand_layernorm(g, n);
    else if (is_rmsnorm(n))
      parts = detail::expand_rmsnorm(g, n);
    else if (n.domain.empty() && n.op_type == "InstanceNormalization")
      parts = detail::expand_instancenorm(g, n);
    else if (n.domain.empty() &&
             (n.op_type == "ReduceSumSquare" || n.op_type == "ReduceL1" || n.op_type == "ReduceL2"))
      parts = detail::expand_reduce_norm(g, n);
    else if (n.domain.empty() && (n.op_type == "Sum" || n.op_type == "Mean"))
      parts = detail::expand_variadic_sum(g, n);
    else if (n.domain.empty() && n.op_type == "PRelu")
      parts = detail::expand_prelu(g, n);
    else if (n.domain == kNpuDomain && n.op_type == "Silu")
      parts = detail::expand_silu(g, n);
    if (!parts) {
      out.push_back(n);
      continue;
    }
    for (auto& p : *parts) {
      if (!why.empty()) p.attrs[kDecomposedWhy].value = why;
      out.push_back(std::move(p));
    }
  }
  g.nodes = std::move(out);
  // Expanded nodes were named against the graph without each other's siblings: make names unique.
  std::map<std::string, int> seen;
  for (auto& n : g.nodes)
    if (seen[n.name]++) n.name = n.name + "_" + std::to_string(seen[n.name]);
  detail::drop_unreferenced_values(g);
}

}  // namespace passes
}  // namespace npusim::compiler
