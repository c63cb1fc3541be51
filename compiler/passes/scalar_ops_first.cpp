// Element-wise ops against a scalar moved in front of the Transposes and Reshapes before them: the op
// then reads the tensor in the order it was written, in long contiguous rows, and the data movement after
// it is left for its reader to take as a strided view (backend/memory/strided_views.h).
//
// torch's nn.MultiheadAttention scales Q by 1/sqrt(dh) after splitting the heads: Slice -> Reshape
// [S, B*H, dh] -> Transpose [B*H, S, dh] -> Div. The Div read the head-split view in rows of dh elements
// (or, at batch > 1, a copy the Transpose made of it); moved up, it reads the Slice's rows of D elements
// and the Reshape and Transpose become views of its output that the attention's MatMul reads in place.
// An element-wise op against one constant value computes each element alone, so it commutes with any
// permutation of the elements: the outputs are the same bit for bit, and an int8 plan calibrates the
// moved op's output over the same elements (the same QParams).
#include <algorithm>

#include "compiler/passes/lowered.h"
#include "compiler/passes/pass_util.h"
#include "compiler/passes/passes.h"

namespace npusim::compiler::passes {

namespace {

bool moves_data_only(const Node& p) {
  if (!p.domain.empty() || p.outputs.size() != 1 || !p.has_input(0)) return false;
  if (p.op_type == "Transpose") return !p.has_attr(kLayoutChange);
  return p.op_type == "Reshape" || p.op_type == "Flatten" || p.op_type == "Squeeze" ||
         p.op_type == "Unsqueeze";
}

// The input index of the runtime operand of node d when d is an element-wise op against one constant value
// whose output has that operand's shape; -1 otherwise.
int scalar_op_operand(const Graph& g, const Node& d) {
  static const char* const kOps[] = {"Add", "Sub", "Mul", "Div"};
  if (!d.domain.empty() || !d.attrs.empty() || d.outputs.size() != 1 || d.num_given_inputs() != 2 ||
      !std::any_of(std::begin(kOps), std::end(kOps), [&](const char* o) { return d.op_type == o; }))
    return -1;
  for (int k = 0; k < 2; ++k) {
    const Value& c = g.value(d.inputs[static_cast<size_t>(1 - k)]);
    const Value& x = g.value(d.inputs[static_cast<size_t>(k)]);
    const Value& y = g.value(d.outputs[0]);
    if (!c.is_constant() || !c.fully_known() || num_elements(c.shape) != 1 || c.shape.size() > x.shape.size())
      continue;
    if (x.is_constant() || !x.fully_known() || !y.fully_known() || x.shape != y.shape || x.materialized ||
        y.materialized)
      continue;
    return k;
  }
  return -1;
}

}  // namespace

void scalar_ops_first(Graph& g) {
  for (bool changed = true; changed;) {
    changed = false;
    const detail::UseIndex uses(g);
    for (size_t i = 0; i < g.nodes.size() && !changed; ++i) {
      const Node& d = g.nodes[i];
      const int k = scalar_op_operand(g, d);
      if (k < 0) continue;
      const std::string t = d.inputs[static_cast<size_t>(k)];
      const int pi = uses.producer(t);
      if (pi < 0 || uses.sole_consumer(t) != static_cast<int>(i) || detail::is_graph_output(g, t)) continue;
      const Node& p = g.nodes[static_cast<size_t>(pi)];
      if (!moves_data_only(p)) continue;
      const Value& a = g.value(p.inputs[0]);
      const Value& c = g.value(d.inputs[static_cast<size_t>(1 - k)]);
      if (a.is_constant() || !a.fully_known() || a.materialized || c.shape.size() > a.shape.size() ||
          !a.layout.empty() || !g.value(t).layout.empty() || !g.value(d.outputs[0]).layout.empty())
        continue;
      // a -> P -> t -> D -> y  becomes  a -> D -> a' -> P -> y (each node keeps its name).
      const std::string y = d.outputs[0];
      const std::string moved = detail::add_value(g, y + "/before_" + p.name, g.value(y).dtype, a.shape);
      Node nd = d, np = p;
      nd.inputs[static_cast<size_t>(k)] = p.inputs[0];
      nd.outputs = {moved};
      np.inputs[0] = moved;
      np.outputs = {y};
      g.nodes[static_cast<size_t>(pi)] = std::move(nd);
      g.nodes[i] = std::move(np);
      changed = true;
    }
  }
  g.topological_sort();
  detail::drop_unreferenced_values(g);
}

}  // namespace npusim::compiler::passes

