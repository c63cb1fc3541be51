#pragma once
// The headline figures a sweep takes from each point's report.json into its results table.
#include <yaml-cpp/yaml.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "traces/report.h"
#include "traces/report_paths.h"

namespace npusim::sim {

// A point's report read back: the simulator's typed report (sim/report/report_reader.h), its figures by
// path, and the JSON, for the top-level sections stages outside the simulator write (e2e, multicore,
// generation, requests; a scenario's report), which the typed reader does not read back.
struct PointReport {
  traces::Report report;
  std::map<std::string, traces::ReportFigure> figures;  // traces::report_figures(report)
  YAML::Node json;
};

// One headline column: its name and the figure it takes from a report, as the table shows it (none:
// the report has no such figure, e.g. energy of a run without it): the field at `path` of the report's
// declaration (traces/report_paths.h), or what `figure` computes from the report when `path` is null.
struct MetricColumn {
  const char* column;
  const char* path;
  std::optional<std::string> (*figure)(const PointReport&) = nullptr;
};
// The one declared list: results.csv / results.jsonl columns in this order (docs/sweeps.md).
const std::vector<MetricColumn>& metric_columns();

// Reads the headline figures (column -> text; absent = null); throws std::runtime_error when the
// report is not a report.
std::map<std::string, std::string> read_metrics(const std::string& report_path);

}  // namespace npusim::sim
