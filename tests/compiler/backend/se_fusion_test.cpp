// Squeeze-and-excitation blocks as one fusion group (compiler/backend/fusion/se_fusion.h): the block's input
// stays in the input scratchpad from its GlobalAveragePool to its Mul, which reads it there instead of
// loading it again; the program computes exactly what the unfused one does (in program order and in
// random interleavings of the queues), and the group is named on its layers.
#include <gtest/gtest.h>

#include <algorithm>

#include "compiler/backend/compile.h"
#include "compiler/interp/interpreter.h"
#include "compiler/passes/lowered.h"
#include "tests/compiler/backend/functional.h"

namespace npusim::compiler::testing {
namespace {

void conv(GraphBuilder& b, const std::string& x, const std::string& y, int64_t cin, int64_t cout, int64_t k,
          int64_t group, uint32_t seed, const std::string& act) {
  b.constant(y + "_w", {cout, cin / group, k, k}, 0.5f, seed).constant(y + "_b", {cout}, 0.5f, seed + 1);
  Node& n = b.node("Conv", {x, y + "_w", y + "_b"}, {act.empty() ? y : y + "_c"}, y + "_conv");
  n.attrs["pads"].value = std::vector<int64_t>{k / 2, k / 2, k / 2, k / 2};
  n.attrs["kernel_shape"].value = std::vector<int64_t>{k, k};
  n.attrs["group"].value = group;
  if (!act.empty()) b.node(act, {y + "_c"}, {y}, y + "_" + act);
}

// EfficientNet's block: depthwise conv -> SE (pool, reduce 1x1 + Relu, expand 1x1 + Sigmoid, Mul) ->
// project 1x1.
Graph se_block() {
  GraphBuilder b;
  b.input("x", {1, 32, 14, 14});
  conv(b, "x", "d", 32, 32, 3, 32, 1, "Relu");
  b.node("GlobalAveragePool", {"d"}, {"p"}, "pool");
  conv(b, "p", "r", 32, 8, 1, 1, 3, "Relu");
  conv(b, "r", "e", 8, 32, 1, 1, 5, "Sigmoid");
  b.node("Mul", {"d", "e"}, {"m"}, "scale");
  conv(b, "m", "y", 32, 16, 1, 1, 7, "");
  b.output("y");
  return b.build();
}

const LayerPlan& layer(const CompileResult& r, const std::string& name) {
  auto it =
      std::find_if(r.layers.begin(), r.layers.end(), [&](const LayerPlan& p) { return p.name == name; });
  if (it == r.layers.end()) throw std::runtime_error("no layer " + name);
  return *it;
}

int64_t count(const CompileResult& r, const std::string& name, isa::Opcode op) {
  const auto at =
      std::find_if(r.layers.begin(), r.layers.end(), [&](const LayerPlan& p) { return p.name == name; });
  const uint32_t index = static_cast<uint32_t>(at - r.layers.begin());
  return std::count_if(r.program.instructions.begin(), r.program.instructions.end(),
                       [&](const isa::Instruction& i) { return i.layer() == index && i.opcode == op; });
}

// The block lowered and compiled for the default machine in `precision`, with the fusions or without.
CompileResult compile_block(isa::DType precision, bool fusion) {
  Graph lowered = se_block();
  lower(lowered);
  CompileOptions options;
  options.precision = precision;
  options.keep_on_chip = fusion;
  return compile(lowered, isa::NpuConfig{}, options);
}

TEST(SeFusion, TheMulReadsTheBlockInputWhereThePoolLeftItAndComputesTheSame) {
  const isa::NpuConfig config;
  for (const isa::DType precision : {isa::DType::kFp32, isa::DType::kFp16}) {
    const CompileResult fused = compile_block(precision, true);
    const CompileResult plain = compile_block(precision, false);
    const LayerPlan& mul = layer(fused, "scale");
    EXPECT_EQ(mul.on_chip_input, "d");
    EXPECT_EQ(mul.on_chip_bytes_saved, 32 * 14 * 14 * isa::dtype_bytes(precision));
    EXPECT_EQ(mul.fusion_group, "se:pool");
    EXPECT_EQ(layer(fused, "pool").fusion_group, "se:pool");
    EXPECT_EQ(layer(fused, "e_conv").fusion_group, "se:pool");
    EXPECT_EQ(layer(fused, "y_conv").fusion_group, "");
    // The product stays where the block's input was, for the pointwise conv after the Mul, and never
    // touches DRAM.
    EXPECT_NE(mul.mapping.find("output left there for the next layer"), std::string::npos) << mul.mapping;
    EXPECT_EQ(count(fused, "scale", isa::Opcode::kStore), 0);
    EXPECT_EQ(layer(fused, "y_conv").on_chip_input, "m");
    EXPECT_TRUE(std::any_of(fused.on_chip.begin(), fused.on_chip.end(),
                            [](const HostTensor& t) { return t.name == "m"; }));
    EXPECT_NE(mul.mapping.find("read where its SE block's pool left it"), std::string::npos) << mul.mapping;
    // The Mul loads only the scale (and no tile of its input); unfused, it loads its input too.
    EXPECT_EQ(count(fused, "scale", isa::Opcode::kLoad), 1);
    EXPECT_GT(count(plain, "scale", isa::Opcode::kLoad), 1);
    EXPECT_TRUE(layer(plain, "scale").fusion_group.empty());
    // So the Mul's DMA time (its loads and stores by the closed form) falls.
    EXPECT_LT(mul.est_dma_cycles, layer(plain, "scale").est_dma_cycles);
    EXPECT_TRUE(layer(plain, "scale").on_chip_input.empty());
    // Its DRAM copy stays: the value is not among those that never touch DRAM.
    EXPECT_TRUE(std::none_of(fused.on_chip.begin(), fused.on_chip.end(),
                             [](const HostTensor& t) { return t.name == "d"; }));
    EXPECT_EQ(check_tokens(fused.program), "");
    // Identical results in program order (seed 0) and in random interleavings of the queues (the tokens
    // order the Mul's reads after the pool's loads, across the layers between them).
    const std::map<std::string, Tensor> in{{"x", random_tensor({1, 32, 14, 14}, 1.0f, 11)}};
    const auto want = run_program(plain, config, in);
    for (const uint32_t seed : {0u, 1u, 2u, 3u}) {
      RunOptions order;
      order.random_order = seed > 0;
      order.seed = seed;
      EXPECT_EQ(max_rel_error(run_program(fused, config, in, order), want), 0.0) << "order " << seed;
    }
    EXPECT_LT(max_rel_error(want, interpret(se_block(), in)), precision == isa::DType::kFp32 ? 1e-5 : 2e-2);
  }
}

TEST(SeFusion, ReimposingTheChosenMappingsReproducesTheProgram) {
  // What --mapping-out writes and --mapping imposes: the projection conv's GEMM tile (it reads the Mul's
  // product in place) must bring the same decision back, not a convolution's tile check.
  Graph lowered = se_block();
  lower(lowered);
  const CompileResult first = compile(lowered, isa::NpuConfig{});
  ASSERT_EQ(layer(first, "y_conv").on_chip_input, "m");
  MappingOverrides mapping;
  for (const LayerPlan& p : first.layers) mapping.layers[p.name] = p.chosen;
  CompileOptions options;
  options.mapping = &mapping;
  const CompileResult again = compile(lowered, isa::NpuConfig{}, options);
  ASSERT_EQ(again.program.instructions.size(), first.program.instructions.size());
  for (size_t i = 0; i < first.program.instructions.size(); ++i) {
    EXPECT_TRUE(again.program.instructions[i] == first.program.instructions[i]) << "instruction " << i;
  }
}

TEST(SeFusion, AnInputTooLargeForTheScratchpadIsLoadedAgain) {
  Graph lowered = se_block();
  lower(lowered);
  const isa::NpuConfig config = small_sram();  // 16 KiB input scratchpad: 32 x 14 x 14 fp32 does not fit
  const CompileResult r = compile(lowered, config);
  // No SE group holds X: the project conv loads it again, with the scale in its loads (fusion/pre_scale.h).
  EXPECT_EQ(layer(r, "scale").fusion_group.rfind("se:", 0), std::string::npos);
  EXPECT_EQ(layer(r, "scale").fusion_group.rfind("pre_scale:", 0), 0u);
  std::map<std::string, Tensor> in{{"x", random_tensor({1, 32, 14, 14}, 1.0f, 11)}};
  EXPECT_LT(max_rel_error(run_program(r, config, in), interpret(se_block(), in)), 1e-5);
}

}  // namespace
}  // namespace npusim::compiler::testing
