// Back-end tests. Functional: every compiled program, run on the datapath, must match the FP32
// reference interpreter within 1e-4 (relative to the output's scale). Structural: tokens balance and
// never deadlock, a random interleaving of the queues that respects only the tokens computes the same
// numbers (so the tokens capture every hazard), errors name the layer, the search is fast.
#include <gtest/gtest.h>

#include <set>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>

#include "compiler/backend/compile.h"
#include "compiler/backend/matrix/matrix_walk.h"
#include "compiler/backend/memory/movement.h"
#include "compiler/import/import.h"
#include "compiler/interp/interpreter.h"
#include "compiler/ops/op_table.h"
#include "compiler/passes/lowered.h"
#include "compiler/quant/emulate.h"
#include "tests/compiler/backend/functional.h"

namespace npusim::compiler::testing {
namespace {

constexpr double kTol = 1e-4;

struct ConvCase {
  const char* name;
  int64_t n, c, h, w, m, k, stride, pad, dilation, group;
  bool bias;
};

Graph conv_graph(const ConvCase& cc, const char* act = nullptr) {
  GraphBuilder b;
  b.input("x", {cc.n, cc.c, cc.h, cc.w});
  b.constant("w", {cc.m, cc.c / cc.group, cc.k, cc.k}, 0.5f, 3);
  std::vector<std::string> ins = {"x", "w"};
  if (cc.bias) {
    b.constant("b", {cc.m}, 0.5f, 4);
    ins.push_back("b");
  }
  Node& n = b.node("Conv", ins, {act ? "c" : "y"});
  n.attrs["strides"].value = std::vector<int64_t>{cc.stride, cc.stride};
  n.attrs["pads"].value = std::vector<int64_t>{cc.pad, cc.pad, cc.pad, cc.pad};
  n.attrs["dilations"].value = std::vector<int64_t>{cc.dilation, cc.dilation};
  n.attrs["group"].value = cc.group;
  n.attrs["kernel_shape"].value = std::vector<int64_t>{cc.k, cc.k};
  if (act) b.node(act, {"c"}, {"y"});
  b.output("y");
  return b.build();
}

class ConvVariants : public ::testing::TestWithParam<ConvCase> {};

TEST_P(ConvVariants, MatchesInterpreterOnDefaultAndSmallSram) {
  const Graph g = conv_graph(GetParam());
  CompileResult r;
  EXPECT_LT(compile_and_compare(g, isa::NpuConfig{}, &r), kTol) << compile_summary(r);
  EXPECT_EQ(check_tokens(r.program), "");
  EXPECT_TRUE(r.fallbacks.empty()) << compile_summary(r);
  EXPECT_LT(compile_and_compare(g, small_sram(), &r), kTol) << compile_summary(r);
  EXPECT_EQ(check_tokens(r.program), "");
}

INSTANTIATE_TEST_SUITE_P(
    Conv, ConvVariants,
    ::testing::Values(ConvCase{"pointwise", 1, 16, 8, 8, 24, 1, 1, 0, 1, 1, true},
                      ConvCase{"k3_pad1", 1, 8, 10, 9, 12, 3, 1, 1, 1, 1, true},
                      ConvCase{"k3_stride2", 2, 6, 11, 11, 10, 3, 2, 1, 1, 1, false},
                      ConvCase{"k3_dilation2", 1, 5, 12, 12, 7, 3, 1, 2, 2, 1, true},
                      ConvCase{"grouped", 1, 12, 9, 9, 18, 3, 1, 1, 1, 3, true},
                      ConvCase{"depthwise", 1, 24, 10, 10, 24, 3, 1, 1, 1, 24, true},
                      ConvCase{"depthwise_stride2", 1, 32, 13, 13, 32, 3, 2, 1, 1, 32, true},
                      ConvCase{"k7_stride2_pad3", 1, 3, 32, 32, 16, 7, 2, 3, 1, 1, true},
                      ConvCase{"wide_channels", 1, 96, 6, 6, 80, 3, 1, 1, 1, 1, true}),
    [](const ::testing::TestParamInfo<ConvCase>& i) { return std::string(i.param.name); });

TEST(Conv, FusedReluMatches) {
  const Graph g = conv_graph(ConvCase{"relu", 1, 8, 8, 8, 16, 3, 1, 1, 1, 1, true}, "Relu");
  CompileResult r;
  EXPECT_LT(compile_and_compare(g, isa::NpuConfig{}, &r), kTol) << compile_summary(r);
  for (const LayerPlan& l : r.layers)
    EXPECT_NE(l.op, "Relu") << compile_summary(r);  // fused into the epilogue
}

TEST(Conv, HostFallbackKeepsTheFusedEpilogue) {
  // A 3-D conv runs on the host (1-D ones become 2-D convs on the array), but the passes have already
  // fused its Relu into it (npu.activation): the host must apply it (it returned the pre-activation
  // values: a silent wrong answer).
  GraphBuilder b;
  b.input("x", {1, 4, 4, 6, 6}).constant("w", {8, 4, 3, 3, 3});
  b.node("Conv", {"x", "w"}, {"c"}).attrs["pads"].value = std::vector<int64_t>{1, 1, 1, 1, 1, 1};
  b.node("Relu", {"c"}, {"y"});
  b.output("y");
  const Graph g = b.build();
  CompileResult r;
  EXPECT_LT(compile_and_compare(g, isa::NpuConfig{}, &r), kTol) << compile_summary(r);
  ASSERT_EQ(r.fallbacks.size(), 1u);
  EXPECT_EQ(r.fallbacks[0].op, "Conv");
}

TEST(Vector, AddWithAFusedActivationIsOnePass) {
  // Add -> Relu after lower(): one VEC pass over the tensor that adds and applies the Relu.
  GraphBuilder b;
  b.input("x", {1, 8, 5, 5}).input("y", {1, 8, 5, 5});
  b.node("Add", {"x", "y"}, {"s"});
  b.node("Relu", {"s"}, {"z"});
  b.output("z");
  CompileResult r;
  EXPECT_LT(compile_and_compare(b.build(), isa::NpuConfig{}, &r), kTol) << compile_summary(r);
  ASSERT_EQ(r.layers.size(), 1u) << compile_summary(r);
  EXPECT_NE(r.layers[0].mapping.find("+ Relu"), std::string::npos) << r.layers[0].mapping;
}

TEST(Vector, ActivationsAreTheQuantizedReferencesBitForBit) {
  // The vector unit's Sigmoid, HardSwish and GELU and the quantized reference's (compiler/quant/emulate)
  // are one definition (isa/numerics): on a dense sweep of inputs the fp32 results are the same bits.
  // (The reference computed GELU with x / sqrt(2) and HardSwish with x / 6: 1-ulp differences that
  // flipped int8 codes of ConvNeXt's fused GELU epilogue.)
  for (const std::string act : {"Sigmoid", "HardSwish", "Gelu"}) {
    GraphBuilder b;
    b.input("x", {1, 65536});
    if (act == "Gelu") {  // torch's erf GELU, which the passes recognise as npu.Gelu
      b.constant("sqrt2", Tensor::scalar_float(std::sqrt(2.0f))).constant("one", Tensor::scalar_float(1.0f));
      b.constant("half", Tensor::scalar_float(0.5f));
      b.node("Div", {"x", "sqrt2"}, {"d"});
      b.node("Erf", {"d"}, {"e"});
      b.node("Add", {"e", "one"}, {"a"});
      b.node("Mul", {"x", "a"}, {"m"});
      b.node("Mul", {"m", "half"}, {"y"});
    } else {
      b.node(act, {"x"}, {"y"});
    }
    b.output("y");
    Graph g = b.build();
    lower(g);
    ASSERT_EQ(g.nodes.size(), 1u) << act;
    const CompileResult r = compile(g, isa::NpuConfig{}, {});
    Tensor x(DataType::kFloat32, {1, 65536});
    for (int64_t k = 0; k < x.size(); ++k) x.f[k] = -8.0f + 16.0f * static_cast<float>(k) / 65536.0f;
    const auto got = run_program(r, isa::NpuConfig{}, {{"x", x}});
    const auto want = quant::emulate(g, quant::PrecisionPlan{}, {{"x", x}});
    int64_t differ = 0;
    for (int64_t k = 0; k < x.size(); ++k) differ += got.at("y").f[k] != want.at("y").f[k];
    EXPECT_EQ(differ, 0) << act << ": " << differ << " of 65536 values differ";
  }
}

// x -> BatchNormalization (nothing to fold into) -> activation, as DenseNet's pre-activation layers.
Graph batchnorm_graph(const Shape& shape, const std::string& act) {
  GraphBuilder b;
  const int64_t ch = shape[1];
  b.input("x", shape)
      .constant("g", {ch}, 1.0f, 7)
      .constant("bt", {ch}, 0.5f, 8)
      .constant("mu", {ch}, 0.3f, 9);
  std::vector<float> var(static_cast<size_t>(ch));
  for (int64_t i = 0; i < ch; ++i) var[static_cast<size_t>(i)] = 0.5f + 0.25f * static_cast<float>(i % 5);
  b.constant("var", Tensor::from_floats({ch}, var));
  b.node("BatchNormalization", {"x", "g", "bt", "mu", "var"}, {act.empty() ? "y" : "n"}, "bn");
  if (act == "Clip") {
    b.constant("lo", Tensor::scalar_float(-0.25f)).constant("hi", Tensor::scalar_float(0.75f));
    b.node(act, {"n", "lo", "hi"}, {"y"});
  } else if (!act.empty()) {
    b.node(act, {"n"}, {"y"});
  }
  b.output("y");
  return b.build();
}

TEST(Vector, UnfoldedBatchNormAndItsActivationAreOneAffineLayerInEveryLayout) {
  // NHWC (channels innermost: the per-channel constants row-broadcast), ONNX-order rank 2 (row) and
  // rank 3 (channels outer: column broadcast), odd extents; one layer named as the BN node, no Mul /
  // Add / activation layers; on a small SRAM the tensor takes several tiles.
  for (const Shape& shape : {Shape{1, 5, 7, 3}, Shape{2, 37, 9, 11}, Shape{3, 7}, Shape{2, 5, 9}}) {
    for (const std::string act : {"", "Relu", "Clip", "Sigmoid"}) {
      for (const bool small : {false, true}) {
        SCOPED_TRACE(::testing::Message() << "rank " << shape.size() << " C " << shape[1] << " act '" << act
                                          << "'" << (small ? " small SRAM" : ""));
        const Graph g = batchnorm_graph(shape, act);
        CompileResult r;
        EXPECT_LT(compile_and_compare(g, small ? small_sram() : isa::NpuConfig{}, &r), kTol)
            << compile_summary(r);
        EXPECT_TRUE(r.fallbacks.empty()) << compile_summary(r);
        EXPECT_EQ(check_tokens(r.program), "");
        int affine = 0;
        for (const auto& l : r.layers) {
          EXPECT_TRUE(l.op == "BatchNormalization" || l.op == "Transpose") << l.op << ": " << l.mapping;
          if (l.op != "BatchNormalization") continue;
          ++affine;
          EXPECT_EQ(l.name, "bn");
          EXPECT_NE(l.mapping.find("per-channel affine)" + (act.empty() ? "" : " + " + act)),
                    std::string::npos)
              << l.mapping;
        }
        EXPECT_EQ(affine, 1) << compile_summary(r);
      }
    }
  }
}

TEST(Vector, ConstantPadOfTheSpatialDimsIsADmaCopyWhoseLoadWritesTheHalo) {
  // x -> BN (NHWC) -> Pad(H, W): LOAD's halo writes the padding; a value bf16 cannot hold exactly, or
  // a pad of the innermost dim (the graph input's NCHW order), takes the index-map gather instead.
  struct Case {
    float value;
    bool after_bn;
    const char* mapping;
  };
  for (const Case& k : {Case{0.0f, true, "LOAD halo"}, Case{1.5f, true, "LOAD halo"},
                        Case{0.1f, true, "index map"}, Case{0.0f, false, "index map"}}) {
    for (const bool small : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "value " << k.value << (k.after_bn ? " NHWC" : " NCHW")
                                        << (small ? " small SRAM" : ""));
      GraphBuilder b;
      b.input("x", {2, 37, 9, 11}).constant("g", {37}, 1.0f, 7).constant("bt", {37}, 0.5f, 8);
      b.constant("mu", {37}, 0.3f, 9)
          .constant("var", Tensor::from_floats({37}, std::vector<float>(37, 1.5f)));
      if (k.after_bn) b.node("BatchNormalization", {"x", "g", "bt", "mu", "var"}, {"n"}, "bn");
      b.constant("pads", Tensor::from_ints(DataType::kInt64, {8}, {0, 0, 1, 2, 0, 0, 3, 1}));
      b.constant("value", Tensor::scalar_float(k.value));
      b.node("Pad", {k.after_bn ? "n" : "x", "pads", "value"}, {"y"}, "pad");
      b.output("y");
      CompileResult r;
      EXPECT_LT(compile_and_compare(b.build(), small ? small_sram() : isa::NpuConfig{}, &r), kTol)
          << compile_summary(r);
      EXPECT_TRUE(r.fallbacks.empty()) << compile_summary(r);
      EXPECT_EQ(check_tokens(r.program), "");
      for (const auto& l : r.layers) {
        if (l.op != "Pad") continue;
        EXPECT_NE(l.mapping.find(k.mapping), std::string::npos) << l.mapping;
      }
    }
  }
}

TEST(Precision, Fp16BatchNormIsTheQuantizedReferenceBitForBit) {
  // In fp16 the layer rounds its constants, the product and the sum to fp16 (each VEC result is stored
  // in the format); the quantized reference (compiler/quant/emulate) computes the same bits.
  for (const std::string act : {"", "Relu", "Sigmoid"}) {
    Graph g = batchnorm_graph({1, 13, 6, 5}, act);
    lower(g);
    quant::PrecisionSpec spec;
    spec.model = quant::Precision::kFp16;
    const quant::PrecisionPlan plan = quant::resolve_plan(g, spec);
    CompileOptions o;
    o.plan = &plan;
    const CompileResult r = compile(g, isa::NpuConfig{}, o);
    const std::map<std::string, Tensor> in = {{"x", random_tensor({1, 13, 6, 5}, 3.0f, 11)}};
    const auto got = run_program(r, isa::NpuConfig{}, in);
    const auto want = quant::emulate(g, plan, in);
    int64_t differ = 0;
    for (size_t k = 0; k < want.at("y").f.size(); ++k) differ += got.at("y").f[k] != want.at("y").f[k];
    EXPECT_EQ(differ, 0) << "act '" << act << "': " << differ << " values differ";
    EXPECT_LT(max_rel_error(got, interpret(batchnorm_graph({1, 13, 6, 5}, act), in)), 5e-3);
  }
}

TEST(Gemm, MatMulNonMultipleOfArray) {
  for (auto [m, k, n] : std::vector<std::array<int64_t, 3>>{{37, 70, 45}, {1, 300, 10}, {130, 33, 129}}) {
    GraphBuilder b;
    b.input("a", {m, k});
    b.constant("w", {k, n}, 0.5f, 5);
    b.node("MatMul", {"a", "w"}, {"y"});
    b.output("y");
    const Graph g = b.build();
    CompileResult r;
    EXPECT_LT(compile_and_compare(g, isa::NpuConfig{}, &r), kTol)
        << m << "x" << k << "x" << n << compile_summary(r);
    EXPECT_LT(compile_and_compare(g, small_sram(), &r), kTol)
        << m << "x" << k << "x" << n << compile_summary(r);
    EXPECT_EQ(check_tokens(r.program), "");
  }
}

TEST(Gemm, GemmWithBiasAndTransB) {
  GraphBuilder b;
  b.input("a", {5, 40});
  b.constant("w", {24, 40}, 0.5f, 5);
  b.constant("c", {24}, 0.5f, 6);
  Node& n = b.node("Gemm", {"a", "w", "c"}, {"y"});
  n.attrs["transB"].value = int64_t{1};
  b.output("y");
  const Graph g = b.build();
  CompileResult r;
  EXPECT_LT(compile_and_compare(g, small_sram(), &r), kTol) << compile_summary(r);
  EXPECT_TRUE(r.fallbacks.empty()) << compile_summary(r);
}

TEST(Gemm, BatchedMatMulOfTwoActivations) {
  GraphBuilder b;
  b.input("a", {2, 3, 17, 20});
  b.input("b", {2, 3, 20, 9});
  b.node("MatMul", {"a", "b"}, {"y"});
  b.output("y");
  const Graph g = b.build();
  CompileResult r;
  EXPECT_LT(compile_and_compare(g, small_sram(), &r), kTol) << compile_summary(r);
  EXPECT_TRUE(r.fallbacks.empty()) << compile_summary(r);
}

TEST(Gemm, BatchedMatMulWithSharedWeightsFoldsBatchIntoM) {
  GraphBuilder b;
  b.input("a", {2, 7, 32});
  b.constant("w", {32, 16}, 0.5f, 5);
  b.constant("bias", {16}, 0.5f, 6);
  b.node("MatMul", {"a", "w"}, {"t"});
  b.node("Add", {"t", "bias"}, {"y"});
  b.output("y");
  const Graph g = b.build();
  CompileResult r;
  EXPECT_LT(compile_and_compare(g, isa::NpuConfig{}, &r), kTol) << compile_summary(r);
}

TEST(Tokens, RandomInterleavingGivesTheSameResult) {
  const Graph g = conv_graph(ConvCase{"k3", 1, 12, 10, 10, 20, 3, 1, 1, 1, 1, true}, "Relu");
  for (uint32_t seed = 1; seed <= 3; ++seed) {
    CompileResult r;
    RunOptions o;
    o.random_order = true;
    o.seed = seed;
    EXPECT_LT(compile_and_compare(g, small_sram(), &r, o), kTol) << "seed " << seed;
  }
}

TEST(Errors, ALayerWhoseSmallestTileCannotFitRunsOnTheHostNamingLayerAndSram) {
  const Graph g = conv_graph(ConvCase{"big", 1, 64, 8, 8, 64, 3, 1, 1, 1, 1, false});
  isa::NpuConfig c;
  c.sram.input.size_kib = 1;
  c.sram.weight.size_kib = 1;
  c.sram.accumulator.size_kib = 1;
  Graph lowered = g;
  lower(lowered);
  // 1 KiB still fits a 1-channel tile; shrink the weight buffer below one 3x3 tap pair. The model still
  // compiles (docs/backend.md, "Host fallback"): the conv runs on the host, the report says why.
  isa::NpuConfig tiny = c;
  tiny.sram.weight.size_kib = 0;
  const CompileResult r = compile(lowered, tiny);
  ASSERT_EQ(r.fallbacks.size(), 1u) << compile_summary(r);
  const std::string m = r.fallbacks[0].reason;
  EXPECT_EQ(r.fallbacks[0].op, "Conv");
  EXPECT_NE(m.find("y_node"), std::string::npos) << m;
  EXPECT_NE(m.find("sram.weight"), std::string::npos) << m;
}

// ---- vector ops ----

Graph unary_graph(const char* op, const Shape& s) {
  GraphBuilder b;
  b.input("x", s);
  b.node(op, {"x"}, {"y"});
  b.output("y");
  return b.build();
}

TEST(Vector, UnaryActivationsMatch) {
  for (const char* op :
       {"Relu", "Sigmoid", "Tanh", "Exp", "Abs", "Neg", "Erf", "HardSwish", "LeakyRelu", "HardSigmoid"}) {
    CompileResult r;
    EXPECT_LT(compile_and_compare(unary_graph(op, {3, 5000}), small_sram(), &r), kTol)
        << op << compile_summary(r);
    EXPECT_TRUE(r.fallbacks.empty()) << op << compile_summary(r);
  }
}

TEST(Vector, BinaryWithBroadcastingMatches) {
  struct Case {
    const char* op;
    Shape a, b;
  };
  for (const Case& c : std::vector<Case>{{"Add", {4, 37, 50}, {4, 37, 50}},
                                         {"Mul", {4, 37, 50}, {50}},
                                         {"Sub", {4, 37, 50}, {4, 37, 1}},
                                         {"Div", {4, 37, 50}, {1}},
                                         {"Sub", {1}, {4, 37, 50}},
                                         {"Div", {37, 1}, {37, 50}},
                                         {"Max", {6, 1, 20}, {6, 9, 20}},
                                         {"Add", {2, 3, 4, 5}, {3, 1, 1}}}) {
    GraphBuilder b;
    b.input("a", c.a);
    b.input("b", c.b);
    b.node(c.op, {"a", "b"}, {"y"});
    b.output("y");
    CompileResult r;
    EXPECT_LT(compile_and_compare(b.build(), small_sram(), &r), kTol) << c.op << compile_summary(r);
    EXPECT_TRUE(r.fallbacks.empty()) << c.op << compile_summary(r);
  }
}

TEST(Vector, PoolingMatches) {
  GraphBuilder b;
  b.input("x", {1, 3, 16, 16});
  b.constant("w", {8, 3, 3, 3}, 0.5f, 3);
  Node& c = b.node("Conv", {"x", "w"}, {"c"});
  c.attrs["pads"].value = std::vector<int64_t>{1, 1, 1, 1};
  Node& mp = b.node("MaxPool", {"c"}, {"p"});
  mp.attrs["kernel_shape"].value = std::vector<int64_t>{3, 3};
  mp.attrs["strides"].value = std::vector<int64_t>{2, 2};
  mp.attrs["pads"].value = std::vector<int64_t>{1, 1, 1, 1};
  Node& ap = b.node("AveragePool", {"p"}, {"q"});
  ap.attrs["kernel_shape"].value = std::vector<int64_t>{2, 2};
  ap.attrs["strides"].value = std::vector<int64_t>{2, 2};
  b.node("GlobalAveragePool", {"q"}, {"y"});
  b.output("y");
  CompileResult r;
  EXPECT_LT(compile_and_compare(b.build(), small_sram(), &r), kTol) << compile_summary(r);
  EXPECT_TRUE(r.fallbacks.empty()) << compile_summary(r);
}

// A global pool over NHWC streams its input once in bands of whole rows (all channels when a row fits
// the input slot, else channel chunks), pools each band to one pixel and the bands once more.
// A 1x1 conv with stride 2 and no padding (ResNet's downsample) loads only the pixels it multiplies:
// its input LOADs step over 2 pixels (pixel stride 2C elements) and 2 rows, and the result is right.
TEST(Matrix, PointwiseStridedConvLoadsOnlyThePixelsItUses) {
  GraphBuilder b;
  b.input("x", {1, 3, 15, 14});
  b.constant("w0", {16, 3, 1, 1}, 0.5f, 7);
  b.node("Conv", {"x", "w0"}, {"c"});
  b.constant("w", {24, 16, 1, 1}, 0.5f, 3);
  Node& conv = b.node("Conv", {"c", "w"}, {"y"});
  conv.attrs["strides"].value = std::vector<int64_t>{2, 2};
  b.output("y");
  CompileResult r;
  EXPECT_LT(compile_and_compare(b.build(), small_sram(), &r), kTol) << compile_summary(r);
  uint32_t layer = 0;
  while (layer < r.layers.size() && r.layers[layer].mapping.find("stride 2x2") == std::string::npos) ++layer;
  ASSERT_LT(layer, r.layers.size()) << compile_summary(r);
  EXPECT_NE(r.layers[layer].mapping.find("only the pixels"), std::string::npos) << r.layers[layer].mapping;
  int64_t loads = 0;
  for (const isa::Instruction& i : r.program.instructions) {
    if (i.opcode != isa::Opcode::kLoad || i.layer() != layer || i.get(isa::Field::kBuf) != 0) continue;
    ++loads;
    EXPECT_EQ(i.get(isa::Field::kStride1), 2 * 16);       // every other pixel of 16 channels
    EXPECT_EQ(i.get(isa::Field::kStride2), 2 * 14 * 16);  // every other row of 14 pixels
  }
  EXPECT_GT(loads, 0);
}

// A conv's bias and Clip are one output-stage VEC per tile, and the bias vector of a channel range is
// loaded once per ping-pong side while the spatial tiles pass (not once per tile).
TEST(Matrix, BiasAndClampAreOneOutputStageWhoseVectorsLoadOncePerSide) {
  GraphBuilder b;
  b.input("x", {1, 16, 24, 24});
  b.constant("w", {8, 16, 1, 1}, 0.5f, 3);
  b.constant("b", {8}, 0.5f, 4);
  b.node("Conv", {"x", "w", "b"}, {"c"});
  b.node("Relu", {"c"}, {"y"});
  b.output("y");
  CompileResult r;
  EXPECT_LT(compile_and_compare(b.build(), small_sram(), &r), kTol) << compile_summary(r);
  uint32_t layer = 0;
  while (layer < r.layers.size() && r.layers[layer].placement != Placement::kNpuMatrix) ++layer;
  ASSERT_LT(layer, r.layers.size()) << compile_summary(r);
  int64_t stores = 0, outputs = 0, vecs = 0, acc_loads = 0;
  for (const isa::Instruction& i : r.program.instructions) {
    if (i.layer() != layer) continue;
    if (i.opcode == isa::Opcode::kStore) ++stores;
    if (i.opcode == isa::Opcode::kVec) ++vecs;
    if (i.opcode == isa::Opcode::kVec && i.get(isa::Field::kVop) == static_cast<int64_t>(isa::VecOp::kOutput))
      ++outputs;
    if (i.opcode == isa::Opcode::kLoad &&
        i.get(isa::Field::kBuf) == static_cast<int64_t>(isa::Buffer::kAccumulator))
      ++acc_loads;
  }
  EXPECT_GT(stores, 2) << compile_summary(r);  // several output tiles of the one channel range
  EXPECT_EQ(outputs, stores);
  EXPECT_EQ(vecs, stores);
  EXPECT_EQ(acc_loads, 2);
}

// EpilogueParams::loads (the cost model's count) is what need_load does along every loop order.
TEST(Matrix, EpilogueVectorLoadsCountedAsTheWalkMakesThem) {
  for (bool spatial_outer : {false, true}) {
    for (int64_t blocks : {1, 3}) {
      for (int64_t nn : {1, 2, 3, 4}) {
        for (int64_t nsp : {1, 2, 5}) {
          backend::EpilogueParams p;
          p.reset();
          int64_t loads = 0;
          int side = 0;
          for (int64_t b = 0; b < blocks; ++b) {
            for (int64_t outer = 0; outer < (spatial_outer ? nsp : nn); ++outer) {
              for (int64_t inner = 0; inner < (spatial_outer ? nn : nsp); ++inner) {
                const int64_t jn = spatial_outer ? inner : outer;
                loads += p.need_load(side, b * 100 + jn * 10, 10);
                side ^= 1;
              }
            }
          }
          EXPECT_EQ(backend::EpilogueParams::loads(spatial_outer, blocks, nn, nsp), loads)
              << spatial_outer << " " << blocks << " " << nn << " " << nsp;
        }
      }
    }
  }
}

// Conv -> SiLU runs as one layer whose epilogue computes x * sigmoid(x) on the accumulator tile (a
// sigmoid into a scratch slot, then the multiply), in fp32 and fp16, equal to the interpreter's
// Sigmoid-then-Mul.
TEST(Matrix, ConvWithAFusedSiluMatches) {
  for (isa::DType precision : {isa::DType::kFp32, isa::DType::kFp16}) {
    GraphBuilder b;
    b.input("x", {1, 3, 10, 9});
    b.constant("w", {12, 3, 3, 3}, 0.5f, 4);
    Node& conv = b.node("Conv", {"x", "w"}, {"c"});
    conv.attrs["pads"].value = std::vector<int64_t>{1, 1, 1, 1};
    b.node("Sigmoid", {"c"}, {"s"});
    b.node("Mul", {"c", "s"}, {"y"});
    b.output("y");
    CompileResult r;
    const double tol = precision == isa::DType::kFp32 ? kTol : 2e-2;
    CompileOptions copts;
    copts.precision = precision;
    EXPECT_LT(compile_and_compare(b.build(), small_sram(), &r, {}, copts), tol) << compile_summary(r);
    int vector_layers = 0;
    for (const LayerPlan& p : r.layers)
      vector_layers += p.placement == Placement::kNpuVector && p.op != "Transpose";
    EXPECT_EQ(vector_layers, 0) << compile_summary(r);
  }
}

// Conv + residual Add (+ Relu) as one layer: the residual tile lies in the accumulator beside the sums when
// that scratchpad moves more bytes a cycle and holds both (the default machine, and one with a 1 MiB
// accumulator), else in the input scratchpad when it fits there (docs/backend.md, "Epilogue operand
// tiles"), the vector unit adding it from there: a machine whose input scratchpad is the faster one. On
// the small machine either may hold it. All equal the interpreter.
TEST(Matrix, ResidualTileLiesInTheInputScratchpadWhenItFits) {
  for (isa::DType precision : {isa::DType::kFp32, isa::DType::kFp16}) {
    GraphBuilder b;
    b.input("x", {1, 16, 12, 12}).input("r", {1, 32, 12, 12});
    b.constant("w", {32, 16, 1, 1}, 0.5f, 6);
    b.node("Conv", {"x", "w"}, {"c"});
    b.node("Add", {"c", "r"}, {"s"});
    b.node("Relu", {"s"}, {"y"});
    b.output("y");
    const Graph g = b.build();
    CompileOptions copts;
    copts.precision = precision;
    const double tol = precision == isa::DType::kFp32 ? kTol : 2e-2;
    for (const isa::NpuConfig& config : {isa::NpuConfig{}, small_sram()}) {
      CompileResult r;
      EXPECT_LT(compile_and_compare(g, config, &r, {}, copts), tol) << compile_summary(r);
      int matrix_layers = 0, from_input = 0;
      for (const LayerPlan& p : r.layers) matrix_layers += p.placement == Placement::kNpuMatrix;
      for (const isa::Instruction& i : r.program.instructions) {
        if (i.opcode == isa::Opcode::kVec &&
            i.get(isa::Field::kVop) == static_cast<int64_t>(isa::VecOp::kAdd) &&
            i.get(isa::Field::kSrc2Buf) == static_cast<int64_t>(isa::Buffer::kInput)) {
          ++from_input;
        }
      }
      EXPECT_EQ(matrix_layers, 1) << compile_summary(r);
      if (config.sram.input.size_kib > 64) {
        EXPECT_GT(from_input, 0) << compile_summary(r);
      }
    }
  }
}

TEST(Matrix, TileRowsSplitTheExtentEvenlyRatherThanLeaveAFewRowRemainder) {
  // ViT-B/16's MLP up-projection in fp16: 197 tokens x 768 -> 3072. Two slots of 64 x 768 inputs fit
  // the 256 KiB input scratchpad, but 197 = 3 x 64 + 5 would stream all 4.7 MB of weights a fourth
  // time for 5 rows; the search also tries the even splits (99, 66, 50 rows) and takes one.
  GraphBuilder b;
  b.input("x", {1, 197, 768});
  b.constant("w", {768, 3072}, 0.05f, 7);
  b.node("MatMul", {"x", "w"}, {"y"});
  b.output("y");
  Graph g = b.build();
  lower(g);
  CompileOptions o;
  o.precision = isa::DType::kFp16;
  const CompileResult r = compile(g, isa::NpuConfig{}, o);
  int matmuls = 0;
  for (const LayerPlan& p : r.layers) {
    if (p.placement != Placement::kNpuMatrix) continue;
    ++matmuls;
    EXPECT_GE(197 % p.tile_m == 0 ? p.tile_m : 197 % p.tile_m, p.tile_m / 2)
        << p.mapping << " tile_m " << p.tile_m;
  }
  EXPECT_EQ(matmuls, 1);
}

TEST(Vector, GlobalPoolsStreamTheirInputInBandsOfRows) {
  struct Case {
    const char* op;
    int64_t C, H, W;
    int64_t loads;  // bands x channel chunks (small_sram: input slots of 2048 fp32 elements)
  };
  // 24 x 20 = 480 elements per row: bands of 4 rows (the largest divisor of 36 within 2048 elements), 9
  // bands. 64 x 60 = 3840 per row: chunks of 32 channels, bands of one row, 12 bands x 2 chunks.
  for (const Case& k : {Case{"GlobalAveragePool", 24, 36, 20, 9}, Case{"GlobalMaxPool", 24, 36, 20, 9},
                        Case{"GlobalAveragePool", 64, 12, 60, 24}}) {
    GraphBuilder b;
    b.input("x", {1, 3, k.H, k.W});
    b.constant("w", {k.C, 3, 1, 1}, 0.5f, 5);
    b.node("Conv", {"x", "w"}, {"c"});
    b.node(k.op, {"c"}, {"y"});
    b.output("y");
    CompileResult r;
    EXPECT_LT(compile_and_compare(b.build(), small_sram(), &r), kTol) << k.op << compile_summary(r);
    const LayerPlan& pool = r.layers.back();
    EXPECT_NE(pool.mapping.find("bands"), std::string::npos) << pool.mapping;
    int64_t loads = 0;
    for (const isa::Instruction& i : r.program.instructions) {
      loads += i.opcode == isa::Opcode::kLoad && i.layer() == r.layers.size() - 1;
    }
    EXPECT_EQ(loads, k.loads) << k.op << " " << pool.mapping;
  }
}

TEST(Vector, TransposeConcatSliceReduceMatch) {
  GraphBuilder b;
  b.input("x", {2, 6, 10, 7});
  Node& t = b.node("Transpose", {"x"}, {"t"});
  t.attrs["perm"].value = std::vector<int64_t>{0, 2, 3, 1};
  Node& t2 = b.node("Transpose", {"x"}, {"t2"});
  t2.attrs["perm"].value = std::vector<int64_t>{0, 1, 3, 2};
  Node& cc = b.node("Concat", {"t2", "t2"}, {"cat"});
  cc.attrs["axis"].value = int64_t{2};
  b.constant("starts", Tensor::from_ints(DataType::kInt64, {1}, {3}));
  b.constant("ends", Tensor::from_ints(DataType::kInt64, {1}, {9}));
  b.constant("axes", Tensor::from_ints(DataType::kInt64, {1}, {3}));
  b.node("Slice", {"cat", "starts", "ends", "axes"}, {"s"});
  Node& rm = b.node("ReduceMean", {"s"}, {"m"});
  rm.attrs["axes"].value = std::vector<int64_t>{3};
  b.output("t").output("m");
  CompileResult r;
  EXPECT_LT(compile_and_compare(b.build(), small_sram(), &r), kTol) << compile_summary(r);
  EXPECT_TRUE(r.fallbacks.empty()) << compile_summary(r);
}

// ---- models ----

TEST(Matrix, ConvTransposeWithStrideEqualToKernelIsOneConvPerKernelRow) {
  // Each input pixel writes its own block of output pixels: no zero insertion, no zero MACs. Square and
  // non-square kernels, a bias and a fused Relu, a one-channel output (a graph output in ONNX order, which
  // is NHWC in memory), on the default machine and on small scratchpads.
  struct Case {
    int64_t m, kh, kw;
  };
  for (const Case& k : {Case{3, 2, 2}, Case{4, 3, 2}, Case{1, 2, 2}}) {
    GraphBuilder b;
    b.input("x", {2, 6, 5, 7});
    b.constant("w", {6, k.m, k.kh, k.kw}, 0.5f, 3).constant("b", {k.m}, 0.5f, 4);
    Node& n = b.node("ConvTranspose", {"x", "w", "b"}, {k.m == 1 ? "y" : "t"});
    n.attrs["strides"].value = std::vector<int64_t>{k.kh, k.kw};
    if (k.m != 1) b.node("Relu", {"t"}, {"y"});
    b.output("y");
    const Graph g = b.build();
    for (const isa::NpuConfig& config : {isa::NpuConfig{}, small_sram()}) {
      CompileResult r;
      EXPECT_LT(compile_and_compare(g, config, &r), kTol) << k.m << " " << k.kh << "x" << k.kw;
      EXPECT_TRUE(r.fallbacks.empty()) << compile_summary(r);
      const auto l = std::find_if(r.layers.begin(), r.layers.end(),
                                  [](const LayerPlan& p) { return p.op == "ConvTranspose"; });
      ASSERT_NE(l, r.layers.end()) << compile_summary(r);
      EXPECT_NE(l->mapping.find("stride = kernel"), std::string::npos) << l->mapping;
      EXPECT_EQ(l->macs, 2 * 5 * 7 * 6 * k.kh * k.kw * k.m);  // the transposed conv's own MACs
      EXPECT_EQ(check_tokens(r.program), "");
    }
  }
}

TEST(Vector, NearestUpsamplingByIntegerFactorsStoresEachInputTileOncePerOutputPosition) {
  // Resize nearest x2 x3 between two convs (NHWC): one LOAD per input tile, sh * sw STOREs of it; the
  // instructions are counted, the values compared.
  GraphBuilder b;
  b.input("x", {1, 4, 6, 5});
  b.constant("w1", {16, 4, 1, 1}, 0.5f, 3).constant("w2", {8, 16, 1, 1}, 0.5f, 4);
  b.node("Conv", {"x", "w1"}, {"a"});
  b.constant("roi", Tensor::from_floats({0}, {})).constant("sc", Tensor::from_floats({4}, {1, 1, 2, 3}));
  b.node("Resize", {"a", "roi", "sc"}, {"u"}).attrs["mode"].value = std::string("nearest");
  b.node("Conv", {"u", "w2"}, {"y"});
  b.output("y");
  const Graph g = b.build();
  for (const isa::NpuConfig& config : {isa::NpuConfig{}, small_sram()}) {
    CompileResult r;
    EXPECT_LT(compile_and_compare(g, config, &r), kTol);
    EXPECT_TRUE(r.fallbacks.empty()) << compile_summary(r);
    uint32_t layer = 0;
    while (layer < r.layers.size() && r.layers[layer].op != "Resize") ++layer;
    ASSERT_LT(layer, r.layers.size()) << compile_summary(r);
    EXPECT_NE(r.layers[layer].mapping.find("nearest upsampling 2x3"), std::string::npos)
        << r.layers[layer].mapping;
    int64_t loads = 0, stores = 0;
    for (const isa::Instruction& i : r.program.instructions) {
      if (i.layer() != layer) continue;
      loads += i.opcode == isa::Opcode::kLoad;
      stores += i.opcode == isa::Opcode::kStore;
    }
    EXPECT_GE(loads, 1);
    EXPECT_EQ(stores, 6 * loads);
  }
}

TEST(Models, BuiltinDemoCnnMatches) {
  const Graph g = builtin_model("demo");
  CompileResult r;
  EXPECT_LT(compile_and_compare(g, isa::NpuConfig{}, &r), kTol) << compile_summary(r);
  EXPECT_EQ(check_tokens(r.program), "");
  EXPECT_LT(compile_and_compare(g, small_sram(), &r), kTol) << compile_summary(r);
  RunOptions o;
  o.random_order = true;
  EXPECT_LT(compile_and_compare(g, small_sram(), &r, o), kTol) << compile_summary(r);
}

// One pre-norm transformer encoder block: LayerNorm, Q/K/V projections, scaled dot-product attention
// with Softmax over 2 heads, output projection + residual, LayerNorm, GELU MLP + residual.
Graph transformer_block(int64_t s, int64_t d, int64_t heads) {
  GraphBuilder b;
  const int64_t dh = d / heads;
  b.input("x", {1, s, d});
  b.constant("g1", {d}, 1.0f, 11).constant("b1", {d}, 0.1f, 12);
  Node& ln1 = b.node("LayerNormalization", {"x", "g1", "b1"}, {"h"});
  ln1.attrs["axis"].value = int64_t{-1};
  auto shape_const = [&](const std::string& n, std::vector<int64_t> v) {
    const int64_t len = static_cast<int64_t>(v.size());
    b.constant(n, Tensor::from_ints(DataType::kInt64, {len}, v));
  };
  shape_const("split_shape", {1, s, heads, dh});
  shape_const("merge_shape", {1, s, d});
  for (const char* p : {"q", "k", "v"}) {
    const std::string w = std::string("w") + p, bb = std::string("bias") + p;
    b.constant(w, {d, d}, 0.3f, static_cast<uint32_t>(p[0]))
        .constant(bb, {d}, 0.1f, static_cast<uint32_t>(p[0] + 1));
    b.node("MatMul", {"h", w}, {std::string(p) + "0"});
    b.node("Add", {std::string(p) + "0", bb}, {std::string(p) + "1"});
    b.node("Reshape", {std::string(p) + "1", "split_shape"}, {std::string(p) + "2"});
    Node& t = b.node("Transpose", {std::string(p) + "2"}, {std::string(p) + "3"});
    t.attrs["perm"].value =
        std::string(p) == "k" ? std::vector<int64_t>{0, 2, 3, 1} : std::vector<int64_t>{0, 2, 1, 3};
  }
  b.node("MatMul", {"q3", "k3"}, {"scores"});
  b.constant("scale", Tensor::scalar_float(1.0f / std::sqrt(static_cast<float>(dh))));
  b.node("Mul", {"scores", "scale"}, {"scaled"});
  Node& sm = b.node("Softmax", {"scaled"}, {"probs"});
  sm.attrs["axis"].value = int64_t{-1};
  b.node("MatMul", {"probs", "v3"}, {"ctx"});
  Node& tc = b.node("Transpose", {"ctx"}, {"ctx_t"});
  tc.attrs["perm"].value = std::vector<int64_t>{0, 2, 1, 3};
  b.node("Reshape", {"ctx_t", "merge_shape"}, {"ctx_m"});
  b.constant("wo", {d, d}, 0.3f, 21).constant("bo", {d}, 0.1f, 22);
  b.node("MatMul", {"ctx_m", "wo"}, {"o0"});
  b.node("Add", {"o0", "bo"}, {"o1"});
  b.node("Add", {"o1", "x"}, {"r1"});
  b.constant("g2", {d}, 1.0f, 23).constant("b2", {d}, 0.1f, 24);
  Node& ln2 = b.node("LayerNormalization", {"r1", "g2", "b2"}, {"h2"});
  ln2.attrs["axis"].value = int64_t{-1};
  b.constant("w1", {d, 4 * d}, 0.3f, 25).constant("c1", {4 * d}, 0.1f, 26);
  b.node("MatMul", {"h2", "w1"}, {"f0"});
  b.node("Add", {"f0", "c1"}, {"f1"});
  // GELU as torch exports it: x * 0.5 * (1 + erf(x / sqrt 2))
  b.constant("sqrt2", Tensor::scalar_float(std::sqrt(2.0f))).constant("one", Tensor::scalar_float(1.0f));
  b.constant("half", Tensor::scalar_float(0.5f));
  b.node("Div", {"f1", "sqrt2"}, {"e0"});
  b.node("Erf", {"e0"}, {"e1"});
  b.node("Add", {"e1", "one"}, {"e2"});
  b.node("Mul", {"f1", "e2"}, {"e3"});
  b.node("Mul", {"e3", "half"}, {"g4"});
  b.constant("w2", {4 * d, d}, 0.3f, 27).constant("c2", {d}, 0.1f, 28);
  b.node("MatMul", {"g4", "w2"}, {"f2"});
  b.node("Add", {"f2", "c2"}, {"f3"});
  b.node("Add", {"f3", "r1"}, {"y"});
  b.output("y");
  return b.build();
}

TEST(Models, TransformerBlockMatches) {
  const Graph g = transformer_block(16, 32, 2);
  CompileResult r;
  EXPECT_LT(compile_and_compare(g, isa::NpuConfig{}, &r), kTol) << compile_summary(r);
  EXPECT_TRUE(r.fallbacks.empty()) << compile_summary(r);
  EXPECT_EQ(check_tokens(r.program), "");
  EXPECT_LT(compile_and_compare(g, small_sram(), &r), kTol) << compile_summary(r);
  RunOptions o;
  o.random_order = true;
  EXPECT_LT(compile_and_compare(g, small_sram(), &r, o), kTol) << compile_summary(r);
}

TEST(Host, UnsupportedOpFallsBackAndStillComputes) {
  GraphBuilder b;
  b.input("x", {4, 9});
  b.node("Sin", {"x"}, {"s"});
  b.node("Relu", {"s"}, {"y"});
  b.output("y");
  CompileResult r;
  EXPECT_LT(compile_and_compare(b.build(), isa::NpuConfig{}, &r), kTol) << compile_summary(r);
  ASSERT_EQ(r.fallbacks.size(), 1u);
  EXPECT_EQ(r.fallbacks[0].op, "Sin");
  EXPECT_GT(r.fallbacks[0].est_cycles, 0);
  ASSERT_EQ(r.program.host_ops.size(), 1u);
  EXPECT_NE(compile_summary(r).find("Sin"), std::string::npos);
}

TEST(Memory, LifetimeReuseSavesOnAChain) {
  GraphBuilder b;
  b.input("x", {64, 64});
  b.node("Relu", {"x"}, {"a"});
  b.node("Sigmoid", {"a"}, {"c"});
  b.node("Tanh", {"c"}, {"d"});
  b.node("Abs", {"d"}, {"y"});
  b.output("y");
  Graph g = b.build();
  lower(g);
  const CompileResult r = compile(g, isa::NpuConfig{});
  // Five 16 KiB values, but each node only needs its input and its output alive (the graph input is
  // dead after its last reader): the peak is two buffers.
  EXPECT_EQ(r.memory.activation_bytes_no_reuse, 5u * 16384u) << compile_summary(r);
  EXPECT_EQ(r.memory.activation_bytes, 2u * 16384u);
  for (const auto& seg : r.program.data) EXPECT_EQ(seg.dram_addr % 64, 0u);
  for (const auto& t : r.program.tensors) EXPECT_EQ(t.dram_addr % 64, 0u);
}

TEST(Precision, Fp16ProgramIsCloseToFp32Reference) {
  const Graph g = conv_graph(ConvCase{"k3", 1, 8, 8, 8, 16, 3, 1, 1, 1, 1, true}, "Relu");
  CompileOptions o;
  o.precision = isa::DType::kFp16;
  CompileResult r;
  EXPECT_LT(compile_and_compare(g, isa::NpuConfig{}, &r, {}, o), 5e-3) << compile_summary(r);
  for (const auto& t : r.program.tensors) EXPECT_EQ(t.dtype, isa::DType::kFp16);
}

}  // namespace
}  // namespace npusim::compiler::testing
namespace npusim::compiler::testing {
namespace {

// The folder of BUILD/test_models (shared with the models fixtures; exports are atomic), with `names`
// exported into it when missing. Empty when there is no /usr/bin/python3 to export with.
std::string exported_models(const std::vector<std::string>& names) {
  const std::string dir = std::string(NPUSIM_BINARY_DIR) + "/test_models";
  std::string missing;
  for (const auto& n : names) {
    if (!std::ifstream(dir + "/" + n + ".onnx")) missing += " " + n;
  }
  if (missing.empty()) return dir;
  if (!std::ifstream("/usr/bin/python3")) return "";
  const std::string cmd = "/usr/bin/python3 " + std::string(NPUSIM_SOURCE_DIR) +
                          "/scripts/export_models.py " + dir + missing + " > " + dir +
                          ".backend_test.log 2>&1";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  return dir;
}

// Exported torchvision / torch.nn models (scripts/export_models.py, run once into the build tree):
// every op maps to the NPU (no fallback) and tokens balance. How fast they compile is a benchmark's
// figure (docs/performance.md), not a unit test's: a timed assertion here failed whenever the machine
// was busy.
TEST(Models, ExportedModelsCompileWithoutFallbacks) {
  const std::vector<std::string> names = {"resnet18", "mobilenet_v2", "bert_small"};
  const std::string dir = exported_models(names);
  if (dir.empty()) GTEST_SKIP() << "no /usr/bin/python3 to export models";
  for (const auto& n : names) {
    Graph g = import_onnx_file(dir + "/" + n + ".onnx");
    lower(g);
    const CompileResult r = compile(g, isa::NpuConfig{});
    EXPECT_TRUE(r.fallbacks.empty()) << n << compile_summary(r);
    EXPECT_EQ(check_tokens(r.program), "") << n;
  }
}

// The same exported models, run end to end on the functional datapath against the interpreter.
TEST(Models, ExportedModelsMatchInterpreter) {
  const std::string dir = exported_models({"resnet18", "mobilenet_v2", "bert_small"});
  if (dir.empty()) GTEST_SKIP() << "no /usr/bin/python3 to export models";
  for (const std::string n : {"resnet18", "mobilenet_v2", "bert_small"}) {
    const Graph g = import_onnx_file(dir + "/" + n + ".onnx");
    CompileResult r;
    EXPECT_LT(compile_and_compare(g, isa::NpuConfig{}, &r), kTol) << n;
  }
}

}  // namespace
}  // namespace npusim::compiler::testing

