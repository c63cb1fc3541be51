// The shared tiling search and tile walk of matrix nodes (see matrix_walk.h).
#include "compiler/backend/matrix/matrix_walk.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>

#include "compiler/backend/fusion/layer_fusion.h"
#include "compiler/backend/fusion/post_affine.h"
#include "compiler/backend/fusion/pre_affine.h"
#include "compiler/backend/fusion/pre_norm.h"
#include "compiler/backend/mapping/imposed.h"
#include "compiler/backend/mapping/mapping.h"
#include "compiler/backend/matrix/gemmini_policy.h"
#include "compiler/passes/lowered.h"
#include "isa/ceil_div.h"
#include "isa/numerics.h"
#include "isa/timing/dma.h"
#include "isa/timing/systolic.h"
#include "isa/timing/units.h"

namespace npusim::compiler::backend {

std::optional<MatmulBatches> matmul_batches(const Shape& a, const Shape& b, const Shape& y) {
  // Batch dims of the operands (a rank-1 operand has none) and of the output.
  const Shape a_batch(a.begin(), a.end() - std::min<size_t>(a.size(), 2));
  const Shape b_batch(b.begin(), b.end() - std::min<size_t>(b.size(), 2));
  const Shape yb(y.begin(), y.end() - (y.size() >= 2 && a.size() >= 2 && b.size() >= 2 ? 2 : 1));
  if (a_batch.size() > yb.size() || b_batch.size() > yb.size()) return std::nullopt;
  MatmulBatches m;
  m.images = num_elements(yb);
  auto offsets = [&](const Shape& batch) {
    std::vector<int64_t> off(static_cast<size_t>(m.images));
    const size_t r = yb.size();
    std::vector<int64_t> coord(r);
    for (int64_t idx = 0; idx < m.images; ++idx) {
      int64_t rem = idx, o = 0, stride = 1;
      for (size_t d = r; d-- > 0;) {
        coord[d] = rem % yb[d];
        rem /= yb[d];
      }
      for (size_t d = batch.size(); d-- > 0;) {
        const int64_t cd = coord[r - batch.size() + d];
        o += (batch[d] == 1 ? 0 : cd) * stride;
        stride *= batch[d];
      }
      off[static_cast<size_t>(idx)] = o;
    }
    return off;
  };
  m.a_off = offsets(a_batch);
  m.b_off = offsets(b_batch);
  return m;
}

std::optional<MatrixRows> matrix_rows(const DramTensor& t) {
  // Split batch dims (strided_views.h's levels): the same matrices, row-major over the levels.
  if (!t.view_split.empty()) {
    if (t.view_split.rbegin()->first + 2 >= t.shape.size()) return std::nullopt;
    return matrix_rows(t.expanded());
  }
  const size_t r = t.shape.size();
  for (size_t k = 0; k < t.layout.size(); ++k)
    if (t.layout[k] != static_cast<int>(k)) return std::nullopt;
  if (r < 2) {
    MatrixRows m;
    m.start = {0};
    m.pitch = r == 1 ? t.shape[0] : 1;
    return m;
  }
  const std::vector<int64_t> st = t.strides();
  if (st[r - 1] != 1 && t.shape[r - 1] != 1) return std::nullopt;
  MatrixRows m;
  m.pitch = t.shape[r - 2] == 1 && !t.strided() ? t.shape[r - 1] : st[r - 2];
  for (size_t d = 0; d + 2 < r; ++d)
    if (t.shape[d] != 1 && st[d] != st[d + 1] * t.shape[d + 1]) m.uniform = false;
  const Shape batch(t.shape.begin(), t.shape.end() - 2);
  const int64_t count = num_elements(batch);
  m.start.resize(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    int64_t rem = i, at = 0;
    for (size_t d = batch.size(); d-- > 0;) {
      at += rem % batch[d] * st[d];
      rem /= batch[d];
    }
    m.start[static_cast<size_t>(i)] = at;
  }
  return m;
}

using isa::Buffer;
using isa::DType;
using isa::VecOp;

namespace {

// Candidates the search simulates when it can time code: enough to correct the closed form's ranking
// where it is wrong, few enough to keep compile time within a simulation of the model.
constexpr size_t kTimedCandidates = 3;
// ... among those whose closed-form estimate is within this factor of the best one's.
constexpr double kTimedRange = 1.25;
// One-sided tilings (Tiling::one_side) simulated beside those, and how much faster than a two-sided one
// such a tiling must simulate to be taken: a GEMM of 1024 x 1024 x 1024 on edge, int8, simulated 1 %
// faster one-sided in its slice and ran 7 % slower in the whole program (2.02 M -> 2.16 M cycles).
constexpr size_t kOneSided = 3;
constexpr double kOneSidedMargin = 0.05;
// Two-sided tilings whose closed forms lie within this factor of the best one's are a tie the closed form
// cannot break (a DMA-bound estimate is about the same for every tile size): the one of them with the
// fewest array instructions is simulated too, since each instruction that cannot chain behind the one before
// pays its own fill and drain.
constexpr double kTieRange = 1.02;

// Tile sizes worth trying for a dimension: the whole extent, its halvings, and powers-of-two multiples of
// the array granule (full folds); when there are too many, an evenly spread subset that keeps the
// largest and the smallest (1, which always fits).
std::vector<int64_t> candidates(int64_t extent, int64_t granule, size_t max_count, bool even_splits) {
  std::set<int64_t> s;
  for (int64_t d = 1; d <= extent; d *= 2) s.insert(ceil_div(extent, d));
  for (int64_t g = std::max<int64_t>(1, granule); g < extent; g *= 2) s.insert(g);
  s.insert(1);
  std::vector<int64_t> v(s.rbegin(), s.rend());  // largest first
  if (v.size() > max_count) {
    std::vector<int64_t> k;
    for (size_t i = 0; i < max_count; ++i) {
      const size_t at = i * (v.size() - 1) / (max_count - 1);
      if (k.empty() || k.back() != v[at]) k.push_back(v[at]);
    }
    v = k;
  }
  // With `even_splits` (the output rows, which a GEMM's M takes), the splits into 2, 3 and 4 tiles
  // always: a tile just below the extent's third (64 of ViT's 197 tokens) leaves a remainder tile of a
  // few rows that pays a whole pass over the other operand.
  for (int64_t d = 2; d <= 4 && even_splits; ++d) {
    const int64_t e = ceil_div(extent, d);
    if (e > 1 && std::find(v.begin(), v.end(), e) == v.end()) v.push_back(e);
  }
  std::sort(v.rbegin(), v.rend());
  return v;
}

// (size, count) of the full and remainder chunks of `extent` split by `tile`.
std::vector<std::pair<int64_t, int64_t>> chunks(int64_t extent, int64_t tile) {
  std::vector<std::pair<int64_t, int64_t>> r;
  if (extent / tile > 0) r.push_back({tile, extent / tile});
  if (extent % tile) r.push_back({extent % tile, 1});
  return r;
}

}  // namespace

MatrixMapper::Reuse MatrixMapper::reuse(const Tiling& t) const {
  const int64_t cin_b = t.gb * j_.cg, cout_b = t.gb * j_.mg;
  const int64_t nk = ceil_div(cin_b, t.tc), nn = ceil_div(cout_b, t.tn), blocks = j_.groups / t.gb;
  const int64_t ns = spatial_tiles(t);
  Reuse r;
  // Spatial-outer walks every output-channel tile of a spatial tile in turn: its input (all of it, or
  // its one K chunk) stays. Channel-outer walks the spatial tiles for each output-channel tile: a
  // single spatial tile of one K chunk stays.
  r.a = (t.spatial_outer && (nk == 1 || t.input_resident)) || (ns == 1 && nk == 1);
  // The mirror image for the weights (a runtime B is still loaded once per image: the walk's key has it).
  r.b = nk == 1 && (!t.spatial_outer || nn == 1);
  r.a_once = blocks == 1 && ns == 1 && (nk == 1 || t.input_resident);
  r.b_once = blocks == 1 && nk == 1 && nn == 1 && (j_.b_const || j_.images == 1);
  return r;
}

void MatrixMapper::slot_bytes(Tiling& t) const {
  const int64_t ea = isa::dtype_bytes(s_.ops.a), ew = isa::dtype_bytes(s_.ops.w);
  const Reuse r = reuse(t);
  // groups_inner: an input tile of every group (one slot when it is the only spatial tile), every block's
  // weight tile, the sums of every output channel.
  const int64_t channels = t.groups_inner ? j_.groups * j_.cg : t.input_resident ? t.gb * j_.cg : t.tc;
  const bool a_once = t.groups_inner ? spatial_tiles(t) == 1 : r.a_once;
  const int64_t acc_channels = t.groups_inner ? j_.groups * j_.mg : t.tn;
  const int64_t in_slot = round64((tile_in_rows(t) * j_.in_cols(t.tow) + position_slack()) * channels * ea);
  t.in_bytes = j_.a_sram >= 0 ? 0 : (a_once ? 1 : 2) * in_slot;
  {
    const int64_t cin_b = t.gb * j_.cg, cout_b = t.gb * j_.mg;
    const int64_t nk = ceil_div(cin_b, t.tc), nn = ceil_div(cout_b, t.tn);
    t.prefetch_input = !t.no_prefetch && carries_pre_affine(c_) && j_.a_sram < 0 && !a_once &&
                       !t.groups_inner && !t.input_resident && !t.one_side && t.ti == 1 &&
                       t.gb == j_.groups && nk == 1 && (t.spatial_outer || nn == 1) &&
                       t.in_bytes + in_slot <= c_.capacity(Buffer::kInput);
    if (t.prefetch_input) t.in_bytes += in_slot;
  }
  const int64_t w_tile = round64(j_.kh * j_.kw * t.tc * t.tn * ew);
  int64_t w_all = 0;  // groups_inner: every block's tile (the last block may hold fewer groups)
  for (int64_t g0 = 0; t.groups_inner && g0 < j_.groups; g0 += t.gb) {
    const int64_t g = std::min(t.gb, j_.groups - g0);
    w_all += round64(j_.kh * j_.kw * g * j_.cg * g * j_.mg * ew);
  }
  t.w_bytes = j_.b_sram >= 0 ? 0 : t.groups_inner ? w_all : (r.b_once ? 1 : 2) * w_tile;
  t.acc_bytes = s_.acc_bytes(tile_pixels(t), acc_channels, t.sides());
  const int64_t side = s_.side_bytes(tile_pixels(t), acc_channels, t.sides());
  // An integer job's slots (int32 residual tiles) go in the accumulator where that scratchpad moves more
  // bytes a cycle and holds them with the sums: the epilogue's passes over them then contend with the
  // array's reads of the input for nothing. A float job's stay in the input scratchpad: measured there,
  // a SiLU's temporaries in the accumulator doubled EfficientNet-B0's small SE convs on edge (482 -> 1 003
  // cycles) and cost MobileNetV3-Small fp16 0.7 %.
  const auto bandwidth = [&](Buffer b) {
    const isa::ScratchpadConfig& sp = c_.config.sram.buffer(b);
    return sp.banks * sp.bank_width_bytes * sp.ports;
  };
  const bool acc_side = isa::numerics::is_integer(s_.ops.a) &&
                        bandwidth(Buffer::kAccumulator) > bandwidth(Buffer::kInput) &&
                        t.acc_bytes <= c_.capacity(Buffer::kAccumulator);
  t.side_in_input =
      side > 0 && !acc_side && c_.shared_capacity() == 0 && t.in_bytes + side <= c_.capacity(Buffer::kInput);
  if (t.side_in_input) t.in_bytes += side, t.acc_bytes -= side;
}

bool MatrixMapper::input_resident_ok(const Tiling& t) const {
  // MATMUL reads its K chunk of the resident [m][K] tile in place (a_stride), and so does CONV (its
  // a_stride: pixels of every channel, the chunk's channels read from each), so the tile loads in one LOAD
  // of whole pixels instead of a LOAD of tc-channel slices per chunk, a burst per few bytes where the
  // chunks are small (ResNet-50 layer4's 3x3 convs on tpu-v1: 16 of 512 channels a chunk). Not a conv
  // walked one kernel position at a time (per_position: its CONVs read a window of the tile's rows), and
  // integer convs only: their sums are exact in any order, so a tiling this adds to the search changes no
  // output, where a float conv's chunks of other sizes would add its partial sums in another order.
  const int64_t cin_b = t.gb * j_.cg, nk = ceil_div(cin_b, t.tc);
  const bool conv_ok = !per_position() && isa::numerics::is_integer(s_.ops.a);
  return (j_.gemm || conv_ok) && j_.a_sram < 0 && t.spatial_outer && nk >= 2 && cin_b <= 65535 &&
         t.gb == j_.groups;
}

bool MatrixMapper::one_side_job() const {
  // GEMMs, whose sums are the same whatever the tile (MATMUL adds each product onto the sums in the order
  // of the reduction), operands the walk loads and stores itself. Not convolutions: an int8 conv's one
  // side won its own span but held the whole accumulator into the next layer's (GoogLeNet int8 +0.16 %,
  // MobileNetV2 int8 +0.05 % on edge), and a float conv's sums depend on its input-channel chunk.
  return j_.gemm && j_.a_sram < 0 && j_.y_sram < 0 && j_.b_sram < 0 && c_.shared_capacity() == 0;
}

int64_t MatrixMapper::one_side_channels(int64_t p, int64_t cout_b) const {
  const int64_t cols = c_.config.systolic_array.cols, cap = c_.capacity(Buffer::kAccumulator);
  int64_t most = 0;
  for (int64_t tn = cols; tn < cout_b; tn += cols) {
    if (s_.acc_bytes(p, tn, 1) - s_.side_bytes(p, tn, 1) > cap) break;
    most = tn;
  }
  if (most == 0) return 0;
  const int64_t tiles = ceil_div(cout_b, most);
  return ceil_div(ceil_div(cout_b, tiles), cols) * cols;
}

bool MatrixMapper::groups_inner_ok(const Tiling& t) const {
  // A conv whose operands the walk loads itself, one CONV per block (whole block channels, single
  // images), its strides within CONV's 16-bit a_stride and c_stride. Its output tiles hold every channel,
  // so it may leave the output on chip dense [pixels][channels] (y_sram_tile: whole rows).
  return !j_.gemm && j_.groups > 1 && t.gb < j_.groups && j_.b_const && j_.a_sram < 0 && j_.b_sram < 0 &&
         j_.y_sram_row == 0 && j_.y_block == 0 && !per_position() && t.ti == 1 && t.spatial_outer &&
         !t.input_resident && t.tc == t.gb * j_.cg && t.tn == t.gb * j_.mg && j_.groups * j_.cg <= 65535 &&
         j_.groups * j_.mg <= 65535;
}

int64_t MatrixMapper::image_pitch() const {
  // Convolutions reading their input from DRAM, one CONV per chunk (a per-position reduction's window
  // steps within one image's rows), weights loaded by the walk.
  // A padded conv's input on chip (MatrixJob::a_pad_h) stacks its images when each takes image_rows().
  if (j_.a_pad_w > 0)
    return !j_.gemm && j_.images >= 2 && j_.a_pad_h == image_rows() && j_.b_sram < 0 && !per_position()
               ? j_.a_pad_h * j_.a_pad_w * j_.C
               : 0;
  if (j_.gemm || j_.images < 2 || j_.a_sram >= 0 || j_.b_sram >= 0 || (j_.y_sram_row && !j_.y_sram_image) ||
      per_position())
    return 0;
  const int64_t ea = isa::dtype_bytes(s_.ops.a);
  const auto step = static_cast<int64_t>(j_.a_base(1) - j_.a_base(0));
  if (step <= 0 || step % ea) return 0;
  for (int64_t i = 2; i < j_.images; ++i)
    if (static_cast<int64_t>(j_.a_base(i) - j_.a_base(0)) != i * step) return 0;
  return step / ea;
}

bool MatrixMapper::fits(const Tiling& t) const {
  if (t.acc_bytes > c_.capacity(Buffer::kAccumulator)) return false;
  // One scratchpad for both: the walk places the weight slots right after the input slots.
  if (c_.shared_capacity() > 0) return t.in_bytes + t.w_bytes <= c_.shared_capacity();
  return t.in_bytes <= c_.capacity(Buffer::kInput) && t.w_bytes <= c_.capacity(Buffer::kWeight);
}

// Memoised in Context::dma_box_costs: the search asks for the same few boxes many times, layer after layer.
MatrixMapper::BoxCost MatrixMapper::dma_cost(int64_t s0, int64_t s1, int64_t s2, int64_t st1, int64_t st2,
                                             DType t) const {
  const std::array<int64_t, 6> key = {s0, s1, s2, st1, st2, static_cast<int64_t>(t)};
  if (auto it = c_.dma_box_costs.find(key); it != c_.dma_box_costs.end())
    return {it->second[0], it->second[1]};
  isa::Instruction i;
  i.opcode = isa::Opcode::kLoad;
  i.set(isa::Field::kDtype, static_cast<int64_t>(t)).set(isa::Field::kDramAddr, 0);
  i.set(isa::Field::kSize0, s0)
      .set(isa::Field::kSize1, s1)
      .set(isa::Field::kSize2, s2)
      .set(isa::Field::kSize3, 1);
  i.set(isa::Field::kStride1, st1).set(isa::Field::kStride2, st2);
  const isa::timing::DmaRows rows = isa::timing::dma_rows(i);
  const double skew = isa::timing::channel_skew(rows, c_.config.dram);
  const auto bytes = static_cast<double>(rows.bytes());
  const double factor = std::max(skew, isa::timing::dram_cost_factor(rows, false, c_.config));
  const BoxCost v{isa::timing::estimate_dma_cycles(rows, skew, c_.config),
                  bytes * factor * c_.dram_rates.cycles_per_byte(bytes)};
  c_.dma_box_costs.emplace(key, std::array<double, 2>{v.cycles, v.dram});
  return v;
}

double MatrixMapper::vec_cost(int64_t elems) const {
  isa::Instruction i;
  i.opcode = isa::Opcode::kVec;
  i.set(isa::Field::kVop, static_cast<int64_t>(VecOp::kAdd))
      .set(isa::Field::kD0, elems)
      .set(isa::Field::kD1, 1);
  i.set(isa::Field::kD2, 1);
  return static_cast<double>(isa::timing::vec_cycles(i, c_.config.vector));
}

void MatrixMapper::estimate(Tiling& t) const {
  if (t.groups_inner) return estimate_groups_inner(t);
  const MatrixStrategy::Operands& o = s_.ops;
  const int64_t cin_b = t.gb * j_.cg, cout_b = t.gb * j_.mg;
  const int64_t blocks = j_.groups / t.gb;
  const auto oh = chunks(j_.OH, t.toh), ow = chunks(j_.OW, t.tow), kc = chunks(cin_b, t.tc),
             nc = chunks(cout_b, t.tn);
  const int64_t ns = spatial_tiles(t), nn = ceil_div(cout_b, t.tn);
  // A resident input tile (GEMMs) is loaded once per spatial tile, all its K chunks in one LOAD.
  const Reuse r = reuse(t);
  const bool reuse_a = r.a, reuse_b = r.b;
  double compute = 0, vec = 0, store = 0, load_a = 0, load_b = 0, load_r = 0;
  double dram = 0;  // the DRAM's time for every box (BoxCost::dram)
  const double engines = static_cast<double>(std::max<int64_t>(1, c_.config.dma.engines));
  const int ops = s_.epilogue_ops();
  // A LayerNorm in the loads (fusion/pre_norm.h): its steps over every input tile loaded.
  const int64_t map_steps = pre_norm_steps(c_);
  // Tiles of several whole images (Tiling::ti): n images a tile, their rows stacked.
  const auto imgs =
      t.ti > 1 ? chunks(j_.images, t.ti) : std::vector<std::pair<int64_t, int64_t>>{{1, j_.images}};
  for (auto [h, hc] : oh) {
    for (auto [w, wc] : ow) {
      const int64_t p = h * w;
      for (auto [ni, icnt] : imgs) {
        const double sp = static_cast<double>(hc * wc * icnt);
        const int64_t pm = t.ti > 1 ? tall_rows(ni) * w : p;  // the CONV's output pixels
        // The DMA box as one of ni times the rows (the rows an image loads, its halo aside).
        const int64_t rows = j_.in_rows(h) * ni;
        // A conv's resident tile: one LOAD of every channel a spatial tile (GEMMs keep the per-chunk figure
        // their tilings were ranked by).
        const bool whole = t.input_resident && !j_.gemm && j_.a_sram < 0;
        if (whole) {
          const BoxCost& a = dma_cost(cin_b, j_.in_cols(w), rows, j_.pixel_stride(), j_.row_stride(), o.a);
          load_a += a.cycles * sp;
          dram += a.dram * sp;
        }
        for (auto [k, kcnt] : kc) {
          const BoxCost& a = dma_cost(k, j_.in_cols(w), rows, j_.pixel_stride(), j_.row_stride(), o.a);
          const double times_a = j_.a_sram >= 0 || whole ? 0.0
                                                         : sp * static_cast<double>(kcnt) *
                                                               (reuse_a ? 1.0 : static_cast<double>(nn));
          load_a += a.cycles * times_a;
          dram += a.dram * times_a;
          vec += times_a * static_cast<double>(map_steps) * vec_cost(k * j_.in_cols(w) * rows);
          for (auto [n, ncnt] : nc) {
            // Per kernel position: kh*kw GEMMs reducing over the channels alone.
            const int64_t reps = per_position() ? j_.kh * j_.kw : 1;
            // A CONV streams rows of w pixels (a MATMUL's rows are one stream), as the simulator times it.
            const auto cyc = isa::timing::gemm_cycles(
                c_.config.systolic_array, {pm, j_.kh * j_.kw * k / reps, n}, o.a, false, j_.gemm ? 0 : w);
            compute += static_cast<double>(cyc.total * reps) * sp * static_cast<double>(kcnt * ncnt);
          }
        }
      }
      const double sp = static_cast<double>(hc * wc * j_.images);
      for (auto [n, ncnt] : nc) {
        const double tiles = sp * static_cast<double>(ncnt);
        if (j_.y_sram < 0 || j_.y_store) {
          const MatrixJob::OutBox ob = j_.out_box(n, w, h);
          const BoxCost& y = dma_cost(ob.d0, ob.d1, ob.d2, ob.s1, ob.s2, o.y);
          store += y.cycles * tiles;
          dram += y.dram * tiles;
        }
        vec += tiles * ops * vec_cost(p * n);
        if (o.tile_read) {
          const BoxCost& r = dma_cost(n, w, h, j_.M, j_.OW * j_.M, o.r);
          load_r += r.cycles * tiles;
          dram += r.dram * tiles;
        }
      }
    }
  }
  for (auto [k, kcnt] : kc) {
    for (auto [n, ncnt] : nc) {
      const int64_t bp = j_.b_pitch ? j_.b_pitch : n;  // a strided view's rows (runtime B)
      const BoxCost& b = dma_cost(n, k, j_.kh * j_.kw, bp, k * bp, o.w);
      const double once = j_.b_const ? 1.0 : static_cast<double>(j_.images);  // a runtime B: per image
      const double times_b =
          j_.b_sram >= 0 ? 0.0
                         : static_cast<double>(kcnt * ncnt) * (reuse_b ? once : static_cast<double>(ns));
      load_b += b.cycles * times_b;
      dram += b.dram * times_b;
    }
  }
  // The epilogue's per-channel vectors: once per side while a channel range lasts (EpilogueParams).
  double load_p = 0;
  const double p_loads = static_cast<double>(EpilogueParams::loads(t.spatial_outer, 1, nn, ns));
  for (int64_t e : s_.param_loads(t.tn)) {
    const BoxCost& v = dma_cost(e, 1, 1, e, e, isa::DType::kInt32);
    load_p += v.cycles * p_loads;
    dram += v.dram * p_loads;
  }
  compute *= static_cast<double>(blocks);
  // The engines work in parallel but share the DRAM: at most its sustained rate.
  const double dma =
      std::max((load_a + load_b + load_r + load_p + store) / engines, dram) * static_cast<double>(blocks);
  vec *= static_cast<double>(blocks);
  const double first = (j_.a_sram >= 0 ? 0.0
                                       : dma_cycles(t.tc, j_.in_cols(t.tow), j_.in_rows(t.toh) * t.ti,
                                                    j_.pixel_stride(), j_.row_stride(), o.a)) +
                       (j_.b_sram >= 0 ? 0.0
                                       : dma_cycles(t.tn, t.tc, j_.kh * j_.kw, j_.b_pitch ? j_.b_pitch : t.tn,
                                                    t.tc * (j_.b_pitch ? j_.b_pitch : t.tn), o.w));
  const double last = j_.y_sram >= 0 && !j_.y_store ? vec_cost(t.toh * t.tow * t.tn)
                                                    : out_dma_cycles(t.tn, t.tow, t.toh, o.y);
  // One accumulator side (Tiling::one_side): the array waits for each tile's epilogue and store before it
  // writes the next tile's sums into the slot.
  if (t.one_side) {
    const int64_t tiles = ns * nn * blocks;
    const double drain = static_cast<double>(s_.epilogue_ops()) * vec_cost(t.toh * t.tow * t.tn) + last;
    compute += static_cast<double>(tiles - 1) * drain;
  }
  t.compute = compute;
  t.dma = dma;
  t.est = std::max({compute, dma, vec}) + first + last;
}

std::optional<Tiling> MatrixMapper::policy_tiling() const {
  if (c_.config.lowering.mapping_policy != isa::MappingPolicy::kGemmini || j_.groups != 1)
    return std::nullopt;
  const GemminiGeometry g = GemminiGeometry::of(c_.config);
  Tiling t;
  if (j_.gemm) {
    const GemminiMatmulTile m = gemmini_matmul_tile(g, j_.OH * j_.OW, j_.mg, j_.cg);
    t.toh = std::min(m.i, j_.OH), t.tow = j_.OW, t.tc = std::min(m.k, j_.cg), t.tn = std::min(m.j, j_.mg);
    if (j_.OW != 1) return std::nullopt;
  } else {
    // subsample_pointwise made a 1x1 stride-2 unpadded conv stride 1 over every other pixel: Gemmini's
    // downsample when the source width is even (the job keeps the source's width, not its height).
    const bool downsample = j_.step_h == 2 && j_.step_w == 2 && j_.src_w % 2 == 0;
    const GemminiConvTile k =
        gemmini_conv_tile(g, j_.OH, j_.OW, j_.mg, j_.kh, j_.kw, j_.cg, j_.sh * j_.step_h, j_.dh, downsample);
    if (k.krows < j_.kh || k.kcols < j_.kw) return std::nullopt;  // npusim keeps the kernel whole
    t.toh = k.orows, t.tow = k.ocols, t.tc = k.kchs, t.tn = k.ochs;
  }
  return t;
}

std::vector<Tiling> MatrixMapper::search(int64_t* evaluated, size_t keep) const {
  std::optional<Tiling> policy = policy_tiling();
  while (policy) {
    std::vector<Tiling> best = search_among(evaluated, keep, &*policy, false);
    if (!best.empty()) return best;
    // The policy's tile overflows npusim's slots (the int8 epilogue's bias and scales share the
    // accumulator with Gemmini's half of it): fewer output rows, then columns, as Gemmini's own shrink
    // does when the accumulator binds.
    if (policy->toh > 1) {
      --policy->toh;
    } else if (policy->tow > 1) {
      --policy->tow;
    } else {
      break;
    }
  }
  return search_among(evaluated, keep, nullptr, true);
}

std::vector<Tiling> MatrixMapper::search_among(int64_t* evaluated, size_t keep, const Tiling* policy,
                                               bool report_none) const {
  std::vector<Tiling> best;  // sorted by est, at most `keep`
  // One-sided tilings (Tiling::one_side), sorted by est: their closed form cannot follow how much of each
  // tile's epilogue and store the array waits for, so they never displace a two-sided tiling from `best`
  // and are simulated beside those (taken without a timer only where no two-sided tiling fits).
  std::vector<Tiling> one_sided;
  std::optional<Tiling> plain;                 // the best without a conv's resident input tile
  std::vector<Tiling> plains;                  // every tiling `plain` considered (kTieRange)
  const ImposedTiling imposed(c_, j_, *this);  // a mapping file's values for this layer (imposed.h)
  std::vector<int64_t> gbs;
  for (int64_t d = 1; d <= j_.groups; ++d) {
    if (j_.groups % d == 0 && (d == 1 || d * j_.cg <= 4 * c_.config.systolic_array.rows)) gbs.push_back(d);
  }
  if (gbs.size() > 8) {  // keep 1 and the largest few
    std::vector<int64_t> k = {1};
    k.insert(k.end(), gbs.end() - 7, gbs.end());
    gbs = k;
  }
  // groups_inner also takes blocks that do not divide the groups (the last block holds the rest): sizes
  // up to two folds of the array's rows and columns, where narrow groups fill it best (RegNet's 13 and 55
  // groups of 8 channels have no divisor near the 4 that fill 32 rows and columns).
  if (!j_.gemm && j_.groups > 2) {
    const int64_t rows_2 = 2 * c_.config.systolic_array.rows, cols_2 = 2 * c_.config.systolic_array.cols;
    for (int64_t d = 2; d < j_.groups; ++d) {
      if (j_.groups % d != 0 && d * j_.cg <= rows_2 && d * j_.mg <= cols_2) gbs.push_back(d);
    }
  }
  imposed.restrict_blocks(gbs);
  const int64_t rows = c_.config.systolic_array.rows, cols = c_.config.systolic_array.cols;
  // Whole images per tile: 1, and where the images can be stacked, powers of two and the whole batch.
  std::vector<int64_t> tis = {1};
  if (image_pitch() > 0) {
    for (int64_t n = 2; n < j_.images; n *= 2) tis.push_back(n);
    tis.push_back(j_.images);
  }
  imposed.restrict_images(tis);
  int64_t n_eval = 0;
  for (int64_t gb : gbs) {
    const int64_t cin_b = gb * j_.cg, cout_b = gb * j_.mg;
    auto tcs = gb > 1 ? std::vector<int64_t>{cin_b}
                      : candidates(cin_b, std::max<int64_t>(1, rows / (j_.kh * j_.kw)), 8, false);
    auto tns = gb > 1 ? std::vector<int64_t>{cout_b} : candidates(cout_b, cols, 8, false);
    auto tohs = candidates(j_.OH, 1, 8, true);
    auto tows = candidates(j_.OW, 1, 4, false);
    if (policy) tcs = {policy->tc}, tns = {policy->tn}, tohs = {policy->toh}, tows = {policy->tow};
    if (j_.fixed_tc > 0) tcs = {j_.fixed_tc};
    if (j_.y_rows) tns = {cout_b};  // the epilogue's transpose needs every channel of a pixel
    if (j_.y_sram >= 0 && j_.y_block > 0 && j_.y_block <= cout_b) tns = {j_.y_block};  // y_sram_tile's one
    if (j_.a_sram >= 0 && j_.a_block > 0) {  // K chunks within one column block
      tcs.erase(std::remove_if(tcs.begin(), tcs.end(), [&](int64_t tc) { return j_.a_block % tc != 0; }),
                tcs.end());
      if (j_.a_block <= cin_b && std::find(tcs.begin(), tcs.end(), j_.a_block) == tcs.end())
        tcs.push_back(j_.a_block);  // the whole block a chunk
    }
    // One accumulator side (Tiling::one_side) holds the most output channels, in whole folds of the
    // array's columns, with a given number of pixels: those channel counts, spread evenly over the
    // tiles they take, are candidates of one-sided tilings alone.
    std::vector<int64_t> one_side_tns;
    if (gb == 1 && !policy && one_side_job()) {
      for (int64_t toh : tohs) {
        for (int64_t tow : tows) {
          const int64_t tn = one_side_channels(toh * tow, cout_b);
          if (tn > 0 && std::find(tns.begin(), tns.end(), tn) == tns.end() &&
              std::find(one_side_tns.begin(), one_side_tns.end(), tn) == one_side_tns.end())
            one_side_tns.push_back(tn);
        }
      }
    }
    if (j_.n_align > 0) {  // sibling layers as one job: no tile spans two (MatrixJob::segments)
      const auto spans = [&](int64_t tn) { return j_.n_align % tn != 0; };
      tns.erase(std::remove_if(tns.begin(), tns.end(), spans), tns.end());
      one_side_tns.erase(std::remove_if(one_side_tns.begin(), one_side_tns.end(), spans), one_side_tns.end());
      for (int64_t tn : {j_.n_align, cols})  // the segment's width and the array's, whichever divide
        if (tn <= cout_b && !spans(tn) && std::find(tns.begin(), tns.end(), tn) == tns.end())
          tns.push_back(tn);
      std::sort(tns.rbegin(), tns.rend());
    }
    const size_t two_sided_tns = tns.size();
    tns.insert(tns.end(), one_side_tns.begin(), one_side_tns.end());
    imposed.restrict(gb, tcs, tns, tohs, tows);  // an imposed value wins over the policy's
    for (int64_t tc : tcs) {
      for (size_t tn_at = 0; tn_at < tns.size(); ++tn_at) {
        const int64_t tn = tns[tn_at];
        const bool one_side_only = tn_at >= two_sided_tns && tns.size() > 1;
        for (int64_t toh : tohs) {
          for (int64_t tow : tows) {
            for (int64_t ti : tis) {
              if (ti > 1 && (toh < j_.OH || tow < j_.OW)) continue;  // whole images only
              if (ti > 1 && (ti * image_rows() > 65535 || tall_rows(ti) * tow > 65535)) continue;
              if (toh * tow > max_tile_pixels() || j_.in_rows(toh) > 65535 || j_.in_cols(tow) > 65535)
                continue;
              if (j_.a_pad_w > 0 && tow < j_.OW) continue;  // a padded input on chip: whole rows a tile
              // groups_inner tiles hold every group's output channels (an SE block's input left on chip).
              const bool y_any = j_.y_sram_tile(gb, toh, tow, tn);
              const bool y_inner = j_.y_sram_tile(j_.groups, toh, tow, j_.groups * j_.mg);
              if (!y_any && !y_inner) continue;
              // Resident weights are one tile of every channel.
              if (j_.b_sram >= 0 && (gb != j_.groups || j_.groups != 1 || tc < cin_b || tn < cout_b))
                continue;
              for (int order = 0; order < 4; ++order) {
                // 0: spatial-outer, 1: channel-outer, 2: spatial-outer with the input tile resident,
                // 3: spatial-outer with the blocks inner, sharing an input tile of every group.
                if (!imposed.allows(order != 1, order == 2, order == 3)) continue;
                if (order != 3 && j_.groups % gb != 0) continue;  // only groups_inner has a ragged block
                if (!(order == 3 ? y_inner : y_any)) continue;
                // One output-channel tile: channel-outer walks what spatial-outer walks; rank it once.
                if (order == 1 && tn >= cout_b && imposed.allows(true, false)) continue;
                // Gemmini's loops keep the spatial tile outer (output channels, then the reduction, inner).
                if (policy && order != 0 && imposed.allows(true, false)) continue;
                Tiling t;
                t.gb = gb, t.tc = tc, t.tn = tn, t.toh = toh, t.tow = tow, t.ti = ti,
                t.spatial_outer = order != 1;
                t.input_resident = order == 2;
                t.groups_inner = order == 3;
                if (t.input_resident && !input_resident_ok(t)) continue;
                if (t.groups_inner && !groups_inner_ok(t)) continue;
                slot_bytes(t);
                if (one_side_only || !fits(t)) {
                  // Where the two sides overflow the accumulator: one side (Tiling::one_side).
                  if (t.acc_bytes <= c_.capacity(Buffer::kAccumulator) || t.groups_inner || t.ti > 1 ||
                      policy || !one_side_job())
                    continue;
                  // With one spatial tile both loop orders walk the same tiles: rank one of them.
                  if (!t.spatial_outer && spatial_tiles(t) == 1) continue;
                  t.one_side = true;
                  slot_bytes(t);
                  if (!fits(t)) continue;
                }
                estimate(t);
                ++n_eval;
                if (!(t.input_resident && !j_.gemm) && !t.one_side) {
                  if (!plain || t.est < plain->est) plain = t;
                  if (keep > 1) plains.push_back(t);
                }
                std::vector<Tiling>& list = t.one_side ? one_sided : best;
                const size_t k = t.one_side ? kOneSided : keep;
                if (list.size() < k || t.est < list.back().est) {
                  auto at = std::upper_bound(list.begin(), list.end(), t,
                                             [](const Tiling& a, const Tiling& b) { return a.est < b.est; });
                  list.insert(at, t);
                  if (list.size() > k) list.pop_back();
                }
              }
            }
          }
        }
      }
    }
  }
  if (n_eval == 0 && report_none) imposed.none_fits();
  *evaluated = n_eval;
  // A conv's resident input tiles rank by a closed form that can favour them where the simulation does not
  // (more CONVs, each with its fill and drain): the best tiling without them is simulated too, so that they
  // never displace the tiling the search would take without them.
  const auto conv_resident = [&](const Tiling& t) { return t.input_resident && !j_.gemm; };
  const auto same = [&](const Tiling& t) {
    return t.gb == plain->gb && t.tc == plain->tc && t.tn == plain->tn && t.toh == plain->toh &&
           t.tow == plain->tow && t.ti == plain->ti && t.spatial_outer == plain->spatial_outer &&
           t.input_resident == plain->input_resident && t.groups_inner == plain->groups_inner;
  };
  if (plain && keep > 1 && std::any_of(best.begin(), best.end(), conv_resident) &&
      std::none_of(best.begin(), best.end(), same)) {
    plain->always_timed = true;
    best.push_back(*plain);
  }
  if (plain && !best.empty()) {
    const auto instructions = [&](const Tiling& t) {
      return spatial_tiles(t) * ceil_div(t.gb * j_.mg, t.tn) * ceil_div(t.gb * j_.cg, t.tc) *
             (j_.groups / t.gb);
    };
    const Tiling* bulk = nullptr;
    for (const Tiling& t : plains) {
      if (t.est > kTieRange * best.front().est) continue;
      if (!bulk || instructions(t) < instructions(*bulk) ||
          (instructions(t) == instructions(*bulk) && t.est < bulk->est))
        bulk = &t;
    }
    const auto is_bulk = [&](const Tiling& t) {
      return t.gb == bulk->gb && t.tc == bulk->tc && t.tn == bulk->tn && t.toh == bulk->toh &&
             t.tow == bulk->tow && t.ti == bulk->ti && t.spatial_outer == bulk->spatial_outer &&
             t.input_resident == bulk->input_resident && t.groups_inner == bulk->groups_inner;
    };
    if (bulk && std::none_of(best.begin(), best.end(), is_bulk)) {
      Tiling t = *bulk;
      t.always_timed = true;
      t.tie_break = true;
      best.push_back(t);
    }
  }
  if (best.empty()) {
    if (one_sided.size() > keep) one_sided.resize(keep);
    return one_sided;
  }
  if (keep > 1) best.insert(best.end(), one_sided.begin(), one_sided.end());
  return best;
}

Tiling MatrixMapper::choose(int64_t* evaluated) {
  std::vector<Tiling> best = search(evaluated, c_.can_time() ? kTimedCandidates : 1);
  if (best.empty()) return Tiling{};
  if (!c_.can_time()) return best.front();
  // Tiling::prefetch_input: each such candidate is simulated with its third input slot and without (the
  // slot can cost more than it saves where the map is light beside the array: DenseNet-121 fp16).
  for (size_t i = 0, n = best.size(); i < n; ++i) {
    if (!best[i].prefetch_input) continue;
    Tiling two = best[i];
    two.no_prefetch = true;
    slot_bytes(two);
    two.always_timed = true;
    best.push_back(two);
  }
  // A layer identical to one already decided (ResNet's repeated blocks: the same geometry, operand
  // types, epilogue and candidates) takes the same winner without simulating the candidates again.
  std::string key = fmt::format(
      "{} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {}|{} {} {} {} {} {}", j_.gemm,
      j_.b_const, j_.images, j_.H, j_.W, j_.C, j_.OH, j_.OW, j_.M, j_.out_pitch(), j_.out_row(), j_.kh, j_.kw,
      j_.sh, j_.sw, j_.dh, j_.dw, j_.pt, j_.pl, j_.groups, j_.cg, j_.mg, j_.step_h, j_.step_w, j_.src_w,
      static_cast<int>(s_.ops.a) + 100 * (j_.a_sram >= 0) + 1000 * (j_.y_sram >= 0) +
          10000 * (j_.b_sram >= 0),
      static_cast<int>(s_.ops.w), static_cast<int>(s_.ops.y), static_cast<int>(s_.ops.r), s_.ops.tile_read,
      s_.epilogue_ops());
  key += fmt::format(" blocks {} {} {}", j_.a_block, j_.y_block, pre_norm_steps(c_));
  for (const auto& sg : j_.segments) key += fmt::format(" seg {} {} {}", sg[0], sg[1], j_.n_align);
  for (const Tiling& t : best) {
    key += fmt::format("|{} {} {} {} {} {} {} {} {} {}", t.gb, t.toh, t.tow, t.tc, t.tn, t.ti,
                       t.spatial_outer, t.input_resident, t.groups_inner, t.prefetch_input);
  }
  if (auto it = c_.decided.find(key); it != c_.decided.end()) return best[it->second];
  // Each candidate's figures: `score` as the search judges it now, `span` the figure it judged by before
  // (the layer's own simulated span), and its trial's timing.
  struct Figure {
    double score = 0, span = 0;
    Context::Timed timed;
  };
  std::vector<std::optional<Figure>> figures(best.size());
  const int64_t first = c_.em.size();
  for (size_t i = 0; i < best.size(); ++i) {
    // The closed form errs by well under this factor on the layers it ranks (docs/backend.md).
    if (i > 0 && best[i].est > kTimedRange * best.front().est && !best[i].always_timed) continue;
    const Context::Trial trial = c_.begin_trial();
    generate(best[i]);
    std::vector<int64_t> cycles = c_.time_code(first);
    best[i].simulated = cycles.empty() ? 0 : cycles.back();
    // A one-sided tiling must win by a margin: its slice runs alone, and it leaves the next layer no
    // accumulator to start in (Tiling::one_side). Under the cycles objective a tiling is judged by when its
    // slice ends (Context::time_end), not by its own span: a layer whose first loads start earlier, under
    // the layer before it, spans more cycles yet ends sooner.
    const double margin = best[i].one_side ? kOneSidedMargin : 0.0;
    const double span = c_.objective_score(first, best[i].simulated) * (1.0 + margin);
    const double score =
        c_.options.objective == MappingObjective::kCycles
            ? static_cast<double>(c_.time_end(first)) + margin * static_cast<double>(best[i].simulated)
            : span;
    figures[i] = Figure{score, span, {first, c_.em.size(), std::move(cycles)}};
    c_.end_trial(trial);
  }
  // A per_position conv's float winner keeps the input-channel chunks (tc) of the one its span picks among
  // the candidates the closed form ranks: it reduces a chunk one kernel position at a time (chunk, tap,
  // channel), so its float sums depend on tc. Every other layer's do not: CONV adds channel-major and
  // MATMUL in the order of the reduction, chunk after chunk continuing one running sum (isa.h; measured:
  // docs/models.md, "ResNet-50 at batch 8 on datacenter: the DMA as the engines stream it (dcrn)").
  // Integer sums are exact in any order.
  const bool float_sums = per_position() && (s_.ops.a == isa::DType::kFp16 || s_.ops.a == isa::DType::kBf16 ||
                                             s_.ops.a == isa::DType::kFp32);
  std::optional<int64_t> tc;
  if (float_sums) {
    std::optional<size_t> by_span;
    for (size_t i = 0; i < best.size(); ++i)
      if (figures[i] && !best[i].tie_break && (!by_span || figures[i]->span < figures[*by_span]->span))
        by_span = i;
    if (by_span) tc = best[*by_span].tc;
  }
  std::optional<size_t> pick;
  for (size_t i = 0; i < best.size(); ++i)
    if (figures[i] && (!tc || best[i].tc == *tc) && (!pick || figures[i]->score < figures[*pick]->score))
      pick = i;
  const size_t win = pick.value_or(0);
  if (figures[win]) c_.timed = std::move(figures[win]->timed);
  c_.decided.emplace(std::move(key), win);
  return best[win];
}

void MatrixMapper::generate(const Tiling& t) {
  if (t.groups_inner) return generate_groups_inner(t);
  const int64_t ea = isa::dtype_bytes(s_.ops.a), ew = isa::dtype_bytes(s_.ops.w);
  const int64_t cin_b = t.gb * j_.cg, cout_b = t.gb * j_.mg, blocks = j_.groups / t.gb;
  const int64_t nk = ceil_div(cin_b, t.tc), nn = ceil_div(cout_b, t.tn);
  // SRAM slots: input and weight ping-pong pairs here, the accumulator's from the strategy.
  SramAlloc in = c_.slots(Buffer::kInput, t.in_bytes), wt = c_.slots(Buffer::kWeight, t.w_bytes),
            acc = c_.slots(Buffer::kAccumulator, t.acc_bytes);
  // An operand loaded once (Reuse::a_once / b_once) has one slot: both names are the same.
  const Reuse reused = reuse(t);
  uint64_t a_slot[3], b_slot[2];
  const int a_slots = t.prefetch_input ? 3 : 2;
  for (int s = 0; s < a_slots; ++s)
    a_slot[s] = j_.a_sram >= 0 ? 0
                : s == 1 && reused.a_once
                    ? a_slot[0]
                    : in.take(static_cast<uint64_t>((tile_in_rows(t) * j_.in_cols(t.tow) + position_slack()) *
                                                    (t.input_resident ? cin_b : t.tc) * ea));
  s_.allocate(acc, t.side_in_input ? in : acc, tile_pixels(t), t.tn, t.sides());
  if (c_.shared_capacity() > 0) wt.next = in.next;  // weights above the inputs in the one scratchpad
  fill_padding();
  for (int s = 0; s < 2; ++s)
    b_slot[s] = j_.b_sram >= 0            ? static_cast<uint64_t>(j_.b_sram)
                : s == 1 && reused.b_once ? b_slot[0]
                                          : wt.take(static_cast<uint64_t>(j_.kh * j_.kw * t.tc * t.tn * ew));
  // Constant weights: one data segment per (block, n chunk, k chunk) tile (none when they are resident).
  std::vector<uint64_t> w_addr;
  if (j_.b_const && j_.b_sram < 0) {
    w_addr.resize(static_cast<size_t>(blocks * nn * nk));
    for (int64_t b = 0; b < blocks; ++b) {
      for (int64_t jn = 0; jn < nn; ++jn) {
        for (int64_t ik = 0; ik < nk; ++ik) {
          const int64_t n0 = jn * t.tn, n1 = j_.tile_end(n0, std::min(cout_b, n0 + t.tn)), k0 = ik * t.tc,
                        k1 = std::min(cin_b, k0 + t.tc);
          if (n1 == n0) continue;  // a sibling's padding (MatrixJob::segments)
          w_addr[static_cast<size_t>((b * nn + jn) * nk + ik)] = s_.weight_tile(b, t.gb, k0, k1, n0, n1);
        }
      }
    }
  }
  struct Spatial {
    int64_t img, oy0, oh, ox0, ow;
    int64_t ni = 0;  // tiles of several images (Tiling::ti): the images from img on
  };
  std::vector<Spatial> sp;
  for (int64_t img = 0; img < j_.images; img += t.ti) {
    for (int64_t oy = 0; oy < j_.OH; oy += t.toh) {
      for (int64_t ox = 0; ox < j_.OW; ox += t.tow) {
        sp.push_back({img, oy, std::min(t.toh, j_.OH - oy), ox, std::min(t.tow, j_.OW - ox),
                      t.ti > 1 ? std::min(t.ti, j_.images - img) : 0});
      }
    }
  }
  int a_next = 0, b_next = 0, c_next = 0;
  int64_t a_key = -1, b_key = -1;  // what the most recent A / B slot holds (reuse)
  uint64_t a_cur = 0, b_cur = 0;
  const bool reuse_a = reused.a, reuse_b = reused.b;
  const bool resident = t.input_resident;
  // A conv that maps its input in its loads (fusion/pre_affine.h) emits each tile's epilogue after the next
  // tile's input load: the vector unit's in-order queue then holds the next tile's map ahead of this
  // tile's epilogue and runs it while the array multiplies (behind the epilogue it would wait for the sums).
  const bool defer = !t.one_side && maps_its_loads(c_);
  std::vector<std::pair<OutTile, int>> pending;
  auto flush = [&]() {
    for (const auto& [o, side] : pending) s_.epilogue(o, side);
    pending.clear();
  };
  // Tiling::prefetch_input: spatial tile `ahead`'s input, loaded into `ahead_slot`, its map held.
  int64_t ahead = -1;
  uint64_t ahead_slot = 0;
  std::vector<PreAffine::Box> ahead_map;
  // A LayerNorm in the loads (fusion/pre_norm.h): the next tile's steps, a box of rows at a time, go between
  // this tile's array instructions, so that the in-order queues (a few entries deep) keep both units busy;
  // `ahead_done` of ahead_map's boxes are emitted.
  const bool spread = t.prefetch_input && pre_norm_steps(c_) > 0;
  size_t ahead_done = 0;
  auto load_held = [&](int64_t si, uint64_t slot, int64_t c0, int64_t tc) {
    const Spatial& s = sp[static_cast<size_t>(si)];
    hold_pre_affine(c_);
    load_input(s.img, s.oy0, s.oh, s.ox0, s.ow, c0, tc, slot, s.ni);
    return release_pre_affine(c_);
  };
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t cin0 = b * cin_b, cout0 = b * cout_b;
    auto tile = [&](int64_t si, int64_t jn) {
      const Spatial& s = sp[static_cast<size_t>(si)];
      const int64_t n0 = jn * t.tn, tn = j_.tile_end(n0, std::min(cout_b, n0 + t.tn)) - n0;
      if (tn == 0) return;  // a sibling's padding (MatrixJob::segments)
      const int cs = c_next;
      if (!t.one_side) c_next ^= 1;
      const uint64_t c_slot = s_.acc_slot(cs);
      for (int64_t ik = 0; ik < nk; ++ik) {
        const int64_t k0 = ik * t.tc, tc = std::min(t.tc, cin_b - k0);
        // Input tile with halo (resident: every K chunk, loaded with the first).
        const int64_t akey = (b * static_cast<int64_t>(sp.size()) + si) * nk + (resident ? 0 : ik);
        if (j_.a_sram >= 0 && j_.a_block > 0) {
          // Column blocks [C / a_block][rows][a_block] (GEMM chains): this K chunk's block, its rows.
          const int64_t kk = cin0 + k0, rows = j_.images * j_.H * j_.W;
          a_cur = static_cast<uint64_t>(j_.a_sram) +
                  static_cast<uint64_t>(
                      (((kk / j_.a_block) * rows + (s.img * j_.H + s.oy0) * j_.W + s.ox0) * j_.a_block +
                       kk % j_.a_block - k0) *
                      ea);
        } else if (j_.a_pad_w > 0) {
          // A padded conv's input where the producer left it: the tile's first window row, every channel.
          a_cur = static_cast<uint64_t>(j_.a_sram) +
                  static_cast<uint64_t>(
                      ((s.img * j_.a_pad_h + s.oy0 * j_.sh) * j_.a_pad_w + s.ox0 * j_.sw) * j_.C + cin0) *
                      static_cast<uint64_t>(ea);
        } else if (j_.a_sram >= 0) {
          // Where the producer left it (GEMMs: rows of C elements).
          a_cur = static_cast<uint64_t>(j_.a_sram) +
                  static_cast<uint64_t>(((s.img * j_.H + s.oy0) * j_.W + s.ox0) * j_.C + cin0) *
                      static_cast<uint64_t>(ea);
        } else if (t.prefetch_input && !(reuse_a && a_key == akey)) {
          // One K chunk, one block, the spatial tiles in order: akey is si (Tiling::prefetch_input).
          std::vector<PreAffine::Box> map;
          if (ahead == si) {
            a_cur = ahead_slot;
            map.assign(ahead_map.begin() + static_cast<std::ptrdiff_t>(ahead_done), ahead_map.end());
            ahead_map.clear();
            ahead_done = 0;
          } else {
            a_cur = a_slot[a_next];
            a_next = (a_next + 1) % 3;
            map = load_held(si, a_cur, cin0, tc);
          }
          a_key = akey;
          ahead = -1;
          if (si + 1 < static_cast<int64_t>(sp.size())) {
            ahead = si + 1;
            ahead_slot = a_slot[a_next];
            a_next = (a_next + 1) % 3;
            ahead_map = load_held(ahead, ahead_slot, cin0, tc);
          }
          emit_pre_affine_maps(c_, map);
        } else if (!((reuse_a || resident) && a_key == akey)) {
          a_cur = a_slot[a_next];
          a_next ^= 1;
          a_key = akey;
          // Resident (GEMMs): the [m][K] tile as it lies, every K chunk at once.
          load_input(s.img, s.oy0, s.oh, s.ox0, s.ow, resident ? cin0 : cin0 + k0, resident ? cin_b : tc,
                     a_cur, s.ni);
        }
        if (ik == 0) flush();  // the tile before's epilogue, before this tile's sums begin
        // This K chunk of the input tile: a resident GEMM tile's columns [k0, k0 + tc), read in place.
        const bool in_place = resident || j_.a_sram >= 0;
        const uint64_t a_k = in_place ? a_cur + static_cast<uint64_t>(k0 * ea) : a_cur;
        const int64_t a_stride = j_.a_sram >= 0 ? (j_.a_block > 0 ? j_.a_block : j_.C)
                                 : resident     ? cin_b
                                                : tc;
        const int64_t wkey = (b * nn + jn) * nk + ik;
        // A runtime B differs per image, so it is reused only within one.
        const int64_t bkey = j_.b_const ? wkey : s.img * blocks * nn * nk + wkey;
        if (j_.b_sram >= 0) {
          b_cur = static_cast<uint64_t>(j_.b_sram);
        } else if (!(reuse_b && b_key == bkey)) {
          b_cur = b_slot[b_next];
          b_next ^= 1;
          b_key = bkey;
          // Under the gemmini policy a GEMM's weights load and multiply in pieces (gemmini_stream_rows).
          const int64_t stream = j_.gemm ? gemmini_stream_rows(c_.config, s.oh * s.ow, tn, ew) : 0;
          if (stream > 0 && stream < tc) {
            for (int64_t r0 = 0; r0 < tc; r0 += stream) {
              const int64_t rows = std::min(stream, tc - r0);
              const uint64_t at = b_cur + static_cast<uint64_t>(r0 * tn * ew);
              if (j_.b_const) {
                const uint64_t addr = w_addr[static_cast<size_t>(wkey)] + static_cast<uint64_t>(r0 * tn * ew);
                const Range r{kDram, addr, addr + static_cast<uint64_t>(rows * tn * ew)};
                c_.load(Buffer::kWeight, at, r, addr, s_.ops.w, {tn, rows, 1, 1}, {tn, rows * tn, 0});
              } else {
                const uint64_t addr =
                    j_.b_base(s.img) + static_cast<uint64_t>(((k0 + r0) * j_.b_row() + n0) * ew);
                c_.load(Buffer::kWeight, at, j_.b_range, addr, s_.ops.w, {tn, rows, 1, 1},
                        {j_.b_row(), 0, 0});
              }
              c_.matmul(a_k + static_cast<uint64_t>(r0 * ea), a_stride, at, c_slot, s.oh * s.ow, rows, tn,
                        ik > 0 || r0 > 0);
            }
            continue;  // this K chunk is multiplied
          }
          if (j_.b_const) {
            const uint64_t addr = w_addr[static_cast<size_t>(wkey)];
            const Range r{kDram, addr, addr + static_cast<uint64_t>(j_.kh * j_.kw * tc * tn * ew)};
            c_.load(Buffer::kWeight, b_cur, r, addr, s_.ops.w, {tn, tc, j_.kh * j_.kw, 1}, {tn, tc * tn, 0});
          } else {
            // Runtime B [K, N] of this image (gemm only).
            const uint64_t addr = j_.b_base(s.img) + static_cast<uint64_t>((k0 * j_.b_row() + n0) * ew);
            c_.load(Buffer::kWeight, b_cur, j_.b_range, addr, s_.ops.w, {tn, tc, 1, 1}, {j_.b_row(), 0, 0});
          }
        }
        if (j_.gemm) {
          c_.matmul(a_k, a_stride, b_cur, c_slot, s.oh * s.ow, tc, tn, ik > 0);
        } else if (per_position()) {
          // A 1x1 CONV per kernel position (r, q) over the window shifted by (r*dh, q*dw): rows keep the
          // tile's pitch of in_cols pixels, the position's weights are its [tc][tn] slice.
          const int64_t cols = j_.in_cols(s.ow);
          for (int64_t r = 0; r < j_.kh; ++r) {
            for (int64_t q = 0; q < j_.kw; ++q) {
              const uint64_t a = a_cur + static_cast<uint64_t>((r * j_.dh * cols + q * j_.dw) * tc * ea);
              const uint64_t w = b_cur + static_cast<uint64_t>((r * j_.kw + q) * tc * tn * ew);
              c_.conv(a, w, c_slot, (s.oh - 1) * j_.sh + 1, cols, tc, s.oh, s.ow, tn, 1, 1, j_.sh, j_.sw, 1,
                      1, ik > 0 || r > 0 || q > 0);
            }
          }
        } else if (s.ni > 0) {
          // The images stacked: image i's outputs start at output row i * image_rows() / sh.
          c_.conv(a_k, b_cur, c_slot, s.ni * image_rows(), j_.a_pad_w > 0 ? j_.a_pad_w : j_.in_cols(s.ow), tc,
                  tall_rows(s.ni), s.ow, tn, j_.kh, j_.kw, j_.sh, j_.sw, j_.dh, j_.dw, ik > 0,
                  j_.a_pad_w > 0 ? j_.C
                  : resident     ? cin_b
                                 : 0);
        } else {
          c_.conv(a_k, b_cur, c_slot, j_.in_rows(s.oh), j_.a_pad_w > 0 ? j_.a_pad_w : j_.in_cols(s.ow), tc,
                  s.oh, s.ow, tn, j_.kh, j_.kw, j_.sh, j_.sw, j_.dh, j_.dw, ik > 0,
                  j_.a_pad_w > 0 ? j_.C
                  : resident     ? cin_b
                                 : 0);
        }
      }
      for (int64_t i = 0; i < std::max<int64_t>(1, s.ni); ++i) {
        const int64_t px = i * (image_rows() / j_.sh) * j_.OW;  // image i's first output pixel in the slot
        const OutTile o{s.img + i, s.oy0, s.oh, s.ox0, s.ow, cout0 + n0, tn, px};
        if (defer) {
          pending.emplace_back(o, cs);
        } else {
          s_.epilogue(o, cs);
        }
      }
      line_buffer_tile_done(c_);  // a line buffer's reader may emit work between the tiles
      // The next spatial tile's steps: this tile's share of what is left of them (all after its last one).
      if (spread && ahead == si + 1 && ahead_done < ahead_map.size()) {
        const int64_t left_tiles = t.spatial_outer ? nn - jn : 1;
        const size_t share = static_cast<size_t>(
            ceil_div(static_cast<int64_t>(ahead_map.size() - ahead_done), std::max<int64_t>(1, left_tiles)));
        const std::vector<PreAffine::Box> part(
            ahead_map.begin() + static_cast<std::ptrdiff_t>(ahead_done),
            ahead_map.begin() + static_cast<std::ptrdiff_t>(ahead_done + share));
        emit_pre_affine_maps(c_, part);
        ahead_done += share;
      }
    };
    const int64_t nsp = static_cast<int64_t>(sp.size());
    if (t.spatial_outer) {
      for (int64_t si = 0; si < nsp; ++si) {
        for (int64_t jn = 0; jn < nn; ++jn) tile(si, jn);
      }
    } else {
      for (int64_t jn = 0; jn < nn; ++jn) {
        for (int64_t si = 0; si < nsp; ++si) tile(si, jn);
      }
    }
  }
  flush();
  c_.plan->sram_input_bytes = static_cast<int64_t>(in.used());
  c_.plan->sram_weight_bytes = static_cast<int64_t>(wt.next - (c_.shared_capacity() > 0 ? in.next : wt.base));
  c_.plan->sram_acc_bytes = static_cast<int64_t>(acc.used());
}

