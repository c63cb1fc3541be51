// The model option group (--input-shape, --batch, --mapping, ...) and what the model and precision groups
// make of their options: the model pipeline's ModelOptions.
#include "sim/cli/options/model.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <utility>

#include "compiler/import/import.h"
#include "compiler/quant/calibration.h"
#include "compiler/quant/precision.h"
#include "sim/cli/command.h"
#include "sim/cli/options/groups.h"
#include "sim/config/config_loader.h"

namespace npusim::sim::cli {
namespace {

// --precision-file: YAML mapping KEY: P, a list of one-key maps or of "KEY=P" strings, optionally under
// a top-level `overrides:` key. Everything else is an error naming the file and line.
std::vector<compiler::quant::PrecisionOverride> read_precision_file(const std::string& path) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::BadFile&) {
    throw InputError(fmt::format("cannot open '{}'", path));
  } catch (const YAML::Exception& e) {
    throw InputError(fmt::format("{}:{}:{}: {}", path, e.mark.line + 1, e.mark.column + 1, e.msg));
  }
  if (root.IsMap() && root["overrides"]) root = root["overrides"];
  std::vector<compiler::quant::PrecisionOverride> out;
  auto bad = [&](const YAML::Node& n, const std::string& what) {
    return InputError(fmt::format("{}:{}:{}: {}", path, n.Mark().line + 1, n.Mark().column + 1, what));
  };
  auto add = [&](const YAML::Node& key, const YAML::Node& value) {
    if (!key.IsScalar() || !value.IsScalar()) throw bad(key, "expected KEY: PRECISION");
    try {
      out.push_back({key.as<std::string>(), compiler::quant::parse_precision(value.as<std::string>())});
    } catch (const compiler::quant::PrecisionError& e) {
      throw bad(value, fmt::format("{}: {}", key.as<std::string>(), e.what()));
    }
  };
  if (root.IsNull()) return out;
  if (root.IsMap()) {
    for (const auto& kv : root) add(kv.first, kv.second);
  } else if (root.IsSequence()) {
    for (const auto& e : root) {
      if (e.IsMap() && e.size() == 1) {
        add(e.begin()->first, e.begin()->second);
      } else if (e.IsScalar()) {
        try {
          for (const auto& o : compiler::quant::parse_overrides(e.as<std::string>())) out.push_back(o);
        } catch (const compiler::quant::PrecisionError& err) {
          throw bad(e, err.what());
        }
      } else {
        throw bad(e, "expected KEY: PRECISION or \"KEY=PRECISION\"");
      }
    }
  } else {
    throw bad(root, "expected a mapping of KEY: PRECISION or a list of them");
  }
  return out;
}

// --input-shape given twice for one input with different shapes, or with a first dimension --batch
// contradicts: each would silently win over the other (the import keeps the first shape; --batch
// overrides every input's first dimension).
void check_input_shapes(const ModelCliOptions& m) {
  std::map<std::string, std::pair<std::string, compiler::Shape>> seen;  // name -> (text, shape)
  for (const std::string& text : m.input_shapes) {
    std::pair<std::string, compiler::Shape> s;
    try {
      s = compiler::parse_input_shape(text);
    } catch (const compiler::ModelError& e) {
      throw UsageError(e.what());
    }
    const auto [it, first] = seen.emplace(s.first, std::make_pair(text, s.second));
    if (!first && it->second.second != s.second)
      throw UsageError(
          fmt::format("--input-shape {} and --input-shape {} give input '{}' two shapes; give one",
                      it->second.first, text, s.first));
    if (m.batch_given && !s.second.empty() && s.second[0] != m.batch)
      throw UsageError(fmt::format(
          "--batch {} and --input-shape {} give input '{}' two batch sizes ({} and {}); give one of them",
          m.batch, text, s.first, m.batch, s.second[0]));
  }
}

// lowering.default_precision = auto: the array's fastest precision that needs no calibration (the most
// precise of equally fast ones: fp32, fp16, bf16), int8 where the array multiplies nothing else.
compiler::quant::Precision fastest_float(const isa::SystolicArrayConfig& a) {
  using compiler::quant::Precision;
  Precision best = Precision::kInt8;
  double best_rate = 0;
  for (const auto& [p, t] :
       {std::pair{Precision::kFp32, isa::DType::kFp32}, std::pair{Precision::kFp16, isa::DType::kFp16},
        std::pair{Precision::kBf16, isa::DType::kBf16}})
    if (a.rate(t) > best_rate) {
      best = p;
      best_rate = a.rate(t);
    }
  return best;
}

