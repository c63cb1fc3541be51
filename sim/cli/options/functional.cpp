// The functional option group of `run`: a functional run's inputs and outputs (--inputs, --outputs,
// --seed; --functional itself is in the outputs group, which exec shares).
#include <fmt/format.h>

#include "sim/cli/options/groups.h"

namespace npusim::sim::cli {

namespace po = boost::program_options;

GroupOptions functional_options(Options& opts) {
  FunctionalIo& io = opts.io;
  po::options_description d;
  d.add_options()("inputs", po::value(&io.inputs_dir)->value_name("DIR"),
                  "model inputs: DIR/NAME.npy, .pb or an image (default: random)")(
      "outputs", po::value(&io.outputs_dir)->value_name("DIR"), "write each model output to DIR/NAME.npy")(
      "seed", po::value(&io.seed)->value_name("N"),
      fmt::format("seed of the random inputs (default {})", FunctionalIo{}.seed).c_str());
  return {"Functional runs (--functional)", d};
}

}  // namespace npusim::sim::cli
