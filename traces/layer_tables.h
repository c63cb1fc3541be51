#pragma once
// Per-layer and per-op-type views of a report, for people who act on them: what bounds each layer,
// where the time went by op type, and one CSV row per layer (docs/report.md, "Layer tables").
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "traces/report.h"

namespace npusim::traces {

// What a layer's cycles were mostly spent on: "host" for a CPU fallback, else the largest part of its
// breakdown ("compute", "memory", "scheduling" or "host"; ties go in that order); "none" without cycles.
std::string_view bound_label(const LayerReport& l);

// The layers of one op type together. Layers may overlap in time, so `cycles` (the sum of the layers'
// cycles) can exceed the run's total_cycles; `share` is of the sum over all op types.
struct OpRollup {
  std::string op;
  uint64_t layers = 0;       // program layers
  uint64_t fused_nodes = 0;  // nodes fused into other layers (LayerReport::fused())
  uint64_t cycles = 0;
  double share = 0;
  uint64_t macs = 0;
  uint64_t dram_bytes_read = 0;
  uint64_t dram_bytes_written = 0;
  Breakdown breakdown;
  std::optional<uint64_t> bound_cycles;  // the sum of its layers' bounds, when one has a bound
};

// One entry per op type, most cycles first (ties: by op name).
std::vector<OpRollup> op_rollup(const Report& r);

// One row per layer, in program order, with a header line (docs/report.md lists the columns).
void write_layers_csv(const Report& r, std::ostream& out);

}  // namespace npusim::traces