compiler::quant::Precision auto_precision(const isa::NpuConfig& config) {
  using compiler::quant::Precision;
  switch (config.lowering.default_precision) {
    case isa::DefaultPrecision::kFp32:
      return Precision::kFp32;
    case isa::DefaultPrecision::kFp16:
      return Precision::kFp16;
    case isa::DefaultPrecision::kBf16:
      return Precision::kBf16;
    case isa::DefaultPrecision::kInt8:
      return Precision::kInt8;
    case isa::DefaultPrecision::kAuto:
      break;
  }
  return fastest_float(config.systolic_array);
}

}  // namespace

std::string config_display_name(const std::string& config) {
  if (config.empty()) return "edge";
  return std::filesystem::path(config).filename().string();
}

std::string precision_source(const ModelCliOptions& m, const isa::NpuConfig& config,
                             const std::string& config_name) {
  const bool overrides = !m.overrides.empty() || !m.precision_file.empty();
  if (m.precision != "auto")
    return "--precision " + m.precision + (overrides ? " with per-layer overrides" : "");
  const isa::DefaultPrecision d = config.lowering.default_precision;
  const compiler::quant::Precision p = auto_precision(config);
  const std::string why =
      d != isa::DefaultPrecision::kAuto
          ? fmt::format("lowering.default_precision: {}", isa::kDefaultPrecisionNames[static_cast<size_t>(d)])
      : p == compiler::quant::Precision::kInt8
          ? "lowering.default_precision: auto, and the array multiplies int8 only"
          : "lowering.default_precision: auto, the array's fastest floating-point type";
  return fmt::format("{}'s default precision ({}; {}; --precision to choose another){}",
                     config_display_name(config_name), why,
                     p == compiler::quant::Precision::kInt8 ? "calibrated" : "needs no calibration",
                     overrides ? " with per-layer overrides" : "");
}

namespace po = boost::program_options;

GroupOptions model_options(Options& o) {
  ModelCliOptions& m = o.model;
  po::options_description d;
  d.add_options()("input-shape", po::value(&m.input_shapes)->composing()->value_name("NAME=1x3x224x224"),
                  "bind a model input's dynamic dimensions (repeatable)")(
      "input-value", po::value(&m.input_values)->composing()->value_name("NAME=V[,V...]"),
      "fix a model input to constant values, so shape arithmetic and control flow on it fold (repeatable)")(
      "batch", po::value<int64_t>()->value_name("N")->notifier([&m](int64_t v) {
        m.batch = v;
        m.batch_given = true;
      }),
      "set every model input's first (batch) dimension to N")(
      "verbose,v", po::bool_switch(&m.verbose), "print the mapping table and the precision plan")(
      "graphs", po::bool_switch(&m.graphs), "print the graph after import and after every pass")(
      "no-fusion", po::bool_switch(&m.no_fusion), "fuse no epilogue and fold no Concat: what fusion buys")(
      "no-interleave", po::bool_switch(&m.no_interleave),
      "emit each layer's code after the one before it, never merged into it: what interleaving buys")(
      "mapping", po::value(&m.mapping)->value_name("FILE.yaml"), "impose per-layer mappings by node name")(
      "mapping-out", po::value(&m.mapping_out)->value_name("FILE.yaml"), "write every layer's mapping")(
      "objective", po::value(&m.objective)->value_name("cycles|energy|edp"),
      "what the mapping search minimises among the candidates it simulates: cycles (default), energy, or "
      "energy x cycles")("memory-limit-gb", po::value(&m.memory_limit_gb)->value_name("GB"),
                         "fail before allocating past GB (default: the available memory)");
  return {"Model", d};
}

