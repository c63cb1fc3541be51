#pragma once
// A method process's timed wake-up through an event of its own to which it is statically sensitive,
// instead of next_trigger(time). The kernel receives the same timed notification at the same point (one
// entry in its timed-event queue, so processes woken at one time run in the same order), without arming a
// dynamic trigger per wait and disarming it when it fires: SystemC 2.3.4 spends about 90 host instructions
// on that per wait.
//
// While the timer is pending the process is in its static mode, so another of its static events would
// wake it, which next_trigger(time) would not: the process must then return at once, doing nothing
// (pending()), and its events should not fire while it waits for time (a queue's events fire only for a
// waiter; Tokens::signal skips a unit that waits for time).
#include <systemc>

#include <cstdint>

namespace npusim::arch {

class Timer {
 public:
  // Fires `t` from now; `at_ps` is that time in picoseconds.
  void arm(const sc_core::sc_time& t, uint64_t at_ps) {
    at_ps_ = at_ps;
    event_.notify(t);
  }
  // It was armed and has not fired at `now_ps` (a timed notification fires at the start of its time, before
  // any process runs at that time).
  bool pending(uint64_t now_ps) const { return at_ps_ > now_ps; }
  uint64_t at_ps() const { return at_ps_; }
  // What the process is made sensitive to.
  const sc_core::sc_event& event() const { return event_; }

 private:
  sc_core::sc_event event_;
  uint64_t at_ps_ = 0;
};

}  // namespace npusim::arch