void MatrixMapper::fill_padding() {
  const MatrixJob::PadFill& f = j_.y_fill;
  if (f.rows == 0) return;
  const isa::DType t = s_.ops.y;
  const int64_t es = isa::dtype_bytes(t), M = j_.M;
  // A pixel of the halo value read for every row, the rest of the row LOAD's padding (at most 255 pixels
  // a side); at most 65,535 rows a LOAD.
  const int64_t read = std::max<int64_t>(1, f.cols - 2 * 255), pads = f.cols - read;
  const int64_t left = pads / 2, right = pads - left;
  uint64_t seg = 0;
  if (isa::numerics::is_integer(t))
    seg =
        c_.add_data(std::vector<uint8_t>(static_cast<size_t>(read * M * es), static_cast<uint8_t>(f.value)));
  else
    seg = c_.add_floats(std::vector<float>(static_cast<size_t>(read * M), 0.0f), t);
  const Range r{kDram, seg, seg + static_cast<uint64_t>(read * M * es)};
  for (int64_t r0 = 0; r0 < f.rows; r0 += 65535) {
    const int64_t rows = std::min<int64_t>(65535, f.rows - r0);
    c_.load(Buffer::kInput, f.at + static_cast<uint64_t>(r0 * f.cols * M * es), r, seg, t, {M, read, rows, 1},
            {M, 0, 0}, {0, 0, left, right}, f.value);
  }
}

