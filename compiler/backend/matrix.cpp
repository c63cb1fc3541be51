// Matrix nodes (Conv, Gemm, MatMul) on the systolic array: tiling search with the isa/timing cost
// model and code generation.
//
// Every matrix node becomes one MatrixJob: a batch of "images" (NHWC in DRAM) convolved with a weight
// tensor. A Gemm/MatMul is the 1x1 case with the image H = M rows, W = 1, C = K (emitted as MATMUL);
// a grouped conv is a sequence of blocks, each a dense conv over `group_block` groups whose weights
// are block-diagonal (zeros between groups), so depthwise convs fill the array's rows with several
// channels at the price of multiplying zeros. The search picks the block size, the tile (output rows x
// cols, input-channel chunk, output-channel chunk) and the loop order (spatial tiles outer: the input
// tile stays in SRAM across output-channel tiles; or channels outer: the weight tile stays) with the
// smallest estimated cycles whose ping-pong slots fit the scratchpads.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>

#include "compiler/backend/context.h"
#include "compiler/backend/movement.h"
#include "compiler/passes/lowered.h"
#include "isa/timing/dma.h"
#include "isa/timing/systolic.h"
#include "isa/timing/units.h"

namespace npusim::compiler::backend {

using isa::Buffer;
using isa::DType;
using isa::VecOp;

namespace {

int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The fused epilogue: y = act(acc + bias + residual).
struct Epilogue {
  enum class Bias { kNone, kRow, kCol, kScalar, kFull } bias = Bias::kNone;
  uint64_t bias_addr = 0;      // fp32 data segment: [N] (row), [M] (col), scalar, or [M, N] (full)
  int64_t bias_cols = 0;       // full: row length of the [M, N] bias
  bool residual = false;
  const DramTensor* res = nullptr;
  bool has_act = false;
  VecOp act = VecOp::kCopy;
  int64_t imm0 = 0, imm1 = 0;
};

// One matrix node as a batched, blocked convolution over NHWC images.
struct MatrixJob {
  std::string what;      // "Conv 3x3x64->64" for messages
  bool gemm = false;     // emit MATMUL (1x1, stride 1, no padding)
  int64_t images = 1;
  int64_t H = 1, W = 1, C = 1;       // input image; C = channels of the whole input tensor (pixel stride)
  int64_t OH = 1, OW = 1, M = 1;     // output image; M = channels of the whole output tensor
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, dh = 1, dw = 1, pt = 0, pl = 0;
  int64_t groups = 1, cg = 1, mg = 1;  // groups, input and output channels per group
  std::function<uint64_t(int64_t)> a_base, y_base, res_base;
  Range a_range, y_range;
  // Weights: constant [groups][kh][kw][cg][mg] (values), or a runtime [K, N] matrix per image.
  bool b_const = true;
  std::vector<float> w;  // constant: w[((g*kh + i)*kw + j)*cg*mg + c*mg + m]
  std::function<uint64_t(int64_t)> b_base;
  Range b_range;
  Epilogue epi;
};

struct Tiling {
  int64_t gb = 1;            // groups per block
  int64_t toh = 1, tow = 1;  // output rows x cols per tile
  int64_t tc = 1, tn = 1;    // input-channel chunk, output-channel chunk (within a block)
  bool spatial_outer = true;
  double est = 1e300;
  double compute = 0, dma = 0;
  int64_t in_bytes = 0, w_bytes = 0, acc_bytes = 0;
};

// Tile sizes worth trying for a dimension: the whole extent, its halvings, and powers-of-two multiples of
// the array granule (full folds); when there are too many, an evenly spread subset that keeps the
// largest and the smallest (1, which always fits).
std::vector<int64_t> candidates(int64_t extent, int64_t granule, size_t max_count) {
  std::set<int64_t> s;
  for (int64_t d = 1; d <= extent; d *= 2) s.insert(cdiv(extent, d));
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
  return v;
}

// (size, count) of the full and remainder chunks of `extent` split by `tile`.
std::vector<std::pair<int64_t, int64_t>> chunks(int64_t extent, int64_t tile) {
  std::vector<std::pair<int64_t, int64_t>> r;
  if (extent / tile > 0) r.push_back({tile, extent / tile});
  if (extent % tile) r.push_back({extent % tile, 1});
  return r;
}

class MatrixMapper {
 public:
  MatrixMapper(Context& c, MatrixJob& j) : c_(c), j_(j) {}

  int64_t in_rows(int64_t toh) const { return (toh - 1) * j_.sh + (j_.kh - 1) * j_.dh + 1; }
  int64_t in_cols(int64_t tow) const { return (tow - 1) * j_.sw + (j_.kw - 1) * j_.dw + 1; }

