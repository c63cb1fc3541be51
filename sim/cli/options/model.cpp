#include "sim/cli/options/model.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "compiler/quant/calibration.h"
#include "compiler/quant/precision.h"
#include "sim/cli/command.h"
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

compiler::quant::Precision auto_precision(const isa::NpuConfig& config) {
  using compiler::quant::Precision;
  const auto& a = config.systolic_array;
  if (a.rate(isa::DType::kFp32) > 0) return Precision::kFp32;
  if (a.rate(isa::DType::kBf16) > 0) return Precision::kBf16;
  if (a.rate(isa::DType::kFp16) > 0) return Precision::kFp16;
  return Precision::kInt8;
}

}  // namespace

namespace po = boost::program_options;

po::options_description model_options(ModelCliOptions& m) {
  po::options_description d("Model");
  d.add_options()("input-shape", po::value(&m.input_shapes)->composing()->value_name("NAME=1x3x224x224"),
                  "bind a model input's dynamic dimensions (repeatable)")(
      "input-value", po::value(&m.input_values)->composing()->value_name("NAME=V[,V...]"),
      "fix a model input to constant values, so shape arithmetic and control flow on it fold (repeatable)")(
      "batch", po::value<int64_t>()->value_name("N")->notifier([&m](int64_t v) {
        m.batch = v;
        m.batch_given = true;
      }),
      "set the first (batch) dimension of every model input to N; shape inference propagates it")(
      "verbose,v", po::bool_switch(&m.verbose), "print the mapping table and the precision plan")(
      "graphs", po::bool_switch(&m.graphs),
      "print the graph after import and after every pass, last (long: every node with its full ONNX names)")(
      "no-fusion", po::bool_switch(&m.no_fusion),
      "fuse nothing into a layer's epilogue (bias, residual Add, activations run as layers of their own) and "
      "fold "
      "no Concat into its producers' stores: what fusion buys")(
      "mapping", po::value(&m.mapping)->value_name("FILE.yaml"),
      "impose per-layer mappings (placement, tiles, loop order) by node name; layers it does not name are "
      "searched (docs/backend.md, \"Mapping files\")")(
      "mapping-out", po::value(&m.mapping_out)->value_name("FILE.yaml"),
      "write every layer's mapping as a mapping file (--mapping reads it back and reproduces the compile)")(
      "memory-limit-gb", po::value(&m.memory_limit_gb)->value_name("GB"),
      "fail with a clear message before an allocation past GB (default: the machine's available memory)");
  return d;
}

po::options_description precision_options(ModelCliOptions& m) {
  po::options_description d("Precision and quantization (docs/quantization.md)");
  // Records a string-valued int8 option as given (check_int8_options_apply).
  auto given = [&m](const char* name) {
    return [&m, name](const std::string&) { m.int8_only_given.push_back(name); };
  };
  d.add_options()(
      "precision", po::value(&m.precision)->value_name("P"),
      "whole-model precision: fp32, fp16, bf16, int8, or auto (default: fp32 when the array has fp32 "
      "MACs, else bf16, else fp16, else int8)")(
      "precision-override", po::value(&m.overrides)->composing()->value_name("KEY=P,..."),
      "per-layer precision by ONNX node name or op type, e.g. conv1=fp16,Softmax=fp32 (repeatable; later "
      "wins); int16 gives a matrix layer int16 activations (int16 x int8 MACs, systolic_array.int16_rate)")(
      "precision-file", po::value(&m.precision_file)->value_name("FILE.yaml"),
      "per-layer overrides in YAML: a mapping KEY: P, a list of one-key maps, or {overrides: ...}")(
      "calibration", po::value(&m.calibration_dir)->value_name("DIR"),
      "int8 calibration inputs: one image (PNG/JPEG, with --preprocess) or .npy/.pb per sample, or one "
      "folder per "
      "sample (default: synthetic)")(
      "calibration-samples", po::value<int>()->value_name("N")->notifier([&m](int v) {
        m.calibration_samples = v;
        m.calibration_samples_given = true;
      }),
      "calibration samples read from DIR (0 = all) or generated: seeded N(0,1) inputs, flagged in the report "
      "(default 32; a timing-only run, without --functional or --accuracy, calibrates on 1: scales do not "
      "change timing)")(
      "calibration-method",
      po::value(&m.calibration_method)->notifier(given("--calibration-method"))->value_name("M"),
      "minmax, percentile (default), entropy or mse")(
      "calibration-percentile",
      po::value<double>()->value_name("P")->notifier([&m](double v) { m.calibration_percentile = v; }),
      "percentile calibration: keep P % of each tensor's magnitudes inside its int8 range, clipping the rest "
      "(default 99.99)")(
      "preprocess", po::value(&m.preprocess_file)->value_name("FILE.yaml"),
      "how PNG/JPEG images in --calibration, --accuracy-inputs and --inputs become the model's input: resize "
      "or "
      "letterbox, channel order, scale, mean/std, layout, dtype (docs/quantization.md, \"Images as inputs "
      "and task metrics\")")("weights", po::value(&m.weights)->notifier(given("--weights"))->value_name("G"),
                             "int8 weight scales: per-channel (default) or per-tensor")(
      "weight-range", po::value(&m.weight_range)->notifier(given("--weight-range"))->value_name("R"),
      "int8 weight scales' range: minmax (max |w|, default), mse (the clip minimising the weights' squared "
      "rounding and clipping error) or output-mse (the clip minimising the expected output error, from the "
      "calibration inputs' per-channel means and variances; docs/quantization.md)")(
      "activations", po::value(&m.activations)->notifier(given("--activations"))->value_name("S"),
      "int8 activations: asymmetric (uint8 with a zero point, default) or symmetric (int8, zero point 0)")(
      "bias-correction", po::bool_switch(&m.bias_correction),
      "int8: fold the mean shift that rounding the weights causes (from the calibration inputs' per-channel "
      "means) into each layer's int32 bias (docs/quantization.md)")(
      "bias-correction-nonnegative", po::bool_switch(&m.bias_correction_nonnegative),
      "int8: the same, only in the layers whose input is never negative on the calibration inputs (the "
      "default)")("no-bias-correction", po::bool_switch(&m.no_bias_correction),
                  "int8: no bias correction (the default corrects the layers with non-negative inputs)")(
      "empirical-bias-correction", po::bool_switch(&m.empirical_bias_correction),
      "int8: run the quantized model beside fp32 on the first calibration inputs, layer by layer, and fold "
      "each layer's mean output error per channel into its int32 bias (docs/quantization.md)")(
      "empirical-bias-samples", po::value<int>()->value_name("N")->notifier([&m](int v) {
        m.empirical_bias_samples = v;
        m.empirical_bias_samples_given = true;
      }),
      "--empirical-bias-correction: how many calibration inputs it runs, all at once (default 8; memory "
      "grows with N)")(
      "cle", po::bool_switch(&m.cle),
      "cross-layer equalisation: rescale the channels of consecutive convolutions joined by no activation, "
      "Relu or LeakyRelu (pairs with ReLU6 or other activations are skipped and listed) so both have equal "
      "weight ranges; the function is unchanged (docs/quantization.md)")(
      "smoothquant", po::value<double>()->implicit_value(0.5)->value_name("ALPHA")->notifier([&m](double v) {
        m.smoothquant = v;
      }),
      "int8: SmoothQuant: move activation range into the weights of the linear layers that read a "
      "LayerNormalization, per channel s = max|x|^ALPHA / max|w|^(1-ALPHA) folded into the norm's scale and "
      "bias (ALPHA in [0, 1], default 0.5); the function is unchanged (docs/quantization.md)")(
      "ptq-recipe", po::value<std::string>()->value_name("R")->notifier([&m](const std::string& v) {
        m.ptq_recipe = v;
        m.ptq_recipe_given = true;
      }),
      "int8: none (default: choose nothing, the defaults apply: bias correction where the input is "
      "non-negative) or auto (quantize with and without --bias-correction-nonnegative, --bias-correction, "
      "--cle and --smoothquant, and keep the one whose output is closest to fp32 on held-out calibration "
      "inputs; the report lists the candidates; it takes several calibration passes). --bias-correction, "
      "--bias-correction-nonnegative, --no-bias-correction, --cle, --smoothquant and "
      "--empirical-bias-correction impose their recipe instead");
  return d;
}

