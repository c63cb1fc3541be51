#include "compiler/backend/fusion/se_fusion.h"

#include <string>
#include <vector>

#include "compiler/backend/fusion/residency.h"
#include "compiler/passes/lowered.h"

namespace npusim::compiler::backend {

namespace {

// Layers an SE group may hold its input across (the pool, up to two convs with their activations, the
// Mul; pre-fusion graphs have a few more nodes).
constexpr size_t kMaxGroupLayers = 10;

}  // namespace

int se_mul(const Context& c, size_t i) {
  const Graph& g = c.g;
  const Node& pool = g.nodes[i];
  if (pool.op_type != "GlobalAveragePool" || pool.inputs.empty() || pool.outputs.size() != 1) return -1;
  const std::string& x = pool.inputs[0];
  if (g.value(x).is_constant() || !c.tensors.count(x)) return -1;
  for (const std::string& o : g.outputs) {
    if (o == x) return -1;
  }
  const std::vector<int> readers = g.consumers(x);
  if (readers.size() != 2 || readers[0] != static_cast<int>(i)) return -1;
  const size_t j = static_cast<size_t>(readers[1]);
  if (j <= i || j - i >= kMaxGroupLayers) return -1;
  const Node& mul = g.nodes[j];
  if (mul.op_type != "Mul" || mul.num_given_inputs() != 2 || mul.outputs.size() != 1) return -1;
  if (mul.inputs[0] == mul.inputs[1]) return -1;
  const DramTensor& t = c.tensor(x);
  const int64_t channels = t.shape.size() == 4 ? t.shape[0] * t.shape[1] : 0;
  const std::string& s = mul.inputs[0] == x ? mul.inputs[1] : mul.inputs[0];
  if (channels == 0 || num_elements(g.value(s).shape) != channels) return -1;
  if (!c.tensors.count(mul.outputs[0]) || c.tensor(mul.outputs[0]).shape != t.shape) return -1;
  for (size_t k = i + 1; k < j; ++k) {
    for (const auto* list : {&g.nodes[k].inputs, &g.nodes[k].outputs}) {
      for (const std::string& v : *list) {
        if (!v.empty() && !g.value(v).is_constant() && num_elements(g.value(v).shape) > channels) return -1;
      }
    }
  }
  return static_cast<int>(j);
}

bool se_holds_fit(const Context& c, int64_t reserved, int64_t x_bytes) {
  const int64_t cap = scratchpad_capacity(c.config, isa::Buffer::kInput);
  // A quarter of the scratchpad stays for the layers' own tiles, as residency keeps (residency.h).
  return 4 * (reserved + round64(x_bytes)) <= 3 * cap;
}

namespace {

void release(Context& c) {
  c.fusion.input_reserved -= c.fusion.input_held;
  c.fusion.input_held = 0;
  c.fusion.held = {};
}

}  // namespace

void plan_se_hold(Context& c, size_t i) {
  if (!c.fusion.held.value.empty() || !c.options.keep_on_chip || c.g.nhwc_io || c.shared_capacity() > 0)
    return;
  if (c.folding.folded(c.g.nodes[i])) return;
  const int j = se_mul(c, i);
  if (j < 0) return;
  const std::string& x = c.g.nodes[i].inputs[0];
  const DramTensor& t = c.tensor(x);
  if (t.strided() || t.shape.size() != 4 || t.layout != kNhwc) return;
  const int64_t bytes = round64(num_elements(t.shape) * isa::dtype_bytes(t.dtype));
  const int64_t cap = scratchpad_capacity(c.config, isa::Buffer::kInput);
  if (!se_holds_fit(c, c.fusion.input_reserved, bytes)) return;
  c.fusion.held.value = x;
  c.fusion.held.dram = t.range();
  c.fusion.held.bytes = num_elements(t.shape) * isa::dtype_bytes(t.dtype);
  c.fusion.held.dtype = t.dtype;
  c.fusion.held.pool = i;
  c.fusion.held.mul = static_cast<size_t>(j);
  c.fusion.input_held = bytes;
  c.fusion.input_reserved += bytes;
  c.fusion.held.addr = static_cast<uint64_t>(cap - c.fusion.input_reserved);
  const DramTensor& y = c.tensor(c.g.nodes[static_cast<size_t>(j)].outputs[0]);
  c.fusion.held.keep_output = next_reads_on_chip(c, static_cast<size_t>(j)).empty() &&
                              isa::dtype_bytes(y.dtype) == isa::dtype_bytes(t.dtype) && y.layout == kNhwc;
  // A mapping file's tiling of the reader (what --mapping-out wrote) says how it read the product: a
  // GEMM tile (tile_m) in place, taken without costing; a convolution's tile from DRAM.
  const LayerMapping* reader = c.options.mapping && c.fusion.held.keep_output
                                   ? c.options.mapping->find(c.g.nodes[static_cast<size_t>(j) + 1].name)
                                   : nullptr;
  if (reader && reader->has_tiling()) {
    c.fusion.held.keep_output = reader->tile_m.has_value();
    c.fusion.held.keep_imposed = c.fusion.held.keep_output;
  }
}

void finish_se_hold(Context& c, size_t i, LayerPlan& plan) {
  if (c.fusion.held.value.empty()) return;
  if (i == c.fusion.held.pool && !c.fusion.held.loaded) {
    release(c);
    return;
  }
  if (i != c.fusion.held.mul) return;
  if (c.fusion.held.read) {
    const std::string group = "se:" + c.g.nodes[c.fusion.held.pool].name;
    for (size_t k = c.fusion.held.pool; k < i; ++k) c.result.layers[k].fusion_group = group;
    plan.fusion_group = group;
    plan.on_chip_input = c.fusion.held.value;
    plan.on_chip_bytes_saved = c.fusion.held.bytes;
    plan.on_chip_input_in_dram = true;
    c.result.layers[c.fusion.held.pool].sram_input_bytes += c.fusion.held.bytes;
  }
  if (c.fusion.on_chip.pending && c.fusion.on_chip.producer == i &&
      c.fusion.on_chip.addr == c.fusion.held.addr) {
    // The Mul left its product where X was: the bytes stay reserved for it (finish_on_chip releases
    // them after its reader).
    c.fusion.input_held = 0;
    c.fusion.held = {};
    return;
  }
  plan.sram_input_bytes += c.fusion.held.read ? c.fusion.held.bytes : 0;
  release(c);
}

bool se_pool_holds(Context& c, const Node& n, const DramTensor& x) {
  HeldValue& h = c.fusion.held;
  h.loaded = false;
  return h.value == n.inputs[0] && h.pool == c.layer && h.dram.begin == x.range().begin &&
         h.dram.end == x.range().end && h.dtype == x.dtype;
}

Slots se_pool_slots(Context& c, bool holds) {
  if (holds) c.fusion.input_reserved -= c.fusion.input_held;
  Slots s = make_slots(c, isa::Buffer::kInput);
  if (holds) c.fusion.input_reserved += c.fusion.input_held;
  return s;
}

uint64_t se_held_addr(const Context& c, uint64_t offset) { return c.fusion.held.addr + offset; }

bool se_pool_input_written(const Context& c) {
  const HeldValue& h = c.fusion.held;
  const OnChipValue& v = c.fusion.on_chip;
  return h.pool == c.layer && v.pending && v.value == h.value && v.addr == h.addr &&
         v.producer + 1 == c.layer;
}

void se_pool_loaded(Context& c, bool loaded) { c.fusion.held.loaded = loaded; }

void se_mul_begin(Context& c) {
  if (c.fusion.held.mul == c.layer) c.fusion.held.read = false;
}

int64_t se_mul_input(const Context& c, const Range& dram, isa::DType t) {
  const HeldValue& h = c.fusion.held;
  return h.loaded && h.mul == c.layer && h.dram.begin == dram.begin && h.dram.end == dram.end && h.dtype == t
             ? static_cast<int64_t>(h.addr)
             : -1;
}

void se_mul_read_held(Context& c) { c.fusion.held.read = true; }

bool se_mul_read(const Context& c) { return c.fusion.held.read; }

bool se_mul_may_keep_product(const Context& c) {
  return c.fusion.held.keep_output && c.fusion.held.mul == c.layer;
}

void se_mul_kept_product(Context& c, const std::string& value, const DramTensor& y, uint64_t addr) {
  c.fusion.on_chip = nhwc_on_chip(value, y, addr, c.layer);
  c.fusion.on_chip.imposed = c.fusion.held.keep_imposed;
}

}  // namespace npusim::compiler::backend
