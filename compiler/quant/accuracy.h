#pragma once
// The accuracy report: per layer, the quantized reference (emulate.h) against the FP32 reference on
// the same inputs (SQNR, cosine, max |error|), the first layer that falls below an SQNR threshold, a
// weight-outlier table, the calibration provenance, and mixed-precision advice. Plain data plus a JSON
// writer for the run report's `accuracy` section (docs/quantization.md documents every field).
#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "compiler/ir/graph.h"
#include "compiler/quant/calibration.h"
#include "compiler/quant/precision.h"
#include "compiler/quant/qdq.h"
#include "compiler/quant/quantize.h"
#include "compiler/quant/task_metrics.h"

namespace npusim::compiler::quant {

// SQNR reported when the error is exactly zero (JSON has no infinity).
inline constexpr double kExactSqnrDb = 300.0;

struct LayerAccuracy {
  std::string name;
  std::string op;
  Precision precision = Precision::kFp32;
  double sqnr_db = kExactSqnrDb;  // 10 log10(sum ref^2 / sum (out - ref)^2) over all evaluation inputs
  double cosine = 1.0;
  double max_abs_error = 0.0;  // over the values that stayed finite
  int64_t elements = 0;        // per input
  // Over all evaluation inputs (0 when not applicable to the layer's format):
  int64_t nonfinite = 0;   // outputs that became inf/NaN where the fp32 reference is finite (then
                           // sqnr_db = -300 and cosine = 0: the layer's result is lost)
  int64_t overflow = 0;    // fp16/bf16: reference values beyond the format's largest finite value
  int64_t underflow = 0;   // fp16/bf16: nonzero reference values below the format's smallest normal
  int64_t saturated = 0;   // int8: reference values outside the output's int8 range (calibration)
  double ref_max_abs = 0;  // largest |reference value|
  // The layer's own error: its output as the quantized layer computes it from the fp32 reference's inputs
  // (emulate_node), against the reference, over the same inputs. sqnr_db above is what the layer has in
  // the quantized run, the error of every layer above it included; this is what it adds itself (its input
  // quantization, weights, arithmetic and output rounding). Absent for an fp32 layer (it adds nothing).
  std::optional<double> own_sqnr_db, own_cosine;
};

// A weight channel whose max |w| is far above the layer's typical channel: with per-tensor scales it
// sets the scale of every channel, crushing the others into a few int8 levels.
struct WeightOutlier {
  std::string layer;
  int64_t channel = 0;
  float channel_max_abs = 0;  // max |w| of the channel
  float median_max_abs = 0;   // median over the layer's channels of their max |w|
  double factor = 0;          // channel_max_abs / median_max_abs
};

struct AccuracyOptions {
  double bad_layer_sqnr_db = 20.0;  // first_bad_layer: the first layer below this
  double outlier_factor = 8.0;      // a channel is an outlier above this many times the median
  std::optional<TaskOptions> task;  // --task: task metrics on the model's first output
  bool own_error = true;            // each quantized layer's own error (LayerAccuracy::own_sqnr_db)
};

// The model's output against fp32 when one node alone runs in int8 (the rest fp32).
struct NodeSensitivity {
  std::string name, op;
  double sqnr_db = 0;
  double cosine = 1;
};

struct MixedPrecisionAdvice {
  double target_sqnr_db = 0;
  bool met = false;
  double achieved_sqnr_db = 0;            // output SQNR with `layers` in fp16, `int16_layers` in int16
  std::vector<std::string> layers;        // node names to keep in fp16, in the order chosen
  std::vector<std::string> int16_layers;  // node names to run with int16 activations (not in `layers`)
  std::string overrides;                  // ready to use: "conv3=int16,conv1=fp16,conv5=fp16"
  double cost = 0;                        // the cost callback on the advised plan (0 without one)
  double cost_int8 = 0;                   // the cost callback on the plan as given
  // With a cost callback, a met advice with int16 layers is compared with the same moved layers all in
  // fp16 (its SQNR and cost); `took_fp16_twin` when the twin met the target for less and replaced it.
  // `mix_*`: the int16 + fp16 advice it was compared with.
  std::optional<double> fp16_twin_sqnr_db, fp16_twin_cost;
  double mix_sqnr_db = 0, mix_cost = 0;
  bool took_fp16_twin = false;
  // Every int8 node (matrix layers and vector nodes), most harmful first: the ranking the moves follow
  // (without a cost callback). Empty when the plan as given meets the target.
  std::vector<NodeSensitivity> sensitivity;
  // The inputs the advice was fitted on (the CLI's --advise-inputs; "" = the evaluation inputs).
  int fitted_inputs = 0;
  std::string fitted_source;
  // The advised plan judged on the evaluation inputs when the advice was fitted on others (the CLI fills
  // it): the figures a user can trust, as the fitting inputs are the ones the moves were chosen for.
  struct Judgement {
    int inputs = 0;
    std::string source;  // "" = synthetic
    double sqnr_db = kExactSqnrDb;
    double cosine = 1.0;
    std::optional<TaskMetrics> task;
  };
  std::optional<Judgement> held_out;
};

// A classifier's output is a Softmax of its logits: probabilities near 0 and 1 hide the logits' error
// (32.6 dB on the probabilities while the last real layer reads 14.3). The headline is then the logits'.
struct BeforeSoftmax {
  std::string value;  // the Softmax's input
  std::string layer;  // the node that computes it
  double sqnr_db = 0.0;
  double cosine = 1.0;
};

struct AccuracyReport {
  std::string precision;  // the model-wide precision requested ("int8", "fp16", ...)
  double output_sqnr_db = kExactSqnrDb;
  double output_cosine = 1.0;
  double output_max_abs_error = 0.0;
  int64_t output_nonfinite = 0;                 // inf/NaN output values where the reference is finite
  std::optional<BeforeSoftmax> before_softmax;  // when the first output is a final Softmax/LogSoftmax
  std::string first_bad_layer;                  // "" when every layer meets the threshold (JSON null)
  double bad_layer_sqnr_db = 20.0;
  std::vector<LayerAccuracy> layers;  // graph order
  CalibrationInfo calibration;        // method "" when nothing was calibrated
  int evaluation_inputs = 0;
  bool evaluation_synthetic = false;
  std::string evaluation_source;  // the folder the evaluation inputs came from ("" = synthetic)
  std::vector<WeightOutlier> weight_outliers;
  std::vector<std::string> warnings;  // sentences for the user (synthetic calibration, fallbacks)
  std::optional<TaskMetrics> task;    // with AccuracyOptions::task
  // Filled by advise_mixed_precision when asked.
  std::optional<MixedPrecisionAdvice> advice;
};

// Per-layer and output comparison of `plan` against an all-fp32 run of the same graph on `samples`.
AccuracyReport evaluate_accuracy(const Graph& g, const PrecisionPlan& plan,
                                 const std::vector<Sample>& samples, const AccuracyOptions& options = {});

// Channels of constant matrix weights whose max |w| exceeds factor x the layer's median channel max.
std::vector<WeightOutlier> find_weight_outliers(const Graph& g, double factor);

// Latency (or any cost) of a plan; the CLI wires it to the simulator. Lower is better.
using PlanCost = std::function<double(const PrecisionPlan&)>;
// Quantizes a plan again after nodes' requests changed (NodePrecision::requested kInt16 for int16
// activations, effective kFp16 for fp16): the QParams and LayerQuants follow the new requests. The CLI
// wires it to quantize_plan over the calibration statistics the plan was built from (requantize_plan).
using PlanRequantizer = std::function<PrecisionPlan(const PrecisionPlan&)>;

// Greedy by sensitivity: each int8 node (matrix layer or vector node) is quantized alone (the rest fp32) to
// measure the output SQNR it costs; layers are then moved up most-harmful first (with a cost callback: most
// harm per unit of added cost, cost(plan with the layer in fp16) - cost(plan)), re-evaluating the output SQNR
// after each, until `target_sqnr_db` is met. With `int16` (the array has int16 x int8 MACs), int16
// activations are the first step: the layers are moved to int16 in that order, and only when every
// layer that can take int16 has and the target is still not met are they moved on to fp16, in the same
// order. Without it, layers go straight to fp16. With both, a met advice that keeps int16 layers is
// compared with the same layers all in fp16 (int16 and fp16 neighbours convert every activation between
// them, so the mix can cost more): the twin is taken when it meets the target for less.
// `advised`, when given, receives the advised plan (`plan` itself when it meets the target as it is).
MixedPrecisionAdvice advise_mixed_precision(const Graph& g, const PrecisionPlan& plan,
                                            const std::vector<Sample>& samples, double target_sqnr_db,
                                            const PlanCost& cost = nullptr,
                                            const PlanRequantizer& int16 = nullptr,
                                            PrecisionPlan* advised = nullptr);

// A PlanRequantizer's work: `plan`'s node requests (NodePrecision::requested / effective) quantized
// again with `stats` (the calibration statistics `plan` was built from) and `options`: int16 flags
// re-derived from the requests, QParams and LayerQuants rebuilt. Empirical bias correction is not
// applied again.
PrecisionPlan requantize_plan(const Graph& g, const PrecisionPlan& plan,
                              const std::map<std::string, TensorStats>& stats, const QuantOptions& options);

// The `accuracy` object of the report JSON (without a trailing newline).
void write_accuracy_json(const AccuracyReport& r, std::ostream& out);
std::string accuracy_json(const AccuracyReport& r);
// {"rounds": N, "pairs": [{"first", "second", "between", "min_scale", "max_scale"}], "skipped": [{"first",
// "second", "reason"}]}: what --cle did (the accuracy section's and the compile section's
// cross_layer_equalization).
std::string equalization_json(const passes::Equalization& e);
// {"alpha", "layers": [{"norm", "linears", "min_scale", "max_scale"}], "skipped": [{"norm", "reason"}]}: what
// SmoothQuant did (the accuracy section's and the compile section's smoothquant).
std::string smoothing_json(const passes::Smoothing& s);
// {"chosen", "scoring_inputs", "held_out", "seconds", "candidates": [{"name", "calibration_sqnr_db",
// "per_input_sqnr_db"}]}: the PTQ recipe chosen by measurement (recipe.h; the accuracy section's and the
// compile section's calibration.recipe).
std::string recipe_json(const RecipeChoice& c);
// One line: "PTQ recipe: NAME, chosen by output SQNR on N calibration inputs (none 29.10 dB, ...; 3.2 s)".
std::string recipe_summary(const RecipeChoice& c);
// Human-readable: output figures, calibration warning, the worst layers, first bad layer, outliers.
std::string accuracy_summary(const AccuracyReport& r, size_t worst_layers = 10);

// One call for the CLI: resolve the spec on `g` (lowered; `original` = imported graph for op-type
// keys), calibrate when some node is int8 (on `calibration_dir` samples, else `synthetic_count`
// seeded synthetic samples, flagged), quantize, and return the plan.
struct PlanRequest {
  PrecisionSpec spec;
  // A pre-quantized model (build_plan's `model`): its quantized nodes run in int8 with its own scales
  // unless overridden (--precision auto). False: only nodes the spec puts in int8 are int8, and they
  // take the model's scales where it has them.
  bool follow_model = false;
  QuantOptions quant;
  std::string calibration_dir;           // "" = synthetic
  int calibration_count = 32;            // samples read from the folder (0 = all) or generated
  std::optional<Preprocess> preprocess;  // how calibration images become inputs (--preprocess)
  uint32_t seed = 1;
  // Choose the PTQ recipe (cross-layer equalisation, bias correction) by measurement
  // (build_plan_choosing_recipe, recipe.h) instead of taking `quant`'s as given. The CLI's default; the
  // library's is the recipe as given.
  bool choose_recipe = false;
};
// With `model` (a pre-quantized model's own scales, qdq.h), int8 nodes take the model's QParams and
// weight codes, and only values the model leaves unquantized are calibrated (the calibration record
// says how many); `notes` collects what could not be kept.
// `stats`, when given, receives the calibration statistics (requantize_plan's input).
PrecisionPlan build_plan(const Graph& g, const PlanRequest& request, const Graph* original = nullptr,
                         const ModelQuant* model = nullptr, std::vector<std::string>* notes = nullptr,
                         std::map<std::string, TensorStats>* stats = nullptr);

// build_plan in steps, for callers that build several plans from one calibration (recipe.h):
// the request's calibration inputs (its folder, or seeded synthetic samples, flagged) and their provenance;
struct CalibrationSet {
  std::vector<Sample> samples;
  CalibrationInfo info;
};
CalibrationSet calibration_inputs(const Graph& g, const PlanRequest& request);
// and the plan of a float model (no `model`) from statistics collected on them (collect_statistics):
// resolve, quantize, and empirical bias correction when the request asks for it.
PrecisionPlan plan_from_statistics(const Graph& g, const PlanRequest& request,
                                   const CalibrationSet& calibration,
                                   const std::map<std::string, TensorStats>& stats,
                                   const Graph* original = nullptr);

// The all-fp32 outputs of `g` on each sample (the reference the SQNRs below compare against).
std::vector<std::map<std::string, Tensor>> fp32_outputs(const Graph& g, const std::vector<Sample>& samples);
// Output SQNR of `plan` on `samples` against those reference outputs, over every floating output
// (kExactSqnrDb when exact, -kExactSqnrDb with a non-finite output): on each input alone and over all.
struct OutputSqnr {
  std::vector<double> per_input;
  double overall = kExactSqnrDb;
};
OutputSqnr output_sqnr(const Graph& g, const PrecisionPlan& plan, const std::vector<Sample>& samples,
                       const std::vector<std::map<std::string, Tensor>>& refs);

}  // namespace npusim::compiler::quant
