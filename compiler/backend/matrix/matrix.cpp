// Matrix nodes (Conv, Gemm, MatMul) in fp32/fp16/bf16: the nodes described as MatrixJobs and the float
// strategy (operand dtypes, weight tiles, the fused epilogue) for the shared tiling search and tile walk
// of compiler/backend/matrix/matrix_walk.h.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>

#include "compiler/backend/core/context.h"
#include "compiler/backend/fusion/layer_fusion.h"
#include "compiler/backend/fusion/pre_norm.h"
#include "compiler/backend/fusion/project_tail.h"
#include "compiler/backend/fusion/residency.h"
#include "compiler/backend/fusion/siblings.h"
#include "compiler/backend/matrix/depthwise.h"
#include "compiler/backend/matrix/matrix_walk.h"
#include "compiler/backend/matrix/pixel_packing.h"
#include "compiler/backend/memory/movement.h"
#include "compiler/ops/conv_transpose.h"
#include "compiler/passes/lowered.h"

namespace npusim::compiler::backend {

using isa::Buffer;
using isa::DType;
using isa::VecOp;

namespace {

// The fused epilogue: y = act(acc + bias + residual).
struct Epilogue {
  enum class Bias { kNone, kRow, kCol, kScalar, kFull } bias = Bias::kNone;
  uint64_t bias_addr = 0;  // fp32 data segment: [N] (row), [M] (col), scalar, or [M, N] (full)
  int64_t bias_cols = 0;   // full: row length of the [M, N] bias
  bool residual = false;
  const DramTensor* res = nullptr;
  bool has_act = false;
  VecOp act = VecOp::kCopy;
  bool silu = false;  // act = x * sigmoid(x): sigmoid into a scratch tile, then the multiply
  int64_t imm0 = 0, imm1 = 0;
  // A block's layer scale and residual after the narrowing (backend/fusion/project_tail.h): VEC mul by the
  // per-channel scale (an activation-type segment [N]), VEC add of the residual tile, in the activation type.
  bool tail = false;
  uint64_t tail_scale_addr = 0;
  const DramTensor* tail_res = nullptr;
};

// A float matrix node: the shared job plus its weights and output side.
struct FloatJob : MatrixJob {
  std::vector<float> w;   // constant: w[((g*kh + i)*kw + j)*cg*mg + c*mg + m]
  bool w_elided = false;  // a shape-only constant (a timing-only compile): tiles placed, no values written
  std::function<uint64_t(int64_t)> y_base, res_base, tail_res_base;
  Epilogue epi;
};

// Moves the job's output and residual to image img's element `elems` on, of `es` bytes (JobBands' project
// bands, backend/fusion/layer_fusion.h: a dense output, not a view).
void shift_output(FloatJob& j, int64_t img, int64_t elems, int64_t es) {
  const uint64_t off = static_cast<uint64_t>(elems * es);
  j.y_base = [base = j.y_base, img, off](int64_t) { return base(img) + off; };
  if (j.res_base) j.res_base = [base = j.res_base, img, off](int64_t) { return base(img) + off; };
  if (j.tail_res_base)
    j.tail_res_base = [base = j.tail_res_base, img, off](int64_t) { return base(img) + off; };
}

// Operands in the context's precision (c.act), fp32 sums, and the float epilogue: bias, residual and
// activation on fp32 in the accumulator, the last step converting to c.act when that is narrower.
class FloatStrategy : public MatrixStrategy {
 public:
  FloatStrategy(Context& c, const FloatJob& j) : c_(c), j_(j) {
    ops.a = ops.w = ops.y = ops.r = c.act;
    ops.tile_read = j.epi.residual || j.epi.bias == Epilogue::Bias::kFull || j.epi.tail;
    ops.pad = 0;
  }

  int64_t acc_bytes(int64_t p, int64_t tn, int sides) const override {
    int64_t acc = round64(p * tn * 4);
    if (j_.epi.bias == Epilogue::Bias::kRow) acc += round64(tn * 4);
    if (j_.epi.bias == Epilogue::Bias::kCol) acc += round64(p * 4);
    if (j_.epi.bias == Epilogue::Bias::kScalar) acc += 64;
    if (j_.epi.bias == Epilogue::Bias::kFull || j_.epi.residual) acc += round64(p * tn * 4);
    if (j_.epi.silu) acc += round64(p * tn * 4);
    if (j_.epi.tail) acc += round64(tn * c_.esize) + round64(p * tn * 4);
    if (j_.y_rows) acc += round64(p * tn * c_.esize);  // the transposed tile
    return sides * acc;
  }

  int epilogue_ops() const override {
    if (output_stage()) return j_.epi.tail ? 3 : 1;
    int ops = (j_.epi.bias != Epilogue::Bias::kNone) + (j_.epi.residual ? 1 : 0) + (j_.epi.has_act ? 1 : 0) +
              (j_.epi.silu ? 1 : 0);
    if (ops == 0 && c_.act != DType::kFp32) ops = 1;
    return ops + (j_.epi.tail ? 2 : 0) + (j_.y_rows ? 1 : 0);  // y_rows: the transpose
  }

  int64_t side_bytes(int64_t p, int64_t tn, int sides) const override {
    int64_t b = 0;
    if (j_.epi.bias == Epilogue::Bias::kFull || j_.epi.residual) b += round64(p * tn * 4);
    if (j_.epi.silu) b += round64(p * tn * 4);
    if (j_.epi.tail) b += round64(p * tn * 4);
    return sides * b;
  }

  std::vector<int64_t> param_loads(int64_t tn) const override {
    std::vector<int64_t> loads;
    if (j_.epi.bias == Epilogue::Bias::kRow) loads.push_back(tn);
    if (j_.epi.bias == Epilogue::Bias::kScalar) loads.push_back(1);
    if (j_.epi.tail) loads.push_back(tn);
    return loads;
  }

  void allocate(SramAlloc& acc, SramAlloc& side, int64_t p_max, int64_t tn, int sides) override {
    const Epilogue& e = j_.epi;
    side_buf_ = side.buf;
    params_.reset();
    tail_params_.reset();
    for (int s = 0; s < sides; ++s) c_slot_[s] = acc.take(static_cast<uint64_t>(p_max * tn * 4));
    for (int s = 0; s < sides; ++s) {
      if (e.bias == Epilogue::Bias::kRow) bias_slot_[s] = acc.take(static_cast<uint64_t>(tn * 4));
      if (e.bias == Epilogue::Bias::kCol) bias_slot_[s] = acc.take(static_cast<uint64_t>(p_max * 4));
      if (e.bias == Epilogue::Bias::kScalar) bias_slot_[s] = acc.take(4);
      if (e.residual || e.bias == Epilogue::Bias::kFull)
        r_slot_[s] = side.take(static_cast<uint64_t>(p_max * tn * 4));
      if (e.silu) t_slot_[s] = side.take(static_cast<uint64_t>(p_max * tn * 4));
      if (e.tail) {
        scale_slot_[s] = acc.take(static_cast<uint64_t>(tn * c_.esize));
        r_slot_[s] = side.take(static_cast<uint64_t>(p_max * tn * 4));
      }
      if (j_.y_rows) x_slot_[s] = acc.take(static_cast<uint64_t>(p_max * tn * c_.esize));
    }
  }

