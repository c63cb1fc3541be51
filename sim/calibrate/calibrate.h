#pragma once
// `npusim calibrate`: fits the calibratable parameters of a configuration (isa::Param::calibrate) to a
// board's measurements by least squares on the relative error of simulated runs, and estimates by k-fold
// cross-validation how well the fitted configuration predicts measurements it was not fitted to.
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "isa/machine/config.h"
#include "isa/program.h"
#include "sim/calibrate/measurements.h"

namespace npusim::sim::calibrate {

// One parameter the fit may move.
struct Parameter {
  std::string path;  // "dma.setup_cycles"
  std::string unit;
  bool integer = false;
  double min = 0, max = 0;  // the declaration's calibration range
};

// The calibratable parameters of `c` the configuration uses (not those unused_reason() rejects), in
// declaration order. `only` (empty: all) keeps those whose path is one of its entries or lies under one
// (e.g. "vector.ops.relu"); an entry that selects no calibratable parameter throws std::invalid_argument
// naming it.
std::vector<Parameter> calibratable(const isa::NpuConfig& c, const std::vector<std::string>& only = {});

double get(const isa::NpuConfig& c, const Parameter& p);
// `c` with `p` set to `v` (rounded for integers; within its declared range).
isa::NpuConfig with(isa::NpuConfig c, const Parameter& p, double v);

// Predicts the measured rows' figures in cycles: each distinct model (with its precision, batch and input
// shape) compiled once, as `npusim run` does, with the configuration of the first prediction, and that
// one program simulated (timing only) under every configuration asked for. The board ran one program
// whatever its timing parameters are; recompiling per configuration would let the mapping search re-tile
// as the fit moves them, which makes the objective jump (docs/calibrate.md). Throws MeasurementError
// naming the row's file:line for a model that cannot be read or compiled and for a layer the report does
// not have.
class Predictor {
 public:
  explicit Predictor(std::vector<Measurement> rows);
  const std::vector<Measurement>& rows() const { return rows_; }
  // A row's measured figure in cycles (ms at the configuration's clock).
  double measured_cycles(size_t row, const isa::NpuConfig& c) const;
  std::vector<double> predict(const isa::NpuConfig& c) const;
  // The rows whose index modulo `folds` is (held_out) or is not `fold`, with the programs compiled so far.
  Predictor fold(int folds, int fold, bool held_out) const;
  int simulations() const { return simulations_; }

 private:
  using Key = std::tuple<std::string, std::string, int64_t, std::vector<std::string>>;
  std::vector<Measurement> rows_;
  std::map<Key, std::vector<size_t>> groups_;     // model runs -> the rows they predict
  mutable std::map<Key, isa::Program> programs_;  // each model's program, compiled at the first prediction
  mutable int simulations_ = 0;
};

struct Options {
  std::vector<std::string> only;  // Parameter selection (calibratable())
  int folds = 5;                  // k of the cross-validation (at most the rows; < 2: none)
  int max_iterations = 20;
  int restart_passes = 3;  // FitOptions::restart_passes: passes of restarted descents after a stall
};

struct Move {
  Parameter parameter;
  double before = 0, after = 0;
  bool measured = true;  // false: no measured row depends on it; left as it was
};

// What calibrate() found.
struct Calibration {
  isa::NpuConfig config;
  std::vector<Move> moves;
  std::vector<double> measured, before, after;  // per row, cycles
  // k-fold cross-validation: each row's relative error predicted by the fit on the other folds, and
  // the same rows' error under the uncalibrated configuration.
  int folds = 0;
  std::vector<double> held_out_error;
  int iterations = 0, simulations = 0;
};

// Fits the parameters to the rows of `predictor`, starting from `start`.
Calibration calibrate(const isa::NpuConfig& start, const Predictor& predictor, const Options& options);

// Mean |relative error| of predictions against measurements, and the half-width of its 95% interval
// (normal approximation, 1.96 standard errors; 0 for one row).
struct ErrorSummary {
  double mean = 0, half_width = 0;
};
ErrorSummary summarize(const std::vector<double>& relative_errors);
std::vector<double> relative_errors(const std::vector<double>& predicted,
                                    const std::vector<double>& measured);

// The calibrated configuration as a YAML file `npusim run -c` loads, headed by a comment block: how it was
// made (`command`), what moved from what to what and by how much, the error before and after and the
// cross-validated error.
std::string calibrated_yaml(const Calibration& c, const std::string& command);

// The per-row table and the summary `npusim calibrate` prints.
std::string calibration_text(const Calibration& c, const Predictor& predictor);

}  // namespace npusim::sim::calibrate
