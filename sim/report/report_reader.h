#pragma once
// A saved run report read back into the typed traces::Report the simulator wrote it from, so readers
// (the sweep's results table) take figures from its fields and from the functions that wrote them
// (traces::precision_figures, model_bound_cycles, ...) instead of from string paths into the JSON.
#include <yaml-cpp/yaml.h>

#include "traces/report.h"

namespace npusim::sim {

// Every field of the report's declaration (traces::Report::visit) read back:
// report_json(read_report(parse(report_json(r)))) gives report_json's bytes again for a report without
// `sections` (the top-level sections stages outside the simulator add, kept as their JSON: read those from
// the node). Derived figures are not read (the functions that wrote them compute them again); layers'
// fused_bound_cycles are rebuilt from the fused nodes' bounds. `root` is a report parse_report accepted;
// throws ReportReadError (sim/report/report_file.h) when a field has the wrong type.
traces::Report read_report(const YAML::Node& root);

}  // namespace npusim::sim
