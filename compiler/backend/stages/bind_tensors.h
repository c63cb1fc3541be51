#pragma once
// The back end's last stage: the program's tensor bindings (its graph inputs and outputs, in ONNX order:
// where each lives in DRAM, its dtype and dims in memory order; constant outputs become data segments)
// and where every runtime value ended up (CompileResult::values, and ::on_chip for those never in DRAM),
// with the memory plan's data and scratch totals.
#include "compiler/backend/core/context.h"

namespace npusim::compiler::backend {

// Binds c.g's inputs and outputs in c.program after lower_layers; throws CompileError when a graph input
// or output is not in ONNX order (outside a SCALE-Sim topology, Graph::nhwc_io).
void bind_tensors(Context& c);

}  // namespace npusim::compiler::backend
