#include "sim/report/html_report.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <map>
#include <numeric>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "sim/report/html_assets.h"
#include "sim/report/report_file.h"
#include "sim/report/report_reader.h"
#include "traces/layer_tables.h"
#include "traces/report.h"

namespace npusim::sim {
namespace {

// One value of the sections that stages outside the simulator write (the compiler's fallbacks and each
// layer's mapping, the accuracy report, the end-to-end pipeline), read defensively: a missing key, a null
// or a value of another type reads as absent, so a report shows what it has and omits the rest. The
// simulator's figures come typed, from sim::read_report.
class J {
 public:
  J() = default;
  explicit J(YAML::Node n) : n_(std::move(n)) {}
  J operator[](const char* key) const {
    if (!n_ || !n_.IsMap()) return {};
    const YAML::Node c = n_[key];
    return c ? J(c) : J();
  }
  bool present() const { return n_ && !n_.IsNull(); }
  bool is_map() const { return n_ && n_.IsMap(); }
  std::string str() const { return n_ && n_.IsScalar() ? n_.Scalar() : std::string(); }
  std::optional<double> num() const {
    if (!n_ || !n_.IsScalar()) return std::nullopt;
    const std::string& s = n_.Scalar();
    char* end = nullptr;
    const double v = std::strtod(s.c_str(), &end);
    if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(v)) return std::nullopt;
    return v;
  }
  double num_or(double fallback) const { return num().value_or(fallback); }
  std::vector<J> items() const {
    std::vector<J> out;
    if (n_ && n_.IsSequence()) {
      for (const YAML::Node& x : n_) out.emplace_back(x);
    }
    return out;
  }
  std::vector<std::pair<std::string, J>> entries() const {
    std::vector<std::pair<std::string, J>> out;
    if (n_ && n_.IsMap()) {
      for (const auto& kv : n_) out.emplace_back(kv.first.Scalar(), J(kv.second));
    }
    return out;
  }

 private:
  YAML::Node n_;
};

// ---- text -------------------------------------------------------------------------------------------

// Escapes text for HTML content and attribute values (and SVG inside HTML).
std::string esc(std::string_view s) {
  std::string o;
  o.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        o += "&amp;";
        break;
      case '<':
        o += "&lt;";
        break;
      case '>':
        o += "&gt;";
        break;
      case '"':
        o += "&quot;";
        break;
      case '\'':
        o += "&#39;";
        break;
      default:
        // Control characters other than white space are not allowed in HTML text: shown as U+FFFD.
        if (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n' && c != '\r') {
          o += "\xEF\xBF\xBD";
        } else {
          o += c;
        }
    }
  }
  return o;
}

// esc(s) with each command-line option in it ("--precision", "--set") kept on one line: a card's narrow
// text broke "--precision" after its dashes, and what is copied from a page must read as the option.
std::string esc_options(std::string_view s) {
  const std::string e = esc(s);
  std::string o;
  o.reserve(e.size());
  auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_'; };
  for (size_t i = 0; i < e.size();) {
    const bool starts = e.compare(i, 2, "--") == 0 && i + 2 < e.size() &&
                        std::islower(static_cast<unsigned char>(e[i + 2])) && (i == 0 || !word(e[i - 1]));
    if (!starts) {
      o += e[i++];
      continue;
    }
    size_t end = i + 2;
    while (end < e.size() && word(e[end])) ++end;
    o += "<span class=\"opt\">" + e.substr(i, end - i) + "</span>";
    i = end;
  }
  return o;
}

// 12,345,678 for whole numbers, four significant digits otherwise.
std::string grouped(double v) {
  if (v != std::floor(v) || std::fabs(v) >= 1e18) return fmt::format("{:.4g}", v);
  std::string digits = fmt::format("{:.0f}", std::fabs(v));
  std::string o;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) o += ',';
    o += digits[i];
  }
  return v < 0 ? "-" + o : o;
}

// 1.23 G (decimal prefixes) followed by `unit`.
std::string si(double v, std::string_view unit) {
  static const char* const kPrefix[] = {"", "k", "M", "G", "T", "P"};
  int p = 0;
  double a = std::fabs(v);
  while (a >= 1000 && p < 5) {
    a /= 1000;
    v /= 1000;
    ++p;
  }
  return fmt::format("{:.3g} {}{}", v, kPrefix[p], unit);
}

std::string pct(double part, double whole) {
  return whole > 0 ? fmt::format("{:.1f}%", 100.0 * part / whole) : "-";
}

// The last component of a path ("a/b/model.onnx" -> "model.onnx"); a name without '/' as it is.
std::string file_name(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos || slash + 1 == path.size() ? path : path.substr(slash + 1);
}

// A number for an attribute the table sorts by ("" when absent: sorted last).
std::string sort_key(std::optional<double> v) { return v ? fmt::format("{}", *v) : std::string(); }

// ---- the report's layers ----------------------------------------------------------------------------

constexpr double kPi = 3.14159265358979323846;

constexpr const char* kParts[] = {"compute", "memory", "scheduling", "host"};

struct Layer {
  size_t index = 0;
  std::string name, shown, op, unit, precision, bound;
  std::string shapes, window, mapping;  // input -> output shapes, kernel/strides/groups, the mapping in short
  double start = 0, end = 0, cycles = 0;
  double parts[4] = {0, 0, 0, 0};  // the breakdown, in kParts order
  double macs = 0, read = 0, written = 0;
  bool padded = false;  // array_macs: the array spent more MAC slots than the useful MACs
  bool fused = false;   // a node fused into another layer: not one of the program's layers
  std::optional<double> bound_cycles, efficiency, fusion_saved, mac_utilization, energy_mj;
  std::string energy_title;  // the layer's energy by component, for a tooltip
};

std::vector<Layer> read_layers(const traces::Report& rep) {
  std::vector<Layer> out;
  const std::vector<std::string> shown = traces::display_names(rep);
  out.reserve(rep.layers.size());
  for (size_t i = 0; i < rep.layers.size(); ++i) {
    const traces::LayerReport& x = rep.layers[i];
    Layer l;
    l.index = i;
    l.name = x.name;
    l.shown = shown[i];
    l.op = x.op;
    l.unit = std::string(traces::layer_unit(x));
    if (!x.input_shape.empty() || !x.output_shape.empty())
      l.shapes = x.input_shape + " \u2192 " + x.output_shape;
    l.window = traces::window_text(x);
    if (x.mapping) l.mapping = x.mapping->short_text();
    l.precision = x.precision;
    l.start = static_cast<double>(x.start_cycle);
    l.end = static_cast<double>(x.end_cycle);
    l.cycles = static_cast<double>(x.cycles);
    const uint64_t parts[4] = {x.breakdown.compute, x.breakdown.memory, x.breakdown.scheduling,
                               x.breakdown.host};
    size_t top = 0;
    for (size_t k = 0; k < 4; ++k) {
      l.parts[k] = static_cast<double>(parts[k]);
      if (l.parts[k] > l.parts[top]) top = k;
    }
    l.bound = std::string(traces::bound_label(x));
    if (std::find(std::begin(kParts), std::end(kParts), l.bound) == std::end(kParts)) l.bound = kParts[top];
    l.macs = static_cast<double>(x.macs);
    l.padded = x.array_macs.has_value();
    l.fused = x.fused();
    l.read = static_cast<double>(x.dram_bytes_read);
    l.written = static_cast<double>(x.dram_bytes_written);
    if (x.compiled_bound_cycles) l.bound_cycles = static_cast<double>(*x.compiled_bound_cycles);
    l.efficiency = traces::efficiency(x);
    if (const std::optional<uint64_t> saved = traces::fusion_saved_cycles(x))
      l.fusion_saved = static_cast<double>(*saved);
    l.mac_utilization = traces::mac_utilization(rep, x);
    if (rep.energy) {
      l.energy_mj = x.energy.total();
      for (size_t k = 0; k < traces::kNumEnergyComponents; ++k) {
        l.energy_title += fmt::format("{}{} {:.4g} mJ", l.energy_title.empty() ? "" : ", ",
                                      traces::kEnergyComponentNames[k], x.energy.mj[k]);
      }
    }
    out.push_back(std::move(l));
  }
  return out;
}

