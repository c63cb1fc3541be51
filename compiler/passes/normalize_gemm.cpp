// Gemm normalisation: the matrix unit computes A[M,K] x B[K,N] (+ bias), so transposes and scale
// factors are taken out of the node. For constant operands that costs nothing at run time (the
// constant is rewritten once here); a non-constant transposed operand gets an explicit Transpose, which
// then shows up in the report as the vector-unit work it really is.
#include "compiler/passes/pass_util.h"
#include "compiler/passes/passes.h"

namespace npusim::compiler::passes {
namespace {

using detail::add_constant;
using detail::add_value;
using detail::constant_of;
using detail::make_node;

Tensor transpose_2d(const Tensor& t) {
  const int64_t r = t.shape[0], c = t.shape[1];
  if (!t.has_values()) return Tensor::shape_only(t.dtype, {c, r});
  Tensor out(t.dtype, {c, r});
  for (int64_t i = 0; i < r; ++i)
    for (int64_t j = 0; j < c; ++j) {
      if (t.floating())
        out.f[j * r + i] = t.f[i * c + j];
      else
        out.i[j * r + i] = t.i[i * c + j];
    }
  return out;
}

Tensor scaled(Tensor t, float s) {
  for (auto& x : t.f) x *= s;
  return t;
}

// Inserts `op`(value[, operand]) before node k and returns the new value's name (node k shifts to k+1).
std::string insert_before(Graph& g, size_t k, const std::string& op, const std::string& value,
                          const Shape& shape, std::vector<std::string> extra,
                          std::map<std::string, Attribute> attrs) {
  const Value& v = g.value(value);
  std::string out = add_value(g, value + "_" + op, v.dtype, shape, v.shape_known);
  std::vector<std::string> inputs = {value};
  inputs.insert(inputs.end(), extra.begin(), extra.end());
  Node n = make_node(g, op, g.nodes[k].name + "_" + op, inputs, {out});
  n.attrs = std::move(attrs);
  g.nodes.insert(g.nodes.begin() + static_cast<long>(k), std::move(n));
  return out;
}

}  // namespace

void normalize_gemm(Graph& g) {
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    if (g.nodes[k].op_type != "Gemm" || !g.nodes[k].domain.empty()) continue;
    Node n = g.nodes[k];
    const float alpha = n.attr_float("alpha", 1.0f), beta = n.attr_float("beta", 1.0f);
    const bool trans_a = n.attr_int("transA", 0) != 0, trans_b = n.attr_int("transB", 0) != 0;
    size_t at = k;
    auto transposed_shape = [&](const std::string& name) {
      Shape s = g.value(name).shape;
      if (s.size() == 2) std::swap(s[0], s[1]);
      return s;
    };
    // A.
    if (trans_a) {
      if (const Tensor* a = constant_of(g, n.inputs[0]); a && a->rank() == 2) {
        n.inputs[0] = add_constant(g, n.inputs[0] + "_t", transpose_2d(*a));
      } else {
        Attribute perm;
        perm.value = std::vector<int64_t>{1, 0};
        n.inputs[0] = insert_before(g, at++, "Transpose", n.inputs[0], transposed_shape(n.inputs[0]), {},
                                    {{"perm", perm}});
      }
    }
    // B, with alpha folded into it when it is constant.
    bool alpha_done = alpha == 1.0f;
    if (const Tensor* b = constant_of(g, n.inputs[1]); b && b->rank() == 2 && b->floating()) {
      if (trans_b || !alpha_done) {
        Tensor nb = trans_b ? transpose_2d(*b) : *b;
        n.inputs[1] = add_constant(g, n.inputs[1] + "_n", scaled(std::move(nb), alpha));
        alpha_done = true;
      }
    } else if (trans_b) {
      Attribute perm;
      perm.value = std::vector<int64_t>{1, 0};
      n.inputs[1] = insert_before(g, at++, "Transpose", n.inputs[1], transposed_shape(n.inputs[1]), {},
                                  {{"perm", perm}});
    }
    if (!alpha_done) {
      std::string s = add_constant(g, n.name + "_alpha", Tensor::scalar_float(alpha));
      n.inputs[0] = insert_before(g, at++, "Mul", n.inputs[0], g.value(n.inputs[0]).shape, {s}, {});
    }
    // C scaled by beta.
    if (n.has_input(2) && beta != 1.0f) {
      if (beta == 0.0f) {
        n.inputs[2] = "";
      } else if (const Tensor* c = constant_of(g, n.inputs[2]); c && c->floating()) {
        n.inputs[2] = add_constant(g, n.inputs[2] + "_n", scaled(*c, beta));
      } else {
        std::string s = add_constant(g, n.name + "_beta", Tensor::scalar_float(beta));
        n.inputs[2] = insert_before(g, at++, "Mul", n.inputs[2], g.value(n.inputs[2]).shape, {s}, {});
      }
    }
    n.attrs.erase("alpha");
    n.attrs.erase("beta");
    n.attrs.erase("transA");
    n.attrs.erase("transB");
    while (n.inputs.size() > 2 && n.inputs.back().empty()) n.inputs.pop_back();
    g.nodes[at] = std::move(n);
    k = at;
  }
  detail::drop_unreferenced_values(g);
}

}  // namespace npusim::compiler::passes