  // Bytes of each slot kind for a tiling (two of each: ping-pong).
  void slot_bytes(Tiling& t) const {
    const int64_t es = c_.esize;
    t.in_bytes = 2 * round64(in_rows(t.toh) * in_cols(t.tow) * t.tc * es);
    t.w_bytes = 2 * round64(j_.kh * j_.kw * t.tc * t.tn * es);
    const int64_t p = t.toh * t.tow;
    int64_t acc = 2 * round64(p * t.tn * 4);
    if (j_.epi.bias == Epilogue::Bias::kRow) acc += 2 * round64(t.tn * 4);
    if (j_.epi.bias == Epilogue::Bias::kCol) acc += 2 * round64(p * 4);
    if (j_.epi.bias == Epilogue::Bias::kScalar) acc += 2 * 64;
    if (j_.epi.bias == Epilogue::Bias::kFull || j_.epi.residual) acc += 2 * round64(p * t.tn * 4);
    if (c_.act != DType::kFp32) acc += 2 * round64(p * t.tn * es);
    t.acc_bytes = acc;
  }
  bool fits(const Tiling& t) const {
    return t.in_bytes <= c_.capacity(Buffer::kInput) && t.w_bytes <= c_.capacity(Buffer::kWeight) &&
           t.acc_bytes <= c_.capacity(Buffer::kAccumulator);
  }
  static int64_t round64(int64_t b) { return (b + 63) / 64 * 64; }

  // isa::timing::estimate_dma_cycles, memoised: the search asks for the same few boxes many times.
  double dma_cycles(int64_t s0, int64_t s1, int64_t s2, int64_t st1, int64_t st2, DType t) const {
    const std::array<int64_t, 6> key = {s0, s1, s2, st1, st2, static_cast<int64_t>(t)};
    auto it = dma_memo_.find(key);
    if (it != dma_memo_.end()) return it->second;
    const double v = dma_cycles_uncached(s0, s1, s2, st1, st2, t);
    dma_memo_.emplace(key, v);
    return v;
  }
  double dma_cycles_uncached(int64_t s0, int64_t s1, int64_t s2, int64_t st1, int64_t st2, DType t) const {
    isa::Instruction i;
    i.opcode = isa::Opcode::kLoad;
    i.set(isa::Field::kDtype, static_cast<int64_t>(t)).set(isa::Field::kDramAddr, 0);
    i.set(isa::Field::kSize0, s0).set(isa::Field::kSize1, s1).set(isa::Field::kSize2, s2).set(isa::Field::kSize3, 1);
    i.set(isa::Field::kStride1, st1).set(isa::Field::kStride2, st2);
    return isa::timing::estimate_dma_cycles(i, c_.config);
  }
  double vec_cost(VecOp op, int64_t elems) const {
    isa::Instruction i;
    i.opcode = isa::Opcode::kVec;
    i.set(isa::Field::kVop, static_cast<int64_t>(op)).set(isa::Field::kD0, elems).set(isa::Field::kD1, 1);
    i.set(isa::Field::kD2, 1);
    return static_cast<double>(isa::timing::vec_cycles(i, c_.config.vector));
  }

  void estimate(Tiling& t) const {
    const int64_t cin_b = t.gb * j_.cg, cout_b = t.gb * j_.mg;
    const int64_t blocks = j_.groups / t.gb;
    const auto oh = chunks(j_.OH, t.toh), ow = chunks(j_.OW, t.tow), kc = chunks(cin_b, t.tc), nc = chunks(cout_b, t.tn);
    const int64_t ns = j_.images * cdiv(j_.OH, t.toh) * cdiv(j_.OW, t.tow), nn = cdiv(cout_b, t.tn),
                  nk = cdiv(cin_b, t.tc);
    const bool reuse_a = t.spatial_outer && nk == 1, reuse_b = !t.spatial_outer && nk == 1;
    double compute = 0, vec = 0, store = 0, load_a = 0, load_b = 0, load_r = 0;
    const double engines = static_cast<double>(std::max<int64_t>(1, c_.config.dma.engines));
    for (auto [h, hc] : oh) {
      for (auto [w, wc] : ow) {
        const int64_t p = h * w;
        const double sp = static_cast<double>(hc * wc * j_.images);
        for (auto [k, kcnt] : kc) {
          const double a = dma_cycles(k, in_cols(w), in_rows(h), j_.C, j_.W * j_.C, c_.act);
          load_a += a * sp * static_cast<double>(kcnt) * (reuse_a ? 1.0 : static_cast<double>(nn));
          for (auto [n, ncnt] : nc) {
            const auto cyc = isa::timing::gemm_cycles(c_.config.systolic_array, {p, j_.kh * j_.kw * k, n}, c_.act, false);
            compute += static_cast<double>(cyc.total) * sp * static_cast<double>(kcnt * ncnt);
          }
        }
        for (auto [n, ncnt] : nc) {
          const double tiles = sp * static_cast<double>(ncnt);
          const double st = dma_cycles(n, w, h, j_.M, j_.OW * j_.M, c_.act);
          store += st * tiles;
          int ops = (j_.epi.bias != Epilogue::Bias::kNone) + (j_.epi.residual ? 1 : 0) + (j_.epi.has_act ? 1 : 0);
          if (ops == 0 && c_.act != DType::kFp32) ops = 1;
          vec += tiles * ops * vec_cost(VecOp::kAdd, p * n);
          if (j_.epi.residual || j_.epi.bias == Epilogue::Bias::kFull) load_r += st * tiles;
        }
      }
    }
    for (auto [k, kcnt] : kc) {
      for (auto [n, ncnt] : nc) {
        const double b = dma_cycles(n, k, j_.kh * j_.kw, n, k * n, c_.act);
        load_b += b * static_cast<double>(kcnt * ncnt) * (reuse_b ? 1.0 : static_cast<double>(ns));
      }
    }
    compute *= static_cast<double>(blocks);
    const double dma = (load_a + load_b + load_r + store) * static_cast<double>(blocks) / engines;
    vec *= static_cast<double>(blocks);
    const double first = dma_cycles(t.tc, in_cols(t.tow), in_rows(t.toh), j_.C, j_.W * j_.C, c_.act) +
                         dma_cycles(t.tn, t.tc, j_.kh * j_.kw, t.tn, t.tc * t.tn, c_.act);
    const double last = dma_cycles(t.tn, t.tow, t.toh, j_.M, j_.OW * j_.M, c_.act);
    t.compute = compute;
    t.dma = dma;
    t.est = std::max({compute, dma, vec}) + first + last;
  }