// ---- building blocks ----------------------------------------------------------------------------------

void card(std::string& o, std::string_view key, const std::string& value, const std::string& sub = "",
          std::string_view cls = "") {
  o += fmt::format("<div class=\"card{}{}\"><div class=\"k\">{}</div><div class=\"v\">{}</div>",
                   cls.empty() ? "" : " ", cls, esc(key), esc_options(value));
  if (!sub.empty()) o += fmt::format("<div class=\"s\">{}</div>", esc_options(sub));
  o += "</div>";
}

// A stacked bar of the four parts of `total` cycles (one element: a gradient, so that a table of thousands
// of layers stays light); its tooltip lists them.
void breakdown_bar(std::string& o, const double (&parts)[4], double total, bool big) {
  std::string title, stops;
  double at = 0;
  for (size_t k = 0; k < 4; ++k) {
    title += fmt::format("{}{} {} ({})", k ? ", " : "", kParts[k], grouped(parts[k]), pct(parts[k], total));
    if (total > 0 && parts[k] > 0) {
      at += 100.0 * parts[k] / total;
      stops += fmt::format(",var(--{}) 0 {:.2f}%", kParts[k], std::min(at, 100.0));
    }
  }
  o += fmt::format(
      "<div class=\"bar{}\" title=\"{}\"{}></div>", big ? " big" : "", esc(title),
      stops.empty() ? "" : fmt::format(" style=\"background:linear-gradient(90deg{},#eee 0)\"", stops));
}

void legend(std::string& o) {
  o += "<div class=\"legend\">";
  for (const char* p : kParts) o += fmt::format("<span><i class=\"c-{}\"></i>{}</span>", p, p);
  o += "</div>";
}

struct Column {
  const char* key;
  const char* label;
  bool numeric;
  const char* title;
};

void table_head(std::string& o, const std::string& id, const std::vector<Column>& cols) {
  o += fmt::format("<div class=\"scroll\"><table class=\"sortable\" id=\"{}\"><thead><tr>", id);
  for (const Column& c : cols) {
    o += fmt::format("<th data-key=\"{}\"{}{}>{}</th>", c.key,
                     c.numeric ? " data-type=\"num\" class=\"n\"" : "",
                     *c.title ? fmt::format(" title=\"{}\"", esc(c.title)) : "", esc(c.label));
  }
  o += "</tr></thead><tbody>\n";
}

void table_end(std::string& o) { o += "</tbody></table></div>\n"; }

// A numeric cell: `shown` as text, sorted by `v` (absent: empty, sorted last).
void num_cell(std::string& o, std::optional<double> v, const std::string& shown,
              const std::string& title = "") {
  o += fmt::format("<td class=\"n\" data-v=\"{}\"{}>{}</td>", sort_key(v),
                   title.empty() ? "" : fmt::format(" title=\"{}\"", esc(title)), esc(shown));
}

void text_cell(std::string& o, const std::string& text, const std::string& title = "") {
  o += fmt::format("<td{}>{}</td>", title.empty() ? "" : fmt::format(" title=\"{}\"", esc(title)), esc(text));
}

// A text cell that a long text does not widen: cut with an ellipsis past the column's width, the whole text
// in its tooltip (the layer table fits a 1400-pixel window).
void cut_cell(std::string& o, const std::string& text) {
  o += fmt::format("<td class=\"cut\" title=\"{0}\">{0}</td>", esc(text));
}

// Layers that are not fused into another (the program's layers; the others' rows say "fused").
size_t program_layer_count(const std::vector<Layer>& layers) {
  return static_cast<size_t>(
      std::count_if(layers.begin(), layers.end(), [](const Layer& l) { return !l.fused; }));
}

