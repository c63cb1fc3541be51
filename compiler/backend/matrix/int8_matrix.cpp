// INT8 matrix nodes (see int8.h): the int8 job and strategy for the shared tiling search and walk
// (matrix_walk.h), and lower_matrix_int8.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <optional>

#include "compiler/backend/fusion/layer_fusion.h"
#include "compiler/backend/fusion/pre_norm.h"
#include "compiler/backend/fusion/project_tail.h"
#include "compiler/backend/fusion/residency.h"
#include "compiler/backend/fusion/siblings.h"
#include "compiler/backend/int8/int8.h"
#include "compiler/backend/matrix/depthwise.h"
#include "compiler/backend/matrix/matrix_walk.h"
#include "compiler/backend/matrix/pixel_packing.h"
#include "compiler/backend/memory/movement.h"
#include "compiler/ops/conv_transpose.h"
#include "compiler/passes/lowered.h"
#include "compiler/quant/precision.h"
#include "compiler/quant/quantize.h"

namespace npusim::compiler::backend {

using isa::Buffer;
using isa::DType;
using isa::VecOp;
using quant::Precision;
using quant::QParams;

namespace {

// An int8 matrix node: the shared job plus its int8 weights, the quantization constants of its
// epilogue and its output side.
struct Int8Job : MatrixJob {
  DType a_dt = DType::kUint8, y_dt = DType::kUint8, r_dt = DType::kUint8;
  int32_t a_zp = 0, y_zp = 0;
  uint64_t y_addr = 0, r_addr = 0;
  int64_t y_img = 0;        // elements per output image (of the residual; of the output unless it is a view)
  int64_t y_view_img = -1;  // an output view's elements per image (-1: y_img)
  Range r_range;
  std::vector<int8_t> w;   // [g][kh][kw][cg][mg]
  uint64_t bias_addr = 0;  // int32 [M] (bias_folded)
  uint64_t rq_addr = 0;    // int32 pairs [M][2]
  // Neither a residual nor the float epilogue: bias, requantization and clamp are one output-stage VEC
  // (isa::VecOp::kOutput) reading int32 triples [M][3] (bias_folded, multiplier, shift) at out_addr.
  bool output_stage = false;
  uint64_t out_addr = 0;
  Context::VecArgs out_vec;  // output_stage_vec
  bool residual = false;
  // The residual's codes -> the sums' grid in one output-stage VEC reading int32 triples [M][3] (-zero
  // point, multiplier, shift) at rr_addr (int32 sums); else a SUB of the zero point and a REQUANTIZE by
  // the pairs [M][2] at rr_addr (int64 sums, whose requantize is the 64-bit one).
  bool residual_stage = false;
  uint64_t rr_addr = 0;
  int64_t rr_record() const { return residual_stage ? 12 : 8; }
  // A lookup-table epilogue (quant::LayerQuant::lut_epilogue): the requantize writes the pre-activation's
  // codes (pre_dt), then one VEC lut with the table at lut_addr (lut_entries codes of y_dt). int16 pre codes
  // (quant::refined_table_grid): the table's first code is lut_base, the requantize clamps to its window.
  bool lut = false;
  DType pre_dt = DType::kUint8;
  int32_t pre_zp = 0;
  uint64_t lut_addr = 0;
  int64_t lut_entries = isa::kLutEntries;
  int32_t lut_base = 0;
  bool lut16() const { return lut && pre_dt == DType::kInt16; }
  bool float_epi = false;
  uint64_t accscale_addr = 0;  // fp32 [M]
  VecOp act = VecOp::kCopy;
  int64_t act_imm0 = 0, act_imm1 = 0;
  bool silu = false;  // act = x * sigmoid(x): sigmoid into a scratch tile, then the multiply
  bool clamp = false;
  int32_t clamp_min = 0, clamp_max = 0;
  uint64_t k_addr = 0;  // constants: [0] residual zp, [1] y scale (fp32), [2] y zp
  // A block's layer scale and residual after the codes (backend/fusion/project_tail.h): the Mul's and the
  // Add's conversions and VECs on each tile, the Add's codes (tail_y_dt) stored at y_addr.
  bool tail = false;
  uint64_t tail_scale_addr = 0;  // fp32 [M]
  uint64_t tail_k_addr = 0;      // 3 x 16 bytes of conversion constants: y -> Mul, Mul -> Add, residual
  uint64_t tail_r_addr = 0;
  Range tail_r_range;
  DType tail_mul_dt = DType::kUint8, tail_r_dt = DType::kUint8, tail_y_dt = DType::kUint8;
  std::optional<quant::IntegerAdd> tail_iadd;  // the Add's integer scheme, if its layer takes it
  isa::numerics::QuantizedMultiplier tail_mul_rescale, tail_res_rescale;
  int32_t tail_y_zp = 0;
  bool tail_clip = false;
};

// Moves the job's output and residual to image img's element `elems` on (JobBands' project bands,
// backend/fusion/layer_fusion.h: a dense output, not a view).
void shift_output(Int8Job& j, int64_t img, int64_t elems, int64_t /*es*/) {
  j.y_addr += static_cast<uint64_t>((img * j.y_img + elems) * isa::dtype_bytes(j.y_dt));
  j.r_addr += static_cast<uint64_t>((img * j.y_img + elems) * isa::dtype_bytes(j.r_dt));
  j.tail_r_addr += static_cast<uint64_t>((img * j.y_img + elems) * isa::dtype_bytes(j.tail_r_dt));
}

// Codes as operands (A's dtype, int8 weights, halo = A's zero point), int32 sums, and the integer
// epilogue: + bias_folded, the rescaled residual, REQUANTIZE and the clamp (or the float epilogue).
class Int8Strategy : public MatrixStrategy {
 public:
  Int8Strategy(Context& c, const Int8Job& j)
      : c_(c), j_(j), acc_dt_(isa::numerics::accumulator_dtype(j.a_dt)), ab_(isa::dtype_bytes(acc_dt_)) {
    ops.a = j.a_dt;
    ops.w = DType::kInt8;
    ops.y = j.y_dt;
    ops.tile_read = j.residual || j.tail;
    ops.r = j.r_dt;
    // Padding is the input's zero point: (pad - zp) * w = 0, as the quantized reference assumes.
    ops.pad = j.a_zp;
  }

  // Accumulator: 64 bytes of constants, then per ping-pong side C (int32; int64 for int16 inputs), bias
  // (C's type), requant pairs, residual (C's type), residual pairs, acc_scale.
  int64_t acc_bytes(int64_t p, int64_t tn, int sides) const override {
    int64_t b =
        round64(p * tn * ab_) + (j_.output_stage ? round64(tn * 12) : round64(tn * ab_) + round64(tn * 8));
    if (j_.residual) b += round64(p * tn * ab_) + round64(tn * j_.rr_record());
    if (j_.float_epi) b += round64(tn * 4);
    if (j_.silu) b += round64(p * tn * 4);
    if (j_.tail) b += round64(tn * 4) + round64(p * tn * 4);
    if (j_.y_rows) b += round64(p * tn * isa::dtype_bytes(j_.y_dt));  // the transposed tile
    return 64 + (j_.lut ? round64(j_.lut_entries) : 0) + (j_.tail ? 64 : 0) + sides * b;
  }

  // The residual's passes: to the sums' grid (one output stage, or a SUB and a REQUANTIZE), then the add.
  int residual_ops() const { return j_.residual ? (j_.residual_stage ? 2 : 3) : 0; }

  int epilogue_ops() const override {
    if (j_.output_stage) return (j_.lut ? 2 : 1) + residual_ops() + (j_.tail ? 12 : 0) + (j_.y_rows ? 1 : 0);
    int ops = j_.lut ? (j_.lut16() ? 4 : 3) : 2;  // bias, requantize (, the int16 window's clip, lut)
    ops += residual_ops();
    if (j_.clamp) ops += 1;
    if (j_.float_epi) ops += 4;
    if (j_.silu) ops += 1;
    if (j_.tail) ops += 12;   // the Mul's dequantize, mul, quantize; the Add's two dequantizes, add, quantize
    if (j_.y_rows) ops += 1;  // the transpose
    return ops;
  }

  int64_t side_bytes(int64_t p, int64_t tn, int sides) const override {
    return sides * (round64(p * tn * ab_) * (j_.residual ? 1 : 0) + round64(p * tn * 4) * (j_.silu ? 1 : 0) +
                    (j_.tail ? round64(p * tn * 4) : 0));
  }

  std::vector<int64_t> param_loads(int64_t tn) const override {
    std::vector<int64_t> v = {tn, j_.float_epi ? tn : 2 * tn};  // bias; requantization pairs or scales
    if (j_.output_stage) v = {3 * tn};
    if (j_.residual) v.push_back(j_.rr_record() / 4 * tn);
    if (j_.tail) v.push_back(tn);
    return v;
  }

