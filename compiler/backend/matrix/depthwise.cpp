// Depthwise convolutions on the vector unit and the choice against the array (see depthwise.h).
#include "compiler/backend/matrix/depthwise.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <tuple>
#include <utility>

#include "isa/ceil_div.h"
#include "isa/numerics.h"
#include "isa/timing/dma.h"
#include "isa/timing/units.h"

namespace npusim::compiler::backend {

using isa::Buffer;
using isa::DType;
using isa::Field;
using isa::Instruction;

namespace {

// Vector candidates simulated per layer (the closed form's best few), as MatrixMapper::choose does.
constexpr size_t kDepthwiseTimedCandidates = 2;

uint64_t u(int64_t v) { return static_cast<uint64_t>(v); }

Instruction dma_box(isa::Opcode op, DType t, std::array<int64_t, 3> sizes, std::array<int64_t, 2> strides) {
  Instruction i;
  i.opcode = op;
  i.set(Field::kDtype, static_cast<int64_t>(t)).set(Field::kSize0, sizes[0]).set(Field::kSize1, sizes[1]);
  i.set(Field::kSize2, sizes[2])
      .set(Field::kSize3, 1)
      .set(Field::kStride1, strides[0])
      .set(Field::kStride2, strides[1]);
  return i;
}

// Candidate extents of one tile dimension: the whole extent, then halves down to 1.
std::vector<int64_t> extents(int64_t n) {
  std::vector<int64_t> v;
  for (int64_t x = n; x >= 1; x = x == 1 ? 0 : ceil_div(x, 2)) {
    if (v.empty() || v.back() != x) v.push_back(x);
  }
  return v;
}

// The keys a mapping file may give a depthwise conv on the vector unit (tile_oh, tile_ow, tile_n), each
// within the layer; the array's keys name what they would tile and exit 2.
void check_vector_tiles(const LayerMapping& m, const MatrixJob& j) {
  auto fail = [&](std::string_view key, const std::string& what) {
    throw MappingError(fmt::format("{}: layer '{}': {}", m.at(key), m.name, what));
  };
  for (const auto& [key, v] : {std::pair{"group_block", m.group_block}, std::pair{"tile_c", m.tile_c},
                               std::pair{"tile_m", m.tile_m}, std::pair{"tile_k", m.tile_k}}) {
    if (v) {
      fail(key,
           fmt::format("{} applies to the array's mapping; on the vector unit (placement vector) a depthwise "
                       "conv's tile is tile_oh x tile_ow x tile_n",
                       key));
    }
  }
  if (m.loop_order) {
    fail("loop_order",
         "loop_order applies to the array's mapping; on the vector unit (placement vector) a "
         "depthwise conv walks its tiles channel chunk by channel chunk");
  }
  for (const auto& [key, v, extent, what] : {std::tuple{"tile_oh", m.tile_oh, j.OH, "output rows"},
                                             std::tuple{"tile_ow", m.tile_ow, j.OW, "output columns"},
                                             std::tuple{"tile_n", m.tile_n, j.C, "channels"}}) {
    if (!v) continue;
    if (*v < 1) fail(key, fmt::format("{}={} must be at least 1", key, *v));
    if (*v > extent) fail(key, fmt::format("{}={} is larger than the layer's {} {}", key, *v, extent, what));
  }
}

}  // namespace

// The weight dtype of a dwconv on `a` (the array's rule: int8 weights for uint8 codes).
DType depthwise_weight_dtype(DType a) { return isa::numerics::weight_dtype(a); }

Instruction dwconv_instruction(uint32_t layer, DType a, uint64_t src, uint64_t w, uint64_t dst, int64_t c,
                               int64_t in_w, int64_t in_h, const MatrixJob& j) {
  Instruction i;
  i.opcode = isa::Opcode::kVec;
  i.set(Field::kLayer, layer);
  i.set(Field::kVop, static_cast<int64_t>(isa::VecOp::kDwConv)).set(Field::kDtype, static_cast<int64_t>(a));
  i.set(Field::kDtypeOut, static_cast<int64_t>(isa::numerics::accumulator_dtype(a)));
  i.set(Field::kSrc1Buf, static_cast<int64_t>(Buffer::kInput))
      .set(Field::kSrc1Addr, static_cast<int64_t>(src));
  i.set(Field::kSrc2Buf, static_cast<int64_t>(Buffer::kWeight))
      .set(Field::kSrc2Addr, static_cast<int64_t>(w));
  i.set(Field::kDstBuf, static_cast<int64_t>(Buffer::kAccumulator))
      .set(Field::kDstAddr, static_cast<int64_t>(dst));
  i.set(Field::kD0, c).set(Field::kD1, in_w).set(Field::kD2, in_h);
  i.set(Field::kWinH, j.kh).set(Field::kWinW, j.kw).set(Field::kStrH, j.sh).set(Field::kStrW, j.sw);
  i.set(Field::kImm0, j.dh == 1 ? 0 : j.dh).set(Field::kImm1, j.dw == 1 ? 0 : j.dw);
  return i;
}

bool DepthwiseMapper::applies(const MatrixJob& j) {
  return !j.gemm && j.b_const && j.groups > 1 && j.groups == j.C && j.groups == j.M && j.cg == 1 &&
         j.mg == 1 && j.step_h == 1 && j.step_w == 1 && j.src_w == 0 && j.kh <= 255 && j.kw <= 255 &&
         j.sh <= 255 && j.sw <= 255 && j.dh <= 255 && j.dw <= 255 && j.C <= 65535 && j.conv_mappable();
}

bool DepthwiseMapper::fits(DepthwiseTiling& t) const {
  const int64_t ea = isa::dtype_bytes(s_.ops.a), ew = isa::dtype_bytes(depthwise_weight_dtype(s_.ops.a));
  const int64_t rows = j_.in_rows(t.toh), cols = j_.in_cols(t.tow);
  if (rows > 65535 || cols > 65535) return false;
  t.in_bytes =
      t.slide_rows > 0 ? round64(t.slide_rows * cols * t.tn * ea) : 2 * round64(rows * cols * t.tn * ea);
  t.w_bytes = 2 * round64(j_.kh * j_.kw * t.tn * ew);
  if (pool_) {
    // Whole output rows, band-aligned; the band means [chunk][band][channels] and the pooled vector.
    if (t.tow != j_.OW || t.toh % pool_->rows != 0) return false;
    t.w_bytes += round64(pool_->bands * j_.C * ea) + round64(j_.C * ea);
  }
  t.acc_bytes = s_.acc_bytes(t.toh * t.tow, t.tn);
  t.side_in_input = false;
  if (t.acc_bytes > c_.capacity(Buffer::kAccumulator) && c_.shared_capacity() == 0) {
    const int64_t side = s_.side_bytes(t.toh * t.tow, t.tn);
    if (side == 0 || t.acc_bytes - side > c_.capacity(Buffer::kAccumulator)) return false;
    t.acc_bytes -= side;
    t.in_bytes += side;
    t.side_in_input = true;
  }
  if (t.acc_bytes > c_.capacity(Buffer::kAccumulator)) return false;
  if (c_.shared_capacity() > 0) return t.in_bytes + t.w_bytes <= c_.shared_capacity();
  return t.in_bytes <= c_.capacity(Buffer::kInput) && t.w_bytes <= c_.capacity(Buffer::kWeight);
}

void DepthwiseMapper::estimate(DepthwiseTiling& t) const {
  // Per tile: the vector unit runs the dwconv and the epilogue's passes; the DMA engines load the input
  // tile and store the output tile (and read an output-sized operand when the epilogue has one). The
  // layer takes the busier of the two plus one tile of the other (the pipeline's fill and drain).
  const auto& cfg = c_.config;
  double vec = 0, dma = 0, bytes = 0, first_load = 0, last_vec = 0;
  const int64_t ea = isa::dtype_bytes(s_.ops.a), ey = isa::dtype_bytes(s_.ops.y);
  for (int64_t oh : {t.toh, j_.OH % t.toh}) {
    for (int64_t ow : {t.tow, j_.OW % t.tow}) {
      for (int64_t tn : {t.tn, j_.C % t.tn}) {
        if (oh == 0 || ow == 0 || tn == 0) continue;
        const int64_t count = (oh == t.toh ? j_.OH / t.toh : 1) * (ow == t.tow ? j_.OW / t.tow : 1) *
                              (tn == t.tn ? j_.C / t.tn : 1) * j_.images;
        const int64_t rows = j_.in_rows(oh), cols = j_.in_cols(ow);
        Instruction dw = dwconv_instruction(0, s_.ops.a, 0, 0, 0, tn, cols, rows, j_);
        Instruction add;
        add.opcode = isa::Opcode::kVec;
        add.set(Field::kVop, static_cast<int64_t>(isa::VecOp::kAdd)).set(Field::kD0, oh * ow * tn);
        add.set(Field::kD1, 1).set(Field::kD2, 1);
        // With the SE pool, one avg_pool pass over the tile more (counted as an add, as the epilogue's).
        const double v = static_cast<double>(isa::timing::vec_cycles(dw, cfg.vector)) +
                         (s_.epilogue_ops() + (pool_ ? 1 : 0)) *
                             static_cast<double>(isa::timing::vec_cycles(add, cfg.vector));
        // Sliding (slide_rows): a tile loads the rows the one before did not read.
        const int64_t loaded = t.slide_rows > 0 ? std::min(rows, oh * j_.sh) : rows;
        double d = isa::timing::estimate_dma_cycles(
            dma_box(isa::Opcode::kLoad, s_.ops.a, {tn, cols, loaded}, {j_.C, j_.W * j_.C}), cfg);
        double b = static_cast<double>(loaded * cols * tn * ea);
        if (j_.y_sram < 0 || j_.y_store) {  // stored (not only left on chip: backend/fusion/residency.h)
          d += isa::timing::estimate_dma_cycles(
              dma_box(isa::Opcode::kStore, s_.ops.y, {tn, ow, oh}, {j_.out_pitch(), j_.out_row()}), cfg);
          b += static_cast<double>(oh * ow * tn * ey);
        }
        if (s_.ops.tile_read) {
          d += isa::timing::estimate_dma_cycles(
              dma_box(isa::Opcode::kLoad, s_.ops.r, {tn, ow, oh}, {j_.M, j_.OW * j_.M}), cfg);
          b += static_cast<double>(oh * ow * tn * isa::dtype_bytes(s_.ops.r));
        }
        vec += static_cast<double>(count) * v;
        dma += static_cast<double>(count) * d;
        bytes += static_cast<double>(count) * b;
        if (first_load == 0) first_load = d, last_vec = v;
      }
    }
  }
  // The epilogue's per-channel vectors: once per side while a channel chunk lasts (EpilogueParams).
  const double p_loads = static_cast<double>(EpilogueParams::loads(
      false, 1, ceil_div(j_.C, t.tn), j_.images * ceil_div(j_.OH, t.toh) * ceil_div(j_.OW, t.tow)));
  for (int64_t e : s_.param_loads(t.tn)) {
    dma += p_loads * isa::timing::estimate_dma_cycles(
                         dma_box(isa::Opcode::kLoad, DType::kInt32, {e, 1, 1}, {e, e}), cfg);
    bytes += p_loads * static_cast<double>(e * 4);
  }
  dma /= static_cast<double>(std::max<int64_t>(1, cfg.dma.engines));
  if (c_.dram_bytes_per_cycle > 0) dma = std::max(dma, bytes / c_.dram_bytes_per_cycle);
  t.compute = vec;
  t.dma = dma;
  t.est = std::max(vec, dma) + std::min(first_load, last_vec);
}

std::vector<DepthwiseTiling> DepthwiseMapper::search(size_t keep, const LayerMapping* imposed) const {
  std::vector<DepthwiseTiling> all;
  // Channel chunks that are whole multiples of the lanes where possible (every pass of the vector unit
  // full), or the whole tensor.
  std::vector<int64_t> tns = {j_.C};
  const int64_t lanes = c_.config.vector.lanes;
  for (int64_t tn : extents(j_.C)) {
    if (tn != j_.C && tn % lanes == 0) tns.push_back(tn);
  }
  for (int64_t m = ceil_div(j_.C, 2); m >= lanes && m > 1; m = ceil_div(m, 2)) {
    const int64_t tn = ceil_div(m, lanes) * lanes;
    if (std::find(tns.begin(), tns.end(), tn) == tns.end() && tn < j_.C) tns.push_back(tn);
  }
  if (tns.back() > 1) tns.push_back(std::min<int64_t>(j_.C, lanes));
  std::vector<int64_t> tows = extents(j_.OW), tohs = extents(j_.OH);
  if (pool_) {  // whole rows, every multiple of the pool's band
    tows = {j_.OW};
    tohs.clear();
    for (int64_t h = j_.OH / pool_->rows * pool_->rows; h >= pool_->rows; h -= pool_->rows) tohs.push_back(h);
  }
  if (imposed) {  // a mapping file's values: the only candidates of their dimensions
    if (imposed->tile_n) tns = {*imposed->tile_n};
    if (imposed->tile_ow) tows = {*imposed->tile_ow};
    if (imposed->tile_oh) tohs = {*imposed->tile_oh};
  }
  for (int64_t tn : tns) {
    for (int64_t tow : tows) {
      for (int64_t toh : tohs) {
        DepthwiseTiling t;
        t.toh = toh, t.tow = tow, t.tn = tn;
        if (!j_.y_sram_tile(j_.groups, toh, tow, tn) || !fits(t)) continue;
        estimate(t);
        all.push_back(t);
        // The same tiles over a sliding input buffer (DepthwiseTiling::slide_rows) where tiles of whole rows
        // share input rows: the whole padded image where it fits (each row loaded once), else room for the
        // tile's rows and three tiles' steps more.
        const int64_t step = toh * j_.sh;
        if (tow == j_.OW && toh < j_.OH && j_.in_rows(toh) > step) {
          DepthwiseTiling sl = t;
          sl.slide_rows = j_.in_rows(j_.OH);
          if (!fits(sl)) sl.slide_rows = std::min(j_.in_rows(j_.OH), j_.in_rows(toh) + 3 * step);
          if (fits(sl)) {
            estimate(sl);
            all.push_back(sl);
          }
        }
      }
    }
  }
  std::stable_sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.est < b.est; });
  // The closed form's best few, and the best of every other channel chunk: the chunk decides how the
  // input rows lie in DRAM (a chunk of all channels loads whole pixel rows; a part of them loads short
  // strided rows that waste bursts), which the closed form ranks less well than the simulation.
  // A sliding tiling (slide_rows) is kept beside those, not instead of them: the closed form, counting the
  // bytes it saves, ranks it above the tiles it slides; the simulation says whether it pays. Kept: the
  // sliding variant of each kept tiling and the best sliding one (with one candidate, the best of all).
  std::vector<DepthwiseTiling> kept;
  if (keep <= 1) {
    if (!all.empty()) kept.push_back(all.front());
    return kept;
  }
  for (const DepthwiseTiling& t : all) {
    if (t.slide_rows > 0) continue;
    const bool new_chunk =
        std::none_of(kept.begin(), kept.end(), [&](const auto& k) { return k.tn == t.tn; });
    if (kept.size() < keep || new_chunk) kept.push_back(t);
  }
  const size_t plain = kept.size();
  for (const DepthwiseTiling& t : all) {
    if (t.slide_rows == 0) continue;
    const bool slides_kept =
        std::any_of(kept.begin(), kept.begin() + static_cast<std::ptrdiff_t>(plain),
                    [&](const auto& k) { return k.toh == t.toh && k.tow == t.tow && k.tn == t.tn; });
    if (slides_kept || kept.size() == plain) kept.push_back(t);
  }
  return kept;
}