// Horizontal bars of named amounts (energy by component, area by unit), largest first.
void amount_bars(std::string& o, std::vector<std::pair<std::string, double>> values, std::string_view unit,
                 std::string_view title) {
  std::stable_sort(values.begin(), values.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  double total = 0, top = 0;
  for (const auto& v : values) {
    total += v.second;
    top = std::max(top, v.second);
  }
  const double w = 760, label = 120, bar_w = 420, row = 22;
  const double h = row * static_cast<double>(values.size()) + 8;
  o += fmt::format("<svg viewBox=\"0 0 {} {}\" width=\"{}\" height=\"{}\" role=\"img\" aria-label=\"{}\">", w,
                   h, w, h, esc(title));
  for (size_t i = 0; i < values.size(); ++i) {
    const double y = 4 + row * static_cast<double>(i);
    const double len = top > 0 ? bar_w * values[i].second / top : 0;
    o += fmt::format(
        "<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text><rect x=\"{}\" y=\"{:.1f}\" "
        "width=\"{:.1f}\" height=\"{}\" fill=\"#4c72b0\"><title>{}: {:.4g} {}</title></rect><text "
        "x=\"{:.1f}\" y=\"{:.1f}\">{:.4g} {} ({})</text>",
        label - 6, y + 14, esc(values[i].first), label, y + 3, len, row - 6, esc(values[i].first),
        values[i].second, esc(unit), label + len + 6, y + 14, values[i].second, esc(unit),
        pct(values[i].second, total));
  }
  o += "</svg>\n";
}

// ---- sections -----------------------------------------------------------------------------------------

// A count as the page's figures take it.
double num(uint64_t v) { return static_cast<double>(v); }

// End to end (`--pipeline`, docs/e2e.md): the figures a reader looks for first, among the summary's cards
// beside the model's own latency (the stages' table is in the End to end section).
void e2e_cards(std::string& o, const traces::Report& rep, const J& r) {
  const J e = r["e2e"];
  if (!e.is_map()) return;
  const double f = rep.frequency_mhz > 0 ? rep.frequency_mhz : 1000;  // absent: 1 GHz
  card(o, "latency end to end", fmt::format("{:.3f} ms", e["latency_ms"].num_or(0)),
       fmt::format("{} frame(s) per inference: {}", grouped(e["batch"].num_or(1)), e["pipeline"].str()));
  card(o, "NPU share", fmt::format("{:.1f}%", 100.0 * e["npu_share"].num_or(0)),
       "NPU stages without CPU fallbacks");
  card(o, "slowest stage", e["slowest_stage"].str());
  for (const char* dir : {"input", "output"}) {
    const J t = e[dir];
    if (t["aligned"].str() == "false" && t["transfer"].str() == "zero_copy") {
      card(o, std::string(dir) + " buffer misaligned",
           fmt::format("+{:.1f} us", t["extra_copy_cycles"].num_or(0) / f),
           fmt::format("a bounce copy of {} bytes: the buffer is aligned to {} B, dma.alignment_bytes is {}",
                       grouped(t["extra_copy_bytes"].num_or(0)), grouped(t["host_alignment_bytes"].num_or(0)),
                       grouped(t["dma_alignment_bytes"].num_or(0))));
    }
  }
  const J st = e["stream"];
  if (st.is_map()) {
    card(o, "stream throughput", fmt::format("{:.1f} frames/s", st["throughput_fps"].num_or(0)),
         fmt::format("bound {:.1f} by {}", st["bound_fps"].num_or(0), st["bounding_stage"].str()));
    card(o, "stream latency", fmt::format("p50 {:.3f} ms", st["latency_p50_ms"].num_or(0)),
         fmt::format("p99 {:.3f} ms, {} frames in flight at most", st["latency_p99_ms"].num_or(0),
                     grouped(st["frames_in_flight_max"].num_or(0))));
  }
}

void summary_section(std::string& o, const traces::Report& rep, const J& r) {
  const double total = num(rep.total_cycles);
  const std::optional<traces::PrecisionFigures> pf = traces::precision_figures(rep);
  o += "<section id=\"summary\"><h2>Summary</h2><div class=\"cards\">";
  if (const std::optional<traces::RunInfo>& run = rep.run) {
    // A file's name as the value, its path below it (a path would wrap a character a line).
    const std::string& sha = run->model_sha256;
    const std::string file = file_name(run->model);
    std::string sub = file == run->model ? "" : run->model;
    if (!sha.empty()) sub += (sub.empty() ? "" : "; ") + std::string("sha256 ") + sha.substr(0, 16);
    card(o, "model", file, sub, "wide");
    std::string sets;
    for (const std::string& s : run->sets) sets += (sets.empty() ? "--set " : ", ") + s;
    card(o, "configuration", run->config.empty() ? "edge (built-in)" : run->config, sets);
  }
  if (pf)
    card(o, "precision", pf->plan,
         fmt::format("peak {} MACs/cycle{}", grouped(pf->peak_macs_per_cycle),
                     rep.run && !rep.run->precision_source.empty()
                         ? "; " + traces::precision_source_text(rep.run->precision_source)
                         : ""));
  if (rep.run && !rep.run->objective.empty() && rep.run->objective != "cycles") {
    card(o, "mapping objective", rep.run->objective,
         "--objective: each layer's simulated candidate of least " +
             std::string(rep.run->objective == "edp" ? "energy x cycles" : "energy"));
  }
  card(o, "total cycles", grouped(total), fmt::format("{} instructions", grouped(num(rep.sim.instructions))));
  card(o, "latency", fmt::format("{:.4g} ms", rep.latency_ms),
       fmt::format("at {} MHz", grouped(rep.frequency_mhz)));
  e2e_cards(o, rep, r);
  card(o, "MACs", grouped(num(rep.macs)));
  const double int8_util = rep.array_utilization;
  if (pf) {
    const std::string& plan = pf->plan;
    card(o, "utilization", traces::percent(pf->utilization),
         plan == "int8"
             ? std::string("of the int8 peak")
             : fmt::format("of the {} peak; {} of the int8 peak",
                           plan.rfind("mixed", 0) == 0 ? "plan's" : plan, traces::percent(int8_util)));
  } else {
    card(o, "utilization", traces::percent(int8_util), "of the int8 peak");
  }
  if (const auto e = traces::model_limit_efficiency(rep); e && rep.model_limit) {
    const traces::Report::ModelLimit& m = *rep.model_limit;
    card(o, "model limit efficiency", fmt::format("{:.1f}%", 100 * *e),
         fmt::format("limit {} cycles, set by the {} term (array {}, vector {}, DRAM {})",
                     grouped(num(*rep.model_limit_cycles)), traces::limit_bound_by(m),
                     grouped(std::round(m.array_cycles)), grouped(std::round(m.vector_cycles)),
                     grouped(std::round(m.dram_cycles))) +
             (traces::whole_fold_share(rep).value_or(1.0) < traces::kWholeFoldShareShown
                  ? fmt::format(
                        "; the matrix layers one at a time in whole array folds, one output pixel a row, "
                        "reach {:.1f}% of it ({} cycles)",
                        100 * *traces::whole_fold_share(rep), grouped(std::round(m.array_fold_cycles)))
                  : std::string()));
  }
  if (const auto e = traces::compiled_efficiency(rep)) {
    card(o, "roofline efficiency", fmt::format("{:.1f}%", 100 * *e),
         fmt::format("as compiled: bound {} cycles (the program's own work, each unit at its peak)",
                     grouped(num(*rep.compiled_bound_cycles))));
  }
  card(o, "array",
       fmt::format("{} x {}", grouped(static_cast<double>(rep.array_rows)),
                   grouped(static_cast<double>(rep.array_cols))),
       rep.dataflow);
  const traces::DramReport& d = rep.dram;
  std::string bw = fmt::format("{:.3g} GB/s average", d.avg_bandwidth_gbps);
  if (d.peak_bandwidth_gbps > 0) bw += fmt::format(" of {:.3g} peak", d.peak_bandwidth_gbps);
  card(o, "DRAM " + d.model,
       fmt::format("{} read, {} written", si(num(d.bytes_read), "B"), si(num(d.bytes_written), "B")), bw);
  if (rep.host.calls > 0) {
    card(o, "host fallbacks", fmt::format("{} calls", grouped(num(rep.host.calls))),
         fmt::format("{} to the host, {} back", si(num(rep.host.bytes_to_host), "B"),
                     si(num(rep.host.bytes_from_host), "B")));
  }
  if (const std::optional<traces::EnergyReport>& en = rep.energy) {
    card(o, "energy", fmt::format("{:.4g} mJ", en->total_mj),
         fmt::format("{:.3g} W average, {:.3g} TOPS/W", en->average_power_w, en->tops_per_w));
  }
  if (rep.area) card(o, "area", fmt::format("{:.4g} mm\u00b2", rep.area->total_mm2));
  o += "</div>\n<h3>Where the cycles go</h3>";
  const double parts[4] = {num(rep.breakdown.compute), num(rep.breakdown.memory),
                           num(rep.breakdown.scheduling), num(rep.breakdown.host)};
  breakdown_bar(o, parts, total, true);
  o += "<div class=\"legend\">";
  for (size_t k = 0; k < 4; ++k) {
    o += fmt::format("<span><i class=\"c-{}\"></i>{} {} ({})</span>", kParts[k], kParts[k], grouped(parts[k]),
                     pct(parts[k], total));
  }
  o += "</div><p class=\"note\">Each cycle is charged to the first that applies: the matrix or vector unit "
       "busy (compute), a DMA transfer in flight (memory), a host call (host), otherwise scheduling.</p>\n";

  // Per unit.
  if (!rep.units.empty()) {
    o += "<h3>Units</h3>";
    table_head(o, "unit-table",
               {{"unit", "unit", false, ""},
                {"instructions", "instructions", true, ""},
                {"busy", "busy", true, "share of the total cycles"},
                {"idle", "idle", true, ""},
                {"memory", "memory stall", true, "waiting for DMA/DRAM, bank conflicts included"},
                {"scheduling", "scheduling stall", true, ""},
                {"queue_full", "queue full", true, ""},
                {"host", "host stall", true, ""}});
    for (const traces::UnitReport& u : rep.units) {
      const auto stall = [&](traces::Reason k) { return num(u.stalls[static_cast<size_t>(k)]); };
      const double busy = num(u.busy), idle = num(u.idle);
      const double mem = stall(traces::Reason::kMemory) + stall(traces::Reason::kBankConflict);
      o += "<tr>";
      text_cell(o, u.name);
      num_cell(o, num(u.instructions), grouped(num(u.instructions)));
      for (double v : {busy, idle, mem, stall(traces::Reason::kScheduling), stall(traces::Reason::kQueueFull),
                       stall(traces::Reason::kHost)}) {
        num_cell(o, total > 0 ? v / total : 0, pct(v, total), grouped(v) + " cycles");
      }
      o += "</tr>\n";
    }
    table_end(o);
  }

  // By op type.
  const std::vector<traces::OpRollup> ops = traces::op_rollup(rep);
  if (!ops.empty()) {
    o += "<h3>Time by op type</h3><p class=\"note\">The sum of each op type's layer cycles (layers may "
         "overlap in time).</p>";
    table_head(o, "op-table",
               {{"op", "op", false, ""},
                {"layers", "layers", true, ""},
                {"cycles", "cycles", true, ""},
                {"share", "share", true, "of the layers' summed cycles"},
                {"breakdown", "breakdown", false, "compute, memory, scheduling, host"},
                {"dram", "DRAM bytes", true, "read + written"}});
    std::string fused_only;  // op types whose nodes are all fused into other layers
    for (const traces::OpRollup& x : ops) {
      if (x.layers == 0) {
        fused_only +=
            fmt::format("{}{} ({})", fused_only.empty() ? "" : ", ", x.op, grouped(num(x.fused_nodes)));
        continue;
      }
      const double cycles = num(x.cycles);
      const double parts_op[4] = {num(x.breakdown.compute), num(x.breakdown.memory),
                                  num(x.breakdown.scheduling), num(x.breakdown.host)};
      const double bytes = num(x.dram_bytes_read) + num(x.dram_bytes_written);
      o += "<tr>";
      text_cell(o, x.op);
      num_cell(o, num(x.layers), grouped(num(x.layers)));
      num_cell(o, cycles, grouped(cycles));
      num_cell(o, x.share, fmt::format("{:.1f}%", 100 * x.share));
      o += "<td>";
      breakdown_bar(o, parts_op, cycles, false);
      o += "</td>";
      num_cell(o, bytes, si(bytes, "B"));
      o += "</tr>\n";
    }
    table_end(o);
    if (!fused_only.empty()) {
      o += fmt::format("<p class=\"note\">Fused into other layers, no cycles of their own: {}.</p>",
                       esc(fused_only));
    }
  }

  const std::vector<J> fallbacks = r["compile"]["fallbacks"].items();
  if (!fallbacks.empty()) {
    o += fmt::format("<h3>Host fallbacks</h3><p class=\"note\">{} node{} run on the host CPU.</p><ul>",
                     fallbacks.size(), fallbacks.size() == 1 ? "" : "s");
    for (const J& f : fallbacks) {
      o += fmt::format("<li><b>{}</b> ({}): {}; about {} cycles</li>", esc(f["node"].str()),
                       esc(f["op"].str()), esc(f["reason"].str()), grouped(f["estimated_cycles"].num_or(0)));
    }
    o += "</ul>";
  }
  o += "</section>\n";
}

void layers_section(std::string& o, const traces::Report& rep, const std::vector<Layer>& layers) {
  const double total = num(rep.total_cycles);
  const bool with_precision =
      std::any_of(layers.begin(), layers.end(), [](const Layer& l) { return !l.precision.empty(); });
  const bool with_eff =
      std::any_of(layers.begin(), layers.end(), [](const Layer& l) { return l.bound_cycles.has_value(); });
  const bool with_energy =
      std::any_of(layers.begin(), layers.end(), [](const Layer& l) { return l.energy_mj.has_value(); });
  const bool with_mac_util =
      std::any_of(layers.begin(), layers.end(), [](const Layer& l) { return l.mac_utilization.has_value(); });
  const size_t program_layers = program_layer_count(layers);
  o += fmt::format(
      "<section id=\"layers\"><h2>Layers</h2><p class=\"note\">One row per ONNX node in program order: {} "
      "layers{}. Click a column to sort (again to reverse). Hover a name for the full ONNX name, a bar for "
      "its cycles, a cut cell for all of it.</p><div class=\"filter\"><input type=\"search\" "
      "placeholder=\"filter by name or op\" data-filter=\"layer-table\" aria-label=\"filter layers\"> <span "
      "id=\"layer-table-count\">{} rows</span></div>",
      program_layers,
      layers.size() > program_layers
          ? fmt::format(" and the {} nodes fused into them (unit fused)", layers.size() - program_layers)
          : "",
      layers.size());
  std::vector<Column> cols = {
      {"index", "#", true, "program order"},
      {"name", "layer", false, ""},
      {"op", "op", false, ""},
      {"unit", "unit", false, "where its work ran: array, vector, dma, host (CPU fallback), fused or none"},
      {"shapes", "input \u2192 output", false, "its runtime inputs' and outputs' shapes"},
      {"kernel", "kernel", false, "kernel, strides (s) and groups (g)"}};
  if (with_precision) cols.push_back({"precision", "prec.", false, "precision"});
  cols.insert(cols.end(), {{"cycles", "cycles", true, "hover: its start and end cycle"},
                           {"share", "share", true, "of the total cycles"},
                           {"breakdown", "breakdown", false, "compute, memory, scheduling, host"},
                           {"compute", "comp", true, "compute share of the layer's cycles"},
                           {"memory", "mem", true, "memory share"},
                           {"scheduling", "sched", true, "scheduling share"}});
  // The host share only when a layer ran on the host (a column of zeros otherwise).
  const bool with_host =
      std::any_of(layers.begin(), layers.end(), [](const Layer& l) { return l.parts[3] > 0; });
  if (with_host) cols.push_back({"host", "host", true, "host share"});
  if (with_eff) {
    cols.push_back(
        {"efficiency", "eff.", true, "efficiency: its own compiled work's roof / cycles (at most 100%)"});
    cols.push_back(
        {"fusion_saved", "fusion saved", true, "the bounds of the nodes fused into it, in cycles"});
  }
  if (with_mac_util)
    cols.push_back({"mac_utilization", "MAC util", true, "useful MACs / (its unit's peak x cycles)"});
  if (with_energy) cols.push_back({"energy", "energy mJ", true, ""});
  cols.insert(cols.end(),
              {{"macs", "MACs", true, "useful multiply-accumulates"},
               {"dram", "DRAM bytes", true, "read + written"},
               {"mapping", "mapping", false, "the mapping in short (docs/report.md, Layer tables)"}});
  table_head(o, "layer-table", cols);
  for (const Layer& l : layers) {
    o += fmt::format("<tr id=\"L{}\" data-text=\"{}\">", l.index, esc(l.name + " " + l.op));
    num_cell(o, static_cast<double>(l.index), std::to_string(l.index));
    o += fmt::format("<td class=\"name\" title=\"{}\">{}</td>", esc(l.name), esc(l.shown));
    cut_cell(o, l.op);
    text_cell(o, l.unit);
    cut_cell(o, l.shapes);
    cut_cell(o, l.window);
    if (with_precision) text_cell(o, l.precision);
    num_cell(o, l.cycles, grouped(l.cycles), fmt::format("cycles {}..{}", grouped(l.start), grouped(l.end)));
    num_cell(o, total > 0 ? l.cycles / total : 0, pct(l.cycles, total));
    o += "<td>";
    breakdown_bar(o, l.parts, l.cycles, false);
    o += "</td>";
    for (size_t k = 0; k < (with_host ? 4 : 3); ++k)
      num_cell(o, l.cycles > 0 ? l.parts[k] / l.cycles : 0, pct(l.parts[k], l.cycles));
    if (with_eff) {
      num_cell(o, l.efficiency, l.efficiency ? fmt::format("{:.1f}%", 100 * *l.efficiency) : "",
               l.bound_cycles ? "bound " + grouped(*l.bound_cycles) + " cycles" : "");
      num_cell(o, l.fusion_saved, l.fusion_saved ? grouped(*l.fusion_saved) : "");
    }
    if (with_mac_util) {
      num_cell(o, l.mac_utilization, l.mac_utilization ? traces::percent(*l.mac_utilization) : "");
    }
    if (with_energy)
      num_cell(o, l.energy_mj, l.energy_mj ? fmt::format("{:.4g}", *l.energy_mj) : "", l.energy_title);
    num_cell(o, l.macs, l.macs > 0 ? si(l.macs, "") : "0", grouped(l.macs));
    num_cell(o, l.read + l.written, si(l.read + l.written, "B"),
             fmt::format("{} read, {} written", grouped(l.read), grouped(l.written)));
    cut_cell(o, l.mapping);
    o += "</tr>\n";
  }
  table_end(o);
  o += "</section>\n";
}

// A round step for about `n` ticks over [0, span].
double tick_step(double span, int n) {
  if (span <= 0) return 1;
  const double raw = span / n;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0}) {
    if (raw <= m * mag) return m * mag;
  }
  return 10 * mag;
}

