// Sibling matrix layers as one GEMM (siblings.h).
#include "compiler/backend/fusion/siblings.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "compiler/backend/fusion/attention_fusion.h"
#include "compiler/backend/fusion/layer_fusion.h"
#include "compiler/backend/fusion/post_affine.h"
#include "compiler/backend/fusion/pre_affine.h"
#include "compiler/backend/fusion/pre_norm.h"
#include "compiler/backend/fusion/pre_pool.h"
#include "compiler/backend/fusion/pre_scale.h"
#include "compiler/backend/fusion/project_tail.h"
#include "compiler/backend/fusion/scaled_residual.h"
#include "compiler/backend/int8/int8.h"
#include "compiler/backend/result.h"
#include "compiler/backend/stages/plan_memory.h"
#include "compiler/passes/lowered.h"

namespace npusim::compiler::backend {

namespace {

// Whether Conv nodes a and b read their input alike and end alike (the input-side geometry, the bias's
// presence, the fused activation).
bool sibling_form_matches(const Graph& g, const Node& a, const Node& b) {
  const Value& wa = g.value(a.inputs[1]);
  const Value& wb = g.value(b.inputs[1]);
  if (wa.shape.size() != 4 || wb.shape.size() != 4 || wa.shape[1] != wb.shape[1] ||
      wa.shape[2] != wb.shape[2] || wa.shape[3] != wb.shape[3])
    return false;
  for (const char* k : {"strides", "pads", "dilations"})
    if (a.attr_ints(k, {}) != b.attr_ints(k, {})) return false;
  for (const char* k : {"auto_pad", kActivation})
    if (a.attr_string(k, "") != b.attr_string(k, "")) return false;
  for (const char* k : {kActMin, kActMax, kAlpha, kBeta})
    if (a.has_attr(k) != b.has_attr(k) || a.attr_float(k, 0) != b.attr_float(k, 0)) return false;
  return a.has_input(2) == b.has_input(2);
}

// Whether node k of g can be one of a sibling group: a dense Conv with constant weights (and bias), no
// residual, placed on the array, in no other fusion group by the graph's shape.
bool sibling_mergeable(const Graph& g, size_t k) {
  const Node& n = g.nodes[k];
  if (n.op_type != "Conv" || n.inputs.size() < 2 || n.outputs.size() != 1 || n.attr_int("group", 1) != 1 ||
      n.has_attr(kResidualInput) || placement_of(n) != Placement::kNpuMatrix)
    return false;
  if (g.value(n.inputs[0]).shape.size() != 4 || !g.value(n.inputs[1]).is_constant()) return false;
  if (n.has_input(2) && !g.value(n.inputs[2]).is_constant()) return false;
  if (n.attr_string(kActivation, "") == "Silu") return false;
  return !conv_pool_pair(g, k) && project_tail_of(g, k) < 0 && post_affine_candidate(g, k) < 0 &&
         scaled_residual_candidate(g, k) < 0 && attention_candidate(g, k) == 0;
}

}  // namespace

std::vector<size_t> sibling_candidates(const Graph& g, size_t i) {
  if (i >= g.nodes.size() || !sibling_mergeable(g, i)) return {};
  const Node& first = g.nodes[i];
  const std::string& x = first.inputs[0];
  if (g.value(x).is_constant()) return {};
  // The input's producer: a map applied in one of its readers' loads leaves no input in DRAM to share.
  for (size_t p = 0; p < i; ++p) {
    for (const std::string& o : g.nodes[p].outputs) {
      if (o != x) continue;
      if (pre_affine_reader(g, p) >= 0 || pre_norm_reader(g, p) >= 0 || pre_pool_reader(g, p) >= 0 ||
          !pre_scale_input(g, p).empty())
        return {};
    }
  }
  std::vector<size_t> later;
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    const Node& n = g.nodes[k];
    if (k == i || n.inputs.empty() || n.inputs[0] != x) continue;
    if (!sibling_mergeable(g, k) || !sibling_form_matches(g, first, n)) continue;
    if (k < i) return {};  // node i is not the first
    later.push_back(k);
  }
  return later;
}

int64_t merged_alignment(const MatrixJob& j) {
  int64_t a = 0;
  for (size_t k = 0; k < j.segments.size(); ++k) {
    const int64_t end = k + 1 < j.segments.size() ? j.segments[k + 1][0] : j.M;
    a = std::gcd(a, end - j.segments[k][0]);
  }
  return a;
}

int64_t merged_channels(const MatrixJob& j) {
  int64_t n = 0;
  for (const auto& sg : j.segments) n += sg[1] - sg[0];
  return n;
}

SegmentOutput segment_output(const DramTensor& y, int64_t begin) {
  SegmentOutput o;
  o.begin = begin;
  o.addr = y.addr;
  o.pitch = y.strided() ? y.view_strides[2] : y.shape[1];
  o.image = y.strided() ? y.view_strides[0] : y.shape[1] * y.shape[2] * y.shape[3];
  o.range = y.range();
  return o;
}

bool SiblingGroup::covers(size_t i) const {
  return std::find(others.begin(), others.end(), i) != others.end();
}

