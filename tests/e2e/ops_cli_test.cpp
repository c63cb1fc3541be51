// npusim ops MODEL: a model's support summary, --input-value folding control flow, and a timing run's paths
// through a data-dependent If (--branch), as a user runs them.
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "tests/e2e/run_command.h"

namespace npusim::test {
namespace {

const std::string kData = std::string(NPUSIM_SOURCE_DIR) + "/tests/compiler/data/";

// The summary row of `op`: imported nodes, layers, matrix, vector, free, host.
std::string row(const std::string& out, const std::string& op) {
  std::smatch m;
  const std::regex re("\n" + op + " +([0-9]+ +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+)\n");
  return std::regex_search(out, m, re) ? std::regex_replace(m[1].str(), std::regex(" +"), " ") : "<no row>";
}

TEST(OpsCli, AModelsSummaryCountsItsOpsWhereTheyRunAndWhyHostLayersAreThere) {
  const CommandResult r = npusim({"ops", kData + "cascade_if.onnx"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Six top-level nodes, two in the then branch, one in the else branch.
  EXPECT_NE(r.out.find("cascade_if.onnx: 9 nodes imported"), std::string::npos) << r.out;
  // The data-dependent If stays one host layer; the first stage's MatMul runs on the array.
  EXPECT_EQ(row(r.out, "If"), "1 1 0 0 0 1") << r.out;
  EXPECT_EQ(row(r.out, "MatMul").substr(0, 6), "2 1 1 ") << r.out;
  EXPECT_NE(r.out.find("Host layers and why"), std::string::npos);
  // ... and what would move each host op type: the op table's constraints of If.
  EXPECT_NE(r.out.find("What the NPU needs of each op type on the host"), std::string::npos) << r.out;
  EXPECT_TRUE(std::regex_search(r.out, std::regex("\n  If \\(1 layer\\): [^\n]*[a-z]"))) << r.out;
}

// An input left dynamic: the message shows the input's shape and the option to type, an N for each open
// dimension (PP-OCR's rec input is ?x3x48x?: "x=..." left the user to find its rank and fixed sizes).
TEST(OpsCli, AnUnboundInputIsNamedWithItsShapeAndTheOptionThatBindsIt) {
  const CommandResult r = npusim({"ops", kData + "nested_if_sr.onnx"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("input 'x' dimension 0 ('N') is dynamic and unbound (its shape is ?x4); bind it with "
                       "--input-shape x=Nx4, a size for each N, or --dynamic N=V1,V2,..."),
            std::string::npos)
      << r.err;
}

// ops counts the layers as compile does: those with code of their own, the fused ones apart (a fused
// attention block's Softmax and second MatMul run in its first MatMul's code). ops had said "5 layers
// compiled" where compile said "3 layers (2 more fused into them)".
TEST(OpsCli, CountsTheLayersAsCompileDoes) {
  const std::string dir = temp_dir("ops_attention");
  const char* const kAttention = R"(
import sys, numpy as np, onnx
from onnx import helper as h, numpy_helper as nh, TensorProto as T
w = lambda n: nh.from_array(np.full((8, 8), 0.1, dtype=np.float32), n)
g = h.make_graph([
    h.make_node('MatMul', ['x', 'wq'], ['q']), h.make_node('MatMul', ['x', 'wk'], ['k']),
    h.make_node('MatMul', ['x', 'wv'], ['v']), h.make_node('Transpose', ['k'], ['kt'], perm=[0, 2, 1]),
    h.make_node('MatMul', ['q', 'kt'], ['s']), h.make_node('Softmax', ['s'], ['p'], axis=-1),
    h.make_node('MatMul', ['p', 'v'], ['y'])], 'attention',
    [h.make_tensor_value_info('x', T.FLOAT, [1, 16, 8])], [h.make_tensor_value_info('y', T.FLOAT, [1, 16, 8])],
    [w('wq'), w('wk'), w('wv')])
m = h.make_model(g, opset_imports=[h.make_opsetid('', 17)])
m.ir_version = 8
onnx.save(m, sys.argv[1])
)";
  const std::string model = dir + "/attention.onnx";
  ASSERT_EQ(run_command({"/usr/bin/python3", "-c", kAttention, model}).exit_code, 0);
  const CommandResult compiled = npusim({"compile", model, "-o", dir + "/a.npu"});
  ASSERT_EQ(compiled.exit_code, 0) << compiled.err;
  std::smatch m;
  ASSERT_TRUE(
      std::regex_search(compiled.out, m, std::regex("([0-9]+ layers \\(([0-9]+) more fused into them\\))")))
      << compiled.out;
  EXPECT_GT(std::stoi(m[2].str()), 0);
  const CommandResult ops = npusim({"ops", model});
  ASSERT_EQ(ops.exit_code, 0) << ops.err;
  EXPECT_NE(
      ops.out.find("attention.onnx: 7 nodes imported (subgraphs included), " + m[1].str() + " compiled\n"),
      std::string::npos)
      << ops.out;
}

TEST(OpsCli, InputValueFixesAnInputAndTheIfsOnItFoldAway) {
  const CommandResult runtime = npusim({"ops", kData + "nested_if_sr.onnx", "--input-shape", "x=1x4"});
  ASSERT_EQ(runtime.exit_code, 0) << runtime.err;
  EXPECT_EQ(row(runtime.out, "If"), "2 1 0 0 0 1") << runtime.out;
  const CommandResult fixed =
      npusim({"ops", kData + "nested_if_sr.onnx", "--input-shape", "x=1x4", "--input-value", "sr=16000"});
  ASSERT_EQ(fixed.exit_code, 0) << fixed.err;
  EXPECT_EQ(row(fixed.out, "If"), "2 0 0 0 0 0") << fixed.out;
  const CommandResult bad =
      npusim({"ops", kData + "nested_if_sr.onnx", "--input-shape", "x=1x4", "--input-value", "sr=fast"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("'fast' is not a number"), std::string::npos) << bad.err;
}

TEST(OpsCli, InputValueOrShapeNamingNoInputIsAnErrorThatSuggestsTheClosest) {
  const CommandResult typo =
      npusim({"ops", kData + "nested_if_sr.onnx", "--input-shape", "x=1x4", "--input-value", "sr_=16000"});
  EXPECT_EQ(typo.exit_code, 2);
  EXPECT_NE(typo.err.find("--input-value names 'sr_', which is not an input of"), std::string::npos)
      << typo.err;
  EXPECT_NE(typo.err.find("(did you mean 'sr'?)"), std::string::npos) << typo.err;
  EXPECT_EQ(typo.err.find('\n'), typo.err.size() - 1) << typo.err;  // one line
  // Nothing close: no typo but an option meant for another variant of the model (Silero VAD's half model
  // has no sr): a warning listing the inputs, and the run goes on.
  const CommandResult far = npusim({"ops", kData + "cascade_if.onnx", "--input-value", "sample_rate=16000"});
  EXPECT_EQ(far.exit_code, 0) << far.err;
  EXPECT_NE(far.err.find("npusim: warning: --input-value names 'sample_rate', which is not an input of"),
            std::string::npos)
      << far.err;
  EXPECT_NE(far.err.find("(inputs: x); ignored"), std::string::npos) << far.err;
  const CommandResult shape = npusim({"ops", kData + "nested_if_sr.onnx", "--input-shape", "xx=1x4"});
  EXPECT_EQ(shape.exit_code, 2);
  EXPECT_NE(shape.err.find("--input-shape names 'xx'"), std::string::npos) << shape.err;
  EXPECT_NE(shape.err.find("(did you mean 'x'?)"), std::string::npos) << shape.err;
}

TEST(BranchCli, ATimingRunGivesBothPathsOfADataDependentIfAndTakesTheLongerByDefault) {
  // cascade_if: the then branch runs a second MatMul and a Relu after the first stage, the else branch is a
  // constant: the then path does all the else path's work and more.
  const std::string dir = temp_dir("branch_cli");
  auto run = [&](const std::string& name, std::vector<std::string> extra) {
    std::vector<std::string> args = {"run", kData + "cascade_if.onnx", "-q", "--report", dir + "/" + name};
    args.insert(args.end(), extra.begin(), extra.end());
    const CommandResult r = npusim(args);
    EXPECT_EQ(r.exit_code, 0) << name << ": " << r.err;
    return dir + "/" + name;
  };
  const std::string longest = run("longest.json", {});
  const std::string then_r = run("then.json", {"--branch", "then"});
  const std::string else_r = run("else.json", {"--branch", "else"});
  const std::string ifs = "r['branches']['ifs']";
  ASSERT_EQ(json_eval(longest, "len(" + ifs + ")"), "1");
  const int64_t then_cycles = std::stoll(json_eval(longest, ifs + "[0]['then_cycles']"));
  const int64_t else_cycles = std::stoll(json_eval(longest, ifs + "[0]['else_cycles']"));
  EXPECT_GT(then_cycles, else_cycles);
  EXPECT_EQ(json_eval(longest, "r['branches']['choice']"), "longest");
  EXPECT_EQ(json_eval(longest, ifs + "[0]['then_taken']"), "True");
  EXPECT_EQ(std::stoll(json_eval(longest, "r['total_cycles']")), then_cycles);
  EXPECT_EQ(std::stoll(json_eval(then_r, "r['total_cycles']")), then_cycles);
  EXPECT_EQ(json_eval(else_r, "r['branches']['choice']"), "else");
  EXPECT_EQ(json_eval(else_r, ifs + "[0]['then_taken']"), "False");
  EXPECT_EQ(std::stoll(json_eval(else_r, "r['total_cycles']")), else_cycles);
  // The paths are programs of their own: no host call for the If; the then path has the second stage.
  const std::string if_name = json_eval(longest, ifs + "[0]['name']");
  const std::string layers_of_if = "sum(1 for l in r['layers'] if l['name'].startswith('" + if_name + "/'))";
  EXPECT_EQ(json_eval(then_r, "sum(1 for l in r['layers'] if l['op'] == 'If')"), "0");
  EXPECT_NE(json_eval(then_r, layers_of_if), "0");
  EXPECT_EQ(json_eval(else_r, "sum(1 for l in r['layers'] if l['op'] == 'MatMul')"), "1");
}

TEST(BranchCli, BranchTakesOneOfItsChoicesAndOnlyInATimingRun) {
  const CommandResult bad = npusim({"run", kData + "cascade_if.onnx", "-q", "--branch", "both"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--branch 'both' is not one of longest, then, else"), std::string::npos) << bad.err;
  const CommandResult functional =
      npusim({"run", kData + "cascade_if.onnx", "-q", "--functional", "--branch", "then"});
  EXPECT_EQ(functional.exit_code, 2);
  EXPECT_NE(functional.err.find("--functional and --accuracy follow the data"), std::string::npos)
      << functional.err;
}

TEST(OpsCli, AShapeSizedByARuntimeIntegerInputIsTheUsersToFixWithInputValue) {
  // TopK along an axis of 4 with k a runtime input: the values' size is known only at run time.
  const std::string model = kData + "topk_runtime_k.onnx";
  const CommandResult open = npusim({"run", model, "-q"});
  EXPECT_EQ(open.exit_code, 2) << open.err;
  EXPECT_NE(open.err.find("depends on values known only at run time (the integer inputs 'k')"),
            std::string::npos)
      << open.err;
  EXPECT_NE(open.err.find("--input-value"), std::string::npos) << open.err;
  const CommandResult fixed = npusim({"run", model, "-q", "--input-value", "k=3"});
  EXPECT_EQ(fixed.exit_code, 0) << fixed.err;
}

}  // namespace
}  // namespace npusim::test
