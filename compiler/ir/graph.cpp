#include "compiler/ir/graph.h"

#include <deque>
#include <set>
#include <sstream>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>

#include "isa/text_wrap.h"

namespace npusim::compiler {

int64_t Node::attr_int(const std::string& key, int64_t fallback) const {
  auto it = attrs.find(key);
  return it == attrs.end() ? fallback : it->second.i();
}
float Node::attr_float(const std::string& key, float fallback) const {
  auto it = attrs.find(key);
  return it == attrs.end() ? fallback : it->second.f();
}
std::string Node::attr_string(const std::string& key, const std::string& fallback) const {
  auto it = attrs.find(key);
  return it == attrs.end() ? fallback : it->second.s();
}
std::vector<int64_t> Node::attr_ints(const std::string& key, const std::vector<int64_t>& fallback) const {
  auto it = attrs.find(key);
  return it == attrs.end() ? fallback : it->second.ints();
}
std::vector<float> Node::attr_floats(const std::string& key, const std::vector<float>& fallback) const {
  auto it = attrs.find(key);
  return it == attrs.end() ? fallback : it->second.floats();
}
size_t Node::num_given_inputs() const {
  size_t n = inputs.size();
  while (n > 0 && inputs[n - 1].empty()) --n;
  return n;
}

size_t num_formal_inputs(const Node& n) {
  auto it = n.attrs.find(kCaptures);
  const size_t captured = it == n.attrs.end() ? 0 : it->second.strings().size();
  return n.inputs.size() >= captured ? n.inputs.size() - captured : 0;
}

bool Value::fully_known() const {
  if (!shape_known) return false;
  for (int64_t d : shape)
    if (d < 0) return false;
  return true;
}

const Value& Graph::value(const std::string& n) const {
  auto it = values.find(n);
  if (it == values.end()) throw std::out_of_range("graph has no value '" + n + "'");
  return it->second;
}
Value& Graph::value(const std::string& n) {
  auto it = values.find(n);
  if (it == values.end()) throw std::out_of_range("graph has no value '" + n + "'");
  return it->second;
}
Value& Graph::ensure_value(const std::string& n) {
  Value& v = values[n];
  v.name = n;
  return v;
}
Value& Graph::add_constant(const std::string& n, Tensor t) {
  Value& v = values[n];
  v.name = n;
  v.dtype = t.dtype;
  v.shape = t.shape;
  v.shape_known = true;
  v.constant = std::make_shared<const Tensor>(std::move(t));
  return v;
}

int Graph::producer(const std::string& v) const {
  for (size_t k = 0; k < nodes.size(); ++k)
    for (const auto& o : nodes[k].outputs)
      if (o == v) return static_cast<int>(k);
  return -1;
}

std::vector<int> Graph::consumers(const std::string& v) const {
  std::vector<int> out;
  for (size_t k = 0; k < nodes.size(); ++k)
    for (const auto& in : nodes[k].inputs)
      if (in == v) {
        out.push_back(static_cast<int>(k));
        break;
      }
  return out;
}

void Graph::topological_sort() {
  std::unordered_map<std::string, int> producer_of;
  for (size_t k = 0; k < nodes.size(); ++k)
    for (const auto& o : nodes[k].outputs)
      if (!o.empty()) producer_of[o] = static_cast<int>(k);
  const size_t n = nodes.size();
  std::vector<int> pending(n, 0);
  std::vector<std::vector<int>> users(n);
  for (size_t k = 0; k < n; ++k) {
    std::set<int> deps;
    for (const auto& in : nodes[k].inputs) {
      if (in.empty()) continue;
      auto it = producer_of.find(in);
      if (it != producer_of.end()) {
        deps.insert(it->second);
      } else if (!has_value(in)) {
        throw std::runtime_error("node '" + nodes[k].name + "' reads '" + in +
                                 "', which no node, graph input or constant provides");
      }
    }
    for (int d : deps) {
      if (d == static_cast<int>(k))
        throw std::runtime_error("node '" + nodes[k].name + "' reads its own output");
      users[d].push_back(static_cast<int>(k));
    }
    pending[k] = static_cast<int>(deps.size());
  }
  // Kahn's algorithm, always taking the lowest ready index so an already sorted graph is unchanged.
  std::set<int> ready;
  for (size_t k = 0; k < n; ++k)
    if (pending[k] == 0) ready.insert(static_cast<int>(k));
  std::vector<int> order;
  order.reserve(n);
  std::vector<bool> done(n, false);
  while (!ready.empty()) {
    int k = *ready.begin();
    ready.erase(ready.begin());
    done[k] = true;
    order.push_back(k);
    for (int u : users[k])
      if (--pending[u] == 0) ready.insert(u);
  }
  if (order.size() != n) {
    for (size_t k = 0; k < n; ++k)
      if (!done[k]) throw std::runtime_error("graph has a cycle through node '" + nodes[k].name + "'");
  }
  std::vector<Node> sorted;
  sorted.reserve(n);
  for (int k : order) sorted.push_back(std::move(nodes[k]));
  nodes = std::move(sorted);
}

void Graph::verify() const {
  std::unordered_set<std::string> available;
  std::unordered_set<std::string> node_names;
  for (const auto& [n, v] : values) {
    if (v.name != n)
      throw std::runtime_error("value '" + n + "' is stored under a different name '" + v.name + "'");
    if (v.is_constant()) available.insert(n);
  }
  for (const auto& in : inputs) {
    if (!has_value(in)) throw std::runtime_error("graph input '" + in + "' has no value entry");
    available.insert(in);
  }
  for (const auto& node : nodes) {
    if (!node_names.insert(node.name).second)
      throw std::runtime_error("node name '" + node.name + "' is used twice");
    for (const auto& in : node.inputs) {
      if (in.empty()) continue;
      if (!available.count(in))
        throw std::runtime_error("node '" + node.name + "' reads '" + in + "' before anything produces it");
    }
    for (const auto& o : node.outputs) {
      if (o.empty()) continue;
      if (!has_value(o))
        throw std::runtime_error("node '" + node.name + "' output '" + o + "' has no value entry");
      if (!available.insert(o).second)
        throw std::runtime_error("value '" + o + "' is produced twice (again by node '" + node.name + "')");
    }
  }
  for (const auto& o : outputs)
    if (!available.count(o)) throw std::runtime_error("graph output '" + o + "' is never produced");
}

std::string Graph::unique_node_name(const std::string& base) const {
  std::unordered_set<std::string> used;
  for (const auto& n : nodes) used.insert(n.name);
  if (!used.count(base)) return base;
  for (int k = 1;; ++k) {
    std::string c = base + "_" + std::to_string(k);
    if (!used.count(c)) return c;
  }
}

std::string Graph::unique_value_name(const std::string& base) const {
  if (!has_value(base)) return base;
  for (int k = 1;; ++k) {
    std::string c = base + "_" + std::to_string(k);
    if (!has_value(c)) return c;
  }
}

namespace {

template <typename T>
std::string join_list(const std::vector<T>& v, size_t limit = 16) {
  std::ostringstream os;
  os << '[';
  for (size_t k = 0; k < v.size() && k < limit; ++k) os << (k ? "," : "") << v[k];
  if (v.size() > limit) os << ",...(" << v.size() << ")";
  os << ']';
  return os.str();
}

std::string value_type(const Graph& g, const std::string& n) {
  if (n.empty()) return "<none>";
  auto it = g.values.find(n);
  if (it == g.values.end()) return n + ":<missing>";
  const Value& v = it->second;
  std::string s = n + ":" + std::string(to_string(v.dtype)) + "[" +
                  (v.shape_known ? shape_to_string(v.shape) : std::string("?")) + "]";
  if (v.is_constant()) s += "=const";
  if (!v.layout.empty())
    s += v.layout == std::vector<int>{0, 2, 3, 1} ? "@NHWC" : "@layout" + join_list(v.layout);
  return s;
}

}  // namespace

std::string to_string(const Attribute& a) {
  switch (a.kind()) {
    case Attribute::Kind::kInt:
      return std::to_string(a.i());
    case Attribute::Kind::kFloat: {
      std::ostringstream os;
      os << a.f();
      return os.str();
    }
    case Attribute::Kind::kString:
      return "\"" + a.s() + "\"";
    case Attribute::Kind::kInts:
      return join_list(a.ints());
    case Attribute::Kind::kFloats:
      return join_list(a.floats());
    case Attribute::Kind::kStrings:
      return join_list(a.strings());
    case Attribute::Kind::kTensor:
      return "tensor<" + std::string(to_string(a.t().dtype)) + "[" + shape_to_string(a.t().shape) + "]>";
  }
  return "?";
}

std::string to_string(const Graph& g, size_t width) {
  std::ostringstream os;
  os << "graph " << (g.name.empty() ? "<unnamed>" : g.name) << " (opset " << g.opset << ", " << g.nodes.size()
     << " nodes)\n";
  for (const auto& in : g.inputs) os << isa::wrap_lines("  input  " + value_type(g, in), width, 9) << "\n";
  size_t nconst = 0;
  int64_t const_bytes = 0;
  for (const auto& [n, v] : g.values)
    if (v.is_constant()) {
      ++nconst;
      const_bytes += v.constant->size() * element_size(v.dtype);
    }
  os << "  constants: " << nconst << " (" << const_bytes << " bytes)\n";
  for (const auto& node : g.nodes) {
    std::string head =
        "  " + node.name + " = " + (node.domain.empty() ? "" : node.domain + ".") + node.op_type + "(";
    for (size_t k = 0; k < node.inputs.size(); ++k) head += (k ? ", " : "") + value_type(g, node.inputs[k]);
    head += ")";
    std::string outs = "-> ";
    for (size_t k = 0; k < node.outputs.size(); ++k) outs += (k ? ", " : "") + value_type(g, node.outputs[k]);
    std::string attrs;
    for (const auto& [k, a] : node.attrs) attrs += (attrs.empty() ? "{" : ", ") + k + "=" + to_string(a);
    for (const auto& [k, sub] : node.subgraphs)
      attrs +=
          (attrs.empty() ? "{" : ", ") + k + "=<graph of " + std::to_string(sub->nodes.size()) + " nodes>";
    if (!attrs.empty()) attrs += "}";
    std::string line = head + " " + outs + (attrs.empty() ? "" : " " + attrs);
    if (width == 0 || line.size() <= width) {
      os << line << "\n";
      continue;
    }
    // Too long for one line: the inputs, the outputs and the attributes each start a line of their own,
    // and each wraps under its own indent.
    os << isa::wrap_lines(head, width, 6) << "\n" << isa::wrap_lines("      " + outs, width, 9) << "\n";
    if (!attrs.empty()) os << isa::wrap_lines("      " + attrs, width, 7) << "\n";
  }
  for (const auto& o : g.outputs) os << isa::wrap_lines("  output " + value_type(g, o), width, 9) << "\n";
  return os.str();
}

void PassManager::run(Graph& g) const {
  for (const auto& p : passes_) {
    p.run(g);
    try {
      g.verify();
    } catch (const std::exception& e) {
      throw std::runtime_error("pass '" + p.name + "' left an invalid graph: " + e.what());
    }
    if (observer_) observer_(p.name, g);
  }
}

}  // namespace npusim::compiler
