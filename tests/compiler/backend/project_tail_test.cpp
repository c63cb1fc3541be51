// A block's layer scale and residual in its project GEMM's epilogue (compiler/backend/fusion/project_tail.h):
// ConvNeXt's tail `MatMul -> Transpose -> Mul (per-channel constant) -> Add (block input)` runs in the
// MatMul's epilogue, and computes bit for bit what the Mul and the Add lowered layer by layer compute (fp32,
// fp16, int8); a scale along another axis, a second reader of the Mul, or a mapping file that places the Mul
// keeps them layers of their own.
#include <gtest/gtest.h>

#include "compiler/backend/compile.h"
#include "compiler/passes/lowered.h"
#include "tests/compiler/backend/functional.h"

namespace npusim::compiler::testing {
namespace {

// x [1, C, H, W] -> 3x3 depthwise conv c -> channels last -> MatMul C -> 4C (+ bias) -> MatMul 4C -> C (+
// bias) -> NCHW -> * scale
// -> + c. `scale_shape` the layer scale's shape ([C, 1, 1] in torchvision); `tap`: the Mul's output is a
// graph output too.
Graph block(const Shape& scale_shape, bool tap = false) {
  const int64_t C = 16, H = 7, W = 5;
  GraphBuilder b;
  b.input("x", {1, C, H, W});
  b.constant("dw", {C, 1, 3, 3}, 0.5f, 6);
  Node& dw = b.node("Conv", {"x", "dw"}, {"c"}, "dwconv");
  dw.attrs["group"].value = C;
  dw.attrs["kernel_shape"].value = std::vector<int64_t>{3, 3};
  dw.attrs["pads"].value = std::vector<int64_t>{1, 1, 1, 1};
  b.node("Transpose", {"c"}, {"t"}, "to_nhwc").attrs["perm"].value = std::vector<int64_t>{0, 2, 3, 1};
  b.constant("w1", {C, 4 * C}, 0.5f, 1).constant("b1", {4 * C}, 0.5f, 2);
  b.constant("w2", {4 * C, C}, 0.5f, 3).constant("b2", {C}, 0.5f, 4);
  b.constant("gamma", scale_shape, 0.5f, 5);
  b.node("MatMul", {"t", "w1"}, {"h0"}, "mm1");
  b.node("Add", {"h0", "b1"}, {"h1"}, "mm1_bias");
  b.node("Relu", {"h1"}, {"h"}, "act");
  b.node("MatMul", {"h", "w2"}, {"p0"}, "mm2");
  b.node("Add", {"b2", "p0"}, {"p"}, "mm2_bias");
  b.node("Transpose", {"p"}, {"q"}, "to_nchw").attrs["perm"].value = std::vector<int64_t>{0, 3, 1, 2};
  b.node("Mul", {"gamma", "q"}, {"s"}, "mul");
  b.node("Add", {"s", "c"}, {"y"}, "add");
  b.output("y");
  if (tap) b.output("s");
  return b.build();
}

MappingOverrides placed_apart() {
  MappingOverrides m;
  for (const char* name : {"mul", "add"}) {
    m.layers[name].name = name;
    m.layers[name].placement = Placement::kNpuVector;
  }
  return m;
}

TEST(ProjectTail, TheLayerScaleAndResidualRunInTheProjectGemmsEpilogueBitForBit) {
  const Graph g = block({16, 1, 1});
  const isa::NpuConfig config;
  for (const isa::DType precision : {isa::DType::kFp32, isa::DType::kFp16, isa::DType::kInt8}) {
    SCOPED_TRACE(isa::kDTypeNames[static_cast<size_t>(precision)]);
    Compiled fused, apart;
    compile_and_run(g, config, precision, MappingOverrides{}, &fused);
    compile_and_run(g, config, precision, placed_apart(), &apart);
    for (const char* name : {"mul", "add"}) {
      EXPECT_EQ(layer_named(fused.result, name).fused_into, "mm2") << name;
      EXPECT_EQ(layer_named(fused.result, name).fusion_group, "project_tail:mm2") << name;
      EXPECT_TRUE(layer_named(apart.result, name).fused_into.empty()) << name;
    }
    EXPECT_NE(layer_named(fused.result, "mm2").mapping.find("'mul' (layer scale) and 'add' (residual)"),
              std::string::npos)
        << layer_named(fused.result, "mm2").mapping;
    // Only the Add's output is written: the MatMul's and the Mul's never are.
    for (const isa::Instruction& ins : fused.result.program.instructions) {
      if (ins.opcode == isa::Opcode::kStore) {
        EXPECT_NE(fused.result.layers.at(ins.layer()).name, "mul");
      }
    }
    EXPECT_TRUE(same_bits(fused.out, apart.out));
  }
}

TEST(ProjectTail, NotForAScaleAlongAnotherAxisASecondReaderOrAPlacedMul) {
  const isa::NpuConfig config;
  Compiled c;
  compile_and_run(block({1, 7, 1}), config, isa::DType::kFp16, MappingOverrides{}, &c);  // a scale per row
  EXPECT_TRUE(layer_named(c.result, "mul").fused_into.empty());
  compile_and_run(block({16, 1, 1}, true), config, isa::DType::kFp16, MappingOverrides{},
                  &c);  // s read twice
  EXPECT_TRUE(layer_named(c.result, "mul").fused_into.empty());
  MappingOverrides m;
  m.layers["mul"].name = "mul";
  m.layers["mul"].placement = Placement::kNpuVector;
  compile_and_run(block({16, 1, 1}), config, isa::DType::kFp16, m, &c);
  EXPECT_TRUE(layer_named(c.result, "add").fused_into.empty());
}

// A LayerNorm whose rows fill more than one of the row-wise layer's three slots (ConvNeXt's stage 3 in fp16:
// 196 x 384) still leaves them on chip for the MatMul after it: its slots shrink below the reserved rows
// (compiler/backend/vector/rowwise.cpp), and the results are those of the rows stored and loaded back.
TEST(LayerNormRows, RowsLargerThanASlotStayOnChipForTheGemmAfterIt) {
  GraphBuilder b;
  b.input("x", {1, 196, 384});
  b.constant("g", {384}, 0.5f, 1).constant("be", {384}, 0.5f, 2).constant("w", {384, 64}, 0.5f, 3);
  b.node("LayerNormalization", {"x", "g", "be"}, {"n"}, "ln").attrs["epsilon"].value = 1e-6f;
  b.node("MatMul", {"n", "w"}, {"y"}, "fc");
  b.output("y");
  const Graph g = b.build();
  isa::NpuConfig config;
  config.sram.input.size_kib = 256;
  Graph lowered = g;
  PipelineOptions whole;  // the LayerNorm as one row-wise layer
  whole.whole_row_limit = rowwise_row_limit(config);
  lower(lowered, whole);
  CompileOptions on, off;
  on.precision = off.precision = isa::DType::kFp16;
  off.keep_on_chip = false;
  const CompileResult kept = compile(lowered, config, on), stored = compile(lowered, config, off);
  EXPECT_EQ(layer_named(kept, "fc").on_chip_input, "n");
  EXPECT_TRUE(layer_named(stored, "fc").on_chip_input.empty());
  const std::map<std::string, Tensor> in{{"x", random_tensor({1, 196, 384}, 1.0f, 5)}};
  EXPECT_EQ(check_tokens(kept.program), "");
  EXPECT_TRUE(same_bits(run_program(kept, config, in).at("y"), run_program(stored, config, in).at("y")));
}

}  // namespace
}  // namespace npusim::compiler::testing
