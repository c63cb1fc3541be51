#pragma once
// Charges every cycle of the run, and of each layer, to exactly one of compute / memory / host /
// scheduling: the first that applies of (matrix or vector unit busy), (a DMA transfer in flight or
// a unit stalled on memory), (a host call running), otherwise scheduling.
//
// Intervals arrive in non-decreasing start order (the simulator reports each one when it starts,
// and simulated time only moves forward), so the sweep needs no event list: per category set it
// keeps how far the union is covered and how long it is. Memory is O(layers), time O(1) per
// interval, and the result adds up by construction:
//   compute = |C|, memory = |C u M| - |C|, host = |C u M u H| - |C u M|, scheduling = span - |C u M u H|.
#include <cstdint>
#include <vector>

#include "traces/report.h"

namespace npusim::traces {

enum class Category : uint8_t { kCompute = 0, kMemory = 1, kHost = 2 };

class Accounting {
 public:
  void reset(size_t layers);
  // [start, end) in cycles; start must not be less than any earlier interval's start.
  void add(uint32_t layer, Category c, uint64_t start, uint64_t end);
  // The run's breakdown over [0, total_cycles).
  Breakdown total(uint64_t total_cycles) const;
  // A layer's breakdown over its span; false when the layer had no activity.
  bool layer(uint32_t layer, uint64_t& start, uint64_t& end, Breakdown& b) const;

 private:
  // Union length of the nested sets C, C u M, C u M u H.
  struct Sweep {
    uint64_t covered[3] = {0, 0, 0};
    uint64_t length[3] = {0, 0, 0};
    void add(Category c, uint64_t start, uint64_t end);
    Breakdown split(uint64_t span) const;
  };
  struct LayerState {
    Sweep sweep;
    uint64_t start = UINT64_MAX;
    uint64_t end = 0;
  };
  Sweep all_;
  std::vector<LayerState> layers_;
};

}  // namespace npusim::traces
