#include <gtest/gtest.h>

#include <set>

#include "compiler/passes/passes.h"
#include "tests/compiler/passes/graph_builder.h"

namespace npusim::compiler::testing {
namespace {

// Every node is one the vector unit runs as a single VecOp.
void expect_only_primitives(const Graph& g) {
  static const std::set<std::string> prims = {"ReduceMax", "ReduceSum", "ReduceMean", "Sub",  "Add",
                                              "Mul",       "Div",       "Exp",        "Sqrt", "Sigmoid"};
  for (const auto& n : g.nodes) EXPECT_TRUE(prims.count(n.op_type) && n.domain.empty()) << n.op_type;
}

TEST(Decompose, SoftmaxOpset13OverOneAxis) {
  GraphBuilder b(13);
  b.output(b.node("Softmax", {b.input("x", {2, 3, 5})}, "y", {2, 3, 5}, {{"axis", attr_i(1)}}));
  Graph before = b.build();
  Graph g = before;
  passes::decompose(g);
  g.verify();
  EXPECT_EQ(g.nodes.size(), 5u);
  expect_only_primitives(g);
  EXPECT_EQ(g.value(g.nodes[0].outputs[0]).shape, (Shape{2, 1, 5}));
  EXPECT_TRUE(same_outputs(before, g));
}

TEST(Decompose, SoftmaxOpset11FlattensFromTheAxis) {
  GraphBuilder b(11);
  b.output(b.node("Softmax", {b.input("x", {2, 3, 5})}, "y", {2, 3, 5}, {{"axis", attr_i(1)}}));
  Graph before = b.build();
  Graph g = before;
  passes::decompose(g);
  g.verify();
  expect_only_primitives(g);
  EXPECT_EQ(g.value(g.nodes[0].outputs[0]).shape, (Shape{2, 1, 1}));
  EXPECT_TRUE(same_outputs(before, g));
}

TEST(Decompose, LayerNormalizationOpset17AndReduceAxesAsInputsFromOpset18) {
  for (int64_t opset : {17, 18}) {
    GraphBuilder b(opset);
    auto x = b.input("x", {2, 3, 8});
    b.output(b.node("LayerNormalization",
                    {x, b.random_constant("gamma", {8}, 1, 0.5f, 1.5f), b.random_constant("beta", {8}, 2)},
                    "y", {2, 3, 8}, {{"axis", attr_i(-1)}, {"epsilon", attr_f(1e-5f)}}));
    Graph before = b.build();
    Graph g = before;
    passes::decompose(g);
    g.verify();
    expect_only_primitives(g);
    EXPECT_EQ(count_ops(g, "ReduceMean"), 2);
    EXPECT_EQ(g.nodes[0].inputs.size(), opset >= 18 ? 2u : 1u);
    EXPECT_TRUE(same_outputs(before, g)) << "opset " << opset;
  }
}

TEST(Decompose, SiluIsExpandedAndAnUnfusedBatchNormStaysWhole) {
  GraphBuilder b;
  auto x = b.input("x", {1, 3, 4, 4});
  auto s = b.node("Silu", {x}, "s", {1, 3, 4, 4}, {}, DataType::kFloat32, "npu");
  b.output(b.node("BatchNormalization",
                  {s, b.random_constant("g", {3}, 1, 0.5f, 1.5f), b.random_constant("bt", {3}, 2),
                   b.random_constant("m", {3}, 3), b.random_constant("v", {3}, 4, 0.5f, 2.0f)},
                  "y", {1, 3, 4, 4}));
  Graph before = b.build();
  Graph g = before;
  passes::decompose(g);
  g.verify();
  // Sigmoid, Mul, and the BatchNormalization left whole (the back end streams its affine map).
  ASSERT_EQ(g.nodes.size(), 3u);
  EXPECT_EQ(g.nodes[2].op_type, "BatchNormalization");
  EXPECT_TRUE(same_outputs(reference_graph(before), g));
}

TEST(Decompose, InstanceNormNormReductionsVariadicSumAndPRelu) {
  GraphBuilder b(13);
  auto x = b.input("x", {2, 3, 4, 5});
  auto in = b.node("InstanceNormalization",
                   {x, b.random_constant("sc", {3}, 1, 0.5f, 1.5f), b.random_constant("bi", {3}, 2)}, "in",
                   {2, 3, 4, 5}, {{"epsilon", attr_f(1e-4f)}});
  auto l2 = b.node("ReduceL2", {in}, "l2", {2, 3, 1, 1}, {{"axes", attr_ints({2, 3})}});
  auto l1 = b.node("ReduceL1", {in}, "l1", {2, 3}, {{"axes", attr_ints({-1, -2})}, {"keepdims", attr_i(0)}});
  auto ss = b.node("ReduceSumSquare", {in}, "ss", {2, 3, 4, 1}, {{"axes", attr_ints({3})}});
  auto sum = b.node("Sum", {in, ss, l2}, "sum", {2, 3, 4, 5});
  auto mean = b.node("Mean", {sum, in}, "mean", {2, 3, 4, 5});
  b.output(b.node("PRelu", {mean, b.random_constant("slope", {3, 1, 1}, 3, 0.0f, 0.5f)}, "y", {2, 3, 4, 5}));
  b.output(l1);
  Graph before = b.build();
  Graph g = before;
  passes::decompose(g);
  g.verify();
  static const std::set<std::string> prims = {"ReduceSum", "ReduceMean", "Sub", "Add",  "Mul",
                                              "Div",       "Sqrt",       "Abs", "Relu", "Min"};
  for (const auto& n : g.nodes) EXPECT_TRUE(prims.count(n.op_type)) << n.op_type;
  EXPECT_TRUE(same_outputs(before, g));
}

TEST(Decompose, PipelineFlagKeepsCompositeOps) {
  GraphBuilder b(13);
  b.output(b.node("Softmax", {b.input("x", {2, 5})}, "y", {2, 5}));
  Graph g = b.build();
  PipelineOptions o;
  o.decompose = false;
  lower(g, o);
  EXPECT_EQ(count_ops(g, "Softmax"), 1);
  Graph h = b.build();
  lower(h);
  EXPECT_EQ(count_ops(h, "Softmax"), 0);
}

}  // namespace
}  // namespace npusim::compiler::testing
