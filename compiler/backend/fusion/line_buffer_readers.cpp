// The line buffer's readers (see line_buffer_readers.h).
#include "compiler/backend/fusion/line_buffer_readers.h"

#include <array>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "compiler/backend/int8/int8.h"
#include "compiler/backend/matrix/depthwise.h"

namespace npusim::compiler::backend {

using isa::Buffer;
using isa::VecOp;

// The weight scratchpad's end a layer's own slots do not start from (Context::slots: even layers take
// the bottom), `need` bytes.
uint64_t free_weight_end(const Context& c, int64_t need) {
  const int64_t cap = c.capacity(Buffer::kWeight);
  return c.layer % 2 == 0 ? static_cast<uint64_t>(cap - need) / 64 * 64 : 0;
}

namespace {

// A MaxPool / AveragePool: its windows pooled in the buffer, the pooled tiles stored from ping-pong
// slots in the weight scratchpad.
class PoolReader : public LineReader {
 public:
  PoolReader(Context& c, const ConvPool& p) : c_(c), p_(p) {}
  int64_t weight_bytes(const BandHeight& cand) const override {
    return 2 * round64(cand.rows * p_.vec_cols * p_.C * es());
  }
  void begin(const BandHeight& cand, uint64_t) override {
    const int64_t out_elems = cand.rows * p_.vec_cols * p_.C;
    const uint64_t base = free_weight_end(c_, weight_bytes(cand));
    SramAlloc o{Buffer::kWeight, base, base};
    slot_[0] = o.take(static_cast<uint64_t>(out_elems * es()));
    slot_[1] = o.take(static_cast<uint64_t>(out_elems * es()));
    side_ = 0;
  }
  void read(const LineBand& b, int64_t img, uint64_t buf) override {
    const ConvPool& p = p_;
    const Node& pn = c_.g.nodes[p.pool];
    const DramTensor& x = c_.tensor(pn.inputs[0]);
    const DramTensor& y = c_.tensor(pn.outputs[0]);
    const isa::DType t = x.dtype;
    const int64_t ey = isa::dtype_bytes(y.dtype);
    const PoolWindow& w = p.w;
    const int64_t P = y.strided() ? y.view_strides[2] : p.C,
                  y_img = y.strided() ? y.view_strides[0] : p.OH * p.OW * p.C;
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
      const WindowSpan rs = clip(rr[0], w.sh, w.pt, w.kh, p.H);
      const int64_t nr = rr[1] - rr[0];
      for (const auto& cr : col_runs) {
        const WindowSpan cs = clip(cr[0], w.sw, w.pl, w.kw, p.W);
        const int64_t nc = cr[1] - cr[0];
        Context::VecArgs v;
        v.op = p.is_max ? VecOp::kMaxPool : VecOp::kAvgPool;
        v.in = v.out = t;
        v.src1_buf = Buffer::kInput;
        v.src1 = buf + static_cast<uint64_t>((b.row(rs.lo) * p.W + cs.lo) * p.C * es());
        v.dst_buf = Buffer::kWeight, v.dst = slot_[side_];
        v.d0 = p.C, v.d1 = p.W;
        v.win_h = rs.hi - rs.lo + 1, v.str_h = rs.full ? w.sh : 1;
        v.d2 = (nr - 1) * v.str_h + v.win_h;
        v.win_w = cs.hi - cs.lo + 1, v.str_w = cs.full ? w.sw : edge_stride(cs, p.W);
        c_.vec(v);
        const uint64_t ya = y.addr + static_cast<uint64_t>((img * y_img + (rr[0] * p.OW + cr[0]) * P) * ey);
        const int64_t vc = cs.full ? p.vec_cols : 1;  // the VEC's output columns
        if (vc == nc) {
          c_.store(Buffer::kWeight, slot_[side_], y.range(), ya, y.dtype, {p.C, nc, nr, 1}, {P, p.OW * P, 0});
        } else {
          for (int64_t r = 0; r < nr; ++r) {  // the interior windows of each row, not the ones after them
            c_.store(Buffer::kWeight, slot_[side_] + static_cast<uint64_t>(r * vc * p.C * ey), y.range(),
                     ya + static_cast<uint64_t>(r * p.OW * P * ey), y.dtype, {p.C, nc, 1, 1}, {P, 0, 0});
          }
        }
        side_ ^= 1;
      }
    }
  }

