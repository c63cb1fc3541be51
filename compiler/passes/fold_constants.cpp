// Constant folding with the reference interpreter: a node whose inputs are all constants computes the
// same thing at every run, so it is evaluated once here (by the very interpreter the functional mode is
// checked against, so folding cannot change a result) and its outputs become constants.
#include <algorithm>
#include <optional>
#include <set>

#include "compiler/interp/interpreter.h"
#include "compiler/passes/pass_util.h"
#include "compiler/passes/passes.h"

namespace npusim::compiler::passes {
namespace {

using detail::constant_of;

// Shape / Size of a value whose shape is fully known, without evaluating anything (the value itself
// need not be a constant): the bridge from bound input shapes to the exporters' shape arithmetic.
std::optional<Tensor> fold_shape_query(const Graph& g, const Node& n) {
  if (!n.domain.empty() || (n.op_type != "Shape" && n.op_type != "Size") || !n.has_input(0))
    return std::nullopt;
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
// cannot (unsupported op or type): such a node simply stays. Over a shape-only constant (a timing-only
// compile) the outputs are shape-only too, of the shapes the importer inferred: the node folds as it
// would with values.
std::optional<std::vector<Tensor>> evaluate(const Graph& g, const Node& n) {
  bool elided = false;
  for (const auto& in : n.inputs) elided = elided || (!in.empty() && !constant_of(g, in)->has_values());
  if (elided) {
    if (!interpreter_supports(n.op_type)) return std::nullopt;
    std::vector<Tensor> out;
    for (const auto& o : n.outputs) {
      if (o.empty()) {
        out.emplace_back();
        continue;
      }
      const Value& v = g.value(o);
      if (!v.fully_known() || v.dtype == DataType::kUndefined) return std::nullopt;
      out.push_back(Tensor::shape_only(v.dtype, v.shape));
    }
    return out;
  }
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

// Shapes ONNX shape inference left open (typically behind shape arithmetic it could not see through)
// follow once that arithmetic is folded: recompute them for the ops whose output shape is a simple
// function of their inputs'. Other ops keep what the importer found.
Shape broadcast(const Shape& a, const Shape& b) {
  const size_t r = std::max(a.size(), b.size());
  Shape out(r);
  for (size_t d = 0; d < r; ++d) {
    const int64_t da = d < r - a.size() ? 1 : a[d - (r - a.size())];
    const int64_t db = d < r - b.size() ? 1 : b[d - (r - b.size())];
    out[d] = da == 1 ? db : da;
  }
  return out;
}

std::optional<Shape> infer_shape(const Graph& g, const Node& n) {
  static const std::set<std::string> same_shape = {"Relu",
                                                   "LeakyRelu",
                                                   "Clip",
                                                   "Sigmoid",
                                                   "Tanh",
                                                   "HardSigmoid",
                                                   "HardSwish",
                                                   "Erf",
                                                   "Exp",
                                                   "Sqrt",
                                                   "Reciprocal",
                                                   "Neg",
                                                   "Abs",
                                                   "Softmax",
                                                   "LogSoftmax",
                                                   "LayerNormalization",
                                                   "BatchNormalization",
                                                   "Identity",
                                                   "Dropout",
                                                   "Cast",
                                                   "Elu",
                                                   "Selu",
                                                   "Softplus",
                                                   "Log"};
  static const std::set<std::string> binary = {"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "PRelu"};
  auto known = [&](size_t k) -> const Value* {
    if (!n.has_input(k)) return nullptr;
    const Value& v = g.value(n.inputs[k]);
    return v.fully_known() ? &v : nullptr;
  };
  const Value* a = known(0);
  if (!a || !n.domain.empty()) return std::nullopt;
  const std::string& op = n.op_type;
  if (same_shape.count(op)) return a->shape;
  const Value* b = known(1);
  if (binary.count(op) && b) return broadcast(a->shape, b->shape);
  if (op == "Reshape" && b) {
    const Tensor* shape = constant_of(g, n.inputs[1]);
    if (!shape) return std::nullopt;
    Shape s = shape->to_int_vector();
    int64_t prod = 1, infer = -1;
    for (size_t d = 0; d < s.size(); ++d) {
      if (s[d] == 0 && !n.attr_int("allowzero", 0) && d < a->shape.size()) s[d] = a->shape[d];
      if (s[d] == -1)
        infer = static_cast<int64_t>(d);
      else
        prod *= s[d];
    }
    if (infer >= 0) s[infer] = prod ? num_elements(a->shape) / prod : 0;
    return s;
  }
  if (op == "Flatten") {
    const auto r = static_cast<int64_t>(a->shape.size());
    int64_t axis = n.attr_int("axis", 1);
    if (axis < 0) axis += r;
    int64_t outer = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= a->shape[d];
    return Shape{outer, outer ? num_elements(a->shape) / outer : 0};
  }
  if (op == "Gemm" && b && a->shape.size() == 2 && b->shape.size() == 2)
    return Shape{a->shape[n.attr_int("transA", 0) ? 1 : 0], b->shape[n.attr_int("transB", 0) ? 0 : 1]};
  if (op == "MatMul" && b && a->shape.size() >= 2 && b->shape.size() >= 2) {
    Shape ba(a->shape.begin(), a->shape.end() - 2), bb(b->shape.begin(), b->shape.end() - 2);
    Shape s = broadcast(ba, bb);
    s.push_back(a->shape[a->shape.size() - 2]);
    s.push_back(b->shape.back());
    return s;
  }
  return std::nullopt;
}

// Any other op: run it on zeros of its inputs' shapes and read the shapes off the results. Only when
// the shapes cannot depend on runtime data: every integer input (shape, axes, repeats ...) is a constant
// unless the op reads its integer inputs as data whose values never size the output (indices, labels,
// comparisons: kIntegerData), the op is not one whose output size depends on values, and the work stays
// small. A
// constant counts the same with or without its values (a shape-only weight of a timing compile is fed
// as zeros of its shape), so that a timing compile refines exactly the shapes a functional one does.
bool refine_by_evaluation(Graph& g, const Node& n) {
  static const std::set<std::string> value_dependent = {
      "NonZero",       "Unique",           "Compress",          "NonMaxSuppression", "RandomNormal",
      "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial",       "Bernoulli"};
  static const std::set<std::string> kIntegerData = {"Gather",
                                                     "GatherElements",
                                                     "GatherND",
                                                     "ScatterElements",
                                                     "ScatterND",
                                                     "NegativeLogLikelihoodLoss",
                                                     "SoftmaxCrossEntropyLoss",
                                                     "Equal",
                                                     "Less",
                                                     "Greater",
                                                     "LessOrEqual",
                                                     "GreaterOrEqual",
                                                     "Where",
                                                     "Not",
                                                     "And",
                                                     "Or",
                                                     "Xor",
                                                     "Cast",
                                                     "CastLike",
                                                     "Add",
                                                     "Sub",
                                                     "Mul",
                                                     "Div",
                                                     "Mod",
                                                     "Neg",
                                                     "Abs",
                                                     "Sign",
                                                     "Max",
                                                     "Min",
                                                     "Sum",
                                                     "BitShift",
                                                     "Identity",
                                                     "ArgMax",
                                                     "ArgMin",
                                                     "IsNaN",
                                                     "IsInf",
                                                     "Transpose"};
  if (!n.domain.empty() || value_dependent.count(n.op_type) || !interpreter_supports(n.op_type)) return false;
  const bool integer_data = kIntegerData.count(n.op_type) > 0;
  constexpr int64_t kMaxElements = int64_t{1} << 20;
  Graph mini;
  mini.opset = g.opset;
  std::map<std::string, Tensor> feeds;
  int64_t total = 0;
  for (const auto& in : n.inputs) {
    if (in.empty() || mini.has_value(in)) continue;
    const Value& v = g.value(in);
    if (v.is_constant() && v.constant->has_values()) {
      mini.values[in] = v;
      continue;
    }
    if (!v.fully_known() || !(is_float(v.dtype) || integer_data) || !interpretable(v.dtype)) return false;
    if (!v.is_constant()) {
      total += num_elements(v.shape);
      if (total > kMaxElements) return false;
    }
    Value& mv = mini.ensure_value(in);
    mv.dtype = v.dtype;
    mv.shape = v.shape;
    mv.shape_known = true;
    mini.inputs.push_back(in);
    feeds[in] = Tensor(v.dtype, v.shape);
  }
  for (const auto& o : n.outputs)
    if (!o.empty()) {
      mini.ensure_value(o);
      mini.outputs.push_back(o);
    }
  mini.nodes.push_back(n);
  std::map<std::string, Tensor> result;
  try {
    result = interpret(mini, std::move(feeds));
  } catch (const std::exception&) {
    return false;
  }
  for (const auto& o : n.outputs) {
    if (o.empty()) continue;
    Value& v = g.value(o);
    v.shape = result.at(o).shape;
    v.shape_known = true;
  }
  return true;
}

void refine_shapes(Graph& g, const Node& n) {
  bool open = false;
  for (const auto& o : n.outputs) open = open || (!o.empty() && !g.value(o).fully_known());
  if (!open) return;
  if (n.outputs.size() == 1) {
    if (auto s = infer_shape(g, n)) {
      Value& out = g.value(n.outputs[0]);
      out.shape = *s;
      out.shape_known = true;
      return;
    }
  }
  refine_by_evaluation(g, n);
}

// The branch an If takes when its condition is a constant; nullopt otherwise.
std::optional<bool> known_branch(const Graph& g, const Node& n) {
  if (n.op_type != "If" || !n.has_input(0)) return std::nullopt;
  const Tensor* c = constant_of(g, n.inputs[0]);
  if (!c || !c->has_values() || c->size() != 1) return std::nullopt;
  return c->as_double(0) != 0.0;
}

}  // namespace

void fold_constants(Graph& g) {
  std::vector<bool> dead(g.nodes.size(), false);
  // One walk in topological order suffices: a folded output is a constant before its readers are seen,
  // and an inlined branch's nodes are walked where the If was.
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    if (!g.nodes[k].domain.empty()) continue;
    if (std::optional<bool> branch = known_branch(g, g.nodes[k])) {
      std::vector<Node> body = detail::inline_branch(g, g.nodes[k], *branch);
      g.nodes.erase(g.nodes.begin() + static_cast<std::ptrdiff_t>(k));
      dead.erase(dead.begin() + static_cast<std::ptrdiff_t>(k));
      dead.insert(dead.begin() + static_cast<std::ptrdiff_t>(k), body.size(), false);
      g.nodes.insert(g.nodes.begin() + static_cast<std::ptrdiff_t>(k), std::make_move_iterator(body.begin()),
                     std::make_move_iterator(body.end()));
      --k;
      continue;
    }
    const Node& n = g.nodes[k];
    std::optional<std::vector<Tensor>> outs;
    if (auto shape = fold_shape_query(g, n)) {
      outs = std::vector<Tensor>{std::move(*shape)};
    } else if (all_inputs_constant(g, n)) {
      outs = evaluate(g, n);
      if (!outs) {
        // Over shape-only weights (a timing compile) the outputs need their shapes first: the node
        // then folds as it does with values.
        refine_shapes(g, n);
        outs = evaluate(g, n);
      }
    }
    if (!outs) {
      refine_shapes(g, n);
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