namespace {

// Cycles of the code from instruction `first` on (Context::time_layer), or 0 when the context cannot time.
int64_t sibling_cycles(Context& c, int64_t first) { return c.can_time() ? c.time_layer(first) : 0; }

// Cycles of the code `emit` emits from here (Context::time_layer), emitted and undone; -1 when it emits
// nothing (false) or the lowering throws.
template <typename Emit>
int64_t sibling_trial(Context& c, Emit emit) {
  const int64_t first = c.em.size();
  LayerPlan* const at = c.plan;
  const LayerPlan plan = *at;
  const Context::Trial mark = c.mark();
  int64_t cycles = -1;
  try {
    if (emit()) cycles = sibling_cycles(c, first);
  } catch (const MappingError&) {
    c.end_trial(mark);
    c.plan = at;
    throw;
  } catch (const std::exception&) {
    cycles = -1;
  }
  c.end_trial(mark);
  c.plan = at;  // (emit_siblings_apart's scratch plans, if it threw)
  *c.plan = plan;
  c.timed = {};
  return cycles;
}

// Emits the group merged; false when the job cannot be formed.
bool emit_siblings_merged(Context& c, const std::vector<const Node*>& nodes) {
  return c.options.plan ? lower_conv_siblings_int8(c, nodes) : lower_conv_siblings(c, nodes);
}

// Emits each node on its own, as its layer would (plans discarded; the code counted as the current layer's,
// Context::time_layer); false when one declines.
bool emit_siblings_apart(Context& c, const std::vector<const Node*>& nodes) {
  LayerPlan* const plan = c.plan;
  bool ok = true;
  for (size_t k = 0; k < nodes.size() && ok; ++k) {
    LayerPlan scratch;
    scratch.name = nodes[k]->name;
    scratch.op = nodes[k]->op_type;
    scratch.placement = Placement::kNpuMatrix;
    c.plan = &scratch;
    PlanScope scope(c, *nodes[k], Placement::kNpuMatrix);  // # int8: as the layer's own lowering
    ok = scope.int8_matrix() ? lower_matrix_int8(c, *nodes[k]) : lower_matrix(c, *nodes[k]);
    scope.finish();
  }
  c.plan = plan;
  return ok;
}

}  // namespace

SiblingGroup lower_siblings(Context& c, size_t i) {
  SiblingGroup none;
  const CompileOptions& o = c.options;
  if (!o.keep_on_chip || c.config.systolic_array.cols <= 0) return none;
  const std::vector<size_t> later = sibling_candidates(c.g, i);
  if (later.empty()) return none;
  // What the groups planned for node i (its output on chip, a map in its loads or stores, a line buffer).
  const FusionState& f = c.fusion;
  const auto layer = static_cast<int64_t>(i);
  if (f.conv_pool || (f.on_chip.pending && f.on_chip.producer == i) || f.pre_affine.reader == layer ||
      f.pre_norm.reader == layer || f.pre_pool.reader == layer || f.pre_scale.reader == layer ||
      (f.post_affine.bn >= 0 && f.post_affine.producer == i))
    return none;
  std::vector<const Node*> nodes = {&c.g.nodes[i]};
  std::vector<size_t> at = {i};
  // A mapping file's entry for node i decides (an entry without the key: separate, as --mapping-out writes a
  // layer lowered on its own); a layer it leaves out is decided by simulation.
  std::optional<bool> imposed;
  if (const LayerMapping* m = o.mapping ? o.mapping->find(c.g.nodes[i].name) : nullptr)
    imposed = m->merge_siblings.value_or(false);
  for (size_t k : later) {
    const Node& n = c.g.nodes[k];
    // A mapping file that places or tiles a later sibling lowers it as its own layer.
    if (const LayerMapping* m = o.mapping ? o.mapping->find(n.name) : nullptr;
        m && ((m->placement && *m->placement != Placement::kNpuMatrix) || m->has_tiling()))
      continue;
    nodes.push_back(&n);
    at.push_back(k);
  }
  if (nodes.size() < 2 || (imposed && !*imposed)) return none;
  if (!imposed) {
    // Merged against separate, each simulated from the same point (the layers before as context); -1: the
    // code could not be formed (a layer that does not fit lowers on its own, or goes to the host, there).
    const int64_t merged = sibling_trial(c, [&] { return emit_siblings_merged(c, nodes); });
    const int64_t separate =
        merged < 0 ? -1 : sibling_trial(c, [&] { return emit_siblings_apart(c, nodes); });
    if (merged < 0 || (separate >= 0 && merged >= separate)) return none;
  }
  const LayerPlan plan = *c.plan;
  const Context::Trial mark = c.mark();
  if (!emit_siblings_merged(c, nodes)) {  // (a mapping file's tiles that do not fit throw MappingError)
    c.end_trial(mark);
    *c.plan = plan;
    return none;
  }
  c.keep(mark);
  SiblingGroup s;
  s.first = i;
  for (size_t k = 1; k < nodes.size(); ++k) {
    s.others.push_back(at[k]);
    const Value& w = c.g.value(nodes[k]->inputs[1]);
    const Value& y = c.g.value(nodes[k]->outputs[0]);
    s.macs.push_back(num_elements(y.shape) * w.shape[1] * w.shape[2] * w.shape[3]);
  }
  c.plan->chosen.merge_siblings = true;
  return s;
}

std::string describe_sibling(const Context& c, const SiblingGroup& s, size_t i) {
  return fmt::format("merged into '{}': one GEMM with the layers reading '{}' (its channels' columns)",
                     c.g.nodes[s.first].name, c.g.nodes[i].inputs[0]);
}

}  // namespace npusim::compiler::backend