void MatrixMapper::load_input(int64_t img, int64_t oy0, int64_t oh, int64_t ox0, int64_t ow, int64_t c0,
                              int64_t tc, uint64_t slot, int64_t ni) {
  const int64_t iy0 = oy0 * j_.sh - j_.pt, iy1 = iy0 + j_.in_rows(oh) - 1;
  const int64_t ix0 = ox0 * j_.sw - j_.pl, ix1 = ix0 + j_.in_cols(ow) - 1;
  const int64_t ptop = std::max<int64_t>(0, -iy0), pbot = std::max<int64_t>(0, iy1 - (j_.H - 1));
  const int64_t pleft = std::max<int64_t>(0, -ix0), pright = std::max<int64_t>(0, ix1 - (j_.W - 1));
  const int64_t ry0 = std::max<int64_t>(0, iy0), rx0 = std::max<int64_t>(0, ix0);
  const int64_t rows = j_.in_rows(oh) - ptop - pbot, cols = j_.in_cols(ow) - pleft - pright;
  const uint64_t addr =
      j_.a_base(img) + static_cast<uint64_t>((ry0 * j_.row_stride() + rx0 * j_.pixel_stride() + c0) *
                                             isa::dtype_bytes(s_.ops.a));
  // Several whole images: each padded below to image_rows(), one after the other.
  const int64_t below = ni > 0 ? image_rows() - j_.in_rows(oh) : 0;
  c_.load(Buffer::kInput, slot, j_.a_range, addr, s_.ops.a, {tc, cols, rows, std::max<int64_t>(1, ni)},
          {j_.pixel_stride(), j_.row_stride(), ni > 1 ? image_pitch() : 0},
          {ptop, pbot + below, pleft, pright}, s_.ops.pad);
}

