#pragma once
// SmoothQuant-style activation smoothing (Xiao et al., "SmoothQuant: Accurate and Efficient Post-Training
// Quantization for Large Language Models", 2022): a transformer's linear layers read activations whose
// channels differ in range by orders of magnitude, which one per-tensor activation scale cannot hold, while
// their weights are easy. Per input channel j of the linear layers reading a LayerNormalization,
//   s_j = max|X_j|^alpha / max|W_j|^(1 - alpha)
// (max|X_j| over the calibration inputs, max|W_j| over the rows j of every linear layer reading it) moves
// range from the activation into the weights: the LayerNormalization's scale and bias are divided by s_j
// (its output channel j becomes X_j / s_j) and each reader's weight row j is multiplied by s_j. The graph
// computes the same function (up to fp32 rounding).
//
// Smoothed: a LayerNormalization over the last axis with a constant scale (and bias) whose output is read
// only by MatMul / Gemm nodes (lowered: B [K, N] constant) as their data input, directly or through
// Transposes that keep the last axis last and Reshapes that keep its size (the channels stay the last
// axis). Not smoothed, and listed with the reason: an output also read by anything else (a post-LN
// transformer's residual Add, as BERT's: the residual would have to be scaled back), a graph output,
// weights without values.
#include <functional>
#include <string>
#include <vector>

#include "compiler/ir/graph.h"

namespace npusim::compiler::passes {

struct SmoothedNorm {
  std::string norm;                     // the LayerNormalization's node name
  std::vector<std::string> linears;     // the MatMul / Gemm nodes reading it
  double min_scale = 1, max_scale = 1;  // over its channels: s_j
};
struct SkippedNorm {
  std::string norm, reason;
};
struct Smoothing {
  bool applied = false;  // --smoothquant was given (or taken by the recipe choice)
  double alpha = 0.5;
  std::vector<SmoothedNorm> layers;
  std::vector<SkippedNorm> skipped;
};

// max |x_j| per index of the last axis of value `name` over the calibration inputs (empty: unknown).
using ChannelMaxAbs = std::function<std::vector<double>(const std::string& name)>;

// Smooths every qualifying LayerNormalization -> linear layers group of g (lowered) in place with migration
// strength `alpha` in [0, 1]: new constants replace the norm's scale / bias and the readers' weights (the
// old ones are dropped when nothing else reads them). A channel whose activation or weight range is 0 keeps
// s_j = 1.
Smoothing smooth_linear_inputs(Graph& g, double alpha, const ChannelMaxAbs& channel_max_abs);

}  // namespace npusim::compiler::passes
