#include "sim/cli/diff.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "sim/report/report_file.h"
#include "sim/report/report_reader.h"
#include "traces/report.h"
#include "traces/report_paths.h"

namespace npusim::sim {
namespace {

// A report read through the typed reader: figures come from traces::Report's fields and the functions
// that wrote them (precision_figures, model_bound_cycles, ...), not from string paths into the JSON.
struct Loaded {
  std::string path;
  traces::Report r;
};

Loaded load(const std::string& path) {
  const YAML::Node root = load_report(path);
  try {
    return Loaded{path, read_report(root)};
  } catch (const ReportReadError& e) {
    throw ReportReadError(fmt::format("{}: {}", path, e.what()));
  }
}

// One row of the results table: the figure's text in the report and its value, absent when the
// report does not have it.
struct Figure {
  std::optional<std::string> text;
  std::optional<double> value;
};

// The results table's figures of one report, by the name the table shows (the path of each).
std::vector<std::pair<std::string, Figure>> results_of(const traces::Report& r) {
  const std::map<std::string, traces::ReportFigure> figures = traces::report_figures(r);
  std::vector<std::pair<std::string, Figure>> out;
  for (const char* path : diff_result_paths()) {
    const auto it = figures.find(path);
    out.emplace_back(path, it == figures.end() ? Figure{} : Figure{it->second.text, it->second.value});
  }
  return out;
}

// The table of what was run, by label: the model, its sha256 (16 hex digits tell files apart on a line),
// the configuration, npusim's version and the precision plan; absent when the report does not say.
std::vector<std::pair<std::string, std::optional<std::string>>> run_of(const traces::Report& r) {
  const std::optional<traces::PrecisionFigures> pf = traces::precision_figures(r);
  std::optional<std::string> model, sha, config, version;
  if (r.run) {
    model = r.run->model;
    sha = r.run->model_sha256.substr(0, 16);
    config = r.run->config.empty() ? "edge (built-in)" : r.run->config;
    version = r.run->version;
  }
  return {{"  model", model},
          {"  model_sha256", sha},
          {"  config", config},
          {"  version", version},
          {"  precision.plan", pf ? std::optional<std::string>(pf->plan) : std::nullopt}};
}

// "+12.3%", "-4.0%", "same", or "" when it cannot be said.
std::string change(std::optional<double> a, std::optional<double> b) {
  if (!a || !b) return "";
  if (*a == *b) return "same";
  if (*a == 0) return "new";
  return fmt::format("{:+.1f}%", 100.0 * (*b - *a) / std::fabs(*a));
}

std::string show(const std::optional<std::string>& s) { return s ? *s : "-"; }

struct LayerFigures {
  std::string name, op;
  std::string shown;  // the display name (traces::display_names over the report's layers)
  double cycles = 0;
  // Where and how it ran: its unit (traces::layer_unit), precision and the mapping in short.
  std::string unit, precision, mapping;
};

std::vector<LayerFigures> layers_of(const traces::Report& r) {
  std::vector<LayerFigures> out;
  const std::vector<std::string> shown = traces::display_names(r);
  for (size_t i = 0; i < r.layers.size(); ++i) {
    const traces::LayerReport& l = r.layers[i];
    out.push_back({l.name, l.op, shown[i], static_cast<double>(l.cycles), std::string(traces::layer_unit(l)),
                   l.precision, l.mapping ? l.mapping->short_text() : ""});
  }
  return out;
}

// "array int8 12x20 n24 k600 S": a layer's placement, precision and mapping on one line.
std::string placement_text(const LayerFigures& l) {
  std::string o = l.unit;
  for (const std::string* part : {&l.precision, &l.mapping})
    if (!part->empty() && *part != l.unit) o += " " + *part;
  return o;
}

}  // namespace

const std::vector<const char*>& diff_result_paths() {
  static const std::vector<const char*> kResults = {"total_cycles",
                                                    "latency_ms",
                                                    "macs",
                                                    "precision.peak_macs_per_cycle",
                                                    "precision.utilization",
                                                    "array_utilization",
                                                    "bound_cycles",
                                                    "compiled_bound_cycles",
                                                    "compiled_efficiency",
                                                    "breakdown.compute",
                                                    "breakdown.memory",
                                                    "breakdown.scheduling",
                                                    "breakdown.host",
                                                    "dram.bytes_read",
                                                    "dram.bytes_written",
                                                    "dram.avg_bandwidth_gbps",
                                                    "host.calls",
                                                    "energy.total_mj",
                                                    "energy.average_power_w",
                                                    "energy.peak_power_w",
                                                    "energy.tops_per_w",
                                                    "area.total_mm2",
                                                    "sim.instructions"};
  return kResults;
}

std::string diff_reports(const std::string& a_path, const std::string& b_path, size_t top) {
  const Loaded a = load(a_path);
  const Loaded b = load(b_path);
  const std::string head = fmt::format("A: {}\nB: {}\n", a.path, b.path);
  std::string o;
  bool differs = false;  // anything below: what was run, a parameter, a result, a layer's unit or cycles

  // What was run; A's column as wide as its longest value (a model path can be longer than the 24 columns).
  std::vector<std::tuple<std::string, std::optional<std::string>, std::optional<std::string>>> run_rows;
  {
    const auto ra = run_of(a.r), rb = run_of(b.r);
    for (size_t k = 0; k < ra.size(); ++k) run_rows.emplace_back(ra[k].first, ra[k].second, rb[k].second);
  }
  o += "\nrun\n";
  size_t wa = 24, wb = 24;
  for (const auto& [label, x, y] : run_rows) {
    wa = std::max(wa, show(x).size());
    wb = std::max(wb, show(y).size());
  }
  for (const auto& [label, x, y] : run_rows) {
    if (x == y) {  // said once
      o += fmt::format("{:<30} {:<{}} (both)\n", label, show(x), wa);
    } else {
      o += fmt::format("{:<30} {:<{}} {:<{}}  <- differs\n", label, show(x), wa, show(y), wb);
      differs = true;
    }
  }

  // Configuration: every parameter either report records.
  const auto no_parameters = std::vector<std::pair<std::string, std::string>>();
  const auto& pa = a.r.run ? a.r.run->parameters : no_parameters;
  const auto& pb = b.r.run ? b.r.run->parameters : no_parameters;
  if (pa.empty() || pb.empty()) {
    differs = true;  // no verdict without the configurations to compare
    o += fmt::format("\nconfiguration: not recorded in {} (a report from before npusim recorded it)\n",
                     pa.empty() ? (pb.empty() ? "A and B" : "A") : "B");
  } else {
    std::map<std::string, std::string> mb(pb.begin(), pb.end());
    std::vector<std::string> rows;
    std::map<std::string, bool> seen;
    for (const auto& [k, v] : pa) {
      seen[k] = true;
      auto it = mb.find(k);
      const std::string w = it == mb.end() ? "-" : it->second;
      if (w != v) rows.push_back(fmt::format("  {:<40} {:<20} {:<20}\n", k, v, w));
    }
    for (const auto& [k, v] : pb) {
      if (!seen.count(k)) rows.push_back(fmt::format("  {:<40} {:<20} {:<20}\n", k, "-", v));
    }
    differs = differs || !rows.empty();
    o += fmt::format("\nconfiguration: {} of {} parameters differ\n", rows.size(),
                     std::max(pa.size(), pb.size()));
    for (const std::string& r : rows) o += r;
  }

  // The run's figures.
  o += fmt::format("\n{:<30} {:>16} {:>16} {:>9}\n", "results", "A", "B", "change");
  const auto fa = results_of(a.r), fb = results_of(b.r);
  for (size_t k = 0; k < fa.size(); ++k) {
    const Figure& x = fa[k].second;
    const Figure& y = fb[k].second;
    if (!x.text && !y.text) continue;
    differs = differs || x.text != y.text;
    auto fmt_num = [](const Figure& f) {
      if (!f.value) return show(f.text);
      return *f.value != std::floor(*f.value) ? fmt::format("{:.4g}", *f.value) : show(f.text);
    };
    o += fmt::format("  {:<28} {:>16} {:>16} {:>9}\n", fa[k].first, fmt_num(x), fmt_num(y),
                     change(x.value, y.value));
  }

  const std::vector<LayerFigures> la = layers_of(a.r), lb = layers_of(b.r);

  // By op type: the sum of the layers' cycles (layers may overlap in time), most cycles first.
  std::map<std::string, std::pair<double, double>> by_op;
  for (const LayerFigures& l : la) by_op[l.op].first += l.cycles;
  for (const LayerFigures& l : lb) by_op[l.op].second += l.cycles;
  std::vector<std::pair<std::string, std::pair<double, double>>> ops(by_op.begin(), by_op.end());
  std::stable_sort(ops.begin(), ops.end(), [](const auto& x, const auto& y) {
    return std::max(x.second.first, x.second.second) > std::max(y.second.first, y.second.second);
  });
  o += fmt::format("\n{:<30} {:>16} {:>16} {:>9}\n", "cycles by op type", "A", "B", "change");
  for (const auto& [op, c] : ops) {
    if (c.first == 0 && c.second == 0) continue;  // fused into other layers in both runs
    o += fmt::format("  {:<28} {:>16} {:>16} {:>9}\n", op.substr(0, 28), c.first, c.second,
                     change(c.first, c.second));
  }

  // Layers, matched by name.
  std::map<std::string, const LayerFigures*> by_name;
  for (const LayerFigures& l : lb) by_name.emplace(l.name, &l);
  struct Pair {
    const LayerFigures* a;
    const LayerFigures* b;
  };
  std::vector<Pair> matched;
  std::vector<std::string> only_a, only_b;
  std::map<std::string, bool> in_a;
  for (const LayerFigures& l : la) {
    in_a[l.name] = true;
    auto it = by_name.find(l.name);
    if (it == by_name.end()) {
      only_a.push_back(l.name);
    } else {
      matched.push_back({&l, it->second});
    }
  }
  for (const LayerFigures& l : lb) {
    if (!in_a.count(l.name)) only_b.push_back(l.name);
  }
  o += fmt::format("\nlayers: {} matched by name, {} only in A, {} only in B\n", matched.size(),
                   only_a.size(), only_b.size());
  for (const std::string& n : only_a) o += "  only in A: " + n + "\n";
  for (const std::string& n : only_b) o += "  only in B: " + n + "\n";
  // Placement or mapping changes, in program order: why a layer's cycles moved (shown with its precision;
  // a precision change alone is the plan's, in the run table).
  std::vector<Pair> moved;
  for (const Pair& p : matched) {
    if (p.a->unit != p.b->unit || p.a->mapping != p.b->mapping) moved.push_back(p);
    differs = differs || p.a->cycles != p.b->cycles;
  }
  differs = differs || !moved.empty() || !only_a.empty() || !only_b.empty();
  o +=
      fmt::format("\nplacement and mapping: {} of {} matched layers changed\n", moved.size(), matched.size());
  if (!moved.empty()) {
    size_t wa_map = 1;
    for (const Pair& p : moved) wa_map = std::max(wa_map, placement_text(*p.a).size());
    o += fmt::format("{:<28} {:<14} {:<{}}  {}\n", "layer", "op", "A", wa_map, "B");
    for (const Pair& p : moved) {
      o += fmt::format("{:<28} {:<14} {:<{}}  {:<{}}  cycles {}\n", p.a->shown, p.a->op.substr(0, 14),
                       placement_text(*p.a), wa_map, placement_text(*p.b), wa_map,
                       change(p.a->cycles, p.b->cycles));
    }
  }
  std::stable_sort(matched.begin(), matched.end(), [](const Pair& x, const Pair& y) {
    return std::fabs(x.b->cycles - x.a->cycles) > std::fabs(y.b->cycles - y.a->cycles);
  });
  if (matched.size() > top) matched.resize(top);
  o += fmt::format(
      "\nlayers that changed most (cycles; --top N|all)\n{:<28} {:<14} {:>12} {:>12} {:>12} {:>9}\n", "layer",
      "op", "A", "B", "B - A", "change");
  for (size_t i = 0; i < matched.size(); ++i) {
    const Pair& p = matched[i];
    o += fmt::format("{:<28} {:<14} {:>12} {:>12} {:>+12} {:>9}\n", p.a->shown, p.a->op.substr(0, 14),
                     p.a->cycles, p.b->cycles, p.b->cycles - p.a->cycles, change(p.a->cycles, p.b->cycles));
  }
  // The verdict first: two reports of the same run would otherwise need every table read to say so.
  return head +
         (differs ? std::string()
                  : "\nthe two reports agree: the same run, configuration, results and layers\n") +
         o;
}

}  // namespace npusim::sim
