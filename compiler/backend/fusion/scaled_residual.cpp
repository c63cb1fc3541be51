// A squeeze-and-excitation block with a residual in one tile loop (scaled_residual.h).
#include "compiler/backend/fusion/scaled_residual.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "compiler/backend/estimate/roofline.h"
#include "compiler/passes/lowered.h"

namespace npusim::compiler::backend {

int64_t scaled_residual_candidate(const Graph& g, size_t i) {
  const Node& n = g.nodes[i];
  if (n.op_type != "Mul" || n.num_given_inputs() != 2 || n.outputs.size() != 1 || n.has_attr(kActivation) ||
      n.attr_string(kPlacement, "") != "vector")
    return -1;
  const std::string& m = n.outputs[0];
  if (std::find(g.outputs.begin(), g.outputs.end(), m) != g.outputs.end()) return -1;
  const Value& mv = g.value(m);
  // x: the operand of the product's own shape (the other one broadcasts).
  std::string x;
  int full = 0;
  for (const std::string& in : n.inputs) {
    const Value& v = g.value(in);
    if (v.is_constant()) return -1;
    if (v.shape == mv.shape) x = in, ++full;
  }
  if (full != 1) return -1;
  const std::vector<int> readers = g.consumers(m);
  if (readers.size() != 1 || readers[0] <= static_cast<int>(i)) return -1;
  const Node& add = g.nodes[static_cast<size_t>(readers[0])];
  if (add.op_type != "Add" || add.num_given_inputs() != 2 || add.has_attr(kActivation) ||
      add.outputs.size() != 1 || add.attr_string(kPlacement, "") != "vector")
    return -1;
  const bool x_then_m = add.inputs[0] == x && add.inputs[1] == m;
  const bool m_then_x = add.inputs[0] == m && add.inputs[1] == x;
  if (!x_then_m && !m_then_x) return -1;
  if (g.value(add.outputs[0]).shape != mv.shape) return -1;
  return readers[0];
}

void plan_scaled_residual(Context& c, size_t i) {
  if (c.fusion.scaled_residual.taken) return;  // an Add taken by an earlier Mul, its own layer still ahead
  c.fusion.scaled_residual = ScaledResidual{};
  if (!c.options.keep_on_chip) return;
  const int64_t k = scaled_residual_candidate(c.g, i);
  if (k < 0) return;
  const Node& mul = c.g.nodes[i];
  const Node& add = c.g.nodes[static_cast<size_t>(k)];
  if (!c.tensors.count(mul.outputs[0]) || !c.tensors.count(add.outputs[0]) || c.folding.folded(add) ||
      c.views.folds(add))
    return;
  if (const LayerMapping* m = c.options.mapping ? c.options.mapping->find(add.name) : nullptr;
      m && (m->has_vector_tiling() || (m->placement && *m->placement != Placement::kNpuVector)))
    return;
  const DramTensor& y = c.tensor(mul.outputs[0]);
  const DramTensor& z = c.tensor(add.outputs[0]);
  // z may be a view with contiguous channels (a Concat's slice): the tile loop's STOREs take its pitch.
  if (y.strided() || (z.strided() && z.view_strides.back() != 1) || y.phys != z.phys || y.dtype != z.dtype)
    return;
  ScaledResidual r;
  r.add = k;
  r.mul = static_cast<uint32_t>(i);
  r.bytes = static_cast<int64_t>(y.bytes);
  c.fusion.scaled_residual = r;
}

const DramTensor* scaled_residual_output(const Context& c, const Node& mul) {
  const ScaledResidual& r = c.fusion.scaled_residual;
  if (r.add < 0 || r.off || r.mul != c.layer || c.g.nodes[r.mul].name != mul.name) return nullptr;
  return &c.tensor(c.g.nodes[static_cast<size_t>(r.add)].outputs[0]);
}

void scaled_residual_choose(Context& c, const Node& mul, const std::function<int64_t()>& time_mul) {
  ScaledResidual& r = c.fusion.scaled_residual;
  if (!scaled_residual_output(c, mul)) return;
  const int64_t fused = time_mul();
  const bool took = r.done;
  r.off = true;
  const int64_t apart = time_mul();
  const Node& add = c.g.nodes[static_cast<size_t>(r.add)];
  const isa::DType precision = c.options.plan ? isa::DType::kInt8 : c.options.precision;
  const int64_t add_bound = roofline(c.g, add, 0, precision, c.config).bound_cycles();
  r.off = !(took && fused >= 0 && apart >= 0 && fused <= apart + add_bound);
  r.done = false;
}

const Node& scaled_residual_add(const Context& c) {
  return c.g.nodes[static_cast<size_t>(c.fusion.scaled_residual.add)];
}

void scaled_residual_done(Context& c) { c.fusion.scaled_residual.done = true; }

void finish_scaled_residual(Context& c, size_t i, const LayerPlan& plan) {
  ScaledResidual& r = c.fusion.scaled_residual;
  if (r.add < 0 || r.mul != i) return;
  r.taken = r.done && plan.placement == Placement::kNpuVector;
  if (!r.taken) {
    r = ScaledResidual{};
    return;
  }
  c.fusion.unwritten.insert(c.g.nodes[i].outputs[0]);
}

bool scaled_residual_member(Context& c, size_t i, LayerPlan& plan) {
  const ScaledResidual r = c.fusion.scaled_residual;
  if (!r.taken || r.add != static_cast<int64_t>(i)) return false;
  c.fusion.scaled_residual = ScaledResidual{};
  const std::string& mul = c.g.nodes[r.mul].name;
  plan.mapping = fmt::format(
      "VEC add in the tile loop of the Mul '{}' (each tile of the product, in the accumulator, added to the "
      "tile of x it was made from, stored as this layer's output: the product never goes to DRAM)",
      mul);
  plan.fused_into = mul;
  plan.on_chip_input = c.g.nodes[r.mul].outputs[0];
  plan.on_chip_bytes_saved = 2 * r.bytes;
  plan.fusion_group = "scaled_residual:" + mul;
  return true;
}

}  // namespace npusim::compiler::backend
