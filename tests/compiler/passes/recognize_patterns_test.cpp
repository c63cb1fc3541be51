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

// Hugging Face's LlamaRMSNorm as torch.onnx.export spells it: weight * (x * rsqrt(mean(x^2) + eps)), the
// rsqrt as Div(1, Sqrt).
TEST(RecognizePatterns, LlamaRmsNormBecomesOneNode) {
  GraphBuilder b;
  auto x = b.input("x", {3, 8});
  auto p = b.node("Pow", {x, b.scalar("two", 2.0f)}, "p", {3, 8});
  auto m = b.node("ReduceMean", {p}, "m", {3, 1}, {{"axes", attr_ints({-1})}});
  auto a = b.node("Add", {m, b.scalar("eps", 1e-6f)}, "a", {3, 1});
  auto sd = b.node("Sqrt", {a}, "sd", {3, 1});
  auto r = b.node("Div", {b.scalar("one", 1.0f), sd}, "r", {3, 1});
  auto n = b.node("Mul", {x, r}, "n", {3, 8});
  b.output(b.node("Mul", {b.random_constant("w", {8}, 3, 0.5f, 1.5f), n}, "y", {3, 8}));
  Graph before = b.build();
  Graph g = before;
  passes::recognize_patterns(g);
  g.verify();
  ASSERT_EQ(g.nodes.size(), 1u);
  const Node& rms = g.nodes[0];
  EXPECT_EQ(rms.op_type, "RMSNormalization");
  EXPECT_EQ(rms.domain, "npu");
  EXPECT_EQ(rms.outputs[0], "y");
  EXPECT_EQ(rms.attr_int("axis", 0), 1);
  EXPECT_NEAR(rms.attr_float("epsilon", 0), 1e-6f, 1e-12);
  EXPECT_TRUE(same_outputs(before, g));
}

// The llm: builtin's spelling (Mul(x, x), Div(x, sqrt), Mul(gamma)) and a Reciprocal without gamma, over
// the last two axes.
TEST(RecognizePatterns, RmsNormWithDivisionOrReciprocalAndNoGamma) {
  GraphBuilder b;
  auto x = b.input("x", {2, 3, 4});
  auto sq = b.node("Mul", {x, x}, "sq", {2, 3, 4});
  auto m = b.node("ReduceMean", {sq}, "m", {2, 3, 1}, {{"axes", attr_ints({-1})}});
  auto sd = b.node("Sqrt", {b.node("Add", {m, b.scalar("eps", 1e-5f)}, "a", {2, 3, 1})}, "sd", {2, 3, 1});
  auto n = b.node("Div", {x, sd}, "n", {2, 3, 4});
  auto h = b.node("Mul", {n, b.random_constant("gamma", {4}, 5, 0.5f, 1.5f)}, "h", {2, 3, 4});
  auto sq2 = b.node("Pow", {h, b.scalar("two", 2.0f)}, "sq2", {2, 3, 4});
  auto m2 = b.node("ReduceMean", {sq2}, "m2", {2, 1, 1}, {{"axes", attr_ints({1, 2})}});
  auto sd2 =
      b.node("Sqrt", {b.node("Add", {b.scalar("eps2", 1e-5f), m2}, "a2", {2, 1, 1})}, "sd2", {2, 1, 1});
  b.output(b.node("Mul", {b.node("Reciprocal", {sd2}, "r2", {2, 1, 1}), h}, "y", {2, 3, 4}));
  Graph before = b.build();
  Graph g = before;
  passes::recognize_patterns(g);
  g.verify();
  ASSERT_EQ(g.nodes.size(), 2u);
  for (const Node& n2 : g.nodes) EXPECT_EQ(n2.op_type, "RMSNormalization");
  EXPECT_EQ(g.nodes[0].attr_int("axis", 0), 2);
  EXPECT_EQ(g.nodes[1].attr_int("axis", 0), 1);  // over the last two axes; gamma ones
  EXPECT_TRUE(same_outputs(before, g));
}

