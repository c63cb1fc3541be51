#include <gtest/gtest.h>

#include "compiler/passes/passes.h"
#include "tests/compiler/passes/graph_builder.h"

namespace npusim::compiler::testing {
namespace {

std::string conv(GraphBuilder& b, const std::string& x, const std::string& out, int64_t cin, int64_t cout,
                 int64_t hw, uint32_t seed) {
  return b.node("Conv", {x, b.random_constant(out + "_w", {cout, cin, 3, 3}, seed)}, out, {1, cout, hw, hw},
                {{"pads", attr_ints({1, 1, 1, 1})}});
}

TEST(Layout, ConvChainIsNhwcWithConversionsOnlyAtTheGraphBoundary) {
  GraphBuilder b;
  auto c1 = conv(b, b.input("x", {1, 3, 5, 5}), "c1", 3, 4, 5, 1);
  auto r = b.node("Relu", {c1}, "r", {1, 4, 5, 5});
  b.output(conv(b, r, "y", 4, 2, 5, 2));
  Graph before = b.build();
  Graph g = before;
  passes::assign_layouts(g);
  g.verify();
  EXPECT_EQ(g.value("c1").layout, kNhwc);
  EXPECT_EQ(g.value("r").layout, kNhwc);
  EXPECT_TRUE(g.value("x").layout.empty());
  EXPECT_TRUE(g.value("y").layout.empty());  // graph outputs are in ONNX order
  auto changes = layout_changes(g);
  ASSERT_EQ(changes.size(), 2u);
  EXPECT_EQ(changes[0].input, "x");
  EXPECT_EQ(changes[0].to_layout, kNhwc);
  EXPECT_EQ(changes[1].output, "y");
  EXPECT_TRUE(changes[1].to_layout.empty());
  const Node* t = find_node(g, "Transpose", "npu");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->attr_ints("perm"), (std::vector<int64_t>{0, 2, 3, 1}));
  EXPECT_EQ(g.nodes.back().attr_ints("perm"), (std::vector<int64_t>{0, 3, 1, 2}));
  EXPECT_TRUE(same_outputs(before, g));
}

TEST(Layout, FlattenAfterGlobalPoolNeedsNoConversionButReshapeOfAFeatureMapDoes) {
  GraphBuilder b;
  auto c = conv(b, b.input("x", {1, 3, 4, 4}), "c", 3, 6, 4, 1);
  auto p = b.node("GlobalAveragePool", {c}, "p", {1, 6, 1, 1});
  auto f = b.node("Flatten", {p}, "f", {1, 6});
  b.output(b.node("Gemm", {f, b.random_constant("w", {6, 2}, 3)}, "y", {1, 2}));
  auto flat = b.node("Reshape", {c, b.ints("shape", {1, -1})}, "flat", {1, 96});
  b.output(flat);
  Graph before = b.build();
  Graph g = before;
  passes::assign_layouts(g);
  g.verify();
  EXPECT_EQ(g.value("p").layout, kNhwc);
  auto changes = layout_changes(g);
  ASSERT_EQ(changes.size(), 2u);  // x -> NHWC, and c -> NCHW for the Reshape; none for the Flatten
  EXPECT_EQ(changes[1].input, "c");
  EXPECT_NE(changes[1].reason.find("Reshape"), std::string::npos);
  EXPECT_EQ(find_node(g, "Flatten")->inputs[0], "p");
  EXPECT_TRUE(same_outputs(before, g));
}

TEST(Layout, GraphOutputAlsoReadByAConvKeepsItsNameAndTheConvReadsTheNhwcCopy) {
  GraphBuilder b;
  auto c1 = conv(b, b.input("x", {1, 3, 4, 4}), "mid", 3, 4, 4, 1);
  b.output(c1);
  b.output(conv(b, c1, "y", 4, 2, 4, 2));
  Graph before = b.build();
  Graph g = before;
  passes::assign_layouts(g);
  g.verify();
  EXPECT_EQ(layout_changes(g).size(), 3u);  // x in, mid out, y out
  const Node* second = nullptr;
  for (const auto& n : g.nodes)
    if (n.op_type == "Conv" && n.outputs[0] != "mid_nhwc") second = &n;
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(second->inputs[0], "mid_nhwc");
  EXPECT_EQ(g.value("mid_nhwc").layout, kNhwc);
  EXPECT_TRUE(g.value("mid").layout.empty());
  EXPECT_TRUE(same_outputs(before, g));
}

TEST(Layout, GraphWithoutConvsStaysInOnnxOrder) {
  GraphBuilder b;
  auto x = b.input("x", {1, 2, 3, 4});
  b.output(b.node("MatMul", {x, b.random_constant("w", {4, 5}, 1)}, "y", {1, 2, 3, 5}));
  Graph g = b.build();
  passes::assign_layouts(g);
  EXPECT_TRUE(layout_changes(g).empty());
  for (const auto& [n, v] : g.values) EXPECT_TRUE(v.layout.empty()) << n;
}

TEST(Layout, FourDimensionalConstantOperandOfAnNhwcAddIsStoredNhwc) {
  GraphBuilder b;
  auto c = conv(b, b.input("x", {1, 3, 4, 4}), "c", 3, 2, 4, 1);
  auto k = b.random_constant("k", {1, 2, 4, 4}, 5);
  auto s = b.node("Add", {c, k}, "s", {1, 2, 4, 4});
  b.output(conv(b, s, "y", 2, 2, 4, 6));
  Graph before = b.build();
  Graph g = before;
  passes::assign_layouts(g);
  EXPECT_EQ(g.value("s").layout, kNhwc);
  EXPECT_EQ(g.value("k").layout, kNhwc);
  EXPECT_EQ(layout_changes(g).size(), 2u);
  EXPECT_TRUE(same_outputs(before, g));
}

}  // namespace
}  // namespace npusim::compiler::testing
