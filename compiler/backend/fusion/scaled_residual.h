#pragma once
// A squeeze-and-excitation block with a residual, y = x + x * s, in one tile loop (internal to the back end).
// PP-OCRv4 det's neck (RSEFPN) scales each level's map x by its SE vector s and adds x back: a Mul that
// reads x and writes x * s, then an Add that reads x and x * s again and writes y, each a full pass over a
// map of up to 160x160x96 (det's 160x160 level alone: 1.6 M of its fp16 cycles). Here the Mul's tile loop
// does both: per tile of x, a VEC mul into a scratch tile in the accumulator and a VEC add of x to it, stored
// as y; the product never goes to DRAM and the Add emits nothing.
//
// Exact: the two VECs are those the Mul's and the Add's own lowerings (vector/elementwise.cpp, lower_binary)
// run, on the same values in the same precision (the product rounded to it before the add, as stored).
// Float only: an int8 Mul and Add (integer schemes, each its own requantization) stay apart. Nor when the
// product has another reader, either node a fused activation, or a mapping file places or tiles the Add.
#include <cstddef>
#include <cstdint>

#include "compiler/backend/core/context.h"

namespace npusim::compiler::backend {

// The Add that node i (a Mul of a full operand x and a broadcast one) may carry: its only reader, adding x
// back, neither with an activation; else -1. The memory plan keeps the Add's output from node i on.
int64_t scaled_residual_candidate(const Graph& g, size_t i);
// Before vector layer i is lowered: plans the Add its Mul lowering may do.
void plan_scaled_residual(Context& c, size_t i);
// For the Mul being lowered: the Add's output tensor when its tile loop is to add x back (float), else null.
const DramTensor* scaled_residual_output(const Context& c, const Node& mul);
// The Mul's code added x back (called by its lowering once it emitted that tile loop).
void scaled_residual_done(Context& c);
// After layer i is lowered: whether its code took the Add.
void finish_scaled_residual(Context& c, size_t i, const LayerPlan& plan);
// Layer i's work is the Add its Mul did: fills its plan and returns true.
bool scaled_residual_member(Context& c, size_t i, LayerPlan& plan);

}  // namespace npusim::compiler::backend
