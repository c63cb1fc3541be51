#include "arch/host/host_link.h"

#include "isa/timing/units.h"

namespace npusim::arch {

using isa::Field;

HostLink::HostLink(const sc_core::sc_module_name& name, const isa::HostConfig& config, Fabric& fabric)
    : QueueUnit(name, fabric, isa::Queue::kHost), config_(config) {}

void HostLink::decode(const isa::Instruction& ins, Dispatch& d) const {
  const int64_t in = ins.get(Field::kInBytes), out = ins.get(Field::kOutBytes);
  // Validated before the run: host_op indexes Program::host_ops when the program has any.
  const auto& ops = fab_.program.host_ops;
  const int64_t cpu_ops = ops.empty() ? ins.get(Field::kCpuOps)
                                      : static_cast<int64_t>(ops[static_cast<size_t>(ins.get(Field::kHostOp))].cpu_ops);
  const uint64_t cycles =
      static_cast<uint64_t>(isa::timing::host_cycles(in, out, cpu_ops, config_, fab_.config.frequency_mhz).total());
  d.work.host = Dispatch::HostWork{cycles, in, out};
}

void HostLink::execute(const Dispatch& d, uint64_t) {
  fab_.execute(d.index);
  const uint64_t now = fab_.now();
  const Dispatch::HostWork& w = d.work.host;
  ++calls_;
  bytes_in_ += w.in;
  bytes_out_ += w.out;
  fab_.rec.busy(unit_, d, now, now + w.cycles, traces::Category::kHost, w.in + w.out);
  if (auto* l = fab_.rec.layer(d.layer)) ++l->host_calls;
  fab_.wait_cycles(w.cycles);
  fab_.complete(queue_, d.signal);
}

}  // namespace npusim::arch
