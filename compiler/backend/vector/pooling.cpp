// Pooling (MaxPool, AveragePool and their global forms) and reductions over the innermost physical
// axes on the vector unit. Every lowering streams SRAM tiles: LOAD into a ping-pong slot, VEC, STORE.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <optional>
#include <stdexcept>

#include "compiler/backend/core/context.h"
#include "compiler/backend/fusion/se_fusion.h"
#include "compiler/backend/int8/int8.h"
#include "compiler/backend/matrix/matrix_walk.h"
#include "compiler/backend/memory/movement.h"
#include "compiler/backend/vector/vector_lowerings.h"
#include "compiler/interp/interpreter.h"
#include "compiler/passes/lowered.h"
#include "compiler/quant/emulate.h"
#include "isa/numerics.h"

namespace npusim::compiler::backend {

using isa::Bcast;
using isa::Buffer;
using isa::VecOp;

namespace {

// The integer global average pool's output-stage record (bias, multiplier, shift) in the accumulator buffer,
// after the conversion constants' slots.
constexpr uint64_t kGapStage = 32;
// A VEC instruction's d0 is a 16-bit field (isa/isa.cpp checks it): longer element runs take several.
constexpr int64_t kMaxVecRun = 65535;
// The integer average pool's unit weights (int8 ones, kh x kw x a channel chunk) at most.
constexpr int64_t kMaxUnitWeights = 16384;

// True when the tensor's bytes are in NHWC order: its layout is NHWC, or differs from it only in where
// dims of extent 1 sit (a layout conversion that moves only such dims is not inserted).
bool nhwc_order(const DramTensor& t) {
  if (t.shape.size() != 4) return false;
  std::vector<int> lay = t.layout;
  if (lay.empty()) lay = {0, 1, 2, 3};
  std::vector<int> a, b;
  for (int d : lay) {
    if (t.shape[static_cast<size_t>(d)] != 1) a.push_back(d);
  }
  for (int d : kNhwc) {
    if (t.shape[static_cast<size_t>(d)] != 1) b.push_back(d);
  }
  return a == b;
}

}  // namespace

bool pool_window(const Node& n, int64_t H, int64_t W, int64_t OH, int64_t OW, PoolWindow* w,
                 std::string* why) {
  const auto k = n.attr_ints("kernel_shape", {});
  if (k.size() != 2) {
    *why = "pooling kernel not 2-D";
    return false;
  }
  w->kh = k[0], w->kw = k[1];
  const auto st = n.attr_ints("strides", {1, 1});
  w->sh = st[0], w->sw = st[1];
  const auto dl = n.attr_ints("dilations", {1, 1});
  if (dl[0] != 1 || dl[1] != 1) {
    *why = "dilated pooling";
    return false;
  }
  const std::string ap = n.attr_string("auto_pad", "NOTSET");
  if (ap == "SAME_UPPER" || ap == "SAME_LOWER") {
    const int64_t ph = std::max<int64_t>(0, (OH - 1) * w->sh + w->kh - H);
    const int64_t pw = std::max<int64_t>(0, (OW - 1) * w->sw + w->kw - W);
    w->pt = ap == "SAME_UPPER" ? ph / 2 : ph - ph / 2;
    w->pl = ap == "SAME_UPPER" ? pw / 2 : pw - pw / 2;
    w->pb = ph - w->pt, w->pr = pw - w->pl;
  } else {
    const auto p = n.attr_ints("pads", {0, 0, 0, 0});
    w->pt = p[0], w->pl = p[1], w->pb = p[2], w->pr = p[3];
  }
  return true;
}

// MaxPool / AveragePool / GlobalAveragePool / GlobalMaxPool on NHWC (or global pools on NCHW).
bool lower_pool(Context& c, const Node& n, std::string* why) {
  const DramTensor& x = c.tensor(n.inputs[0]);
  const DramTensor& y = c.tensor(n.outputs[0]);
  const bool global = n.op_type == "GlobalAveragePool" || n.op_type == "GlobalMaxPool";
  const bool is_max = n.op_type == "MaxPool" || n.op_type == "GlobalMaxPool";
  if (x.shape.size() != 4) {
    *why = "pooling other than 2-D";
    return false;
  }
  if (n.outputs.size() > 1 && !n.outputs[1].empty()) {
    *why = "MaxPool Indices output";
    return false;
  }
  const int64_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3];
  const int64_t OH = y.shape[2], OW = y.shape[3];
  const uint64_t es = static_cast<uint64_t>(c.esize);
  // # int8: codes converted in SRAM, tile by tile (PlanScope); constants at the accumulator's start.
  const uint64_t ex = static_cast<uint64_t>(isa::dtype_bytes(x.dtype)),
                 ey = static_cast<uint64_t>(isa::dtype_bytes(y.dtype));
  const quant::QParams* qx = c.codes_of(n.inputs[0]);
  const quant::QParams* qy = c.codes_of(n.outputs[0]);
  // # int8, integer scheme (quant::integer_global_average_pool): exact int32 sums of the codes, one output
  // stage (bias -H*W*x.zp, the single-rounding multiplier, y.zp) at kGapStage of the accumulator buffer.
  const std::optional<isa::numerics::QuantizedMultiplier> igap =
      qx && qy && c.options.plan ? quant::integer_global_average_pool(c.g, *c.options.plan, n) : std::nullopt;
  if (igap) {
    const uint64_t a = c.add_data(
        int32_bytes({static_cast<int32_t>(-H * W * qx->zero_point), igap->multiplier, igap->shift}));
    c.load(Buffer::kAccumulator, kGapStage, Range{kDram, a, a + 12}, a, isa::DType::kInt32, {3, 1, 1, 1},
           {0, 0, 0});
  }
  // The output stage of the integer pool on `rows` int32 sums at `src` of `buf`, writing codes at `dst` of
  // the accumulator buffer.
  auto gap_stage = [&](Buffer buf, uint64_t src, Buffer dst_buf, uint64_t dst, int64_t rows) {
    Context::VecArgs o;
    o.op = VecOp::kOutput, o.in = isa::DType::kInt32, o.out = y.dtype, o.bcast = Bcast::kScalar;
    o.src1_buf = buf, o.src1 = src, o.src2_buf = Buffer::kAccumulator, o.src2 = kGapStage;
    o.dst_buf = dst_buf, o.dst = dst, o.d0 = rows;
    o.imm0 = f32_imm(-INFINITY), o.imm1 = f32_imm(INFINITY), o.imm2 = qy->zero_point;
    c.vec(o);
  };
  if (qx) load_conversion_constants(c, 0, qx, nullptr);
  if (qy) load_conversion_constants(c, 16, nullptr, qy);
  const uint64_t acc_base = qx || qy ? 64 : 0;
  const char* in_codes = qx || qy ? ", int8 codes converted in the tile loop" : "";
  const char* summed = ", int8 codes summed in int32, one requantize";
  if (global && x.layout.empty()) {
    // NCHW: reduce the contiguous H*W of every channel.
    const int64_t hw = H * W;
    Slots s = make_slots(c, Buffer::kInput);
    Slots o = make_slots(c, Buffer::kWeight);
    if (hw > kMaxDim || hw > s.elems) {
      *why = "global pool window larger than a tile";
      return false;
    }
    const int64_t rows_max = std::min<int64_t>({N * C, kMaxDim, s.elems / hw, o.elems});
    for (int64_t r0 = 0; r0 < N * C; r0 += rows_max) {
      const int64_t rows = std::min(rows_max, N * C - r0);
      const uint64_t sl = s.take(), ol = o.take();
      c.load(Buffer::kInput, sl, x.range(), x.addr + static_cast<uint64_t>(r0 * hw) * ex, x.dtype,
             {hw, rows, 1, 1}, {hw, 0, 0});
      if (igap && !is_max) {
        Context::VecArgs v;
        v.op = VecOp::kReduceSum, v.in = x.dtype, v.out = isa::DType::kInt32;
        v.src1_buf = Buffer::kInput, v.src1 = sl, v.dst_buf = Buffer::kWeight, v.dst = ol, v.d0 = hw,
        v.d1 = rows;
        c.vec(v);
        gap_stage(Buffer::kWeight, ol, Buffer::kWeight, ol, rows);
        c.store(Buffer::kWeight, ol, y.range(), y.addr + static_cast<uint64_t>(r0) * ey, y.dtype,
                {rows, 1, 1, 1}, {0, 0, 0});
        continue;
      }
      if (qx) dequantize_tile(c, Buffer::kInput, sl, hw, rows, x.dtype, 0);
      Context::VecArgs v;
      v.op = is_max ? VecOp::kReduceMax : VecOp::kReduceMean;
      v.in = v.out = c.act, v.src1_buf = Buffer::kInput, v.src1 = sl, v.dst_buf = Buffer::kWeight, v.dst = ol;
      v.d0 = hw, v.d1 = rows;
      c.vec(v);
      if (qy) quantize_tile(c, Buffer::kWeight, ol, rows, 1, y.dtype, 16);
      c.store(Buffer::kWeight, ol, y.range(), y.addr + static_cast<uint64_t>(r0) * ey, y.dtype,
              {rows, 1, 1, 1}, {0, 0, 0});
    }
    if (igap && !is_max) c.plan->int8_scheme = "integer";
    c.plan->mapping =
        fmt::format("VEC {} over H*W{}{}",
                    is_max ? "reduce_max"
                    : igap ? "reduce_sum"
                           : "reduce_mean",
                    isa::numerics::is_integer(c.act) ? " on int8 codes" : "", igap ? summed : in_codes);
    return true;
  }
  if (global && nhwc_order(x)) {
    // Bands of r whole image rows: r x W pixels of a channel chunk (all channels when a row fits: one
    // contiguous DMA row per band), each pooled to one pixel by VEC max/avg_pool; the T = H / r partial
    // results of an image collect in SRAM and are pooled once more. Bands are equal (r divides H), so the
    // mean of the band means is the mean. Streams the input once at DRAM rate instead of loading every
    // channel's whole H x W window as its own strided tile.
    // An SE block's input held in the scratchpad (backend/fusion/se_fusion.h): the bands load into the held
    // region at their place in the tensor, and are sized as if nothing were held, so they (and the
    // sums) are those of the unfused program.
    const bool hold = se_pool_holds(c, n, x);
    Slots s = se_pool_slots(c, hold);
    Slots p = make_slots(c, Buffer::kWeight);
    int64_t tc = std::min<int64_t>(C, kMaxDim);
    while (tc > 1 && W * tc > s.elems) tc = ceil_div(tc, 2);
    int64_t r = 0;
    for (int64_t d = std::min<int64_t>(H, 255); d >= 1 && r == 0; --d) {
      if (H % d == 0 && d * W * tc <= s.elems) r = d;
    }
    const int64_t T = r > 0 ? H / r : 0;
    // The final results' slots, then (# int8) one slot the bands' fp32 values take when it holds a band:
    // the codes come in through the input buffer and the fp32 steps read and write the accumulator
    // buffer, so the input port carries 1 byte per element rather than the 4-byte operands of the
    // dequantization (the VEC steps run in order, so one slot serves every band). The bands are the same
    // either way: the sums, and so the results, are too.
    Slots f = make_slots(c, Buffer::kAccumulator, acc_base, tc);
    const uint64_t work_at = acc_base + 2 * static_cast<uint64_t>(round64(f.elems * c.esize));
    const int64_t work_elems = (c.capacity(Buffer::kAccumulator) - static_cast<int64_t>(work_at)) / c.esize;
    const bool in_acc = qx && r * W * tc <= work_elems;
    const uint64_t work = c.sram_base(Buffer::kAccumulator) + work_at;
    // # int8, integer scheme: each band's int32 sums per channel by one VEC dwconv with unit weights (r x W x
    // tc int8 ones at `work`, made on chip from the first band: clip to [1, 1]), the bands' sums added, then
    // the output stage; no float step. (VEC avg_pool divides, rounding, where the sum must stay exact.)
    const bool int_bands = igap && es == 4 && r > 0 && r * W * tc <= work_elems * static_cast<int64_t>(es);
    // Held: whole rows of every channel (each band a contiguous piece of the tensor), and codes
    // dequantized into the accumulator buffer (in place they would overwrite the rest of the tensor).
    const bool held = hold && tc == C && (!qx || in_acc || int_bands);
    // The conv before wrote X there (fusion/residency.cpp): nothing to load.
    const bool written = held && se_pool_input_written(c);
    if (r > 0 && W <= 255 && T <= 255 && T * tc <= p.elems && tc <= f.elems) {
      se_pool_loaded(c, held);
      bool have_ones = false;
      for (int64_t img = 0; img < N; ++img) {
        for (int64_t c0 = 0; c0 < C; c0 += tc) {
          const int64_t nc = std::min(tc, C - c0);
          const uint64_t pl = p.take();
          for (int64_t b = 0; b < T; ++b) {
            const uint64_t offset = static_cast<uint64_t>(((img * H + b * r) * W * C + c0)) * ex;
            const uint64_t sl = held ? se_held_addr(c, offset) : s.take();
            if (!written)
              c.load(Buffer::kInput, sl, x.range(), x.addr + offset, x.dtype, {nc, W, r, 1}, {C, W * C, 0});
            if (int_bands && !have_ones) {
              // The first band is a whole r x W x tc tile (tc <= C); one VEC clip per kMaxVecRun elements
              // (2048 channels x 7 x 7 on tpu-v1 are more).
              const int64_t ones = nc * W * r;
              for (int64_t at = 0; at < ones; at += kMaxVecRun) {
                Context::VecArgs o;
                o.op = VecOp::kClip, o.in = x.dtype, o.out = isa::DType::kInt8;
                o.src1_buf = Buffer::kInput, o.src1 = sl + static_cast<uint64_t>(at) * ex;
                o.dst_buf = Buffer::kAccumulator, o.dst = work + static_cast<uint64_t>(at);
                o.d0 = std::min(kMaxVecRun, ones - at), o.imm0 = o.imm1 = f32_imm(1.0f);
                c.vec(o);
              }
              have_ones = true;
            }
            if (int_bands) {
              Context::VecArgs v;
              v.op = VecOp::kDwConv, v.in = x.dtype, v.out = isa::DType::kInt32;
              v.src1_buf = Buffer::kInput, v.src1 = sl, v.src2_buf = Buffer::kAccumulator, v.src2 = work;
              v.dst_buf = Buffer::kWeight, v.dst = pl + static_cast<uint64_t>(b * nc) * es;
              v.d0 = nc, v.d1 = W, v.d2 = r, v.win_h = r, v.win_w = W, v.str_h = 1, v.str_w = 1;
              c.vec(v);
              continue;
            }
            if (in_acc) {
              dequantize_tile_into(c, Buffer::kInput, sl, Buffer::kAccumulator, work, nc, W * r, x.dtype, 0);
            } else if (qx) {
              dequantize_tile(c, Buffer::kInput, sl, nc, W * r, x.dtype, 0);
            }
            Context::VecArgs v;
            v.op = is_max ? VecOp::kMaxPool : VecOp::kAvgPool;
            v.in = v.out = c.act, v.src1_buf = in_acc ? Buffer::kAccumulator : Buffer::kInput;
            v.src1 = in_acc ? work : sl, v.dst_buf = Buffer::kWeight;
            v.dst = pl + static_cast<uint64_t>(b * nc) * es;
            v.d0 = nc, v.d1 = W, v.d2 = r, v.win_h = r, v.win_w = W, v.str_h = 1, v.str_w = 1;
            c.vec(v);
          }
          const uint64_t fl = f.take();
          if (int_bands) {
            for (int64_t b = 1; b < T; ++b) {
              Context::VecArgs v;
              v.op = VecOp::kAdd, v.in = v.out = isa::DType::kInt32;
              v.src1_buf = b == 1 ? Buffer::kWeight : Buffer::kAccumulator, v.src1 = b == 1 ? pl : fl;
              v.src2_buf = Buffer::kWeight, v.src2 = pl + static_cast<uint64_t>(b * nc) * es;
              v.dst_buf = Buffer::kAccumulator, v.dst = fl, v.d0 = nc;
              c.vec(v);
            }
            gap_stage(T > 1 ? Buffer::kAccumulator : Buffer::kWeight, T > 1 ? fl : pl, Buffer::kAccumulator,
                      fl, nc);
            c.store(Buffer::kAccumulator, fl, y.range(), y.addr + static_cast<uint64_t>(img * C + c0) * ey,
                    y.dtype, {nc, 1, 1, 1}, {0, 0, 0});
            continue;
          }
          Context::VecArgs v;
          v.op = is_max ? VecOp::kMaxPool : VecOp::kAvgPool;
          v.in = v.out = c.act, v.src1_buf = Buffer::kWeight, v.src1 = pl, v.dst_buf = Buffer::kAccumulator,
          v.dst = fl;
          v.d0 = nc, v.d1 = 1, v.d2 = T, v.win_h = T, v.win_w = 1, v.str_h = 1, v.str_w = 1;
          c.vec(v);
          if (qy) quantize_tile(c, Buffer::kAccumulator, fl, nc, 1, y.dtype, 16);
          c.store(Buffer::kAccumulator, fl, y.range(), y.addr + static_cast<uint64_t>(img * C + c0) * ey,
                  y.dtype, {nc, 1, 1, 1}, {0, 0, 0});
        }
      }
      if (int_bands) c.plan->int8_scheme = "integer";
      c.plan->mapping = fmt::format(
          "VEC {} over {} bands of {}x{} pixels x {} channels, then over the bands{}{}{}{}",
          is_max      ? "max_pool"
          : int_bands ? "dwconv of unit weights (int32 sums)"
                      : "avg_pool",
          T, r, W, tc, isa::numerics::is_integer(c.act) ? " on int8 codes" : "",
          int_bands ? summed : in_codes, in_acc && !int_bands ? ", fp32 work in the accumulator buffer" : "",
          written ? ", read where the conv before wrote it (the SE block's held region)"
          : held  ? ", loaded into the SE block's held region"
                  : "");
      return true;
    }
  }
  if (!nhwc_order(x) || (!global && !nhwc_order(y))) {
    *why = "pooling input not in NHWC";
    return false;
  }
  int64_t kh = H, kw = W, sh = 1, sw = 1, pt = 0, pl = 0, pb = 0, pr = 0;
  if (!global) {
    PoolWindow pw;
    if (!pool_window(n, H, W, OH, OW, &pw, why)) return false;
    kh = pw.kh, kw = pw.kw, sh = pw.sh, sw = pw.sw, pt = pw.pt, pl = pw.pl, pb = pw.pb, pr = pw.pr;
  }
  // AveragePool divides by the window's elements inside the input (count_include_pad=0) or inside the
  // padded input (=1); ceil_mode windows may hang past both. VEC avg_pool divides by kh*kw over a
  // zero-padded tile, so a per-pixel factor kh*kw/count corrects the divisor where it differs.
  std::vector<float> factor;
  if (!is_max && !global) {
    const bool include_pad = n.attr_int("count_include_pad", 0) != 0;
    const int64_t lo_h = include_pad ? -pt : 0, hi_h = include_pad ? H + pb : H;
    const int64_t lo_w = include_pad ? -pl : 0, hi_w = include_pad ? W + pr : W;
    bool needed = false;
    factor.resize(static_cast<size_t>(OH * OW));
    for (int64_t oy = 0; oy < OH; ++oy) {
      const int64_t y0 = oy * sh - pt;
      const int64_t ch = std::max<int64_t>(0, std::min(y0 + kh, hi_h) - std::max(y0, lo_h));
      for (int64_t ox = 0; ox < OW; ++ox) {
        const int64_t x0 = ox * sw - pl;
        const int64_t cw = std::max<int64_t>(0, std::min(x0 + kw, hi_w) - std::max(x0, lo_w));
        const int64_t cnt = ch * cw;
        needed |= cnt != kh * kw;
        factor[static_cast<size_t>(oy * OW + ox)] =
            cnt > 0 ? static_cast<float>(kh * kw) / static_cast<float>(cnt) : 0.0f;
      }
    }
    if (!needed) factor.clear();
  }
  if (kh > 255 || kw > 255 || sh > 255 || sw > 255 || pt > 255 || pl > 255) {
    *why = "pooling window or padding beyond the VEC/LOAD field widths";
    return false;
  }
  // # int8, integer scheme (quant::integer_average_pool): each window's exact int32 sum of the codes (a VEC
  // dwconv of unit weights over the tile, padded with the zero point's code) and one output stage per
  // pixel: bias -kh*kw*x.zp (the padding's codes and the window's zero points out), the pixel's
  // single-rounding multiplier, y.zp. Records (bias, multiplier, shift) per output pixel, or one when all
  // pixels share the divisor.
  // The unit weights of a whole channel chunk load as one DMA row and sit in a corner of the accumulator
  // buffer: windows over more than 16 KiB of them (e.g. 7x7 over 512 channels) keep the float rule.
  const int64_t ones_max = kh * kw * std::min<int64_t>(C, kMaxDim);
  const std::optional<quant::IntegerAveragePool> iap =
      !is_max && !global && qx && qy && c.options.plan && ones_max <= kMaxUnitWeights
          ? quant::integer_average_pool(c.g, *c.options.plan, n)
          : std::nullopt;
  std::vector<int32_t> records;
  bool one_record = true;
  if (iap) {
    if (iap->oh != OH || iap->ow != OW || iap->kh != kh || iap->kw != kw || iap->pt != pt || iap->pl != pl)
      throw std::logic_error("backend: the integer average pool's geometry differs from the lowering's");
    const auto bias = static_cast<int32_t>(-kh * kw * qx->zero_point);
    for (const isa::numerics::QuantizedMultiplier& m : iap->scale) {
      records.insert(records.end(), {bias, m.multiplier, m.shift});
      one_record = one_record && m.multiplier == iap->scale[0].multiplier && m.shift == iap->scale[0].shift;
    }
    if (one_record) records.resize(3);
  }
  const int64_t rec_words = iap && !one_record ? 3 : 1;  // accumulator words a tile's pixel takes
  // Padding: max pooling the lowest value (-inf, or the lowest code on codes), average pooling 0 (the
  // zero point's code when codes are converted in the tile loop).
  int64_t pad_value = 0;
  if (is_max) {
    pad_value = isa::numerics::is_integer(x.dtype) ? static_cast<int64_t>(isa::numerics::dtype_min(x.dtype))
                                                   : bf16_pad(-INFINITY);
  } else if (qx) {
    pad_value = qx->zero_point;
  }
  Slots s = make_slots(c, Buffer::kInput);
  Slots o = make_slots(c, Buffer::kWeight);
  // # int8 integer: the unit weights (kh x kw x the channel chunk of int8 ones) and the single record sit
  // first in the accumulator buffer, per-pixel records in its slots after them.
  const uint64_t ones_at = acc_base, record_at = ones_at + static_cast<uint64_t>(round64(ones_max));
  Slots f = make_slots(c, Buffer::kAccumulator, iap ? record_at + 64 : acc_base);
  const uint64_t factor_addr = factor.empty() || iap ? 0 : c.add_floats(factor, c.act);
  const uint64_t records_addr = iap ? c.add_data(int32_bytes(records)) : 0;
  if (iap) {
    const uint64_t ones = c.add_data(std::vector<uint8_t>(static_cast<size_t>(ones_max), 1));
    c.load(Buffer::kAccumulator, ones_at, Range{kDram, ones, ones + static_cast<uint64_t>(ones_max)}, ones,
           isa::DType::kInt8, {ones_max, 1, 1, 1}, {0, 0, 0});
    if (one_record)
      c.load(Buffer::kAccumulator, record_at, Range{kDram, records_addr, records_addr + 12}, records_addr,
             isa::DType::kInt32, {3, 1, 1, 1}, {0, 0, 0});
  }
  // Tile: output rows x all columns x a channel chunk; fall back to column tiles when a row is too big.
  auto in_rows = [&](int64_t t) { return (t - 1) * sh + kh; };
  auto in_cols = [&](int64_t t) { return (t - 1) * sw + kw; };
  int64_t tc = std::min<int64_t>(C, kMaxDim), tow = OW, toh = OH;
  while (tc > 1 && in_rows(1) * in_cols(tow) * tc > s.elems) tc = ceil_div(tc, 2);
  while (tow > 1 && in_rows(1) * in_cols(tow) * tc > s.elems) tow = ceil_div(tow, 2);
  while (toh > 1 && (in_rows(toh) * in_cols(tow) * tc > s.elems || toh * tow * tc > o.elems ||
                     toh * tow * rec_words > f.elems)) {
    toh = ceil_div(toh, 2);
  }
  if (in_rows(toh) * in_cols(tow) * tc > s.elems || toh * tow * tc > o.elems) {
    *why = "pooling window does not fit the input scratchpad";
    return false;
  }
  // An output written in place into its slice of a Concat's buffer (backend/memory/concat_in_place.h): that
  // buffer's pixel (row pitch) and image strides.
  const int64_t P = y.strided() ? y.view_strides[2] : C,
                y_img = y.strided() ? y.view_strides[0] : OH * OW * C;
  // Bands of whole rows of every channel, windows overlapping (kh > sh), nothing converted in the slot: the
  // rows a band shares with the band before are copied from that band's slot (VEC copy) rather than loaded
  // from DRAM again (maxpool 3x3 s2 in bands of one output row: 2 rows loaded of 3).
  const bool reuse_rows = tow == OW && tc == C && toh < OH && kh > sh && !qx && !iap && factor.empty();
  const int64_t shared_rows = kh - sh;
  uint64_t band_before = 0;  // the slot of the band before, its rows
  int64_t band_before_rows = 0;
  for (int64_t img = 0; img < N; ++img) {
    for (int64_t oy = 0; oy < OH; oy += toh) {
      for (int64_t ox = 0; ox < OW; ox += tow) {
        for (int64_t c0 = 0; c0 < C; c0 += tc) {
          const int64_t oh = std::min(toh, OH - oy), ow = std::min(tow, OW - ox), nc = std::min(tc, C - c0);
          const int64_t iy0 = oy * sh - pt, iy1 = iy0 + in_rows(oh) - 1, ix0 = ox * sw - pl,
                        ix1 = ix0 + in_cols(ow) - 1;
          const int64_t ptop = std::max<int64_t>(0, -iy0), pbot = std::max<int64_t>(0, iy1 - (H - 1));
          const int64_t pleft = std::max<int64_t>(0, -ix0), pright = std::max<int64_t>(0, ix1 - (W - 1));
          const int64_t rows = in_rows(oh) - ptop - pbot, cols = in_cols(ow) - pleft - pright;
          if (rows <= 0 || cols <= 0 || ptop > 255 || pbot > 255 || pleft > 255 || pright > 255) {
            throw CompileError(
                fmt::format("layer '{}': a pooling tile lies entirely in the padding", n.name));
          }
          const uint64_t sl = s.take(), ol = o.take();
          const uint64_t xa =
              x.addr +
              static_cast<uint64_t>(
                  (((img * H + std::max<int64_t>(0, iy0)) * W + std::max<int64_t>(0, ix0)) * C + c0)) *
                  ex;
          const bool copied = reuse_rows && oy > 0 && iy0 >= 0 && rows > shared_rows;
          if (copied) {
            const uint64_t row_bytes = static_cast<uint64_t>(in_cols(ow) * nc) * ex;
            Context::VecArgs v;
            v.op = VecOp::kCopy, v.in = v.out = x.dtype;
            v.src1_buf = v.dst_buf = Buffer::kInput;
            v.src1 = band_before + static_cast<uint64_t>(band_before_rows - shared_rows) * row_bytes;
            v.dst = sl, v.d0 = nc, v.d1 = in_cols(ow), v.d2 = shared_rows;
            c.vec(v);
            c.load(Buffer::kInput, sl + static_cast<uint64_t>(shared_rows) * row_bytes, x.range(),
                   xa + static_cast<uint64_t>(shared_rows * W * C) * ex, x.dtype,
                   {nc, cols, rows - shared_rows, 1}, {C, W * C, 0}, {0, pbot, pleft, pright}, pad_value);
          } else {
            c.load(Buffer::kInput, sl, x.range(), xa, x.dtype, {nc, cols, rows, 1}, {C, W * C, 0},
                   {ptop, pbot, pleft, pright}, pad_value);
          }
          band_before = sl, band_before_rows = in_rows(oh);
          const uint64_t ya = y.addr + static_cast<uint64_t>(img * y_img + (oy * OW + ox) * P + c0) * ey;
          if (iap) {
            Context::VecArgs v;
            v.op = VecOp::kDwConv, v.in = x.dtype, v.out = isa::DType::kInt32;
            v.src1_buf = Buffer::kInput, v.src1 = sl, v.src2_buf = Buffer::kAccumulator;
            v.src2 = ones_at, v.dst_buf = Buffer::kWeight, v.dst = ol;
            v.d0 = nc, v.d1 = in_cols(ow), v.d2 = in_rows(oh);
            v.win_h = kh, v.win_w = kw, v.str_h = sh, v.str_w = sw;
            c.vec(v);
            uint64_t rec = record_at;
            if (!one_record) {
              rec = f.take();
              c.load(Buffer::kAccumulator, rec, Range{kDram, records_addr, records_addr + records.size() * 4},
                     records_addr + static_cast<uint64_t>(oy * OW + ox) * 12, isa::DType::kInt32,
                     {3 * ow, oh, 1, 1}, {3 * OW, 0, 0});
            }
            Context::VecArgs st;
            st.op = VecOp::kOutput, st.in = isa::DType::kInt32, st.out = y.dtype;
            st.bcast = one_record ? Bcast::kScalar : Bcast::kCol;
            st.src1_buf = st.dst_buf = Buffer::kWeight, st.src1 = st.dst = ol,
            st.src2_buf = Buffer::kAccumulator;
            st.src2 = one_record ? record_at : rec;
            st.d0 = nc, st.d1 = oh * ow;
            st.imm0 = f32_imm(-INFINITY), st.imm1 = f32_imm(INFINITY), st.imm2 = qy->zero_point;
            c.vec(st);
            c.store(Buffer::kWeight, ol, y.range(), ya, y.dtype, {nc, ow, oh, 1}, {P, OW * P, 0});
            continue;
          }
          if (qx) dequantize_tile(c, Buffer::kInput, sl, nc, in_cols(ow) * in_rows(oh), x.dtype, 0);
          Context::VecArgs v;
          v.op = is_max ? VecOp::kMaxPool : VecOp::kAvgPool;
          v.in = v.out = c.act, v.src1_buf = Buffer::kInput, v.src1 = sl, v.dst_buf = Buffer::kWeight,
          v.dst = ol;
          v.d0 = nc, v.d1 = in_cols(ow), v.d2 = in_rows(oh);
          v.win_h = kh, v.win_w = kw, v.str_h = sh, v.str_w = sw;
          c.vec(v);
          if (!factor.empty()) {
            const uint64_t fl = f.take();
            c.load(Buffer::kAccumulator, fl, Range{kDram, factor_addr, factor_addr + factor.size() * es},
                   factor_addr + static_cast<uint64_t>(oy * OW + ox) * es, c.act, {ow, oh, 1, 1}, {OW, 0, 0});
            Context::VecArgs m;
            m.op = VecOp::kMul, m.in = m.out = c.act, m.src1_buf = m.dst_buf = Buffer::kWeight,
            m.src1 = m.dst = ol;
            m.src2_buf = Buffer::kAccumulator, m.src2 = fl, m.d0 = nc, m.d1 = oh * ow,
            m.bcast = isa::Bcast::kCol;
            c.vec(m);
          }
          if (qy) quantize_tile(c, Buffer::kWeight, ol, nc, oh * ow, y.dtype, 16);
          c.store(Buffer::kWeight, ol, y.range(), ya, y.dtype, {nc, ow, oh, 1}, {P, OW * P, 0});
        }
      }
    }
  }
  if (iap) c.plan->int8_scheme = "integer";
  c.plan->mapping =
      fmt::format("VEC {} {}x{} s{} on {}x{}x{} tiles{}{}",
                  is_max ? "max_pool"
                  : iap  ? "dwconv of unit weights (int32 window sums)"
                         : "avg_pool",
                  kh, kw, sh, toh, tow, tc, isa::numerics::is_integer(c.act) ? " on int8 codes" : "",
                  iap ? summed : in_codes);
  return true;
}