void timeline_section(std::string& o, const traces::Report& rep, const std::vector<Layer>& layers) {
  const double total = std::max(num(rep.total_cycles), 1.0);
  // Layers overlap (the next layer's loads start while this one computes): each goes on the first lane
  // free at its start, at most kLanes lanes (past that, on the lane that frees first).
  constexpr size_t kLanes = 16;
  std::vector<size_t> order(layers.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return layers[a].start < layers[b].start; });
  std::vector<double> lane_end;
  std::vector<size_t> lane(layers.size(), 0);
  for (size_t i : order) {
    size_t pick = lane_end.size();
    for (size_t k = 0; k < lane_end.size(); ++k) {
      if (lane_end[k] <= layers[i].start) {
        pick = k;
        break;
      }
    }
    if (pick == lane_end.size() && lane_end.size() >= kLanes) {
      pick = static_cast<size_t>(std::min_element(lane_end.begin(), lane_end.end()) - lane_end.begin());
    }
    if (pick == lane_end.size()) lane_end.push_back(0);
    lane[i] = pick;
    lane_end[pick] = std::max(lane_end[pick], layers[i].end);
  }
  const double left = 10, width = 1100, lane_h = 20, top = 8;
  const double plot_h = lane_h * static_cast<double>(std::max<size_t>(lane_end.size(), 1));
  const double h = top + plot_h + 34;
  o += "<section id=\"timeline\"><h2>Timeline</h2><p class=\"note\">Each layer from its first instruction's "
       "start to its last one's end, coloured by where most of its cycles went; overlapping layers go on "
       "separate lanes. Hover for figures, click to find the layer in the table.</p>";
  legend(o);
  o += fmt::format(
      "<svg viewBox=\"0 0 {} {}\" width=\"{}\" height=\"{}\" role=\"img\" aria-label=\"timeline\">",
      left + width + 20, h, left + width + 20, h);
  const double step = tick_step(total, 8);
  for (double t = 0; t <= total * 1.0001; t += step) {
    const double x = left + width * t / total;
    o += fmt::format(
        "<line class=\"grid\" x1=\"{:.1f}\" y1=\"{}\" x2=\"{:.1f}\" y2=\"{:.1f}\"/><text x=\"{:.1f}\" "
        "y=\"{:.1f}\" text-anchor=\"middle\">{}</text>",
        x, top, x, top + plot_h + 4, x, top + plot_h + 16, si(t, ""));
  }
  o += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">cycles</text>", left + width / 2,
                   top + plot_h + 30);
  for (const Layer& l : layers) {
    const double x = left + width * l.start / total;
    const double w = std::max(width * (l.end - l.start) / total, 0.6);
    const double y = top + lane_h * static_cast<double>(lane[l.index]) + 1;
    o += fmt::format(
        "<a href=\"#L{}\"><rect class=\"c-{}\" x=\"{:.2f}\" y=\"{:.1f}\" width=\"{:.2f}\" "
        "height=\"{}\"><title>{} ({}): cycles {}..{} ({}; {} bound)</title></rect></a>",
        l.index, l.bound, x, y, w, lane_h - 2, esc(l.name), esc(l.op), grouped(l.start), grouped(l.end),
        grouped(l.cycles), l.bound);
  }
  o += "</svg></section>\n";
}

