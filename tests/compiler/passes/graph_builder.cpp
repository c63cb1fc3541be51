#include "tests/compiler/passes/graph_builder.h"

#include <cmath>

#include "compiler/interp/interpreter.h"
#include "compiler/passes/lowered.h"

namespace npusim::compiler::testing {

GraphBuilder::GraphBuilder(int64_t opset) {
  g_.name = "test";
  g_.opset = opset;
}

std::string GraphBuilder::input(const std::string& name, const Shape& shape) {
  Value& v = g_.ensure_value(name);
  v.dtype = DataType::kFloat32;
  v.shape = shape;
  v.shape_known = true;
  g_.inputs.push_back(name);
  return name;
}

std::string GraphBuilder::constant(const std::string& name, Tensor t) {
  g_.add_constant(name, std::move(t));
  return name;
}

std::vector<float> uniform(int64_t n, uint32_t seed, float lo, float hi) {
  std::vector<float> v(static_cast<size_t>(n));
  uint32_t s = seed * 747796405u + 2891336453u;
  for (auto& x : v) {
    s = s * 1664525u + 1013904223u;
    x = lo + (hi - lo) * static_cast<float>((s >> 8) & 0xFFFFFF) / static_cast<float>(0xFFFFFF);
  }
  return v;
}

std::string GraphBuilder::random_constant(const std::string& name, const Shape& shape, uint32_t seed,
                                          float lo, float hi) {
  return constant(name, Tensor::from_floats(shape, uniform(num_elements(shape), seed, lo, hi)));
}

std::string GraphBuilder::ints(const std::string& name, const std::vector<int64_t>& v) {
  return constant(name, Tensor::from_ints(DataType::kInt64, {static_cast<int64_t>(v.size())}, v));
}

std::string GraphBuilder::node(const std::string& op, const std::vector<std::string>& inputs,
                               const std::string& out, const Shape& out_shape,
                               std::map<std::string, Attribute> attrs, DataType dtype,
                               const std::string& domain) {
  Node n;
  n.op_type = op;
  n.domain = domain;
  n.name = op + "_" + std::to_string(nodes_++);
  n.inputs = inputs;
  n.outputs = {out};
  n.attrs = std::move(attrs);
  g_.nodes.push_back(std::move(n));
  Value& v = g_.ensure_value(out);
  v.dtype = dtype;
  v.shape = out_shape;
  v.shape_known = true;
  return out;
}

Attribute attr_i(int64_t v) {
  Attribute a;
  a.value = v;
  return a;
}
Attribute attr_f(float v) {
  Attribute a;
  a.value = v;
  return a;
}
Attribute attr_s(const std::string& v) {
  Attribute a;
  a.value = v;
  return a;
}
Attribute attr_ints(const std::vector<int64_t>& v) {
  Attribute a;
  a.value = v;
  return a;
}

std::map<std::string, Tensor> random_inputs(const Graph& g, uint32_t seed) {
  std::map<std::string, Tensor> in;
  for (const auto& name : g.inputs) {
    const Value& v = g.value(name);
    in[name] = Tensor::from_floats(v.shape, uniform(num_elements(v.shape), seed++, -2.0f, 2.0f));
  }
  return in;
}

::testing::AssertionResult same_outputs(const Graph& before, const Graph& after, double tol) {
  const auto inputs = random_inputs(before);
  std::map<std::string, Tensor> want, got;
  try {
    want = interpret(before, inputs);
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "original graph: " << e.what();
  }
  try {
    got = interpret(reference_graph(after), inputs);
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "transformed graph: " << e.what() << "\n" << to_string(after);
  }
  for (const auto& [name, w] : want) {
    auto it = got.find(name);
    if (it == got.end())
      return ::testing::AssertionFailure() << "output '" << name << "' missing after the pass";
    const Tensor& h = it->second;
    if (h.shape != w.shape)
      return ::testing::AssertionFailure() << "output '" << name << "' shape " << shape_to_string(h.shape)
                                           << " != " << shape_to_string(w.shape);
    double scale = 1e-30;
    for (int64_t k = 0; k < w.size(); ++k) scale = std::max(scale, std::fabs(w.as_double(k)));
    for (int64_t k = 0; k < w.size(); ++k)
      if (!(std::fabs(w.as_double(k) - h.as_double(k)) <= tol * scale))
        return ::testing::AssertionFailure()
               << "output '" << name << "' element " << k << ": " << h.as_double(k)
               << " != " << w.as_double(k) << " (scale " << scale << ")";
  }
  return ::testing::AssertionSuccess();
}

int count_ops(const Graph& g, const std::string& op_type, const std::string& domain) {
  int n = 0;
  for (const auto& node : g.nodes)
    if (node.op_type == op_type && node.domain == domain) ++n;
  return n;
}

const Node* find_node(const Graph& g, const std::string& op_type, const std::string& domain) {
  for (const auto& node : g.nodes)
    if (node.op_type == op_type && node.domain == domain) return &node;
  return nullptr;
}

}  // namespace npusim::compiler::testing