namespace npusim::compiler::testing {
namespace {

// ---- the op table tells the truth ----

Tensor ints(std::vector<int64_t> v) {
  const int64_t n = static_cast<int64_t>(v.size());
  return Tensor::from_ints(DataType::kInt64, {n}, std::move(v));
}

// A small instance of `op` that meets the table's constraints (one node reading runtime input "x"
// [1, 4, 6, 6] unless the op needs something else), or an empty graph when the op has none here.
Graph instance(const std::string& op) {
  GraphBuilder b;
  const Shape s4 = {1, 4, 6, 6};
  auto one = [&](const std::vector<std::string>& extra_inputs = {}) -> Node& {
    b.input("x", s4);
    std::vector<std::string> in = {"x"};
    in.insert(in.end(), extra_inputs.begin(), extra_inputs.end());
    b.output("y");
    return b.node(op, in, {"y"});
  };
  using V = std::vector<int64_t>;
  if (op == "Conv") {
    b.constant("w", {8, 4, 3, 3});
    one({"w"}).attrs["pads"].value = V{1, 1, 1, 1};
  } else if (op == "ConvTranspose") {
    b.constant("w", {4, 3, 3, 3});
    Node& n = one({"w"});
    n.attrs["strides"].value = V{2, 2};
    n.attrs["pads"].value = V{1, 1, 1, 1};
    n.attrs["output_padding"].value = V{1, 1};
  } else if (op == "Gemm") {
    b.input("x", {5, 12}).constant("w", {7, 12}).constant("c", {7}).output("y");
    b.node(op, {"x", "w", "c"}, {"y"}).attrs["transB"].value = int64_t{1};
  } else if (op == "MatMul") {
    b.input("x", {2, 5, 12}).input("w", {2, 12, 7}).output("y");
    b.node(op, {"x", "w"}, {"y"});
  } else if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div" || op == "Min" || op == "Max") {
    b.constant("c", {4, 1, 1}, 1.0f, 3);
    one({"c"});
  } else if (op == "Pow") {
    b.input("x", s4).constant("c", Tensor::scalar_float(2.0f)).output("y");
    b.node(op, {"x", "c"}, {"y"});
  } else if (op == "Sum" || op == "Mean") {
    b.input("x", s4).input("z", s4).input("u", s4).output("y");
    b.node(op, {"x", "z", "u"}, {"y"});
  } else if (op == "Sqrt" || op == "Reciprocal") {
    b.input("x", s4).constant("c", Tensor::scalar_float(2.0f)).output("y");
    b.node("Add", {"x", "c"}, {"p"});  // keep the argument positive
    b.node(op, {"p"}, {"y"});
  } else if (op == "PRelu") {
    b.constant("slope", {4, 1, 1}, 0.3f, 4);
    one({"slope"});
  } else if (op == "Clip") {
    b.constant("lo", Tensor::scalar_float(-0.3f)).constant("hi", Tensor::scalar_float(0.4f));
    one({"lo", "hi"});
  } else if (op == "Softmax" || op == "LayerNormalization") {
    if (op == "LayerNormalization") {
      b.constant("g", {6}, 1.0f, 5).constant("bb", {6}, 0.2f, 6);
      one({"g", "bb"});
    } else {
      one();
    }
  } else if (op == "BatchNormalization") {
    b.constant("sc", {4}, 1.0f, 7).constant("bi", {4}, 0.2f, 8).constant("mu", {4}, 0.2f, 9);
    b.constant("var", Tensor::from_floats({4}, {0.5f, 1.0f, 1.5f, 2.0f}));
    one({"sc", "bi", "mu", "var"});
  } else if (op == "InstanceNormalization") {
    b.constant("sc", {4}, 1.0f, 7).constant("bi", {4}, 0.2f, 8);
    one({"sc", "bi"});
  } else if (op == "MaxPool" || op == "AveragePool") {
    Node& n = one();
    n.attrs["kernel_shape"].value = V{3, 3};
    n.attrs["pads"].value = V{1, 1, 1, 1};
    n.attrs["strides"].value = V{2, 2};
    n.attrs["ceil_mode"].value = int64_t{1};
  } else if (op == "ReduceMean" || op == "ReduceMax" || op == "ReduceL1" || op == "ReduceL2" ||
             op == "ReduceSumSquare") {
    one().attrs["axes"].value = V{-1};
  } else if (op == "ReduceSum") {
    b.constant("axes", ints({-1}));
    one({"axes"});
  } else if (op == "Concat") {
    b.input("x", s4).input("z", {1, 2, 6, 6}).constant("c", {1, 4, 6, 6}).output("y");
    b.node(op, {"x", "z", "c"}, {"y"}).attrs["axis"].value = int64_t{1};
  } else if (op == "Split") {
    b.input("x", s4).constant("sp", ints({2, 4})).output("y").output("z");
    b.node(op, {"x", "sp"}, {"y", "z"}).attrs["axis"].value = int64_t{3};
  } else if (op == "Slice") {
    b.constant("st", ints({5, 0}))
        .constant("en", ints({-7, 6}))
        .constant("ax", ints({3, 2}))
        .constant("sp", ints({-2, 2}));
    one({"st", "en", "ax", "sp"});
  } else if (op == "Gather") {
    b.constant("idx", Tensor::from_ints(DataType::kInt64, {2, 2}, {3, 0, -1, 2}));
    one({"idx"}).attrs["axis"].value = int64_t{2};
  } else if (op == "GatherElements") {
    std::vector<int64_t> v(144);
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int64_t>((i * 7) % 6);
    b.constant("idx", Tensor::from_ints(DataType::kInt64, s4, v));
    one({"idx"}).attrs["axis"].value = int64_t{3};
  } else if (op == "Pad") {
    b.constant("p", ints({0, 0, 1, 2, 0, 0, 2, 1}));
    one({"p"}).attrs["mode"].value = std::string("reflect");
  } else if (op == "Resize") {
    b.constant("roi", Tensor::from_floats({0}, {})).constant("sc", Tensor::from_floats({4}, {1, 1, 2, 1.5f}));
    one({"roi", "sc"}).attrs["mode"].value = std::string("nearest");
  } else if (op == "Transpose") {
    one().attrs["perm"].value = V{3, 1, 0, 2};
  } else if (op == "Expand") {
    b.input("x", {4, 1, 6}).constant("sh", ints({2, 4, 3, 6})).output("y");
    b.node(op, {"x", "sh"}, {"y"});
  } else if (op == "Tile") {
    b.constant("r", ints({1, 2, 1, 3}));
    one({"r"});
  } else if (op == "Where") {
    std::vector<int64_t> v(144);
    for (size_t i = 0; i < v.size(); ++i) v[i] = (i * 5) % 3 == 0;
    b.constant("cond", Tensor::from_ints(DataType::kBool, s4, v));
    b.input("x", s4).input("z", {1, 4, 1, 6}).output("y");
    b.node(op, {"cond", "x", "z"}, {"y"});
  } else if (op == "Trilu") {
    b.constant("k", Tensor::scalar_int(DataType::kInt64, 1));
    one({"k"});
  } else if (op == "DepthToSpace") {
    one().attrs["blocksize"].value = int64_t{2};
  } else if (op == "SpaceToDepth") {
    one().attrs["blocksize"].value = int64_t{2};
  } else if (op == "Upsample") {
    return Graph{};  // deprecated since opset 10; its nearest form is Resize's (checked above)
  } else {
    one();  // unary ops and global pools
  }
  return b.build();
}

TEST(OpTable, EveryNpuOpCompilesWithoutFallbackAndMatches) {
  int checked = 0;
  for (const OpSupport& row : op_table()) {
    if (row.placement != Placement::kNpuMatrix && row.placement != Placement::kNpuVector) continue;
    const std::string op(row.op);
    const Graph g = instance(op);
    if (g.nodes.empty()) continue;
    CompileResult r;
    EXPECT_LT(compile_and_compare(g, isa::NpuConfig{}, &r), kTol) << op << "\n" << compile_summary(r);
    EXPECT_TRUE(r.fallbacks.empty()) << op << " fell back:\n" << compile_summary(r);
    EXPECT_EQ(check_tokens(r.program), "") << op;
    ++checked;
  }
  EXPECT_GE(checked, 50);
}

}  // namespace
}  // namespace npusim::compiler::testing

