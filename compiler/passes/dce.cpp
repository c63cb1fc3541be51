// Dead-node elimination: folding and fusion leave producers nobody reads; the back end must not
// schedule them nor allocate their buffers.
#include <unordered_set>

#include "compiler/passes/pass_util.h"
#include "compiler/passes/passes.h"

namespace npusim::compiler::passes {

void eliminate_dead_nodes(Graph& g) {
  std::unordered_set<std::string> live(g.outputs.begin(), g.outputs.end());
  std::vector<bool> dead(g.nodes.size(), false);
  for (size_t k = g.nodes.size(); k-- > 0;) {
    const Node& n = g.nodes[k];
    bool used = false;
    for (const auto& o : n.outputs) used = used || (!o.empty() && live.count(o));
    if (!used) {
      dead[k] = true;
      continue;
    }
    for (const auto& in : n.inputs) live.insert(in);
  }
  detail::erase_nodes(g, dead);
  // Outputs of live nodes that nobody reads stay referenced by their node; everything else unused goes.
  detail::drop_unreferenced_values(g);
}

}  // namespace npusim::compiler::passes
