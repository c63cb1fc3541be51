// Epilogue fusion: the accumulator of the matrix unit is drained through the vector unit anyway, so a
// bias, a residual and an activation applied on the way out cost no extra pass over the tensor. A chain
// matrix -> [Add bias] -> [Add residual] -> [activation] becomes one node with y = act(mm + b + r).
// The vector unit applies an activation on the tile it has just computed too: after an element-wise
// binary node or an unfused BatchNormalization.
#include <limits>
#include <set>

#include "compiler/passes/pass_util.h"
#include "compiler/passes/passes.h"

namespace npusim::compiler::passes {
namespace {

using detail::constant_of;

bool is_matrix(const Node& n) {
  return n.domain.empty() && (n.op_type == "Conv" || n.op_type == "ConvTranspose" || n.op_type == "Gemm" ||
                              n.op_type == "MatMul");
}

// A constant `c` added to the [.., M, ..] output of `m` as a per-channel bias: returns it as [M]
// (detail::channel_constant along the output channel axis); for Gemm, C broadcast to [M, N].
std::optional<Tensor> as_bias(const Graph& g, const Node& m, const Tensor& c) {
  if (m.op_type != "Gemm")
    return detail::channel_constant(g, m.outputs[0], detail::output_channel_axis(g, m), c);
  const Value& out = g.value(m.outputs[0]);
  if (!out.fully_known() || !c.floating() || c.rank() > static_cast<int64_t>(out.shape.size()))
    return std::nullopt;
  const size_t off = out.shape.size() - c.shape.size();
  for (size_t d = 0; d < c.shape.size(); ++d)
    if (c.shape[d] != 1 && c.shape[d] != out.shape[off + d]) return std::nullopt;
  return c;  // combined with the existing C below
}

// Adds two bias constants with numpy broadcasting (shapes of rank <= 2 here).
Tensor add_broadcast(const Tensor& a, const Tensor& b) {
  const size_t r = std::max(a.shape.size(), b.shape.size());
  Shape s(r);
  auto dim = [&](const Tensor& t, size_t d) {
    return d < r - t.shape.size() ? int64_t{1} : t.shape[d - (r - t.shape.size())];
  };
  for (size_t d = 0; d < r; ++d) s[d] = std::max(dim(a, d), dim(b, d));
  Tensor out(DataType::kFloat32, s);
  std::vector<int64_t> idx(r, 0);
  auto offset = [&](const Tensor& t) {
    int64_t o = 0;
    const size_t off = r - t.shape.size();
    for (size_t d = 0; d < t.shape.size(); ++d) o = o * t.shape[d] + (t.shape[d] == 1 ? 0 : idx[off + d]);
    return o;
  };
  for (int64_t e = 0; e < out.size(); ++e) {
    out.f[e] = a.f[offset(a)] + b.f[offset(b)];
    for (int d = static_cast<int>(r) - 1; d >= 0; --d) {
      if (++idx[d] < s[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

// Epilogue attributes for an activation node, or false when it is not one the epilogue has. SiLU
// (x * sigmoid(x), two vector ops and a scratch tile) only after a matrix node (`matrix`).
bool activation_attrs(const Graph& g, const Node& a, std::map<std::string, Attribute>& attrs, bool matrix) {
  const std::string& op = a.op_type;
  auto set_f = [&](const char* k, float v) { attrs[k].value = v; };
  if (a.domain == kNpuDomain) {
    const bool gelu = op == "Gelu" && a.attr_string("approximate", "none") == "none";
    if (!gelu && !(matrix && op == "Silu")) return false;
  } else if (!a.domain.empty()) {
    return false;
  } else if (op == "Relu" || op == "Sigmoid" || op == "Tanh" || op == "HardSwish") {
  } else if (op == "LeakyRelu") {
    set_f(kAlpha, a.attr_float("alpha", 0.01f));
  } else if (op == "HardSigmoid") {
    set_f(kAlpha, a.attr_float("alpha", 0.2f));
    set_f(kBeta, a.attr_float("beta", 0.5f));
  } else if (op == "Clip") {
    float lo = std::numeric_limits<float>::lowest(), hi = std::numeric_limits<float>::max();
    if (g.opset < 11) {
      lo = a.attr_float("min", lo);
      hi = a.attr_float("max", hi);
    } else {
      for (size_t k = 1; k < 3; ++k) {
        if (!a.has_input(k)) continue;
        auto v = detail::scalar_constant(g, a.inputs[k]);
        if (!v) return false;
        (k == 1 ? lo : hi) = *v;
      }
    }
    set_f(kActMin, lo);
    set_f(kActMax, hi);
  } else {
    return false;
  }
  attrs[kActivation].value = op;
  return true;
}

}  // namespace

void fuse_epilogues(Graph& g) {
  std::vector<bool> dead(g.nodes.size(), false);
  // The fused node replaces the last node it absorbs (same index, same output name): the index stays valid.
  const detail::UseIndex index(g);
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    if (dead[k] || !is_matrix(g.nodes[k]) || g.nodes[k].has_attr(kActivation)) continue;
    if (!is_float(g.value(g.nodes[k].outputs[0]).dtype)) continue;
    Node f = g.nodes[k];
    int last = -1;
    std::vector<int> absorbed;
    while (true) {
      const std::string cur = last < 0 ? f.outputs[0] : g.nodes[last].outputs[0];
      if (g.value(cur).materialized) break;  // a quantization point: fusing would skip its rounding
      const int c = index.sole_consumer(cur);
      if (c < 0 || dead[c]) break;
      const Node& cn = g.nodes[c];
      if (f.has_attr(kActivation)) {
        // Relu then Clip(lo >= 0, hi) is Clip(lo, hi): torch exports relu6 that way.
        std::map<std::string, Attribute> act;
        if (f.attr_string(kActivation, "") != "Relu" || cn.op_type != "Clip" ||
            !activation_attrs(g, cn, act, true) || act[kActMin].f() < 0.0f)
          break;
        for (auto& [key, a] : act) f.attrs[key] = a;
      } else if (cn.domain.empty() && cn.op_type == "Add" && cn.inputs.size() == 2) {
        const std::string& other = cn.inputs[0] == cur ? cn.inputs[1] : cn.inputs[0];
        const Tensor* oc = constant_of(g, other);
        if (oc) {
          auto b = as_bias(g, f, *oc);
          if (!b) break;
          const Tensor* old = f.has_input(2) ? constant_of(g, f.inputs[2]) : nullptr;
          if (f.has_input(2) && !old) break;  // a non-constant Gemm C: keep the Add separate
          Tensor nb = old ? add_broadcast(*old, *b) : std::move(*b);
          f.inputs.resize(std::max<size_t>(f.inputs.size(), 3));
          f.inputs[2] = detail::add_constant(g, f.name + "_bias", std::move(nb));
        } else {
          const Value& ov = g.value(other);
          const Value& cv = g.value(cur);
          if (f.has_attr(kResidualInput) || !ov.fully_known() || !cv.fully_known() || ov.shape != cv.shape ||
              ov.dtype != cv.dtype)
            break;
          f.inputs.resize(4);
          f.inputs[3] = other;
          f.attrs[kResidualInput].value = int64_t{3};
        }
      } else {
        std::map<std::string, Attribute> act;
        if (!activation_attrs(g, cn, act, true)) break;
        for (auto& [key, a] : act) f.attrs[key] = a;
      }
      if (last >= 0) absorbed.push_back(last);
      last = c;
    }
    if (last < 0) continue;
    f.outputs[0] = g.nodes[last].outputs[0];
    g.nodes[last] = std::move(f);
    dead[k] = true;
    for (int a : absorbed) dead[a] = true;
  }
  // Element-wise binary node or unfolded BatchNormalization -> activation: the vector unit applies the
  // activation to the tile it just computed (one pass over the tensor instead of two), e.g. a residual
  // Add -> Relu that no matrix node absorbed, or DenseNet's BN -> ReLU before each conv.
  static const std::set<std::string> binary = {"Add", "Sub", "Mul", "Div", "Max", "Min"};
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    Node& e = g.nodes[k];
    if (dead[k] || !e.domain.empty() || e.has_attr(kActivation)) continue;
    if (!(binary.count(e.op_type) && e.inputs.size() == 2) && !batchnorm_affine(g, e)) continue;
    const std::string& cur = e.outputs[0];
    if (!is_float(g.value(cur).dtype) || g.value(cur).materialized) continue;
    const int c = index.sole_consumer(cur);
    if (c < 0 || dead[c]) continue;
    std::map<std::string, Attribute> act;
    if (!activation_attrs(g, g.nodes[c], act, false)) continue;
    Node f = e;
    for (auto& [key, a] : act) f.attrs[key] = a;
    f.outputs[0] = g.nodes[c].outputs[0];
    g.nodes[c] = std::move(f);
    dead[k] = true;
  }
  detail::erase_nodes(g, dead);
  detail::drop_unreferenced_values(g);
}

}  // namespace npusim::compiler::passes
