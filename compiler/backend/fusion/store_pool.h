#pragma once
// An int8 squeeze-and-excitation pool in its producer's STOREs (internal to the back end). PP-OCRv4 det's
// neck (RSEFPN) pools each level's map X, the output of a conv on the array (its 1x1 `in_conv`, its 3x3
// `inp_conv`), for the SE block after it: lowered alone the pool loads X back from DRAM right after the
// conv stored it (det's 160x160x96 level: 2.5 MB of codes, 0.34 M of its int8 cycles, mostly waiting on
// those LOADs). Here the conv pools each output tile where its epilogue left it for the STORE: one VEC
// dwconv of unit weights sums the tile's codes per channel in int32 (as the pool's own integer bands do,
// vector/pooling.cpp), one VEC add adds them to the running sums, and after the conv's last tile one output
// stage (bias -H*W*x.zero_point, the pool's multiplier, its zero point) makes the pooled codes, stored.
// X is still stored for the Mul and the residual that read it; the pool emits nothing.
//
// Exact: the pool's integer scheme (quant::integer_global_average_pool) sums the codes in int32, exactly,
// whatever tiles add them (|sum| < 2^31 for a map of under 2^23 pixels of 8-bit codes), then one output
// stage; the same stage here gives the same codes bit for bit. Float pools sum in their own bands' order and
// are left to the depthwise producers' epilogues (se_pool_fusion.h) or their own lowering.
//
// Taken wherever it applies (an SE pool after a conv on the array, X read by other layers too, int8 codes
// under the integer scheme, X not held on chip by the SE group, no line buffer or affine map on the conv's
// output): the VEC work is the pool's own, minus its LOADs of X, and runs beside the array's.
#include <cstddef>
#include <cstdint>

#include "compiler/backend/core/context.h"

namespace npusim::compiler::backend {

// Before matrix layer i is lowered: plans the SE pool of its output its STOREs may carry, reserves the
// unit weights, sums and output stage at the top of the input scratchpad and loads them.
void plan_store_pool(Context& c, size_t i);
// Context::store's hook, before a STORE of the producer's output while the producer is lowered: sums the
// stored tile's codes per channel into the running sums.
void store_pool(Context& c, isa::Buffer buf, uint64_t sram, const Range& dram_range, uint64_t dram_addr,
                isa::DType t, const std::array<int64_t, 4>& s, const std::array<int64_t, 3>& st);
// After layer i is lowered: the reservation ends; when its code summed every tile, emits the output stage
// and the pooled vector's STORE (counted in plan.instructions) and the pool's layer emits nothing.
void finish_store_pool(Context& c, size_t i, LayerPlan& plan);
// Layer i's work is the pool its producer's STOREs did: fills its plan and returns true.
bool store_pool_member(Context& c, size_t i, LayerPlan& plan);

}  // namespace npusim::compiler::backend
