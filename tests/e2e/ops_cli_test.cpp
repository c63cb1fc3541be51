// npusim ops MODEL: a model's support summary, and --input-value folding control flow, as a user runs them.
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

}  // namespace
}  // namespace npusim::test
