// Affine folding: at inference BN is a per-channel affine map y = s*x + t with s = gamma / sqrt(var +
// eps), t = beta - mean * s, and so is a Mul / Div / Add / Sub by a per-channel (or scalar) constant.
// Right after a matrix node such a map folds into the weights (scale each output channel's filter by s)
// and the bias (b' = s*b + t), so it costs nothing at run time; a chain of them elsewhere is one map
// (one vector pass), which folds into an unpadded conv that reads it. This runs after pattern
// recognition (a HardSwish's Div 6 is not a free-standing scale) and before epilogue fusion (the map
// sits between the matrix op and its activation).
#include <algorithm>
#include <cmath>

#include "compiler/passes/pass_util.h"
#include "compiler/passes/passes.h"

namespace npusim::compiler::passes {
namespace {

using detail::add_constant;
using detail::constant_of;

using Affine = ChannelAffine;

// A per-output-channel bias after the fold: s*b + t (b = 0 when absent).
Tensor folded_bias(const Tensor* bias, const Affine& a) {
  const auto c = static_cast<int64_t>(a.scale.size());
  if (bias && !bias->has_values())
    return Tensor::shape_only(DataType::kFloat32, {c});  // a timing-only compile
  Tensor out(DataType::kFloat32, {c});
  for (int64_t i = 0; i < c; ++i) out.f[i] = (bias ? bias->f[i] : 0.0f) * a.scale[i] + a.shift[i];
  return out;
}

// Folds `a` into matrix node m; false when its shapes do not allow it.
bool fold_into(Graph& g, Node& m, const Affine& a) {
  const bool matrix =
      m.op_type == "Conv" || m.op_type == "ConvTranspose" || m.op_type == "Gemm" || m.op_type == "MatMul";
  if (!matrix || m.inputs.size() < 2) return false;  // e.g. a BatchNormalization after a one-input Concat
  const Tensor* w = constant_of(g, m.inputs[1]);
  if (!w || !w->floating()) return false;
  const auto c = static_cast<int64_t>(a.scale.size());
  const Tensor* bias = m.has_input(2) ? constant_of(g, m.inputs[2]) : nullptr;
  if (m.has_input(2) && !bias) return false;
  Tensor nw = *w;  // a shape-only weight (a timing-only compile) stays shape-only: nothing to scale
  if (m.op_type == "Conv") {
    if (w->rank() < 3 || w->shape[0] != c || (bias && bias->size() != c)) return false;
    const int64_t per = w->size() / c;
    for (int64_t o = 0; o < c && nw.has_values(); ++o)
      for (int64_t j = 0; j < per; ++j) nw.f[o * per + j] *= a.scale[o];
    m.inputs.resize(std::max<size_t>(m.inputs.size(), 3));
    m.inputs[2] = add_constant(g, m.name + "_bias_bn", folded_bias(bias, a));
  } else if (m.op_type == "ConvTranspose") {
    // W is [C_in, M/group, k...]; output channel of (ci, j) is (ci / (C_in/group)) * (M/group) + j.
    const int64_t group = m.attr_int("group", 1), cin = w->shape[0], mg = w->shape[1];
    if (w->rank() < 3 || mg * group != c || cin % group || (bias && bias->size() != c)) return false;
    const int64_t per = w->size() / (cin * mg);
    for (int64_t ci = 0; ci < cin && nw.has_values(); ++ci)
      for (int64_t j = 0; j < mg; ++j) {
        const float s = a.scale[(ci / (cin / group)) * mg + j];
        for (int64_t e = 0; e < per; ++e) nw.f[(ci * mg + j) * per + e] *= s;
      }
    m.inputs.resize(std::max<size_t>(m.inputs.size(), 3));
    m.inputs[2] = add_constant(g, m.name + "_bias_bn", folded_bias(bias, a));
  } else if (m.op_type == "Gemm" || m.op_type == "MatMul") {
    // Normalised Gemm / 2-D MatMul: B is [K, N], the BN channel axis of the [M, N] output is N.
    if (m.op_type == "Gemm" && (m.attr_int("transA", 0) || m.attr_int("transB", 0) ||
                                m.attr_float("alpha", 1.0f) != 1.0f || m.attr_float("beta", 1.0f) != 1.0f))
      return false;
    if (w->rank() != 2 || w->shape[1] != c || g.value(m.inputs[0]).shape.size() != 2) return false;
    for (int64_t k = 0; k < w->shape[0] && nw.has_values(); ++k)
      for (int64_t n = 0; n < c; ++n) nw.f[k * c + n] *= a.scale[n];
    Tensor nb;
    if (!bias || !bias->has_values()) {
      nb = folded_bias(bias, a);
    } else {
      // C broadcasts to [M, N]: keep its row dimension, materialise the column one.
      const Shape& bs = bias->shape;
      const int64_t rows = bs.size() == 2 ? bs[0] : 1;
      const int64_t cols = bs.empty() ? 1 : bs.back();
      if (cols != 1 && cols != c) return false;
      nb = Tensor(DataType::kFloat32, bs.size() == 2 ? Shape{rows, c} : Shape{c});
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t n = 0; n < c; ++n)
          nb.f[r * c + n] = bias->f[r * cols + (cols == 1 ? 0 : n)] * a.scale[n] + a.shift[n];
    }
    m.op_type = "Gemm";  // a MatMul with a bias is a Gemm
    m.inputs.resize(std::max<size_t>(m.inputs.size(), 3));
    m.inputs[2] = add_constant(g, m.name + "_bias_bn", std::move(nb));
  } else {
    return false;
  }
  m.inputs[1] = add_constant(g, m.name + "_w_bn", std::move(nw));
  return true;
}

// An element-wise node applying a constant to `v` that is a per-channel affine map of it along `axis`: Mul
// / Div by, Add / Sub of a constant that varies only along that axis (detail::channel_constant).
// Exporters write a learnable scale and shift this way (PaddlePaddle's PP-LCNet "learnable affine
// blocks"), or a bias that the matrix op did not take.
std::optional<Affine> constant_affine(const Graph& g, const Node& e, const std::string& v, size_t axis) {
  static const char* const kOps[] = {"Mul", "Div", "Add", "Sub"};
  if (!e.domain.empty() || e.inputs.size() != 2 || e.has_attr(kActivation)) return std::nullopt;
  if (std::find(std::begin(kOps), std::end(kOps), e.op_type) == std::end(kOps)) return std::nullopt;
  const int vi = e.inputs[0] == v ? 0 : e.inputs[1] == v ? 1 : -1;
  if (vi < 0 || e.inputs[1 - vi] == v) return std::nullopt;
  const Tensor* c = constant_of(g, e.inputs[1 - vi]);
  auto k = c ? detail::channel_constant(g, v, axis, *c) : std::nullopt;
  if (!k || g.value(e.outputs[0]).shape != g.value(v).shape) return std::nullopt;
  const size_t n = static_cast<size_t>(k->size());
  Affine a{std::vector<float>(n, 1.0f), std::vector<float>(n, 0.0f)};
  for (size_t i = 0; i < n; ++i) {
    const float x = k->f[i];
    if (e.op_type == "Mul") {
      a.scale[i] = x;
    } else if (e.op_type == "Div") {
      if (vi != 0 || x == 0.0f) return std::nullopt;
      a.scale[i] = static_cast<float>(1.0 / x);
    } else if (e.op_type == "Add") {
      a.shift[i] = x;
    } else {  // Sub: v - c, or c - v
      a.scale[i] = vi == 0 ? 1.0f : -1.0f;
      a.shift[i] = vi == 0 ? -x : x;
    }
  }
  return a;
}

// The non-constant input of a binary node (its first input otherwise).
const std::string& runtime_input(const Graph& g, const Node& e) {
  return e.inputs.size() == 2 && constant_of(g, e.inputs[0]) ? e.inputs[1] : e.inputs[0];
}

// Stage 1: an affine node (BatchNormalization, or a constant Mul / Div / Add / Sub per output channel)
// right after a matrix node folds into its weights and bias. Folding keeps the matrix node at its index
// and only kills the folded nodes; `into[k]` is the matrix node that took over folded node k's output,
// so a chain (a scale, then a shift) folds node by node.
void fold_after_matrix(Graph& g, std::vector<bool>& dead) {
  const detail::UseIndex index(g);
  std::vector<int> into(g.nodes.size(), -1);
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    const Node& e = g.nodes[k];
    if (dead[k] || !e.domain.empty() || e.inputs.empty()) continue;
    const bool bn = e.op_type == "BatchNormalization";
    const std::string& v = bn ? e.inputs[0] : runtime_input(g, e);
    int p = index.producer(v);
    if (p >= 0 && into[p] >= 0) p = into[p];
    if (p < 0 || dead[p] || index.sole_consumer(v) != static_cast<int>(k)) continue;
    if (g.value(v).materialized) continue;  // a quantization point of the model
    Node& m = g.nodes[p];
    if (!m.domain.empty() || m.has_attr(kActivation) || m.has_attr(kResidualInput)) continue;
    // Folding rewrites the producer's first output: v must be it (a GRU's Y_h, Y omitted, is not).
    if (m.outputs.empty() || m.outputs[0] != v) continue;
    auto a = bn ? batchnorm_affine(g, e) : constant_affine(g, e, v, detail::output_channel_axis(g, m));
    if (!a) continue;
    Node folded = m;
    if (!fold_into(g, folded, *a)) continue;
    folded.outputs[0] = e.outputs[0];
    m = std::move(folded);
    dead[k] = true;
    into[k] = p;
  }
}

