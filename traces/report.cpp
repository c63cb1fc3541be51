#include "traces/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <utility>

#include "isa/json_text.h"
#include "isa/layer_names.h"
#include "traces/layer_tables.h"
#include "traces/report_visitor.h"
#include "traces/sink.h"

namespace npusim::traces {
namespace {

// Doubles in the summary text: shortest round-trip form.
std::string num(double v) { return fmt::format("{}", v); }

std::string pct(uint64_t part, uint64_t whole) {
  return whole ? fmt::format("{:5.1f}%", 100.0 * part / whole) : std::string("  -  ");
}

std::optional<double> ratio(std::optional<uint64_t> bound, uint64_t cycles) {
  if (!bound || cycles == 0) return std::nullopt;
  return static_cast<double>(*bound) / static_cast<double>(cycles);
}

// "; most in a (62%), b (30%), c (5%)": the three layers with the largest shares of `figure`.
std::string top_layers_of(const Report& r, uint64_t LayerReport::*figure) {
  uint64_t total = 0;
  std::vector<size_t> order;
  for (size_t i = 0; i < r.layers.size(); ++i) {
    total += r.layers[i].*figure;
    if (r.layers[i].*figure) order.push_back(i);
  }
  if (total == 0) return "";
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return r.layers[a].*figure > r.layers[b].*figure; });
  if (order.size() > 3) order.resize(3);
  const std::vector<std::string> shown = display_names(r);
  std::string o = "; most in ";
  for (size_t k = 0; k < order.size(); ++k)
    o += fmt::format("{}{} ({:.0f}%)", k ? ", " : "", shown[order[k]],
                     100.0 * static_cast<double>(r.layers[order[k]].*figure) / static_cast<double>(total));
  return o;
}

// The JSON writer: each field as JsonWriter writes its type, in the declaration's order and layout.
class JsonReportWriter final : public ReportVisitor {
 public:
  explicit JsonReportWriter(JsonWriter& w) : w_(w) {}
  void integer(const Field& f, uint64_t& v) override { key(f).value(v); }
  void integer(const Field& f, int64_t& v) override { key(f).value(v); }
  void real(const Field& f, double& v) override { write_real(key(f), f, v); }
  void boolean(const Field& f, bool& v) override { key(f).value(v); }
  void text(const Field& f, std::string& v) override { key(f).value(v); }
  void integer(const Field& f, std::optional<uint64_t>& v) override {
    if (v) key(f).value(*v);
  }
  void choice(const Field& f, size_t& index, const std::vector<std::string_view>& names) override {
    key(f).value(names[index]);
  }
  // Numbers and booleans bare, everything else a string.
  void parameter(const Field& f, std::string& v) override {
    key(f);
    char* end = nullptr;
    std::strtod(v.c_str(), &end);
    const bool number = !v.empty() && end == v.c_str() + v.size() &&
                        v.find_first_not_of("0123456789+-.eE") == std::string::npos;
    if (v == "true" || v == "false" || number) {
      w_.raw(v);
    } else {
      w_.value(v);
    }
  }
  void json(const Field& f, std::string& text) override {
    if (f.key.empty()) {
      w_.raw_members(text);
    } else {
      w_.key(f.key).raw(text);
    }
  }
  void derived(const Field& f, uint64_t v) override { key(f).value(v); }
  void derived(const Field& f, double v) override { write_real(key(f), f, v); }
  void derived(const Field& f, std::string_view v) override { key(f).value(v); }
  void null(const Field& f) override { key(f).null(); }
  bool begin_object(const Field& f, bool present, Layout layout) override {
    if (present) key(f).object(layout);
    return present;
  }
  size_t begin_list(const Field& f, size_t n, Layout layout) override {
    key(f).array(layout);
    return n;
  }
  void element(size_t) override {}
  std::vector<std::string> begin_map(const Field& f, std::vector<std::string> keys, Layout layout,
                                     std::string_view) override {
    key(f).object(layout);
    return keys;
  }
  void end() override { w_.end(); }
  void same_line() override { w_.same_line(); }

 private:
  JsonWriter& key(const Field& f) { return f.key.empty() ? w_ : w_.key(f.key); }
  JsonWriter& w_;
};

}  // namespace

std::string percent(double fraction) {
  const double p = 100.0 * fraction;
  if (p == 0.0 || std::abs(p) >= 1.0 || !std::isfinite(p)) return fmt::format("{:.1f}%", p);
  const int decimals = std::min(9, static_cast<int>(std::ceil(-std::log10(std::abs(p)))) + 1);
  return fmt::format("{:.{}f}%", p, decimals);
}

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
  if (l.fused()) return std::nullopt;
  return ratio(l.compiled_bound_cycles, l.cycles);
}

