// The machine option group: the NPU configuration (--config, --set).
#include "sim/cli/options/groups.h"
#include "sim/config/config_loader.h"

namespace npusim::sim::cli {

namespace po = boost::program_options;

po::options_description machine_options(Options& opts) {
  CommonOptions& o = opts.common;
  po::options_description d("Configuration");
  d.add_options()("config,c", po::value(&o.config)->value_name("FILE.yaml"),
                  "NPU configuration: a YAML file or a preset name from configs/ (default: the built-in edge "
                  "preset)")("set", po::value(&o.sets)->composing()->value_name("KEY=VALUE"),
                             "override one parameter, e.g. --set systolic_array.rows=64 (repeatable)");
  return d;
}

isa::NpuConfig resolve_config(const CommonOptions& o) { return load_config(o.config, o.sets); }

}  // namespace npusim::sim::cli