ModelOptions to_model_options(const ModelCliOptions& m, const isa::NpuConfig& config) {
  namespace q = compiler::quant;
  ModelOptions o;
  o.timer = simulation_timer(config);
  o.fusion = !m.no_fusion;
  o.weight_values = !m.timing_only;
  o.input_shapes = m.input_shapes;
  o.input_values = m.input_values;
  if (m.batch_given && (m.batch < 1 || m.batch > 65536)) {
    throw UsageError(fmt::format("--batch {} is out of range (1..65536)", m.batch));
  }
  o.batch = m.batch;
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
  r.quant.bias_correction = m.bias_correction      ? q::BiasCorrection::kAll
                            : m.no_bias_correction ? q::BiasCorrection::kNone
                                                   : q::BiasCorrection::kNonNegativeInputs;
  r.quant.empirical_bias_correction = m.empirical_bias_correction;
  if (m.empirical_bias_samples_given && !m.empirical_bias_correction)
    throw UsageError("--empirical-bias-samples needs --empirical-bias-correction");
  if (m.empirical_bias_samples < 1) throw UsageError("--empirical-bias-samples must be >= 1");
  r.quant.empirical_bias_samples = m.empirical_bias_samples;
  r.quant.cross_layer_equalization = m.cle;
  if (m.ptq_recipe != "auto" && m.ptq_recipe != "none")
    throw UsageError(fmt::format("--ptq-recipe '{}' is not one of auto, none", m.ptq_recipe));
  if (m.smoothquant && !(*m.smoothquant >= 0.0 && *m.smoothquant <= 1.0))
    throw UsageError(
        fmt::format("--smoothquant {} is out of range (its alpha is in [0, 1])", *m.smoothquant));
  r.quant.smoothquant_alpha = m.smoothquant;
  const bool imposed = m.bias_correction || m.bias_correction_nonnegative || m.no_bias_correction || m.cle ||
                       m.empirical_bias_correction || m.smoothquant.has_value();
  if (imposed && m.ptq_recipe_given)
    throw UsageError(
        "--ptq-recipe and --bias-correction, --bias-correction-nonnegative, --no-bias-correction, --cle, "
        "--smoothquant, --empirical-bias-correction exclude each other (those options impose a recipe)");
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
  if (given.count("interpolation") && p.resize == compiler::Preprocess::Resize::kNone)
    errors.push_back(
        fmt::format("{}: interpolation does nothing with resize: none", given.at("interpolation")));
  if (!errors.empty()) throw ConfigError(std::move(errors));
  m.preprocess = p;
}

}  // namespace npusim::sim::cli
