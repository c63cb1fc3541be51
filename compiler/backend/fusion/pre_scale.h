#pragma once
// A squeeze-and-excitation block's channel scale applied where its project conv loads its input (internal
// to the back end). An MBConv block ends depthwise conv -> SE (pool, two 1x1 convs, Sigmoid) -> Mul(X, s)
// -> project 1x1 conv. Where the SE group cannot hold X in the input scratchpad (se_fusion.h:
// EfficientNet-B0's blocks 1-3 and 5.1-5.2 in fp16, 0.2-0.9 MB), the Mul loads X from DRAM and writes the
// product for the project conv to read back: the product crosses DRAM twice (EfficientNet-B0 on edge, fp16:
// 0.45 M of 3.85 M cycles in those Muls). Here, as pre_affine.h does for a BatchNormalization, every LOAD of
// the product by the conv's walk becomes a LOAD of X into the same tile, then the Mul's VEC on the tile in
// place with the scale vector (loaded once into the accumulator's top): the product is never written and
// the Mul emits nothing.
//
// Exact: the VECs are the Mul's own (vector/elementwise.cpp, lower_binary) on the same values, so the conv
// multiplies the same products: float, a VEC mul of the activation type with the scale broadcast along the
// rows; int8 under the integer scheme, the two passes of int8.h's ChannelScaleMul (X's codes times s's into
// int32 work rows of the accumulator, then the output stage's per-channel bias -X.zero_point * s and one
// requantize writing the product's codes back into the tile), which give the codes of the Mul's three passes.
// A Mul in an SE group (X held, the product left on chip), with a fused activation, of other codes (s's zero
// point not 0, int16), or a mapping file placing or tiling the Mul, is left to the Mul's own lowering. Taken
// whenever it applies: the Mul's lowering runs the same VECs and moves the product through DRAM besides; the
// conv's tiling search simulates its candidates with the VECs.
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "compiler/backend/core/context.h"

namespace npusim::compiler::backend {

// The conv that may apply Mul node i's channel scale in its loads (the graph's side of plan_pre_scale:
// X * s with s one value per channel of X, whose product only a pointwise conv reads as its input, X of
// x_bytes more than an SE group can ever hold in an input scratchpad of input_capacity bytes), else -1. The
// memory plan keeps X and s until that conv (and so only there: an SE block whose group holds X keeps its
// DRAM layout).
int64_t pre_scale_reader(const Graph& g, size_t i, int64_t x_bytes, int64_t input_capacity);
// X (the full operand) of Mul node i when it is one of X by a per-channel scale, else "".
std::string pre_scale_input(const Graph& g, size_t i);
// Before layer i (a vector layer) is lowered: plans whether its reader applies its scale (nothing emitted).
void plan_pre_scale(Context& c, size_t i);
// Layer i's work is the scale its reader applies: fills its plan and returns true.
bool pre_scale_member(Context& c, size_t i, LayerPlan& plan);
// Before matrix layer i is lowered: when it is the reader of the planned scale, reserves the scale's bytes
// at the top of the accumulator and loads it.
void begin_pre_scale(Context& c, size_t i);
// Context::load's hook: a LOAD of the product while its reader is lowered; emits the LOAD of X and the
// Mul's VEC on the tile instead. False when it is no such LOAD.
bool load_pre_scale(Context& c, isa::Buffer buf, uint64_t sram, const Range& dram_range, uint64_t dram_addr,
                    isa::DType t, const std::array<int64_t, 4>& s, const std::array<int64_t, 3>& st,
                    const std::array<int64_t, 4>& pads);
// The Mul's layer when layer i was to apply it and its NPU lowering declined, for the caller to lower first;
// -1 otherwise.
int64_t pre_scale_declined(Context& c, size_t i);
// After layer i is lowered: the reservation ends; its code applied the scale.
void finish_pre_scale(Context& c, size_t i, const LayerPlan& plan);

}  // namespace npusim::compiler::backend