void MatrixMapper::estimate_groups_inner(Tiling& t) const {
  const MatrixStrategy::Operands& o = s_.ops;
  // Blocks of gb groups; the last holds the groups left when gb does not divide them.
  const int64_t cin_b = t.gb * j_.cg, cout_b = t.gb * j_.mg, full = j_.groups / t.gb;
  const int64_t rest = j_.groups % t.gb;
  const int64_t c_all = j_.groups * j_.cg, m_all = j_.groups * j_.mg;
  double compute = 0, vec = 0, dma = 0, dram = 0;
  const int ops = s_.epilogue_ops();
  for (auto [h, hc] : chunks(j_.OH, t.toh)) {
    for (auto [w, wc] : chunks(j_.OW, t.tow)) {
      const double tiles = static_cast<double>(hc * wc * j_.images);
      const BoxCost& a =
          dma_cost(c_all, j_.in_cols(w), j_.in_rows(h), j_.pixel_stride(), j_.row_stride(), o.a);
      const MatrixJob::OutBox ob = j_.out_box(m_all, w, h);
      const BoxCost& y = dma_cost(ob.d0, ob.d1, ob.d2, ob.s1, ob.s2, o.y);
      dma += (a.cycles + y.cycles) * tiles;
      dram += (a.dram + y.dram) * tiles;
      if (o.tile_read) {
        const BoxCost& r = dma_cost(m_all, w, h, j_.M, j_.OW * j_.M, o.r);
        dma += r.cycles * tiles;
        dram += r.dram * tiles;
      }
      const auto cyc = isa::timing::gemm_cycles(c_.config.systolic_array,
                                                {h * w, j_.kh * j_.kw * cin_b, cout_b}, o.a, false, w);
      compute += static_cast<double>(cyc.total * full) * tiles;
      if (rest > 0) {
        const auto last = isa::timing::gemm_cycles(
            c_.config.systolic_array, {h * w, j_.kh * j_.kw * rest * j_.cg, rest * j_.mg}, o.a, false, w);
        compute += static_cast<double>(last.total) * tiles;
      }
      vec += tiles * ops * vec_cost(h * w * m_all);
    }
  }
  // Every block's weights once; the epilogue's vectors once per side.
  for (auto [g, count] : chunks(j_.groups, t.gb)) {
    const int64_t k = g * j_.cg, n = g * j_.mg;
    const BoxCost& b = dma_cost(n, k, j_.kh * j_.kw, n, k * n, o.w);
    dma += b.cycles * static_cast<double>(count);
    dram += b.dram * static_cast<double>(count);
  }
  const double p_loads = static_cast<double>(EpilogueParams::loads(true, 1, 1, spatial_tiles(t)));
  for (int64_t e : s_.param_loads(m_all)) {
    const BoxCost& v = dma_cost(e, 1, 1, e, e, isa::DType::kInt32);
    dma += v.cycles * p_loads;
    dram += v.dram * p_loads;
  }
  dma = std::max(dma / static_cast<double>(std::max<int64_t>(1, c_.config.dma.engines)), dram);
  // Before the first CONV: the first input tile and block's weights; after the last: its tile's store.
  const double first =
      dma_cycles(c_all, j_.in_cols(t.tow), j_.in_rows(t.toh), j_.pixel_stride(), j_.row_stride(), o.a) +
      dma_cycles(cout_b, cin_b, j_.kh * j_.kw, cout_b, cin_b * cout_b, o.w);
  const double last = out_dma_cycles(m_all, t.tow, t.toh, o.y);
  t.compute = compute;
  t.dma = dma;
  t.est = std::max({compute, dma, vec}) + first + last;
}