  void allocate(SramAlloc& acc, SramAlloc& side, int64_t p_max, int64_t tn, int sides) override {
    side_buf_ = side.buf;
    params_.reset();
    kslot_ = acc.take(64);
    if (j_.lut) {
      const auto entries = static_cast<uint64_t>(j_.lut_entries);
      lut_slot_ = acc.take(static_cast<uint64_t>(round64(j_.lut_entries)));
      c_.load(Buffer::kAccumulator, lut_slot_, Range{kDram, j_.lut_addr, j_.lut_addr + entries}, j_.lut_addr,
              j_.y_dt, {j_.lut_entries, 1, 1, 1}, {0, 0, 0});
    }
    for (int s = 0; s < sides; ++s) {
      side_[s].c = acc.take(static_cast<uint64_t>(p_max * tn * ab_));
      if (j_.output_stage) {
        side_[s].bias = acc.take(static_cast<uint64_t>(tn * 12));  // the output stage's triples
      } else {
        side_[s].bias = acc.take(static_cast<uint64_t>(tn * ab_));
        side_[s].rq = acc.take(static_cast<uint64_t>(tn * 8));
      }
      if (j_.residual) {
        side_[s].r = side.take(static_cast<uint64_t>(p_max * tn * ab_));
        side_[s].rr = acc.take(static_cast<uint64_t>(tn * j_.rr_record()));
      }
      if (j_.float_epi) side_[s].sc = acc.take(static_cast<uint64_t>(tn * 4));
      if (j_.silu) side_[s].t = side.take(static_cast<uint64_t>(p_max * tn * 4));
      if (j_.tail) {
        side_[s].ts = acc.take(static_cast<uint64_t>(tn * 4));
        side_[s].tr = side.take(static_cast<uint64_t>(p_max * tn * 4));
      }
      if (j_.y_rows) side_[s].x = acc.take(static_cast<uint64_t>(p_max * tn * isa::dtype_bytes(j_.y_dt)));
    }
    tail_params_.reset();
    if (j_.tail) {
      tail_k_ = acc.take(48);
      c_.load(Buffer::kAccumulator, tail_k_, Range{kDram, j_.tail_k_addr, j_.tail_k_addr + 48},
              j_.tail_k_addr, DType::kInt32, {12, 1, 1, 1}, {0, 0, 0});
    }
    c_.load(Buffer::kAccumulator, kslot_, Range{kDram, j_.k_addr, j_.k_addr + 12}, j_.k_addr, DType::kInt32,
            {3, 1, 1, 1}, {0, 0, 0});
  }

  uint64_t acc_slot(int side) const override { return side_[side].c; }

  uint64_t weight_tile(int64_t b, int64_t gb, int64_t k0, int64_t k1, int64_t n0, int64_t n1) override {
    if (c_.in_trial()) return c_.reserve_data(static_cast<uint64_t>(j_.kh * j_.kw * (k1 - k0) * (n1 - n0)));
    const std::vector<int8_t> v = weight_tile_values(j_, j_.w, b, gb, k0, k1, n0, n1);
    std::vector<uint8_t> bytes(v.size());
    if (!v.empty()) std::memcpy(bytes.data(), v.data(), v.size());
    return c_.add_data(std::move(bytes));
  }

  uint64_t depthwise_weights() override {
    if (c_.in_trial()) return c_.reserve_data(static_cast<uint64_t>(j_.kh * j_.kw * j_.groups));
    const std::vector<int8_t> v = depthwise_weight_values(j_, j_.w);
    std::vector<uint8_t> bytes(v.size());
    if (!v.empty()) std::memcpy(bytes.data(), v.data(), v.size());
    return c_.add_data(std::move(bytes));
  }

  void epilogue(const OutTile& t, int side) override {
    tail_side_ = side;
    const int64_t tn = t.tn, n0 = t.n0;
    // The tile's place in its side's tile-sized slots (an image of a tile of several: OutTile::acc_px).
    Side sd = side_[side];
    sd.c += static_cast<uint64_t>(t.acc_px * tn * ab_);
    sd.r += static_cast<uint64_t>(t.acc_px * tn * ab_);
    sd.t += static_cast<uint64_t>(t.acc_px * tn * 4);
    const uint64_t cs = sd.c, kslot = kslot_;
    const Buffer A = Buffer::kAccumulator;
    const int64_t yoff = t.img * j_.y_img + (t.oy0 * j_.OW + t.ox0) * j_.M + n0;  // the residual's
    const int64_t P = j_.out_pitch();
    const int64_t out_off =
        t.img * (j_.y_view_img >= 0 ? j_.y_view_img : j_.y_img) + t.oy0 * j_.out_row() + t.ox0 * P + n0;
    const std::array<int64_t, 4> box = {tn, t.ow, t.oh, 1};
    const std::array<int64_t, 3> strides = {j_.M, j_.OW * j_.M, 0};
    auto v = [&](VecOp op, DType in, DType out, uint64_t src1, uint64_t dst) {
      Context::VecArgs a;
      a.op = op, a.in = in, a.out = out;
      a.src1_buf = a.src2_buf = a.dst_buf = A;
      a.src1 = src1, a.dst = dst;
      tile_box(a, t);
      return a;
    };
    const Range seg{kDram, j_.bias_addr, j_.bias_addr + 1};
    // The per-channel vectors, unless this side already holds this tile's channels.
    const bool load = params_.need_load(side, n0, tn);
    // acc = sat32(acc + requantize(r - r.zp, residual_rescale, 0)) (int64 sums: in 64 bits).
    // Read where a residual hold keeps it (backend/fusion/residency.h), else loaded.
    const auto add_residual = [&] {
      const uint64_t raddr = j_.r_addr + static_cast<uint64_t>(yoff * isa::dtype_bytes(j_.r_dt));
      const std::optional<uint64_t> held = residual_in_sram(c_, j_.r_range, raddr, j_.r_dt, box, strides);
      if (!held) c_.load(side_buf_, sd.r, j_.r_range, raddr, j_.r_dt, box, strides);
      const int64_t rw = j_.rr_record() / 4;  // int32 words a channel's record
      if (load)
        c_.load(A, sd.rr, Range{kDram, j_.rr_addr, j_.rr_addr + 1},
                j_.rr_addr + static_cast<uint64_t>(n0 * rw * 4), DType::kInt32, {rw * tn, 1, 1, 1},
                {0, 0, 0});
      if (j_.residual_stage) {
        // One pass: sat32(r - r.zp), the per-channel requantize, no clip; the same numbers as the two.
        Context::VecArgs o = v(VecOp::kOutput, j_.r_dt, acc_dt_, held ? *held : sd.r, sd.r);
        o.src2 = sd.rr, o.bcast = isa::Bcast::kRow, o.imm2 = 0, o.dst_buf = side_buf_;
        o.src1_buf = held ? Buffer::kInput : side_buf_;
        o.imm0 = f32_imm(-std::numeric_limits<float>::infinity());
        o.imm1 = f32_imm(std::numeric_limits<float>::infinity());
        c_.vec(o);
      } else {
        Context::VecArgs sub = v(VecOp::kSub, j_.r_dt, acc_dt_, held ? *held : sd.r, sd.r);
        sub.src2 = kslot, sub.bcast = isa::Bcast::kScalar, sub.dst_buf = side_buf_;
        sub.src1_buf = held ? Buffer::kInput : side_buf_;
        c_.vec(sub);
        Context::VecArgs rq = v(VecOp::kRequantize, acc_dt_, acc_dt_, sd.r, sd.r);
        rq.src2 = sd.rr, rq.bcast = isa::Bcast::kRow, rq.imm2 = 0, rq.src1_buf = rq.dst_buf = side_buf_;
        c_.vec(rq);
      }
      Context::VecArgs radd = v(VecOp::kAdd, acc_dt_, acc_dt_, cs, cs);
      radd.src2 = sd.r, radd.src2_buf = side_buf_;
      c_.vec(radd);
    };
    if (j_.output_stage) {
      // The residual first, then bias, requantization and clamp in one pass: the same numbers as the
      // bias first, since no sum saturates in either order (Int8Job::output_stage).
      if (j_.residual) add_residual();
      if (load) {
        c_.load(A, sd.bias, Range{kDram, j_.out_addr, j_.out_addr + 1},
                j_.out_addr + static_cast<uint64_t>(n0 * 12), DType::kInt32, {3 * tn, 1, 1, 1}, {0, 0, 0});
      }
      Context::VecArgs o = j_.out_vec;
      o.in = acc_dt_;  // int64 sums of int16 inputs
      o.src1_buf = o.src2_buf = o.dst_buf = A;
      o.src1 = o.dst = cs, o.src2 = sd.bias;
      tile_box(o, t);
      if (!j_.lut) return finish(o, t, out_off, box);
      c_.vec(o);
      return finish(lut(cs, t), t, out_off, box);
    }
    // acc += bias_folded (per output channel, in C's type).
    if (load)
      c_.load(A, sd.bias, seg, j_.bias_addr + static_cast<uint64_t>(n0 * ab_), acc_dt_, {tn, 1, 1, 1},
              {0, 0, 0});
    Context::VecArgs add = v(VecOp::kAdd, acc_dt_, acc_dt_, cs, cs);
    add.src2 = sd.bias, add.bcast = isa::Bcast::kRow;
    c_.vec(add);
    if (j_.residual) add_residual();
    if (!j_.float_epi) {
      if (load)
        c_.load(A, sd.rq, seg, j_.rq_addr + static_cast<uint64_t>(n0 * 8), DType::kInt32, {2 * tn, 1, 1, 1},
                {0, 0, 0});
      Context::VecArgs rq = v(VecOp::kRequantize, acc_dt_, j_.lut ? j_.pre_dt : j_.y_dt, cs, cs);
      rq.src2 = sd.rq, rq.bcast = isa::Bcast::kRow, rq.imm2 = j_.lut ? j_.pre_zp : j_.y_zp;
      if (j_.lut) {
        c_.vec(rq);
        if (j_.lut16()) {  // int16 codes saturate to int16: clamp them to the table's window
          Context::VecArgs cl = v(VecOp::kClip, j_.pre_dt, j_.pre_dt, cs, cs);
          cl.imm0 = f32_imm(static_cast<float>(j_.lut_base));
          cl.imm1 = f32_imm(static_cast<float>(j_.lut_base + j_.lut_entries - 1));
          c_.vec(cl);
        }
        return finish(lut(cs, t), t, out_off, box);
      }
      if (!j_.clamp) return finish(rq, t, out_off, box);
      c_.vec(rq);
      Context::VecArgs cl = v(VecOp::kClip, j_.y_dt, j_.y_dt, cs, cs);
      cl.imm0 = f32_imm(static_cast<float>(j_.clamp_min));
      cl.imm1 = f32_imm(static_cast<float>(j_.clamp_max));
      return finish(cl, t, out_off, box);
    } else {
      // y = quantize(act(float(acc) * acc_scale)).
      c_.vec(v(VecOp::kCopy, acc_dt_, DType::kFp32, cs, cs));
      if (load)
        c_.load(A, sd.sc, seg, j_.accscale_addr + static_cast<uint64_t>(n0 * 4), DType::kFp32, {tn, 1, 1, 1},
                {0, 0, 0});
      Context::VecArgs mul = v(VecOp::kMul, DType::kFp32, DType::kFp32, cs, cs);
      mul.src2 = sd.sc, mul.bcast = isa::Bcast::kRow;
      c_.vec(mul);
      if (j_.silu) {
        Context::VecArgs sig = v(VecOp::kSigmoid, DType::kFp32, DType::kFp32, cs, sd.t);
        sig.dst_buf = side_buf_;
        c_.vec(sig);
        Context::VecArgs m = v(VecOp::kMul, DType::kFp32, DType::kFp32, cs, cs);
        m.src2 = sd.t, m.src2_buf = side_buf_;
        c_.vec(m);
      } else {
        Context::VecArgs act = v(j_.act, DType::kFp32, DType::kFp32, cs, cs);
        act.imm0 = j_.act_imm0, act.imm1 = j_.act_imm1;
        c_.vec(act);
      }
      Context::VecArgs div = v(VecOp::kDiv, DType::kFp32, DType::kInt32, cs, cs);
      div.src2 = kslot + 4, div.bcast = isa::Bcast::kScalar;
      c_.vec(div);
      Context::VecArgs zp = v(VecOp::kAdd, DType::kInt32, j_.y_dt, cs, cs);
      zp.src2 = kslot + 8, zp.bcast = isa::Bcast::kScalar;
      finish(zp, t, out_off, box);
    }
  }

