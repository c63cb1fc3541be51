#pragma once
// Test helpers for the pass tests: build small graphs directly in the IR (shapes given by hand, as
// shape inference would have set them), feed them deterministic inputs, and check that two graphs
// compute the same outputs with the FP32 interpreter.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "compiler/ir/graph.h"

namespace npusim::compiler::testing {

class GraphBuilder {
 public:
  explicit GraphBuilder(int64_t opset = 17);
  std::string input(const std::string& name, const Shape& shape);
  std::string constant(const std::string& name, Tensor t);
  // Values uniform in [lo, hi] from a fixed LCG seeded by `seed`.
  std::string random_constant(const std::string& name, const Shape& shape, uint32_t seed, float lo = -1.0f,
                              float hi = 1.0f);
  std::string scalar(const std::string& name, float v) { return constant(name, Tensor::scalar_float(v)); }
  std::string ints(const std::string& name, const std::vector<int64_t>& v);
  // Adds a node producing one output named `out` of the given shape (float32 unless said otherwise).
  std::string node(const std::string& op, const std::vector<std::string>& inputs, const std::string& out,
                   const Shape& out_shape, std::map<std::string, Attribute> attrs = {},
                   DataType dtype = DataType::kFloat32, const std::string& domain = "");
  void output(const std::string& name) { g_.outputs.push_back(name); }
  Graph& graph() { return g_; }
  Graph build() const { return g_; }

 private:
  Graph g_;
  int nodes_ = 0;
};

Attribute attr_i(int64_t v);
Attribute attr_f(float v);
Attribute attr_s(const std::string& v);
Attribute attr_ints(const std::vector<int64_t>& v);

std::vector<float> uniform(int64_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f);
// Deterministic float inputs for every graph input.
std::map<std::string, Tensor> random_inputs(const Graph& g, uint32_t seed = 7);

// Runs `before` and reference_graph(after) on the same inputs; every output must agree within
// `tol` times the largest magnitude of that output in `before`.
::testing::AssertionResult same_outputs(const Graph& before, const Graph& after, double tol = 1e-5);

int count_ops(const Graph& g, const std::string& op_type, const std::string& domain = "");
const Node* find_node(const Graph& g, const std::string& op_type, const std::string& domain = "");

}  // namespace npusim::compiler::testing
