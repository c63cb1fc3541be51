// A squeeze-and-excitation pool in its depthwise conv's epilogue (see se_pool_fusion.h).
#include "compiler/backend/fusion/se_pool_fusion.h"

#include <fmt/format.h>

#include <algorithm>

#include "compiler/backend/fusion/se_fusion.h"
#include "compiler/backend/memory/movement.h"
#include "compiler/passes/lowered.h"
#include "compiler/quant/emulate.h"
#include "compiler/quant/precision.h"
#include "isa/ceil_div.h"
#include "isa/numerics.h"

namespace npusim::compiler::backend {

namespace {

// Nodes between a depthwise conv and its SE pool (the fused activation's nodes).
constexpr size_t kMaxPoolDistance = 4;

// The band height (rows of X) the global pool's own lowering takes for an X of H x W x C with `reserved`
// bytes of the input scratchpad held (vector/pooling.cpp, the NHWC global pool: its slots are half the
// free scratchpad, a band whole rows of every channel when a row fits), 0 when it does not take bands of
// every channel or its band results do not fit its weight-scratchpad slot.
int64_t pool_band_rows(const Context& c, int64_t reserved, int64_t H, int64_t W, int64_t C) {
  auto slot_elems = [&](int64_t cap) {
    const int64_t e = (cap / 2 / 64 * 64) / c.esize;
    return std::min(e, c.tile_limit > 0 ? c.tile_limit : INT64_MAX);
  };
  const int64_t elems = slot_elems(scratchpad_capacity(c.config, isa::Buffer::kInput) - reserved);
  const int64_t w_elems = slot_elems(scratchpad_capacity(c.config, isa::Buffer::kWeight));
  int64_t tc = std::min<int64_t>(C, kMaxDim);
  while (tc > 1 && W * tc > elems) tc = ceil_div(tc, 2);
  if (tc != C) return 0;
  int64_t r = 0;
  for (int64_t d = std::min<int64_t>(H, 255); d >= 1 && r == 0; --d) {
    if (H % d == 0 && d * W * C <= elems) r = d;
  }
  if (r == 0 || W > 255 || H / r > 255 || (H / r) * C > w_elems) return 0;
  return r;
}

// Whether the int8 global pool's own lowering takes its integer bands (vector/pooling.cpp, the NHWC global
// pool: int32 sums by a VEC dwconv of unit weights when a band fits the accumulator's work area, its fp32
// steps 4-byte elements) for an X of H x W x C with `reserved` bytes of the input scratchpad held.
bool pool_integer_bands(const Context& c, int64_t reserved, int64_t H, int64_t W, int64_t C) {
  constexpr int64_t es = 4, acc_base = 64;
  const int64_t tile = c.tile_limit > 0 ? c.tile_limit : INT64_MAX;
  const int64_t elems =
      std::min((scratchpad_capacity(c.config, isa::Buffer::kInput) - reserved) / 2 / 64 * 64 / es, tile);
  const int64_t w_elems =
      std::min(scratchpad_capacity(c.config, isa::Buffer::kWeight) / 2 / 64 * 64 / es, tile);
  const int64_t acc = scratchpad_capacity(c.config, isa::Buffer::kAccumulator) - c.fusion.acc_reserved;
  int64_t tc = std::min<int64_t>(C, kMaxDim);
  while (tc > 1 && W * tc > elems) tc = ceil_div(tc, 2);
  int64_t r = 0;
  for (int64_t d = std::min<int64_t>(H, 255); d >= 1 && r == 0; --d) {
    if (H % d == 0 && d * W * tc <= elems) r = d;
  }
  const int64_t f_elems = std::min(std::min((acc - acc_base) / 2 / 64 * 64 / es, tile), tc);
  const int64_t work_at = acc_base + 2 * round64(f_elems * es);
  const int64_t work_elems = (acc - work_at) / es;
  return r > 0 && W <= 255 && H / r <= 255 && (H / r) * tc <= w_elems && tc <= f_elems &&
         r * W * tc <= work_elems * es;
}

// The input scratchpad's bytes held when the pool after layer `producer` is lowered: what is reserved
// now, less the value the producer reads on chip (released after it).
int64_t reserved_at_pool(const Context& c, size_t producer) {
  int64_t r = c.fusion.input_reserved;
  const OnChipValue& v = c.fusion.on_chip;
  if (!v.value.empty() && v.residual_reader < 0) {
    for (const std::string& in : c.g.nodes[producer].inputs) {
      if (in == v.value) r -= round64(v.bytes);
    }
  }
  return std::max<int64_t>(0, r);
}

// The SE pool of X (the output of layer `producer` at x_range, element type y) when it reads X from DRAM
// (the SE group cannot hold it): the pool's layer, X's and the pool's tensors filled in; none otherwise.
std::optional<SePoolBands> se_pool_of(const Context& c, size_t producer, const Range& x_range, isa::DType y) {
  if (!c.options.keep_on_chip || c.g.nhwc_io || c.shared_capacity() > 0) return std::nullopt;
  const size_t last = std::min(c.g.nodes.size(), producer + 1 + kMaxPoolDistance);
  for (size_t k = producer + 1; k < last; ++k) {
    const Node& n = c.g.nodes[k];
    if (n.op_type != "GlobalAveragePool" || n.inputs.empty() || !c.tensors.count(n.inputs[0])) continue;
    const DramTensor& x = c.tensor(n.inputs[0]);
    if (x.range().begin != x_range.begin || x.range().end != x_range.end) continue;
    if (c.folding.folded(n) || se_mul(c, k) < 0 || x.strided() || x.layout != kNhwc || x.dtype != y ||
        x.shape.size() != 4 || x.shape[0] != 1 || !c.tensors.count(n.outputs[0]))
      return std::nullopt;
    // A mapping file may place or tile the pool (what --mapping-out writes of it, placement vector, keeps
    // it).
    if (const LayerMapping* m = c.options.mapping ? c.options.mapping->find(n.name) : nullptr;
        m && (m->has_tiling() || (m->placement && *m->placement != Placement::kNpuVector)))
      return std::nullopt;
    SePoolBands p;
    p.x_bytes = num_elements(x.shape) * isa::dtype_bytes(x.dtype);
    // Where the SE group holds X, its pool loads it into the held region for the Mul: not here.
    if (se_holds_fit(c, reserved_at_pool(c, producer), p.x_bytes)) return std::nullopt;
    const DramTensor& out = c.tensor(n.outputs[0]);
    if (num_elements(out.shape) != x.shape[1]) return std::nullopt;
    p.pool = k;
    p.channels = x.shape[1];
    p.y = out.range();
    p.dtype = y;
    p.y_dtype = out.dtype;
    p.saved_cycles =
        c.dram_bytes_per_cycle > 0 ? static_cast<double>(p.x_bytes) / c.dram_bytes_per_cycle : 0.0;
    return p;
  }
  return std::nullopt;
}

}  // namespace

std::optional<SePoolBands> se_pool_for_depthwise(const Context& c, const MatrixJob& j, isa::DType y) {
  if (isa::numerics::is_integer(y) || y != c.act || j.images != 1 || j.y_sram >= 0 || j.y_pitch != 0 ||
      j.y_row != 0 || j.M != j.C)
    return std::nullopt;
  std::optional<SePoolBands> p = se_pool_of(c, c.layer, j.y_range, y);
  if (!p) return std::nullopt;
  const Node& n = c.g.nodes[p->pool];
  const DramTensor& x = c.tensor(n.inputs[0]);
  const int64_t H = x.shape[2], W = x.shape[3], C = x.shape[1];
  if (c.codes_of(n.inputs[0]) || c.codes_of(n.outputs[0]) || p->y_dtype != y || H != j.OH || W != j.OW ||
      C != j.M)
    return std::nullopt;
  p->rows = pool_band_rows(c, reserved_at_pool(c, c.layer), H, W, C);
  if (p->rows == 0) return std::nullopt;
  p->bands = H / p->rows;
  return p;
}

std::optional<SePoolBands> se_pool_codes_for_depthwise(const Context& c, size_t producer,
                                                       const Range& x_range, isa::DType y) {
  if (!isa::numerics::is_integer(y) || !c.options.plan) return std::nullopt;
  std::optional<SePoolBands> p = se_pool_of(c, producer, x_range, y);
  if (!p) return std::nullopt;
  const Node& n = c.g.nodes[p->pool];
  // Both stored as codes (the pool converts them itself: PlanScope's codes, taken from the plan here).
  const auto qx = c.options.plan->values.find(n.inputs[0]);
  const auto qy = c.options.plan->values.find(n.outputs[0]);
  if (qx == c.options.plan->values.end() || qy == c.options.plan->values.end() ||
      !isa::numerics::is_integer(p->y_dtype))
    return std::nullopt;
  const std::optional<isa::numerics::QuantizedMultiplier> m =
      quant::integer_global_average_pool(c.g, *c.options.plan, n);
  const DramTensor& x = c.tensor(n.inputs[0]);
  const int64_t H = x.shape[2], W = x.shape[3], C = x.shape[1];
  if (!m || !pool_integer_bands(c, reserved_at_pool(c, producer), H, W, C)) return std::nullopt;
  p->integer = true;
  p->stage[0] = static_cast<int32_t>(-H * W * qx->second.zero_point);
  p->stage[1] = m->multiplier;
  p->stage[2] = m->shift;
  p->y_zero_point = qy->second.zero_point;
  return p;
}

void se_pool_taken(Context& c, const SePoolBands& p, size_t producer) {
  c.fusion.pool_in_epilogue = {static_cast<int64_t>(p.pool), static_cast<uint32_t>(producer),
                               p.integer ? 0 : p.rows, p.x_bytes};
}

double se_pool_credit(const Context& c) {
  const PoolInEpilogue& e = c.fusion.pool_in_epilogue;
  return e.pool >= 0 && e.producer == c.layer && c.dram_bytes_per_cycle > 0
             ? static_cast<double>(e.x_bytes) / c.dram_bytes_per_cycle
             : 0.0;
}

bool se_pool_member(Context& c, size_t i, LayerPlan& plan) {
  const PoolInEpilogue e = c.fusion.pool_in_epilogue;
  if (e.pool != static_cast<int64_t>(i)) return false;
  c.fusion.pool_in_epilogue = {};
  const Node& n = c.g.nodes[i];
  const DramTensor& x = c.tensor(n.inputs[0]);
  // The pool's own lowering would take other bands (the scratchpad holds other values now): it runs,
  // and its results are those of the unfused program.
  const int64_t H = x.shape[2], W = x.shape[3], C = x.shape[1];
  if (c.fusion.held.value == n.inputs[0] ||
      (e.rows > 0 ? pool_band_rows(c, c.fusion.input_reserved, H, W, C) != e.rows
                  : !pool_integer_bands(c, c.fusion.input_reserved, H, W, C)))
    return false;
  const std::string& producer = c.g.nodes[e.producer].name;
  plan.mapping =
      e.rows > 0
          ? fmt::format(
                "VEC avg_pool over {} bands of {}x{} pixels x {} channels, then over the bands, in the "
                "epilogue of the depthwise conv '{}' (its output tiles pooled where they lie before their "
                "STORE)",
                H / e.rows, e.rows, W, C, producer)
          : fmt::format(
                "int32 sums of the {} channels' codes by a VEC dwconv of unit weights per band of the "
                "depthwise conv '{}' (where its epilogue leaves them before their STORE), added, then one "
                "requantize",
                C, producer);
  if (e.rows == 0) plan.int8_scheme = "integer";
  plan.fused_into = producer;
  plan.on_chip_input = n.inputs[0];
  plan.on_chip_bytes_saved = e.x_bytes;
  plan.on_chip_input_in_dram = true;
  plan.fusion_group = "se_pool:" + producer;
  return true;
}

}  // namespace npusim::compiler::backend
