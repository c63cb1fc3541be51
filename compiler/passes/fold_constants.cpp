// Constant folding with the reference interpreter: a node whose inputs are all constants computes the
// same thing at every run, so it is evaluated once here (by the very interpreter the functional mode is
// checked against, so folding cannot change a result) and its outputs become constants.
#include <algorithm>
#include <optional>

#include "compiler/interp/interpreter.h"
#include "compiler/passes/pass_util.h"
#include "compiler/passes/passes.h"

namespace npusim::compiler::passes {
namespace {

using detail::constant_of;

// Shape / Size of a value whose shape is fully known, without evaluating anything (the value itself
// need not be a constant): the bridge from bound input shapes to the exporters' shape arithmetic.
std::optional<Tensor> fold_shape_query(const Graph& g, const Node& n) {
  if (!n.domain.empty() || (n.op_type != "Shape" && n.op_type != "Size") || !n.has_input(0)) return std::nullopt;
  const Value& v = g.value(n.inputs[0]);
  if (!v.fully_known()) return std::nullopt;
  if (n.op_type == "Size") return Tensor::scalar_int(DataType::kInt64, num_elements(v.shape));
  const auto rank = static_cast<int64_t>(v.shape.size());
  int64_t start = n.attr_int("start", 0), end = n.attr_int("end", rank);
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, start, rank);
  return detail::int64_vector(std::vector<int64_t>(v.shape.begin() + start, v.shape.begin() + end));
}

bool all_inputs_constant(const Graph& g, const Node& n) {
  for (const auto& in : n.inputs)
    if (!in.empty() && !constant_of(g, in)) return false;
  return true;
}

// Evaluates `n` alone in a graph holding just its (constant) inputs; nullopt when the interpreter
// cannot (unsupported op or type): such a node simply stays.
std::optional<std::vector<Tensor>> evaluate(const Graph& g, const Node& n) {
  Graph mini;
  mini.opset = g.opset;
  for (const auto& in : n.inputs)
    if (!in.empty()) mini.values[in] = g.value(in);
  for (const auto& o : n.outputs)
    if (!o.empty()) {
      mini.ensure_value(o);
      mini.outputs.push_back(o);
    }
  mini.nodes.push_back(n);
  std::map<std::string, Tensor> result;
  try {
    result = interpret(mini, {});
  } catch (const std::exception&) {
    return std::nullopt;
  }
  std::vector<Tensor> out;
  for (const auto& o : n.outputs) out.push_back(o.empty() ? Tensor() : std::move(result.at(o)));
  return out;
}

// Reshape's output shape from a now-constant shape input, for values shape inference left open.
void refine_reshape_shape(Graph& g, const Node& n) {
  if (n.op_type != "Reshape" || !n.domain.empty() || n.outputs.empty()) return;
  Value& out = g.value(n.outputs[0]);
  const Tensor* shape = constant_of(g, n.inputs.size() > 1 ? n.inputs[1] : "");
  const Value& in = g.value(n.inputs[0]);
  if (out.fully_known() || !shape || !in.fully_known()) return;
  Shape s = shape->to_int_vector();
  int64_t known = 1, infer = -1;
  for (size_t d = 0; d < s.size(); ++d) {
    if (s[d] == 0 && !n.attr_int("allowzero", 0) && d < in.shape.size()) s[d] = in.shape[d];
    if (s[d] == -1)
      infer = static_cast<int64_t>(d);
    else
      known *= s[d];
  }
  if (infer >= 0) s[infer] = known ? num_elements(in.shape) / known : 0;
  out.shape = s;
  out.shape_known = true;
}

}  // namespace

void fold_constants(Graph& g) {
  std::vector<bool> dead(g.nodes.size(), false);
  // One walk in topological order suffices: a folded output is a constant before its readers are seen.
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    const Node& n = g.nodes[k];
    if (!n.domain.empty()) continue;
    std::optional<std::vector<Tensor>> outs;
    if (auto shape = fold_shape_query(g, n)) {
      outs = std::vector<Tensor>{std::move(*shape)};
    } else if (all_inputs_constant(g, n)) {
      outs = evaluate(g, n);
    }
    if (!outs) {
      refine_reshape_shape(g, n);
      continue;
    }
    for (size_t o = 0; o < n.outputs.size(); ++o)
      if (!n.outputs[o].empty()) g.add_constant(n.outputs[o], std::move((*outs)[o]));
    dead[k] = true;
  }
  detail::erase_nodes(g, dead);
  detail::drop_unreferenced_values(g);
}

}  // namespace npusim::compiler::passes
