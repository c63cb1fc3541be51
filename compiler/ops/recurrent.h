#pragma once
// ONNX's recurrent layers (LSTM, GRU, RNN) as one description: the attributes with their defaults and
// the activation functions resolved per direction. The interpreter's kernels and the pass that
// decomposes these layers into matrix and vector ops both read it, so they cannot disagree.
#include <optional>
#include <string>
#include <vector>

#include "compiler/ir/graph.h"

namespace npusim::compiler {

// One activation of a recurrent layer with its parameters (ONNX's defaults filled in).
struct RecurrentActivation {
  std::string name;  // canonical ONNX spelling: Sigmoid, Tanh, Relu, Affine, LeakyRelu, ThresholdedRelu,
                     // ScaledTanh, HardSigmoid, Elu, Softsign, Softplus
  float alpha = 0.0f, beta = 0.0f;
  float apply(float x) const;
};

struct RecurrentSpec {
  enum class Kind { kLstm, kGru, kRnn };
  Kind kind = Kind::kLstm;
  int64_t hidden = 0;
  int gates = 4;                     // LSTM 4 (i, o, f, c), GRU 3 (z, r, h), RNN 1
  int directions = 1;                // 2 when bidirectional
  bool reverse = false;              // direction "reverse" (direction 0 runs backwards)
  int64_t layout = 0;                // 0: X [seq, batch, input]; 1: X [batch, seq, input]
  std::optional<float> clip;         // bound on the activations' inputs
  bool input_forget = false;         // LSTM: f = 1 - i
  bool linear_before_reset = false;  // GRU
  // Per direction: LSTM (f, g, h), GRU (f, g), RNN (f).
  std::vector<std::vector<RecurrentActivation>> activations;
  // Direction d runs backwards (the reverse direction, or the second of a bidirectional layer).
  bool backwards(int d) const { return reverse || d == 1; }
};

// The node's description; nullopt for a node that is no LSTM/GRU/RNN. `error` receives a sentence when
// the attributes are invalid (unknown direction or activation, wrong number of activations).
std::optional<RecurrentSpec> recurrent_spec(const Node& n, std::string* error);

}  // namespace npusim::compiler