 private:
  int64_t es() const { return isa::dtype_bytes(c_.tensor(c_.g.nodes[p_.pool].inputs[0]).dtype); }
  Context& c_;
  const ConvPool& p_;
  uint64_t slot_[2] = {0, 0};
  int side_ = 0;
};

}  // namespace

std::unique_ptr<LineReader> pool_reader(Context& c, const ConvPool& p) {
  return std::make_unique<PoolReader>(c, p);
}

DepthwiseReader::DepthwiseReader(Context& c, const ConvPool& p, ConvBands& dw, ConvBands* project,
                                 isa::DType project_act)
    : c_(c), p_(p), dw_(dw), project_(project), project_act_(project_act) {
  if (!project_ && dw_.job().images == 1)
    pool_ = se_pool_codes_for_depthwise(c_, p_.pool, dw_.job().y_range, strategy().ops.y);
}

int64_t DepthwiseReader::pool_bytes(int64_t rows) const {
  if (!pool_) return 0;
  const int64_t C = p_.C;
  return round64(rows * p_.OW * C) + 2 * round64(C * 4) + round64(C) + round64(12);
}

int64_t DepthwiseReader::acc_bytes(int64_t rows) const {
  return strategy().acc_bytes(rows * p_.OW, p_.C, sum_sides());
}

int64_t DepthwiseReader::side_bytes(int64_t rows) const {
  return strategy().side_bytes(rows * p_.OW, p_.C, sum_sides());
}

int64_t DepthwiseReader::weight_bytes(const BandHeight& cand) const {
  const MatrixJob& j = dw_.job();
  return round64(j.kh * j.kw * p_.C * isa::dtype_bytes(depthwise_weight_dtype(strategy().ops.a))) +
         (project_ ? project_weight_bytes() : 0) + pool_bytes(cand.rows);
}

int64_t DepthwiseReader::project_weight_bytes() const {
  const isa::DType act = c_.act;
  const int64_t esize = c_.esize;
  c_.act = project_act_, c_.esize = isa::dtype_bytes(project_act_);
  const isa::DType w = project_->make_strategy()->ops.w;
  c_.act = act, c_.esize = esize;
  const MatrixJob& j = project_->job();
  return round64(j.C * j.M * isa::dtype_bytes(w));
}

int64_t DepthwiseReader::out_bytes(int64_t rows) const {
  if (!project_) return 0;
  return round64(rows * p_.OW * p_.C * isa::dtype_bytes(c_.tensor(c_.g.nodes[p_.pool].outputs[0]).dtype));
}

uint64_t DepthwiseReader::out_base(const BandHeight& cand, uint64_t buf) const {
  return buf + static_cast<uint64_t>(round64(cand.buf_rows * p_.pitch * p_.C * es()) + cand.side);
}

template <class F>
void DepthwiseReader::as_project(F f) {
  const isa::DType act = c_.act;
  const int64_t esize = c_.esize;
  c_.act = project_act_, c_.esize = isa::dtype_bytes(project_act_);
  c_.fusion.slots_flipped = true;
  f();
  c_.fusion.slots_flipped = false;
  c_.act = act, c_.esize = esize;
}

int64_t DepthwiseReader::acc_share(const BandHeight& cand) {
  if (!project_) return 0;
  int64_t bytes = 0;
  as_project([&] { bytes = project_->make_strategy()->acc_bytes(cand.rows * p_.OW, project_->job().M); });
  return round64(bytes);
}

