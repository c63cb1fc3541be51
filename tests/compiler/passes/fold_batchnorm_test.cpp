#include <gtest/gtest.h>

#include <cmath>

#include "compiler/passes/passes.h"
#include "tests/compiler/passes/graph_builder.h"

namespace npusim::compiler::testing {
namespace {

// BN parameters for c channels: gamma in [0.5, 1.5], beta/mean in [-0.5, 0.5], var in [0.5, 2].
std::vector<std::string> bn_params(GraphBuilder& b, int64_t c, uint32_t seed) {
  return {b.random_constant("gamma" + std::to_string(seed), {c}, seed, 0.5f, 1.5f),
          b.random_constant("beta" + std::to_string(seed), {c}, seed + 1, -0.5f, 0.5f),
          b.random_constant("mean" + std::to_string(seed), {c}, seed + 2, -0.5f, 0.5f),
          b.random_constant("var" + std::to_string(seed), {c}, seed + 3, 0.5f, 2.0f)};
}

std::string bn(GraphBuilder& b, const std::string& x, const std::string& out, const Shape& s, uint32_t seed) {
  auto p = bn_params(b, s[1], seed);
  return b.node("BatchNormalization", {x, p[0], p[1], p[2], p[3]}, out, s, {{"epsilon", attr_f(1e-3f)}});
}

TEST(FoldBatchnorm, ConvWithoutBiasGetsScaledWeightsAndABias) {
  GraphBuilder b;
  auto x = b.input("x", {1, 3, 6, 6});
  auto w = b.random_constant("w", {4, 3, 3, 3}, 1);
  auto c = b.node("Conv", {x, w}, "c", {1, 4, 4, 4}, {{"kernel_shape", attr_ints({3, 3})}});
  b.output(bn(b, c, "y", {1, 4, 4, 4}, 10));
  Graph before = b.build();
  Graph g = before;
  passes::fold_batchnorm(g);
  g.verify();
  ASSERT_EQ(g.nodes.size(), 1u);
  const Node& conv = g.nodes[0];
  EXPECT_EQ(conv.op_type, "Conv");
  EXPECT_EQ(conv.outputs[0], "y");
  ASSERT_TRUE(conv.has_input(2));
  // Output channel 2's filter is scaled by gamma / sqrt(var + eps).
  const Tensor& gm = *before.value("gamma10").constant;
  const Tensor& var = *before.value("var10").constant;
  const float s2 = gm.f[2] / std::sqrt(var.f[2] + 1e-3f);
  EXPECT_NEAR(g.value(conv.inputs[1]).constant->f[2 * 27 + 5], before.value(w).constant->f[2 * 27 + 5] * s2,
              1e-6);
  EXPECT_FALSE(g.has_value("c"));
  EXPECT_TRUE(same_outputs(before, g));
}

TEST(FoldBatchnorm, GroupedConvTransposeAndGemmFoldExactly) {
  GraphBuilder b;
  auto x = b.input("x", {1, 4, 5, 5});
  // ConvTranspose, group 2: W [C_in=4, M/group=3, 2, 2] -> 6 output channels.
  auto w = b.random_constant("w", {4, 3, 2, 2}, 1);
  auto bias = b.random_constant("bias", {6}, 2);
  auto ct = b.node("ConvTranspose", {x, w, bias}, "ct", {1, 6, 6, 6}, {{"group", attr_i(2)}});
  auto y1 = bn(b, ct, "y1", {1, 6, 6, 6}, 10);
  b.output(y1);
  auto a = b.input("a", {3, 4});
  auto wg = b.random_constant("wg", {4, 5}, 3);
  auto gm = b.node("Gemm", {a, wg}, "gm", {3, 5});
  b.output(bn(b, gm, "y2", {3, 5}, 20));
  Graph before = b.build();
  Graph g = before;
  passes::fold_batchnorm(g);
  g.verify();
  EXPECT_EQ(count_ops(g, "BatchNormalization"), 0);
  EXPECT_EQ(g.nodes.size(), 2u);
  EXPECT_TRUE(same_outputs(before, g));
}

TEST(FoldBatchnorm, ConvOutputReadElsewhereKeepsTheBatchNorm) {
  GraphBuilder b;
  auto x = b.input("x", {1, 2, 4, 4});
  auto c = b.node("Conv", {x, b.random_constant("w", {2, 2, 1, 1}, 1)}, "c", {1, 2, 4, 4});
  auto y = bn(b, c, "y", {1, 2, 4, 4}, 10);
  b.output(y);
  b.output(c);
  Graph g = b.build();
  passes::fold_batchnorm(g);
  EXPECT_EQ(count_ops(g, "BatchNormalization"), 1);
}

TEST(FoldBatchnorm, BatchNormAfterAOneInputConcatStays) {
  // DenseNet's first dense layer normalises torch.cat([x]): a one-input Concat feeds the BN. Nothing to
  // fold into (this read past the Concat's inputs and crashed on densenet121).
  GraphBuilder b;
  auto x = b.input("x", {1, 2, 4, 4});
  auto c = b.node("Concat", {x}, "c", {1, 2, 4, 4}, {{"axis", attr_i(1)}});
  b.output(bn(b, c, "y", {1, 2, 4, 4}, 10));
  Graph g = b.build();
  passes::fold_batchnorm(g);
  g.verify();
  EXPECT_EQ(count_ops(g, "BatchNormalization"), 1);
}

}  // namespace
}  // namespace npusim::compiler::testing
