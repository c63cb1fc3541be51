#include "sim/dynamic/generate_request.h"

#include <fmt/format.h>

#include "sim/dynamic/profiles.h"

namespace npusim::sim::dynamic {

GenerateRequest parse_generate(const std::string& generate, const std::string& kv_cache, int64_t bucket) {
  GenerateRequest g;
  const size_t colon = generate.find(':');
  if (colon == std::string::npos)
    throw DynamicUsageError(fmt::format("--generate '{}' is not PROMPT:NEW (e.g. 512:128)", generate));
  g.prompt = positive_integer(generate.substr(0, colon), "--generate prompt length");
  g.new_tokens = positive_integer(generate.substr(colon + 1), "--generate new tokens");
  if (bucket < 1) throw DynamicUsageError("--kv-bucket must be at least 1");
  g.bucket = bucket;
  if (kv_cache == "growing") return g;
  if (kv_cache.rfind("static:", 0) != 0)
    throw DynamicUsageError(fmt::format("--kv-cache '{}' is not static:N or growing", kv_cache));
  g.static_kv = true;
  g.capacity = positive_integer(kv_cache.substr(7), "--kv-cache static capacity");
  // The last decode step holds prompt + new - 1 positions (its own included).
  if (g.prompt + g.new_tokens - 1 > g.capacity)
    throw DynamicUsageError(
        fmt::format("--generate {}:{} needs {} KV positions; --kv-cache static:{} holds {}", g.prompt,
                    g.new_tokens, g.prompt + g.new_tokens - 1, g.capacity, g.capacity));
  return g;
}

}  // namespace npusim::sim::dynamic
