#pragma once
// Choosing the PTQ recipe by measurement. Which of cross-layer equalisation and bias correction helps differs
// from model to model (docs/quantization.md, "Choosing the recipe by measurement"): on the random-weight
// ResNet-18 bias correction gains 1.4 dB and equalisation loses 0.3; on MobileNetV2 both gain; on a trained
// PP-OCR classifier bias correction loses 0.7 dB. The calibration inputs can tell which: every candidate is
// quantized from the same calibration statistics, run on the first calibration inputs (never on evaluation
// inputs), and the one whose output is closest to fp32 there is taken.
#include <string>
#include <vector>

#include "compiler/ir/graph.h"
#include "compiler/quant/accuracy.h"
#include "compiler/quant/precision.h"
#include "compiler/quant/quantize.h"

namespace npusim::compiler::quant {

// One candidate: the transformations that change a float model's int8 numbers, not its function.
struct Recipe {
  bool cross_layer_equalization = false;
  BiasCorrection bias_correction = BiasCorrection::kNone;
};
// "none", "bias-correction", "bias-correction-nonnegative", "cle", "cle+bias-correction", ...
std::string to_string(const Recipe& r);

// The candidates, simplest first: no correction, bias correction on non-negative inputs, on every layer;
// then the same three on the equalised graph (only when equalisation changes some pair).
std::vector<Recipe> recipe_candidates(bool equalization_changes_graph);

// The candidate taken from the scores (calibration output SQNR, in candidates' order): the highest; a
// later (less simple) candidate must beat every earlier one by more than `margin_db`, so a tie or a
// difference within noise keeps the simpler recipe.
size_t choose_recipe(const std::vector<double>& calibration_sqnr_db, double margin_db);

// Calibration inputs the candidates are scored on (the first ones of the calibration set) and the margin a
// candidate must win by.
inline constexpr int kRecipeScoringInputs = 8;
inline constexpr double kRecipeMarginDb = 0.05;

// build_plan for a float model with the recipe chosen by measurement: calibrates `g` (and, when equalisation
// changes some pair, an equalised copy of it), quantizes every candidate of recipe_candidates with
// request.quant's other options, scores each by output SQNR against fp32 on the first kRecipeScoringInputs
// calibration inputs, and returns the chosen candidate's plan; `g` becomes the equalised graph when that
// candidate is taken. The plan's calibration.recipe lists the candidates and their scores (and
// calibration.equalization the pairs when equalisation was taken). request.quant's own
// cross_layer_equalization and bias_correction are ignored (the choice replaces them).
PrecisionPlan build_plan_choosing_recipe(Graph& g, const PlanRequest& request,
                                         const Graph* original = nullptr);

}  // namespace npusim::compiler::quant