// A log axis fitted to data in [lo, hi] (positive): from the largest 1-2-5 value at or below lo to the
// smallest at or above hi, ticked at each 1-2-5 value when it spans less than three decades, else at its
// ends and the decades between.
struct LogRange {
  double lo = 1, hi = 10;
  std::vector<double> ticks;
};

LogRange log_range(double lo, double hi) {
  constexpr double kSteps[] = {1, 2, 5, 10};
  const auto below = [&](double v) {  // the largest 1-2-5 value <= v
    const double mag = std::pow(10.0, std::floor(std::log10(v)));
    double out = mag;
    for (double m : kSteps)
      if (m * mag <= v * (1 + 1e-9)) out = m * mag;
    return out;
  };
  const auto above = [&](double v) {  // the smallest 1-2-5 value >= v
    const double mag = std::pow(10.0, std::floor(std::log10(v)));
    for (double m : kSteps)
      if (m * mag >= v * (1 - 1e-9)) return m * mag;
    return 10 * mag;
  };
  const auto next = [&](double v) { return above(v * 1.01); };  // the 1-2-5 value after v
  LogRange r;
  r.lo = below(lo);
  r.hi = above(hi);
  if (r.hi <= r.lo) r.hi = next(r.lo);
  const bool fine = std::log10(r.hi / r.lo) < 3;
  for (double v = r.lo; v <= r.hi * (1 + 1e-9); v = next(v)) {
    const double decade = std::pow(10.0, std::round(std::log10(v)));
    if (fine || v == r.lo || v >= r.hi * (1 - 1e-9) || std::fabs(v / decade - 1) < 1e-9) r.ticks.push_back(v);
  }
  return r;
}

// Log-log axes for the roofline.
struct LogAxes {
  double x0, x1, y0, y1;                                  // data range (positive)
  double left = 70, top = 10, width = 760, height = 440;  // plot area in SVG units
  double x(double v) const {
    return left + width * (std::log10(v) - std::log10(x0)) / (std::log10(x1) - std::log10(x0));
  }
  double y(double v) const {
    return top + height * (1 - (std::log10(v) - std::log10(y0)) / (std::log10(y1) - std::log10(y0)));
  }
};

