#include "arch/host/host_link.h"

#include <algorithm>

#include "isa/timing/units.h"

namespace npusim::arch {

using isa::Field;

HostLink::HostLink(const sc_core::sc_module_name& name, const isa::HostConfig& config, Fabric& fabric)
    : QueueUnit(name, fabric, isa::Queue::kHost), config_(config) {}

void HostLink::decode(const isa::Instruction& ins, Dispatch& d) const {
  const int64_t in = ins.get(Field::kInBytes), out = ins.get(Field::kOutBytes);
  // Validated before the run: host_op indexes Program::host_ops when the program has any.
  const auto& ops = fab_.program.host_ops;
  const int64_t cpu_ops =
      ops.empty() ? ins.get(Field::kCpuOps)
                  : static_cast<int64_t>(ops[static_cast<size_t>(ins.get(Field::kHostOp))].cpu_ops);
  const isa::timing::HostCycles c =
      isa::timing::host_cycles(in, out, cpu_ops, config_, fab_.config.frequency_mhz);
  const double f = fab_.config.frequency_mhz;
  d.work.host = Dispatch::HostWork{static_cast<uint64_t>(c.link_in),
                                   static_cast<uint64_t>(c.cpu + c.overhead),
                                   static_cast<uint64_t>(c.link_out),
                                   static_cast<uint64_t>(isa::timing::host_copy_cycles(in, config_, f)),
                                   static_cast<uint64_t>(isa::timing::host_copy_cycles(out, config_, f)),
                                   in,
                                   out};
}

bool HostLink::advance(const Dispatch& d, uint64_t) {
  if (!running_) {
    fab_.execute(d.index);
    const uint64_t now = fab_.now();
    const Dispatch::HostWork& w = d.work.host;
    ++calls_;
    bytes_in_ += w.in;
    bytes_out_ += w.out;
    // The link is the uncore's: another core's bytes in the same direction delay this call's (one core
    // alone never waits: its host calls run one at a time). The call is busy from its start to its end.
    HostLinkBus& link = fab_.link;
    const uint64_t in_start = std::max(now, link.in_free);
    link.in_free = in_start + w.occupy_in;
    const uint64_t out_start = std::max(in_start + w.link_in + w.host, link.out_free);
    link.out_free = out_start + w.occupy_out;
    const uint64_t end = out_start + w.link_out;
    fab_.rec.busy(unit_, d, now, end, traces::Category::kHost, w.in + w.out);
    if (end > now) {
      running_ = true;
      resume_after(end - now);
      return false;
    }
  }
  running_ = false;
  fab_.complete(queue_, d.signal);
  return true;
}

}  // namespace npusim::arch
