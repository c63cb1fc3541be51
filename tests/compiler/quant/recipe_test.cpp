// Choosing the PTQ recipe by measurement (compiler/quant/recipe.h): the choice rule on given scores (every
// candidate can win; a less simple one only by more than the margin), and on small graphs whose best recipe
// follows from first principles -- bias correction where the inputs' mean turns rounded weights into an
// output shift, equalisation where one conv channel's range crushes the others under per-tensor scales, and
// no correction where the weights round exactly (every candidate computes the same).
#include <gtest/gtest.h>

#include <cmath>

#include "compiler/passes/cross_layer_equalization.h"
#include "compiler/passes/lowered.h"
#include "compiler/quant/recipe.h"
#include "tests/compiler/passes/graph_builder.h"

namespace npusim::compiler::quant {
namespace {

using testing::GraphBuilder;

TEST(RecipeChoice, EachCandidateWinsWhenItsCalibrationSqnrIsHigherOnEveryInput) {
  const std::vector<Recipe> all = recipe_candidates(true, true);
  ASSERT_EQ(all.size(), 9u);
  for (size_t winner = 0; winner < all.size(); ++winner) {
    std::vector<std::vector<double>> scores(all.size(), {20.0, 18.0, 22.0, 19.0});
    for (double& v : scores[winner]) v += 1.0;
    EXPECT_EQ(choose_recipe(scores, kRecipeMarginDb), winner) << to_string(all[winner]);
  }
}

TEST(RecipeChoice, ALessSimpleCandidateMustWinByTheMarginAndBeyondTheInputToInputNoise) {
  EXPECT_EQ(choose_recipe({{20.0, 21.0}, {20.0, 21.0}, {20.0, 21.0}}, 0.05), 0u);  // a tie keeps the simplest
  EXPECT_EQ(choose_recipe({{20.0, 21.0}, {20.04, 21.04}}, 0.05), 0u);              // within the margin
  EXPECT_EQ(choose_recipe({{20.0, 21.0}, {20.06, 21.06}}, 0.05), 1u);
  // A higher mean made of one large gain and a loss: the paired difference (+2, -1) has mean 0.5 and
  // standard error 1.5, so it is noise.
  EXPECT_EQ(choose_recipe({{20.0, 21.0}, {22.0, 20.0}}, 0.05), 0u);
  // The later one must beat the best so far, not only the first.
  EXPECT_EQ(choose_recipe({{20.0, 21.0}, {20.5, 21.5}, {20.53, 21.53}}, 0.05), 1u);
  EXPECT_EQ(choose_recipe({{20.0, 21.0}, {19.0, 20.0}, {20.2, 21.2}, {20.1, 21.1}}, 0.05), 2u);
}

TEST(RecipeChoice, CandidatesAreSimplestFirstAndEqualisedOnlyWhenEqualisationChangesTheGraph) {
  std::vector<std::string> names;
  for (const Recipe& r : recipe_candidates(true)) names.push_back(to_string(r));
  EXPECT_EQ(names, (std::vector<std::string>{"none", "bias-correction-nonnegative", "bias-correction", "cle",
                                             "cle+bias-correction-nonnegative", "cle+bias-correction"}));
  EXPECT_EQ(recipe_candidates(false).size(), 3u);
  names.clear();
  for (const Recipe& r : recipe_candidates(false, true)) names.push_back(to_string(r));
  EXPECT_EQ(names, (std::vector<std::string>{"none", "bias-correction-nonnegative", "bias-correction",
                                             "smoothquant", "smoothquant+bias-correction-nonnegative",
                                             "smoothquant+bias-correction"}));
}

PlanRequest int8_request(int calibration_inputs = 16) {
  PlanRequest r;
  r.spec.model = Precision::kInt8;
  r.quant.per_channel = false;  // coarse weights: what each candidate corrects is large
  r.quant.calibration.method = CalibrationMethod::kMinMax;
  r.calibration_count = calibration_inputs;
  r.choose_recipe = true;
  return r;
}

std::vector<double> scores_of(const RecipeChoice& c) {
  std::vector<double> s;
  for (const RecipeCandidate& k : c.candidates) s.push_back(k.calibration_sqnr_db);
  EXPECT_EQ(c.candidates.empty() ? 0u : c.candidates[0].per_input_sqnr_db.size(), size_t(c.scoring_inputs));
  return s;
}

TEST(RecipeChoice, BiasCorrectionWinsWhereTheInputsMeanShiftsTheRoundedWeightsOutput) {
  // |x| + 3 (never negative, mean about 3.8) into a MatMul with per-tensor weights: each output channel's
  // int8 mean is off by sum_k err[k][c] x 3.8, which bias correction removes; both bias corrections correct
  // this one layer alike (its input is non-negative), so the simpler one is kept.
  GraphBuilder b;
  auto x = b.input("x", {1, 64});
  auto a = b.node("Abs", {x}, "a", {1, 64});
  auto s = b.node("Add", {a, b.scalar("three", 3.0f)}, "s", {1, 64});
  // One weight of 40 sets the per-tensor scale (40 / 127): the others, in [-1, 1], round to 0 or one step.
  std::vector<float> w = testing::uniform(64 * 8, 5);
  w[0] = 40.0f;
  b.output(b.node("MatMul", {s, b.constant("w", Tensor::from_floats({64, 8}, w))}, "y", {1, 8}));
  Graph g = b.build();
  const Graph before = g;
  // 64 inputs: the per-channel means bias correction needs come from the 56 not scored (with 8 of them the
  // means' own noise costs more than the correction gains).
  const PrecisionPlan plan = build_plan_choosing_recipe(g, int8_request(64));
  const RecipeChoice& c = plan.calibration.recipe;
  ASSERT_TRUE(c.chosen);
  EXPECT_EQ(c.recipe, "bias-correction-nonnegative") << ::testing::PrintToString(scores_of(c));
  ASSERT_EQ(c.candidates.size(), 3u);  // no conv pair to equalise
  EXPECT_GT(c.candidates[1].calibration_sqnr_db, c.candidates[0].calibration_sqnr_db + 1.0);
  EXPECT_EQ(c.candidates[1].calibration_sqnr_db, c.candidates[2].calibration_sqnr_db);
  EXPECT_EQ(c.scoring_inputs, kRecipeScoringInputs);
  EXPECT_TRUE(c.held_out);  // scored on 8, calibrated on the other 56
  EXPECT_FALSE(plan.calibration.equalization.applied);
  // The chosen plan is the one the recipe imposed builds.
  PlanRequest imposed = int8_request(64);
  imposed.choose_recipe = false;
  imposed.quant.bias_correction = BiasCorrection::kNonNegativeInputs;
  const PrecisionPlan direct = build_plan(before, imposed);
  EXPECT_EQ(plan.layers.at("MatMul_2").bias, direct.layers.at("MatMul_2").bias);
  EXPECT_EQ(g.nodes.size(), before.nodes.size());
}

TEST(RecipeChoice, EqualisationWinsAndTheGraphIsEqualisedWhereOneChannelsRangeCrushesTheOthers) {
  // conv1's 8 output channels' weights are 4x apart from one to the next (a range of 4^7) and conv2 reads
  // them with weights 4x apart the other way, so every channel counts alike in the output: with per-tensor
  // weight and activation scales conv1's small channels collapse to a few levels; equalised (Relu between),
  // every channel has the same range.
  GraphBuilder b;
  auto x = b.input("x", {1, 4, 8, 8});
  std::vector<float> w1 = testing::uniform(8 * 4, 1);
  for (int i = 0; i < 8; ++i)
    for (int k = 0; k < 4; ++k) w1[i * 4 + k] *= static_cast<float>(std::pow(4.0, i - 4));
  auto h = b.node(
      "Conv", {x, b.constant("w1", Tensor::from_floats({8, 4, 1, 1}, w1)), b.random_constant("b1", {8}, 2)},
      "h", {1, 8, 8, 8});
  auto r = b.node("Relu", {h}, "r", {1, 8, 8, 8});
  std::vector<float> w2 = testing::uniform(4 * 8, 3);
  for (int o = 0; o < 4; ++o)
    for (int i = 0; i < 8; ++i) w2[o * 8 + i] *= static_cast<float>(std::pow(4.0, 4 - i));
  b.output(b.node("Conv", {r, b.constant("w2", Tensor::from_floats({4, 8, 1, 1}, w2))}, "y", {1, 4, 8, 8}));
  const Graph imported = b.build();
  Graph g = imported;
  lower(g);
  Graph equalized = g;
  passes::equalize_cross_layer(equalized);
  const PrecisionPlan plan = build_plan_choosing_recipe(g, int8_request());
  const RecipeChoice& c = plan.calibration.recipe;
  ASSERT_EQ(c.candidates.size(), 6u);
  EXPECT_EQ(c.recipe.rfind("cle", 0), 0u) << c.recipe << " " << ::testing::PrintToString(scores_of(c));
  EXPECT_GT(c.candidates[3].calibration_sqnr_db, c.candidates[0].calibration_sqnr_db + 3.0);
  ASSERT_TRUE(plan.calibration.equalization.applied);
  EXPECT_EQ(plan.calibration.equalization.pairs.size(), 1u);
  // `g` is now the equalised graph the plan belongs to, and computes what the model computes.
  ASSERT_EQ(g.nodes.size(), equalized.nodes.size());
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    for (size_t i = 1; i < g.nodes[k].inputs.size(); ++i) {
      const Value& v = g.value(g.nodes[k].inputs[i]);
      if (!v.constant) continue;
      EXPECT_EQ(v.constant->f, equalized.value(equalized.nodes[k].inputs[i]).constant->f);
    }
  }
  EXPECT_TRUE(testing::same_outputs(imported, g, 1e-5));
}

TEST(RecipeChoice, NoCorrectionIsKeptWhereTheWeightsRoundExactlyAndEveryCandidateComputesTheSame) {
  // Integer weights in [-127, 127] with 127 among them: the per-tensor scale is 1 and every weight is its own
  // code, so no rounding shift exists to correct and all candidates score the same.
  GraphBuilder b;
  auto x = b.input("x", {1, 16});
  auto a = b.node("Abs", {x}, "a", {1, 16});
  std::vector<float> w = testing::uniform(16 * 4, 7, -127.0f, 127.0f);
  for (float& v : w) v = std::round(v);
  w[0] = 127.0f;
  b.output(b.node("MatMul", {a, b.constant("w", Tensor::from_floats({16, 4}, w))}, "y", {1, 4}));
  Graph g = b.build();
  const PrecisionPlan plan = build_plan_choosing_recipe(g, int8_request());
  const RecipeChoice& c = plan.calibration.recipe;
  EXPECT_EQ(c.recipe, "none");
  ASSERT_EQ(c.candidates.size(), 3u);
  EXPECT_EQ(c.candidates[1].calibration_sqnr_db, c.candidates[0].calibration_sqnr_db);
  EXPECT_EQ(c.candidates[2].calibration_sqnr_db, c.candidates[0].calibration_sqnr_db);
}

TEST(RecipeChoice, APlanWithoutInt8ChoosesNothing) {
  GraphBuilder b;
  auto x = b.input("x", {1, 16});
  b.output(b.node("MatMul", {x, b.random_constant("w", {16, 4}, 5)}, "y", {1, 4}));
  Graph g = b.build();
  PlanRequest r = int8_request();
  r.spec.model = Precision::kFp16;
  EXPECT_FALSE(build_plan_choosing_recipe(g, r).calibration.recipe.chosen);
}

}  // namespace
}  // namespace npusim::compiler::quant
