// GEMM tiles whose sums take one accumulator slot instead of a ping-pong pair (Tiling::one_side): where the
// two sides of a tile overflow the accumulator, one side holds it, the next tile's MATMULs waiting for this
// tile's epilogue and store. A tile of every row then loads each weight once, where tiles of half the rows
// load them twice, and computes bit for bit what those compute (fp32, fp16 and int8: a MATMUL adds its
// products onto the sums in the order of the reduction, whatever the tile); the tokens stay sound in any
// interleaving of the queues; and without a timer the closed form never prefers one side to a tiling with
// two.
#include <gtest/gtest.h>

#include <string>

#include "compiler/backend/compile.h"
#include "compiler/interp/interpreter.h"
#include "tests/compiler/backend/functional.h"

namespace npusim::compiler::testing {
namespace {

constexpr int64_t kRows = 24, kK = 64, kN = 96;

// x [1, 24, 64] x w [64, 96] + b, Relu -> y, in tiles of 48 columns. On small_sram() (8 KiB accumulator)
// the sums of all 24 rows x 48 columns (4.5 KiB, fp32 or int32) fit once but not twice.
Graph model() {
  GraphBuilder b;
  b.input("x", {1, kRows, kK});
  b.constant("w", {kK, kN}, 0.5f, 3).constant("b", {kN}, 0.5f, 4);
  b.node("MatMul", {"x", "w"}, {"m"}, "mm");
  b.node("Add", {"m", "b"}, {"a"}, "bias");
  b.node("Relu", {"a"}, {"y"}, "relu");
  b.output("y");
  return b.build();
}

MappingOverrides tile(int64_t rows) {
  MappingOverrides m;
  LayerMapping e;
  e.name = "mm";
  e.tile_m = rows;
  e.tile_k = 16;
  e.tile_n = kN / 2;
  e.loop_order = LoopOrder::kSpatialOuter;
  e.where[""] = "m.yaml:1:1";
  m.layers["mm"] = e;
  return m;
}

bool one_sided(const CompileResult& r) {
  return layer_named(r, "mm").loop_order.find("one accumulator side") != std::string::npos;
}

TEST(OneSide, ATileOfEveryRowInOneSideLoadsEachWeightOnceAndComputesWhatTwoSidedTilesCompute) {
  const isa::NpuConfig config = small_sram();
  const Graph g = model();
  for (const isa::DType p : {isa::DType::kFp32, isa::DType::kFp16, isa::DType::kInt8}) {
    const std::string name(isa::kDTypeNames[static_cast<size_t>(p)]);
    Compiled whole, half;
    compile_and_run(g, config, p, tile(kRows), &whole);
    compile_and_run(g, config, p, tile(kRows / 2), &half);
    EXPECT_TRUE(one_sided(whole.result)) << name << ": " << layer_named(whole.result, "mm").loop_order;
    EXPECT_FALSE(one_sided(half.result)) << name;
    const int64_t weights = kK * kN * (p == isa::DType::kInt8 ? 1 : isa::dtype_bytes(p));
    EXPECT_EQ(weight_bytes_loaded(whole.result, "mm"), weights) << name;
    EXPECT_EQ(weight_bytes_loaded(half.result, "mm"), 2 * weights) << name;
    EXPECT_TRUE(same_bits(whole.out, half.out)) << name;
    EXPECT_EQ(check_tokens(whole.result.program), "") << name;
    if (p == isa::DType::kFp32) {
      const std::map<std::string, Tensor> ref =
          interpret(g, {{"x", random_tensor(g.value("x").shape, 2.0f, 7)}});
      EXPECT_LT(max_rel_error({{"y", whole.out}}, ref), 1e-5);
    }
  }
}

TEST(OneSide, TheOneSlotIsReusedOnlyAfterTheEpilogueInEveryInterleaving) {
  // Two output-column tiles share the one slot: in a random interleaving that respects only queue order
  // and tokens, a MATMUL overwriting sums the epilogue has not stored would change the output.
  const isa::NpuConfig config = small_sram();
  const Graph g = model();
  const MappingOverrides m = tile(kRows);
  CompileResult r;
  for (uint32_t seed = 1; seed <= 4; ++seed) {
    RunOptions o;
    o.random_order = true;
    o.seed = seed;
    CompileOptions co;
    co.mapping = &m;
    EXPECT_LT(compile_and_compare(g, config, &r, o, co), 1e-5) << seed;
    EXPECT_TRUE(one_sided(r));
  }
}

TEST(OneSide, WithoutATimerTheClosedFormKeepsTwoSidesWhereTheyFit) {
  Compiled c;
  compile_and_run(model(), small_sram(), isa::DType::kFp32, MappingOverrides{}, &c);
  EXPECT_FALSE(one_sided(c.result)) << layer_named(c.result, "mm").loop_order;
}

}  // namespace
}  // namespace npusim::compiler::testing
