// The outputs option group: how the simulation runs and what it writes (--functional, --report, --html,
// the traces, --top, --quiet).
#include <fmt/format.h>

#include "sim/cli/options/groups.h"

namespace npusim::sim::cli {

namespace po = boost::program_options;

GroupOptions output_options(Options& opts) {
  CommonOptions& o = opts.common;
  po::options_description d;
  d.add_options()("functional", po::bool_switch(&o.functional), "compute real values, not only timing")(
      "report", po::value(&o.report)->value_name("FILE.json"), "write the full report as JSON")(
      "html", po::value(&o.html)->value_name("FILE.html"), "write the report as one HTML page")(
      "trace", po::value(&o.trace)->value_name("FILE.json"), "write a Chrome/Perfetto trace")(
      "trace-csv", po::value(&o.trace_csv)->value_name("FILE.csv"), "write the trace events as CSV")(
      "layers-csv", po::value(&o.layers_csv)->value_name("FILE.csv"), "write one row per layer")(
      "top", po::value(&o.top)->value_name("N|all"),
      fmt::format("layers the summary lists, slowest first (default {})", CommonOptions{}.top).c_str())(
      "quiet,q", po::bool_switch(&o.quiet), "print nothing but errors");
  return {"Outputs (docs/report.md)", d};
}

}  // namespace npusim::sim::cli
