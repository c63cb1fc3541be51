#include "arch/npu.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace npusim::arch {

using isa::Queue;

namespace {
int dram_channels(const isa::DramConfig& d) {
  return d.model == isa::DramModel::kIdeal || d.model == isa::DramModel::kSimple
             ? 1
             : static_cast<int>(d.channels);
}

// Which layers run on the host: those whose work is all HOSTCALLs, judged from the program (what the
// compiler placed), not from the instructions a layer's counters saw. HALT, BARRIER and NOP carry a layer
// (the program's final HALT the last one's) but are no layer's work: a model ending in an ArgMax that
// falls back still reports it on the host.
std::vector<bool> host_layers(const isa::Program& p) {
  std::vector<int64_t> work(p.layers.size(), 0), host(p.layers.size(), 0);
  for (const isa::Instruction& ins : p.instructions) {
    const size_t l = ins.layer();
    if (l >= p.layers.size() || ins.opcode == isa::Opcode::kHalt || ins.opcode == isa::Opcode::kBarrier ||
        ins.opcode == isa::Opcode::kNop)
      continue;
    ++work[l];
    if (ins.opcode == isa::Opcode::kHostCall) ++host[l];
  }
  std::vector<bool> on_host(p.layers.size());
  for (size_t l = 0; l < on_host.size(); ++l) on_host[l] = work[l] > 0 && host[l] == work[l];
  return on_host;
}
}  // namespace

std::vector<std::string> Npu::track_names(const isa::NpuConfig& config) {
  std::vector<std::string> names{"sequencer"};
  for (auto q : isa::kQueueNames) names.emplace_back(q);
  for (int64_t e = 0; e < config.dma.engines; ++e) names.push_back(fmt::format("dma{}", e));
  // One track per DRAM channel per DMA engine: an engine runs one transfer at a time, so the slices of
  // one track never overlap (trace viewers expect a track's slices to nest); several engines' transfers
  // do overlap on a channel.
  for (int c = 0; c < dram_channels(config.dram); ++c) {
    for (int64_t e = 0; e < config.dma.engines; ++e) names.push_back(fmt::format("dram_ch{}.dma{}", c, e));
  }
  // The output stage on the accumulator's read path (systolic_array.output_stage), last.
  if (config.systolic_array.output_stage) names.emplace_back("output_stage");
  return names;
}

Npu::Npu(const sc_core::sc_module_name& name, const isa::NpuConfig& config, const isa::Program& program,
         traces::Sink* sink, datapath::MachineState* state, std::function<void(double)> progress,
         Uncore& uncore, int core)
    : sc_core::sc_module(name),
      unit_names_(track_names(config)),
      fab_(program, config, sink, unit_names_.size(), state, uncore, core),
      queues_("queue"),
      load_descriptors_("load_descriptors"),
      store_descriptors_("store_descriptors"),
      sequencer_("sequencer", config.sequencer, fab_, std::move(progress)),
      load_("load", config.dma, fab_, Queue::kLoad),
      matrix_("matrix", config.systolic_array, fab_),
      vector_("vector", config.vector, fab_, static_cast<uint16_t>(unit_names_.size() - 1)),
      store_("store", config.dma, fab_, Queue::kStore),
      host_("host", config.host, fab_),
      engines_("dma") {
  const int depth = static_cast<int>(config.sequencer.queue_depth);
  const int ddepth = static_cast<int>(config.dma.queue_depth);
  const size_t engines = static_cast<size_t>(config.dma.engines);
  queues_.init(isa::kNumQueues,
               [depth](const char* n, size_t) { return new BoundedQueue<Dispatch>(n, depth); });
  load_descriptors_.init(engines,
                         [ddepth](const char* n, size_t) { return new BoundedQueue<Descriptor>(n, ddepth); });
  store_descriptors_.init(
      engines, [ddepth](const char* n, size_t) { return new BoundedQueue<Descriptor>(n, ddepth); });
  engines_.init(engines, [&](const char* n, size_t i) {
    return new DmaEngine(n, config.dma, fab_, static_cast<int>(i));
  });

  // Bindings, all in one place.
  QueueUnit* units[isa::kNumQueues] = {&load_, &matrix_, &vector_, &store_, &host_};
  std::array<const QueueUnit*, isa::kNumQueues> decoders{};
  for (int q = 0; q < isa::kNumQueues; ++q) {
    sequencer_.to_queue[q] = &queues_[q];
    units[q]->in = &queues_[q];
    decoders[q] = units[q];
  }
  sequencer_.attach(decoders);
  std::vector<DmaEngine*> engine_ptrs;
  for (size_t e = 0; e < engines; ++e) {
    load_.to_engine[e] = &load_descriptors_[e];
    store_.to_engine[e] = &store_descriptors_[e];
    engines_[e].from_load = &load_descriptors_[e];
    engines_[e].from_store = &store_descriptors_[e];
    engines_[e].attach(&load_, &store_);
    engine_ptrs.push_back(&engines_[e]);
  }
  load_.attach(engine_ptrs);
  store_.attach(engine_ptrs);
}