bool DepthwiseReader::choose(BandHeight& cand, uint64_t buf) {
  if (!project_) return true;
  // The project conv's tiles take the accumulator's other end: at most what the sums and the conv's band
  // tiles leave (its slots then lie at that end, clear of the conv's).
  const int64_t acc = c_.fusion.acc_reserved;
  c_.fusion.acc_reserved = acc + cand.conv_acc;
  const uint64_t out = out_base(cand, buf);
  bool ok = true;
  as_project([&] {
    project_->set_resident_weights(0);  // any address: the tilings take every channel in one tile
    for (LineBand& b : cand.bands) {
      int64_t evaluated = 0;
      b.pt = project_->choose_rows(b.p0, b.p1, static_cast<int64_t>(out), &evaluated);
      if (evaluated == 0) {
        ok = false;
        break;
      }
    }
    project_->set_resident_weights(-1);
  });
  c_.fusion.acc_reserved = acc;
  return ok;
}

const MatrixStrategy& DepthwiseReader::strategy() const {
  if (!probe_) probe_ = dw_.make_strategy();
  return *probe_;
}

template <class F>
void DepthwiseReader::with_operands(F f) {
  const isa::DType act = c_.act;
  const int64_t esize = c_.esize;
  c_.act = s_->ops.a, c_.esize = isa::dtype_bytes(s_->ops.a);
  f();
  c_.act = act, c_.esize = esize;
}

int64_t DepthwiseReader::es() const {
  return isa::dtype_bytes(c_.tensor(c_.g.nodes[p_.pool].inputs[0]).dtype);
}

void DepthwiseReader::begin(const BandHeight& cand, uint64_t buf) {
  s_ = project_ ? dw_.make_sram_strategy() : dw_.make_strategy();
  pending_ = ProjectBand{};
  held_ = HeldBand{};
  dwconvs_ = 0;
  pieces_ = cand.pieces;
  if (project_) {
    out_[0] = out_base(cand, buf);
    out_[1] = out_[0] + static_cast<uint64_t>(cand.out_slot);
    // The project conv's weights once for every band (MatrixJob::b_sram), right after the depthwise conv's.
    const uint64_t at = free_weight_end(c_, weight_bytes(cand)) +
                        static_cast<uint64_t>(weight_bytes(cand) - project_weight_bytes());
    // Loaded before the first band's project rows (project): the load queue takes the first bands' loads
    // first, and these bytes may still be read by the layer before.
    project_w_ = at;
    project_w_loaded_ = false;
  }
  const MatrixJob& j = dw_.job();
  const isa::DType a = s_->ops.a, wt = depthwise_weight_dtype(a);
  with_operands([&] {
    const int64_t cap = scratchpad_capacity(c_.config, Buffer::kAccumulator);
    const uint64_t base = static_cast<uint64_t>(cap - c_.fusion.acc_reserved);
    SramAlloc acc{Buffer::kAccumulator, base, base};
    // The epilogue's operand slots right above the line buffer when the accumulator cannot take them.
    const uint64_t above = buf + static_cast<uint64_t>(round64(cand.buf_rows * p_.pitch * p_.C * es()));
    SramAlloc side{Buffer::kInput, above, above};
    s_->allocate(acc, cand.side > 0 ? side : acc, cand.rows * p_.OW, p_.C, sum_sides());
    w_slot_ = free_weight_end(c_, weight_bytes(cand));
    const uint64_t w_addr = s_->depthwise_weights();
    const int64_t ew = isa::dtype_bytes(wt);
    if (pool_) {
      // The SE pool's slots after the depthwise weights; its unit weights and output stage loaded once.
      const int64_t C = p_.C, ones = cand.rows * p_.OW * C;
      ones_ = w_slot_ + static_cast<uint64_t>(round64(j.kh * j.kw * C * ew));
      band_sums_ = ones_ + static_cast<uint64_t>(round64(ones));
      sums_ = band_sums_ + static_cast<uint64_t>(round64(C * 4));
      pooled_ = sums_ + static_cast<uint64_t>(round64(C * 4));
      stage_ = pooled_ + static_cast<uint64_t>(round64(C));
      const uint64_t d = c_.add_data(std::vector<uint8_t>(static_cast<size_t>(ones), 1));
      c_.load(Buffer::kWeight, ones_, Range{kDram, d, d + static_cast<uint64_t>(ones)}, d, wt,
              {C, cand.rows * p_.OW, 1, 1}, {C, 0, 0});
      const uint64_t k = c_.add_data(int32_bytes({pool_->stage[0], pool_->stage[1], pool_->stage[2]}));
      c_.load(Buffer::kWeight, stage_, Range{kDram, k, k + 12}, k, isa::DType::kInt32, {3, 1, 1, 1},
              {0, 0, 0});
      first_band_ = true;
    }
    // Loaded before the first band's dwconv (load_weights): the load queue takes the conv's first loads
    // first, and these bytes may still be read by the layer before.
    w_addr_ = w_addr;
    w_loaded_ = false;
    if (!project_) load_weights();
    // The padding value (LOAD's halo value: 0, or the input's zero point for codes) as a data segment
    // of whole padded rows, as many as the padding rows one band reads.
    const DramTensor& x = c_.tensor(c_.g.nodes[p_.pool].inputs[0]);
    pad_rows_ = std::max<int64_t>(1, std::max(p_.w.pt, p_.w.pb));
    const int64_t n = pad_rows_ * p_.pitch * p_.C;
    if (x.dtype == isa::DType::kUint8 || x.dtype == isa::DType::kInt8)
      pad_ = c_.add_data(std::vector<uint8_t>(static_cast<size_t>(n), static_cast<uint8_t>(s_->ops.pad)));
    else
      pad_ = c_.add_floats(std::vector<float>(static_cast<size_t>(n), 0.0f), x.dtype);
    pad_range_ = Range{kDram, pad_, pad_ + static_cast<uint64_t>(n * es())};
  });
  fill_columns(buf, cand.buf_rows);
  side_ = 0;
}

