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

TEST(FoldBatchnorm, AScaleAfterAProducersSecondOutputIsLeftAlone) {
  // A GRU with Y omitted (output "") whose Y_h is scaled per channel by a constant Mul: nothing to fold
  // (the fold rewrites a matrix node's first output), and no reading of the omitted one.
  GraphBuilder b;
  auto x = b.input("x", {2, 1, 3});
  auto w = b.random_constant("w", {1, 12, 3}, 1);
  auto r = b.random_constant("r", {1, 12, 4}, 2);
  b.node("GRU", {x, w, r}, "yh", {1, 1, 4}, {{"hidden_size", attr_i(4)}});
  b.graph().nodes.back().outputs = {"", "yh"};
  auto y = b.node("Mul", {"yh", b.random_constant("s", {4}, 3)}, "y", {1, 1, 4});
  b.output(y);
  Graph g = b.build();
  passes::fold_batchnorm(g);
  EXPECT_EQ(g.nodes.size(), 2u);
  EXPECT_EQ(g.nodes[1].op_type, "Mul");
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

TEST(FoldBatchnorm, ConstantScaleAndShiftAfterAConvFoldIntoIt) {
  // PP-LCNet's learnable affine block: Conv -> Mul(scalar) -> Add(scalar); and a per-channel Sub, a Div.
  GraphBuilder b;
  auto x = b.input("x", {1, 3, 6, 6});
  auto c = b.node("Conv", {x, b.random_constant("w", {4, 3, 3, 3}, 1), b.random_constant("bias", {4}, 2)},
                  "c", {1, 4, 4, 4}, {{"kernel_shape", attr_ints({3, 3})}});
  auto m = b.node("Mul", {b.scalar("s", 0.75f), c}, "m", {1, 4, 4, 4});
  auto a = b.node("Add", {m, b.scalar("t", -0.25f)}, "a", {1, 4, 4, 4});
  auto d = b.node("Sub", {a, b.random_constant("u", {4, 1, 1}, 3)}, "d", {1, 4, 4, 4});
  b.output(b.node("Div", {d, b.scalar("q", 3.0f)}, "y", {1, 4, 4, 4}));
  Graph before = b.build();
  Graph g = before;
  passes::fold_batchnorm(g);
  g.verify();
  ASSERT_EQ(g.nodes.size(), 1u);
  EXPECT_EQ(g.nodes[0].op_type, "Conv");
  EXPECT_EQ(g.nodes[0].outputs[0], "y");
  EXPECT_TRUE(same_outputs(before, g));
}

TEST(FoldBatchnorm, AffineChainsBecomeOneMapAndFoldIntoAnUnpaddedConv) {
  // After an activation: Mul -> Add (scalars) is one BatchNormalization before a padded conv; before an
  // unpadded (1x1, grouped too) conv it folds into that conv's weights and bias. A lone Mul stays.
  GraphBuilder b;
  const Shape s = {1, 4, 5, 5};
  auto x = b.input("x", s);
  auto affine = [&](const std::string& k, const std::string& in) {
    auto m =
        b.node("Mul", {in, b.scalar("s" + k, 0.5f + 0.25f * static_cast<float>(k[0] - '0'))}, "m" + k, s);
    return b.node("Add", {m, b.random_constant("t" + k, {1, 4, 1, 1}, 10 + static_cast<uint32_t>(k[0]))},
                  "a" + k, s);
  };
  auto r = b.node("Relu", {x}, "r", s);
  auto p = b.node("Conv", {affine("1", r), b.random_constant("wp", {4, 1, 3, 3}, 4)}, "p", s,
                  {{"pads", attr_ints({1, 1, 1, 1})}, {"group", attr_i(4)}});
  auto q = b.node("Conv", {affine("2", p), b.random_constant("wq", {6, 2, 1, 1}, 5)}, "q", {1, 6, 5, 5},
                  {{"group", attr_i(2)}});
  b.output(b.node("Mul", {q, b.scalar("lone", 2.0f)}, "y", {1, 6, 5, 5}));
  Graph before = b.build();
  Graph g = before;
  passes::fold_batchnorm(g);
  g.verify();
  // Relu, the padded conv's affine map, the two convs (the lone Mul folds into q as its scale).
  EXPECT_EQ(count_ops(g, "BatchNormalization"), 1);
  EXPECT_EQ(count_ops(g, "Add"), 0);
  EXPECT_EQ(count_ops(g, "Mul"), 0);
  EXPECT_EQ(g.nodes.size(), 4u);
  const Node* bn = find_node(g, "BatchNormalization");
  ASSERT_NE(bn, nullptr);
  EXPECT_EQ(bn->outputs[0], "a1");
  EXPECT_EQ(bn->name, before.nodes[before.producer("a1")].name);  // named after the chain's last node
  EXPECT_EQ(bn->inputs[0], "r");
  EXPECT_EQ(find_node(g, "Relu")->outputs[0], "r");
  EXPECT_TRUE(same_outputs(before, g));
}

TEST(FoldBatchnorm, ShapeOnlyWeightsFoldTheSameWayWithoutValues) {
  // A timing-only compile (shape-only weights and biases) folds exactly what the compile with values
  // folds: the program must be the same instruction for instruction.
  for (const bool values : {true, false}) {
    GraphBuilder b;
    const Shape s = {1, 4, 5, 5};
    auto x = b.input("x", s);
    auto weight = [&](const std::string& name, const Shape& shape, uint32_t seed) {
      return values ? b.random_constant(name, shape, seed)
                    : b.constant(name, Tensor::shape_only(DataType::kFloat32, shape));
    };
    auto c = b.node("Conv", {x, weight("w", {4, 4, 1, 1}, 1), weight("bias", {4}, 2)}, "c", s);
    auto m = b.node("Mul", {c, b.scalar("s", 0.5f)}, "m", s);
    auto r = b.node("Relu", {b.node("Add", {m, b.scalar("t", 0.25f)}, "a", s)}, "r", s);
    auto m2 = b.node("Mul", {r, b.scalar("s2", 2.0f)}, "m2", s);
    auto a2 = b.node("Add", {m2, b.scalar("t2", -1.0f)}, "a2", s);
    b.output(b.node("Conv", {a2, weight("w2", {3, 4, 1, 1}, 3), weight("bias2", {3}, 4)}, "y", {1, 3, 5, 5}));
    Graph g = b.build();
    passes::fold_batchnorm(g);
    g.verify();
    EXPECT_EQ(g.nodes.size(), 3u) << values;  // Conv, Relu, Conv
    EXPECT_EQ(count_ops(g, "Mul") + count_ops(g, "Add") + count_ops(g, "BatchNormalization"), 0) << values;
    for (size_t k : {size_t{0}, size_t{2}})
      EXPECT_EQ(g.value(g.nodes[k].inputs[2]).constant->has_values(), values);
  }
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