std::optional<uint64_t> fusion_saved_cycles(const LayerReport& l) {
  if (l.fused() || !l.compiled_bound_cycles) return std::nullopt;
  return l.fused_bound_cycles;
}

std::string_view layer_unit(const LayerReport& l) {
  if (l.placement == LayerPlacement::kHost) return "host";
  if (l.fused()) return "fused";
  if (l.compute_cycles > 0) return "array";
  if (l.vector_cycles > 0) return "vector";
  return l.dram_bytes_read + l.dram_bytes_written > 0 ? "dma" : "none";
}

std::optional<double> mac_utilization(const Report& r, const LayerReport& l) {
  if (l.macs == 0 || l.cycles == 0) return std::nullopt;
  const std::string_view unit = layer_unit(l);
  double peak = 0;
  if (unit == "array") {
    for (const auto& [precision, rate] : r.array_macs_per_pe_per_cycle)
      if (precision == l.precision) peak = static_cast<double>(r.array_rows * r.array_cols) * rate;
  } else if (unit == "vector") {
    peak = static_cast<double>(r.vector_lanes) *
           static_cast<double>(l.precision == "int8" ? std::max<uint64_t>(1, r.vector_int8_dot_width) : 1);
  }
  if (peak <= 0) return std::nullopt;
  return static_cast<double>(l.macs) / (peak * static_cast<double>(l.cycles));
}

std::string window_text(const LayerReport& l) {
  if (l.kernel.empty()) return "";
  std::string o = l.kernel + " s" + l.stride;
  if (l.groups) o += fmt::format(" g{}", *l.groups);
  return o;
}

std::string LayerMapping::short_text() const {
  if (placement == "free") return "view";
  if (placement == "host") return "host";
  std::string o;
  if (tile_oh > 0 && tile_ow > 0 && tile_n > 0)
    o = fmt::format("{}x{} n{} k{}", tile_oh, tile_ow, tile_n, tile_k);
  else if (tile_m > 0 && tile_n > 0)
    o = fmt::format("m{} n{} k{}", tile_m, tile_n, tile_k);
  else if (tile_elems > 0)
    o = fmt::format("e{}", tile_elems);
  const char* order = loop_order.rfind("spatial", 0) == 0   ? "S"
                      : loop_order.rfind("channel", 0) == 0 ? "C"
                      : loop_order.rfind("heads", 0) == 0   ? "H"
                                                            : "";
  if (*order) o += (o.empty() ? "" : " ") + std::string(order);
  return o.empty() ? placement : o;
}

std::optional<uint64_t> model_bound_cycles(const Report& r) {
  std::optional<uint64_t> sum;
  for (const LayerReport& l : r.layers) {
    if (l.bound_cycles) sum = sum.value_or(0) + *l.bound_cycles;
  }
  return sum;
}

std::optional<double> unfused_bound_ratio(const Report& r) {
  return ratio(model_bound_cycles(r), r.total_cycles);
}

std::optional<double> compiled_efficiency(const Report& r) {
  return ratio(r.compiled_bound_cycles, r.total_cycles);
}

std::optional<double> model_limit_efficiency(const Report& r) {
  return ratio(r.model_limit_cycles, r.total_cycles);
}

std::optional<double> whole_fold_share(const Report& r) {
  if (!r.model_limit_cycles || !r.model_limit || r.model_limit->array_fold_cycles <= 0) return std::nullopt;
  const Report::ModelLimit& m = *r.model_limit;
  const double folded = std::max({m.array_fold_cycles, m.vector_cycles, m.dram_cycles});
  return std::min(1.0, static_cast<double>(*r.model_limit_cycles) / folded);
}

std::string_view limit_bound_by(const Report::ModelLimit& m) {
  if (m.dram_cycles > std::max(m.array_cycles, m.vector_cycles)) return "dram";
  return m.vector_cycles > m.array_cycles ? "vector" : "array";
}

std::vector<std::string> display_names(const Report& r) {
  std::vector<std::string> names;
  for (const LayerReport& l : r.layers) names.push_back(l.name);
  return isa::display_names(names);
}

