#include "traces/accounting.h"

#include <algorithm>

namespace npusim::traces {

void Accounting::Sweep::add(Category c, uint64_t start, uint64_t end) {
  // Category c belongs to the sets with index >= c (compute is in all three, host only in the last).
  // The sets are nested, so covered[0] <= covered[1] <= covered[2]: once an interval ends within a
  // set's covered prefix, it ends within every larger set's too and adds nothing there.
  for (int s = static_cast<int>(c); s < 3; ++s) {
    if (end <= covered[s]) break;
    length[s] += end - std::max(start, covered[s]);
    covered[s] = end;
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

}  // namespace npusim::traces
