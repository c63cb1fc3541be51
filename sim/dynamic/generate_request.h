#pragma once
// `--generate PROMPT:NEW` with its KV-cache options, parsed: plain text checks, in npusim_dynamic so that
// the sweep file's `generate` axis (sim/sweep) checks its values with the run's own parser.
#include <cstdint>
#include <string>

namespace npusim::sim::dynamic {

struct GenerateRequest {
  int64_t prompt = 0, new_tokens = 0;
  bool static_kv = false;
  int64_t capacity = 0;  // static: N
  int64_t bucket = 128;  // growing: the KV length programs are compiled for is a multiple of this
};

// Parses --generate P:N, --kv-cache static:N|growing and --kv-bucket; DynamicUsageError on a bad value
// or a prompt and generation that do not fit a static capacity.
GenerateRequest parse_generate(const std::string& generate, const std::string& kv_cache, int64_t bucket);

}  // namespace npusim::sim::dynamic