std::string precision_source_text(const std::string& source) {
  return source.rfind("--", 0) == 0 ? "chosen by " + source : source;
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
  std::stable_sort(f.layers.begin(), f.layers.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
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
  std::string o;
  JsonWriter w(o);
  w.object(JsonWriter::Layout::kLines);
  JsonReportWriter writer(w);
  const_cast<Report&>(r).visit(writer);  // the writer only reads
  w.end();
  o += '\n';
  return o;
}

std::string section_json(const std::function<void(ReportVisitor&)>& members, ReportVisitor::Layout layout) {
  std::string o;
  JsonWriter w(o);
  w.object(layout);
  JsonReportWriter writer(w);
  members(writer);
  w.end();
  return o;
}

void write_report_json(const Report& r, std::ostream& out) { out << report_json(r); }

std::string phases_line(const PhaseTimes& p, double simulate_seconds) {
  std::string o;
  for (const auto& [name, seconds] :
       {std::pair{"import", p.import_seconds}, std::pair{"calibration", p.calibration_seconds},
        std::pair{"compile", p.compile_seconds}, std::pair{"accuracy", p.accuracy_seconds},
        std::pair{"simulate", simulate_seconds}})
    if (seconds > 0) o += fmt::format("{}{} {:.3g} s", o.empty() ? "" : ", ", name, seconds);
  return fmt::format("host time         {}\n", o);
}

std::string summary_text(const Report& r, size_t top_layers) {
  std::string o;
  const uint64_t T = r.total_cycles;
  if (r.run) {
    o += fmt::format("run               {}{}, config {}{}; npusim {}\n", r.run->model,
                     r.run->model_sha256.empty() ? "" : " (sha256 " + r.run->model_sha256.substr(0, 12) + ")",
                     r.run->config.empty() ? "edge (built-in)" : r.run->config,
                     r.run->sets.empty() ? "" : fmt::format(" + {} --set", r.run->sets.size()),
                     r.run->version);
  }
  if (r.phases) o += phases_line(*r.phases, r.sim.wall_seconds);
  o += fmt::format("total cycles      {}  ({:.6g} ms at {} MHz)\n", T, r.latency_ms, num(r.frequency_mhz));
  if (r.model_limit_cycles && r.model_limit) {
    // The headline yardstick: the whole model against its physical limit (at most 100%). The roofline
    // lines below bound each layer alone and say where the time goes.
    const Report::ModelLimit& m = *r.model_limit;
    o += fmt::format(
        "model limit       {} cycles, efficiency {:.1f}% (set by the {} term: array {:.0f}, vector {:.0f}, "
        "DRAM {:.0f} cycles, each unit at its peak)\n",
        *r.model_limit_cycles, 100.0 * model_limit_efficiency(r).value_or(0.0), limit_bound_by(m),
        m.array_cycles, m.vector_cycles, m.dram_cycles);
    // Where the layers' shapes leave most of each array fold idle, say how much of the limit they reach so.
    if (const std::optional<double> share = whole_fold_share(r); share && *share < kWholeFoldShareShown) {
      o += fmt::format(
          "array folds       the matrix layers one at a time in whole {}x{} folds, one output pixel a row: "
          "{:.0f} "
          "cycles, {:.1f}% of the limit (layers narrower than the array leave most of each fold idle unless "
          "pixels or layers are packed into it)\n",
          r.array_rows, r.array_cols, m.array_fold_cycles, 100.0 * *share);
    }
  }
  const std::optional<PrecisionFigures> pf = precision_figures(r);
  if (pf) {
    // A mixed plan's peak is a rate between its precisions' (1020.6): one decimal, as the other rates.
    const double peak = pf->peak_macs_per_cycle;
    o += fmt::format("precision         {}: peak {} MACs/cycle{}\n", pf->plan,
                     peak == std::floor(peak) ? num(peak) : fmt::format("{:.1f}", peak),
                     r.run && !r.run->precision_source.empty()
                         ? "; " + precision_source_text(r.run->precision_source)
                         : "");
    if (r.run && !r.run->objective.empty() && r.run->objective != "cycles") {
      o += fmt::format(
          "objective         {}: the mapping search kept each layer's simulated candidate of least {} "
          "(--objective)\n",
          r.run->objective, r.run->objective == "edp" ? "energy x cycles" : "energy");
    }
    // array_utilization is of one MAC per PE per cycle (the int8 peak): said again only where the plan's
    // peak differs.
    const bool int8_peak = peak == static_cast<double>(r.array_rows) * static_cast<double>(r.array_cols);
    o += fmt::format("array             {}x{} {}, {} MACs, utilization {} of the {} peak{}\n", r.array_rows,
                     r.array_cols, r.dataflow, r.macs, percent(pf->utilization),
                     pf->layers.size() == 1 ? pf->plan : "plan's",
                     int8_peak ? "" : fmt::format(" ({} of the int8 peak)", percent(r.array_utilization)));
  } else {
    o += fmt::format("array             {}x{} {}, {} MACs, utilization {} of the int8 peak\n", r.array_rows,
                     r.array_cols, r.dataflow, r.macs, percent(r.array_utilization));
  }
  const std::optional<uint64_t> bound = model_bound_cycles(r);
  if (r.compiled_bound_cycles) {
    // The program's own work against its roof (at most 100%): its instructions, each unit at its peak.
    o += fmt::format(
        "roofline          as compiled: bound {} cycles, efficiency {:.1f}% (the program's own work, each "
        "unit at its peak, / total cycles)\n",
        *r.compiled_bound_cycles, 100.0 * compiled_efficiency(r).value_or(0.0));
  }
  if (bound) {
    // The sum of the model's nodes' bounds moves every tensor through DRAM, node by node: fusion beats it,
    // so its ratio to total cycles is no efficiency.
    o += fmt::format(
        "{}unfused nodes: bound {} cycles, {:.2f}x total cycles (sum of the nodes' bounds, each alone, fused "
        "nodes included)\n",
        r.compiled_bound_cycles ? "                  " : "roofline          ", *bound,
        unfused_bound_ratio(r).value_or(0.0));
  }
  if (r.fusion && r.fusion->nodes) {
    o += fmt::format(
        "fusion            {} nodes fused into their layers: {} tensors never in DRAM, {:.1f} MB of DRAM "
        "traffic saved\n",
        r.fusion->nodes, r.fusion->tensors, static_cast<double>(r.fusion->bytes_saved) / 1e6);
  }
  o += fmt::format("breakdown         compute {} ({})  memory {} ({})  scheduling {} ({})  host {} ({})\n",
                   r.breakdown.compute, pct(r.breakdown.compute, T), r.breakdown.memory,
                   pct(r.breakdown.memory, T), r.breakdown.scheduling, pct(r.breakdown.scheduling, T),
                   r.breakdown.host, pct(r.breakdown.host, T));
  o += fmt::format("{:<17} read {} B, written {} B, {:.2f} GB/s average", "dram (" + r.dram.model + ")",
                   r.dram.bytes_read, r.dram.bytes_written, r.dram.avg_bandwidth_gbps);
  if (r.dram.peak_bandwidth_gbps > 0) o += fmt::format(" of {:.2f} GB/s peak", r.dram.peak_bandwidth_gbps);
  if (r.dram.row_hits + r.dram.row_misses > 0) {
    o += fmt::format(", row hits {:.1f}%", 100.0 * r.dram.row_hits / (r.dram.row_hits + r.dram.row_misses));
  }
  o += "\n";
  // The DRAM bus time of misaligned bursts is DMA time, mostly overlapped with compute: not latency.
  o += fmt::format("dma               {} transfers, {} bursts, {} misaligned", r.dma.transfers, r.dma.bursts,
                   r.dma.misaligned_bursts);
  if (r.dma.misaligned_bursts)
    o += fmt::format(": {} cycles of DMA time (DRAM bus, overlapped with other work: not latency){}",
                     r.dma.misalignment_extra_cycles, top_layers_of(r, &LayerReport::misaligned_bursts));
  o += fmt::format("\nsram              {} bank conflicts", r.sram.bank_conflicts);
  if (r.sram.bank_conflicts) {
    // Waits of the matrix and vector units are their stalls (exposed to their work); a DMA transfer's
    // wait delays the transfer, which other work may hide.
    uint64_t stalls = 0;
    for (const UnitReport& u : r.units) stalls += u.stalls[static_cast<int>(Reason::kBankConflict)];
    o += fmt::format(
        ": {} cycles of waiting, {} of them exposed as matrix/vector stalls, the rest DMA time{}",
        r.sram.bank_conflict_cycles, stalls, top_layers_of(r, &LayerReport::bank_conflict_cycles));
  }
  o += "\n";
  if (r.energy && r.area) {
    const EnergyReport& e = *r.energy;
    o +=
        fmt::format("energy            {:.4g} mJ/inference, {:.3g} W average, {:.3g} W peak, {:.3g} TOPS/W\n",
                    e.total_mj, e.average_power_w, e.peak_power_w, e.tops_per_w);
    o += "energy by part   ";
    for (size_t k = 0; k < kNumEnergyComponents; ++k)
      o += fmt::format(" {} {:.3g} ({:.0f}%)", kEnergyComponentNames[k], e.by_component.mj[k],
                       e.total_mj > 0 ? 100.0 * e.by_component.mj[k] / e.total_mj : 0.0);
    o +=
        fmt::format("\narea              {:.3g} mm2 (array {:.3g}, sram {:.3g}, vector {:.3g}, dma {:.3g})\n",
                    r.area->total_mm2, r.area->by_unit_mm2[0],
                    r.area->by_unit_mm2[1] + r.area->by_unit_mm2[2] + r.area->by_unit_mm2[3],
                    r.area->by_unit_mm2[4], r.area->by_unit_mm2[5]);
  }
  if (r.host.calls) {
    o += fmt::format("host              {} calls, {} B to host, {} B back\n", r.host.calls,
                     r.host.bytes_to_host, r.host.bytes_from_host);
  }
  o += fmt::format("\n{:<12} {:>8} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7}\n", "unit", "instrs", "busy", "idle",
                   "memory", "sched", "q_full", "host");
  for (const UnitReport& u : r.units) {
    const uint64_t mem =
        u.stalls[static_cast<int>(Reason::kMemory)] + u.stalls[static_cast<int>(Reason::kBankConflict)];
    o += fmt::format("{:<12} {:>8} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7}\n", u.name, u.instructions,
                     pct(u.busy, T), pct(u.idle, T), pct(mem, T),
                     pct(u.stalls[static_cast<int>(Reason::kScheduling)], T),
                     pct(u.stalls[static_cast<int>(Reason::kQueueFull)], T),
                     pct(u.stalls[static_cast<int>(Reason::kHost)], T));
  }
  if (!r.layers.empty()) {
    o += fmt::format(
        "\ntime by op type (sum of layer cycles; layers may overlap)\n{:<22} {:>6} {:>12} {:>7} {:>7} "
        "{:>7} {:>7} {:>7} {:>14}\n",
        "op", "layers", "cycles", "share", "comp", "mem", "sched", "host", "dram bytes");
    for (const OpRollup& x : op_rollup(r)) {
      if (x.layers == 0) continue;  // fused nodes only: no cycles of their own
      o += fmt::format("{:<22} {:>6} {:>12} {:5.1f}% {:>7} {:>7} {:>7} {:>7} {:>14}\n", x.op.substr(0, 22),
                       x.layers, x.cycles, 100.0 * x.share, pct(x.breakdown.compute, x.cycles),
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
    // The layer's own figures first (fixed widths), then what explains it: its node's shapes, window and
    // mapping (docs/report.md, "Layer tables").
    const bool roofs = r.compiled_bound_cycles.has_value();
    o += fmt::format(
        "\n{}\n{:<28} {:<14} {:<6} {:>12} {:>7} {:>7} {:>7} {:>7}{} {:>7}  {:<34} {:<14} {}\n",
        order.size() == program_layers
            ? std::string("layers by cycles")
            : fmt::format("top {} of {} layers by cycles (--top N|all)", order.size(), program_layers),
        "layer", "op", "unit", "cycles", "comp", "mem", "sched", "host",
        roofs ? fmt::format(" {:>7} {:>11}", "eff", "fused saved") : "", "mac_ut", "input -> output",
        "kernel", "mapping");
    const std::vector<std::string> shown = display_names(r);
    for (size_t i : order) {
      const LayerReport& l = r.layers[i];
      const std::string& name = shown[i];
      std::string roof;
      if (roofs) {
        const std::optional<double> e = efficiency(l);
        const std::optional<uint64_t> saved = fusion_saved_cycles(l);
        roof = fmt::format(" {:>7} {:>11}", e ? fmt::format("{:.1f}%", 100.0 * *e) : "-",
                           saved ? std::to_string(*saved) : "-");
      }
      const std::optional<double> u = mac_utilization(r, l);
      const std::string shapes =
          l.input_shape.empty() && l.output_shape.empty() ? "" : l.input_shape + " -> " + l.output_shape;
      o += fmt::format("{:<28} {:<14} {:<6} {:>12} {:>7} {:>7} {:>7} {:>7}{} {:>7}  {:<34} {:<14} {}\n", name,
                       l.op.substr(0, 14), layer_unit(l), l.cycles, pct(l.breakdown.compute, l.cycles),
                       pct(l.breakdown.memory, l.cycles), pct(l.breakdown.scheduling, l.cycles),
                       pct(l.breakdown.host, l.cycles), roof, u ? percent(*u) : "-", shapes, window_text(l),
                       l.mapping ? l.mapping->short_text() : "");
    }
  }
  o += fmt::format("\nsimulated {} instructions in {:.3f} s\n", r.sim.instructions, r.sim.wall_seconds);
  return o;
}

}  // namespace npusim::traces
