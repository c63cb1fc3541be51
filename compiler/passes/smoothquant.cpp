// SmoothQuant: see the header for the rule and the reference.
#include "compiler/passes/smoothquant.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "compiler/passes/lowered.h"
#include "compiler/passes/pass_util.h"

namespace npusim::compiler::passes {
namespace {

using detail::constant_of;

// A reader that keeps the channels on the last axis: a Transpose whose perm leaves the last axis last, a
// Reshape (or Flatten / Squeeze / Unsqueeze) whose output's last dimension equals its input's.
bool keeps_last_axis(const Graph& g, const Node& n) {
  if (!n.domain.empty() && !(n.domain == kNpuDomain && n.op_type == "Transpose")) return false;
  if (n.outputs.size() != 1) return false;
  const Value& in = g.value(n.inputs[0]);
  const Value& out = g.value(n.outputs[0]);
  if (in.shape.empty() || out.shape.empty() || in.shape.back() != out.shape.back()) return false;
  if (n.op_type == "Transpose") {
    const std::vector<int64_t> perm = n.attr_ints("perm");
    return !perm.empty() && perm.back() == static_cast<int64_t>(perm.size()) - 1;
  }
  return n.op_type == "Reshape" || n.op_type == "Flatten" || n.op_type == "Squeeze" ||
         n.op_type == "Unsqueeze";
}

// A MatMul / Gemm reading `v` as its data input with constant float weights [K, N] (K = channels).
bool linear_reader(const Graph& g, const Node& n, const std::string& v, int64_t channels) {
  if ((n.op_type != "MatMul" && n.op_type != "Gemm") || !n.domain.empty() || n.inputs.size() < 2)
    return false;
  if (n.inputs[0] != v || n.inputs[1] == v) return false;
  if (n.has_attr(kResidualInput) && n.inputs.size() > 3 && n.inputs[3] == v) return false;
  const Tensor* w = constant_of(g, n.inputs[1]);
  return w && w->floating() && !w->f.empty() && w->rank() == 2 && w->shape[0] == channels;
}

// The linear layers reading `v` through channel-keeping nodes, or "" + the reason in `why`.
bool collect_linears(const Graph& g, const std::string& v, int64_t channels, std::vector<int>& linears,
                     std::string& why) {
  if (detail::is_graph_output(g, v)) {
    why = "its output is a graph output";
    return false;
  }
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    const Node& n = g.nodes[k];
    int reads = 0;
    for (const std::string& in : n.inputs) reads += in == v;
    if (!reads) continue;
    if (linear_reader(g, n, v, channels) && reads == 1) {
      linears.push_back(static_cast<int>(k));
    } else if (keeps_last_axis(g, n) && reads == 1) {
      if (!collect_linears(g, n.outputs[0], channels, linears, why)) return false;
    } else if (n.has_attr(kResidualInput) && n.inputs.size() > 3 && n.inputs[3] == v) {
      why = "its output is also the residual added in " + n.op_type + " '" + n.name +
            "''s epilogue (a post-LN block: the residual would have to be scaled back)";
      return false;
    } else {
      why = "its output is also read by " + n.op_type + " '" + n.name +
            "' (not a linear layer with constant weights: it would see the smoothed values)";
      return false;
    }
  }
  return true;
}

}  // namespace

Smoothing smooth_linear_inputs(Graph& g, double alpha, const ChannelMaxAbs& channel_max_abs) {
  Smoothing result;
  result.applied = true;
  result.alpha = alpha;
  for (size_t idx = 0; idx < g.nodes.size(); ++idx) {
    if (g.nodes[idx].op_type != "LayerNormalization" || !g.nodes[idx].domain.empty()) continue;
    const Node& ln = g.nodes[idx];
    const Value& y = g.value(ln.outputs[0]);
    const int64_t rank = static_cast<int64_t>(y.shape.size());
    const int64_t axis = ln.attr_int("axis", -1);
    const Tensor* scale = ln.inputs.size() > 1 ? constant_of(g, ln.inputs[1]) : nullptr;
    const Tensor* bias = ln.has_input(2) ? constant_of(g, ln.inputs[2]) : nullptr;
    const int64_t channels = rank ? y.shape.back() : 0;
    std::string why;
    std::vector<int> linears;
    if (rank == 0 || (axis != -1 && axis != rank - 1)) {
      why = "it normalises over more than the last axis";
    } else if (!scale || scale->f.size() != static_cast<size_t>(channels) ||
               (ln.has_input(2) && (!bias || bias->f.size() != static_cast<size_t>(channels)))) {
      why = "its scale or bias is not a constant per channel";
    } else if (ln.outputs.size() != 1 || !collect_linears(g, ln.outputs[0], channels, linears, why)) {
      if (why.empty()) why = "it has more than one output";
    } else if (linears.empty()) {
      why = "no linear layer reads it";
    }
    const std::vector<double> xmax = why.empty() ? channel_max_abs(ln.outputs[0]) : std::vector<double>{};
    if (why.empty() && xmax.size() != static_cast<size_t>(channels))
      why = "no calibration statistics of its output";
    if (!why.empty()) {
      result.skipped.push_back({ln.name, why});
      continue;
    }
    std::vector<double> wmax(static_cast<size_t>(channels), 0.0);
    for (int k : linears) {
      const Tensor& w = *constant_of(g, g.nodes[static_cast<size_t>(k)].inputs[1]);
      const int64_t n = w.shape[1];
      for (int64_t j = 0; j < channels; ++j)
        for (int64_t c = 0; c < n; ++c)
          wmax[static_cast<size_t>(j)] =
              std::max(wmax[static_cast<size_t>(j)], std::fabs(double(w.f[j * n + c])));
    }
    std::vector<double> s(static_cast<size_t>(channels), 1.0);
    for (size_t j = 0; j < s.size(); ++j)
      if (xmax[j] > 0 && wmax[j] > 0) s[j] = std::pow(xmax[j], alpha) / std::pow(wmax[j], 1.0 - alpha);
    SmoothedNorm rec;
    rec.norm = ln.name;
    rec.min_scale = *std::min_element(s.begin(), s.end());
    rec.max_scale = *std::max_element(s.begin(), s.end());
    Tensor new_scale = *scale;
    for (size_t j = 0; j < s.size(); ++j) new_scale.f[j] = static_cast<float>(new_scale.f[j] / s[j]);
    std::optional<Tensor> new_bias;
    if (bias) {
      new_bias = *bias;
      for (size_t j = 0; j < s.size(); ++j) new_bias->f[j] = static_cast<float>(new_bias->f[j] / s[j]);
    }
    for (int k : linears) {
      Node& m = g.nodes[static_cast<size_t>(k)];
      rec.linears.push_back(m.name);
      Tensor w = *constant_of(g, m.inputs[1]);
      const int64_t n = w.shape[1];
      for (int64_t j = 0; j < channels; ++j)
        for (int64_t c = 0; c < n; ++c)
          w.f[j * n + c] = static_cast<float>(w.f[j * n + c] * s[static_cast<size_t>(j)]);
      detail::replace_constant(g, m, 1, std::move(w), "_smooth");
    }
    detail::replace_constant(g, g.nodes[idx], 1, std::move(new_scale), "_smooth");
    if (new_bias) detail::replace_constant(g, g.nodes[idx], 2, std::move(*new_bias), "_smooth");
    result.layers.push_back(std::move(rec));
  }
  return result;
}

}  // namespace npusim::compiler::passes
