#pragma once
// The `gemmini` mapping policy (lowering.mapping_policy): tiles chosen by the rules of Gemmini's own
// software instead of npusim's search, so a run predicts what Gemmini with its compiler does. The rules
// are those of tiled_matmul_auto and tiled_conv_auto in the Gemmini project's
// software/gemmini-rocc-tests/include/gemmini.h (docs/architecture.md, "Gemmini"): both count
// scratchpad rows of DIM elements and accumulator rows of DIM partial sums, keep half of each free for
// double buffering, and grow (GEMM) or shrink (conv) the tile until it fills what is left.
#include <cstdint>
#include <optional>

#include "isa/machine/config.h"

namespace npusim::compiler::backend {

// Gemmini's machine as its software sees it: DIM and the row counts of its scratchpad and accumulator.
struct GemminiGeometry {
  int64_t dim = 16;
  int64_t spad_rows = 16384;  // BANK_NUM * BANK_ROWS
  int64_t acc_rows = 1024;    // ACC_ROWS
  static GemminiGeometry of(const isa::NpuConfig& c);
};

// tiled_matmul_auto's tile for C[I x J] = A[I x K] * B[K x J], in elements (multiples of DIM, or the
// padded extent), WS (double-buffered).
struct GemminiMatmulTile {
  int64_t i = 0, j = 0, k = 0;
};
GemminiMatmulTile gemmini_matmul_tile(const GemminiGeometry& g, int64_t dim_i, int64_t dim_j, int64_t dim_k);

// Rows of K a GEMM tile's weights move in and multiply at a time, for a tile of `m` rows and `cols`
// columns of `elem_bytes` elements; 0: the whole tile at once. Gemmini's LoopMatmul unroller
// (src/main/scala/gemmini/LoopMatmul.scala) loads B and executes on it in the same order, "k, j, i": one
// mvin per DIM rows of K, and its ROB lets each block's PRELOAD and COMPUTE follow that block's mvin. So
// within a tile the compute chases the load rather than waiting for all of it, and the two concurrent
// loops (the scratchpad halves of tiled_matmul_auto's double buffering) let the next tile load meanwhile.
// npusim streams so under the gemmini policy where it matters and its machine can follow:
// - tiles of at most DIM rows (batch-1 FCs): each fold's weights serve m <= DIM rows, so a fold computes
//   in about the time its weights take to arrive and waiting for the whole tile costs as much as the
//   tile's compute. Taller tiles reuse each weight m times and the ping-pong pair hides their load; there
//   npusim's in-order sequencer (sequencer.queue_depth instructions ahead), unlike Gemmini's separate
//   loaders, would start the next input tile's load too late behind a run of short pieces.
// - a piece is at least the DMA's window (dma.max_outstanding x dma.burst_bytes), in whole DIM-row
//   blocks: Gemmini's DMA keeps requests in flight from one mvin to the next, npusim's pays a LOAD's
//   setup and round trip before the next LOAD's first request.
int64_t gemmini_stream_rows(const isa::NpuConfig& c, int64_t m, int64_t cols, int64_t elem_bytes);

// tiled_conv_auto's tile (no pooling, no input dilation, no transposed operands): output rows x cols,
// output channels, kernel rows x cols, input channels, for a batch-1 image. `downsample`: Gemmini's
// downsampling load of a 1x1 stride-2 unpadded conv over an even-sized input.
struct GemminiConvTile {
  int64_t orows = 0, ocols = 0, ochs = 0, krows = 0, kcols = 0, kchs = 0;
};
GemminiConvTile gemmini_conv_tile(const GemminiGeometry& g, int64_t out_rows, int64_t out_cols,
                                  int64_t out_channels, int64_t kernel_rows, int64_t kernel_cols,
                                  int64_t in_channels, int64_t stride, int64_t kernel_dilation,
                                  bool downsample);

}  // namespace npusim::compiler::backend