void DepthwiseReader::load_weights() {
  if (w_loaded_) return;
  const MatrixJob& j = dw_.job();
  const isa::DType wt = depthwise_weight_dtype(s_->ops.a);
  const uint64_t bytes = static_cast<uint64_t>(j.kh * j.kw * p_.C * isa::dtype_bytes(wt));
  c_.load(Buffer::kWeight, w_slot_, Range{kDram, w_addr_, w_addr_ + bytes}, w_addr_, wt,
          {p_.C, j.kh * j.kw, 1, 1}, {p_.C, 0, 0});
  w_loaded_ = true;
}

void DepthwiseReader::fill_columns(uint64_t buf, int64_t buf_rows) {
  // The padding columns of every buffer row, once: a row's right ones and the next row's left ones are
  // adjacent.
  const isa::DType t = c_.tensor(c_.g.nodes[p_.pool].inputs[0]).dtype;
  const int64_t row = p_.pitch * p_.C;
  auto fill = [&](int64_t at, int64_t cols) {
    if (cols > 0)
      c_.load(Buffer::kInput, buf + static_cast<uint64_t>(at * es()), pad_range_, pad_, t, {p_.C, cols, 1, 1},
              {p_.C, 0, 0});
  };
  fill(0, p_.w.pl);
  for (int64_t r = 0; r + 1 < buf_rows; ++r) fill(r * row + (p_.w.pl + p_.W) * p_.C, p_.w.pr + p_.w.pl);
  fill((buf_rows - 1) * row + (p_.w.pl + p_.W) * p_.C, p_.w.pr);
}

void DepthwiseReader::load_padding(const LineBand& b, uint64_t buf) {
  const isa::DType t = c_.tensor(c_.g.nodes[p_.pool].inputs[0]).dtype;
  const int64_t row_bytes = p_.pitch * p_.C * es();
  auto pad_rows = [&](int64_t from, int64_t to) {  // buffer rows [from, to) of the band
    for (int64_t r = std::max(from, b.lo + b.kept); r < to; r += pad_rows_) {
      const int64_t n = std::min(pad_rows_, to - r);
      c_.load(Buffer::kInput, buf + static_cast<uint64_t>(b.row(r) * row_bytes), pad_range_, pad_, t,
              {p_.C, p_.pitch, n, 1}, {p_.C, p_.pitch * p_.C, 0});
    }
  };
  pad_rows(b.lo, std::min(b.hi + 1, p_.top));
  pad_rows(std::max(b.lo, p_.top + p_.H), b.hi + 1);
}

