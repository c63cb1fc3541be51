#pragma once
// Fetch, decode and dispatch: walks the program in order and writes each instruction into its
// unit's bounded queue, dispatch_cycles apart; a full queue blocks dispatch (a queue_full stall).
// BARRIER waits until every dispatched instruction completed; HALT does the same and ends the run.
//
// The sequencer runs ahead of simulated time while the queues have room (temporal decoupling):
// each entry carries the cycle it was dispatched and the unit does not start it earlier, so the
// sequencer only waits when it blocks, not once per instruction. A method process, as the units are
// (arch/core/queue_unit.h).
#include <systemc>

#include <array>
#include <functional>
#include <string>

#include "arch/core/activity.h"
#include "arch/core/fabric.h"
#include "arch/core/queue_unit.h"

namespace npusim::arch {

class Sequencer : public sc_core::sc_module {
 public:
  std::array<BoundedQueue<Dispatch>*, isa::kNumQueues> to_queue{};  // indexed by isa::Queue

  SC_HAS_PROCESS(Sequencer);
  Sequencer(const sc_core::sc_module_name& name, const isa::SequencerConfig& config, Fabric& fabric,
            std::function<void(double)> progress);

  // The units behind the queues, which decode what is dispatched to them.
  void attach(const std::array<const QueueUnit*, isa::kNumQueues>& units) { units_ = units; }

  bool finished() const { return finished_; }
  uint64_t end_cycle() const { return end_cycle_; }
  uint64_t dispatched() const { return dispatched_; }
  // For deadlock reports: what dispatch is blocked on, or "".
  std::string blocked_on() const;

 protected:
  // Fails elaboration when a queue or a unit behind one was never bound.
  void end_of_elaboration() override;

 private:
  void resume();  // the method process (arch/core/queue_unit.h says why a method)
  // BARRIER/HALT (index -1: the end of the program): waits until everything dispatched has completed.
  // Returns false when it armed a wake-up (resume() goes on with it), true when it drained.
  bool start_drain(int64_t index);
  bool drain();
  void dispatch();  // the instruction at next_ into its queue, which has room
  void finish();

  isa::SequencerConfig config_;
  Fabric& fab_;
  const ActivityCounter activity_;      // counts what each dispatched instruction does (energy)
  sc_core::sc_process_handle process_;  // resume(), for its static sensitivity
  std::array<const QueueUnit*, isa::kNumQueues> units_{};
  std::function<void(double)> progress_;
  bool finished_ = false;
  uint64_t end_cycle_ = 0;
  uint64_t dispatched_ = 0;
  int64_t blocked_index_ = -1;  // instruction waiting for a full queue or a barrier
  bool at_barrier_ = false;

  // Where the walk is: the next instruction, this sequencer's own clock (>= simulated time), the entry
  // waiting for room in its queue, the BARRIER/HALT being drained.
  enum class Phase : uint8_t { kNext, kRoomWaited, kDrainReady, kDrainWaited, kDone };
  Phase phase_ = Phase::kNext;
  uint64_t next_ = 0;
  uint64_t local_ = 0;
  uint64_t next_report_ = 0;
  Dispatch pending_;
  BoundedQueue<Dispatch>* pending_queue_ = nullptr;
  int64_t drain_index_ = -1;
  uint64_t drain_start_ = 0;
};

}  // namespace npusim::arch
