#include "sim/sweep/report_figures.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <stdexcept>
#include <string_view>

#include "sim/report/report_reader.h"

namespace npusim::sim {
namespace {

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

using Figure = std::optional<std::string>;

Figure integer(uint64_t v) { return std::to_string(v); }
Figure real(double v) { return tidy_number(fmt::format("{}", v)); }
// The field at `path` of the report's declaration, as the table shows it (numbers tidied).
Figure declared(const PointReport& p, const char* path) {
  const auto it = p.figures.find(path);
  if (it == p.figures.end()) return std::nullopt;
  return it->second.kind == traces::ReportFigure::Kind::kReal ? tidy_number(it->second.text)
                                                              : it->second.text;
}
// A figure of a section written outside the simulator's typed report (`e2e` by sim/e2e, `multicore` by
// sim/multicore, a scenario's report by npusim serve): its JSON text at the path `keys`.
Figure json_figure(const YAML::Node& root, std::initializer_list<const char*> keys) {
  YAML::Node n = root;
  for (const char* k : keys) {
    if (!n || !n.IsMap()) return std::nullopt;
    n.reset(n[k]);
  }
  if (n && n.IsScalar()) return tidy_number(n.Scalar());
  return std::nullopt;
}

// A figure of the report's `requests` section (sim/dynamic, docs/dynamic.md) at the path `keys` under its
// policy: a sweep point serves one policy (the sweep file's shape_policy), so the section has one.
Figure request_figure(const YAML::Node& root, std::initializer_list<const char*> keys) {
  const YAML::Node policies = root["requests"] ? root["requests"]["policies"] : YAML::Node();
  if (!policies || !policies.IsSequence() || policies.size() != 1) return std::nullopt;
  return json_figure(policies[0], keys);
}

// The largest (max) or the sum of a scenario report's models' `field` (a model without requests has null
// latencies: left out).
Figure over_models(const YAML::Node& root, const char* field, bool max) {
  const YAML::Node l = root["models"];
  if (!l || !l.IsSequence()) return std::nullopt;
  double acc = 0;
  bool any = false;
  for (const auto& model : l) {
    const YAML::Node v = model[field];
    if (!v || !v.IsScalar() || v.Scalar() == "null") continue;
    const double x = v.as<double>();
    acc = !any ? x : max ? std::max(acc, x) : acc + x;
    any = true;
  }
  return any ? real(acc) : std::nullopt;
}

const std::vector<MetricColumn>& metric_columns() {
  using P = const PointReport&;
  static const std::vector<MetricColumn> kColumns = {
      {"total_cycles", "total_cycles"},
      {"latency_ms", "latency_ms"},
      {"frequency_mhz", "frequency_mhz"},
      {"macs", "macs"},
      {"array_utilization", "array_utilization"},
      {"precision_plan", "precision.plan"},
      {"plan_utilization", "precision.utilization"},
      {"bound_cycles", "bound_cycles"},
      {"unfused_bound_ratio", "unfused_bound_ratio"},
      {"compiled_bound_cycles", "compiled_bound_cycles"},
      {"compiled_efficiency", "compiled_efficiency"},
      {"model_limit_cycles", "model_limit_cycles"},
      {"model_efficiency", "model_efficiency"},
      {"limit_array_cycles", "model_limit.array_cycles"},
      {"limit_vector_cycles", "model_limit.vector_cycles"},
      {"limit_dram_cycles", "model_limit.dram_cycles"},
      {"limit_array_fold_cycles", "model_limit.array_fold_cycles"},
      {"compute_cycles", "breakdown.compute"},
      {"memory_cycles", "breakdown.memory"},
      {"scheduling_cycles", "breakdown.scheduling"},
      {"host_cycles", "breakdown.host"},
      // The matrix unit's own cycles (fill and drain included), summed over the layers.
      {"matrix_cycles", nullptr,
       [](P p) {
         uint64_t sum = 0;
         for (const traces::LayerReport& l : p.report.layers) sum += l.compute_cycles;
         return integer(sum);
       }},
      {"dram_bytes_read", "dram.bytes_read"},
      {"dram_bytes_written", "dram.bytes_written"},
      {"dram_bandwidth_gbps", "dram.avg_bandwidth_gbps"},
      // The largest scratchpad footprint the compiler gave any layer (layers[].mapping.sram_bytes, its
      // slots in the input, weight and accumulator scratchpads together): the SRAM the program needs at
      // its peak.
      {"sram_peak_bytes", nullptr,
       [](P p) -> Figure {
         std::optional<int64_t> peak;
         for (const traces::LayerReport& l : p.report.layers)
           if (l.mapping) peak = std::max(peak.value_or(0), l.mapping->sram_bytes());
         return peak ? integer(static_cast<uint64_t>(*peak)) : std::nullopt;
       }},
      {"energy_mj", "energy.total_mj"},
      {"average_power_w", "energy.average_power_w"},
      {"peak_power_w", "energy.peak_power_w"},
      {"tops_per_w", "energy.tops_per_w"},
      // Energy-delay product: energy per inference x latency, in mJ x ms.
      {"energy_delay_mj_ms", nullptr,
       [](P p) {
         return p.report.energy ? real(p.report.energy->by_component.total() * p.report.latency_ms)
                                : std::nullopt;
       }},
      {"area_mm2", "area.total_mm2"},
      {"instructions", "sim.instructions"},
      // The program's layers: the model's nodes fused into them (placement "fused") are not layers.
      {"layers", nullptr,
       [](P p) {
         uint64_t n = 0;
         for (const traces::LayerReport& l : p.report.layers) n += l.fused() ? 0 : 1;
         return integer(n);
       }},
      // With `run_args: [--pipeline, PIPE.yaml]` (docs/e2e.md); empty otherwise.
      {"e2e_latency_ms", nullptr,
       [](P p) {
         return json_figure(p.json, {"e2e", "latency_ms"});
       }},
      {"e2e_npu_share", nullptr,
       [](P p) {
         return json_figure(p.json, {"e2e", "npu_share"});
       }},
      {"stream_throughput_fps", nullptr,
       [](P p) {
         return json_figure(p.json, {"e2e", "stream", "throughput_fps"});
       }},
      {"stream_latency_p99_ms", nullptr,
       [](P p) {
         return json_figure(p.json, {"e2e", "stream", "latency_p99_ms"});
       }},
      // With `run_args: [--split, batch]` (or layers) on a multi-core config (docs/multicore.md).
      {"multicore_latency_ms", nullptr,
       [](P p) {
         return json_figure(p.json, {"multicore", "latency_ms"});
       }},
      {"multicore_throughput_per_s", nullptr,
       [](P p) {
         return json_figure(p.json, {"multicore", "throughput_per_s"});
       }},
      {"multicore_speedup", nullptr,
       [](P p) {
         return json_figure(p.json, {"multicore", "speedup"});
       }},
      // With a `generate` axis (or --generate): the report's `generation` section (docs/dynamic.md). Time per
      // output token is the mean decode step (the first token is the prefill's: ttft_ms).
      {"ttft_ms", nullptr,
       [](P p) {
         return json_figure(p.json, {"generation", "ttft_ms"});
       }},
      {"tpot_ms", nullptr,
       [](P p) {
         return json_figure(p.json, {"generation", "decode_ms", "mean"});
       }},
      {"tokens_per_s", nullptr,
       [](P p) {
         return json_figure(p.json, {"generation", "tokens_per_s"});
       }},
      // With a `requests` axis (or --requests) and one shape policy per point: the report's `requests`.
      {"request_latency_p50_ms", nullptr,
       [](P p) {
         return request_figure(p.json, {"latency_ms", "p50"});
       }},
      {"request_latency_p95_ms", nullptr,
       [](P p) {
         return request_figure(p.json, {"latency_ms", "p95"});
       }},
      {"request_latency_p99_ms", nullptr,
       [](P p) {
         return request_figure(p.json, {"latency_ms", "p99"});
       }},
      {"request_latency_mean_ms", nullptr,
       [](P p) {
         return request_figure(p.json, {"latency_ms", "mean"});
       }},
      {"request_throughput_rps", nullptr, [](P p) { return request_figure(p.json, {"throughput_rps"}); }},
      {"padding_share", nullptr, [](P p) { return request_figure(p.json, {"padding_share"}); }},
      {"compile_events", nullptr, [](P p) { return request_figure(p.json, {"compile_events"}); }},
      // A scenario sweep's points (`scenario: FILE`, npusim serve; docs/scenarios.md): over its models.
      {"serve_npu_busy", nullptr, [](P p) { return json_figure(p.json, {"npu_busy"}); }},
      {"serve_latency_p99_ms", nullptr, [](P p) { return over_models(p.json, "latency_p99_ms", true); }},
      {"serve_throughput_per_s", nullptr, [](P p) { return over_models(p.json, "throughput_per_s", false); }},
      {"serve_deadline_misses", nullptr, [](P p) { return over_models(p.json, "deadline_misses", false); }},
      {"serve_weight_reloads", nullptr, [](P p) { return over_models(p.json, "weight_reloads", false); }},
  };
  return kColumns;
}

std::map<std::string, std::string> read_metrics(const std::string& report_path) {
  PointReport p;
  try {
    p.json = YAML::LoadFile(report_path);
  } catch (const YAML::Exception& e) {
    throw std::runtime_error("the report " + report_path + " is unreadable: " + e.msg);
  }
  // A scenario's report (npusim serve) has only the serve_* figures.
  const bool serve = p.json.IsMap() && p.json["span_cycles"] && p.json["models"];
  if (!p.json.IsMap() || (!p.json["total_cycles"] && !serve))
    throw std::runtime_error("the report " + report_path + " has no total_cycles");
  try {
    if (!serve) p.report = read_report(p.json);
  } catch (const std::exception& e) {
    throw std::runtime_error("the report " + report_path + " is unreadable: " + e.what());
  }
  if (!serve) p.figures = traces::report_figures(p.report);
  std::map<std::string, std::string> m;
  for (const MetricColumn& c : metric_columns()) {
    if (serve != (std::string_view(c.column).rfind("serve_", 0) == 0)) continue;
    if (Figure f = c.path ? declared(p, c.path) : c.figure(p)) m[c.column] = std::move(*f);
  }
  return m;
}

}  // namespace npusim::sim
