// Narrow convolutions with several output pixels side by side on the array's columns (see pixel_packing.h).
#include "compiler/backend/matrix/pixel_packing.h"

#include <algorithm>

namespace npusim::compiler::backend {

namespace {

int64_t packed_kw(const MatrixJob& j, int64_t p) { return (p - 1) * j.sw + (j.kw - 1) * j.dw + 1; }

// Whole folds of the array a conv of reduction k and n output channels over `pixels` output pixels streams:
// each fold streams every pixel (the closed form that ranks the pixel counts; the simulator decides).
int64_t whole_folds(const Context& c, int64_t k, int64_t n, int64_t pixels) {
  return ceil_div(k, c.config.systolic_array.rows) * ceil_div(n, c.config.systolic_array.cols) * pixels;
}

int64_t folds_packed(const Context& c, const MatrixJob& j, int64_t p) {
  return whole_folds(c, j.kh * packed_kw(j, p) * j.C, p * j.M, j.images * j.OH * j.OW / p);
}

}  // namespace

bool packable(const Context& c, const MatrixJob& j, int64_t p) {
  // An input on chip only padded (MatrixJob::a_pad_w): the packed windows span the same input columns.
  if (p < 2 || j.gemm || j.groups != 1 || !j.b_const || j.b_sram >= 0 || (j.a_sram >= 0 && j.a_pad_w == 0))
    return false;
  if (j.a_pitch || j.y_pitch || j.y_row || j.y_sram_row || j.step_h != 1 || j.step_w != 1 || j.src_w)
    return false;
  if (j.OW % p != 0 || p * j.M > c.config.systolic_array.cols) return false;
  MatrixJob q = j;
  pack_geometry(q, p);
  return q.kw <= 255 && q.sw <= 255 && q.conv_mappable() && (q.a_pad_w == 0 || q.in_cols(q.OW) <= q.a_pad_w);
}

void pack_geometry(MatrixJob& j, int64_t p) {
  j.kw = packed_kw(j, p);
  j.sw *= p;
  j.dw = 1;
  j.OW /= p;
  j.M *= p;
  j.mg = j.M;
  j.pack = p;
}

std::vector<int64_t> pack_candidates(const Context& c, const MatrixJob& j) {
  if (c.g.nhwc_io || c.config.lowering.mapping_policy != isa::MappingPolicy::kSearch) return {};
  const int64_t unpacked = whole_folds(c, j.kh * j.kw * j.C, j.M, j.images * j.OH * j.OW);
  std::vector<int64_t> ps;
  for (int64_t p = 2; p * j.M <= c.config.systolic_array.cols; ++p) {
    if (packable(c, j, p) && folds_packed(c, j, p) < unpacked) ps.push_back(p);
  }
  std::stable_sort(ps.begin(), ps.end(),
                   [&](int64_t a, int64_t b) { return folds_packed(c, j, a) < folds_packed(c, j, b); });
  if (ps.size() > 2) ps.resize(2);
  return ps;
}

std::optional<int64_t> imposed_packing(const Context& c) {
  const LayerMapping* m = c.options.mapping ? c.options.mapping->find(c.plan->name) : nullptr;
  if (!m) return std::nullopt;
  if (m->pack_pixels) return *m->pack_pixels;
  return m->has_tiling() ? std::optional<int64_t>(1) : std::nullopt;
}

std::string line_buffer_packing(const Context& c) {
  return imposed_packing(c) ? "imposed by the mapping file" : "its whole job packed ran faster";
}

void throw_unpackable(const Context& c, const MatrixJob& j, int64_t p) {
  const LayerMapping& m = *c.options.mapping->find(c.plan->name);
  throw MappingError(fmt::format(
      "{}: layer '{}': pack_pixels={}: this conv ({}, {} output columns) cannot run with {} output pixels a "
      "column (it needs one group, a dense NHWC input and output in DRAM, output columns divisible by it, "
      "{} x {} output channels within the array's {} columns, and a tiling that fits)",
      m.at("pack_pixels"), m.name, p, j.what, j.OW, p, p, j.M, c.config.systolic_array.cols));
}

void record_packing(Context& c, const MatrixJob& unpacked, const MatrixJob& packed, int64_t p,
                    const std::string& against) {
  LayerPlan& plan = *c.plan;
  const MatrixJob& u = unpacked;
  plan.macs = u.images * u.OH * u.OW * u.M * u.kh * u.kw * u.cg;
  plan.mapping += fmt::format(
      ", {} output pixels side by side on the columns (the kernel at {} shifted positions: a {}x{} CONV of "
      "stride {}x{} to {} channels; {})",
      p, p, packed.kh, packed.kw, packed.sh, packed.sw, packed.M, against);
}

int64_t decide_packing(Context& c, const MatrixJob& j, const MatrixStrategy& s, MatrixMapper& mm,
                       const Tiling& unpacked, const std::vector<int64_t>& ps,
                       const std::function<std::optional<double>(int64_t p)>& figure) {
  std::string key = fmt::format(
      "packing {} {} {} {} {} {} {} {} {} {} {} {} {} {} {}|{} {} {} {} {} {}|{} {} {} {} {} {}", j.images,
      j.H, j.W, j.C, j.OH, j.OW, j.M, j.kh, j.kw, j.sh, j.sw, j.dh, j.dw, j.pt, j.pl,
      static_cast<int>(s.ops.a) + 1000 * (j.y_sram >= 0) + 10000 * j.y_store, static_cast<int>(s.ops.w),
      static_cast<int>(s.ops.y), static_cast<int>(s.ops.r), s.ops.tile_read, s.epilogue_ops(), unpacked.toh,
      unpacked.tow, unpacked.tc, unpacked.tn, unpacked.ti, unpacked.spatial_outer);
  for (int64_t p : ps) key += fmt::format(" {}", p);
  if (auto it = c.decided.find(key); it != c.decided.end()) return static_cast<int64_t>(it->second);
  double best = unpacked.est;
  if (c.can_time()) {
    if (unpacked.simulated >= 0 && c.options.objective == MappingObjective::kCycles) {
      best = static_cast<double>(unpacked.simulated);
    } else {
      const int64_t first = c.em.size();
      const Context::Trial trial = c.begin_trial();
      mm.generate(unpacked);
      best = c.objective_score(first, c.time_layer(first));
      c.end_trial(trial);
    }
  }
  int64_t win = 1;
  for (int64_t p : ps) {
    const std::optional<double> f = figure(p);
    if (f && *f < best) best = *f, win = p;
  }
  c.decided.emplace(std::move(key), static_cast<size_t>(win));
  return win;
}

}  // namespace npusim::compiler::backend
