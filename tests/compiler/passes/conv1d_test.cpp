// conv1d-as-2d: a 1-D Conv becomes the same Conv of height 1 between Reshapes, computing the same values,
// and so lands on the array after lowering.
#include <gtest/gtest.h>

#include "compiler/passes/lowered.h"
#include "compiler/passes/passes.h"
#include "tests/compiler/passes/graph_builder.h"

namespace npusim::compiler::testing {
namespace {

Graph conv1d(bool grouped) {
  GraphBuilder b;
  auto x = b.input("x", {1, 4, 20});
  auto w = b.random_constant("w", {6, grouped ? 2 : 4, 3}, 5);
  std::map<std::string, Attribute> attrs = {{"kernel_shape", attr_ints({3})},
                                            {"strides", attr_ints({2})},
                                            {"dilations", attr_ints({2})},
                                            {"pads", attr_ints({1, 2})}};
  if (grouped) attrs["group"] = attr_i(2);
  // (20 + 1 + 2 - 2 * (3 - 1) - 1) / 2 + 1 = 10
  b.node("Conv", {x, w, b.random_constant("bias", {6}, 6)}, "y", {1, 6, 10}, attrs);
  b.output("y");
  return b.build();
}

TEST(Conv1dAs2d, AOneDConvBecomesAConvOfHeightOneWithTheSameValues) {
  for (bool grouped : {false, true}) {
    const Graph before = conv1d(grouped);
    Graph g = before;
    passes::conv1d_as_2d(g);
    g.verify();
    const Node* conv = find_node(g, "Conv");
    ASSERT_NE(conv, nullptr);
    EXPECT_EQ(g.value(conv->inputs[1]).shape, (Shape{6, grouped ? 2 : 4, 1, 3}));
    EXPECT_EQ(conv->attr_ints("pads"), (std::vector<int64_t>{0, 1, 0, 2}));
    EXPECT_EQ(conv->attr_ints("strides"), (std::vector<int64_t>{1, 2}));
    EXPECT_EQ(count_ops(g, "Reshape"), 2);
    EXPECT_TRUE(same_outputs(before, g, 1e-6));
  }
}

TEST(Conv1dAs2d, AfterLoweringTheConvIsAMatrixLayer) {
  Graph g = conv1d(false);
  lower(g);
  const Node* conv = find_node(g, "Conv");
  ASSERT_NE(conv, nullptr);
  EXPECT_EQ(assigned_placement(*conv), Placement::kNpuMatrix);
}

}  // namespace
}  // namespace npusim::compiler::testing
