#pragma once
// A layer's roofline bound on the target machine: the fewest cycles its work
// could take at the machine's peak rates with every tensor moved once
// (docs/report.md, "Roofline").
#include <cstdint>
#include <optional>

#include "compiler/ir/graph.h"
#include "isa/machine/config.h"

namespace npusim::compiler::backend {

// The three roofs of one layer in (fractional) cycles; the bound is the
// highest.
struct Roofline {
  double compute_cycles = 0;     // MACs at the array's peak for the precision
                                 // (grouped convs: the vector lanes')
  double vector_cycles = 0;      // layers without MACs: their largest tensor's
                                 // elements over the vector lanes
  double memory_cycles = 0;      // inputs + weights + outputs bytes over the DRAM
                                 // peak (0 with ideal DRAM)
  int64_t bound_cycles() const;  // the highest roof, rounded up to a whole cycle
};

// Node `n` of lowered graph `g` run in `precision` (the MAC rate, and the bytes
// of every tensor it moves); `macs` as the mapper counted them (0 for layers
// without MACs). A grouped or depthwise conv (group > 1) is bounded by the
// vector lanes: a systolic array cannot share inputs across groups.
Roofline roofline(const Graph& g, const Node& n, int64_t macs, isa::DType precision,
                  const isa::NpuConfig& config);

// The same for node n of the model as imported, as if it ran alone (its own inputs, weights and
// outputs, before any fusion): the bound of the ONNX node. Shapes come from `imported`, or where
// import left one unknown, from `lowered` (the same value after the passes); none when one stays
// unknown.
std::optional<Roofline> standalone_roofline(const Graph& imported, const Graph& lowered, const Node& n,
                                            int64_t macs, isa::DType precision, const isa::NpuConfig& config);

}  // namespace npusim::compiler::backend