  uint64_t acc_slot(int side) const override { return c_slot_[side]; }

  uint64_t weight_tile(int64_t b, int64_t gb, int64_t k0, int64_t k1, int64_t n0, int64_t n1) override {
    if (c_.in_trial() || j_.w_elided) {
      return c_.add_elided_data(static_cast<uint64_t>(j_.kh * j_.kw * (k1 - k0) * (n1 - n0) * c_.esize));
    }
    return c_.add_floats(weight_tile_values(j_, j_.w, b, gb, k0, k1, n0, n1), c_.act);
  }

  uint64_t depthwise_weights() override {
    const auto bytes = static_cast<uint64_t>(j_.kh * j_.kw * j_.groups * c_.esize);
    if (c_.in_trial()) return c_.reserve_data(bytes);
    if (j_.w_elided) return c_.add_elided_data(bytes);
    return c_.add_floats(depthwise_weight_values(j_, j_.w), c_.act);
  }

  void epilogue(const OutTile& t, int side) override {
    const Epilogue& e = j_.epi;
    const int64_t tn = t.tn;
    // The tile's place in its side's tile-sized slots (an image of a tile of several: OutTile::acc_px).
    const auto at = static_cast<uint64_t>(t.acc_px * tn * 4);
    const uint64_t cs = c_slot_[side] + at, bias_s = bias_slot_[side], r_s = r_slot_[side] + at;
    const uint64_t t_s = t_slot_[side] + at;
    const Buffer A = Buffer::kAccumulator;
    const uint64_t yoff =
        static_cast<uint64_t>(((t.oy0 * j_.OW + t.ox0) * j_.M + t.n0) * c_.esize);  // residual
    const int64_t P = j_.out_pitch();
    const uint64_t out_off = static_cast<uint64_t>((t.oy0 * j_.out_row() + t.ox0 * P + t.n0) * c_.esize);
    const std::array<int64_t, 4> box = {tn, t.ow, t.oh, 1};
    const std::array<int64_t, 3> strides = {j_.M, j_.OW * j_.M, 0};
    // Each step reads `cur` (fp32 in the accumulator) and the last one converts to the activation dtype.
    std::vector<Context::VecArgs> steps;
    auto base = [&](VecOp op) {
      Context::VecArgs v;
      v.op = op;
      v.src1_buf = A, v.src1 = cs, v.dst_buf = A, v.dst = cs, v.src2_buf = A;
      tile_box(v, t);
      return v;
    };
    if (e.bias != Epilogue::Bias::kNone) {
      const Range all{kDram, e.bias_addr, e.bias_addr + 1};
      Context::VecArgs v = base(VecOp::kAdd);
      v.src2 = bias_s;
      switch (e.bias) {
        case Epilogue::Bias::kRow:  // the per-channel vector, unless this side holds this tile's channels
          if (params_.need_load(side, t.n0, tn))
            c_.load(A, bias_s, all, e.bias_addr + static_cast<uint64_t>(t.n0 * 4), DType::kFp32,
                    {tn, 1, 1, 1}, {0, 0, 0});
          v.bcast = isa::Bcast::kRow;
          break;
        case Epilogue::Bias::kCol:  // gemm only: one value per output row (M index = oy)
          c_.load(A, bias_s, all, e.bias_addr + static_cast<uint64_t>(t.oy0 * 4), DType::kFp32,
                  {t.oh, 1, 1, 1}, {0, 0, 0});
          v.bcast = isa::Bcast::kCol;
          break;
        case Epilogue::Bias::kScalar:
          if (params_.need_load(side, t.n0, tn))
            c_.load(A, bias_s, all, e.bias_addr, DType::kFp32, {1, 1, 1, 1}, {0, 0, 0});
          v.bcast = isa::Bcast::kScalar;
          break;
        case Epilogue::Bias::kFull:
          c_.load(side_buf_, r_s, all, e.bias_addr + static_cast<uint64_t>((t.oy0 * e.bias_cols + t.n0) * 4),
                  DType::kFp32, {tn, t.oh, 1, 1}, {e.bias_cols, 0, 0});
          v.src2 = r_s, v.src2_buf = side_buf_;
          break;
        case Epilogue::Bias::kNone:
          break;
      }
      if (output_stage()) {
        // Relu is the clamp to [0, inf): they differ only on -0, which a sum onto +0 plus a bias never is.
        const float inf = std::numeric_limits<float>::infinity();
        v.op = VecOp::kOutput, v.out = c_.act;
        v.imm0 = e.has_act && e.act == VecOp::kClip ? e.imm0 : f32_imm(e.has_act ? 0.0f : -inf);
        v.imm1 = e.has_act && e.act == VecOp::kClip ? e.imm1 : f32_imm(inf);
        finish(v, t, out_off, box, side);
        return;
      }
      steps.push_back(v);
    }
    if (e.residual) {
      const uint64_t raddr = j_.res_base(t.img) + yoff;
      // Read where a residual hold keeps it (backend/fusion/residency.h), else loaded.
      const std::optional<uint64_t> held = residual_in_sram(c_, e.res->range(), raddr, c_.act, box, strides);
      if (!held) c_.load(side_buf_, r_s, e.res->range(), raddr, c_.act, box, strides);
      const Buffer r_buf = held ? Buffer::kInput : side_buf_;
      const uint64_t r_at = held ? *held : r_s;
      Context::VecArgs v = base(VecOp::kAdd);
      v.src2 = r_at, v.src2_buf = r_buf;
      if (c_.act != DType::kFp32) {
        Context::VecArgs cv = base(VecOp::kCopy);
        cv.src1 = r_at, cv.dst = r_s, cv.in = c_.act, cv.out = DType::kFp32;
        cv.src1_buf = r_buf, cv.dst_buf = side_buf_;
        c_.vec(cv);
        v.src2 = r_s, v.src2_buf = side_buf_;
      }
      steps.push_back(v);
    }
    if (e.silu) {
      Context::VecArgs sig = base(VecOp::kSigmoid);
      sig.dst = t_s, sig.dst_buf = side_buf_;
      steps.push_back(sig);
      Context::VecArgs v = base(VecOp::kMul);
      v.src2 = t_s, v.src2_buf = side_buf_;
      steps.push_back(v);
    } else if (e.has_act) {
      Context::VecArgs v = base(e.act);
      v.imm0 = e.imm0, v.imm1 = e.imm1;
      steps.push_back(v);
    }
    if (c_.act != DType::kFp32 && steps.empty()) steps.push_back(base(VecOp::kCopy));
    // Below fp32 the last step narrows in place: the vector unit reads its sources before it writes.
    if (c_.act != DType::kFp32) steps.back().out = c_.act;
    if (steps.empty() && !e.tail) {
      c_.store(A, cs, j_.y_range, j_.y_base(t.img) + out_off, c_.act, box, {P, j_.out_row(), 0});
      return;
    }
    if (steps.empty()) steps.push_back(base(VecOp::kCopy));  // fp32: the tail reads the tile in place
    for (size_t k = 0; k + 1 < steps.size(); ++k) c_.vec(steps[k]);
    finish(steps.back(), t, out_off, box, side);
  }

