#include "traces/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>

#include "isa/json_text.h"
#include "isa/layer_names.h"
#include "traces/layer_tables.h"
#include "traces/sink.h"

namespace npusim::traces {
namespace {

// Doubles in the summary text: shortest round-trip form.
std::string num(double v) { return fmt::format("{}", v); }

void breakdown_json(JsonWriter& w, const Breakdown& b) {
  w.object().member("compute", b.compute).member("memory", b.memory).member("scheduling", b.scheduling);
  w.member("host", b.host).end();
}

// {"total_mj": T, "by_component_mj": {"mac": .., ..}}, left open for the caller's further members.
void energy_json(JsonWriter& w, const EnergyBreakdown& e) {
  w.object().member("total_mj", e.total()).key("by_component_mj").object();
  for (size_t k = 0; k < kNumEnergyComponents; ++k) w.member(kEnergyComponentNames[k], e.mj[k]);
  w.end();
}

void energy_area_json(JsonWriter& w, const EnergyReport& e, const AreaReport& a) {
  w.key("energy");
  energy_json(w, e.by_component);
  w.member("average_power_w", e.average_power_w).member("peak_power_w", e.peak_power_w);
  w.member("tops_per_w", e.tops_per_w).end();
  w.key("area").object().member("total_mm2", a.total_mm2).key("by_unit_mm2").object();
  for (size_t k = 0; k < kNumAreaUnits; ++k) w.member(kAreaUnitNames[k], a.by_unit_mm2[k]);
  w.end().end();
}

std::string pct(uint64_t part, uint64_t whole) {
  return whole ? fmt::format("{:5.1f}%", 100.0 * part / whole) : std::string("  -  ");
}

// "bound_cycles": B, "efficiency": E (each when known), on the current line.
void roofline_json(JsonWriter& w, std::optional<uint64_t> bound, std::optional<double> eff) {
  if (bound) w.same_line().member("bound_cycles", *bound);
  if (eff) w.same_line().member("efficiency", *eff);
}

std::optional<double> ratio(std::optional<uint64_t> bound, uint64_t cycles) {
  if (!bound || cycles == 0) return std::nullopt;
  return static_cast<double>(*bound) / static_cast<double>(cycles);
}

void ops_json(JsonWriter& w, const std::vector<OpRollup>& ops) {
  w.key("ops").array(JsonWriter::Layout::kLines);
  for (const OpRollup& x : ops) {
    w.object().member("op", x.op).member("layers", x.layers).member("fused_nodes", x.fused_nodes);
    w.member("cycles", x.cycles).member("share", x.share).member("macs", x.macs);
    w.member("dram_bytes_read", x.dram_bytes_read).member("dram_bytes_written", x.dram_bytes_written);
    w.key("breakdown");
    breakdown_json(w, x.breakdown);
    if (x.bound_cycles) w.member("bound_cycles", *x.bound_cycles);
    w.end();
  }
  w.end();
}

// A parameter's canonical text as JSON: numbers and booleans bare, everything else a string.
void parameter_json(JsonWriter& w, const std::string& v) {
  if (v == "true" || v == "false") {
    w.raw(v);
    return;
  }
  char* end = nullptr;
  std::strtod(v.c_str(), &end);
  if (!v.empty() && end == v.c_str() + v.size() && v.find_first_not_of("0123456789+-.eE") == std::string::npos) {
    w.raw(v);
  } else {
    w.value(v);
  }
}

void run_json(JsonWriter& w, const RunInfo& run) {
  w.key("run").object().member("command", run.command).member("version", run.version);
  w.member("model", run.model).member("model_sha256", run.model_sha256).member("config", run.config);
  w.key("sets").array();
  for (const std::string& s : run.sets) w.value(s);
  w.end().key("parameters").object(JsonWriter::Layout::kLines);
  for (const auto& [key, value] : run.parameters) {
    w.key(key);
    parameter_json(w, value);
  }
  w.end().end();
}

}  // namespace

std::string_view layer_placement_name(LayerPlacement p) {
  return kLayerPlacementNames[static_cast<size_t>(p)];
}

std::optional<LayerPlacement> parse_layer_placement(std::string_view text) {
  for (size_t k = 0; k < kLayerPlacementNames.size(); ++k) {
    if (kLayerPlacementNames[k] == text) return static_cast<LayerPlacement>(k);
  }
  return std::nullopt;
}

std::optional<double> efficiency(const LayerReport& l) {
  if (l.fused() || !l.bound_cycles) return std::nullopt;
  return ratio(*l.bound_cycles + l.fused_bound_cycles, l.cycles);
}

std::optional<uint64_t> model_bound_cycles(const Report& r) {
  std::optional<uint64_t> sum;
  for (const LayerReport& l : r.layers) {
    if (l.bound_cycles) sum = sum.value_or(0) + *l.bound_cycles;
  }
  return sum;
}

std::optional<double> model_efficiency(const Report& r) {
  return ratio(model_bound_cycles(r), r.total_cycles);
}

std::vector<std::string> display_names(const Report& r) {
  std::vector<std::string> names;
  for (const LayerReport& l : r.layers) names.push_back(l.name);
  return isa::display_names(names);
}

std::optional<PrecisionFigures> precision_figures(const Report& r) {
  std::map<std::string, std::pair<uint64_t, uint64_t>> by_precision;  // layers, MACs
  for (const LayerReport& l : r.layers) {
    if (l.precision.empty() || l.fused()) continue;
    ++by_precision[l.precision].first;
    by_precision[l.precision].second += l.macs;
  }
  if (by_precision.empty()) return std::nullopt;
  PrecisionFigures f;
  for (const auto& [p, n] : by_precision) f.layers.emplace_back(p, n.first);
  std::stable_sort(f.layers.begin(), f.layers.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  if (f.layers.size() == 1) {
    f.plan = f.layers[0].first;
  } else {
    f.plan = "mixed:";
    for (size_t i = 0; i < f.layers.size(); ++i) {
      f.plan += fmt::format("{} {} {}", i ? "," : "", f.layers[i].second, f.layers[i].first);
    }
  }
  const double pes = static_cast<double>(r.array_rows) * static_cast<double>(r.array_cols);
  auto peak_of = [&](const std::string& p) {
    for (const auto& [name, rate] : r.array_macs_per_pe_per_cycle) {
      if (name == p) return pes * rate;
    }
    return 0.0;
  };
  double macs = 0, cycles_at_peak = 0, best = 0;
  for (const auto& [p, n] : by_precision) {
    const double peak = peak_of(p);
    best = std::max(best, peak);
    if (peak <= 0 || n.second == 0) continue;
    macs += static_cast<double>(n.second);
    cycles_at_peak += static_cast<double>(n.second) / peak;
  }
  f.peak_macs_per_cycle = cycles_at_peak > 0 ? macs / cycles_at_peak : best;
  const double slots = f.peak_macs_per_cycle * static_cast<double>(r.total_cycles);
  f.utilization = slots > 0 ? static_cast<double>(r.macs) / slots : 0.0;
  return f;
}

std::string report_json(const Report& r) {
  using Layout = JsonWriter::Layout;
  std::string o;
  JsonWriter w(o);
  w.object(Layout::kLines);
  w.member("total_cycles", r.total_cycles).member("frequency_mhz", r.frequency_mhz);
  w.member("latency_ms", r.latency_ms)
      .member("macs", r.macs)
      .member("array_utilization", r.array_utilization);
  if (const std::optional<PrecisionFigures> pf = precision_figures(r)) {
    w.key("precision").object().member("plan", pf->plan).key("layers").object();
    for (const auto& [precision, layers] : pf->layers) w.member(precision, layers);
    w.end()
        .member("peak_macs_per_cycle", pf->peak_macs_per_cycle)
        .member("utilization", pf->utilization)
        .end();
  }
  roofline_json(w, model_bound_cycles(r), model_efficiency(r));
  if (r.compiled_bound_cycles) {
    w.same_line().member("compiled_bound_cycles", *r.compiled_bound_cycles);
    if (const auto e = ratio(r.compiled_bound_cycles, r.total_cycles))
      w.same_line().member("compiled_efficiency", *e);
  }
  w.key("array")
      .object()
      .member("rows", r.array_rows)
      .member("cols", r.array_cols)
      .member("dataflow", r.dataflow);
  w.key("macs_per_pe_per_cycle").object();
  for (const auto& [precision, rate] : r.array_macs_per_pe_per_cycle) w.member(precision, rate);
  w.end().end();
  w.key("breakdown");
  breakdown_json(w, r.breakdown);
  w.key("dram").object().member("model", r.dram.model).member("bytes_read", r.dram.bytes_read);
  w.member("bytes_written", r.dram.bytes_written).member("avg_bandwidth_gbps", r.dram.avg_bandwidth_gbps);
  w.member("peak_bandwidth_gbps", r.dram.peak_bandwidth_gbps).member("requests", r.dram.requests);
  w.member("row_hits", r.dram.row_hits).member("row_misses", r.dram.row_misses);
  w.member("refreshes", r.dram.refreshes).end();
  w.key("dma").object().member("transfers", r.dma.transfers).member("bursts", r.dma.bursts);
  w.member("misaligned_bursts", r.dma.misaligned_bursts);
  w.member("misalignment_extra_cycles", r.dma.misalignment_extra_cycles).end();
  w.key("sram").object().member("bank_conflicts", r.sram.bank_conflicts);
  w.member("bank_conflict_cycles", r.sram.bank_conflict_cycles).end();
  w.key("host").object().member("calls", r.host.calls).member("bytes_to_host", r.host.bytes_to_host);
  w.member("bytes_from_host", r.host.bytes_from_host).end();
  if (r.energy && r.area) energy_area_json(w, *r.energy, *r.area);
  w.key("units").object(Layout::kLines);
  for (const UnitReport& u : r.units) {
    w.key(u.name)
        .object()
        .member("instructions", u.instructions)
        .member("busy", u.busy)
        .member("idle", u.idle);
    w.key("stalls").object();
    for (int k = 1; k < kNumReasons; ++k) w.member(kReasonNames[k], u.stalls[k]);
    w.end().end();
  }
  w.end();
  w.key("layers").array(Layout::kLines);
  const std::vector<std::string> shown = display_names(r);
  for (size_t i = 0; i < r.layers.size(); ++i) {
    const LayerReport& l = r.layers[i];
    w.object().member("name", l.name).member("display_name", shown[i]).member("op", l.op);
    w.member("placement", layer_placement_name(l.placement));
    if (l.fused()) w.member("fused_into", l.fused_into);
    if (!l.precision.empty()) w.member("precision", l.precision);
    w.member("start_cycle", l.start_cycle).member("end_cycle", l.end_cycle).member("cycles", l.cycles);
    w.member("compute_cycles", l.compute_cycles)
        .member("vector_cycles", l.vector_cycles)
        .member("macs", l.macs);
    w.member("instructions", l.instructions).member("dram_bytes_read", l.dram_bytes_read);
    w.member("dram_bytes_written", l.dram_bytes_written).member("bound", bound_label(l));
    w.key("breakdown");
    breakdown_json(w, l.breakdown);
    if (r.energy) {
      w.key("energy");
      energy_json(w, l.energy);
      w.end();
    }
    if (l.array_macs) w.member("array_macs", *l.array_macs);
    roofline_json(w, l.bound_cycles, efficiency(l));
    w.raw_members(l.extra_json).end();
  }
  w.end();
  ops_json(w, op_rollup(r));
  for (const auto& [name, value] : r.sections) w.key(name).raw(value);
  if (r.run) run_json(w, *r.run);
  w.key("sim").object().member("wall_seconds", r.sim.wall_seconds).member("instructions", r.sim.instructions);
  w.member("functional", r.sim.functional).end();
  w.end();
  o += '\n';
  return o;
}

void write_report_json(const Report& r, std::ostream& out) { out << report_json(r); }

std::string summary_text(const Report& r, size_t top_layers) {
  std::string o;
  const uint64_t T = r.total_cycles;
  if (r.run) {
    o += fmt::format("run               {}{}, config {}{}; npusim {}\n", r.run->model,
                     r.run->model_sha256.empty() ? "" : " (sha256 " + r.run->model_sha256.substr(0, 12) + ")",
                     r.run->config.empty() ? "edge (built-in)" : r.run->config,
                     r.run->sets.empty() ? "" : fmt::format(" + {} --set", r.run->sets.size()), r.run->version);
  }
  o += fmt::format("total cycles      {}  ({:.6g} ms at {} MHz)\n", T, r.latency_ms, num(r.frequency_mhz));
  const std::optional<PrecisionFigures> pf = precision_figures(r);
  if (pf) {
    // A mixed plan's peak is a rate between its precisions' (1020.6): one decimal, as the other rates.
    const double peak = pf->peak_macs_per_cycle;
    o += fmt::format("precision         {}: peak {} MACs/cycle\n", pf->plan,
                     peak == std::floor(peak) ? num(peak) : fmt::format("{:.1f}", peak));
    o += fmt::format("array             {}x{} {}, {} MACs, utilization {:.1f}% of the {} peak ({:.1f}% of the int8 peak)\n",
                     r.array_rows, r.array_cols, r.dataflow, r.macs, 100.0 * pf->utilization,
                     pf->layers.size() == 1 ? pf->plan : "plan's", 100.0 * r.array_utilization);
  } else {
    o += fmt::format("array             {}x{} {}, {} MACs, utilization {:.1f}% of the int8 peak\n", r.array_rows,
                     r.array_cols, r.dataflow, r.macs, 100.0 * r.array_utilization);
  }
  const std::optional<uint64_t> bound = model_bound_cycles(r);
  if (bound) {
    // Each layer's bound moves its tensors through DRAM as the model gives them; fusion keeps some on chip,
    // so a fused program can beat the sum, which reads as a bug without the reason.
    const double efficiency = model_efficiency(r).value_or(0.0);
    o += fmt::format(
        "roofline          bound {} cycles, efficiency {:.1f}% (sum of the layers' bounds / total "
        "cycles{})\n",
        *bound, 100.0 * efficiency,
        efficiency > 1.0 ? "; over 100%: fusion keeps tensors on chip that those bounds move through DRAM"
                         : "");
    if (r.compiled_bound_cycles) {
      o += fmt::format("                  as compiled: bound {} cycles, efficiency {:.1f}% (the fused layers' own "
                       "tensors)\n",
                       *r.compiled_bound_cycles, 100.0 * ratio(r.compiled_bound_cycles, T).value_or(0.0));
    }
  }
  if (r.fusion && r.fusion->nodes) {
    o += fmt::format("fusion            {} nodes fused into their layers: {} tensors never in DRAM, {:.1f} MB of DRAM "
                     "traffic saved\n",
                     r.fusion->nodes, r.fusion->tensors, static_cast<double>(r.fusion->bytes_saved) / 1e6);
  }
  o += fmt::format("breakdown         compute {} ({})  memory {} ({})  scheduling {} ({})  host {} ({})\n",
                   r.breakdown.compute, pct(r.breakdown.compute, T), r.breakdown.memory, pct(r.breakdown.memory, T),
                   r.breakdown.scheduling, pct(r.breakdown.scheduling, T), r.breakdown.host, pct(r.breakdown.host, T));
  o += fmt::format("{:<17} read {} B, written {} B, {:.2f} GB/s average", "dram (" + r.dram.model + ")",
                   r.dram.bytes_read, r.dram.bytes_written, r.dram.avg_bandwidth_gbps);
  if (r.dram.peak_bandwidth_gbps > 0) o += fmt::format(" of {:.2f} GB/s peak", r.dram.peak_bandwidth_gbps);
  if (r.dram.row_hits + r.dram.row_misses > 0) {
    o += fmt::format(", row hits {:.1f}%", 100.0 * r.dram.row_hits / (r.dram.row_hits + r.dram.row_misses));
  }
  o += "\n";
  o += fmt::format("dma               {} transfers, {} bursts, {} misaligned (+{} cycles)\n", r.dma.transfers,
                   r.dma.bursts, r.dma.misaligned_bursts, r.dma.misalignment_extra_cycles);
  o += fmt::format("sram              {} bank conflicts (+{} cycles)\n", r.sram.bank_conflicts,
                   r.sram.bank_conflict_cycles);
  if (r.energy && r.area) {
    const EnergyReport& e = *r.energy;
    o += fmt::format("energy            {:.4g} mJ/inference, {:.3g} W average, {:.3g} W peak, {:.3g} TOPS/W\n",
                     e.total_mj, e.average_power_w, e.peak_power_w, e.tops_per_w);
    o += "energy by part   ";
    for (size_t k = 0; k < kNumEnergyComponents; ++k)
      o += fmt::format(" {} {:.3g} ({:.0f}%)", kEnergyComponentNames[k], e.by_component.mj[k],
                       e.total_mj > 0 ? 100.0 * e.by_component.mj[k] / e.total_mj : 0.0);
    o += fmt::format("\narea              {:.3g} mm2 (array {:.3g}, sram {:.3g}, vector {:.3g}, dma {:.3g})\n",
                     r.area->total_mm2, r.area->by_unit_mm2[0],
                     r.area->by_unit_mm2[1] + r.area->by_unit_mm2[2] + r.area->by_unit_mm2[3], r.area->by_unit_mm2[4],
                     r.area->by_unit_mm2[5]);
  }
  if (r.host.calls) {
    o += fmt::format("host              {} calls, {} B to host, {} B back\n", r.host.calls, r.host.bytes_to_host,
                     r.host.bytes_from_host);
  }
  o += fmt::format("\n{:<12} {:>8} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7}\n", "unit", "instrs", "busy", "idle",
                   "memory", "sched", "q_full", "host");
  for (const UnitReport& u : r.units) {
    const uint64_t mem = u.stalls[static_cast<int>(Reason::kMemory)] + u.stalls[static_cast<int>(Reason::kBankConflict)];
    o += fmt::format("{:<12} {:>8} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7}\n", u.name, u.instructions, pct(u.busy, T),
                     pct(u.idle, T), pct(mem, T), pct(u.stalls[static_cast<int>(Reason::kScheduling)], T),
                     pct(u.stalls[static_cast<int>(Reason::kQueueFull)], T),
                     pct(u.stalls[static_cast<int>(Reason::kHost)], T));
  }
  if (!r.layers.empty()) {
    o += fmt::format("\ntime by op type (sum of layer cycles; layers may overlap)\n{:<22} {:>6} {:>12} {:>7} {:>7} "
                     "{:>7} {:>7} {:>7} {:>14}\n",
                     "op", "layers", "cycles", "share", "comp", "mem", "sched", "host", "dram bytes");
    for (const OpRollup& x : op_rollup(r)) {
      if (x.layers == 0) continue;  // fused nodes only: no cycles of their own
      o += fmt::format("{:<22} {:>6} {:>12} {:5.1f}% {:>7} {:>7} {:>7} {:>7} {:>14}\n", x.op.substr(0, 22), x.layers,
                       x.cycles, 100.0 * x.share, pct(x.breakdown.compute, x.cycles),
                       pct(x.breakdown.memory, x.cycles), pct(x.breakdown.scheduling, x.cycles),
                       pct(x.breakdown.host, x.cycles), x.dram_bytes_read + x.dram_bytes_written);
    }
    std::vector<size_t> order;
    for (size_t i = 0; i < r.layers.size(); ++i)
      if (!r.layers[i].fused()) order.push_back(i);
    const size_t program_layers = order.size();
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return r.layers[a].cycles > r.layers[b].cycles; });
    if (order.size() > top_layers) order.resize(top_layers);
    o += fmt::format("\n{}\n{:<28} {:<14} {:>5} {:>12} {:>7} {:>7} {:>7} {:>7}{}\n",
                     order.size() == program_layers ? std::string("layers by cycles")
                                                    : fmt::format("top {} of {} layers by cycles (--top N|all)",
                                                                  order.size(), program_layers),
                     "layer", "op", "where", "cycles", "comp", "mem", "sched", "host",
                     bound ? fmt::format(" {:>7}", "eff") : "");
    const std::vector<std::string> shown = display_names(r);
    for (size_t i : order) {
      const LayerReport& l = r.layers[i];
      const std::string& name = shown[i];
      std::string roof;
      if (bound) {
        const std::optional<double> e = efficiency(l);
        roof = e ? fmt::format(" {:6.1f}%", 100.0 * *e) : fmt::format(" {:>7}", "-");
      }
      o += fmt::format("{:<28} {:<14} {:>5} {:>12} {:>7} {:>7} {:>7} {:>7}{}\n", name, l.op.substr(0, 14),
                       layer_placement_name(l.placement), l.cycles, pct(l.breakdown.compute, l.cycles),
                       pct(l.breakdown.memory, l.cycles), pct(l.breakdown.scheduling, l.cycles),
                       pct(l.breakdown.host, l.cycles), roof);
    }
  }
  o += fmt::format("\nsimulated {} instructions in {:.3f} s\n", r.sim.instructions, r.sim.wall_seconds);
  return o;
}

}  // namespace npusim::traces
