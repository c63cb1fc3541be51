// Softmax, LayerNormalization and RMSNormalization as one row-wise vector layer each (see rowwise.h).
#include "compiler/backend/vector/rowwise.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <vector>

#include "compiler/backend/fusion/residency.h"
#include "compiler/backend/fusion/vector_residency.h"
#include "compiler/backend/int8/int8.h"
#include "compiler/backend/memory/movement.h"
#include "compiler/passes/lowered.h"

namespace npusim::compiler {

namespace {

// Tiles rotate through three slots of the input buffer: while one tile is loaded, the one before is
// computed and the one before that stored. With two, a slot's next load waits for its store, which
// waits for its vector work, and the layer (usually bound by the DRAM) loses the overlap: bert_small's
// Softmax (fp16, edge) took 5197 cycles against a bound of 3840 with two slots, 4565 with three.
constexpr int64_t kSlots = 3;

int64_t slot_bytes(const isa::NpuConfig& config) {
  return backend::scratchpad_capacity(config, isa::Buffer::kInput) / kSlots / 64 * 64;
}

}  // namespace

namespace backend {

int64_t longest_row(const isa::NpuConfig& config) {
  // fp32 (the widest compute format): a row in one of the input buffer's slots, and scale, bias and one
  // scratch row in the weight buffer.
  const int64_t in = slot_bytes(config) / 4;
  const int64_t w = backend::scratchpad_capacity(config, isa::Buffer::kWeight) / 3 / 64 * 64 / 4;
  return std::max<int64_t>(0, std::min({backend::kMaxDim, in, w}));
}

using isa::Bcast;
using isa::Buffer;
using isa::VecOp;

namespace {

bool onnx_order(const DramTensor& t) {
  for (size_t i = 0; i < t.layout.size(); ++i)
    if (t.layout[i] != static_cast<int>(i)) return false;
  return true;
}

// Rows are split into about kPipelinedTiles tiles so that loads, vector work and stores overlap (only
// the first load and the last store are exposed), but not into tiles of fewer than kMinPipelinedTile
// elements (each VEC pays its latency per tile). Measured on bert_small and ViT-B/16 (edge): 4 to 16
// tiles of at least 1024 to 4096 elements are within 1% of each other.
constexpr int64_t kPipelinedTiles = 8;
constexpr int64_t kMinPipelinedTile = 2048;

// One VEC: dst = op(a, b) over a rows x d0 box (b broadcast per `bc`), reading `in`, writing `out`.
void box_vec(Context& c, VecOp op, isa::DType in, isa::DType out, At dst, At a, int64_t d0, int64_t rows,
             At b, Bcast bc) {
  Context::VecArgs v;
  v.op = op, v.in = in, v.out = out;
  v.src1_buf = a.buf, v.src1 = a.addr, v.src2_buf = b.buf, v.src2 = b.addr, v.bcast = bc;
  v.dst_buf = dst.buf, v.dst = dst.addr, v.d0 = d0, v.d1 = rows;
  c.vec(v);
}

}  // namespace

void softmax_to_factor(Context& c, At slot, At scratch, At m, int64_t D, int64_t rows) {
  const auto vec = [&](VecOp op, At dst, At a, int64_t d0, int64_t n, At b, Bcast bc) {
    box_vec(c, op, c.act, c.act, dst, a, d0, n, b, bc);
  };
  const At none{Buffer::kInput, 0};
  vec(VecOp::kReduceMax, m, slot, D, rows, none, Bcast::kNone);
  vec(VecOp::kSub, scratch, slot, D, rows, m, Bcast::kCol);
  vec(VecOp::kExp, slot, scratch, D, rows, none, Bcast::kNone);
  vec(VecOp::kReduceSum, m, slot, D, rows, none, Bcast::kNone);
  vec(VecOp::kRecip, m, m, rows, 1, none, Bcast::kNone);
}

void softmax_rows(Context& c, At slot, At scratch, At m, At k, int64_t D, int64_t rows,
                  std::optional<isa::DType> x_codes, std::optional<isa::DType> y_codes) {
  const auto emit = [&](VecOp op, isa::DType in, isa::DType out, At dst, At a, int64_t d0, int64_t n, At b,
                        Bcast bc) { box_vec(c, op, in, out, dst, a, d0, n, b, bc); };
  const auto at = [](At a, uint64_t off) { return At{a.buf, a.addr + off}; };
  const isa::DType a = c.act, i32 = isa::DType::kInt32;
  if (x_codes) {  // dequantize: (codes - zero point) -> fp32 into the scratch tile, * scale back
    emit(VecOp::kSub, *x_codes, isa::DType::kFp32, scratch, slot, D, rows, at(k, 0), Bcast::kScalar);
    emit(VecOp::kMul, isa::DType::kFp32, a, slot, scratch, D, rows, at(k, 4), Bcast::kScalar);
  }
  softmax_to_factor(c, slot, scratch, m, D, rows);
  if (!y_codes) {
    emit(VecOp::kMul, a, a, slot, slot, D, rows, m, Bcast::kCol);
    return;
  }
  // The output scale folded into the per-row factor; int32 into the scratch tile, + zero point back.
  emit(VecOp::kDiv, a, a, m, m, rows, 1, at(k, 16 + 8), Bcast::kScalar);
  emit(VecOp::kMul, a, i32, scratch, slot, D, rows, m, Bcast::kCol);
  emit(VecOp::kAdd, i32, *y_codes, slot, scratch, D, rows, at(k, 16 + 12), Bcast::kScalar);
}

void norm_rows(Context& c, const NormRows& r, At in, At slot, At scratch, At out, int64_t rows) {
  const auto emit = [&](VecOp op, isa::DType i, isa::DType o, At dst, At a, int64_t d0, int64_t n, At b,
                        Bcast bc) { box_vec(c, op, i, o, dst, a, d0, n, b, bc); };
  const isa::DType a = r.a, i32 = isa::DType::kInt32;
  const int64_t D = r.D;
  // The same in the compute format.
  const auto vec = [&](VecOp op, At dst, At src, int64_t d0, int64_t n, At b = {Buffer::kInput, 0},
                       Bcast bc = Bcast::kNone) { emit(op, a, a, dst, src, d0, n, b, bc); };
  const auto at = [](At x, uint64_t off) { return At{x.buf, x.addr + off}; };
  At cur = in;  // where the tile's values are
  const auto other = [&] { return cur.buf == scratch.buf && cur.addr == scratch.addr ? slot : scratch; };
  // An element-wise step to the tile's other place (`to_out`: to `out`, in place if it is there).
  const auto step = [&](VecOp op, At b, Bcast bc, isa::DType i, isa::DType to, bool to_out = false) {
    const At dst = to_out ? out : other();
    emit(op, i, to, dst, cur, D, rows, b, bc);
    cur = dst;
  };
  if (r.x_codes) {  // dequantize: (codes - zero point) -> fp32, * scale
    step(VecOp::kSub, at(r.k, 0), Bcast::kScalar, *r.x_codes, isa::DType::kFp32);
    step(VecOp::kMul, at(r.k, 4), Bcast::kScalar, isa::DType::kFp32, a);
  }
  // The result's last float step: int32 when the output is codes (their scale folded in), then + zero
  // point into `out`; else straight into `out`.
  const auto finish = [&](VecOp op, At b, Bcast bc) {
    step(op, b, bc, a, r.y_codes ? i32 : a, !r.y_codes);
    if (r.y_codes) step(VecOp::kAdd, at(r.k, 16 + 12), Bcast::kScalar, i32, *r.y_codes, true);
  };
  if (!r.rms) {
    vec(VecOp::kReduceMean, r.m, cur, D, rows);
    step(VecOp::kSub, r.m, Bcast::kCol, a, a);
  }
  vec(VecOp::kMul, other(), cur, D, rows, cur, Bcast::kNone);  // the squares, beside the differences
  vec(VecOp::kReduceMean, r.v, other(), D, rows);
  vec(VecOp::kAdd, r.v, r.v, rows, 1, at(r.k, 32), Bcast::kScalar);
  vec(VecOp::kRsqrt, r.v, r.v, rows, 1);
  if (r.y_codes) vec(VecOp::kDiv, r.v, r.v, rows, 1, at(r.k, 16 + 8), Bcast::kScalar);
  if (!r.gamma && !r.beta) {
    finish(VecOp::kMul, r.v, Bcast::kCol);
  } else {
    step(VecOp::kMul, r.v, Bcast::kCol, a, a);
    if (r.gamma && r.beta) step(VecOp::kMul, r.gamma_at, Bcast::kRow, a, a);
    if (r.beta)
      finish(VecOp::kAdd, r.beta_at, Bcast::kRow);
    else
      finish(VecOp::kMul, r.gamma_at, Bcast::kRow);
  }
}

bool is_rowwise(const Node& n) {
  return (n.domain.empty() && (n.op_type == "Softmax" || n.op_type == "LayerNormalization")) || is_rmsnorm(n);
}

bool lower_rowwise(Context& c, const Node& n, std::string* why) {
  const std::optional<RowwiseForm> f = rowwise_form(c.g, n);
  if (!f) {
    *why = "not in row-wise form (another axis, or a runtime scale/bias)";
    return false;
  }
  const DramTensor& x = c.tensor(n.inputs[0]);
  const DramTensor& y = c.tensor(n.outputs[0]);
  if (!onnx_order(x) || !onnx_order(y)) {
    *why = "rows not contiguous: input or output not in ONNX order";
    return false;
  }
  const bool softmax = n.op_type == "Softmax", rms = is_rmsnorm(n);
  const int64_t D = f->row, R = f->rows, es = c.esize;
  // SRAM: input buffer = kSlots slots of whole rows, in turn; weight buffer = scale, bias (LayerNorm),
  // then a scratch tile; accumulator = conversion constants (0, 16), epsilon (32), two per-row
  // statistics from 64. Each element-wise step reads the tile where it is (its slot or the scratch
  // tile) and writes it to the other: a scratchpad's port then carries one operand per step, not a
  // read and a write (in place, an fp32 step waits for the input buffer's port twice as long as it
  // computes). The scratch tile is only touched by the vector unit, in program order, and the last step
  // writes the slot the STORE reads.
  // Below the bytes held at the top of the scratchpad (Context::capacity leaves them out): the rows a GEMM
  // reads in place after it (rows_left_on_chip), a value held for a later layer.
  const int64_t slot = std::min(slot_bytes(c.config), c.capacity(Buffer::kInput) / kSlots / 64 * 64),
                slot_elems = slot / es;
  const uint64_t ibase = c.sram_base(Buffer::kInput);
  const uint64_t wbase = c.sram_base(Buffer::kWeight);
  const uint64_t gamma_at = wbase, beta_at = wbase + round64(D * es);
  const uint64_t scratch_at = softmax ? wbase : wbase + 2 * round64(D * es);
  const int64_t scratch_rows =
      (c.capacity(Buffer::kWeight) - static_cast<int64_t>(scratch_at - wbase)) / es / D;
  const int64_t acc_rows = (c.capacity(Buffer::kAccumulator) - 64) / 2 / 64 * 64 / es;
  const int64_t fit = std::min({slot_elems / D, scratch_rows, acc_rows, kMaxDim});
  if (D > kMaxDim || fit < 1) {
    *why = fmt::format("a row of {} elements does not fit the scratchpads", D);
    return false;
  }
  int64_t tile = std::min(fit, R);
  if (ceil_div(R, kPipelinedTiles) * D >= kMinPipelinedTile) {
    tile = std::min(tile, ceil_div(R, kPipelinedTiles));
  } else {
    tile = std::min(tile, ceil_div(kMinPipelinedTile, D));
  }
  const uint64_t st1 = 64, st2 = 64 + round64(tile * es);

  const quant::QParams* qx = c.codes_of(n.inputs[0]);
  const quant::QParams* qy = c.codes_of(n.outputs[0]);
  if (qx) load_conversion_constants(c, 0, qx, nullptr);
  if (qy) load_conversion_constants(c, 16, nullptr, qy);
  // A constant of the LayerNorm (scale, bias: one element or a whole row) as a row in SRAM.
  // # int8 output: the bias is stored divided by the output scale (one fp32 division, as emulate.cpp's).
  auto load_row = [&](size_t input, uint64_t at) {
    const Tensor& t = *c.g.value(n.inputs[input]).constant;
    std::vector<float> v = t.to_float_vector();
    if (v.size() == 1) v.assign(static_cast<size_t>(D), v[0]);
    if (qy && input == 2)
      for (float& b : v) b /= qy->scale;
    const uint64_t addr = c.add_floats(v, c.act);
    c.load(Buffer::kWeight, at, Range{kDram, addr, addr + static_cast<uint64_t>(D * es)}, addr, c.act,
           {D, 1, 1, 1}, {0, 0, 0});
  };
  const bool gamma = !softmax && n.has_input(1), beta = !softmax && n.has_input(2);
  if (!softmax) {
    const uint64_t eps = c.add_floats({n.attr_float("epsilon", 1e-5f)}, c.act);
    c.load(Buffer::kAccumulator, 32, Range{kDram, eps, eps + static_cast<uint64_t>(es)}, eps, c.act,
           {1, 1, 1, 1}, {0, 0, 0});
    if (gamma) load_row(1, gamma_at);
    if (beta) load_row(2, beta_at);
  }
  const uint64_t ex = static_cast<uint64_t>(isa::dtype_bytes(x.dtype)),
                 ey = static_cast<uint64_t>(isa::dtype_bytes(y.dtype));
  const At scratch{Buffer::kWeight, scratch_at}, acc{Buffer::kAccumulator, 0};
  // A LayerNorm whose output the GEMM after it reads in place (backend/fusion/residency.h): its rows are
  // written dense [R][D] where the residency planner reserved them, and nothing is stored.
  const int64_t slots_used = std::min<int64_t>(ceil_div(R, tile), kSlots);
  const uint64_t slots_end = ibase + static_cast<uint64_t>((slots_used - 1) * slot + round64(tile * D * es));
  // A LayerNorm whose input the element-wise layer before it left in the input scratchpad
  // (backend/fusion/vector_residency.h) reads its rows there instead of loading them; asked first, since
  // rows_left_on_chip lets go of a value still pending.
  const std::optional<uint64_t> x_sram = softmax ? std::nullopt : rows_read_in_place(c, n.inputs[0], x.dtype);
  bool y_stored = false;  // ... and stored as well from there, for its other readers
  const std::optional<uint64_t> y_sram =
      softmax ? std::nullopt : rows_left_on_chip(c, n.outputs[0], slots_end, &y_stored);
  int64_t tiles = 0;
  for (int64_t r0 = 0; r0 < R; r0 += tile, ++tiles) {
    const int64_t rows = std::min(tile, R - r0);
    const At sl{Buffer::kInput, ibase + static_cast<uint64_t>(tiles % kSlots * slot)};
    const At out =
        y_sram ? At{Buffer::kInput, *y_sram + static_cast<uint64_t>(r0 * D) * isa::dtype_bytes(y.dtype)} : sl;
    const At m{Buffer::kAccumulator, st1}, v{Buffer::kAccumulator, st2};
    const At in = x_sram ? At{Buffer::kInput, *x_sram + static_cast<uint64_t>(r0 * D) * ex} : sl;
    if (!x_sram)
      c.load(sl.buf, sl.addr, x.range(), x.addr + static_cast<uint64_t>(r0 * D) * ex, x.dtype,
             {D, rows, 1, 1}, {D, 0, 0});
    if (softmax) {
      softmax_rows(c, sl, scratch, m, acc, D, rows, qx ? std::optional<isa::DType>(x.dtype) : std::nullopt,
                   qy ? std::optional<isa::DType>(y.dtype) : std::nullopt);
    } else {
      NormRows r;
      r.D = D, r.rms = rms, r.gamma = gamma, r.beta = beta, r.a = c.act;
      r.m = m, r.v = v, r.k = acc, r.gamma_at = {Buffer::kWeight, gamma_at},
      r.beta_at = {Buffer::kWeight, beta_at};
      if (qx) r.x_codes = x.dtype;
      if (qy) r.y_codes = y.dtype;
      norm_rows(c, r, in, sl, scratch, out, rows);
    }
    if (!y_sram || y_stored)
      c.store(out.buf, out.addr, y.range(), y.addr + static_cast<uint64_t>(r0 * D) * ey, y.dtype,
              {D, rows, 1, 1}, {D, 0, 0});
  }
  c.plan->mapping = fmt::format(
      "row-wise {}: {} tile(s) of up to {} rows x {} elements loaded once, {} VEC steps per tile in SRAM "
      "(per-row statistics broadcast by column{}), {}{}{}{}",
      softmax ? "softmax (reduce_max, sub, exp, reduce_sum, recip, mul)"
      : rms   ? "rmsnorm (mul, reduce_mean, add eps, rsqrt, mul, mul gamma)"
              : "layernorm (reduce_mean, sub, mul, reduce_mean, add eps, rsqrt, mul, mul gamma, add beta)",
      tiles, tile, D, softmax ? 6 : (rms ? 5 : 7) + (gamma ? 1 : 0) + (beta ? 1 : 0),
      gamma || beta ? ", scale/bias by row" : "",
      y_sram
          ? (y_stored ? "left in the input scratchpad for the GEMM after it and stored for its other readers"
                      : "left in the input scratchpad for the GEMM after it")
          : "stored once",
      x_sram ? "; its input read in place where the layer before left it" : "",
      qx || qy ? "; int8 codes converted once after the load and once before the store" : "",
      qy ? " (the output scale folded into the per-row factor)" : "");
  return true;
}

}  // namespace backend
}  // namespace npusim::compiler
