// Conv -> pool fusion with line-buffer tiling (see layer_fusion.h).
#include "compiler/backend/layer_fusion.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "compiler/backend/movement.h"
#include "compiler/passes/lowered.h"
#include "compiler/quant/quantize.h"

namespace npusim::compiler::backend {

using isa::Buffer;
using isa::VecOp;

namespace {

// A window's rows (or columns) clipped to the input [0, n): first and last.
struct Span {
  int64_t lo = 0, hi = 0;
  bool full = false;  // the window lies inside the input
};
Span clip(int64_t o, int64_t stride, int64_t pad, int64_t k, int64_t n) {
  const int64_t a = o * stride - pad, b = a + k - 1;
  return Span{std::max<int64_t>(0, a), std::min(n - 1, b), a >= 0 && b <= n - 1};
}

// The rows of the pool's input one band of pool output rows [p0, p1) reads.
Span band_rows(const ConvPool& p, int64_t p0, int64_t p1) {
  return Span{clip(p0, p.w.sh, p.w.pt, p.w.kh, p.H).lo, clip(p1 - 1, p.w.sh, p.w.pt, p.w.kh, p.H).hi, true};
}

// One band: pool output rows [p0, p1), the input rows [lo, hi] it reads, of which [lo, lo + kept) are
// the previous band's (moved to the buffer's start) and the rest the conv computes.
struct Band {
  int64_t p0 = 0, p1 = 0, lo = 0, hi = 0, kept = 0, from = 0;  // from: buffer row the kept rows come from
  Tiling t;
};

struct Candidate {
  int64_t rows = 0;      // pool output rows per band
  int64_t buf_rows = 0;  // line-buffer rows (one more than a band reads: the interior VEC's rows run on)
  std::vector<Band> bands;
};

// The bands of `rows` pool rows; false when a band's kept rows would overlap the rows they move to.
bool make_bands(const ConvPool& p, int64_t rows, Candidate* cand) {
  cand->rows = rows;
  int64_t prev_lo = -1, prev_hi = -1, most = 0;
  for (int64_t p0 = 0; p0 < p.OH; p0 += rows) {
    Band b;
    b.p0 = p0, b.p1 = std::min(p.OH, p0 + rows);
    const Span s = band_rows(p, b.p0, b.p1);
    b.lo = s.lo, b.hi = s.hi;
    if (prev_hi >= b.lo) {
      b.kept = prev_hi - b.lo + 1;
      b.from = b.lo - prev_lo;
      if (b.from < b.kept) return false;
    }
    most = std::max(most, b.hi - b.lo + 1);
    prev_lo = b.lo, prev_hi = b.hi;
    cand->bands.push_back(b);
  }
  cand->buf_rows = most + 1;
  return true;
}

// The stride of an edge column's VEC: its one window, then past the row (d1 = W).
int64_t edge_stride(const Span& s, int64_t W) { return W - (s.hi - s.lo + 1) + 1; }

}  // namespace

bool conv_pool_pair(const Graph& g, size_t i) {
  if (i + 1 >= g.nodes.size()) return false;
  const Node& cv = g.nodes[i];
  const Node& pl = g.nodes[i + 1];
  if (!cv.domain.empty() || cv.op_type != "Conv" || cv.outputs.size() != 1 || cv.has_attr(kResidualInput) ||
      cv.attr_int("group", 1) != 1)
    return false;
  if (!pl.domain.empty() || (pl.op_type != "MaxPool" && pl.op_type != "AveragePool") || pl.inputs[0] != cv.outputs[0])
    return false;
  if (pl.outputs.size() > 1 && !pl.outputs[1].empty()) return false;
  const std::string& v = cv.outputs[0];
  for (const std::string& o : g.outputs)
    if (o == v) return false;
  const std::vector<int> readers = g.consumers(v);
  return readers.size() == 1 && readers[0] == static_cast<int>(i + 1);
}

bool plan_conv_pool(const Context& c, size_t i, ConvPool* p) {
  const Graph& g = c.g;
  if (!c.options.keep_on_chip || !c.can_time() || g.nhwc_io || c.shared_capacity() > 0) return false;
  if (c.on_chip.pending || c.input_reserved > 0 || !c.keep_output.empty()) return false;
  if (!conv_pool_pair(g, i)) return false;
  const Node& cv = g.nodes[i];
  const Node& pl = g.nodes[i + 1];
  if (c.folding.folded(cv) || c.folding.folded(pl)) return false;
  if (c.options.mapping) {
    const LayerMapping* m = c.options.mapping->find(cv.name);
    if (m && (m->has_tiling() || m->has_vector_tiling() || m->on_chip.has_value() ||
              (m->placement && *m->placement != Placement::kNpuMatrix)))
      return false;
    const LayerMapping* q = c.options.mapping->find(pl.name);
    if (q && (q->has_tiling() || q->has_vector_tiling() || (q->placement && *q->placement != Placement::kNpuVector)))
      return false;
  }
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
  p->conv = i, p->pool = i + 1;
  p->is_max = pl.op_type == "MaxPool";
  p->C = x.shape[1], p->H = x.shape[2], p->W = x.shape[3], p->OH = y.shape[2], p->OW = y.shape[3];
  std::string why;
  if (!pool_window(pl, p->H, p->W, p->OH, p->OW, &p->w, &why)) return false;
  const PoolWindow& w = p->w;
  if (std::max({w.kh, w.kw, w.sh, w.sw}) > 255 || p->C > kMaxDim || p->W > kMaxDim) return false;
  // The pool's output columns whose windows lie inside the input: one run, edges on either side of it.
  p->ox_a = -1, p->ox_b = -1;
  for (int64_t ox = 0; ox < p->OW; ++ox) {
    const Span s = clip(ox, w.sw, w.pl, w.kw, p->W);
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
    const Span s = clip(oy, w.sh, w.pt, w.kh, p->H);
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

// Emits the fused layer under candidate `cand` (its bands' tilings chosen), the line buffer at `buf`.
void emit(Context& c, ConvBands& bands, const ConvPool& p, const Candidate& cand, uint64_t buf) {
  const Node& pn = c.g.nodes[p.pool];
  const DramTensor& x = c.tensor(pn.inputs[0]);
  const DramTensor& y = c.tensor(pn.outputs[0]);
  const isa::DType t = x.dtype;
  const int64_t es = isa::dtype_bytes(t), ey = isa::dtype_bytes(y.dtype);
  const int64_t row = p.W * p.C;  // elements per buffer row
  const PoolWindow& w = p.w;
  // Output slots (a ping-pong pair) in the weight scratchpad, at the end the conv's weights do not use.
  const int64_t out_elems = cand.rows * p.vec_cols * p.C;
  const int64_t need = 2 * round64(out_elems * es);
  const int64_t cap = c.capacity(Buffer::kWeight);
  const uint64_t base = c.layer % 2 == 0 ? static_cast<uint64_t>(cap - need) / 64 * 64 : 0;
  SramAlloc o{Buffer::kWeight, base, base};
  const uint64_t slot[2] = {o.take(static_cast<uint64_t>(out_elems * es)), o.take(static_cast<uint64_t>(out_elems * es))};
  int side = 0;
  const int64_t P = y.strided() ? y.view_strides[2] : p.C, y_img = y.strided() ? y.view_strides[0] : p.OH * p.OW * p.C;
  const MatrixJob& j = bands.job();
  for (int64_t img = 0; img < j.images; ++img) {
    for (const Band& b : cand.bands) {
      if (b.kept > 0) {
        Context::VecArgs v;
        v.op = VecOp::kCopy, v.in = v.out = t;
        v.src1_buf = v.dst_buf = Buffer::kInput;
        v.src1 = buf + static_cast<uint64_t>(b.from * row * es), v.dst = buf;
        v.d0 = p.C, v.d1 = p.W, v.d2 = b.kept;
        c.vec(v);
      }
      bands.generate(b.lo + b.kept, b.hi + 1, img, buf + static_cast<uint64_t>(b.kept * row * es), b.t);
      // The pool's regions: runs of output rows whose windows are whole (or one clipped row) x the interior
      // columns and each edge column.
      std::vector<std::array<int64_t, 2>> row_runs;  // [oy0, oy1)
      for (int64_t oy = b.p0; oy < b.p1; ++oy) {
        const bool full = clip(oy, w.sh, w.pt, w.kh, p.H).full;
        if (full && !row_runs.empty() && row_runs.back()[1] == oy &&
            clip(row_runs.back()[0], w.sh, w.pt, w.kh, p.H).full)
          row_runs.back()[1] = oy + 1;
        else
          row_runs.push_back({oy, oy + 1});
      }
      std::vector<std::array<int64_t, 2>> col_runs;
      for (int64_t ox = 0; ox < p.ox_a; ++ox) col_runs.push_back({ox, ox + 1});
      col_runs.push_back({p.ox_a, p.ox_b});
      for (int64_t ox = p.ox_b; ox < p.OW; ++ox) col_runs.push_back({ox, ox + 1});
      for (const auto& rr : row_runs) {
        const Span rs = clip(rr[0], w.sh, w.pt, w.kh, p.H);
        const int64_t nr = rr[1] - rr[0];
        for (const auto& cr : col_runs) {
          const Span cs = clip(cr[0], w.sw, w.pl, w.kw, p.W);
          const int64_t nc = cr[1] - cr[0];
          Context::VecArgs v;
          v.op = p.is_max ? VecOp::kMaxPool : VecOp::kAvgPool;
          v.in = v.out = t;
          v.src1_buf = Buffer::kInput;
          v.src1 = buf + static_cast<uint64_t>(((rs.lo - b.lo) * p.W + cs.lo) * p.C * es);
          v.dst_buf = Buffer::kWeight, v.dst = slot[side];
          v.d0 = p.C, v.d1 = p.W;
          v.win_h = rs.hi - rs.lo + 1, v.str_h = rs.full ? w.sh : 1;
          v.d2 = (nr - 1) * v.str_h + v.win_h;
          v.win_w = cs.hi - cs.lo + 1, v.str_w = cs.full ? w.sw : edge_stride(cs, p.W);
          c.vec(v);
          const uint64_t ya = y.addr + static_cast<uint64_t>((img * y_img + (rr[0] * p.OW + cr[0]) * P) * ey);
          const int64_t vc = cs.full ? p.vec_cols : 1;  // the VEC's output columns
          if (vc == nc) {
            c.store(Buffer::kWeight, slot[side], y.range(), ya, y.dtype, {p.C, nc, nr, 1}, {P, p.OW * P, 0});
          } else {
            for (int64_t r = 0; r < nr; ++r) {  // the interior windows of each row, not the ones after them
              c.store(Buffer::kWeight, slot[side] + static_cast<uint64_t>(r * vc * p.C * ey), y.range(),
                      ya + static_cast<uint64_t>(r * p.OW * P * ey), y.dtype, {p.C, nc, 1, 1}, {P, 0, 0});
            }
          }
          side ^= 1;
        }
      }
    }
  }
}

// Chooses each band's tiling (outside any trial); false when one does not fit.
// The pool's output slots (a ping-pong pair of `cand.rows` pooled rows, emit) take the end of the weight
// scratchpad the conv's weight tiles leave free: both must fit, for every band's tiling.
bool output_slots_fit(const Context& c, const ConvPool& p, const Candidate& cand, int64_t es) {
  const int64_t need = 2 * round64(cand.rows * p.vec_cols * p.C * es);
  const int64_t cap = c.capacity(Buffer::kWeight);
  for (const Band& b : cand.bands)
    if (round64(b.t.w_bytes) + need + 64 > cap) return false;
  return true;
}

bool choose_tilings(const Context& c, ConvBands& bands, const ConvPool& p, Candidate& cand, uint64_t buf,
                    int64_t row_bytes, int64_t es) {
  for (Band& b : cand.bands) {
    int64_t evaluated = 0;
    b.t = bands.choose(b.lo + b.kept, b.hi + 1, buf + static_cast<uint64_t>(b.kept * row_bytes), &evaluated);
    if (evaluated == 0) return false;
  }
  return output_slots_fit(c, p, cand, es);
}

}  // namespace

bool lower_conv_pool(Context& c, ConvBands& bands) {
  if (!c.conv_pool || c.conv_pool->conv != c.layer || !bands.ends_with_vec()) return false;
  ConvPool& p = *c.conv_pool;
  const Node& pn = c.g.nodes[p.pool];
  const DramTensor& x = c.tensor(pn.inputs[0]);
  const int64_t es = isa::dtype_bytes(x.dtype);
  const int64_t row_bytes = p.W * p.C * es;
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
    LayerPlan* plan = c.plan;
    const uint32_t layer = c.layer;
    const isa::DType act = c.act;
    const int64_t esize = c.esize;
    std::map<std::string, const quant::QParams*> codes;
    codes.swap(c.codes);
    c.plan = &scratch, c.layer = static_cast<uint32_t>(p.pool), c.act = x.dtype, c.esize = es;
    std::string why;
    const bool ok = lower_vector(c, pn, &why);
    c.plan = plan, c.layer = layer, c.act = act, c.esize = esize;
    codes.swap(c.codes);
    const std::vector<int64_t> cycles = ok ? c.time_code(first) : std::vector<int64_t>{};
    if (cycles.size() >= 2) layered = cycles[cycles.size() - 1] + cycles[cycles.size() - 2];
    c.end_trial(trial);
  }
  if (layered <= 0) return false;
  // Candidates: bands of all the pool's rows, then halvings, the first four whose line buffer fits in
  // three quarters of the input scratchpad.
  const int64_t cap = scratchpad_capacity(c.config, Buffer::kInput);
  std::vector<Candidate> cands;
  for (int64_t r = p.OH;; r = ceil_div(r, 2)) {
    Candidate cand;
    if (make_bands(p, r, &cand) && 4 * (c.input_reserved + round64(cand.buf_rows * row_bytes)) <= 3 * cap)
      cands.push_back(std::move(cand));
    if (r <= 1 || cands.size() >= 4) break;
  }
  const int64_t reserved = c.input_reserved;
  int64_t best_cycles = -1, first_cycles = -1;
  size_t best = 0;
  for (size_t k = 0; k < cands.size(); ++k) {
    Candidate& cand = cands[k];
    c.input_reserved = reserved + round64(cand.buf_rows * row_bytes);
    const uint64_t buf = static_cast<uint64_t>(cap - c.input_reserved);
    if (choose_tilings(c, bands, p, cand, buf, row_bytes, es)) {
      const Context::Trial trial = c.begin_trial();
      const int64_t first = c.em.size();
      emit(c, bands, p, cand, buf);
      const int64_t t = c.time_layer(first);
      c.end_trial(trial);
      if (first_cycles < 0) first_cycles = t;
      const bool worse = best_cycles >= 0 && t >= best_cycles;
      if (!worse) best_cycles = t, best = k;
      // Smaller bands only add fill and drain per band once they stop paying: the search stops at the
      // first one slower than the best.
      c.input_reserved = reserved;
      if (worse) break;
    }
    c.input_reserved = reserved;
  }
  c.timed = {};  // the trials' figures are not the layer's
  if (best_cycles < 0 || best_cycles >= layered) return false;
  Candidate& cand = cands[best];
  c.input_reserved = reserved + round64(cand.buf_rows * row_bytes);
  const uint64_t buf = static_cast<uint64_t>(cap - c.input_reserved);
  const int64_t before = c.em.size();
  emit(c, bands, p, cand, buf);
  c.input_reserved = reserved;
  // The plan: the first band's tiling, the whole conv's MACs, the line buffer in the input scratchpad.
  const MatrixJob& j = bands.job();
  MatrixJob b0 = j;
  restrict_to_band(b0, cand.bands[0].lo, cand.bands[0].hi + 1, 0, static_cast<int64_t>(buf), c.esize);
  record_tiling(c, b0, cand.bands[0].t, evaluated);
  LayerPlan& plan = *c.plan;
  plan.macs = j.images * j.OH * j.OW * j.M * j.kh * j.kw * j.cg;
  plan.chosen = LayerMapping{};
  plan.est_cycles = best_cycles;
  plan.candidates = static_cast<int64_t>(cands.size()) + 1;
  plan.sram_input_bytes += round64(cand.buf_rows * row_bytes);
  plan.instructions = c.em.size() - before;
  p.fused = true;
  p.band_rows = cand.rows;
  plan.fusion_group = fusion_group(c, p);
  p.bytes_saved = 2 * static_cast<int64_t>(x.bytes);
  const int64_t overlap = std::max<int64_t>(0, p.w.kh - p.w.sh);
  plan.tile_limit = cand.rows == cands.front().rows
                        ? fmt::format("bands of {} pooled rows: the largest whose line buffer fits", cand.rows)
                        : fmt::format("bands of {} pooled rows pipeline better: {} cycles simulated against {} "
                                      "with bands of {}",
                                      cand.rows, best_cycles, first_cycles, cands.front().rows);
  plan.mapping += fmt::format(
      "; fused with the {} '{}' in bands of {} output rows ({} pooled rows per band, {} bands): each band's "
      "rows written into a line buffer of {} rows at the top of the input scratchpad, {} halo row(s) kept "
      "(moved to the buffer's start by one VEC copy, not recomputed), pooled there; the {}x{}x{} conv output "
      "never touches DRAM ({} bytes saved; {} cycles simulated against {} layer by layer)",
      pn.op_type, pn.name, std::min(p.H, (cand.rows - 1) * p.w.sh + p.w.kh), cand.rows, cand.bands.size(),
      cand.buf_rows - 1, cand.bands.size() > 1 ? overlap : 0, p.H, p.W, p.C, p.bytes_saved, best_cycles, layered);
  return true;
}

std::string fusion_group(const Context& c, const ConvPool& p) { return "conv_pool:" + c.g.nodes[p.conv].name; }

std::string describe_fused_pool(const Context& c, const ConvPool& p) {
  return fmt::format(
      "fused into the conv layer '{}' (no instructions of its own): pools bands of {} rows from its line "
      "buffer, its input '{}' never touches DRAM",
      c.g.nodes[p.conv].name, p.band_rows, c.g.nodes[p.pool].inputs[0]);
}

}  // namespace npusim::compiler::backend
