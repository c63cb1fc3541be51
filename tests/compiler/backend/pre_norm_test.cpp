// A LayerNorm applied in the loads of the GEMM after it (compiler/backend/fusion/pre_norm.h): ConvNeXt's
// `LayerNorm (over the channels) -> expand MatMul` runs the LayerNorm's steps on each input tile the MatMul
// loads, never writes the LayerNorm's output, and computes bit for bit what the two layers lowered one by
// one compute (fp32, fp16, int8); a LayerNorm read by a second node, or whose rows the residency planner
// keeps on chip, stays a layer of its own.
#include <gtest/gtest.h>

#include "compiler/backend/compile.h"
#include "compiler/passes/lowered.h"
#include "compiler/quant/accuracy.h"
#include "tests/compiler/backend/functional.h"

namespace npusim::compiler::testing {
namespace {

// x [1, rows, C] -> MatMul C -> C (int8: the LayerNorm reads codes, as ConvNeXt's reads its depthwise conv's)
// -> LayerNorm over C -> MatMul C -> 2C (+ bias) -> y; `tap`: the LayerNorm's output is a graph output too.
Graph norm_then_gemm(int64_t rows, int64_t C, bool tap = false) {
  GraphBuilder b;
  b.input("x", {1, rows, C});
  b.constant("g", {C}, 0.5f, 1).constant("be", {C}, 0.5f, 2);
  b.constant("w0", {C, C}, 0.5f, 5);
  b.constant("w", {C, 2 * C}, 0.5f, 3).constant("bias", {2 * C}, 0.5f, 4);
  b.node("MatMul", {"x", "w0"}, {"a"}, "pre");
  b.node("LayerNormalization", {"a", "g", "be"}, {"n"}, "ln").attrs["epsilon"].value = 1e-6f;
  b.node("MatMul", {"n", "w"}, {"h"}, "fc");
  b.node("Add", {"h", "bias"}, {"y"}, "fc_bias");
  b.output("y");
  if (tap) b.output("n");
  return b.build();
}

struct NormRun {
  Graph lowered;
  quant::PrecisionPlan plan;
  CompileResult result;
  Tensor out;
};

// Compiled with the LayerNorm as one row-wise layer and run on the datapath; `fusion`: CompileOptions::
// keep_on_chip (off: every layer alone, its output through DRAM).
void compile_run(const Graph& g, const isa::NpuConfig& config, isa::DType precision, bool fusion,
                 NormRun* r) {
  r->lowered = g;
  PipelineOptions whole;
  whole.whole_row_limit = rowwise_row_limit(config);
  lower(r->lowered, whole);
  CompileOptions o;
  o.keep_on_chip = fusion;
  if (precision == isa::DType::kInt8) {
    quant::PlanRequest req;
    req.spec.model = quant::Precision::kInt8;
    req.calibration_count = 2;
    r->plan = quant::build_plan(r->lowered, req, &g);
    o.plan = &r->plan;
  } else {
    o.precision = precision;
  }
  r->result = compile(r->lowered, config, o);
  ASSERT_EQ(check_tokens(r->result.program), "");
  const std::map<std::string, Tensor> in{{"x", random_tensor(g.value("x").shape, 2.0f, 7)}};
  r->out = run_program(r->result, config, in).at("y");
}

// A small input scratchpad: the LayerNorm's rows are more than the residency planner keeps on chip.
isa::NpuConfig small_input() {
  isa::NpuConfig config;
  config.sram.input.size_kib = 64;
  return config;
}

TEST(PreNorm, TheLayerNormRunsInTheGemmsLoadsBitForBit) {
  const Graph g = norm_then_gemm(1500, 96);
  const isa::NpuConfig config = small_input();
  for (const isa::DType precision : {isa::DType::kFp32, isa::DType::kFp16, isa::DType::kInt8}) {
    SCOPED_TRACE(isa::kDTypeNames[static_cast<size_t>(precision)]);
    NormRun fused, apart;
    compile_run(g, config, precision, true, &fused);
    compile_run(g, config, precision, false, &apart);
    const LayerPlan& ln = layer_named(fused.result, "ln");
    EXPECT_EQ(ln.fused_into, "fc");
    EXPECT_EQ(ln.fusion_group, "pre_norm:fc");
    EXPECT_TRUE(layer_named(apart.result, "ln").fused_into.empty());
    // The GEMM's reduction chunk is the whole row, and nothing of the LayerNorm's layer is emitted.
    EXPECT_EQ(layer_named(fused.result, "fc").tile_k, 96);
    for (const isa::Instruction& ins : fused.result.program.instructions)
      EXPECT_NE(fused.result.layers.at(ins.layer()).name, "ln");
    EXPECT_TRUE(same_bits(fused.out, apart.out));
  }
}

TEST(PreNorm, NotForASecondReaderOrRowsKeptOnChip) {
  NormRun r;
  // The LayerNorm's output is a graph output too.
  compile_run(norm_then_gemm(1500, 96, true), small_input(), isa::DType::kFp16, true, &r);
  EXPECT_TRUE(layer_named(r.result, "ln").fused_into.empty());
  // 64 rows fit the input scratchpad: the residency planner leaves them on chip for the GEMM instead.
  compile_run(norm_then_gemm(64, 96), isa::NpuConfig{}, isa::DType::kFp16, true, &r);
  EXPECT_TRUE(layer_named(r.result, "ln").fused_into.empty());
  EXPECT_EQ(layer_named(r.result, "fc").on_chip_input, "n");
}

}  // namespace
}  // namespace npusim::compiler::testing
