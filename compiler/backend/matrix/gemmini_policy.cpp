// Gemmini's tiling rules (see gemmini_policy.h), restated from their description in gemmini.h.
#include "compiler/backend/matrix/gemmini_policy.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "isa/ceil_div.h"

namespace npusim::compiler::backend {
namespace {

// Scratchpad (A + B) or accumulator (C) rows a conv tile takes (tiled_conv_total_spad_rows with pool
// size and stride 1, input dilation 1, untransposed operands). Gemmini sizes the input tile as
// orows * stride + krows_dilated - 1 rows, one more stride than the window needs; when it downsamples
// (a 1x1 stride-2 conv: the DMA loads every other pixel), the input tile holds half of those rows and
// columns.
int64_t conv_rows(const GemminiGeometry& g, bool acc, int64_t stride, int64_t dilation, bool downsample,
                  const std::array<int64_t, 7>& a) {
  const int64_t batches = a[0], orows = a[1], ocols = a[2], ochs = a[3], krows = a[4], kcols = a[5],
                kchs = a[6];
  const int64_t irows = orows * stride + krows + (dilation - 1) * (krows - 1) - 1;
  const int64_t icols = ocols * stride + kcols + (dilation - 1) * (kcols - 1) - 1;
  const int64_t in_banks = ceil_div(kchs, g.dim), out_banks = ceil_div(ochs, g.dim);
  if (acc) return out_banks * batches * orows * ocols;
  const int ds = downsample ? 1 : 0;
  return in_banks * batches * (irows >> ds) * (icols >> ds) + out_banks * kcols * krows * kchs;
}

}  // namespace

GemminiGeometry GemminiGeometry::of(const isa::NpuConfig& c) {
  GemminiGeometry g;
  g.dim = c.systolic_array.rows;
  // A scratchpad row holds DIM int8 elements, an accumulator row DIM int32 partial sums.
  const int64_t spad_bytes = c.sram.shared_scratchpad
                                 ? c.sram.input.size_bytes()
                                 : c.sram.input.size_bytes() + c.sram.weight.size_bytes();
  g.spad_rows = spad_bytes / g.dim;
  g.acc_rows = c.sram.accumulator.size_bytes() / (g.dim * 4);
  return g;
}

int64_t gemmini_stream_rows(const isa::NpuConfig& c, int64_t m, int64_t cols, int64_t elem_bytes) {
  if (c.lowering.mapping_policy != isa::MappingPolicy::kGemmini) return 0;
  const int64_t dim = GemminiGeometry::of(c).dim;
  if (m > dim) return 0;
  const int64_t window_rows = ceil_div(c.dma.max_outstanding * c.dma.burst_bytes, cols * elem_bytes);
  return ceil_div(std::max<int64_t>(1, window_rows), dim) * dim;
}

GemminiMatmulTile gemmini_matmul_tile(const GemminiGeometry& g, int64_t dim_i, int64_t dim_j, int64_t dim_k) {
  const int64_t dim = g.dim;
  const int64_t i_blocks = ceil_div(dim_i, dim), j_blocks = ceil_div(dim_j, dim),
                k_blocks = ceil_div(dim_k, dim);
  // Double-buffered (WS): each side of the ping-pong gets half of each memory.
  const int64_t max_spad_rows = g.spad_rows / 2, max_acc_rows = g.acc_rows / 2;
  // The starting tile: a square I x J that half the accumulator's half holds, and the K that fills a
  // quarter of the scratchpad with it.
  const int64_t db_mats_in_acc = (g.acc_rows / 2) / dim;
  const int64_t db_mats_in_partition = (g.spad_rows / 4) / dim;
  const auto db_max_ij = static_cast<int64_t>(std::sqrt(static_cast<double>(db_mats_in_acc)));
  const int64_t db_max_k = db_max_ij > 0 ? db_mats_in_partition / db_max_ij : 0;
  int64_t ti = std::min(i_blocks, db_max_ij), tj = std::min(j_blocks, db_max_ij),
          tk = std::min(k_blocks, db_max_k);
  auto spad = [&](int64_t i, int64_t j, int64_t k) { return (i * k + k * j) * dim; };
  auto acc = [&](int64_t i, int64_t j) { return i * j * dim; };
  // Then grow J, I and K in turn, one block at a time, while the tile still fits.
  for (bool grew = true; grew;) {
    grew = false;
    if (spad(ti, tj + 1, tk) <= max_spad_rows && acc(ti, tj + 1) <= max_acc_rows && tj + 1 <= j_blocks) {
      ++tj;
      grew = true;
    }
    if (spad(ti + 1, tj, tk) <= max_spad_rows && acc(ti + 1, tj) <= max_acc_rows && ti + 1 <= i_blocks) {
      ++ti;
      grew = true;
    }
    if (spad(ti, tj, tk + 1) <= max_spad_rows && tk + 1 <= k_blocks) {
      ++tk;
      grew = true;
    }
  }
  return {ti * dim, tj * dim, tk * dim};
}

GemminiConvTile gemmini_conv_tile(const GemminiGeometry& g, int64_t out_rows, int64_t out_cols,
                                  int64_t out_channels, int64_t kernel_rows, int64_t kernel_cols,
                                  int64_t in_channels, int64_t stride, int64_t kernel_dilation,
                                  bool downsample) {
  constexpr size_t kOrows = 1, kOcols = 2, kOchs = 3, kIchs = 6;
  const std::array<int64_t, 7> max_args = {1,           out_rows,    out_cols,   out_channels,
                                           kernel_rows, kernel_cols, in_channels};
  std::array<int64_t, 7> a = max_args;
  const int64_t max_spad_rows = g.spad_rows / 2, max_acc_rows = g.acc_rows / 2;
  auto fits = [&](const std::array<int64_t, 7>& t) {
    return conv_rows(g, false, stride, kernel_dilation, downsample, t) <= max_spad_rows &&
           conv_rows(g, true, stride, kernel_dilation, downsample, t) <= max_acc_rows;
  };
  // Shrink the largest dimension (ocols spared while it is at most DIM and rows remain) until it fits;
  // channels drop to the multiple of DIM below, or by DIM.
  while (!fits(a)) {
    int64_t max_val = -1;
    size_t max_idx = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      if (!(i == kOcols && a[i] <= g.dim && a[kOrows] > 1) && a[i] > max_val) {
        max_val = a[i];
        max_idx = i;
      }
    }
    if (max_val <= 1) break;  // nothing left to shrink
    if (max_idx == kOchs || max_idx == kIchs) {
      a[max_idx] = a[max_idx] % g.dim != 0 ? a[max_idx] / g.dim * g.dim : a[max_idx] - g.dim;
      if (a[max_idx] == 0) a[max_idx] = 1;
    } else {
      --a[max_idx];
    }
  }
  // Grow ocols back while it fits, then every dimension one step at a time while any grows.
  while (a[kOcols] + 1 <= max_args[kOcols]) {
    auto c = a;
    ++c[kOcols];
    if (!fits(c)) break;
    a = c;
  }
  for (bool grew = true; grew;) {
    grew = false;
    for (size_t i = 0; i < a.size(); ++i) {
      auto c = a;
      ++c[i];
      if (c[i] > max_args[i] || !fits(c)) continue;
      a = c;
      grew = true;
    }
  }
  return {a[1], a[2], a[3], a[4], a[5], a[6]};
}

}  // namespace npusim::compiler::backend
