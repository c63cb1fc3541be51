// Decomposition into vector-unit primitives: the vector unit executes one isa::VecOp per instruction,
// and Softmax, LayerNormalization, InstanceNormalization, SiLU, PRelu, the norm reductions
// (ReduceSumSquare/L1/L2) and variadic Sum/Mean are not among them. Spelling
// them as the primitives here lets tiling and codegen treat every vector node as one VecOp (and shows
// the true number of passes over the data in the report). An unfused BatchNormalization is left whole:
// the back end streams its per-channel affine map (and a fused activation) in one pass.
#include "compiler/passes/expand.h"
#include "compiler/passes/pass_util.h"
#include "compiler/passes/passes.h"

namespace npusim::compiler::passes {

void decompose(Graph& g) {
  std::vector<Node> out;
  out.reserve(g.nodes.size());
  // Expansions append values and constants to g but never touch g.nodes until the end.
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    const Node& n = g.nodes[k];
    std::optional<std::vector<Node>> parts;
    if (n.domain.empty() && n.op_type == "Softmax")
      parts = detail::expand_softmax(g, n);
    else if (n.domain.empty() && n.op_type == "LayerNormalization")
      parts = detail::expand_layernorm(g, n);
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
    for (auto& p : *parts) out.push_back(std::move(p));
  }
  g.nodes = std::move(out);
  // Expanded nodes were named against the graph without each other's siblings: make names unique.
  std::map<std::string, int> seen;
  for (auto& n : g.nodes)
    if (seen[n.name]++) n.name = n.name + "_" + std::to_string(seen[n.name]);
  detail::drop_unreferenced_values(g);
}

}  // namespace npusim::compiler::passes
