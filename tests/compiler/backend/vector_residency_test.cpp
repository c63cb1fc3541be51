// Vector layers' values on chip (compiler/backend/fusion/vector_residency.h): an element-wise layer's output
// read by the LayerNorm after it (a transformer's residual Add -> LayerNorm) is written into the input
// scratchpad and read there in place. The program computes exactly what the layer-by-layer one does (in
// program order and in random interleavings of the queues, so the tokens order the in-place reads after the
// writes); the value is never stored when the LayerNorm is its only reader, stored as well when it has
// others. And a LayerNorm's rows with other readers than the GEMM after it (residency.h's LayerNorm rows,
// stored as well).
#include <gtest/gtest.h>

#include <algorithm>

#include "compiler/backend/compile.h"
#include "compiler/interp/interpreter.h"
#include "compiler/passes/lowered.h"
#include "tests/compiler/backend/functional.h"

namespace npusim::compiler::testing {
namespace {

bool never_in_dram(const CompileResult& r, const std::string& value) {
  return std::any_of(r.on_chip.begin(), r.on_chip.end(),
                     [&](const HostTensor& t) { return t.name == value; });
}

int stores_of(const CompileResult& r, const std::string& layer) {
  int n = 0;
  for (const isa::Instruction& ins : r.program.instructions)
    n += ins.opcode == isa::Opcode::kStore && r.layers.at(ins.layer()).name == layer ? 1 : 0;
  return n;
}

// The program with values on chip computes exactly what the stored one does, in program order and in random
// interleavings of the queues (the tokens order every read on chip after its write); the stored one is the
// model's within `tolerance`.
void expect_same_bits(const CompileResult& kept, const CompileResult& stored, const Graph& model,
                      const isa::NpuConfig& config, const std::map<std::string, Tensor>& in,
                      double tolerance) {
  EXPECT_EQ(check_tokens(kept.program), "");
  const auto want = run_program(stored, config, in);
  EXPECT_EQ(max_rel_error(run_program(kept, config, in), want), 0.0);
  for (uint32_t seed : {1u, 2u, 3u}) {
    RunOptions shuffled;
    shuffled.random_order = true;
    shuffled.seed = seed;
    EXPECT_EQ(max_rel_error(run_program(kept, config, in, shuffled), want), 0.0) << "interleaving " << seed;
  }
  EXPECT_LT(max_rel_error(want, interpret(model, in)), tolerance);
}

// s = x + z -> LayerNorm -> y; with `second`, s is also read by an Add after the LayerNorm (t = y + s).
Graph residual_norm(bool second) {
  GraphBuilder b;
  b.input("x", {2, 48, 96}).input("z", {2, 48, 96});
  b.constant("g", {96}, 0.5f, 1).constant("be", {96}, 0.5f, 2);
  b.node("Add", {"x", "z"}, {"s"}, "res");
  b.node("LayerNormalization", {"s", "g", "be"}, {"y"}, "ln").attrs["epsilon"].value = 1e-5f;
  if (second) {
    b.node("Add", {"y", "s"}, {"t"}, "after");
    b.output("t");
  } else {
    b.output("y");
  }
  return b.build();
}

TEST(VectorResidency, AResidualAddsRowsStayOnChipForTheLayerNormAfterItAndComputeTheSameBits) {
  for (const bool second : {false, true}) {
    const Graph g = residual_norm(second);
    for (const isa::DType precision : {isa::DType::kFp32, isa::DType::kFp16}) {
      const isa::NpuConfig config;
      Graph lowered = g;
      PipelineOptions whole;  // the LayerNorm as one row-wise layer
      whole.whole_row_limit = rowwise_row_limit(config);
      lower(lowered, whole);
      CompileOptions on, off;
      on.precision = off.precision = precision;
      off.keep_on_chip = false;
      const CompileResult kept = compile(lowered, config, on), stored = compile(lowered, config, off);
      const int64_t bytes = 2 * 48 * 96 * isa::dtype_bytes(precision);
      EXPECT_EQ(layer_named(kept, "ln").on_chip_input, "s") << second;
      EXPECT_EQ(layer_named(kept, "ln").on_chip_bytes_saved, (second ? 1 : 2) * bytes) << second;
      EXPECT_EQ(never_in_dram(kept, "s"), !second);
      EXPECT_EQ(stores_of(kept, "res") == 0, !second);
      EXPECT_GT(stores_of(stored, "res"), 0);
      EXPECT_TRUE(layer_named(stored, "ln").on_chip_input.empty());
      expect_same_bits(
          kept, stored, g, config,
          {{"x", random_tensor({2, 48, 96}, 1.0f, 41)}, {"z", random_tensor({2, 48, 96}, 1.0f, 42)}},
          precision == isa::DType::kFp32 ? 1e-5 : 2e-2);
    }
  }
}

// A post-norm LayerNorm (BERT's): its rows read by the FFN's first MatMul and by its residual Add. The
// LayerNorm writes them where the MatMul reads them in place and stores them for the Add as well.
TEST(VectorResidency, APostNormLayerNormsRowsStayOnChipForItsMatMulAndAreStoredForItsResidual) {
  GraphBuilder b;
  b.input("x", {1, 64, 96});
  b.constant("g", {96}, 0.5f, 1).constant("be", {96}, 0.5f, 2).constant("w", {96, 128}, 0.5f, 3);
  b.constant("w2", {128, 96}, 0.5f, 4);
  b.node("LayerNormalization", {"x", "g", "be"}, {"n"}, "ln").attrs["epsilon"].value = 1e-5f;
  b.node("MatMul", {"n", "w"}, {"m"}, "fc");
  b.node("MatMul", {"m", "w2"}, {"o"}, "fc2");
  b.node("Add", {"o", "n"}, {"y"}, "res");
  b.output("y");
  const Graph g = b.build();
  for (const isa::DType precision : {isa::DType::kFp32, isa::DType::kFp16}) {
    const isa::NpuConfig config;
    Graph lowered = g;
    PipelineOptions whole;
    whole.whole_row_limit = rowwise_row_limit(config);
    lower(lowered, whole);
    CompileOptions on, off;
    on.precision = off.precision = precision;
    off.keep_on_chip = false;
    const CompileResult kept = compile(lowered, config, on), stored = compile(lowered, config, off);
    EXPECT_EQ(layer_named(kept, "fc").on_chip_input, "n");
    EXPECT_EQ(layer_named(kept, "fc").on_chip_bytes_saved, 64 * 96 * isa::dtype_bytes(precision));
    EXPECT_FALSE(never_in_dram(kept, "n"));
    EXPECT_GT(stores_of(kept, "ln"), 0);
    EXPECT_TRUE(layer_named(stored, "fc").on_chip_input.empty());
    expect_same_bits(kept, stored, g, config, {{"x", random_tensor({1, 64, 96}, 1.0f, 43)}},
                     precision == isa::DType::kFp32 ? 1e-5 : 2e-2);
  }
}

// A mapping file's on_chip=false for the Add keeps its output in DRAM.
TEST(VectorResidency, AMappingFileThatSaysOnChipFalseKeepsTheRowsInDram) {
  Graph lowered = residual_norm(false);
  const isa::NpuConfig config;
  PipelineOptions whole;
  whole.whole_row_limit = rowwise_row_limit(config);
  lower(lowered, whole);
  MappingOverrides m;
  m.layers["res"].name = "res";
  m.layers["res"].on_chip = false;
  CompileOptions o;
  o.mapping = &m;
  const CompileResult r = compile(lowered, config, o);
  EXPECT_TRUE(layer_named(r, "ln").on_chip_input.empty());
  EXPECT_GT(stores_of(r, "res"), 0);
}

}  // namespace
}  // namespace npusim::compiler::testing
