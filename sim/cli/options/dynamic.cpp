// The dynamic-shape option groups: profiles (--dynamic, run and compile), a request stream served over
// them (--requests and its policies, run) and an llm: decoder's generation (--generate, run). Their
// defaults are sim/dynamic's (PolicyOptions, GenerateRequest).
#include <fmt/format.h>

#include "sim/cli/options/groups.h"
#include "sim/dynamic/generate_request.h"
#include "sim/dynamic/policies.h"

namespace npusim::sim::cli {

namespace po = boost::program_options;

po::options_description dynamic_options(Options& opts) {
  dynamic::DynamicCliOptions& o = opts.dynamic;
  po::options_description d("Dynamic shapes (docs/dynamic.md)");
  d.add_options()("dynamic", po::value(&o.dynamic)->composing()->value_name("NAME=V1,V2,..."),
                  "compile one program per profile: NAME is a dynamic dimension (dim_param) of the model, "
                  "e.g. seq=64,128,256 (repeatable; several make every combination); run: the report's "
                  "`profiles` section lists them; compile: one file per profile, PROG.seq64.npu, ...");
  return d;
}

po::options_description requests_options(Options& opts) {
  dynamic::DynamicCliOptions& o = opts.dynamic;
  const dynamic::PolicyOptions def;
  po::options_description d("Request streams over the profiles (docs/dynamic.md)");
  d.add_options()(
      "requests", po::value(&o.requests)->value_name("FILE.csv"),
      "serve a request stream: a header naming the dynamic dimensions (and optionally arrival_ms), one row "
      "per request; the report's `requests` section gives latency percentiles per policy")(
      "shape-policy",
      po::value<std::string>()->value_name("P")->notifier([&o](const std::string& v) { o.shape_policy = v; }),
      fmt::format("pad (the cheapest profile holding the request), recompile (compile each new shape on "
                  "first use), dynamic (exact shapes, host shape inference per layer) or all (default {})",
                  dynamic::kDefaultShapePolicy)
          .c_str())(
      "on-overflow",
      po::value<std::string>()->value_name("O")->notifier([&o](const std::string& v) { o.on_overflow = v; }),
      fmt::format("pad, a request no profile holds: split into pieces the largest profile holds, truncate "
                  "to it, or error (exit 1) (default {})",
                  dynamic::to_string(def.overflow))
          .c_str())("program-cache",
                    po::value<int>()->value_name("N")->notifier([&o](int v) { o.program_cache = v; }),
                    fmt::format("recompile: programs kept, least recently used evicted; starts with the "
                                "profiles (default {})",
                                def.program_cache)
                        .c_str())(
      "compile-host-factor",
      po::value<double>()->value_name("F")->notifier([&o](double v) { o.compile_host_factor = v; }),
      fmt::format("recompile: a compile on the serving host takes npusim's own measured compile time x F "
                  "(default {})",
                  def.compile_host_factor)
          .c_str())(
      "compile-ms-per-layer",
      po::value<double>()->value_name("MS")->notifier([&o](double v) { o.compile_ms_per_layer = v; }),
      "recompile: a compile takes MS per program layer instead of the measured time (deterministic)")(
      "host-us-per-layer",
      po::value<double>()->value_name("US")->notifier([&o](double v) { o.host_us_per_layer = v; }),
      fmt::format("dynamic: host shape inference and tiling before each layer, in microseconds (default {})",
                  def.host_us_per_layer)
          .c_str());
  return d;
}

po::options_description generation_options(Options& opts) {
  dynamic::DynamicCliOptions& o = opts.dynamic;
  const dynamic::GenerateRequest def;
  po::options_description d("Generation (llm: decoders, docs/dynamic.md)");
  d.add_options()("generate", po::value(&o.generate)->value_name("PROMPT:NEW"),
                  "llm: models: simulate a prefill over PROMPT tokens and a decode step for each further "
                  "token up to NEW; the report's `generation` section (time to first token, per-token "
                  "latency, KV cache)")(
      "kv-cache",
      po::value<std::string>()->value_name("K")->notifier([&o](const std::string& v) { o.kv_cache = v; }),
      fmt::format("--generate: static:N (every decode step on one program of KV capacity N, masked) or "
                  "growing (programs per KV bucket) (default {})",
                  def.static_kv ? "static" : "growing")
          .c_str())(
      "kv-bucket", po::value<int64_t>()->value_name("B")->notifier([&o](int64_t v) { o.kv_bucket = v; }),
      fmt::format("--generate with --kv-cache growing: decode programs are compiled for KV lengths that are "
                  "multiples of B (default {})",
                  def.bucket)
          .c_str());
  return d;
}

}  // namespace npusim::sim::cli
