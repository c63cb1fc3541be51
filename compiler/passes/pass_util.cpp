#include "compiler/passes/pass_util.h"

#include <algorithm>
#include <unordered_set>

namespace npusim::compiler::passes::detail {

const Tensor* constant_of(const Graph& g, const std::string& name) {
  if (name.empty()) return nullptr;
  auto it = g.values.find(name);
  return it == g.values.end() ? nullptr : it->second.constant.get();
}

bool is_graph_output(const Graph& g, const std::string& name) {
  return std::find(g.outputs.begin(), g.outputs.end(), name) != g.outputs.end();
}

int use_count(const Graph& g, const std::string& name) {
  int n = 0;
  for (const auto& node : g.nodes)
    for (const auto& in : node.inputs)
      if (in == name) ++n;
  return n;
}

int sole_consumer(const Graph& g, const std::string& name) {
  if (is_graph_output(g, name)) return -1;
  int found = -1, uses = 0;
  for (size_t k = 0; k < g.nodes.size(); ++k)
    for (const auto& in : g.nodes[k].inputs)
      if (in == name) {
        ++uses;
        found = static_cast<int>(k);
      }
  return uses == 1 ? found : -1;
}

UseIndex::UseIndex(const Graph& g) : outputs_(g.outputs.begin(), g.outputs.end()) {
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    for (const auto& o : g.nodes[k].outputs)
      if (!o.empty()) producer_[o] = static_cast<int>(k);
    for (const auto& in : g.nodes[k].inputs) {
      if (in.empty()) continue;
      ++uses_[in];
      reader_[in] = static_cast<int>(k);
    }
  }
}

int UseIndex::producer(const std::string& v) const {
  auto it = producer_.find(v);
  return it == producer_.end() ? -1 : it->second;
}

int UseIndex::sole_consumer(const std::string& v) const {
  if (outputs_.count(v)) return -1;
  auto it = uses_.find(v);
  return it != uses_.end() && it->second == 1 ? reader_.at(v) : -1;
}

std::optional<float> scalar_constant(const Graph& g, const std::string& name) {
  const Tensor* t = constant_of(g, name);
  if (!t || t->size() == 0 || !t->has_values() || !interpretable(t->dtype)) return std::nullopt;
  double first = t->as_double(0);
  for (int64_t k = 1; k < t->size(); ++k)
    if (t->as_double(k) != first) return std::nullopt;
  return static_cast<float>(first);
}

std::optional<Tensor> channel_constant(const Graph& g, const std::string& v, size_t axis, const Tensor& c) {
  const Value& out = g.value(v);
  if (!out.fully_known() || !c.floating() || !c.has_values() ||
      c.rank() > static_cast<int64_t>(out.shape.size()) || axis >= out.shape.size())
    return std::nullopt;
  const size_t off = out.shape.size() - c.shape.size();
  const int64_t ch = out.shape[axis];
  for (size_t d = 0; d < c.shape.size(); ++d)
    if (c.shape[d] != 1 && !(off + d == axis && c.shape[d] == ch)) return std::nullopt;
  Tensor b(DataType::kFloat32, {ch});
  const bool per_channel = c.size() == ch && ch != 1;
  for (int64_t i = 0; i < ch; ++i) b.f[i] = static_cast<float>(c.as_double(per_channel ? i : 0));
  return b;
}

size_t output_channel_axis(const Graph& g, const Node& m) {
  const size_t r = g.value(m.outputs[0]).shape.size();
  return m.op_type == "Conv" || m.op_type == "ConvTranspose" || r == 0 ? 1 : r - 1;
}

std::string add_constant(Graph& g, const std::string& base, Tensor t) {
  std::string name = g.unique_value_name(base);
  g.add_constant(name, std::move(t));
  return name;
}

void replace_constant(Graph& g, Node& n, size_t k, Tensor t, const std::string& suffix) {
  const std::string old = n.inputs[k];
  n.inputs[k] = add_constant(g, old + suffix, std::move(t));
  if (use_count(g, old) == 0 && !is_graph_output(g, old)) g.values.erase(old);
}

std::string add_value(Graph& g, const std::string& base, DataType dtype, const Shape& shape,
                      bool shape_known) {
  std::string name = g.unique_value_name(base);
  Value& v = g.ensure_value(name);
  v.dtype = dtype;
  v.shape = shape;
  v.shape_known = shape_known;
  return name;
}

Node make_node(const Graph& g, const std::string& op_type, const std::string& base,
               std::vector<std::string> inputs, std::vector<std::string> outputs) {
  Node n;
  n.op_type = op_type;
  n.name = g.unique_node_name(base);
  n.inputs = std::move(inputs);
  n.outputs = std::move(outputs);
  return n;
}

void replace_uses(Graph& g, const std::string& from, const std::string& to) {
  for (auto& node : g.nodes)
    for (auto& in : node.inputs)
      if (in == from) in = to;
}

void erase_nodes(Graph& g, const std::vector<bool>& dead) {
  std::vector<Node> kept;
  kept.reserve(g.nodes.size());
  for (size_t k = 0; k < g.nodes.size(); ++k)
    if (!dead[k]) kept.push_back(std::move(g.nodes[k]));
  g.nodes = std::move(kept);
}

void drop_unreferenced_values(Graph& g) {
  std::unordered_set<std::string> used(g.inputs.begin(), g.inputs.end());
  used.insert(g.outputs.begin(), g.outputs.end());
  for (const auto& node : g.nodes) {
    used.insert(node.inputs.begin(), node.inputs.end());
    used.insert(node.outputs.begin(), node.outputs.end());
  }
  for (auto it = g.values.begin(); it != g.values.end();)
    it = used.count(it->first) ? std::next(it) : g.values.erase(it);
}

Tensor int64_vector(const std::vector<int64_t>& v) {
  return Tensor::from_ints(DataType::kInt64, {static_cast<int64_t>(v.size())}, v);
}

Node make_reduce(Graph& g, const std::string& op_type, const std::string& base, const std::string& input,
                 const std::vector<int64_t>& axes, const std::string& output, bool keepdims) {
  Node n = make_node(g, op_type, base, {input}, {output});
  n.attrs["keepdims"].value = int64_t{keepdims ? 1 : 0};
  const bool axes_as_input = op_type == "ReduceSum" ? g.opset >= 13 : g.opset >= 18;
  if (axes_as_input)
    n.inputs.push_back(add_constant(g, base + "_axes", int64_vector(axes)));
  else
    n.attrs["axes"].value = axes;
  return n;
}

std::optional<std::vector<int64_t>> reduce_axes(const Graph& g, const Node& n, int64_t rank) {
  std::vector<int64_t> axes;
  if (n.has_attr("axes")) {
    axes = n.attr_ints("axes");
  } else if (n.has_input(1)) {
    const Tensor* t = constant_of(g, n.inputs[1]);
    if (!t) return std::nullopt;
    axes = t->to_int_vector();
  }
  if (axes.empty()) {
    if (n.attr_int("noop_with_empty_axes", 0)) return std::nullopt;
    for (int64_t d = 0; d < rank; ++d) axes.push_back(d);
  }
  for (auto& a : axes) a = norm_axis(a, rank);
  std::sort(axes.begin(), axes.end());
  return axes;
}

}  // namespace npusim::compiler::passes::detail
