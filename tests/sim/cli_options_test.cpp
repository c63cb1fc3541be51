// The option groups (sim/cli/options/) take their defaults from the library structs they fill: a command
// line that gives no option yields the library's defaults, and the help states them. Restating a default
// in the CLI makes these fail as soon as the library's changes. Options that contradict each other are
// usage errors.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <systemc>  // declares sc_main, which runs the tests

#include <string>
#include <vector>

#include "compiler/quant/recipe.h"
#include "sim/cli/options/groups.h"
#include "sim/config/config_loader.h"
#include "sim/dynamic/generate_request.h"
#include "sim/dynamic/policies.h"

namespace npusim::sim::cli {
namespace {

namespace po = boost::program_options;
namespace q = compiler::quant;

// `args` parsed against `group` bound to `o`.
void parse_group(OptionGroup group, Options& o, std::vector<std::string> args) {
  po::variables_map vm;
  po::store(po::command_line_parser(args).options(group(o).options).run(), vm);
  po::notify(vm);
}

// What the given options of `group` make of the model's options.
ModelOptions model_options_of(OptionGroup group, std::vector<std::string> args) {
  Options o;
  parse_group(group, o, std::move(args));
  return to_model_options(o.model, load_config("", {}));
}

// The help text of `option` in `group`.
std::string description(OptionGroup group, const char* option) {
  Options o;
  return group(o).options.find(option, false).description();
}

TEST(CliOptions, NoPrecisionOptionGivesTheLibrarysQuantizationDefaults) {
  const q::PlanRequest lib;
  const q::PlanRequest cli = model_options_of(precision_options, {}).plan;
  EXPECT_EQ(cli.calibration_count, lib.calibration_count);
  EXPECT_EQ(cli.quant.calibration.method, lib.quant.calibration.method);
  EXPECT_EQ(cli.quant.calibration.percentile, lib.quant.calibration.percentile);
  EXPECT_EQ(cli.quant.per_channel, lib.quant.per_channel);
  EXPECT_EQ(cli.quant.weight_range, lib.quant.weight_range);
  EXPECT_EQ(cli.quant.symmetric_activations, lib.quant.symmetric_activations);
  EXPECT_EQ(cli.quant.bias_correction, lib.quant.bias_correction);
  EXPECT_EQ(cli.quant.empirical_bias_correction, lib.quant.empirical_bias_correction);
  EXPECT_EQ(cli.quant.empirical_bias_samples, lib.quant.empirical_bias_samples);
  EXPECT_EQ(cli.quant.cross_layer_equalization, lib.quant.cross_layer_equalization);
  EXPECT_EQ(cli.quant.smoothquant_alpha, lib.quant.smoothquant_alpha);
}

TEST(CliOptions, SmoothQuantWithoutAlphaTakesTheLibrarysAlpha) {
  const q::PlanRequest cli = model_options_of(precision_options, {"--smoothquant"}).plan;
  ASSERT_TRUE(cli.quant.smoothquant_alpha.has_value());
  EXPECT_EQ(*cli.quant.smoothquant_alpha, q::kSmoothQuantAlpha);
}

TEST(CliOptions, EachBiasCorrectionOptionSelectsItsMode) {
  EXPECT_EQ(model_options_of(precision_options, {"--bias-correction"}).plan.quant.bias_correction,
            q::BiasCorrection::kAll);
  EXPECT_EQ(model_options_of(precision_options, {"--bias-correction-nonnegative"}).plan.quant.bias_correction,
            q::BiasCorrection::kNonNegativeInputs);
  EXPECT_EQ(model_options_of(precision_options, {"--no-bias-correction"}).plan.quant.bias_correction,
            q::BiasCorrection::kNone);
}

TEST(CliOptions, PrecisionHelpStatesTheLibrarysDefaults) {
  const q::PlanRequest lib;
  EXPECT_NE(description(precision_options, "calibration-samples")
                .find(fmt::format("default {}", lib.calibration_count)),
            std::string::npos);
  EXPECT_NE(description(precision_options, "calibration-method")
                .find(fmt::format("default {}", q::to_string(lib.quant.calibration.method))),
            std::string::npos);
  EXPECT_NE(description(precision_options, "calibration-percentile")
                .find(fmt::format("default {}", lib.quant.calibration.percentile)),
            std::string::npos);
  EXPECT_NE(description(precision_options, "weight-range")
                .find(fmt::format("default {}", q::to_string(lib.quant.weight_range))),
            std::string::npos);
  EXPECT_NE(description(precision_options, "empirical-bias-samples")
                .find(fmt::format("default {}", lib.quant.empirical_bias_samples)),
            std::string::npos);
  EXPECT_NE(
      description(precision_options, "smoothquant").find(fmt::format("default {}", q::kSmoothQuantAlpha)),
      std::string::npos);
  // The choices the library takes are the ones marked.
  EXPECT_NE(description(precision_options, "weights")
                .find(lib.quant.per_channel ? "per-channel (default)" : "per-tensor (default)"),
            std::string::npos);
  const char* bias_default = lib.quant.bias_correction == q::BiasCorrection::kAll ? "bias-correction"
                             : lib.quant.bias_correction == q::BiasCorrection::kNone
                                 ? "no-bias-correction"
                                 : "bias-correction-nonnegative";
  for (const char* o : {"bias-correction", "bias-correction-nonnegative", "no-bias-correction"})
    EXPECT_EQ(description(precision_options, o).find("(default)") != std::string::npos,
              std::string(o) == bias_default)
        << o;
}

TEST(CliOptions, AccuracyThresholdIsTheLibrarys) {
  Options o;
  parse_group(accuracy_options, o, {});
  EXPECT_EQ(o.accuracy.threshold_db, q::AccuracyOptions{}.bad_layer_sqnr_db);
  EXPECT_NE(description(accuracy_options, "accuracy-threshold")
                .find(fmt::format("default {}", q::AccuracyOptions{}.bad_layer_sqnr_db)),
            std::string::npos);
}

TEST(CliOptions, RequestAndGenerationHelpStateTheLibrarysDefaults) {
  const dynamic::PolicyOptions policy;
  EXPECT_NE(
      description(requests_options, "program-cache").find(fmt::format("default {}", policy.program_cache)),
      std::string::npos);
  EXPECT_NE(description(requests_options, "on-overflow")
                .find(fmt::format("default {}", dynamic::to_string(policy.overflow))),
            std::string::npos);
  EXPECT_NE(description(requests_options, "host-us-per-layer")
                .find(fmt::format("default {}", policy.host_us_per_layer)),
            std::string::npos);
  EXPECT_NE(description(generation_options, "kv-bucket")
                .find(fmt::format("default {}", dynamic::GenerateRequest{}.bucket)),
            std::string::npos);
}

TEST(CliOptions, FunctionalSeedIsTheLibrarys) {
  Options o;
  parse_group(functional_options, o, {});
  EXPECT_EQ(o.io.seed, FunctionalIo{}.seed);
  EXPECT_NE(description(functional_options, "seed").find(fmt::format("default {}", FunctionalIo{}.seed)),
            std::string::npos);
}

// Options that contradict each other exit 2 with one sentence naming both, never one silently winning.
std::string conflict_of(std::vector<std::string> args) {
  try {
    model_options_of(model_options, std::move(args));
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(CliOptions, TwoDifferentShapesForOneInputAreAUsageErrorNamingBoth) {
  EXPECT_EQ(conflict_of({"--input-shape", "x=1x3x48x320", "--input-shape", "x=1x3x48x640"}),
            "--input-shape x=1x3x48x320 and --input-shape x=1x3x48x640 give input 'x' two shapes; give one");
  // The same shape twice, or shapes of two inputs, say nothing twice.
  EXPECT_EQ(conflict_of({"--input-shape", "x=1x3x48x320", "--input-shape", "x=1x3x48x320"}), "");
  EXPECT_EQ(conflict_of({"--input-shape", "x=1x3x48x320", "--input-shape", "y=1x8"}), "");
}

TEST(CliOptions, BatchThatContradictsAnInputShapesFirstDimensionIsAUsageError) {
  EXPECT_EQ(conflict_of({"--batch", "2", "--input-shape", "x=1x3x48x320"}),
            "--batch 2 and --input-shape x=1x3x48x320 give input 'x' two batch sizes (2 and 1); give one of "
            "them");
  EXPECT_EQ(conflict_of({"--batch", "4", "--input-shape", "x=4x3x48x320"}), "");
  EXPECT_EQ(conflict_of({"--input-shape", "x=4x3x48x320"}), "");
}

}  // namespace
}  // namespace npusim::sim::cli

int sc_main(int argc, char* argv[]) {
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