  bool ends_with_vec() const override { return true; }

 private:
  // The table lookup of a lookup-table epilogue on the pre-activation codes at `slot` (in place).
  Context::VecArgs lut(uint64_t slot, const OutTile& t) const {
    Context::VecArgs l;
    l.op = VecOp::kLut, l.in = j_.pre_dt, l.out = j_.y_dt;
    if (j_.lut16()) l.imm0 = j_.lut_base, l.imm1 = j_.lut_entries;
    l.src1_buf = l.dst_buf = l.src2_buf = Buffer::kAccumulator;
    l.src1 = l.dst = slot, l.src2 = lut_slot_;
    tile_box(l, t);
    return l;
  }

  // The tile's last VEC `last` (writing the codes at its dst slot), then the STORE of that slot; or, with
  // MatrixJob::y_sram, `last` writing the tile where the next layer reads it (backend/fusion/residency.h).
  void finish(Context::VecArgs last, const OutTile& t, int64_t out_off, const std::array<int64_t, 4>& box) {
    if (j_.y_sram >= 0 && j_.tail) throw std::logic_error("backend: a project tail with an on-chip output");
    if (j_.y_sram >= 0) {
      write_on_chip(c_, j_, last, t, isa::dtype_bytes(j_.y_dt));
      if (!j_.y_store) return;
      last.dst_buf = Buffer::kInput;  // stored from there (MatrixJob::y_store)
      last.dst = static_cast<uint64_t>(j_.y_sram) +
                 j_.y_sram_offset(t.img, t.oy0, t.ox0, t.n0, isa::dtype_bytes(j_.y_dt));
    } else {
      c_.vec(last);
      if (j_.tail) tail(last, t, box);
    }
    const int64_t P = j_.out_pitch();
    const DType st = j_.tail ? j_.tail_y_dt : j_.y_dt;
    if (j_.y_rows) {  // (kernel column, channel, kernel row) -> kernel row outermost, then each row stored
      if (j_.y_sram >= 0 || j_.tail || t.tn != j_.M || t.n0 != 0)
        throw std::logic_error("backend: a one-job ConvTranspose tile without all its channels");
      const int64_t run = t.ow * P;  // one kernel row's codes of a row of the tile
      const uint64_t xs = side_[tail_side_].x + static_cast<uint64_t>(t.acc_px * t.tn * isa::dtype_bytes(st));
      Context::VecArgs tr;
      tr.op = VecOp::kTranspose, tr.in = tr.out = st;
      tr.src1_buf = last.dst_buf, tr.src1 = last.dst, tr.dst_buf = Buffer::kAccumulator, tr.dst = xs;
      tr.d0 = j_.y_rows, tr.d1 = run, tr.d2 = t.oh;
      c_.vec(tr);
      c_.store(Buffer::kAccumulator, xs, j_.y_range,
               j_.y_addr + static_cast<uint64_t>(out_off * isa::dtype_bytes(st)), st,
               {run, j_.y_rows, t.oh, 1}, {j_.out_row() / j_.y_rows, j_.out_row(), 0});
      return;
    }
    c_.store(last.dst_buf, last.dst, j_.y_range,
             j_.y_addr + static_cast<uint64_t>(out_off * isa::dtype_bytes(st)), st, box,
             {P, j_.out_row(), 0});
  }

