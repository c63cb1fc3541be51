#pragma once
// `npusim diff A.json B.json`: what differs between two run reports — model, configuration (every
// parameter the reports record), precision plan, the run's figures, and the layers matched by name,
// those that changed most first (docs/report.md, "Comparing two runs").
#include <cstddef>
#include <string>
#include <vector>

#include "sim/report/report_file.h"  // ReportReadError

namespace npusim::sim {

// The results table's rows, in order: paths of the report's declaration (traces/report_paths.h).
const std::vector<const char*>& diff_result_paths();

// The comparison as text (ReportReadError when a file is not a report); `top` layers that changed most
// (SIZE_MAX: every matched layer).
std::string diff_reports(const std::string& a_path, const std::string& b_path, size_t top);

}  // namespace npusim::sim
