// The machine option group: the NPU configuration (--config, --set).
#include "sim/cli/options/groups.h"
#include "sim/config/config_loader.h"

namespace npusim::sim::cli {

namespace po = boost::program_options;

GroupOptions machine_options(Options& opts) {
  CommonOptions& o = opts.common;
  po::options_description d;
  d.add_options()("config,c", po::value(&o.config)->value_name("FILE.yaml"),
                  "a YAML file or a preset of configs/ (default: edge)")(
      "set", po::value(&o.sets)->composing()->value_name("KEY=VALUE"),
      "override one parameter, e.g. systolic_array.rows=64 (repeatable)");
  return {"Machine (docs/config.md)", d};
}

isa::NpuConfig resolve_config(const CommonOptions& o) { return load_config(o.config, o.sets); }

}  // namespace npusim::sim::cli