  bool ends_with_vec() const override {
    const Epilogue& e = j_.epi;
    return c_.act != DType::kFp32 || e.bias != Epilogue::Bias::kNone || e.residual || e.silu || e.has_act;
  }

 private:
  // The tile's last VEC `last` (writing c_.act at its dst slot), then the STORE of that slot; or, with
  // MatrixJob::y_sram, `last` writing the tile where the next layer reads it (backend/fusion/residency.h).
  void finish(Context::VecArgs last, const OutTile& t, uint64_t out_off, const std::array<int64_t, 4>& box,
              int side) {
    if (j_.y_sram >= 0 && j_.epi.tail)
      throw std::logic_error("backend: a project tail with an on-chip output");
    if (j_.y_sram >= 0) {
      write_on_chip(c_, j_, last, t, c_.esize);
      if (!j_.y_store) return;
      last.dst_buf = Buffer::kInput;  // stored from there (MatrixJob::y_store)
      last.dst = static_cast<uint64_t>(j_.y_sram) + j_.y_sram_offset(t.img, t.oy0, t.ox0, t.n0, c_.esize);
    } else {
      c_.vec(last);
      if (j_.epi.tail) tail(last, t, box, side);
    }
    const int64_t P = j_.out_pitch();
    if (j_.y_rows) {  // (kernel column, channel, kernel row) -> kernel row outermost, then each row stored
      if (j_.y_sram >= 0 || j_.epi.tail || t.tn != j_.M || t.n0 != 0)
        throw std::logic_error("backend: a one-job ConvTranspose tile without all its channels");
      const int64_t run = t.ow * P;  // one kernel row's elements of a row of the tile
      const uint64_t xs = x_slot_[side] + static_cast<uint64_t>(t.acc_px * t.tn * c_.esize);
      Context::VecArgs tr;
      tr.op = VecOp::kTranspose, tr.in = tr.out = c_.act;
      tr.src1_buf = last.dst_buf, tr.src1 = last.dst, tr.dst_buf = Buffer::kAccumulator, tr.dst = xs;
      tr.d0 = j_.y_rows, tr.d1 = run, tr.d2 = t.oh;
      c_.vec(tr);
      c_.store(Buffer::kAccumulator, xs, j_.y_range, j_.y_base(t.img) + out_off, c_.act,
               {run, j_.y_rows, t.oh, 1}, {j_.out_row() / j_.y_rows, j_.out_row(), 0});
      return;
    }
    c_.store(last.dst_buf, last.dst, j_.y_range, j_.y_base(t.img) + out_off, c_.act, box,
             {P, j_.out_row(), 0});
  }

  // The layer scale and the residual on the tile `last` wrote (fusion/project_tail.h): the Mul's and the
  // Add's own VECs, in the activation type, on the values those layers would read.
  void tail(const Context::VecArgs& last, const OutTile& t, const std::array<int64_t, 4>& box, int side) {
    const Epilogue& e = j_.epi;
    const Buffer A = Buffer::kAccumulator;
    const auto es = static_cast<uint64_t>(c_.esize);
    if (tail_params_.need_load(side, t.n0, t.tn)) {
      const Range all{kDram, e.tail_scale_addr, e.tail_scale_addr + 1};
      c_.load(A, scale_slot_[side], all, e.tail_scale_addr + static_cast<uint64_t>(t.n0) * es, c_.act,
              {t.tn, 1, 1, 1}, {0, 0, 0});
    }
    const uint64_t r_s = r_slot_[side] + static_cast<uint64_t>(t.acc_px * t.tn * 4);
    const uint64_t roff = static_cast<uint64_t>((t.oy0 * j_.OW + t.ox0) * j_.M + t.n0) * es;
    c_.load(side_buf_, r_s, e.tail_res->range(), j_.tail_res_base(t.img) + roff, c_.act, box,
            {j_.M, j_.OW * j_.M, 0});
    Context::VecArgs v;
    v.op = VecOp::kMul, v.in = v.out = c_.act;
    v.src1_buf = v.dst_buf = last.dst_buf, v.src1 = v.dst = last.dst;
    v.src2_buf = A, v.src2 = scale_slot_[side], v.bcast = isa::Bcast::kRow;
    tile_box(v, t);
    c_.vec(v);
    v.op = VecOp::kAdd, v.src2_buf = side_buf_, v.src2 = r_s, v.bcast = isa::Bcast::kNone;
    c_.vec(v);
  }

  // A per-channel or scalar bias with at most Relu or Clip after it: one output-stage VEC
  // (isa::VecOp::kOutput) instead of an add, the activation and the narrowing.
  bool output_stage() const {
    const Epilogue& e = j_.epi;
    return !e.residual && !e.silu && (e.bias == Epilogue::Bias::kRow || e.bias == Epilogue::Bias::kScalar) &&
           (!e.has_act || e.act == VecOp::kRelu || e.act == VecOp::kClip);
  }