namespace npusim::compiler::testing {
namespace {

// The layers named in `free` are free aliases without instructions, those in `copies` are not.
void expect_free_transposes(const CompileResult& r, const std::set<std::string>& free,
                            const std::set<std::string>& copies) {
  for (const LayerPlan& l : r.layers) {
    if (!free.count(l.name) && !copies.count(l.name)) continue;
    EXPECT_EQ(l.placement == Placement::kFree, free.count(l.name) == 1) << l.name;
    EXPECT_EQ(l.instructions == 0, free.count(l.name) == 1) << l.name;
  }
}

// torch's batch-first <-> sequence-first Transposes around attention ([1, S, D] <-> [S, 1, D]) move only
// a dim of extent 1: free aliases (compiler/passes/placement.cpp), no instructions, and the program
// computes what the reference does; the Transpose that swaps S and D still copies.
TEST(DataMovementFolds, TransposesMovingOnlyUnitDimsEmitNoInstructionsAndComputeTheSame) {
  GraphBuilder b;
  b.input("x", {1, 6, 8}).constant("w", {8, 8});
  b.node("MatMul", {"x", "w"}, {"m"}, "mm");
  b.node("Transpose", {"m"}, {"t1"}, "seq_first").attrs["perm"].value = std::vector<int64_t>{1, 0, 2};
  b.node("Relu", {"t1"}, {"r"}, "relu");
  b.node("Transpose", {"r"}, {"t2"}, "batch_first").attrs["perm"].value = std::vector<int64_t>{1, 0, 2};
  b.node("Transpose", {"t2"}, {"y"}, "swap").attrs["perm"].value = std::vector<int64_t>{0, 2, 1};
  b.output("y");
  const Graph g = b.build();
  for (const isa::NpuConfig& config : {isa::NpuConfig{}, small_sram()}) {
    CompileResult r;
    EXPECT_LT(compile_and_compare(g, config, &r), kTol) << compile_summary(r);
    expect_free_transposes(r, {"seq_first", "batch_first"}, {"swap"});
  }
}

// ConvNeXt's block: Conv (NHWC in memory) -> Transpose to [N, H, W, C] -> LayerNorm over C -> Transpose
// back -> Conv. The first Transpose reads the conv's NHWC bytes, which are already [N, H, W, C] in ONNX
// order, and the second writes ONNX-order [N, H, W, C] bytes that are the next conv's NHWC input: both
// free aliases (compiler/passes/layout.cpp, placement.cpp), and no layout conversion is inserted.
TEST(DataMovementFolds, PermutesBetweenNhwcConvsAndAChannelLayerNormMoveNoBytes) {
  GraphBuilder b;
  b.input("x", {1, 8, 5, 7}).constant("w1", {16, 8, 1, 1}).constant("w2", {8, 16, 1, 1});
  b.constant("gamma", {16}).constant("beta", {16});
  Node& c1 = b.node("Conv", {"x", "w1"}, {"c1"}, "conv1");
  c1.attrs["kernel_shape"].value = std::vector<int64_t>{1, 1};
  b.node("Transpose", {"c1"}, {"t1"}, "to_nhwc").attrs["perm"].value = std::vector<int64_t>{0, 2, 3, 1};
  b.node("LayerNormalization", {"t1", "gamma", "beta"}, {"ln"}, "norm").attrs["axis"].value = int64_t{-1};
  b.node("Transpose", {"ln"}, {"t2"}, "to_nchw").attrs["perm"].value = std::vector<int64_t>{0, 3, 1, 2};
  Node& c2 = b.node("Conv", {"t2", "w2"}, {"y"}, "conv2");
  c2.attrs["kernel_shape"].value = std::vector<int64_t>{1, 1};
  b.output("y");
  const Graph g = b.build();
  for (const isa::NpuConfig& config : {isa::NpuConfig{}, small_sram()}) {
    CompileResult r;
    EXPECT_LT(compile_and_compare(g, config, &r), kTol) << compile_summary(r);
    expect_free_transposes(r, {"to_nhwc", "to_nchw"}, {});
    // The only layout conversions: the graph's NCHW input into the first conv and the last conv's NHWC
    // output back to the graph's NCHW output; none around the LayerNorm.
    ASSERT_EQ(r.transposes.size(), 2u) << compile_summary(r);
    EXPECT_EQ(r.transposes[0].input, "x");
    EXPECT_EQ(r.transposes[1].output, "y");
  }
}

// --batch N: a pointwise conv over several images is one GEMM over all their pixels (backend/fusion/
// residency.h): its tiles are rows of pixels, not an image's rectangles, so they may span images and the
// weights that do not stay in the weight scratchpad stream once per tile of the batch rather than once
// per image's tile; the values are the reference's.
TEST(BatchFold, APointwiseConvOverSeveralImagesTilesRowsOfAllTheirPixelsAndMatchesTheReference) {
  GraphBuilder b;
  const int64_t images = 4, c = 64, hw = 7;
  b.input("x", {images, c, hw, hw});
  b.constant("w", {c, c, 1, 1});
  b.node("Conv", {"x", "w"}, {"y"}, "pw").attrs["kernel_shape"].value = std::vector<int64_t>{1, 1};
  b.output("y");
  const Graph g = b.build();
  CompileResult r;
  EXPECT_LT(compile_and_compare(g, small_sram(), &r), kTol);
  EXPECT_EQ(check_tokens(r.program), "");
  const LayerPlan* pw = nullptr;
  for (const LayerPlan& p : r.layers)
    if (p.name == "pw") pw = &p;
  ASSERT_NE(pw, nullptr);
  // The tile is rows of the GEMM over every image's pixels: taller than an image, one column wide.
  EXPECT_GT(pw->tile_oh, hw) << pw->mapping;
  EXPECT_EQ(pw->tile_ow, 1) << pw->mapping;
  EXPECT_EQ(pw->chosen.tile_m, pw->tile_m);  // --mapping-out writes it as a GEMM tile
}

// A stride-2 1x1 conv over several images (it reads every other pixel) is one tall image of all their
// output rows: the values are the reference's, and a tile may be taller than one image's output.
TEST(BatchFold, ASubsampledPointwiseConvOverSeveralImagesIsOneTallImageAndMatchesTheReference) {
  GraphBuilder b;
  const int64_t images = 4, c = 64, hw = 14;
  b.input("x", {images, c, hw, hw});
  b.constant("w", {c, c, 1, 1});
  Node& n = b.node("Conv", {"x", "w"}, {"y"}, "down");
  n.attrs["kernel_shape"].value = std::vector<int64_t>{1, 1};
  n.attrs["strides"].value = std::vector<int64_t>{2, 2};
  b.output("y");
  CompileResult r;
  EXPECT_LT(compile_and_compare(b.build(), small_sram(), &r), kTol);
  EXPECT_EQ(check_tokens(r.program), "");
  const LayerPlan* down = nullptr;
  for (const LayerPlan& p : r.layers)
    if (p.name == "down") down = &p;
  ASSERT_NE(down, nullptr);
  EXPECT_GT(down->tile_oh, hw / 2) << down->mapping;  // more rows than one image's output has
}

// The element-wise stream's third slot (Slots::ring): three slots of the tile in the bytes of the two when
// they hold three (each at a 64-byte boundary), taken in turn; never once a slot was taken.
TEST(ElementwiseSlots, TwoSlotsBytesHoldingThreeTilesBecomeARingOfThree) {
  backend::Slots s;
  s.addr[0] = 4096, s.addr[1] = 4096 + 1024, s.elems = 512;
  backend::Slots wide = s;
  EXPECT_FALSE(wide.ring(700));  // 3 x 704 bytes > 2048
  EXPECT_EQ(wide.count, 2);
  ASSERT_TRUE(s.ring(600));  // 3 x 640 bytes
  EXPECT_EQ(s.count, 3);
  std::vector<uint64_t> taken;
  for (int i = 0; i < 4; ++i) taken.push_back(s.take());
  EXPECT_EQ(taken, (std::vector<uint64_t>{4096, 4096 + 640, 4096 + 1280, 4096}));
  backend::Slots used;
  used.addr[0] = 0, used.addr[1] = 1024, used.elems = 512;
  used.take();
  EXPECT_FALSE(used.ring(64));
}

}  // namespace
}  // namespace npusim::compiler::testing