namespace npusim::compiler::passes {

namespace {

// perm of Transpose node t when it keeps the last axis in place (a permutation of rows), else empty.
std::vector<int64_t> row_permutation(const Graph& g, const Node& t) {
  if (!t.domain.empty() || t.op_type != "Transpose" || t.has_attr(kLayoutChange) || !t.has_input(0))
    return {};
  const size_t r = g.value(t.inputs[0]).shape.size();
  std::vector<int64_t> perm = t.attr_ints("perm", {});
  if (perm.empty())
    for (size_t i = 0; i < r; ++i) perm.push_back(static_cast<int64_t>(r - 1 - i));
  if (r < 2 || perm.size() != r || perm.back() != static_cast<int64_t>(r - 1)) return {};
  return perm;
}

bool view_chain(const Node& n) {
  return n.domain.empty() && (n.op_type == "Slice" || n.op_type == "Transpose" || n.op_type == "Reshape" ||
                              n.op_type == "Flatten" || n.op_type == "Squeeze" || n.op_type == "Unsqueeze");
}

}  // namespace

void transposes_after_matmuls(Graph& g) {
  for (bool changed = true; changed;) {
    changed = false;
    const detail::UseIndex uses(g);
    for (size_t i = 0; i < g.nodes.size() && !changed; ++i) {
      const Node& m = g.nodes[i];
      if (!m.domain.empty() || (m.op_type != "MatMul" && m.op_type != "Gemm") || m.outputs.size() != 1 ||
          m.has_attr(kResidualInput) || !m.has_input(1) || !g.value(m.inputs[1]).is_constant())
        continue;
      const Value& w = g.value(m.inputs[1]);
      const std::string t = m.inputs[0];
      const int ti = uses.producer(t);
      if (ti < 0 || uses.sole_consumer(t) != static_cast<int>(i) || detail::is_graph_output(g, t)) continue;
      const Node& tr = g.nodes[static_cast<size_t>(ti)];
      const std::vector<int64_t> perm = row_permutation(g, tr);
      const Value& x = g.value(tr.inputs[0]);
      const Value& y = g.value(m.outputs[0]);
      if (perm.empty() || w.shape.size() != 2 || x.is_constant() || !x.fully_known() || !y.fully_known() ||
          x.materialized || g.value(t).materialized || y.materialized || !x.layout.empty() ||
          !y.layout.empty() || y.shape.size() != x.shape.size())
        continue;
      if (m.has_input(2) && g.value(m.inputs[2]).shape.size() > 1) continue;  // a bias per output column only
      // Worth it when the rows it moves are no longer, or when the Transpose's readers then take it as a
      // view.
      const int64_t k = x.shape.back(), n_out = y.shape.back();
      bool views = true;
      for (const Node& r : g.nodes)
        for (const auto& in : r.inputs)
          if (in == m.outputs[0]) views &= view_chain(r);
      if (n_out > k && !views) continue;
      // x -> T -> t -> M -> y  becomes  x -> M -> y' -> T -> y (each node keeps its name).
      Shape ys = x.shape;
      ys.back() = n_out;
      const std::string moved = detail::add_value(g, m.outputs[0] + "/before_" + tr.name, y.dtype, ys);
      Node nm = m, nt = tr;
      nm.inputs[0] = tr.inputs[0];
      nm.outputs = {moved};
      nt.inputs[0] = moved;
      nt.outputs = {m.outputs[0]};
      g.nodes[static_cast<size_t>(ti)] = std::move(nm);
      g.nodes[i] = std::move(nt);
      changed = true;
    }
  }
  g.topological_sort();
  detail::drop_unreferenced_values(g);
}

}  // namespace npusim::compiler::passes
