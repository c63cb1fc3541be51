// Sibling matrix layers as one GEMM (compiler/backend/fusion/siblings.h): convs reading one input alike run
// as one job whose tiles each belong to one layer; the program computes exactly what the layers lowered apart
// compute (in program order and in random interleavings of the queues).
#include <gtest/gtest.h>

#include "compiler/backend/compile.h"
#include "compiler/backend/fusion/siblings.h"
#include "compiler/backend/mapping/mapping.h"
#include "compiler/passes/lowered.h"
#include "tests/compiler/backend/functional.h"

namespace npusim::compiler::testing {
namespace {

// An inception block's shape: three 1x1 convs with bias and Relu read x (24, 20 and 8 channels: none a
// multiple of the array's 16 or 32 columns), the first a graph output, the others read by a 3x3 conv each;
// and a 1x1 conv of another stride, which is no sibling.
Graph inception_like() {
  GraphBuilder b;
  b.input("x", {1, 40, 10, 12});
  const std::vector<std::pair<std::string, int64_t>> branches = {{"b1", 24}, {"b2", 20}, {"b3", 8}};
  uint32_t seed = 1;
  for (const auto& [name, m] : branches) {
    b.constant(name + "_w", {m, 40, 1, 1}, 0.3f, seed);
    b.constant(name + "_b", {m}, 0.3f, seed + 1);
    seed += 2;
    b.node("Conv", {"x", name + "_w", name + "_b"}, {name + "_c"}, name);
    b.node("Relu", {name + "_c"}, {name + "_r"}, name + "_relu");
  }
  for (const std::string name : {"b2", "b3"}) {
    b.constant(name + "_w2", {16, name == "b2" ? 20 : 8, 3, 3}, 0.2f, seed++);
    Node& n = b.node("Conv", {name + "_r", name + "_w2"}, {name + "_y"}, name + "_3x3");
    n.attrs["pads"].value = std::vector<int64_t>{1, 1, 1, 1};
  }
  b.constant("s_w", {8, 40, 1, 1}, 0.3f, seed++);
  Node& s = b.node("Conv", {"x", "s_w"}, {"s_y"}, "strided");
  s.attrs["strides"].value = std::vector<int64_t>{2, 2};
  b.output("b1_r").output("b2_y").output("b3_y").output("s_y");
  return b.build();
}

CompileResult compile_it(const Graph& g, const isa::NpuConfig& config, isa::DType precision, bool merge) {
  Graph lowered = g;
  lower(lowered);
  CompileOptions options;
  options.precision = precision;
  // The back end alone has no simulator to decide by: a mapping file's key decides.
  MappingOverrides m;
  m.layers["b1"].name = "b1";
  m.layers["b1"].merge_siblings = merge;
  options.mapping = &m;
  return compile(lowered, config, options);
}

TEST(Siblings, OnlyConvsReadingOneInputAlikeAreCandidatesAndTheFirstTakesThem) {
  Graph g = inception_like();
  lower(g);
  size_t first = g.nodes.size();
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (g.nodes[i].name == "b1") first = i;
  ASSERT_LT(first, g.nodes.size());
  std::vector<std::string> later;
  for (size_t k : backend::sibling_candidates(g, first)) later.push_back(g.nodes[k].name);
  EXPECT_EQ(later, (std::vector<std::string>{"b2", "b3"}));  // not the strided conv, not the 3x3 convs
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (i != first) {
      EXPECT_TRUE(backend::sibling_candidates(g, i).empty()) << g.nodes[i].name;
    }
  }
}

TEST(Siblings, ATileEndsWhereItsLayersChannelsEnd) {
  backend::MatrixJob j;
  j.segments = {{0, 24}, {32, 52}, {64, 72}};  // 24, 20 and 8 channels, each padded to 32
  j.n_align = 32;
  j.M = 96;
  EXPECT_EQ(j.tile_end(0, 16), 16);
  EXPECT_EQ(j.tile_end(16, 32), 24);
  EXPECT_EQ(j.tile_end(32, 64), 52);
  EXPECT_EQ(j.tile_end(64, 80), 72);
  EXPECT_EQ(j.tile_end(80, 96), 80);  // padding only: an empty tile
  EXPECT_EQ(backend::merged_alignment(j), 32);
  EXPECT_EQ(backend::merged_channels(j), 52);
}

TEST(Siblings, MergedConvsComputeWhatTheLayersApartCompute) {
  const Graph g = inception_like();
  for (const isa::NpuConfig& config : {isa::NpuConfig{}, small_sram()}) {
    for (const isa::DType precision : {isa::DType::kFp32, isa::DType::kFp16}) {
      SCOPED_TRACE(::testing::Message()
                   << static_cast<int>(precision) << " acc " << config.sram.accumulator.size_kib << " KiB");
      const CompileResult merged = compile_it(g, config, precision, true);
      const CompileResult apart = compile_it(g, config, precision, false);
      for (const std::string other : {"b2", "b3"}) {
        EXPECT_EQ(layer_named(merged, other).fused_into, "b1");
        EXPECT_EQ(layer_named(merged, other).instructions, 0);
        EXPECT_TRUE(layer_named(apart, other).fused_into.empty());
      }
      EXPECT_NE(layer_named(merged, "b1").mapping.find("3 sibling layers as one GEMM of 52 channels"),
                std::string::npos)
          << layer_named(merged, "b1").mapping;
      EXPECT_EQ(layer_named(merged, "b1").chosen.merge_siblings, std::optional<bool>(true));
      EXPECT_TRUE(layer_named(merged, "strided").fused_into.empty());
      const std::map<std::string, Tensor> in = {{"x", random_tensor({1, 40, 10, 12}, 2.0f, 7)}};
      const auto want = run_program(apart, config, in);
      for (const bool random_order : {false, true}) {
        RunOptions o;
        o.random_order = random_order;
        const auto got = run_program(merged, config, in, o);
        for (const std::string y : {"b1_r", "b2_y", "b3_y", "s_y"})
          EXPECT_TRUE(same_bits(got.at(y), want.at(y))) << y;
      }
      EXPECT_EQ(check_tokens(merged.program), "");
    }
  }
}

}  // namespace
}  // namespace npusim::compiler::testing
