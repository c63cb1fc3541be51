// Cross-layer equalisation: see the header for the rule and the references. The scales are computed on
// working copies of the weights (a conv can be conv2 of one pair and conv1 of the next, as a depthwise conv
// between two pointwise ones is), swept until they settle, and written back once as new constants.
#include "compiler/passes/cross_layer_equalization.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <map>
#include <sstream>

#include "compiler/passes/lowered.h"
#include "compiler/passes/pass_util.h"

namespace npusim::compiler::passes {
namespace {

using detail::constant_of;
using detail::sole_consumer;

// Standalone nodes that commute with a positive per-channel scale of their (NCHW) input.
bool homogeneous_node(const Node& n) {
  static const char* const kOps[] = {"Relu",        "LeakyRelu",         "MaxPool",
                                     "AveragePool", "GlobalAveragePool", "GlobalMaxPool"};
  if (!n.domain.empty() || n.outputs.size() != 1 || n.num_given_inputs() != 1) return false;
  return std::any_of(std::begin(kOps), std::end(kOps), [&](const char* op) { return n.op_type == op; });
}

// "" when conv1's fused epilogue commutes with a positive per-channel scale, else why it does not.
std::string epilogue_blocker(const Node& n) {
  if (n.has_attr(kResidualInput))
    return "a residual is added in its epilogue (it would have to be scaled too)";
  const std::string act = n.attr_string(kActivation, "");
  if (act.empty() || act == "Relu" || act == "LeakyRelu") return "";
  if (act == "Clip") {
    const float lo = n.attr_float(kActMin, -FLT_MAX), hi = n.attr_float(kActMax, FLT_MAX);
    if ((lo == 0.0f || lo <= -FLT_MAX) && hi >= FLT_MAX) return "";
    std::ostringstream o;
    o << "its Clip(" << lo << ", " << hi
      << ") would need a bound per channel, which the int8 epilogue's one clamp cannot express";
    return o.str();
  }
  return "its " + act + " activation is not positively homogeneous";
}

// A conv with a float constant weight of rank >= 3 (N, C/group, taps...).
bool is_conv(const Graph& g, const Node& n) {
  if (n.op_type != "Conv" || !n.domain.empty() || !n.has_input(1)) return false;
  const Tensor* w = constant_of(g, n.inputs[1]);
  return w && w->floating() && w->rank() >= 3;
}

struct Pair {
  int first = -1, second = -1;
  std::string between;
  std::vector<double> scale;  // accumulated s_i
};

// Conv1's weight and bias and conv2's weight, as working copies keyed by node index.
struct Work {
  std::map<int, Tensor> weight, bias;
};

int64_t taps_of(const Tensor& w) { return w.size() / (w.shape[0] * w.shape[1]); }

// s_i = sqrt(r1_i / r2_i) for the pair's channels; 1 where either range is 0.
std::vector<double> pair_scales(const Tensor& w1, const Tensor& w2, int64_t group2) {
  const int64_t m = w1.shape[0], per1 = w1.size() / m;
  const int64_t n2 = w2.shape[0], cpg = w2.shape[1], taps = taps_of(w2), outs_per_group = n2 / group2;
  std::vector<double> s(static_cast<size_t>(m), 1.0);
  for (int64_t i = 0; i < m; ++i) {
    double r1 = 0, r2 = 0;
    for (int64_t k = 0; k < per1; ++k) r1 = std::max(r1, std::fabs(static_cast<double>(w1.f[i * per1 + k])));
    const int64_t grp = i / cpg, local = i % cpg;
    for (int64_t o = grp * outs_per_group; o < (grp + 1) * outs_per_group; ++o)
      for (int64_t t = 0; t < taps; ++t)
        r2 = std::max(r2, std::fabs(static_cast<double>(w2.f[(o * cpg + local) * taps + t])));
    if (r1 > 0 && r2 > 0) s[static_cast<size_t>(i)] = std::sqrt(r1 / r2);
  }
  return s;
}

void apply_scales(const std::vector<double>& s, Tensor& w1, Tensor* b1, Tensor& w2, int64_t group2) {
  const int64_t m = w1.shape[0], per1 = w1.size() / m;
  const int64_t n2 = w2.shape[0], cpg = w2.shape[1], taps = taps_of(w2), outs_per_group = n2 / group2;
  for (int64_t i = 0; i < m; ++i) {
    const double si = s[static_cast<size_t>(i)];
    if (si == 1.0) continue;
    for (int64_t k = 0; k < per1; ++k) w1.f[i * per1 + k] = static_cast<float>(w1.f[i * per1 + k] / si);
    if (b1) b1->f[i] = static_cast<float>(b1->f[i] / si);
    const int64_t grp = i / cpg, local = i % cpg;
    for (int64_t o = grp * outs_per_group; o < (grp + 1) * outs_per_group; ++o)
      for (int64_t t = 0; t < taps; ++t) {
        float& v = w2.f[(o * cpg + local) * taps + t];
        v = static_cast<float>(v * si);
      }
  }
}

}  // namespace

Equalization equalize_cross_layer(Graph& g, int max_rounds) {
  Equalization result;
  result.applied = true;
  std::vector<Pair> pairs;
  for (int i = 0; i < static_cast<int>(g.nodes.size()); ++i) {
    const Node& n1 = g.nodes[static_cast<size_t>(i)];
    if (!is_conv(g, n1) || n1.outputs.size() != 1) continue;
    // Follow the single-reader chain of homogeneous nodes to the next node.
    std::string v = n1.outputs[0], between;
    int next = sole_consumer(g, v);
    while (next >= 0 && homogeneous_node(g.nodes[static_cast<size_t>(next)]) && !g.value(v).materialized) {
      const Node& h = g.nodes[static_cast<size_t>(next)];
      between += (between.empty() ? "" : ", ") + h.op_type;
      v = h.outputs[0];
      next = sole_consumer(g, v);
    }
    if (next < 0 || g.value(v).materialized) continue;
    const Node& n2 = g.nodes[static_cast<size_t>(next)];
    if (!is_conv(g, n2) || n2.inputs[0] != v) continue;
    const std::string act = n1.attr_string(kActivation, "");
    between = act.empty() ? between : (between.empty() ? act : act + ", " + between);
    std::string blocker = epilogue_blocker(n1);
    const Tensor* w1 = constant_of(g, n1.inputs[1]);
    const Tensor* w2 = constant_of(g, n2.inputs[1]);
    const Tensor* b1 = n1.has_input(2) ? constant_of(g, n1.inputs[2]) : nullptr;
    const int64_t group2 = n2.attr_int("group", 1);
    if (blocker.empty() && (!w1->has_values() || !w2->has_values() || (b1 && !b1->has_values())))
      blocker = "the weights were imported without values (a timing-only compile)";
    if (blocker.empty() && n1.has_input(2) && (!b1 || b1->size() != w1->shape[0]))
      blocker = "its bias is not a constant per output channel";
    if (blocker.empty() && (w2->shape[1] * group2 != w1->shape[0] || w2->shape[0] % group2 != 0))
      blocker = "the channel counts do not match";
    if (!blocker.empty()) {
      result.skipped.push_back({n1.name, n2.name, n1.name + ": " + blocker});
      continue;
    }
    Pair p;
    p.first = i;
    p.second = next;
    p.between = between.empty() ? "none" : between;
    p.scale.assign(static_cast<size_t>(w1->shape[0]), 1.0);
    pairs.push_back(std::move(p));
  }
  if (pairs.empty()) return result;

  Work work;
  for (const Pair& p : pairs) {
    for (int idx : {p.first, p.second}) {
      const Node& n = g.nodes[static_cast<size_t>(idx)];
      if (!work.weight.count(idx)) work.weight[idx] = *constant_of(g, n.inputs[1]);
    }
    const Node& n1 = g.nodes[static_cast<size_t>(p.first)];
    if (n1.has_input(2) && !work.bias.count(p.first)) work.bias[p.first] = *constant_of(g, n1.inputs[2]);
  }
  for (result.rounds = 1; result.rounds <= max_rounds; ++result.rounds) {
    double moved = 0;
    for (Pair& p : pairs) {
      Tensor& w1 = work.weight[p.first];
      Tensor& w2 = work.weight[p.second];
      auto b = work.bias.find(p.first);
      const int64_t group2 = g.nodes[static_cast<size_t>(p.second)].attr_int("group", 1);
      const std::vector<double> s = pair_scales(w1, w2, group2);
      apply_scales(s, w1, b == work.bias.end() ? nullptr : &b->second, w2, group2);
      for (size_t c = 0; c < s.size(); ++c) {
        p.scale[c] *= s[c];
        moved = std::max(moved, std::fabs(s[c] - 1.0));
      }
    }
    if (moved <= 1e-4) break;
  }
  result.rounds = std::min(result.rounds, max_rounds);
  for (auto& [idx, t] : work.weight)
    detail::replace_constant(g, g.nodes[static_cast<size_t>(idx)], 1, std::move(t), "_cle");
  for (auto& [idx, t] : work.bias)
    detail::replace_constant(g, g.nodes[static_cast<size_t>(idx)], 2, std::move(t), "_cle");
  for (const Pair& p : pairs) {
    EqualizedPair e;
    e.first = g.nodes[static_cast<size_t>(p.first)].name;
    e.second = g.nodes[static_cast<size_t>(p.second)].name;
    e.between = p.between;
    e.min_scale = *std::min_element(p.scale.begin(), p.scale.end());
    e.max_scale = *std::max_element(p.scale.begin(), p.scale.end());
    result.pairs.push_back(std::move(e));
  }
  return result;
}

}  // namespace npusim::compiler::passes