void DepthwiseMapper::generate(const DepthwiseTiling& t) {
  const DType a = s_.ops.a, wt = depthwise_weight_dtype(a);
  const int64_t ea = isa::dtype_bytes(a), ew = isa::dtype_bytes(wt);
  SramAlloc in = c_.slots(Buffer::kInput, t.in_bytes), wb = c_.slots(Buffer::kWeight, t.w_bytes),
            acc = c_.slots(Buffer::kAccumulator, t.acc_bytes);
  uint64_t a_slot[2], w_slot[2];
  const bool slide = t.slide_rows > 0;
  if (slide) {
    a_slot[0] = a_slot[1] = in.take(u(t.slide_rows * j_.in_cols(t.tow) * t.tn * ea));
  } else {
    for (auto& s : a_slot) s = in.take(u(j_.in_rows(t.toh) * j_.in_cols(t.tow) * t.tn * ea));
  }
  s_.allocate(acc, t.side_in_input ? in : acc, t.toh * t.tow, t.tn);
  if (c_.shared_capacity() > 0) wb.next = in.next;  // weights above the inputs in the one scratchpad
  for (auto& s : w_slot) s = wb.take(u(j_.kh * j_.kw * t.tn * ew));
  const uint64_t means = pool_ ? wb.take(u(pool_->bands * j_.C * ea)) : 0;
  const uint64_t pooled = pool_ ? wb.take(u(j_.C * ea)) : 0;
  const uint64_t w_addr = s_.depthwise_weights();
  const Range w_range{kDram, w_addr, w_addr + u(j_.kh * j_.kw * j_.C * ew)};
  int a_next = 0, w_next = 0, c_next = 0;
  // Channel chunks outer: a chunk's weights stay in their slot across its spatial tiles.
  for (int64_t n0 = 0; n0 < j_.C; n0 += t.tn) {
    const int64_t tn = std::min(t.tn, j_.C - n0);
    const uint64_t w_cur = w_slot[w_next];
    w_next ^= 1;
    c_.load(Buffer::kWeight, w_cur, w_range, w_addr + u(n0 * ew), wt, {tn, j_.kh * j_.kw, 1, 1},
            {j_.C, 0, 0});
    for (int64_t img = 0; img < j_.images; ++img) {
      // Sliding: the buffer row of the previous tile's first input row, and that tile's input rows.
      int64_t at = 0, prev_iy0 = 0, prev_iy1 = -1;
      bool first_tile = true;
      for (int64_t oy0 = 0; oy0 < j_.OH; oy0 += t.toh) {
        for (int64_t ox0 = 0; ox0 < j_.OW; ox0 += t.tow) {
          const int64_t oh = std::min(t.toh, j_.OH - oy0), ow = std::min(t.tow, j_.OW - ox0);
          // Input tile with its halo (as MatrixMapper::load_input).
          const int64_t rows = j_.in_rows(oh), cols = j_.in_cols(ow);
          const int64_t iy0 = oy0 * j_.sh - j_.pt, iy1 = iy0 + rows - 1;
          const int64_t ix0 = ox0 * j_.sw - j_.pl, ix1 = ix0 + cols - 1;
          const int64_t pleft = std::max<int64_t>(0, -ix0), pright = std::max<int64_t>(0, ix1 - (j_.W - 1));
          const int64_t rx0 = std::max<int64_t>(0, ix0);
          // The input rows [lo, iy1] this tile loads: all of them, or sliding those the previous tile did
          // not read (at least one real row: a LOAD's rows are the input's, its pads around them).
          int64_t lo = iy0;
          uint64_t a_cur = 0;
          if (slide) {
            const int64_t row_bytes = cols * tn * ea;
            at = first_tile ? 0 : at + iy0 - prev_iy0;
            if (!first_tile && prev_iy1 >= iy0 && at + rows <= t.slide_rows)
              lo = std::max(iy0, std::min(prev_iy1 + 1, j_.H - 1));
            else
              at = 0;
            a_cur = a_slot[0] + u(at * row_bytes);
            prev_iy0 = iy0, prev_iy1 = iy1, first_tile = false;
          } else {
            a_cur = a_slot[a_next];
            a_next ^= 1;
          }
          const int64_t ptop = std::max<int64_t>(0, -lo), pbot = std::max<int64_t>(0, iy1 - (j_.H - 1));
          const int64_t ry0 = std::max<int64_t>(0, lo);
          c_.load(Buffer::kInput, a_cur + u((lo - iy0) * cols * tn * ea), j_.a_range,
                  j_.a_base(img) + u(((ry0 * j_.W + rx0) * j_.C + n0) * ea), a,
                  {tn, cols - pleft - pright, iy1 - lo + 1 - ptop - pbot, 1}, {j_.C, j_.W * j_.C, 0},
                  {ptop, pbot, pleft, pright}, s_.ops.pad);
          const int side = c_next;
          c_next ^= 1;
          const uint64_t c_slot = s_.acc_slot(side);
          const Instruction i = dwconv_instruction(c_.layer, a, a_cur, w_cur, c_slot, tn, cols, rows, j_);
          c_.em.emit(
              i,
              {Range{static_cast<int>(Buffer::kInput), a_cur, a_cur + u(rows * cols * tn * ea)},
               Range{static_cast<int>(Buffer::kWeight), w_cur, w_cur + u(j_.kh * j_.kw * tn * ew)}},
              {Range{static_cast<int>(Buffer::kAccumulator), c_slot,
                     c_slot + u(oh * ow * tn * isa::dtype_bytes(isa::numerics::accumulator_dtype(a)))}});
          s_.epilogue(OutTile{img, oy0, oh, ox0, ow, n0, tn}, side);
          if (pool_) pool_tile(OutTile{img, oy0, oh, ox0, ow, n0, tn}, means + u(n0 * pool_->bands * ea));
        }
      }
    }
    if (pool_) {
      // The chunk's band means pooled once more, as the pool's last avg_pool does (vector/pooling.cpp).
      Context::VecArgs v;
      v.op = isa::VecOp::kAvgPool, v.in = v.out = a;
      v.src1_buf = Buffer::kWeight, v.src1 = means + u(n0 * pool_->bands * ea);
      v.dst_buf = Buffer::kWeight, v.dst = pooled + u(n0 * ea);
      v.d0 = tn, v.d1 = 1, v.d2 = pool_->bands, v.win_h = pool_->bands, v.win_w = 1, v.str_h = 1, v.str_w = 1;
      c_.vec(v);
    }
  }
  if (pool_) {
    c_.store(Buffer::kWeight, pooled, pool_->y, pool_->y.begin, a, {j_.C, 1, 1, 1}, {0, 0, 0});
  }
  c_.plan->sram_input_bytes = static_cast<int64_t>(in.used());
  c_.plan->sram_weight_bytes = static_cast<int64_t>(wb.next - (c_.shared_capacity() > 0 ? in.next : wb.base));
  c_.plan->sram_acc_bytes = static_cast<int64_t>(acc.used());
}

