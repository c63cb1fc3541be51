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
#include "compiler/passes/smoothquant.h"
#include "compiler/quant/accuracy.h"
#include "compiler/quant/precision.h"
#include "compiler/quant/quantize.h"

namespace npusim::compiler::quant {

// One candidate: the transformations that change a float model's int8 numbers, not its function.
struct Recipe {
  bool cross_layer_equalization = false;
  bool smoothquant = false;  // with kSmoothQuantAlpha
  BiasCorrection bias_correction = BiasCorrection::kNone;
};
// "none", "bias-correction", "bias-correction-nonnegative", "cle", "cle+bias-correction", "smoothquant", ...
std::string to_string(const Recipe& r);

// SmoothQuant's migration strength in the choice and --smoothquant's default (Xiao et al.'s default).
inline constexpr double kSmoothQuantAlpha = 0.5;

// The candidates, simplest first: no correction, bias correction on non-negative inputs, on every layer;
// then the same three on the equalised graph (only when equalisation changes some pair), then on the
// smoothed graph (only when SmoothQuant smooths some layer).
std::vector<Recipe> recipe_candidates(bool equalization_changes_graph, bool smoothing_changes_graph = false);

// The candidate taken from the scores: each candidate's output SQNR on every scoring input, in candidates'
// order. A later (less simple) candidate replaces the best so far when its SQNR is higher by more than
// `margin_db` on average over the inputs and by more than twice the standard error of that paired difference:
// a gain within the input-to-input noise keeps the simpler recipe. (Measured on random-weight
// MobileNetV3-Small: bias correction's gain was +0.4 dB on 4 evaluation inputs and -0.1 dB on the 32
// calibration inputs -- noise, which a plain "highest SQNR" rule follows.)
size_t choose_recipe(const std::vector<std::vector<double>>& sqnr_db_per_input, double margin_db);

// Calibration inputs the candidates are scored on (the first ones of the calibration set) and the margin a
// candidate must win by.
inline constexpr int kRecipeScoringInputs = 8;
inline constexpr double kRecipeMarginDb = 0.05;

// SmoothQuant on `g` (lowered) with the activation ranges of the request's calibration inputs (one fp32 pass
// over them): passes::smooth_linear_inputs with each LayerNormalization output's max |x| per channel.
passes::Smoothing smooth_activations(Graph& g, const PlanRequest& request, double alpha);

// build_plan for a float model with the recipe chosen by measurement: calibrates `g` (and copies of it
// equalised and smoothed, when either changes the graph), quantizes every candidate of recipe_candidates
// with request.quant's other options, scores each by output SQNR against fp32 on the first
// kRecipeScoringInputs calibration inputs, and returns the chosen candidate's plan; `g` becomes the
// equalised or smoothed graph when such a candidate is taken. The plan's calibration.recipe lists the
// candidates and their scores (calibration.equalization / smoothing what was applied when taken).
// request.quant's own cross_layer_equalization, smoothquant_alpha and bias_correction are ignored (the choice
// replaces them).
PrecisionPlan build_plan_choosing_recipe(Graph& g, const PlanRequest& request,
                                         const Graph* original = nullptr);

}  // namespace npusim::compiler::quant
