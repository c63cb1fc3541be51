#include "sim/sweep/report_figures.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>

namespace npusim::sim {
namespace {

YAML::Node at_path(const YAML::Node& root, const std::string& path) {
  YAML::Node n = root;
  size_t from = 0;
  while (from <= path.size()) {
    const size_t dot = path.find('.', from);
    const std::string part = path.substr(from, dot == std::string::npos ? std::string::npos : dot - from);
    if (!n.IsMap()) return YAML::Node();
    const YAML::Node child = n[part];
    if (!child) return YAML::Node();
    n.reset(child);
    if (dot == std::string::npos) break;
    from = dot + 1;
  }
  return n;
}

// A figure as the results table shows it: integers as they are, other numbers to 10 significant digits
// (82.708653, not the 82.70865300000001 of the report's shortest round-trip form); text unchanged.
std::string tidy_number(const std::string& s) {
  if (s.find_first_of(".eE") == std::string::npos) return s;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size()) return s;
  return fmt::format("{:.10g}", v);
}

}  // namespace

const std::vector<MetricColumn>& metric_columns() {
  static const std::vector<MetricColumn> kColumns = {
      {"total_cycles", "total_cycles"},
      {"latency_ms", "latency_ms"},
      {"frequency_mhz", "frequency_mhz"},
      {"macs", "macs"},
      {"array_utilization", "array_utilization"},
      {"precision_plan", "precision.plan"},
      {"plan_utilization", "precision.utilization"},
      {"bound_cycles", "bound_cycles"},
      {"efficiency", "efficiency"},
      {"compute_cycles", "breakdown.compute"},
      {"memory_cycles", "breakdown.memory"},
      {"scheduling_cycles", "breakdown.scheduling"},
      {"host_cycles", "breakdown.host"},
      {"matrix_cycles", "#sum:layers.compute_cycles"},
      {"dram_bytes_read", "dram.bytes_read"},
      {"dram_bytes_written", "dram.bytes_written"},
      {"dram_bandwidth_gbps", "dram.avg_bandwidth_gbps"},
      {"sram_peak_bytes", "#peak_sram"},
      {"energy_mj", "energy.total_mj"},
      {"average_power_w", "energy.average_power_w"},
      {"peak_power_w", "energy.peak_power_w"},
      {"tops_per_w", "energy.tops_per_w"},
      {"energy_delay_mj_ms", "#energy_delay"},
      {"area_mm2", "area.total_mm2"},
      {"instructions", "sim.instructions"},
      {"layers", "#layers"},
      // With `run_args: [--pipeline, PIPE.yaml]` (docs/e2e.md); empty otherwise.
      {"e2e_latency_ms", "e2e.latency_ms"},
      {"e2e_npu_share", "e2e.npu_share"},
      {"stream_throughput_fps", "e2e.stream.throughput_fps"},
      {"stream_latency_p99_ms", "e2e.stream.latency_p99_ms"},
      // With `run_args: [--split, batch]` (or layers) on a multi-core config (docs/multicore.md).
      {"multicore_latency_ms", "multicore.latency_ms"},
      {"multicore_throughput_per_s", "multicore.throughput_per_s"},
      {"multicore_speedup", "multicore.speedup"},
      // A scenario sweep's points (`scenario: FILE`, npusim serve; docs/scenarios.md): over its models.
      {"serve_npu_busy", "npu_busy"},
      {"serve_latency_p99_ms", "#max:models.latency_p99_ms"},
      {"serve_throughput_per_s", "#sum:models.throughput_per_s"},
      {"serve_deadline_misses", "#sum:models.deadline_misses"},
      {"serve_weight_reloads", "#sum:models.weight_reloads"},
  };
  return kColumns;
}

std::map<std::string, std::string> read_metrics(const std::string& report_path) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(report_path);
  } catch (const YAML::Exception& e) {
    throw std::runtime_error("the report " + report_path + " is unreadable: " + e.msg);
  }
  const bool serve = root.IsMap() && root["span_cycles"] && root["models"];
  if (!root.IsMap() || (!root["total_cycles"] && !serve))
    throw std::runtime_error("the report " + report_path + " has no total_cycles");
  std::map<std::string, std::string> m;
  for (const MetricColumn& c : metric_columns()) {
    const std::string path = c.path;
    if (path.rfind("#max:models.", 0) == 0 || path.rfind("#sum:models.", 0) == 0) {
      // Over the scenario's models (a model without requests has null latencies: left out).
      const std::string field = path.substr(12);
      const YAML::Node l = root["models"];
      if (!l || !l.IsSequence()) continue;
      double acc = 0;
      bool any = false;
      for (const auto& model : l) {
        const YAML::Node v = model[field];
        if (!v || !v.IsScalar() || v.Scalar() == "null") continue;
        const double x = v.as<double>();
        acc = !any ? x : path[1] == 'm' ? std::max(acc, x) : acc + x;
        any = true;
      }
      if (any) m[c.column] = tidy_number(fmt::format("{}", acc));
      continue;
    }
    if (std::string(c.path) == "#layers") {
      // The program's layers: the model's nodes fused into them (placement "fused") are not layers.
      const YAML::Node l = root["layers"];
      if (!l || !l.IsSequence()) continue;
      size_t n = 0;
      for (const auto& layer : l) n += !(layer["placement"] && layer["placement"].Scalar() == "fused");
      m[c.column] = std::to_string(n);
      continue;
    }
    if (std::string(c.path) == "#sum:layers.compute_cycles") {
      // The matrix unit's own cycles (fill and drain included), summed over the layers.
      const YAML::Node l = root["layers"];
      if (!l || !l.IsSequence()) continue;
      uint64_t sum = 0;
      for (const auto& layer : l)
        if (layer["compute_cycles"]) sum += layer["compute_cycles"].as<uint64_t>();
      m[c.column] = std::to_string(sum);
      continue;
    }
    if (std::string(c.path) == "#peak_sram") {
      // The largest scratchpad footprint the compiler gave any layer (layers[].mapping.sram_bytes, its
      // slots in the input, weight and accumulator scratchpads together): the SRAM the program needs at
      // its peak.
      const YAML::Node l = root["layers"];
      if (!l || !l.IsSequence()) continue;
      uint64_t peak = 0;
      bool any = false;
      for (const auto& layer : l) {
        const YAML::Node b = at_path(layer, "mapping.sram_bytes");
        if (!b || !b.IsMap()) continue;
        uint64_t sum = 0;
        for (const auto& kv : b) sum += kv.second.as<uint64_t>();
        peak = std::max(peak, sum);
        any = true;
      }
      if (any) m[c.column] = std::to_string(peak);
      continue;
    }
    if (std::string(c.path) == "#energy_delay") {
      // Energy-delay product: energy per inference x latency, in mJ x ms.
      const YAML::Node e = at_path(root, "energy.total_mj"), t = root["latency_ms"];
      if (e && e.IsScalar() && t && t.IsScalar())
        m[c.column] = tidy_number(fmt::format("{}", e.as<double>() * t.as<double>()));
      continue;
    }
    const YAML::Node n = at_path(root, c.path);
    if (n && n.IsScalar()) m[c.column] = tidy_number(n.Scalar());
  }
  return m;
}

}  // namespace npusim::sim
