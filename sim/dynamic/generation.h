#pragma once
// `npusim run llm:... --generate PROMPT:NEW`: a prefill over the prompt, then one decode step per further
// token over a growing KV cache, as a static NPU runs a decoder: one program for the prefill and one per
// KV bucket for the decode steps (not one per token). Each program is compiled and simulated once.
//
//   --kv-cache growing (default)  a decode step over L cached positions runs the program compiled for
//                                 L rounded up to a multiple of --kv-bucket B (default 128), the padded
//                                 positions masked
//   --kv-cache static:N           every decode step runs the program with capacity N (past N-1, masked):
//                                 what a static NPU graph with a fixed KV capacity does
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "compiler/import/import.h"
#include "isa/machine/config.h"
#include "sim/dynamic/generate_request.h"
#include "sim/dynamic/profiles.h"
#include "sim/model/model.h"
#include "traces/report_visitor.h"

namespace npusim::sim::dynamic {

// Compiles a model spec (the CLI maps its errors to exit codes).
using SpecCompiler = std::function<CompiledModel(const std::string& spec)>;

// The report's `generation` section (docs/dynamic.md), field by field (traces/report_visitor.h).
struct GenerationSection {
  int64_t prompt = 0, new_tokens = 0;
  std::string kv_cache;              // "growing" or "static:N"
  std::optional<int64_t> kv_bucket;  // growing only
  double ttft_ms = 0;
  double decode_first_ms = 0, decode_mean_ms = 0, decode_last_ms = 0, decode_total_ms = 0;
  double tokens_per_s = 0, decode_tokens_per_s = 0;
  uint64_t kv_cache_bytes = 0, kv_cache_capacity_bytes = 0;
  std::string kv_cache_placement = "dram";
  uint64_t weight_bytes = 0;
  double weight_streaming_share = 0;
  // Decode steps simulated (the first on each program) and reusing their program's timing: every
  // simulation starts from an idle machine, so a program's timing is the same for each of its steps.
  int64_t steps_simulated = 0, steps_reused = 0;
  struct Program {
    int64_t past = 0;  // 0: the prefill
    int64_t seq = 0;
    uint64_t total_cycles = 0;
    double latency_ms = 0;
  };
  std::vector<Program> programs;  // each compiled program, by past
  struct StepFigures {
    int64_t token = 0, past = 0, program_past = 0;
    double latency_ms = 0;
  };
  std::vector<StepFigures> steps;  // each decode step
  void visit(traces::ReportVisitor& v);
};

struct GenerationStudy {
  CompiledModel prefill;          // the rest of the report shows it
  traces::Report prefill_report;  // its timing-only simulation (the report reuses it)
  GenerationSection section;      // the report's `generation` section
  std::string text;               // the summary's lines
};

// `model` must be an llm: spec without seq/past. Throws DynamicUsageError, compiler::ModelError and
// arch::SimError.
GenerationStudy run_generation(const std::string& model, const GenerateRequest& g,
                               const SpecCompiler& compile, const isa::NpuConfig& config);

}  // namespace npusim::sim::dynamic
