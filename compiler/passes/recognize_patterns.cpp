// Pattern recognition: exporters spell LayerNorm, RMSNorm, GELU, HardSwish and SiLU (at opsets that lack
// the op, or always) as chains of elementwise ops. Seven vector passes over the tensor for a LayerNorm is
// what the NPU would pay if the chain stayed; one recognised node is what a kernel library or the
// decomposition pass can then map well. The patterns are the ones torch.onnx.export emits; every
// intermediate must have no other reader, otherwise the chain is left alone.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "compiler/passes/pass_util.h"
#include "compiler/passes/passes.h"

namespace npusim::compiler::passes {
namespace {

using detail::scalar_constant;

bool near(std::optional<float> v, double want) {
  return v && std::fabs(*v - want) <= 1e-4 * std::max(1.0, std::fabs(want));
}

class Matcher {
 public:
  explicit Matcher(Graph& g) : g_(g), dead_(g.nodes.size(), false) {}

  // The live producer of `v` when it is `op` (default domain) and `v` is read only by node `reader`.
  int chain(const std::string& v, const std::string& op, int reader) const {
    const int p = g_.producer(v);
    if (p < 0 || dead_[p] || g_.nodes[p].op_type != op || !g_.nodes[p].domain.empty()) return -1;
    if (detail::sole_consumer(g_, v) != reader) return -1;
    return p;
  }
  // For a binary node: the input index (0/1) equal to `v`, or -1.
  static int operand_index(const Node& n, const std::string& v) {
    if (n.inputs.size() != 2) return -1;
    return n.inputs[0] == v ? 0 : n.inputs[1] == v ? 1 : -1;
  }
  // The sole reader of `v` if it is `op`, else -1.
  int next(const std::string& v, const std::string& op) const {
    const int c = detail::sole_consumer(g_, v);
    if (c < 0 || dead_[c] || g_.nodes[c].op_type != op || !g_.nodes[c].domain.empty()) return -1;
    return c;
  }

  // Replaces node `anchor` by `n` (taking over the anchor's outputs) and kills `others`.
  void replace(int anchor, Node n, const std::vector<int>& others) {
    n.outputs = g_.nodes[anchor].outputs;
    n.name = g_.nodes[anchor].name;
    g_.nodes[anchor] = std::move(n);
    for (int k : others) dead_[k] = true;
  }

  bool dead(size_t k) const { return dead_[k]; }
  void finish() {
    detail::erase_nodes(g_, dead_);
    detail::drop_unreferenced_values(g_);
  }