  Context& c_;
  const FloatJob& j_;
  uint64_t c_slot_[2] = {0, 0}, bias_slot_[2] = {0, 0}, r_slot_[2] = {0, 0}, t_slot_[2] = {0, 0};
  uint64_t scale_slot_[2] = {0, 0}, x_slot_[2] = {0, 0};
  EpilogueParams params_, tail_params_;
  Buffer side_buf_ = Buffer::kAccumulator;  // where r_slot_ and t_slot_ lie (allocate)
};

std::string kib(int64_t b) {
  return b % 1024 == 0 ? fmt::format("{} KiB", b / 1024)
                       : fmt::format("{:.1f} KiB", static_cast<double>(b) / 1024);
}

// The error when not even a 1x1x1x1 tile fits: the first scratchpad it overflows, with the sizes.
[[noreturn]] void too_small(const Context& c, const MatrixJob& j, const MatrixMapper& mm) {
  Tiling t;
  t.gb = 1;
  mm.slot_bytes(t);
  const char* buf = "sram.input";
  int64_t need = t.in_bytes, have = c.capacity(Buffer::kInput);
  if (t.acc_bytes > c.capacity(Buffer::kAccumulator)) {
    buf = "sram.accumulator", need = t.acc_bytes, have = c.capacity(Buffer::kAccumulator);
  } else if (c.shared_capacity() > 0) {
    buf = "sram.input (shared by inputs and weights)", need = t.in_bytes + t.w_bytes,
    have = c.shared_capacity();
  } else if (t.w_bytes > c.capacity(Buffer::kWeight)) {
    buf = "sram.weight", need = t.w_bytes, have = c.capacity(Buffer::kWeight);
  }
  throw CompileError(fmt::format("layer '{}' ({}): even the smallest tile needs {} of {} (have {})",
                                 c.plan->name, j.what, kib(need), buf, kib(have)));
}

bool set_activation(const Node& n, Epilogue& e) {
  const std::string act = n.attr_string(kActivation, "");
  if (act.empty()) return true;
  e.has_act = true;
  if (act == "Silu") return e.silu = true;
  return fused_activation(n, act, &e.act, &e.imm0, &e.imm1);
}

bool same_layout(const DramTensor& a, const DramTensor& b) { return a.phys == b.phys; }

// `packed`: a conv that may run with several output pixels a column (backend/matrix/pixel_packing.h).
void run(Context& c, FloatJob& j, const BuildPacked<FloatJob>* packed = nullptr) {
  if (packed && run_imposed_packing<FloatJob, FloatStrategy>(c, j, *packed)) return;
  FloatStrategy fs(c, j);
  MatrixMapper mm(c, j, fs);
  Tiling t;
  int64_t evaluated = 0;
  if (map_matrix_job(c, j, fs, mm, &t, &evaluated)) return;
  if (evaluated == 0) too_small(c, j, mm);
  if (packed && lower_packed<FloatJob, FloatStrategy>(c, j, fs, mm, t, *packed)) return;
  record_tiling(c, j, t, evaluated);
  const int64_t before = c.em.size();
  mm.generate(t);
  c.plan->instructions = c.em.size() - before;
}

// A 2-D convolution over NHWC tensors: the node's own (Conv) or one derived from it (ConvTranspose as
// a stride-1 conv over a zero-inserted copy of its input). w is [M][cg][kh][kw].
struct ConvSpec {
  const DramTensor* x = nullptr;
  const DramTensor* y = nullptr;
  // The weights: the constant's own values (a Conv's: not copied, a ResNet-50 holds 100 MB of them)
  // or `derived` (ConvTranspose's flipped kernel).
  const std::vector<float>* w = nullptr;
  std::vector<float> derived;
  bool w_elided = false;  // a shape-only constant (a timing-only compile): neither w nor derived
  int64_t groups = 1, kh = 1, kw = 1, sh = 1, sw = 1, dh = 1, dw = 1, pt = 0, pl = 0;
  bool node_pads = false;  // Conv: pt / pl from the node's pads or auto_pad instead
};

bool lower_conv_spec(Context& c, const Node& n, const ConvSpec& cs) {
  const DramTensor& x = *cs.x;
  const DramTensor& y = *cs.y;
  FloatJob j;
  j.images = x.shape[0];
  j.C = x.shape[1], j.H = x.shape[2], j.W = x.shape[3];
  j.M = y.shape[1], j.OH = y.shape[2], j.OW = y.shape[3];
  j.groups = cs.groups;
  j.cg = j.C / j.groups, j.mg = j.M / j.groups;
  j.kh = cs.kh, j.kw = cs.kw, j.sh = cs.sh, j.sw = cs.sw, j.dh = cs.dh, j.dw = cs.dw, j.pt = cs.pt,
  j.pl = cs.pl;
  if (cs.node_pads) set_conv_pads(n, j);
  if (!j.conv_mappable()) return false;
  j.w_elided = cs.w_elided;
  if (!cs.w_elided) j.w = grouped_weights(j, *cs.w);
  const uint64_t es = static_cast<uint64_t>(c.esize);
  const uint64_t xa = x.addr, ya = y.addr;
  const int64_t xs = j.H * j.W * j.C, ys = j.OH * j.OW * j.M;
  // An output written in place into its slice of a Concat's buffer: that buffer's pixel and image strides.
  if (y.strided()) j.y_pitch = y.view_strides[2];
  const int64_t y_img = y.strided() ? y.view_strides[0] : ys;
  j.a_base = [=](int64_t img) { return xa + static_cast<uint64_t>(img * xs) * es; };
  j.y_base = [=](int64_t img) { return ya + static_cast<uint64_t>(img * y_img) * es; };
  j.a_range = x.range();
  j.y_range = y.range();
  std::vector<float> bias;
  if (n.has_input(2)) {
    const Value& bv = c.g.value(n.inputs[2]);
    if (!bv.is_constant()) return false;
    bias = bv.constant->to_float_vector();
    j.epi.bias = Epilogue::Bias::kRow;
    j.epi.bias_addr = c.add_floats(bias, DType::kFp32);
  }
  if (n.has_attr(kResidualInput) && n.has_input(3)) {
    const DramTensor& r = c.tensor(n.inputs[3]);
    if (!same_layout(r, y)) return false;
    j.epi.residual = true;
    j.epi.res = &r;
    const uint64_t ra = r.addr;
    j.res_base = [=](int64_t img) { return ra + static_cast<uint64_t>(img * ys) * es; };
  }
  if (!set_activation(n, j.epi)) return false;
  j.what = fmt::format("Conv {}x{}x{}->{}{}", j.kh, j.kw, j.C, j.M,
                       j.groups > 1 ? fmt::format(" group {}", j.groups) : "");
  c.plan->mapping = fmt::format("CONV {}x{} stride {}x{} dilation {}x{}{}", j.kh, j.kw, j.sh, j.sw, j.dh,
                                j.dw, j.groups > 1 ? fmt::format(", {} groups", j.groups) : "");
  if (subsample_pointwise(j)) c.plan->mapping += ", reading only the pixels it uses (strided LOAD)";
  // Packed: the kernel at shifted positions, the bias once per pixel of a column (pixel_packing.h).
  const BuildPacked<FloatJob> packed = [&](FloatJob& jp, int64_t p) {
    if (!j.w_elided) jp.w = packed_weights(j, j.w, p);
    if (j.epi.bias == Epilogue::Bias::kRow)
      jp.epi.bias_addr = c.add_floats(packed_channels(bias, p), DType::kFp32);
    return true;
  };
  const std::optional<FloatJob> banded =
      c.options.plan ? std::nullopt : packed_for_line_buffer<FloatJob, FloatStrategy>(c, j, packed);
  // Lowered whole on a copy: the mapping may change the job it maps (its input or output on chip), which the
  // bands still read after a trial of the whole layer.
  JobBands<FloatJob, FloatStrategy> bands(c, banded ? *banded : j, [&] {
    FloatJob whole = j;
    run(c, whole, &packed);
  });
  if (conv_job_wanted(c)) return hand_conv_job(c, bands);  // backend/fusion/layer_fusion.h
  if (!c.options.plan && lower_conv_pool(c, bands)) {      // backend/fusion/layer_fusion.h
    if (banded) record_packing(c, j, *banded, banded->pack, line_buffer_packing(c));
    return true;
  }
  run(c, j, &packed);
  if (j.groups > 1 && c.plan->placement == Placement::kNpuMatrix) {
    c.plan->mapping += fmt::format(" as {} block-diagonal blocks of {} groups",
                                   j.groups / c.plan->group_block, c.plan->group_block);
  }
  return true;
}

bool lower_conv(Context& c, const Node& n) {
  const Value& xv = c.g.value(n.inputs[0]);
  const Value& wv = c.g.value(n.inputs[1]);
  if (xv.shape.size() != 4 || !wv.is_constant() || n.op_type != "Conv") return false;
  const DramTensor& x = c.tensor(n.inputs[0]);
  const DramTensor& y = c.tensor(n.outputs[0]);
  if (!x.nhwc_in_memory() || !y.nhwc_in_memory()) return false;
  ConvSpec cs;
  cs.x = &x, cs.y = &y;
  cs.groups = n.attr_int("group", 1);
  cs.kh = wv.shape[2], cs.kw = wv.shape[3];
  const auto st = n.attr_ints("strides", {1, 1}), dl = n.attr_ints("dilations", {1, 1});
  cs.sh = st[0], cs.sw = st[1], cs.dh = dl[0], cs.dw = dl[1];
  cs.node_pads = true;
  const Tensor& wt = *wv.constant;
  if (!wt.has_values()) {
    cs.w_elided = true;
  } else if (wt.floating()) {
    cs.w = &wt.f;
  } else {
    cs.derived = wt.to_float_vector();
    cs.w = &cs.derived;
  }
  return lower_conv_spec(c, n, cs);
}

}  // namespace

// Sibling convs as one float job (backend/fusion/siblings.h): their weights and biases side by side, each
// layer's padded with zeros to a multiple of the array's columns; each tile's epilogue writes its layer's
// tensor (SegmentStrategy).
bool lower_conv_siblings(Context& c, const std::vector<const Node*>& nodes) {
  const Node& n = *nodes.front();
  const DramTensor& x = c.tensor(n.inputs[0]);
  if (x.strided() || !x.nhwc_in_memory()) return false;
  const int64_t align = c.config.systolic_array.cols;
  FloatJob j;
  j.images = x.shape[0];
  j.C = x.shape[1], j.H = x.shape[2], j.W = x.shape[3];
  j.M = 0;
  const Value& w0 = c.g.value(n.inputs[1]);
  j.kh = w0.shape[2], j.kw = w0.shape[3];
  const auto st = n.attr_ints("strides", {1, 1}), dl = n.attr_ints("dilations", {1, 1});
  j.sh = st[0], j.sw = st[1], j.dh = dl[0], j.dw = dl[1];
  std::vector<float> w, bias;
  std::vector<SegmentOutput> outs;
  const int64_t taps = j.C * j.kh * j.kw;
  for (const Node* s : nodes) {
    const DramTensor& y = c.tensor(s->outputs[0]);
    if (!y.nhwc_in_memory()) return false;
    const Tensor& wt = *c.g.value(s->inputs[1]).constant;
    // A shape-only constant (a timing-only compile): tiles placed, no values written.
    if (!wt.has_values()) j.w_elided = true;
    const int64_t m = y.shape[1], padded = ceil_div(m, align) * align;
    outs.push_back(segment_output(y, j.M));
    j.OH = y.shape[2], j.OW = y.shape[3];
    j.segments.push_back({j.M, j.M + m});
    if (!j.w_elided) {
      const std::vector<float> ws = wt.floating() ? wt.f : wt.to_float_vector();
      w.insert(w.end(), ws.begin(), ws.end());
      w.resize(static_cast<size_t>((j.M + padded) * taps), 0.0f);
    }
    if (s->has_input(2)) {
      const std::vector<float> b = c.g.value(s->inputs[2]).constant->to_float_vector();
      bias.insert(bias.end(), b.begin(), b.end());
      bias.resize(static_cast<size_t>(j.M + padded), 0.0f);
    }
    j.M += padded;
  }
  j.mg = j.M, j.cg = j.C;
  j.n_align = merged_alignment(j);
  set_conv_pads(n, j);
  if (!j.conv_mappable()) return false;
  if (!j.w_elided) j.w = grouped_weights(j, w);
  const uint64_t es = static_cast<uint64_t>(c.esize);
  const uint64_t xa = x.addr;
  const int64_t xs = j.H * j.W * j.C;
  j.a_base = [=](int64_t img) { return xa + static_cast<uint64_t>(img * xs) * es; };
  j.a_range = x.range();
  if (!bias.empty()) {
    j.epi.bias = Epilogue::Bias::kRow;
    j.epi.bias_addr = c.add_floats(bias, DType::kFp32);
  }
  if (!set_activation(n, j.epi)) return false;
  j.what =
      fmt::format("Conv {}x{}x{}->{} ({} sibling layers)", j.kh, j.kw, j.C, merged_channels(j), nodes.size());
  c.plan->mapping = fmt::format(
      "CONV {}x{} stride {}x{} dilation {}x{}, {} sibling layers as one GEMM of {} "
      "channels",
      j.kh, j.kw, j.sh, j.sw, j.dh, j.dw, nodes.size(), merged_channels(j));
  if (subsample_pointwise(j)) c.plan->mapping += ", reading only the pixels it uses (strided LOAD)";
  SegmentStrategy<FloatStrategy> ss(c, j, [&j, &outs, es](size_t k) {
    const SegmentOutput& o = outs[k];
    const uint64_t base = o.base(static_cast<int64_t>(es)), image = static_cast<uint64_t>(o.image) * es;
    j.y_base = [base, image](int64_t img) { return base + static_cast<uint64_t>(img) * image; };
    j.y_pitch = o.pitch;
    j.y_range = o.range;
  });
  MatrixMapper mm(c, j, ss);
  Tiling t;
  int64_t evaluated = 0;
  if (map_matrix_job(c, j, ss, mm, &t, &evaluated) || evaluated == 0 || j.y_sram >= 0) return false;
  record_tiling(c, j, t, evaluated);
  c.plan->macs = num_elements(c.g.value(n.outputs[0]).shape) * taps;
  const int64_t before = c.em.size();
  mm.generate(t);
  c.plan->instructions = c.em.size() - before;
  return true;
}

namespace {

// A ConvTranspose whose stride equals its kernel (no padding, dilation or output padding, one group):
// every input pixel writes its own kh x kw block of output pixels, so no block overlaps another and no
// zero is multiplied. Kernel row i is one 1x1 convolution of the input to kw * M channels (channel
// j * M + m is output pixel (y * sh + i, x * sw + j), channel m), whose output rows are every sh-th row
// of the output (MatrixJob::y_row) and whose pixels are contiguous there (kw = sw). False, with nothing
// emitted, for any other form.
bool lower_conv_transpose_blocks(Context& c, const Node& n, const DramTensor& x, const DramTensor& y) {
  const Value& wv = c.g.value(n.inputs[1]);
  const int64_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3];
  const int64_t M = y.shape[1], OH = y.shape[2], OW = y.shape[3];
  const int64_t kh = wv.shape[2], kw = wv.shape[3];
  const auto st = n.attr_ints("strides", {1, 1}), dl = n.attr_ints("dilations", {1, 1});
  const auto pads = n.attr_ints("pads", {0, 0, 0, 0}), opad = n.attr_ints("output_padding", {0, 0});
  const auto zero = [](const std::vector<int64_t>& v) {
    return std::all_of(v.begin(), v.end(), [](int64_t e) { return e == 0; });
  };
  if (n.attr_int("group", 1) != 1 || wv.shape[0] != C || wv.shape[1] != M || st.size() != 2 || st[0] != kh ||
      st[1] != kw || dl != std::vector<int64_t>{1, 1} || !zero(pads) || !zero(opad) || OH != H * kh ||
      OW != W * kw || n.attr_string("auto_pad", "NOTSET") != "NOTSET" || y.strided() || x.strided() ||
      (n.has_attr(kResidualInput) && n.has_input(3)))
    return false;
  FloatJob j;
  j.images = N, j.C = C, j.H = H, j.W = W, j.M = kw * M, j.OH = H, j.OW = W;
  j.cg = C, j.mg = kw * M;
  j.y_row = kh * OW * M;
  if (!j.conv_mappable() || !set_activation(n, j.epi)) return false;
  if (n.has_input(2)) {
    const Value& bv = c.g.value(n.inputs[2]);
    if (!bv.is_constant()) return false;
    const std::vector<float> b = bv.constant->to_float_vector();
    std::vector<float> rep;
    for (int64_t jj = 0; jj < kw; ++jj) rep.insert(rep.end(), b.begin(), b.end());
    j.epi.bias = Epilogue::Bias::kRow;
    j.epi.bias_addr = c.add_floats(rep, DType::kFp32);
  }
  const Tensor& wt = *c.g.value(n.inputs[1]).constant;
  const std::vector<float> w =
      wt.has_values() ? wt.to_float_vector() : std::vector<float>();  // [C][M][kh][kw]
  const uint64_t es = static_cast<uint64_t>(c.esize), xa = x.addr;
  j.a_base = [=](int64_t img) { return xa + static_cast<uint64_t>(img * H * W * C) * es; };
  j.a_range = x.range();
  j.y_range = y.range();
  // One job of all kernel rows' channels reads the input once, kh jobs read it kh times; its channels are
  // ordered (kernel column, channel, kernel row) so that the epilogue's transpose gathers each kernel row's
  // pixels (MatrixJob::y_rows), one VEC more a tile, every channel in one tile (several column folds when
  // kh * kw * M exceeds the array's columns). Both simulated, the faster kept. Not with the output left on
  // chip.
  auto one_job = [&] {
    FloatJob ji = j;
    ji.M = ji.mg = kh * kw * M;
    ji.y_pitch = kw * M;
    ji.y_rows = kh;
    ji.w_elided = !wt.has_values();
    std::vector<float> wi(ji.w_elided ? 0 : static_cast<size_t>(kh * kw * M * C));  // [N][C][1][1]
    for (int64_t jj = 0; jj < kw && !ji.w_elided; ++jj)
      for (int64_t m = 0; m < M; ++m)
        for (int64_t i = 0; i < kh; ++i)
          for (int64_t ci = 0; ci < C; ++ci)
            wi[static_cast<size_t>(((jj * M + m) * kh + i) * C + ci)] =
                w[static_cast<size_t>(((ci * M + m) * kh + i) * kw + jj)];
    if (!ji.w_elided) ji.w = grouped_weights(ji, wi);
    if (n.has_input(2)) {
      const std::vector<float> b = c.g.value(n.inputs[2]).constant->to_float_vector();
      std::vector<float> rep;
      for (int64_t jj = 0; jj < kw; ++jj)
        for (int64_t m = 0; m < M; ++m)
          rep.insert(rep.end(), static_cast<size_t>(kh), b[static_cast<size_t>(m)]);
      ji.epi.bias_addr = c.add_floats(rep, DType::kFp32);
    }
    const uint64_t ya = y.addr;
    ji.y_base = [=](int64_t img) { return ya + static_cast<uint64_t>(img * OH * OW * M) * es; };
    ji.what = fmt::format("ConvTranspose {}x{}x{}->{} in one job", kh, kw, C, M);
    run(c, ji);
    c.plan->mapping = JobCosts::conv_transpose_rows(kh, kw, M) +
                      "; one CONV of all kernel rows' channels (the "
                      "input read once), each tile transposed to kernel-row order before its STOREs";
  };
  auto row_jobs = [&] {
    JobCosts total;
    for (int64_t i = 0; i < kh; ++i) {
      FloatJob ji = j;
      ji.w_elided = !wt.has_values();
      std::vector<float> wi(ji.w_elided ? 0 : static_cast<size_t>(kw * M * C));  // [kw * M][C][1][1]
      for (int64_t jj = 0; jj < kw && !ji.w_elided; ++jj)
        for (int64_t m = 0; m < M; ++m)
          for (int64_t ci = 0; ci < C; ++ci)
            wi[static_cast<size_t>((jj * M + m) * C + ci)] =
                w[static_cast<size_t>(((ci * M + m) * kh + i) * kw + jj)];
      if (!ji.w_elided) ji.w = grouped_weights(ji, wi);
      const uint64_t ya = y.addr + static_cast<uint64_t>(i * OW * M) * es;
      ji.y_base = [=](int64_t img) { return ya + static_cast<uint64_t>(img * OH * OW * M) * es; };
      ji.what = fmt::format("ConvTranspose {}x{}x{}->{} kernel row {}", kh, kw, C, M, i);
      run(c, ji);
      total.add(*c.plan);
    }
    total.write(*c.plan);
    c.plan->mapping = JobCosts::conv_transpose_rows(kh, kw, M);
  };
  const bool one = kh > 1 && !keeps_on_chip(c, n.outputs[0]);
  choose_conv_transpose_jobs(c, n, kw * M, one, one_job, row_jobs);
  return true;
}

// ConvTranspose (2-D, constant weights) as a stride-1 convolution over a zero-inserted copy of the input:
// the input's pixels land every stride rows/columns in a DRAM scratch tensor padded by (kernel reach -
// pad) on each side (a compile-time index map: one DMA row per input pixel, zeros from a fill), and
// the kernel is flipped with input/output channels swapped. The array multiplies the inserted zeros:
// stride_h x stride_w times the MACs of the transposed conv itself, visible in the report.
bool lower_conv_transpose(Context& c, const Node& n) {
  const Value& xv = c.g.value(n.inputs[0]);
  const Value& wv = c.g.value(n.inputs[1]);
  if (xv.shape.size() != 4 || !wv.is_constant()) return false;
  const DramTensor& x = c.tensor(n.inputs[0]);
  const DramTensor& y = c.tensor(n.outputs[0]);
  if (!x.nhwc_in_memory() || !y.nhwc_in_memory()) return false;
  if (lower_conv_transpose_blocks(c, n, x, y)) return true;
  const int64_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3];
  const int64_t M = y.shape[1], OH = y.shape[2], OW = y.shape[3];
  const int64_t groups = n.attr_int("group", 1);
  const int64_t cg = C / groups, mg = wv.shape[1], kh = wv.shape[2], kw = wv.shape[3];
  if (mg * groups != M) return false;
  // Everything that could still refuse the node is checked before the zero insertion is emitted.
  if (n.has_input(2) && !c.g.value(n.inputs[2]).is_constant()) return false;
  if (n.has_attr(kResidualInput) && n.has_input(3) && !same_layout(c.tensor(n.inputs[3]), y)) return false;
  {
    Epilogue e;
    if (!set_activation(n, e)) return false;
  }
  if (kh > 255 || kw > 255) return false;
  ConvTransposeForm f;
  try {
    f = conv_transpose_form(n, H, W, kh, kw);
  } catch (const std::invalid_argument&) {
    return false;
  }
  if (f.oh != OH || f.ow != OW) return false;  // not the size shape inference gave: not mapped
  // Zero-inserted, padded input: pixel (iy, ix) at (lead_h + iy*sh, lead_w + ix*sw).
  const int64_t HP = f.hp, WP = f.wp;
  const DramTensor xp = scratch_tensor(c, {N, C, HP, WP}, kNhwc);
  std::vector<int64_t> map(static_cast<size_t>(N * HP * WP * C), -1);
  for (int64_t b = 0; b < N; ++b) {
    for (int64_t iy = 0; iy < H; ++iy) {
      const int64_t py = f.lead_h + iy * f.sh;
      if (py < 0 || py >= HP) continue;
      for (int64_t ix = 0; ix < W; ++ix) {
        const int64_t px = f.lead_w + ix * f.sw;
        if (px < 0 || px >= WP) continue;
        for (int64_t ch = 0; ch < C; ++ch) {
          map[static_cast<size_t>(((b * HP + py) * WP + px) * C + ch)] = ((b * H + iy) * W + ix) * C + ch;
        }
      }
    }
  }
  copy_index_map(c, xp, {&x}, map, 0.0);
  ConvSpec cs;
  cs.x = &xp, cs.y = &y;
  cs.groups = groups, cs.kh = kh, cs.kw = kw, cs.dh = f.dh, cs.dw = f.dw;
  // W [C][mg][kh][kw] -> conv weights [M][cg][kh][kw], flipped.
  const Tensor& wt = *c.g.value(n.inputs[1]).constant;
  cs.w_elided = !wt.has_values();
  if (!cs.w_elided) cs.derived = conv_transpose_conv_weights(wt.to_float_vector(), groups, cg, mg, kh, kw);
  cs.w = &cs.derived;
  if (!lower_conv_spec(c, n, cs))
    throw std::logic_error("backend: the zero-inserted conv of a ConvTranspose");
  c.plan->mapping = fmt::format("zero-inserted input (stride {}x{}) + {}", f.sh, f.sw, c.plan->mapping);
  return true;
}

