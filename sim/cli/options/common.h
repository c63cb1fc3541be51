#pragma once
// The option groups every simulating command shares: the configuration (--config, --set) and the
// simulation's outputs (--report, --html, --trace, ...).
#include <boost/program_options.hpp>
#include <string>
#include <vector>

#include "isa/machine/config.h"

namespace npusim::sim::cli {

// Options every simulating command shares.
struct CommonOptions {
  std::string config;
  std::vector<std::string> sets;
  std::string report;
  std::string html;
  std::string trace;
  std::string trace_csv;
  std::string layers_csv;
  std::string top = "10";  // --top N|all
  bool quiet = false;
  bool functional = false;
};

boost::program_options::options_description config_options(CommonOptions& o);
boost::program_options::options_description output_options(CommonOptions& o);

// The configuration --config and --set describe.
isa::NpuConfig resolve_config(const CommonOptions& o);

}  // namespace npusim::sim::cli
