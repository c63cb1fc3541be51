#include "arch/simulate.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <systemc>

#include "arch/core/instruction_memo.h"
#include "arch/datapath/footprint.h"
#include "arch/npu.h"

namespace npusim::arch {

// SystemC elaborates one netlist per simulation context. Each run gets a fresh context: the
// previous one we made is deleted (its modules are gone by then) and a new one becomes both the
// current and the default global context. The context that existed before our first run is left
// alive: the library's static sc_events were registered with it and unregister at exit. This is
// the one place that knows.
void fresh_simcontext() {
  static const bool quiet = [] {
    setenv("SYSTEMC_DISABLE_COPYRIGHT_MESSAGE", "1", 0);
    return true;
  }();
  (void)quiet;
  static sc_core::sc_simcontext* ours = nullptr;
  sc_core::sc_simcontext* old = sc_core::sc_curr_simcontext;
  sc_core::sc_curr_simcontext = new sc_core::sc_simcontext;
  sc_core::sc_default_global_context = sc_core::sc_curr_simcontext;
  if (old == ours) delete old;
  ours = sc_core::sc_curr_simcontext;
  sc_core::sc_report_handler::set_actions("/OSCI/SystemC", sc_core::SC_INFO, sc_core::SC_DO_NOTHING);
  sc_core::sc_report_handler::set_actions(sc_core::SC_INFO, sc_core::SC_DO_NOTHING);
}

void check_program(const isa::Program& program, const isa::NpuConfig& config) {
  // Instructions equal to one that passed pass too: the checks below read the instruction, the machine and
  // the number of host ops, nothing else (arch/core/instruction_memo.h).
  InstructionMemo passed;
  for (size_t i = 0; i < program.instructions.size(); ++i) {
    const isa::Instruction& ins = program.instructions[i];
    if (passed.contains(ins)) continue;
    const std::string bad = isa::validate(ins);
    if (!bad.empty()) throw SimError(fmt::format("instruction {}: {}", i, bad));
    switch (ins.opcode) {
      case isa::Opcode::kNop:
      case isa::Opcode::kBarrier:
      case isa::Opcode::kHalt:
        continue;
      case isa::Opcode::kHostCall:
        if (!program.host_ops.empty() &&
            static_cast<size_t>(ins.get(isa::Field::kHostOp)) >= program.host_ops.size()) {
          throw SimError(fmt::format("instruction {}: HOSTCALL host_op {} but the program has {} host ops", i,
                                     ins.get(isa::Field::kHostOp), program.host_ops.size()));
        }
        continue;
      case isa::Opcode::kMatmul:
      case isa::Opcode::kConv: {
        const auto dt = static_cast<isa::DType>(ins.get(isa::Field::kDtype));
        if (config.systolic_array.rate(dt) <= 0) {
          throw SimError(fmt::format("instruction {}: {} in {} but systolic_array.{}_rate is 0 (unsupported)",
                                     i, isa::format(ins.opcode).mnemonic,
                                     isa::kDTypeNames[static_cast<int>(dt)],
                                     isa::kDTypeNames[static_cast<int>(dt)]));
        }
        break;
      }
      default:
        break;
    }
    try {
      datapath::check_footprint(ins, config);
    } catch (const std::exception& e) {
      throw SimError(fmt::format("instruction {}: {}", i, e.what()));
    }
    passed.add(ins);
  }
}

traces::Report simulate(const isa::Program& program, const isa::NpuConfig& config,
                        const RunOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  check_program(program, config);

  std::unique_ptr<datapath::MachineState> state;
  if (options.functional) {
    try {
      state = std::make_unique<datapath::MachineState>(config, program);
    } catch (const std::exception& e) {
      throw SimError(e.what());
    }
    if (options.before_run) options.before_run(*state);
  }

  fresh_simcontext();
  traces::Report report;
  {
    Uncore uncore(config.dram, options.dram_refresh);
    Npu npu("npu", config, program, options.sink, state.get(), options.progress, uncore);
    if (options.sink) {
      traces::TraceInfo info;
      info.frequency_mhz = config.frequency_mhz;
      info.units = npu.unit_names();
      for (const isa::Layer& l : program.layers) info.layers.push_back(l.name);
      options.sink->begin(info);
    }
    sc_core::sc_start();
    if (!npu.error().empty()) throw SimError(npu.error());
    if (!npu.finished()) throw SimError(npu.deadlock_message());
    report = npu.report();
  }
  traces::add_energy(report, config);
  if (options.sink && report.energy) options.sink->power(report.energy->profile);
  if (options.sink) options.sink->finish();
  if (state && options.after_run) options.after_run(*state);
  report.sim.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return report;
}

namespace {

// One core's events into the trace of a multi-core run: its tracks and layers follow those of the cores
// before it (the trace's TraceInfo lists every core's, simulate_cores).
class CoreSink : public traces::Sink {
 public:
  CoreSink(traces::Sink& out, uint16_t first_unit, uint32_t first_layer)
      : out_(out), first_unit_(first_unit), first_layer_(first_layer) {}
  void begin(const traces::TraceInfo&) override {}
  void event(const traces::Event& e) override {
    traces::Event moved = e;
    moved.unit = static_cast<uint16_t>(moved.unit + first_unit_);
    if (moved.layer != traces::kNoLayer) moved.layer += first_layer_;
    out_.event(moved);
  }
  void finish() override {}

