// End-to-end tests of mapping files (--mapping-out, --mapping) on micro-models: a written file imposed
// again reproduces the cycles, a smaller imposed tile costs that layer cycles, bad files exit 2 naming
// the file and line.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/e2e/run_command.h"

namespace npusim::test {
namespace {

const std::string kConv = "conv:H=28,W=28,C=32,K=64,R=3,S=3,stride=1,pad=1";

// The name of the first matrix layer in a mapping file that --mapping-out wrote (one entry per line).
std::string matrix_layer(const std::string& mapping) {
  const size_t at = mapping.rfind("{name: ", mapping.find("placement: matrix")) + 7;
  return mapping.substr(at, mapping.find(',', at) - at);
}

// Runs kConv writing DIR/m.yaml and DIR/a.json; returns the name of its conv layer.
std::string baseline(const std::string& dir) {
  const CommandResult r =
      npusim({"run", kConv, "-q", "--mapping-out", dir + "/m.yaml", "--report", dir + "/a.json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return matrix_layer(read_file(dir + "/m.yaml"));
}

// Runs kConv under the one-line mapping `entry` (DIR/e.yaml), writing DIR/b.json.
CommandResult run_with(const std::string& dir, const std::string& entry) {
  write_file(dir + "/e.yaml", "layers:\n  - " + entry + "\n");
  return npusim({"run", kConv, "-q", "--mapping", dir + "/e.yaml", "--report", dir + "/b.json"});
}

std::string layer_cycles(const std::string& report, const std::string& layer) {
  return json_eval(report, "[l['cycles'] for l in r['layers'] if l['name'] == '" + layer + "'][0]");
}

TEST(MappingCli, WrittenMappingImposedAgainGivesTheSameCycles) {
  const std::string dir = temp_dir("mapping");
  CommandResult r =
      npusim({"run", kConv, "-q", "--mapping-out", dir + "/m.yaml", "--report", dir + "/a.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string text = read_file(dir + "/m.yaml");
  EXPECT_EQ(text.rfind("# npusim mapping", 0), 0u) << text;
  EXPECT_NE(text.find("# model: " + kConv), std::string::npos) << text;
  EXPECT_NE(text.find("tile_oh: "), std::string::npos) << text;
  r = npusim({"run", kConv, "-q", "--mapping", dir + "/m.yaml", "--report", dir + "/b.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json_eval(dir + "/a.json", "r['total_cycles']"), json_eval(dir + "/b.json", "r['total_cycles']"));
  // compile takes the same options and writes the same file.
  r = npusim({"compile", kConv, "-q", "-o", dir + "/p.npu", "--mapping", dir + "/m.yaml", "--mapping-out",
              dir + "/m2.yaml"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string again = read_file(dir + "/m2.yaml");
  EXPECT_EQ(text.substr(text.find("layers:")), again.substr(again.find("layers:")));
}

// A CONV tile is bounded by the scratchpads, not by 65,535 pixels (MatrixMapper::max_tile_pixels): on the
// scalesim preset a 298 x 298 output is one tile, written and imposed again; a GEMM tile stops at
// MATMUL's 65,535 rows.
TEST(MappingCli, AConvTileOfMoreThan65535PixelsIsWrittenAndImposedAgain) {
  const std::string dir = temp_dir("mapping-wide");
  // 32 output channels fill the preset's 32 columns: one output pixel a column (docs/backend.md, "Narrow
  // convs"), so the layer's one tile streams all 298 x 298 pixels.
  const std::string conv = "conv:H=300,W=300,C=4,K=32,R=3,S=3";
  const std::string config = std::string(NPUSIM_SOURCE_DIR) + "/configs/scalesim.yaml";
  CommandResult r = npusim(
      {"run", conv, "-c", config, "-q", "--mapping-out", dir + "/m.yaml", "--report", dir + "/a.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string text = read_file(dir + "/m.yaml");
  EXPECT_NE(text.find("tile_oh: 298, tile_ow: 298,"), std::string::npos) << text;
  r = npusim({"run", conv, "-c", config, "-q", "--mapping", dir + "/m.yaml", "--report", dir + "/b.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json_eval(dir + "/a.json", "r['total_cycles']"), json_eval(dir + "/b.json", "r['total_cycles']"));
  write_file(dir + "/g.yaml", "layers:\n  - {name: gemm, tile_m: 70000}\n");
  r = npusim({"run", "gemm:M=70000,N=8,K=8", "-c", config, "-q", "--mapping", dir + "/g.yaml"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("has more pixels (65535)"), std::string::npos) << r.err;
}

TEST(MappingCli, ASmallerImposedTileCostsThatLayerCycles) {
  const std::string dir = temp_dir("mapping");
  const std::string layer = baseline(dir);
  const CommandResult r = run_with(dir, "{name: " + layer + ", tile_oh: 2, tile_ow: 2, tile_n: 16}");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(
      json_eval(dir + "/b.json", "[l['mapping']['tile'] for l in r['layers'] if l['name'] == '" + layer +
                                     "'][0] == {'m': 4, 'k': 288, 'n': 16, 'oh': 2, 'ow': 2, 'elems': 0}"),
      "True");
  EXPECT_GT(std::stoll(layer_cycles(dir + "/b.json", layer)),
            std::stoll(layer_cycles(dir + "/a.json", layer)));
}

TEST(MappingCli, BadMappingFilesExit2NamingTheFileLineAndLayer) {
  const std::string dir = temp_dir("mapping");
  const std::string layer = baseline(dir);
  CommandResult r;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"layers:\n  - {name: " + layer + ", tile_nn: 8}\n",
       "bad.yaml:2:" + std::to_string(14 + layer.size()) + ": layer '" + layer +
           "': unknown key 'tile_nn' (did you mean 'tile_n'?)"},
      {"layers:\n  - {name: nope, tile_n: 8}\n",
       "bad.yaml:2:5: layer 'nope': no layer of the compiled model"},
      {"layers:\n  - {name: " + layer + ", tile_n: 300}\n",
       "bad.yaml:2:" + std::to_string(22 + layer.size()) + ": layer '" + layer +
           "': tile_n=300 is larger than the layer's 64 output channels"},
      // 28 x 28 x 64 fp32 sums are 196 KiB, twice for ping-pong; the edge preset has 128 KiB.
      {"layers:\n  - {name: " + layer + ", tile_oh: 28, tile_ow: 28, tile_c: 32, tile_n: 64}\n",
       "needs 392.0 KiB of sram.accumulator with its slots (a ping-pong pair each, one for an operand loaded "
       "once; "
       "have 128.0 KiB)"},
      {"layers:\n  - {name: " + layer + ", placement: vector}\n", "placement vector"},
      {"layers:\n  - {name: " + layer + ", tile_m: 8}\n", "tile_m applies to Gemm/MatMul layers"},
  };
  for (const auto& [text, message] : cases) {
    write_file(dir + "/bad.yaml", text);
    for (const std::string cmd : {"run", "compile"}) {
      std::vector<std::string> args = {cmd, kConv, "-q", "--mapping", dir + "/bad.yaml"};
      if (cmd == "compile") args.insert(args.end(), {"-o", dir + "/p.npu"});
      r = npusim(args);
      EXPECT_EQ(r.exit_code, 2) << cmd << ": " << text << r.err;
      EXPECT_NE(r.err.find(message), std::string::npos) << cmd << ": " << r.err;
      EXPECT_NE(r.err.find("bad.yaml:"), std::string::npos) << cmd << ": " << r.err;
    }
  }
  r = npusim({"run", kConv, "-q", "--mapping", dir + "/missing.yaml"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("missing.yaml"), std::string::npos) << r.err;
}

TEST(MappingCli, HostPlacementShowsWhatACpuFallbackCosts) {
  const std::string dir = temp_dir("mapping");
  const std::string layer = baseline(dir);
  const CommandResult r = run_with(dir, "{name: " + layer + ", placement: host}");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json_eval(dir + "/b.json", "[f['node'] for f in r['compile']['fallbacks']]"),
            "['" + layer + "']");
  EXPECT_NE(layer_cycles(dir + "/b.json", layer), layer_cycles(dir + "/a.json", layer));
}

// A layer's fusion group is recorded (`fused`: the model's nodes fused into it) and checked, not imposed:
// the passes decide fusion, so a file whose group differs from theirs (here: run with --no-fusion,
// which keeps only the folded BatchNormalization) exits 2 naming the layer and both groups.
TEST(MappingCli, FusionGroupsAreRecordedAndCheckedNotImposed) {
  const std::string dir = temp_dir("mapping_fused");
  CommandResult r =
      npusim({"run", "demo", "-q", "--mapping-out", dir + "/m.yaml", "--report", dir + "/a.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(read_file(dir + "/m.yaml").find("name: conv1, placement: matrix"), std::string::npos);
  EXPECT_NE(read_file(dir + "/m.yaml").find(", fused: [bn1, relu1]}"), std::string::npos)
      << read_file(dir + "/m.yaml");
  r = npusim({"run", "demo", "-q", "--mapping", dir + "/m.yaml", "--report", dir + "/b.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json_eval(dir + "/a.json", "r['total_cycles']"), json_eval(dir + "/b.json", "r['total_cycles']"));
  r = npusim({"run", "demo", "-q", "--no-fusion", "--mapping", dir + "/m.yaml"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("m.yaml:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("layer 'conv1': fused [bn1, relu1]: the compiler fused [bn1] into this layer"),
            std::string::npos)
      << r.err;
  write_file(dir + "/bad.yaml", "layers:\n  - {name: conv1, fused: 3}\n");
  r = npusim({"run", "demo", "-q", "--mapping", dir + "/bad.yaml"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("layer 'conv1': fused: expected a list of the model's node names"), std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace npusim::test
