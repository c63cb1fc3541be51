#include "compiler/quant/recipe.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <utility>

#include "compiler/passes/cross_layer_equalization.h"
#include "compiler/quant/calibration.h"

namespace npusim::compiler::quant {

std::string to_string(const Recipe& r) {
  std::string out = r.cross_layer_equalization ? "cle" : "";
  if (r.smoothquant) out += out.empty() ? "smoothquant" : "+smoothquant";
  const char* bias = r.bias_correction == BiasCorrection::kAll                 ? "bias-correction"
                     : r.bias_correction == BiasCorrection::kNonNegativeInputs ? "bias-correction-nonnegative"
                                                                               : nullptr;
  if (bias) out += out.empty() ? std::string(bias) : "+" + std::string(bias);
  return out.empty() ? "none" : out;
}

std::vector<Recipe> recipe_candidates(bool equalization_changes_graph, bool smoothing_changes_graph) {
  std::vector<Recipe> out;
  auto add = [&](bool cle, bool smooth) {
    for (BiasCorrection b : {BiasCorrection::kNone, BiasCorrection::kNonNegativeInputs, BiasCorrection::kAll})
      out.push_back({cle, smooth, b});
  };
  add(false, false);
  if (equalization_changes_graph) add(true, false);
  if (smoothing_changes_graph) add(false, true);
  return out;
}

size_t choose_recipe(const std::vector<std::vector<double>>& sqnr_db_per_input, double margin_db) {
  size_t best = 0;
  for (size_t k = 1; k < sqnr_db_per_input.size(); ++k) {
    const std::vector<double>& a = sqnr_db_per_input[k];
    const std::vector<double>& b = sqnr_db_per_input[best];
    const size_t n = std::min(a.size(), b.size());
    if (n == 0) continue;
    double mean = 0, sq = 0;
    for (size_t i = 0; i < n; ++i) mean += (a[i] - b[i]) / static_cast<double>(n);
    for (size_t i = 0; i < n; ++i) sq += (a[i] - b[i] - mean) * (a[i] - b[i] - mean);
    const double standard_error =
        n > 1 ? std::sqrt(sq / static_cast<double>(n - 1) / static_cast<double>(n)) : 0.0;
    if (mean > margin_db && mean > 2 * standard_error) best = k;
  }
  return best;
}

namespace {

passes::ChannelMaxAbs max_abs_from(const std::map<std::string, TensorStats>& stats) {
  return [&stats](const std::string& name) {
    auto it = stats.find(name);
    return it == stats.end() ? std::vector<double>{} : it->second.last_dim_max_abs();
  };
}

}  // namespace

passes::Smoothing smooth_activations(Graph& g, const PlanRequest& request, double alpha) {
  const CalibrationSet calibration = calibration_inputs(g, request);
  const std::map<std::string, TensorStats> stats =
      collect_statistics(g, calibration.samples, request.quant.calibration.bins);
  return passes::smooth_linear_inputs(g, alpha, max_abs_from(stats));
}

PrecisionPlan build_plan_choosing_recipe(Graph& g, const PlanRequest& request, const Graph* original) {
  const auto start = std::chrono::steady_clock::now();
  PlanRequest base = request;
  base.quant.cross_layer_equalization = false;
  base.quant.smoothquant_alpha.reset();
  base.quant.bias_correction = BiasCorrection::kNone;
  if (!resolve_plan(g, request.spec, original).has_int8()) return build_plan(g, base, original);
  const CalibrationSet calibration = calibration_inputs(g, request);
  // Held out: the candidates are calibrated on the other inputs and scored on the first kRecipeScoringInputs,
  // so a correction fitted to the scoring inputs' own noise (bias correction's per-channel means) earns
  // nothing. With fewer than twice that many inputs they are scored on inputs they were calibrated on.
  const std::vector<Sample>& all = calibration.samples;
  const size_t n_scoring = std::min<size_t>(all.size(), kRecipeScoringInputs);
  const bool held_out = all.size() >= 2 * n_scoring;
  const std::vector<Sample> scoring(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(n_scoring));
  CalibrationSet fit = calibration;
  if (held_out)
    fit.samples.erase(fit.samples.begin(), fit.samples.begin() + static_cast<std::ptrdiff_t>(n_scoring));
  // Every candidate is judged against the model as given.
  const std::vector<std::map<std::string, Tensor>> refs = fp32_outputs(g, scoring);
  const int bins = request.quant.calibration.bins;
  const std::map<std::string, TensorStats> plain_stats = collect_statistics(g, fit.samples, bins);
  Graph equalized = g;
  passes::Equalization equalization = passes::equalize_cross_layer(equalized);
  Graph smoothed = g;
  passes::Smoothing smoothing =
      passes::smooth_linear_inputs(smoothed, kSmoothQuantAlpha, max_abs_from(plain_stats));
  const std::vector<Recipe> recipes =
      recipe_candidates(!equalization.pairs.empty(), !smoothing.layers.empty());

  std::vector<OutputSqnr> scores;
  // Candidates come grouped by graph: the statistics of the equalised or smoothed graph are collected once.
  std::map<std::string, TensorStats> other_stats;
  const Graph* other = nullptr;
  auto graph_of = [&](const Recipe& r) -> const Graph& {
    return r.cross_layer_equalization ? equalized : r.smoothquant ? smoothed : g;
  };
  auto request_of = [&](const Recipe& r) {
    PlanRequest candidate = base;
    candidate.quant.bias_correction = r.bias_correction;
    return candidate;
  };
  for (const Recipe& r : recipes) {
    const Graph& graph = graph_of(r);
    if (&graph != &g && &graph != other) {
      other_stats = collect_statistics(graph, fit.samples, bins);
      other = &graph;
    }
    const PrecisionPlan plan =
        plan_from_statistics(graph, request_of(r), fit, &graph == &g ? plain_stats : other_stats, original);
    scores.push_back(output_sqnr(graph, plan, scoring, refs));
  }
  std::vector<std::vector<double>> per_input;
  for (const OutputSqnr& s : scores) per_input.push_back(s.per_input);
  const size_t k = choose_recipe(per_input, kRecipeMarginDb);
  // The chosen recipe calibrated on every input.
  const Graph& chosen = graph_of(recipes[k]);
  PrecisionPlan plan = plan_from_statistics(
      chosen, request_of(recipes[k]), calibration,
      !held_out && &chosen == &g ? plain_stats : collect_statistics(chosen, all, bins), original);
  RecipeChoice& choice = plan.calibration.recipe;
  choice.chosen = true;
  choice.recipe = to_string(recipes[k]);
  for (size_t i = 0; i < recipes.size(); ++i)
    choice.candidates.push_back({to_string(recipes[i]), scores[i].overall, scores[i].per_input});
  choice.scoring_inputs = static_cast<int>(scoring.size());
  choice.held_out = held_out;
  if (recipes[k].cross_layer_equalization) {
    g = std::move(equalized);
    plan.calibration.equalization = std::move(equalization);
  } else if (recipes[k].smoothquant) {
    g = std::move(smoothed);
    plan.calibration.smoothing = std::move(smoothing);
  }
  choice.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return plan;
}

}  // namespace npusim::compiler::quant