bool lower_gemm(Context& c, const Node& n) {
  const DramTensor& a = c.tensor(n.inputs[0]);
  const DramTensor& y = c.tensor(n.outputs[0]);
  if (!a.layout.empty() || !y.layout.empty()) return false;
  const Value& bv = c.g.value(n.inputs[1]);
  Shape as = a.shape, bs = bv.shape;
  if (as.empty() || bs.empty()) return false;
  if (as.size() == 1) as.insert(as.begin(), 1);
  if (bs.size() == 1) bs.push_back(1);
  const int64_t M = as[as.size() - 2], K = as.back(), N = bs.back();
  if (bs[bs.size() - 2] != K) return false;
  if (K > 65535 || N > 65535) return false;
  const uint64_t es = static_cast<uint64_t>(c.esize);
  FloatJob j;
  j.gemm = true;
  j.C = K, j.W = 1, j.OW = 1, j.M = N;
  j.cg = K, j.mg = N;
  const Shape a_batch(as.begin(), as.end() - 2), b_batch(bs.begin(), bs.end() - 2);
  const int64_t a_count = num_elements(a_batch);
  const uint64_t aa = a.addr, ya = y.addr;
  // A may be a strided view (backend/memory/strided_views.h): its rows `pitch` apart, its matrices anywhere.
  const std::optional<MatrixRows> ar = matrix_rows(a), yr = matrix_rows(y);
  if (!ar || !yr) return false;
  if (a.strided()) j.a_pitch = ar->pitch;
  if (y.strided()) j.y_pitch = yr->pitch;  // written into a head-merging Transpose's output (strided_views.h)
  if (bv.is_constant() && b_batch.empty()) {
    // Shared 2-D weights: fold every batch dimension of A into M.
    if (!ar->uniform || !yr->uniform) return false;
    j.images = 1;
    j.H = j.OH = a_count * M;
    j.a_base = [=](int64_t) { return aa; };
    j.y_base = [=](int64_t) { return ya; };
    j.w_elided = !bv.constant->has_values();
    if (!j.w_elided) j.w = bv.constant->to_float_vector();  // [K][N] = [g=1][1][1][cg][mg]
  } else {
    if (bv.is_constant()) return false;  // batched constant weights: not mapped
    const DramTensor& b = c.tensor(n.inputs[1]);
    if (!b.layout.empty()) return false;
    const std::optional<MatmulBatches> mb = matmul_batches(a.shape, bv.shape, y.shape);
    const std::optional<MatrixRows> br = matrix_rows(b);
    if (!mb || !br) return false;
    if (b.strided()) j.b_pitch = br->pitch;
    std::vector<int64_t> ao, bo;  // where each image's A and B start (elements)
    for (int64_t i : mb->a_off) ao.push_back(ar->start.at(static_cast<size_t>(i)));
    for (int64_t i : mb->b_off) bo.push_back(br->start.at(static_cast<size_t>(i)));
    const int64_t images = mb->images;
    j.images = images;
    j.H = j.OH = M;
    j.b_const = false;
    const uint64_t ba = b.addr;
    j.a_base = [=](int64_t img) { return aa + static_cast<uint64_t>(ao[static_cast<size_t>(img)]) * es; };
    j.b_base = [=](int64_t img) { return ba + static_cast<uint64_t>(bo[static_cast<size_t>(img)]) * es; };
    std::vector<int64_t> yo;  // where each output matrix starts (elements)
    for (int64_t i = 0; i < images; ++i) yo.push_back(yr->start.at(static_cast<size_t>(i)));
    j.y_base = [=](int64_t img) { return ya + static_cast<uint64_t>(yo[static_cast<size_t>(img)]) * es; };
    j.b_range = b.range();
  }
  j.a_range = a.range();
  j.y_range = y.range();
  const int64_t rows_total = j.images * j.OH;
  (void)rows_total;
  if (n.has_input(2)) {
    const Value& cv = c.g.value(n.inputs[2]);
    if (!cv.is_constant()) return false;
    Shape s = cv.shape;
    while (!s.empty() && s.front() == 1 && s.size() > 0) s.erase(s.begin());
    const std::vector<float> v = cv.constant->to_float_vector();
    const int64_t total_m = j.images * j.OH;
    if (s.empty()) {
      j.epi.bias = Epilogue::Bias::kScalar;
      j.epi.bias_addr = c.add_floats(v, DType::kFp32);
    } else if (s.size() == 1 && s[0] == N) {
      j.epi.bias = Epilogue::Bias::kRow;
      j.epi.bias_addr = c.add_floats(v, DType::kFp32);
    } else if (cv.shape.size() == 2 && cv.shape[0] == M && cv.shape[1] == 1 && j.images == 1 &&
               total_m == M) {
      j.epi.bias = Epilogue::Bias::kCol;
      j.epi.bias_addr = c.add_floats(v, DType::kFp32);
    } else if (cv.shape.size() == 2 && cv.shape[0] == M && cv.shape[1] == N && total_m == M) {
      j.epi.bias = Epilogue::Bias::kFull;
      j.epi.bias_cols = N;
      j.epi.bias_addr = c.add_floats(v, DType::kFp32);
    } else {
      return false;
    }
  }
  if (n.has_attr(kResidualInput) && n.has_input(3)) {
    const DramTensor& r = c.tensor(n.inputs[3]);
    if (r.shape != y.shape || !r.layout.empty()) return false;
    j.epi.residual = true;
    j.epi.res = &r;
    const uint64_t ra = r.addr;
    const int64_t per = j.OH * N;
    j.res_base = [=](int64_t img) { return ra + static_cast<uint64_t>(img * per) * es; };
  }
  if (!set_activation(n, j.epi)) return false;
  j.what = fmt::format("{} {}x{}x{}", n.op_type, M, K, N);
  c.plan->mapping = fmt::format("MATMUL M={} K={} N={}{}", j.OH, K, N,
                                j.images > 1 ? fmt::format(" x {} batches", j.images) : "");
  // A block's layer scale and residual after it, run by its epilogue (backend/fusion/project_tail.h).
  if (const std::optional<TailOperands> tail = project_tail_operands(c, n);
      tail && !tail->q_in && !j.epi.residual && !j.epi.has_act && j.images == 1 && !y.strided() &&
      static_cast<int64_t>(tail->scale.size()) == N &&
      (j.epi.bias == Epilogue::Bias::kNone || j.epi.bias == Epilogue::Bias::kRow)) {
    // The job with its tail; its data segment is added where it is emitted (a trial's is undone with it).
    const auto with_tail = [&] {
      FloatJob jt = j;
      jt.epi.tail = true;
      jt.epi.tail_scale_addr = c.add_floats(tail->scale, c.act);
      jt.epi.tail_res = tail->residual;
      const uint64_t ra = tail->residual->addr, za = tail->out->addr;
      jt.tail_res_base = [=](int64_t) { return ra; };
      jt.y_base = [=](int64_t) { return za; };
      jt.y_range = tail->out->range();
      return jt;
    };
    // Taken when its simulation beats the MatMul alone with the Mul and the Add after it (project_tail.h).
    const auto emit_with = [&] {
      FloatJob jt = with_tail();
      run(c, jt);
    };
    const auto emit_without = [&] {
      FloatJob copy = j;
      run(c, copy);
    };
    if (project_tail_pays(c, emit_with, emit_without)) {
      j = with_tail();
      take_project_tail(c);
      c.plan->mapping +=
          fmt::format("; '{}' (layer scale) and '{}' (residual) in its epilogue, output stored as '{}'s",
                      tail->mul, tail->add, tail->add);
    }
  }
  // A LayerNorm in its loads, or lowered apart before it, as simulation finds faster (fusion/pre_norm.h).
  pre_norm_choose(c, [&] {
    FloatJob copy = j;
    run(c, copy);
  });
  run(c, j);
  return true;
}

}  // namespace

