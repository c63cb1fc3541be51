#pragma once
// `npusim run|compile --dynamic ... [--requests FILE.csv --shape-policy ...]`: the command-line options
// and the study behind them. Each profile (and, for the request policies, each distinct request shape) is
// compiled and simulated once; the policies (sim/dynamic/policies.h) reuse the figures.
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "isa/machine/config.h"
#include "sim/dynamic/policies.h"
#include "sim/dynamic/profiles.h"
#include "sim/model/model.h"
#include "traces/report.h"

namespace npusim::sim::dynamic {

// --shape-policy's default: every policy.
inline constexpr const char* kDefaultShapePolicy = "all";

// What `npusim run|compile` read from the dynamic-shape options (sim/cli/options/dynamic.cpp declares them).
struct DynamicCliOptions {
  std::vector<std::string> dynamic;  // --dynamic NAME=V1,V2,... (repeatable)
  std::string requests;              // --requests FILE.csv
  // Unset: the default (PolicyOptions); a policy option given without --requests, or for a policy that
  // is not run, is rejected rather than ignored.
  std::optional<std::string> shape_policy;  // default kDefaultShapePolicy
  std::optional<std::string> on_overflow;   // pad
  std::optional<int> program_cache;         // recompile
  std::optional<double> compile_host_factor;
  std::optional<double> compile_ms_per_layer;
  std::optional<double> host_us_per_layer;  // dynamic
  // --generate PROMPT:NEW on the llm: decoder (sim/dynamic/generation.h).
  std::string generate;
  std::optional<std::string> kv_cache;  // static:N | growing (default)
  std::optional<int64_t> kv_bucket;     // growing: default GenerateRequest{}.bucket
  bool active() const { return !dynamic.empty() || !requests.empty(); }
};

// Compiles the model with its dynamic dimensions bound as given (the CLI maps its errors to exit codes).
using ProfileCompiler = std::function<CompiledModel(const DimBinding&)>;

// The profiles compiled, and what they make of the request stream.
struct DynamicStudy {
  std::vector<ProfileRun> profiles;
  DimBinding main;                  // the largest profile: the rest of the report shows it
  CompiledModel main_model;         // its compiled model
  traces::Report main_report;       // and its timing-only simulation (the report reuses it)
  traces::ReportSections sections;  // "profiles", "requests"
  std::string text;                 // the summary's tables
};

// Validates the options (DynamicUsageError), compiles and times every profile and, with --requests, every
// distinct request shape the policies need. Throws arch::SimError (simulation) and OverflowError.
DynamicStudy run_dynamic_study(const DynamicCliOptions& o, const ProfileCompiler& compile,
                               const isa::NpuConfig& config);

// What one compiled shape costs, from its timing-only simulation.
ShapeRun shape_run(const CompiledModel& compiled, const traces::Report& report);

// `--dynamic` parsed and the profiles listed, or a DynamicUsageError.
std::vector<DimBinding> profiles_of(const DynamicCliOptions& o);

// --generate's options checked and parsed (DynamicUsageError): none of them without --generate, and
// --generate not together with --dynamic or --requests.
struct GenerateRequest;
std::optional<GenerateRequest> generate_request(const DynamicCliOptions& o);

// PROG.npu -> PROG.seq128.npu: one program file per profile.
std::string profile_path(const std::string& path, const DimBinding& profile);

}  // namespace npusim::sim::dynamic
