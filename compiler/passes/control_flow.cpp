// Control flow resolved at compile time: an If whose branch is known is replaced by that branch's nodes.
#include <set>
#include <stdexcept>

#include "compiler/passes/pass_util.h"
#include "compiler/passes/passes.h"

namespace npusim::compiler::passes::detail {

std::vector<Node> inline_branch(Graph& g, const Node& node, bool then_branch) {
  const Graph& branch = *node.subgraphs.at(then_branch ? "then_branch" : "else_branch");
  std::unordered_map<std::string, std::string> rename;
  if (auto it = node.attrs.find(kCaptures); it != node.attrs.end()) {
    const auto& names = it->second.strings();
    const size_t first = num_formal_inputs(node);
    for (size_t k = 0; k < names.size(); ++k) rename[names[k]] = node.inputs[first + k];
  }
  std::set<std::string> produced;
  for (const auto& n : branch.nodes)
    for (const auto& o : n.outputs)
      if (!o.empty()) produced.insert(o);
  // A branch output a branch node computes takes the If's output name; any other (an enclosing value,
  // a constant, a value output twice) is copied to it by an Identity.
  std::vector<std::pair<std::string, std::string>> copies;
  for (size_t k = 0; k < branch.outputs.size() && k < node.outputs.size(); ++k) {
    const std::string& inner = branch.outputs[k];
    const std::string& outer = node.outputs[k];
    if (outer.empty()) continue;
    if (produced.count(inner) && !rename.count(inner)) {
      rename[inner] = outer;
      const Value& bv = branch.value(inner);
      Value& ov = g.value(outer);
      if (bv.fully_known() && !ov.fully_known()) ov.shape = bv.shape, ov.shape_known = true;
    } else {
      copies.emplace_back(inner, outer);
    }
  }
  const std::string prefix = node.name + "/";
  for (const auto& [name, v] : branch.values) {
    if (rename.count(name) || !(v.is_constant() || produced.count(name))) continue;
    const std::string fresh = g.unique_value_name(prefix + name);
    Value copy = v;
    copy.name = fresh;
    g.values[fresh] = std::move(copy);
    rename[name] = fresh;
  }
  auto mapped = [&](const std::string& name) {
    auto it = rename.find(name);
    return name.empty() || it == rename.end() ? name : it->second;
  };
  std::vector<Node> out;
  std::set<std::string> names;
  auto unique_name = [&](const std::string& base) {
    std::string name = g.unique_node_name(base);
    for (int k = 1; names.count(name); ++k) name = g.unique_node_name(base + "_" + std::to_string(k));
    names.insert(name);
    return name;
  };
  for (const auto& n : branch.nodes) {
    Node copy = n;
    copy.name = unique_name(prefix + n.name);
    for (auto& in : copy.inputs) in = mapped(in);
    for (auto& o : copy.outputs) o = mapped(o);
    out.push_back(std::move(copy));
  }
  for (const auto& [inner, outer] : copies) {
    Node id;
    id.op_type = "Identity";
    id.name = unique_name(prefix + "Identity_" + outer);
    id.inputs = {mapped(inner)};
    id.outputs = {outer};
    const Value& src = g.value(id.inputs[0]);
    Value& ov = g.value(outer);
    if (src.fully_known() && !ov.fully_known()) ov.shape = src.shape, ov.shape_known = true;
    out.push_back(std::move(id));
  }
  return out;
}

}  // namespace npusim::compiler::passes::detail

namespace npusim::compiler::passes {

std::vector<std::string> data_dependent_ifs(const Graph& g) {
  std::vector<std::string> out;
  for (const auto& n : g.nodes)
    if (n.domain.empty() && n.op_type == "If") out.push_back(n.name);
  return out;
}

void take_branch(Graph& g, const std::string& name, bool then_branch) {
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    if (g.nodes[k].name != name || g.nodes[k].op_type != "If") continue;
    std::vector<Node> body = detail::inline_branch(g, g.nodes[k], then_branch);
    g.nodes.erase(g.nodes.begin() + static_cast<std::ptrdiff_t>(k));
    g.nodes.insert(g.nodes.begin() + static_cast<std::ptrdiff_t>(k), std::make_move_iterator(body.begin()),
                   std::make_move_iterator(body.end()));
    fold_constants(g);
    eliminate_dead_nodes(g);
    return;
  }
  throw std::invalid_argument("graph has no If node '" + name + "'");
}

}  // namespace npusim::compiler::passes
