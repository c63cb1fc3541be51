#pragma once
// The back end's lowering stage: each layer of the lowered graph, in graph order, becomes its code
// (docs/backend.md). A layer is folded (a view: no code), free (an alias), part of a fused group
// (fusion/: attention, conv -> pool / depthwise, squeeze-and-excitation, on-chip residency), or lowered
// on its unit -- the array (matrix/), the vector unit (vector/) -- or the host (host/) when its unit
// cannot take it. Each layer's LayerPlan goes to CompileResult::layers, with its estimate (its code
// simulated between its neighbours when CompileOptions::timer is set) and its roofline bound.
#include "compiler/backend/core/context.h"

namespace npusim::compiler::backend {

// Lowers every node of c.g into c.program, after plan_memory placed its tensors, and ends the program.
void lower_layers(Context& c);

}  // namespace npusim::compiler::backend