 private:
  Graph& g_;
  std::vector<bool> dead_;
};

// A constant broadcast (numpy rules) to exactly `target`; nullopt when it does not broadcast to it.
std::optional<Tensor> broadcast_constant(const Tensor& t, const Shape& target) {
  if (t.rank() > static_cast<int64_t>(target.size()) || !t.floating()) return std::nullopt;
  const size_t off = target.size() - t.shape.size();
  for (size_t d = 0; d < t.shape.size(); ++d)
    if (t.shape[d] != 1 && t.shape[d] != target[off + d]) return std::nullopt;
  Tensor out(DataType::kFloat32, target);
  std::vector<int64_t> idx(target.size(), 0);
  for (int64_t e = 0; e < out.size(); ++e) {
    int64_t src = 0;
    for (size_t d = 0; d < t.shape.size(); ++d) src = src * t.shape[d] + (t.shape[d] == 1 ? 0 : idx[off + d]);
    out.f[e] = t.f[src];
    for (int d = static_cast<int>(target.size()) - 1; d >= 0; --d) {
      if (++idx[d] < target[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

// ReduceMean(x) -> Sub(x, mean) -> Pow(d, 2) -> ReduceMean -> Add(eps) -> Sqrt -> Div(d, sqrt)
//   [-> Mul(gamma)] [-> Add(beta)], anchored at the Div.
bool match_layernorm(Graph& g, Matcher& m, int div) {
  const Node& dn = g.nodes[div];
  if (dn.op_type != "Div" || dn.inputs.size() != 2) return false;
  const std::string d = dn.inputs[0];
  const int sqrt = m.chain(dn.inputs[1], "Sqrt", div);
  if (sqrt < 0) return false;
  const int add = m.chain(g.nodes[sqrt].inputs[0], "Add", sqrt);
  if (add < 0) return false;
  const Node& an = g.nodes[add];
  int var_side = scalar_constant(g, an.inputs[1]) ? 0 : scalar_constant(g, an.inputs[0]) ? 1 : -1;
  if (var_side < 0) return false;
  const float eps = *scalar_constant(g, an.inputs[1 - var_side]);
  const int var = m.chain(an.inputs[var_side], "ReduceMean", add);
  if (var < 0) return false;
  // Pow(d, 2) or Mul(d, d).
  const std::string sq = g.nodes[var].inputs[0];
  int pow = m.chain(sq, "Pow", var);
  if (pow >= 0) {
    if (g.nodes[pow].inputs[0] != d || !near(scalar_constant(g, g.nodes[pow].inputs[1]), 2.0)) return false;
  } else {
    pow = m.chain(sq, "Mul", var);
    if (pow < 0 || g.nodes[pow].inputs[0] != d || g.nodes[pow].inputs[1] != d) return false;
  }
  // d = Sub(x, mean) read by exactly the Pow/Mul and the Div.
  const int sub = g.producer(d);
  if (sub < 0 || m.dead(sub) || g.nodes[sub].op_type != "Sub" || detail::is_graph_output(g, d)) return false;
  const int d_uses = detail::use_count(g, d);
  if (d_uses != (g.nodes[pow].op_type == "Mul" ? 3 : 2)) return false;
  const std::string x = g.nodes[sub].inputs[0];
  const int mean = m.chain(g.nodes[sub].inputs[1], "ReduceMean", sub);
  if (mean < 0 || g.nodes[mean].inputs[0] != x) return false;
  const Value& xv = g.value(x);
  if (!xv.shape_known) return false;
  const auto rank = static_cast<int64_t>(xv.shape.size());
  auto ax1 = detail::reduce_axes(g, g.nodes[mean], rank), ax2 = detail::reduce_axes(g, g.nodes[var], rank);
  if (!ax1 || !ax2 || *ax1 != *ax2 || ax1->empty()) return false;
  if (g.nodes[mean].attr_int("keepdims", 1) != 1 || g.nodes[var].attr_int("keepdims", 1) != 1) return false;
  // Trailing contiguous axes only: that is what LayerNormalization(axis) normalises.
  for (size_t k = 0; k < ax1->size(); ++k)
    if ((*ax1)[k] != rank - static_cast<int64_t>(ax1->size()) + static_cast<int64_t>(k)) return false;
  const int64_t axis = ax1->front();
  const Shape norm_shape(xv.shape.begin() + axis, xv.shape.end());
  for (int64_t s : norm_shape)
    if (s < 0) return false;

  std::vector<int> others = {mean, sub, pow, var, add, sqrt};
  int anchor = div;
  std::string gamma, beta;
  // Optional affine: Mul(y, gamma) then Add(., beta), gamma/beta constants of the normalised shape.
  auto affine_operand = [&](int node, const std::string& y) -> std::optional<Tensor> {
    const int idx = Matcher::operand_index(g.nodes[node], y);
    if (idx < 0) return std::nullopt;
    const Tensor* c = detail::constant_of(g, g.nodes[node].inputs[1 - idx]);
    if (!c) return std::nullopt;
    return broadcast_constant(*c, norm_shape);
  };
  std::optional<Tensor> gamma_t, beta_t;
  if (int mul = m.next(dn.outputs[0], "Mul"); mul >= 0 && (gamma_t = affine_operand(mul, dn.outputs[0]))) {
    others.push_back(anchor);
    anchor = mul;
    if (int badd = m.next(g.nodes[mul].outputs[0], "Add");
        badd >= 0 && (beta_t = affine_operand(badd, g.nodes[mul].outputs[0]))) {
      others.push_back(anchor);
      anchor = badd;
    }
  }
  if (!gamma_t) {
    gamma_t = Tensor(DataType::kFloat32, norm_shape);
    for (auto& v : gamma_t->f) v = 1.0f;
  }
  const std::string base = g.nodes[anchor].name;
  Node ln;
  ln.op_type = "LayerNormalization";
  ln.inputs = {x, detail::add_constant(g, base + "_scale", std::move(*gamma_t))};
  if (beta_t) ln.inputs.push_back(detail::add_constant(g, base + "_bias", std::move(*beta_t)));
  ln.attrs["axis"].value = axis;
  ln.attrs["epsilon"].value = eps;
  m.replace(anchor, std::move(ln), others);
  return true;
}

// RMSNorm as Llama exports it (Hugging Face's LlamaRMSNorm: x * rsqrt(mean(x^2) + eps) * weight) or
// spelled with a division: Pow(x, 2) | Mul(x, x) -> ReduceMean(last axes, keepdims) -> Add(eps) -> Sqrt,
// then Div(x, sqrt) or Mul(x, Div(1, sqrt) | Reciprocal(sqrt)), [-> Mul(gamma)]; anchored at the node
// that makes the normalised x (tried after match_layernorm, whose Div(x - mean, sqrt) it would also fit).
bool match_rmsnorm(Graph& g, Matcher& m, int norm) {
  const Node& nn = g.nodes[norm];
  if (nn.inputs.size() != 2 || (nn.op_type != "Div" && nn.op_type != "Mul")) return false;
  std::vector<int> others;
  std::string x;
  int sqrt = -1;
  if (nn.op_type == "Div") {
    x = nn.inputs[0];
    sqrt = m.chain(nn.inputs[1], "Sqrt", norm);
  } else {
    for (int side = 0; side < 2 && sqrt < 0; ++side) {
      const std::string& r = nn.inputs[static_cast<size_t>(side)];
      int inv = m.chain(r, "Reciprocal", norm);
      if (inv < 0 && (inv = m.chain(r, "Div", norm)) >= 0 &&
          !near(scalar_constant(g, g.nodes[inv].inputs[0]), 1.0))
        inv = -1;
      if (inv < 0) continue;
      const std::string& s = g.nodes[inv].op_type == "Div" ? g.nodes[inv].inputs[1] : g.nodes[inv].inputs[0];
      if ((sqrt = m.chain(s, "Sqrt", inv)) < 0) continue;
      x = nn.inputs[static_cast<size_t>(1 - side)];
      others.push_back(inv);
    }
  }
  if (sqrt < 0 || detail::constant_of(g, x)) return false;
  const int add = m.chain(g.nodes[sqrt].inputs[0], "Add", sqrt);
  if (add < 0) return false;
  const Node& an = g.nodes[add];
  const int ms_side = scalar_constant(g, an.inputs[1]) ? 0 : scalar_constant(g, an.inputs[0]) ? 1 : -1;
  if (ms_side < 0) return false;
  const float eps = *scalar_constant(g, an.inputs[1 - ms_side]);
  const int mean = m.chain(an.inputs[ms_side], "ReduceMean", add);
  if (mean < 0 || g.nodes[mean].attr_int("keepdims", 1) != 1) return false;
  const std::string sq = g.nodes[mean].inputs[0];
  int pow = m.chain(sq, "Pow", mean);
  if (pow >= 0) {
    if (g.nodes[pow].inputs[0] != x || !near(scalar_constant(g, g.nodes[pow].inputs[1]), 2.0)) return false;
  } else if ((pow = m.chain(sq, "Mul", mean)) < 0 || g.nodes[pow].inputs[0] != x ||
             g.nodes[pow].inputs[1] != x) {
    return false;
  }
  const Value& xv = g.value(x);
  if (!xv.shape_known) return false;
  const auto rank = static_cast<int64_t>(xv.shape.size());
  const auto axes = detail::reduce_axes(g, g.nodes[mean], rank);
  if (!axes || axes->empty()) return false;
  for (size_t k = 0; k < axes->size(); ++k)  // trailing contiguous axes, as the normalisation's axis
    if ((*axes)[k] != rank - static_cast<int64_t>(axes->size()) + static_cast<int64_t>(k)) return false;
  const int64_t axis = axes->front();
  const Shape norm_shape(xv.shape.begin() + axis, xv.shape.end());
  for (int64_t s : norm_shape)
    if (s < 0) return false;
  others.insert(others.end(), {pow, mean, add, sqrt});
  int anchor = norm;
  std::optional<Tensor> gamma;
  if (const int mul = m.next(nn.outputs[0], "Mul"); mul >= 0) {
    const int idx = Matcher::operand_index(g.nodes[mul], nn.outputs[0]);
    const Tensor* c = idx < 0 ? nullptr : detail::constant_of(g, g.nodes[mul].inputs[1 - idx]);
    if (c && (gamma = broadcast_constant(*c, norm_shape))) {
      others.push_back(anchor);
      anchor = mul;
    }
  }
  if (!gamma) {
    gamma = Tensor(DataType::kFloat32, norm_shape);
    for (auto& v : gamma->f) v = 1.0f;
  }
  Node rms;
  rms.op_type = "RMSNormalization";
  rms.domain = kNpuDomain;
  rms.inputs = {x, detail::add_constant(g, g.nodes[anchor].name + "_scale", std::move(*gamma))};
  rms.attrs["axis"].value = axis;
  rms.attrs["epsilon"].value = eps;
  m.replace(anchor, std::move(rms), others);
  return true;
}

// Div(x, sqrt 2) | Mul(x, 1/sqrt 2) -> Erf -> Add(1) -> Mul(x) -> Mul(0.5), or the 0.5 applied to x
// first; anchored at the Erf.
bool match_gelu(Graph& g, Matcher& m, int erf) {
  const Node& en = g.nodes[erf];
  if (en.op_type != "Erf") return false;
  int scale = m.chain(en.inputs[0], "Div", erf);
  if (scale >= 0) {
    if (!near(scalar_constant(g, g.nodes[scale].inputs[1]), std::sqrt(2.0))) return false;
  } else if ((scale = m.chain(en.inputs[0], "Mul", erf)) >= 0) {
    const Node& s = g.nodes[scale];
    if (!near(scalar_constant(g, s.inputs[1]), 1.0 / std::sqrt(2.0))) return false;
  } else {
    return false;
  }
  const std::string x = g.nodes[scale].inputs[0];
  if (detail::constant_of(g, x)) return false;
  const int add = m.next(en.outputs[0], "Add");
  if (add < 0) return false;
  const int ai = Matcher::operand_index(g.nodes[add], en.outputs[0]);
  if (ai < 0 || !near(scalar_constant(g, g.nodes[add].inputs[1 - ai]), 1.0)) return false;
  const int mul1 = m.next(g.nodes[add].outputs[0], "Mul");
  if (mul1 < 0) return false;
  const int mi = Matcher::operand_index(g.nodes[mul1], g.nodes[add].outputs[0]);
  const std::string other = g.nodes[mul1].inputs[1 - mi];
  std::vector<int> others = {scale, erf, add};
  int anchor = -1;
  if (other == x) {  // (x * (1 + erf)) * 0.5
    const int mul2 = m.next(g.nodes[mul1].outputs[0], "Mul");
    if (mul2 < 0) return false;
    const int i2 = Matcher::operand_index(g.nodes[mul2], g.nodes[mul1].outputs[0]);
    if (!near(scalar_constant(g, g.nodes[mul2].inputs[1 - i2]), 0.5)) return false;
    others.push_back(mul1);
    anchor = mul2;
  } else {  // (x * 0.5) * (1 + erf)
    const int half = m.chain(other, "Mul", mul1);
    if (half < 0) return false;
    const Node& h = g.nodes[half];
    const int hi = Matcher::operand_index(h, x);
    if (hi < 0 || !near(scalar_constant(g, h.inputs[1 - hi]), 0.5)) return false;
    others.push_back(half);
    anchor = mul1;
  }
  Node gelu;
  gelu.op_type = "Gelu";
  gelu.domain = kNpuDomain;
  gelu.inputs = {x};
  gelu.attrs["approximate"].value = std::string("none");
  m.replace(anchor, std::move(gelu), others);
  return true;
}

// act(x) -> Mul(x, act(x)) for act = HardSigmoid(1/6, 1/2) (HardSwish) or Sigmoid (SiLU); anchored at
// the activation.
bool match_gated(Graph& g, Matcher& m, int act) {
  const Node& an = g.nodes[act];
  const bool hs = an.op_type == "HardSigmoid";
  if (!hs && an.op_type != "Sigmoid") return false;
  if (hs && (!near(an.attr_float("alpha", 0.2f), 1.0 / 6.0) || !near(an.attr_float("beta", 0.5f), 0.5)))
    return false;
  const std::string x = an.inputs[0];
  const int mul = m.next(an.outputs[0], "Mul");
  if (mul < 0) return false;
  const int i = Matcher::operand_index(g.nodes[mul], an.outputs[0]);
  if (i < 0 || g.nodes[mul].inputs[1 - i] != x) return false;
  Node n;
  n.op_type = hs ? "HardSwish" : "Silu";
  if (!hs) n.domain = kNpuDomain;
  n.inputs = {x};
  m.replace(mul, std::move(n), {act});
  return true;
}

// The bounds of a Clip (inputs from opset 11, attributes before), if constant.
std::optional<std::pair<float, float>> clip_bounds(const Graph& g, const Node& c) {
  float lo = std::numeric_limits<float>::lowest(), hi = std::numeric_limits<float>::max();
  if (g.opset < 11) return std::make_pair(c.attr_float("min", lo), c.attr_float("max", hi));
  for (size_t k = 1; k < 3; ++k) {
    if (!c.has_input(k)) continue;
    auto v = scalar_constant(g, c.inputs[k]);
    if (!v) return std::nullopt;
    (k == 1 ? lo : hi) = *v;
  }
  return std::make_pair(lo, hi);
}

// The sole reader of `v` when it divides `v` by 6 (Div(v, 6) or Mul by 1/6), else -1.
int sixth(const Graph& g, const Matcher& m, const std::string& v) {
  int k = m.next(v, "Div");
  if (k >= 0)
    return g.nodes[k].inputs[0] == v && near(scalar_constant(g, g.nodes[k].inputs[1]), 6.0) ? k : -1;
  k = m.next(v, "Mul");
  const int i = k < 0 ? -1 : Matcher::operand_index(g.nodes[k], v);
  return i >= 0 && near(scalar_constant(g, g.nodes[k].inputs[1 - i]), 1.0 / 6.0) ? k : -1;
}

// Add(x, 3) -> Clip(0, 6) -> Div(6) [-> Mul(x)] or Add(x, 3) -> Clip(0, 6) -> Mul(x) -> Div(6): HardSigmoid
// (alpha 1/6, beta 1/2) or HardSwish as PaddlePaddle's exporter (paddle2onnx) and older torch exports spell
// them; anchored at the Add.
bool match_hard_chain(Graph& g, Matcher& m, int add) {
  const Node& an = g.nodes[add];
  if (an.op_type != "Add" || an.inputs.size() != 2) return false;
  const int xi = near(scalar_constant(g, an.inputs[1]), 3.0)   ? 0
                 : near(scalar_constant(g, an.inputs[0]), 3.0) ? 1
                                                               : -1;
  if (xi < 0 || detail::constant_of(g, an.inputs[xi])) return false;
  const std::string x = an.inputs[xi];
  const int clip = m.next(an.outputs[0], "Clip");
  if (clip < 0 || g.nodes[clip].inputs[0] != an.outputs[0]) return false;
  const auto b = clip_bounds(g, g.nodes[clip]);
  if (!b || !near(b->first, 0.0) || !near(b->second, 6.0)) return false;
  auto times_x = [&](const std::string& v) {
    const int k = m.next(v, "Mul");
    const int i = k < 0 ? -1 : Matcher::operand_index(g.nodes[k], v);
    return i >= 0 && g.nodes[k].inputs[1 - i] == x ? k : -1;
  };
  const std::string& cv = g.nodes[clip].outputs[0];
  std::vector<int> others = {add, clip};
  int last = -1;
  bool swish = true;
  if (const int mul = times_x(cv); mul >= 0) {
    last = sixth(g, m, g.nodes[mul].outputs[0]);
    others.push_back(mul);
  } else if (const int div = sixth(g, m, cv); div >= 0) {
    last = times_x(g.nodes[div].outputs[0]);
    swish = last >= 0;
    if (!swish)
      last = div;
    else
      others.push_back(div);
  }
  if (last < 0) return false;
  Node n;
  n.op_type = swish ? "HardSwish" : "HardSigmoid";
  n.inputs = {x};
  if (!swish) {
    n.attrs["alpha"].value = 1.0f / 6.0f;
    n.attrs["beta"].value = 0.5f;
  }
  m.replace(last, std::move(n), others);
  return true;
}

// A Transpose swapping the last two axes.
bool swaps_last_two(const Node& t, size_t rank) {
  const std::vector<int64_t> perm = t.attr_ints("perm");
  if (perm.size() != rank || rank < 2) return false;
  for (size_t d = 0; d < rank; ++d) {
    const size_t want = d + 2 < rank ? d : (d == rank - 2 ? rank - 1 : rank - 2);
    if (perm[d] != static_cast<int64_t>(want)) return false;
  }
  return true;
}

// Grouped-query attention's head broadcast as address arithmetic. Exporters widen each KV head to the
// `group` query heads it serves with a copy (Llama's repeat_kv, the llm: builtin):
//   Reshape/Unsqueeze(kv) [P.., kvh, 1, T, d] -> Expand [P.., kvh, g, T, d] -> Reshape [P.., h, T, d]
//   [-> Transpose(last two)] -> MatMul(A [P.., h, S, x], .)
// The copy is g times the cache, written and read again on every decode step. Query head j*g + i reads
// KV head j, so the g query heads of one KV head are consecutive: A as [P.., kvh, g*S, x] (a free
// Reshape of a contiguous tensor) multiplied by the KV head itself gives the same rows, and a free
// Reshape makes them [P.., h, S, N] again. Every intermediate must have no other reader.
void share_kv_heads(Graph& g) {
  detail::UseIndex uses(g);
  std::vector<bool> dead(g.nodes.size(), false);
  std::map<size_t, std::vector<Node>> replacement;
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    const Node& mm = g.nodes[k];
    if (mm.op_type != "MatMul" || !mm.domain.empty() || mm.inputs.size() != 2) continue;
    const int kk = static_cast<int>(k);
    auto sole = [&](const std::string& v, const char* op, int reader) {
      const int p = uses.producer(v);
      if (p < 0 || dead[p] || g.nodes[p].op_type != op || !g.nodes[p].domain.empty()) return -1;
      return uses.sole_consumer(v) == reader && !detail::is_graph_output(g, v) ? p : -1;
    };
    std::string b = mm.inputs[1];
    int tr = sole(b, "Transpose", kk);
    if (tr >= 0) b = g.nodes[tr].inputs[0];
    const int rs = sole(b, "Reshape", tr >= 0 ? tr : kk);
    if (rs < 0) continue;
    const int ex = sole(g.nodes[rs].inputs[0], "Expand", rs);
    if (ex < 0) continue;
    const Value &ein = g.value(g.nodes[ex].inputs[0]), &eout = g.value(g.nodes[ex].outputs[0]);
    const Value &wide = g.value(g.nodes[rs].outputs[0]), &a = g.value(mm.inputs[0]),
                &y = g.value(mm.outputs[0]);
    if (!ein.fully_known() || !eout.fully_known() || !wide.fully_known() || !a.fully_known() ||
        !y.fully_known())
      continue;
    if (ein.is_constant() || !is_float(ein.dtype)) continue;
    const size_t r = wide.shape.size();
    if (r < 3 || ein.shape.size() != r + 1 || eout.shape.size() != r + 1 || a.shape.size() != r ||
        y.shape.size() != r)
      continue;
    if (tr >= 0 && !swaps_last_two(g.nodes[tr], r)) continue;
    const Shape prefix(wide.shape.begin(), wide.shape.end() - 3);
    const int64_t heads = wide.shape[r - 3], T = wide.shape[r - 2], d = wide.shape[r - 1];
    const int64_t kvh = ein.shape[r - 3], group = eout.shape[r - 2];
    auto with = [&](Shape s, std::initializer_list<int64_t> tail) {
      s.insert(s.end(), tail);
      return s;
    };
    if (group < 2 || kvh * group != heads || ein.shape != with(prefix, {kvh, 1, T, d}) ||
        eout.shape != with(prefix, {kvh, group, T, d}) ||
        !std::equal(prefix.begin(), prefix.end(), a.shape.begin()) || a.shape[r - 3] != heads)
      continue;
    const int64_t S = a.shape[r - 2], X = a.shape[r - 1], N = y.shape[r - 1];
    const std::string base = mm.name;
    std::vector<Node> nodes;
    // (Node names are made unique against the graph, which does not hold these yet: one suffix each.)
    auto reshape = [&](const std::string& v, const Shape& to, const std::string& suffix,
                       const std::string& out) {
      const std::string o = out.empty() ? detail::add_value(g, base + suffix, g.value(v).dtype, to) : out;
      const std::string shape = detail::add_constant(g, base + suffix + "_shape", detail::int64_vector(to));
      nodes.push_back(detail::make_node(g, "Reshape", base + suffix, {v, shape}, {o}));
      return o;
    };
    const std::string rows = reshape(mm.inputs[0], with(prefix, {kvh, group * S, X}), "_group_rows", "");
    std::string kv = reshape(g.nodes[ex].inputs[0], with(prefix, {kvh, T, d}), "_kv_heads", "");
    if (tr >= 0) {
      const std::string t = detail::add_value(g, base + "_kv_t", ein.dtype, with(prefix, {kvh, d, T}));
      Node tn = detail::make_node(g, "Transpose", base + "_kv_t", {kv}, {t});
      tn.attrs["perm"] = g.nodes[tr].attrs.at("perm");
      nodes.push_back(std::move(tn));
      kv = t;
    }
    const std::string prod =
        detail::add_value(g, base + "_grouped", y.dtype, with(prefix, {kvh, group * S, N}));
    Node m2 = mm;
    m2.inputs = {rows, kv};
    m2.outputs = {prod};
    nodes.push_back(std::move(m2));
    reshape(prod, y.shape, "_heads", mm.outputs[0]);
    for (int n : {kk, tr, rs, ex})
      if (n >= 0) dead[static_cast<size_t>(n)] = true;
    replacement[k] = std::move(nodes);
  }
  if (replacement.empty()) return;
  std::vector<Node> out;
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    if (auto it = replacement.find(k); it != replacement.end())
      for (auto& n : it->second) out.push_back(std::move(n));
    else if (!dead[k])
      out.push_back(std::move(g.nodes[k]));
  }
  g.nodes = std::move(out);
  detail::drop_unreferenced_values(g);
}

}  // namespace

void recognize_patterns(Graph& g) {
  Matcher m(g);
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    if (m.dead(k) || !g.nodes[k].domain.empty()) continue;
    const int i = static_cast<int>(k);
    if (match_layernorm(g, m, i) || match_rmsnorm(g, m, i) || match_gelu(g, m, i) || match_gated(g, m, i) ||
        match_hard_chain(g, m, i))
      continue;
  }
  m.finish();
  share_kv_heads(g);
}

}  // namespace npusim::compiler::passes