void roofline_section(std::string& o, const traces::Report& rep, const std::vector<Layer>& layers) {
  o += "<section id=\"roofline\"><h2>Roofline</h2>";
  const double freq_hz = rep.frequency_mhz * 1e6;
  const double pes = static_cast<double>(rep.array_rows) * static_cast<double>(rep.array_cols);
  // One roof per precision the layers with MACs use (a report without precisions: int8).
  std::map<std::string, double> peaks;
  for (const Layer& l : layers) {
    if (l.macs > 0) peaks[l.precision.empty() ? "int8" : l.precision] = 0;
  }
  for (auto& [p, peak] : peaks) {
    double rate = p == "int8" ? 1.0 : 0.0;  // a report without the array's rates: int8 only
    for (const auto& [name, r] : rep.array_macs_per_pe_per_cycle) {
      if (name == p) rate = r;
    }
    peak = pes * freq_hz * rate;
  }
  const double bw = rep.dram.peak_bandwidth_gbps * 1e9;  // bytes/s; 0: no bandwidth roof
  struct Point {
    const Layer* l;
    double x, y;
    std::optional<double> own;  // the MAC/s the layer's bound allows
  };
  std::vector<Point> pts;
  for (const Layer& l : layers) {
    const double bytes = l.read + l.written;
    if (l.macs <= 0 || l.cycles <= 0 || bytes <= 0 || freq_hz <= 0) continue;
    Point p{&l, l.macs / bytes, l.macs / (l.cycles / freq_hz), std::nullopt};
    if (l.bound_cycles && *l.bound_cycles > 0) p.own = l.macs / (*l.bound_cycles / freq_hz);
    pts.push_back(p);
  }
  double max_peak = 0;
  for (const auto& [p, peak] : peaks) max_peak = std::max(max_peak, peak);
  if (pts.empty() || max_peak <= 0) {
    o += "<p class=\"note\">No layer has both MACs and DRAM traffic (or the report has no array or clock): "
         "nothing to place on a roofline.</p></section>\n";
    return;
  }
  const double model_bytes = num(rep.dram.bytes_read) + num(rep.dram.bytes_written);
  const double model_macs = num(rep.macs), total = num(rep.total_cycles);
  const bool with_model = model_bytes > 0 && model_macs > 0 && total > 0;
  double xlo = pts[0].x, xhi = pts[0].x, ylo = pts[0].y, yhi = max_peak;
  for (const Point& p : pts) {
    xlo = std::min(xlo, p.x);
    xhi = std::max(xhi, p.x);
    ylo = std::min({ylo, p.y, p.own.value_or(p.y)});
    yhi = std::max({yhi, p.y, p.own.value_or(p.y)});  // above the peak only in a hand-made report
  }
  if (with_model) {
    xlo = std::min(xlo, model_macs / model_bytes);
    xhi = std::max(xhi, model_macs / model_bytes);
  }
  if (bw > 0) {  // each roof's ridge, where it bends
    for (const auto& [p, peak] : peaks) {
      if (peak <= 0) continue;
      xlo = std::min(xlo, peak / bw);
      xhi = std::max(xhi, peak / bw);
    }
  }
  // Both axes fitted to what is drawn (a 0.01-10000 axis for points in 0.5-200 hid them in the middle).
  const LogRange xr = log_range(xlo, xhi), yr = log_range(ylo, yhi);
  LogAxes ax{xr.lo, xr.hi, yr.lo, yr.hi};
  o += fmt::format(
      "<p class=\"note\">Each layer at its arithmetic intensity (useful MACs per DRAM byte) and achieved "
      "MAC/s, coloured by where most of its cycles went, under the roof of each precision the layers use "
      "(the array's peak{}). A grey line rises to the layer's own roof (the MAC/s its bound allows): its "
      "length is the distance to the roof. Triangles: layers on which the array also spent MAC slots on "
      "padding. The star is the whole model. {} of {} layers shown (the others have no MACs or no DRAM "
      "traffic).</p>",
      bw > 0 ? fmt::format(" and {:.4g} GB/s of DRAM bandwidth", bw / 1e9)
             : ", no bandwidth roof: ideal DRAM",
      pts.size(), program_layer_count(layers));
  legend(o);
  const double w = ax.left + ax.width + 260, h = ax.top + ax.height + 44;
  o += fmt::format(
      "<svg viewBox=\"0 0 {} {}\" width=\"{}\" height=\"{}\" role=\"img\" "
      "aria-label=\"roofline\"><defs><clipPath id=\"plot\"><rect x=\"{}\" y=\"{}\" width=\"{}\" "
      "height=\"{}\"/></clipPath></defs>",
      w, h, w, h, ax.left, ax.top, ax.width, ax.height);
  for (double v : xr.ticks) {
    o += fmt::format(
        "<line class=\"grid\" x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\"/><text class=\"xtick\" "
        "x=\"{0:.1f}\" y=\"{3}\" text-anchor=\"middle\">{4:g}</text>",
        ax.x(v), ax.top, ax.top + ax.height, ax.top + ax.height + 14, v);
  }
  for (double v : yr.ticks) {
    o += fmt::format(
        "<line class=\"grid\" x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\"/><text x=\"{3}\" "
        "y=\"{4:.1f}\" text-anchor=\"end\">{5}</text>",
        ax.left, ax.y(v), ax.left + ax.width, ax.left - 4, ax.y(v) + 4, si(v, ""));
  }
  o += fmt::format(
      "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" class=\"axis\"/><text x=\"{:.1f}\" "
      "y=\"{:.1f}\" text-anchor=\"middle\">arithmetic intensity (MACs per DRAM byte)</text><text "
      "transform=\"translate(14 {:.1f}) rotate(-90)\" text-anchor=\"middle\">achieved MAC/s</text><g "
      "clip-path=\"url(#plot)\">",
      ax.left, ax.top, ax.width, ax.height, ax.left + ax.width / 2, ax.top + ax.height + 34,
      ax.top + ax.height / 2);
  // Roofs, highest first, each with its own dash pattern and a legend line on the right.
  std::vector<std::pair<std::string, double>> roofs(peaks.begin(), peaks.end());
  std::stable_sort(roofs.begin(), roofs.end(),
                   [](const auto& p, const auto& q) { return p.second > q.second; });
  static const char* const kDash[] = {"", "6 3", "2 3", "8 3 2 3"};
  std::string roof_legend;
  for (size_t i = 0; i < roofs.size(); ++i) {
    const double pk = roofs[i].second;
    if (pk <= 0) continue;
    std::vector<std::pair<double, double>> line;
    const auto roof_at = [&](double x) { return bw > 0 ? std::min(pk, x * bw) : pk; };
    line.emplace_back(ax.x0, roof_at(ax.x0));
    if (bw > 0 && pk / bw > ax.x0 && pk / bw < ax.x1) line.emplace_back(pk / bw, pk);
    line.emplace_back(ax.x1, roof_at(ax.x1));
    std::string points;
    for (const auto& [x, y] : line)
      points += fmt::format("{:.1f},{:.1f} ", ax.x(x), ax.y(std::max(y, ax.y0 / 10)));
    const char* dash = kDash[i % 4];
    o += fmt::format("<polyline class=\"roof\" points=\"{}\"{}><title>{} roof: {} MAC/s</title></polyline>",
                     points, *dash ? fmt::format(" stroke-dasharray=\"{}\"", dash) : "", esc(roofs[i].first),
                     si(pk, ""));
    const double ly = ax.top + 14 + 18 * static_cast<double>(i);
    roof_legend += fmt::format(
        "<line class=\"roof\" x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\"{3}/><text x=\"{4}\" "
        "y=\"{5:.1f}\">{6} roof: {7}MAC/s{8}</text>",
        ax.left + ax.width + 12, ly, ax.left + ax.width + 36,
        *dash ? fmt::format(" stroke-dasharray=\"{}\"", dash) : "", ax.left + ax.width + 40, ly + 4,
        esc(roofs[i].first), si(pk, ""), bw > 0 ? fmt::format(", ridge {:.3g} MAC/B", pk / bw) : "");
  }
  for (const Point& p : pts) {
    if (p.own) {
      o += fmt::format("<line class=\"own\" x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\"/>",
                       ax.x(p.x), ax.y(p.y), ax.y(*p.own));
    }
  }
  for (const Point& p : pts) {
    const Layer& l = *p.l;
    const std::string title = fmt::format(
        "{} ({}{}): {:.3g} MACs/byte, {}MAC/s{}", l.name, l.op, l.precision.empty() ? "" : ", " + l.precision,
        p.x, si(p.y, ""), l.efficiency ? fmt::format(", {:.1f}% of its roof", 100 * *l.efficiency) : "");
    const double cx = ax.x(p.x), cy = ax.y(p.y);
    if (l.padded) {
      o += fmt::format(
          "<a href=\"#L{}\"><polygon class=\"c-{} pt\" data-x=\"{}\" points=\"{:.1f},{:.1f} {:.1f},{:.1f} "
          "{:.1f},{:.1f}\" stroke=\"#000\" stroke-width=\"0.4\"><title>{}</title></polygon></a>",
          l.index, l.bound, p.x, cx, cy - 4.5, cx - 4, cy + 3, cx + 4, cy + 3, esc(title));
    } else {
      o += fmt::format(
          "<a href=\"#L{}\"><circle class=\"c-{} pt\" data-x=\"{}\" cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3.2\" "
          "stroke=\"#000\" stroke-width=\"0.4\"><title>{}</title></circle></a>",
          l.index, l.bound, p.x, cx, cy, esc(title));
    }
  }
  if (with_model) {
    const double cx = ax.x(model_macs / model_bytes), cy = ax.y(model_macs / (total / freq_hz));
    std::string star;
    for (int k = 0; k < 10; ++k) {
      const double rad = k % 2 ? 3.5 : 9, ang = kPi / 5 * k - kPi / 2;
      star += fmt::format("{:.1f},{:.1f} ", cx + rad * std::cos(ang), cy + rad * std::sin(ang));
    }
    o += fmt::format(
        "<polygon class=\"pt\" data-x=\"{}\" points=\"{}\" fill=\"gold\" stroke=\"#000\" "
        "stroke-width=\"0.6\"><title>whole model: {:.3g} MACs/byte, {}MAC/s</title></polygon>",
        model_macs / model_bytes, star, model_macs / model_bytes, si(model_macs / (total / freq_hz), ""));
  }
  o += "</g>" + roof_legend + "</svg></section>\n";
}

void energy_section(std::string& o, const traces::Report& rep, const std::vector<Layer>& layers) {
  if (!rep.energy && !rep.area) return;
  o += "<section id=\"energy\"><h2>Energy and area</h2>";
  if (const std::optional<traces::EnergyReport>& en = rep.energy) {
    o += "<div class=\"cards\">";
    card(o, "energy per inference", fmt::format("{:.4g} mJ", en->total_mj));
    card(o, "average power", fmt::format("{:.4g} W", en->average_power_w));
    card(o, "peak power", fmt::format("{:.4g} W", en->peak_power_w));
    card(o, "efficiency", fmt::format("{:.4g} TOPS/W", en->tops_per_w));
    double layer_sum = 0;
    bool with = false;
    for (const Layer& l : layers) {
      if (l.energy_mj) {
        layer_sum += *l.energy_mj;
        with = true;
      }
    }
    if (with)
      card(o, "layers' energy", fmt::format("{:.4g} mJ", layer_sum),
           fmt::format("summed over the {} layers", program_layer_count(layers)));
    o += "</div>";
    std::vector<std::pair<std::string, double>> parts;
    for (size_t k = 0; k < traces::kNumEnergyComponents; ++k)
      parts.emplace_back(traces::kEnergyComponentNames[k], en->by_component.mj[k]);
    o += "<h3>Energy by component</h3>";
    amount_bars(o, parts, "mJ", "energy by component");
  }
  if (const std::optional<traces::AreaReport>& area = rep.area) {
    std::vector<std::pair<std::string, double>> units;
    for (size_t k = 0; k < traces::kNumAreaUnits; ++k)
      units.emplace_back(traces::kAreaUnitNames[k], area->by_unit_mm2[k]);
    o += fmt::format("<h3>Area: {:.4g} mm\u00b2</h3>", area->total_mm2);
    amount_bars(o, units, "mm\u00b2", "area by unit");
  }
  o += "</section>\n";
}

