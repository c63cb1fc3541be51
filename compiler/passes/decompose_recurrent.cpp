// LSTM, GRU and RNN as the matrix and vector ops the back end already lowers: per direction, the input
// projection of every time step as one MatMul ([seq*batch, input] x [input, gates*hidden], biases
// folded), then per step the recurrent product (a MatMul whose residual input is that step's rows of the
// projection, so the sum is its epilogue), the gate activations and the state updates as element-wise
// ops. The state never leaves the graph's values between steps, so the back end may keep it on chip.
#include <set>

#include "compiler/ops/recurrent.h"
#include "compiler/passes/pass_util.h"
#include "compiler/passes/passes.h"

namespace npusim::compiler::passes {
namespace {

using detail::constant_of;
using Kind = RecurrentSpec::Kind;

// Builds the replacement nodes of one recurrent node, naming everything after it.
class Emitter {
 public:
  Emitter(Graph& g, const Node& n, DataType dt) : g_(g), base_(n.name), dt_(dt) {}

  std::string value(const std::string& what, const Shape& s) {
    return detail::add_value(g_, base_ + "/" + what, dt_, s);
  }
  std::string constant(const std::string& what, Tensor t) {
    return detail::add_constant(g_, base_ + "/" + what, std::move(t));
  }
  std::string ints(const std::string& what, const std::vector<int64_t>& v) {
    return constant(what, detail::int64_vector(v));
  }
  Node& node(const std::string& op, std::vector<std::string> inputs, const std::string& out) {
    Node n;
    n.op_type = op;
    std::string name = g_.unique_node_name(base_ + "/" + op);
    for (int k = 1; names_.count(name); ++k)
      name = g_.unique_node_name(base_ + "/" + op + "_" + std::to_string(k));
    names_.insert(name);
    n.name = name;
    n.inputs = std::move(inputs);
    n.outputs = {out};
    nodes_.push_back(std::move(n));
    return nodes_.back();
  }
  // out = op(inputs) with a new output value of shape s (or into `into` when given).
  std::string op(const std::string& op, std::vector<std::string> inputs, const Shape& s,
                 const std::string& into = "") {
    const std::string out = into.empty() ? value(op, s) : into;
    node(op, std::move(inputs), out);
    return out;
  }
  std::string slice(const std::string& in, const Shape& in_shape, int64_t axis, int64_t begin, int64_t end) {
    Shape s = in_shape;
    s[axis] = end - begin;
    const std::string out = value("Slice", s);
    if (g_.opset >= 10) {
      node("Slice", {in, ints("starts", {begin}), ints("ends", {end}), ints("axes", {axis})}, out);
    } else {
      Node& n = node("Slice", {in}, out);
      n.attrs["starts"].value = std::vector<int64_t>{begin};
      n.attrs["ends"].value = std::vector<int64_t>{end};
      n.attrs["axes"].value = std::vector<int64_t>{axis};
    }
    return out;
  }
  std::string reshape(const std::string& in, const Shape& s, const std::string& into = "") {
    return op("Reshape", {in, ints("shape", s)}, s, into);
  }
  std::string concat(const std::vector<std::string>& in, int64_t axis, const Shape& s,
                     const std::string& into = "") {
    if (in.size() == 1 && into.empty()) return in[0];
    const std::string out = op("Concat", in, s, into);
    nodes_.back().attrs["axis"].value = axis;
    return out;
  }
  std::string transpose(const std::string& in, const std::vector<int64_t>& perm, const Shape& s,
                        const std::string& into = "") {
    const std::string out = op("Transpose", {in}, s, into);
    nodes_.back().attrs["perm"].value = perm;
    return out;
  }
  std::string scalar(float v) { return constant("c", Tensor::from_floats({}, {v})); }
  std::string clip(const std::string& in, const Shape& s, float bound) {
    if (g_.opset >= 11) return op("Clip", {in, scalar(-bound), scalar(bound)}, s);
    const std::string out = op("Clip", {in}, s);
    nodes_.back().attrs["min"].value = -bound;
    nodes_.back().attrs["max"].value = bound;
    return out;
  }
  std::string activation(const RecurrentActivation& a, const std::string& in, const Shape& s) {
    const std::string& f = a.name;
    if (f == "Affine") return op("Add", {op("Mul", {in, scalar(a.alpha)}, s), scalar(a.beta)}, s);
    if (f == "ScaledTanh")
      return op("Mul", {op("Tanh", {op("Mul", {in, scalar(a.beta)}, s)}, s), scalar(a.alpha)}, s);
    const std::string out = op(f, {in}, s);
    if (f == "LeakyRelu" || f == "ThresholdedRelu" || f == "Elu" || f == "HardSigmoid")
      nodes_.back().attrs["alpha"].value = a.alpha;
    if (f == "HardSigmoid") nodes_.back().attrs["beta"].value = a.beta;
    return out;
  }
  std::vector<Node>& nodes() { return nodes_; }

