#include "sim/cli/options/common.h"

#include "sim/config/config_loader.h"

namespace npusim::sim::cli {

namespace po = boost::program_options;

po::options_description config_options(CommonOptions& o) {
  po::options_description d("Configuration");
  d.add_options()("config,c", po::value(&o.config)->value_name("FILE.yaml"),
                  "NPU configuration: a YAML file or a preset name from configs/ (default: the built-in edge "
                  "preset)")("set", po::value(&o.sets)->composing()->value_name("KEY=VALUE"),
                             "override one parameter, e.g. --set systolic_array.rows=64 (repeatable)");
  return d;
}

po::options_description output_options(CommonOptions& o) {
  po::options_description d("Simulation and output");
  d.add_options()("functional", po::bool_switch(&o.functional), "compute real values, not only timing")(
      "report", po::value(&o.report)->value_name("FILE.json"), "write the full report as JSON")(
      "html", po::value(&o.html)->value_name("FILE.html"),
      "write the report as one self-contained HTML page: summary, sortable layer table, timeline, roofline "
      "(docs/report.md)")("trace", po::value(&o.trace)->value_name("FILE.json"),
                          "write a Chrome/Perfetto trace-event file")(
      "trace-csv", po::value(&o.trace_csv)->value_name("FILE.csv"), "write the trace events as CSV")(
      "layers-csv", po::value(&o.layers_csv)->value_name("FILE.csv"),
      "write one row per layer: cycles, breakdown, MACs, DRAM bytes, bound, efficiency (docs/report.md)")(
      "top", po::value(&o.top)->value_name("N|all"), "layers the summary lists, slowest first (default 10)")(
      "quiet,q", po::bool_switch(&o.quiet), "print nothing but errors");
  return d;
}

isa::NpuConfig resolve_config(const CommonOptions& o) { return load_config(o.config, o.sets); }

}  // namespace npusim::sim::cli
