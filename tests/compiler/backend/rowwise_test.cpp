// The row-wise Softmax / LayerNormalization / RMSNormalization kernel (compiler/backend/vector/rowwise.h):
// one layer per node, named as the node; its fp16/bf16 results exactly what the quantized reference
// (compiler/quant/emulate) predicts; within rounding of the FP32 interpreter and of the decomposed program.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "compiler/backend/compile.h"
#include "compiler/interp/interpreter.h"
#include "compiler/passes/lowered.h"
#include "compiler/quant/emulate.h"
#include "isa/timing/dram.h"
#include "tests/compiler/backend/functional.h"

namespace npusim::compiler::testing {
namespace {

// Tiny scratchpads: rows of 45 elements in tiles of a few dozen rows, the last one partial.
isa::NpuConfig tiny_sram() {
  isa::NpuConfig c;
  c.sram.input.size_kib = 4;
  c.sram.weight.size_kib = 8;
  c.sram.accumulator.size_kib = 8;
  return c;
}

// x [3, 29, 45] -> LayerNormalization (gamma, beta over the last axis) -> Softmax (last axis) -> y. 45 is
// not a multiple of the 32 lanes; 87 rows are not a multiple of any tile the scratchpads allow.
Graph norm_then_softmax(int64_t d = 45) {
  GraphBuilder b;
  b.input("x", {3, 29, d});
  b.constant("gamma", {d}, 1.0f, 5).constant("beta", {d}, 0.5f, 6);
  Node& ln = b.node("LayerNormalization", {"x", "gamma", "beta"}, {"n"}, "norm");
  ln.attrs["epsilon"].value = 1e-5f;
  b.node("Softmax", {"n"}, {"y"}, "attn/Softmax");
  b.output("y");
  return b.build();
}

struct Compiled {
  Graph lowered;
  CompileResult result;
  Tensor y;
};

Compiled compile_and_run(const Graph& model, const isa::NpuConfig& config, isa::DType precision, bool whole,
                         const Tensor& x) {
  Compiled r;
  r.lowered = model;
  PipelineOptions o;
  o.whole_row_limit = whole ? rowwise_row_limit(config) : 0;
  lower(r.lowered, o);
  CompileOptions co;
  co.precision = precision;
  r.result = compile(r.lowered, config, co);
  r.y = run_program(r.result, config, {{"x", x}}).at("y");
  return r;
}

int64_t differing(const Tensor& a, const Tensor& b) {
  int64_t n = 0;
  for (int64_t k = 0; k < a.size(); ++k) n += std::memcmp(&a.f[k], &b.f[k], sizeof(float)) != 0;
  return n;
}

TEST(Rowwise, SoftmaxAndLayerNormAreOneLayerEachNamedAsTheirNodes) {
  const isa::NpuConfig config = tiny_sram();
  const Compiled r = compile_and_run(norm_then_softmax(), config, isa::DType::kFp16, true,
                                     random_tensor({3, 29, 45}, 2.0f, 3));
  ASSERT_EQ(r.result.layers.size(), 2u) << compile_summary(r.result);
  EXPECT_EQ(r.result.layers[0].name, "norm");
  EXPECT_EQ(r.result.layers[1].name, "attn/Softmax");
  for (const LayerPlan& l : r.result.layers) {
    EXPECT_EQ(l.placement, Placement::kNpuVector) << l.name;
    EXPECT_NE(l.mapping.find("row-wise"), std::string::npos) << l.mapping;
    // 87 rows of 45 fp16 elements in three 1344-byte slots (672 elements): tiles of 14 rows, the last of 3.
    EXPECT_NE(l.mapping.find("7 tile(s) of up to 14 rows x 45 elements"), std::string::npos) << l.mapping;
  }
  EXPECT_TRUE(r.result.fallbacks.empty());
  EXPECT_EQ(check_tokens(r.result.program), "");
  // The roofline bound is the node's: its input, gamma, beta and output moved once at the DRAM's peak,
  // or its largest tensor over the lanes (docs/report.md, "Roofline").
  const double peak = isa::timing::dram_peak_bytes_per_cycle(config);
  const double x = 3 * 29 * 45, lanes = static_cast<double>(config.vector.lanes);
  const auto bound = [&](double elements) {
    return static_cast<int64_t>(std::ceil(std::max(x / lanes, elements * 2 / peak)));
  };
  EXPECT_EQ(r.result.layers[0].bound_cycles.value_or(-1), bound(2 * x + 2 * 45));
  EXPECT_EQ(r.result.layers[1].bound_cycles.value_or(-1), bound(2 * x));
}

TEST(Rowwise, Fp16AndBf16ResultsAreTheQuantizedReferencesExactly) {
  // The emulation (compiler/quant/emulate.cpp) is written from the kernel's contract, not from its code:
  // each VecOp in fp32, its result rounded to the format. Whole tiles and a partial last tile alike.
  const Graph g = norm_then_softmax();
  const Tensor x = random_tensor({3, 29, 45}, 2.0f, 12);
  for (const isa::NpuConfig& config : {isa::NpuConfig{}, tiny_sram()}) {
    for (auto [dt, p] : {std::pair{isa::DType::kFp16, quant::Precision::kFp16},
                         std::pair{isa::DType::kBf16, quant::Precision::kBf16}}) {
      const Compiled r = compile_and_run(g, config, dt, true, x);
      ASSERT_EQ(r.result.layers.size(), 2u);
      quant::PrecisionPlan plan;
      plan.model = p;
      EXPECT_EQ(differing(r.y, quant::emulate(r.lowered, plan, {{"x", x}}).at("y")), 0)
          << isa::kDTypeNames[static_cast<size_t>(dt)];
    }
  }
}

TEST(Rowwise, FusedAndDecomposedAgreeWithTheInterpreterWithinRounding) {
  // The kernel multiplies by a reciprocal per row where the decomposed nodes divide: the last bits may
  // differ, nothing more.
  const Graph g = norm_then_softmax();
  const Tensor x = random_tensor({3, 29, 45}, 2.0f, 11);
  const Tensor ref = interpret(g, {{"x", x}}).at("y");
  for (auto [p, tol] : {std::pair{isa::DType::kFp32, 1e-5}, std::pair{isa::DType::kFp16, 5e-3}}) {
    const Compiled fused = compile_and_run(g, tiny_sram(), p, true, x);
    const Compiled parts = compile_and_run(g, tiny_sram(), p, false, x);
    ASSERT_GT(parts.result.layers.size(), 10u);  // 9 + 5 primitive layers
    EXPECT_LT(max_rel_error({{"y", fused.y}}, {{"y", ref}}), tol);
    EXPECT_LT(max_rel_error({{"y", fused.y}}, {{"y", parts.y}}), tol);
  }
}

TEST(Rowwise, RandomInterleavingOfTheQueuesGivesTheSameBits) {
  const Graph g = norm_then_softmax();
  const Tensor x = random_tensor({3, 29, 45}, 2.0f, 13);
  const Compiled r = compile_and_run(g, tiny_sram(), isa::DType::kFp16, true, x);
  RunOptions o;
  o.random_order = true;
  o.seed = 5;
  EXPECT_EQ(differing(run_program(r.result, tiny_sram(), {{"x", x}}, o).at("y"), r.y), 0);
}

// x [3, 29, 45] -> RMSNorm as Llama exports it (x * (1 / sqrt(mean(x^2) + eps)) * w: lower() recognises
// one npu.RMSNormalization) -> Softmax -> y.
Graph rmsnorm_then_softmax() {
  GraphBuilder b;
  b.input("x", {3, 29, 45});
  b.constant("w", {45}, 1.0f, 5);
  b.constant("two", Tensor::scalar_float(2.0f)).constant("eps", Tensor::scalar_float(1e-5f));
  b.constant("one", Tensor::scalar_float(1.0f));
  b.node("Pow", {"x", "two"}, {"p"});
  b.node("ReduceMean", {"p"}, {"m"}).attrs["axes"].value = std::vector<int64_t>{-1};
  b.node("Add", {"m", "eps"}, {"a"});
  b.node("Sqrt", {"a"}, {"sd"});
  b.node("Div", {"one", "sd"}, {"r"});
  b.node("Mul", {"x", "r"}, {"n"});
  b.node("Mul", {"w", "n"}, {"h"}, "norm");
  b.node("Softmax", {"h"}, {"y"}, "attn/Softmax");
  b.output("y");
  return b.build();
}

TEST(Rowwise, RmsNormIsOneLayerWhoseFp16AndBf16ResultsAreTheQuantizedReferencesExactly) {
  const Graph g = rmsnorm_then_softmax();
  const Tensor x = random_tensor({3, 29, 45}, 2.0f, 14);
  const Compiled r = compile_and_run(g, tiny_sram(), isa::DType::kFp16, true, x);
  ASSERT_EQ(r.result.layers.size(), 2u) << compile_summary(r.result);
  EXPECT_EQ(r.result.layers[0].name, "norm");
  EXPECT_EQ(r.result.layers[0].placement, Placement::kNpuVector);
  EXPECT_NE(
      r.result.layers[0].mapping.find("row-wise rmsnorm (mul, reduce_mean, add eps, rsqrt, mul, mul gamma)"),
      std::string::npos)
      << r.result.layers[0].mapping;
  EXPECT_NE(
      r.result.layers[0].mapping.find("7 tile(s) of up to 14 rows x 45 elements loaded once, 6 VEC steps"),
      std::string::npos)
      << r.result.layers[0].mapping;
  EXPECT_TRUE(r.result.fallbacks.empty());
  EXPECT_EQ(check_tokens(r.result.program), "");
  for (const isa::NpuConfig& config : {isa::NpuConfig{}, tiny_sram()}) {
    for (auto [dt, p] : {std::pair{isa::DType::kFp16, quant::Precision::kFp16},
                         std::pair{isa::DType::kBf16, quant::Precision::kBf16}}) {
      const Compiled c = compile_and_run(g, config, dt, true, x);
      quant::PrecisionPlan plan;
      plan.model = p;
      EXPECT_EQ(differing(c.y, quant::emulate(c.lowered, plan, {{"x", x}}).at("y")), 0)
          << isa::kDTypeNames[static_cast<size_t>(dt)];
    }
  }
  // fp32: the interpreter on the exported chain, and the decomposed pieces, within rounding.
  const Tensor ref = interpret(g, {{"x", x}}).at("y");
  const Compiled fused = compile_and_run(g, tiny_sram(), isa::DType::kFp32, true, x);
  const Compiled parts = compile_and_run(g, tiny_sram(), isa::DType::kFp32, false, x);
  EXPECT_GT(parts.result.layers.size(), 8u);  // 6 + 5 primitive layers
  EXPECT_LT(max_rel_error({{"y", fused.y}}, {{"y", ref}}), 1e-5);
  EXPECT_LT(max_rel_error({{"y", parts.y}}, {{"y", ref}}), 1e-5);
}

TEST(Rowwise, RowsLongerThanTheLimitAndOtherAxesStayDecomposed) {
  const isa::NpuConfig config = tiny_sram();
  // tiny_sram: an fp32 row must fit one of the three slots of the 4 KiB input buffer (1344 bytes, 64-byte
  // aligned: 336 elements) and, with scale and bias, the 8 KiB weight buffer (a third of it: 680).
  EXPECT_EQ(rowwise_row_limit(config), 1344 / 4);
  Graph long_rows = norm_then_softmax(rowwise_row_limit(config) + 1);
  PipelineOptions o;
  o.whole_row_limit = rowwise_row_limit(config);
  lower(long_rows, o);
  for (const Node& n : long_rows.nodes) EXPECT_NE(n.op_type, "Softmax");
  for (const Node& n : long_rows.nodes) EXPECT_NE(n.op_type, "LayerNormalization");
  // Each piece's layer says why its node was decomposed.
  const CompileResult r = compile(long_rows, config, {});
  ASSERT_GT(r.layers.size(), 10u);
  for (const LayerPlan& l : r.layers)
    EXPECT_NE(l.mapping.find("decomposed: a row of 337 elements is longer than the 336"), std::string::npos)
        << l.name << ": " << l.mapping;

  GraphBuilder b;
  b.input("x", {2, 7, 5});
  Node& s = b.node("Softmax", {"x"}, {"y"}, "sm");
  s.attrs["axis"].value = int64_t{1};
  b.output("y");
  Graph axis1 = b.build();
  EXPECT_FALSE(rowwise_form(axis1, axis1.nodes[0]));
  lower(axis1, o);
  EXPECT_GT(axis1.nodes.size(), 1u);
}

}  // namespace
}  // namespace npusim::compiler::testing
