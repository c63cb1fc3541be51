// A constant affine map applied in its producer's epilogue (post_affine.h).
#include "compiler/backend/fusion/post_affine.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "compiler/backend/fusion/layer_fusion.h"
#include "compiler/backend/memory/movement.h"
#include "compiler/passes/lowered.h"
#include "compiler/quant/precision.h"
#include "isa/numerics.h"
#include "isa/timing/units.h"

namespace npusim::compiler::backend {

using isa::Buffer;
using isa::DType;
using isa::VecOp;
using Mode = PostAffine::Mode;

namespace {

bool same(const Range& a, const Range& b) {
  return a.space == b.space && a.begin == b.begin && a.end == b.end;
}

bool uniform(const std::vector<float>& v) {
  return std::all_of(v.begin(), v.end(), [&](float x) { return x == v.front(); });
}

// Cycles the vector unit spends on `passes` VECs of op over n elements of type t (the cost model's figure).
double vec_pass_cycles(const Context& c, VecOp op, DType t, int64_t n, int passes) {
  isa::Instruction ins;
  ins.opcode = isa::Opcode::kVec;
  ins.set(isa::Field::kVop, static_cast<int64_t>(op)).set(isa::Field::kDtype, static_cast<int64_t>(t));
  ins.set(isa::Field::kDtypeOut, static_cast<int64_t>(t));
  const int64_t d0 = std::min<int64_t>(n, 4096);
  ins.set(isa::Field::kD0, d0).set(isa::Field::kD1, 1).set(isa::Field::kD2, 1);
  const double per = static_cast<double>(isa::timing::vec_cycles(ins, c.config.vector));
  return per * static_cast<double>(ceil_div(n, d0)) * passes;
}

// The int8 table: entry k is the code lower_batchnorm's VECs compute from y's code dtype_min + k (the
// centred code as fp32, times mul, plus add, each rounded to fp32, clamped, converted to z's codes).
std::vector<uint8_t> code_table(const quant::AffineArith& ar, const quant::QParams& qy,
                                const quant::QParams& qz) {
  std::vector<uint8_t> t(static_cast<size_t>(isa::kLutEntries));
  const int64_t lo = isa::numerics::dtype_min(qy.dtype);
  for (int64_t k = 0; k < isa::kLutEntries; ++k) {
    const float d = static_cast<float>(lo + k - qy.zero_point);
    const float p = d * ar.mul[0];
    const float u = p + ar.add[0];
    const int64_t q = isa::numerics::float_to_int(std::min(std::max(u, ar.lo), ar.hi), qz.dtype);
    t[static_cast<size_t>(k)] = static_cast<uint8_t>(q & 0xff);  // the code's byte, int8 or uint8
  }
  return t;
}

// The map's VECs over a d2 x d1 x d0 box of type t at `at` in `buf` whose rows start at channel ch (row
// mode): what the map's own lowering runs on the same values.
void apply_map(Context& c, const PostAffine& p, Buffer buf, uint64_t at, DType t, int64_t d0, int64_t d1,
               int64_t d2, int64_t ch) {
  Context::VecArgs v;
  v.in = v.out = t, v.src1_buf = v.dst_buf = buf, v.src1 = v.dst = at;
  v.d0 = d0, v.d1 = d1, v.d2 = d2, v.src2_buf = Buffer::kAccumulator;
  if (p.mode == Mode::kLut) {
    v.op = VecOp::kLut, v.src2 = p.params;
    c.vec(v);
    return;
  }
  const uint64_t off = p.mode == Mode::kRow ? static_cast<uint64_t>(ch * isa::dtype_bytes(t)) : 0;
  v.bcast = p.mode == Mode::kRow ? isa::Bcast::kRow : isa::Bcast::kScalar;
  v.op = VecOp::kMul, v.src2 = p.params + off;
  c.vec(v);
  v.op = VecOp::kAdd, v.src2 = p.shift_at + off;
  c.vec(v);
}

}  // namespace

int64_t post_affine_candidate(const Graph& g, size_t i) {
  const Node& n = g.nodes[i];
  if (n.attr_string(kPlacement, "") != "matrix" || n.outputs.size() != 1 || n.outputs[0].empty()) return -1;
  const std::string& yv = n.outputs[0];
  if (std::find(g.outputs.begin(), g.outputs.end(), yv) != g.outputs.end()) return -1;
  const std::vector<int> readers = g.consumers(yv);
  if (readers.size() != 1 || readers[0] <= static_cast<int>(i)) return -1;
  const Node& bn = g.nodes[static_cast<size_t>(readers[0])];
  if (bn.op_type != "BatchNormalization" || bn.outputs.empty() || bn.outputs[0].empty() ||
      bn.inputs[0] != yv || bn.has_attr(kActivation) || !batchnorm_affine(g, bn))
    return -1;
  for (size_t r = 1; r < bn.outputs.size(); ++r)
    if (!bn.outputs[r].empty() && !g.consumers(bn.outputs[r]).empty()) return -1;
  return readers[0];
}

void plan_post_affine(Context& c, size_t i) {
  if (c.fusion.post_affine.taken) return;  // a map taken by an earlier layer, its own layer still ahead
  c.fusion.post_affine = PostAffine{};
  const Graph& g = c.g;
  const Node& n = g.nodes[i];
  if (!c.options.keep_on_chip || g.nhwc_io || c.shared_capacity() > 0 || n.outputs.size() != 1) return;
  const std::string& yv = n.outputs[0];
  const int64_t cand = post_affine_candidate(g, i);
  if (cand < 0 || c.fusion.keep_output == yv || !c.tensors.count(yv)) return;
  const size_t k = static_cast<size_t>(cand);
  const Node& bn = g.nodes[k];
  // Its output through a line buffer: only to the depthwise conv that reads the map's output, the map
  // applied to each tile written there (layer_fusion.h).
  const bool line_buffer = c.fusion.conv_pool != nullptr;
  if (line_buffer && (c.fusion.conv_pool->conv != i || c.fusion.conv_pool->pool != k + 1)) return;
  if (!c.tensors.count(bn.outputs[0]) || c.folding.folded(bn) || c.views.folds(bn)) return;
  if (const LayerMapping* m = c.options.mapping ? c.options.mapping->find(bn.name) : nullptr;
      m &&
      (m->has_tiling() || m->has_vector_tiling() || (m->placement && *m->placement != Placement::kNpuVector)))
    return;
  const std::optional<ChannelAffine> aff = batchnorm_affine(g, bn);
  const DramTensor& y = c.tensor(yv);
  const DramTensor& z = c.tensor(bn.outputs[0]);
  if (!aff || y.strided() || z.strided() || y.phys != z.phys || y.dtype != z.dtype || y.shape.size() != 4 ||
      !y.nhwc_in_memory() || y.shape[0] != 1)
    return;
  const int64_t channels = y.shape[1];
  PostAffine p;
  p.bn = static_cast<int64_t>(k);
  p.producer = static_cast<uint32_t>(i);
  p.y = y.range(), p.z = z.range();
  p.channels = channels;
  p.bytes = static_cast<int64_t>(y.bytes);
  // # int8: codes of y in and codes of z out, the table of the 256 codes (uniform constants only).
  const quant::QParams* qy = nullptr;
  const quant::QParams* qz = nullptr;
  if (c.options.plan) {
    const auto a = c.options.plan->values.find(yv), b = c.options.plan->values.find(bn.outputs[0]);
    if (a != c.options.plan->values.end()) qy = &a->second;
    if (b != c.options.plan->values.end()) qz = &b->second;
  }
  const bool codes = isa::numerics::is_integer(y.dtype);
  quant::AffineArith ar;
  std::vector<uint8_t> table;
  if (codes) {
    if (!qy || !qz || qy->dtype != y.dtype || qz->dtype != z.dtype || y.dtype == DType::kInt16) return;
    ar = quant::affine_arith(aff->scale, aff->shift, qy, qz, "", -INFINITY, INFINITY);
    if (!ar.codes_out || !uniform(ar.mul) || !uniform(ar.add)) return;
    p.mode = Mode::kLut;
    table = code_table(ar, *qy, *qz);
  } else {
    if (y.dtype != c.act || qy || qz) return;
    ar = quant::affine_arith(aff->scale, aff->shift, nullptr, nullptr, "", -INFINITY, INFINITY);
    p.mode = uniform(ar.mul) && uniform(ar.add) ? Mode::kScalar : Mode::kRow;
  }
  // The cost model: the VECs the producer takes on against the map's own read and write of y.
  const int64_t elems = num_elements(y.shape);
  const double vec = p.mode == Mode::kLut ? vec_pass_cycles(c, VecOp::kLut, y.dtype, elems, 1)
                                          : vec_pass_cycles(c, VecOp::kMul, y.dtype, elems, 2);
  const double dram =
      c.dram_bytes_per_cycle > 0 ? 2.0 * static_cast<double>(p.bytes) / c.dram_bytes_per_cycle : 0.0;
  if (vec >= dram) return;
  const int64_t es = isa::dtype_bytes(y.dtype);
  const int64_t vector_bytes = p.mode == Mode::kRow ? round64(channels * es) : 64;
  p.reserved = p.mode == Mode::kLut ? round64(isa::kLutEntries) : 2 * vector_bytes;
  // The constants at the top of the accumulator (a line buffer's sums go below them: layer_fusion.h).
  p.line_buffer = line_buffer;
  const int64_t cap = c.capacity(Buffer::kAccumulator);
  if (p.reserved * 8 > cap) return;
  p.params = static_cast<uint64_t>(cap - p.reserved) / 64 * 64;
  p.shift_at = p.params + static_cast<uint64_t>(vector_bytes);
  // The constants, loaded once for the producer's tiles.
  if (p.mode == Mode::kLut) {
    const uint64_t at = c.add_data(std::move(table));
    c.load(Buffer::kAccumulator, p.params, Range{kDram, at, at + isa::kLutEntries}, at, y.dtype,
           {isa::kLutEntries, 1, 1, 1}, {0, 0, 0});
  } else {
    const int64_t n_vals = p.mode == Mode::kRow ? channels : 1;
    const std::vector<float> mul(ar.mul.begin(), ar.mul.begin() + n_vals);
    const std::vector<float> add(ar.add.begin(), ar.add.begin() + n_vals);
    const auto bytes = static_cast<uint64_t>(n_vals * es);
    const uint64_t m_at = c.add_floats(mul, c.act), a_at = c.add_floats(add, c.act);
    c.load(Buffer::kAccumulator, p.params, Range{kDram, m_at, m_at + bytes}, m_at, c.act, {n_vals, 1, 1, 1},
           {0, 0, 0});
    c.load(Buffer::kAccumulator, p.shift_at, Range{kDram, a_at, a_at + bytes}, a_at, c.act, {n_vals, 1, 1, 1},
           {0, 0, 0});
  }
  c.fusion.acc_reserved += p.reserved;
  c.fusion.post_affine = p;
}

bool store_post_affine(Context& c, Buffer buf, uint64_t sram, const Range& dram_range, uint64_t dram_addr,
                       DType t, const std::array<int64_t, 4>& s, const std::array<int64_t, 3>& st) {
  PostAffine& p = c.fusion.post_affine;
  if (p.bn < 0 || p.producer != c.layer || !same(dram_range, p.y)) return false;
  // (With a line buffer, a STORE of y is the conv lowered whole: its tiles were not mapped on chip.)
  const int64_t es = isa::dtype_bytes(t);
  auto apply = [&](uint64_t at, int64_t d0, int64_t d1, int64_t d2, int64_t ch) {
    apply_map(c, p, buf, at, t, d0, d1, d2, ch);
  };
  const int64_t e0 = static_cast<int64_t>(dram_addr - p.y.begin) / es, M = p.channels;
  const int64_t plane = s[0] * s[1] * s[2];
  const bool rows_aligned =
      (s[1] == 1 || st[0] % M == 0) && (s[2] == 1 || st[1] % M == 0) && (s[3] == 1 || st[2] % M == 0);
  const int64_t n0 = e0 % M;
  for (int64_t i3 = 0; i3 < s[3]; ++i3) {
    const uint64_t at = sram + static_cast<uint64_t>(i3 * plane * es);
    if (p.mode != Mode::kRow || (rows_aligned && n0 + s[0] <= M)) {
      apply(at, s[0], s[1], s[2], n0);
    } else if (rows_aligned && n0 == 0 && s[0] % M == 0) {  // rows of whole pixels
      apply(at, M, s[0] / M * s[1], s[2], 0);
    } else {  // any other box: each row cut where the channels wrap
      for (int64_t i2 = 0; i2 < s[2]; ++i2) {
        for (int64_t i1 = 0; i1 < s[1]; ++i1) {
          const int64_t row = e0 + i1 * st[0] + i2 * st[1] + i3 * st[2];
          const uint64_t row_at = at + static_cast<uint64_t>((i2 * s[1] + i1) * s[0] * es);
          for (int64_t x = 0; x < s[0];) {
            const int64_t ch = (row + x) % M, len = std::min(s[0] - x, M - ch);
            apply(row_at + static_cast<uint64_t>(x * es), len, 1, 1, ch);
            x += len;
          }
        }
      }
    }
  }
  ++p.stores;
  c.store(buf, sram, p.z, p.z.begin + (dram_addr - p.y.begin), t, s, st);
  return true;
}

bool post_affine_on_chip(Context& c, uint64_t at, DType t, int64_t rows, int64_t row_pitch, int64_t pixels,
                         int64_t pixel_pitch, int64_t ch0, int64_t channels) {
  PostAffine& p = c.fusion.post_affine;
  if (p.bn < 0 || !p.line_buffer || p.producer != c.layer) return false;
  const int64_t es = isa::dtype_bytes(t);
  for (int64_t r = 0; r < rows; ++r) {
    const uint64_t row = at + static_cast<uint64_t>(r * row_pitch * es);
    if (channels == pixel_pitch) {  // the row's pixels whole: one box
      if (p.mode == Mode::kRow || pixels * channels > kMaxDim)
        apply_map(c, p, Buffer::kInput, row, t, channels, pixels, 1, 0);
      else
        apply_map(c, p, Buffer::kInput, row, t, pixels * channels, 1, 1, 0);
      continue;
    }
    for (int64_t x = 0; x < pixels; ++x)
      apply_map(c, p, Buffer::kInput, row + static_cast<uint64_t>(x * pixel_pitch * es), t, channels, 1, 1,
                ch0);
  }
  ++p.stores;
  return true;
}

void finish_post_affine(Context& c, size_t i, const LayerPlan& plan) {
  PostAffine& p = c.fusion.post_affine;
  if (p.bn < 0 || p.producer != i) return;
  c.fusion.acc_reserved -= p.reserved;
  p.reserved = 0;
  p.taken =
      p.stores > 0 && (plan.placement == Placement::kNpuMatrix || plan.placement == Placement::kNpuVector);
  if (!p.taken) {
    c.fusion.post_affine = PostAffine{};
    return;
  }
  c.fusion.unwritten.insert(c.g.nodes[i].outputs[0]);
}

bool written_nowhere(const Context& c, const std::string& v) { return c.fusion.unwritten.count(v) != 0; }

bool post_affine_member(Context& c, size_t i, LayerPlan& plan) {
  const PostAffine p = c.fusion.post_affine;
  if (!p.taken || p.bn != static_cast<int64_t>(i)) return false;
  c.fusion.post_affine = PostAffine{};
  const std::string& producer = c.g.nodes[p.producer].name;
  plan.mapping = fmt::format(
      "{} in the epilogue of '{}' (each of its output tiles mapped in place before its STORE, which writes "
      "this layer's output: its own output never goes to DRAM)",
      p.mode == Mode::kLut   ? "VEC lut (the affine map's 256 codes, one table)"
      : p.mode == Mode::kRow ? "VEC mul + add bcast row (per-channel affine)"
                             : "VEC mul + add bcast scalar (affine)",
      producer);
  if (p.mode == Mode::kLut) plan.int8_scheme = "integer";
  plan.fused_into = producer;
  plan.on_chip_input = c.g.nodes[i].inputs[0];
  plan.on_chip_bytes_saved = 2 * p.bytes;
  plan.fusion_group = "post_affine:" + producer;
  return true;
}

}  // namespace npusim::compiler::backend
