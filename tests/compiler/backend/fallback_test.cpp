// A fallback that never fails (docs/backend.md, "Host fallback"): a layer whose NPU lowering fails, for
// whatever reason, runs on the host, costed, with a reason a user can read, and the model still computes
// the reference's outputs. The back end's own messages never reach the user; a mapping file's errors
// still stop the compile (they are the user's to fix).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "compiler/interp/interpreter.h"
#include "compiler/passes/lowered.h"
#include "isa/isa.h"
#include "tests/compiler/backend/functional.h"

namespace npusim::compiler::testing {
namespace {

constexpr double kTol = 1e-4;

// A conv, an Abs and a conv: a matrix, a vector and a matrix layer, each large enough that its mapping
// search times several candidates.
Graph conv_softmax_conv() {
  GraphBuilder b;
  b.input("x", {1, 32, 28, 28})
      .constant("w1", {64, 32, 3, 3}, 0.1f, 3)
      .constant("w2", {32, 64, 1, 1}, 0.1f, 4);
  b.node("Conv", {"x", "w1"}, {"a"}, "conv1").attrs["pads"].value = std::vector<int64_t>{1, 1, 1, 1};
  b.node("Abs", {"a"}, {"s"}, "abs");
  b.node("Conv", {"s", "w2"}, {"y"}, "conv2");
  b.output("y");
  return b.build();
}

// Stands for the simulator (CompileOptions::timer) and fails with `E(message)` on any program slice in
// which the layer of node `failing` computes on the array or the vector unit: the mapping search of that
// layer's lowering times its candidates, so the lowering itself fails (its host call, and a STORE that
// spills its input from the scratchpad for the host, do not). Other slices take one cycle per
// instruction of each layer.
template <class E>
CodeTimer failing_timer(const std::string& failing, const std::string& message) {
  return [failing, message](const isa::Program& p) {
    SliceCycles cycles;
    for (const isa::Instruction& ins : p.instructions) {
      const size_t k = ins.layer();  // a slice's tags count from its first layer (isa/program_slice.h)
      const bool computes = ins.opcode == isa::Opcode::kPreload || ins.opcode == isa::Opcode::kMatmul ||
                            ins.opcode == isa::Opcode::kConv || ins.opcode == isa::Opcode::kVec;
      if (computes && p.layers.at(k).name == failing) throw E(message);
      if (cycles.layers.size() <= k) cycles.layers.resize(k + 1, 0);
      ++cycles.layers[k];
      ++cycles.total;
    }
    return cycles;
  };
}

struct Compiled {
  CompileResult result;
  double error = 0;  // the program's outputs against the interpreter's
};

Compiled compile_and_run(const Graph& model, const CompileOptions& options) {
  Graph lowered = model;
  lower(lowered);
  Compiled c;
  c.result = compile(lowered, isa::NpuConfig{}, options);
  const std::map<std::string, Tensor> in{{"x", random_tensor(model.value("x").shape, 1.0f, 11)}};
  c.error = max_rel_error(run_program(c.result, isa::NpuConfig{}, in), interpret(model, in));
  return c;
}

const LayerPlan& layer(const CompileResult& r, const std::string& name) {
  auto it =
      std::find_if(r.layers.begin(), r.layers.end(), [&](const LayerPlan& l) { return l.name == name; });
  if (it == r.layers.end()) throw std::out_of_range("no layer " + name);
  return *it;
}

Graph lowered(const Graph& g) {
  Graph l = g;
  lower(l);
  return l;
}

TEST(Fallback, ALayerWhoseVectorLoweringBreaksAnInvariantRunsOnTheHostWithoutTheInternalText) {
  const Graph g = conv_softmax_conv();
  CompileOptions o;
  o.timer = failing_timer<std::logic_error>("abs", "backend: an invariant of the test");
  const Compiled c = compile_and_run(g, o);
  EXPECT_EQ(layer(c.result, "abs").placement, Placement::kHost);
  EXPECT_EQ(layer(c.result, "conv1").placement, Placement::kNpuMatrix);
  EXPECT_EQ(layer(c.result, "conv2").placement, Placement::kNpuMatrix);
  ASSERT_EQ(c.result.fallbacks.size(), 1u);
  const Fallback& f = c.result.fallbacks[0];
  EXPECT_EQ(f.node, "abs");
  EXPECT_GT(f.est_cycles, 0);  // costed: its transfers and CPU time
  EXPECT_EQ(f.reason.find("backend:"), std::string::npos) << f.reason;
  EXPECT_EQ(f.reason.find("invariant"), std::string::npos) << f.reason;
  EXPECT_NE(f.reason.find("Abs"), std::string::npos) << f.reason;
  EXPECT_NE(layer(c.result, "abs").mapping.find("HOSTCALL"), std::string::npos);
  EXPECT_LT(c.error, kTol);
}

TEST(Fallback, ALayerWhoseMatrixLoweringCannotMapItRunsOnTheHostWithTheLoweringsSentence) {
  const Graph g = conv_softmax_conv();
  CompileOptions o;
  const std::string why =
      "layer 'conv1' (conv): even the smallest tile needs 9 KiB of sram.weight (have 8 KiB)";
  o.timer = failing_timer<CompileError>("conv1", why);
  const Compiled c = compile_and_run(g, o);
  EXPECT_EQ(layer(c.result, "conv1").placement, Placement::kHost);
  EXPECT_EQ(layer(c.result, "conv2").placement, Placement::kNpuMatrix);
  ASSERT_EQ(c.result.fallbacks.size(), 1u);
  EXPECT_NE(c.result.fallbacks[0].reason.find(why), std::string::npos) << c.result.fallbacks[0].reason;
  EXPECT_LT(c.error, kTol);
}

TEST(Fallback, AMappingFilesErrorStillStopsTheCompile) {
  const Graph g = conv_softmax_conv();
  CompileOptions o;
  o.timer = failing_timer<MappingError>("conv2", "map.yaml:3:5: layer 'conv2': tile_n=7 ...");
  Graph l = lowered(g);
  EXPECT_THROW(compile(l, isa::NpuConfig{}, o), MappingError);
}

TEST(Fallback, ANodeWithATensorWithoutElementsRunsOnTheHost) {
  // A Range or a window bound to values that leave a dimension 0: the lowerings tile at least one element
  // (the element-wise tiling divided by zero, a SIGFPE).
  GraphBuilder b;
  b.input("x", {3, 0});
  b.node("Sigmoid", {"x"}, {"y"}, "sigmoid");
  b.output("y");
  const Graph g = b.build();
  Graph l = lowered(g);
  const CompileResult r = compile(l, isa::NpuConfig{}, {});
  ASSERT_EQ(r.fallbacks.size(), 1u);
  EXPECT_NE(r.fallbacks[0].reason.find("no elements"), std::string::npos) << r.fallbacks[0].reason;
  const auto got = run_program(r, isa::NpuConfig{}, {{"x", Tensor::from_floats({3, 0}, {})}});
  EXPECT_EQ(got.at("y").shape, (Shape{3, 0}));
}

TEST(Fallback, AConvWhoseWindowExceedsTheConvFieldsSaysSo) {
  // An STFT written as a Conv (Silero VAD's front end): a 1 x 256 window every 128 samples. The CONV
  // instruction's window fields hold 255: the conv runs on the host, and the reason says which limit.
  GraphBuilder b;
  b.input("x", {1, 1, 1, 640}).constant("w", {8, 1, 1, 256}, 0.1f, 5);
  b.node("Conv", {"x", "w"}, {"y"}, "stft").attrs["strides"].value = std::vector<int64_t>{1, 128};
  b.output("y");
  const Graph g = b.build();
  Graph l = lowered(g);
  const CompileResult r = compile(l, isa::NpuConfig{}, {});
  ASSERT_EQ(r.fallbacks.size(), 1u);
  EXPECT_EQ(r.fallbacks[0].op, "Conv");
  EXPECT_NE(r.fallbacks[0].reason.find("kernel 1x256"), std::string::npos) << r.fallbacks[0].reason;
  EXPECT_NE(r.fallbacks[0].reason.find("255"), std::string::npos) << r.fallbacks[0].reason;
}

}  // namespace
}  // namespace npusim::compiler::testing
