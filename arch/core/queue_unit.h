#pragma once
// The common shape of a unit behind an instruction queue: take the next instruction from the
// bounded queue (idle while it is empty), wait until the sequencer dispatched it, pop its wait
// tokens (a stall whose reason is the unit that was waited for), then execute it.
#include <systemc>

#include <cstdint>
#include <ostream>
#include <string>

#include "arch/core/bounded_queue.h"
#include "arch/core/dispatch.h"
#include "arch/core/fabric.h"

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
  // Runs instruction d.index; called at the cycle its tokens are in. Tokens were pushed by
  // `token_cycle` at the latest. Completes it through fab_.complete (now or later).
  virtual void execute(const Dispatch& d, uint64_t token_cycle) = 0;

  Fabric& fab_;
  const isa::Queue queue_;
  const uint16_t unit_;

 private:
  void run();
  int64_t current_ = -1;
  int waiting_for_ = -1;  // queue whose token it waits for
};

}  // namespace npusim::arch
