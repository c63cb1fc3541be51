#pragma once
// Squeeze-and-excitation blocks as one fusion group (internal to the back end). An SE block reads its
// input X twice: GlobalAveragePool(X) -> a few layers on the pooled vector (1x1 convs, activations) ->
// Mul(X, scale). Layer by layer, X crosses the DRAM interface three times (its producer's store, the
// pool's load, the Mul's load). When X fits in the input scratchpad, the pool loads it into a region
// held at the scratchpad's top (Context::held, whose bytes every lowering's capacity(kInput) leaves out
// until the Mul) and pools it there; the layers on the pooled vector run in the rest; the Mul reads X
// where the pool left it and emits no LOAD of it: one read of X saved. The arithmetic is unchanged (the
// pool's bands and the Mul's operations are those of the unfused program), so --functional results
// are identical with and without the group. X's DRAM copy stays (its producer writes it, the pool
// reads it), so a Mul that cannot read it in place (an imposed tile, a conversion) loads it as before.
#include <cstddef>

#include "compiler/backend/core/context.h"

namespace npusim::compiler::backend {

// Before node i is lowered: when it is the GlobalAveragePool of an SE block whose input fits, reserves
// the input's bytes at the top of the input scratchpad and records the group in Context::held.
void plan_se_hold(Context& c, size_t i);
// After node i is lowered: at the pool, gives the bytes back when the pool did not load the input
// there; at the Mul, names the group on its layers (LayerPlan::fusion_group) and the input the Mul read
// in SRAM (on_chip_input, on_chip_bytes_saved: the one read saved) when it did, and releases the bytes.
void finish_se_hold(Context& c, size_t i, LayerPlan& plan);

}  // namespace npusim::compiler::backend
