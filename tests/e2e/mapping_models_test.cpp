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
  // Every matrix layer was imposed, a conv fused with its reader through a line buffer by its band_loop
  // (docs/backend.md, "Conv -> pool fusion"): nothing was left to search, and no band loop's trial against
  // the layers apart was run again (a close one flipped in the run with the file). The layers fused into a
  // band loop have no candidates of their own (0).
  EXPECT_EQ(json_eval(imposed,
                      "{l['mapping']['candidates'] for l in r['layers'] if "
                      "l.get('mapping', {}).get('placement') == 'matrix' and l['mapping']['candidates']}"),
            "{1}");
  EXPECT_EQ(json_eval(imposed,
                      "{l['mapping']['tile_limit'].split(': ')[1] for l in r['layers'] if "
                      "l['name'] == l.get('fusion_group', '').split(':', 1)[-1]}"),
            "{'imposed by the mapping file'}");
  EXPECT_NE(
      json_eval(imposed,
                "len([l for l in r['layers'] if l.get('fusion_group', '').startswith('conv_dwconv:')])"),
      "0");
}

// The band loop's decision is in the file both ways: taken (band_loop on the conv, which the imposed run
// takes as given) and refused (the conv's own tiles, its depthwise conv's on the vector unit: layer by layer
// again). A band loop imposed where it cannot run is one sentence and exit 2.
TEST(MappingModels, MobileNetV2BandLoopsAreWrittenTakenAndRefusedAndABadOneIsNamed) {
  const std::string model = std::string(NPUSIM_MODELS_DIR) + "/mobilenet_v2.onnx";
  const std::string dir = temp_dir("mapping-band");
  CommandResult r = run_command({NPUSIM_BIN, "run", model, "-q", "--precision", "int8", "--mapping-out",
                                 dir + "/m.yaml", "--report", dir + "/a.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string text = read_file(dir + "/m.yaml");
  const auto count = [&](const std::string& what) {
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  };
  const size_t taken = count("band_loop: {rows: ");
  EXPECT_GT(taken, 0u) << text;
  EXPECT_EQ(std::to_string(taken), json_eval(dir + "/a.json",
                                             "len({l['fusion_group'] for l in r['layers'] if "
                                             "l.get('fusion_group', '').startswith('conv_dwconv:')})"));
  EXPECT_GT(count("placement: vector, tile_oh: "), 0u) << text;  // depthwise convs lowered on their own
  write_file(dir + "/bad.yaml",
             "layers:\n  - {name: /classifier/classifier.1/Gemm, band_loop: {rows: 4, project: true}}\n");
  r = run_command({NPUSIM_BIN, "run", model, "-q", "--precision", "int8", "--mapping", dir + "/bad.yaml"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("bad.yaml:2:"), std::string::npos) << r.err;
  EXPECT_NE(
      r.err.find("layer '/classifier/classifier.1/Gemm': band_loop: this Gemm cannot run in a band loop "
                 "with the layer after it here"),
      std::string::npos)
      << r.err;
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