// Grouped-query attention as Llama's repeat_kv exports it: each of 2 KV heads copied for 3 query heads
// (Unsqueeze, Expand, Reshape), K transposed for Q Kᵀ. After the pass no copy is left: the 3 query heads
// of a KV head are rows of one MatMul against that head.
TEST(RecognizePatterns, GqaHeadBroadcastBecomesRowsOfOneMatMulPerKvHead) {
  GraphBuilder b;
  auto q = b.input("q", {6, 2, 4});
  auto k = b.input("k", {2, 5, 4});
  auto v = b.input("v", {2, 5, 4});
  auto widen = [&](const std::string& kv) {
    auto u = b.node("Unsqueeze", {kv, b.ints(kv + "_ax", {1})}, kv + "_u", {2, 1, 5, 4});
    auto e = b.node("Expand", {u, b.ints(kv + "_shape", {2, 3, 5, 4})}, kv + "_e", {2, 3, 5, 4});
    return b.node("Reshape", {e, b.ints(kv + "_heads", {6, 5, 4})}, kv + "_r", {6, 5, 4});
  };
  auto kt = b.node("Transpose", {widen(k)}, "kt", {6, 4, 5}, {{"perm", attr_ints({0, 2, 1})}});
  auto scores = b.node("MatMul", {q, kt}, "scores", {6, 2, 5});
  auto probs = b.node("Softmax", {scores}, "probs", {6, 2, 5}, {{"axis", attr_i(-1)}});
  b.output(b.node("MatMul", {probs, widen(v)}, "ctx", {6, 2, 4}));
  Graph before = b.build();
  Graph g = before;
  passes::recognize_patterns(g);
  g.verify();
  EXPECT_EQ(count_ops(g, "Expand"), 0);
  EXPECT_EQ(count_ops(g, "MatMul"), 2);
  for (const Node& n : g.nodes)
    if (n.op_type == "MatMul") {
      const Shape& rows = g.value(n.inputs[0]).shape;  // Q [2, 3 heads x 2, 4] or P [2, 3 x 2, 5]
      EXPECT_TRUE(rows.size() == 3 && rows[0] == 2 && rows[1] == 6) << n.name;
      EXPECT_EQ(g.value(n.inputs[1]).shape[0], 2) << n.name;  // the 2 KV heads themselves
    }
  EXPECT_TRUE(same_outputs(before, g));
  // With a batch axis in front, as Hugging Face exports it: [1, kvh, 1, T, d] -> [1, kvh, g, T, d].
  GraphBuilder hf;
  auto bq = hf.input("q", {1, 6, 2, 4});
  auto bu = hf.node("Unsqueeze", {hf.input("k", {1, 2, 5, 4}), hf.ints("ax", {2})}, "u", {1, 2, 1, 5, 4});
  auto be = hf.node("Expand", {bu, hf.ints("shape", {1, 2, 3, 5, 4})}, "e", {1, 2, 3, 5, 4});
  auto br = hf.node("Reshape", {be, hf.ints("heads", {1, 6, 5, 4})}, "r", {1, 6, 5, 4});
  auto bt = hf.node("Transpose", {br}, "t", {1, 6, 4, 5}, {{"perm", attr_ints({0, 1, 3, 2})}});
  hf.output(hf.node("MatMul", {bq, bt}, "y", {1, 6, 2, 5}));
  Graph hf_before = hf.build();
  Graph hf_after = hf_before;
  passes::recognize_patterns(hf_after);
  hf_after.verify();
  EXPECT_EQ(count_ops(hf_after, "Expand"), 0);
  EXPECT_TRUE(same_outputs(hf_before, hf_after));
  // A broadcast that is not one KV head per consecutive group (the copy is along another axis) stays.
  GraphBuilder c;
  auto kk = c.input("k", {1, 3, 5, 4});
  auto e = c.node("Expand", {kk, c.ints("shape", {2, 3, 5, 4})}, "e", {2, 3, 5, 4});
  auto r = c.node("Reshape", {e, c.ints("heads", {6, 5, 4})}, "r", {6, 5, 4});
  c.output(c.node("MatMul", {c.input("q", {6, 2, 5}), r}, "y", {6, 2, 4}));
  Graph other = c.build();
  passes::recognize_patterns(other);
  EXPECT_EQ(count_ops(other, "Expand"), 1);
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
  auto hs1 = b.node("Div", {m1, b.scalar("six1", 6.0f)}, "hs1", s);                   // HardSwish
  auto d2 = b.node("Div", {chain("2", hs1, 3.0f), b.scalar("six2", 6.0f)}, "d2", s);  // HardSigmoid
  auto d3 = b.node("Mul", {b.scalar("sixth3", 1.0f / 6.0f), chain("3", d2, 3.0f)}, "d3", s);
  auto hs3 = b.node("Mul", {d3, d2}, "hs3", s);                                       // HardSwish
  auto no = b.node("Div", {chain("4", hs3, 2.0f), b.scalar("six4", 6.0f)}, "no", s);  // not one
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
