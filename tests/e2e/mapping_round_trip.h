#pragma once
// The mapping-file round trip on an exported model (label models): the file --mapping-out writes, imposed
// with --mapping, reproduces total_cycles and every layer's cycles.
#include <gtest/gtest.h>

#include <string>

#include "tests/e2e/run_command.h"

namespace npusim::test {

// Runs `file` (an exported model) with --mapping-out, then with that file imposed; expects
// the same total and per-layer cycles. Returns the second run's report.
inline std::string expect_mapping_round_trip(const std::string& file, const std::string& precision) {
  const std::string model = std::string(NPUSIM_MODELS_DIR) + "/" + file;
  const std::string dir = temp_dir("mapping-models");
  CommandResult r = run_command({NPUSIM_BIN, "run", model, "-q", "--precision", precision, "--mapping-out",
                                 dir + "/m.yaml", "--report", dir + "/a.json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  r = run_command({NPUSIM_BIN, "run", model, "-q", "--precision", precision, "--mapping", dir + "/m.yaml",
                   "--report", dir + "/b.json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const std::string cycles = "r['total_cycles'], [l['cycles'] for l in r['layers']]";
  EXPECT_EQ(json_eval(dir + "/a.json", cycles), json_eval(dir + "/b.json", cycles));
  return dir + "/b.json";
}

}  // namespace npusim::test