  Tiling search(int64_t* evaluated) const {
    Tiling best;
    std::vector<int64_t> gbs;
    for (int64_t d = 1; d <= j_.groups; ++d) {
      if (j_.groups % d == 0 && (d == 1 || d * j_.cg <= 4 * c_.config.systolic_array.rows)) gbs.push_back(d);
    }
    if (gbs.size() > 8) {  // keep 1 and the largest few
      std::vector<int64_t> k = {1};
      k.insert(k.end(), gbs.end() - 7, gbs.end());
      gbs = k;
    }
    const int64_t rows = c_.config.systolic_array.rows, cols = c_.config.systolic_array.cols;
    int64_t n_eval = 0;
    for (int64_t gb : gbs) {
      const int64_t cin_b = gb * j_.cg, cout_b = gb * j_.mg;
      const auto tcs = gb > 1 ? std::vector<int64_t>{cin_b}
                              : candidates(cin_b, std::max<int64_t>(1, rows / (j_.kh * j_.kw)), 8);
      const auto tns = gb > 1 ? std::vector<int64_t>{cout_b} : candidates(cout_b, cols, 8);
      const auto tohs = candidates(j_.OH, 1, 8);
      const auto tows = candidates(j_.OW, 1, 4);
      for (int64_t tc : tcs) {
        for (int64_t tn : tns) {
          for (int64_t toh : tohs) {
            for (int64_t tow : tows) {
              if (toh * tow > 65535 || in_rows(toh) > 65535 || in_cols(tow) > 65535) continue;
              for (int order = 0; order < 2; ++order) {
                Tiling t;
                t.gb = gb, t.tc = tc, t.tn = tn, t.toh = toh, t.tow = tow, t.spatial_outer = order == 0;
                slot_bytes(t);
                if (!fits(t)) continue;
                estimate(t);
                ++n_eval;
                if (t.est < best.est) best = t;
              }
            }
          }
        }
      }
    }
    *evaluated = n_eval;
    return best;
  }

  [[noreturn]] void too_small() const {
    Tiling t;
    t.gb = 1;
    slot_bytes(t);
    const char* buf = "sram.input";
    int64_t need = t.in_bytes, have = c_.capacity(Buffer::kInput);
    if (t.w_bytes > c_.capacity(Buffer::kWeight)) {
      buf = "sram.weight", need = t.w_bytes, have = c_.capacity(Buffer::kWeight);
    } else if (t.acc_bytes > c_.capacity(Buffer::kAccumulator)) {
      buf = "sram.accumulator", need = t.acc_bytes, have = c_.capacity(Buffer::kAccumulator);
    }
    throw CompileError(fmt::format("layer '{}' ({}): even the smallest tile needs {} of {} (have {})",
                                   c_.plan->name, j_.what, kib(need), buf, kib(have)));
  }
  static std::string kib(int64_t b) {
    return b % 1024 == 0 ? fmt::format("{} KiB", b / 1024) : fmt::format("{:.1f} KiB", static_cast<double>(b) / 1024);
  }

