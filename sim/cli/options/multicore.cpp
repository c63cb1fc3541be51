// The multi-core option group of `run`: one model over the cores (--split).
#include "sim/cli/options/groups.h"

namespace npusim::sim::cli {

namespace po = boost::program_options;

po::options_description multicore_options(Options& o) {
  po::options_description d("Multi-core (docs/multicore.md)");
  d.add_options()("split", po::value(&o.split)->value_name("none|batch|layers"),
                  "on a multi-core NPU (cores > 1 in the config): none (default) = the model on one core; "
                  "batch = each core runs its share of --batch; layers = each core a stage of the layers; "
                  "the report's multicore section (docs/multicore.md)");
  return d;
}

}  // namespace npusim::sim::cli
