#pragma once
// Narrow convolutions with several output pixels side by side on the array's columns (internal to the back
// end). A fold streams its rows through every cell of the array however few columns it fills: on a 128 x 256
// array a conv with 64 output channels leaves three quarters of the columns idle, and conv1's 147-element
// reduction fills 147 of 256 rows in two folds. Packed p pixels a column, output pixels x .. x + p - 1 of a
// row share one input row vector covering their union receptive field: the conv becomes one of kernel
// kh x ((p - 1) * sw + (kw - 1) * dw + 1), stride sh x p * sw, dilation dh x 1 and p * M output channels,
// whose weights hold the kernel at p shifted positions and zeros elsewhere (packed_weights). Its input is the
// same NHWC tensor and its output, pixel x of p * M channels, is the same NHWC tensor (OW / p pixels of p * M
// channels lie as OW pixels of M), so nothing moves but the weights, which the compiler prepares as constant
// data segments (DMA'd and counted like any weight tile), and the per-channel epilogue vectors, repeated p
// times. The array streams OH * OW / p rows instead of OH * OW through a reduction (p - 1) * sw / kw longer:
// layer1's 3x3 convs of ResNet-50 on datacenter take 9 folds of 6272 rows instead of 5 of 25088.
//
// Exactness: each output element sums the same products in the same order (kernel row, kernel column,
// channel, with the same channel chunks: the packed search keeps the unpacked tiling's tc,
// MatrixJob::fixed_tc), plus products with zero weights, which leave an fp32 or integer sum unchanged:
// integers exactly; floats because x + (+-0) == x for every x that is not -0, and a sum starting from +0 that
// adds finite products is never -0. (An input holding inf or NaN makes 0 * inf = NaN: a packed conv then
// turns an output that the unpacked one left finite into NaN, as block-diagonal grouped convs do.)
//
// The choice: after MatrixMapper::choose has picked the unpacked tiling, each pixel count whose whole folds
// (closed form) are fewer is mapped (choose: its best tilings simulated) and undone; the fastest simulated
// wins (without a timer, the closed forms), remembered per geometry (Context::decided). A mapping file's
// pack_pixels imposes the packing (its other tile keys are then the packed conv's); an entry with tile keys
// and no pack_pixels maps the conv unpacked.
#include <fmt/format.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "compiler/backend/core/context.h"
#include "compiler/backend/fusion/layer_fusion.h"
#include "compiler/backend/fusion/residency.h"
#include "compiler/backend/matrix/matrix_walk.h"