// ReduceMean / ReduceSum / ReduceMax over the innermost physical dims.
bool lower_reduce(Context& c, const Node& n, std::string* why) {
  const DramTensor& x = c.tensor(n.inputs[0]);
  const DramTensor& y = c.tensor(n.outputs[0]);
  VecOp op = n.op_type == "ReduceMean"  ? VecOp::kReduceMean
             : n.op_type == "ReduceSum" ? VecOp::kReduceSum
                                        : VecOp::kReduceMax;
  const size_t r = x.shape.size();
  std::vector<int64_t> axes;
  if (n.has_input(1)) {
    const Value& a = c.g.value(n.inputs[1]);
    if (!a.is_constant()) {
      *why = "runtime reduction axes";
      return false;
    }
    axes = a.constant->to_int_vector();
  } else {
    axes = n.attr_ints("axes", {});
  }
  if (axes.empty()) {
    if (n.attr_int("noop_with_empty_axes", 0)) {
      *why = "noop reduction";
      return false;
    }
    for (size_t i = 0; i < r; ++i) axes.push_back(static_cast<int64_t>(i));
  }
  std::vector<bool> red(r, false);
  for (int64_t a : axes) red[static_cast<size_t>(a < 0 ? a + static_cast<int64_t>(r) : a)] = true;
  const auto pos = positions(x);
  std::vector<bool> pred(r, false);
  for (size_t d = 0; d < r; ++d) pred[static_cast<size_t>(pos[d])] = red[d];
  // Reduced physical dims (ignoring extent 1) must be the innermost ones.
  int64_t inner = 1, outer = 1;
  bool seen_kept = false;
  for (size_t i = r; i-- > 0;) {
    if (x.phys[i] == 1) continue;
    if (pred[i]) {
      if (seen_kept) {
        *why = "reduction over non-innermost axes";
        return false;
      }
      inner *= x.phys[i];
    } else {
      seen_kept = true;
      outer *= x.phys[i];
    }
  }
  Slots s = make_slots(c, Buffer::kInput);
  Slots o = make_slots(c, Buffer::kWeight);
  if (inner > kMaxDim || inner > s.elems) {
    *why = "reduced extent larger than a tile";
    return false;
  }
  const uint64_t es = static_cast<uint64_t>(c.esize);
  const int64_t rows_max =
      std::max<int64_t>(1, std::min<int64_t>({outer, kMaxDim, s.elems / inner, o.elems}));
  for (int64_t r0 = 0; r0 < outer; r0 += rows_max) {
    const int64_t rows = std::min(rows_max, outer - r0);
    const uint64_t sl = s.take(), ol = o.take();
    c.load(Buffer::kInput, sl, x.range(), x.addr + static_cast<uint64_t>(r0 * inner) * es, c.act,
           {inner, rows, 1, 1}, {inner, 0, 0});
    Context::VecArgs v;
    v.op = op, v.in = v.out = c.act, v.src1_buf = Buffer::kInput, v.src1 = sl, v.dst_buf = Buffer::kWeight,
    v.dst = ol;
    v.d0 = inner, v.d1 = rows;
    c.vec(v);
    c.store(Buffer::kWeight, ol, y.range(), y.addr + static_cast<uint64_t>(r0) * es, c.act, {rows, 1, 1, 1},
            {0, 0, 0});
  }
  c.plan->mapping =
      fmt::format("VEC {} over {} innermost elements", isa::kVecOpNames[static_cast<size_t>(op)], inner);
  return true;
}

}  // namespace npusim::compiler::backend
