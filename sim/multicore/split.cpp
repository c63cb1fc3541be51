#include "sim/multicore/split.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "arch/simulate.h"
#include "isa/json_text.h"
#include "isa/program_slice.h"

namespace npusim::sim::multicore {

std::vector<int64_t> batch_shares(int64_t batch, int64_t cores) {
  std::vector<int64_t> s(static_cast<size_t>(cores), batch / cores);
  for (int64_t i = 0; i < batch % cores; ++i) ++s[static_cast<size_t>(i)];
  return s;
}

std::vector<size_t> stage_cuts(const isa::Program& program, const traces::Report& alone, int64_t stages) {
  const size_t n = program.instructions.size();
  // Layers' end cycles, by program layer index; a cut after layers with the highest index L costs the
  // running maximum of their ends.
  auto end_of = [&](uint32_t layer) -> uint64_t {
    return layer < alone.layers.size() ? alone.layers[layer].end_cycle : 0;
  };
  // Candidates: i where max layer of [0, i) < min layer of [i, n), with the end cycle reached before i.
  // HALT, BARRIER and NOP belong to no layer's work (slice_program leaves the first two out).
  auto tagged = [&](size_t i) {
    const isa::Opcode op = program.instructions[i].opcode;
    return op != isa::Opcode::kHalt && op != isa::Opcode::kBarrier && op != isa::Opcode::kNop;
  };
  std::vector<uint32_t> suffix_min(n + 1, std::numeric_limits<uint32_t>::max());
  for (size_t i = n; i-- > 0;)
    suffix_min[i] =
        tagged(i) ? std::min(suffix_min[i + 1], program.instructions[i].layer()) : suffix_min[i + 1];
  std::vector<std::pair<size_t, uint64_t>> candidates;  // (index, cycles before it)
  uint32_t prefix_max = 0;
  uint64_t reached = 0;
  uint32_t last_prefix = 0;
  bool any = false;
  for (size_t i = 0; i + 1 < n; ++i) {
    if (tagged(i)) {
      const uint32_t l = program.instructions[i].layer();
      prefix_max = std::max(prefix_max, l);
      reached = std::max(reached, end_of(l));
      any = true;
    }
    // A cut needs layer work on both sides, and one place per boundary between layers (a BARRIER between
    // two layers makes two places with the same layers on each side).
    if (any && prefix_max < suffix_min[i + 1] && suffix_min[i + 1] != std::numeric_limits<uint32_t>::max() &&
        (candidates.empty() || prefix_max != last_prefix)) {
      candidates.emplace_back(i + 1, reached);
      last_prefix = prefix_max;
    }
  }
  std::vector<size_t> cuts{0};
  if (candidates.size() + 1 < static_cast<size_t>(stages)) {  // too few: every place, no end
    for (const auto& c : candidates) cuts.push_back(c.first);
    return cuts;
  }
  const double total = static_cast<double>(alone.total_cycles);
  size_t from = 0;  // first candidate still usable
  for (int64_t k = 1; k < stages; ++k) {
    // Leave one candidate for each later cut.
    const size_t later = static_cast<size_t>(stages - 1 - k);
    const double target = total * static_cast<double>(k) / static_cast<double>(stages);
    size_t best = from;
    for (size_t c = from; c + later < candidates.size(); ++c) {
      if (std::abs(static_cast<double>(candidates[c].second) - target) <
          std::abs(static_cast<double>(candidates[best].second) - target))
        best = c;
    }
    cuts.push_back(candidates[best].first);
    from = best + 1;
  }
  cuts.push_back(n);
  return cuts;
}

SplitResult run_split(Split split, const isa::Program& whole, const traces::Report& whole_alone,
                      const isa::NpuConfig& config, int64_t batch,
                      const std::function<isa::Program(int64_t batch)>& compile_batch, traces::Sink* sink) {
  SplitResult r;
  r.split = split;
  r.cores = config.cores;
  r.batch = batch;
  r.frequency_mhz = config.frequency_mhz;
  r.one_core_cycles = whole_alone.total_cycles;
  std::vector<isa::Program> programs;
  if (split == Split::kBatch) {
    if (batch < config.cores)
      throw SplitError(
          fmt::format("--split batch: batch {} is smaller than cores {}; give --batch N with N >= {}", batch,
                      config.cores, config.cores));
    const std::vector<int64_t> shares = batch_shares(batch, config.cores);
    std::vector<std::pair<int64_t, size_t>> compiled;  // share -> its program (two distinct shares at most)
    for (int64_t b : shares) {
      auto it = std::find_if(compiled.begin(), compiled.end(), [b](const auto& c) { return c.first == b; });
      if (it != compiled.end()) {
        isa::Program copy = programs[it->second];  // not push_back(programs[...]): it may reallocate
        programs.push_back(std::move(copy));
        continue;
      }
      compiled.emplace_back(b, programs.size());
      programs.push_back(b == batch ? whole : compile_batch(b));
    }
    for (int64_t b : shares) r.per_core.push_back(CoreFigures{b, "", "", 0, 0, 0, 0, 0});
  } else if (split == Split::kLayers) {
    const std::vector<size_t> cuts = stage_cuts(whole, whole_alone, config.cores);
    if (static_cast<int64_t>(cuts.size()) != config.cores + 1)
      throw SplitError(
          fmt::format("--split layers: the program has {} places between its layers to cut, {} "
                      "cores need {}",
                      cuts.size() - 1, config.cores, config.cores - 1));
    for (size_t s = 0; s + 1 < cuts.size(); ++s) {
      programs.push_back(
          isa::slice_program(whole, cuts[s], cuts[s + 1], isa::token_balance(whole, cuts[s + 1])));
      const isa::Program& p = programs.back();
      CoreFigures c;
      c.layers = static_cast<int64_t>(p.layers.size());
      if (!p.layers.empty()) {
        c.first_layer = p.layers.front().name;
        c.last_layer = p.layers.back().name;
      }
      r.per_core.push_back(c);
    }
  } else {
    throw SplitError("run_split: no split");
  }
  std::vector<const isa::Program*> ptrs;
  for (const isa::Program& p : programs) ptrs.push_back(&p);
  arch::RunOptions run;
  run.sink = sink;
  const std::vector<traces::Report> together = arch::simulate_cores(ptrs, config, run);
  for (size_t i = 0; i < programs.size(); ++i) {
    CoreFigures& c = r.per_core[i];
    c.cycles = together[i].total_cycles;
    c.dram_bytes = together[i].dram.bytes_read + together[i].dram.bytes_written;
    c.host_cycles = together[i].breakdown.host;
    // Alone: the same program on an idle NPU (a repeated program reuses the figure).
    if (i > 0 && split == Split::kBatch && c.batch == r.per_core[i - 1].batch) {
      c.alone_cycles = r.per_core[i - 1].alone_cycles;
    } else if (split == Split::kBatch && c.batch == batch) {
      c.alone_cycles = whole_alone.total_cycles;
    } else {
      c.alone_cycles = arch::simulate(programs[i], config, {}).total_cycles;
    }
  }
  if (split == Split::kBatch) {
    size_t slowest = 0;
    for (size_t i = 1; i < r.per_core.size(); ++i)
      if (r.per_core[i].cycles > r.per_core[slowest].cycles) slowest = i;
    r.slowest_run = together[slowest];
    r.slowest_batch = r.per_core[slowest].batch;
  }
  return r;
}

uint64_t SplitResult::latency_cycles() const {
  uint64_t t = 0;
  for (const CoreFigures& c : per_core) t = split == Split::kLayers ? t + c.cycles : std::max(t, c.cycles);
  return t;
}

uint64_t SplitResult::latency_host_cycles() const {
  const CoreFigures* slowest = nullptr;
  for (const CoreFigures& c : per_core)
    if (!slowest || c.cycles > slowest->cycles) slowest = &c;
  return slowest ? slowest->host_cycles : 0;
}

double SplitResult::throughput_per_s() const {
  uint64_t period = 0;
  for (const CoreFigures& c : per_core) period = std::max(period, c.cycles);
  if (period == 0) return 0;
  return static_cast<double>(batch) * frequency_mhz * 1e6 / static_cast<double>(period);
}

double SplitResult::speedup() const {
  if (one_core_cycles == 0) return 0;
  const double one_core =
      static_cast<double>(batch) * frequency_mhz * 1e6 / static_cast<double>(one_core_cycles);
  return throughput_per_s() / one_core;
}

void SplitResult::visit(traces::ReportVisitor& v) {
  using traces::Field;
  const double f = frequency_mhz;
  size_t how = static_cast<size_t>(split);
  v.choice({"split", "", "none, batch or layers"}, how,
           std::vector<std::string_view>(std::begin(kSplitNames), std::end(kSplitNames)));
  if (v.fills()) split = static_cast<Split>(how);
  v.integer({"cores", "cores", "config.cores"}, cores);
  v.integer({"batch", "frames", "frames one pass handles"}, batch);
  v.integer({"one_core_cycles", "cycles", "the same work on one core"}, one_core_cycles);
  v.derived({"one_core_ms", "ms", "one_core_cycles at the NPU clock", 6}, one_core_cycles / f / 1000.0);
  v.derived({"latency_cycles", "cycles", "batch: the slowest core; layers: one frame through every stage"},
            latency_cycles());
  v.derived({"latency_ms", "ms", "latency_cycles at the NPU clock", 6}, latency_cycles() / f / 1000.0);
  v.derived({"throughput_per_s", "frames/s", "frames per second", 3}, throughput_per_s());
  v.derived({"speedup", "", "throughput over one core's", 4}, speedup());
  v.list({"per_core", "", "what each core did"}, per_core, [&](CoreFigures& c, size_t i) {
    v.object({"", "", "a core"}, [&] {
      if (!v.fills()) v.derived({"core", "", "its index"}, static_cast<uint64_t>(i));
      if (split == Split::kLayers) {
        v.text({"first_layer", "", "its stage's first layer"}, c.first_layer);
        v.text({"last_layer", "", "its stage's last layer"}, c.last_layer);
        v.integer({"layers", "layers", "program layers in its stage"}, c.layers);
      } else {
        v.integer({"batch", "frames", "its share of the batch"}, c.batch);
      }
      v.integer({"cycles", "cycles", "with the other cores running"}, c.cycles);
      v.integer({"alone_cycles", "cycles", "its work alone on an idle NPU"}, c.alone_cycles);
      v.derived({"slowdown", "", "cycles / alone_cycles", 4},
                c.alone_cycles ? static_cast<double>(c.cycles) / static_cast<double>(c.alone_cycles) : 0.0);
      v.integer({"dram_bytes", "bytes", "read and written by its DMA"}, c.dram_bytes);
    });
  });
}

std::string split_text(const SplitResult& r) {
  const double f = r.frequency_mhz;
  auto ms = [f](uint64_t cycles) { return cycles / f / 1000.0; };
  std::string t =
      fmt::format("multi-core: {} cores, split by {}", r.cores, kSplitNames[static_cast<size_t>(r.split)]);
  t += r.split == Split::kBatch ? fmt::format(" (batch {})\n", r.batch) : "\n";
  for (size_t i = 0; i < r.per_core.size(); ++i) {
    const CoreFigures& c = r.per_core[i];
    const std::string what = r.split == Split::kLayers
                                 ? fmt::format("{} layers, {} .. {}", c.layers, c.first_layer, c.last_layer)
                                 : fmt::format("batch {}", c.batch);
    t += fmt::format(
        "  core {}: {:<40} {:10.3f} ms ({:.3f} ms alone, x{:.3f} from shared DRAM/link)\n", i, what,
        ms(c.cycles), ms(c.alone_cycles),
        c.alone_cycles ? static_cast<double>(c.cycles) / static_cast<double>(c.alone_cycles) : 0.0);
  }
  t += fmt::format(
      "  latency {:.3f} ms{}, throughput {:.1f} frames/s, x{:.2f} one core's ({:.3f} ms for {} frame{})\n",
      ms(r.latency_cycles()), r.split == Split::kLayers ? " per frame (every stage busy)" : " for the batch",
      r.throughput_per_s(), r.speedup(), ms(r.one_core_cycles), r.batch, r.batch == 1 ? "" : "s");
  return t;
}

}  // namespace npusim::sim::multicore
