// An SE residual done in the tile loop of the top-down Add that reads it (deferred_residual.h).
#include "compiler/backend/fusion/deferred_residual.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "compiler/backend/fusion/scaled_residual.h"
#include "compiler/backend/fusion/upsample_add.h"
#include "compiler/backend/vector/vector_tiling.h"
#include "compiler/passes/lowered.h"

namespace npusim::compiler::backend {

namespace {

// Whether a mapping file places or tiles node n (its layers then stay as the file says).
bool imposed(const Context& c, const Node& n) {
  const LayerMapping* m = c.options.mapping ? c.options.mapping->find(n.name) : nullptr;
  return m && (m->has_vector_tiling() || (m->placement && *m->placement != Placement::kNpuVector));
}

// The wait whose Mul, residual Add or reader (by `field`) is layer k, else end().
std::vector<DeferredResidual>::iterator find(Context& c, int64_t DeferredResidual::*field, int64_t k) {
  return std::find_if(c.fusion.deferred.begin(), c.fusion.deferred.end(),
                      [&](const DeferredResidual& d) { return d.*field == k; });
}

// The Mul and its residual Add of the wait `it`, lowered apart now (their code in the current layer's span).
void lower_apart(Context& c, std::vector<DeferredResidual>::iterator it) {
  const DeferredResidual d = *it;
  c.fusion.deferred.erase(it);
  for (const int64_t k : {d.mul, d.add})
    lower_vector_apart(c, c.g.nodes[static_cast<size_t>(k)], "lowered apart after its reader did not do it");
}

}  // namespace

int64_t deferred_residual_reader(const Graph& g, size_t i) {
  const int64_t r = scaled_residual_candidate(g, i);
  if (r < 0) return -1;
  const std::string& y = g.nodes[static_cast<size_t>(r)].outputs[0];
  if (std::find(g.outputs.begin(), g.outputs.end(), y) != g.outputs.end()) return -1;
  const std::vector<int> readers = g.consumers(y);
  if (readers.size() != 1 || readers[0] <= r) return -1;
  const Node& add = g.nodes[static_cast<size_t>(readers[0])];
  if (add.op_type != "Add" || !add.domain.empty() || add.num_given_inputs() != 2 ||
      add.inputs[0] == add.inputs[1])
    return -1;
  const std::string& u = add.inputs[0] == y ? add.inputs[1] : add.inputs[0];
  const int p = g.producer(u);
  if (p < 0 || upsample_add_candidate(g, static_cast<size_t>(p)) != readers[0]) return -1;
  return readers[0];
}

bool plan_deferred_residual(Context& c, size_t i) {
  if (!c.options.keep_on_chip || c.options.plan) return false;
  const int64_t j = deferred_residual_reader(c.g, i);
  if (j < 0) return false;
  const int64_t r = scaled_residual_candidate(c.g, i);
  const Node& mul = c.g.nodes[i];
  const Node& add = c.g.nodes[static_cast<size_t>(r)];
  const Node& reader = c.g.nodes[static_cast<size_t>(j)];
  // The top-down Add's own tile (--mapping-out writes it) is its to use; tiling the Mul or its Add keeps them
  // in the Mul's loop.
  for (const Node* n : {&mul, &add, &reader})
    if ((n != &reader && imposed(c, *n)) || c.folding.folded(*n) || c.views.folds(*n)) return false;
  if (const LayerMapping* lm = c.options.mapping ? c.options.mapping->find(reader.name) : nullptr;
      lm && lm->placement && *lm->placement != Placement::kNpuVector)
    return false;
  const std::string& m = mul.outputs[0];
  const std::string& x = add.inputs[0] == m ? add.inputs[1] : add.inputs[0];
  const std::string& s = mul.inputs[0] == x ? mul.inputs[1] : mul.inputs[0];
  // The SE group holds x for the Mul (se_fusion.h): it reads it there.
  if (c.fusion.held.value == x && c.fusion.held.mul == i) return false;
  for (const std::string* v : {&x, &s, &m, &add.outputs[0], &reader.outputs[0]})
    if (!c.tensors.count(*v) || c.folding.views.count(*v) || c.views.views.count(*v)) return false;
  const DramTensor& X = c.tensor(x);
  const DramTensor& S = c.tensor(s);
  const DramTensor& W = c.tensor(reader.outputs[0]);
  for (const DramTensor* t : {&c.tensor(m), &c.tensor(add.outputs[0]), &W})
    if (t->strided() || t->phys != X.phys || t->layout != X.layout || t->dtype != X.dtype) return false;
  // s: one value per channel, the innermost dim of a dense 4-D map.
  if (X.strided() || S.strided() || X.phys.size() != 4 || S.dtype != X.dtype ||
      num_elements(S.shape) != X.phys[3] || S.phys.size() != 4 || S.phys[3] != X.phys[3])
    return false;
  DeferredResidual d;
  d.mul = static_cast<int64_t>(i);
  d.add = r;
  d.reader = j;
  d.x = x;
  d.s = s;
  d.bytes = static_cast<int64_t>(X.bytes);
  c.fusion.deferred.push_back(d);
  return true;
}

bool deferred_residual_member(Context& c, size_t i, LayerPlan& plan) {
  const auto k = static_cast<int64_t>(i);
  auto it = find(c, &DeferredResidual::mul, k);
  if (it == c.fusion.deferred.end()) it = find(c, &DeferredResidual::add, k);
  if (it == c.fusion.deferred.end()) return false;
  const DeferredResidual& d = *it;
  const std::string& reader = c.g.nodes[static_cast<size_t>(d.reader)].name;
  plan.mapping = fmt::format(
      "{} in the tile loop of the Add '{}' (its input '{}' loaded there with the scale '{}' in place of the "
      "SE residual: the product and the residual never go to DRAM)",
      k == d.mul ? "VEC mul" : "VEC add", reader, d.x, d.s);
  plan.fused_into = reader;
  plan.on_chip_input = k == d.mul ? "" : c.g.nodes[static_cast<size_t>(d.mul)].outputs[0];
  plan.on_chip_bytes_saved = 2 * d.bytes;
  plan.fusion_group = "deferred_residual:" + reader;
  return true;
}

void begin_deferred_residual(Context& c, size_t i, Placement placement) {
  const auto it = find(c, &DeferredResidual::reader, static_cast<int64_t>(i));
  if (it == c.fusion.deferred.end()) return;
  if (placement == Placement::kNpuVector && c.fusion.upsampled.add == it->reader) return;
  lower_apart(c, it);
}

const DeferredResidual* deferred_residual_of(const Context& c, const Node& add) {
  for (const DeferredResidual& d : c.fusion.deferred)
    if (d.reader == static_cast<int64_t>(c.layer) &&
        c.g.nodes[static_cast<size_t>(d.reader)].name == add.name)
      return &d;
  return nullptr;
}

void deferred_residual_done(Context& c) {
  const auto it = find(c, &DeferredResidual::reader, static_cast<int64_t>(c.layer));
  if (it != c.fusion.deferred.end()) it->done = true;
}

void deferred_residual_declined(Context& c, size_t i) {
  const auto it = find(c, &DeferredResidual::reader, static_cast<int64_t>(i));
  if (it != c.fusion.deferred.end()) lower_apart(c, it);
}

void finish_deferred_residual(Context& c, size_t i, const LayerPlan& plan) {
  const auto it = find(c, &DeferredResidual::reader, static_cast<int64_t>(i));
  if (it == c.fusion.deferred.end()) return;
  const DeferredResidual& d = *it;
  if (!d.done || plan.placement != Placement::kNpuVector)
    throw std::logic_error(
        fmt::format("deferred_residual: '{}' did not do the SE residual it waited for", c.g.nodes[i].name));
  c.fusion.unwritten.insert(c.g.nodes[static_cast<size_t>(d.mul)].outputs[0]);
  c.fusion.unwritten.insert(c.g.nodes[static_cast<size_t>(d.add)].outputs[0]);
  c.fusion.deferred.erase(it);
}

}  // namespace npusim::compiler::backend
