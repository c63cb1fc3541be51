// The dynamic-shape option groups: profiles (--dynamic, run and compile), a request stream served over
// them (--requests and its policies, run) and an llm: decoder's generation (--generate, run). Their
// defaults are sim/dynamic's (PolicyOptions, GenerateRequest).
#include <fmt/format.h>

#include "sim/cli/options/groups.h"
#include "sim/dynamic/generate_request.h"
#include "sim/dynamic/policies.h"

namespace npusim::sim::cli {

namespace po = boost::program_options;

GroupOptions dynamic_options(Options& opts) {
  dynamic::DynamicCliOptions& o = opts.dynamic;
  po::options_description d;
  d.add_options()("dynamic", po::value(&o.dynamic)->composing()->value_name("NAME=V1,V2,..."),
                  "one program per profile of a dynamic dimension (repeatable)");
  return {"Dynamic shapes (docs/dynamic.md)", d};
}

GroupOptions requests_options(Options& opts) {
  dynamic::DynamicCliOptions& o = opts.dynamic;
  const dynamic::PolicyOptions def;
  po::options_description d;
  d.add_options()("requests", po::value(&o.requests)->value_name("FILE.csv"),
                  "serve a request stream over the profiles")(
      "shape-policy",
      po::value<std::string>()->value_name("P")->notifier([&o](const std::string& v) { o.shape_policy = v; }),
      fmt::format("pad, recompile, dynamic or all (default {})", dynamic::kDefaultShapePolicy).c_str())(
      "on-overflow",
      po::value<std::string>()->value_name("O")->notifier([&o](const std::string& v) { o.on_overflow = v; }),
      fmt::format("pad: split, truncate or error (default {})", dynamic::to_string(def.overflow)).c_str())(
      "program-cache", po::value<int>()->value_name("N")->notifier([&o](int v) { o.program_cache = v; }),
      fmt::format("recompile: programs kept (default {})", def.program_cache).c_str())(
      "compile-host-factor",
      po::value<double>()->value_name("F")->notifier([&o](double v) { o.compile_host_factor = v; }),
      fmt::format("recompile: the measured compile time x F (default {})", def.compile_host_factor).c_str())(
      "compile-ms-per-layer",
      po::value<double>()->value_name("MS")->notifier([&o](double v) { o.compile_ms_per_layer = v; }),
      "recompile: MS per layer instead of the measured time")(
      "host-us-per-layer",
      po::value<double>()->value_name("US")->notifier([&o](double v) { o.host_us_per_layer = v; }),
      fmt::format("dynamic: host time before each layer (default {})", def.host_us_per_layer).c_str());
  return {"Request streams over the profiles (docs/dynamic.md)", d};
}

GroupOptions generation_options(Options& opts) {
  dynamic::DynamicCliOptions& o = opts.dynamic;
  const dynamic::GenerateRequest def;
  po::options_description d;
  d.add_options()("generate", po::value(&o.generate)->value_name("PROMPT:NEW"),
                  "llm: a prefill of PROMPT tokens, then decode steps up to NEW")(
      "kv-cache",
      po::value<std::string>()->value_name("K")->notifier([&o](const std::string& v) { o.kv_cache = v; }),
      fmt::format("static:N or growing (default {})", def.static_kv ? "static" : "growing").c_str())(
      "kv-bucket", po::value<int64_t>()->value_name("B")->notifier([&o](int64_t v) { o.kv_bucket = v; }),
      fmt::format("growing: KV lengths a multiple of B (default {})", def.bucket).c_str());
  return {"Generation (llm: decoders, docs/dynamic.md)", d};
}

}  // namespace npusim::sim::cli
