// npusim calibrate: fit a configuration's calibratable parameters to a board's measurements
// (sim/calibrate, docs/calibrate.md).
#include <stdexcept>
#include <string>
#include <vector>

#include "sim/calibrate/calibrate.h"
#include "sim/cli/commands/commands.h"
#include "sim/cli/files.h"
#include "sim/cli/options/common.h"

namespace npusim::sim::cli {

namespace po = boost::program_options;

int cmd_calibrate(Context& ctx, const Command& cmd) {
  CommonOptions o;
  std::string csv, output;
  calibrate::Options options;
  bool quiet = false;
  po::options_description d = config_options(o);
  po::options_description c("Calibration");
  c.add_options()("measured", po::value(&csv)->value_name("MEASURED.csv"),
                  "the measurements: columns model, layer, cycles or ms; optionally precision, batch, input_shape")(
      "output,o", po::value(&output)->value_name("CALIBRATED.yaml"), "write the calibrated configuration here")(
      "params", po::value(&options.only)->composing()->value_name("KEY"),
      "fit only this calibratable parameter, or those under this group (repeatable; default: every calibratable "
      "parameter the configuration uses)")("folds", po::value(&options.folds)->value_name("K"),
                                           "k of the cross-validation (default 5; 0: none)")(
      "iterations", po::value(&options.max_iterations)->value_name("N"),
      "at most N Levenberg-Marquardt iterations per fit (default 20)")("quiet,q", po::bool_switch(&quiet),
                                                                       "print nothing but errors");
  d.add(c);
  po::positional_options_description pos;
  pos.add("measured", 1);
  if (!parse(ctx, cmd, d, pos)) return kExitOk;
  if (csv.empty()) throw UsageError("calibrate needs a MEASURED.csv (see 'npusim calibrate --help')");
  if (output.empty()) throw UsageError("calibrate needs -o CALIBRATED.yaml (see 'npusim calibrate --help')");
  if (options.folds < 0) throw UsageError("--folds must not be negative");
  if (options.max_iterations < 1) throw UsageError("--iterations must be at least 1");
  const isa::NpuConfig config = resolve_config(o);
  calibrate::Calibration result;
  try {
    const calibrate::Predictor predictor(calibrate::read_measurements(csv));
    try {
      calibrate::calibratable(config, options.only);
    } catch (const std::invalid_argument& e) {
      throw UsageError(std::string("--params ") + e.what());
    }
    result = calibrate::calibrate(config, predictor, options);
    if (!quiet) ctx.out << calibrate::calibration_text(result, predictor);
  } catch (const calibrate::MeasurementError& e) {
    throw InputError(e.what());
  }
  write_output(output, calibrate::calibrated_yaml(result, ctx.command));
  return kExitOk;
}

}  // namespace npusim::sim::cli
