// Mapping files (sim/mapping/mapping_file.h): what a file says is what the compiler gets, every mistake
// in its shape is reported with file:line:column and the layer, and what is written reads back as the
// same values.
#include "sim/mapping/mapping_file.h"

#include <gtest/gtest.h>

#include <fstream>
#include <optional>
#include <sstream>
#include <string>

namespace npusim::sim {
namespace {

using compiler::LayerMapping;
using compiler::LoopOrder;
using compiler::Placement;

// The messages of reading `text` as m.yaml (empty when it reads).
std::vector<std::string> errors_of(const std::string& text) {
  try {
    read_mapping_text(text, "m.yaml");
  } catch (const MappingFileError& e) {
    return e.messages();
  }
  return {};
}

TEST(MappingFile, ReadsEveryKeyAndWhereItsValueIs) {
  const compiler::MappingOverrides m = read_mapping_text(
      "layers:\n"
      "  - {name: /conv1/Conv, placement: matrix, tile_oh: 8, tile_ow: 56, tile_c: 3, tile_n: 64,\n"
      "     loop_order: channel_outer}\n"
      "  - name: dw\n"
      "    group_block: 4\n"
      "  - {name: mm, tile_m: 32, tile_k: 64, tile_n: 16}\n"
      "  - {name: /relu/Relu, placement: host}\n",
      "m.yaml");
  ASSERT_EQ(m.layers.size(), 4u);
  const LayerMapping& c = *m.find("/conv1/Conv");
  EXPECT_EQ(c.placement, Placement::kNpuMatrix);
  EXPECT_EQ(c.tile_oh, 8);
  EXPECT_EQ(c.tile_ow, 56);
  EXPECT_EQ(c.tile_c, 3);
  EXPECT_EQ(c.tile_n, 64);
  EXPECT_EQ(c.loop_order, LoopOrder::kChannelOuter);
  EXPECT_FALSE(c.group_block);
  EXPECT_EQ(c.at("tile_n"), "m.yaml:2:88");
  EXPECT_EQ(c.at("loop_order"), "m.yaml:3:18");
  EXPECT_EQ(c.at("tile_m"), "m.yaml:2:5");  // not set: the entry's position
  EXPECT_EQ(m.find("dw")->group_block, 4);
  EXPECT_EQ(m.find("dw")->at("group_block"), "m.yaml:5:18");
  EXPECT_EQ(m.find("mm")->tile_k, 64);
  EXPECT_EQ(m.find("/relu/Relu")->placement, Placement::kHost);
  EXPECT_FALSE(m.find("/relu/Relu")->has_tiling());
}

TEST(MappingFile, UnknownKeySuggestsTheClosestOne) {
  EXPECT_EQ(
      errors_of("layers:\n  - {name: c, tile_nn: 8}\n"),
      std::vector<std::string>{"m.yaml:2:15: layer 'c': unknown key 'tile_nn' (did you mean 'tile_n'?)"});
  EXPECT_EQ(errors_of("layer:\n  - {name: c}\n"),
            std::vector<std::string>{"m.yaml:1:1: unknown key 'layer' (did you mean 'layers'?)"});
}

TEST(MappingFile, BadValuesNameTheFileLineLayerAndWhatIsExpected) {
  EXPECT_EQ(errors_of("layers:\n  - {name: c, tile_n: 8.5}\n"),
            std::vector<std::string>{"m.yaml:2:23: layer 'c': tile_n: expected an integer"});
  EXPECT_EQ(errors_of("layers:\n  - {name: c, placement: npu}\n"),
            std::vector<std::string>{
                "m.yaml:2:26: layer 'c': placement: expected one of matrix, vector, free, host"});
  EXPECT_EQ(errors_of("layers:\n  - {name: c, loop_order: n_outer}\n"),
            std::vector<std::string>{"m.yaml:2:27: layer 'c': loop_order: expected spatial_outer, "
                                     "channel_outer, input_resident or groups_inner"});
  EXPECT_EQ(errors_of("layers:\n  - {tile_n: 8}\n"),
            std::vector<std::string>{"m.yaml:2:5: expected an entry {name: NODE, KEY: VALUE, ...}"});
}

// A LayerNorm's trial against its GEMM's loads (`in_loads`): written both ways and read back as written; a
// value that is not true or false is one message naming the line and the layer.
TEST(MappingFile, ALayerNormInItsGemmsLoadsIsWrittenBothWaysAndReadBack) {
  std::vector<compiler::LayerPlan> layers(2);
  layers[0].chosen.name = "ln_in_loads";
  layers[0].chosen.in_loads = true;
  layers[1].chosen.name = "ln_apart";
  layers[1].chosen.in_loads = false;
  const std::string text = mapping_text(layers, {});
  EXPECT_NE(text.find("  - {name: ln_in_loads, in_loads: true}\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  - {name: ln_apart, in_loads: false}\n"), std::string::npos) << text;
  const compiler::MappingOverrides back = read_mapping_text(text, "w.yaml");
  ASSERT_TRUE(back.find("ln_in_loads") && back.find("ln_apart")) << text;
  EXPECT_EQ(back.find("ln_in_loads")->in_loads, std::optional<bool>(true));
  EXPECT_EQ(back.find("ln_apart")->in_loads, std::optional<bool>(false));
  EXPECT_EQ(errors_of("layers:\n  - {name: ln, in_loads: 2}\n"),
            std::vector<std::string>{"m.yaml:2:26: layer 'ln': in_loads: expected true or false"});
}

// A conv's band loop (compiler::BandLoop): written on one line, read back with every value; a value of
// the wrong kind, a missing rows, an unknown key are each one message naming the line and the layer.
TEST(MappingFile, ABandLoopIsWrittenAndReadBackAndItsMistakesNamed) {
  std::vector<compiler::LayerPlan> layers(2);
  LayerMapping& a = layers[0].chosen;
  a.name = "conv";
  a.placement = Placement::kNpuMatrix;
  a.band_loop = compiler::BandLoop{7, 10, true, false, true};
  LayerMapping& b = layers[1].chosen;
  b.name = "stem";
  b.band_loop = compiler::BandLoop{14, std::nullopt, false, std::nullopt, std::nullopt};
  const std::string text = mapping_text(layers, {});
  EXPECT_NE(text.find("{name: conv, placement: matrix, band_loop: {rows: 7, buffer_rows: 10, resident: true, "
                      "pieces: false, project: true}}"),
            std::string::npos)
      << text;
  const compiler::MappingOverrides back = read_mapping_text(text, "w.yaml");
  for (const compiler::LayerPlan& p : layers) {
    const compiler::BandLoop& want = *p.chosen.band_loop;
    const LayerMapping* r = back.find(p.chosen.name);
    ASSERT_TRUE(r && r->band_loop) << text;
    EXPECT_EQ(r->band_loop->rows, want.rows);
    EXPECT_EQ(r->band_loop->buffer_rows, want.buffer_rows);
    EXPECT_EQ(r->band_loop->resident, want.resident);
    EXPECT_EQ(r->band_loop->pieces, want.pieces);
    EXPECT_EQ(r->band_loop->project, want.project);
  }
  const std::string expected =
      "band_loop: expected {rows: N, buffer_rows: N, resident: true|false, pieces: true|false, project: "
      "true|false} (rows required, each at least 1)";
  EXPECT_EQ(errors_of("layers:\n  - {name: c, band_loop: 7}\n"),
            std::vector<std::string>{"m.yaml:2:26: layer 'c': " + expected});
  EXPECT_EQ(errors_of("layers:\n  - {name: c, band_loop: {buffer_rows: 9}}\n"),
            std::vector<std::string>{"m.yaml:2:26: layer 'c': " + expected});
  EXPECT_EQ(errors_of("layers:\n  - {name: c, band_loop: {rows: 0}}\n"),
            std::vector<std::string>{"m.yaml:2:26: layer 'c': " + expected});
  EXPECT_EQ(errors_of("layers:\n  - {name: c, band_loop: {rows: 4, resident: maybe}}\n"),
            std::vector<std::string>{"m.yaml:2:26: layer 'c': " + expected});
  EXPECT_EQ(errors_of("layers:\n  - {name: c, band_loop: {rows: 4, piece: true}}\n"),
            std::vector<std::string>{
                "m.yaml:2:26: layer 'c': band_loop: unknown key 'piece' (did you mean 'pieces'?)"});
}

TEST(MappingFile, ASecondEntryForALayerNamesBothLines) {
  EXPECT_EQ(errors_of("layers:\n  - {name: c, tile_n: 8}\n  - {name: c, tile_n: 16}\n"),
            std::vector<std::string>{
                "m.yaml:3:5: layer 'c': a second entry for the layer (the first is at m.yaml:2:5)"});
}

TEST(MappingFile, EveryProblemIsReportedAtOnce) {
  EXPECT_EQ(errors_of("layers:\n  - {name: a, tile_q: 1}\n  - {name: b, tile_n: x}\n").size(), 2u);
}

TEST(MappingFile, SyntaxErrorNamesTheLine) {
  const std::vector<std::string> e = errors_of("layers:\n  - {name: c, tile_n: 8\n");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].rfind("m.yaml:3:", 0), 0u) << e[0];
}

