#include "traces/accounting.h"

#include <algorithm>

namespace npusim::traces {

void Accounting::Sweep::add(Category c, uint64_t start, uint64_t end) {
  // Category c belongs to the sets with index >= c (compute is in all three, host only in the last).
  for (int s = static_cast<int>(c); s < 3; ++s) {
    const uint64_t from = std::max(start, covered[s]);
    if (end > from) length[s] += end - from;
    covered[s] = std::max(covered[s], end);
  }
}

Breakdown Accounting::Sweep::split(uint64_t span) const {
  Breakdown b;
  b.compute = length[0];
  b.memory = length[1] - length[0];
  b.host = length[2] - length[1];
  b.scheduling = span - length[2];
  return b;
}

void Accounting::reset(size_t layers) {
  all_ = Sweep{};
  layers_.assign(layers, LayerState{});
}

void Accounting::add(uint32_t layer, Category c, uint64_t start, uint64_t end) {
  if (end <= start) return;
  all_.add(c, start, end);
  if (layer < layers_.size()) {
    LayerState& l = layers_[layer];
    l.sweep.add(c, start, end);
    l.start = std::min(l.start, start);
    l.end = std::max(l.end, end);
  }
}

Breakdown Accounting::total(uint64_t total_cycles) const { return all_.split(total_cycles); }

bool Accounting::layer(uint32_t layer, uint64_t& start, uint64_t& end, Breakdown& b) const {
  if (layer >= layers_.size() || layers_[layer].start == UINT64_MAX) return false;
  const LayerState& l = layers_[layer];
  start = l.start;
  end = l.end;
  b = l.sweep.split(l.end - l.start);
  return true;
}

void partition_layer_spans(std::vector<LayerReport>& layers) {
  bool first = true;
  uint64_t prev_end = 0;
  for (LayerReport& l : layers) {
    if (l.end_cycle == 0) {  // no activity: a point at the boundary
      l.start_cycle = l.end_cycle = prev_end;
      continue;
    }
    const uint64_t start = first ? 0 : prev_end;  // the first layer from the start of the run
    const uint64_t end = std::max(l.end_cycle, start);
    first = false;
    prev_end = end;
    l.start_cycle = start;
    l.end_cycle = end;
    l.cycles = end - start;
    Breakdown& b = l.breakdown;
    const uint64_t busy = b.compute + b.memory + b.host;
    if (busy > l.cycles) {
      const double f = static_cast<double>(l.cycles) / static_cast<double>(busy);
      b.compute = static_cast<uint64_t>(static_cast<double>(b.compute) * f);
      b.memory = std::min(static_cast<uint64_t>(static_cast<double>(b.memory) * f), l.cycles - b.compute);
      b.host = std::min(static_cast<uint64_t>(static_cast<double>(b.host) * f), l.cycles - b.compute - b.memory);
    }
    b.scheduling = l.cycles - b.compute - b.memory - b.host;
  }
}

}  // namespace npusim::traces
