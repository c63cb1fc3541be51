// A saved report read back into the typed traces::Report (sim/report/report_reader.h): the reader reads
// every field the writer writes, so writing what it read gives the same bytes.
#include "sim/report/report_reader.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>

#include "sim/cli/diff.h"
#include "sim/report/report_file.h"
#include "tests/sim/rich_report.h"
#include "traces/report_paths.h"

namespace npusim::sim {
namespace {

TEST(ReportReader, WritingWhatItReadGivesTheSameBytes) {
  const std::string json = traces::report_json(test::rich_report());
  const traces::Report back = read_report(parse_report(json, "rich.json"));
  EXPECT_EQ(traces::report_json(back), json);
  // The figures the writer derives come out of the typed fields again.
  ASSERT_TRUE(traces::precision_figures(back));
  EXPECT_EQ(traces::precision_figures(back)->plan, "mixed: 1 fp16, 1 int8");
  EXPECT_EQ(back.layers[0].fused_bound_cycles, 250u);
  EXPECT_EQ(back.layers[0].compiled_bound_cycles, std::optional<uint64_t>(7100));
}

TEST(ReportReader, AMinimalReportReadsWithoutTheOptionalSections) {
  traces::Report r;
  r.total_cycles = 7;
  const std::string json = traces::report_json(r);
  const traces::Report back = read_report(parse_report(json, "min.json"));
  EXPECT_EQ(back.total_cycles, 7u);
  EXPECT_FALSE(back.energy);
  EXPECT_FALSE(back.run);
  EXPECT_EQ(traces::report_json(back), json);
}

// A hand-made or older report without a whole section (dma, sram, host, array): its figures read as 0,
// as an absent member does, instead of failing on the section.
TEST(ReportReader, AnAbsentSectionReadsAsZeros) {
  const traces::Report back = read_report(
      parse_report("{\"total_cycles\": 9, \"layers\": [{\"name\": \"a\", \"cycles\": 9}]}", "cut.json"));
  EXPECT_EQ(back.total_cycles, 9u);
  EXPECT_EQ(back.dma.transfers, 0u);
  EXPECT_EQ(back.host.calls, 0u);
  EXPECT_EQ(back.array_rows, 0);
  ASSERT_EQ(back.layers.size(), 1u);
  EXPECT_EQ(back.layers[0].cycles, 9u);
  EXPECT_EQ(back.layers[0].breakdown.total(), 0u);
}

// layers[].placement is read as traces::LayerPlacement: the three values the writer spells, nothing else.
TEST(ReportReader, ALayerPlacementIsOneOfNpuHostFused) {
  const traces::Report back = read_report(parse_report(traces::report_json(test::rich_report()), "r.json"));
  EXPECT_TRUE(std::any_of(back.layers.begin(), back.layers.end(), [](const traces::LayerReport& l) {
    return l.placement == traces::LayerPlacement::kFused;
  }));
  std::string json = traces::report_json(test::rich_report());
  const std::string from = "\"placement\": \"fused\"";
  ASSERT_NE(json.find(from), std::string::npos);
  json.replace(json.find(from), from.size(), "\"placement\": \"matrix\"");
  try {
    read_report(parse_report(json, "bad.json"));
    FAIL() << "no error";
  } catch (const ReportReadError& e) {
    EXPECT_EQ(std::string(e.what()), "the report's 'placement' is 'matrix', not npu, host or fused");
  }
}

TEST(ReportReader, AFieldOfTheWrongTypeIsAReportReadErrorNamingIt) {
  std::string json = traces::report_json(test::rich_report());
  const std::string from = "\"macs\": 123456";
  json.replace(json.find(from), from.size(), "\"macs\": \"many\"");
  try {
    read_report(parse_report(json, "bad.json"));
    FAIL() << "no error";
  } catch (const ReportReadError& e) {
    EXPECT_NE(std::string(e.what()).find("'macs'"), std::string::npos) << e.what();
  }
}

// The reader walks the same declaration as the writer: an absent object is skipped, the rest still read.
TEST(ReportReader, AnAbsentObjectBeforeAListLeavesTheListReadable) {
  const traces::Report back = read_report(
      parse_report("{\"total_cycles\": 9, \"energy\": null, \"units\": {\"matrix\": {\"busy\": 4}}, "
                   "\"layers\": [{\"name\": \"a\", \"placement\": \"host\"}, {\"name\": \"b\"}], \"sim\": "
                   "{\"instructions\": 3}}",
                   "partial.json"));
  ASSERT_EQ(back.units.size(), 1u);
  EXPECT_EQ(back.units[0].name, "matrix");
  EXPECT_EQ(back.units[0].busy, 4u);
  ASSERT_EQ(back.layers.size(), 2u);
  EXPECT_EQ(back.layers[0].placement, traces::LayerPlacement::kHost);
  EXPECT_EQ(back.layers[1].name, "b");
  EXPECT_EQ(back.sim.instructions, 3u);
}

// `npusim diff` takes its results table from the report's declaration by path: each path names a field.
TEST(ReportReader, EveryFigureDiffComparesIsADeclaredField) {
  const std::map<std::string, traces::ReportFigure> figures = traces::report_figures(test::rich_report());
  for (const char* path : diff_result_paths()) EXPECT_TRUE(figures.count(path)) << path;
  EXPECT_EQ(figures.at("breakdown.memory").text, "3000");
  EXPECT_EQ(figures.at("precision.plan").text, "mixed: 1 fp16, 1 int8");
  EXPECT_EQ(figures.at("dram.avg_bandwidth_gbps").text, "0.5734");
  EXPECT_EQ(figures.count("layers[].cycles"), 0u);  // lists are not figures of the run
}

}  // namespace
}  // namespace npusim::sim