void DepthwiseMapper::pool_tile(const OutTile& t, uint64_t means) const {
  const DType a = s_.ops.a;
  const int64_t ea = isa::dtype_bytes(a);
  const Instruction& st = c_.program.instructions.back();
  if (st.opcode != isa::Opcode::kStore || st.get(Field::kDtype) != static_cast<int64_t>(a) ||
      st.get(Field::kSize0) * st.get(Field::kSize1) * st.get(Field::kSize2) * st.get(Field::kSize3) !=
          t.tn * t.ow * t.oh) {
    throw std::logic_error("backend: a depthwise epilogue that does not end with the STORE of its tile");
  }
  const auto buf = static_cast<Buffer>(st.get(Field::kBuf));
  const auto at = static_cast<uint64_t>(st.get(Field::kSramAddr));
  // The tile's rows [oy0, oy0 + oh) hold bands oy0 / rows ...: each pooled to one value per channel, as
  // the pool's own bands are (d0 its channels, d1 x d2 its pixels).
  for (int64_t y = 0; y < t.oh; y += pool_->rows) {
    Context::VecArgs v;
    v.op = isa::VecOp::kAvgPool, v.in = v.out = a;
    v.src1_buf = buf, v.src1 = at + u(y * t.ow * t.tn * ea);
    v.dst_buf = Buffer::kWeight, v.dst = means + u((t.oy0 + y) / pool_->rows * t.tn * ea);
    v.d0 = t.tn, v.d1 = t.ow, v.d2 = pool_->rows, v.win_h = pool_->rows, v.win_w = t.ow, v.str_h = 1,
    v.str_w = 1;
    c_.vec(v);
  }
}

