#pragma once
// The dependency-token channels of isa.h "Synchronisation": one counter per ordered pair of queues.
// A signal pushes one token (remembering the cycle it was pushed, for the double-buffered preload),
// a wait pops one; a unit waiting on a channel sleeps on its queue's event.
#include <systemc>

#include <array>
#include <cstdint>

#include "arch/core/ring.h"
#include "isa/isa.h"

namespace npusim::arch {

class Tokens {
 public:
  // Pushes one token from `from` to every queue in `mask` at `cycle` (`now_ps`: the current time).
  void signal(isa::Queue from, int64_t mask, uint64_t cycle, uint64_t now_ps) {
    // The mask's queues in ascending order (its set bits only).
    for (uint32_t left = static_cast<uint32_t>(mask) & ((1u << isa::kNumQueues) - 1); left != 0;
         left &= left - 1) {
      const int to = __builtin_ctz(left);
      times_[idx(from)][to].push_back(cycle);
      // A unit whose timer is pending (arch/core/timer.h) waits for that time only: the notification,
      // triggered at the end of this delta cycle, would wake it for nothing (its resume() returns at once).
      // It is the one process sensitive to the event, and leaving an event out of a delta cycle's
      // notifications keeps the others' order, so skipping it changes nothing else.
      if (wake_ps_[to] > now_ps) continue;
      arrived_[to].notify(sc_core::SC_ZERO_TIME);
    }
  }
  // The unit behind queue `to` armed its timer for `wake_ps` (QueueUnit::resume_after).
  void timed_wait(isa::Queue to, uint64_t wake_ps) { wake_ps_[idx(to)] = wake_ps; }
  bool available(isa::Queue from, isa::Queue to) const { return !times_[idx(from)][idx(to)].empty(); }
  // Pops one token; returns the cycle it was pushed. Precondition: available().
  uint64_t pop(isa::Queue from, isa::Queue to) {
    auto& q = times_[idx(from)][idx(to)];
    const uint64_t t = q.front();
    q.pop_front();
    return t;
  }
  size_t count(isa::Queue from, isa::Queue to) const { return times_[idx(from)][idx(to)].size(); }
  const sc_core::sc_event& arrived(isa::Queue to) const { return arrived_[idx(to)]; }

 private:
  static size_t idx(isa::Queue q) { return static_cast<size_t>(q); }
  std::array<std::array<Ring<uint64_t>, isa::kNumQueues>, isa::kNumQueues> times_;
  std::array<sc_core::sc_event, isa::kNumQueues> arrived_;
  std::array<uint64_t, isa::kNumQueues> wake_ps_{};  // the units' last timed wake-ups (ps)
};

}  // namespace npusim::arch
