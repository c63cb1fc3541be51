#include "compiler/backend/roofline.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <string>

#include "isa/timing/dram.h"

namespace npusim::compiler::backend {

int64_t Roofline::bound_cycles() const {
  return static_cast<int64_t>(std::ceil(std::max({compute_cycles, vector_cycles, memory_cycles})));
}

Roofline roofline(const Graph& g, const Node& n, int64_t macs, isa::DType precision,
                  const isa::NpuConfig& config) {
  // Every distinct tensor the node reads (weights included) or writes, once.
  std::set<std::string> tensors;
  for (const auto* names : {&n.inputs, &n.outputs}) {
    for (const std::string& s : *names) {
      if (!s.empty() && g.has_value(s) && g.value(s).fully_known()) tensors.insert(s);
    }
  }
  int64_t elements = 0, largest = 0;
  for (const std::string& s : tensors) {
    const int64_t e = num_elements(g.value(s).shape);
    elements += e;
    largest = std::max(largest, e);
  }
  const double lanes = static_cast<double>(std::max<int64_t>(1, config.vector.lanes));
  Roofline r;
  if (macs > 0) {
    const isa::SystolicArrayConfig& a = config.systolic_array;
    const double per_cycle =
        n.attr_int("group", 1) > 1 ? lanes : static_cast<double>(a.rows * a.cols) * a.rate(precision);
    // An array without MACs of the precision runs no matrix layer in it (the
    // layer falls back to the host).
    if (per_cycle > 0) r.compute_cycles = static_cast<double>(macs) / per_cycle;
  } else {
    r.vector_cycles = static_cast<double>(largest) / lanes;
  }
  const double peak = isa::timing::dram_peak_bytes_per_cycle(config);
  if (peak > 0) r.memory_cycles = static_cast<double>(elements * isa::dtype_bytes(precision)) / peak;
  return r;
}

}  // namespace npusim::compiler::backend