void MatrixMapper::generate_groups_inner(const Tiling& t) {
  const int64_t ea = isa::dtype_bytes(s_.ops.a), ew = isa::dtype_bytes(s_.ops.w);
  const int64_t ec = isa::dtype_bytes(isa::numerics::accumulator_dtype(s_.ops.a));
  const int64_t blocks = ceil_div(j_.groups, t.gb);  // the last may hold fewer groups
  const int64_t c_all = j_.groups * j_.cg, m_all = j_.groups * j_.mg;
  SramAlloc in = c_.slots(Buffer::kInput, t.in_bytes), wt = c_.slots(Buffer::kWeight, t.w_bytes),
            acc = c_.slots(Buffer::kAccumulator, t.acc_bytes);
  const bool a_once = spatial_tiles(t) == 1;
  const auto a_bytes = static_cast<uint64_t>(j_.in_rows(t.toh) * j_.in_cols(t.tow) * c_all * ea);
  uint64_t a_slot[2];
  a_slot[0] = in.take(a_bytes);
  a_slot[1] = a_once ? a_slot[0] : in.take(a_bytes);
  s_.allocate(acc, t.side_in_input ? in : acc, tile_pixels(t), m_all);
  if (c_.shared_capacity() > 0) wt.next = in.next;  // weights above the inputs in the one scratchpad
  // Block b: groups [b * gb, b * gb + g), its channels and columns from b * gb's.
  auto groups_of = [&](int64_t b) { return std::min(t.gb, j_.groups - b * t.gb); };
  std::vector<uint64_t> w_slot(static_cast<size_t>(blocks));
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t g = groups_of(b);
    w_slot[static_cast<size_t>(b)] =
        wt.take(static_cast<uint64_t>(j_.kh * j_.kw * g * j_.cg * g * j_.mg * ew));
  }
  int a_next = 0, c_next = 0;
  bool first = true;
  for (int64_t img = 0; img < j_.images; ++img) {
    for (int64_t oy = 0; oy < j_.OH; oy += t.toh) {
      for (int64_t ox = 0; ox < j_.OW; ox += t.tow) {
        const int64_t oh = std::min(t.toh, j_.OH - oy), ow = std::min(t.tow, j_.OW - ox);
        const uint64_t a = a_slot[a_next];
        a_next ^= 1;
        load_input(img, oy, oh, ox, ow, 0, c_all, a);
        const int cs = c_next;
        c_next ^= 1;
        const uint64_t c_slot = s_.acc_slot(cs);
        for (int64_t b = 0; b < blocks; ++b) {
          const uint64_t w = w_slot[static_cast<size_t>(b)];
          const int64_t cin_b = groups_of(b) * j_.cg, cout_b = groups_of(b) * j_.mg;
          if (first) {  // each block's weights, loaded as the first spatial tile reaches it
            const uint64_t addr = s_.weight_tile(b, t.gb, 0, cin_b, 0, cout_b);
            const Range r{kDram, addr, addr + static_cast<uint64_t>(j_.kh * j_.kw * cin_b * cout_b * ew)};
            c_.load(Buffer::kWeight, w, r, addr, s_.ops.w, {cout_b, cin_b, j_.kh * j_.kw, 1},
                    {cout_b, cin_b * cout_b, 0});
          }
          c_.conv(a + static_cast<uint64_t>(b * t.gb * j_.cg * ea), w,
                  c_slot + static_cast<uint64_t>(b * t.gb * j_.mg * ec), j_.in_rows(oh), j_.in_cols(ow),
                  cin_b, oh, ow, cout_b, j_.kh, j_.kw, j_.sh, j_.sw, j_.dh, j_.dw, false, c_all, m_all);
        }
        first = false;
        s_.epilogue(OutTile{img, oy, oh, ox, ow, 0, m_all}, cs);
      }
    }
  }
  c_.plan->sram_input_bytes = static_cast<int64_t>(in.used());
  c_.plan->sram_weight_bytes = static_cast<int64_t>(wt.next - (c_.shared_capacity() > 0 ? in.next : wt.base));
  c_.plan->sram_acc_bytes = static_cast<int64_t>(acc.used());
}