 private:
  traces::Sink& out_;
  const uint16_t first_unit_;
  const uint32_t first_layer_;
};

}  // namespace

std::vector<traces::Report> simulate_cores(const std::vector<const isa::Program*>& programs,
                                           const isa::NpuConfig& config, const RunOptions& options) {
  return simulate_cores(programs, std::vector<const isa::NpuConfig*>(programs.size(), &config), options);
}

std::vector<traces::Report> simulate_cores(const std::vector<const isa::Program*>& programs,
                                           const std::vector<const isa::NpuConfig*>& configs,
                                           const RunOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  if (options.functional) throw SimError("a multi-core run is timing only: no functional mode");
  if (programs.empty() || configs.size() != programs.size() ||
      static_cast<int64_t>(programs.size()) > configs[0]->cores)
    throw SimError(
        fmt::format("{} programs for {} cores", programs.size(), configs.empty() ? 0 : configs[0]->cores));
  const isa::NpuConfig& config = *configs[0];
  for (size_t i = 0; i < programs.size(); ++i) {
    try {
      check_program(*programs[i], *configs[i]);
    } catch (const SimError& e) {
      throw SimError(fmt::format("core {}: {}", i, e.what()));
    }
  }
  fresh_simcontext();
  std::vector<traces::Report> reports;
  {
    Uncore uncore(config.dram, options.dram_refresh, config.cores);
    std::vector<std::unique_ptr<Npu>> cores;
    // A trace has every core's tracks ("core1 matrix") and layers, in core order.
    std::vector<std::unique_ptr<CoreSink>> sinks;
    traces::TraceInfo info;
    info.frequency_mhz = config.frequency_mhz;
    for (size_t i = 0; i < programs.size(); ++i) {
      if (options.sink) {
        sinks.push_back(std::make_unique<CoreSink>(*options.sink, static_cast<uint16_t>(info.units.size()),
                                                   static_cast<uint32_t>(info.layers.size())));
        for (const std::string& u : Npu::track_names(*configs[i]))
          info.units.push_back(fmt::format("core{} {}", i, u));
        for (const isa::Layer& l : programs[i]->layers) info.layers.push_back(l.name);
      }
      // Progress follows core 0 (the cores start together).
      cores.push_back(std::make_unique<Npu>(fmt::format("core{}", i).c_str(), *configs[i], *programs[i],
                                            options.sink ? sinks.back().get() : nullptr, nullptr,
                                            i == 0 ? options.progress : nullptr, uncore,
                                            static_cast<int>(i)));
    }
    if (options.sink) options.sink->begin(info);
    sc_core::sc_start();
    for (size_t i = 0; i < cores.size(); ++i) {
      if (!cores[i]->error().empty()) throw SimError(fmt::format("core {}: {}", i, cores[i]->error()));
      if (!cores[i]->finished()) throw SimError(fmt::format("core {}: {}", i, cores[i]->deadlock_message()));
      reports.push_back(cores[i]->report());
    }
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (size_t i = 0; i < reports.size(); ++i) {
    traces::Report& r = reports[i];
    traces::add_energy(r, *configs[i]);
    r.sim.wall_seconds = wall;
  }
  if (options.sink) options.sink->finish();
  return reports;
}

}  // namespace npusim::arch
