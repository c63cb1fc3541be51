#include "compiler/passes/expand.h"

#include <algorithm>
#include <cmath>

#include "compiler/passes/pass_util.h"

namespace npusim::compiler::passes::detail {
namespace {

// Builds a chain of nodes for one composite node; intermediate values inherit the input's type.
class Builder {
 public:
  Builder(Graph& g, const Node& n) : g_(g), n_(n) {}

  // A new intermediate value of shape `s` (the final node writes n.outputs[0] instead: see out()).
  std::string node(const std::string& op, std::vector<std::string> inputs, const Shape& s,
                   std::map<std::string, Attribute> attrs = {}) {
    const Value& x = g_.value(n_.inputs[0]);
    std::string out = add_value(g_, n_.outputs[0] + "_" + op, x.dtype, s, x.shape_known);
    Node m = make_node(g_, op, n_.name + "_" + op, std::move(inputs), {out});
    m.attrs = std::move(attrs);
    push(std::move(m));
    return out;
  }
  std::string reduce(const std::string& op, const std::string& in, const std::vector<int64_t>& axes,
                     const Shape& s, bool keepdims = true) {
    std::string out =
        add_value(g_, n_.outputs[0] + "_" + op, g_.value(in).dtype, s, g_.value(in).shape_known);
    push(make_reduce(g_, op, n_.name + "_" + op, in, axes, out, keepdims));
    return out;
  }
  std::string scalar(const std::string& what, float v) {
    return add_constant(g_, n_.name + "_" + what, Tensor::scalar_float(v));
  }
  // Renames the last node's output to the composite node's output and returns the nodes.
  std::vector<Node> finish() {
    const std::string tmp = nodes_.back().outputs[0];
    nodes_.back().outputs[0] = n_.outputs[0];
    g_.values.erase(tmp);
    return std::move(nodes_);
  }

