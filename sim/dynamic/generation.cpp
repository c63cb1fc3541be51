#include "sim/dynamic/generation.h"

#include <fmt/format.h>

#include <map>

#include "arch/simulate.h"
#include "isa/ceil_div.h"
#include "isa/json_text.h"
#include "sim/dynamic/policies.h"

namespace npusim::sim::dynamic {
namespace {

// One compiled decoder shape, simulated once.
struct Step {
  traces::Report report;
  uint64_t weight_bytes = 0;
  uint64_t kv_bytes_per_position = 0;  // K and V of every layer, one position, as the program stores them
};

}  // namespace

void GenerationSection::visit(traces::ReportVisitor& v) {
  v.integer({"prompt", "tokens", "the prompt's length"}, prompt);
  v.integer({"new_tokens", "tokens", "tokens generated"}, new_tokens);
  v.text({"kv_cache", "", "growing or static:N"}, kv_cache);
  if (kv_bucket) {
    v.integer({"kv_bucket", "positions", "growing: decode programs are compiled for a multiple of it"},
              *kv_bucket);
  } else {
    v.null({"kv_bucket", "positions", "growing: decode programs are compiled for a multiple of it"});
  }
  v.real({"ttft_ms", "ms", "time to first token: the prefill"}, ttft_ms);
  v.object({"decode_ms", "ms", "the decode steps' latencies"}, [&] {
    v.real({"first", "ms", "the first step"}, decode_first_ms);
    v.real({"mean", "ms", "the mean step"}, decode_mean_ms);
    v.real({"last", "ms", "the last step"}, decode_last_ms);
    v.real({"total", "ms", "all steps"}, decode_total_ms);
  });
  v.real({"tokens_per_s", "tokens/s", "new tokens / (ttft + decode)"}, tokens_per_s);
  v.real({"decode_tokens_per_s", "tokens/s", "decode steps / decode time"}, decode_tokens_per_s);
  v.integer({"kv_cache_bytes", "bytes", "the KV cache at the end"}, kv_cache_bytes);
  v.integer({"kv_cache_capacity_bytes", "bytes", "the KV cache allocated"}, kv_cache_capacity_bytes);
  v.text({"kv_cache_placement", "", "where the KV cache lives"}, kv_cache_placement);
  v.integer({"weight_bytes", "bytes", "the decoder's weights"}, weight_bytes);
  v.real({"weight_streaming_share", "", "of decode time, streaming weights"}, weight_streaming_share);
  v.integer({"steps_simulated", "steps", "decode steps simulated: the first on each program"},
            steps_simulated);
  v.integer({"steps_reused", "steps", "decode steps that take their program's simulated timing"},
            steps_reused);
  v.list({"programs", "", "each compiled program"}, programs, [&](Program& p, size_t) {
    v.object({"", "", "a program"}, [&] {
      if (!v.fills()) v.derived({"kind", "", "prefill or decode"}, p.past == 0 ? "prefill" : "decode");
      v.integer({"seq", "tokens", "positions it computes"}, p.seq);
      v.integer({"past", "positions", "the KV length it was compiled for"}, p.past);
      v.integer({"total_cycles", "cycles", "its simulated cycles"}, p.total_cycles);
      v.real({"latency_ms", "ms", "its latency"}, p.latency_ms);
    });
  });
  v.list({"steps", "", "each decode step"}, steps, [&](StepFigures& s, size_t) {
    v.object({"", "", "a step"}, [&] {
      v.integer({"token", "", "the token it produces (1: the prefill's)"}, s.token);
      v.integer({"past", "positions", "positions cached before it"}, s.past);
      v.integer({"program_past", "positions", "the KV length of the program it ran"}, s.program_past);
      v.real({"latency_ms", "ms", "its latency"}, s.latency_ms);
    });
  });
}

GenerationStudy run_generation(const std::string& model, const GenerateRequest& g,
                               const SpecCompiler& compile, const isa::NpuConfig& config) {
  if (model.rfind("llm:", 0) != 0)
    throw DynamicUsageError(
        "--generate runs the built-in decoder llm:layers=..,hidden=..,heads=..,kv_heads=..,ffn=..,vocab=..");
  compiler::LlmSpec spec = compiler::parse_llm_spec(model);
  if (spec.seq != 1 || spec.past != 0)
    throw DynamicUsageError("--generate sets seq and past itself; leave them out of the llm: spec");
  std::map<int64_t, Step> steps;  // by past length (0: the prefill)
  GenerationStudy study;
  auto run = [&](int64_t seq, int64_t past) -> const Step& {
    auto it = steps.find(past);
    if (it != steps.end()) return it->second;
    compiler::LlmSpec s = spec;
    s.seq = seq;
    s.past = past;
    CompiledModel cm = compile(compiler::llm_spec_text(s));
    Step st;
    st.report = arch::simulate(cm.result.program, config, {});
    st.weight_bytes = cm.result.memory.weight_bytes;
    for (const isa::TensorBinding& b : cm.result.program.tensors) {
      if (b.role != isa::TensorBinding::Role::kOutput || b.name.rfind("llm.present_", 0) != 0) continue;
      const uint64_t positions = b.dims.size() == 3 ? b.dims[1] : 1;
      uint64_t n = 1;
      for (uint64_t d : b.dims) n *= d;
      st.kv_bytes_per_position += n * static_cast<uint64_t>(isa::dtype_bytes(b.dtype)) / positions;
    }
    if (past == 0) study.prefill = std::move(cm);
    return steps.emplace(past, std::move(st)).first->second;
  };
  const Step& prefill = run(g.prompt, 0);
  study.prefill_report = prefill.report;
  const double ttft = prefill.report.latency_ms;
  std::vector<double> per_step;
  std::vector<int64_t> step_past;
  double decode_ms = 0, weight_stream_ms = 0;
  // A decode step is simulated when it is the first on its program, and otherwise takes that simulation's
  // timing: every simulation starts from an idle machine, so a program's timing is the same each time.
  int64_t steps_simulated = 0;
  for (int64_t t = 1; t < g.new_tokens; ++t) {
    const int64_t past = g.prompt + t - 1;  // positions cached before this step
    const int64_t program_past = g.static_kv ? g.capacity - 1 : ceil_div(past, g.bucket) * g.bucket;
    if (steps.count(program_past) == 0) ++steps_simulated;
    const Step& s = run(1, program_past);
    const traces::Report& r = s.report;
    per_step.push_back(r.latency_ms);
    step_past.push_back(program_past);
    decode_ms += r.latency_ms;
    // Weight streaming: the step's memory-bound time, attributed to weights by their share of the bytes read.
    if (r.total_cycles > 0 && r.dram.bytes_read > 0) {
      const double mem_share = static_cast<double>(r.breakdown.memory) / static_cast<double>(r.total_cycles);
      const double weight_share =
          std::min(1.0, static_cast<double>(s.weight_bytes) / static_cast<double>(r.dram.bytes_read));
      weight_stream_ms += r.latency_ms * mem_share * weight_share;
    }
  }
  const uint64_t per_position = prefill.kv_bytes_per_position;
  const int64_t final_positions = g.prompt + g.new_tokens - 1;
  const uint64_t kv_bytes = per_position * static_cast<uint64_t>(final_positions);
  const uint64_t kv_capacity_bytes =
      per_position *
      static_cast<uint64_t>(g.static_kv ? g.capacity : ceil_div(final_positions, g.bucket) * g.bucket);
  const LatencyStats decode = latency_stats(per_step);
  const double total_ms = ttft + decode_ms;
  const double tokens_per_s = total_ms > 0 ? static_cast<double>(g.new_tokens) / (total_ms / 1000.0) : 0;
  const double decode_tokens_per_s =
      decode_ms > 0 ? static_cast<double>(per_step.size()) / (decode_ms / 1000.0) : 0;
  GenerationSection& section = study.section;
  section.prompt = g.prompt;
  section.new_tokens = g.new_tokens;
  section.kv_cache = g.static_kv ? fmt::format("static:{}", g.capacity) : "growing";
  if (!g.static_kv) section.kv_bucket = g.bucket;
  section.ttft_ms = ttft;
  section.decode_first_ms = per_step.empty() ? 0.0 : per_step.front();
  section.decode_mean_ms = decode.mean;
  section.decode_last_ms = per_step.empty() ? 0.0 : per_step.back();
  section.decode_total_ms = decode_ms;
  section.tokens_per_s = tokens_per_s;
  section.decode_tokens_per_s = decode_tokens_per_s;
  section.kv_cache_bytes = kv_bytes;
  section.kv_cache_capacity_bytes = kv_capacity_bytes;
  section.weight_bytes = prefill.weight_bytes;
  section.weight_streaming_share = decode_ms > 0 ? weight_stream_ms / decode_ms : 0.0;
  section.steps_simulated = steps_simulated;
  section.steps_reused = static_cast<int64_t>(per_step.size()) - steps_simulated;
  for (const auto& [past, s] : steps)
    section.programs.push_back({past, past == 0 ? g.prompt : 1, s.report.total_cycles, s.report.latency_ms});
  for (size_t i = 0; i < per_step.size(); ++i)
    section.steps.push_back(
        {static_cast<int64_t>(i) + 2, g.prompt + static_cast<int64_t>(i), step_past[i], per_step[i]});
  study.text = fmt::format(
      "\ngeneration: prompt {} + {} new tokens, KV cache {} (the report above shows the prefill)\n"
      "  time to first token {:.3f} ms; decode per token first {:.3f} / mean {:.3f} / last {:.3f} ms; {:.1f} "
      "tokens/s "
      "overall, {:.1f} in decode\n"
      "  {} programs (1 prefill, {} decode); {} decode steps simulated, {} reuse their program's timing; KV "
      "cache {} "
      "bytes at the end ({} allocated) in DRAM; weight streaming {:.0f}% of decode time\n",
      g.prompt, g.new_tokens,
      g.static_kv ? fmt::format("static:{}", g.capacity) : fmt::format("growing (bucket {})", g.bucket), ttft,
      per_step.empty() ? 0.0 : per_step.front(), decode.mean, per_step.empty() ? 0.0 : per_step.back(),
      tokens_per_s, decode_tokens_per_s, steps.size(), steps.size() - 1, steps_simulated,
      static_cast<int64_t>(per_step.size()) - steps_simulated, kv_bytes, kv_capacity_bytes,
      decode_ms > 0 ? 100.0 * weight_stream_ms / decode_ms : 0.0);
  return study;
}

}  // namespace npusim::sim::dynamic
