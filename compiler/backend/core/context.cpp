#include "compiler/backend/core/context.h"

#include "isa/numerics.h"

#include <cstring>
#include <stdexcept>

#include "compiler/backend/fusion/post_affine.h"
#include "compiler/backend/fusion/pre_affine.h"
#include "compiler/backend/fusion/pre_norm.h"
#include "compiler/backend/fusion/pre_pool.h"
#include "compiler/backend/fusion/pre_scale.h"
#include "compiler/backend/fusion/pre_transpose.h"
#include "compiler/backend/fusion/store_pool.h"
#include "compiler/passes/lowered.h"
#include "isa/program_slice.h"
#include "isa/strides.h"
#include "isa/timing/dma.h"

namespace npusim::compiler::backend {

using isa::Field;
using isa::Instruction;
using isa::Opcode;

namespace {

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

uint16_t to_bf16(float f) {
  const uint32_t u = bits_of(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // quiet NaN
  const uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>((u + rounding) >> 16);
}

// binary32 -> binary16, round to nearest even.
uint16_t to_fp16(float f) {
  const uint32_t x = bits_of(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);
  if (ax >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520 rounds to inf
  if (ax < 0x38800000u) {                                               // fp16 subnormal or zero
    if (ax < 0x33000000u) return sign;                                  // < 2^-25: rounds to 0
    const uint32_t e = ax >> 23;
    const uint32_t mant = (ax & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - e;  // 14 + (113 - e) ... value = mant * 2^(e-150), unit 2^-24
    const uint32_t q = mant >> (shift - 0);
    const uint32_t rem = mant & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    uint32_t r = q;
    if (rem > half || (rem == half && (q & 1))) ++r;
    return static_cast<uint16_t>(sign | r);
  }
  uint32_t v = ax - 0x38000000u;  // rebias exponent 127 -> 15 (in the fp32 bit position)
  const uint32_t rem = v & 0x1fffu;
  v >>= 13;
  if (rem > 0x1000u || (rem == 0x1000u && (v & 1))) ++v;
  return static_cast<uint16_t>(sign | v);
}

}  // namespace

int64_t f32_imm(float v) { return static_cast<int32_t>(bits_of(v)); }
int64_t bf16_pad(float v) { return static_cast<int16_t>(to_bf16(v)); }

Shape physical(const Shape& logical, const std::vector<int>& layout) {
  if (layout.empty()) return logical;
  Shape p;
  for (int d : layout) p.push_back(logical.at(static_cast<size_t>(d)));
  return p;
}

std::vector<int64_t> DramTensor::strides() const { return strided() ? view_strides : dense_strides(phys); }

bool DramTensor::nhwc_in_memory() const {
  if (shape.size() != 4) return false;
  if (layout == kNhwc) return true;
  if (strided()) return false;  // a view's strides are those of its own layout
  std::vector<int> order = layout;
  if (order.empty()) order = {0, 1, 2, 3};
  std::vector<int> a, b;
  for (int d : order)
    if (shape[static_cast<size_t>(d)] > 1) a.push_back(d);
  for (int d : kNhwc)
    if (shape[static_cast<size_t>(d)] > 1) b.push_back(d);
  return a == b;
}

DramTensor DramTensor::expanded() const {
  if (view_split.empty()) return *this;
  DramTensor t = *this;
  t.view_split.clear();
  t.shape.clear(), t.phys.clear(), t.view_strides.clear(), t.layout.clear();
  for (size_t i = 0; i < phys.size(); ++i) {
    auto it = view_split.find(i);
    if (it == view_split.end()) {
      t.phys.push_back(phys[i]), t.view_strides.push_back(view_strides[i]);
      continue;
    }
    for (const auto& [e, s] : it->second) t.phys.push_back(e), t.view_strides.push_back(s);
  }
  t.shape = t.phys;  // views are in ONNX order
  return t;
}

uint64_t DramTensor::span_bytes() const {
  if (!strided()) return bytes;
  if (!view_split.empty()) return expanded().span_bytes();
  int64_t last = 0;
  for (size_t i = 0; i < phys.size(); ++i) last += (phys[i] - 1) * view_strides[i];
  return static_cast<uint64_t>((last + 1) * isa::dtype_bytes(dtype));
}

Context::Context(const Graph& graph, const isa::NpuConfig& cfg, const CompileOptions& opts,
                 CompileResult& res)
    : g(graph),
      config(cfg),
      options(opts),
      result(res),
      program(res.program),
      em(res.program),
      act(opts.precision),
      esize(isa::dtype_bytes(opts.precision)),
      dram_bytes_per_cycle(isa::timing::sustained_dram_bytes_per_cycle(config)),
      dram_rates(config) {
  if (config.sram.shared_scratchpad) {
    em.share(static_cast<int>(isa::Buffer::kWeight), static_cast<int>(isa::Buffer::kInput));
  }
}

int64_t scratchpad_capacity(const isa::NpuConfig& config, isa::Buffer b) {
  const int64_t cap = config.sram.buffer(b).size_bytes();
  if (!config.sram.shared_scratchpad || b == isa::Buffer::kAccumulator) return cap;
  return cap / 2 / 64 * 64;
}

int64_t Context::capacity(isa::Buffer b) const {
  const int64_t cap = scratchpad_capacity(config, b);
  if (b == isa::Buffer::kAccumulator) return cap - fusion.acc_reserved;
  return b == isa::Buffer::kInput ? cap - fusion.input_reserved : cap;
}

uint64_t Context::sram_base(isa::Buffer b) const {
  return config.sram.shared_scratchpad && b == isa::Buffer::kWeight
             ? static_cast<uint64_t>(capacity(isa::Buffer::kInput))
             : 0;
}

SramAlloc Context::slots(isa::Buffer b, int64_t need) const {
  const int64_t cap = capacity(b);
  const bool bottom = (layer + (fusion.slots_flipped ? 1 : 0)) % 2 == 0;  // FusionState::slots_flipped
  if (shared_capacity() > 0 || g.nhwc_io || bottom || need <= 0 || need > cap) return SramAlloc{b, 0, 0};
  const uint64_t base = static_cast<uint64_t>(cap - need) / 64 * 64;
  return SramAlloc{b, base, base};
}

uint64_t Context::reserve_data(uint64_t bytes) {
  if (!in_trial_) throw std::logic_error("backend: reserve_data outside a trial");
  const uint64_t at = align(data_end_);
  data_end_ = at + bytes;
  return at;
}

uint64_t Context::add_data(std::vector<uint8_t> bytes) {
  if (in_trial_) return reserve_data(bytes.size());
  const uint64_t at = align(data_end_);
  data_end_ = at + bytes.size();
  isa::DataSegment seg;
  seg.dram_addr = at;
  seg.bytes = std::move(bytes);
  program.data.push_back(std::move(seg));
  return at;
}

uint64_t Context::add_elided_data(uint64_t bytes) {
  if (in_trial_) return reserve_data(bytes);
  const uint64_t at = align(data_end_);
  data_end_ = at + bytes;
  isa::DataSegment seg;
  seg.dram_addr = at;
  seg.elided_bytes = bytes;
  program.data.push_back(std::move(seg));
  return at;
}

uint64_t Context::add_constant(const Tensor& v, isa::DType t) {
  if (!v.has_values())
    return add_elided_data(static_cast<uint64_t>(v.size()) * static_cast<uint64_t>(isa::dtype_bytes(t)));
  return v.floating() ? add_floats(v.f, t) : add_floats(v.to_float_vector(), t);
}

uint64_t Context::add_floats(const std::vector<float>& v, isa::DType t) {
  if (in_trial_) return reserve_data(v.size() * static_cast<uint64_t>(isa::dtype_bytes(t)));
  if (t == isa::DType::kFp32) {
    // Copied in one pass (sizing the vector first would zero every page once more).
    const auto* p = reinterpret_cast<const uint8_t*>(v.data());
    return add_data(std::vector<uint8_t>(p, p + v.size() * sizeof(float)));
  }
  std::vector<uint8_t> b(v.size() * static_cast<size_t>(isa::dtype_bytes(t)));
  for (size_t i = 0; i < v.size(); ++i) {
    const uint16_t h = t == isa::DType::kFp16 ? to_fp16(v[i]) : to_bf16(v[i]);
    std::memcpy(&b[i * 2], &h, 2);
  }
  return add_data(std::move(b));
}

uint64_t Context::add_scratch(uint64_t bytes) {
  const uint64_t at = align(scratch_end_);
  scratch_end_ = at + bytes;
  return at;
}

std::vector<int64_t> Context::time_code(int64_t first) const {
  const int64_t from = context_first >= 0 && context_first < first ? context_first : first;
  return options
      .timer(isa::slice_program(program, static_cast<size_t>(from), program.instructions.size(), {}))
      .layers;
}

int64_t Context::time_layer(int64_t first) const {
  const std::vector<int64_t> cycles = time_code(first);
  return cycles.empty() ? 0 : cycles.back();
}

int64_t Context::time_end(int64_t first) const {
  const int64_t from = context_first >= 0 && context_first < first ? context_first : first;
  return options
      .timer(isa::slice_program(program, static_cast<size_t>(from), program.instructions.size(), {}))
      .total;
}

double Context::objective_score(int64_t first, int64_t cycles) const {
  if (options.objective == MappingObjective::kCycles || !options.energy) return static_cast<double>(cycles);
  const int64_t from = context_first >= 0 && context_first < first ? context_first : first;
  const std::vector<double> mj =
      options.energy(isa::slice_program(program, static_cast<size_t>(from), program.instructions.size(), {}));
  const double energy = mj.empty() ? 0.0 : mj.back();
  return options.objective == MappingObjective::kEnergy ? energy : energy * static_cast<double>(cycles);
}

Context::Trial Context::begin_trial() {
  if (in_trial_) throw std::logic_error("backend: nested trials");
  Trial t;
  t.em = em.checkpoint();
  t.data_segments = program.data.size();
  t.data_end = data_end_;
  t.scratch_end = scratch_end_;
  if (plan) t.plan = *plan;
  t.on_chip = fusion.on_chip;
  t.residual = fusion.residual;
  t.pre_pool_next = fusion.pre_pool.next;
  t.pre_transpose_next = fusion.pre_transpose.next;
  in_trial_ = true;
  return t;
}

Context::Trial Context::mark() {
  if (in_trial_) throw std::logic_error("backend: an undo point inside a trial");
  Trial t = begin_trial();
  in_trial_ = false;
  return t;
}

void Context::end_trial(const Trial& t) {
  em.rollback(t.em);
  program.data.resize(t.data_segments);
  data_end_ = t.data_end;
  scratch_end_ = t.scratch_end;
  if (plan) *plan = t.plan;
  fusion.on_chip = t.on_chip;
  fusion.residual = t.residual;
  fusion.pre_pool.next = t.pre_pool_next;
  fusion.pre_transpose.next = t.pre_transpose_next;
  in_trial_ = false;
}

void Context::spill_on_chip() {
  spill(fusion.on_chip);
  spill(fusion.residual);
}

void Context::spill(OnChipValue& v) {
  if (!v.pending) return;
  v.pending = false;
  if (v.in_dram) return;  // its producer stored it too
  v.spilled = true;
  if (v.pad.w == 0) {
    store(isa::Buffer::kInput, v.addr, v.dram, v.dram.begin, v.dtype, v.box, v.strides);
    return;
  }
  // Padded (a padded conv's input, fusion/residency.h): per image its rows but the last with their padding
  // columns, each row's padding written over by the next row (a STORE writes its rows in order), then the
  // last row alone, so nothing lands past the image.
  const int64_t C = v.box[0], W = v.box[1], H = v.box[2], es = isa::dtype_bytes(v.dtype);
  for (int64_t n = 0; n < v.box[3]; ++n) {
    const uint64_t dram = v.dram.begin + static_cast<uint64_t>(n * H * W * C * es);
    const uint64_t sram =
        v.addr + static_cast<uint64_t>(((n * v.pad.h + v.pad.t) * v.pad.w + v.pad.l) * C * es);
    if (H > 1) store(isa::Buffer::kInput, sram, v.dram, dram, v.dtype, {C, v.pad.w, H - 1, 1}, {C, W * C, 0});
    store(isa::Buffer::kInput, sram + static_cast<uint64_t>((H - 1) * v.pad.w * C * es), v.dram,
          dram + static_cast<uint64_t>((H - 1) * W * C * es), v.dtype, {C, W, 1, 1}, {C, W * C, 0});
  }
}

const DramTensor& Context::tensor(const std::string& name) const {
  auto it = tensors.find(name);
  if (it == tensors.end()) throw std::logic_error("backend: value '" + name + "' has no DRAM placement");
  return it->second;
}

namespace {
Instruction make(Opcode op, uint32_t layer) {
  Instruction i;
  i.opcode = op;
  i.set(Field::kLayer, layer);
  return i;
}
}  // namespace

namespace {
// The DRAM bytes a box touches, first to last (strides are unsigned), as one range; with the range the
// caller names (a tensor's), the hull of both, so it never misses a byte. A load then waits only for
// the stores it overlaps, not for every store to its tensor (the next layer's first tiles load while
// this layer's last ones are still being stored).
Range box_range(const Range& named, uint64_t addr, isa::DType t, const std::array<int64_t, 4>& s,
                const std::array<int64_t, 3>& st) {
  const int64_t last = (s[0] - 1) + (s[1] - 1) * st[0] + (s[2] - 1) * st[1] + (s[3] - 1) * st[2];
  const uint64_t end = addr + static_cast<uint64_t>((last + 1) * isa::dtype_bytes(t));
  if (addr >= named.begin && end <= named.end) return Range{named.space, addr, end};
  return Range{named.space, std::min(addr, named.begin), std::max(end, named.end)};
}
}  // namespace

int Context::load(isa::Buffer buf, uint64_t sram, const Range& dram_range, uint64_t dram_addr, isa::DType t,
                  std::array<int64_t, 4> s, std::array<int64_t, 3> st, std::array<int64_t, 4> pads,
                  int64_t pad_value) {
  // A LOAD that carries an affine map from its source (fusion/pre_affine.h).
  if (fusion.pre_affine.node >= 0 && load_pre_affine(*this, buf, sram, dram_range, dram_addr, t, s, st, pads))
    return static_cast<int>(em.size()) - 1;
  // A LOAD whose tile's rows a LayerNorm normalises (fusion/pre_norm.h).
  if (fusion.pre_norm.node >= 0 && load_pre_norm(*this, buf, sram, dram_range, dram_addr, t, s, st, pads))
    return static_cast<int>(em.size()) - 1;
  // A LOAD whose tile a max pool fills from its input's window (fusion/pre_pool.h).
  if (fusion.pre_pool.node >= 0 && load_pre_pool(*this, buf, sram, dram_range, dram_addr, t, s, st, pads))
    return static_cast<int>(em.size()) - 1;
  // A LOAD whose tile an SE block's scale multiplies (fusion/pre_scale.h).
  if (fusion.pre_scale.node >= 0 && load_pre_scale(*this, buf, sram, dram_range, dram_addr, t, s, st, pads))
    return static_cast<int>(em.size()) - 1;
  // A LOAD whose tile a graph input's layout change fills from its NCHW planes (fusion/pre_transpose.h).
  if (fusion.pre_transpose.node >= 0 &&
      load_pre_transpose(*this, buf, sram, dram_range, dram_addr, t, s, st, pads, pad_value))
    return static_cast<int>(em.size()) - 1;
  for (OnChipValue* v : {&fusion.on_chip, &fusion.residual}) {
    if (v->pending && dram_range.begin < v->dram.end && v->dram.begin < dram_range.end) spill(*v);
  }
  Instruction i = make(Opcode::kLoad, layer);
  i.set(Field::kDtype, static_cast<int64_t>(t)).set(Field::kBuf, static_cast<int64_t>(buf));
  i.set(Field::kDramAddr, static_cast<int64_t>(dram_addr)).set(Field::kSramAddr, static_cast<int64_t>(sram));
  i.set(Field::kSize0, s[0]).set(Field::kSize1, s[1]).set(Field::kSize2, s[2]).set(Field::kSize3, s[3]);
  i.set(Field::kStride1, st[0]).set(Field::kStride2, st[1]).set(Field::kStride3, st[2]);
  i.set(Field::kPadTop, pads[0]).set(Field::kPadBottom, pads[1]).set(Field::kPadLeft, pads[2]);
  i.set(Field::kPadRight, pads[3]).set(Field::kPadValue, pad_value);
  const uint64_t bytes = static_cast<uint64_t>(s[0] * (s[1] + pads[2] + pads[3]) *
                                               (s[2] + pads[0] + pads[1]) * s[3] * isa::dtype_bytes(t));
  // Data segments are never written while the program runs: reading them needs no dependency (and
  // tracking every weight tile would only grow the emitter's history).
  const bool constant = dram_range.begin >= data_base_ && dram_range.begin < scratch_base_;
  if (constant) return em.emit(i, {}, {Range{static_cast<int>(buf), sram, sram + bytes}});
  return em.emit(i, {box_range(dram_range, dram_addr, t, s, st)},
                 {Range{static_cast<int>(buf), sram, sram + bytes}});
}

int Context::store(isa::Buffer buf, uint64_t sram, const Range& dram_range, uint64_t dram_addr, isa::DType t,
                   std::array<int64_t, 4> s, std::array<int64_t, 3> st) {
  // A STORE that carries an affine map into its reader's output (fusion/post_affine.h).
  if (fusion.post_affine.bn >= 0 && store_post_affine(*this, buf, sram, dram_range, dram_addr, t, s, st))
    return static_cast<int>(em.size()) - 1;
  // An SE pool summing the tile first (fusion/store_pool.h).
  if (fusion.store_pool.pool >= 0) store_pool(*this, buf, sram, dram_range, dram_addr, t, s, st);
  Instruction i = make(Opcode::kStore, layer);
  i.set(Field::kDtype, static_cast<int64_t>(t)).set(Field::kBuf, static_cast<int64_t>(buf));
  i.set(Field::kDramAddr, static_cast<int64_t>(dram_addr)).set(Field::kSramAddr, static_cast<int64_t>(sram));
  i.set(Field::kSize0, s[0]).set(Field::kSize1, s[1]).set(Field::kSize2, s[2]).set(Field::kSize3, s[3]);
  i.set(Field::kStride1, st[0]).set(Field::kStride2, st[1]).set(Field::kStride3, st[2]);
  const uint64_t bytes = static_cast<uint64_t>(s[0] * s[1] * s[2] * s[3] * isa::dtype_bytes(t));
  return em.emit(i, {Range{static_cast<int>(buf), sram, sram + bytes}},
                 {box_range(dram_range, dram_addr, t, s, st)});
}

int Context::vec(const VecArgs& a) {
  Instruction i = make(Opcode::kVec, layer);
  i.set(Field::kVop, static_cast<int64_t>(a.op)).set(Field::kDtype, static_cast<int64_t>(a.in));
  i.set(Field::kDtypeOut, static_cast<int64_t>(a.out));
  i.set(Field::kSrc1Buf, static_cast<int64_t>(a.src1_buf))
      .set(Field::kSrc1Addr, static_cast<int64_t>(a.src1));
  i.set(Field::kDstBuf, static_cast<int64_t>(a.dst_buf)).set(Field::kDstAddr, static_cast<int64_t>(a.dst));
  i.set(Field::kD0, a.d0).set(Field::kD1, a.d1).set(Field::kD2, a.d2);
  i.set(Field::kImm0, a.imm0).set(Field::kImm1, a.imm1).set(Field::kImm2, a.imm2);
  const int64_t in_es = isa::dtype_bytes(a.in), out_es = isa::dtype_bytes(a.out);
  const int64_t n = a.d0 * a.d1 * a.d2;
  std::vector<Range> reads = {
      Range{static_cast<int>(a.src1_buf), a.src1, a.src1 + static_cast<uint64_t>(n * in_es)}};
  int64_t dst_elems = n;
  const bool binary = a.op == isa::VecOp::kAdd || a.op == isa::VecOp::kSub || a.op == isa::VecOp::kMul ||
                      a.op == isa::VecOp::kDiv || a.op == isa::VecOp::kMax || a.op == isa::VecOp::kMin ||
                      a.op == isa::VecOp::kPow;
  // src2's records (isa.h): binary ops read `in` elements; a per-channel REQUANTIZE int32 (multiplier,
  // shift) pairs; the output stage (bias, multiplier, shift) int32 triples, or fp32 biases for float sums.
  int64_t record = 0;
  if (binary) record = in_es;
  if (a.op == isa::VecOp::kRequantize && a.bcast != isa::Bcast::kNone) record = 8;
  if (a.op == isa::VecOp::kOutput) record = isa::numerics::is_integer(a.in) ? 12 : 4;
  if (a.op == isa::VecOp::kLut) record = 1;  // the 256 table entries, whatever the box
  if (a.op == isa::VecOp::kDwConv) record = isa::dtype_bytes(isa::numerics::weight_dtype(a.in));
  if (record > 0) {
    i.set(Field::kSrc2Buf, static_cast<int64_t>(a.src2_buf))
        .set(Field::kSrc2Addr, static_cast<int64_t>(a.src2));
    i.set(Field::kBcast, static_cast<int64_t>(a.bcast));
    int64_t n2 = n;
    switch (a.bcast) {
      case isa::Bcast::kScalar:
        n2 = 1;
        break;
      case isa::Bcast::kRow:
        n2 = a.d0;
        break;
      case isa::Bcast::kCol:
        n2 = a.d1 * a.d2;
        break;
      case isa::Bcast::kNone:
        break;
    }
    if (a.op == isa::VecOp::kLut) n2 = a.in == isa::DType::kInt16 ? a.imm1 : isa::kLutEntries;
    if (a.op == isa::VecOp::kDwConv) n2 = a.win_h * a.win_w * a.d0;  // the weights [win_h][win_w][d0]
    reads.push_back(Range{static_cast<int>(a.src2_buf), a.src2, a.src2 + static_cast<uint64_t>(n2 * record)});
  }
  if (a.op == isa::VecOp::kMaxPool || a.op == isa::VecOp::kAvgPool || a.op == isa::VecOp::kDwConv) {
    i.set(Field::kWinH, a.win_h)
        .set(Field::kWinW, a.win_w)
        .set(Field::kStrH, a.str_h)
        .set(Field::kStrW, a.str_w);
    // A dwconv's reach with its dilation (imm0 x imm1, 0 = 1).
    const int64_t dh = a.op == isa::VecOp::kDwConv ? std::max<int64_t>(1, a.imm0) : 1;
    const int64_t dw = a.op == isa::VecOp::kDwConv ? std::max<int64_t>(1, a.imm1) : 1;
    const int64_t rh = (a.win_h - 1) * dh + 1, rw = (a.win_w - 1) * dw + 1;
    dst_elems = ((a.d2 - rh) / a.str_h + 1) * ((a.d1 - rw) / a.str_w + 1) * a.d0;
  } else if (a.op == isa::VecOp::kReduceSum || a.op == isa::VecOp::kReduceMax ||
             a.op == isa::VecOp::kReduceMean) {
    dst_elems = a.d1 * a.d2;
  }
  return em.emit(
      i, reads,
      {Range{static_cast<int>(a.dst_buf), a.dst, a.dst + static_cast<uint64_t>(dst_elems * out_es)}});
}

int Context::matmul(uint64_t a_addr, int64_t a_stride, uint64_t b_addr, uint64_t c_addr, int64_t m, int64_t k,
                    int64_t n, bool accumulate) {
  Instruction i = make(Opcode::kMatmul, layer);
  i.set(Field::kDtype, static_cast<int64_t>(act)).set(Field::kAAddr, static_cast<int64_t>(a_addr));
  i.set(Field::kAStride, a_stride).set(Field::kBAddr, static_cast<int64_t>(b_addr));
  i.set(Field::kCAddr, static_cast<int64_t>(c_addr)).set(Field::kM, m).set(Field::kK, k).set(Field::kN, n);
  i.set(Field::kAccumulate, accumulate ? 1 : 0);
  const uint64_t es = static_cast<uint64_t>(esize);
  const auto ew = static_cast<uint64_t>(isa::dtype_bytes(isa::numerics::weight_dtype(act)));
  const auto ec = static_cast<uint64_t>(isa::dtype_bytes(isa::numerics::accumulator_dtype(act)));
  const uint64_t a_bytes =
      (static_cast<uint64_t>(m - 1) * static_cast<uint64_t>(a_stride) + static_cast<uint64_t>(k)) * es;
  const Range c{static_cast<int>(isa::Buffer::kAccumulator), c_addr,
                c_addr + static_cast<uint64_t>(m * n) * ec};
  std::vector<Range> reads = {
      Range{static_cast<int>(isa::Buffer::kInput), a_addr, a_addr + a_bytes},
      Range{static_cast<int>(isa::Buffer::kWeight), b_addr, b_addr + static_cast<uint64_t>(k * n) * ew}};
  if (accumulate) reads.push_back(c);
  return em.emit(i, reads, {c});
}

int Context::conv(uint64_t a_addr, uint64_t b_addr, uint64_t c_addr, int64_t in_h, int64_t in_w, int64_t in_c,
                  int64_t out_h, int64_t out_w, int64_t n, int64_t kh, int64_t kw, int64_t sh, int64_t sw,
                  int64_t dh, int64_t dw, bool accumulate, int64_t a_stride, int64_t c_stride) {
  Instruction i = make(Opcode::kConv, layer);
  i.set(Field::kDtype, static_cast<int64_t>(act)).set(Field::kAAddr, static_cast<int64_t>(a_addr));
  i.set(Field::kBAddr, static_cast<int64_t>(b_addr)).set(Field::kCAddr, static_cast<int64_t>(c_addr));
  i.set(Field::kInH, in_h).set(Field::kInW, in_w).set(Field::kInC, in_c).set(Field::kOutH, out_h);
  i.set(Field::kOutW, out_w).set(Field::kN, n).set(Field::kKernelH, kh).set(Field::kKernelW, kw);
  i.set(Field::kStrideH, sh).set(Field::kStrideW, sw).set(Field::kDilationH, dh).set(Field::kDilationW, dw);
  i.set(Field::kAccumulate, accumulate ? 1 : 0).set(Field::kAStride, a_stride).set(Field::kCStride, c_stride);
  const uint64_t es = static_cast<uint64_t>(esize);
  const auto ew = static_cast<uint64_t>(isa::dtype_bytes(isa::numerics::weight_dtype(act)));
  const auto ec = static_cast<uint64_t>(isa::dtype_bytes(isa::numerics::accumulator_dtype(act)));
  const int64_t a_pitch = a_stride ? a_stride : in_c, c_pitch = c_stride ? c_stride : n;
  const Range c{static_cast<int>(isa::Buffer::kAccumulator), c_addr,
                c_addr + static_cast<uint64_t>((out_h * out_w - 1) * c_pitch + n) * ec};
  std::vector<Range> reads = {Range{static_cast<int>(isa::Buffer::kInput), a_addr,
                                    a_addr + static_cast<uint64_t>((in_h * in_w - 1) * a_pitch + in_c) * es},
                              Range{static_cast<int>(isa::Buffer::kWeight), b_addr,
                                    b_addr + static_cast<uint64_t>(kh * kw * in_c * n) * ew}};
  if (accumulate) reads.push_back(c);
  return em.emit(i, reads, {c});
}

}  // namespace npusim::compiler::backend