TEST(MappingFile, MissingFileIsAnError) {
  EXPECT_THROW(read_mapping_file("/nonexistent/m.yaml"), MappingFileError);
}

TEST(MappingFile, WhatIsWrittenReadsBackAsTheSameValuesUnderItsHeader) {
  std::vector<compiler::LayerPlan> layers(3);
  LayerMapping& a = layers[0].chosen;
  a.name = "/features/features.1/conv/conv.0/conv.0.0/Conv";
  a.placement = Placement::kNpuMatrix;
  a.group_block = 8, a.tile_oh = 4, a.tile_ow = 112, a.tile_c = 32, a.tile_n = 32;
  a.loop_order = LoopOrder::kSpatialOuter;
  LayerMapping& b = layers[1].chosen;
  b.name = "odd: name, {with} [yaml] #chars";
  b.placement = Placement::kHost;
  LayerMapping& c = layers[2].chosen;
  c.name = "mm";
  c.placement = Placement::kNpuMatrix;
  c.tile_m = 128, c.tile_k = 64, c.tile_n = 256, c.loop_order = LoopOrder::kChannelOuter;
  const std::string text = mapping_text(layers, {"model: m.onnx", "precision: int8"});
  EXPECT_EQ(text.rfind("# model: m.onnx\n# precision: int8\n", 0), 0u) << text;
  const compiler::MappingOverrides back = read_mapping_text(text, "w.yaml");
  ASSERT_EQ(back.layers.size(), 3u) << text;
  for (const compiler::LayerPlan& p : layers) {
    const LayerMapping* r = back.find(p.chosen.name);
    ASSERT_TRUE(r) << p.chosen.name << "\n" << text;
    EXPECT_EQ(r->placement, p.chosen.placement);
    for (const compiler::TileKey& k : compiler::tile_keys())
      EXPECT_EQ(r->*k.field, p.chosen.*k.field) << k.key;
    EXPECT_EQ(r->loop_order, p.chosen.loop_order);
  }
  // One line per layer.
  EXPECT_NE(text.find("\n  - {name: mm, placement: matrix, tile_m: 128, tile_k: 64, tile_n: 256, loop_order: "
                      "channel_outer}\n"),
            std::string::npos)
      << text;
}

}  // namespace
}  // namespace npusim::sim

namespace npusim::sim {
namespace {

TEST(MappingFile, DocsDescribeEveryKey) {
  std::ifstream in(std::string(NPUSIM_SOURCE_DIR) + "/docs/backend.md");
  std::stringstream s;
  s << in.rdbuf();
  const std::string docs = s.str();
  const size_t section = docs.find("## Mapping files");
  ASSERT_NE(section, std::string::npos);
  for (const compiler::TileKey& k : compiler::tile_keys()) {
    EXPECT_NE(docs.find("`" + std::string(k.key) + "`", section), std::string::npos) << k.key;
  }
  for (const char* key : {"`name`", "`placement`", "`loop_order`", "`band_loop`", "`in_loads`"}) {
    EXPECT_NE(docs.find(key, section), std::string::npos) << key;
  }
}

}  // namespace
}  // namespace npusim::sim