// The task metrics (accuracy.task, docs/quantization.md): what a user judges the quantized model by.
void task_cards(std::string& o, const J& t) {
  const std::string task = t["task"].str();
  const std::string inputs =
      fmt::format("--task {}: {} inputs, quantized vs fp32", task, grouped(t["inputs"].num_or(0)));
  auto pct = [](double v) { return fmt::format("{:.1f}%", 100 * v); };
  if (task == "classify") {
    card(o, "top-1 agreement", pct(t["top1_agreement"].num_or(0)), inputs);
    card(o, "top-5 agreement", pct(t["top5_agreement"].num_or(0)), "fp32's top-1 among the quantized top-5");
    const J labels = t["labels"];
    if (labels.is_map()) {  // --labels: against the ground truth
      card(o, "top-1 against labels", pct(labels["quantized_top1"].num_or(0)),
           fmt::format("quantized; fp32 {} ({} labelled inputs)", pct(labels["fp32_top1"].num_or(0)),
                       grouped(labels["inputs"].num_or(0))));
      card(o, "top-5 against labels", pct(labels["quantized_top5"].num_or(0)),
           fmt::format("quantized; fp32 {}", pct(labels["fp32_top5"].num_or(0))));
    }
  } else if (task == "ocr-rec") {
    card(o, "same string", pct(t["string_agreement"].num_or(0)),
         fmt::format("{} of {} ({} ignoring leading/trailing spaces)", grouped(t["strings_equal"].num_or(0)),
                     grouped(t["inputs"].num_or(0)), pct(t["string_agreement_trimmed"].num_or(0))));
    card(o, "character error rate", pct(t["char_error_rate"].num_or(0)),
         fmt::format("{} edits over fp32's {} characters", grouped(t["char_edits"].num_or(0)),
                     grouped(t["reference_chars"].num_or(0))));
  } else if (task == "ocr-det") {
    card(o, "text-map F1", fmt::format("{:.4f}", t["f1"].num_or(0)),
         fmt::format("IoU {:.4f}; {}", t["iou"].num_or(0), inputs));
  } else if (task == "regress") {
    card(o, "mean |error|", fmt::format("{:.4g}", t["mean_abs_error"].num_or(0)),
         fmt::format("relative RMS error {:.4g}; {}", t["relative_rms_error"].num_or(0), inputs));
  }
}

// A string as read, every space kept (white-space: pre): its leading and trailing spaces marked, so that
// " NPU simulator" and "NPU simulator" look different.
void string_cell(std::string& o, const std::string& text) {
  const size_t first = text.find_first_not_of(' ');
  const size_t lead = first == std::string::npos ? text.size() : first;
  const size_t last = text.find_last_not_of(' ');
  const size_t trail = last == std::string::npos ? 0 : text.size() - 1 - last;
  const auto marked = [](size_t n) {
    return n ? fmt::format("<span class=\"sp\" title=\"{} space{}\">{}</span>", n, n == 1 ? "" : "s",
                           std::string(n, ' '))
             : std::string();
  };
  o += "<td class=\"str\">" + marked(lead);
  if (lead < text.size()) o += esc(text.substr(lead, text.size() - lead - trail)) + marked(trail);
  o += "</td>";
}

// ocr-rec: the first strings the quantized model reads differently from fp32.
void string_mismatches(std::string& o, const J& t) {
  const std::vector<J> mm = t["mismatches"].items();
  if (mm.empty()) return;
  o += "<h3>Strings read differently (first few)</h3><p class=\"note\">Each string as read, every space "
       "kept; spaces at either end are marked.</p>";
  table_head(o, "mismatch-table",
             {{"fp32", "fp32", false, ""},
              {"quantized", "quantized", false, ""},
              {"steps", "steps differing", true, "decoding steps whose argmax differs"},
              {"margin_min", "fp32 margin min", true,
               "fp32's score of its own choice minus its score of the quantized choice, smallest over those "
               "steps: small = a near-tie in fp32 itself"}});
  for (const J& m : mm) {
    o += "<tr>";
    string_cell(o, m["fp32"].str());
    string_cell(o, m["quantized"].str());
    num_cell(o, m["steps_differing"].num(), grouped(m["steps_differing"].num_or(0)));
    num_cell(o, m["fp32_margin_min"].num(), fmt::format("{:.4g}", m["fp32_margin_min"].num_or(0)));
    o += "</tr>\n";
  }
  table_end(o);
}