void DepthwiseReader::dwconv(uint64_t src, int64_t in_h, int64_t oh, int sums) {
  const MatrixJob& j = dw_.job();
  const int64_t row_bytes = p_.pitch * p_.C * es();
  const uint64_t acc = s_->acc_slot(sums);
  const isa::DType wt = depthwise_weight_dtype(s_->ops.a);
  const isa::Instruction i =
      dwconv_instruction(c_.layer, s_->ops.a, src, w_slot_, acc, p_.C, p_.pitch, in_h, j);
  c_.em.emit(i,
             {Range{static_cast<int>(Buffer::kInput), src, src + static_cast<uint64_t>(in_h * row_bytes)},
              Range{static_cast<int>(Buffer::kWeight), w_slot_,
                    w_slot_ + static_cast<uint64_t>(j.kh * j.kw * p_.C * isa::dtype_bytes(wt))}},
             {Range{static_cast<int>(Buffer::kAccumulator), acc,
                    acc + static_cast<uint64_t>(oh * p_.OW * p_.C * 4)}});
  ++dwconvs_;
}

void DepthwiseReader::emit_rows(int64_t rows) {
  const LineBand& b = *held_.b;
  const int64_t o0 = held_.done, oh = std::min(rows, b.p1 - b.p0 - o0);
  if (oh <= 0) return;
  const uint64_t buf = buf_;
  with_operands([&] {
    const int64_t row_bytes = p_.pitch * p_.C * es();
    if (o0 == 0) load_padding(b, buf);
    load_weights();
    const MatrixJob& j = dw_.job();
    dwconv(buf + static_cast<uint64_t>((b.at + o0 * j.sh) * row_bytes), (oh - 1) * j.sh + j.kh, oh, 0);
    // The rows into the band's output slot (the tile at image 0, its rows o0 on).
    dw_.set_output_sram(static_cast<int64_t>(out_[held_.side]));
    s_->epilogue(OutTile{0, o0, oh, 0, p_.OW, 0, p_.C}, 0);
  });
  held_.done = o0 + oh;
}

void DepthwiseReader::flush_held() {
  if (!held_.b) return;
  emit_rows(held_.b->p1 - held_.b->p0);
  if (pending_.b) project(pending_);
  pending_ = ProjectBand{held_.b, held_.img, held_.side};
  held_ = HeldBand{};
}

void DepthwiseReader::before_band(const LineBand& next, int64_t tiles) {
  if (!held_.b) return;
  // The buffer rows band `next` writes (the kept rows moved to the buffer's start, the conv's and padding
  // rows after them) against the held band's.
  const LineBand& b = *held_.b;
  const int64_t w0 = next.kept > 0 && next.from != next.at ? next.at : next.row(next.lo + next.kept),
                w1 = next.row(next.hi) + 1;
  if (!pieces_ || (w0 < b.at + b.hi - b.lo + 1 && b.at < w1)) {
    flush_held();
    return;
  }
  held_.pieces = std::max<int64_t>(1, tiles);
  step();  // the first piece before the first tile: the vector unit convolves while the array starts
}

void DepthwiseReader::step() {
  if (!held_.b || held_.pieces <= 0) return;
  const int64_t left = held_.b->p1 - held_.b->p0 - held_.done;
  emit_rows(ceil_div(left, held_.pieces));
  --held_.pieces;
}

void DepthwiseReader::read(const LineBand& b, int64_t img, uint64_t buf) {
  if (project_) {
    // Emitted in pieces between the next band's conv tiles (before_band, step), the rest by flush_held.
    flush_held();
    buf_ = buf;
    held_ = HeldBand{&b, img, 0, 0, side_};
    side_ ^= 1;
    return;
  }
  with_operands([&] {
    load_padding(b, buf);
    load_weights();
    const int64_t oh = b.p1 - b.p0;
    dwconv(buf + static_cast<uint64_t>(b.at * p_.pitch * p_.C * es()), b.hi - b.lo + 1, oh, side_);
    s_->epilogue(OutTile{img, b.p0, oh, 0, p_.OW, 0, p_.C}, side_);
    if (pool_) pool_band(oh);
  });
  side_ ^= 1;
}

