#pragma once
// The built-in demo program `npusim run` simulates when no model is given: one int8 convolution
// layer lowered to a tiled GEMM (M = 32x32 output pixels, K = 3x3x32, N = 128 filters) with
// double-buffered input and accumulator tiles, requantisation and ReLU on the vector unit, and a
// final host-side arg-max, sized to fit the configured scratchpads.
#include "isa/machine/config.h"
#include "isa/program.h"

namespace npusim::sim {

// Throws std::runtime_error when the configured scratchpads cannot hold even the smallest tile.
isa::Program demo_program(const isa::NpuConfig& config);

}  // namespace npusim::sim
