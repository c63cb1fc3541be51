// The precision option group: whole-model and per-layer precision, calibration and the int8 quantization
// recipe (--precision, --calibration, --weight-range, ...). Defaults are the library's (PlanRequest,
// QuantOptions, CalibrationOptions, kSmoothQuantAlpha); docs/cli.md describes each option at length.
#include <fmt/format.h>

#include "compiler/quant/recipe.h"
#include "sim/cli/options/groups.h"

namespace npusim::sim::cli {

namespace po = boost::program_options;

GroupOptions precision_options(Options& o) {
  namespace q = compiler::quant;
  ModelCliOptions& m = o.model;
  const q::PlanRequest plan;
  const q::QuantOptions& quant = plan.quant;
  // " (default)" after the choice the library takes when no option is given.
  const auto mark = [](bool is_default) { return is_default ? " (default)" : ""; };
  const auto bias = [&](q::BiasCorrection b) { return mark(quant.bias_correction == b); };
  po::options_description d;
  // Records a string-valued int8 option as given (check_int8_options_apply).
  auto given = [&m](const char* name) {
    return [&m, name](const std::string&) { m.int8_only_given.push_back(name); };
  };
  d.add_options()(
      "precision", po::value(&m.precision)->value_name("P"),
      "fp32, fp16, bf16, int8 or auto (default): the configuration's lowering.default_precision, fp16 on "
      "edge")("precision-override", po::value(&m.overrides)->composing()->value_name("KEY=P,..."),
              "per-layer precision by node name or op type (repeatable)")(
      "precision-file", po::value(&m.precision_file)->value_name("FILE.yaml"),
      "per-layer precisions in YAML")("calibration", po::value(&m.calibration_dir)->value_name("DIR"),
                                      "int8 calibration inputs: images, .npy or .pb (default: synthetic)")(
      "calibration-samples", po::value<int>()->value_name("N")->notifier([&m](int v) {
        m.calibration_samples = v;
        m.calibration_samples_given = true;
      }),
      fmt::format("samples, 0 = all of DIR (default {}; timing-only runs: 1)", plan.calibration_count)
          .c_str())(
      "calibration-method",
      po::value(&m.calibration_method)->notifier(given("--calibration-method"))->value_name("M"),
      fmt::format("minmax, percentile, entropy or mse (default {})", q::to_string(quant.calibration.method))
          .c_str())(
      "calibration-percentile",
      po::value<double>()->value_name("P")->notifier([&m](double v) { m.calibration_percentile = v; }),
      fmt::format("percent of magnitudes kept inside the range (default {})", quant.calibration.percentile)
          .c_str())("preprocess", po::value(&m.preprocess_file)->value_name("FILE.yaml"),
                    "how images become the model's input (resize, mean/std, layout, ...)")(
      "weights", po::value(&m.weights)->notifier(given("--weights"))->value_name("G"),
      fmt::format("int8 weight scales: per-channel{} or per-tensor{}", mark(quant.per_channel),
                  mark(!quant.per_channel))
          .c_str())("weight-range",
                    po::value(&m.weight_range)->notifier(given("--weight-range"))->value_name("R"),
                    fmt::format("int8 weight range: minmax, mse or output-mse (default {})",
                                q::to_string(quant.weight_range))
                        .c_str())(
      "int8-vector", po::value(&m.int8_vector)->notifier(given("--int8-vector"))->value_name("S"),
      fmt::format("int8 vector layers: integer (on the codes: activations, fused ones too, as lookup "
                  "tables; integer SE Mul and global average pool){} or float (dequantize, fp32, quantize){}",
                  mark(quant.int8_vector == q::Int8Vector::kInteger),
                  mark(quant.int8_vector == q::Int8Vector::kFloat))
          .c_str())("activations",
                    po::value(&m.activations)->notifier(given("--activations"))->value_name("S"),
                    fmt::format("int8 activations: asymmetric{} or symmetric{}",
                                mark(!quant.symmetric_activations), mark(quant.symmetric_activations))
                        .c_str())(
      "bias-correction", po::bool_switch(&m.bias_correction),
      fmt::format("int8: correct every layer's bias for weight rounding{}", bias(q::BiasCorrection::kAll))
          .c_str())("bias-correction-nonnegative", po::bool_switch(&m.bias_correction_nonnegative),
                    fmt::format("int8: the same, in layers with non-negative inputs{}",
                                bias(q::BiasCorrection::kNonNegativeInputs))
                        .c_str())(
      "no-bias-correction", po::bool_switch(&m.no_bias_correction),
      fmt::format("int8: no bias correction{}", bias(q::BiasCorrection::kNone)).c_str())(
      "empirical-bias-correction", po::bool_switch(&m.empirical_bias_correction),
      "int8: fold each layer's measured output error into its bias")(
      "empirical-bias-samples", po::value<int>()->value_name("N")->notifier([&m](int v) {
        m.empirical_bias_samples = v;
        m.empirical_bias_samples_given = true;
      }),
      fmt::format("calibration inputs it measures on (default {})", quant.empirical_bias_samples).c_str())(
      "range-search",
      po::value<int>()->implicit_value(quant.range_search_samples)->value_name("N")->notifier([&m](int v) {
        m.range_search = true;
        m.range_search_samples = v;
      }),
      fmt::format("int8: choose clipped activation ranges by the model's error on N calibration inputs "
                  "(default {})",
                  quant.range_search_samples)
          .c_str())("cle", po::bool_switch(&m.cle), "cross-layer equalisation of consecutive convolutions")(
      "smoothquant",
      po::value<double>()
          ->implicit_value(q::kSmoothQuantAlpha)
          ->value_name("ALPHA")
          ->notifier([&m](double v) { m.smoothquant = v; }),
      fmt::format("int8: SmoothQuant after LayerNormalization (ALPHA default {})", q::kSmoothQuantAlpha)
          .c_str())("ptq-recipe",
                    po::value<std::string>()->value_name("R")->notifier([&m](const std::string& v) {
                      m.ptq_recipe = v;
                      m.ptq_recipe_given = true;
                    }),
                    "int8: none (default) or auto (measure the recipes, keep the best)");
  return {"Precision and quantization (docs/quantization.md)", d};
}

}  // namespace npusim::sim::cli
