#include "arch/sequencer/sequencer.h"

#include <fmt/format.h>

#include "arch/core/binding.h"

namespace npusim::arch {

using isa::Opcode;

Sequencer::Sequencer(const sc_core::sc_module_name& name, const isa::SequencerConfig& config, Fabric& fabric,
                     std::function<void(double)> progress)
    : sc_core::sc_module(name),
      config_(config),
      fab_(fabric),
      activity_(fabric.config),
      progress_(std::move(progress)) {
  SC_METHOD(resume);
  process_ = sc_core::sc_get_last_created_process_handle();
}

std::string Sequencer::blocked_on() const {
  if (blocked_index_ < 0) return "";
  const isa::Instruction& ins = fab_.program.instructions[blocked_index_];
  if (at_barrier_) {
    return fmt::format("sequencer: {} at instruction {} waits for {} instruction(s) in flight",
                       isa::format(ins.opcode).mnemonic, blocked_index_, fab_.outstanding);
  }
  return fmt::format("sequencer: instruction {} ({}) waits for room in the full {} queue", blocked_index_,
                     isa::format(ins.opcode).mnemonic, isa::kQueueNames[static_cast<int>(ins.queue())]);
}

bool Sequencer::start_drain(int64_t index) {
  drain_index_ = index;
  phase_ = Phase::kDrainReady;
  const uint64_t now = fab_.now();
  if (local_ > now) {
    fab_.resume_after(local_ - now);
    return false;
  }
  return drain();
}

bool Sequencer::drain() {
  if (phase_ == Phase::kDrainReady) {
    blocked_index_ = drain_index_;
    at_barrier_ = true;
    drain_start_ = fab_.now();
  }
  if (fab_.outstanding > 0) {
    // Static (end_of_elaboration).
    phase_ = Phase::kDrainWaited;
    return false;
  }
  at_barrier_ = false;
  blocked_index_ = -1;
  if (drain_index_ >= 0)
    fab_.rec.stall(kSequencerUnit, drain_index_, traces::Reason::kScheduling, drain_start_, fab_.now());
  local_ = fab_.now();
  return true;
}

void Sequencer::dispatch() {
  ++fab_.outstanding;
  ++dispatched_;
  pending_.ready = local_;
  pending_queue_->push(pending_);
  ++next_;
}

void Sequencer::finish() {
  end_cycle_ = std::max(fab_.now(), fab_.last_end);
  finished_ = true;
  if (progress_) progress_(1.0);
  phase_ = Phase::kDone;
}

void Sequencer::resume() {
  const auto& program = fab_.program.instructions;
  const uint64_t n = program.size();
  for (;;) {
    switch (phase_) {
      case Phase::kNext: {
        if (next_ >= n) {
          // The end of the program is an implicit HALT.
          if (!start_drain(-1)) return;
          finish();
          return;
        }
        const uint64_t i = next_;
        const isa::Instruction& ins = program[i];
        if (progress_ && i == next_report_) {
          progress_(static_cast<double>(i) / n);
          next_report_ += std::max<uint64_t>(1, n / 100);
        }
        local_ += static_cast<uint64_t>(config_.dispatch_cycles);
        auto* layer = fab_.rec.layer(ins.layer());
        if (layer) ++layer->instructions;
        if (ins.opcode == Opcode::kBarrier || ins.opcode == Opcode::kHalt) {
          fab_.rec.count_instruction(kSequencerUnit);
          if (!start_drain(static_cast<int64_t>(i))) return;
          break;  // drained: kDrainWaited goes on below
        }
        const auto q = static_cast<size_t>(ins.queue());
        // Every field but the work, which the unit's decode fills for the opcodes that read it.
        Dispatch& d = pending_;
        d.index = static_cast<uint32_t>(i);
        d.layer = ins.layer();
        d.opcode = ins.opcode;
        d.wait = static_cast<uint8_t>(ins.get(isa::Field::kWait));
        d.signal = static_cast<uint8_t>(ins.get(isa::Field::kSignal));
        try {
          units_[q]->decode(ins, d);
        } catch (const std::exception& e) {
          fab_.fail(e.what());
          phase_ = Phase::kDone;
          return;
        }
        if (layer) activity_.count(ins, d, layer->activity);
        pending_queue_ = to_queue[q];
        if (pending_queue_->num_free() == 0) {
          blocked_index_ = static_cast<int64_t>(i);
          pending_queue_->static_wait_for_room();
          phase_ = Phase::kRoomWaited;
          return;
        }
        dispatch();
        continue;
      }
      case Phase::kRoomWaited: {
        pending_queue_->room_wait_over();
        if (pending_queue_->num_free() == 0) {
          pending_queue_->static_wait_for_room();
          return;
        }
        blocked_index_ = -1;
        const uint64_t t = fab_.now();
        if (t > local_) {
          fab_.rec.stall(kSequencerUnit, static_cast<int64_t>(next_), traces::Reason::kQueueFull, local_, t);
          local_ = t;
        }
        dispatch();
        phase_ = Phase::kNext;
        continue;
      }
      case Phase::kDrainReady:
      case Phase::kDrainWaited:
        if (!drain()) return;
        break;
      case Phase::kDone:
        return;
    }
    // A drain is over: the BARRIER or HALT at next_ is dispatched, the end of the program finishes.
    if (drain_index_ < 0) {
      finish();
      return;
    }
    ++dispatched_;
    const bool halt = program[next_].opcode == Opcode::kHalt;
    ++next_;
    phase_ = Phase::kNext;
    if (halt) {
      if (!start_drain(-1)) return;
      finish();
      return;
    }
  }
}

void Sequencer::end_of_elaboration() {
  for (int q = 0; q < isa::kNumQueues; ++q) {
    const std::string_view queue = isa::kQueueNames[static_cast<size_t>(q)];
    require_bound(*this, to_queue[q], fmt::format("the {} queue (to_queue[{}])", queue, q));
    require_bound(*this, units_[q], fmt::format("the {} unit (attach)", queue));
  }
  // Its waits are static (bounded_queue.h): the queues' read events (it waits for room in one queue at a
  // time, and the others notify only a waiter) and the end of everything in flight (never while a queue
  // holds an instruction, so never while it waits for room).
  sensitive << process_ << fab_.all_done;
  for (BoundedQueue<Dispatch>* q : to_queue) sensitive << q->data_read_event();
}

}  // namespace npusim::arch
