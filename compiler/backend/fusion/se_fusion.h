#pragma once
// Squeeze-and-excitation blocks as one fusion group (internal to the back end). An SE block reads its
// input X twice: GlobalAveragePool(X) -> a few layers on the pooled vector (1x1 convs, activations) ->
// Mul(X, scale). Layer by layer, X crosses the DRAM interface three times (its producer's store, the
// pool's load, the Mul's load). When X fits in the input scratchpad, the pool loads it into a region
// held at the scratchpad's top (FusionState::held, whose bytes every lowering's capacity(kInput) leaves out
// until the Mul) and pools it there; the layers on the pooled vector run in the rest; the Mul reads X
// where the pool left it and emits no LOAD of it: one read of X saved. The arithmetic is unchanged (the
// pool's bands and the Mul's operations are those of the unfused program), so --functional results
// are identical with and without the group. X's DRAM copy stays (its producer writes it, the pool
// reads it), so a Mul that cannot read it in place (an imposed tile, a conversion) loads it as before.
#include <cstddef>

#include "compiler/backend/core/context.h"
#include "compiler/backend/memory/movement.h"

namespace npusim::compiler::backend {

// The Mul that closes the SE block whose pool is node i, or -1: X (the pool's input) has exactly two
// readers, the pool and a Mul of X by a per-channel scale with X's shape, and every node between them
// works on values no larger than the pooled vector.
int se_mul(const Context& c, size_t i);
// Whether an SE block's input of x_bytes fits the input scratchpad beside `reserved` bytes held already
// (three quarters of it at most: a quarter stays for the layers' own tiles, as residency keeps).
bool se_holds_fit(const Context& c, int64_t reserved, int64_t x_bytes);

// Before node i is lowered: when it is the GlobalAveragePool of an SE block whose input fits, reserves
// the input's bytes at the top of the input scratchpad and records the group in FusionState::held.
void plan_se_hold(Context& c, size_t i);
// After node i is lowered: at the pool, gives the bytes back when the pool did not load the input
// there; at the Mul, names the group on its layers (LayerPlan::fusion_group) and the input the Mul read
// in SRAM (on_chip_input, on_chip_bytes_saved: the one read saved) when it did, and releases the bytes.
void finish_se_hold(Context& c, size_t i, LayerPlan& plan);

// ---- the group's side of its pool's and its Mul's lowerings (vector/pooling.cpp, vector/elementwise.cpp)
// ---- Whether the global pool n (the current layer) starts a group that holds its input x in the input
// scratchpad. The group forgets any earlier load.
bool se_pool_holds(Context& c, const Node& n, const DramTensor& x);
// Input-scratchpad slots for the pool's bands; with `holds`, sized as if nothing were held, so the bands
// (and the sums) are those of the unfused program.
Slots se_pool_slots(Context& c, bool holds);
// The SRAM address of byte `offset` of the held input (the pool loads its bands there).
uint64_t se_held_addr(const Context& c, uint64_t offset);
// Whether the conv before the pool wrote the input where the group holds it (residency.cpp plans it for a
// conv on the array): the pool's bands are there already and load nothing.
bool se_pool_input_written(const Context& c);
// Whether the pool loaded its bands into the held region (else the group lets go of it).
void se_pool_loaded(Context& c, bool loaded);
// At the start of (each trial of) a Mul's lowering: it has not read the held input yet.
void se_mul_begin(Context& c);
// The SRAM address where the current layer reads the tensor `dram` of type t when its group holds it
// (the group's Mul, once the pool loaded it), else -1.
int64_t se_mul_input(const Context& c, const Range& dram, isa::DType t);
// The Mul reads the held input where it lies.
void se_mul_read_held(Context& c);
// Whether the Mul read the held input where it lies.
bool se_mul_read(const Context& c);
// Whether the Mul may leave its product in place of the held input for the pointwise conv after it.
bool se_mul_may_keep_product(const Context& c);
// The Mul left its product y (value `value`) at `addr`, where the input was (residency.h takes it on).
void se_mul_kept_product(Context& c, const std::string& value, const DramTensor& y, uint64_t addr);

}  // namespace npusim::compiler::backend
