#include <gtest/gtest.h>

#include "compiler/import/import.h"
#include "compiler/passes/passes.h"
#include "tests/compiler/passes/graph_builder.h"

namespace npusim::compiler::testing {
namespace {

// Models exported by data/make_pattern_models.py with torch.onnx.export at opset 13.
Graph load(const std::string& file) {
  return import_onnx_file(std::string(NPUSIM_SOURCE_DIR) + "/tests/compiler/passes/data/" + file);
}

TEST(RecognizePatterns, TorchLayerNormAndGeluAtOpset13BecomeOneNodeEach) {
  Graph before = load("linear_ln_gelu_op13.onnx");
  Graph g = before;
  passes::fold_constants(g);  // the exporter's Constant nodes hold eps, 2, sqrt 2, 1 and 0.5
  passes::recognize_patterns(g);
  g.verify();
  EXPECT_EQ(count_ops(g, "LayerNormalization"), 1);
  EXPECT_EQ(count_ops(g, "Gelu", "npu"), 1);
  for (const char* op : {"ReduceMean", "Sub", "Pow", "Sqrt", "Div", "Erf"})
    EXPECT_EQ(count_ops(g, op), 0) << op;
  const Node* ln = find_node(g, "LayerNormalization");
  ASSERT_NE(ln, nullptr);
  EXPECT_EQ(ln->attr_int("axis", 0), 2);
  EXPECT_NEAR(ln->attr_float("epsilon", 0), 1e-5f, 1e-12);
  EXPECT_EQ(ln->inputs.size(), 3u);  // gamma and beta absorbed
  // What remains: MatMul, its bias Add, LayerNormalization, Gelu.
  EXPECT_EQ(g.nodes.size(), 4u);
  EXPECT_TRUE(same_outputs(before, g));
}

TEST(RecognizePatterns, TorchHardswishAndSiluAtOpset13) {
  Graph before = load("conv_hswish_silu_op13.onnx");
  Graph g = before;
  passes::recognize_patterns(g);
  g.verify();
  EXPECT_EQ(count_ops(g, "HardSwish"), 1);
  EXPECT_EQ(count_ops(g, "Silu", "npu"), 1);
  EXPECT_EQ(count_ops(g, "Mul"), 0);
  EXPECT_EQ(count_ops(g, "HardSigmoid"), 0);
  EXPECT_TRUE(same_outputs(before, g));
}

TEST(RecognizePatterns, GeluWithHalfAppliedFirstAndLayerNormWithoutAffine) {
  GraphBuilder b;
  auto x = b.input("x", {2, 6});
  auto d = b.node("Div", {x, b.scalar("s2", 1.41421356f)}, "d", {2, 6});
  auto e = b.node("Erf", {d}, "e", {2, 6});
  auto a = b.node("Add", {b.scalar("one", 1.0f), e}, "a", {2, 6});
  auto h = b.node("Mul", {x, b.scalar("half", 0.5f)}, "h", {2, 6});
  auto gl = b.node("Mul", {h, a}, "gl", {2, 6});
  // LayerNorm over the last axis with no gamma / beta.
  auto m = b.node("ReduceMean", {gl}, "m", {2, 1}, {{"axes", attr_ints({-1})}});
  auto sub = b.node("Sub", {gl, m}, "sub", {2, 6});
  auto p = b.node("Pow", {sub, b.scalar("two", 2.0f)}, "p", {2, 6});
  auto v = b.node("ReduceMean", {p}, "v", {2, 1}, {{"axes", attr_ints({-1})}});
  auto ve = b.node("Add", {v, b.scalar("eps", 1e-6f)}, "ve", {2, 1});
  auto sd = b.node("Sqrt", {ve}, "sd", {2, 1});
  b.output(b.node("Div", {sub, sd}, "y", {2, 6}));
  Graph before = b.build();
  Graph g = before;
  passes::recognize_patterns(g);
  g.verify();
  ASSERT_EQ(g.nodes.size(), 2u);
  EXPECT_EQ(g.nodes[0].op_type, "Gelu");
  EXPECT_EQ(g.nodes[1].op_type, "LayerNormalization");
  EXPECT_EQ(g.nodes[1].outputs[0], "y");
  EXPECT_TRUE(same_outputs(before, g));
}

TEST(RecognizePatterns, PaddleHardSwishAndHardSigmoidChains) {
  // paddle2onnx spells hardswish as x * Clip(x + 3, 0, 6) / 6 and hardsigmoid as Clip(x + 3, 0, 6) / 6
  // (or with Mul 1/6); each chain is one node. A chain with another constant (Add 2) stays.
  GraphBuilder b;
  const Shape s = {1, 4, 3, 3};
  auto x = b.input("x", s);
  auto lo = b.scalar("lo", 0.0f), hi = b.scalar("hi", 6.0f);
  auto chain = [&](const std::string& k, const std::string& in, float add) {
    auto a = b.node("Add", {in, b.scalar("three" + k, add)}, "a" + k, s);
    return b.node("Clip", {a, lo, hi}, "c" + k, s);
  };
  auto m1 = b.node("Mul", {x, chain("1", x, 3.0f)}, "m1", s);
  auto hs1 = b.node("Div", {m1, b.scalar("six1", 6.0f)}, "hs1", s);                      // HardSwish
  auto d2 = b.node("Div", {chain("2", hs1, 3.0f), b.scalar("six2", 6.0f)}, "d2", s);    // HardSigmoid
  auto d3 = b.node("Mul", {b.scalar("sixth3", 1.0f / 6.0f), chain("3", d2, 3.0f)}, "d3", s);
  auto hs3 = b.node("Mul", {d3, d2}, "hs3", s);                                          // HardSwish
  auto no = b.node("Div", {chain("4", hs3, 2.0f), b.scalar("six4", 6.0f)}, "no", s);    // not one
  b.output(no);
  Graph before = b.build();
  Graph g = before;
  passes::recognize_patterns(g);
  g.verify();
  EXPECT_EQ(count_ops(g, "HardSwish"), 2);
  EXPECT_EQ(count_ops(g, "HardSigmoid"), 1);
  EXPECT_EQ(count_ops(g, "Clip"), 1);  // the Add 2 chain
  const Node* hsig = find_node(g, "HardSigmoid");
  ASSERT_NE(hsig, nullptr);
  EXPECT_FLOAT_EQ(hsig->attr_float("alpha", 0), 1.0f / 6.0f);
  EXPECT_EQ(hsig->outputs[0], "d2");
  EXPECT_TRUE(same_outputs(before, g));
}

TEST(RecognizePatterns, IntermediateReadElsewhereBlocksTheMatch) {
  GraphBuilder b;
  auto x = b.input("x", {4});
  auto s = b.node("Sigmoid", {x}, "s", {4});
  auto y = b.node("Mul", {x, s}, "y", {4});
  b.output(y);
  b.output(s);  // the sigmoid is needed on its own
  Graph g = b.build();
  passes::recognize_patterns(g);
  EXPECT_EQ(count_ops(g, "Silu", "npu"), 0);
  EXPECT_EQ(g.nodes.size(), 2u);
}

}  // namespace
}  // namespace npusim::compiler::testing