bool subsample_pointwise(MatrixJob& j) {
  if (j.gemm || j.kh != 1 || j.kw != 1 || (j.sh == 1 && j.sw == 1) || j.pt != 0 || j.pl != 0) return false;
  j.src_w = j.W;
  j.step_h = j.sh, j.step_w = j.sw;
  j.H = j.OH, j.W = j.OW;
  j.sh = j.sw = 1;
  return true;
}

void set_conv_pads(const Node& n, MatrixJob& j) {
  const std::string auto_pad = n.attr_string("auto_pad", "NOTSET");
  if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    const int64_t ph = std::max<int64_t>(0, (j.OH - 1) * j.sh + (j.kh - 1) * j.dh + 1 - j.H);
    const int64_t pw = std::max<int64_t>(0, (j.OW - 1) * j.sw + (j.kw - 1) * j.dw + 1 - j.W);
    j.pt = auto_pad == "SAME_UPPER" ? ph / 2 : ph - ph / 2;
    j.pl = auto_pad == "SAME_UPPER" ? pw / 2 : pw - pw / 2;
  } else {
    const auto pads = n.attr_ints("pads", {0, 0, 0, 0});
    j.pt = pads[0], j.pl = pads[1];
  }
}

bool fused_activation(const Node& n, const std::string& act, VecOp* op, int64_t* imm0, int64_t* imm1) {
  if (act == "Relu") {
    *op = VecOp::kRelu;
  } else if (act == "Clip") {
    *op = VecOp::kClip;
    *imm0 = f32_imm(n.attr_float(kActMin, -INFINITY));
    *imm1 = f32_imm(n.attr_float(kActMax, INFINITY));
  } else if (act == "Sigmoid") {
    *op = VecOp::kSigmoid;
  } else if (act == "Tanh") {
    *op = VecOp::kTanh;
  } else if (act == "LeakyRelu") {
    *op = VecOp::kLeakyRelu;
    *imm0 = f32_imm(n.attr_float(kAlpha, 0.01f));
  } else if (act == "HardSigmoid") {
    *op = VecOp::kHardSigmoid;
    *imm0 = f32_imm(n.attr_float(kAlpha, 0.2f));
    *imm1 = f32_imm(n.attr_float(kBeta, 0.5f));
  } else if (act == "HardSwish") {
    *op = VecOp::kHardSwish;
  } else if (act == "Gelu") {
    *op = VecOp::kGelu;
  } else {
    return false;
  }
  return true;
}

