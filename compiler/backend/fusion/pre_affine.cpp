// A constant affine map and its activation applied in its reader's loads (pre_affine.h).
#include "compiler/backend/fusion/pre_affine.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <stdexcept>
#include <vector>

#include "compiler/backend/fusion/pre_norm.h"
#include "compiler/backend/int8/int8.h"
#include "compiler/backend/matrix/matrix_walk.h"
#include "compiler/passes/lowered.h"
#include "compiler/quant/precision.h"
#include "isa/numerics.h"
#include "isa/timing/units.h"

namespace npusim::compiler::backend {

using isa::Buffer;
using isa::DType;
using isa::VecOp;

namespace {

// A Conv the walk runs as a GEMM over its input's pixels, reading each input element once per load: 1x1,
// stride 1, unpadded, one group, constant weights.
bool pointwise(const Graph& g, const Node& n) {
  if (n.op_type != "Conv" || n.inputs.size() < 2 || n.attr_int("group", 1) != 1) return false;
  const Value& w = g.value(n.inputs[1]);
  if (!w.is_constant() || w.shape.size() != 4 || w.shape[2] != 1 || w.shape[3] != 1) return false;
  const std::vector<int64_t> strides = n.attr_ints("strides", {1, 1});
  const std::vector<int64_t> pads = n.attr_ints("pads", {0, 0, 0, 0});
  const std::string auto_pad = n.attr_string("auto_pad", "NOTSET");
  return std::all_of(strides.begin(), strides.end(), [](int64_t v) { return v == 1; }) &&
         std::all_of(pads.begin(), pads.end(), [](int64_t v) { return v == 0; }) &&
         (auto_pad == "NOTSET" || auto_pad == "VALID");
}

// # int8: the map's VECs on `rows` rows of d0 codes at `at` of `buf` (whose rows start at the constants'
// byte offset `off`), through the fp32 work rows in chunks, as lower_batchnorm runs them: the codes less
// their zero point into fp32, mul and add by the channel's constants, then the clamp (or the add) writes
// the output's codes back in place.
void apply_codes(Context& c, const PreAffine& p, Buffer buf, uint64_t at, int64_t d0, int64_t rows,
                 uint64_t off, DType x_dtype) {
  const int64_t per = std::max<int64_t>(1, p.work_elems / d0);
  for (int64_t r0 = 0; r0 < rows; r0 += per) {
    const int64_t d1 = std::min(per, rows - r0);
    const uint64_t tile = at + static_cast<uint64_t>(r0 * d0);  // one byte per code
    subtract_zero_point(c, buf, tile, Buffer::kAccumulator, p.work_at, d0, d1, p.y_dtype, p.conv_at);
    Context::VecArgs v;
    v.in = v.out = DType::kFp32, v.src1_buf = v.dst_buf = Buffer::kAccumulator, v.src1 = v.dst = p.work_at;
    v.d0 = d0, v.d1 = d1, v.src2_buf = Buffer::kAccumulator, v.bcast = isa::Bcast::kRow;
    v.op = VecOp::kMul, v.src2 = p.params + off;
    c.vec(v);
    v.op = VecOp::kAdd, v.src2 = p.shift_at + off;
    if (!p.clamp) v.out = x_dtype, v.dst_buf = buf, v.dst = tile;
    c.vec(v);
    if (!p.clamp) continue;
    Context::VecArgs a;
    a.in = DType::kFp32, a.out = x_dtype, a.src1_buf = Buffer::kAccumulator, a.src1 = p.work_at;
    a.dst_buf = buf, a.dst = tile, a.d0 = d0, a.d1 = d1;
    a.op = VecOp::kClip, a.imm0 = p.act_imm0, a.imm1 = p.act_imm1;
    c.vec(a);
  }
}

// The map's VECs over a d2 x d1 x d0 box at `at` whose rows start at channel ch.
void apply_box(Context& c, const PreAffine& p, const PreAffine::Box& b) {
  const auto off = static_cast<uint64_t>(b.ch * isa::dtype_bytes(p.work));
  if (p.codes) {
    apply_codes(c, p, b.buf, b.at, b.d0, b.d1 * b.d2, off, b.t);
    return;
  }
  Context::VecArgs v;
  v.in = v.out = b.t, v.src1_buf = v.dst_buf = b.buf, v.src1 = v.dst = b.at;
  v.d0 = b.d0, v.d1 = b.d1, v.d2 = b.d2, v.src2_buf = Buffer::kAccumulator, v.bcast = isa::Bcast::kRow;
  v.op = VecOp::kMul, v.src2 = p.params + off;
  c.vec(v);
  v.op = VecOp::kAdd, v.src2 = p.shift_at + off;
  c.vec(v);
  if (p.act == VecOp::kCopy) return;
  Context::VecArgs a;
  a.in = a.out = b.t, a.src1_buf = a.dst_buf = b.buf, a.src1 = a.dst = b.at;
  a.d0 = b.d0, a.d1 = b.d1, a.d2 = b.d2, a.op = p.act, a.imm0 = p.act_imm0, a.imm1 = p.act_imm1;
  c.vec(a);
}

}  // namespace

int64_t pointwise_reader(const Graph& g, size_t i) {
  const Node& n = g.nodes[i];
  if (n.attr_string(kPlacement, "") != "vector" || n.outputs.empty() || n.outputs[0].empty()) return -1;
  for (size_t r = 1; r < n.outputs.size(); ++r)
    if (!n.outputs[r].empty() && !g.consumers(n.outputs[r]).empty()) return -1;
  const std::string& xv = n.outputs[0];
  if (std::find(g.outputs.begin(), g.outputs.end(), xv) != g.outputs.end()) return -1;
  const std::vector<int> readers = g.consumers(xv);
  if (readers.size() != 1 || readers[0] <= static_cast<int>(i)) return -1;
  const Node& conv = g.nodes[static_cast<size_t>(readers[0])];
  if (conv.attr_string(kPlacement, "") != "matrix" || conv.inputs[0] != xv || !pointwise(g, conv)) return -1;
  for (size_t k = 1; k < conv.inputs.size(); ++k)
    if (conv.inputs[k] == xv) return -1;
  return readers[0];
}

int64_t pre_affine_reader(const Graph& g, size_t i) {
  const Node& bn = g.nodes[i];
  if (bn.op_type != "BatchNormalization" || !batchnorm_affine(g, bn)) return -1;
  return pointwise_reader(g, i);
}

bool reader_map_free(const Context& c, const Node& map, const Node& reader) {
  for (const Node* n : {&map, &reader})
    if (c.folding.folded(*n) || c.views.folds(*n)) return false;
  // A mapping file that tiles or places the map, or places the reader off the array, leaves the map apart.
  if (const LayerMapping* m = c.options.mapping ? c.options.mapping->find(map.name) : nullptr;
      m &&
      (m->has_tiling() || m->has_vector_tiling() || (m->placement && *m->placement != Placement::kNpuVector)))
    return false;
  const LayerMapping* m = c.options.mapping ? c.options.mapping->find(reader.name) : nullptr;
  return !(m && m->placement && *m->placement != Placement::kNpuMatrix);
}

void plan_pre_affine(Context& c, size_t i) {
  if (c.fusion.pre_affine.node >= 0) return;  // a map planned earlier, its reader still ahead
  const Graph& g = c.g;
  const Node& bn = g.nodes[i];
  if (!c.options.keep_on_chip || g.nhwc_io || c.shared_capacity() > 0) return;
  const int64_t j = pre_affine_reader(g, i);
  if (j < 0) return;
  const Node& conv = g.nodes[static_cast<size_t>(j)];
  if (!reader_map_free(c, bn, conv)) return;
  const std::string &xv = bn.outputs[0], &yv = bn.inputs[0];
  if (!c.tensors.count(xv) || !c.tensors.count(yv)) return;
  const DramTensor& y = c.tensor(yv);
  const DramTensor& x = c.tensor(xv);
  if (x.strided() || x.shape.size() != 4 || x.shape != y.shape || x.shape[0] != 1 || !x.nhwc_in_memory() ||
      !y.nhwc_in_memory())
    return;
  // # int8: codes in and out, as the map's own lowering runs them under the integer scheme (PlanScope defers
  // them to it), read by an int8 conv as they lie.
  const quant::PrecisionPlan* plan = c.options.plan;
  const quant::QParams* qy = plan ? plan->qparams(yv) : nullptr;
  const quant::QParams* qx = plan ? plan->qparams(xv) : nullptr;
  const bool codes = qy || qx;
  if (codes) {
    if (!qy || !qx || plan->int8_vector != quant::Int8Vector::kInteger ||
        plan->precision_of(bn.name) != quant::Precision::kInt8 ||
        plan->precision_of(conv.name) != quant::Precision::kInt8 || !int8_matrix_mappable(*plan, conv) ||
        y.dtype != qy->dtype || x.dtype != qx->dtype || isa::dtype_bytes(y.dtype) != 1 ||
        isa::dtype_bytes(x.dtype) != 1)
      return;
  } else if (x.dtype != c.act || y.dtype != c.act || isa::numerics::is_integer(c.act) ||
             (plan && plan->precision_of(bn.name) == quant::Precision::kInt8)) {
    return;
  }
  // y dense, or a Concat's view whose pixels lie `y_pixel` elements apart (rows of whole pixels).
  const std::vector<int64_t> ys = y.strides();
  const int64_t channels = x.shape[1], width = x.shape[3];
  if (ys.size() != 4 || ys[3] != 1 || ys[2] < channels || ys[1] != width * ys[2]) return;
  VecOp act_op = VecOp::kCopy;
  int64_t imm0 = 0, imm1 = 0;
  const std::string act = bn.attr_string(kActivation, "");
  if (!act.empty() && !fused_activation(bn, act, &act_op, &imm0, &imm1)) return;
  const std::optional<ChannelAffine> aff = batchnorm_affine(g, bn);
  const quant::AffineArith ar =
      quant::affine_arith(aff->scale, aff->shift, qy, qx, act, bn.attr_float(kActMin, -INFINITY),
                          bn.attr_float(kActMax, INFINITY));
  if (static_cast<int64_t>(ar.mul.size()) < channels || static_cast<int64_t>(ar.add.size()) < channels)
    return;
  if (codes && !ar.codes_out) return;  // a float activation between the map and the codes
  PreAffine p;
  p.node = static_cast<int64_t>(i);
  p.reader = j;
  p.x = x.range();
  p.y = y.range();
  p.y_addr = y.addr;
  p.y_pixel = ys[2];
  p.y_dtype = y.dtype;
  p.channels = channels;
  p.work = codes ? isa::DType::kFp32 : c.act;
  p.act = act.empty() ? VecOp::kCopy : act_op;
  p.act_imm0 = imm0, p.act_imm1 = imm1;
  if (codes) {
    p.codes = true;
    // A clamp that only bounds the codes' range is the conversion's own saturation: the add writes them.
    const auto lo = static_cast<float>(isa::numerics::dtype_min(x.dtype));
    const auto hi = static_cast<float>(isa::numerics::dtype_max(x.dtype));
    p.clamp = !act.empty() && !(ar.lo <= lo && ar.hi >= hi);
    p.act_imm0 = f32_imm(ar.lo), p.act_imm1 = f32_imm(ar.hi);
    p.zero_point = qy;
  }
  p.mul.assign(ar.mul.begin(), ar.mul.begin() + channels);
  p.add.assign(ar.add.begin(), ar.add.begin() + channels);
  p.bytes = static_cast<int64_t>(x.bytes);
  const int64_t vector_bytes = round64(channels * isa::dtype_bytes(p.work));
  // # int8: the conversion constants (64 bytes) and the fp32 work rows after the constants.
  // The reservation takes at most a quarter of the accumulator, the work rows at most an eighth.
  const int64_t acc = scratchpad_capacity(c.config, Buffer::kAccumulator) - c.fusion.acc_reserved;
  p.work_elems = codes ? std::min(kLoadWorkElems, acc / 8 / 4) : 0;
  if (codes && p.work_elems < channels) return;
  p.reserved = 2 * vector_bytes + (codes ? 64 + p.work_elems * 4 : 0);
  if (p.reserved * 4 > acc) return;
  c.fusion.pre_affine = p;
}

bool pre_affine_member(Context& c, size_t i, LayerPlan& plan) {
  const PreAffine& p = c.fusion.pre_affine;
  if (p.node != static_cast<int64_t>(i)) return false;
  const Node& n = c.g.nodes[i];
  const std::string& reader = c.g.nodes[static_cast<size_t>(p.reader)].name;
  const std::string act = n.attr_string(kActivation, "");
  plan.mapping = fmt::format(
      "VEC mul + add bcast row (per-channel affine){} in the loads of '{}' (each of its input tiles loaded "
      "from this layer's input and mapped in place: this layer's output never goes to DRAM)",
      act.empty() ? "" : " + " + act, reader);
  reader_map_plan(plan, n, reader, p.bytes, "pre_affine");
  return true;
}

void reader_map_plan(LayerPlan& plan, const Node& map, const std::string& reader, int64_t bytes,
                     const char* kind) {
  plan.fused_into = reader;
  plan.on_chip_input = map.inputs[0];
  plan.on_chip_bytes_saved = 2 * bytes;
  plan.fusion_group = fmt::format("{}:{}", kind, reader);
}

void begin_pre_affine(Context& c, size_t i) {
  PreAffine& p = c.fusion.pre_affine;
  if (!p.carried_by(static_cast<int64_t>(i))) return;
  const int64_t cap = c.capacity(Buffer::kAccumulator);
  if (p.reserved * 4 > cap) throw std::logic_error("pre_affine: no accumulator room for the constants");
  const auto vector_bytes = static_cast<uint64_t>(round64(p.channels * isa::dtype_bytes(p.work)));
  p.params = static_cast<uint64_t>(cap - p.reserved) / 64 * 64;
  p.shift_at = p.params + vector_bytes;
  p.conv_at = p.shift_at + vector_bytes;
  p.work_at = p.conv_at + 64;
  const auto bytes = static_cast<uint64_t>(p.channels * isa::dtype_bytes(p.work));
  const uint64_t m_at = c.add_floats(p.mul, p.work), a_at = c.add_floats(p.add, p.work);
  c.load(Buffer::kAccumulator, p.params, Range{kDram, m_at, m_at + bytes}, m_at, p.work,
         {p.channels, 1, 1, 1}, {0, 0, 0});
  c.load(Buffer::kAccumulator, p.shift_at, Range{kDram, a_at, a_at + bytes}, a_at, p.work,
         {p.channels, 1, 1, 1}, {0, 0, 0});
  if (p.codes) load_conversion_constants(c, p.conv_at, p.zero_point, nullptr);
  c.fusion.acc_reserved += p.reserved;
}

bool load_pre_affine(Context& c, Buffer buf, uint64_t sram, const Range& dram_range, uint64_t dram_addr,
                     DType t, const std::array<int64_t, 4>& s, const std::array<int64_t, 3>& st,
                     const std::array<int64_t, 4>& pads) {
  PreAffine& p = c.fusion.pre_affine;
  if (!p.serves(static_cast<int64_t>(c.layer), dram_range)) return false;
  const int64_t es = isa::dtype_bytes(t), C = p.channels;
  if (isa::dtype_bytes(t) != isa::dtype_bytes(p.y_dtype) || pads != std::array<int64_t, 4>{0, 0, 0, 0})
    throw std::logic_error("pre_affine: a padded or converting load of the map's output");
  const int64_t e0 = static_cast<int64_t>(dram_addr - p.x.begin) / es;
  const int64_t n0 = e0 % C;
  // Boxes of channel runs within a pixel whose outer strides step whole pixels read y at the same pixels
  // and channels; when y is dense any box does.
  const bool within = n0 + s[0] <= C && (s[1] == 1 || st[0] % C == 0) && (s[2] == 1 || st[1] % C == 0) &&
                      (s[3] == 1 || st[2] % C == 0);
  if (!within && p.y_pixel != C) throw std::logic_error("pre_affine: a load box across a view's pixels");
  const int64_t scale = within ? p.y_pixel : C;  // y's elements per C of x's
  auto to_y = [&](int64_t stride) { return within ? stride / C * scale : stride; };
  const int64_t y_e = within ? e0 / C * p.y_pixel + n0 : e0;
  c.load(buf, sram, p.y, p.y_addr + static_cast<uint64_t>(y_e * es), p.y_dtype, s,
         {to_y(st[0]), to_y(st[1]), to_y(st[2])});
  channel_runs(C, e0, s, st, [&](int64_t at, int64_t d0, int64_t d1, int64_t d2, int64_t ch) {
    const PreAffine::Box b{buf, sram + static_cast<uint64_t>(at * es), d0, d1, d2, ch, t};
    if (p.hold) {
      p.held.push_back(b);
    } else {
      apply_box(c, p, b);
    }
  });
  ++p.loads;
  return true;
}

bool carries_pre_affine(const Context& c) {
  return c.fusion.pre_affine.carried_by(static_cast<int64_t>(c.layer)) || carries_pre_norm(c);
}

void hold_pre_affine(Context& c) {
  if (carries_pre_norm(c)) return hold_pre_norm(c);
  PreAffine& p = c.fusion.pre_affine;
  if (p.hold || !p.held.empty()) throw std::logic_error("pre_affine: a hold while another is held");
  p.hold = true;
}

std::vector<PreAffine::Box> release_pre_affine(Context& c) {
  if (carries_pre_norm(c)) return release_pre_norm(c);
  PreAffine& p = c.fusion.pre_affine;
  p.hold = false;
  std::vector<PreAffine::Box> boxes;
  boxes.swap(p.held);
  return boxes;
}

void emit_pre_affine_maps(Context& c, const std::vector<PreAffine::Box>& boxes) {
  if (carries_pre_norm(c)) return emit_pre_norm(c, boxes);
  for (const PreAffine::Box& b : boxes) apply_box(c, c.fusion.pre_affine, b);
}

bool maps_its_loads(const Context& c) {
  const auto layer = static_cast<int64_t>(c.layer);
  return c.fusion.pre_affine.carried_by(layer) || carries_pre_norm(c) ||
         c.fusion.pre_pool.carried_by(layer) || c.fusion.pre_scale.carried_by(layer);
}

int64_t pre_affine_declined(Context& c, size_t i) {
  return reader_map_declined(c.fusion.pre_affine, c.fusion.acc_reserved, i);
}

void finish_pre_affine(Context& c, size_t i, const LayerPlan& plan) {
  finish_reader_map(c, c.fusion.pre_affine, c.fusion.acc_reserved, i, plan, "pre_affine", "the map");
}

}  // namespace npusim::compiler::backend
