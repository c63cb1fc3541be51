// A nearest upsampling read by the Add after it as its operand (upsample_add.h).
#include "compiler/backend/fusion/upsample_add.h"

#include <algorithm>
#include <vector>

#include "compiler/backend/memory/movement.h"
#include "compiler/passes/lowered.h"
#include "compiler/quant/precision.h"

namespace npusim::compiler::backend {

int64_t upsample_add_candidate(const Graph& g, size_t i) {
  const Node& n = g.nodes[i];
  if ((n.op_type != "Resize" && n.op_type != "Upsample") || !n.domain.empty() || n.outputs.empty() ||
      n.outputs[0].empty() || n.attr_string(kPlacement, "") != "vector")
    return -1;
  const std::string& u = n.outputs[0];
  if (std::find(g.outputs.begin(), g.outputs.end(), u) != g.outputs.end()) return -1;
  const std::vector<int> readers = g.consumers(u);
  if (readers.size() != 1 || readers[0] <= static_cast<int>(i)) return -1;
  const Node& add = g.nodes[static_cast<size_t>(readers[0])];
  if (add.op_type != "Add" || !add.domain.empty() || add.num_given_inputs() != 2 || add.outputs.size() != 1 ||
      add.inputs[0] == add.inputs[1] || add.attr_string(kPlacement, "") != "vector")
    return -1;
  const Value& x = g.value(add.inputs[0] == u ? add.inputs[1] : add.inputs[0]);
  const Shape& us = g.value(u).shape;
  if (x.is_constant() || x.shape != us || g.value(add.outputs[0]).shape != us) return -1;
  return readers[0];
}

bool upsample_add_take(Context& c, const Node& resize, const DramTensor& z, const DramTensor& u, int64_t sh,
                       int64_t sw) {
  UpsampledOperand& s = c.fusion.upsampled;
  // Another Resize's Add still ahead: one at a time.
  if (s.add > static_cast<int64_t>(c.layer) && s.resize != static_cast<int64_t>(c.layer)) return false;
  s = UpsampledOperand{};
  if (!c.options.keep_on_chip || c.g.nodes[c.layer].name != resize.name) return false;
  const int64_t k = upsample_add_candidate(c.g, c.layer);
  if (k < 0) return false;
  const Node& add = c.g.nodes[static_cast<size_t>(k)];
  // A mapping file that tiles the Resize or places either elsewhere keeps them apart; the Add's own tile
  // (which --mapping-out writes when a smaller one simulated faster) is the Add's to use.
  for (const Node* n : {&resize, &add}) {
    const LayerMapping* m = c.options.mapping ? c.options.mapping->find(n->name) : nullptr;
    if (m && ((n == &resize && m->has_vector_tiling()) ||
              (m->placement && *m->placement != Placement::kNpuVector)))
      return false;
  }
  if (c.g.value(resize.inputs[0]).is_constant() || c.folding.views.count(resize.inputs[0]) ||
      c.views.views.count(resize.inputs[0]))
    return false;        // z read as it lies in DRAM: a runtime value of its own
  if (c.options.plan) {  // # int8: the Resize copies codes, u's the same as z's
    const auto& values = c.options.plan->values;
    const auto qz = values.find(resize.inputs[0]), qu = values.find(resize.outputs[0]);
    if (qz == values.end() || qu == values.end() || qz->second.scale != qu->second.scale ||
        qz->second.zero_point != qu->second.zero_point || qz->second.dtype != qu->second.dtype)
      return false;
  }
  if (c.folding.folded(add) || c.views.folds(add) || !is_float(c.g.value(add.outputs[0]).dtype) ||
      add.has_attr(kActivation))
    return false;
  const std::string& x = add.inputs[0] == resize.outputs[0] ? add.inputs[1] : add.inputs[0];
  if (!c.tensors.count(x) || !c.tensors.count(add.outputs[0])) return false;
  const DramTensor& X = c.tensor(x);
  const DramTensor& Y = c.tensor(add.outputs[0]);
  for (const DramTensor* t : {&u, &X, &Y})
    if (t->strided() || t->phys != u.phys || t->layout != u.layout || t->dtype != u.dtype) return false;
  if (z.strided() || z.dtype != u.dtype || z.phys.size() != 4 || u.phys.size() != 4) return false;
  // One tile: sh output rows of one input pixel's sw pixels; its row of z values in the weight scratchpad.
  // (Probing the slots leaves the layer's recorded slot size as it was: the Resize streams no tiles.)
  const int64_t row = sw * u.phys[3], slot_elems = c.slot_elems;
  const bool fits = row <= kMaxDim && sh <= kMaxDim &&
                    sh * row <= make_slots(c, isa::Buffer::kInput).elems / 2 &&
                    row <= make_slots(c, isa::Buffer::kWeight).elems / 2;
  c.slot_elems = slot_elems;
  if (!fits) return false;
  s.add = k;
  s.resize = c.layer;
  s.z = resize.inputs[0];
  s.sh = sh;
  s.sw = sw;
  return true;
}

const Node& upsample_add_reader(const Context& c) {
  return c.g.nodes[static_cast<size_t>(c.fusion.upsampled.add)];
}

const UpsampledOperand* upsampled_operand(const Context& c, const Node& add) {
  const UpsampledOperand& s = c.fusion.upsampled;
  if (s.add < 0 || s.add != static_cast<int64_t>(c.layer) ||
      c.g.nodes[static_cast<size_t>(s.add)].name != add.name)
    return nullptr;
  return &s;
}

}  // namespace npusim::compiler::backend