  // The layer scale and the residual on the codes `last` wrote (fusion/project_tail.h), as the Mul's and the
  // Add's layers run them on codes (backend/vector/elementwise.cpp: dequantized in the tile loop, fp32 work,
  // quantized), each step in place where `last` wrote the tile (its slot holds the int32 sums: fp32 fits).
  void tail(const Context::VecArgs& last, const OutTile& t, const std::array<int64_t, 4>& box) {
    const Buffer A = Buffer::kAccumulator;
    const Side& sd = side_[tail_side_];
    const uint64_t at = static_cast<uint64_t>(t.acc_px * t.tn * 4);
    const uint64_t cs = last.dst, tr = sd.tr + at, k1 = tail_k_, k2 = tail_k_ + 16, k3 = tail_k_ + 32;
    const int64_t d0 = t.tn, d1 = t.oh * t.ow;
    if (last.dst_buf != A || d1 > 65535) throw std::logic_error("backend: a project tail's tile");
    if (tail_params_.need_load(tail_side_, t.n0, t.tn))
      c_.load(A, sd.ts, Range{kDram, j_.tail_scale_addr, j_.tail_scale_addr + 1},
              j_.tail_scale_addr + static_cast<uint64_t>(t.n0 * 4), DType::kFp32, {t.tn, 1, 1, 1}, {0, 0, 0});
    // The Mul: y's codes -> fp32, times the scale, -> the Mul's codes.
    dequantize_tile(c_, A, cs, d0, d1, j_.y_dt, k1);
    Context::VecArgs m;
    m.op = VecOp::kMul, m.in = m.out = DType::kFp32, m.src1_buf = m.dst_buf = A, m.src1 = m.dst = cs;
    m.src2_buf = A, m.src2 = sd.ts, m.d0 = d0, m.d1 = d1, m.bcast = isa::Bcast::kRow;
    c_.vec(m);
    quantize_tile(c_, A, cs, d0, d1, j_.tail_mul_dt, k1);
    const int64_t roff = t.img * j_.y_img + (t.oy0 * j_.OW + t.ox0) * j_.M + t.n0;
    c_.load(side_buf_, tr, j_.tail_r_range, j_.tail_r_addr + static_cast<uint64_t>(roff), j_.tail_r_dt, box,
            {j_.M, j_.OW * j_.M, 0});
    if (j_.tail_iadd) {
      // The Add's integer scheme: both codes centred in int32, rescaled to the common grid, added, one
      // requantize to the Add's codes (and its clamp).
      auto rescale = [&](Buffer b, uint64_t slot, const isa::numerics::QuantizedMultiplier& m) {
        Context::VecArgs v;
        v.op = VecOp::kRequantize, v.in = v.out = DType::kInt32, v.src1_buf = v.dst_buf = b;
        v.src1 = v.dst = slot, v.d0 = d0, v.d1 = d1, v.imm0 = m.multiplier, v.imm1 = m.shift;
        c_.vec(v);
      };
      subtract_zero_point(c_, A, cs, A, cs, d0, d1, j_.tail_mul_dt, k2, DType::kInt32);
      rescale(A, last.dst, j_.tail_mul_rescale);
      subtract_zero_point(c_, side_buf_, tr, side_buf_, tr, d0, d1, j_.tail_r_dt, k3, DType::kInt32);
      rescale(side_buf_, tr, j_.tail_res_rescale);
      Context::VecArgs a;
      a.op = VecOp::kAdd, a.in = a.out = DType::kInt32, a.src1_buf = a.dst_buf = A, a.src1 = a.dst = last.dst;
      a.src2_buf = side_buf_, a.src2 = tr, a.d0 = d0, a.d1 = d1;
      c_.vec(a);
      Context::VecArgs rq;  // as the Add's layer emits them: no second operand
      rq.op = VecOp::kRequantize, rq.in = DType::kInt32, rq.out = j_.tail_y_dt;
      rq.src1_buf = rq.dst_buf = A, rq.src1 = rq.dst = last.dst, rq.d0 = d0, rq.d1 = d1;
      rq.imm0 = j_.tail_iadd->out.multiplier;
      rq.imm1 = j_.tail_iadd->out.shift, rq.imm2 = j_.tail_y_zp;
      c_.vec(rq);
      if (j_.tail_clip) {
        Context::VecArgs cl;
        cl.op = VecOp::kClip, cl.in = cl.out = j_.tail_y_dt;
        cl.src1_buf = cl.dst_buf = A, cl.src1 = cl.dst = last.dst, cl.d0 = d0, cl.d1 = d1;
        cl.imm0 = f32_imm(static_cast<float>(j_.tail_iadd->lo)),
        cl.imm1 = f32_imm(static_cast<float>(j_.tail_iadd->hi));
        c_.vec(cl);
      }
      return;
    }
    // The Add: the Mul's codes and the residual's -> fp32, added, -> the Add's codes.
    dequantize_tile(c_, A, cs, d0, d1, j_.tail_mul_dt, k2);
    dequantize_tile(c_, side_buf_, tr, d0, d1, j_.tail_r_dt, k3);
    Context::VecArgs a;
    a.op = VecOp::kAdd, a.in = a.out = DType::kFp32, a.src1_buf = a.dst_buf = A, a.src1 = a.dst = last.dst;
    a.src2_buf = side_buf_, a.src2 = tr, a.d0 = d0, a.d1 = d1;
    c_.vec(a);
    quantize_tile(c_, A, last.dst, d0, d1, j_.tail_y_dt, k2);
  }

