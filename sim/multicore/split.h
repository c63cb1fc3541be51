#pragma once
// One model on the cores of a multi-core NPU (`cores: N` in the config, `npusim run --split`,
// docs/multicore.md): split by batch (each core runs its share of the batch) or pipelined by layers (each
// core runs a contiguous stage of the layers, each on a different frame). The cores run in one
// simulation sharing the DRAM and the host link (arch::simulate_cores); what this file adds is where
// the work goes and the figures that follow from the simulated cycles.
#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "isa/machine/config.h"
#include "isa/program.h"
#include "traces/report.h"
#include "traces/report_visitor.h"
#include "traces/sink.h"

namespace npusim::sim::multicore {

enum class Split {
  kNone,    // the model on core 0; the other cores idle (a run as on one core)
  kBatch,   // core i runs its share of the batch (as even as possible, the first cores one more)
  kLayers,  // core i runs the i-th contiguous stage of the program's layers, balanced by cycles alone
};
inline constexpr std::string_view kSplitNames[] = {"none", "batch", "layers"};

// The batch share of each of `cores` cores: batch / cores each, the first batch % cores one more.
// Needs batch >= cores >= 1.
std::vector<int64_t> batch_shares(int64_t batch, int64_t cores);

// Where a program splits into `stages` contiguous stages of whole layers: instruction indices
// 0 = cut[0] < cut[1] < ... < cut[stages] = size. A cut may fall only where every instruction before it
// belongs to an earlier layer than every instruction after it; each cut is the candidate whose layers'
// end cycle in `alone` (the program's run on one core) is nearest to k / stages of its total. Returns
// 0 and every such place (fewer than stages + 1 indices) when the program has too few of them.
std::vector<size_t> stage_cuts(const isa::Program& program, const traces::Report& alone, int64_t stages);

// What one core did.
struct CoreFigures {
  int64_t batch = 0;                    // kBatch: its share
  std::string first_layer, last_layer;  // kLayers: its stage
  int64_t layers = 0;                   // kLayers: program layers in its stage
  uint64_t cycles = 0;                  // with the other cores running (shared DRAM and host link)
  uint64_t alone_cycles = 0;            // its work alone on an idle NPU
  uint64_t dram_bytes = 0;              // read + written by its DMA
  uint64_t host_cycles = 0;             // of `cycles`, its host fallbacks' (the report's breakdown.host)
};

struct SplitResult {
  Split split = Split::kNone;
  int64_t cores = 1;
  int64_t batch = 1;  // frames one pass handles: the batch (kLayers: of one inference)
  double frequency_mhz = 1000;
  uint64_t one_core_cycles = 0;  // the same work (the whole batch, every layer) on one core
  std::vector<CoreFigures> per_core;
  // kBatch: the run of the core that sets latency_cycles (the slowest, the other cores running) and its
  // share of the batch: the body of the report (what --split batch asked for). Not in the section.
  std::optional<traces::Report> slowest_run;
  int64_t slowest_batch = 0;
  // kBatch: the slowest core (the batch is done when every share is); kLayers: one frame through every
  // stage with all stages busy (the sum of the stages' cycles).
  uint64_t latency_cycles() const;
  // kBatch: the host fallback cycles of the core that sets latency_cycles (the slowest).
  uint64_t latency_host_cycles() const;
  // Frames per second: kBatch batch / latency; kLayers batch per slowest stage (the pipeline's period).
  double throughput_per_s() const;
  // Throughput over one core's (batch / one_core_cycles).
  double speedup() const;
  // The report's `multicore` section, field by field (traces/report_visitor.h).
  void visit(traces::ReportVisitor& v);
};

// Runs `whole` (compiled for `batch`; `whole_alone` its run on one core) split `split` over config.cores
// cores in one simulation, and each core's work alone. kBatch compiles each distinct share with
// `compile_batch(share)`. Throws SplitError when the work does not split (fewer frames or layers than
// cores), arch::SimError for simulation failures.
struct SplitError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// `sink` (optional) gets the trace of the run on the cores (arch::simulate_cores: a track per unit of each
// core).
SplitResult run_split(Split split, const isa::Program& whole, const traces::Report& whole_alone,
                      const isa::NpuConfig& config, int64_t batch,
                      const std::function<isa::Program(int64_t batch)>& compile_batch,
                      traces::Sink* sink = nullptr);

std::string split_text(const SplitResult& r);

}  // namespace npusim::sim::multicore
