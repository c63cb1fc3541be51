#include "sim/cli/diff.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "isa/layer_names.h"
#include "sim/report/report_file.h"

namespace npusim::sim {
namespace {

// A report as parsed JSON.
struct Loaded {
  std::string path;
  YAML::Node root;
};

Loaded load(const std::string& path) { return Loaded{path, load_report(path)}; }

// The value at a dotted path ("dram.bytes_read"), if the report has it as a scalar.
std::optional<std::string> scalar_at(const YAML::Node& root, const std::string& dotted) {
  YAML::Node n = YAML::Clone(root);
  size_t i = 0;
  while (i <= dotted.size()) {
    const size_t j = std::min(dotted.find('.', i), dotted.size());
    if (!n.IsMap()) return std::nullopt;
    n = n[dotted.substr(i, j - i)];
    if (!n) return std::nullopt;
    i = j + 1;
  }
  if (!n.IsScalar()) return std::nullopt;
  return n.Scalar();
}

std::optional<double> number(const std::optional<std::string>& s) {
  if (!s) return std::nullopt;
  try {
    size_t used = 0;
    const double v = std::stod(*s, &used);
    if (used == s->size()) return v;
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

// "+12.3%", "-4.0%", "same", or "" when it cannot be said.
std::string change(std::optional<double> a, std::optional<double> b) {
  if (!a || !b) return "";
  if (*a == *b) return "same";
  if (*a == 0) return "new";
  return fmt::format("{:+.1f}%", 100.0 * (*b - *a) / std::fabs(*a));
}

std::string show(const std::optional<std::string>& s) { return s ? *s : "-"; }

// Ordered (key, value) pairs of a map node (the recorded parameters).
std::vector<std::pair<std::string, std::string>> entries(const YAML::Node& m) {
  std::vector<std::pair<std::string, std::string>> out;
  if (!m || !m.IsMap()) return out;
  for (const auto& kv : m) out.emplace_back(kv.first.Scalar(), kv.second.IsScalar() ? kv.second.Scalar() : "?");
  return out;
}

struct LayerFigures {
  std::string name, op;
  std::string shown;  // the display name (isa::display_names over the report's layers)
  double cycles = 0;
};

std::vector<LayerFigures> layers_of(const YAML::Node& root) {
  std::vector<LayerFigures> out;
  for (const auto& l : root["layers"]) {
    LayerFigures f;
    f.name = l["name"] ? l["name"].Scalar() : "";
    f.op = l["op"] ? l["op"].Scalar() : "";
    f.cycles = number(l["cycles"] ? std::optional<std::string>(l["cycles"].Scalar()) : std::nullopt).value_or(0);
    out.push_back(f);
  }
  std::vector<std::string> names;
  for (const LayerFigures& f : out) names.push_back(f.name);
  names = isa::display_names(names);
  for (size_t i = 0; i < out.size(); ++i) out[i].shown = names[i];
  return out;
}

}  // namespace

std::string diff_reports(const std::string& a_path, const std::string& b_path, size_t top) {
  const Loaded a = load(a_path);
  const Loaded b = load(b_path);
  std::string o = fmt::format("A: {}\nB: {}\n", a.path, b.path);

  // What was run.
  auto what = [&](const std::string& key) {
    const std::optional<std::string> x = scalar_at(a.root, key), y = scalar_at(b.root, key);
    return std::make_pair(x, y);
  };
  // A's column as wide as its longest value (a model path can be longer than the 24 columns).
  std::vector<std::tuple<std::string, std::optional<std::string>, std::optional<std::string>>> run_rows;
  auto line = [&](const std::string& label, const std::optional<std::string>& x,
                  const std::optional<std::string>& y) { run_rows.emplace_back(label, x, y); };
  o += "\nrun\n";
  for (const char* key : {"run.model", "run.model_sha256", "run.config", "run.version", "precision.plan"}) {
    auto [x, y] = what(key);
    const std::string k = key;
    if (k == "run.model_sha256") {  // 16 hex digits tell files apart on a line
      if (x) x = x->substr(0, 16);
      if (y) y = y->substr(0, 16);
    }
    if (k == "run.config") {
      if (x && x->empty()) x = "edge (built-in)";
      if (y && y->empty()) y = "edge (built-in)";
    }
    line("  " + (k.rfind("run.", 0) == 0 ? k.substr(4) : k), x, y);
  }
  size_t wa = 24, wb = 24;
  for (const auto& [label, x, y] : run_rows) {
    wa = std::max(wa, show(x).size());
    wb = std::max(wb, show(y).size());
  }
  for (const auto& [label, x, y] : run_rows) {
    if (x == y) {
      o += fmt::format("{:<30} {:<{}} {}\n", label, show(x), wa, show(y));
    } else {
      o += fmt::format("{:<30} {:<{}} {:<{}}  <- differs\n", label, show(x), wa, show(y), wb);
    }
  }

  // Configuration: every parameter either report records.
  const auto pa = entries(a.root["run"] ? a.root["run"]["parameters"] : YAML::Node());
  const auto pb = entries(b.root["run"] ? b.root["run"]["parameters"] : YAML::Node());
  if (pa.empty() || pb.empty()) {
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
    o += fmt::format("\nconfiguration: {} of {} parameters differ\n", rows.size(), std::max(pa.size(), pb.size()));
    for (const std::string& r : rows) o += r;
  }

  // The run's figures.
  o += fmt::format("\n{:<30} {:>16} {:>16} {:>9}\n", "results", "A", "B", "change");
  for (const char* key : {"total_cycles", "latency_ms", "macs", "precision.peak_macs_per_cycle", "precision.utilization",
                          "array_utilization", "bound_cycles", "efficiency", "breakdown.compute", "breakdown.memory",
                          "breakdown.scheduling", "breakdown.host", "dram.bytes_read", "dram.bytes_written",
                          "dram.avg_bandwidth_gbps", "host.calls", "energy.total_mj", "energy.average_power_w",
                          "energy.peak_power_w", "energy.tops_per_w", "area.total_mm2", "sim.instructions"}) {
    const auto [x, y] = what(key);
    if (!x && !y) continue;
    const std::optional<double> nx = number(x), ny = number(y);
    auto fmt_num = [](const std::optional<std::string>& s, const std::optional<double>& n) {
      if (!n) return show(s);
      return *n != std::floor(*n) ? fmt::format("{:.4g}", *n) : show(s);
    };
    o += fmt::format("  {:<28} {:>16} {:>16} {:>9}\n", key, fmt_num(x, nx), fmt_num(y, ny), change(nx, ny));
  }

  const std::vector<LayerFigures> la = layers_of(a.root), lb = layers_of(b.root);

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
  o += fmt::format("\nlayers: {} matched by name, {} only in A, {} only in B\n", matched.size(), only_a.size(),
                   only_b.size());
  for (const std::string& n : only_a) o += "  only in A: " + n + "\n";
  for (const std::string& n : only_b) o += "  only in B: " + n + "\n";
  std::stable_sort(matched.begin(), matched.end(), [](const Pair& x, const Pair& y) {
    return std::fabs(x.b->cycles - x.a->cycles) > std::fabs(y.b->cycles - y.a->cycles);
  });
  if (matched.size() > top) matched.resize(top);
  o += fmt::format("\nlayers that changed most (cycles; --top N|all)\n{:<28} {:<14} {:>12} {:>12} {:>12} {:>9}\n",
                   "layer", "op", "A", "B", "B - A", "change");
  for (size_t i = 0; i < matched.size(); ++i) {
    const Pair& p = matched[i];
    o += fmt::format("{:<28} {:<14} {:>12} {:>12} {:>+12} {:>9}\n", p.a->shown, p.a->op.substr(0, 14), p.a->cycles,
                     p.b->cycles, p.b->cycles - p.a->cycles, change(p.a->cycles, p.b->cycles));
  }
  return o;
}

}  // namespace npusim::sim
