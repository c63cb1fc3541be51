#pragma once
// What the model (--input-shape, --batch, --mapping, ...) and precision (--precision, --calibration, ...)
// option groups read (model.cpp, precision.cpp), and what they make of it: the model pipeline's
// ModelOptions (sim/model/model.h). Defaults a library struct has are taken from it.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "compiler/io/preprocess.h"
#include "compiler/quant/accuracy.h"
#include "compiler/quant/quantize.h"
#include "isa/machine/config.h"
#include "sim/model/model.h"

namespace npusim::sim::cli {

class PhaseStatus;  // sim/cli/phase_status.h

// Options of commands that compile a model.
struct ModelCliOptions {
  std::vector<std::string> input_shapes;
  std::vector<std::string> input_values;  // --input-value
  int64_t batch = 0;                      // 0: not given (each input keeps its first dimension)
  bool batch_given = false;
  std::string precision = "auto";
  std::vector<std::string> overrides;  // --precision-override, each "KEY=PREC,KEY=PREC"
  std::string precision_file;
  std::string calibration_dir;
  int calibration_samples = compiler::quant::PlanRequest{}.calibration_count;
  bool calibration_samples_given = false;
  std::string calibration_method = to_string(compiler::quant::CalibrationOptions{}.method);
  std::optional<double> calibration_percentile;    // --calibration-percentile
  std::string preprocess_file;                     // --preprocess FILE.yaml
  std::optional<compiler::Preprocess> preprocess;  // read from it by load_preprocess()
  std::string weights = compiler::quant::QuantOptions{}.per_channel ? "per-channel" : "per-tensor";
  std::string weight_range = to_string(compiler::quant::QuantOptions{}.weight_range);  // --weight-range
  std::string int8_vector =
      std::string(to_string(compiler::quant::QuantOptions{}.int8_vector));  // --int8-vector
  std::string activations =
      compiler::quant::QuantOptions{}.symmetric_activations ? "symmetric" : "asymmetric";
  bool bias_correction = false;              // --bias-correction (every layer)
  bool bias_correction_nonnegative = false;  // --bias-correction-nonnegative
  bool no_bias_correction = false;           // --no-bias-correction
  bool empirical_bias_correction = false;    // --empirical-bias-correction
  bool cle = false;                          // --cle
  std::optional<double> smoothquant;         // --smoothquant [ALPHA]
  std::string ptq_recipe = "none";           // --ptq-recipe
  bool ptq_recipe_given = false;
  int empirical_bias_samples =
      compiler::quant::QuantOptions{}.empirical_bias_samples;  // --empirical-bias-samples
  bool empirical_bias_samples_given = false;
  bool range_search = false;                                                        // --range-search [N]
  int range_search_samples = compiler::quant::QuantOptions{}.range_search_samples;  // its N
  // String-valued int8 quantization options given on the command line (check_int8_options_apply).
  std::vector<std::string> int8_only_given;
  bool verbose = false;
  bool graphs = false;               // --graphs
  std::string graph_dumps;           // --graphs: what compile_model printed, for print_graphs
  bool no_fusion = false;            // --no-fusion
  bool no_interleave = false;        // --no-interleave
  std::string mapping;               // --mapping FILE.yaml
  std::string mapping_out;           // --mapping-out FILE.yaml
  std::string objective = "cycles";  // --objective cycles|energy|edp (compiler::MappingObjective)
  double memory_limit_gb = 0;        // --memory-limit-gb (0 = the machine's available memory)
  bool timing_only = false;          // nothing reads the weights' values: ModelOptions::weight_values false
  PhaseStatus* status = nullptr;     // the terminal's phase line, when the command draws one
};

// The configuration as the summaries name it: "edge" for the built-in default, a preset's name, a file's
// name without its folder.
std::string config_display_name(const std::string& config);

// Who chose the model's precision, for the summary and the report (run.precision_source): "--precision P",
// or "NAME's default precision (...)": the configuration's lowering.default_precision, whose `auto` is the
// array's fastest floating-point type, int8 where it has none; and whether that needs calibration.
std::string precision_source(const ModelCliOptions& m, const isa::NpuConfig& config,
                             const std::string& config_name);

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
