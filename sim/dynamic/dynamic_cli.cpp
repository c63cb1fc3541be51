#include "sim/dynamic/dynamic_cli.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "arch/simulate.h"
#include "isa/program.h"
#include "sim/dynamic/generation.h"
#include "sim/dynamic/requests.h"

namespace npusim::sim::dynamic {

std::optional<GenerateRequest> generate_request(const DynamicCliOptions& o) {
  if (o.generate.empty()) {
    if (o.kv_cache) throw DynamicUsageError("--kv-cache applies to --generate");
    if (o.kv_bucket) throw DynamicUsageError("--kv-bucket applies to --generate");
    return std::nullopt;
  }
  if (o.active()) throw DynamicUsageError("--generate does not combine with --dynamic or --requests");
  if (o.kv_bucket && o.kv_cache && *o.kv_cache != "growing")
    throw DynamicUsageError("--kv-bucket applies to --kv-cache growing");
  return parse_generate(o.generate, o.kv_cache.value_or("growing"),
                        o.kv_bucket.value_or(GenerateRequest{}.bucket));
}

std::vector<DimBinding> profiles_of(const DynamicCliOptions& o) {
  return profile_bindings(parse_dynamic_specs(o.dynamic));
}

std::string profile_path(const std::string& path, const DimBinding& profile) {
  std::string tag;
  for (const auto& [name, v] : profile) tag += fmt::format(".{}{}", name, v);
  const size_t slash = path.find_last_of('/');
  const size_t dot = path.find_last_of('.');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) return path + tag;
  return path.substr(0, dot) + tag + path.substr(dot);
}

ShapeRun shape_run(const CompiledModel& compiled, const traces::Report& report) {
  ShapeRun s;
  s.total_cycles = report.total_cycles;
  s.latency_ms = report.latency_ms;
  s.macs = report.macs;
  for (const traces::LayerReport& l : report.layers) {
    if (l.fused()) continue;
    s.serial_cycles += l.cycles;
    ++s.layers;
  }
  s.compile_seconds = compiled.result.compile_seconds;
  // The program as deployed without its data segments: the weights are stored once for every profile.
  const isa::Program& p = compiled.result.program;
  isa::Program code;
  code.machine = p.machine;
  code.layers = p.layers;
  code.instructions = p.instructions;
  code.host_ops = p.host_ops;
  code.tensors = p.tensors;
  s.program_bytes = isa::serialize(code).size();
  s.workspace_bytes = compiled.result.memory.activation_bytes;
  s.weight_bytes = compiled.result.memory.weight_bytes;
  return s;
}

DynamicStudy run_dynamic_study(const DynamicCliOptions& o, const ProfileCompiler& compile,
                               const isa::NpuConfig& config) {
  if (o.dynamic.empty()) throw DynamicUsageError("--requests needs profiles: --dynamic NAME=V1,V2,...");
  const std::vector<DimValues> dims = parse_dynamic_specs(o.dynamic);
  const std::vector<DimBinding> profiles = profile_bindings(dims);
  const std::vector<Policy> policies = parse_policies(o.shape_policy.value_or(kDefaultShapePolicy));
  const auto serves = [&](Policy p) {
    return std::find(policies.begin(), policies.end(), p) != policies.end();
  };
  // An option that would change nothing is an error, not a silent no-op.
  for (const auto& [given, option, policy] :
       {std::tuple{o.shape_policy.has_value(), "--shape-policy", std::optional<Policy>{}},
        std::tuple{o.on_overflow.has_value(), "--on-overflow", std::optional{Policy::kPad}},
        std::tuple{o.program_cache.has_value(), "--program-cache", std::optional{Policy::kRecompile}},
        std::tuple{o.compile_host_factor.has_value(), "--compile-host-factor",
                   std::optional{Policy::kRecompile}},
        std::tuple{o.compile_ms_per_layer.has_value(), "--compile-ms-per-layer",
                   std::optional{Policy::kRecompile}},
        std::tuple{o.host_us_per_layer.has_value(), "--host-us-per-layer",
                   std::optional{Policy::kDynamic}}}) {
    if (!given) continue;
    if (o.requests.empty())
      throw DynamicUsageError(fmt::format("{} applies to a request stream: add --requests FILE.csv", option));
    if (policy && !serves(*policy))
      throw DynamicUsageError(fmt::format("{} applies to --shape-policy {} (or all), not {}", option,
                                          to_string(*policy), *o.shape_policy));
  }
  PolicyOptions popt;
  if (o.on_overflow) popt.overflow = parse_overflow(*o.on_overflow);
  if (o.program_cache) {
    if (*o.program_cache < 1) throw DynamicUsageError("--program-cache must be at least 1");
    popt.program_cache = static_cast<size_t>(*o.program_cache);
  }
  if (o.compile_host_factor) {
    if (!(*o.compile_host_factor >= 0)) throw DynamicUsageError("--compile-host-factor must not be negative");
    if (o.compile_ms_per_layer)
      throw DynamicUsageError(
          "--compile-host-factor scales the measured compile time, which --compile-ms-per-layer replaces: "
          "give one");
    popt.compile_host_factor = *o.compile_host_factor;
  }
  if (o.compile_ms_per_layer && !(*o.compile_ms_per_layer >= 0))
    throw DynamicUsageError("--compile-ms-per-layer must not be negative");
  popt.compile_ms_per_layer = o.compile_ms_per_layer;
  if (o.host_us_per_layer) {
    if (!(*o.host_us_per_layer >= 0)) throw DynamicUsageError("--host-us-per-layer must not be negative");
    popt.host_us_per_layer = *o.host_us_per_layer;
  }
  std::vector<std::string> names;
  for (const DimValues& d : dims) names.push_back(d.name);
  // Read before anything is compiled: a bad row fails in a moment, not after minutes of compiling.
  // Shared with the report's `requests` section, whose outcomes point into it.
  const auto requests = std::make_shared<const std::vector<Request>>(
      o.requests.empty() ? std::vector<Request>{} : read_requests(o.requests, names));

  DynamicStudy study;
  study.main = profiles.back();
  std::map<DimBinding, ShapeRun> runs;
  for (const DimBinding& p : profiles) {
    CompiledModel cm = compile(p);
    traces::Report report = arch::simulate(cm.result.program, config, {});
    const ShapeRun& run = runs.emplace(p, shape_run(cm, report)).first->second;
    study.profiles.push_back({p, run});
    if (p == study.main) {
      study.main_model = std::move(cm);
      study.main_report = std::move(report);
    }
  }
  study.sections.push_back(traces::make_section("profiles", ProfilesSection{study.profiles, study.main}));
  study.text = profiles_text(study.profiles, study.main);
  if (requests->empty()) return study;

  const ShapeCost cost = [&](const DimBinding& shape) -> const ShapeRun& {
    auto it = runs.find(shape);
    if (it == runs.end()) {
      const CompiledModel cm = compile(shape);
      it = runs.emplace(shape, shape_run(cm, arch::simulate(cm.result.program, config, {}))).first;
    }
    return it->second;
  };
  std::vector<PolicyResult> results;
  for (Policy p : policies)
    results.push_back(simulate_policy(p, *requests, profiles, cost, popt, o.requests));
  study.sections.push_back(
      traces::make_section("requests", RequestsSection{o.requests, results, popt, runs.size(), requests}));
  study.text += requests_text(o.requests, results);
  return study;
}

}  // namespace npusim::sim::dynamic