namespace npusim::compiler::backend {

// Whether dense conv job j (its on-chip placement set) can run packed p pixels a column: one group, constant
// weights from DRAM, input and output dense NHWC (no view, no line buffer), OW divisible by p, p * M output
// channels within one fold of the array's columns and the packed kernel within CONV's fields.
bool packable(const Context& c, const MatrixJob& j, int64_t p);
// Job j's geometry packed p pixels a column (packable first): the kernel, stride, dilation, output columns
// and channels as above.
void pack_geometry(MatrixJob& j, int64_t p);
// The pixel counts worth trying for job j: packable ones whose whole folds of the array (closed form) are
// fewer than unpacked, the two with the fewest, fewest first. Empty on arrays whose columns the conv fills,
// under a mapping policy other than the search, and for a SCALE-Sim topology (its cross-checks compare the
// array's cycles of the convs as SCALE-Sim maps them).
std::vector<int64_t> pack_candidates(const Context& c, const MatrixJob& j);
// The layer's imposed pack_pixels (a mapping file's entry): nullopt when none is imposed; 1 when the entry
// has tile keys without it (the conv is mapped unpacked).
std::optional<int64_t> imposed_packing(const Context& c);

// Weights in job layout [1][kh][kw][C][M] (grouped_weights of a dense conv) packed p pixels a column:
// [1][kh][kw'][C][p * M], output pixel q's kernel at columns q * sw + jj * dw, zeros elsewhere.
template <typename T>
std::vector<T> packed_weights(const MatrixJob& j, const std::vector<T>& w, int64_t p) {
  const int64_t kwp = (p - 1) * j.sw + (j.kw - 1) * j.dw + 1, n = p * j.M;
  std::vector<T> r(static_cast<size_t>(j.kh * kwp * j.C * n), T(0));
  for (int64_t i = 0; i < j.kh; ++i)
    for (int64_t jj = 0; jj < j.kw; ++jj)
      for (int64_t q = 0; q < p; ++q) {
        const int64_t col = q * j.sw + jj * j.dw;
        for (int64_t ch = 0; ch < j.C; ++ch) {
          const T* src = &w[static_cast<size_t>(((i * j.kw + jj) * j.C + ch) * j.M)];
          T* dst = &r[static_cast<size_t>(((i * kwp + col) * j.C + ch) * n + q * j.M)];
          std::copy(src, src + j.M, dst);
        }
      }
  return r;
}

// A per-channel vector of the layer as the packed job's: channel q * M + m is channel m.
template <typename T>
std::vector<T> packed_channels(const std::vector<T>& v, int64_t p) {
  std::vector<T> r;
  r.reserve(v.size() * static_cast<size_t>(p));
  for (int64_t q = 0; q < p; ++q) r.insert(r.end(), v.begin(), v.end());
  return r;
}

// What a precision supplies: its packed job's weights and epilogue constants (the geometry already packed,
// the unpacked job's placement copied); false when it does not take the form (nothing then counts).
template <typename Job>
using BuildPacked = std::function<bool(Job& packed, int64_t p)>;

// Why a line buffer's bands run packed (packed_for_line_buffer): imposed, or the whole job's simulation.
std::string line_buffer_packing(const Context& c);
// The MappingError of an imposed pack_pixels that job j cannot take.
[[noreturn]] void throw_unpackable(const Context& c, const MatrixJob& j, int64_t p);
// The layer's plan after a packed job's record_tiling: the useful MACs (the unpacked conv's), the mapping
// file's pack_pixels and the mapping line.
void record_packing(Context& c, const MatrixJob& unpacked, const MatrixJob& packed, int64_t p,
                    const std::string& against);
// Decides between the unpacked tiling (simulated cycles, or -1; its closed form `est`) and the candidates'
// figures (`figure`: a pixel count's simulated cycles, or closed form without a timer; nullopt: not
// mapped), remembered under the job's key. Returns the winning pixel count (1: unpacked).
int64_t decide_packing(Context& c, const MatrixJob& j, const MatrixStrategy& s, MatrixMapper& mm,
                       const Tiling& unpacked, const std::vector<int64_t>& ps,
                       const std::function<std::optional<double>(int64_t p)>& figure);

// The job of precision Job (strategy Strategy) packed p pixels a column, mapped: with emit, recorded in
// c.plan and generated; otherwise its figure (simulated cycles of its best tiling, or its closed form without
// a timer), its code undone. imposed: a mapping file's packing, placed on chip on its own (map_matrix_job).
// nullopt when the precision refuses the form or no tiling fits.
template <typename Job, typename Strategy>
std::optional<double> map_packed(Context& c, const Job& j, const Tiling* unpacked, int64_t p, bool emit,
                                 bool imposed, const BuildPacked<Job>& build,
                                 const std::string& against = "") {
  Job jp = j;
  pack_geometry(jp, p);
  jp.fixed_tc = unpacked ? unpacked->tc : 0;  // the products' order (above)
  if (!build(jp, p)) return std::nullopt;
  Strategy s(c, jp);
  MatrixMapper mm(c, jp, s);
  Tiling t;
  int64_t evaluated = 0;
  if (imposed) {
    if (map_matrix_job(c, jp, s, mm, &t, &evaluated))
      throw std::logic_error("backend: packed conv on vector");
  } else {
    t = mm.choose(&evaluated);
  }
  if (evaluated == 0) return std::nullopt;
  if (!emit) {
    if (!c.can_time()) return t.est;
    if (t.simulated >= 0 && c.options.objective == MappingObjective::kCycles)
      return static_cast<double>(t.simulated);
    const int64_t first = c.em.size();
    const Context::Trial trial = c.begin_trial();
    mm.generate(t);
    const double score = c.objective_score(first, c.time_layer(first));
    c.end_trial(trial);
    return score;
  }
  record_tiling(c, jp, t, evaluated);
  record_packing(c, j, jp, p, against);
  const int64_t before = c.em.size();
  mm.generate(t);
  c.plan->instructions = c.em.size() - before;
  return t.est;
}

// After the unpacked job j was mapped under `unpacked` (not yet generated, on the array): emits the packed
// job instead when a candidate is faster (decide_packing) and returns true; else returns false with c.timed
// as the unpacked mapping left it.
template <typename Job, typename Strategy>
bool lower_packed(Context& c, const Job& j, const Strategy& s, MatrixMapper& mm, const Tiling& unpacked,
                  const BuildPacked<Job>& build) {
  if (imposed_packing(c)) return false;  // an entry's tiles are the unpacked conv's (run_imposed_packing)
  const std::vector<int64_t> ps = pack_candidates(c, j);
  if (ps.empty()) return false;
  const Context::Timed timed = c.timed;
  std::vector<std::pair<int64_t, Context::Timed>> times;
  const int64_t p = decide_packing(c, j, s, mm, unpacked, ps, [&](int64_t q) {
    const Context::Trial mark = c.mark();
    c.timed = {};
    const std::optional<double> f = map_packed<Job, Strategy>(c, j, &unpacked, q, false, false, build);
    times.emplace_back(q, c.timed);  // set when its tilings were simulated now
    c.end_trial(mark);
    return f;
  });
  c.timed = timed;
  if (p == 1) return false;
  c.timed = {};
  for (const auto& [q, t] : times)
    if (q == p) c.timed = t;  // the winner's trial, emitted again unchanged (lower_layers checks its span)
  const std::string against = unpacked.simulated >= 0
                                  ? fmt::format("{} cycles unpacked", unpacked.simulated)
                                  : fmt::format("{:.0f} cycles estimated unpacked", unpacked.est);
  if (!map_packed<Job, Strategy>(c, j, &unpacked, p, true, false, build, against))
    throw std::logic_error("backend: a packed conv mapped in its trial does not map");
  return true;
}

// A mapping file's pack_pixels above 1 on this layer: emits the job packed so (placed on chip on its own)
// and returns true; false when none is imposed. A conv that cannot take it is a MappingError.
template <typename Job, typename Strategy>
bool run_imposed_packing(Context& c, const Job& j, const BuildPacked<Job>& build) {
  const std::optional<int64_t> p = imposed_packing(c);
  if (!p || *p == 1) return false;
  if (!packable(c, j, *p) ||
      !map_packed<Job, Strategy>(c, j, nullptr, *p, true, true, build, "imposed by the mapping file"))
    throw_unpackable(c, j, *p);
  return true;
}

// A conv a pool's line buffer may take (pool_line_buffer_next, fusion/layer_fusion.h; a depthwise reader's
// bands stay unpacked) runs its bands packed when its whole job is
// faster packed (decide_packing against MatrixMapper::choose's tiling, or a mapping file's pack_pixels): the
// packed job to hand the bands, its constants built; nullopt otherwise. The bands' rows land in the line
// buffer as the unpacked ones do (OW / p pixels of p * M channels are OW pixels of M).
template <typename Job, typename Strategy>
std::optional<Job> packed_for_line_buffer(Context& c, const Job& j, const BuildPacked<Job>& build) {
  if (!pool_line_buffer_next(c)) return std::nullopt;
  const std::optional<int64_t> imposed = imposed_packing(c);
  int64_t p = imposed.value_or(1), tc = 0;
  if (!imposed) {
    const std::vector<int64_t> ps = pack_candidates(c, j);
    if (ps.empty()) return std::nullopt;
    Strategy s(c, j);
    MatrixMapper mm(c, j, s);
    int64_t evaluated = 0;
    const Tiling t = mm.choose(&evaluated);
    if (evaluated == 0) return std::nullopt;
    tc = t.tc;
    p = decide_packing(c, j, s, mm, t, ps, [&](int64_t q) {
      const Context::Trial mark = c.mark();
      const std::optional<double> f = map_packed<Job, Strategy>(c, j, &t, q, false, false, build);
      c.end_trial(mark);
      return f;
    });
    c.timed = {};
  }
  if (p == 1) return std::nullopt;
  Job jp = j;
  if (packable(c, j, p)) {
    pack_geometry(jp, p);
    jp.fixed_tc = tc;
    if (build(jp, p)) return jp;
  }
  throw_unpackable(c, j, p);  // only imposed counts reach here: a candidate is packable and built
}

}  // namespace npusim::compiler::backend
