// The multi-core option group of `run`: one model over the cores (--split).
#include "sim/cli/options/groups.h"

namespace npusim::sim::cli {

namespace po = boost::program_options;

GroupOptions multicore_options(Options& o) {
  po::options_description d;
  d.add_options()("split", po::value(&o.split)->value_name("none|batch|layers"),
                  "the model over the cores: by batch or by layers (default none)");
  return {"Multi-core (docs/multicore.md)", d};
}

}  // namespace npusim::sim::cli