// A BatchNormalization node computing `a` on x (gamma = scale, beta = shift, mean 0, var 1, epsilon 0:
// batchnorm_affine gives back exactly `a`), named and placed as `last`.
Node affine_node(Graph& g, const Node& last, const std::string& x, const Affine& a) {
  const auto c = static_cast<int64_t>(a.scale.size());
  auto vec = [&](const char* what, const std::vector<float>& v) {
    return add_constant(g, last.name + "_" + what, Tensor::from_floats({c}, v));
  };
  Node n = detail::make_node(g, "BatchNormalization", last.name, {}, last.outputs);
  n.name = last.name;
  n.inputs = {x, vec("scale", a.scale), vec("shift", a.shift), vec("mean", std::vector<float>(c, 0.0f)),
              vec("var", std::vector<float>(c, 1.0f))};
  n.attrs["epsilon"].value = 0.0f;
  return n;
}

// Stage 2: a chain of two or more constant per-channel Mul / Div / Add / Sub nodes on a 4-D activation
// (channel axis 1) becomes one BatchNormalization: one vector pass over the tensor instead of one per
// node, and an affine map the next stage can fold into a convolution. Only chains: a lone Mul stays an
// element-wise node (an attention score's scaling is not a per-channel map of a conv activation).
void merge_affine_chains(Graph& g, std::vector<bool>& dead) {
  const detail::UseIndex index(g);
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    if (dead[k] || g.nodes[k].inputs.empty()) continue;
    const std::string x = runtime_input(g, g.nodes[k]);
    if (x.empty() || g.value(x).shape.size() != 4) continue;
    auto a = constant_affine(g, g.nodes[k], x, 1);
    if (!a) continue;
    std::vector<int> chain = {static_cast<int>(k)};
    while (true) {
      const std::string& v = g.nodes[chain.back()].outputs[0];
      const int c = index.sole_consumer(v);
      if (c < 0 || dead[c] || g.value(v).materialized) break;
      auto b = constant_affine(g, g.nodes[c], v, 1);
      if (!b) break;
      for (size_t i = 0; i < a->scale.size(); ++i) {  // b after a
        a->scale[i] = b->scale[i] * a->scale[i];
        a->shift[i] = b->scale[i] * a->shift[i] + b->shift[i];
      }
      chain.push_back(c);
    }
    if (chain.size() < 2) continue;
    const int last = chain.back();
    g.nodes[last] = affine_node(g, g.nodes[last], x, *a);
    for (size_t i = 0; i + 1 < chain.size(); ++i) dead[chain[i]] = true;
  }
}