  struct Side {
    uint64_t c = 0, bias = 0, rq = 0, r = 0, rr = 0, sc = 0, t = 0;
    uint64_t ts = 0, tr = 0;  // the tail's scale and its residual tile (project_tail.h)
    uint64_t x = 0;           // the transposed tile (MatrixJob::y_rows)
  };
  Context& c_;
  const Int8Job& j_;
  DType acc_dt_;  // the array's sums: int32, or int64 for int16 inputs (isa::numerics::accumulator_dtype)
  int64_t ab_;    // its bytes
  uint64_t kslot_ = 0;
  uint64_t lut_slot_ = 0;
  Side side_[2];
  EpilogueParams params_, tail_params_;
  uint64_t tail_k_ = 0;
  int tail_side_ = 0;                       // the side of the tile in its epilogue
  Buffer side_buf_ = Buffer::kAccumulator;  // where each side's r and t slots lie (allocate)
};

// The float epilogue's activation: Relu and Clip take the integer clamp instead.
bool set_float_activation(const Node& n, Int8Job& j) {
  const std::string act = n.attr_string(kActivation, "");
  if (act.empty() || act == "Relu" || act == "Clip") return false;
  if (act == "Silu") return j.silu = true;
  return fused_activation(n, act, &j.act, &j.act_imm0, &j.act_imm1);
}

std::vector<int32_t> pairs_of(const std::vector<isa::numerics::QuantizedMultiplier>& q) {
  std::vector<int32_t> v;
  for (const auto& m : q) {
    v.push_back(m.multiplier);
    v.push_back(m.shift);
  }
  return v;
}

}  // namespace

bool int8_matrix_mappable(const quant::PrecisionPlan& plan, const Node& n) {
  if (plan.precision_of(n.name) != Precision::kInt8 || !n.domain.empty()) return false;
  auto layer = plan.layers.find(n.name);
  if (layer == plan.layers.end()) return false;
  const quant::LayerQuant& L = layer->second;
  if (L.weight_is_constant)
    return n.op_type == "Conv" || n.op_type == "ConvTranspose" || n.op_type == "Gemm" ||
           n.op_type == "MatMul";
  auto a = plan.values.find(L.input), b = plan.values.find(L.weight);
  return n.op_type == "MatMul" && a != plan.values.end() && b != plan.values.end() &&
         a->second.zero_point == 0 && b->second.zero_point == 0 && b->second.dtype == DType::kInt8 &&
         L.residual.empty();
}

bool has_output_stage(const quant::LayerQuant& L) {
  return L.residual.empty() && !L.float_epilogue && !L.lut_epilogue;
}

std::vector<int32_t> output_stage_triples(const std::vector<int32_t>& bias_folded,
                                          const std::vector<isa::numerics::QuantizedMultiplier>& requant) {
  std::vector<int32_t> triples;
  for (size_t m = 0; m < bias_folded.size(); ++m) {
    triples.insert(triples.end(), {bias_folded[m], requant[m].multiplier, requant[m].shift});
  }
  return triples;
}

std::vector<int32_t> output_stage_triples(const quant::LayerQuant& L) {
  return output_stage_triples(L.bias_folded, L.requant);
}

Context::VecArgs output_stage_vec(const quant::LayerQuant& L, const QParams& out) {
  const QParams& y = L.requant_target(out);
  Context::VecArgs o;
  o.op = VecOp::kOutput, o.in = DType::kInt32, o.out = y.dtype;
  o.bcast = isa::Bcast::kRow, o.imm2 = y.zero_point;
  const bool clamp = L.clamp_min > y.qmin() || L.clamp_max < y.qmax();
  const float inf = std::numeric_limits<float>::infinity();
  o.imm0 = f32_imm(clamp ? static_cast<float>(L.clamp_min) : -inf);
  o.imm1 = f32_imm(clamp ? static_cast<float>(L.clamp_max) : inf);
  return o;
}

namespace {

// `v` with its M entries repeated `reps` times (channel r * M + m of a job is channel m of the layer).
template <typename T>
std::vector<T> repeated(const std::vector<T>& v, int64_t reps) {
  std::vector<T> r;
  for (int64_t k = 0; k < reps; ++k) r.insert(r.end(), v.begin(), v.end());
  return r;
}

// Whether a residual may be added to the sums before their bias, so that the bias, the requantization and
// the clamp take one output-stage VEC after it (four passes instead of five): the sums are then the same
// numbers in either order, because none of them saturates. Each output channel's sum is bounded by
// |x|max * sum_k |w_k| (the products), + |bias_folded|, + the largest rescaled residual code; with that
// below the accumulator type's maximum no partial sum of the three saturates, whatever their order.
bool residual_sums_exact(const quant::LayerQuant& L, DType a_dt, const QParams& r) {
  if (!L.weight_is_constant || L.weight_shape.empty() || L.residual_rescale.size() != L.bias_folded.size())
    return false;
  const auto axis = static_cast<size_t>(L.weight_channel_axis);
  if (axis >= L.weight_shape.size()) return false;
  int64_t outer = 1, inner = 1;
  for (size_t d = 0; d < L.weight_shape.size(); ++d) {
    if (d < axis) outer *= L.weight_shape[d];
    if (d > axis) inner *= L.weight_shape[d];
  }
  const int64_t M = L.weight_shape[axis];
  if (M != static_cast<int64_t>(L.bias_folded.size()) ||
      outer * M * inner != static_cast<int64_t>(L.weight_q.size()))
    return false;
  std::vector<double> w_abs(static_cast<size_t>(M), 0.0);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t m = 0; m < M; ++m)
      for (int64_t i = 0; i < inner; ++i)
        w_abs[static_cast<size_t>(m)] += std::abs(L.weight_q[static_cast<size_t>((o * M + m) * inner + i)]);
  const DType acc = isa::numerics::accumulator_dtype(a_dt);
  const auto x_max = static_cast<double>(
      std::max(std::abs(isa::numerics::dtype_min(a_dt)), std::abs(isa::numerics::dtype_max(a_dt))));
  const double limit = static_cast<double>(isa::numerics::dtype_max(acc));
  const int64_t lo = isa::numerics::dtype_min(r.dtype) - r.zero_point,
                hi = isa::numerics::dtype_max(r.dtype) - r.zero_point;
  for (int64_t m = 0; m < M; ++m) {
    const isa::numerics::QuantizedMultiplier& q = L.residual_rescale[static_cast<size_t>(m)];
    // The rescale is monotonic in its input: its extremes are at the codes' extremes.
    const auto rescaled = [&](int64_t x) {
      const int64_t v =
          acc == DType::kInt64
              ? isa::numerics::requantize_unsaturated_64(x, q.multiplier, q.shift, 0)
              : isa::numerics::requantize_unsaturated(static_cast<int32_t>(x), q.multiplier, q.shift, 0);
      return std::abs(static_cast<double>(v));
    };
    const double bound = x_max * w_abs[static_cast<size_t>(m)] +
                         std::abs(static_cast<double>(L.bias_folded[static_cast<size_t>(m)])) +
                         std::max(rescaled(lo), rescaled(hi));
    // Below the int32 range too: the residual's own requantize writes the accumulator type.
    if (!(bound < limit) || !(bound < 2147483647.0)) return false;
  }
  return true;
}

// The output side of int8 job j (geometry set): the epilogue's per-channel constants (each of the
// layer's channels `reps` times, see repeated; `bias_folded` has the job's j.M entries already), the
// residual, the output's constants and activation. False when the form is not mapped; nothing is
// emitted either way.
bool set_int8_output(Context& c, const Node& n, const quant::LayerQuant& L, const DramTensor& y, Int8Job& j,
                     int64_t reps, const std::vector<int32_t>& bias_folded) {
  const quant::PrecisionPlan& plan = *c.options.plan;
  const QParams& yq = plan.values.at(L.output);
  if (static_cast<int64_t>(L.requant.size()) * reps != j.M || static_cast<int64_t>(bias_folded.size()) != j.M)
    return false;
  // The output stage, then (lut_epilogue) the table lookup; after a residual's add where that gives the
  // same numbers.
  j.output_stage =
      !L.float_epilogue &&
      (L.residual.empty() || (reps == 1 && residual_sums_exact(L, j.a_dt, plan.values.at(L.residual))));
  const std::vector<isa::numerics::QuantizedMultiplier> requant = repeated(L.requant, reps);
  if (j.output_stage) {
    j.out_addr = c.add_data(int32_bytes(output_stage_triples(bias_folded, requant)));
    j.out_vec = output_stage_vec(L, yq);
  } else {
    // The bias is added to the sums in their own type (int64 sums of int16 inputs: int64 records).
    if (isa::numerics::accumulator_dtype(j.a_dt) == DType::kInt64) {
      std::vector<uint8_t> b(bias_folded.size() * 8);
      for (size_t k = 0; k < bias_folded.size(); ++k) {
        const int64_t v = bias_folded[k];
        std::memcpy(b.data() + k * 8, &v, 8);
      }
      j.bias_addr = c.add_data(std::move(b));
    } else {
      j.bias_addr = c.add_data(int32_bytes(bias_folded));
    }
    j.rq_addr = c.add_data(int32_bytes(pairs_of(requant)));
  }
  ConstWords k;
  if (!L.residual.empty()) {
    const DramTensor& r = c.tensor(L.residual);
    if (r.phys != y.phys || reps != 1) return false;
    const QParams& rq = plan.values.at(L.residual);
    j.residual = true;
    j.r_dt = rq.dtype;
    j.r_addr = r.addr;
    j.r_range = r.range();
    j.residual_stage = isa::numerics::accumulator_dtype(j.a_dt) == DType::kInt32;
    std::vector<int32_t> rr = pairs_of(L.residual_rescale);
    if (j.residual_stage) {
      rr.clear();
      for (const isa::numerics::QuantizedMultiplier& q : L.residual_rescale)
        rr.insert(rr.end(), {-rq.zero_point, q.multiplier, q.shift});
    }
    j.rr_addr = c.add_data(int32_bytes(rr));
    k.add_i(rq.zero_point);
  } else {
    k.add_i(0);
  }
  k.add_f(yq.scale);
  k.add_i(yq.zero_point);
  j.k_addr = c.add_data(int32_bytes(k.w));
  j.float_epi = L.float_epilogue;
  j.lut = L.lut_epilogue;
  if (j.lut) {
    j.pre_dt = L.pre_activation.dtype, j.pre_zp = L.pre_activation.zero_point;
    j.lut_addr = lut_segment(c, L.epilogue_lut);
    j.lut_entries = static_cast<int64_t>(L.epilogue_lut.size());
    j.lut_base = L.clamp_min;  // quant's contract: the table starts at the clamp's low end
  }
  if (j.float_epi) {
    if (!set_float_activation(n, j)) return false;
    j.accscale_addr = c.add_floats(repeated(L.acc_scale, reps), DType::kFp32);
  } else {
    j.clamp = L.clamp_min > L.requant_target(yq).qmin() || L.clamp_max < L.requant_target(yq).qmax();
    j.clamp_min = L.clamp_min, j.clamp_max = L.clamp_max;
  }
  return true;
}

// The tiling search and the code of int8 job j (A's codes as the array's operand dtype: uint8 A with
// int8 B, or int8 x int8). Throws CompileError when no tile fits.
// `packed`: a conv that may run with several output pixels a column (backend/matrix/pixel_packing.h).
void run_int8_job(Context& c, const Node& n, Int8Job& j, const BuildPacked<Int8Job>* packed = nullptr) {
  const DType saved_act = c.act;
  const int64_t saved_es = c.esize;
  c.act = j.a_dt;
  c.esize = isa::dtype_bytes(j.a_dt);
  if (packed && run_imposed_packing<Int8Job, Int8Strategy>(c, j, *packed)) {
    c.act = saved_act, c.esize = saved_es;
    return;
  }
  Int8Strategy strategy(c, j);
  MatrixMapper mm(c, j, strategy);
  Tiling t;
  int64_t evaluated = 0;
  bool on_vector = map_matrix_job(c, j, strategy, mm, &t, &evaluated);
  if (!on_vector && evaluated == 0) {
    c.act = saved_act, c.esize = saved_es;
    throw CompileError(fmt::format(
        "layer '{}' ({}): even the smallest int8 tile does not fit the scratchpads", n.name, j.what));
  }
  if (!on_vector && packed) on_vector = lower_packed<Int8Job, Int8Strategy>(c, j, strategy, mm, t, *packed);
  if (!on_vector) {
    record_tiling(c, j, t, evaluated);
    mm.generate(t);
    if (j.groups > 1)
      c.plan->mapping += fmt::format(" as {} block-diagonal blocks of {} groups", j.groups / t.gb, t.gb);
  }
  c.act = saved_act;
  c.esize = saved_es;
}

// An int8 ConvTranspose whose stride equals its kernel (no padding, dilation or output padding, one
// group), as the float path's lower_conv_transpose_blocks: kernel row i is one 1x1 conv of the input to
// kw * M channels writing every kh-th output row (MatrixJob::y_row), so no zero is multiplied. `L`'s
// weights are the equivalent conv's (flipped, quant::conv_transpose_weights). False, with nothing
// emitted, for any other form.
bool lower_conv_transpose_blocks_int8(Context& c, const Node& n, const quant::LayerQuant& L,
                                      const DramTensor& x, const DramTensor& y, const ConvTransposeForm& f,
                                      Int8Job j) {
  const int64_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3];
  const int64_t M = y.shape[1], OH = y.shape[2], OW = y.shape[3], kh = f.kh, kw = f.kw;
  if (n.attr_int("group", 1) != 1 || f.sh != kh || f.sw != kw || f.dh != 1 || f.dw != 1 ||
      f.lead_h != kh - 1 || f.lead_w != kw - 1 || OH != H * kh || OW != W * kw || x.strided() ||
      y.strided() || !L.residual.empty() || static_cast<int64_t>(L.weight_q.size()) != M * C * kh * kw)
    return false;
  j.images = N, j.C = C, j.H = H, j.W = W, j.M = kw * M, j.OH = H, j.OW = W;
  j.cg = C, j.mg = kw * M;
  j.y_row = kh * OW * M;
  j.y_img = OH * OW * M;
  if (!j.conv_mappable()) return false;
  // Kernel row i's 1x1 weights: output channel jj * M + m, input ci is the transposed kernel's tap
  // (i, jj), i.e. the conv's (kh - 1 - i, kw - 1 - jj); and their own bias_folded, since each output
  // reads one tap, not the kh x kw that L.bias_folded's zero-point fold sums over.
  std::vector<std::vector<int8_t>> wi(static_cast<size_t>(kh),
                                      std::vector<int8_t>(static_cast<size_t>(kw * M * C)));
  std::vector<std::vector<int32_t>> bi(static_cast<size_t>(kh),
                                       std::vector<int32_t>(static_cast<size_t>(kw * M)));
  for (int64_t i = 0; i < kh; ++i)
    for (int64_t jj = 0; jj < kw; ++jj)
      for (int64_t m = 0; m < M; ++m) {
        int64_t wsum = 0;
        for (int64_t ci = 0; ci < C; ++ci) {
          const int8_t w =
              L.weight_q[static_cast<size_t>(((m * C + ci) * kh + (kh - 1 - i)) * kw + (kw - 1 - jj))];
          wi[static_cast<size_t>(i)][static_cast<size_t>((jj * M + m) * C + ci)] = w;
          wsum += w;
        }
        bi[static_cast<size_t>(i)][static_cast<size_t>(jj * M + m)] =
            static_cast<int32_t>(static_cast<uint32_t>(static_cast<int64_t>(L.bias[static_cast<size_t>(m)]) -
                                                       static_cast<int64_t>(j.a_zp) * wsum));
      }
  std::vector<Int8Job> rows(static_cast<size_t>(kh), j);
  for (int64_t i = 0; i < kh; ++i)
    if (!set_int8_output(c, n, L, y, rows[static_cast<size_t>(i)], kw, bi[static_cast<size_t>(i)]))
      return false;
  const uint64_t xa = x.addr, ea = static_cast<uint64_t>(isa::dtype_bytes(j.a_dt));
  // One job of all kernel rows' channels, as the float path's (lower_conv_transpose_blocks): one output
  // channel (M = 1), so that the output's per-channel parameters need no reordering; both simulated.
  Int8Job one = j;
  bool one_ok =
      kh > 1 && M == 1 && kh * kw * M <= c.config.systolic_array.cols && !keeps_on_chip(c, n.outputs[0]);
  if (one_ok) {
    one.M = one.mg = kh * kw * M;
    one.y_pitch = kw * M;
    one.y_rows = kh;
    std::vector<int8_t> wo(static_cast<size_t>(kh * kw * M * C));
    std::vector<int32_t> bo(static_cast<size_t>(kh * kw * M));
    for (int64_t jj = 0; jj < kw; ++jj)
      for (int64_t m = 0; m < M; ++m)
        for (int64_t i = 0; i < kh; ++i) {
          const int64_t col = (jj * M + m) * kh + i;
          bo[static_cast<size_t>(col)] = bi[static_cast<size_t>(i)][static_cast<size_t>(jj * M + m)];
          for (int64_t ci = 0; ci < C; ++ci)
            wo[static_cast<size_t>(col * C + ci)] =
                wi[static_cast<size_t>(i)][static_cast<size_t>((jj * M + m) * C + ci)];
        }
    one_ok = set_int8_output(c, n, L, y, one, kh * kw, bo);
    one.a_base = [=](int64_t img) { return xa + static_cast<uint64_t>(img * H * W * C) * ea; };
    if (one_ok) one.w = grouped_weights(one, wo);
    one.y_addr = y.addr;
    one.what = fmt::format("int8 ConvTranspose {} in one job", n.name);
  }
  auto one_job = [&] {
    Int8Job ji = one;
    run_int8_job(c, n, ji);
    c.plan->mapping =
        "int8 " + JobCosts::conv_transpose_rows(kh, kw, M) +
        "; one CONV of all kernel rows' channels (the input read once), each tile transposed to "
        "kernel-row order before its STOREs";
  };
  auto row_jobs = [&] {
    JobCosts total;
    for (int64_t i = 0; i < kh; ++i) {
      Int8Job ji = rows[static_cast<size_t>(i)];
      ji.a_base = [=](int64_t img) { return xa + static_cast<uint64_t>(img * H * W * C) * ea; };
      ji.w = grouped_weights(ji, wi[static_cast<size_t>(i)]);
      ji.y_addr = y.addr + static_cast<uint64_t>(i * OW * M * isa::dtype_bytes(j.y_dt));
      ji.what = fmt::format("int8 ConvTranspose {} kernel row {}", n.name, i);
      run_int8_job(c, n, ji);
      total.add(*c.plan);
    }
    total.write(*c.plan);
    c.plan->mapping = "int8 " + JobCosts::conv_transpose_rows(kh, kw, M);
  };
  choose_conv_transpose_jobs(c, n, kw * M, one_ok, one_job, row_jobs);
  return true;
}

