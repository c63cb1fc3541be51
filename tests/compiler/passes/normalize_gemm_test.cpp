#include <gtest/gtest.h>

#include "compiler/passes/passes.h"
#include "tests/compiler/passes/graph_builder.h"

namespace npusim::compiler::testing {
namespace {

TEST(NormalizeGemm, ConstantTransposedScaledBIsRewrittenAndAttributesVanish) {
  GraphBuilder b;
  auto a = b.input("a", {3, 4});
  auto w = b.random_constant("w", {5, 4}, 1);  // transB: [N, K]
  auto c = b.random_constant("c", {5}, 2);
  auto y = b.node("Gemm", {a, w, c}, "y", {3, 5},
                  {{"transB", attr_i(1)}, {"alpha", attr_f(0.5f)}, {"beta", attr_f(2.0f)}});
  b.output(y);
  Graph before = b.build();
  Graph g = before;
  passes::normalize_gemm(g);
  g.verify();
  ASSERT_EQ(g.nodes.size(), 1u);
  const Node& n = g.nodes[0];
  EXPECT_FALSE(n.has_attr("transB"));
  EXPECT_FALSE(n.has_attr("alpha"));
  EXPECT_FALSE(n.has_attr("beta"));
  EXPECT_EQ(g.value(n.inputs[1]).shape, (Shape{4, 5}));
  // B'[k][n] = alpha * W[n][k].
  EXPECT_FLOAT_EQ(g.value(n.inputs[1]).constant->f[1 * 5 + 2], 0.5f * before.value(w).constant->f[2 * 4 + 1]);
  EXPECT_TRUE(same_outputs(before, g));
}

TEST(NormalizeGemm, RuntimeTransposedOperandsGetTransposeNodes) {
  GraphBuilder b;
  auto a = b.input("a", {4, 3});  // transA: [K, M]
  auto w = b.input("w", {5, 4});  // transB: [N, K]
  auto y = b.node("Gemm", {a, w}, "y", {3, 5},
                  {{"transA", attr_i(1)}, {"transB", attr_i(1)}, {"alpha", attr_f(2.0f)}});
  b.output(y);
  Graph before = b.build();
  Graph g = before;
  passes::normalize_gemm(g);
  g.verify();
  EXPECT_EQ(count_ops(g, "Transpose"), 2);
  EXPECT_EQ(count_ops(g, "Mul"), 1);  // alpha on A, since B is not constant
  const Node* gemm = find_node(g, "Gemm");
  ASSERT_NE(gemm, nullptr);
  EXPECT_TRUE(gemm->attrs.empty());
  EXPECT_TRUE(same_outputs(before, g));
}

}  // namespace
}  // namespace npusim::compiler::testing
