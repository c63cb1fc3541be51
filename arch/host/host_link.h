#pragma once
// The host link and CPU: what a fallback op costs. A HOSTCALL sends in_bytes over the link, runs
// the op's cpu_ops on the host CPU, and returns out_bytes (isa/timing/units.h host_cycles).
#include "arch/core/queue_unit.h"

namespace npusim::arch {

class HostLink : public QueueUnit {
 public:
  SC_HAS_PROCESS(HostLink);
  HostLink(const sc_core::sc_module_name& name, const isa::HostConfig& config, Fabric& fabric);

  uint64_t calls() const { return calls_; }
  uint64_t bytes_in() const { return bytes_in_; }
  uint64_t bytes_out() const { return bytes_out_; }

 private:
  void decode(const isa::Instruction& ins, Dispatch& d) const override;
  bool advance(const Dispatch& d, uint64_t token_cycle) override;
  isa::HostConfig config_;
  uint64_t calls_ = 0, bytes_in_ = 0, bytes_out_ = 0;
  bool running_ = false;  // a call in progress, waiting for its end
};

}  // namespace npusim::arch
