// Control flow through import, the interpreter and constant folding, on the models that
// tests/compiler/data/make_control_flow_models.py generates (their semantics are stated there; the
// expected values below were also checked with onnxruntime).
#include <gtest/gtest.h>

#include "compiler/import/import.h"
#include "compiler/interp/interpreter.h"
#include "compiler/passes/passes.h"
#include "tests/compiler/model_error.h"

namespace npusim::compiler {
namespace {

const std::string kData = std::string(NPUSIM_SOURCE_DIR) + "/tests/compiler/data/";

int count(const Graph& g, const std::string& op) {
  int n = 0;
  for (const auto& node : g.nodes) n += node.op_type == op;
  return n;
}

Graph nested(int64_t batch, std::optional<double> sr) {
  ImportOptions o;
  o.input_shapes["x"] = {batch, 4};
  if (sr) o.input_values["sr"] = {*sr};
  return import_onnx_file(kData + "nested_if_sr.onnx", o);
}

std::vector<float> run(const Graph& g, const Tensor& x, std::optional<int64_t> sr = std::nullopt) {
  std::map<std::string, Tensor> in{{"x", x}};
  if (sr) in["sr"] = Tensor::scalar_int(DataType::kInt64, *sr);
  return interpret(g, in).at("y").to_float_vector();
}

const Tensor kX = Tensor::from_floats({1, 4}, {1, 2, 3, 4});

TEST(ControlFlow, IfBranchesAreImportedAsSubgraphsWithTheirCapturesAsInputs) {
  Graph g = nested(1, std::nullopt);
  ASSERT_EQ(count(g, "If"), 1);
  const Node& n = g.nodes.back();
  ASSERT_EQ(n.subgraphs.size(), 2u);
  EXPECT_EQ(n.subgraphs.at("then_branch")->nodes.size(), 8u);
  // The branches read x from the enclosing graph: it is the If's captured input.
  EXPECT_EQ(n.attrs.at(kCaptures).strings(), std::vector<std::string>{"x"});
  EXPECT_EQ(n.inputs.back(), "x");
  EXPECT_EQ(num_formal_inputs(n), 1u);
}

TEST(ControlFlow, TheInterpreterTakesTheBranchARuntimeConditionPicks) {
  Graph g = nested(1, std::nullopt);
  EXPECT_EQ(run(g, kX, 16000), (std::vector<float>{5, 7, 9, 11}));  // x * 2 + 3
  EXPECT_EQ(run(g, kX, 8000), (std::vector<float>{0, 1, 2, 3}));    // x - 1
}

TEST(ControlFlow, InputValueFixesAnInputAndNestedIfsFoldToTheBranchTheyTake) {
  Graph g = nested(1, 16000);
  EXPECT_EQ(g.inputs, std::vector<std::string>{"x"});
  passes::fold_constants(g);
  g.verify();
  EXPECT_EQ(count(g, "If"), 0);
  EXPECT_EQ(run(g, kX), (std::vector<float>{5, 7, 9, 11}));
  // A batch of 2 takes the inner else branch: x * 2.
  Graph g2 = nested(2, 16000);
  passes::fold_constants(g2);
  EXPECT_EQ(count(g2, "If"), 0);
  EXPECT_EQ(run(g2, Tensor::from_floats({2, 4}, {1, 2, 3, 4, 5, 6, 7, 8})),
            (std::vector<float>{2, 4, 6, 8, 10, 12, 14, 16}));
  Graph g3 = nested(1, 8000);
  passes::fold_constants(g3);
  EXPECT_EQ(count(g3, "If"), 0);
  EXPECT_EQ(run(g3, kX), (std::vector<float>{0, 1, 2, 3}));
}

TEST(ControlFlow, LoweringTheFoldedModelLeavesNoControlFlow) {
  Graph g = nested(1, 16000);
  lower(g);
  EXPECT_EQ(count(g, "If"), 0);
  EXPECT_EQ(interpret(reference_graph(g), {{"x", kX}}).at("y").to_float_vector(),
            (std::vector<float>{5, 7, 9, 11}));
}

TEST(ControlFlow, InputValueErrorsNameTheInputAndTheProblem) {
  EXPECT_EQ(parse_input_value("sr=16000,8000").second, (std::vector<double>{16000, 8000}));
  EXPECT_NE(error_of([] { parse_input_value("sr=abc"); }).find("'abc' is not a number"), std::string::npos);
  EXPECT_NE(error_of([] { parse_input_value("sr"); }).find("is not NAME=V"), std::string::npos);
  ImportOptions o;
  o.input_shapes["x"] = {1, 4};
  o.input_values["sr_"] = {16000};  // a typo of sr: an error (it would leave sr free)
  EXPECT_NE(error_of([&] {
              import_onnx_file(kData + "nested_if_sr.onnx", o);
            }).find("--input-value names 'sr_', which is not an input of"),
            std::string::npos);
  // A name far from every input fixes nothing and is a warning (one set of options for every variant).
  std::vector<std::string> warnings;
  o.warn = [&](const std::string& w) { warnings.push_back(w); };
  o.input_values = {{"sample_rate", {16000}}};
  EXPECT_EQ(import_onnx_file(kData + "nested_if_sr.onnx", o).inputs, (std::vector<std::string>{"x", "sr"}));
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("--input-value names 'sample_rate', which is not an input of"),
            std::string::npos)
      << warnings[0];
  EXPECT_NE(warnings[0].find("; ignored"), std::string::npos) << warnings[0];
  o.warn = nullptr;
  o.input_values = {{"sr", {1, 2}}};
  EXPECT_NE(error_of([&] { import_onnx_file(kData + "nested_if_sr.onnx", o); }).find("gives 2 values"),
            std::string::npos);
  o.input_values = {{"sr", {0.5}}};
  EXPECT_NE(error_of([&] { import_onnx_file(kData + "nested_if_sr.onnx", o); }).find("is not an integer"),
            std::string::npos);
}

TEST(ControlFlow, ADataDependentIfStaysAndFollowsTheData) {
  Graph g = import_onnx_file(kData + "cascade_if.onnx");
  passes::fold_constants(g);
  ASSERT_EQ(count(g, "If"), 1);
  const std::vector<float> w1 = g.value("w1").constant->to_float_vector();
  const std::vector<float> w2 = g.value("w2").constant->to_float_vector();
  // x = +-w1 drives the score's logit to +-|w1|^2: the second stage fires, or does not.
  for (float sign : {1.0f, -1.0f}) {
    std::vector<float> x(8);
    for (int k = 0; k < 8; ++k) x[k] = sign * w1[k];
    auto out = interpret(g, {{"x", Tensor::from_floats({1, 8}, x)}});
    const bool fires = out.at("score").f[0] > 0.5f;
    EXPECT_EQ(fires, sign > 0);
    for (int j = 0; j < 3; ++j) {
      double want = 0;
      for (int k = 0; k < 8; ++k) want += double(x[k]) * w2[k * 3 + j];
      EXPECT_NEAR(out.at("y").f[j], fires ? std::max(want, 0.0) : 0.0, 1e-5);
    }
  }
}

TEST(NewerModels, AnOpset18ModelPastTheLinkedCheckerImportsAndRunsWithItsOpsetsSemantics) {
  // libonnx 1.12's checker knows neither IR 10 nor Split's num_outputs: Silero VAD's opset-18 file.
  Graph g = import_onnx_file(kData + "split_mean_op18.onnx");
  EXPECT_EQ(g.opset, 18);
  auto out = interpret(g, {{"x", Tensor::from_floats({2, 4}, {1, 2, 3, 4, 5, 6, 7, 8})}});
  EXPECT_EQ(out.at("a").to_float_vector(), (std::vector<float>{1.5f, 5.5f}));  // onnxruntime's values
  EXPECT_EQ(out.at("b").to_float_vector(), (std::vector<float>{3.5f, 7.5f}));
}

TEST(ControlFlow, EachPathOfADataDependentIfIsAGraphOfItsOwn) {
  Graph g = import_onnx_file(kData + "cascade_if.onnx");
  lower(g);
  ASSERT_EQ(passes::data_dependent_ifs(g).size(), 1u);
  const std::string name = passes::data_dependent_ifs(g)[0];
  Graph fires = g, skips = g;
  passes::take_branch(fires, name, true);
  passes::take_branch(skips, name, false);
  EXPECT_TRUE(passes::data_dependent_ifs(fires).empty());
  EXPECT_EQ(count(fires, "MatMul"), 2);  // both stages
  EXPECT_EQ(count(skips, "MatMul"), 1);  // the first stage; y is the else branch's constant
  EXPECT_THROW(passes::take_branch(skips, name, true), std::invalid_argument);
}

}  // namespace
}  // namespace npusim::compiler
