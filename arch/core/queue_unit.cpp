#include "arch/core/queue_unit.h"

#include <fmt/format.h>

#include "arch/core/binding.h"
#include "arch/datapath/error.h"
#include "arch/sim_error.h"

namespace npusim::arch {

using isa::Queue;
using traces::Reason;

QueueUnit::QueueUnit(const sc_core::sc_module_name& name, Fabric& fabric, Queue queue)
    : sc_core::sc_module(name), fab_(fabric), queue_(queue), unit_(queue_unit(queue)) {
  SC_METHOD(resume);
  process_ = sc_core::sc_get_last_created_process_handle();
}

void QueueUnit::end_of_elaboration() {
  require_bound(*this, in, "its instruction queue (in)");
  // Every wait is static (bounded_queue.h, timer.h): the unit is the one process sensitive to each of these
  // events.
  sensitive << process_ << in->data_written_event() << fab_.tokens.arrived(queue_) << timer_.event();
}

std::string QueueUnit::blocked_on() const {
  if (waiting_for_ < 0 || current_ < 0) return "";
  const isa::Instruction& ins = fab_.program.instructions[current_];
  const uint32_t layer = ins.layer();
  return fmt::format("{} queue: instruction {} ({}{}) waits for a token from the {} queue",
                     isa::kQueueNames[static_cast<int>(queue_)], current_, isa::format(ins.opcode).mnemonic,
                     layer < fab_.program.layers.size() ? ", layer " + fab_.program.layers[layer].name : "",
                     isa::kQueueNames[waiting_for_]);
}

void QueueUnit::resume() {
  // Woken by its tokens' event, notified in the delta cycle in which it armed its timer before it did so:
  // next_trigger(time) would have ignored it (timer.h).
  if (timer_.pending(fab_.now_ps())) return;
  for (;;) {
    switch (phase_) {
      case Phase::kDataWaited:
        in->data_wait_over();
        [[fallthrough]];
      case Phase::kTake: {
        if (in->num_available() == 0) {
          in->static_wait_for_data();
          phase_ = Phase::kDataWaited;
          return;
        }
        in->pop(d_);
        const uint64_t now = fab_.now();
        phase_ = Phase::kReady;
        if (d_.ready > now) {
          resume_after(d_.ready - now);
          return;
        }
        [[fallthrough]];
      }
      case Phase::kReady:
        current_ = d_.index;
        token_cycle_ = d_.ready;
        token_wait_start_ = fab_.now();
        next_token_ = 0;
        last_waited_ = -1;
        phase_ = Phase::kTokens;
        [[fallthrough]];
      case Phase::kTokenWaited:
      case Phase::kTokens: {
        const int64_t mask = d_.wait;
        // The mask's queues from next_token_ on, lowest first (the set bits only).
        for (uint32_t left =
                 static_cast<uint32_t>(mask) & (~0u << next_token_) & ((1u << isa::kNumQueues) - 1);
             left != 0; left &= left - 1) {
          next_token_ = __builtin_ctz(left);
          const auto from = static_cast<Queue>(next_token_);
          if (!fab_.tokens.available(from, queue_)) {
            waiting_for_ = last_waited_ = next_token_;
            // Static: the unit is sensitive to its tokens' event (end_of_elaboration).
            phase_ = Phase::kTokenWaited;
            return;
          }
          token_cycle_ = std::max(token_cycle_, fab_.tokens.pop(from, queue_));
        }
        next_token_ = isa::kNumQueues;
        if (mask) {
          waiting_for_ = -1;
          if (last_waited_ >= 0) {
            const Queue from = static_cast<Queue>(last_waited_);
            const Reason why = from == Queue::kLoad || from == Queue::kStore ? Reason::kMemory
                               : from == Queue::kHost                        ? Reason::kHost
                                                                             : Reason::kScheduling;
            fab_.rec.stall(unit_, d_, why, token_wait_start_, fab_.now());
          }
        }
        fab_.rec.count_instruction(unit_);
        phase_ = Phase::kExecute;
        [[fallthrough]];
      }
      case Phase::kExecute:
        try {
          if (!advance(d_, token_cycle_)) return;
        } catch (const std::exception& e) {
          fab_.fail(e.what());
          phase_ = Phase::kStopped;
          return;
        }
        phase_ = Phase::kTake;
        break;
      case Phase::kStopped:
        return;
    }
  }
}

}  // namespace npusim::arch
