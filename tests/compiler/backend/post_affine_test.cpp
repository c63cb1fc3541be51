// Element-wise layers done by the layer before them: an affine map after a conv's activation applied in the
// conv's epilogue (compiler/backend/fusion/post_affine.h: the conv's STOREs carry the map's VECs and write
// the map's output), and a squeeze-and-excitation block's residual Add, y = x + x * s, in its Mul's tile loop
// (fusion/scaled_residual.h). The fused layer emits nothing, the value between them is written nowhere, and
// the program computes exactly what the layers lowered apart compute (in program order and in random
// interleavings of the queues).
#include <gtest/gtest.h>

#include <algorithm>

#include "compiler/backend/compile.h"
#include "compiler/passes/lowered.h"
#include "tests/compiler/backend/functional.h"

namespace npusim::compiler::testing {
namespace {

// Conv + HardSwish, then the map y = h * s + t (a scalar or per-channel Mul and Add), then a padded 3x3 conv
// (an unpadded one would absorb the map); `h_out`: the activation's output is a graph output too.
Graph affine_after_conv(bool per_channel, bool h_out = false) {
  GraphBuilder b;
  b.input("x", {1, 8, 12, 10});
  b.constant("w", {16, 8, 1, 1}, 0.5f, 1).constant("bias", {16}, 0.5f, 2);
  b.node("Conv", {"x", "w", "bias"}, {"c"}, "conv");
  b.node("HardSwish", {"c"}, {"h"}, "hswish");
  const Shape p = per_channel ? Shape{1, 16, 1, 1} : Shape{1};
  b.constant("s", p, 0.5f, 3).constant("t", p, 0.5f, 4);
  b.node("Mul", {"h", "s"}, {"m"}, "scale");
  b.node("Add", {"m", "t"}, {"a"}, "shift");
  b.constant("w2", {4, 16, 3, 3}, 0.3f, 5);
  Node& n = b.node("Conv", {"a", "w2"}, {"y"}, "conv2");
  n.attrs["pads"].value = std::vector<int64_t>{1, 1, 1, 1};
  b.output("y");
  if (h_out) b.output("h");
  return b.build();
}

// x = Conv(in); s = HardSigmoid(Conv(Relu(Conv(GlobalAveragePool(x))))); y = x + x * s (or x * s + x), then a
// padded conv.
Graph se_residual(bool product_first) {
  GraphBuilder b;
  b.input("in", {1, 8, 12, 10});
  b.constant("w0", {16, 8, 1, 1}, 0.5f, 1);
  b.node("Conv", {"in", "w0"}, {"x"}, "conv0");
  b.node("GlobalAveragePool", {"x"}, {"p"}, "pool");
  b.constant("w1", {4, 16, 1, 1}, 0.5f, 2).constant("w2", {16, 4, 1, 1}, 0.5f, 3);
  b.node("Conv", {"p", "w1"}, {"r0"}, "reduce");
  b.node("Relu", {"r0"}, {"r"}, "relu");
  b.node("Conv", {"r", "w2"}, {"e"}, "expand");
  b.node("HardSigmoid", {"e"}, {"s"}, "gate");
  b.node("Mul", {"x", "s"}, {"m"}, "scale");
  b.node("Add", product_first ? std::vector<std::string>{"m", "x"} : std::vector<std::string>{"x", "m"},
         {"a"}, "residual");
  b.constant("w3", {4, 16, 3, 3}, 0.3f, 5);
  Node& n = b.node("Conv", {"a", "w3"}, {"y"}, "conv1");
  n.attrs["pads"].value = std::vector<int64_t>{1, 1, 1, 1};
  b.output("y");
  return b.build();
}

CompileResult compile_it(const Graph& g, const isa::NpuConfig& config, isa::DType precision, bool fusion) {
  Graph lowered = g;
  lower(lowered);
  CompileOptions options;
  options.precision = precision;
  options.keep_on_chip = fusion;
  return compile(lowered, config, options);
}

const LayerPlan* the_map(const CompileResult& r) {
  auto it = std::find_if(r.layers.begin(), r.layers.end(),
                         [](const LayerPlan& l) { return l.op == "BatchNormalization"; });
  return it == r.layers.end() ? nullptr : &*it;
}

TEST(PostAffine, AMapAfterAConvsActivationRunsInItsEpilogueAndComputesTheSame) {
  for (const bool per_channel : {false, true}) {
    const Graph g = affine_after_conv(per_channel);
    for (const isa::NpuConfig& config : {isa::NpuConfig{}, small_sram()}) {
      for (const isa::DType precision : {isa::DType::kFp32, isa::DType::kFp16}) {
        SCOPED_TRACE(::testing::Message()
                     << (per_channel ? "per-channel" : "scalar") << " " << static_cast<int>(precision)
                     << " acc " << config.sram.accumulator.size_kib << " KiB");
        const CompileResult fused = compile_it(g, config, precision, true);
        const CompileResult apart = compile_it(g, config, precision, false);
        const LayerPlan* map = the_map(fused);
        ASSERT_NE(map, nullptr);
        EXPECT_EQ(map->fused_into, "conv");
        EXPECT_EQ(map->instructions, 0);
        EXPECT_EQ(map->fusion_group, "post_affine:conv");
        EXPECT_NE(map->mapping.find(per_channel ? "bcast row" : "bcast scalar"), std::string::npos)
            << map->mapping;
        ASSERT_NE(the_map(apart), nullptr);
        EXPECT_TRUE(the_map(apart)->fused_into.empty());
        EXPECT_GT(the_map(apart)->instructions, 0);
        // The conv's own output is written nowhere.
        for (const auto& v : fused.values) EXPECT_NE(v.name, "h");
        const std::map<std::string, Tensor> in = {{"x", random_tensor({1, 8, 12, 10}, 2.0f, 7)}};
        const auto want = run_program(apart, config, in);
        for (const bool random_order : {false, true}) {
          RunOptions o;
          o.random_order = random_order;
          const auto got = run_program(fused, config, in, o);
          EXPECT_TRUE(same_bits(got.at("y"), want.at("y")));
        }
        EXPECT_EQ(check_tokens(fused.program), "");
      }
    }
  }
}

TEST(PostAffine, AMapWhoseInputIsAlsoAGraphOutputStaysApart) {
  // The conv's output read by the map and by the graph's output: the map cannot take the conv's STOREs.
  const CompileResult r =
      compile_it(affine_after_conv(false, true), isa::NpuConfig{}, isa::DType::kFp16, true);
  const LayerPlan* map = the_map(r);
  ASSERT_NE(map, nullptr);
  EXPECT_TRUE(map->fused_into.empty());
  EXPECT_GT(map->instructions, 0);
}

TEST(ScaledResidual, TheAddAfterAnSeMulRunsInItsTileLoopAndComputesTheSame) {
  for (const bool product_first : {false, true}) {
    const Graph g = se_residual(product_first);
    for (const isa::NpuConfig& config : {isa::NpuConfig{}, small_sram()}) {
      for (const isa::DType precision : {isa::DType::kFp32, isa::DType::kFp16}) {
        SCOPED_TRACE(::testing::Message() << product_first << " " << static_cast<int>(precision) << " acc "
                                          << config.sram.accumulator.size_kib << " KiB");
        const CompileResult fused = compile_it(g, config, precision, true);
        const CompileResult apart = compile_it(g, config, precision, false);
        const LayerPlan& add = layer_named(fused, "residual");
        EXPECT_EQ(add.fused_into, "scale");
        EXPECT_EQ(add.instructions, 0);
        EXPECT_EQ(add.fusion_group, "scaled_residual:scale");
        EXPECT_NE(layer_named(fused, "scale").mapping.find("then the Add 'residual'"), std::string::npos);
        EXPECT_TRUE(layer_named(apart, "residual").fused_into.empty());
        for (const auto& v : fused.values) EXPECT_NE(v.name, "m");  // the product is written nowhere
        const std::map<std::string, Tensor> in = {{"in", random_tensor({1, 8, 12, 10}, 2.0f, 7)}};
        const auto want = run_program(apart, config, in);
        for (const bool random_order : {false, true}) {
          RunOptions o;
          o.random_order = random_order;
          EXPECT_TRUE(same_bits(run_program(fused, config, in, o).at("y"), want.at("y")));
        }
        EXPECT_EQ(check_tokens(fused.program), "");
      }
    }
  }
}

}  // namespace
}  // namespace npusim::compiler::testing
