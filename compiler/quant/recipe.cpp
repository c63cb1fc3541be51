#include "compiler/quant/recipe.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "compiler/passes/cross_layer_equalization.h"
#include "compiler/quant/calibration.h"

namespace npusim::compiler::quant {

std::string to_string(const Recipe& r) {
  std::string bias = r.bias_correction == BiasCorrection::kAll                 ? "bias-correction"
                     : r.bias_correction == BiasCorrection::kNonNegativeInputs ? "bias-correction-nonnegative"
                                                                               : "";
  if (!r.cross_layer_equalization) return bias.empty() ? "none" : bias;
  return bias.empty() ? "cle" : "cle+" + bias;
}

std::vector<Recipe> recipe_candidates(bool equalization_changes_graph) {
  std::vector<Recipe> out;
  for (bool cle : {false, true}) {
    if (cle && !equalization_changes_graph) break;
    for (BiasCorrection b : {BiasCorrection::kNone, BiasCorrection::kNonNegativeInputs, BiasCorrection::kAll})
      out.push_back({cle, b});
  }
  return out;
}

size_t choose_recipe(const std::vector<double>& calibration_sqnr_db, double margin_db) {
  size_t best = 0;
  for (size_t k = 1; k < calibration_sqnr_db.size(); ++k)
    if (calibration_sqnr_db[k] > calibration_sqnr_db[best] + margin_db) best = k;
  return best;
}

PrecisionPlan build_plan_choosing_recipe(Graph& g, const PlanRequest& request, const Graph* original) {
  const auto start = std::chrono::steady_clock::now();
  PlanRequest base = request;
  base.quant.cross_layer_equalization = false;
  base.quant.bias_correction = BiasCorrection::kNone;
  if (!resolve_plan(g, request.spec, original).has_int8()) return build_plan(g, base, original);
  const CalibrationSet calibration = calibration_inputs(g, request);
  const std::vector<Sample> scoring(
      calibration.samples.begin(),
      calibration.samples.begin() + std::min<size_t>(calibration.samples.size(), kRecipeScoringInputs));
  // Every candidate is judged against the model as given.
  const std::vector<std::map<std::string, Tensor>> refs = fp32_outputs(g, scoring);
  Graph equalized = g;
  passes::Equalization equalization = passes::equalize_cross_layer(equalized);
  equalization.applied = true;
  const std::vector<Recipe> recipes = recipe_candidates(!equalization.pairs.empty());

  std::vector<PrecisionPlan> plans;
  std::vector<double> scores;
  for (bool cle : {false, true}) {
    const Graph& graph = cle ? equalized : g;
    std::map<std::string, TensorStats> stats;
    bool collected = false;
    for (const Recipe& r : recipes) {
      if (r.cross_layer_equalization != cle) continue;
      if (!collected) stats = collect_statistics(graph, calibration.samples, request.quant.calibration.bins);
      collected = true;
      PlanRequest candidate = base;
      candidate.quant.bias_correction = r.bias_correction;
      plans.push_back(plan_from_statistics(graph, candidate, calibration, stats, original));
      scores.push_back(output_sqnr_db(graph, plans.back(), scoring, refs));
    }
  }
  const size_t k = choose_recipe(scores, kRecipeMarginDb);
  PrecisionPlan plan = std::move(plans[k]);
  RecipeChoice& choice = plan.calibration.recipe;
  choice.chosen = true;
  choice.recipe = to_string(recipes[k]);
  for (size_t i = 0; i < recipes.size(); ++i) choice.candidates.push_back({to_string(recipes[i]), scores[i]});
  choice.scoring_inputs = static_cast<int>(scoring.size());
  if (recipes[k].cross_layer_equalization) {
    g = std::move(equalized);
    plan.calibration.equalization = std::move(equalization);
  }
  choice.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return plan;
}

}  // namespace npusim::compiler::quant
