#pragma once
// The whole model's physical limit on the target machine (docs/report.md, "Model limit"): the fewest
// cycles the model could take with every unit at its peak and the three overlapping, whatever the
// schedule. Unlike the layers' roofline bounds (roofline.h), nothing moves through DRAM but the weights,
// once, and the model's own inputs and outputs, once: activations between layers are the compiler's cost.
#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "compiler/ir/graph.h"
#include "isa/machine/config.h"

namespace npusim::compiler::backend {

struct ModelLimit {
  // The dense matrix work (Conv, ConvTranspose, MatMul, Gemm) at the array's peak in each node's precision;
  // a grouped conv whose groups the array runs faster than the lanes (min(rows, C/g*kh*kw) x min(cols,
  // K/g) x rate MACs per cycle, one group at a time) at that rate.
  double array_cycles = 0;
  // The other grouped (depthwise) convs' MACs at the vector lanes' peak (one MAC per lane per cycle).
  double vector_cycles = 0;
  // Every weight (a constant of at least kMinWeightElements) once, plus the model's runtime inputs and
  // outputs once, in bytes at the DRAM model's peak (0 with ideal DRAM).
  double dram_cycles = 0;
  // Not a term: the array term's matrix nodes (the grouped convs it counts included) each run alone in whole
  // folds of the array: for every matrix the array holds one operand in folds of rows x cols and streams
  // the third dimension through each (weight-stationary: ceil(K / rows) x ceil(N / cols) folds of M rows;
  // output-stationary: ceil(M / rows) x ceil(N / cols) of K; input-stationary: ceil(K / rows) x
  // ceil(M / cols) of N), at the precision's rate, with no fill or drain. A layer narrower than the
  // array leaves the rest of each fold idle: mapped one output pixel (one row of M) at a time and one layer
  // at a time, the model takes at least max(array_fold_cycles, vector_cycles, dram_cycles), cycles() / that
  // of the limit (traces::whole_fold_share). Packing several output pixels of a narrow conv into one fold
  // (docs/models.md, "Narrow convs packed several output pixels a column") or several layers side by side
  // does better, so it is a measure of how narrow the layers are for this array, not a bound.
  double array_fold_cycles = 0;
  // Each matrix node's share of the array or vector term, by node name (what layers[].limit_cycles says).
  std::map<std::string, double> node_cycles;
  int64_t cycles() const;  // the highest term, rounded up to a whole cycle
};

// Constants smaller than this are shapes, scales and clip bounds, not weights.
inline constexpr int64_t kMinWeightElements = 64;

// The limit of `imported` (the model as its file gives it: the batch is in its shapes), each node run in
// `precision_of(node)` (its MAC rate and its weights' bytes) and the model's inputs and outputs in
// `io_precision`. Shapes import left unknown are taken from `lowered` (the same value after the passes);
// a matrix node whose shapes stay unknown counts nothing.
ModelLimit model_limit(const Graph& imported, const Graph& lowered,
                       const std::function<isa::DType(const Node&)>& precision_of, isa::DType io_precision,
                       const isa::NpuConfig& config);

}  // namespace npusim::compiler::backend
