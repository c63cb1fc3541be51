#include "compiler/ops/recurrent.h"

#include <algorithm>
#include <cctype>
#include <cmath>

namespace npusim::compiler {
namespace {

struct ActivationInfo {
  const char* name;
  int params;  // how many of activation_alpha / activation_beta it consumes (alpha, then beta)
  float alpha, beta;
};

// ONNX's activation functions for recurrent layers and their default parameters.
constexpr ActivationInfo kActivations[] = {
    {"Sigmoid", 0, 0, 0},       {"Tanh", 0, 0, 0},
    {"Relu", 0, 0, 0},          {"Affine", 2, 1.0f, 0},
    {"LeakyRelu", 1, 0.01f, 0}, {"ThresholdedRelu", 1, 1.0f, 0},
    {"ScaledTanh", 2, 1, 1},    {"HardSigmoid", 2, 0.2f, 0.5f},
    {"Elu", 1, 1.0f, 0},        {"Softsign", 0, 0, 0},
    {"Softplus", 0, 0, 0},
};

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

float RecurrentActivation::apply(float x) const {
  if (name == "Sigmoid") return 1.0f / (1.0f + std::exp(-x));
  if (name == "Tanh") return std::tanh(x);
  if (name == "Relu") return std::max(x, 0.0f);
  if (name == "Affine") return alpha * x + beta;
  if (name == "LeakyRelu") return x >= 0 ? x : alpha * x;
  if (name == "ThresholdedRelu") return x > alpha ? x : 0.0f;
  if (name == "ScaledTanh") return alpha * std::tanh(beta * x);
  if (name == "HardSigmoid") return std::clamp(alpha * x + beta, 0.0f, 1.0f);
  if (name == "Elu") return x >= 0 ? x : alpha * (std::exp(x) - 1.0f);
  if (name == "Softsign") return x / (1.0f + std::fabs(x));
  return std::log1p(std::exp(x));  // Softplus
}

std::optional<RecurrentSpec> recurrent_spec(const Node& n, std::string* error) {
  RecurrentSpec s;
  if (!n.domain.empty()) return std::nullopt;
  std::vector<std::string> defaults;
  if (n.op_type == "LSTM") {
    s.kind = RecurrentSpec::Kind::kLstm, s.gates = 4, defaults = {"Sigmoid", "Tanh", "Tanh"};
  } else if (n.op_type == "GRU") {
    s.kind = RecurrentSpec::Kind::kGru, s.gates = 3, defaults = {"Sigmoid", "Tanh"};
  } else if (n.op_type == "RNN") {
    s.kind = RecurrentSpec::Kind::kRnn, s.gates = 1, defaults = {"Tanh"};
  } else {
    return std::nullopt;
  }
  auto fail = [&](const std::string& why) -> std::optional<RecurrentSpec> {
    if (error) *error = why;
    return std::nullopt;
  };
  s.hidden = n.attr_int("hidden_size", 0);
  if (s.hidden <= 0) return fail("hidden_size must be positive");
  const std::string dir = n.attr_string("direction", "forward");
  if (dir == "bidirectional")
    s.directions = 2;
  else if (dir == "reverse")
    s.reverse = true;
  else if (dir != "forward")
    return fail("direction '" + dir + "' is not forward, reverse or bidirectional");
  s.layout = n.attr_int("layout", 0);
  if (s.layout != 0 && s.layout != 1) return fail("layout must be 0 or 1");
  if (n.has_attr("clip")) s.clip = n.attr_float("clip", 0.0f);
  s.input_forget = n.attr_int("input_forget", 0) != 0;
  s.linear_before_reset = n.attr_int("linear_before_reset", 0) != 0;
  std::vector<std::string> names;
  if (n.has_attr("activations")) names = n.attrs.at("activations").strings();
  const size_t per = defaults.size();
  if (names.empty()) {
    for (int d = 0; d < s.directions; ++d) names.insert(names.end(), defaults.begin(), defaults.end());
  } else if (names.size() != per * static_cast<size_t>(s.directions)) {
    return fail("has " + std::to_string(names.size()) + " activations, " +
                std::to_string(per * s.directions) + " expected");
  }
  const std::vector<float> alphas = n.attr_floats("activation_alpha"),
                           betas = n.attr_floats("activation_beta");
  size_t ai = 0, bi = 0;
  s.activations.assign(static_cast<size_t>(s.directions), {});
  for (size_t k = 0; k < names.size(); ++k) {
    const ActivationInfo* info = nullptr;
    for (const auto& a : kActivations)
      if (lower(a.name) == lower(names[k])) info = &a;
    if (!info) return fail("activation '" + names[k] + "' is not one ONNX defines for recurrent layers");
    RecurrentActivation act{info->name, info->alpha, info->beta};
    if (info->params >= 1 && ai < alphas.size()) act.alpha = alphas[ai++];
    if (info->params >= 2 && bi < betas.size()) act.beta = betas[bi++];
    s.activations[k / per].push_back(act);
  }
  return s;
}

}  // namespace npusim::compiler
