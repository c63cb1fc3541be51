#pragma once
// A constant affine map after a conv's activation, applied in the conv's epilogue (internal to the back
// end). PP-OCRv4's LCNet backbone ends each conv block with a "learnable affine block", a scalar Mul and
// Add after the HardSwish, which the passes turn into a BatchNormalization (lowered.h, point 3) that no
// conv can absorb: the conv after it is padded (a depthwise conv), and the activation lies between it and
// the conv before. Lowered alone it reads and writes the whole tensor (det's 320x320x32 map: 13 MB of
// DRAM for two vector passes). Here, as a vendor compiler's fused post-op, the producer applies it where
// its epilogue leaves each output tile for the STORE: every STORE of the producer's output y becomes the
// map's VECs on the tile in place, then a STORE of the tile into the map's output z. y is never written,
// the map emits nothing.
//
// Exact: the VECs are those the map's own lowering (vector/elementwise.cpp, lower_batchnorm) runs on the
// same values: float, a VEC mul and a VEC add in the precision, with the constants in the precision
// (row-broadcast per channel, or one scalar when every channel has the same); int8, codes in and out
// (quant::affine_arith with its conversions folded into the constants), where the map of the 256 codes of
// y to codes of z is one table (one VEC lut) when every channel has the same constants: entry q is what
// the map's VECs compute from code q, so the codes are the same bit for bit. Per-channel constants on int8
// codes, a fused activation, views and values kept on chip are left to the map's own lowering, and so is a
// map a mapping file gives a placement other than `vector` or a tile (`tile_elems`).
//
// Where the map's reader is a depthwise conv fused with the producer in a line buffer (layer_fusion.h), the
// producer's epilogue writes each tile into the buffer and the map's VECs run on it there
// (post_affine_on_chip): the depthwise conv reads the map's output as its own lowering would.
//
// Chosen by the cost model: the VECs the producer takes on (the vector unit's cycles over the tensor)
// against the DRAM time of the map's own read and write of it; the producer's tiling is then searched and
// its candidates simulated with them.
#include <cstddef>
#include <cstdint>

#include "compiler/backend/core/context.h"

namespace npusim::compiler::backend {

// The BatchNormalization node i's output may carry (the graph's side of plan_post_affine: node i is a
// matrix node whose one output only that node reads, a constant affine map without an activation), else
// -1. The memory plan keeps the map's output from node i on: the producer writes it.
int64_t post_affine_candidate(const Graph& g, size_t i);
// Before layer i (on the array or the vector unit) is lowered: plans the affine map its output's only
// reader may be, reserves the constants' bytes at the top of the accumulator and loads them.
void plan_post_affine(Context& c, size_t i);
// Context::store's hook: a STORE of the producer's output while the producer is lowered; emits the map's
// VECs on the tile in place and the STORE into the map's output instead. False when it is no such STORE.
bool store_post_affine(Context& c, isa::Buffer buf, uint64_t sram, const Range& dram_range,
                       uint64_t dram_addr, isa::DType t, const std::array<int64_t, 4>& s,
                       const std::array<int64_t, 3>& st);
// The line buffer's side (PostAffine::line_buffer): the producer's epilogue wrote a tile of `rows` rows of
// `pixels` pixels of type t at `at` in the input scratchpad (rows row_pitch elements apart, pixels
// pixel_pitch apart, channels [ch0, ch0 + channels) of each); emits the map's VECs on it in place. False
// when the layer being lowered carries no such map.
bool post_affine_on_chip(Context& c, uint64_t at, isa::DType t, int64_t rows, int64_t row_pitch,
                         int64_t pixels, int64_t pixel_pitch, int64_t ch0, int64_t channels);
// After layer i is lowered: the reservation ends; whether its code took the map.
void finish_post_affine(Context& c, size_t i, const LayerPlan& plan);
// Whether value v is written nowhere: a producer's output that carried its reader's map (or,
// scaled_residual.h, a product its Mul added x to): compiler/backend/stages/bind_tensors.cpp binds it to no
// address.
bool written_nowhere(const Context& c, const std::string& v);
// Layer i's work is the affine map its producer applied: fills its plan and returns true.
bool post_affine_member(Context& c, size_t i, LayerPlan& plan);

}  // namespace npusim::compiler::backend
