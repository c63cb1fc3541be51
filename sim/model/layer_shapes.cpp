#include "sim/model/layer_shapes.h"

#include <algorithm>
#include <string>
#include <vector>

namespace npusim::sim {
namespace {

const compiler::Node* find_node(const compiler::Graph& g, const std::string& name) {
  for (const compiler::Node& n : g.nodes)
    if (n.name == name) return &n;
  return nullptr;
}

std::string dims_text(const std::vector<int64_t>& dims) {
  std::string o;
  for (const int64_t d : dims) o += (o.empty() ? "" : "x") + std::to_string(d);
  return o;
}

// Whether `s` is a runtime value of `g`: a model input or the output of a node other than Constant (not a
// weight, a bias or a shape constant, whether the model holds it as an initializer or a Constant node).
bool runtime_value(const compiler::Graph& g, const std::string& s) {
  if (g.has_value(s) && g.value(s).is_constant()) return false;
  if (std::find(g.inputs.begin(), g.inputs.end(), s) != g.inputs.end()) return true;
  for (const compiler::Node& n : g.nodes)
    if (std::find(n.outputs.begin(), n.outputs.end(), s) != n.outputs.end()) return n.op_type != "Constant";
  return false;
}

// The shapes of `values` that are runtime values of `first`, joined by ", ": the shape from `first`, or
// where it left one unknown, from `second`.
std::string shapes_text(const std::vector<std::string>& values, const compiler::Graph& first,
                        const compiler::Graph& second) {
  std::string o;
  for (const std::string& s : values) {
    if (s.empty() || !runtime_value(first, s)) continue;
    for (const compiler::Graph* g : {&first, &second}) {
      if (!g->has_value(s) || !g->value(s).fully_known()) continue;
      o += (o.empty() ? "" : ", ") + dims_text(g->value(s).shape);
      break;
    }
  }
  return o;
}

bool windowed(const std::string& op) {
  return op == "Conv" || op == "ConvTranspose" || op == "MaxPool" || op == "AveragePool" || op == "LpPool";
}

}  // namespace

void describe_layer_node(const compiler::Graph& imported, const compiler::Graph& lowered,
                         traces::LayerReport& l) {
  const compiler::Graph* g = &imported;
  const compiler::Node* n = find_node(imported, l.name);
  if (!n) {
    g = &lowered;
    n = find_node(lowered, l.name);
  }
  if (!n) return;
  const compiler::Graph& other = g == &imported ? lowered : imported;
  l.input_shape = shapes_text(n->inputs, *g, other);
  l.output_shape = shapes_text(n->outputs, *g, other);
  if (!windowed(n->op_type)) return;
  std::vector<int64_t> kernel = n->attr_ints("kernel_shape");
  if (kernel.empty() && n->inputs.size() > 1 && g->has_value(n->inputs[1])) {
    const compiler::Shape& w = g->value(n->inputs[1]).shape;  // a conv's weights: K x C/group x kh x kw
    if (w.size() > 2) kernel.assign(w.begin() + 2, w.end());
  }
  if (kernel.empty()) return;
  l.kernel = dims_text(kernel);
  l.stride = dims_text(n->attr_ints("strides", std::vector<int64_t>(kernel.size(), 1)));
  if (n->op_type == "Conv" || n->op_type == "ConvTranspose")
    l.groups = static_cast<uint64_t>(n->attr_int("group", 1));
}

}  // namespace npusim::sim