std::string matrix_decline_reason(const Context& c, const Node& n) {
  const bool conv = n.op_type == "Conv" || n.op_type == "ConvTranspose";
  if (conv || n.op_type == "Gemm" || n.op_type == "MatMul") {
    if (n.inputs.size() >= 2 && !c.g.value(n.inputs[1]).is_constant() && conv)
      return "its weights are a runtime input (the array takes convolution weights as pre-tiled constants)";
  }
  if (conv) {
    const Value& w = c.g.value(n.inputs[1]);
    if (c.g.value(n.inputs[0]).shape.size() != 4)
      return fmt::format("a {}-D convolution (the array maps 2-D ones; 1-D ones as 2-D of height 1)",
                         c.g.value(n.inputs[0]).shape.size() - 2);
    std::vector<int64_t> fields = {w.shape[2], w.shape[3]};
    for (const char* key : {"strides", "dilations", "pads"}) {
      const auto v = n.attr_ints(key);
      fields.insert(fields.end(), v.begin(), v.end());
    }
    if (*std::max_element(fields.begin(), fields.end()) > 255) {
      return fmt::format(
          "its kernel {}x{}, strides, dilations or pads exceed 255, the widest a CONV "
          "instruction's window fields hold",
          w.shape[2], w.shape[3]);
    }
  }
  if (n.op_type == "Gemm" && (n.attr_int("transA", 0) || n.attr_int("transB", 0) ||
                              n.attr_float("alpha", 1.0f) != 1.0f || n.attr_float("beta", 1.0f) != 1.0f))
    return "a Gemm with transA, transB, alpha or beta the passes could not fold into constant weights";
  return "";
}

bool lower_matrix(Context& c, const Node& n) {
  if (n.op_type == "Conv") return lower_conv(c, n);
  if (n.op_type == "ConvTranspose") return lower_conv_transpose(c, n);
  if (n.op_type == "Gemm" || n.op_type == "MatMul") {
    if (n.op_type == "Gemm" && (n.attr_int("transA", 0) || n.attr_int("transB", 0) ||
                                n.attr_float("alpha", 1.0f) != 1.0f || n.attr_float("beta", 1.0f) != 1.0f)) {
      return false;
    }
    return lower_gemm(c, n);
  }
  return false;
}

}  // namespace npusim::compiler::backend
