#pragma once
// Runs a program on the SystemC model of the NPU and returns the report. The entry point the CLI,
// the sweeps and the tests use; callable any number of times in one process.
#include <functional>
#include <vector>

#include "arch/datapath/state.h"
#include "arch/sim_error.h"
#include "isa/machine/config.h"
#include "isa/program.h"
#include "isa/timing/dram.h"
#include "traces/report.h"
#include "traces/sink.h"

namespace npusim::arch {

struct RunOptions {
  bool functional = false;  // compute real values (datapath::execute); timing mode allocates no tensor data
  traces::Sink* sink = nullptr;  // trace events (null = no tracing)
  std::function<void(double fraction)>
      progress;  // optional, called now and then with the fraction dispatched
  // Where a banked DRAM's refreshes fall (isa/timing/dram.h); the compiler's timer averages them.
  isa::timing::Refresh dram_refresh = isa::timing::Refresh::kScheduled;
  // Functional mode: fill inputs before the run, read outputs after it.
  std::function<void(datapath::MachineState&)> before_run, after_run;
};

// Throws SimError for simulation failures: deadlock (naming which queues wait on which tokens),
// capacity violations, invalid instructions. `config` must be validated.
traces::Report simulate(const isa::Program& program, const isa::NpuConfig& config, const RunOptions& options);

// Runs one program per core of a multi-core NPU (config.cores) in one simulation: each core has its own
// sequencer, array, SRAM, vector unit, DMA engines and queues, and all share one DRAM model (their bursts
// contend for its channels, banks and row buffers) and the host link (arch/core/uncore.h). Core i runs
// programs[i], in its own region of DRAM (Uncore::core_base); cores beyond programs.size() idle. Timing only:
// options.functional must be off. options.sink gets one trace of every core: core i's tracks are named
// "core<i> <unit>" and follow core i - 1's, its layers follow core i - 1's. Returns one report per program,
// its core's: cycles from the start to that core's last instruction, its units, layers and DMA traffic; the
// DRAM counters (requests, row hits and misses, refreshes) are the shared DRAM's. Throws SimError as
// simulate() does, naming the core.
std::vector<traces::Report> simulate_cores(const std::vector<const isa::Program*>& programs,
                                           const isa::NpuConfig& config, const RunOptions& options = {});
// As above with each core's own configuration (configs parallel to programs; they may differ in what
// belongs to one core, e.g. the array or the scratchpads; the DRAM, host link, clock and `cores` are the
// first one's).
std::vector<traces::Report> simulate_cores(const std::vector<const isa::Program*>& programs,
                                           const std::vector<const isa::NpuConfig*>& configs,
                                           const RunOptions& options = {});

// Makes a new, empty SystemC simulation context current (simulate() calls it before each run; a test
// that builds units itself calls it first). The previous context must have no live modules.
void fresh_simcontext();

// Checks every instruction before a run: encodable fields, SRAM capacity (datapath::footprint),
// supported precision, host-op index. Throws SimError naming the first bad instruction.
void check_program(const isa::Program& program, const isa::NpuConfig& config);

}  // namespace npusim::arch
