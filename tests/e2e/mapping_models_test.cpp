// Mapping files on a real model (label models; needs the exported MobileNetV2 of tests/models): the
// file --mapping-out writes, imposed with --mapping, reproduces total_cycles and every layer's cycles.
#include <gtest/gtest.h>

#include <string>

#include "tests/e2e/mapping_round_trip.h"
#include "tests/e2e/run_command.h"

namespace npusim::test {
namespace {

TEST(MappingModels, MobileNetV2Int8WrittenMappingImposedAgainGivesTheSameCycles) {
  const std::string imposed = expect_mapping_round_trip("mobilenet_v2.onnx", "int8");
  // Every matrix layer was imposed: nothing was left to search, but the band height of a conv fused with
  // its reader through a line buffer (docs/backend.md, "Conv -> depthwise conv fusion"), which a mapping
  // file does not impose (the search finds the same one: the cycles above are the same).
  EXPECT_EQ(json_eval(imposed,
                      "{l['mapping']['candidates'] for l in r['layers'] if "
                      "l.get('mapping', {}).get('placement') == 'matrix' and not "
                      "l.get('fusion_group', '').startswith(('conv_pool:', 'conv_dwconv:'))}"),
            "{1}");
  EXPECT_NE(
      json_eval(imposed,
                "len([l for l in r['layers'] if l.get('fusion_group', '').startswith('conv_dwconv:')])"),
      "0");
}

// Vector layers' tiles are searched by simulation (compiler/backend/vector/vector_tiling.h): a layer whose
// search kept a tile smaller than the scratchpad holds says why, with both simulated figures; its tile is
// in the mapping file; imposing the whole-SRAM tile instead gives that layer the whole tile back.
TEST(MappingModels, MobileNetV2VectorTilesAreSearchedWrittenAndImposed) {
  const std::string model = std::string(NPUSIM_MODELS_DIR) + "/mobilenet_v2.onnx";
  const std::string dir = temp_dir("mapping-vector");
  CommandResult r = run_command({NPUSIM_BIN, "run", model, "-q", "--precision", "fp16", "--mapping-out",
                                 dir + "/m.yaml", "--report", dir + "/a.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string pick =
      "[l for l in r['layers'] if l.get('mapping', {}).get('tile_limit', '').startswith('a smaller "
      "tile')][0]";
  const std::string name = json_eval(dir + "/a.json", pick + "['name']");
  const std::string reason = json_eval(dir + "/a.json", pick + "['mapping']['tile_limit']");
  const std::string elems = json_eval(dir + "/a.json", pick + "['mapping']['tile']['elems']");
  // "a smaller tile pipelines better: A cycles simulated against B with the whole-SRAM tile of W elements",
  // or, taken for its readers (vector_tiling.cpp's figure), "a smaller tile lets its readers (R cycles at
  // least) start earlier: its first tile stored at A cycles against B with the whole-SRAM tile of W ..."
  const auto number_after = [&](const std::string& word) {
    const size_t at = reason.find(word) + word.size();
    return std::stoll(reason.substr(at, reason.find(' ', at) - at));
  };
  const bool for_readers = reason.find("readers") != std::string::npos;
  EXPECT_LT(number_after(for_readers ? "stored at " : "better: "), number_after("against ")) << reason;
  const int64_t whole = number_after("tile of ");
  EXPECT_LT(std::stoll(elems), whole) << reason;
  EXPECT_NE(
      read_file(dir + "/m.yaml").find("{name: " + name + ", placement: vector, tile_elems: " + elems + "}"),
      std::string::npos);
  write_file(dir + "/w.yaml",
             "layers:\n  - {name: " + name + ", tile_elems: " + std::to_string(whole) + "}\n");
  r = run_command({NPUSIM_BIN, "run", model, "-q", "--precision", "fp16", "--mapping", dir + "/w.yaml",
                   "--report", dir + "/b.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string layer = "[l for l in r['layers'] if l['name'] == '" + name + "'][0]";
  EXPECT_EQ(json_eval(dir + "/b.json", layer + "['mapping']['tile']['elems']"), std::to_string(whole));
  EXPECT_EQ(json_eval(dir + "/b.json", layer + "['mapping']['tile_limit']"), "imposed by the mapping file");
  EXPECT_LT(std::stoll(json_eval(dir + "/b.json", layer + "['instructions']")),
            std::stoll(json_eval(dir + "/a.json", pick + "['instructions']")));
}

}  // namespace
}  // namespace npusim::test
