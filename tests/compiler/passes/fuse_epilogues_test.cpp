#include <gtest/gtest.h>

#include "compiler/passes/passes.h"
#include "tests/compiler/passes/graph_builder.h"

namespace npusim::compiler::testing {
namespace {

std::string conv(GraphBuilder& b, const std::string& x, const std::string& out, int64_t cin, int64_t cout,
                 uint32_t seed, bool bias = true) {
  std::vector<std::string> in = {x, b.random_constant(out + "_w", {cout, cin, 3, 3}, seed)};
  if (bias) in.push_back(b.random_constant(out + "_b", {cout}, seed + 1));
  return b.node("Conv", in, out, {1, cout, 6, 6}, {{"pads", attr_ints({1, 1, 1, 1})}});
}

TEST(FuseEpilogues, ConvRelu) {
  GraphBuilder b;
  auto c = conv(b, b.input("x", {1, 3, 6, 6}), "c", 3, 4, 1);
  b.output(b.node("Relu", {c}, "y", {1, 4, 6, 6}));
  Graph before = b.build();
  Graph g = before;
  passes::fuse_epilogues(g);
  g.verify();
  ASSERT_EQ(g.nodes.size(), 1u);
  EXPECT_EQ(g.nodes[0].attr_string(kActivation, ""), "Relu");
  EXPECT_EQ(g.nodes[0].outputs[0], "y");
  EXPECT_TRUE(same_outputs(before, g));
}

TEST(FuseEpilogues, ConvClipIsRelu6WithItsBounds) {
  GraphBuilder b;
  auto c = conv(b, b.input("x", {1, 3, 6, 6}), "c", 3, 4, 1);
  b.output(b.node("Clip", {c, b.scalar("lo", 0.0f), b.scalar("hi", 6.0f)}, "y", {1, 4, 6, 6}));
  Graph before = b.build();
  Graph g = before;
  passes::fuse_epilogues(g);
  ASSERT_EQ(g.nodes.size(), 1u);
  EXPECT_EQ(g.nodes[0].attr_string(kActivation, ""), "Clip");
  EXPECT_EQ(g.nodes[0].attr_float(kActMin, -1), 0.0f);
  EXPECT_EQ(g.nodes[0].attr_float(kActMax, -1), 6.0f);
  EXPECT_TRUE(same_outputs(before, g));
}

TEST(FuseEpilogues, ReluThenClipComposeIntoOneClip) {
  GraphBuilder b;
  auto c = conv(b, b.input("x", {1, 3, 6, 6}), "c", 3, 4, 1);
  auto r = b.node("Relu", {c}, "r", {1, 4, 6, 6});
  b.output(b.node("Clip", {r, b.scalar("lo", 0.0f), b.scalar("hi", 6.0f)}, "y", {1, 4, 6, 6}));
  Graph before = b.build();
  Graph g = before;
  passes::fuse_epilogues(g);
  ASSERT_EQ(g.nodes.size(), 1u);
  EXPECT_EQ(g.nodes[0].attr_string(kActivation, ""), "Clip");
  EXPECT_TRUE(same_outputs(before, g));
}

TEST(FuseEpilogues, GemmBiasAddGelu) {
  GraphBuilder b;
  auto a = b.input("a", {3, 8});
  auto m = b.node("Gemm", {a, b.random_constant("w", {8, 5}, 1)}, "m", {3, 5});
  auto biased = b.node("Add", {b.random_constant("bias", {5}, 2), m}, "biased", {3, 5});
  b.output(
      b.node("Gelu", {biased}, "y", {3, 5}, {{"approximate", attr_s("none")}}, DataType::kFloat32, "npu"));
  Graph before = b.build();
  Graph g = before;
  passes::fuse_epilogues(g);
  g.verify();
  ASSERT_EQ(g.nodes.size(), 1u);
  const Node& n = g.nodes[0];
  EXPECT_EQ(n.op_type, "Gemm");
  EXPECT_EQ(n.attr_string(kActivation, ""), "Gelu");
  ASSERT_TRUE(n.has_input(2));
  EXPECT_EQ(g.value(n.inputs[2]).shape, (Shape{5}));
  // Both graphs go through reference_graph only for `after`; `before` holds an npu.Gelu too.
  EXPECT_TRUE(same_outputs(reference_graph(before), g));
}

TEST(FuseEpilogues, ConvThenSiluBecomesOneNodeButAnAddThenSiluDoesNot) {
  // SiLU (npu.Silu after pattern recognition) goes into a matrix node's epilogue: two vector ops on the
  // accumulator tile instead of two passes over the tensor in DRAM. An element-wise node keeps it apart.
  GraphBuilder b;
  auto x = b.input("x", {1, 4, 6, 6});
  auto c1 = conv(b, x, "c1", 4, 4, 1);
  auto s1 = b.node("Silu", {c1}, "s1", {1, 4, 6, 6}, {}, DataType::kFloat32, "npu");
  auto a = b.node("Add", {s1, x}, "a", {1, 4, 6, 6});
  b.output(b.node("Silu", {a}, "y", {1, 4, 6, 6}, {}, DataType::kFloat32, "npu"));
  Graph before = b.build();
  Graph g = before;
  passes::fuse_epilogues(g);
  g.verify();
  ASSERT_EQ(g.nodes.size(), 3u);
  EXPECT_EQ(g.nodes[0].op_type, "Conv");
  EXPECT_EQ(g.nodes[0].attr_string(kActivation, ""), "Silu");
  EXPECT_FALSE(g.nodes[1].has_attr(kActivation));
  EXPECT_EQ(g.nodes[2].op_type, "Silu");
  EXPECT_TRUE(same_outputs(reference_graph(before), g));
}

TEST(FuseEpilogues, ResidualAddThenReluGoesIntoTheLaterConv) {
  GraphBuilder b;
  auto x = b.input("x", {1, 4, 6, 6});
  auto c1 = conv(b, x, "c1", 4, 4, 1);
  auto c2 = conv(b, c1, "c2", 4, 4, 3, false);
  auto s = b.node("Add", {c2, x}, "s", {1, 4, 6, 6});
  b.output(b.node("Relu", {s}, "y", {1, 4, 6, 6}));
  Graph before = b.build();
  Graph g = before;
  passes::fuse_epilogues(g);
  g.verify();
  ASSERT_EQ(g.nodes.size(), 2u);
  const Node& n = g.nodes[1];
  EXPECT_EQ(n.attr_int(kResidualInput, -1), 3);
  ASSERT_EQ(n.inputs.size(), 4u);
  EXPECT_EQ(n.inputs[2], "");  // c2 had no bias
  EXPECT_EQ(n.inputs[3], "x");
  EXPECT_EQ(n.attr_string(kActivation, ""), "Relu");
  EXPECT_TRUE(same_outputs(before, g));
}

TEST(FuseEpilogues, ActivationParametersTravelWithTheEpilogue) {
  // Opset 10: Clip's bounds are attributes. LeakyRelu / HardSigmoid carry alpha (and beta).
  GraphBuilder b(10);
  auto x = b.input("x", {1, 3, 6, 6});
  auto c1 = conv(b, x, "c1", 3, 4, 1);
  auto a1 = b.node("Clip", {c1}, "a1", {1, 4, 6, 6}, {{"min", attr_f(-0.5f)}, {"max", attr_f(0.75f)}});
  auto c2 = conv(b, a1, "c2", 4, 4, 3);
  auto a2 = b.node("LeakyRelu", {c2}, "a2", {1, 4, 6, 6}, {{"alpha", attr_f(0.2f)}});
  auto c3 = conv(b, a2, "c3", 4, 4, 5);
  b.output(b.node("HardSigmoid", {c3}, "y", {1, 4, 6, 6}, {{"alpha", attr_f(0.3f)}, {"beta", attr_f(0.4f)}}));
  Graph before = b.build();
  Graph g = before;
  passes::fuse_epilogues(g);
  ASSERT_EQ(g.nodes.size(), 3u);
  EXPECT_EQ(g.nodes[0].attr_float(kActMin, 0), -0.5f);
  EXPECT_EQ(g.nodes[0].attr_float(kActMax, 0), 0.75f);
  EXPECT_EQ(g.nodes[1].attr_float(kAlpha, 0), 0.2f);
  EXPECT_EQ(g.nodes[2].attr_float(kAlpha, 0), 0.3f);
  EXPECT_EQ(g.nodes[2].attr_float(kBeta, 0), 0.4f);
  EXPECT_TRUE(same_outputs(before, g));
}

TEST(FuseEpilogues, ActivationInputReadTwiceIsNotFused) {
  GraphBuilder b;
  auto c = conv(b, b.input("x", {1, 3, 6, 6}), "c", 3, 4, 1);
  auto r = b.node("Relu", {c}, "r", {1, 4, 6, 6});
  b.output(b.node("Add", {r, c}, "y", {1, 4, 6, 6}));
  Graph g = b.build();
  passes::fuse_epilogues(g);
  EXPECT_EQ(g.nodes.size(), 3u);
  EXPECT_FALSE(g.nodes[0].has_attr(kActivation));
}

TEST(FuseEpilogues, ElementwiseAddThenActivationBecomesOneNode) {
  // Two activations added (no matrix node can absorb the Add), then a Clip: the Add carries it.
  GraphBuilder b;
  auto x = b.input("x", {1, 4, 6, 6});
  auto y = b.input("y", {1, 4, 6, 6});
  auto s = b.node("Add", {x, y}, "s", {1, 4, 6, 6});
  b.output(b.node("Clip", {s, b.scalar("lo", 0.0f), b.scalar("hi", 1.5f)}, "z", {1, 4, 6, 6}));
  Graph before = b.build();
  Graph g = before;
  passes::fuse_epilogues(g);
  g.verify();
  ASSERT_EQ(g.nodes.size(), 1u);
  EXPECT_EQ(g.nodes[0].op_type, "Add");
  EXPECT_EQ(g.nodes[0].attr_string(kActivation, ""), "Clip");
  EXPECT_EQ(g.nodes[0].attr_float(kActMax, 0), 1.5f);
  EXPECT_EQ(g.nodes[0].outputs[0], "z");
  EXPECT_TRUE(same_outputs(before, g));
  // A materialized sum (a pre-quantized model's quantization point) is not fused away.
  Graph q = before;
  q.values.at("s").materialized = true;
  passes::fuse_epilogues(q);
  EXPECT_EQ(q.nodes.size(), 2u);
}

TEST(FuseEpilogues, UnfoldedBatchNormThenReluBecomesOneBatchNormNode) {
  // DenseNet's pre-activation BN -> ReLU -> Conv: the BN reads a Concat (no matrix node to fold into),
  // so it stays, and the ReLU rides on it; a BN whose Mean output is read keeps its ReLU separate.
  GraphBuilder b;
  auto x = b.input("x", {1, 2, 5, 3});
  auto z = b.input("z", {1, 3, 5, 3});
  auto cat = b.node("Concat", {x, z}, "cat", {1, 5, 5, 3}, {{"axis", attr_i(1)}});
  auto bn = b.node("BatchNormalization",
                   {cat, b.random_constant("g", {5}, 1, 0.5f, 1.5f), b.random_constant("bt", {5}, 2),
                    b.random_constant("m", {5}, 3), b.random_constant("v", {5}, 4, 0.5f, 2.0f)},
                   "bn", {1, 5, 5, 3});
  b.output(b.node("Relu", {bn}, "y", {1, 5, 5, 3}));
  Graph before = b.build();
  Graph g = before;
  passes::fuse_epilogues(g);
  g.verify();
  ASSERT_EQ(g.nodes.size(), 2u);
  EXPECT_EQ(g.nodes[1].op_type, "BatchNormalization");
  EXPECT_EQ(g.nodes[1].name, before.nodes[1].name);
  EXPECT_EQ(g.nodes[1].attr_string(kActivation, ""), "Relu");
  EXPECT_EQ(g.nodes[1].outputs[0], "y");
  EXPECT_TRUE(same_outputs(before, g));
  EXPECT_TRUE(same_outputs(before, reference_graph(g)));
  // Training-mode statistics are not a constant affine map: nothing fuses.
  Graph t = before;
  t.nodes[1].attrs["training_mode"].value = int64_t{1};
  passes::fuse_epilogues(t);
  EXPECT_EQ(t.nodes.size(), 3u);
}

TEST(FuseEpilogues, MatMulTakesABiasInputAndABatchedResidual) {
  GraphBuilder b;
  auto x = b.input("x", {2, 4, 8});
  auto r = b.input("r", {2, 4, 6});
  auto m = b.node("MatMul", {x, b.random_constant("w", {8, 6}, 1)}, "m", {2, 4, 6});
  auto biased = b.node("Add", {m, b.random_constant("bias", {6}, 2)}, "biased", {2, 4, 6});
  auto s = b.node("Add", {r, biased}, "s", {2, 4, 6});
  b.output(b.node("Tanh", {s}, "y", {2, 4, 6}));
  Graph before = b.build();
  Graph g = before;
  passes::fuse_epilogues(g);
  g.verify();
  ASSERT_EQ(g.nodes.size(), 1u);
  EXPECT_EQ(g.nodes[0].inputs.size(), 4u);
  EXPECT_EQ(g.nodes[0].attr_string(kActivation, ""), "Tanh");
  EXPECT_TRUE(same_outputs(before, g));
}

}  // namespace
}  // namespace npusim::compiler::testing
