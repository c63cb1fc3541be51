#pragma once
// SRAM tiles of vector layers (internal to the back end). The vector unit's streaming lowerings
// (element-wise, pooling, data movement) walk a tensor in tiles through ping-pong slots (make_slots):
// LOAD a tile, VEC it, STORE it, while the next tile loads into the other slot. The largest tile the
// scratchpad holds is not always the fastest: a tensor of two or three such tiles leaves the DMA
// engines idle while the vector unit works on the first and the vector unit idle while the last one
// stores. So the tile is searched like a matrix layer's: the whole-SRAM tile and halvings of it are
// emitted as trials, each simulated in place (Context::time_code, the cost model every layer's estimate
// uses), and the fastest is kept; a mapping file's `tile_elems` imposes one instead. The choice is
// reported as the layer's `tile.elems` and written by --mapping-out.
// Each candidate tile is also timed with the element-wise stream's two slots laid out as three where they
// hold three tiles (Slots::ring: a tile's LOAD waits for the STORE three tiles back, so the order in which
// the DRAM serves two transfers no longer gates the loads after them), taken when strictly faster.
#include <string>

#include "compiler/backend/core/context.h"

namespace npusim::compiler::backend {

// Lowers node `n` on the vector unit (lower_vector) with its SRAM tile chosen as above and recorded in
// c.plan (tile_elems, the reason when it is not the largest that fits). Returns false, emitting nothing,
// when the vector unit cannot run it (`why` set). Throws MappingError for an imposed tile_elems that is
// zero, larger than the tensor, larger than the scratchpad's slots, or given to a lowering that streams
// no tiles.
bool lower_vector_tiled(Context& c, const Node& n, std::string* why);
// Lowers node `n` on the vector unit now, in the current layer's code, with a plan of its own that is
// discarded: a layer whose work a later reader was to do and did not (Groups::declined,
// fusion/deferred_residual.h). Throws a logic_error naming `context` when the vector unit declines it.
void lower_vector_apart(Context& c, const Node& n, const char* context);

}  // namespace npusim::compiler::backend
