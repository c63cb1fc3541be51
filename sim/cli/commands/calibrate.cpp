// npusim calibrate: fit a configuration's calibratable parameters to a board's measurements
// (sim/calibrate, docs/calibrate.md).
#include <fmt/format.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "sim/calibrate/calibrate.h"
#include "sim/cli/commands/commands.h"
#include "sim/cli/files.h"
#include "sim/cli/options/groups.h"

namespace npusim::sim::cli {

namespace po = boost::program_options;

int cmd_calibrate(Context& ctx, const Command& cmd) {
  Options opts;
  const CommonOptions& o = opts.common;
  std::string csv, output;
  calibrate::Options options;
  bool quiet = false;
  po::options_description d("Options");
  d.add_options()(
      "measured", po::value(&csv)->value_name("MEASURED.csv"),
      "the measurements: columns model, layer, cycles or ms; optionally precision, batch, input_shape")(
      "output,o", po::value(&output)->value_name("CALIBRATED.yaml"),
      "write the calibrated configuration here")("params",
                                                 po::value(&options.only)->composing()->value_name("KEY"),
                                                 "fit only this calibratable parameter, or those under this "
                                                 "group (repeatable; default: every calibratable "
                                                 "parameter the configuration uses)")(
      "folds", po::value(&options.folds)->value_name("K"),
      fmt::format("k of the cross-validation (default {}; 0: none)", calibrate::Options{}.folds).c_str())(
      "iterations", po::value(&options.max_iterations)->value_name("N"),
      fmt::format("at most N Levenberg-Marquardt iterations per fit (default {})",
                  calibrate::Options{}.max_iterations)
          .c_str())("restarts", po::value(&options.restart_passes)->value_name("N"),
                    fmt::format("after a fit stalls, at most N passes of descents restarted from its best "
                                "point, each parameter in turn at 1.25x and 0.8x (default {}; 0: none)",
                                calibrate::Options{}.restart_passes)
                        .c_str())("quiet,q", po::bool_switch(&quiet), "print nothing but errors");
  po::positional_options_description pos;
  pos.add("measured", 1);
  if (!parse(ctx, cmd, d, pos, &opts)) return kExitOk;
  if (csv.empty()) throw UsageError("calibrate needs a MEASURED.csv (see 'npusim calibrate --help')");
  if (output.empty()) throw UsageError("calibrate needs -o CALIBRATED.yaml (see 'npusim calibrate --help')");
  check_input_file("--measured", csv);
  if (options.folds < 0) throw UsageError("--folds must not be negative");
  if (options.max_iterations < 1) throw UsageError("--iterations must be at least 1");
  if (options.restart_passes < 0) throw UsageError("--restarts must not be negative");
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