 private:
  void push(Node m) {
    // Names are reserved in g only when the nodes are inserted: keep them unique among ours too.
    for (int k = 1;
         std::any_of(nodes_.begin(), nodes_.end(), [&](const Node& o) { return o.name == m.name; }); ++k)
      m.name = g_.unique_node_name(n_.name + "_" + m.op_type + "_" + std::to_string(k));
    nodes_.push_back(std::move(m));
  }
  Graph& g_;
  const Node& n_;
  std::vector<Node> nodes_;
};

bool extra_outputs_unused(const Graph& g, const Node& n) {
  for (size_t o = 1; o < n.outputs.size(); ++o)
    if (!n.outputs[o].empty() && (use_count(g, n.outputs[o]) || is_graph_output(g, n.outputs[o])))
      return false;
  return true;
}

Shape reduced(Shape s, const std::vector<int64_t>& axes) {
  for (int64_t a : axes) s[a] = 1;
  return s;
}

}  // namespace

std::optional<std::vector<Node>> expand_softmax(Graph& g, const Node& n) {
  const Value& x = g.value(n.inputs[0]);
  if (!x.shape_known || x.shape.empty()) return std::nullopt;
  const auto r = static_cast<int64_t>(x.shape.size());
  // Opset < 13 flattens to 2-D at `axis` (default 1): the reduction covers axis..r-1.
  std::vector<int64_t> axes;
  if (g.opset >= 13) {
    axes = {norm_axis(n.attr_int("axis", -1), r)};
  } else {
    for (int64_t a = norm_axis(n.attr_int("axis", 1), r); a < r; ++a) axes.push_back(a);
  }
  const Shape rs = reduced(x.shape, axes);
  Builder b(g, n);
  std::string m = b.reduce("ReduceMax", n.inputs[0], axes, rs);
  std::string d = b.node("Sub", {n.inputs[0], m}, x.shape);
  std::string e = b.node("Exp", {d}, x.shape);
  std::string s = b.reduce("ReduceSum", e, axes, rs);
  b.node("Div", {e, s}, x.shape);
  return b.finish();
}

std::optional<std::vector<Node>> expand_layernorm(Graph& g, const Node& n) {
  const Value& x = g.value(n.inputs[0]);
  if (!x.shape_known || x.shape.empty() || !extra_outputs_unused(g, n)) return std::nullopt;
  const auto r = static_cast<int64_t>(x.shape.size());
  std::vector<int64_t> axes;
  for (int64_t a = norm_axis(n.attr_int("axis", -1), r); a < r; ++a) axes.push_back(a);
  const Shape rs = reduced(x.shape, axes);
  Builder b(g, n);
  std::string mean = b.reduce("ReduceMean", n.inputs[0], axes, rs);
  std::string d = b.node("Sub", {n.inputs[0], mean}, x.shape);
  std::string sq = b.node("Mul", {d, d}, x.shape);
  std::string var = b.reduce("ReduceMean", sq, axes, rs);
  std::string ve = b.node("Add", {var, b.scalar("eps", n.attr_float("epsilon", 1e-5f))}, rs);
  std::string sd = b.node("Sqrt", {ve}, rs);
  std::string y = b.node("Div", {d, sd}, x.shape);
  if (n.has_input(1)) y = b.node("Mul", {y, n.inputs[1]}, x.shape);
  if (n.has_input(2)) b.node("Add", {y, n.inputs[2]}, x.shape);
  return b.finish();
}

std::optional<std::vector<Node>> expand_rmsnorm(Graph& g, const Node& n) {
  const Value& x = g.value(n.inputs[0]);
  if (!x.shape_known || x.shape.empty()) return std::nullopt;
  const auto r = static_cast<int64_t>(x.shape.size());
  std::vector<int64_t> axes;
  for (int64_t a = norm_axis(n.attr_int("axis", -1), r); a < r; ++a) axes.push_back(a);
  const Shape rs = reduced(x.shape, axes);
  Builder b(g, n);
  std::string sq = b.node("Mul", {n.inputs[0], n.inputs[0]}, x.shape);
  std::string ms = b.reduce("ReduceMean", sq, axes, rs);
  std::string me = b.node("Add", {ms, b.scalar("eps", n.attr_float("epsilon", 1e-5f))}, rs);
  std::string rms = b.node("Sqrt", {me}, rs);
  std::string y = b.node("Div", {n.inputs[0], rms}, x.shape);
  if (n.has_input(1)) b.node("Mul", {y, n.inputs[1]}, x.shape);
  return b.finish();
}

std::optional<std::vector<Node>> expand_silu(Graph& g, const Node& n) {
  const Value& x = g.value(n.inputs[0]);
  Builder b(g, n);
  std::string s = b.node("Sigmoid", {n.inputs[0]}, x.shape);
  b.node("Mul", {n.inputs[0], s}, x.shape);
  return b.finish();
}

std::optional<std::vector<Node>> expand_gelu(Graph& g, const Node& n) {
  if (n.attr_string("approximate", "none") != "none") return std::nullopt;
  const Value& x = g.value(n.inputs[0]);
  Builder b(g, n);
  std::string d =
      b.node("Div", {n.inputs[0], b.scalar("sqrt2", static_cast<float>(std::sqrt(2.0)))}, x.shape);
  std::string e = b.node("Erf", {d}, x.shape);
  std::string a = b.node("Add", {e, b.scalar("one", 1.0f)}, x.shape);
  std::string m = b.node("Mul", {n.inputs[0], a}, x.shape);
  b.node("Mul", {m, b.scalar("half", 0.5f)}, x.shape);
  return b.finish();
}

std::optional<std::vector<Node>> expand_instancenorm(Graph& g, const Node& n) {
  const Value& x = g.value(n.inputs[0]);
  if (!x.shape_known || x.shape.size() < 3 || n.num_given_inputs() < 3) return std::nullopt;
  const Tensor* scale = constant_of(g, n.inputs[1]);
  const Tensor* bias = constant_of(g, n.inputs[2]);
  if (!scale || !bias || !scale->floating() || !bias->floating()) return std::nullopt;
  const auto r = static_cast<int64_t>(x.shape.size());
  std::vector<int64_t> axes;
  for (int64_t a = 2; a < r; ++a) axes.push_back(a);
  const Shape rs = reduced(x.shape, axes);
  // [C] -> [C, 1, ..., 1] so the parameters broadcast along axis 1.
  Shape cs(x.shape.size() - 1, 1);
  cs[0] = scale->size();
  Tensor sc = *scale, bi = *bias;
  sc.shape = cs;
  bi.shape = cs;
  Builder b(g, n);
  std::string mean = b.reduce("ReduceMean", n.inputs[0], axes, rs);
  std::string d = b.node("Sub", {n.inputs[0], mean}, x.shape);
  std::string sq = b.node("Mul", {d, d}, x.shape);
  std::string var = b.reduce("ReduceMean", sq, axes, rs);
  std::string ve = b.node("Add", {var, b.scalar("eps", n.attr_float("epsilon", 1e-5f))}, rs);
  std::string sd = b.node("Sqrt", {ve}, rs);
  std::string y = b.node("Div", {d, sd}, x.shape);
  y = b.node("Mul", {y, add_constant(g, n.name + "_scale", std::move(sc))}, x.shape);
  b.node("Add", {y, add_constant(g, n.name + "_bias", std::move(bi))}, x.shape);
  return b.finish();
}

std::optional<std::vector<Node>> expand_reduce_norm(Graph& g, const Node& n) {
  const Value& x = g.value(n.inputs[0]);
  const Value& y = g.value(n.outputs[0]);
  if (!x.shape_known || !y.shape_known) return std::nullopt;
  auto axes = reduce_axes(g, n, static_cast<int64_t>(x.shape.size()));
  if (!axes) return std::nullopt;
  const bool keepdims = n.attr_int("keepdims", 1) != 0;
  Builder b(g, n);
  std::string t = n.op_type == "ReduceL1" ? b.node("Abs", {n.inputs[0]}, x.shape)
                                          : b.node("Mul", {n.inputs[0], n.inputs[0]}, x.shape);
  std::string s = b.reduce("ReduceSum", t, *axes, y.shape, keepdims);
  if (n.op_type == "ReduceL2") b.node("Sqrt", {s}, y.shape);
  return b.finish();
}

std::optional<std::vector<Node>> expand_variadic_sum(Graph& g, const Node& n) {
  const size_t k = n.num_given_inputs();
  const Value& y = g.value(n.outputs[0]);
  if (k < 2 || !y.shape_known) return std::nullopt;
  Builder b(g, n);
  std::string acc = n.inputs[0];
  for (size_t i = 1; i < k; ++i) acc = b.node("Add", {acc, n.inputs[i]}, y.shape);
  if (n.op_type == "Mean") b.node("Mul", {acc, b.scalar("inv_n", 1.0f / static_cast<float>(k))}, y.shape);
  return b.finish();
}

std::optional<std::vector<Node>> expand_prelu(Graph& g, const Node& n) {
  const Value& y = g.value(n.outputs[0]);
  if (!y.shape_known) return std::nullopt;
  Builder b(g, n);
  std::string pos = b.node("Relu", {n.inputs[0]}, y.shape);
  std::string neg = b.node("Min", {n.inputs[0], b.scalar("zero", 0.0f)}, y.shape);
  std::string sneg = b.node("Mul", {neg, n.inputs[1]}, y.shape);
  b.node("Add", {pos, sneg}, y.shape);
  return b.finish();
}

std::optional<std::vector<Node>> expand_hardswish(Graph& g, const Node& n) {
  const Value& x = g.value(n.inputs[0]);
  Builder b(g, n);
  Attribute alpha, beta;
  alpha.value = 1.0f / 6.0f;
  beta.value = 0.5f;
  std::string h = b.node("HardSigmoid", {n.inputs[0]}, x.shape, {{"alpha", alpha}, {"beta", beta}});
  b.node("Mul", {n.inputs[0], h}, x.shape);
  return b.finish();
}

}  // namespace npusim::compiler::passes::detail
