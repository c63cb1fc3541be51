#pragma once
// The option groups of the commands that compile a model: the model (--input-shape, --batch, --mapping,
// ...) and its precision and quantization (--precision, --calibration, ...), and what they make of them:
// the model pipeline's ModelOptions (sim/model/model.h).
#include <boost/program_options.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "compiler/io/preprocess.h"
#include "isa/machine/config.h"
#include "sim/model/model.h"

namespace npusim::sim::cli {

// Options of commands that compile a model.
struct ModelCliOptions {
  std::vector<std::string> input_shapes;
  std::vector<std::string> input_values;  // --input-value
  int64_t batch = 0;  // 0: not given (each input keeps its first dimension)
  bool batch_given = false;
  std::string precision = "auto";
  std::vector<std::string> overrides;  // --precision-override, each "KEY=PREC,KEY=PREC"
  std::string precision_file;
  std::string calibration_dir;
  int calibration_samples = 32;
  bool calibration_samples_given = false;
  std::string calibration_method = "percentile";   // CalibrationOptions' default (calibration.h says why)
  std::optional<double> calibration_percentile;    // --calibration-percentile
  std::string preprocess_file;                     // --preprocess FILE.yaml
  std::optional<compiler::Preprocess> preprocess;  // read from it by load_preprocess()
  std::string weights = "per-channel";
  std::string weight_range = "minmax";  // --weight-range (QuantOptions' default)
  std::string activations = "asymmetric";
  bool bias_correction = false;              // --bias-correction (every layer)
  bool bias_correction_nonnegative = false;  // --bias-correction-nonnegative (the default)
  bool no_bias_correction = false;           // --no-bias-correction
  bool empirical_bias_correction = false;    // --empirical-bias-correction
  bool cle = false;                          // --cle
  std::optional<double> smoothquant;         // --smoothquant [ALPHA]
  std::string ptq_recipe = "none";           // --ptq-recipe
  bool ptq_recipe_given = false;
  int empirical_bias_samples = 8;  // --empirical-bias-samples (QuantOptions' default)
  bool empirical_bias_samples_given = false;
  // String-valued int8 quantization options given on the command line (check_int8_options_apply).
  std::vector<std::string> int8_only_given;
  bool verbose = false;
  bool graphs = false;         // --graphs
  std::string graph_dumps;     // --graphs: what compile_model printed, for print_graphs
  bool no_fusion = false;      // --no-fusion
  std::string mapping;         // --mapping FILE.yaml
  std::string mapping_out;     // --mapping-out FILE.yaml
  double memory_limit_gb = 0;  // --memory-limit-gb (0 = the machine's available memory)
  bool timing_only = false;    // nothing reads the weights' values: ModelOptions::weight_values false
};

boost::program_options::options_description model_options(ModelCliOptions& m);
boost::program_options::options_description precision_options(ModelCliOptions& m);

// The model pipeline's options from the command line's (UsageError naming the option).
ModelOptions to_model_options(const ModelCliOptions& m, const isa::NpuConfig& config);

// The int8 quantization options given for a run that quantizes nothing would be silently inert: exit 2 naming
// them. (--cle and --smoothquant rewrite the float graph, which an fp32 run computes: not inert.)
// `calibration_evaluates`: --calibration DIR also feeds the accuracy report's evaluation (no
// --accuracy-inputs), so it is not inert.
void check_int8_options_apply(const ModelCliOptions& m, const CompiledModel& cm, bool calibration_evaluates);

// --preprocess: read once, validated like a configuration file (exit 2 naming file:line:col and key).
void load_preprocess(ModelCliOptions& m);

}  // namespace npusim::sim::cli
