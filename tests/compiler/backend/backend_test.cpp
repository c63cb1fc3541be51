// Back-end tests. Functional: every compiled program, run on the datapath, must match the FP32
// reference interpreter within 1e-4 (relative to the output's scale). Structural: tokens balance and
// never deadlock, a random interleaving of the queues that respects only the tokens computes the same
// numbers (so the tokens capture every hazard), errors name the layer, the search is fast.
#include <gtest/gtest.h>

#include <chrono>

#include "compiler/backend/compile.h"
#include "compiler/import/import.h"
#include "compiler/passes/lowered.h"
#include "tests/compiler/backend/functional.h"

namespace npusim::compiler::testing {
namespace {

constexpr double kTol = 1e-4;

isa::NpuConfig small_sram() {
  isa::NpuConfig c;
  c.systolic_array.rows = 8;
  c.systolic_array.cols = 8;
  c.sram.input.size_kib = 16;
  c.sram.weight.size_kib = 8;
  c.sram.accumulator.size_kib = 8;
  return c;
}

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
  for (const LayerPlan& l : r.layers) EXPECT_NE(l.op, "Relu") << compile_summary(r);  // fused into the epilogue
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
    EXPECT_LT(compile_and_compare(g, isa::NpuConfig{}, &r), kTol) << m << "x" << k << "x" << n << compile_summary(r);
    EXPECT_LT(compile_and_compare(g, small_sram(), &r), kTol) << m << "x" << k << "x" << n << compile_summary(r);
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

TEST(Errors, TileThatCannotFitNamesLayerAndSram) {
  const Graph g = conv_graph(ConvCase{"big", 1, 64, 8, 8, 64, 3, 1, 1, 1, 1, false});
  isa::NpuConfig c;
  c.sram.input.size_kib = 1;
  c.sram.weight.size_kib = 1;
  c.sram.accumulator.size_kib = 1;
  Graph lowered = g;
  lower(lowered);
  // 1 KiB still fits a 1-channel tile; shrink the weight buffer below one 3x3 tap pair.
  try {
    isa::NpuConfig tiny = c;
    tiny.sram.weight.size_kib = 0;
    compile(lowered, tiny);
    FAIL() << "expected CompileError";
  } catch (const CompileError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("y_node"), std::string::npos) << m;
    EXPECT_NE(m.find("sram.weight"), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace npusim::compiler::testing
