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
  SC_THREAD(run);
}

void QueueUnit::end_of_elaboration() { require_bound(*this, in, "its instruction queue (in)"); }

std::string QueueUnit::blocked_on() const {
  if (waiting_for_ < 0 || current_ < 0) return "";
  const isa::Instruction& ins = fab_.program.instructions[current_];
  const uint32_t layer = ins.layer();
  return fmt::format("{} queue: instruction {} ({}{}) waits for a token from the {} queue",
                     isa::kQueueNames[static_cast<int>(queue_)], current_, isa::format(ins.opcode).mnemonic,
                     layer < fab_.program.layers.size() ? ", layer " + fab_.program.layers[layer].name : "",
                     isa::kQueueNames[waiting_for_]);
}

void QueueUnit::run() {
  for (;;) {
    Dispatch d;
    in->read(d);
    fab_.wait_until(d.ready);
    current_ = d.index;
    const int64_t mask = d.wait;
    uint64_t token_cycle = d.ready;
    if (mask) {
      const uint64_t t0 = fab_.now();
      int last = -1;
      for (int q = 0; q < isa::kNumQueues; ++q) {
        if (!((mask >> q) & 1)) continue;
        while (!fab_.tokens.available(static_cast<Queue>(q), queue_)) {
          waiting_for_ = last = q;
          sc_core::wait(fab_.tokens.arrived(queue_));
        }
        token_cycle = std::max(token_cycle, fab_.tokens.pop(static_cast<Queue>(q), queue_));
      }
      waiting_for_ = -1;
      if (last >= 0) {
        const Queue from = static_cast<Queue>(last);
        const Reason why = from == Queue::kLoad || from == Queue::kStore ? Reason::kMemory
                           : from == Queue::kHost                        ? Reason::kHost
                                                                         : Reason::kScheduling;
        fab_.rec.stall(unit_, d, why, t0, fab_.now());
      }
    }
    fab_.rec.count_instruction(unit_);
    try {
      execute(d, token_cycle);
    } catch (const std::exception& e) {
      fab_.fail(e.what());
      return;
    }
  }
}

}  // namespace npusim::arch
