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
// int8 (both under the integer scheme): the Mul's centred codes multiplied and requantized to the product's
// codes, then the Add's steps on x's and the product's codes (each centred and rescaled to the common grid,
// added, one requantize), four int32 slots a tile. The Add's output may be a Concat's slice (its STOREs take
// the slice's pitch). Not when the product has another reader, either node a fused activation, or a mapping
// file places or tiles the Add.
//
// Chosen by simulation: the Mul's code with the Add and without it are both emitted and simulated, and the
// fused one is kept when it takes no longer than the other plus the Add's roofline bound (a lower bound of
// the Add's own time: the choice leans to the pair apart).
#include <cstddef>
#include <cstdint>
#include <functional>

#include "compiler/backend/core/context.h"

namespace npusim::compiler::backend {

// The Add that node i (a Mul of a full operand x and a broadcast one) may carry: its only reader, adding x
// back, neither with an activation; else -1. The memory plan keeps the Add's output from node i on.
int64_t scaled_residual_candidate(const Graph& g, size_t i);
// Before vector layer i is lowered: plans the Add its Mul lowering may do.
void plan_scaled_residual(Context& c, size_t i);
// For the Mul being lowered: the Add's output tensor when its tile loop is to add x back (float), else null.
const DramTensor* scaled_residual_output(const Context& c, const Node& mul);
// For the Mul being lowered with its tile searched (vector/vector_tiling.h): emits both programs as trials,
// `time_mul` simulating the Mul's code, and keeps the Add in the Mul's tile loop only when that is faster.
void scaled_residual_choose(Context& c, const Node& mul, const std::function<int64_t()>& time_mul);
// The Add the Mul being lowered carries (scaled_residual_output is not null).
const Node& scaled_residual_add(const Context& c);
// The Mul's code added x back (called by its lowering once it emitted that tile loop).
void scaled_residual_done(Context& c);
// After layer i is lowered: whether its code took the Add.
void finish_scaled_residual(Context& c, size_t i, const LayerPlan& plan);
// Layer i's work is the Add its Mul did: fills its plan and returns true.
bool scaled_residual_member(Context& c, size_t i, LayerPlan& plan);

}  // namespace npusim::compiler::backend
