#pragma once
// A squeeze-and-excitation residual y = x + x * s done in the tile loop of the top-down Add that reads y
// with a nearest upsampling, w = y + up(z) (internal to the back end).
// PP-OCRv4 det's neck (RSEFPN) scales each level's map x by its SE vector s, adds x back, and adds the
// upsampled level below: a Mul and its residual Add (one tile loop, scaled_residual.h) write y, and the
// top-down Add (its operand read from the Resize's input, upsample_add.h) reads y back. On det's 160x160x96
// level that is a 4.9 MB write and read of y in fp16 (`p2o.Mul.162` 0.65 M cycles of 15.5 M). The Add cannot
// run in the Mul's loop (z is computed after the Mul), so the Mul and its Add wait: they emit nothing, and
// the top-down Add loads x in place of y, with s replicated once along a tile's row in the weight
// scratchpad, and per tile runs the Mul's VEC (x * s into an accumulator tile), the residual Add's (x added
// to it) and its own (the upsampled row added): y never goes to DRAM.
//
// Exact: the three VECs are those the three layers run apart (vector/elementwise.cpp, lower_binary), on the
// same values in the same precision, each result rounded to it as it would be stored (x * s and x + m are
// commutative in IEEE arithmetic, so the operands' order does not matter).
// Float only (with codes, the residual's integer steps keep the Mul's loop vector-bound: scaled_residual.h).
// Not when y or the product has another reader, the SE group holds x, a layer is placed or tiled by a
// mapping file, or the tensors are not dense maps of one layout.
// Not chosen by simulation: the top-down Add reads x where it read y (the same bytes) and s once, and its
// vector work grows by the two passes the Mul's loop ran on the same tiles, whose DRAM pass goes: with v the
// VEC cycles and d the DMA cycles, max(v_add + v_mul, d_add) <= max(v_add, d_add) + max(v_mul, d_mul).
// If the top-down Add does not take its upsampled operand or its lowering declines, the Mul and its Add are
// lowered apart just before it (begin_deferred_residual, deferred_residual_declined).
#include <cstddef>
#include <cstdint>
#include <string>

#include "compiler/backend/core/context.h"

namespace npusim::compiler::backend {

// The top-down Add that may do Mul node i's residual (the graph's side): i is a scaled_residual candidate
// whose Add's output y has one reader, an Add of y and the output of a Resize that upsample_add_candidate
// gives to that Add; else -1. The memory plan keeps x, s and the product until that Add.
int64_t deferred_residual_reader(const Graph& g, size_t i);
// Before vector layer i is lowered: plans whether its residual waits for the top-down Add. True when it does.
bool plan_deferred_residual(Context& c, size_t i);
// Layer i's work (the Mul or its residual Add) is done by the top-down Add: fills its plan and returns true.
bool deferred_residual_member(Context& c, size_t i, LayerPlan& plan);
// Before layer i is lowered: when it is the top-down Add and will not do the wait's work (no upsampled
// operand taken, or not on the vector unit), the Mul and its Add are lowered apart now.
void begin_deferred_residual(Context& c, size_t i, Placement placement);
// For the Add being lowered: the Mul's inputs when its tile loop is to do the residual, else null.
const DeferredResidual* deferred_residual_of(const Context& c, const Node& add);
// The Add's code did the residual (called by its lowering once it emitted that tile loop).
void deferred_residual_done(Context& c);
// Layer i declined its NPU lowering while it was to do the residual: the Mul and its Add are lowered now.
void deferred_residual_declined(Context& c, size_t i);
// After layer i is lowered: whether its code did the residual.
void finish_deferred_residual(Context& c, size_t i, const LayerPlan& plan);

}  // namespace npusim::compiler::backend
