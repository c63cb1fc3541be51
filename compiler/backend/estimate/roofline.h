#pragma once
// A layer's roofline bound on the target machine: the fewest cycles its work
// could take at the machine's peak rates with every tensor moved once
// (docs/report.md, "Roofline").
#include <cstdint>
#include <optional>
#include <vector>

#include "compiler/ir/graph.h"
#include "isa/machine/config.h"
#include "isa/program.h"

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
  double stage_cycles = 0;       // compiled: the VEC outputs on the output stage
                                 // (systolic_array.output_stage), beside the lanes
  int64_t bound_cycles() const;  // the highest roof, rounded up to a whole cycle
};

// The machine's peak rates, the one place the roofs, the compiled roofs and the model limit take them
// from: the array's MACs per cycle in `precision` (rows x cols x its rate; 0 without MACs of it), the
// vector lanes' elements per cycle, their depthwise MACs per cycle in `precision` (lanes x the
// products a lane sums per cycle), and DRAM bytes per cycle (0 = unlimited).
double array_peak_macs_per_cycle(const isa::NpuConfig& config, isa::DType precision);
double lane_peak_per_cycle(const isa::NpuConfig& config);
double lane_peak_macs_per_cycle(const isa::NpuConfig& config, isa::DType precision);
double dram_peak_per_cycle(const isa::NpuConfig& config);

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

// The roofs of each program layer's work as compiled (indexed as program.layers): the MAC slots its
// MATMUL and CONV instructions occupy at the array's peak in their precision (a depthwise conv run as
// block-diagonal blocks pays its zero blocks), its VEC instructions' work over the lanes, and the bytes
// its LOADs and STOREs move at DRAM peak. Each unit runs its instructions no faster than that, so a
// layer's span is never shorter than its bound_cycles(): its efficiency (bound / cycles) is at most 1.
// compute_cycles is the array's term, vector_cycles the lanes', memory_cycles DRAM's; none for a layer
// without NPU instructions (a host call, a node another layer does the work of).
std::vector<std::optional<Roofline>> compiled_rooflines(const isa::Program& program,
                                                        const isa::NpuConfig& config);

}  // namespace npusim::compiler::backend