ModelOptions to_model_options(const ModelCliOptions& m, const isa::NpuConfig& config) {
  namespace q = compiler::quant;
  ModelOptions o;
  const auto objective = std::find(compiler::kMappingObjectiveNames.begin(),
                                   compiler::kMappingObjectiveNames.end(), m.objective);
  if (objective == compiler::kMappingObjectiveNames.end())
    throw UsageError(fmt::format("--objective '{}' is not one of cycles, energy, edp", m.objective));
  o.objective = static_cast<compiler::MappingObjective>(objective - compiler::kMappingObjectiveNames.begin());
  SimulationTimers timers = simulation_timers(config);
  o.timer = std::move(timers.timer);
  if (o.objective != compiler::MappingObjective::kCycles) o.energy = std::move(timers.energy);
  o.fusion = !m.no_fusion;
  o.interleave = !m.no_interleave;
  o.weight_values = !m.timing_only;
  o.input_shapes = m.input_shapes;
  o.input_values = m.input_values;
  if (m.batch_given && (m.batch < 1 || m.batch > 65536)) {
    throw UsageError(fmt::format("--batch {} is out of range (1..65536)", m.batch));
  }
  o.batch = m.batch;
  check_input_shapes(m);
  q::PlanRequest& r = o.plan;
  try {
    r.spec.model = m.precision == "auto" ? auto_precision(config) : q::parse_precision(m.precision);
    r.follow_model = m.precision == "auto";
  } catch (const q::PrecisionError&) {
    throw UsageError(fmt::format("--precision '{}' is not one of fp32, fp16, bf16, int8, auto", m.precision));
  }
  if (!m.precision_file.empty()) r.spec.overrides = read_precision_file(m.precision_file);
  for (const std::string& text : m.overrides) {
    try {
      for (const auto& ov : q::parse_overrides(text)) r.spec.overrides.push_back(ov);
    } catch (const q::PrecisionError& e) {
      throw UsageError(fmt::format("--precision-override: {}", e.what()));
    }
  }
  try {
    r.quant.calibration.method = q::parse_calibration_method(m.calibration_method);
  } catch (const std::exception&) {
    throw UsageError(fmt::format("--calibration-method '{}' is not one of minmax, percentile, entropy, mse",
                                 m.calibration_method));
  }
  if (m.calibration_percentile) {
    if (r.quant.calibration.method != q::CalibrationMethod::kPercentile)
      throw UsageError(fmt::format("--calibration-percentile applies to the percentile method, not '{}'",
                                   m.calibration_method));
    if (!(*m.calibration_percentile > 0.0 && *m.calibration_percentile <= 100.0))
      throw UsageError(
          fmt::format("--calibration-percentile {} is out of range (0, 100]", *m.calibration_percentile));
    r.quant.calibration.percentile = *m.calibration_percentile;
  }
  if (m.weights != "per-channel" && m.weights != "per-tensor") {
    throw UsageError(fmt::format("--weights '{}' is not one of per-channel, per-tensor", m.weights));
  }
  r.quant.per_channel = m.weights == "per-channel";
  try {
    r.quant.weight_range = q::parse_weight_range(m.weight_range);
  } catch (const std::exception&) {
    throw UsageError(
        fmt::format("--weight-range '{}' is not one of minmax, mse, output-mse", m.weight_range));
  }
  try {
    r.quant.int8_vector = q::parse_int8_vector(m.int8_vector);
  } catch (const q::PrecisionError&) {
    throw UsageError(fmt::format("--int8-vector '{}' is not one of integer, float", m.int8_vector));
  }
  if (m.activations != "asymmetric" && m.activations != "symmetric") {
    throw UsageError(fmt::format("--activations '{}' is not one of asymmetric, symmetric", m.activations));
  }
  r.quant.symmetric_activations = m.activations == "symmetric";
  if (m.bias_correction + m.bias_correction_nonnegative + m.no_bias_correction > 1)
    throw UsageError(
        "--bias-correction (every layer), --bias-correction-nonnegative and --no-bias-correction exclude "
        "each "
        "other");
  if (m.empirical_bias_correction && (m.bias_correction || m.bias_correction_nonnegative))
    throw UsageError(
        "--empirical-bias-correction replaces the analytic --bias-correction / --bias-correction-nonnegative "
        "(it measures and removes the whole shift); give one of them");
  // None of the three: the library's default (QuantOptions::bias_correction).
  if (m.bias_correction) r.quant.bias_correction = q::BiasCorrection::kAll;
  if (m.bias_correction_nonnegative) r.quant.bias_correction = q::BiasCorrection::kNonNegativeInputs;
  if (m.no_bias_correction) r.quant.bias_correction = q::BiasCorrection::kNone;
  r.quant.empirical_bias_correction = m.empirical_bias_correction;
  if (m.empirical_bias_samples_given && !m.empirical_bias_correction)
    throw UsageError("--empirical-bias-samples needs --empirical-bias-correction");
  if (m.empirical_bias_samples < 1) throw UsageError("--empirical-bias-samples must be >= 1");
  r.quant.empirical_bias_samples = m.empirical_bias_samples;
  if (m.range_search_samples < 1) throw UsageError("--range-search N: N must be >= 1");
  // A timing run's numbers do not matter (scales change no cycle count): nothing to search.
  r.quant.range_search = m.range_search && !m.timing_only;
  r.quant.range_search_samples = m.range_search_samples;
  r.quant.cross_layer_equalization = m.cle;
  if (m.ptq_recipe != "auto" && m.ptq_recipe != "none")
    throw UsageError(fmt::format("--ptq-recipe '{}' is not one of auto, none", m.ptq_recipe));
  if (m.smoothquant && !(*m.smoothquant >= 0.0 && *m.smoothquant <= 1.0))
    throw UsageError(
        fmt::format("--smoothquant {} is out of range (its alpha is in [0, 1])", *m.smoothquant));
  r.quant.smoothquant_alpha = m.smoothquant;
  const bool imposed = m.bias_correction || m.bias_correction_nonnegative || m.no_bias_correction || m.cle ||
                       m.empirical_bias_correction || m.smoothquant.has_value() || m.range_search;
  if (imposed && m.ptq_recipe_given)
    throw UsageError(
        "--ptq-recipe and --bias-correction, --bias-correction-nonnegative, --no-bias-correction, --cle, "
        "--smoothquant, --empirical-bias-correction, --range-search exclude each other (those options impose "
        "a "
        "recipe)");
  // A timing run's numbers do not matter (scales change no cycle count): nothing to choose.
  r.choose_recipe = m.ptq_recipe == "auto" && !imposed && !m.timing_only;
  if (m.calibration_samples < 0) throw UsageError("--calibration-samples must be >= 0");
  if (m.calibration_samples == 0 && m.calibration_dir.empty()) {
    throw UsageError("--calibration-samples 0 (all) needs --calibration DIR");
  }
  r.calibration_dir = m.calibration_dir;
  r.calibration_count = m.calibration_samples;
  r.preprocess = m.preprocess;
  return o;
}

