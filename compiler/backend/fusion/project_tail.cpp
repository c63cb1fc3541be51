// A block's layer scale and residual in its project GEMM's epilogue (project_tail.h).
#include "compiler/backend/fusion/project_tail.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "compiler/backend/int8/int8.h"
#include "compiler/backend/stages/plan_memory.h"
#include "compiler/backend/vector/vector_tiling.h"
#include "compiler/passes/lowered.h"

namespace npusim::compiler::backend {

namespace {

// The only reader of value v, or -1.
int sole_reader(const Graph& g, const std::string& v) {
  for (const std::string& o : g.outputs) {
    if (o == v) return -1;
  }
  const std::vector<int> r = g.consumers(v);
  return r.size() == 1 ? r[0] : -1;
}

// The layer scale's values per channel of the MatMul's output (its last dim), or none: `k` the constant of
// the Mul reading the Transpose's output `t` (perm `perm`: output dim d is the MatMul's dim perm[d]).
std::optional<std::vector<float>> channel_scale(const Value& t, const std::vector<int64_t>& perm,
                                                const Value& k) {
  const Shape& ts = t.shape;
  const Shape& ks = k.shape;
  if (ks.size() > ts.size() || !k.constant->has_values() || !k.constant->floating()) return std::nullopt;
  const size_t off = ts.size() - ks.size();
  int64_t channel_dim = -1;
  for (size_t d = 0; d < ks.size(); ++d) {
    if (ks[d] == 1) continue;
    if (ks[d] != ts[off + d] || channel_dim >= 0) return std::nullopt;
    channel_dim = static_cast<int64_t>(off + d);
  }
  const int64_t last = static_cast<int64_t>(ts.size()) - 1;
  if (channel_dim >= 0 && perm[static_cast<size_t>(channel_dim)] != last) return std::nullopt;
  const int64_t channels = ts[static_cast<size_t>(std::find(perm.begin(), perm.end(), last) - perm.begin())];
  const std::vector<float> v = k.constant->to_float_vector();
  if (channel_dim < 0) return std::vector<float>(static_cast<size_t>(channels), v.at(0));
  return v;
}

// Whether tensor `u` holds its elements where the MatMul's output `y` (ONNX order) holds the element the
// Transpose (perm) maps to them: every physical dim of u is the MatMul's dim of the same position.
bool same_bytes(const DramTensor& y, const DramTensor& u, const std::vector<int64_t>& perm) {
  if (y.strided() || u.strided() || !y.layout.empty() || u.phys != y.phys || u.dtype != y.dtype) return false;
  for (size_t k = 0; k < u.phys.size(); ++k) {
    const int logical = u.layout.empty() ? static_cast<int>(k) : u.layout[k];
    if (u.phys[k] != 1 && perm[static_cast<size_t>(logical)] != static_cast<int64_t>(k)) return false;
  }
  return true;
}

}  // namespace

int64_t project_tail_of(const Graph& g, size_t i) {
  if (i + 3 >= g.nodes.size()) return -1;
  const Node& m = g.nodes[i];
  const Node& t = g.nodes[i + 1];
  const Node& mul = g.nodes[i + 2];
  const Node& add = g.nodes[i + 3];
  if (!m.domain.empty() || m.op_type != "MatMul" || m.outputs.size() != 1 || m.inputs.size() < 2 ||
      m.has_attr(kActivation) || m.has_attr(kResidualInput) || !g.value(m.inputs[1]).is_constant() ||
      !is_float(g.value(m.outputs[0]).dtype))
    return -1;
  if (!t.domain.empty() || t.op_type != "Transpose" || placement_of(t) != Placement::kFree ||
      sole_reader(g, m.outputs[0]) != static_cast<int>(i + 1) || t.inputs[0] != m.outputs[0])
    return -1;
  if (!mul.domain.empty() || mul.op_type != "Mul" || mul.inputs.size() != 2 || mul.has_attr(kActivation) ||
      sole_reader(g, t.outputs[0]) != static_cast<int>(i + 2) || placement_of(mul) != Placement::kNpuVector)
    return -1;
  const std::string& k = mul.inputs[0] == t.outputs[0] ? mul.inputs[1] : mul.inputs[0];
  if (k == t.outputs[0] || !g.value(k).is_constant()) return -1;
  if (!add.domain.empty() || add.op_type != "Add" || add.inputs.size() != 2 || add.has_attr(kActivation) ||
      sole_reader(g, mul.outputs[0]) != static_cast<int>(i + 3) || placement_of(add) != Placement::kNpuVector)
    return -1;
  const std::string& r = add.inputs[0] == mul.outputs[0] ? add.inputs[1] : add.inputs[0];
  const Value& rv = g.value(r);
  const Value& av = g.value(add.outputs[0]);
  if (r == mul.outputs[0] || rv.is_constant() || !rv.fully_known() || !av.fully_known() ||
      rv.shape != av.shape || g.value(mul.outputs[0]).shape != av.shape || !is_float(rv.dtype))
    return -1;
  return static_cast<int64_t>(i + 3);
}

void plan_project_tail(Context& c, size_t i) {
  ProjectTail& p = c.fusion.project_tail;
  p = {};
  if (!c.options.keep_on_chip || c.g.nhwc_io || project_tail_of(c.g, i) < 0) return;
  if (c.options.plan) {
    // int8 throughout, and the Mul and the Add in the float scheme their layers would run.
    const quant::PrecisionPlan& plan = *c.options.plan;
    for (size_t k : {i, i + 2, i + 3}) {
      if (plan.precision_of(c.g.nodes[k].name) != quant::Precision::kInt8) return;
    }
    if (quant::integer_mul(c.g, plan, c.g.nodes[i + 2])) return;
  }
  // A mapping file that places the Mul or the Add keeps them layers of their own.
  for (size_t k = i + 2; k <= i + 3; ++k) {
    const LayerMapping* imposed = c.options.mapping ? c.options.mapping->find(c.g.nodes[k].name) : nullptr;
    if (imposed && imposed->placement) return;
  }
  p.matmul = static_cast<int64_t>(i);
  p.mul = static_cast<int64_t>(i + 2);
  p.add = static_cast<int64_t>(i + 3);
}

std::optional<TailOperands> project_tail_operands(const Context& c, const Node& n) {
  const ProjectTail& p = c.fusion.project_tail;
  if (p.matmul < 0 || c.g.nodes[static_cast<size_t>(p.matmul)].name != n.name) return std::nullopt;
  const Node& t = c.g.nodes[static_cast<size_t>(p.matmul) + 1];
  const Node& mul = c.g.nodes[static_cast<size_t>(p.mul)];
  const Node& add = c.g.nodes[static_cast<size_t>(p.add)];
  const Value& tv = c.g.value(t.outputs[0]);
  std::vector<int64_t> perm = t.attr_ints("perm", {});
  if (perm.empty()) {
    for (size_t d = tv.shape.size(); d-- > 0;) perm.push_back(static_cast<int64_t>(d));
  }
  if (perm.size() != tv.shape.size()) return std::nullopt;
  const std::string& k = mul.inputs[0] == t.outputs[0] ? mul.inputs[1] : mul.inputs[0];
  std::optional<std::vector<float>> scale = channel_scale(tv, perm, c.g.value(k));
  if (!scale) return std::nullopt;
  const std::string& r = add.inputs[0] == mul.outputs[0] ? add.inputs[1] : add.inputs[0];
  const DramTensor& y = c.tensor(n.outputs[0]);
  const DramTensor& z = c.tensor(add.outputs[0]);
  const DramTensor& res = c.tensor(r);
  TailOperands o;
  if (c.options.plan) {
    const auto& v = c.options.plan->values;
    const auto qi = v.find(t.outputs[0]), qm = v.find(mul.outputs[0]), qr = v.find(r),
               qa = v.find(add.outputs[0]);
    if (qi == v.end() || qm == v.end() || qr == v.end() || qa == v.end()) return std::nullopt;
    o.q_in = &qi->second, o.q_mul = &qm->second, o.q_res = &qr->second, o.q_add = &qa->second;
    for (const quant::QParams* q : {o.q_in, o.q_mul, o.q_res, o.q_add}) {
      if (isa::dtype_bytes(q->dtype) != 1) return std::nullopt;
    }
    // Codes in DRAM: the residual's and the Add's as their QParams say (same_bytes compares them to y's).
    if (res.dtype != o.q_res->dtype || z.dtype != o.q_add->dtype || y.dtype != o.q_in->dtype)
      return std::nullopt;
    if (y.strided() || z.strided() || res.strided() || res.phys != y.phys || z.phys != y.phys)
      return std::nullopt;
    const DramTensor zt = [&] {
      DramTensor u = z;
      u.dtype = y.dtype;
      return u;
    }();
    const DramTensor rt = [&] {
      DramTensor u = res;
      u.dtype = y.dtype;
      return u;
    }();
    if (!same_bytes(y, zt, perm) || !same_bytes(y, rt, perm)) return std::nullopt;
    o.iadd = quant::integer_add(c.g, *c.options.plan, add);
    if (o.iadd) {
      const bool mul_first = add.inputs[0] == mul.outputs[0];
      o.mul_rescale = mul_first ? o.iadd->a : o.iadd->b;
      o.res_rescale = mul_first ? o.iadd->b : o.iadd->a;
      if (o.iadd->subtract) return std::nullopt;
    }
  } else if (!same_bytes(y, z, perm) || !same_bytes(y, res, perm) || c.codes_of(r) ||
             c.codes_of(add.outputs[0])) {
    return std::nullopt;
  }
  o.scale = std::move(*scale);
  o.residual = &res;
  o.out = &z;
  o.mul = mul.name;
  o.add = add.name;
  return o;
}

void take_project_tail(Context& c) { c.fusion.project_tail.fused = true; }

bool project_tail_pays(Context& c, const std::function<void()>& with, const std::function<void()>& without) {
  if (!c.can_time()) return true;  // no timer (a shape-only compile): fewer passes over the tensor
  const ProjectTail p = c.fusion.project_tail;
  bool ok = true;  // the Mul and the Add lowered on the vector unit (else the tail is taken)
  const auto timed = [&](const std::function<void()>& emit, bool apart) {
    const Context::Trial undo = c.mark();
    const FusionState state = c.fusion;
    const int64_t first = c.em.size();
    emit();
    size_t layers = 1;
    if (apart) {
      const Context::OtherLayer other(c, c.plan, c.layer);  // each layer's own plan and tag below
      for (int64_t k : {p.mul, p.add}) {
        const Node& n = c.g.nodes[static_cast<size_t>(k)];
        LayerPlan scratch;
        scratch.name = n.name;
        c.plan = &scratch, c.layer = static_cast<uint32_t>(k);
        PlanScope scope(c, n, Placement::kNpuVector);
        std::string why;
        ok = ok && lower_vector_tiled(c, n, &why);
        scope.finish();
        c.codes.clear();
      }
      layers = static_cast<size_t>(p.add - p.matmul + 1);  // time_code: one figure per layer index
    }
    const std::vector<int64_t> cycles = c.time_code(first);
    int64_t total = 0;
    for (size_t k = cycles.size() >= layers ? cycles.size() - layers : 0; k < cycles.size(); ++k)
      total += cycles[k];
    c.fusion = state;
    c.end_trial(undo);
    c.timed = {};
    return total;
  };
  const int64_t fused = timed(with, false);
  const int64_t apart = timed(without, true);
  return !ok || fused < apart;
}

bool project_tail_member(const Context& c, size_t i, LayerPlan& plan) {
  const ProjectTail& p = c.fusion.project_tail;
  if (!p.fused || (static_cast<int64_t>(i) != p.mul && static_cast<int64_t>(i) != p.add)) return false;
  const Node& m = c.g.nodes[static_cast<size_t>(p.matmul)];
  const bool is_mul = static_cast<int64_t>(i) == p.mul;
  plan.mapping = fmt::format("fused into '{}''s epilogue: {} on each output tile before its store", m.name,
                             is_mul ? "VEC mul by the per-channel scale" : "VEC add of the residual tile");
  plan.fused_into = m.name;
  plan.fusion_group = "project_tail:" + m.name;
  // Layer by layer the MatMul's output is written and the Mul reads it back; so is the Mul's for the Add.
  plan.on_chip_input = is_mul ? c.g.nodes[static_cast<size_t>(p.matmul) + 1].outputs[0]
                              : c.g.nodes[static_cast<size_t>(p.mul)].outputs[0];
  plan.on_chip_bytes_saved = 2 * static_cast<int64_t>(c.tensor(m.outputs[0]).span_bytes());
  return true;
}

void finish_project_tail(Context& c, size_t i) {
  ProjectTail& p = c.fusion.project_tail;
  if (p.matmul == static_cast<int64_t>(i) && !p.fused) p = {};
  if (p.add == static_cast<int64_t>(i)) p = {};
}

}  // namespace npusim::compiler::backend
