// Data movement moved after the computation it fed (two passes, passes.h): the computation then reads
// the tensor in the order it was written, in long contiguous rows, and the Transposes and Reshapes after it
// are left for their readers to take as strided views (backend/memory/strided_views.h).
//
// torch's nn.MultiheadAttention with batch_first (ViT, BERT at batch B > 1) transposes [B, S, D] to
// [S, B, D] before the QKV projection, cuts Q, K, V out of it, splits the heads (Reshape [S, B*H, dh],
// Transpose [B*H, S, dh]) and then scales Q by 1/sqrt(dh). Each Transpose was a copy, the scale read Q in
// rows of dh elements. Moved:
// - transposes_after_matmuls: the projection multiplies [B, S, D] rows as they lie (a MatMul against
//   constant weights treats each row alone, so a permutation of the rows commutes with it), and the
//   Transpose after it becomes a view its Slices read;
// - scalar_ops_first: the scale reads the Slice's rows of D elements, and the Reshape and Transpose after
//   it become views the attention's MatMul reads in place.
// An element-wise op against one constant value computes each element alone, and a MatMul each row alone,
// so the outputs are the same bit for bit (the same operations in the same order per element), and an int8
// plan calibrates each moved node's output over the same elements (the same QParams).
#include <algorithm>
#include <set>

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

// a -> P -> t -> D -> y, where P (node pi) moves data and D (node di) reads t as input k, becomes
// a -> D -> a' -> P -> y: D computes on P's input (`moved_shape`, its output's dtype), P moves D's result.
// Each node keeps its name, so reports and mapping files name the layers as before.
void run_before(Graph& g, size_t pi, size_t di, size_t k, const Shape& moved_shape) {
  const Node &p = g.nodes[pi], &d = g.nodes[di];
  const std::string y = d.outputs[0];
  const std::string moved = detail::add_value(g, y + "/before_" + p.name, g.value(y).dtype, moved_shape);
  Node nd = d, np = p;
  nd.inputs[k] = p.inputs[0];
  nd.outputs = {moved};
  np.inputs[0] = moved;
  np.outputs = {y};
  g.nodes[pi] = std::move(nd);
  g.nodes[di] = std::move(np);
}

}  // namespace

namespace {

// Boundaries between the dims of `s` (the products of its inner dims), extents of 1 aside.
std::set<int64_t> boundaries(const Shape& s) {
  std::set<int64_t> b;
  int64_t p = 1;
  for (size_t i = s.size(); i-- > 0;) b.insert(p *= s[i]);
  return b;
}

// Whether Reshape-like node r merges part of one dim with another: neither splits nor merges whole dims
// (torchvision's view(S, B * H, dh) of [S, B, D]). Its reader cannot take a strided input of it as a view
// with one stride a dim; a scalar op moved in front of it reads that input's rows instead.
bool crosses_dims(const Graph& g, const Node& r) {
  if (r.op_type == "Transpose") return false;
  const std::set<int64_t> in = boundaries(g.value(r.inputs[0]).shape),
                          out = boundaries(g.value(r.outputs[0]).shape);
  return !std::includes(out.begin(), out.end(), in.begin(), in.end()) &&
         !std::includes(in.begin(), in.end(), out.begin(), out.end());
}

}  // namespace

void scalar_ops_first(Graph& g) {
  // Moved only over a chain with a Reshape that crosses dims: elsewhere the op reads the chain's view as
  // it is (a head split at batch 1), and moving it would only give the attention a strided Q to load
  // (bert_small int8 on edge: 2 507 623 -> 2 510 011 cycles when every such op moved).
  std::set<std::string> movable;
  {
    const detail::UseIndex uses(g);
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      const Node& d = g.nodes[i];
      const int k = scalar_op_operand(g, d);
      if (k < 0) continue;
      std::string t = d.inputs[static_cast<size_t>(k)];
      for (int reader = static_cast<int>(i);;) {
        const int pi = uses.producer(t);
        if (pi < 0 || uses.sole_consumer(t) != reader || !moves_data_only(g.nodes[static_cast<size_t>(pi)]))
          break;
        if (crosses_dims(g, g.nodes[static_cast<size_t>(pi)])) movable.insert(d.name);
        reader = pi;
        t = g.nodes[static_cast<size_t>(pi)].inputs[0];
      }
    }
  }
  if (movable.empty()) return;
  for (bool changed = true; changed;) {
    changed = false;
    const detail::UseIndex uses(g);
    for (size_t i = 0; i < g.nodes.size() && !changed; ++i) {
      const Node& d = g.nodes[i];
      const int k = scalar_op_operand(g, d);
      if (k < 0 || !movable.count(d.name)) continue;
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
      run_before(g, static_cast<size_t>(pi), i, static_cast<size_t>(k), a.shape);
      changed = true;
    }
  }
  g.topological_sort();
  detail::drop_unreferenced_values(g);
}

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
      // A Transpose that moves only dims of extent 1 is free already (batch 1): nothing to gain.
      bool moves_rows = false;
      for (size_t a = 0, last = 0; !perm.empty() && a < perm.size(); ++a) {
        const size_t d = static_cast<size_t>(perm[a]);
        if (x.shape.size() != perm.size() || x.shape[d] == 1) continue;
        moves_rows |= d < last;
        last = d;
      }
      if (perm.empty() || !moves_rows || w.shape.size() != 2 || x.is_constant() || !x.fully_known() ||
          !y.fully_known() || x.materialized || g.value(t).materialized || y.materialized ||
          !x.layout.empty() || !y.layout.empty() || y.shape.size() != x.shape.size())
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
      Shape ys = x.shape;
      ys.back() = n_out;
      run_before(g, static_cast<size_t>(ti), i, 0, ys);
      changed = true;
    }
  }
  g.topological_sort();
  detail::drop_unreferenced_values(g);
}

}  // namespace npusim::compiler::passes