std::string tile_limit(const Context& c, const MatrixJob& j, const Tiling& t) {
  if (t.toh == j.OH && t.tow == j.OW && t.tc == t.gb * j.cg && t.tn == t.gb * j.mg && t.gb == j.groups &&
      (j.images == 1 || t.ti >= j.images)) {
    return "whole layer in one tile";
  }
  // Slots are ping-pong pairs: past half of a scratchpad, doubling any tile dimension cannot fit.
  const std::array<std::pair<const char*, double>, 3> fill = {
      std::pair<const char*, double>{"sram.input",
                                     static_cast<double>(t.in_bytes) / c.capacity(Buffer::kInput)},
      {"sram.weight", static_cast<double>(t.w_bytes) / c.capacity(Buffer::kWeight)},
      {"sram.accumulator", static_cast<double>(t.acc_bytes) / c.capacity(Buffer::kAccumulator)}};
  const auto full =
      std::max_element(fill.begin(), fill.end(), [](auto& a, auto& b) { return a.second < b.second; });
  if (full->second > 0.5) return fmt::format("{} {:.0f}% full", full->first, 100.0 * full->second);
  return t.simulated >= 0 ? "fastest in simulation (larger tiles that fit ran slower or ranked lower)"
                          : "cheapest in the cost model";
}