// An int8 ConvTranspose (2-D, constant weights) as a stride-1 conv over a zero-inserted copy of its
// input codes (compiler/ops/conv_transpose.h): the codes land every stride rows/columns in a DRAM
// scratch tensor whose other elements are the input's zero point (real 0, which the accumulator's
// (x - zero point) cancels, as the quantized reference assumes), then the conv runs with `L`'s flipped
// weights. The array multiplies the inserted zero points: stride_h x stride_w times the transposed
// conv's own MACs.
bool lower_conv_transpose_int8(Context& c, const Node& n, const quant::LayerQuant& L, const DramTensor& x,
                               const DramTensor& y, Int8Job j) {
  if (!x.nhwc_in_memory() || !y.nhwc_in_memory() || L.weight_shape.size() != 4) return false;
  const int64_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3];
  ConvTransposeForm f;
  try {
    f = conv_transpose_form(n, H, W, L.weight_shape[2], L.weight_shape[3]);
  } catch (const std::invalid_argument&) {
    return false;
  }
  if (f.oh != y.shape[2] || f.ow != y.shape[3])
    return false;  // not the size shape inference gave: not mapped
  if (lower_conv_transpose_blocks_int8(c, n, L, x, y, f, j)) return true;
  j.images = N, j.C = C, j.H = f.hp, j.W = f.wp;
  j.M = y.shape[1], j.OH = f.oh, j.OW = f.ow;
  j.groups = n.attr_int("group", 1);
  j.cg = j.C / j.groups, j.mg = j.M / j.groups;
  j.kh = f.kh, j.kw = f.kw, j.dh = f.dh, j.dw = f.dw;
  if (j.groups <= 0 || j.cg * j.groups != C || j.mg * j.groups != j.M || !j.conv_mappable()) return false;
  j.y_img = j.OH * j.OW * j.M;
  if (y.strided()) j.y_pitch = y.view_strides[2], j.y_view_img = y.view_strides[0];  // a Concat's slice
  if (!set_int8_output(c, n, L, y, j, 1, L.bias_folded)) return false;
  // Everything that could refuse the node is checked: the zero insertion.
  DramTensor xp;
  xp.shape = {N, C, f.hp, f.wp};
  xp.layout = kNhwc;
  xp.phys = physical(xp.shape, xp.layout);
  xp.dtype = j.a_dt;
  xp.bytes = static_cast<uint64_t>(num_elements(xp.shape) * isa::dtype_bytes(j.a_dt));
  xp.addr = c.add_scratch(xp.bytes);
  std::vector<int64_t> map(static_cast<size_t>(N * f.hp * f.wp * C), -1);
  for (int64_t b = 0; b < N; ++b)
    for (int64_t iy = 0; iy < H; ++iy) {
      const int64_t py = f.lead_h + iy * f.sh;
      if (py < 0 || py >= f.hp) continue;
      for (int64_t ix = 0; ix < W; ++ix) {
        const int64_t px = f.lead_w + ix * f.sw;
        if (px < 0 || px >= f.wp) continue;
        for (int64_t ch = 0; ch < C; ++ch)
          map[static_cast<size_t>(((b * f.hp + py) * f.wp + px) * C + ch)] = ((b * H + iy) * W + ix) * C + ch;
      }
    }
  {
    const int64_t saved_es = c.esize;
    c.esize = isa::dtype_bytes(j.a_dt);  // copy_index_map's slots hold codes of A's type
    copy_index_map(c, xp, {&x}, map, static_cast<double>(j.a_zp));
    c.esize = saved_es;
  }
  j.w = grouped_weights(j, L.weight_q);
  const uint64_t xa = xp.addr;
  const int64_t a_img = f.hp * f.wp * C * isa::dtype_bytes(j.a_dt);
  j.a_base = [=](int64_t img) { return xa + static_cast<uint64_t>(img * a_img); };
  j.a_range = xp.range();
  j.what = fmt::format("int8 ConvTranspose {}", n.name);
  c.plan->mapping =
      fmt::format("zero-inserted input (stride {}x{}, zero point {}) + int8 CONV {}x{}{}", f.sh, f.sw, j.a_zp,
                  j.kh, j.kw, j.groups > 1 ? fmt::format(", {} groups", j.groups) : "");
  run_int8_job(c, n, j);
  return true;
}

}  // namespace