void DepthwiseReader::project(const ProjectBand& pb) {
  as_project([&] {
    if (!project_w_loaded_) {
      const MatrixJob& j = project_->job();
      std::unique_ptr<MatrixStrategy> ps = project_->make_strategy();
      const uint64_t w = ps->weight_tile(0, 1, 0, j.C, 0, j.M);
      const uint64_t bytes = static_cast<uint64_t>(j.C * j.M * isa::dtype_bytes(ps->ops.w));
      c_.load(Buffer::kWeight, project_w_, Range{kDram, w, w + bytes}, w, ps->ops.w, {j.M, j.C, 1, 1},
              {j.M, j.C * j.M, 0});
      project_->set_resident_weights(static_cast<int64_t>(project_w_));
      project_w_loaded_ = true;
    }
    project_->generate_rows(pb.b->p0, pb.b->p1, pb.img, static_cast<int64_t>(out_[pb.side]), pb.b->pt);
  });
}

void DepthwiseReader::pool_band(int64_t oh) {
  const isa::Instruction& st = c_.program.instructions.back();
  if (st.opcode != isa::Opcode::kStore || st.get(isa::Field::kDtype) != static_cast<int64_t>(pool_->dtype) ||
      st.get(isa::Field::kSize0) * st.get(isa::Field::kSize1) * st.get(isa::Field::kSize2) *
              st.get(isa::Field::kSize3) !=
          oh * p_.OW * p_.C) {
    throw std::logic_error(
        "backend: a depthwise band's epilogue that does not end with the STORE of its rows");
  }
  // As the pool's integer bands (vector/pooling.cpp): the codes times unit weights, summed in int32.
  Context::VecArgs v;
  v.op = isa::VecOp::kDwConv, v.in = pool_->dtype, v.out = isa::DType::kInt32;
  v.src1_buf = static_cast<Buffer>(st.get(isa::Field::kBuf));
  v.src1 = static_cast<uint64_t>(st.get(isa::Field::kSramAddr));
  v.src2_buf = Buffer::kWeight, v.src2 = ones_;
  v.dst_buf = Buffer::kWeight, v.dst = first_band_ ? sums_ : band_sums_;
  v.d0 = p_.C, v.d1 = p_.OW, v.d2 = oh, v.win_h = oh, v.win_w = p_.OW, v.str_h = 1, v.str_w = 1;
  c_.vec(v);
  if (!first_band_) {
    Context::VecArgs a;
    a.op = isa::VecOp::kAdd, a.in = a.out = isa::DType::kInt32;
    a.src1_buf = a.src2_buf = a.dst_buf = Buffer::kWeight;
    a.src1 = sums_, a.src2 = band_sums_, a.dst = sums_, a.d0 = p_.C;
    c_.vec(a);
  }
  first_band_ = false;
}

void DepthwiseReader::end() {
  flush_held();
  if (pending_.b) project(pending_);
  pending_ = ProjectBand{};
  if (pool_ && !first_band_) {
    // The pool's output stage (bias -H*W*x.zero_point, the multiplier, y's zero point), then its codes.
    Context::VecArgs o;
    o.op = isa::VecOp::kOutput, o.in = isa::DType::kInt32, o.out = pool_->y_dtype,
    o.bcast = isa::Bcast::kScalar;
    o.src1_buf = Buffer::kWeight, o.src1 = sums_, o.src2_buf = Buffer::kWeight, o.src2 = stage_;
    o.dst_buf = Buffer::kWeight, o.dst = pooled_, o.d0 = p_.C;
    o.imm0 = f32_imm(-INFINITY), o.imm1 = f32_imm(INFINITY), o.imm2 = pool_->y_zero_point;
    c_.vec(o);
    c_.store(Buffer::kWeight, pooled_, pool_->y, pool_->y.begin, pool_->y_dtype, {p_.C, 1, 1, 1}, {0, 0, 0});
  }
}

void DepthwiseReader::taken() {
  if (pool_) se_pool_taken(c_, *pool_, p_.pool);
}
}  // namespace npusim::compiler::backend