void record_tiling(Context& c, const MatrixJob& j, const Tiling& t, int64_t evaluated) {
  LayerPlan& p = *c.plan;
  p.group_block = t.gb;
  p.tile_oh = t.toh;
  p.tile_ow = t.tow;
  p.tile_m = t.toh * t.tow;
  p.tile_k = j.kh * j.kw * t.tc;
  p.tile_n = t.tn;
  p.loop_order = t.groups_inner     ? "spatial-outer, the blocks inner sharing an input tile of every group"
                 : t.input_resident ? "spatial-outer, input tile resident across its K chunks"
                 : t.spatial_outer  ? "spatial-outer (input tile resident)"
                                    : "channel-outer (weight tile resident)";
  if (t.ti > 1) p.loop_order += fmt::format(", {} images a tile", t.ti);
  if (t.one_side) p.loop_order += ", one accumulator side";
  p.model_cycles = static_cast<int64_t>(t.est);
  p.est_cycles = t.simulated >= 0 ? t.simulated : p.model_cycles;
  p.est_compute_cycles = static_cast<int64_t>(t.compute);
  p.est_dma_cycles = static_cast<int64_t>(t.dma);
  p.candidates = evaluated;
  p.macs = j.images * j.OH * j.OW * j.M * j.kh * j.kw * j.cg;
  p.chosen = as_mapping(j, t);
  p.tile_limit = tile_limit(c, j, t);
}

void write_on_chip(Context& c, const MatrixJob& j, Context::VecArgs last, const OutTile& t, int64_t es) {
  last.dst_buf = isa::Buffer::kInput;
  const uint64_t at = static_cast<uint64_t>(j.y_sram) + j.y_sram_offset(t.img, t.oy0, t.ox0, t.n0, es);
  // An affine map between the conv and the depthwise conv reading the buffer, on the rows in place
  // (fusion/post_affine.h).
  auto map = [&] {
    if (j.y_block == 0)
      post_affine_on_chip(c, at, last.out, t.oh, j.y_sram_row ? j.y_sram_row : j.OW * j.M, t.ow, j.M, t.n0,
                          t.tn);
  };
  if (!j.y_sram_row || t.oh == 1) {
    last.dst = at;
    c.vec(last);
    map();
    return;
  }
  // The tile's pixels are [oh * ow][tn] at its sources: a row of ow pixels at a time (an operand that
  // is not broadcast moves with it; a LUT's table does not).
  const int64_t px = t.ow * t.tn;
  const bool tiled_src2 = last.bcast == isa::Bcast::kNone && last.op != isa::VecOp::kLut;
  last.d1 = t.ow;
  for (int64_t r = 0; r < t.oh; ++r) {
    Context::VecArgs v = last;
    v.src1 += static_cast<uint64_t>(r * px * isa::dtype_bytes(last.in));
    if (tiled_src2) v.src2 += static_cast<uint64_t>(r * px * isa::dtype_bytes(last.in));
    v.dst = at + static_cast<uint64_t>(r * j.y_sram_row * es);
    c.vec(v);
  }
  map();
}

void choose_conv_transpose_jobs(Context& c, const Node& n, int64_t row_channels, bool one,
                                const std::function<void()>& one_job, const std::function<void()>& row_jobs) {
  const LayerMapping* lm = c.options.mapping ? c.options.mapping->find(n.name) : nullptr;
  const bool imposed = one && lm && lm->tile_n;
  if (imposed) one = *lm->tile_n > row_channels;
  if (!one) return row_jobs();
  if (!c.can_time() || imposed) return one_job();
  int64_t cycles[2] = {0, 0};
  for (int k = 0; k < 2; ++k) {
    const Context::Trial undo = c.mark();  // each lowering's own search runs trials
    const int64_t first = c.em.size();
    (k == 0 ? one_job : row_jobs)();
    cycles[k] = c.time_layer(first);
    c.end_trial(undo);
    c.timed = {};
  }
  (cycles[0] <= cycles[1] ? one_job : row_jobs)();
}

}  // namespace npusim::compiler::backend