  // ---- code generation ----
  void generate(const Tiling& t) {
    const int64_t es = c_.esize;
    const int64_t cin_b = t.gb * j_.cg, cout_b = t.gb * j_.mg, blocks = j_.groups / t.gb;
    const int64_t nk = cdiv(cin_b, t.tc), nn = cdiv(cout_b, t.tn);
    // SRAM slots.
    SramAlloc in{Buffer::kInput}, wt{Buffer::kWeight}, acc{Buffer::kAccumulator};
    const int64_t p_max = t.toh * t.tow;
    uint64_t a_slot[2], b_slot[2], c_slot[2], bias_slot[2] = {0, 0}, r_slot[2] = {0, 0}, o_slot[2] = {0, 0};
    for (int s = 0; s < 2; ++s) a_slot[s] = in.take(static_cast<uint64_t>(in_rows(t.toh) * in_cols(t.tow) * t.tc * es));
    for (int s = 0; s < 2; ++s) b_slot[s] = wt.take(static_cast<uint64_t>(j_.kh * j_.kw * t.tc * t.tn * es));
    for (int s = 0; s < 2; ++s) c_slot[s] = acc.take(static_cast<uint64_t>(p_max * t.tn * 4));
    const Epilogue& e = j_.epi;
    for (int s = 0; s < 2; ++s) {
      if (e.bias == Epilogue::Bias::kRow) bias_slot[s] = acc.take(static_cast<uint64_t>(t.tn * 4));
      if (e.bias == Epilogue::Bias::kCol) bias_slot[s] = acc.take(static_cast<uint64_t>(p_max * 4));
      if (e.bias == Epilogue::Bias::kScalar) bias_slot[s] = acc.take(4);
      if (e.residual || e.bias == Epilogue::Bias::kFull) r_slot[s] = acc.take(static_cast<uint64_t>(p_max * t.tn * 4));
      if (c_.act != DType::kFp32) o_slot[s] = acc.take(static_cast<uint64_t>(p_max * t.tn * es));
    }
    // Constant weights: one contiguous data segment per (block, n chunk, k chunk) tile, laid out as the
    // CONV/MATMUL B operand [kh][kw][tc][tn].
    std::vector<uint64_t> w_addr;
    if (j_.b_const) {
      w_addr.resize(static_cast<size_t>(blocks * nn * nk));
      for (int64_t b = 0; b < blocks; ++b) {
        for (int64_t jn = 0; jn < nn; ++jn) {
          for (int64_t ik = 0; ik < nk; ++ik) {
            const int64_t n0 = jn * t.tn, n1 = std::min(cout_b, n0 + t.tn), k0 = ik * t.tc,
                          k1 = std::min(cin_b, k0 + t.tc);
            std::vector<float> tile(static_cast<size_t>(j_.kh * j_.kw * (k1 - k0) * (n1 - n0)), 0.0f);
            size_t q = 0;
            if (t.gb == 1 && j_.groups == 1) {  // dense: copy rows
              for (int64_t i = 0; i < j_.kh * j_.kw; ++i) {
                for (int64_t k = k0; k < k1; ++k, q += static_cast<size_t>(n1 - n0)) {
                  const float* src = &j_.w[static_cast<size_t>((i * j_.cg + k) * j_.mg + n0)];
                  std::copy(src, src + (n1 - n0), tile.begin() + static_cast<long>(q));
                }
              }
              w_addr[static_cast<size_t>((b * nn + jn) * nk + ik)] = c_.add_floats(tile, c_.act);
              continue;
            }
            for (int64_t i = 0; i < j_.kh; ++i) {
              for (int64_t jj = 0; jj < j_.kw; ++jj) {
                for (int64_t k = k0; k < k1; ++k) {
                  for (int64_t n = n0; n < n1; ++n, ++q) {
                    const int64_t gk = b * t.gb + k / j_.cg, gn = b * t.gb + n / j_.mg;
                    if (gk != gn) continue;  // off the block diagonal
                    const int64_t c = k % j_.cg, m = n % j_.mg;
                    tile[q] = j_.w[static_cast<size_t>(((gk * j_.kh + i) * j_.kw + jj) * j_.cg * j_.mg + c * j_.mg + m)];
                  }
                }
              }
            }
            w_addr[static_cast<size_t>((b * nn + jn) * nk + ik)] = c_.add_floats(tile, c_.act);
          }
        }
      }
    }
    struct Spatial {
      int64_t img, oy0, oh, ox0, ow;
    };
    std::vector<Spatial> sp;
    for (int64_t img = 0; img < j_.images; ++img) {
      for (int64_t oy = 0; oy < j_.OH; oy += t.toh) {
        for (int64_t ox = 0; ox < j_.OW; ox += t.tow) {
          sp.push_back({img, oy, std::min(t.toh, j_.OH - oy), ox, std::min(t.tow, j_.OW - ox)});
        }
      }
    }
    int a_next = 0, b_next = 0, c_next = 0;
    int64_t a_key = -1, b_key = -1;  // what the most recent A / B slot holds (reuse)
    uint64_t a_cur = 0, b_cur = 0;
    const bool reuse_a = t.spatial_outer && nk == 1, reuse_b = !t.spatial_outer && nk == 1;
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t cin0 = b * cin_b, cout0 = b * cout_b;
      auto tile = [&](int64_t si, int64_t jn) {
        const Spatial& s = sp[static_cast<size_t>(si)];
        const int64_t n0 = jn * t.tn, tn = std::min(t.tn, cout_b - n0);
        const int cs = c_next;
        c_next ^= 1;
        for (int64_t ik = 0; ik < nk; ++ik) {
          const int64_t k0 = ik * t.tc, tc = std::min(t.tc, cin_b - k0);
          // Input tile with halo.
          const int64_t akey = (b * static_cast<int64_t>(sp.size()) + si) * nk + ik;
          if (!(reuse_a && a_key == akey)) {
            a_cur = a_slot[a_next];
            a_next ^= 1;
            a_key = akey;
            load_input(s.img, s.oy0, s.oh, s.ox0, s.ow, cin0 + k0, tc, a_cur);
          }
          const int64_t wkey = (b * nn + jn) * nk + ik;
          // A runtime B differs per image, so it is reused only within one.
          const int64_t bkey = j_.b_const ? wkey : s.img * blocks * nn * nk + wkey;
          if (!(reuse_b && b_key == bkey)) {
            b_cur = b_slot[b_next];
            b_next ^= 1;
            b_key = bkey;
            if (j_.b_const) {
              const uint64_t addr = w_addr[static_cast<size_t>(wkey)];
              const Range r{kDram, addr, addr + static_cast<uint64_t>(j_.kh * j_.kw * tc * tn * es)};
              c_.load(Buffer::kWeight, b_cur, r, addr, c_.act, {tn, tc, j_.kh * j_.kw, 1}, {tn, tc * tn, 0});
            } else {
              // Runtime B [K, N] of this image (gemm only).
              const uint64_t addr = j_.b_base(s.img) + static_cast<uint64_t>((k0 * j_.M + n0) * es);
              c_.load(Buffer::kWeight, b_cur, j_.b_range, addr, c_.act, {tn, tc, 1, 1}, {j_.M, 0, 0});
            }
          }
          if (j_.gemm) {
            c_.matmul(a_cur, tc, b_cur, c_slot[cs], s.oh * s.ow, tc, tn, ik > 0);
          } else {
            c_.conv(a_cur, b_cur, c_slot[cs], in_rows(s.oh), in_cols(s.ow), tc, s.oh, s.ow, tn, j_.kh, j_.kw, j_.sh,
                    j_.sw, j_.dh, j_.dw, ik > 0);
          }
        }
        epilogue(s.img, s.oy0, s.oh, s.ox0, s.ow, cout0 + n0, tn, c_slot[cs], bias_slot[cs], r_slot[cs], o_slot[cs]);
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
    c_.plan->sram_input_bytes = static_cast<int64_t>(in.next);
    c_.plan->sram_weight_bytes = static_cast<int64_t>(wt.next);
    c_.plan->sram_acc_bytes = static_cast<int64_t>(acc.next);
  }

  void load_input(int64_t img, int64_t oy0, int64_t oh, int64_t ox0, int64_t ow, int64_t c0, int64_t tc, uint64_t slot) {
    const int64_t iy0 = oy0 * j_.sh - j_.pt, iy1 = iy0 + in_rows(oh) - 1;
    const int64_t ix0 = ox0 * j_.sw - j_.pl, ix1 = ix0 + in_cols(ow) - 1;
    const int64_t ptop = std::max<int64_t>(0, -iy0), pbot = std::max<int64_t>(0, iy1 - (j_.H - 1));
    const int64_t pleft = std::max<int64_t>(0, -ix0), pright = std::max<int64_t>(0, ix1 - (j_.W - 1));
    const int64_t ry0 = std::max<int64_t>(0, iy0), rx0 = std::max<int64_t>(0, ix0);
    const int64_t rows = in_rows(oh) - ptop - pbot, cols = in_cols(ow) - pleft - pright;
    const uint64_t addr = j_.a_base(img) + static_cast<uint64_t>(((ry0 * j_.W + rx0) * j_.C + c0) * c_.esize);
    c_.load(Buffer::kInput, slot, j_.a_range, addr, c_.act, {tc, cols, rows, 1}, {j_.C, j_.W * j_.C, 0},
            {ptop, pbot, pleft, pright}, 0);
  }

  void epilogue(int64_t img, int64_t oy0, int64_t oh, int64_t ox0, int64_t ow, int64_t n0, int64_t tn, uint64_t cs,
                uint64_t bias_s, uint64_t r_s, uint64_t o_s) {
    const Epilogue& e = j_.epi;
    const int64_t p = oh * ow;
    const Buffer A = Buffer::kAccumulator;
    const uint64_t yoff = static_cast<uint64_t>(((oy0 * j_.OW + ox0) * j_.M + n0) * c_.esize);
    const std::array<int64_t, 4> box = {tn, ow, oh, 1};
    const std::array<int64_t, 3> strides = {j_.M, j_.OW * j_.M, 0};
    // Each step reads `cur` (fp32 in the accumulator) and the last one converts to the activation dtype.
    std::vector<Context::VecArgs> steps;
    auto base = [&](VecOp op) {
      Context::VecArgs v;
      v.op = op;
      v.src1_buf = A, v.src1 = cs, v.dst_buf = A, v.dst = cs, v.src2_buf = A;
      v.d0 = tn, v.d1 = p, v.d2 = 1;
      return v;
    };
    if (e.bias != Epilogue::Bias::kNone) {
      const Range all{kDram, e.bias_addr, e.bias_addr + 1};
      Context::VecArgs v = base(VecOp::kAdd);
      v.src2 = bias_s;
      switch (e.bias) {
        case Epilogue::Bias::kRow:
          c_.load(A, bias_s, all, e.bias_addr + static_cast<uint64_t>(n0 * 4), DType::kFp32, {tn, 1, 1, 1}, {0, 0, 0});
          v.bcast = isa::Bcast::kRow;
          break;
        case Epilogue::Bias::kCol:  // gemm only: one value per output row (M index = oy)
          c_.load(A, bias_s, all, e.bias_addr + static_cast<uint64_t>(oy0 * 4), DType::kFp32, {oh, 1, 1, 1}, {0, 0, 0});
          v.bcast = isa::Bcast::kCol;
          break;
        case Epilogue::Bias::kScalar:
          c_.load(A, bias_s, all, e.bias_addr, DType::kFp32, {1, 1, 1, 1}, {0, 0, 0});
          v.bcast = isa::Bcast::kScalar;
          break;
        case Epilogue::Bias::kFull:
          c_.load(A, r_s, all, e.bias_addr + static_cast<uint64_t>((oy0 * e.bias_cols + n0) * 4), DType::kFp32,
                  {tn, oh, 1, 1}, {e.bias_cols, 0, 0});
          v.src2 = r_s;
          break;
        case Epilogue::Bias::kNone:
          break;
      }
      steps.push_back(v);
    }
    if (e.residual) {
      const uint64_t raddr = j_.res_base(img) + yoff;
      c_.load(A, r_s, e.res->range(), raddr, c_.act, box, strides);
      if (c_.act != DType::kFp32) {
        Context::VecArgs cv = base(VecOp::kCopy);
        cv.src1 = r_s, cv.dst = r_s, cv.in = c_.act, cv.out = DType::kFp32;
        c_.vec(cv);
      }
      Context::VecArgs v = base(VecOp::kAdd);
      v.src2 = r_s;
      steps.push_back(v);
    }
    if (e.has_act) {
      Context::VecArgs v = base(e.act);
      v.imm0 = e.imm0, v.imm1 = e.imm1;
      steps.push_back(v);
    }
    if (c_.act != DType::kFp32 && steps.empty()) steps.push_back(base(VecOp::kCopy));
    if (c_.act != DType::kFp32) {
      steps.back().dst = o_s;
      steps.back().out = c_.act;
    }
    for (const auto& v : steps) c_.vec(v);
    const uint64_t src = c_.act == DType::kFp32 ? cs : o_s;
    c_.store(A, src, j_.y_range, j_.y_base(img) + yoff, c_.act, box, strides);
  }

 private:
  Context& c_;
  MatrixJob& j_;
  mutable std::map<std::array<int64_t, 6>, double> dma_memo_;
};

bool set_activation(const Node& n, Epilogue& e) {
  const std::string act = n.attr_string(kActivation, "");
  if (act.empty()) return true;
  e.has_act = true;
  if (act == "Relu") {
    e.act = VecOp::kRelu;
  } else if (act == "Clip") {
    e.act = VecOp::kClip;
    e.imm0 = f32_imm(n.attr_float(kActMin, -INFINITY));
    e.imm1 = f32_imm(n.attr_float(kActMax, INFINITY));
  } else if (act == "Sigmoid") {
    e.act = VecOp::kSigmoid;
  } else if (act == "Tanh") {
    e.act = VecOp::kTanh;
  } else if (act == "LeakyRelu") {
    e.act = VecOp::kLeakyRelu;
    e.imm0 = f32_imm(n.attr_float(kAlpha, 0.01f));
  } else if (act == "HardSigmoid") {
    e.act = VecOp::kHardSigmoid;
    e.imm0 = f32_imm(n.attr_float(kAlpha, 0.2f));
    e.imm1 = f32_imm(n.attr_float(kBeta, 0.5f));
  } else if (act == "HardSwish") {
    e.act = VecOp::kHardSwish;
  } else if (act == "Gelu") {
    e.act = VecOp::kGelu;
  } else {
    return false;
  }
  return true;
}

bool same_layout(const DramTensor& a, const DramTensor& b) { return a.phys == b.phys; }

void run(Context& c, MatrixJob& j) {
  MatrixMapper mm(c, j);
  int64_t evaluated = 0;
  const Tiling t = mm.search(&evaluated);
  if (evaluated == 0) mm.too_small();
  LayerPlan& p = *c.plan;
  p.group_block = t.gb;
  p.tile_oh = t.toh;
  p.tile_ow = t.tow;
  p.tile_m = t.toh * t.tow;
  p.tile_k = j.kh * j.kw * t.tc;
  p.tile_n = t.tn;
  p.loop_order = t.spatial_outer ? "spatial-outer (input tile resident)" : "channel-outer (weight tile resident)";
  p.est_cycles = static_cast<int64_t>(t.est);
  p.est_compute_cycles = static_cast<int64_t>(t.compute);
  p.est_dma_cycles = static_cast<int64_t>(t.dma);
  p.candidates = evaluated;
  p.macs = j.images * j.OH * j.OW * j.M * j.kh * j.kw * j.cg;
  const int64_t before = c.em.size();
  mm.generate(t);
  p.instructions = c.em.size() - before;
}

std::vector<float> const_floats(const Context& c, const std::string& name) {
  return c.g.value(name).constant->to_float_vector();
}

// A 2-D convolution over NHWC tensors: the node's own (Conv) or one derived from it (ConvTranspose as
// a stride-1 conv over a zero-inserted copy of its input). w is [M][cg][kh][kw].
struct ConvSpec {
  const DramTensor* x = nullptr;
  const DramTensor* y = nullptr;
  std::vector<float> w;
  int64_t groups = 1, kh = 1, kw = 1, sh = 1, sw = 1, dh = 1, dw = 1, pt = 0, pl = 0;
};

bool lower_conv_spec(Context& c, const Node& n, const ConvSpec& cs) {
  const DramTensor& x = *cs.x;
  const DramTensor& y = *cs.y;
  MatrixJob j;
  j.images = x.shape[0];
  j.C = x.shape[1], j.H = x.shape[2], j.W = x.shape[3];
  j.M = y.shape[1], j.OH = y.shape[2], j.OW = y.shape[3];
  j.groups = cs.groups;
  j.cg = j.C / j.groups, j.mg = j.M / j.groups;
  j.kh = cs.kh, j.kw = cs.kw, j.sh = cs.sh, j.sw = cs.sw, j.dh = cs.dh, j.dw = cs.dw, j.pt = cs.pt, j.pl = cs.pl;
  // Tiles read at least one real row/column only when no padding exceeds the kernel's reach.
  if (j.pt > (j.kh - 1) * j.dh || j.pl > (j.kw - 1) * j.dw) return false;
  if ((j.OH - 1) * j.sh + (j.kh - 1) * j.dh - j.pt - (j.H - 1) > (j.kh - 1) * j.dh) return false;
  if ((j.OW - 1) * j.sw + (j.kw - 1) * j.dw - j.pl - (j.W - 1) > (j.kw - 1) * j.dw) return false;
  if (j.pt > 255 || j.pl > 255 || j.kh > 255 || j.kw > 255 || j.sh > 255 || j.dh > 255) return false;
  const std::vector<float>& w = cs.w;
  // Weights [M][cg][kh][kw] -> [g][kh][kw][cg][mg].
  j.w.assign(w.size(), 0.0f);
  for (int64_t m = 0; m < j.M; ++m) {
    const int64_t g = m / j.mg, mm = m % j.mg;
    for (int64_t ci = 0; ci < j.cg; ++ci) {
      for (int64_t i = 0; i < j.kh; ++i) {
        for (int64_t jj = 0; jj < j.kw; ++jj) {
          j.w[static_cast<size_t>(((g * j.kh + i) * j.kw + jj) * j.cg * j.mg + ci * j.mg + mm)] =
              w[static_cast<size_t>(((m * j.cg + ci) * j.kh + i) * j.kw + jj)];
        }
      }
    }
  }
  const uint64_t es = static_cast<uint64_t>(c.esize);
  const uint64_t xa = x.addr, ya = y.addr;
  const int64_t xs = j.H * j.W * j.C, ys = j.OH * j.OW * j.M;
  j.a_base = [=](int64_t img) { return xa + static_cast<uint64_t>(img * xs) * es; };
  j.y_base = [=](int64_t img) { return ya + static_cast<uint64_t>(img * ys) * es; };
  j.a_range = x.range();
  j.y_range = y.range();
  if (n.has_input(2)) {
    const Value& bv = c.g.value(n.inputs[2]);
    if (!bv.is_constant()) return false;
    j.epi.bias = Epilogue::Bias::kRow;
    j.epi.bias_addr = c.add_floats(bv.constant->to_float_vector(), DType::kFp32);
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
  j.what = fmt::format("Conv {}x{}x{}->{}{}", j.kh, j.kw, j.C, j.M, j.groups > 1 ? fmt::format(" group {}", j.groups) : "");
  c.plan->mapping = fmt::format("CONV {}x{} stride {}x{} dilation {}x{}{}", j.kh, j.kw, j.sh, j.sw, j.dh, j.dw,
                                j.groups > 1 ? fmt::format(", {} groups", j.groups) : "");
  run(c, j);
  if (j.groups > 1) {
    c.plan->mapping += fmt::format(" as {} block-diagonal blocks of {} groups", j.groups / c.plan->group_block,
                                   c.plan->group_block);
  }
  return true;
}

bool lower_conv(Context& c, const Node& n) {
  const Value& xv = c.g.value(n.inputs[0]);
  const Value& wv = c.g.value(n.inputs[1]);
  if (xv.shape.size() != 4 || !wv.is_constant() || n.op_type != "Conv") return false;
  const DramTensor& x = c.tensor(n.inputs[0]);
  const DramTensor& y = c.tensor(n.outputs[0]);
  if (x.layout != kNhwc || y.layout != kNhwc) return false;
  ConvSpec cs;
  cs.x = &x, cs.y = &y;
  cs.groups = n.attr_int("group", 1);
  cs.kh = wv.shape[2], cs.kw = wv.shape[3];
  const auto st = n.attr_ints("strides", {1, 1}), dl = n.attr_ints("dilations", {1, 1});
  cs.sh = st[0], cs.sw = st[1], cs.dh = dl[0], cs.dw = dl[1];
  const int64_t H = x.shape[2], W = x.shape[3], OH = y.shape[2], OW = y.shape[3];
  const std::string auto_pad = n.attr_string("auto_pad", "NOTSET");
  if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    const int64_t ph = std::max<int64_t>(0, (OH - 1) * cs.sh + (cs.kh - 1) * cs.dh + 1 - H);
    const int64_t pw = std::max<int64_t>(0, (OW - 1) * cs.sw + (cs.kw - 1) * cs.dw + 1 - W);
    cs.pt = auto_pad == "SAME_UPPER" ? ph / 2 : ph - ph / 2;
    cs.pl = auto_pad == "SAME_UPPER" ? pw / 2 : pw - pw / 2;
  } else {
    const auto pads = n.attr_ints("pads", {0, 0, 0, 0});
    cs.pt = pads[0], cs.pl = pads[1];
  }
  cs.w = const_floats(c, n.inputs[1]);
  return lower_conv_spec(c, n, cs);
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
  if (x.layout != kNhwc || y.layout != kNhwc) return false;
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
  const auto st = n.attr_ints("strides", {1, 1}), dl = n.attr_ints("dilations", {1, 1});
  const auto opad = n.attr_ints("output_padding", {0, 0});
  auto oshape = n.attr_ints("output_shape", {});
  const std::string auto_pad = n.attr_string("auto_pad", "NOTSET");
  const int64_t s[2] = {st[0], st[1]}, d[2] = {dl[0], dl[1]}, k[2] = {kh, kw}, in[2] = {H, W}, out[2] = {OH, OW};
  int64_t pb[2] = {0, 0};
  for (int i = 0; i < 2; ++i) {
    const int64_t full = s[i] * (in[i] - 1) + opad[static_cast<size_t>(i)] + (k[i] - 1) * d[i] + 1;
    if (!oshape.empty() || auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      const int64_t total = full - out[i];
      const int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);
      pb[i] = auto_pad == "SAME_UPPER" ? half : total - half;
    } else if (auto_pad == "NOTSET") {
      pb[i] = n.attr_ints("pads", {0, 0, 0, 0})[static_cast<size_t>(i)];
    }
  }
  // Zero-inserted, padded input: pixel (iy, ix) at (lead_h + iy*sh, lead_w + ix*sw).
  const int64_t lead_h = (kh - 1) * d[0] - pb[0], lead_w = (kw - 1) * d[1] - pb[1];
  const int64_t HP = OH + (kh - 1) * d[0], WP = OW + (kw - 1) * d[1];
  const DramTensor xp = scratch_tensor(c, {N, C, HP, WP}, kNhwc);
  std::vector<int64_t> map(static_cast<size_t>(N * HP * WP * C), -1);
  for (int64_t b = 0; b < N; ++b) {
    for (int64_t iy = 0; iy < H; ++iy) {
      const int64_t py = lead_h + iy * s[0];
      if (py < 0 || py >= HP) continue;
      for (int64_t ix = 0; ix < W; ++ix) {
        const int64_t px = lead_w + ix * s[1];
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
  cs.groups = groups, cs.kh = kh, cs.kw = kw, cs.dh = d[0], cs.dw = d[1];
  // W [C][mg][kh][kw] -> conv weights [M][cg][kh][kw], flipped.
  const std::vector<float> w = const_floats(c, n.inputs[1]);
  cs.w.assign(static_cast<size_t>(M * cg * kh * kw), 0.0f);
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t m = 0; m < mg; ++m) {
      for (int64_t ci = 0; ci < cg; ++ci) {
        for (int64_t i = 0; i < kh; ++i) {
          for (int64_t jj = 0; jj < kw; ++jj) {
            cs.w[static_cast<size_t>((((g * mg + m) * cg + ci) * kh + i) * kw + jj)] =
                w[static_cast<size_t>((((g * cg + ci) * mg + m) * kh + (kh - 1 - i)) * kw + (kw - 1 - jj))];
          }
        }
      }
    }
  }
  if (!lower_conv_spec(c, n, cs)) throw std::logic_error("backend: the zero-inserted conv of a ConvTranspose");
  c.plan->mapping = fmt::format("zero-inserted input (stride {}x{}) + {}", s[0], s[1], c.plan->mapping);
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
  MatrixJob j;
  j.gemm = true;
  j.C = K, j.W = 1, j.OW = 1, j.M = N;
  j.cg = K, j.mg = N;
  const Shape a_batch(as.begin(), as.end() - 2), b_batch(bs.begin(), bs.end() - 2);
  const int64_t a_count = num_elements(a_batch);
  const uint64_t aa = a.addr, ya = y.addr;
  if (bv.is_constant() && b_batch.empty()) {
    // Shared 2-D weights: fold every batch dimension of A into M.
    j.images = 1;
    j.H = j.OH = a_count * M;
    j.a_base = [=](int64_t) { return aa; };
    j.y_base = [=](int64_t) { return ya; };
    j.w = bv.constant->to_float_vector();  // [K][N] = [g=1][1][1][cg][mg]
  } else {
    if (bv.is_constant()) return false;  // batched constant weights: not mapped
    const DramTensor& b = c.tensor(n.inputs[1]);
    if (!b.layout.empty()) return false;
    // Broadcast the batch dims to the output's.
    const Shape yb(y.shape.begin(), y.shape.end() - (y.shape.size() >= 2 && a.shape.size() >= 2 && bv.shape.size() >= 2 ? 2 : 1));
    const int64_t images = num_elements(yb);
    auto offsets = [&](const Shape& batch) {
      std::vector<int64_t> off(static_cast<size_t>(images));
      const size_t r = yb.size();
      for (int64_t idx = 0; idx < images; ++idx) {
        int64_t rem = idx, o = 0, stride = 1;
        std::vector<int64_t> coord(r);
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
    if (a_batch.size() > yb.size() || b_batch.size() > yb.size()) return false;
    const auto ao = offsets(a_batch), bo = offsets(b_batch);
    j.images = images;
    j.H = j.OH = M;
    j.b_const = false;
    const uint64_t ba = b.addr;
    j.a_base = [=](int64_t img) { return aa + static_cast<uint64_t>(ao[static_cast<size_t>(img)] * M * K) * es; };
    j.b_base = [=](int64_t img) { return ba + static_cast<uint64_t>(bo[static_cast<size_t>(img)] * K * N) * es; };
    j.y_base = [=](int64_t img) { return ya + static_cast<uint64_t>(img * M * N) * es; };
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
    } else if (cv.shape.size() == 2 && cv.shape[0] == M && cv.shape[1] == 1 && j.images == 1 && total_m == M) {
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
  run(c, j);
  return true;
}

}  // namespace

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