void accuracy_section(std::string& o, const J& r) {
  const J acc = r["accuracy"];
  if (!acc.is_map()) return;
  const double threshold = acc["bad_layer_sqnr_db"].num_or(0);
  o += "<section id=\"accuracy\"><h2>Accuracy</h2><div class=\"cards\">";
  const std::string source = acc["evaluation_source"].str();
  card(o, "precision vs fp32", acc["precision"].str(),
       fmt::format("{} evaluation inputs{}", grouped(acc["evaluation_inputs"].num_or(0)),
                   source.empty() ? " (synthetic)" : ": " + source));
  card(o, "output SQNR", fmt::format("{:.2f} dB", acc["output_sqnr_db"].num_or(0)),
       fmt::format("cosine {:.5f}", acc["output_cosine"].num_or(0)));
  card(o, "output max |error|", fmt::format("{:.4g}", acc["output_max_abs_error"].num_or(0)),
       acc["output_nonfinite"].num_or(0) > 0
           ? fmt::format("{} values are inf/NaN", grouped(acc["output_nonfinite"].num_or(0)))
           : "");
  const std::string first_bad = acc["first_bad_layer"].str();
  card(o, fmt::format("first layer below {:.1f} dB", threshold), first_bad.empty() ? "none" : first_bad);
  const J cal = acc["calibration"];
  if (!cal["method"].str().empty()) {
    card(o, "calibration", cal["method"].str(),
         fmt::format("{} inputs: {}", grouped(cal["inputs"].num_or(0)), cal["source"].str()));
  }
  if (acc["task"].is_map()) task_cards(o, acc["task"]);
  o += "</div>";
  if (acc["task"].is_map()) string_mismatches(o, acc["task"]);
  const std::vector<J> warnings = acc["warnings"].items();
  if (!warnings.empty()) {
    o += "<ul>";
    for (const J& w : warnings) o += fmt::format("<li class=\"bad\">{}</li>", esc(w.str()));
    o += "</ul>";
  }
  const J adv = acc["mixed_precision_advice"];
  if (adv.is_map()) {
    o += fmt::format(
        "<p>Mixed-precision advice (target {:.1f} dB): {} {:.2f} dB with <code>--precision-override "
        "'{}'</code>, {} cycles (as planned: {}).</p>",
        adv["target_sqnr_db"].num_or(0), adv["met"].str() == "true" ? "met," : "not met, best",
        adv["achieved_sqnr_db"].num_or(0), esc(adv["overrides"].str()), grouped(adv["cost"].num_or(0)),
        grouped(adv["cost_as_planned"].num_or(0)));
  }
  const std::vector<J> layers = acc["layers"].items();
  if (!layers.empty()) {
    // SQNR of each layer's output in program order, against the bad-layer threshold.
    double lo = threshold, hi = threshold;
    for (const J& l : layers) {
      if (const auto s = l["sqnr_db"].num()) {
        lo = std::min(lo, *s);
        hi = std::max(hi, *s);
      }
    }
    lo = std::floor(lo / 10) * 10;
    hi = std::ceil(hi / 10) * 10 + (hi == lo ? 10 : 0);
    const double left = 50, top = 8, width = 1000, height = 200;
    const auto y_of = [&](double v) { return top + height * (1 - (v - lo) / (hi - lo)); };
    const double n = static_cast<double>(std::max<size_t>(layers.size() - 1, 1));
    o += fmt::format(
        "<h3>SQNR per layer</h3><p class=\"note\">Each layer's output against the fp32 reference, in program "
        "order; red below {:.1f} dB.</p><svg viewBox=\"0 0 {} {}\" width=\"{}\" height=\"{}\" role=\"img\" "
        "aria-label=\"SQNR per layer\">",
        threshold, left + width + 10, top + height + 30, left + width + 10, top + height + 30);
    for (double v = lo; v <= hi + 1e-9; v += tick_step(hi - lo, 5)) {
      o += fmt::format(
          "<line class=\"grid\" x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\"/><text x=\"{3}\" "
          "y=\"{4:.1f}\" text-anchor=\"end\">{5:g} dB</text>",
          left, y_of(v), left + width, left - 4, y_of(v) + 4, v);
    }
    o += fmt::format("<line class=\"thr\" x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\"/>", left,
                     y_of(threshold), left + width);
    std::string line;
    std::string dots;
    for (size_t i = 0; i < layers.size(); ++i) {
      const auto s = layers[i]["sqnr_db"].num();
      if (!s) continue;
      const double x = left + width * static_cast<double>(i) / n, y = y_of(*s);
      line += fmt::format("{:.1f},{:.1f} ", x, y);
      dots += fmt::format(
          "<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"2.2\" fill=\"{}\"><title>{} ({}): {:.2f} "
          "dB</title></circle>",
          x, y, *s < threshold ? "#c44e52" : "#4c72b0", esc(layers[i]["name"].str()),
          esc(layers[i]["op"].str()), *s);
    }
    o += fmt::format(
        "<polyline points=\"{}\" fill=\"none\" stroke=\"#9aa5b1\" stroke-width=\"1\"/>{}<text x=\"{:.1f}\" "
        "y=\"{:.1f}\" text-anchor=\"middle\">layer (program order)</text></svg>",
        line, dots, left + width / 2, top + height + 22);
    table_head(o, "accuracy-table",
               {{"index", "#", true, ""},
                {"name", "layer", false, ""},
                {"op", "op", false, ""},
                {"precision", "precision", false, ""},
                {"sqnr", "SQNR dB", true, ""},
                {"cosine", "cosine", true, ""},
                {"own_sqnr", "own SQNR dB", true,
                 "the layer alone quantized, fed the fp32 reference's inputs: the error it adds itself"},
                {"max_abs_error", "max |error|", true, ""},
                {"overflow", "overflow", true, "fp16 values that overflowed to inf"},
                {"underflow", "underflow", true, "fp16 values that underflowed to 0"},
                {"saturated", "saturated", true, "int8 values outside the calibrated range"},
                {"nonfinite", "inf/NaN", true, ""}});
    for (size_t i = 0; i < layers.size(); ++i) {
      const J& l = layers[i];
      const auto s = l["sqnr_db"].num();
      o += "<tr>";
      num_cell(o, static_cast<double>(i), std::to_string(i));
      text_cell(o, l["name"].str());
      text_cell(o, l["op"].str());
      text_cell(o, l["precision"].str());
      num_cell(o, s, s ? fmt::format("{:.2f}", *s) : l["sqnr_db"].str());
      num_cell(o, l["cosine"].num(), fmt::format("{:.5f}", l["cosine"].num_or(0)));
      const auto own = l["own_sqnr_db"].num();
      num_cell(o, own, own ? fmt::format("{:.2f}", *own) : "-");
      num_cell(o, l["max_abs_error"].num(), fmt::format("{:.4g}", l["max_abs_error"].num_or(0)));
      for (const char* k : {"overflow", "underflow", "saturated", "nonfinite"}) {
        num_cell(o, l[k].num(), grouped(l[k].num_or(0)));
      }
      o += "</tr>\n";
    }
    table_end(o);
  }
  const std::vector<J> outliers = acc["weight_outliers"].items();
  if (!outliers.empty()) {
    o += "<h3>Weight outliers</h3><p class=\"note\">Channels whose largest |weight| is far above the layer's "
         "median channel: they stretch a per-tensor int8 scale.</p><ul>";
    for (const J& w : outliers) {
      o += fmt::format("<li>{} channel {}: {:.3g}x the median ({:.4g} vs {:.4g})</li>", esc(w["layer"].str()),
                       grouped(w["channel"].num_or(0)), w["factor"].num_or(0), w["channel_max_abs"].num_or(0),
                       w["median_max_abs"].num_or(0));
    }
    o += "</ul>";
  }
  o += "</section>\n";
}

// End to end (`--pipeline`, docs/e2e.md): the stages around the model, the transfers' alignment, the stream.
void e2e_section(std::string& o, const J& r) {
  const J e = r["e2e"];
  if (!e.is_map()) return;
  o += "<section id=\"e2e\"><h2>End to end</h2><p class=\"note\">The stages around the model, in order "
       "(its figures are among the summary's cards).</p>";
  table_head(o, "e2e-table",
             {{"index", "#", true, ""},
              {"name", "stage", false, ""},
              {"kind", "kind", false, ""},
              {"unit", "unit", false, ""},
              {"op", "op", false, ""},
              {"us", "time us", true, ""},
              {"share", "share", true, "of the end-to-end latency"}});
  const std::vector<J> stages = e["stages"].items();
  for (size_t i = 0; i < stages.size(); ++i) {
    const J& s = stages[i];
    o += "<tr>";
    num_cell(o, static_cast<double>(i), std::to_string(i));
    text_cell(o, s["name"].str());
    text_cell(o, s["kind"].str());
    text_cell(o, s["unit"].str());
    text_cell(o, s["op"].str());
    num_cell(o, s["us"].num(), fmt::format("{:.1f}", s["us"].num_or(0)));
    num_cell(o, s["share"].num(), fmt::format("{:.1f}%", 100.0 * s["share"].num_or(0)));
    o += "</tr>\n";
  }
  table_end(o);
  o += "</section>\n";
}

}  // namespace

std::string html_report(const std::string& json, const std::string& name) {
  const YAML::Node root = parse_report(json, name);
  traces::Report rep;
  try {
    rep = read_report(root);
  } catch (const ReportReadError& e) {
    throw ReportReadError(fmt::format("{}: {}", name, e.what()));
  }
  const J r(root);
  std::vector<Layer> layers;
  try {
    layers = read_layers(rep);
  } catch (const YAML::Exception&) {
    throw ReportReadError(fmt::format("{} is not an npusim report (its layers[] are not objects)", name));
  }
  std::string model = rep.run ? rep.run->model : "";
  if (model.empty()) model = name;
  std::string o;
  o.reserve(4096 + 900 * layers.size());
  o += "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" "
       "content=\"width=device-width, initial-scale=1\">";
  o += fmt::format("<title>npusim: {}</title>\n<script>{}</script>\n<style>{}</style></head>\n<body>\n",
                   esc(model), html_assets::kErrorCapture, html_assets::kCss);
  o += fmt::format("<header><h1>npusim report: {}</h1><div class=\"meta\">", esc(file_name(model)));
  if (rep.run)
    o += fmt::format("<div>{}</div><div>npusim {}</div>", esc(rep.run->command), esc(rep.run->version));
  o += "</div></header>\n<nav><a href=\"#summary\">Summary</a><a href=\"#layers\">Layers</a><a "
       "href=\"#timeline\">Timeline</a><a href=\"#roofline\">Roofline</a>";
  if (rep.energy || rep.area) o += "<a href=\"#energy\">Energy</a>";
  if (r["accuracy"].is_map()) o += "<a href=\"#accuracy\">Accuracy</a>";
  if (r["e2e"].is_map()) o += "<a href=\"#e2e\">End to end</a>";
  o += "</nav>\n<main>\n";
  try {
    summary_section(o, rep, r);
    layers_section(o, rep, layers);
    timeline_section(o, rep, layers);
    roofline_section(o, rep, layers);
    energy_section(o, rep, layers);
    accuracy_section(o, r);
    e2e_section(o, r);
  } catch (const YAML::Exception&) {
    throw ReportReadError(fmt::format("{} is not an npusim report (a field has an unexpected shape)", name));
  }
  o += fmt::format("</main>\n<script>{}</script>\n</body></html>\n", html_assets::kScript);
  return o;
}

}  // namespace npusim::sim
