#include "compiler/backend/estimate/roofline.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "isa/timing/dram.h"

namespace npusim::compiler::backend {

int64_t Roofline::bound_cycles() const {
  return static_cast<int64_t>(std::ceil(std::max({compute_cycles, vector_cycles, memory_cycles})));
}

namespace {

// The roofs of a node that moves tensors of `elements` elements each (every distinct one once).
Roofline roofs(const std::vector<int64_t>& elements, int64_t macs, bool grouped, isa::DType precision,
               const isa::NpuConfig& config) {
  int64_t total = 0, largest = 0;
  for (const int64_t e : elements) {
    total += e;
    largest = std::max(largest, e);
  }
  const double lanes = static_cast<double>(std::max<int64_t>(1, config.vector.lanes));
  Roofline r;
  if (macs > 0) {
    const isa::SystolicArrayConfig& a = config.systolic_array;
    const double per_cycle = grouped ? lanes : static_cast<double>(a.rows * a.cols) * a.rate(precision);
    // An array without MACs of the precision runs no matrix layer in it (the
    // layer falls back to the host).
    if (per_cycle > 0) r.compute_cycles = static_cast<double>(macs) / per_cycle;
  } else {
    r.vector_cycles = static_cast<double>(largest) / lanes;
  }
  const double peak = isa::timing::dram_peak_bytes_per_cycle(config);
  if (peak > 0) r.memory_cycles = static_cast<double>(total * isa::dtype_bytes(precision)) / peak;
  return r;
}

// Every distinct tensor n reads (weights included) or writes, once.
std::set<std::string> tensors_of(const Node& n) {
  std::set<std::string> tensors;
  for (const auto* names : {&n.inputs, &n.outputs}) {
    for (const std::string& s : *names)
      if (!s.empty()) tensors.insert(s);
  }
  return tensors;
}

}  // namespace

Roofline roofline(const Graph& g, const Node& n, int64_t macs, isa::DType precision,
                  const isa::NpuConfig& config) {
  std::vector<int64_t> elements;
  for (const std::string& s : tensors_of(n)) {
    if (g.has_value(s) && g.value(s).fully_known()) elements.push_back(num_elements(g.value(s).shape));
  }
  return roofs(elements, macs, n.attr_int("group", 1) > 1, precision, config);
}

std::optional<Roofline> standalone_roofline(const Graph& imported, const Graph& lowered, const Node& n,
                                            int64_t macs, isa::DType precision,
                                            const isa::NpuConfig& config) {
  std::vector<int64_t> elements;
  for (const std::string& s : tensors_of(n)) {
    const Value* v = nullptr;
    for (const Graph* g : {&imported, &lowered}) {
      if (!v && g->has_value(s) && g->value(s).fully_known()) v = &g->value(s);
    }
    if (!v) return std::nullopt;
    elements.push_back(num_elements(v->shape));
  }
  return roofs(elements, macs, n.attr_int("group", 1) > 1, precision, config);
}

}  // namespace npusim::compiler::backend