bool lower_matrix_int8(Context& c, const Node& n) {
  const quant::PrecisionPlan& plan = *c.options.plan;
  const quant::LayerQuant& L = plan.layers.at(n.name);
  if (!int8_matrix_mappable(plan, n)) return false;
  const DramTensor& x = c.tensor(L.input);
  const DramTensor& y = c.tensor(L.output);
  const QParams& xq = plan.values.at(L.input);
  const QParams& yq = plan.values.at(L.output);
  if (x.dtype != xq.dtype || y.dtype != yq.dtype)
    throw std::logic_error("backend: int8 operands not in codes");
  Int8Job j;
  j.a_dt = xq.dtype, j.y_dt = yq.dtype, j.a_zp = xq.zero_point, j.y_zp = yq.zero_point;
  j.y_addr = y.addr, j.a_range = x.range(), j.y_range = y.range();
  if (n.op_type == "ConvTranspose") return lower_conv_transpose_int8(c, n, L, x, y, j);
  int64_t a_img = 0;  // input elements per image
  if (n.op_type == "Conv") {
    if (!x.nhwc_in_memory() || !y.nhwc_in_memory()) return false;
    j.images = x.shape[0];
    j.C = x.shape[1], j.H = x.shape[2], j.W = x.shape[3];
    j.M = y.shape[1], j.OH = y.shape[2], j.OW = y.shape[3];
    j.groups = n.attr_int("group", 1);
    j.cg = j.C / j.groups, j.mg = j.M / j.groups;
    j.kh = L.weight_shape[2], j.kw = L.weight_shape[3];
    const auto st = n.attr_ints("strides", {1, 1}), dl = n.attr_ints("dilations", {1, 1});
    j.sh = st[0], j.sw = st[1], j.dh = dl[0], j.dw = dl[1];
    set_conv_pads(n, j);
    if (!j.conv_mappable()) return false;
    j.w = grouped_weights(j, L.weight_q);
    a_img = j.H * j.W * j.C, j.y_img = j.OH * j.OW * j.M;
    if (y.strided()) j.y_pitch = y.view_strides[2], j.y_view_img = y.view_strides[0];  // a Concat's slice
    c.plan->mapping = fmt::format("int8 CONV {}x{} stride {}x{}{}", j.kh, j.kw, j.sh, j.sw,
                                  j.groups > 1 ? fmt::format(", {} groups", j.groups) : "");
  } else if (!L.weight_is_constant) {
    // MatMul of two runtime operands (attention): B [..., K, N] int8 codes per output batch, loaded
    // like an activation; batch dims broadcast as numpy does.
    const DramTensor& b = c.tensor(L.weight);
    if (!x.layout.empty() || !y.layout.empty() || !b.layout.empty() || b.dtype != DType::kInt8) return false;
    if (x.shape.size() < 2 || b.shape.size() < 2) return false;
    const int64_t Mr = x.shape[x.shape.size() - 2], K = x.shape.back(), N = b.shape.back();
    if (b.shape[b.shape.size() - 2] != K || K > 65535 || N > 65535) return false;
    const std::optional<MatmulBatches> mb = matmul_batches(x.shape, b.shape, y.shape);
    // Either operand may be a strided view (backend/memory/strided_views.h): rows `pitch` apart.
    const std::optional<MatrixRows> ar = matrix_rows(x), br = matrix_rows(b), yr = matrix_rows(y);
    if (!mb || !ar || !br || !yr) return false;
    if (x.strided()) j.a_pitch = ar->pitch;
    if (b.strided()) j.b_pitch = br->pitch;
    if (y.strided()) {  // written into a head-merging Transpose's output: images evenly spaced
      j.y_pitch = yr->pitch;
      j.y_view_img = yr->start.size() > 1 ? yr->start[1] : 0;
      for (size_t i = 0; i < yr->start.size(); ++i)
        if (yr->start[i] != static_cast<int64_t>(i) * j.y_view_img) return false;
    }
    j.gemm = true;
    j.images = mb->images;
    j.C = K, j.W = 1, j.OW = 1, j.M = N, j.cg = K, j.mg = N;
    j.H = j.OH = Mr;
    j.y_img = Mr * N;
    j.b_const = false;
    std::vector<int64_t> ao, bo;  // where each image's A and B start (elements, 1 byte each)
    for (int64_t i : mb->a_off) ao.push_back(ar->start.at(static_cast<size_t>(i)));
    for (int64_t i : mb->b_off) bo.push_back(br->start.at(static_cast<size_t>(i)));
    const uint64_t xa = x.addr, ba = b.addr;
    j.a_base = [=](int64_t img) { return xa + static_cast<uint64_t>(ao[static_cast<size_t>(img)]); };
    j.b_base = [=](int64_t img) { return ba + static_cast<uint64_t>(bo[static_cast<size_t>(img)]); };
    j.b_range = b.range();
    c.plan->mapping = fmt::format("int8 MATMUL M={} K={} N={} (runtime B){}", Mr, K, N,
                                  j.images > 1 ? fmt::format(" x {} batches", j.images) : "");
  } else {
    // Gemm/MatMul with a shared constant 2-D weight [K][N]: every batch dim of A folds into M.
    if (!x.layout.empty() || !y.layout.empty() || L.weight_shape.size() != 2 || x.shape.empty()) return false;
    if (n.op_type == "Gemm" && (n.attr_int("transA", 0) || n.attr_int("transB", 0))) return false;
    const std::optional<MatrixRows> ar = matrix_rows(x),
                                    yr = matrix_rows(y);  // views: evenly spaced rows only
    if (!ar || !ar->uniform || !yr || !yr->uniform) return false;
    if (x.strided()) j.a_pitch = ar->pitch;
    if (y.strided()) j.y_pitch = yr->pitch;
    const int64_t K = L.weight_shape[0], N = L.weight_shape[1];
    if (x.shape.back() != K || K > 65535 || N > 65535) return false;
    j.gemm = true;
    j.C = K, j.W = 1, j.OW = 1, j.M = N, j.cg = K, j.mg = N;
    j.H = j.OH = num_elements(x.shape) / K;
    j.w = L.weight_q;
    j.y_img = 0;
    c.plan->mapping = fmt::format("int8 MATMUL M={} K={} N={}", j.OH, K, N);
  }
  if (L.weight_is_constant) {
    const uint64_t xa = x.addr, ea = static_cast<uint64_t>(isa::dtype_bytes(j.a_dt));
    j.a_base = [=](int64_t img) { return xa + static_cast<uint64_t>(img * a_img) * ea; };
  }
  if (!set_int8_output(c, n, L, y, j, 1, L.bias_folded)) return false;
  j.what = fmt::format("int8 {} {}", n.op_type, n.name);
  // A block's layer scale and residual after it, run by its epilogue (backend/fusion/project_tail.h).
  if (const std::optional<TailOperands> tail = project_tail_operands(c, n);
      tail && tail->q_in && L.weight_is_constant && j.gemm && !j.residual && !y.strided() &&
      tail->q_in->dtype == j.y_dt && tail->q_in->zero_point == j.y_zp && tail->q_in->scale == yq.scale &&
      static_cast<int64_t>(tail->scale.size()) == j.M) {
    // The job with its tail; its data segments are added where it is emitted (a trial's are undone with it).
    const auto with_tail = [&] {
      Int8Job jt = j;
      jt.tail = true;
      jt.tail_scale_addr = c.add_floats(tail->scale, DType::kFp32);
      // Conversion constants (int8.h, conversion_constants): y -> the Mul's codes, the Mul's -> the Add's,
      // the residual's -> fp32.
      ConstWords k;
      for (const auto& [from, to] : {std::pair{tail->q_in, tail->q_mul}, std::pair{tail->q_mul, tail->q_add},
                                     std::pair{tail->q_res, static_cast<const QParams*>(nullptr)}}) {
        k.add_i(from->zero_point);
        k.add_f(from->scale);
        k.add_f(to ? to->scale : 1.0f);
        k.add_i(to ? to->zero_point : 0);
      }
      jt.tail_k_addr = c.add_data(int32_bytes(k.w));
      jt.tail_r_addr = tail->residual->addr, jt.tail_r_range = tail->residual->range();
      jt.tail_r_dt = tail->q_res->dtype, jt.tail_mul_dt = tail->q_mul->dtype,
      jt.tail_y_dt = tail->q_add->dtype;
      jt.y_addr = tail->out->addr, jt.y_range = tail->out->range();
      jt.tail_iadd = tail->iadd, jt.tail_mul_rescale = tail->mul_rescale;
      jt.tail_res_rescale = tail->res_rescale;
      jt.tail_y_zp = tail->q_add->zero_point;
      jt.tail_clip =
          tail->iadd && (tail->iadd->lo > tail->q_add->qmin() || tail->iadd->hi < tail->q_add->qmax());
      return jt;
    };
    // Taken when its simulation beats the MatMul alone with the Mul and the Add after it (project_tail.h).
    const auto emit_with = [&] {
      Int8Job jt = with_tail();
      run_int8_job(c, n, jt);
    };
    const auto emit_without = [&] {
      Int8Job copy = j;
      run_int8_job(c, n, copy);
    };
    if (project_tail_pays(c, emit_with, emit_without)) {
      j = with_tail();
      take_project_tail(c);
      c.plan->mapping += fmt::format(
          "; '{}' (layer scale) and '{}' (residual) in its epilogue on the codes, output stored as '{}'s",
          tail->mul, tail->add, tail->add);
    }
  }
  // A LayerNorm in its loads, or lowered apart before it, as simulation finds faster (fusion/pre_norm.h).
  pre_norm_choose(c, [&] {
    Int8Job copy = j;
    run_int8_job(c, n, copy);
  });
  if (subsample_pointwise(j)) c.plan->mapping += ", reading only the pixels it uses (strided LOAD)";
  // Packed: the kernel at shifted positions, the epilogue's constants once per pixel of a column
  // (pixel_packing.h); a residual's rescale is not repeated (set_int8_output refuses it).
  const BuildPacked<Int8Job> packed = [&](Int8Job& jp, int64_t p) {
    if (static_cast<int64_t>(j.w.size()) != j.kh * j.kw * j.C * j.M) return false;
    jp.w = packed_weights(j, j.w, p);
    return set_int8_output(c, n, L, y, jp, p, packed_channels(L.bias_folded, p));
  };
  const BuildPacked<Int8Job>* packing = n.op_type == "Conv" ? &packed : nullptr;
  {
    // The array's operand dtype is A's: uint8 A with int8 B, or int8 x int8 (as run_int8_job sets it).
    const DType saved_act = c.act;
    const int64_t saved_es = c.esize;
    c.act = j.a_dt;
    c.esize = isa::dtype_bytes(j.a_dt);
    // backend/fusion/layer_fusion.h: the job handed to a fused conv's lowering, or the conv fused with its
    // reader. Line-buffer fusion keeps 8-bit codes (an int16 layer's input or output is not fused).
    const bool int16 = j.a_dt == DType::kInt16 || j.y_dt == DType::kInt16;
    std::optional<Int8Job> banded;  // the line buffer's bands packed (pixel_packing.h)
    try {
      if (packing && !int16) banded = packed_for_line_buffer<Int8Job, Int8Strategy>(c, j, packed);
    } catch (...) {
      c.act = saved_act, c.esize = saved_es;
      throw;
    }
    // Lowered whole on a copy: the mapping may change the job it maps (its input or output on chip), which
    // the bands still read after a trial of the whole layer.
    JobBands<Int8Job, Int8Strategy> bands(c, banded ? *banded : j, [&] {
      Int8Job whole = j;
      run_int8_job(c, n, whole, packing);
    });
    const bool handed = conv_job_wanted(c);
    const bool fused = handed ? hand_conv_job(c, bands) : !int16 && lower_conv_pool(c, bands);
    c.act = saved_act, c.esize = saved_es;
    if (fused && banded) record_packing(c, j, *banded, banded->pack, line_buffer_packing(c));
    if (fused || handed) return fused;
  }
  run_int8_job(c, n, j, packing);
  return true;
}