std::string Npu::deadlock_message() const {
  std::string m = fmt::format(
      "deadlock at cycle {}: no unit can make progress ({} of {} instructions dispatched, {} in flight)",
      fab_.now(), sequencer_.dispatched(), fab_.program.instructions.size(), fab_.outstanding);
  const QueueUnit* units[isa::kNumQueues] = {&load_, &matrix_, &vector_, &store_, &host_};
  for (const QueueUnit* u : units) {
    const std::string b = u->blocked_on();
    if (!b.empty()) m += "\n  " + b;
  }
  const std::string s = sequencer_.blocked_on();
  if (!s.empty()) m += "\n  " + s;
  return m;
}

traces::Report Npu::report() const {
  const isa::NpuConfig& c = fab_.config;
  traces::Report r;
  const uint64_t total = sequencer_.end_cycle();
  r.total_cycles = total;
  r.frequency_mhz = c.frequency_mhz;
  r.latency_ms = total / c.frequency_mhz / 1000.0;
  r.dataflow = std::string(isa::kDataflowNames[static_cast<int>(c.systolic_array.dataflow)]);
  r.array_rows = c.systolic_array.rows;
  r.array_cols = c.systolic_array.cols;
  r.vector_lanes = static_cast<uint64_t>(c.vector.lanes);
  r.vector_int8_dot_width = static_cast<uint64_t>(c.vector.int8_dot_width);
  for (isa::DType t :
       {isa::DType::kInt8, isa::DType::kFp16, isa::DType::kBf16, isa::DType::kFp32, isa::DType::kInt16}) {
    r.array_macs_per_pe_per_cycle.emplace_back(isa::kDTypeNames[static_cast<size_t>(t)],
                                               c.systolic_array.rate(t));
  }
  r.breakdown = fab_.rec.accounting().total(total);

  // Units: idle is what is neither busy nor stalled.
  // DRAM channels are trace tracks only (their activity is per transfer, not exclusive time).
  const auto& counters = fab_.rec.units();
  const size_t units = kFirstDmaUnit + engines_.size();
  for (size_t u = 0; u < units; ++u) {
    traces::UnitReport ur;
    ur.name = unit_names_[u];
    ur.instructions =
        u >= kFirstDmaUnit ? engines_[u - kFirstDmaUnit].stats().transfers : counters[u].instructions;
    ur.busy = counters[u].busy;
    ur.stalls = counters[u].stalls;
    const uint64_t used = ur.busy + ur.stalled();
    ur.idle = total > used ? total - used : 0;
    r.units.push_back(ur);
  }
  if (c.systolic_array.output_stage) {  // its VEC outputs, busy beside the vector lanes
    const size_t u = unit_names_.size() - 1;
    traces::UnitReport ur;
    ur.name = unit_names_[u];
    ur.instructions = counters[u].instructions;
    ur.busy = counters[u].busy;
    ur.stalls = counters[u].stalls;
    const uint64_t used = ur.busy + ur.stalled();
    ur.idle = total > used ? total - used : 0;
    r.units.push_back(ur);
  }

  // Layers.
  const auto& layers = fab_.rec.layers();
  const std::vector<bool> on_host = host_layers(fab_.program);
  int64_t useful_minus_executed = 0;
  for (size_t i = 0; i < layers.size(); ++i) {
    traces::LayerReport l;
    l.name = fab_.program.layers[i].name;
    l.op = fab_.program.layers[i].op;
    const auto& lc = layers[i];
    l.placement =
        i < on_host.size() && on_host[i] ? traces::LayerPlacement::kHost : traces::LayerPlacement::kNpu;
    fab_.rec.accounting().layer(static_cast<uint32_t>(i), l.start_cycle, l.end_cycle, l.breakdown);
    l.cycles = l.end_cycle - l.start_cycle;
    l.compute_cycles = lc.compute_cycles;
    l.vector_cycles = lc.vector_cycles;
    // Useful MACs where the program records them (compiled models), else what the array executed.
    const isa::Layer& pl = fab_.program.layers[i];
    l.macs = pl.macs ? pl.macs : lc.macs;
    if (l.macs != lc.macs) l.array_macs = lc.macs;
    if (pl.precision) l.precision = std::string(isa::kDTypeNames[static_cast<size_t>(*pl.precision)]);
    useful_minus_executed += static_cast<int64_t>(l.macs) - static_cast<int64_t>(lc.macs);
    l.instructions = lc.instructions;
    l.dram_bytes_read = lc.dram_bytes_read;
    l.dram_bytes_written = lc.dram_bytes_written;
    l.activity = lc.activity;
    l.misaligned_bursts = lc.misaligned_bursts;
    l.bank_conflict_cycles = lc.bank_conflict_cycles;
    r.layers.push_back(std::move(l));
  }
  r.macs = static_cast<uint64_t>(static_cast<int64_t>(matrix_.macs()) + useful_minus_executed);
  r.array_utilization = total
                            ? static_cast<double>(r.macs) /
                                  (static_cast<double>(c.systolic_array.rows * c.systolic_array.cols) * total)
                            : 0.0;

  // DRAM and DMA.
  r.dram.model = std::string(isa::kDramModelNames[static_cast<int>(c.dram.model)]);
  r.dram.peak_bandwidth_gbps = fab_.dram->peak_bandwidth_gbps();
  for (const DmaEngine& e : engines_) {
    r.dram.bytes_read += e.stats().bytes_read;
    r.dram.bytes_written += e.stats().bytes_written;
    r.dma.transfers += e.stats().transfers;
    r.dma.bursts += e.stats().bursts;
    r.dma.misaligned_bursts += e.stats().misaligned_bursts;
  }
  const double latency_us = total / c.frequency_mhz;
  r.dram.avg_bandwidth_gbps =
      latency_us > 0 ? (r.dram.bytes_read + r.dram.bytes_written) / latency_us / 1000.0 : 0.0;
  const auto& ds = fab_.dram->stats();
  r.dram.requests = ds.requests;
  r.dram.row_hits = ds.row_hits;
  r.dram.row_misses = ds.row_misses;
  r.dram.refreshes = ds.refreshes;
  // Each misaligned burst occupies the DRAM data path for burst_bytes / peak bandwidth.
  if (r.dram.peak_bandwidth_gbps > 0) {
    const double ns =
        r.dma.misaligned_bursts * static_cast<double>(c.dma.burst_bytes) / r.dram.peak_bandwidth_gbps;
    r.dma.misalignment_extra_cycles = static_cast<uint64_t>(std::ceil(ns * c.frequency_mhz / 1000.0));
  }
  r.sram.bank_conflicts = fab_.sram.conflicts();
  r.sram.bank_conflict_cycles = fab_.sram.conflict_cycles();
  r.host.calls = host_.calls();
  r.host.bytes_to_host = host_.bytes_in();
  r.host.bytes_from_host = host_.bytes_out();
  r.sim.instructions = sequencer_.dispatched();
  r.sim.functional = fab_.state != nullptr;
  return r;
}

}  // namespace npusim::arch
