// The sweep's headline columns (sim/sweep/report_figures.h) against what the report writes: each column
// of the one declared list is filled from a report that has every section, with the value the report's
// fields give.
#include "sim/sweep/report_figures.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "tests/sim/rich_report.h"

namespace npusim::sim {
namespace {

// A section as the stages outside the simulator write it, for the columns that read its JSON.
std::shared_ptr<traces::ReportSection> json_section(std::string key, std::string json) {
  return std::make_shared<traces::JsonSection>(std::move(key), std::move(json));
}

TEST(ReportFigures, EveryColumnIsFilledFromAReportWithEverySection) {
  traces::Report r = test::rich_report();
  // What the compiler and the end-to-end stage add (sim/model, sim/e2e): a layer's mapping, the e2e section.
  r.layers[0].mapping.emplace();
  r.layers[0].mapping->sram_input_bytes = 1000;
  r.layers[0].mapping->sram_weight_bytes = 2000;
  r.layers[0].mapping->sram_accumulator_bytes = 500;
  r.layers[2].mapping.emplace();
  r.layers[2].mapping->sram_input_bytes = 4000;
  r.layers[2].mapping->sram_weight_bytes = 100;
  r.layers[2].mapping->sram_accumulator_bytes = 1;
  r.sections.push_back(
      json_section("e2e",
                   "{\"latency_ms\": 0.5, \"npu_share\": 0.25, \"stream\": {\"throughput_fps\": "
                   "2000.5, \"latency_p99_ms\": 0.75}}"));
  r.sections.push_back(
      json_section("multicore", "{\"latency_ms\": 1.5, \"throughput_per_s\": 1333.25, \"speedup\": 1.75}"));
  // sim/dynamic's sections (docs/dynamic.md): generation, and a request stream served by one policy.
  r.sections.push_back(
      json_section("generation",
                   "{\"ttft_ms\": 1.893, \"decode_ms\": {\"first\": 0.5, \"mean\": 0.5625, \"last\": "
                   "0.648, \"total\": 21.9}, \"tokens_per_s\": 40.25}"));
  r.sections.push_back(
      json_section("requests",
                   "{\"count\": 3, \"policies\": [{\"policy\": \"pad\", \"latency_ms\": {\"p50\": 13.5, "
                   "\"p95\": 26.75, \"p99\": 26.875, \"max\": 27, \"mean\": 17.5}, \"throughput_rps\": "
                   "34.25, \"padding_share\": 0.237, \"compile_events\": 0}]}"));
  const std::string path =
      (std::filesystem::temp_directory_path() /
       ("report_figures_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + ".json"))
          .string();
  std::ofstream(path) << traces::report_json(r);
  const std::map<std::string, std::string> m = read_metrics(path);
  std::filesystem::remove(path);
  const std::map<std::string, std::string> want = {
      {"total_cycles", "10000"},
      {"latency_ms", "0.01066666667"},  // 10 significant digits
      {"frequency_mhz", "937.5"},
      {"macs", "123456"},
      {"array_utilization", "0.0482265625"},
      {"precision_plan", "mixed: 1 fp16, 1 int8"},
      {"bound_cycles", "8450"},  // 7000 + 250 (the fused ReLU) + 1200
      {"unfused_bound_ratio", "0.845"},
      {"compute_cycles", "6000"},
      {"memory_cycles", "3000"},
      {"scheduling_cycles", "900"},
      {"host_cycles", "100"},
      {"matrix_cycles", "6500"},  // 5000 + 1500
      {"dram_bytes_read", "4096"},
      {"dram_bytes_written", "2048"},
      {"dram_bandwidth_gbps", "0.5734"},
      {"sram_peak_bytes", "4101"},  // the larger of 3500 and 4101
      {"energy_mj", "0.97375"},     // every component of both layers
      {"average_power_w", "91.40625"},
      {"peak_power_w", "120.75"},
      {"tops_per_w", "0.0026977"},
      {"area_mm2", "1.21875"},
      {"instructions", "59"},
      {"layers", "2"},  // the fused ReLU is not a layer of the program
      {"e2e_latency_ms", "0.5"},
      {"e2e_npu_share", "0.25"},
      {"stream_throughput_fps", "2000.5"},
      {"stream_latency_p99_ms", "0.75"},
      {"multicore_latency_ms", "1.5"},
      {"multicore_throughput_per_s", "1333.25"},
      {"multicore_speedup", "1.75"},
      {"ttft_ms", "1.893"},
      {"tpot_ms", "0.5625"},  // the mean decode step
      {"tokens_per_s", "40.25"},
      {"request_latency_p50_ms", "13.5"},
      {"request_latency_p95_ms", "26.75"},
      {"request_latency_p99_ms", "26.875"},
      {"request_latency_mean_ms", "17.5"},
      {"request_throughput_rps", "34.25"},
      {"padding_share", "0.237"},
      {"compile_events", "0"},
  };
  size_t serve_columns = 0;
  for (const MetricColumn& c : metric_columns()) {
    // A scenario's figures come from npusim serve's report only.
    if (std::string(c.column).rfind("serve_", 0) == 0) {
      ++serve_columns;
      EXPECT_FALSE(m.count(c.column)) << c.column << " filled from a run's report";
      continue;
    }
    ASSERT_TRUE(m.count(c.column)) << c.column << " is not filled";
    if (want.count(c.column)) {
      EXPECT_EQ(m.at(c.column), want.at(c.column)) << c.column;
    }
  }
  // energy_delay_mj_ms = energy x latency.
  EXPECT_NEAR(std::stod(m.at("energy_delay_mj_ms")), 0.97375 * 0.010666666666666666, 1e-11);  // 10 digits
  EXPECT_EQ(m.size(), metric_columns().size() - serve_columns);
}

TEST(ReportFigures, AScenarioReportFillsTheServeColumnsOverItsModels) {
  const std::string path = (std::filesystem::temp_directory_path() / "report_figures_serve.json").string();
  // npusim serve's report (sim/serve/scheduler.cpp): a model without requests has null latencies.
  std::ofstream(path)
      << "{\"scenario\": \"s.yaml\", \"span_cycles\": 100, \"npu_busy\": 0.5, \"models\": ["
         "{\"latency_p99_ms\": 2.5, \"throughput_per_s\": 10, \"deadline_misses\": 1, \"weight_reloads\": 0},"
         "{\"latency_p99_ms\": 4, \"throughput_per_s\": 5.5, \"deadline_misses\": 2, \"weight_reloads\": 3},"
         "{\"latency_p99_ms\": null, \"throughput_per_s\": 0, \"deadline_misses\": 0, \"weight_reloads\": "
         "0}]}";
  const std::map<std::string, std::string> m = read_metrics(path);
  std::filesystem::remove(path);
  const std::map<std::string, std::string> want = {
      {"serve_npu_busy", "0.5"},      {"serve_latency_p99_ms", "4"}, {"serve_throughput_per_s", "15.5"},
      {"serve_deadline_misses", "3"}, {"serve_weight_reloads", "3"},
  };
  EXPECT_EQ(m, want);
}

// `--shape-policy all` (three policies in one report) fills no request column rather than one policy's.
TEST(ReportFigures, RequestColumnsNeedExactlyOnePolicy) {
  traces::Report r;
  r.total_cycles = 7;
  r.sections.push_back(
      json_section("requests",
                   "{\"policies\": [{\"policy\": \"pad\", \"latency_ms\": {\"p50\": 1}}, {\"policy\": "
                   "\"dynamic\", \"latency_ms\": {\"p50\": 2}}]}"));
  const std::string path = (std::filesystem::temp_directory_path() / "report_figures_policies.json").string();
  std::ofstream(path) << traces::report_json(r);
  const std::map<std::string, std::string> m = read_metrics(path);
  std::filesystem::remove(path);
  EXPECT_EQ(m.count("request_latency_p50_ms"), 0u);
}

TEST(ReportFigures, ARunWithoutTheOptionalSectionsLeavesTheirColumnsEmpty) {
  traces::Report r;
  r.total_cycles = 7;
  const std::string path = (std::filesystem::temp_directory_path() / "report_figures_min.json").string();
  std::ofstream(path) << traces::report_json(r);
  const std::map<std::string, std::string> m = read_metrics(path);
  std::filesystem::remove(path);
  EXPECT_EQ(m.at("total_cycles"), "7");
  for (const char* c :
       {"precision_plan", "bound_cycles", "energy_mj", "area_mm2", "sram_peak_bytes", "e2e_latency_ms"})
    EXPECT_FALSE(m.count(c)) << c;
}

}  // namespace
}  // namespace npusim::sim
