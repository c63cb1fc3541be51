#pragma once
// The headline figures a sweep takes from each point's report.json into its results table.
#include <map>
#include <string>
#include <vector>

namespace npusim::sim {

// The headline columns taken from each point's report: column name and dotted path in the report JSON
// (or a '#' name for a figure derived from several fields).
struct MetricColumn {
  const char* column;
  const char* path;
};
const std::vector<MetricColumn>& metric_columns();

// Reads the headline figures (column -> the report's text; absent = null); throws std::runtime_error
// when the report is not a report.
std::map<std::string, std::string> read_metrics(const std::string& report_path);

}  // namespace npusim::sim
