#pragma once
// A nearest upsampling read by the Add after it as its operand (internal to the back end).
// PP-OCRv4 det's neck (RSEFPN's top-down path) adds each level's map to the 2x nearest upsampling of the
// level below: a Resize writes the upsampled map (four times its input) and the Add reads it back (det's
// 160x160 level: 4.9 MB written and read again in fp16, 0.42 M cycles for the Resize alone). Here the
// Resize emits nothing and the Add reads its input z instead: per tile of sh output rows, each of z's pixels
// is loaded sw times by one LOAD whose second dim has a zero stride (the row of the tile's output pixels,
// built by the DMA), and the VEC add uses that row for all sh rows (bcast row). The upsampled map never goes
// to DRAM; z is read sw times instead of the map's sh x sw.
//
// Exact: the Add's own tile work on the same values (each output element x + z at its nearest source pixel;
// # int8: z's codes, which the Resize would copy, centred and rescaled as the Add's integer scheme does u's).
// Not when the Resize's output has another reader, is a graph output or a view, either layer is
// placed elsewhere or the Resize tiled by a mapping file, or the Add's operands and output are not dense
// maps of one layout.
// Not chosen by simulation: the Add's VEC work is the same, its DRAM bytes fewer, and the Resize's go.
#include <cstddef>
#include <cstdint>

#include "compiler/backend/core/context.h"

namespace npusim::compiler::backend {

// The Add that reads node i's output (a Resize or Upsample) as its only reader, adding a value of the same
// shape; else -1. The memory plan keeps the Resize's input alive until that Add.
int64_t upsample_add_candidate(const Graph& g, size_t i);
// Called by the Resize's lowering (c.layer) once its index map is a nearest upsampling of z into u by
// (sh, sw): true when the Add after it will read z itself, and the Resize is to emit nothing.
bool upsample_add_take(Context& c, const Node& resize, const DramTensor& z, const DramTensor& u, int64_t sh,
                       int64_t sw);
// The Add that the Resize upsample_add_take took for reads its input.
const Node& upsample_add_reader(const Context& c);
// For the Add being lowered: the upsampled operand it reads from the Resize's input, else null.
const UpsampledOperand* upsampled_operand(const Context& c, const Node& add);

}  // namespace npusim::compiler::backend