bool lower_depthwise_on_vector(Context& c, const MatrixJob& j, MatrixStrategy& s, MatrixMapper& mm,
                               const Tiling* array_tiling) {
  // A SCALE-Sim topology (Graph::nhwc_io) is checked against SCALE-Sim, which runs every layer, depthwise
  // ("DP") rows included, on the array: its convs stay there.
  if (!DepthwiseMapper::applies(j) || c.g.nhwc_io) return false;
  const LayerMapping* imposed = c.options.mapping ? c.options.mapping->find(c.plan->name) : nullptr;
  const bool want_vector = imposed && imposed->placement == Placement::kNpuVector;
  // No array tiling (none honours the job's constraints, MatrixJob::y_sram): the vector unit or nothing.
  const bool only_vector = want_vector || !array_tiling;
  const Tiling array = array_tiling ? *array_tiling : Tiling{};
  if (imposed && !want_vector && (imposed->placement || imposed->has_tiling())) return false;
  const LayerMapping* tiles = want_vector && imposed->has_tiling() ? imposed : nullptr;
  if (tiles) check_vector_tiles(*tiles, j);
  DepthwiseMapper dm(c, j, s);
  // Imposed tiles: the candidates the search keeps without them (those the run that wrote the file
  // simulated), narrowed to the file's values, so the choices the file does not record (a sliding input
  // buffer, the SE pool in the epilogue) come out as they did there; none of those left, the file's values
  // alone are searched.
  const size_t keep = c.can_time() ? kDepthwiseTimedCandidates : 1;
  const auto searched = [&](const DepthwiseMapper& m) {
    if (!tiles || keep <= 1) return m.search(keep, tiles);
    std::vector<DepthwiseTiling> v = m.search(keep, nullptr);
    v.erase(std::remove_if(v.begin(), v.end(),
                           [&](const DepthwiseTiling& t) {
                             return (tiles->tile_oh && t.toh != *tiles->tile_oh) ||
                                    (tiles->tile_ow && t.tow != *tiles->tile_ow) ||
                                    (tiles->tile_n && t.tn != *tiles->tile_n);
                           }),
            v.end());
    return v.empty() ? m.search(keep, tiles) : v;
  };
  std::vector<DepthwiseTiling> best = searched(dm);
  // An SE pool the tiles may run in their epilogue (fusion/se_pool_fusion.h): its tilings are candidates
  // too, after the others, each credited with the pool's own time it saves (cycles objective only).
  const std::optional<SePoolBands> pool =
      c.options.objective == MappingObjective::kCycles ? se_pool_for_depthwise(c, j, s.ops.y) : std::nullopt;
  DepthwiseMapper pm(c, j, s, pool ? &*pool : nullptr);
  const size_t plain = best.size();
  if (pool) {
    for (const DepthwiseTiling& t : searched(pm)) best.push_back(t);
  }
  const double pool_saves = pool ? pool->saved_cycles : 0.0;
  auto pooled = [&](size_t i) { return i >= plain; };
  if (best.empty()) {
    if (tiles) {
      throw MappingError(fmt::format(
          "{}: layer '{}': placement vector: no tile with tile_oh={} tile_ow={} "
          "tile_n={} (left out: any) fits the scratchpads (input and weight tiles "
          "in ping-pong pairs, the sums in the accumulator)",
          imposed->at("placement"), c.plan->name, tiles->tile_oh ? std::to_string(*tiles->tile_oh) : "-",
          tiles->tile_ow ? std::to_string(*tiles->tile_ow) : "-",
          tiles->tile_n ? std::to_string(*tiles->tile_n) : "-"));
    }
    if (want_vector) {
      throw MappingError(
          fmt::format("{}: layer '{}': placement vector: not even one output pixel of {} fits the "
                      "scratchpads",
                      imposed->at("placement"), c.plan->name, j.what));
    }
    return false;
  }
  // The decision depends on everything the candidates' code does: the job, the operand types, the
  // epilogue and the array's tiling (MatrixMapper::choose's key, extended).
  const std::string key =
      fmt::format("depthwise {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {}|{} {} {} {} {}|{}",
                  j.images, j.H, j.W, j.C, j.OH, j.out_pitch(), j.OW, j.kh, j.kw, j.sh, j.sw, j.dh, j.dw,
                  j.pt, j.pl, static_cast<int>(s.ops.a) + 1000 * (j.y_sram >= 0), static_cast<int>(s.ops.y),
                  static_cast<int>(s.ops.r), s.ops.tile_read, s.epilogue_ops(), array.gb, array.toh,
                  array.tow, array.tn, array.spatial_outer, only_vector) +
      (pool ? fmt::format("|pool {} {} {}", pool->rows, pool->bands, pool_saves) : std::string()) +
      (tiles ? fmt::format("|imposed {} {} {}", tiles->tile_oh.value_or(0), tiles->tile_ow.value_or(0),
                           tiles->tile_n.value_or(0))
             : std::string());
  size_t win = 0;
  bool vector = only_vector, cached = false;
  int64_t array_cycles = array.simulated;
  const int64_t first = c.em.size();
  if (auto it = c.decided.find(key); it != c.decided.end()) {
    vector = it->second > 0;
    win = vector ? it->second - 1 : 0;
    cached = true;
    c.timed = {};
  } else if (c.can_time()) {
    Context::Timed array_timed = c.timed;
    // The objective's figures (Context::objective_score; the cycles under --objective cycles).
    double array_score = static_cast<double>(array_cycles), win_score = 0;
    const bool rescore = c.options.objective != MappingObjective::kCycles;
    if (!only_vector && (array_cycles < 0 || rescore)) {
      const Context::Trial trial = c.begin_trial();
      mm.generate(array);
      std::vector<int64_t> cycles = c.time_code(first);
      array_cycles = cycles.empty() ? 0 : cycles.back();
      array_score = c.objective_score(first, array_cycles);
      array_timed = {first, c.em.size(), std::move(cycles)};
      c.end_trial(trial);
    }
    Context::Timed vector_timed;
    for (size_t i = 0; i < best.size(); ++i) {
      const Context::Trial trial = c.begin_trial();
      (pooled(i) ? pm : dm).generate(best[i]);
      std::vector<int64_t> cycles = c.time_code(first);
      best[i].simulated = cycles.empty() ? 0 : cycles.back();
      const double score = c.objective_score(first, best[i].simulated) - (pooled(i) ? pool_saves : 0.0);
      const int64_t last = c.em.size();
      c.end_trial(trial);
      if (i == 0 || score < win_score) {
        win = i;
        win_score = score;
        vector_timed = {first, last, std::move(cycles)};
      }
    }
    if (!only_vector) vector = win_score < array_score;
    c.timed = vector ? vector_timed : array_timed;
    c.decided.emplace(key, vector ? win + 1 : 0);
  } else {
    if (pool && plain < best.size() && (plain == 0 || best[plain].est - pool_saves < best.front().est))
      win = plain;
    if (!only_vector) vector = best[win].est - (pooled(win) ? pool_saves : 0.0) < array.est;
    c.decided.emplace(key, vector ? win + 1 : 0);
  }
  if (!vector) return false;
  const DepthwiseTiling& t = best[win];
  LayerPlan& p = *c.plan;
  p.placement = Placement::kNpuVector;
  const bool pools = pooled(win);
  const std::string against =
      want_vector     ? "placed on the vector unit by the mapping file"
      : !array_tiling ? "the array has no tiling that leaves the output on chip"
      : array_cycles >= 0 && t.simulated >= 0
          ? fmt::format("{} cycles simulated against {} on the array as block-diagonal CONVs of {} groups",
                        t.simulated, array_cycles, array.gb)
          : fmt::format(
                "{:.0f} cycles estimated against {:.0f} on the array as block-diagonal CONVs of {} groups{}",
                t.est, array.est, array.gb, cached ? " (the choice made for an identical layer before)" : "");
  p.mapping = fmt::format(
      "{}VEC dwconv {}x{} stride {}x{} dilation {}x{}, {} channels, {}x{}x{} output tiles (rows x "
      "cols x channels), on the vector unit: {}",
      s.ops.a == DType::kUint8 || s.ops.a == DType::kInt8 ? "int8 " : "", j.kh, j.kw, j.sh, j.sw, j.dh, j.dw,
      j.C, t.toh, t.tow, t.tn, against);
  if (pools) {
    p.mapping += fmt::format(
        "; the SE pool '{}' in its epilogue: each tile's {}-row bands pooled where the tile lies before its "
        "STORE (the pool's read of {} bytes saved, {:.0f} cycles at DRAM rate, credited in the choice)",
        c.g.nodes[pool->pool].name, pool->rows, pool->x_bytes, pool_saves);
  }
  p.tile_oh = t.toh;
  p.tile_ow = t.tow;
  p.tile_m = t.toh * t.tow;
  p.tile_k = j.kh * j.kw;
  p.tile_n = t.tn;
  p.group_block = 1;
  p.loop_order = "channel-outer (weight tile resident)";
  p.model_cycles = static_cast<int64_t>(t.est);
  p.est_cycles = t.simulated >= 0 ? t.simulated : p.model_cycles;
  p.est_compute_cycles = static_cast<int64_t>(t.compute);
  p.est_dma_cycles = static_cast<int64_t>(t.dma);
  p.macs = j.images * j.OH * j.OW * j.M * j.kh * j.kw;
  p.chosen = LayerMapping{};
  p.chosen.placement = Placement::kNpuVector;
  p.chosen.tile_oh = t.toh;
  p.chosen.tile_ow = t.tow;
  p.chosen.tile_n = t.tn;
  const int64_t before = c.em.size();
  (pools ? pm : dm).generate(t);
  if (pools) se_pool_taken(c, *pool, c.layer);
  p.instructions = c.em.size() - before;
  return true;
}

}  // namespace npusim::compiler::backend
