// Reports on a real model (label models; needs the exported MobileNetV2 of tests/models): run and exec
// of its compiled program agree, and the trace's slices nest on every track.
#include <gtest/gtest.h>

#include <string>

#include "tests/e2e/run_command.h"

namespace npusim::test {
namespace {

const std::string kModel = std::string(NPUSIM_MODELS_DIR) + "/mobilenet_v2.onnx";

// The example: `run` reported 301 M MACs, `exec` of the same program 907 M (the zeros between
// the depthwise convs' groups). Both now count useful MACs; the slots are layers[].array_macs.
TEST(ReportsModels, MobileNetV2RunAndExecReportTheSameMacs) {
  const std::string dir = temp_dir("reports-models-macs");
  CommandResult r = run_command({NPUSIM_BIN, "compile", kModel, "-q", "-o", dir + "/m.npu"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run_command({NPUSIM_BIN, "exec", dir + "/m.npu", "-q", "--report", dir + "/exec.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run_command({NPUSIM_BIN, "run", kModel, "-q", "--report", dir + "/run.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string same = "r['total_cycles'], r['macs'], r['array_utilization'], r['precision']['utilization']";
  EXPECT_EQ(json_eval(dir + "/run.json", same), json_eval(dir + "/exec.json", same));
  EXPECT_EQ(json_eval(dir + "/exec.json", "r['macs'] == sum(l['macs'] for l in r['layers'])"), "True");
}

}  // namespace
}  // namespace npusim::test
