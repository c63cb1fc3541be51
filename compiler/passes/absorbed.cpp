#include "compiler/passes/absorbed.h"

#include <functional>
#include <map>
#include <optional>
#include <set>

namespace npusim::compiler {

namespace {

// A piece of n's decomposition (compiler/passes/expand.cpp names them "<n>_<op>[_k]").
bool piece_of(const Node& piece, const Node& n) {
  const std::string prefix = n.name + "_" + piece.op_type;
  return piece.name.compare(0, prefix.size(), prefix) == 0;
}

// QuantizeLinear, DequantizeLinear, or a Cast between a QuantizeLinear and a DequantizeLinear (torch's
// fake-quantization export: Q -> Cast -> DQ).
bool quantization_scaffolding(const Node& n, const std::set<std::string>& quantize_outputs,
                              const std::set<std::string>& dequantize_inputs) {
  if (n.op_type == "QuantizeLinear" || n.op_type == "DequantizeLinear") return true;
  return n.op_type == "Cast" && n.inputs.size() == 1 && n.outputs.size() == 1 &&
         (quantize_outputs.count(n.inputs[0]) || dequantize_inputs.count(n.outputs[0]));
}

}  // namespace

std::vector<AbsorbedNode> absorbed_nodes(const Graph& imported, const Graph& lowered) {
  std::map<std::string, const Node*> producer;  // lowered value -> its node
  std::map<std::string, const Node*> by_name;
  std::set<std::string> in_program(lowered.inputs.begin(), lowered.inputs.end());  // values the program moves
  for (const Node& n : lowered.nodes) {
    by_name[n.name] = &n;
    in_program.insert(n.inputs.begin(), n.inputs.end());
    for (const std::string& v : n.outputs)
      if (!v.empty()) producer[v] = &n;
  }
  // Compile-time nodes of the imported graph: every runtime input comes from a compile-time node or a
  // constant, or the node reads shapes only.
  std::set<std::string> compile_time_values;
  for (const std::string& v : imported.inputs)
    if (imported.has_value(v) && imported.value(v).is_constant()) compile_time_values.insert(v);
  std::set<std::string> quantize_outputs, dequantize_inputs;
  for (const Node& n : imported.nodes) {
    if (n.op_type == "QuantizeLinear") quantize_outputs.insert(n.outputs.begin(), n.outputs.end());
    if (n.op_type == "DequantizeLinear" && !n.inputs.empty()) dequantize_inputs.insert(n.inputs[0]);
  }
  std::vector<const Node*> candidates;
  std::map<std::string, std::vector<const Node*>> readers;  // imported value -> its reading nodes
  for (const Node& n : imported.nodes) {
    bool constant = n.op_type == "Shape" || n.op_type == "Size" || n.op_type == "Constant";
    if (!constant) {
      constant = true;
      for (const std::string& v : n.inputs) {
        if (v.empty() || compile_time_values.count(v)) continue;
        if (!(imported.has_value(v) && imported.value(v).is_constant())) constant = false;
      }
    }
    if (constant) {
      for (const std::string& v : n.outputs) compile_time_values.insert(v);
      continue;
    }
    for (const std::string& v : n.inputs)
      if (!v.empty()) readers[v].push_back(&n);
    if (!by_name.count(n.name) && !quantization_scaffolding(n, quantize_outputs, dequantize_inputs))
      candidates.push_back(&n);
  }
  // The lowered node that took n's work: the producer of one of its outputs, else (an intermediate
  // value of a fused chain) where the first reader of its output went.
  std::map<std::string, std::optional<std::string>> memo;
  std::function<std::optional<std::string>(const Node&)> into =
      [&](const Node& n) -> std::optional<std::string> {
    if (by_name.count(n.name)) return n.name;
    if (auto it = memo.find(n.name); it != memo.end()) return it->second;
    memo[n.name] = std::nullopt;  // a cycle cannot occur in a DAG; this guards against malformed graphs
    std::optional<std::string> found;
    for (const std::string& v : n.outputs) {
      auto p = producer.find(v);
      if (!v.empty() && p != producer.end()) {
        found = p->second->name;
        break;
      }
    }
    for (size_t k = 0; !found && k < n.outputs.size(); ++k) {
      auto r = readers.find(n.outputs[k]);
      if (r == readers.end()) continue;
      for (const Node* reader : r->second) {
        if ((found = into(*reader))) break;
      }
    }
    memo[n.name] = found;
    return found;
  };
  std::vector<AbsorbedNode> out;
  std::set<std::string> listed;
  for (const Node* n : candidates) {
    const std::optional<std::string> to = into(*n);
    if (!to || piece_of(*by_name.at(*to), *n)) continue;  // gone without a trace, or decomposed
    AbsorbedNode a{n->name, n->op_type, *to, {}};
    for (const std::string& v : n->inputs) {
      if (v.empty() || compile_time_values.count(v) || in_program.count(v) || producer.count(v) ||
          !listed.insert(v).second)
        continue;
      if (imported.has_value(v) && imported.value(v).is_constant()) continue;
      a.on_chip_inputs.push_back(v);
    }
    out.push_back(std::move(a));
  }
  return out;
}

}  // namespace npusim::compiler
