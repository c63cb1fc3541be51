// Mapping files on a real model (label models; needs the exported MobileNetV2 of tests/models): the
// file --mapping-out writes, imposed with --mapping, reproduces total_cycles and every layer's cycles.
#include <gtest/gtest.h>

#include <string>

#include "tests/e2e/run_command.h"

namespace npusim::test {
namespace {

TEST(MappingModels, MobileNetV2Int8WrittenMappingImposedAgainGivesTheSameCycles) {
  const std::string model = std::string(NPUSIM_MODELS_DIR) + "/mobilenet_v2.onnx";
  const std::string dir = temp_dir("mapping-models");
  CommandResult r = run_command({NPUSIM_BIN, "run", model, "-q", "--precision", "int8", "--mapping-out",
                                 dir + "/m.yaml", "--report", dir + "/a.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run_command({NPUSIM_BIN, "run", model, "-q", "--precision", "int8", "--mapping", dir + "/m.yaml",
                   "--report", dir + "/b.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string cycles = "r['total_cycles'], [l['cycles'] for l in r['layers']]";
  EXPECT_EQ(json_eval(dir + "/a.json", cycles), json_eval(dir + "/b.json", cycles));
  // Every matrix layer was imposed: nothing was left to search.
  EXPECT_EQ(json_eval(dir + "/b.json",
                      "{l['mapping']['candidates'] for l in r['layers'] if "
                      "l.get('mapping', {}).get('placement') == 'matrix'}"),
            "{1}");
}

}  // namespace
}  // namespace npusim::test