// Stage 3: an affine node whose only reader is an unpadded Conv with constant weights folds into that
// conv's input side: W'[o, ci, ..] = W[o, ci, ..] * s[ci], b'[o] = b[o] + sum over (ci, ..) of
// W[o, ci, ..] * t[ci] (in double). With padding the border sums would differ (the zeros are added after
// the affine map), so padded convs keep the affine node.
void fold_into_next_conv(Graph& g, std::vector<bool>& dead) {
  const detail::UseIndex index(g);
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    const Node& e = g.nodes[k];
    if (dead[k] || e.has_attr(kActivation)) continue;
    const auto a = batchnorm_affine(g, e);
    if (!a || g.value(e.outputs[0]).materialized) continue;
    const int ci = index.sole_consumer(e.outputs[0]);
    if (ci < 0 || dead[ci]) continue;
    Node& conv = g.nodes[ci];
    if (conv.op_type != "Conv" || !conv.domain.empty() || conv.inputs[0] != e.outputs[0]) continue;
    const std::string auto_pad = conv.attr_string("auto_pad", "NOTSET");
    const auto pads = conv.attr_ints("pads", {});
    if ((auto_pad != "NOTSET" && auto_pad != "VALID") ||
        std::any_of(pads.begin(), pads.end(), [](int64_t p) { return p != 0; }))
      continue;
    const Tensor* w = constant_of(g, conv.inputs[1]);
    const Tensor* bias = conv.has_input(2) ? constant_of(g, conv.inputs[2]) : nullptr;
    if (!w || !w->floating() || w->rank() < 3 || (conv.has_input(2) && !bias)) continue;
    if (bias && bias->has_values() != w->has_values()) continue;  // values on one side only: nothing to fold
    const int64_t m = w->shape[0], cg = w->shape[1], group = conv.attr_int("group", 1);
    if (group <= 0 || m % group || cg * group != static_cast<int64_t>(a->scale.size())) continue;
    const int64_t per = w->size() / (m * cg), mg = m / group;
    Tensor nw = *w;
    Tensor nb = !w->has_values() ? Tensor::shape_only(DataType::kFloat32, {m})
                : bias           ? *bias
                                 : Tensor(DataType::kFloat32, {m});
    for (int64_t o = 0; o < m && nw.has_values(); ++o) {
      double sum = 0.0;
      for (int64_t c = 0; c < cg; ++c) {
        const size_t ch = static_cast<size_t>((o / mg) * cg + c);
        for (int64_t j = 0; j < per; ++j) {
          float& wv = nw.f[(o * cg + c) * per + j];
          sum += static_cast<double>(wv) * a->shift[ch];
          wv *= a->scale[ch];
        }
      }
      nb.f[o] = static_cast<float>(nb.f[o] + sum);
    }
    conv.inputs[0] = e.inputs[0];
    conv.inputs[1] = add_constant(g, conv.name + "_w_affine", std::move(nw));
    conv.inputs.resize(std::max<size_t>(conv.inputs.size(), 3));
    conv.inputs[2] = add_constant(g, conv.name + "_bias_affine", std::move(nb));
    dead[k] = true;
  }
}

}  // namespace

