#include "arch/sequencer/sequencer.h"

#include <fmt/format.h>

#include "arch/core/activity.h"
#include "arch/core/binding.h"

namespace npusim::arch {

using isa::Opcode;

Sequencer::Sequencer(const sc_core::sc_module_name& name, const isa::SequencerConfig& config, Fabric& fabric,
                     std::function<void(double)> progress)
    : sc_core::sc_module(name), config_(config), fab_(fabric), progress_(std::move(progress)) {
  SC_THREAD(run);
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

// BARRIER/HALT: wait until everything dispatched has completed.
void Sequencer::drain(uint64_t& local, int64_t index) {
  fab_.wait_until(local);
  blocked_index_ = index;
  at_barrier_ = true;
  const uint64_t t0 = fab_.now();
  while (fab_.outstanding > 0) sc_core::wait(fab_.all_done);
  at_barrier_ = false;
  blocked_index_ = -1;
  if (index >= 0) fab_.rec.stall(kSequencerUnit, index, traces::Reason::kScheduling, t0, fab_.now());
  local = fab_.now();
}

void Sequencer::run() {
  const auto& program = fab_.program.instructions;
  const uint64_t n = program.size();
  const uint64_t step = static_cast<uint64_t>(config_.dispatch_cycles);
  const uint64_t report_every = std::max<uint64_t>(1, n / 100);
  uint64_t next_report = 0;
  uint64_t local = 0;  // this sequencer's own clock, >= simulated time
  for (uint64_t i = 0; i < n; ++i) {
    const isa::Instruction& ins = program[i];
    if (progress_ && i == next_report) {
      progress_(static_cast<double>(i) / n);
      next_report += report_every;
    }
    local += step;
    auto* layer = fab_.rec.layer(ins.layer());
    if (layer) ++layer->instructions;
    if (ins.opcode == Opcode::kBarrier || ins.opcode == Opcode::kHalt) {
      fab_.rec.count_instruction(kSequencerUnit);
      drain(local, static_cast<int64_t>(i));
      ++dispatched_;
      if (ins.opcode == Opcode::kHalt) break;
      continue;
    }
    const auto q = static_cast<size_t>(ins.queue());
    Dispatch d;
    d.index = static_cast<uint32_t>(i);
    d.layer = ins.layer();
    d.opcode = ins.opcode;
    d.wait = static_cast<uint8_t>(ins.get(isa::Field::kWait));
    d.signal = static_cast<uint8_t>(ins.get(isa::Field::kSignal));
    try {
      units_[q]->decode(ins, d);
    } catch (const std::exception& e) {
      fab_.fail(e.what());
      return;
    }
    if (layer) count_activity(ins, d, fab_.config, layer->activity);
    BoundedQueue<Dispatch>* out = to_queue[q];
    if (out->num_free() == 0) {
      blocked_index_ = static_cast<int64_t>(i);
      while (out->num_free() == 0) out->wait_for_room();
      blocked_index_ = -1;
      const uint64_t t = fab_.now();
      if (t > local) {
        fab_.rec.stall(kSequencerUnit, static_cast<int64_t>(i), traces::Reason::kQueueFull, local, t);
        local = t;
      }
    }
    ++fab_.outstanding;
    ++dispatched_;
    d.ready = local;
    out->write(d);
  }
  // The end of the program is an implicit HALT.
  drain(local, -1);
  end_cycle_ = std::max(fab_.now(), fab_.last_end);
  finished_ = true;
  if (progress_) progress_(1.0);
}

void Sequencer::end_of_elaboration() {
  for (int q = 0; q < isa::kNumQueues; ++q) {
    const std::string_view queue = isa::kQueueNames[static_cast<size_t>(q)];
    require_bound(*this, to_queue[q], fmt::format("the {} queue (to_queue[{}])", queue, q));
    require_bound(*this, units_[q], fmt::format("the {} unit (attach)", queue));
  }
}

}  // namespace npusim::arch