void check_int8_options_apply(const ModelCliOptions& m, const CompiledModel& cm, bool calibration_evaluates) {
  if (cm.plan.has_int8() || cm.prequantized) return;
  std::vector<std::string> given = m.int8_only_given;
  const std::pair<bool, const char*> flags[] = {
      {!m.calibration_dir.empty() && !calibration_evaluates, "--calibration"},
      {m.calibration_samples_given, "--calibration-samples"},
      {m.calibration_percentile.has_value(), "--calibration-percentile"},
      {m.bias_correction, "--bias-correction"},
      {m.bias_correction_nonnegative, "--bias-correction-nonnegative"},
      {m.no_bias_correction, "--no-bias-correction"},
      {m.empirical_bias_correction, "--empirical-bias-correction"},
      {m.empirical_bias_samples_given, "--empirical-bias-samples"},
      {m.range_search, "--range-search"},
      {m.ptq_recipe_given, "--ptq-recipe"}};
  for (const auto& [on, name] : flags)
    if (on) given.emplace_back(name);
  if (given.empty()) return;
  std::string list;
  for (size_t k = 0; k < given.size(); ++k) list += (k ? ", " : "") + given[k];
  throw UsageError(fmt::format(
      "{} {} int8 quantization, and this run quantizes no layer (--precision {}): add "
      "--precision int8 or an int8 --precision-override, or drop {}",
      list, given.size() == 1 ? "applies to" : "apply to", m.precision, given.size() == 1 ? "it" : "them"));
}

void load_preprocess(ModelCliOptions& m) {
  if (m.preprocess_file.empty() || m.preprocess) return;
  compiler::Preprocess p;
  const auto given = load_declared_file(m.preprocess_file, [&p](isa::Visitor& v) { p.visit(v); });
  // Keys that would do nothing under the chosen resize are errors, not silently ignored.
  const std::string resize(compiler::Preprocess::kResizeNames[static_cast<size_t>(p.resize)]);
  std::vector<std::string> errors;
  for (const char* key : {"anchor", "pad_value"}) {
    if (given.count(key) && p.resize != compiler::Preprocess::Resize::kLetterbox)
      errors.push_back(
          fmt::format("{}: {} applies to resize: letterbox only (resize is {})", given.at(key), key, resize));
  }
  if (given.count("resize_short") && p.resize != compiler::Preprocess::Resize::kCrop)
    errors.push_back(fmt::format("{}: resize_short applies to resize: crop only (resize is {})",
                                 given.at("resize_short"), resize));
  if (given.count("interpolation") && p.resize == compiler::Preprocess::Resize::kNone)
    errors.push_back(
        fmt::format("{}: interpolation does nothing with resize: none", given.at("interpolation")));
  if (!errors.empty()) throw ConfigError(std::move(errors));
  m.preprocess = p;
}

}  // namespace npusim::sim::cli
