#pragma once
// A max pool of stride 1 before a pointwise conv, done on the conv's tiles (internal to the back end).
// GoogLeNet's inception blocks end their fourth branch with a 3x3 max pool (stride 1, padded) read only by
// a 1x1 conv: lowered alone the pool reads the block input and writes its output for the conv to read back
// (0.34 M of GoogLeNet's 4.52 M fp16 cycles on edge, with the array idle). Here each LOAD of the pool's
// output x that the conv's walk emits becomes a LOAD of the pool's input window for that box (the halo and
// the padding: -inf, or the lowest code) into scratch rows at the top of the input scratchpad, and one VEC
// max_pool from them into the conv's tile: x is never written, the pool's layer emits nothing.
//
// Exact: a maximum is the same whichever tile computes it (the pool's own lowering pads with the same
// value); int8 pools run on the codes, as their own lowering does when the output shares the input's
// QParams. Only a MaxPool of stride 1 and dilation 1 whose one output only a pointwise Conv reads as its
// input, with no Indices output; a mapping file that tiles or places the pool leaves it apart.
#include <array>
#include <cstddef>
#include <cstdint>

#include "compiler/backend/core/context.h"

namespace npusim::compiler::backend {

// The conv that may do MaxPool node i on its tiles (the graph's side of plan_pre_pool), else -1. The memory
// plan keeps the pool's input until that conv.
int64_t pre_pool_reader(const Graph& g, size_t i);
// Before layer i (a vector layer) is lowered: plans whether its reader does it (nothing emitted).
void plan_pre_pool(Context& c, size_t i);
// Layer i's work is the pool its reader does on its tiles: fills its plan and returns true.
bool pre_pool_member(Context& c, size_t i, LayerPlan& plan);
// Before matrix layer i is lowered: when it is the planned pool's reader, reserves the scratch rows at the
// top of the input scratchpad.
void begin_pre_pool(Context& c, size_t i);
// Context::load's hook: a LOAD of the pool's output while its reader is lowered; emits the window LOADs and
// VEC max_pools instead. False when it is no such LOAD.
bool load_pre_pool(Context& c, isa::Buffer buf, uint64_t sram, const Range& dram_range, uint64_t dram_addr,
                   isa::DType t, const std::array<int64_t, 4>& s, const std::array<int64_t, 3>& st,
                   const std::array<int64_t, 4>& pads);
// The pool's layer when layer i was to do it and its NPU lowering declined, for the caller to lower first;
// -1 otherwise.
int64_t pre_pool_declined(Context& c, size_t i);
// After layer i is lowered: the reservation ends; its code did the pool.
void finish_pre_pool(Context& c, size_t i, const LayerPlan& plan);

}  // namespace npusim::compiler::backend
