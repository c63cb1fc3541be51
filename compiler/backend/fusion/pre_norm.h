#pragma once
// A LayerNormalization applied where the GEMM after it loads its input (internal to the back end).
// ConvNeXt's block runs depthwise conv -> (permute) -> LayerNorm over the channels -> expand MatMul: lowered
// alone, the LayerNorm loads the conv's output, runs its VECs with the array idle and stores its rows for the
// MatMul to load back (ConvNeXt-Tiny on edge: 0.66 M fp16 / 0.82 M int8 cycles of vector work between the
// array's layers). Here, as pre_affine.h does for a BatchNormalization, each LOAD of the LayerNorm's output
// x by the GEMM's walk becomes a LOAD of its input y into the same tile, then the LayerNorm's steps on the
// tile's rows: x is never written, the LayerNorm's layer emits nothing, and its vector work runs while the
// array multiplies the tile before (the walk loads each input tile a tile ahead: Tiling::prefetch_input).
//
// The GEMM's input tiles hold whole rows (its reduction chunk is K, the row: MatrixJob::fixed_tc), so a
// row's statistics come from the tile alone. Exact: the steps are lower_rowwise's (vector/rowwise.h,
// norm_rows), in the same formats on the same values, each row's reductions independent of the rows beside
// it: float, in the activation type, the tile's values in place with a scratch tile in the accumulator;
// int8 (the LayerNorm's input and output codes, as its own lowering converts them), in fp32 work rows of
// the accumulator, chunks of the tile's rows at a time, the output codes written back into the tile. The
// statistics, epsilon, gamma and beta (as the layer loads them) and the scratch take the accumulator's top
// while the GEMM is lowered.
//
// Not a LayerNorm over other axes or with runtime gamma / beta, whose output another node (or the graph)
// reads, whose input or output lies strided or out of ONNX order, whose GEMM reads it as B or is not on
// the array with constant weights, nor one a mapping file places (`placement: vector` keeps it a layer of its
// own; --mapping-out writes none for one taken) or tiles, nor a GEMM a mapping file tiles with a reduction
// chunk other than the row (unless its `in_loads` is false). Chosen by simulation against the LayerNorm's own
// layer (pre_norm_choose), the outcome written as the LayerNorm's `in_loads` and, imposed, taken untried; a
// LayerNorm whose rows the residency planner leaves on chip for the GEMM (residency.h) keeps that instead.
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "compiler/backend/core/context.h"

namespace npusim::compiler::backend {

// The GEMM that may apply LayerNormalization node i in its loads (the graph's side of plan_pre_norm: node
// i a LayerNorm in row-wise form with constant gamma / beta, whose one output only a MatMul or Gemm with
// constant weights reads as its first input), else -1. The memory plan keeps the LayerNorm's input until
// that GEMM.
int64_t pre_norm_reader(const Graph& g, size_t i);
// Before layer i (a vector layer) is lowered: plans whether its reader applies it (nothing emitted).
void plan_pre_norm(Context& c, size_t i);
// Layer i's work is the LayerNorm its reader applies: fills its plan and returns true.
bool pre_norm_member(Context& c, size_t i, LayerPlan& plan);
// Before matrix layer i is lowered: when it is the reader of the planned LayerNorm, reserves the
// accumulator's top (pre_norm_choose loads the constants there, or lowers the LayerNorm apart).
void begin_pre_norm(Context& c, size_t i);
// Whether the layer being lowered applies a LayerNorm in its loads (its tiling search then keeps whole rows
// a tile: MatrixJob::fixed_tc).
bool carries_pre_norm(const Context& c);
// The element-wise steps over a whole tile the layer being lowered runs on each input tile it loads, for
// the tiling search's closed form (0 when it carries no LayerNorm).
int64_t pre_norm_steps(const Context& c);
// The GEMM's lowering, once its job is built: `emit` emits its code (the caller's mapping search and walk,
// undone after). When the GEMM carries the LayerNorm, its code with the LayerNorm in its loads and the
// LayerNorm's own layer (lowered apart, its rows through DRAM) followed by the GEMM's code without it are
// both emitted, timed to when they end, and undone; where the second ends sooner, the LayerNorm's layer is
// emitted now and the GEMM's loads leave its rows as they are (the GEMM then emits its code as usual).
void pre_norm_choose(Context& c, const std::function<void()>& emit);
// Context::load's hook: a LOAD of the LayerNorm's output while its reader is lowered; emits the LOAD of its
// input and the LayerNorm's steps on the tile instead. False when it is no such LOAD.
bool load_pre_norm(Context& c, isa::Buffer buf, uint64_t sram, const Range& dram_range, uint64_t dram_addr,
                   isa::DType t, const std::array<int64_t, 4>& s, const std::array<int64_t, 3>& st,
                   const std::array<int64_t, 4>& pads);
// The walk's hold of each tile's steps while it loads the next tile ahead (pre_affine.h, hold_pre_affine).
void hold_pre_norm(Context& c);
std::vector<PreAffine::Box> release_pre_norm(Context& c);
void emit_pre_norm(Context& c, const std::vector<PreAffine::Box>& boxes);
// The LayerNorm's layer when layer i was to apply it and its NPU lowering declined (it runs on the host, or
// the caller lowers that layer first. -1 otherwise.
int64_t pre_norm_declined(Context& c, size_t i);
// After layer i is lowered: the reservation ends; whether its code took the LayerNorm.
void finish_pre_norm(Context& c, size_t i, const LayerPlan& plan);

}  // namespace npusim::compiler::backend
