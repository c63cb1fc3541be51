#pragma once
// Cross-layer equalisation (Nagel et al., "Data-Free Quantization Through Weight Equalization and Bias
// Correction", 2019, section 4.1): for two convolutions in a row, conv2(f(conv1(x))), where f commutes with
// a positive per-channel scale (f(s x) = s f(x) for s > 0: no activation, Relu, LeakyRelu, a Clip whose
// bounds are 0 or open, MaxPool, AveragePool), output channel i of conv1 is divided by s_i (its weights and
// bias) and input channel i of conv2 multiplied by s_i. The graph computes the same function (up to fp32
// rounding), and with s_i = sqrt(r1_i / r2_i) (r1_i = max |w| of conv1's output channel i, r2_i = max |w|
// over conv2's weights reading input channel i) both channels end up with the range sqrt(r1_i r2_i): a
// channel whose range is small next to the rest of its tensor no longer collapses to a few levels of a
// shared (per-tensor) activation scale or of conv2's per-output-channel weight scale. Depthwise and
// grouped convolutions qualify on either side (a depthwise conv2's channel i is its own output channel i).
//
// Not equalised (listed in the result with the reason): a Clip with a finite nonzero bound (ReLU6: the
// bound would have to become 6 / s_i per channel, which the int8 epilogue's one clamp per tensor cannot
// express, so the pair is skipped rather than changed inexactly), any other activation (HardSwish,
// Sigmoid...: not positively homogeneous), a residual fused into conv1, an intermediate value read by more
// than one node or being a graph output, weights without values (a timing-only import).
#include <string>
#include <vector>

#include "compiler/ir/graph.h"

namespace npusim::compiler::passes {

struct EqualizedPair {
  std::string first, second;            // conv1, conv2 (node names)
  std::string between;                  // what sits between them: "none", "Relu", "Relu, MaxPool", ...
  double min_scale = 1, max_scale = 1;  // the accumulated s_i (conv1's channel i divided by s_i)
};
struct SkippedPair {
  std::string first, second, reason;
};
struct Equalization {
  bool applied = false;  // --cle was given (a run without it reports nothing)
  std::vector<EqualizedPair> pairs;
  std::vector<SkippedPair> skipped;
  int rounds = 0;  // sweeps over all pairs until the scales settled (a conv can sit in two pairs)
};

// Equalises every qualifying pair of g in place (a lowered graph: fused epilogues as lowered.h states;
// weights and biases are replaced by new constants, the old ones left to dead-value elimination or kept
// when another node reads them). Sweeps all pairs until no scale moves by more than 1e-4 (relative) or
// `max_rounds` sweeps.
Equalization equalize_cross_layer(Graph& g, int max_rounds = 20);

}  // namespace npusim::compiler::passes
