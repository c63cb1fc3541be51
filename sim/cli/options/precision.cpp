// The precision option group: whole-model and per-layer precision, calibration and the int8 quantization
// recipe (--precision, --calibration, --weight-range, ...). Defaults are the library's (PlanRequest,
// QuantOptions, CalibrationOptions, kSmoothQuantAlpha).
#include <fmt/format.h>

#include "compiler/quant/recipe.h"
#include "sim/cli/options/groups.h"

namespace npusim::sim::cli {

namespace po = boost::program_options;

po::options_description precision_options(Options& o) {
  namespace q = compiler::quant;
  ModelCliOptions& m = o.model;
  const q::PlanRequest plan;
  const q::QuantOptions& quant = plan.quant;
  // " (default)" after the choice the library takes when no option is given.
  const auto mark = [](bool is_default) { return is_default ? " (default)" : ""; };
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
      fmt::format(
          "calibration samples read from DIR (0 = all) or generated: seeded N(0,1) inputs, flagged in "
          "the report (default {}; a timing-only run, without --functional or --accuracy, calibrates "
          "on 1: scales do not change timing)",
          plan.calibration_count)
          .c_str())(
      "calibration-method",
      po::value(&m.calibration_method)->notifier(given("--calibration-method"))->value_name("M"),
      fmt::format("minmax, percentile, entropy or mse (default {})", q::to_string(quant.calibration.method))
          .c_str())(
      "calibration-percentile",
      po::value<double>()->value_name("P")->notifier([&m](double v) { m.calibration_percentile = v; }),
      fmt::format("percentile calibration: keep P % of each tensor's magnitudes inside its int8 range, "
                  "clipping the rest (default {})",
                  quant.calibration.percentile)
          .c_str())(
      "preprocess", po::value(&m.preprocess_file)->value_name("FILE.yaml"),
      "how PNG/JPEG images in --calibration, --accuracy-inputs and --inputs become the model's input: resize "
      "or "
      "letterbox, channel order, scale, mean/std, layout, dtype (docs/quantization.md, \"Images as inputs "
      "and task metrics\")")("weights", po::value(&m.weights)->notifier(given("--weights"))->value_name("G"),
                             fmt::format("int8 weight scales: per-channel{} or per-tensor{}",
                                         mark(quant.per_channel), mark(!quant.per_channel))
                                 .c_str())(
      "weight-range", po::value(&m.weight_range)->notifier(given("--weight-range"))->value_name("R"),
      fmt::format(
          "int8 weight scales' range: minmax (max |w|), mse (the clip minimising the weights' squared "
          "rounding and clipping error) or output-mse (the clip minimising the expected output error, "
          "from the calibration inputs' per-channel means and variances; docs/quantization.md) "
          "(default {})",
          q::to_string(quant.weight_range))
          .c_str())(
      "activations", po::value(&m.activations)->notifier(given("--activations"))->value_name("S"),
      fmt::format(
          "int8 activations: asymmetric (uint8 with a zero point){} or symmetric (int8, zero point 0){}",
          mark(!quant.symmetric_activations), mark(quant.symmetric_activations))
          .c_str())(
      "bias-correction", po::bool_switch(&m.bias_correction),
      fmt::format("int8: fold the mean shift that rounding the weights causes (from the calibration inputs' "
                  "per-channel means) into each layer's int32 bias (docs/quantization.md){}",
                  mark(quant.bias_correction == q::BiasCorrection::kAll))
          .c_str())(
      "bias-correction-nonnegative", po::bool_switch(&m.bias_correction_nonnegative),
      fmt::format("int8: the same, only in the layers whose input is never negative on the calibration "
                  "inputs{}",
                  mark(quant.bias_correction == q::BiasCorrection::kNonNegativeInputs))
          .c_str())(
      "no-bias-correction", po::bool_switch(&m.no_bias_correction),
      fmt::format("int8: no bias correction{}", mark(quant.bias_correction == q::BiasCorrection::kNone))
          .c_str())(
      "empirical-bias-correction", po::bool_switch(&m.empirical_bias_correction),
      "int8: run the quantized model beside fp32 on the first calibration inputs, layer by layer, and fold "
      "each layer's mean output error per channel into its int32 bias (docs/quantization.md)")(
      "empirical-bias-samples", po::value<int>()->value_name("N")->notifier([&m](int v) {
        m.empirical_bias_samples = v;
        m.empirical_bias_samples_given = true;
      }),
      fmt::format(
          "--empirical-bias-correction: how many calibration inputs it runs, all at once (default {}; "
          "memory grows with N)",
          quant.empirical_bias_samples)
          .c_str())(
      "cle", po::bool_switch(&m.cle),
      "cross-layer equalisation: rescale the channels of consecutive convolutions joined by no activation, "
      "Relu or LeakyRelu (pairs with ReLU6 or other activations are skipped and listed) so both have equal "
      "weight ranges; the function is unchanged (docs/quantization.md)")(
      "smoothquant",
      po::value<double>()
          ->implicit_value(q::kSmoothQuantAlpha)
          ->value_name("ALPHA")
          ->notifier([&m](double v) { m.smoothquant = v; }),
      fmt::format(
          "int8: SmoothQuant: move activation range into the weights of the linear layers that read a "
          "LayerNormalization, per channel s = max|x|^ALPHA / max|w|^(1-ALPHA) folded into the norm's "
          "scale and bias (ALPHA in [0, 1], default {}); the function is unchanged "
          "(docs/quantization.md)",
          q::kSmoothQuantAlpha)
          .c_str())(
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

}  // namespace npusim::sim::cli
