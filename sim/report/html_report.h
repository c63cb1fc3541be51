#pragma once
// The HTML report: one self-contained page (inline CSS, script and SVG; nothing fetched, no fonts) made
// from a run report's JSON, so `npusim run --html` and `npusim report REPORT.json --html` show the same
// view of the same data (docs/report.md, "The HTML report"): the summary, a sortable per-layer table, the
// timeline, the roofline, and the energy and accuracy sections when the report has them.
#include <string>

namespace npusim::sim {

// The page for the report JSON `json`; `name` names it in messages (the file, or the run's --html target).
// Every string taken from the report is escaped. Throws ReportReadError (sim/report/report_file.h) when
// `json` is not a report.
std::string html_report(const std::string& json, const std::string& name);

}  // namespace npusim::sim