void fold_batchnorm(Graph& g) {
  // Each stage reads the graph the one before left (dead nodes erased, so the use counts are true).
  for (auto stage : {fold_after_matrix, merge_affine_chains, fold_into_next_conv}) {
    std::vector<bool> dead(g.nodes.size(), false);
    stage(g, dead);
    detail::erase_nodes(g, dead);
  }
  detail::drop_unreferenced_values(g);
}

}  // namespace npusim::compiler::passes

namespace npusim::compiler {

std::optional<ChannelAffine> batchnorm_affine(const Graph& g, const Node& bn) {
  if (!bn.domain.empty() || bn.op_type != "BatchNormalization") return std::nullopt;
  if (bn.num_given_inputs() < 5 || bn.attr_int("training_mode", 0) != 0) return std::nullopt;
  for (size_t o = 1; o < bn.outputs.size(); ++o)
    if (!bn.outputs[o].empty() &&
        passes::detail::use_count(g, bn.outputs[o]) + passes::detail::is_graph_output(g, bn.outputs[o]))
      return std::nullopt;
  const Tensor* p[4];
  for (int k = 0; k < 4; ++k) {
    p[k] = passes::detail::constant_of(g, bn.inputs[k + 1]);
    if (!p[k] || !p[k]->floating() || p[k]->rank() != 1) return std::nullopt;
  }
  const int64_t c = p[0]->size();
  for (int k = 1; k < 4; ++k)
    if (p[k]->size() != c) return std::nullopt;
  const Value& x = g.value(bn.inputs[0]);
  if (x.shape_known && (x.shape.size() < 2 || x.shape[1] != c)) return std::nullopt;
  const float eps = bn.attr_float("epsilon", 1e-5f);
  ChannelAffine a;
  a.scale.resize(static_cast<size_t>(c));
  a.shift.resize(static_cast<size_t>(c));
  for (int64_t i = 0; i < c; ++i) {
    // Double precision keeps the folded constants within float rounding of the unfolded computation.
    double s = p[0]->f[i] / std::sqrt(static_cast<double>(p[3]->f[i]) + eps);
    a.scale[i] = static_cast<float>(s);
    a.shift[i] = static_cast<float>(p[1]->f[i] - p[2]->f[i] * s);
  }
  return a;
}

}  // namespace npusim::compiler
