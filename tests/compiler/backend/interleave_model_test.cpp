// Neighbouring layers interleaved in a compiled model (backend/schedule/interleave.h): ConvNeXt's stem, a
// conv and the LayerNorm after it, compiled with a timer under which every merge is faster. The merged
// program computes the layer-by-layer program's outputs bit for bit, in program order and in random
// interleavings of the queues that respect only queue order and tokens, and it does interleave (some
// instruction of a layer comes after one of the layer after it).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "compiler/backend/compile.h"
#include "compiler/passes/lowered.h"
#include "tests/compiler/backend/functional.h"

namespace npusim::compiler::testing {
namespace {

// ConvNeXt's stem: a 4x4 stride-4 conv (the array) and the LayerNorm over its channels (the vector unit)
// that reads it.
Graph stem() {
  GraphBuilder b;
  b.input("x", {1, 3, 64, 64});
  b.constant("w", {32, 3, 4, 4}, 0.3f, 3).constant("bias", {32}, 0.1f, 4);
  b.constant("gamma", {32}, 0.5f, 5).constant("beta", {32}, 0.1f, 6);
  Node& conv = b.node("Conv", {"x", "w", "bias"}, {"c"}, "stem");
  conv.attrs["strides"].value = std::vector<int64_t>{4, 4};
  conv.attrs["kernel_shape"].value = std::vector<int64_t>{4, 4};
  b.node("Transpose", {"c"}, {"ct"}, "to_nhwc").attrs["perm"].value = std::vector<int64_t>{0, 2, 3, 1};
  Node& ln = b.node("LayerNormalization", {"ct", "gamma", "beta"}, {"n"}, "norm");
  ln.attrs["axis"].value = int64_t{-1};
  ln.attrs["epsilon"].value = 1e-6f;
  b.node("Transpose", {"n"}, {"y"}, "to_nchw").attrs["perm"].value = std::vector<int64_t>{0, 3, 1, 2};
  b.output("y");
  return b.build();
}

// A stand-in for the simulator under which every merge is faster: a slice costs ten cycles an instruction,
// one less when its layers' instructions are interleaved (one of a layer after one of a later layer: the
// merge's choice, timed against the same code in layer order), one more with `merged_faster` false; each
// layer's figure is its instruction count. The mappings chosen are the same with and without merging.
CodeTimer prefers_merged(bool merged_faster = true) {
  return [merged_faster](const isa::Program& p) {
    SliceCycles c;
    c.layers.assign(std::max<size_t>(1, p.layers.size()), 0);
    bool interleaved = false;
    size_t latest = 0;
    for (const isa::Instruction& ins : p.instructions) {
      const size_t k = std::min<size_t>(ins.layer(), c.layers.size() - 1);
      ++c.layers[k];
      interleaved = interleaved || k < latest;
      latest = std::max(latest, k);
    }
    c.total = 10 * static_cast<int64_t>(p.instructions.size()) - (!interleaved ? 0 : merged_faster ? 1 : -1);
    return c;
  };
}

struct Merged {
  CompileResult result;
  std::map<std::string, Tensor> program_order, shuffled;
};

Merged compile_and_run(const Graph& model, const isa::NpuConfig& config, isa::DType precision,
                       bool interleave, bool merged_faster = true) {
  Graph lowered = model;
  PipelineOptions o;
  o.whole_row_limit = rowwise_row_limit(config);
  lower(lowered, o);
  CompileOptions co;
  co.precision = precision;
  co.interleave_layers = interleave;
  co.timer = prefers_merged(merged_faster);
  Merged r;
  r.result = compile(lowered, config, co);
  std::map<std::string, Tensor> in{{"x", random_tensor(model.value("x").shape, 2.0f, 7)}};
  r.program_order = run_program(r.result, config, in);
  RunOptions shuffle;
  shuffle.random_order = true;
  shuffle.seed = 11;
  r.shuffled = run_program(r.result, config, in, shuffle);
  return r;
}

// Some instruction of a layer comes after an instruction of a later layer.
bool interleaved(const isa::Program& p) {
  uint32_t top = 0;
  for (const isa::Instruction& ins : p.instructions) {
    if (ins.opcode == isa::Opcode::kHalt) continue;
    if (ins.layer() < top) return true;
    top = std::max(top, ins.layer());
  }
  return false;
}

TEST(InterleaveModel, ALayerNormMergedIntoTheConvBeforeItComputesTheLayerByLayerProgramsBits) {
  const isa::NpuConfig config;
  const Graph g = stem();
  for (const isa::DType p : {isa::DType::kFp32, isa::DType::kFp16}) {
    const std::string name(isa::kDTypeNames[static_cast<size_t>(p)]);
    const Merged apart = compile_and_run(g, config, p, false);
    const Merged merged = compile_and_run(g, config, p, true);
    EXPECT_FALSE(interleaved(apart.result.program)) << name;
    EXPECT_TRUE(interleaved(merged.result.program)) << name;
    EXPECT_EQ(check_tokens(merged.result.program), "") << name;
    for (const char* y : {"y"}) {
      EXPECT_TRUE(same_bits(merged.program_order.at(y), apart.program_order.at(y))) << name << " " << y;
      EXPECT_TRUE(same_bits(merged.shuffled.at(y), apart.program_order.at(y))) << name << " " << y;
    }
  }
}

TEST(InterleaveModel, AMergeThatIsNotFasterLeavesTheProgramAsTheLayerByLayerOne) {
  const isa::NpuConfig config;
  const Graph g = stem();
  const Merged apart = compile_and_run(g, config, isa::DType::kFp32, false, false);
  const Merged slower = compile_and_run(g, config, isa::DType::kFp32, true, false);
  EXPECT_TRUE(slower.result.program.instructions == apart.result.program.instructions);
}

}  // namespace
}  // namespace npusim::compiler::testing
