#pragma once
// The common shape of a unit behind an instruction queue: take the next instruction from the
// bounded queue (idle while it is empty), wait until the sequencer dispatched it, pop its wait
// tokens (a stall whose reason is the unit that was waited for), then execute it.
//
// A unit is a method process, a state machine that returns wherever a thread would call wait() and arms
// the same wake-up (next_trigger on the same event, or after the same time): the kernel schedules the
// same notifications in the same order, so every process runs in the same delta cycle and order as the
// threads it replaces, without a coroutine switch per wake-up. Every process of a netlist must be a
// method for that to hold (the kernel runs a delta cycle's methods before its threads).
//
// The waits are static: each process is made sensitive once (end_of_elaboration) to every event it ever
// waits on -- its queue's, its tokens', its timer's (arch/core/timer.h) -- and waits by returning, which
// saves the kernel's arming and disarming of a dynamic trigger per wait (about 90 host instructions each).
// That wakes it when the same event fires, in the same place, because each of these events has this one
// process sensitive to it and fires only while it waits for it, but for the tokens' event, which it must
// ignore while its timer is pending (resume() returns at once).
#include <systemc>

#include <cstdint>
#include <ostream>
#include <string>

#include "arch/core/bounded_queue.h"
#include "arch/core/dispatch.h"
#include "arch/core/fabric.h"
#include "arch/core/timer.h"

namespace npusim::arch {

class QueueUnit : public sc_core::sc_module {
 public:
  BoundedQueue<Dispatch>* in = nullptr;  // from the sequencer

  SC_HAS_PROCESS(QueueUnit);
  QueueUnit(const sc_core::sc_module_name& name, Fabric& fabric, isa::Queue queue);

  isa::Queue queue() const { return queue_; }
  // Fills d.work for instruction `ins` (the sequencer calls it when it dispatches to this unit).
  // Only instruction and config go in, so it may run before the instruction's cycle.
  virtual void decode(const isa::Instruction& ins, Dispatch& d) const { (void)ins, (void)d; }
  // For deadlock reports: what the unit is blocked on, or "" when it is not waiting on a token.
  std::string blocked_on() const;

 protected:
  // Fails elaboration when `in` was never bound (arch/core/binding.h).
  void end_of_elaboration() override;
  // Advances instruction d at the current cycle, from the cycle its tokens were in (`token_cycle`,
  // pushed by then at the latest): returns true when the unit is done with it (completed through
  // fab_.complete, now or by someone else later), false when it armed a wake-up (Fabric::resume_after, a
  // queue's next_trigger_on_room) and is to be advanced again when that fires. A unit with more than
  // one step keeps its own step.
  virtual bool advance(const Dispatch& d, uint64_t token_cycle) = 0;

  // Runs the unit again n cycles from now (n > 0), through its timer (arch/core/timer.h), which its token
  // channel is told of (Tokens::signal skips a notification it would ignore).
  void resume_after(uint64_t n) {
    const sc_core::sc_time& t = fab_.cycles_time(n);
    const uint64_t at = fab_.now_ps() + t.value();
    timer_.arm(t, at);
    fab_.tokens.timed_wait(queue_, at);
  }

  Fabric& fab_;
  const isa::Queue queue_;
  sc_core::sc_process_handle process_;  // resume(), for its static sensitivity
  Timer timer_;
  const uint16_t unit_;

 private:
  void resume();  // the method process
  enum class Phase : uint8_t { kTake, kDataWaited, kReady, kTokens, kTokenWaited, kExecute, kStopped };
  Phase phase_ = Phase::kTake;
  Dispatch d_;                // the instruction in progress
  uint64_t token_cycle_ = 0;  // when its tokens were in
  uint64_t token_wait_start_ = 0;
  int next_token_ = 0;    // the queue whose token is looked at next
  int last_waited_ = -1;  // the last queue whose token it waited for, -1: none
  int64_t current_ = -1;
  int waiting_for_ = -1;  // queue whose token it waits for
};

}  // namespace npusim::arch
