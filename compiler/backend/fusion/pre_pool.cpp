// A max pool of stride 1 done on its reader's tiles (pre_pool.h).
#include "compiler/backend/fusion/pre_pool.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "compiler/backend/fusion/pre_affine.h"
#include "compiler/backend/int8/int8.h"
#include "compiler/passes/lowered.h"
#include "compiler/quant/precision.h"
#include "isa/numerics.h"
#include "isa/timing/units.h"

namespace npusim::compiler::backend {

using isa::Buffer;
using isa::DType;
using isa::VecOp;

namespace {

// Bytes of each of the two scratch halves: at most 32 KiB, at most an eighth of the input scratchpad (on
// edge, GoogLeNet fp16: 4.48 M cycles with 16 KiB halves, 4.35 M with 32 KiB, no better with 64 KiB).
constexpr int64_t kHalfBytes = 32 * 1024;

bool all_ones(const std::vector<int64_t>& v) {
  return std::all_of(v.begin(), v.end(), [](int64_t x) { return x == 1; });
}

// The vector unit's cycles for VEC `v` (the simulator's formula, isa/timing/units.h).
double pool_vec_cycles(const Context& c, const Context::VecArgs& v) {
  isa::Instruction ins;
  ins.opcode = isa::Opcode::kVec;
  ins.set(isa::Field::kVop, static_cast<int64_t>(v.op)).set(isa::Field::kDtype, static_cast<int64_t>(v.in));
  ins.set(isa::Field::kDtypeOut, static_cast<int64_t>(v.out));
  ins.set(isa::Field::kD0, v.d0).set(isa::Field::kD1, v.d1).set(isa::Field::kD2, v.d2);
  ins.set(isa::Field::kWinH, v.win_h).set(isa::Field::kWinW, v.win_w);
  ins.set(isa::Field::kStrH, v.str_h).set(isa::Field::kStrW, v.str_w);
  return static_cast<double>(isa::timing::vec_cycles(ins, c.config.vector));
}

// The VECs that pool the window [in_rows][in_cols][tc] at `at` (input scratchpad) into `dst` of `buf`
// ([in_rows - kh + 1][in_cols - kw + 1][tc]), whichever of these forms the vector unit takes the fewest
// cycles for: one VEC max_pool kh x kw (kh * kw reads an output); or by rows then columns, a max_pool 1 x kw
// in place (each row's maxima, [in_rows][cols]) and binary maxes of rows d apart, each doubling the rows a
// value covers (kh = 3: two), the last writing `dst`; or, on integer codes, by columns then rows: the binary
// maxes on the window's whole rows in place, then a max_pool 1 x kw into `dst` (cheaper for wide windows of
// few rows). Exact: each max keeps its first operand unless the second is greater (and the first NaN it
// meets), so by rows then columns the first of the window's maxima in row-major order wins, as in the one VEC
// (a -0 beside a +0, NaNs); codes have no such ties, so any order is exact on them.
std::vector<Context::VecArgs> pool_vecs(const Context& c, const PrePool& p, Buffer buf, uint64_t dst,
                                        uint64_t at, int64_t in_rows, int64_t in_cols, int64_t tc) {
  Context::VecArgs v;
  v.op = VecOp::kMaxPool, v.in = v.out = p.dtype;
  v.src1_buf = Buffer::kInput, v.src1 = at, v.dst_buf = buf, v.dst = dst;
  v.d0 = tc, v.d1 = in_cols, v.d2 = in_rows, v.win_h = p.kh, v.win_w = p.kw, v.str_h = 1, v.str_w = 1;
  std::vector<std::vector<Context::VecArgs>> forms = {{v}};
  if (p.kh < 2) return forms[0];
  const int64_t es = isa::dtype_bytes(p.dtype);
  // Binary maxes over rows of `width` pixels at `at`, in place but the last (into `dst` of `buf` when
  // `last_out`); returns the rows left.
  auto columns = [&](std::vector<Context::VecArgs>& form, int64_t width, bool last_out) {
    int64_t valid = in_rows;
    for (int64_t span = 1; span < p.kh;) {
      const int64_t d = std::min(span, p.kh - span);
      valid -= d, span += d;
      Context::VecArgs m;
      m.op = VecOp::kMax, m.in = m.out = p.dtype;
      m.src1_buf = m.src2_buf = Buffer::kInput, m.src1 = at,
      m.src2 = at + static_cast<uint64_t>(d * width * tc * es);
      const bool out = last_out && span == p.kh;
      m.dst_buf = out ? buf : Buffer::kInput, m.dst = out ? dst : at;
      m.d0 = tc, m.d1 = width, m.d2 = valid;
      form.push_back(m);
    }
    return valid;
  };
  std::vector<Context::VecArgs> rows_first;
  Context::VecArgs r = v;
  r.dst_buf = Buffer::kInput, r.dst = at, r.win_h = 1;
  rows_first.push_back(r);
  columns(rows_first, in_cols - p.kw + 1, true);
  forms.push_back(rows_first);
  if (isa::numerics::is_integer(p.dtype)) {
    std::vector<Context::VecArgs> columns_first;
    Context::VecArgs last = r;
    last.dst_buf = buf, last.dst = dst, last.d2 = columns(columns_first, in_cols, false);
    columns_first.push_back(last);
    forms.push_back(columns_first);
  }
  size_t best = 0;
  double best_cycles = 0;
  for (size_t k = 0; k < forms.size(); ++k) {
    double cycles = 0;
    for (const Context::VecArgs& a : forms[k]) cycles += pool_vec_cycles(c, a);
    if (k == 0 || cycles < best_cycles) best = k, best_cycles = cycles;
  }
  return forms[best];
}

// Emits the pool for output pixels [r, r + rows) x [c0, c0 + cols) of channels [ch, ch + tc) into `dst` of
// `buf` (dense [rows][cols][tc]): the window LOAD into the next scratch half and its VECs (pool_vecs).
void pool_box(Context& c, PrePool& p, Buffer buf, uint64_t dst, int64_t r, int64_t rows, int64_t c0,
              int64_t cols, int64_t ch, int64_t tc) {
  const int64_t es = isa::dtype_bytes(p.dtype);
  const int64_t iy0 = r - p.pt, iy1 = r + rows - 1 - p.pt + p.kh - 1;
  const int64_t ix0 = c0 - p.pl, ix1 = c0 + cols - 1 - p.pl + p.kw - 1;
  const int64_t ptop = std::max<int64_t>(0, -iy0), pbot = std::max<int64_t>(0, iy1 - (p.H - 1));
  const int64_t pleft = std::max<int64_t>(0, -ix0), pright = std::max<int64_t>(0, ix1 - (p.W - 1));
  const int64_t in_rows = rows + p.kh - 1, in_cols = cols + p.kw - 1;
  const uint64_t at = p.scratch + static_cast<uint64_t>(p.next * p.half);
  p.next ^= 1;
  const uint64_t src =
      p.y_addr +
      static_cast<uint64_t>(((std::max<int64_t>(0, iy0) * p.W + std::max<int64_t>(0, ix0)) * p.C + ch) * es);
  c.load(Buffer::kInput, at, p.y, src, p.dtype, {tc, in_cols - pleft - pright, in_rows - ptop - pbot, 1},
         {p.C, p.W * p.C, 0}, {ptop, pbot, pleft, pright}, p.pad_value);
  for (const Context::VecArgs& v : pool_vecs(c, p, buf, dst, at, in_rows, in_cols, tc)) c.vec(v);
}

}  // namespace

int64_t pre_pool_reader(const Graph& g, size_t i) {
  const Node& n = g.nodes[i];
  if (n.op_type != "MaxPool" || !n.domain.empty() || n.inputs.empty()) return -1;
  if (n.outputs.size() > 1 && !n.outputs[1].empty()) return -1;  // Indices
  const std::vector<int64_t> k = n.attr_ints("kernel_shape", {});
  if (k.size() != 2 || !all_ones(n.attr_ints("strides", {1, 1})) ||
      !all_ones(n.attr_ints("dilations", {1, 1})) || n.attr_string("auto_pad", "NOTSET") != "NOTSET" ||
      n.attr_int("storage_order", 0) != 0)
    return -1;
  return pointwise_reader(g, i);
}

void plan_pre_pool(Context& c, size_t i) {
  if (c.fusion.pre_pool.node >= 0) return;  // a pool planned earlier, its reader still ahead
  const Graph& g = c.g;
  const Node& n = g.nodes[i];
  if (!c.options.keep_on_chip || g.nhwc_io || c.shared_capacity() > 0 || c.fusion.input_reserved > 0) return;
  const int64_t j = pre_pool_reader(g, i);
  if (j < 0) return;
  const Node& conv = g.nodes[static_cast<size_t>(j)];
  if (!reader_map_free(c, n, conv)) return;
  const std::string &xv = n.outputs[0], &yv = n.inputs[0];
  if (!c.tensors.count(xv) || !c.tensors.count(yv)) return;
  const DramTensor& y = c.tensor(yv);
  const DramTensor& x = c.tensor(xv);
  if (x.strided() || y.strided() || x.shape.size() != 4 || y.shape.size() != 4 || x.shape[0] != 1 ||
      y.shape[0] != 1 || x.shape[1] != y.shape[1] || !x.nhwc_in_memory() || !y.nhwc_in_memory() ||
      x.dtype != y.dtype)
    return;
  const std::vector<int64_t> k = n.attr_ints("kernel_shape", {});
  const std::vector<int64_t> pads = n.attr_ints("pads", {0, 0, 0, 0});
  if (pads.size() != 4) return;
  PrePool p;
  p.H = y.shape[2], p.W = y.shape[3], p.C = y.shape[1];
  p.kh = k[0], p.kw = k[1], p.pt = pads[0], p.pl = pads[1];
  // Stride 1: the output's rows and columns follow from the padding (ceil_mode changes nothing).
  if (x.shape[2] != p.H + pads[0] + pads[2] - p.kh + 1 || x.shape[3] != p.W + pads[1] + pads[3] - p.kw + 1 ||
      p.pt >= p.kh || p.pl >= p.kw || pads[2] >= p.kh || pads[3] >= p.kw)
    return;
  // # int8: on the codes, exact when the output's codes mean what the input's do (the same QParams); the conv
  // reads them as an int8 matrix layer.
  const quant::PrecisionPlan* plan = c.options.plan;
  const bool codes = isa::numerics::is_integer(x.dtype);
  if (codes) {
    if (!plan || plan->precision_of(conv.name) != quant::Precision::kInt8 ||
        !int8_matrix_mappable(*plan, conv))
      return;
    const auto a = plan->values.find(yv), b = plan->values.find(xv);
    if (a == plan->values.end() || b == plan->values.end() || a->second.dtype != x.dtype ||
        b->second.dtype != x.dtype || a->second.scale != b->second.scale ||
        a->second.zero_point != b->second.zero_point || isa::dtype_bytes(x.dtype) != 1)
      return;
    p.pad_value = isa::numerics::dtype_min(x.dtype);
  } else {
    if (x.dtype != c.act || (plan && plan->precision_of(n.name) == quant::Precision::kInt8)) return;
    p.pad_value = bf16_pad(-INFINITY);
  }
  p.dtype = x.dtype;
  const int64_t es = isa::dtype_bytes(p.dtype);
  p.half = std::min<int64_t>(kHalfBytes, scratchpad_capacity(c.config, Buffer::kInput) / 8) / 64 * 64;
  // One output pixel of every channel must fit a half (the walk's channel chunk is at most C).
  if (p.kh * p.kw * p.C * es > p.half) return;
  p.node = static_cast<int64_t>(i);
  p.reader = j;
  p.x = x.range(), p.y = y.range(), p.y_addr = y.addr;
  p.bytes = static_cast<int64_t>(x.bytes);
  p.reserved = 2 * p.half;
  c.fusion.pre_pool = p;
}

bool pre_pool_member(Context& c, size_t i, LayerPlan& plan) {
  const PrePool& p = c.fusion.pre_pool;
  if (p.node != static_cast<int64_t>(i)) return false;
  const Node& n = c.g.nodes[i];
  const std::string& reader = c.g.nodes[static_cast<size_t>(p.reader)].name;
  plan.mapping = fmt::format(
      "VEC max_pool {}x{} on the tiles of '{}' (each of its input tiles pooled from this layer's input "
      "window loaded into scratch rows: this layer's output never goes to DRAM)",
      p.kh, p.kw, reader);
  plan.fused_into = reader;
  plan.on_chip_input = n.inputs[0];
  plan.on_chip_bytes_saved = 2 * p.bytes;
  plan.fusion_group = "pre_pool:" + reader;
  return true;
}

void begin_pre_pool(Context& c, size_t i) {
  PrePool& p = c.fusion.pre_pool;
  if (!p.carried_by(static_cast<int64_t>(i))) return;
  const int64_t cap = c.capacity(Buffer::kInput);
  if (p.reserved * 4 > cap) throw std::logic_error("pre_pool: no input scratchpad room for the window rows");
  p.scratch = static_cast<uint64_t>(cap - p.reserved) / 64 * 64;
  c.fusion.input_reserved += p.reserved;
}

bool load_pre_pool(Context& c, Buffer buf, uint64_t sram, const Range& dram_range, uint64_t dram_addr,
                   DType t, const std::array<int64_t, 4>& s, const std::array<int64_t, 3>& st,
                   const std::array<int64_t, 4>& pads) {
  PrePool& p = c.fusion.pre_pool;
  if (!p.serves(static_cast<int64_t>(c.layer), dram_range)) return false;
  const int64_t es = isa::dtype_bytes(t), C = p.C;
  const int64_t e0 = static_cast<int64_t>(dram_addr - p.x.begin) / es;
  const int64_t ch = e0 % C, px0 = e0 / C;
  // Channel runs within a pixel, consecutive pixels, rows of pixels a whole number of pixels apart.
  if (isa::dtype_bytes(t) != es || pads != std::array<int64_t, 4>{0, 0, 0, 0} || ch + s[0] > C ||
      (s[1] > 1 && st[0] != C) || (s[2] > 1 && st[1] % C != 0) || s[3] != 1)
    throw std::logic_error("pre_pool: a load box of the pool's output that is not pixels of a channel run");
  const int64_t tc = s[0];
  if (p.kh * p.kw * tc * es > p.half)
    throw std::logic_error("pre_pool: a pixel's window exceeds the scratch rows");
  // A rectangle of output pixels [r, r + rows) x [c0, c0 + cols), dense at `dst`: windows of as many whole
  // rows as fit a half (of as many columns, when one row does not).
  auto rect = [&](uint64_t dst, int64_t r, int64_t rows, int64_t c0, int64_t cols) {
    const int64_t row_bytes = (cols + p.kw - 1) * tc * es;
    const int64_t rr = std::max<int64_t>(1, p.half / row_bytes - (p.kh - 1));
    if (p.kh * row_bytes <= p.half) {
      for (int64_t y0 = 0; y0 < rows; y0 += rr) {
        pool_box(c, p, buf, dst + static_cast<uint64_t>(y0 * cols * tc * es), r + y0, std::min(rr, rows - y0),
                 c0, cols, ch, tc);
      }
      return;
    }
    const int64_t cc = std::max<int64_t>(1, p.half / (p.kh * tc * es) - (p.kw - 1));
    for (int64_t y0 = 0; y0 < rows; ++y0) {
      for (int64_t x0 = 0; x0 < cols; x0 += cc) {
        pool_box(c, p, buf, dst + static_cast<uint64_t>((y0 * cols + x0) * tc * es), r + y0, 1, c0 + x0,
                 std::min(cc, cols - x0), ch, tc);
      }
    }
  };
  const int64_t r0 = px0 / p.W, c0 = px0 % p.W;
  if (c0 + s[1] <= p.W && (s[2] == 1 || st[1] == p.W * C)) {
    rect(sram, r0, s[2], c0, s[1]);  // a tile of output rows and columns
  } else if (c0 == 0 && s[2] == 1 && s[1] % p.W == 0) {
    rect(sram, r0, s[1] / p.W, 0, p.W);  // whole rows of pixels (a GEMM's rows)
  } else {
    for (int64_t i2 = 0; i2 < s[2]; ++i2) {  // any other run of pixels, cut where image rows end
      const int64_t first = px0 + i2 * (s[2] > 1 ? st[1] / C : 0);
      for (int64_t k = 0; k < s[1];) {
        const int64_t run = std::min(s[1] - k, p.W - (first + k) % p.W);
        rect(sram + static_cast<uint64_t>((i2 * s[1] + k) * tc * es), (first + k) / p.W, 1, (first + k) % p.W,
             run);
        k += run;
      }
    }
  }
  ++p.loads;
  return true;
}

int64_t pre_pool_declined(Context& c, size_t i) {
  return reader_map_declined(c.fusion.pre_pool, c.fusion.input_reserved, i);
}

void finish_pre_pool(Context& c, size_t i, const LayerPlan& plan) {
  finish_reader_map(c, c.fusion.pre_pool, c.fusion.input_reserved, i, plan, "pre_pool", "the pool");
}

}  // namespace npusim::compiler::backend
