// Free ops: Identity, inference Dropout and a Pad of zero widths (torchvision's DenseNet exports one before
// every transition's AveragePool) compute nothing, and a Reshape-like op on data in ONNX order
// only renames the same bytes. Removing the former and marking the latter "free" keeps the back end from
// spending a copy on them.
#include <algorithm>

#include "compiler/passes/pass_util.h"
#include "compiler/passes/passes.h"

namespace npusim::compiler::passes {
namespace {

// A Pad whose pads (attribute before opset 11, constant input after) are all zero: its output is its input.
bool zero_pad(const Graph& g, const Node& n) {
  if (n.op_type != "Pad") return false;
  std::vector<int64_t> pads;
  if (g.opset < 11) {
    pads = n.attr_ints("pads", {});
  } else {
    const Tensor* t = n.has_input(1) ? detail::constant_of(g, n.inputs[1]) : nullptr;
    if (!t) return false;
    pads = t->to_int_vector();
  }
  return std::all_of(pads.begin(), pads.end(), [](int64_t p) { return p == 0; });
}

}  // namespace

void alias_free_ops(Graph& g) {
  std::vector<bool> dead(g.nodes.size(), false);
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    Node& n = g.nodes[k];
    if (!n.domain.empty()) continue;
    const bool pass_through =
        n.op_type == "Identity" ||
        (n.op_type == "Dropout" && n.attr_int("training_mode", 0) == 0 &&
         (n.outputs.size() < 2 || n.outputs[1].empty() ||
          (!detail::use_count(g, n.outputs[1]) && !detail::is_graph_output(g, n.outputs[1]))));
    if (zero_pad(g, n) && n.has_input(0) && !detail::is_graph_output(g, n.outputs[0])) {
      detail::replace_uses(g, n.outputs[0], n.inputs[0]);
      dead[k] = true;
      continue;
    }
    if (!pass_through || !n.has_input(0)) continue;
    // opset >= 12 Dropout may take a training_mode input: only a constant false keeps it an identity.
    if (n.op_type == "Dropout" && n.has_input(2)) {
      const Tensor* t = detail::constant_of(g, n.inputs[2]);
      if (!t || t->as_int(0) != 0) continue;
    }
    const std::string in = n.inputs[0], out = n.outputs[0];
    if (detail::is_graph_output(g, out)) {
      n.attrs[kPlacement].value = std::string(placement_name(Placement::kFree));
      continue;
    }
    detail::replace_uses(g, out, in);
    dead[k] = true;
  }
  detail::erase_nodes(g, dead);
  detail::drop_unreferenced_values(g);
}

}  // namespace npusim::compiler::passes
