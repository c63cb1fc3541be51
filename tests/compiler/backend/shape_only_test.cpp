// Shape-only weights (ImportOptions::weight_values = false, what `npusim run` does for a timing run): the
// compiled program is the one compiled with the weights' values, instruction for instruction, segment
// for segment (same addresses and sizes), only without the bytes; nothing that needs the values (the
// interpreter, writing the program, a functional run) accepts it.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "arch/datapath/error.h"
#include "arch/datapath/state.h"
#include "compiler/import/import.h"
#include "compiler/interp/interpreter.h"
#include "compiler/passes/passes.h"
#include "isa/assembly.h"
#include "isa/program.h"
#include "tests/compiler/backend/functional.h"
#include "tests/compiler/backend/shape_only.h"

namespace npusim::compiler::testing {
namespace {

const char* const kGemmRows = "Layer Name, M, N, K,\nfc1, 33, 70, 129,\nfc2, 16, 300, 64,\n";

CompileResult compile_lowered(Graph g, isa::DType precision) {
  lower(g);
  CompileOptions o;
  o.precision = precision;
  return compile(g, isa::NpuConfig{}, o);
}

TEST(ShapeOnlyWeights, BuiltInModelsCompileToTheProgramTheirValuesGiveWithoutTheBytes) {
  const std::string llm = "llm:layers=2,hidden=64,heads=4,kv_heads=2,ffn=96,vocab=50";
  for (const std::string& spec : {std::string("gemm:M=64,N=96,K=80"), llm + ",seq=6", llm + ",past=5"}) {
    for (isa::DType precision : {isa::DType::kFp32, isa::DType::kBf16}) {
      const Graph values = builtin_model(spec, true), shapes = builtin_model(spec, false);
      EXPECT_EQ(values.inputs, shapes.inputs) << spec;
      expect_same_program_without_bytes(
          compile_lowered(values, precision), compile_lowered(shapes, precision),
          spec + " " + std::string(isa::kDTypeNames[static_cast<size_t>(precision)]));
    }
  }
  expect_same_program_without_bytes(
      compile_lowered(import_scalesim_csv_text(kGemmRows, "g.csv", true), isa::DType::kFp32),
      compile_lowered(import_scalesim_csv_text(kGemmRows, "g.csv", false), isa::DType::kFp32),
      "SCALE-Sim GEMM rows");
}

TEST(ShapeOnlyWeights, AreConstantsOfTheirShapeWithoutValues) {
  const Graph g = builtin_model("gemm:M=4,N=5,K=6", false);
  const Value& w = g.value("gemm.b");
  ASSERT_TRUE(w.is_constant());
  EXPECT_FALSE(w.constant->has_values());
  EXPECT_EQ(w.constant->shape, (Shape{6, 5}));
  EXPECT_TRUE(w.constant->f.empty());
  EXPECT_EQ(g.inputs, std::vector<std::string>{"gemm.a"});
  EXPECT_THROW(w.constant->to_float_vector(), std::logic_error);
  EXPECT_THROW(w.constant->as_double(0), std::logic_error);
  // The interpreter has nothing to compute with.
  EXPECT_THROW(interpret(g, {{"gemm.a", random_tensor({4, 6}, 1.0f, 1)}}), InterpretError);
}

TEST(ShapeOnlyWeights, FoldedNodesOverThemStayShapeOnlyWithTheirShapes) {
  // y = x @ transpose(w): the Transpose folds at compile time into a [8, 6] constant, still without values,
  // and the MatMul compiles as it does over the folded values.
  auto graph = [](Tensor w) {
    Graph g;
    g.opset = 17;
    auto value = [&](const std::string& name, const Shape& s) -> Value& {
      Value& v = g.ensure_value(name);
      v.name = name;
      v.dtype = DataType::kFloat32;
      v.shape = s;
      v.shape_known = true;
      return v;
    };
    value("x", {4, 8});
    g.inputs = {"x"};
    g.add_constant("w", std::move(w));
    value("w", {6, 8});
    value("wt", {8, 6});
    value("y", {4, 6});
    Node t;
    t.op_type = "Transpose";
    t.name = "t";
    t.inputs = {"w"};
    t.outputs = {"wt"};
    t.attrs["perm"].value = std::vector<int64_t>{1, 0};
    Node m;
    m.op_type = "MatMul";
    m.name = "m";
    m.inputs = {"x", "wt"};
    m.outputs = {"y"};
    g.nodes = {t, m};
    g.outputs = {"y"};
    return g;
  };
  Graph shapes = graph(Tensor::shape_only(DataType::kFloat32, {6, 8}));
  passes::fold_constants(shapes);
  ASSERT_EQ(shapes.nodes.size(), 1u);
  const Value& wt = shapes.value("wt");
  ASSERT_TRUE(wt.is_constant());
  EXPECT_FALSE(wt.constant->has_values());
  EXPECT_EQ(wt.constant->shape, (Shape{8, 6}));
  expect_same_program_without_bytes(
      compile_lowered(graph(random_tensor({6, 8}, 1.0f, 3)), isa::DType::kFp32),
      compile_lowered(graph(Tensor::shape_only(DataType::kFloat32, {6, 8})), isa::DType::kFp32),
      "folded Transpose");
}

TEST(ShapeOnlyWeights, TheirProgramCannotBeWrittenNorRunFunctionally) {
  const CompileResult r = compile_lowered(builtin_model("gemm:M=8,N=16,K=32", false), isa::DType::kFp32);
  EXPECT_THROW(isa::serialize(r.program), isa::ProgramError);
  EXPECT_THROW(isa::disassemble(r.program), isa::ProgramError);
  EXPECT_THROW(arch::datapath::MachineState(isa::NpuConfig{}, r.program), arch::datapath::DatapathError);
  try {
    isa::serialize(r.program);
  } catch (const isa::ProgramError& e) {
    EXPECT_NE(std::string(e.what()).find("timing only"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace npusim::compiler::testing
