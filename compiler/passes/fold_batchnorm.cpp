// BatchNormalization folding: at inference BN is a per-channel affine map y = s*x + t with
// s = gamma / sqrt(var + eps), t = beta - mean * s. Right after a matrix node it folds into the
// weights (scale each output channel's filter by s) and the bias (b' = s*b + t), so it costs nothing at
// run time. This runs before epilogue fusion: the BN sits between the matrix op and its activation.
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
  Tensor out(DataType::kFloat32, {c});
  for (int64_t i = 0; i < c; ++i) out.f[i] = (bias ? bias->f[i] : 0.0f) * a.scale[i] + a.shift[i];
  return out;
}

// Folds `a` into matrix node m; false when its shapes do not allow it.
bool fold_into(Graph& g, Node& m, const Affine& a) {
  const bool matrix = m.op_type == "Conv" || m.op_type == "ConvTranspose" || m.op_type == "Gemm" || m.op_type == "MatMul";
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
    if (!bias) {
      nb = folded_bias(nullptr, a);
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

}  // namespace

void fold_batchnorm(Graph& g) {
  std::vector<bool> dead(g.nodes.size(), false);
  // Folding keeps the matrix node at its index and only kills BNs: the index stays valid.
  const detail::UseIndex index(g);
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    const Node& bn = g.nodes[k];
    if (bn.op_type != "BatchNormalization" || !bn.domain.empty()) continue;
    const int p = index.producer(bn.inputs[0]);
    if (p < 0 || dead[p] || index.sole_consumer(bn.inputs[0]) != static_cast<int>(k)) continue;
    if (g.value(bn.inputs[0]).materialized) continue;  // a quantization point of the model
    Node& m = g.nodes[p];
    if (!m.domain.empty() || m.has_attr(kActivation) || m.has_attr(kResidualInput)) continue;
    auto a = batchnorm_affine(g, bn);
    if (!a) continue;
    Node folded = m;
    if (!fold_into(g, folded, *a)) continue;
    folded.outputs[0] = bn.outputs[0];
    m = std::move(folded);
    dead[k] = true;
  }
  detail::erase_nodes(g, dead);
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
