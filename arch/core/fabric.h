#pragma once
// What every unit of one simulated NPU shares: the program, the config, the clock, the recorder,
// the token channels, the SRAM, the DRAM model and host link of the uncore (shared with the other cores
// of a multi-core NPU), the functional state (functional mode only) and the count of instructions in
// flight (for BARRIER, HALT and deadlock detection).
#include <systemc>

#include <array>
#include <cstdint>
#include <memory>
#include <string>

#include "arch/core/recorder.h"
#include "arch/core/tokens.h"
#include "arch/core/uncore.h"
#include "arch/datapath/state.h"
#include "arch/sram/sram.h"
#include "isa/machine/config.h"
#include "isa/program.h"
#include "isa/timing/dram.h"

namespace npusim::arch {

// Track (unit) indices: the sequencer, one per queue, then DMA engines, then DRAM channels (one track per
// channel per DMA engine, channel-major: Npu::track_names).
inline constexpr uint16_t kSequencerUnit = 0;
inline constexpr uint16_t queue_unit(isa::Queue q) { return static_cast<uint16_t>(1 + static_cast<int>(q)); }
inline constexpr uint16_t kFirstDmaUnit = 1 + isa::kNumQueues;

class Fabric {
 public:
  Fabric(const isa::Program& program, const isa::NpuConfig& config, traces::Sink* sink, size_t units,
         datapath::MachineState* state, Uncore& uncore, int core)
      : program(program),
        config(config),
        period_ps(static_cast<uint64_t>(std::llround(1e6 / config.frequency_mhz))),
        rec(program, units, sink),
        sram(config.sram),
        dram(uncore.dram.get()),
        link(uncore.link),
        dram_base(uncore.core_base(core)),
        state(state),
        simc_(sc_core::sc_get_curr_simcontext()) {}

  // The current cycle. Every wait is a whole number of periods, so this is exact.
  uint64_t now() const {
    // Units ask several times per instruction at the same time stamp; divide once per time stamp.
    const uint64_t ps = simc_->time_stamp().value();  // inline, unlike sc_time_stamp()
    if (ps != now_ps_) {
      now_ps_ = ps;
      now_cycle_ = ps / period_ps;
    }
    return now_cycle_;
  }
  // Every unit is a method process (a state machine, no thread of its own to switch to): it spends time by
  // asking to run again `n` cycles from now (n > 0) and returning.
  // Returns the time of that wake-up in picoseconds.
  uint64_t resume_after(uint64_t n) const {
    const sc_core::sc_time& t = cycles_time(n);
    sc_core::next_trigger(t, simc_);
    return now_ps() + t.value();
  }
  // n cycles as an sc_time. sc_time::from_value is a call into the library per wait; the units wait the
  // same cycle counts over and over, so their sc_time values are kept (direct-mapped on the count's low
  // bits folded with the next ones: a DMA transfer's duration varies in its low bits).
  const sc_core::sc_time& cycles_time(uint64_t n) const {
    Wait& w = waits_[(n ^ (n >> 6)) & (kWaits - 1)];
    if (w.cycles != n) w = {n, sc_core::sc_time::from_value(n * period_ps)};
    return w.time;
  }
  // The current time in picoseconds.
  uint64_t now_ps() const { return simc_->time_stamp().value(); }

  // An instruction of queue `q` whose signal mask is `signal` completed now: push its tokens.
  void complete(isa::Queue q, int64_t signal) {
    const uint64_t t = now();
    tokens.signal(q, signal, t, now_ps_);
    if (t > last_end) last_end = t;
    if (--outstanding == 0) all_done.notify(sc_core::SC_ZERO_TIME);
  }

  // Applies an instruction's values in functional mode. Throws SimError naming it. Every unit calls it
  // once per instruction: the timing-mode test is inline, the functional work out of line.
  void execute(int64_t index) {
    if (state) execute_values(index);
  }

  // Records the first failure and stops the simulation.
  void fail(const std::string& message) {
    if (error.empty()) error = message;
    sc_core::sc_stop();
  }

  const isa::Program& program;
  const isa::NpuConfig& config;
  const uint64_t period_ps;
  Recorder rec;
  Tokens tokens;
  Sram sram;
  isa::timing::Dram* dram;        // the uncore's
  HostLinkBus& link;              // the uncore's
  const uint64_t dram_base;       // added to the program's DRAM addresses (Uncore::core_base)
  datapath::MachineState* state;  // null in timing mode
  int64_t outstanding = 0;        // dispatched, not yet completed
  sc_core::sc_event all_done;
  uint64_t last_end = 0;
  std::string error;

 private:
  void execute_values(int64_t index);

  sc_core::sc_simcontext* const simc_;  // the context the netlist was built in (arch/simulate.cpp)
  mutable uint64_t now_ps_ = 0, now_cycle_ = 0;
  struct Wait {
    uint64_t cycles = 0;  // a fresh entry holds 0 cycles and zero time, which is from_value(0)
    sc_core::sc_time time;
  };
  static constexpr size_t kWaits = 64;
  mutable std::array<Wait, kWaits> waits_{};
};

}  // namespace npusim::arch
