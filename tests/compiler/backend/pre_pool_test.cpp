// A max pool of stride 1 done on its pointwise conv's tiles (compiler/backend/fusion/pre_pool.h): each
// window the conv's walk loads is pooled by a max_pool 1 x kw in place and binary maxes of rows, the last
// writing the conv's tile, when the vector unit takes fewer cycles so; the program computes exactly what the
// pool lowered apart computes (in program order and in random interleavings of the queues).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "compiler/backend/compile.h"
#include "compiler/backend/mapping/mapping.h"
#include "compiler/passes/lowered.h"
#include "tests/compiler/backend/functional.h"

namespace npusim::compiler::testing {
namespace {

// GoogLeNet's branch 4: a padded 3x3 max pool of stride 1, read only by a 1x1 conv with bias.
Graph pool_then_pointwise() {
  GraphBuilder b;
  b.input("x", {1, 24, 13, 11});
  Node& p = b.node("MaxPool", {"x"}, {"p"}, "pool");
  p.attrs["kernel_shape"].value = std::vector<int64_t>{3, 3};
  p.attrs["pads"].value = std::vector<int64_t>{1, 1, 1, 1};
  b.constant("w", {16, 24, 1, 1}, 0.4f, 3).constant("bias", {16}, 0.3f, 4);
  b.node("Conv", {"p", "w", "bias"}, {"y"}, "conv");
  b.output("y");
  return b.build();
}

// `whole`: the conv's tiles imposed as the whole map (else its rows one by one: the back end alone has no
// simulator to choose tiles by).
CompileResult compile_it(const Graph& g, const isa::NpuConfig& config, isa::DType precision, bool fusion,
                         bool whole) {
  Graph lowered = g;
  lower(lowered);
  CompileOptions options;
  options.precision = precision;
  options.keep_on_chip = fusion;
  MappingOverrides m;
  m.layers["conv"].name = "conv";
  m.layers["conv"].tile_oh = 13, m.layers["conv"].tile_ow = 11;
  if (whole) options.mapping = &m;
  return compile(lowered, config, options);
}

// The conv's VECs of op `op`.
int64_t vecs_of(const CompileResult& r, isa::VecOp op) {
  return std::count_if(r.program.instructions.begin(), r.program.instructions.end(), [&](const auto& ins) {
    return ins.opcode == isa::Opcode::kVec && r.layers.at(ins.layer()).name == "conv" &&
           static_cast<isa::VecOp>(ins.get(isa::Field::kVop)) == op;
  });
}

TEST(PrePool, TheConvsWindowsArePooledByRowsThenColumnsAndComputeWhatThePoolApartComputes) {
  const Graph g = pool_then_pointwise();
  // Ties everywhere: values on a coarse grid, a third of them zeros of either sign.
  Tensor x = random_tensor({1, 24, 13, 11}, 2.0f, 7);
  for (size_t i = 0; i < x.f.size(); ++i) {
    x.f[i] = std::round(x.f[i] * 2.0f) / 2.0f;
    if (i % 3 == 0) x.f[i] = i % 2 ? -0.0f : 0.0f;
  }
  const std::map<std::string, Tensor> in = {{"x", x}};
  int64_t separable = 0;
  for (const auto& [config, whole] : {std::pair{isa::NpuConfig{}, false}, std::pair{isa::NpuConfig{}, true},
                                      std::pair{small_sram(), false}}) {
    for (const isa::DType precision : {isa::DType::kFp32, isa::DType::kFp16}) {
      SCOPED_TRACE(::testing::Message() << static_cast<int>(precision) << " input "
                                        << config.sram.input.size_kib << " KiB, whole map " << whole);
      const CompileResult fused = compile_it(g, config, precision, true, whole);
      const CompileResult apart = compile_it(g, config, precision, false, whole);
      EXPECT_EQ(layer_named(fused, "pool").fused_into, "conv");
      EXPECT_EQ(layer_named(fused, "pool").instructions, 0);
      EXPECT_TRUE(layer_named(apart, "pool").fused_into.empty());
      // Each window: one max_pool 3 x 3, or one max_pool 1 x 3 and two maxes of rows one apart where the
      // vector unit takes fewer cycles so (windows of several rows: here those of the whole map).
      int64_t rows_then_columns = 0, whole = 0;
      for (const isa::Instruction& ins : fused.program.instructions) {
        if (ins.opcode == isa::Opcode::kVec && fused.layers.at(ins.layer()).name == "conv" &&
            static_cast<isa::VecOp>(ins.get(isa::Field::kVop)) == isa::VecOp::kMaxPool) {
          EXPECT_EQ(ins.get(isa::Field::kWinW), 3);
          ++(ins.get(isa::Field::kWinH) == 1 ? rows_then_columns : whole);
        }
      }
      EXPECT_GT(rows_then_columns + whole, 0);
      EXPECT_EQ(vecs_of(fused, isa::VecOp::kMax), 2 * rows_then_columns);
      separable += rows_then_columns;
      const auto want = run_program(apart, config, in);
      for (const bool random_order : {false, true}) {
        RunOptions o;
        o.random_order = random_order;
        EXPECT_TRUE(same_bits(run_program(fused, config, in, o).at("y"), want.at("y")));
      }
      EXPECT_EQ(check_tokens(fused.program), "");
    }
  }
  EXPECT_GT(separable, 0);  // the whole map's windows
}

TEST(PrePool, Int8WindowsOfFewRowsArePooledByColumnsThenRowsAndComputeWhatThePoolApartComputes) {
  const Graph g = pool_then_pointwise();
  // Tiles of 2 x 11 output pixels: windows of 4 x 13, wide and short.
  MappingOverrides fused_map;
  fused_map.layers["conv"].name = "conv";
  fused_map.layers["conv"].tile_oh = 2, fused_map.layers["conv"].tile_ow = 11;
  MappingOverrides apart_map = fused_map;
  apart_map.layers["pool"].name = "pool";
  apart_map.layers["pool"].tile_elems = 1024;  // a vector tile: the pool's own lowering
  Compiled fused, apart;
  compile_and_run(g, isa::NpuConfig{}, isa::DType::kInt8, fused_map, &fused);
  compile_and_run(g, isa::NpuConfig{}, isa::DType::kInt8, apart_map, &apart);
  EXPECT_EQ(layer_named(fused.result, "pool").fused_into, "conv");
  EXPECT_TRUE(layer_named(apart.result, "pool").fused_into.empty());
  // The conv's VECs of each window in a row: two maxes of whole rows, then the max_pool 1 x 3.
  std::vector<isa::VecOp> ops;
  for (const isa::Instruction& ins : fused.result.program.instructions) {
    if (ins.opcode != isa::Opcode::kVec || fused.result.layers.at(ins.layer()).name != "conv") continue;
    const auto op = static_cast<isa::VecOp>(ins.get(isa::Field::kVop));
    if (op == isa::VecOp::kMaxPool) {
      EXPECT_EQ(ins.get(isa::Field::kWinH), 1);
      EXPECT_EQ(ins.get(isa::Field::kD1), 13);
      ASSERT_GE(ops.size(), 2u);
      EXPECT_EQ(ops[ops.size() - 1], isa::VecOp::kMax);
      EXPECT_EQ(ops[ops.size() - 2], isa::VecOp::kMax);
    }
    ops.push_back(op);
  }
  EXPECT_EQ(std::count(ops.begin(), ops.end(), isa::VecOp::kMaxPool), 7);  // 13 rows in 7 tiles
  EXPECT_TRUE(same_bits(fused.out, apart.out));
  EXPECT_EQ(check_tokens(fused.result.program), "");
}

}  // namespace
}  // namespace npusim::compiler::testing