// Sibling convs as one int8 job (backend/fusion/siblings.h), as the float path's lower_conv_siblings: their
// codes and output-stage triples side by side (each layer's requantization from its own output scale), each
// layer's padded with zeros to a multiple of the array's columns. Taken when every layer ends in the one
// output-stage VEC with the same output type, zero point and clamp (the VEC's immediates); the input needs
// no conversion and the outputs are the plan's codes.
bool lower_conv_siblings_int8(Context& c, const std::vector<const Node*>& nodes) {
  const quant::PrecisionPlan& plan = *c.options.plan;
  const Node& n = *nodes.front();
  std::vector<const quant::LayerQuant*> layers;
  for (const Node* s : nodes) {
    const auto it = plan.layers.find(s->name);
    if (it == plan.layers.end() || !int8_matrix_mappable(plan, *s) || !has_output_stage(it->second))
      return false;
    layers.push_back(&it->second);
  }
  const quant::LayerQuant& L0 = *layers.front();
  const DramTensor& x = c.tensor(L0.input);
  const QParams& xq = plan.values.at(L0.input);
  const QParams& yq0 = plan.values.at(L0.output);
  if (x.dtype != xq.dtype || x.strided() || !x.nhwc_in_memory()) return false;
  const Context::VecArgs out0 = output_stage_vec(L0, yq0);
  Int8Job j;
  j.a_dt = xq.dtype, j.y_dt = yq0.dtype, j.a_zp = xq.zero_point, j.y_zp = yq0.zero_point;
  j.images = x.shape[0];
  j.C = x.shape[1], j.H = x.shape[2], j.W = x.shape[3];
  j.M = 0;
  j.kh = L0.weight_shape[2], j.kw = L0.weight_shape[3];
  const auto st = n.attr_ints("strides", {1, 1}), dl = n.attr_ints("dilations", {1, 1});
  j.sh = st[0], j.sw = st[1], j.dh = dl[0], j.dw = dl[1];
  const int64_t align = c.config.systolic_array.cols, taps = j.C * j.kh * j.kw;
  std::vector<int8_t> w;
  std::vector<int32_t> triples;
  std::vector<SegmentOutput> outs;
  for (const quant::LayerQuant* L : layers) {
    const DramTensor& y = c.tensor(L->output);
    const QParams& yq = plan.values.at(L->output);
    const Context::VecArgs o = output_stage_vec(*L, yq);
    if (L->input != L0.input || y.dtype != yq.dtype || !y.nhwc_in_memory() || o.out != out0.out ||
        o.imm0 != out0.imm0 || o.imm1 != out0.imm1 || o.imm2 != out0.imm2)
      return false;
    const int64_t m = y.shape[1], padded = ceil_div(m, align) * align;
    if (static_cast<int64_t>(L->weight_q.size()) != m * taps || static_cast<int64_t>(L->requant.size()) != m)
      return false;
    outs.push_back(segment_output(y, j.M));
    j.OH = y.shape[2], j.OW = y.shape[3];
    j.segments.push_back({j.M, j.M + m});
    w.insert(w.end(), L->weight_q.begin(), L->weight_q.end());
    w.resize(static_cast<size_t>((j.M + padded) * taps), 0);
    const std::vector<int32_t> t = output_stage_triples(*L);
    triples.insert(triples.end(), t.begin(), t.end());
    triples.resize(static_cast<size_t>((j.M + padded) * 3), 0);
    j.M += padded;
  }
  j.mg = j.M, j.cg = j.C;
  j.n_align = merged_alignment(j);
  set_conv_pads(n, j);
  if (!j.conv_mappable()) return false;
  j.w = grouped_weights(j, w);
  j.y_img = j.OH * j.OW * j.M;
  j.output_stage = true;
  j.out_addr = c.add_data(int32_bytes(triples));
  j.out_vec = out0;
  ConstWords k;
  k.add_i(0);
  k.add_f(yq0.scale);
  k.add_i(yq0.zero_point);
  j.k_addr = c.add_data(int32_bytes(k.w));
  j.clamp = L0.clamp_min > L0.requant_target(yq0).qmin() || L0.clamp_max < L0.requant_target(yq0).qmax();
  j.clamp_min = L0.clamp_min, j.clamp_max = L0.clamp_max;
  const uint64_t xa = x.addr, ea = static_cast<uint64_t>(isa::dtype_bytes(j.a_dt));
  const int64_t a_img = j.H * j.W * j.C;
  j.a_base = [=](int64_t img) { return xa + static_cast<uint64_t>(img * a_img) * ea; };
  j.a_range = x.range();
  j.what = fmt::format("int8 Conv {} ({} sibling layers)", n.name, nodes.size());
  c.plan->mapping = fmt::format("int8 CONV {}x{} stride {}x{}, {} sibling layers as one GEMM of {} channels",
                                j.kh, j.kw, j.sh, j.sw, nodes.size(), merged_channels(j));
  if (subsample_pointwise(j)) c.plan->mapping += ", reading only the pixels it uses (strided LOAD)";
  const DType saved_act = c.act;
  const int64_t saved_es = c.esize;
  c.act = j.a_dt;
  c.esize = isa::dtype_bytes(j.a_dt);
  const int64_t ey = isa::dtype_bytes(j.y_dt);
  bool ok = false;
  {
    SegmentStrategy<Int8Strategy> ss(c, j, [&j, &outs, ey](size_t s) {
      const SegmentOutput& o = outs[s];
      j.y_addr = o.base(ey);
      j.y_view_img = o.image;
      j.y_pitch = o.pitch;
      j.y_range = o.range;
    });
    MatrixMapper mm(c, j, ss);
    Tiling t;
    int64_t evaluated = 0;
    if (!map_matrix_job(c, j, ss, mm, &t, &evaluated) && evaluated > 0 && j.y_sram < 0) {
      record_tiling(c, j, t, evaluated);
      c.plan->macs = num_elements(c.g.value(n.outputs[0]).shape) * taps;
      const int64_t before = c.em.size();
      mm.generate(t);
      c.plan->instructions = c.em.size() - before;
      ok = true;
    }
  }
  c.act = saved_act;
  c.esize = saved_es;
  return ok;
}

}  // namespace npusim::compiler::backend
