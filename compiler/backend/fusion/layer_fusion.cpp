// Conv -> pool fusion with line-buffer tiling (see layer_fusion.h).
#include "compiler/backend/fusion/layer_fusion.h"

#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <numeric>
#include <vector>

#include "compiler/backend/fusion/line_buffer_readers.h"
#include "compiler/backend/fusion/post_affine.h"
#include "compiler/backend/fusion/residency.h"
#include "compiler/backend/fusion/se_pool_fusion.h"
#include "compiler/backend/int8/int8.h"
#include "compiler/backend/matrix/depthwise.h"
#include "compiler/backend/memory/movement.h"
#include "compiler/passes/lowered.h"
#include "compiler/quant/quantize.h"
#include "isa/numerics.h"

namespace npusim::compiler::backend {

using isa::Buffer;
using isa::VecOp;

namespace {

// The buffer rows one band of reader output rows [p0, p1) reads: a pool's clipped to the input, a
// depthwise conv's whole (its padding rows are buffer rows).
WindowSpan band_rows(const ConvPool& p, int64_t p0, int64_t p1) {
  if (p.depthwise) return WindowSpan{p0 * p.w.sh, (p1 - 1) * p.w.sh + p.w.kh - 1, true};
  return WindowSpan{clip(p0, p.w.sh, p.w.pt, p.w.kh, p.H).lo, clip(p1 - 1, p.w.sh, p.w.pt, p.w.kh, p.H).hi,
                    true};
}

// The bands of `rows` reader rows in a line buffer of `capacity` rows, or of as few as the largest band
// needs (capacity 0). Each band follows the one before in the buffer, its kept rows where they lie, while it
// fits before the buffer's end; otherwise it starts over at row 0, its kept rows moved there.
void make_bands(const ConvPool& p, int64_t rows, int64_t capacity, BandHeight* cand) {
  cand->rows = rows;
  cand->bands.clear();
  const int64_t extra = p.depthwise ? 0 : 1;  // a pool's interior VEC reads one row on
  int64_t most = 0;
  for (int64_t p0 = 0; p0 < p.OH; p0 += rows) {
    const WindowSpan s = band_rows(p, p0, std::min(p.OH, p0 + rows));
    most = std::max(most, s.hi - s.lo + 1);
  }
  cand->buf_rows = std::max(capacity, most + extra);
  int64_t prev_lo = -1, prev_hi = -1, prev_at = 0;
  for (int64_t p0 = 0; p0 < p.OH; p0 += rows) {
    LineBand b;
    b.p0 = p0, b.p1 = std::min(p.OH, p0 + rows);
    const WindowSpan s = band_rows(p, b.p0, b.p1);
    b.lo = s.lo, b.hi = s.hi;
    if (prev_hi >= b.lo) {
      b.kept = prev_hi - b.lo + 1;
      b.from = prev_at + b.lo - prev_lo;
    }
    const int64_t next = prev_hi < 0 ? 0 : b.kept > 0 ? b.from : prev_at + prev_hi - prev_lo + 1;
    b.at = next + (b.hi - b.lo + 1) + extra <= cand->buf_rows ? next : 0;
    b.r0 = std::max(b.lo + b.kept, p.top) - p.top;
    b.r1 = std::max(b.r0, std::min(b.hi, p.top + p.H - 1) - p.top + 1);
    prev_lo = b.lo, prev_hi = b.hi, prev_at = b.at;
    cand->bands.push_back(b);
  }
}

// The bands of one image whose kept rows one VEC copy moves (the buffer's start reached).
int64_t moves(const BandHeight& cand) {
  return std::count_if(cand.bands.begin(), cand.bands.end(),
                       [](const LineBand& b) { return b.kept > 0 && b.from != b.at; });
}

}  // namespace

namespace {

// Whether node n is a depthwise Conv (one group per channel, constant weights, no residual).
bool depthwise_conv(const Graph& g, const Node& n) {
  if (!n.domain.empty() || n.op_type != "Conv" || n.outputs.size() != 1 || n.has_attr(kResidualInput) ||
      n.inputs.size() < 2)
    return false;
  const Value& w = g.value(n.inputs[1]);
  const Value& x = g.value(n.inputs[0]);
  if (!w.is_constant() || w.shape.size() != 4 || x.shape.size() != 4 || w.shape[1] != 1) return false;
  const int64_t groups = n.attr_int("group", 1);
  return groups > 1 && groups == x.shape[1] && groups == w.shape[0];
}

}  // namespace

int64_t conv_pool_reader(const Graph& g, size_t i) {
  if (i + 1 >= g.nodes.size()) return -1;
  const Node& cv = g.nodes[i];
  if (!cv.domain.empty() || cv.op_type != "Conv" || cv.outputs.size() != 1 || cv.has_attr(kResidualInput) ||
      cv.attr_int("group", 1) != 1)
    return -1;
  for (const std::string& o : g.outputs)
    if (o == cv.outputs[0]) return -1;
  // A constant affine map between the conv and a depthwise reader (post_affine.h): the conv applies it to
  // each tile it writes into the line buffer.
  size_t r = i + 1;
  std::string v = cv.outputs[0];
  if (post_affine_candidate(g, i) == static_cast<int64_t>(i + 1)) {
    // Not where the depthwise conv's own output has such a map: its epilogue in the bands would leave that
    // map a layer of its own.
    if (i + 2 >= g.nodes.size() || !depthwise_conv(g, g.nodes[i + 2]) || post_affine_candidate(g, i + 2) >= 0)
      return -1;
    v = g.nodes[i + 1].outputs[0];
    for (const std::string& o : g.outputs)
      if (o == v) return -1;
    r = i + 2;
  }
  const Node& pl = g.nodes[r];
  const bool pool = pl.domain.empty() && (pl.op_type == "MaxPool" || pl.op_type == "AveragePool");
  if ((!pool && !depthwise_conv(g, pl)) || pl.inputs[0] != v) return -1;
  if (pl.outputs.size() > 1 && !pl.outputs[1].empty()) return -1;
  const std::vector<int> readers = g.consumers(v);
  return readers.size() == 1 && readers[0] == static_cast<int>(r) ? static_cast<int64_t>(r) : -1;
}

bool conv_pool_pair(const Graph& g, size_t i) { return conv_pool_reader(g, i) >= 0; }

int64_t project_of(const Graph& g, size_t i) {
  const int64_t r = conv_pool_reader(g, i);
  if (r < 0 || static_cast<size_t>(r) + 1 >= g.nodes.size() ||
      !depthwise_conv(g, g.nodes[static_cast<size_t>(r)]))
    return -1;
  const Node& q = g.nodes[static_cast<size_t>(r) + 1];
  if (!q.domain.empty() || q.op_type != "Conv" || q.outputs.size() != 1 || q.inputs.empty() ||
      q.inputs[0] != g.nodes[static_cast<size_t>(r)].outputs[0])
    return -1;
  return r + 1;
}

namespace {

// Whether the pointwise Conv after depthwise conv `dw` may run in its line buffer's band loop: it reads the
// depthwise output alone (residency's conditions, next_reads_on_chip), in the same precision, with no
// tiling, other placement or on_chip: true imposed on it by a mapping file (--mapping-out writes such a conv
// with its placement and on_chip: false, its output stored).
bool project_conv(const Context& c, size_t dw) {
  if (!next_reads_on_chip(c, dw).empty()) return false;
  // Its output's affine map is applied by its own STOREs when lowered on its own (post_affine.h): the band
  // loop's GEMMs would leave the map a layer of its own.
  if (post_affine_candidate(c.g, dw + 1) >= 0) return false;
  const Node& q = c.g.nodes[dw + 1];
  if (c.options.plan && c.options.plan->precision_of(q.name) != quant::Precision::kInt8) return false;
  if (c.options.mapping) {
    const LayerMapping* m = c.options.mapping->find(q.name);
    if (m && (m->has_tiling() || m->has_vector_tiling() || m->on_chip == true ||
              (m->placement && *m->placement != Placement::kNpuMatrix)))
      return false;
  }
  auto yt = c.tensors.find(q.outputs[0]);
  return yt != c.tensors.end() && !yt->second.strided() && yt->second.nhwc_in_memory();
}

// The depthwise side of plan_conv_pool (p->conv, p->pool set): both layers in one precision, dense NHWC
// tensors, a window the buffer's padding covers exactly, and an output residency does not keep.
bool plan_conv_dw(const Context& c, ConvPool* p) {
  const Node& cv = c.g.nodes[p->conv];
  const Node& dw = c.g.nodes[p->pool];
  if (c.options.plan && (c.options.plan->precision_of(cv.name) != quant::Precision::kInt8 ||
                         c.options.plan->precision_of(dw.name) != quant::Precision::kInt8))
    return false;
  auto xt = c.tensors.find(dw.inputs[0]);
  auto yt = c.tensors.find(dw.outputs[0]);
  if (xt == c.tensors.end() || yt == c.tensors.end()) return false;
  const DramTensor &x = xt->second, &y = yt->second;
  if (x.strided() || x.shape.size() != 4 || x.layout != kNhwc || y.strided() || y.shape.size() != 4 ||
      !y.nhwc_in_memory())
    return false;
  const std::string pad = dw.attr_string("auto_pad", "NOTSET");
  if (pad != "NOTSET" && pad != "VALID") return false;
  for (int64_t d : dw.attr_ints("dilations", {1, 1}))
    if (d != 1) return false;
  const Value& wv = c.g.value(dw.inputs[1]);
  const std::vector<int64_t> st = dw.attr_ints("strides", {1, 1});
  const std::vector<int64_t> pads =
      pad == "VALID" ? std::vector<int64_t>{0, 0, 0, 0} : dw.attr_ints("pads", {0, 0, 0, 0});
  if (st.size() != 2 || pads.size() != 4) return false;
  p->C = x.shape[1], p->H = x.shape[2], p->W = x.shape[3], p->OH = y.shape[2], p->OW = y.shape[3];
  PoolWindow& w = p->w;
  w.kh = wv.shape[2], w.kw = wv.shape[3], w.sh = st[0], w.sw = st[1], w.pt = pads[0], w.pl = pads[1];
  // The padding the outputs read: the rows and columns past the input the last window reaches.
  w.pb = (p->OH - 1) * w.sh + w.kh - w.pt - p->H;
  w.pr = (p->OW - 1) * w.sw + w.kw - w.pl - p->W;
  if (w.pb < 0 || w.pr < 0 || w.pt >= w.kh || w.pl >= w.kw || w.pb >= w.kh || w.pr >= w.kw) return false;
  p->top = w.pt, p->rows = w.pt + p->H + w.pb, p->left = w.pl, p->pitch = w.pl + p->W + w.pr;
  if (std::max({w.kh, w.kw, w.sh, w.sw}) > 255 || p->C > kMaxDim || p->pitch > kMaxDim) return false;
  // The project conv after it (an inverted-residual block) may run in the same band loop.
  p->project = project_conv(c, p->pool) ? static_cast<int64_t>(p->pool) + 1 : -1;
  // The depthwise output kept on chip for the project conv after it (residency) is the better plan than the
  // pair alone where it fits and saves at least the bytes this fusion would (which stores it): not behind a
  // stride-2 depthwise conv, whose input is four times its output. The whole block in one band loop is
  // still weighed against it.
  p->pair_alone = !(next_reads_on_chip(c, p->pool).empty() && y.bytes >= x.bytes &&
                    4 * round64(num_elements(y.shape) * isa::dtype_bytes(y.dtype)) <=
                        3 * scratchpad_capacity(c.config, Buffer::kInput));
  if (!p->pair_alone && p->project < 0) return false;
  p->reader_macs = x.shape[0] * p->OH * p->OW * p->C * w.kh * w.kw;
  return true;
}

}  // namespace

bool plan_conv_pool(const Context& c, size_t i, ConvPool* p) {
  if (c.fusion.on_chip.pending || c.fusion.input_reserved > 0 || !c.fusion.keep_output.empty()) return false;
  return conv_pool_shape(c, i, p);
}

bool conv_pool_shape(const Context& c, size_t i, ConvPool* p) {
  const Graph& g = c.g;
  if (!c.options.keep_on_chip || !c.can_time() || g.nhwc_io || c.shared_capacity() > 0) return false;
  const int64_t r = conv_pool_reader(g, i);
  if (r < 0) return false;
  const Node& cv = g.nodes[i];
  const Node& pl = g.nodes[static_cast<size_t>(r)];
  if (c.folding.folded(cv) || c.folding.folded(pl)) return false;
  p->conv = i, p->pool = static_cast<size_t>(r);
  p->depthwise = pl.op_type == "Conv";
  if (c.options.mapping) {
    const LayerMapping* m = c.options.mapping->find(cv.name);
    if (m && (m->has_tiling() || m->has_vector_tiling() || m->on_chip.has_value() ||
              (m->placement && *m->placement != Placement::kNpuMatrix)))
      return false;
    // The reader as --mapping-out writes it fused: no tiles; a pool its own placement, a depthwise conv
    // none (an imposed one, the array's or the vector unit's, is a layer-by-layer mapping) and its output
    // not on chip.
    const LayerMapping* q = c.options.mapping->find(pl.name);
    if (q && (q->has_tiling() || q->has_vector_tiling() || q->on_chip == true ||
              (q->placement && (p->depthwise || *q->placement != Placement::kNpuVector))))
      return false;
  }
  if (p->depthwise) return plan_conv_dw(c, p);
  if (c.options.plan) {
    // int8: a max pool on the conv's codes (it keeps their QParams), both layers int8.
    if (pl.op_type != "MaxPool" || !quant::shares_input_qparams(pl) ||
        c.options.plan->precision_of(cv.name) != quant::Precision::kInt8 ||
        c.options.plan->precision_of(pl.name) != quant::Precision::kInt8)
      return false;
  }
  auto xt = c.tensors.find(cv.outputs[0]);
  auto yt = c.tensors.find(pl.outputs[0]);
  if (xt == c.tensors.end() || yt == c.tensors.end()) return false;
  const DramTensor &x = xt->second, &y = yt->second;
  if (x.strided() || x.shape.size() != 4 || x.layout != kNhwc || !y.nhwc_in_memory() || y.shape.size() != 4)
    return false;
  p->is_max = pl.op_type == "MaxPool";
  p->C = x.shape[1], p->H = x.shape[2], p->W = x.shape[3], p->OH = y.shape[2], p->OW = y.shape[3];
  p->rows = p->H, p->pitch = p->W;
  std::string why;
  if (!pool_window(pl, p->H, p->W, p->OH, p->OW, &p->w, &why)) return false;
  const PoolWindow& w = p->w;
  if (std::max({w.kh, w.kw, w.sh, w.sw}) > 255 || p->C > kMaxDim || p->W > kMaxDim) return false;
  // The pool's output columns whose windows lie inside the input: one run, edges on either side of it.
  p->ox_a = -1, p->ox_b = -1;
  for (int64_t ox = 0; ox < p->OW; ++ox) {
    const WindowSpan s = clip(ox, w.sw, w.pl, w.kw, p->W);
    if (s.hi < s.lo) return false;  // a window entirely in the padding
    if (s.full && p->ox_a < 0) p->ox_a = ox;
    if (s.full) p->ox_b = ox + 1;
    // An edge column is one VEC over its clipped window whose stride skips the rest of the row.
    if (!s.full && edge_stride(s, p->W) > 255) return false;
  }
  if (p->ox_a < 0) return false;
  for (int64_t ox = p->ox_a; ox < p->ox_b; ++ox)
    if (!clip(ox, w.sw, w.pl, w.kw, p->W).full) return false;
  // The interior VEC walks rows of W pixels from the first interior window: its first windows are the
  // interior ones (any after them run into the next row and are not stored).
  p->vec_cols = (p->W - w.kw) / w.sw + 1;
  for (int64_t oy = 0; oy < p->OH; ++oy) {
    const WindowSpan s = clip(oy, w.sh, w.pt, w.kh, p->H);
    if (s.hi < s.lo) return false;
    if (!p->is_max && !s.full) return false;
  }
  // An average pool divides by the whole window: fused only when no window is clipped.
  if (!p->is_max && (p->ox_a != 0 || p->ox_b != p->OW)) return false;
  return true;
}

void restrict_to_band(MatrixJob& j, int64_t r0, int64_t r1, int64_t img, int64_t y_sram, int64_t in_bytes) {
  const int64_t iy_lo = r0 * j.sh - j.pt, iy_hi = (r1 - 1) * j.sh - j.pt + (j.kh - 1) * j.dh;
  const int64_t start = std::max<int64_t>(0, iy_lo);
  const uint64_t off = static_cast<uint64_t>(start * j.row_stride() * in_bytes);
  j.a_base = [base = j.a_base, img, off](int64_t) { return base(img) + off; };
  j.pt = start - iy_lo;
  j.H = std::min(j.H - 1, iy_hi) - start + 1;
  j.OH = r1 - r0;
  j.images = 1;
  j.y_sram = y_sram;
}

namespace {

// The bytes of the conv's weights as one tile [kh][kw][C][M] (MatrixJob::b_sram), 0 when the conv is not
// one dense block of constant weights.
int64_t resident_bytes(ConvBands& bands) {
  const MatrixJob& j = bands.job();
  if (j.groups != 1 || !j.b_const || j.gemm) return 0;
  return round64(j.kh * j.kw * j.C * j.M * isa::dtype_bytes(bands.make_strategy()->ops.w));
}

// Where resident weights of `bytes` go: the end of the weight scratchpad the reader's bytes do not take
// (free_weight_end takes the other).
int64_t resident_addr(const Context& c, int64_t bytes) {
  return c.layer % 2 == 0 ? 0 : (c.capacity(Buffer::kWeight) - bytes) / 64 * 64;
}

// Emits the fused layer under candidate `cand` (its bands' tilings chosen), the line buffer at `buf`.
void emit(Context& c, ConvBands& bands, const ConvPool& p, const BandHeight& cand, uint64_t buf,
          LineReader& reader) {
  const isa::DType t = c.tensor(c.g.nodes[p.pool].inputs[0]).dtype;
  const int64_t es = isa::dtype_bytes(t);
  const int64_t row = p.pitch * p.C;  // elements per buffer row
  bands.set_line_pitch(p.depthwise ? row : 0);
  if (cand.resident >= 0) {
    // The conv's weights, once for every band (its band jobs load none: MatrixJob::b_sram).
    const MatrixJob& j = bands.job();
    std::unique_ptr<MatrixStrategy> s = bands.make_strategy();
    const uint64_t w = s->weight_tile(0, 1, 0, j.C, 0, j.M);
    const uint64_t bytes = static_cast<uint64_t>(j.kh * j.kw * j.C * j.M * isa::dtype_bytes(s->ops.w));
    c.load(Buffer::kWeight, static_cast<uint64_t>(cand.resident), Range{kDram, w, w + bytes}, w, s->ops.w,
           {j.M, j.C, j.kh * j.kw, 1}, {j.M, j.C * j.M, 0});
    bands.set_resident_weights(cand.resident);
  }
  reader.begin(cand, buf);
  const MatrixJob& j = bands.job();
  for (int64_t img = 0; img < j.images; ++img) {
    for (const LineBand& b : cand.bands) {
      // The conv's output tiles of the band (Tiling: spatial tiles x channel chunks), between which the
      // reader may emit its work on the band before.
      const int64_t tiles = b.r1 > b.r0 ? ceil_div(b.r1 - b.r0, b.t.toh) * ceil_div(j.OW, b.t.tow) *
                                              ceil_div(j.M / std::max<int64_t>(1, j.groups / b.t.gb), b.t.tn)
                                        : 0;
      reader.before_band(b, tiles);
      // The kept rows to the buffer's start when the band starts over there: one VEC, or one per row (first
      // to last) when the rows they move to overlap them (a stride-1 window over bands of one row in a
      // buffer of three rows keeps two rows and moves them by one).
      const int64_t moved = b.from != b.at ? b.kept : 0;
      const int64_t per_vec = b.from - b.at >= moved ? moved : 1;
      for (int64_t r = 0; r < moved; r += per_vec) {
        Context::VecArgs v;
        v.op = VecOp::kCopy, v.in = v.out = t;
        v.src1_buf = v.dst_buf = Buffer::kInput;
        v.src1 = buf + static_cast<uint64_t>((b.from + r) * row * es),
        v.dst = buf + static_cast<uint64_t>((b.at + r) * row * es);
        v.d0 = p.C, v.d1 = p.pitch, v.d2 = per_vec;
        c.vec(v);
      }
      if (b.r1 > b.r0) {
        const int64_t at = b.row(b.r0 + p.top) * row + p.left * p.C;
        c.fusion.after_tile = [&reader] { reader.step(); };
        bands.generate(b.r0, b.r1, img, buf + static_cast<uint64_t>(at * es), b.t);
        c.fusion.after_tile = nullptr;
      }
      reader.read(b, img, buf);
    }
  }
  reader.end();
  bands.set_line_pitch(0);
  bands.set_resident_weights(-1);
}

// Chooses each band's tiling (outside any trial); false when one does not fit, or when the reader's
// bytes at the end of the weight scratchpad the conv's weight tiles leave free do not fit beside every
// band's tiling.
bool choose_tilings(Context& c, ConvBands& bands, const ConvPool& p, BandHeight& cand, uint64_t buf,
                    int64_t es, int64_t reader_weight_bytes, LineReader& reader) {
  const int64_t row = p.pitch * p.C;
  bands.set_line_pitch(p.depthwise ? row : 0);
  bands.set_resident_weights(cand.resident);
  bool ok = true;
  cand.conv_acc = 0;
  // The reader's own tiles' share of the accumulator stays free of the conv's band tiles.
  const int64_t acc = c.fusion.acc_reserved;
  c.fusion.acc_reserved = acc + reader.acc_share(cand);
  for (LineBand& b : cand.bands) {
    if (b.r1 <= b.r0) continue;
    int64_t evaluated = 0;
    const int64_t at = b.row(b.r0 + p.top) * row + p.left * p.C;
    b.t = bands.choose(b.r0, b.r1, buf + static_cast<uint64_t>(at * es), &evaluated);
    if (evaluated == 0 || round64(b.t.w_bytes) + reader_weight_bytes + 64 > c.capacity(Buffer::kWeight)) {
      ok = false;
      break;
    }
    cand.conv_acc = std::max(cand.conv_acc, round64(b.t.acc_bytes));
  }
  c.fusion.acc_reserved = acc;
  bands.set_line_pitch(0);
  bands.set_resident_weights(-1);
  return ok && reader.choose(cand, buf);
}

// The fused layer's search: candidates of all the reader's rows per band, then halvings, the first four
// whose line buffer fits in three quarters of the input scratchpad (and whose reader's accumulator bytes,
// acc(rows), in three quarters of the accumulator: the conv's band tiles take the rest); each in a buffer of
// as few rows as its bands read and, when several bands fit in half the input scratchpad, in a buffer of
// that many rows (LineBand::at); each band's tiling chosen, the candidate emitted, simulated and undone.
// Returns the best candidate's index and cycles (-1: none fits); *first_cycles = the first's.
struct Search {
  std::vector<BandHeight> cands;
  size_t best = 0;
  int64_t best_cycles = -1, first_cycles = -1;
  // With an imposed band loop (BandLoop): the fastest simulated candidate that has its values and its
  // cycles (none: none fits).
  std::optional<BandHeight> pick;
  int64_t pick_cycles = -1;
};

// Whether candidate v has the values of band loop b (a value b leaves out: any).
bool matches(const BandLoop& b, const BandHeight& v) {
  return v.rows == b.rows && (!b.buffer_rows || *b.buffer_rows == v.buf_rows) &&
         (!b.resident || *b.resident == (v.resident >= 0)) && (!b.pieces || *b.pieces == v.pieces);
}

// The search's imposed pick as the search's choice (take's argument).
Search chosen(const Search& r) {
  Search s;
  s.cands = {*r.pick};
  s.best_cycles = r.pick_cycles;
  s.first_cycles = r.first_cycles;
  return s;
}

// The band loop a mapping file imposes on the conv (BandLoop), or none.
const BandLoop* imposed_band_loop(const Context& c, const ConvPool& p) {
  const LayerMapping* m = c.options.mapping ? c.options.mapping->find(c.g.nodes[p.conv].name) : nullptr;
  return m && m->band_loop ? &*m->band_loop : nullptr;
}

// With an imposed band loop `imposed`, the search runs as without it (its band tilings are chosen by
// simulation and remembered, Context::decided: the same calls in the same order give the same tilings as
// in the run that wrote the file) and also keeps the fastest candidate with its values (Search::pick); when
// it simulated none (`only`), the imposed values alone are searched.
Search search(Context& c, ConvBands& bands, const ConvPool& p, LineReader& reader,
              const std::function<int64_t(int64_t)>& acc, const BandLoop* imposed, bool only = false) {
  const isa::DType t = c.tensor(c.g.nodes[p.pool].inputs[0]).dtype;
  const int64_t es = isa::dtype_bytes(t);
  const int64_t row_bytes = p.pitch * p.C * es;
  const int64_t cap = scratchpad_capacity(c.config, Buffer::kInput);
  const int64_t acc_cap = scratchpad_capacity(c.config, Buffer::kAccumulator);
  Search r;
  for (int64_t rows = only ? std::min(imposed->rows, p.OH) : p.OH;; rows = ceil_div(rows, 2)) {
    BandHeight cand;
    make_bands(p, rows, 0, &cand);
    // The reader's epilogue slots go above the line buffer when its sums and they overfill the accumulator
    // (EfficientNet's SiLU temporaries beside a band of 56 x 144 sums).
    if (4 * acc(rows) > 3 * acc_cap) cand.side = round64(reader.side_bytes(rows));
    cand.out_slot = reader.out_bytes(rows);
    if (4 * (c.fusion.input_reserved + round64(cand.buf_rows * row_bytes) + cand.side + 2 * cand.out_slot) <=
            3 * cap &&
        4 * (acc(rows) - cand.side) <= 3 * acc_cap)
      r.cands.push_back(std::move(cand));
    if (rows <= 1 || r.cands.size() >= 4 || only) break;
  }
  const int64_t reserved = c.fusion.input_reserved;
  const int64_t acc_before = c.fusion.acc_reserved;  // an affine map's constants (post_affine.h) stay on top
  for (size_t k = 0; k < r.cands.size(); ++k) {
    BandHeight& cand = r.cands[k];
    bool worse = false;
    // The bands in as few buffer rows as they read, and one after the other in a taller buffer: of half the
    // input scratchpad (the conv's band tiles take the other half) when it holds more than one band beyond
    // them, and of three quarters of it (the conv's band tiles in the last quarter) when that holds more rows
    // than the bands read: the kept rows move once per buffer's worth of bands rather than every band (an
    // fp16 expansion of 144 channels over 58 pixels, whose band reads three of its 16.7 KB rows beside the
    // project conv's two output slots, moved its rows every band in a buffer of three).
    std::vector<BandHeight> buffers = {cand};
    int64_t last = cand.buf_rows;
    for (const int64_t share : {cap / 2, 3 * cap / 4}) {
      const int64_t tall = (share - reserved - cand.side - 2 * cand.out_slot - 64) / row_bytes;
      const bool half = share == cap / 2;
      if (cand.bands.size() < 2 || tall <= last || (half && tall < 2 * cand.buf_rows)) continue;
      last = tall;
      buffers.emplace_back();
      make_bands(p, cand.rows, tall, &buffers.back());
      buffers.back().side = cand.side;
      buffers.back().out_slot = cand.out_slot;
    }
    // The conv's weights resident across the bands, when they fit beside the reader's bytes, and loaded
    // by each band: both simulated, the faster kept (resident, the tilings take every channel in one tile).
    const int64_t rw = resident_bytes(bands), reader_w = reader.weight_bytes(cand);
    std::vector<int64_t> where = {-1};
    if (rw > 0 && rw + reader_w + 64 <= c.capacity(Buffer::kWeight))
      where.insert(where.begin(), resident_addr(c, rw));
    int64_t here = -1;
    BandHeight chosen;
    for (const BandHeight& shape : buffers) {
      c.fusion.input_reserved =
          reserved + round64(shape.buf_rows * row_bytes) + shape.side + 2 * shape.out_slot;
      c.fusion.acc_reserved = acc_before + acc(shape.rows) - shape.side;
      const uint64_t buf = static_cast<uint64_t>(cap - c.fusion.input_reserved);
      if (only && imposed->buffer_rows && *imposed->buffer_rows != shape.buf_rows) continue;
      for (int64_t at : where) {
        if (only && imposed->resident && *imposed->resident != (at >= 0)) continue;
        BandHeight v = shape;
        v.resident = at;
        if (!choose_tilings(c, bands, p, v, buf, es, reader_w + (at >= 0 ? rw : 0), reader)) continue;
        // The reader's work in pieces between the conv's tiles, and after them (BandHeight::pieces).
        for (const bool pieces : {true, false}) {
          if ((pieces && !reader.pieces()) || (only && imposed->pieces && *imposed->pieces != pieces))
            continue;
          v.pieces = pieces;
          const Context::Trial trial = c.begin_trial();
          const int64_t first = c.em.size();
          emit(c, bands, p, v, buf, reader);
          const int64_t cycles = c.time_layer(first);
          c.end_trial(trial);
          if (here < 0 || cycles < here) here = cycles, chosen = v;
          if (imposed && matches(*imposed, v) && (!r.pick || cycles < r.pick_cycles))
            r.pick = v, r.pick_cycles = cycles;
        }
      }
    }
    if (here >= 0) {
      cand = std::move(chosen);
      if (r.first_cycles < 0) r.first_cycles = here;
      worse = r.best_cycles >= 0 && here >= r.best_cycles;
      if (!worse) r.best_cycles = here, r.best = k;
    }
    c.fusion.input_reserved = reserved, c.fusion.acc_reserved = acc_before;
    // Smaller bands only add fill and drain per band once they stop paying: the search stops at the
    // first one slower than the best.
    if (worse) break;
  }
  c.timed = {};  // the trials' figures are not the layer's
  if (imposed && !r.pick && !only) {
    const Search alone = search(c, bands, p, reader, acc, imposed, true);
    r.pick = alone.pick, r.pick_cycles = alone.pick_cycles;
  }
  return r;
}

// Emits candidate r.best for good and fills the conv's plan and p (fused).
// Emits candidate `cand` with its line buffer (and the reader's slots) reserved at the top of the input
// scratchpad and the reader's sums (acc_bytes) at the top of the accumulator; returns the buffer's address.
uint64_t emit_reserved(Context& c, ConvBands& bands, const ConvPool& p, LineReader& reader,
                       const BandHeight& cand, int64_t acc_bytes) {
  const int64_t row_bytes = p.pitch * p.C * isa::dtype_bytes(c.tensor(c.g.nodes[p.pool].inputs[0]).dtype);
  const int64_t cap = scratchpad_capacity(c.config, Buffer::kInput);
  const int64_t reserved = c.fusion.input_reserved, acc_before = c.fusion.acc_reserved;
  c.fusion.input_reserved = reserved + round64(cand.buf_rows * row_bytes) + cand.side + 2 * cand.out_slot;
  c.fusion.acc_reserved = acc_before + acc_bytes - cand.side;
  const uint64_t buf = static_cast<uint64_t>(cap - c.fusion.input_reserved);
  emit(c, bands, p, cand, buf, reader);
  c.fusion.input_reserved = reserved, c.fusion.acc_reserved = acc_before;
  return buf;
}

void take(Context& c, ConvBands& bands, ConvPool& p, LineReader& reader, const Search& r, int64_t layered,
          int64_t evaluated, int64_t acc_bytes) {
  const Node& pn = c.g.nodes[p.pool];
  const DramTensor& x = c.tensor(pn.inputs[0]);
  const int64_t row_bytes = p.pitch * p.C * isa::dtype_bytes(x.dtype);
  const BandHeight& cand = r.cands[r.best];
  const int64_t before = c.em.size();
  const uint64_t buf = emit_reserved(c, bands, p, reader, cand, acc_bytes);
  reader.taken();
  // The plan: the first band's tiling, the whole conv's MACs, the line buffer in the input scratchpad.
  const MatrixJob& j = bands.job();
  const LineBand& b0 =
      *std::find_if(cand.bands.begin(), cand.bands.end(), [](const LineBand& b) { return b.r1 > b.r0; });
  MatrixJob job0 = j;
  restrict_to_band(job0, b0.r0, b0.r1, 0, static_cast<int64_t>(buf), c.esize);
  record_tiling(c, job0, b0.t, evaluated);
  LayerPlan& plan = *c.plan;
  plan.macs = j.images * j.OH * j.OW * j.M * j.kh * j.kw * j.cg;
  plan.chosen = LayerMapping{};
  plan.chosen.band_loop = BandLoop{cand.rows, cand.buf_rows, cand.resident >= 0,
                                   reader.pieces() ? std::optional<bool>(cand.pieces) : std::nullopt,
                                   p.depthwise ? std::optional<bool>(cand.out_slot > 0) : std::nullopt};
  plan.est_cycles = r.best_cycles;
  // The candidates simulated: the band heights, and the layers apart unless the loop was imposed.
  plan.candidates = static_cast<int64_t>(r.cands.size()) + (imposed_band_loop(c, p) ? 0 : 1);
  plan.sram_input_bytes += round64(cand.buf_rows * row_bytes) + cand.side + 2 * cand.out_slot;
  plan.sram_acc_bytes += acc_bytes - cand.side;
  if (cand.resident >= 0) plan.sram_weight_bytes += resident_bytes(bands);
  plan.sram_weight_bytes += reader.weight_bytes(cand);  // the depthwise (and a block's project) weights
  plan.instructions = c.em.size() - before;
  p.fused = true;
  p.band_rows = cand.rows;
  plan.fusion_group = fusion_group(c, p);
  p.bytes_saved = 2 * static_cast<int64_t>(x.bytes);
  const int64_t overlap = std::max<int64_t>(0, p.w.kh - p.w.sh);
  const char* what = p.depthwise ? "output" : "pooled";
  plan.tile_limit =
      imposed_band_loop(c, p)
          ? fmt::format("bands of {} {} rows: imposed by the mapping file", cand.rows, what)
      : cand.rows == r.cands.front().rows
          ? fmt::format("bands of {} {} rows: the largest whose line buffer fits", cand.rows, what)
          : fmt::format(
                "bands of {} {} rows pipeline better: {} cycles simulated against {} with bands of {}",
                cand.rows, what, r.best_cycles, r.first_cycles, r.cands.front().rows);
  const int64_t conv_rows = std::min(p.H, (cand.rows - 1) * p.w.sh + p.w.kh);
  plan.mapping += fmt::format(
      "; fused with the {} '{}' in bands of {} output rows ({} {} rows per band, {} bands): each band's "
      "rows written into a line buffer of {} rows{} at the top of the input scratchpad, {} halo row(s) kept, "
      "not recomputed ({} of the bands moving them to the buffer's start by one VEC copy, the others "
      "following the band before), {} there; {}; the {}x{}x{} conv output never touches DRAM ({} bytes "
      "saved; {} cycles simulated against {} layer by layer)",
      p.depthwise ? "depthwise Conv" : pn.op_type, pn.name, conv_rows, cand.rows, what, cand.bands.size(),
      cand.buf_rows - (p.depthwise ? 0 : 1),
      p.depthwise ? fmt::format(" of {} pixels ({} padding columns)", p.pitch, p.pitch - p.W) : "",
      cand.bands.size() > 1 ? overlap : 0, moves(cand),
      p.depthwise ? "read by one VEC dwconv per band (its weights loaded once)" : "pooled",
      cand.resident >= 0
          ? "the conv's weights loaded once, resident in the weight scratchpad across the bands"
          : "each band loads the conv's weight tiles (they do not stay beside the bands' needs)",
      p.H, p.W, p.C, p.bytes_saved, r.best_cycles, layered);
  if (cand.side > 0) {
    plan.mapping += fmt::format(
        "; the reader's epilogue slots ({} bytes) above the line buffer, its sums alone in the accumulator",
        cand.side);
  }
  if (cand.out_slot > 0) {
    const Node& pj = c.g.nodes[static_cast<size_t>(p.project)];
    const DramTensor& y = c.tensor(pn.outputs[0]);
    p.project_fused = true;
    p.project_bytes_saved = 2 * static_cast<int64_t>(y.bytes);
    const Value& w = c.g.value(pj.inputs[1]);
    p.project_macs = num_elements(y.shape) * w.shape[0];
    plan.mapping += fmt::format(
        "; the project conv '{}' in the same band loop: each band's depthwise output rows written into "
        "one of two slots of {} bytes above the line buffer and read there by one GEMM per band (its "
        "weights resident), the {}x{}x{} depthwise output never touches DRAM ({} bytes saved); the depthwise "
        "sums of a band ({} bytes) in one accumulator side, which only the vector unit reads, in order; the "
        "depthwise conv in {} VEC dwconvs for {} bands{}",
        pj.name, cand.out_slot, p.OH, p.OW, p.C, p.project_bytes_saved,
        cand.rows * p.OW * p.C * isa::dtype_bytes(isa::numerics::accumulator_dtype(x.dtype)),
        reader.dwconvs(), cand.bands.size() * bands.job().images,
        cand.pieces
            ? ", each band's emitted in pieces between the next band's conv tiles where that band writes "
              "no row they read"
            : ", each band's after its conv");
  }
}

// Conv -> pool: the pool lowered layer by layer in the same trial as the conv's whole job.
bool lower_conv_pool_pair(Context& c, ConvBands& bands) {
  ConvPool& p = *c.fusion.conv_pool;
  const Node& pn = c.g.nodes[p.pool];
  const DramTensor& x = c.tensor(pn.inputs[0]);
  const int64_t es = isa::dtype_bytes(x.dtype);
  // Layer by layer: the conv's own tiling, then the pool's lowering, timed together.
  int64_t evaluated = 0;
  const Tiling whole = bands.choose_whole(&evaluated);
  if (evaluated == 0) return false;
  int64_t layered = 0;
  {
    const Context::Trial trial = c.begin_trial();
    const int64_t first = c.em.size();
    bands.generate_whole(whole);
    LayerPlan scratch;
    bool ok = false;
    {
      const Context::OtherLayer other(c, &scratch, static_cast<uint32_t>(p.pool));
      c.act = x.dtype, c.esize = es;
      std::string why;
      ok = lower_vector(c, pn, &why);
    }
    const std::vector<int64_t> cycles = ok ? c.time_code(first) : std::vector<int64_t>{};
    if (cycles.size() >= 2) layered = cycles[cycles.size() - 1] + cycles[cycles.size() - 2];
    c.end_trial(trial);
  }
  if (layered <= 0) return false;
  const std::unique_ptr<LineReader> reader = pool_reader(c, p);
  const BandLoop* imposed = imposed_band_loop(c, p);
  const Search r = search(
      c, bands, p, *reader, [](int64_t) { return int64_t{0}; }, imposed);
  // An imposed band loop is taken without the comparison.
  if (imposed) {
    if (!r.pick) return false;
    take(c, bands, p, *reader, chosen(r), layered, evaluated, 0);
    return true;
  }
  if (r.best_cycles < 0 || r.best_cycles >= layered) return false;
  take(c, bands, p, *reader, r, layered, evaluated, 0);
  return true;
}

// The pair's best candidate, to be emitted once what the project conv's lowering left is undone.
struct PairChoice {
  bool take = false;
  Search r;
  int64_t layered = 0, evaluated = 0, acc = 0;
};

// Conv -> depthwise conv (-> project conv), called with the depthwise conv's job (`dw`, built by its own
// lowering) and the project conv's (`pj`, or none): the depthwise conv lowered whole (its own choice of the
// array or the vector unit) after the conv's whole job, and the project conv lowered whole after it, timed
// together, against the bands. With `pair_out`, the pair without the project conv is not emitted but
// returned there when it is the choice (the caller undoes what the project conv's lowering left first).
bool fuse_block(Context& c, ConvBands& bands, ConvBands& dw, ConvBands* pj, isa::DType pj_act,
                LayerPlan* plan, PairChoice* pair_out) {
  ConvPool& p = *c.fusion.conv_pool;
  const MatrixJob& dj = dw.job();
  if (!DepthwiseMapper::applies(dj) || dj.dh != 1 || dj.dw != 1 || dj.a_sram >= 0 || dj.y_sram >= 0 ||
      dj.kh != p.w.kh || dj.kw != p.w.kw || dj.sh != p.w.sh || dj.sw != p.w.sw ||
      dj.images != bands.job().images)
    return false;
  if (pj && (!pj->pointwise() || pj->job().images != dj.images || pj->job().C != p.C || pj->job().H != p.OH ||
             pj->job().W != p.OW))
    pj = nullptr;
  int64_t evaluated = 0;
  bands.choose_whole(&evaluated);  // whether the conv maps at all
  if (evaluated == 0) return false;
  // The project conv lowered whole after what `first` on emitted, its layer's cycles in that slice.
  auto project_whole = [&]() {
    LayerPlan project;
    project.name = c.g.nodes[static_cast<size_t>(p.project)].name;
    LayerPlan* saved = c.plan;
    const uint32_t layer = c.layer;
    const isa::DType act = c.act;
    const int64_t esize = c.esize;
    c.plan = &project, c.layer = static_cast<uint32_t>(p.project);
    c.act = pj_act, c.esize = isa::dtype_bytes(pj_act);
    pj->lower_whole();
    c.plan = saved, c.layer = layer, c.act = act, c.esize = esize;
  };
  int64_t layered = 0, layered_block = 0;
  {
    // The depthwise conv's own lowering simulates its candidates (trials of its own): an undo point.
    const Context::Trial undo = c.mark();
    const int64_t first = c.em.size();
    const FusionState state = c.fusion;
    bands.lower_whole();
    LayerPlan scratch;
    scratch.name = c.g.nodes[p.pool].name;
    const uint32_t layer = c.layer;
    c.plan = &scratch, c.layer = static_cast<uint32_t>(p.pool);
    // Without the pair, residency keeps the depthwise output on chip for the project conv: as the layers
    // lowered one by one would (their fusion state put back after the trial).
    if (!p.pair_alone) plan_on_chip(c, p.pool);
    dw.lower_whole();
    // An SE pool the depthwise conv lowered whole runs in its epilogue saves the pool's own time
    // (se_pool_fusion.h): the bands do not.
    const auto credit = static_cast<int64_t>(se_pool_credit(c));
    if (!p.pair_alone) finish_on_chip(c, p.pool, scratch);
    c.plan = plan, c.layer = layer;
    if (pj) project_whole();
    c.fusion = state;
    const std::vector<int64_t> cycles = c.time_code(first);
    // Each layer's cycles by its index from the last one timed (an affine map between the conv and the
    // depthwise conv emits nothing: post_affine.h).
    const size_t last = pj ? static_cast<size_t>(p.project) : p.pool;
    if (cycles.size() > last - p.conv) {
      layered =
          cycles[cycles.size() - 1 - (last - p.conv)] + cycles[cycles.size() - 1 - (last - p.pool)] - credit;
      layered_block = layered + (pj ? cycles.back() : 0);
    }
    c.end_trial(undo);
    c.timed = {};
  }
  if (layered <= 0) return false;
  DepthwiseReader reader(c, p, dw);
  auto acc = [&](int64_t rows) { return round64(reader.acc_bytes(rows)); };
  // An imposed band loop (BandLoop) is taken without the comparison against the layers apart, the searches
  // run as without it (Search::pick); its `project` says which of the pair and the block, else the trial's
  // choice between them.
  const BandLoop* imposed = imposed_band_loop(c, p);
  const Search r =
      p.pair_alone ? search(c, bands, p, reader, acc, imposed && imposed->project != true ? imposed : nullptr)
                   : Search{};
  // An SE pool the bands run (line_buffer_readers.h) saves the pool's own time: credited.
  const bool pair =
      r.best_cycles >= 0 && r.best_cycles - static_cast<int64_t>(reader.pool_credit()) < layered;
  std::optional<DepthwiseReader> block;
  Search rb;
  bool block_faster = false;
  if (pj) {
    // The pair's best followed by the project conv lowered whole (what the program runs without the project
    // conv in the band loop), against the three layers in one band loop.
    int64_t apart = layered_block;
    if (pair) {
      const Context::Trial undo = c.mark();
      const int64_t first = c.em.size();
      emit_reserved(c, bands, p, reader, r.cands[r.best], acc(r.cands[r.best].rows));
      project_whole();
      const std::vector<int64_t> cycles = c.time_code(first);
      // The layers' cycles: the conv's, the depthwise conv's (none: fused), the project conv's.
      const auto from_conv = static_cast<size_t>(p.project) - p.conv;
      if (cycles.size() > from_conv) apart = cycles[cycles.size() - 1 - from_conv] + cycles.back();
      c.end_trial(undo);
      c.timed = {};
    }
    block.emplace(c, p, dw, pj, pj_act);
    rb = search(
        c, bands, p, *block, [&](int64_t rows) { return round64(block->acc_bytes(rows)); },
        imposed && imposed->project != false ? imposed : nullptr);
    block_faster = rb.best_cycles >= 0 && rb.best_cycles < apart;
  }
  auto block_acc = [&](int64_t rows) { return round64(block->acc_bytes(rows)); };  // one side of sums
  const Search* pair_choice = pair ? &r : nullptr;
  Search imposed_pair;
  if (imposed) {
    const bool block_fits = block && rb.pick, pair_fits = r.pick.has_value();
    const bool use_block = imposed->project == true    ? block_fits
                           : imposed->project == false ? false
                                                       : block_fits && (block_faster || !pair_fits);
    if (use_block) {
      const Search b = chosen(rb);
      take(c, bands, p, *block, b, layered_block, evaluated, block_acc(b.cands[0].rows));
      return true;
    }
    if (!pair_fits) return false;
    imposed_pair = chosen(r);
    pair_choice = &imposed_pair;
  } else if (block_faster) {
    take(c, bands, p, *block, rb, layered_block, evaluated, block_acc(rb.cands[rb.best].rows));
    return true;
  }
  if (!pair_choice) return false;
  const Search& pr = *pair_choice;
  if (pair_out) {
    *pair_out = PairChoice{true, pr, layered, evaluated, acc(pr.cands[pr.best].rows)};
    return false;
  }
  take(c, bands, p, reader, pr, layered, evaluated, acc(pr.cands[pr.best].rows));
  return true;
}

// Lowers a matrix node in its plan's precision while FusionState::take_conv_job waits for its job;
// `restore` puts the context back on every way out, a thrown error included.
template <class Restore>
void lower_matrix_handing_job(Context& c, const Node& n, Restore restore) {
  struct Guard {
    Restore& restore;
    ~Guard() { restore(); }
  } guard{restore};
  if (c.options.plan)
    lower_matrix_int8(c, n);
  else
    lower_matrix(c, n);
}

// Conv -> depthwise conv: with a project conv after it, its own lowering builds its job and hands it to
// fuse_block (FusionState::take_conv_job), which chooses between the three layers in one band loop, the
// pair with the project conv after it, and the layers apart.
bool fuse_conv_dw(Context& c, ConvBands& bands, ConvBands& dw, LayerPlan* plan) {
  const ConvPool& p = *c.fusion.conv_pool;
  if (p.project >= 0) {
    const Node& pn = c.g.nodes[static_cast<size_t>(p.project)];
    LayerPlan scratch;
    scratch.name = pn.name;
    const Context::Trial undo = c.mark();
    bool fused = false, handed = false;
    PairChoice pair;
    const isa::DType act = c.act;  // the conv's operands (its bands' contract)
    const int64_t esize = c.esize;
    const uint32_t layer = c.layer;
    c.fusion.take_conv_job = [&](ConvBands& pj) {
      handed = true;
      const isa::DType pj_act = c.act;
      c.plan = plan, c.act = act, c.esize = esize, c.layer = layer;
      fused = fuse_block(c, bands, dw, &pj, pj_act, plan, &pair);
      c.plan = &scratch, c.act = pj_act, c.esize = isa::dtype_bytes(pj_act),
      c.layer = static_cast<uint32_t>(p.project);
      return fused;
    };
    c.plan = &scratch, c.layer = static_cast<uint32_t>(p.project);
    lower_matrix_handing_job(c, pn, [&] {
      c.fusion.take_conv_job = nullptr, c.plan = plan, c.act = act, c.esize = esize, c.layer = layer;
    });
    if (fused) return true;
    c.end_trial(undo);
    if (pair.take) {
      DepthwiseReader reader(c, *c.fusion.conv_pool, dw);
      take(c, bands, *c.fusion.conv_pool, reader, pair.r, pair.layered, pair.evaluated, pair.acc);
      return true;
    }
    if (handed || !p.pair_alone) return false;
  }
  return fuse_block(c, bands, dw, nullptr, c.act, plan, nullptr);
}

// Conv -> depthwise conv: the depthwise conv's own lowering builds its job and hands it to fuse_conv_dw
// (FusionState::take_conv_job). Whatever it built is undone when the fusion is not taken.
bool lower_conv_dw_pair(Context& c, ConvBands& bands) {
  const ConvPool& p = *c.fusion.conv_pool;
  const Node& dn = c.g.nodes[p.pool];
  LayerPlan* plan = c.plan;
  LayerPlan scratch;
  scratch.name = dn.name;
  const Context::Trial undo = c.mark();
  bool fused = false;
  const isa::DType act = c.act;  // the conv's operands (its bands' contract)
  const int64_t esize = c.esize;
  c.fusion.take_conv_job = [&](ConvBands& dw) {
    const isa::DType dw_act = c.act;
    const int64_t dw_esize = c.esize;
    c.plan = plan, c.act = act, c.esize = esize;
    fused = fuse_conv_dw(c, bands, dw, plan);
    c.plan = &scratch, c.act = dw_act, c.esize = dw_esize;
    return fused;
  };
  c.plan = &scratch;
  lower_matrix_handing_job(
      c, dn, [&] { c.fusion.take_conv_job = nullptr, c.plan = plan, c.act = act, c.esize = esize; });
  if (!fused) c.end_trial(undo);
  return fused;
}

}  // namespace

bool conv_job_wanted(const Context& c) { return static_cast<bool>(c.fusion.take_conv_job); }

void line_buffer_tile_done(Context& c) {
  if (c.fusion.after_tile) c.fusion.after_tile();
}

bool pool_line_buffer_next(const Context& c) {
  return c.fusion.conv_pool && c.fusion.conv_pool->conv == c.layer && !c.fusion.conv_pool->depthwise &&
         !c.fusion.take_conv_job;
}

bool hand_conv_job(Context& c, ConvBands& bands) {
  std::function<bool(ConvBands&)> take;
  take.swap(c.fusion.take_conv_job);  // once: the job's fusion lowers nothing else through it
  return take(bands);
}

bool lower_conv_pool(Context& c, ConvBands& bands) {
  if (!c.fusion.conv_pool || c.fusion.conv_pool->conv != c.layer || !bands.ends_with_vec() ||
      c.fusion.take_conv_job)
    return false;
  return c.fusion.conv_pool->depthwise ? lower_conv_dw_pair(c, bands) : lower_conv_pool_pair(c, bands);
}

std::string fusion_group(const Context& c, const ConvPool& p) {
  return (p.depthwise ? "conv_dwconv:" : "conv_pool:") + c.g.nodes[p.conv].name;
}

std::string describe_fused_pool(const Context& c, const ConvPool& p) {
  const std::string& conv = c.g.nodes[p.conv].name;
  const std::string& input = c.g.nodes[p.pool].inputs[0];
  if (!p.depthwise) {
    return fmt::format(
        "fused into the conv layer '{}' (no instructions of its own): pools bands of {} rows from its line "
        "buffer, its input '{}' never touches DRAM",
        conv, p.band_rows, input);
  }
  // As the layer-by-layer description starts (the precision, the op), then where it runs.
  return fmt::format(
      "{}VEC dwconv {}x{} stride {}x{}, {} channels, fused into the conv layer '{}' (no instructions of its "
      "own): bands of {} output rows from its line buffer, its input '{}' never touches DRAM",
      c.options.plan ? "int8 " : "", p.w.kh, p.w.kw, p.w.sh, p.w.sw, p.C, conv, p.band_rows, input);
}

std::string describe_fused_project(const Context& c, const ConvPool& p) {
  const Node& q = c.g.nodes[static_cast<size_t>(p.project)];
  return fmt::format(
      "{}GEMM 1x1 {}->{}, fused into the conv layer '{}' (no instructions of its own): one GEMM per band "
      "of {} rows reading the depthwise conv's output rows where its epilogue wrote them, its input '{}' "
      "never touches DRAM",
      c.options.plan ? "int8 " : "", p.C, c.g.value(q.inputs[1]).shape[0], c.g.nodes[p.conv].name,
      p.band_rows, q.inputs[0]);
}

}  // namespace npusim::compiler::backend
