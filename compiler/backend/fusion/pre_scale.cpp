// An SE block's channel scale applied in its project conv's loads (pre_scale.h).
#include "compiler/backend/fusion/pre_scale.h"

#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "compiler/backend/fusion/pre_affine.h"
#include "compiler/backend/int8/int8.h"
#include "compiler/passes/lowered.h"
#include "compiler/quant/emulate.h"
#include "compiler/quant/precision.h"
#include "isa/numerics.h"

namespace npusim::compiler::backend {

using isa::Buffer;
using isa::DType;
using isa::VecOp;

namespace {

// Mul node n's operands as X (the full map, [1, C, H, W]) and s (one value per channel of X), or false.
bool scale_operands(const Graph& g, const Node& n, std::string* x, std::string* s) {
  if (n.op_type != "Mul" || n.num_given_inputs() != 2 || n.outputs.size() != 1) return false;
  if (n.inputs[0] == n.inputs[1] || !n.attr_string(kActivation, "").empty()) return false;
  const Shape& out = g.value(n.outputs[0]).shape;
  if (out.size() != 4 || out[0] != 1) return false;
  for (size_t k = 0; k < 2; ++k) {
    const Value& a = g.value(n.inputs[k]);
    const Value& b = g.value(n.inputs[1 - k]);
    if (a.is_constant() || b.is_constant() || a.shape != out) continue;
    const Shape& bs = b.shape;
    const bool per_channel = (bs.size() == 4 && bs[0] == 1 && bs[1] == out[1] && bs[2] == 1 && bs[3] == 1) ||
                             (bs.size() == 3 && bs[0] == out[1] && bs[1] == 1 && bs[2] == 1);
    if (!per_channel) continue;
    *x = n.inputs[k], *s = n.inputs[1 - k];
    return true;
  }
  return false;
}

}  // namespace

int64_t pre_scale_reader(const Graph& g, size_t i, int64_t x_bytes, int64_t input_capacity) {
  std::string x, s;
  if (!scale_operands(g, g.nodes[i], &x, &s)) return -1;
  // What se_holds_fit refuses whatever else is reserved (se_fusion.h).
  if (4 * round64(x_bytes) <= 3 * input_capacity) return -1;
  return pointwise_reader(g, i);
}

std::string pre_scale_input(const Graph& g, size_t i) {
  std::string x, s;
  return scale_operands(g, g.nodes[i], &x, &s) ? x : std::string();
}

void plan_pre_scale(Context& c, size_t i) {
  if (c.fusion.pre_scale.node >= 0) return;  // a scale planned earlier, its reader still ahead
  const Graph& g = c.g;
  const Node& mul = g.nodes[i];
  if (!c.options.keep_on_chip || g.nhwc_io || c.shared_capacity() > 0) return;
  // An SE group holding X: the Mul reads it in place and may leave its product on chip (se_fusion.h).
  if (!c.fusion.held.value.empty() && c.fusion.held.mul == i) return;
  std::string xv, sv;
  if (!scale_operands(g, mul, &xv, &sv)) return;
  const std::string& yv = mul.outputs[0];
  for (const std::string& v : {xv, sv, yv})
    if (!c.tensors.count(v) || c.fusion.kept_on_chip.count(v)) return;
  const int64_t j = pre_scale_reader(g, i, static_cast<int64_t>(c.tensor(xv).bytes),
                                     scratchpad_capacity(c.config, Buffer::kInput));
  if (j < 0) return;
  const Node& conv = g.nodes[static_cast<size_t>(j)];
  if (!reader_map_free(c, mul, conv)) return;
  const DramTensor& x = c.tensor(xv);
  const DramTensor& s = c.tensor(sv);
  const DramTensor& y = c.tensor(yv);
  // Float in the activation type, or codes under the integer scheme as the Mul's own lowering would run
  // them in two passes (PlanScope defers them to it), read by an int8 conv as they lie.
  const quant::PrecisionPlan* plan = c.options.plan;
  auto qparams = [&](const std::string& v) -> const quant::QParams* {
    if (!plan) return nullptr;
    const auto it = plan->values.find(v);
    return it == plan->values.end() ? nullptr : &it->second;
  };
  const quant::QParams *qx = qparams(xv), *qs = qparams(sv), *qy = qparams(yv);
  std::optional<isa::numerics::QuantizedMultiplier> m;
  if (qx || qs || qy) {
    if (!qx || !qs || !qy || plan->int8_vector != quant::Int8Vector::kInteger ||
        plan->precision_of(mul.name) != quant::Precision::kInt8 ||
        plan->precision_of(conv.name) != quant::Precision::kInt8 || !int8_matrix_mappable(*plan, conv) ||
        x.dtype != qx->dtype || s.dtype != qs->dtype || y.dtype != qy->dtype || x.dtype != y.dtype ||
        isa::dtype_bytes(y.dtype) != 1 || !ChannelScaleMul::applies(x.dtype, *qx, s.dtype, *qs))
      return;
    m = quant::integer_mul(g, *plan, mul);
    if (!m) return;
  } else if (isa::numerics::is_integer(c.act) || x.dtype != c.act || s.dtype != c.act || y.dtype != c.act ||
             (plan && (plan->precision_of(mul.name) == quant::Precision::kInt8 ||
                       plan->precision_of(conv.name) == quant::Precision::kInt8))) {
    return;
  }
  if (x.strided() || y.strided() || s.strided() || x.shape != y.shape || !x.nhwc_in_memory() ||
      !y.nhwc_in_memory())
    return;
  const int64_t channels = x.shape[1];
  const int64_t es = isa::dtype_bytes(x.dtype);
  if (static_cast<int64_t>(s.bytes) != channels * isa::dtype_bytes(s.dtype)) return;
  PreScale p;
  p.node = static_cast<int64_t>(i);
  p.reader = j;
  p.x = y.range();
  p.in = x.range();
  p.in_addr = x.addr;
  p.scale = s.range();
  p.scale_addr = s.addr;
  p.channels = channels;
  p.dtype = x.dtype;
  p.bytes = static_cast<int64_t>(y.bytes);
  p.reserved = round64(channels * es);
  const int64_t acc = scratchpad_capacity(c.config, Buffer::kAccumulator) - c.fusion.acc_reserved;
  if (m) {
    // # int8: s's triples after its codes, then the int32 work rows (at most an eighth of the accumulator).
    p.codes = true;
    p.multiplier = m->multiplier, p.shift = m->shift;
    p.x_q = qx, p.y_q = qy;
    p.work_elems = std::min(kLoadWorkElems, acc / 8 / 4);
    if (p.work_elems < channels) return;
    p.reserved += ChannelScaleMul::bytes_after(channels) + p.work_elems * 4;
  }
  if (p.reserved * 4 > acc) return;  // at most a quarter of the accumulator
  c.fusion.pre_scale = p;
}

bool pre_scale_member(Context& c, size_t i, LayerPlan& plan) {
  const PreScale& p = c.fusion.pre_scale;
  if (p.node != static_cast<int64_t>(i)) return false;
  const Node& n = c.g.nodes[i];
  const std::string& reader = c.g.nodes[static_cast<size_t>(p.reader)].name;
  std::string xv, sv;
  scale_operands(c.g, n, &xv, &sv);
  plan.mapping = fmt::format(
      "VEC mul bcast row (the per-channel scale '{}'){} in the loads of '{}' (each of its input tiles loaded "
      "from this layer's input and scaled in place: this layer's output never goes to DRAM)",
      sv, p.codes ? ", int8 integer: codes multiplied in int32, the output stage's per-channel bias" : "",
      reader);
  if (p.codes) plan.int8_scheme = "integer";
  plan.fused_into = reader;
  plan.on_chip_input = xv;
  plan.on_chip_bytes_saved = 2 * p.bytes;
  plan.fusion_group = "pre_scale:" + reader;
  return true;
}

void begin_pre_scale(Context& c, size_t i) {
  PreScale& p = c.fusion.pre_scale;
  if (!p.carried_by(static_cast<int64_t>(i))) return;
  const int64_t cap = c.capacity(Buffer::kAccumulator);
  if (p.reserved * 4 > cap) throw std::logic_error("pre_scale: no accumulator room for the scale");
  p.params = static_cast<uint64_t>(cap - p.reserved) / 64 * 64;
  c.load(Buffer::kAccumulator, p.params, p.scale, p.scale_addr, p.dtype, {p.channels, 1, 1, 1}, {0, 0, 0});
  if (p.codes) {
    p.scale_mul =
        std::make_shared<ChannelScaleMul>(c, isa::numerics::QuantizedMultiplier{p.multiplier, p.shift},
                                          *p.x_q, *p.y_q, p.dtype, p.dtype, p.channels, Buffer::kAccumulator);
    p.scale_mul->prepare(p.params, p.channels);
    p.work_at =
        p.params + static_cast<uint64_t>(round64(p.channels) + ChannelScaleMul::bytes_after(p.channels));
  }
  c.fusion.acc_reserved += p.reserved;
}

bool load_pre_scale(Context& c, Buffer buf, uint64_t sram, const Range& dram_range, uint64_t dram_addr,
                    DType t, const std::array<int64_t, 4>& s, const std::array<int64_t, 3>& st,
                    const std::array<int64_t, 4>& pads) {
  PreScale& p = c.fusion.pre_scale;
  if (!p.serves(static_cast<int64_t>(c.layer), dram_range)) return false;
  const int64_t es = isa::dtype_bytes(t), C = p.channels;
  if (t != p.dtype || pads != std::array<int64_t, 4>{0, 0, 0, 0})
    throw std::logic_error("pre_scale: a padded or converting load of the product");
  // X lies as the product does: the same box at the same offset.
  const uint64_t offset = dram_addr - p.x.begin;
  c.load(buf, sram, p.in, p.in_addr + offset, t, s, st);
  // The Mul's VEC over each box of the tile whose rows start at one channel.
  channel_runs(C, static_cast<int64_t>(offset) / es, s, st,
               [&](int64_t at, int64_t d0, int64_t d1, int64_t d2, int64_t ch) {
                 const uint64_t tile = sram + static_cast<uint64_t>(at * es);
                 if (p.codes) {  // # int8: the products in int32 work rows, y's codes written back in place
                   const int64_t rows = d1 * d2, per = std::max<int64_t>(1, p.work_elems / d0);
                   for (int64_t r0 = 0; r0 < rows; r0 += per) {
                     const uint64_t at_r = tile + static_cast<uint64_t>(r0 * d0 * es);
                     p.scale_mul->apply(buf, at_r, p.work_at, buf, at_r, d0, std::min(per, rows - r0), ch);
                   }
                   return;
                 }
                 Context::VecArgs v;
                 v.op = VecOp::kMul, v.in = v.out = t, v.src1_buf = v.dst_buf = buf;
                 v.src1 = v.dst = tile;
                 v.d0 = d0, v.d1 = d1, v.d2 = d2, v.src2_buf = Buffer::kAccumulator,
                 v.bcast = isa::Bcast::kRow;
                 v.src2 = p.params + static_cast<uint64_t>(ch * es);
                 c.vec(v);
               });
  ++p.loads;
  return true;
}

int64_t pre_scale_declined(Context& c, size_t i) {
  return reader_map_declined(c.fusion.pre_scale, c.fusion.acc_reserved, i);
}

void finish_pre_scale(Context& c, size_t i, const LayerPlan& plan) {
  finish_reader_map(c, c.fusion.pre_scale, c.fusion.acc_reserved, i, plan, "pre_scale", "the scale");
}

}  // namespace npusim::compiler::backend