 private:
  Graph& g_;
  std::string base_;
  DataType dt_;
  std::set<std::string> names_;
  std::vector<Node> nodes_;
};

// `t` transformed by `f` into shape `s`; shape-only in, shape-only out (a timing compile).
template <class F>
Tensor derived(const Tensor& t, const Shape& s, F&& f) {
  if (!t.has_values()) return Tensor::shape_only(t.dtype, s);
  Tensor r(t.dtype, s);
  f(r);
  return r;
}

// A float constant with values or shape-only, or absent; false for a runtime value.
bool constant_or_absent(const Graph& g, const Node& n, size_t k) {
  return !n.has_input(k) || constant_of(g, n.inputs[k]) != nullptr;
}

// Why `n` stays whole (runs on the host), or "" when it can be decomposed.
std::string why_whole(const Graph& g, const Node& n, const std::optional<RecurrentSpec>& s,
                      const std::string& err) {
  if (!s) return err;
  const Value& x = g.value(n.inputs[0]);
  if (!x.fully_known() || x.shape.size() != 3) return "X has no static shape";
  if (!is_float(x.dtype)) return "X is not floating";
  for (size_t k : {size_t{1}, size_t{2}, size_t{3}, size_t{7}})
    if ((k != 7 || s->kind == Kind::kLstm) && !constant_or_absent(g, n, k))
      return "W, R, B or P is not a constant";
  if (n.has_input(4)) {
    const Tensor* lens = constant_of(g, n.inputs[4]);
    if (!lens || !lens->has_values()) return "sequence_lens is not a constant";
    const int64_t seq = x.shape[s->layout == 1 ? 1 : 0];
    for (int64_t k = 0; k < lens->size(); ++k)
      if (lens->as_int(k) != seq) return "sequence_lens ends some sequences early";
  }
  for (size_t k : {size_t{5}, size_t{6}})
    if (n.has_input(k) && !g.value(n.inputs[k]).fully_known()) return "an initial state has no static shape";
  return "";
}

void decompose_one(Graph& g, const Node& n, const RecurrentSpec& s, std::vector<Node>& out) {
  const Value& xv = g.value(n.inputs[0]);
  const DataType dt = xv.dtype;
  const bool bl = s.layout == 1;
  const int64_t seq = xv.shape[bl ? 1 : 0], batch = xv.shape[bl ? 0 : 1], in = xv.shape[2];
  const int64_t hs = s.hidden, gates = s.gates, dirs = s.directions, gh = gates * hs;
  const Tensor& w = *constant_of(g, n.inputs[1]);
  const Tensor& r = *constant_of(g, n.inputs[2]);
  const Tensor* b = n.has_input(3) ? constant_of(g, n.inputs[3]) : nullptr;
  const Tensor* p = s.kind == Kind::kLstm && n.has_input(7) ? constant_of(g, n.inputs[7]) : nullptr;
  Emitter e(g, n, dt);
  const Shape bh{batch, hs};

  // X as [seq * batch, input], time-major.
  std::string x = n.inputs[0];
  if (bl) x = e.transpose(x, {1, 0, 2}, {seq, batch, in});
  x = e.reshape(x, {seq * batch, in});
  // GRU with linear_before_reset keeps R's h-gate bias inside the reset product.
  const bool rbh_apart = s.kind == Kind::kGru && s.linear_before_reset;

  std::vector<std::vector<std::string>> ys(static_cast<size_t>(dirs));
  std::vector<std::string> last_h, last_c;
  for (int64_t d = 0; d < dirs; ++d) {
    const auto& act = s.activations[static_cast<size_t>(d)];
    // Input projection of all steps: X [S*B, I] x W_d^T [I, G*H] + (Wb + Rb).
    const std::string wt = e.constant("Wt", derived(w, {in, gh}, [&](Tensor& t) {
                                        for (int64_t j = 0; j < gh; ++j)
                                          for (int64_t k = 0; k < in; ++k)
                                            t.f[k * gh + j] = w.f[(d * gh + j) * in + k];
                                      }));
    std::string xw = e.op("MatMul", {x, wt}, {seq * batch, gh});
    if (b) {
      const std::string bias = e.constant(
          "bias", derived(*b, {gh}, [&](Tensor& t) {
            for (int64_t j = 0; j < gh; ++j)
              t.f[j] = b->f[d * 2 * gh + j] + (rbh_apart && j >= 2 * hs ? 0.0f : b->f[d * 2 * gh + gh + j]);
          }));
      xw = e.op("Add", {xw, bias}, {seq * batch, gh});
    }
    auto rt_of = [&](int64_t j0, int64_t j1) {
      return e.constant("Rt", derived(r, {hs, j1 - j0}, [&](Tensor& t) {
                          for (int64_t j = j0; j < j1; ++j)
                            for (int64_t k = 0; k < hs; ++k)
                              t.f[k * (j1 - j0) + (j - j0)] = r.f[(d * gh + j) * hs + k];
                        }));
    };
    auto state0 = [&](size_t k) -> std::string {
      if (!n.has_input(k)) return e.constant("zeros", Tensor(dt, bh));
      const std::string st = n.inputs[k];
      const Shape full = bl ? Shape{batch, dirs, hs} : Shape{dirs, batch, hs};
      return e.reshape(e.slice(st, full, bl ? 1 : 0, d, d + 1), bh);
    };
    auto peephole = [&](int64_t gate) {
      return e.constant("P", derived(*p, {hs}, [&](Tensor& t) {
                          for (int64_t k = 0; k < hs; ++k) t.f[k] = p->f[d * 3 * hs + gate * hs + k];
                        }));
    };
    auto pre = [&](const std::string& v) { return s.clip ? e.clip(v, bh, *s.clip) : v; };
    std::string h = state0(5), c = s.kind == Kind::kLstm ? state0(6) : "";
    ys[static_cast<size_t>(d)].assign(static_cast<size_t>(seq), "");
    const std::string rt = s.kind == Kind::kGru && !s.linear_before_reset ? rt_of(0, 2 * hs) : rt_of(0, gh);
    const std::string rt_h = s.kind == Kind::kGru && !s.linear_before_reset ? rt_of(2 * hs, gh) : "";
    std::string rbh;
    if (rbh_apart && b)
      rbh = e.constant("Rbh", derived(*b, {hs}, [&](Tensor& t) {
                         for (int64_t k = 0; k < hs; ++k) t.f[k] = b->f[d * 2 * gh + gh + 2 * hs + k];
                       }));
    for (int64_t step = 0; step < seq; ++step) {
      const int64_t t = s.backwards(static_cast<int>(d)) ? seq - 1 - step : step;
      const std::string xt = e.slice(xw, {seq * batch, gh}, 0, t * batch, (t + 1) * batch);
      auto gate = [&](const std::string& v, int64_t width, int64_t k) {
        return e.slice(v, {batch, width}, 1, k * hs, (k + 1) * hs);
      };
      if (s.kind == Kind::kRnn) {
        h = e.activation(act[0], pre(e.op("Add", {e.op("MatMul", {h, rt}, bh), xt}, bh)), bh);
      } else if (s.kind == Kind::kLstm) {
        const std::string all = e.op("Add", {e.op("MatMul", {h, rt}, {batch, gh}), xt}, {batch, gh});
        std::string i = gate(all, gh, 0), o = gate(all, gh, 1), f = gate(all, gh, 2), cc = gate(all, gh, 3);
        if (p) {
          i = e.op("Add", {i, e.op("Mul", {c, peephole(0)}, bh)}, bh);
          f = e.op("Add", {f, e.op("Mul", {c, peephole(2)}, bh)}, bh);
        }
        i = e.activation(act[0], pre(i), bh);
        f = s.input_forget ? e.op("Sub", {e.scalar(1.0f), i}, bh) : e.activation(act[0], pre(f), bh);
        cc = e.activation(act[1], pre(cc), bh);
        c = e.op("Add", {e.op("Mul", {f, c}, bh), e.op("Mul", {i, cc}, bh)}, bh);
        if (p) o = e.op("Add", {o, e.op("Mul", {c, peephole(1)}, bh)}, bh);
        o = e.activation(act[0], pre(o), bh);
        h = e.op("Mul", {o, e.activation(act[2], c, bh)}, bh);
      } else {
        const std::string x_zr = e.slice(xt, {batch, gh}, 1, 0, 2 * hs), x_h = gate(xt, gh, 2);
        std::string zr, hh;
        if (!s.linear_before_reset) {
          zr = e.op("Add", {e.op("MatMul", {h, rt}, {batch, 2 * hs}), x_zr}, {batch, 2 * hs});
        } else {
          std::string hr = e.op("MatMul", {h, rt}, {batch, gh});
          zr = e.op("Add", {e.slice(hr, {batch, gh}, 1, 0, 2 * hs), x_zr}, {batch, 2 * hs});
          hh = gate(hr, gh, 2);
          if (!rbh.empty()) hh = e.op("Add", {hh, rbh}, bh);
        }
        if (s.clip) zr = e.clip(zr, {batch, 2 * hs}, *s.clip);
        zr = e.activation(act[0], zr, {batch, 2 * hs});
        const std::string z = gate(zr, 2 * hs, 0), rr = gate(zr, 2 * hs, 1);
        if (!s.linear_before_reset)
          hh = e.op("Add", {e.op("MatMul", {e.op("Mul", {rr, h}, bh), rt_h}, bh), x_h}, bh);
        else
          hh = e.op("Add", {x_h, e.op("Mul", {rr, hh}, bh)}, bh);
        hh = e.activation(act[1], pre(hh), bh);
        // H = (1 - z) * hh + z * h = hh + z * (h - hh)
        h = e.op("Add", {hh, e.op("Mul", {z, e.op("Sub", {h, hh}, bh)}, bh)}, bh);
      }
      ys[static_cast<size_t>(d)][static_cast<size_t>(t)] = h;
    }
    last_h.push_back(h);
    last_c.push_back(c);
  }

  // Outputs: Y [S, D, B, H] (layout 1: [B, S, D, H]), Y_h / Y_c [D, B, H] (layout 1: [B, D, H]).
  auto wanted = [&](size_t k) { return k < n.outputs.size() && !n.outputs[k].empty(); };
  if (wanted(0)) {
    std::vector<std::string> steps;
    for (int64_t t = 0; t < seq; ++t) {
      std::vector<std::string> per_dir;
      for (int64_t d = 0; d < dirs; ++d)
        per_dir.push_back(e.reshape(ys[static_cast<size_t>(d)][static_cast<size_t>(t)], {1, 1, batch, hs}));
      steps.push_back(e.concat(per_dir, 1, {1, dirs, batch, hs}));
    }
    if (bl) {
      const std::string y = e.concat(steps, 0, {seq, dirs, batch, hs});
      e.transpose(y, {2, 0, 1, 3}, {batch, seq, dirs, hs}, n.outputs[0]);
    } else if (steps.size() == 1) {
      e.reshape(steps[0], {seq, dirs, batch, hs}, n.outputs[0]);
    } else {
      e.concat(steps, 0, {seq, dirs, batch, hs}, n.outputs[0]);
    }
  }
  for (size_t k : {size_t{1}, size_t{2}}) {
    if (!wanted(k) || (k == 2 && s.kind != Kind::kLstm)) continue;
    const auto& last = k == 1 ? last_h : last_c;
    std::vector<std::string> parts;
    for (const auto& v : last) parts.push_back(e.reshape(v, bl ? Shape{batch, 1, hs} : Shape{1, batch, hs}));
    const Shape whole = bl ? Shape{batch, dirs, hs} : Shape{dirs, batch, hs};
    if (parts.size() == 1)
      e.reshape(last[0], whole, n.outputs[k]);
    else
      e.concat(parts, bl ? 1 : 0, whole, n.outputs[k]);
  }
  out = std::move(e.nodes());
}

}  // namespace

void decompose_recurrent(Graph& g) {
  bool changed = false;
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    const Node& n = g.nodes[k];
    std::string err;
    const std::optional<RecurrentSpec> s = recurrent_spec(n, &err);
    if (!s || !why_whole(g, n, s, err).empty()) continue;
    std::vector<Node> body;
    const Node copy = n;
    decompose_one(g, copy, *s, body);
    g.nodes.erase(g.nodes.begin() + static_cast<std::ptrdiff_t>(k));
    g.nodes.insert(g.nodes.begin() + static_cast<std::ptrdiff_t>(k), std::make_move_iterator(body.begin()),
                   std::make_move_iterator(body.end()));
    k += body.size() - 1;
    changed = true;
  }
  if (!changed) return;
  // Zero initial states make the first step's products constant: fold them as the pipeline's first pass
  // would have.
  fold_constants(g);
  eliminate_dead_nodes(g);
}

std::string recurrent_host_reason(const Graph& g, const Node& n) {
  std::string err;
  const std::optional<RecurrentSpec> s = recurrent_spec(n, &err);
  return why_whole(g, n, s, err);
}

}  // namespace npusim::compiler::passes
