#pragma once
// Serving a request stream on one NPU under a shape policy: what each request costs (its shape's
// simulated cycles, measured once per distinct shape and reused), in arrival order, one request at a
// time (FIFO), and the latency percentiles, throughput, padding and compile events that follow.
//
//   pad        each request runs on the cheapest profile that holds it (padded; its MACs beyond the
//              request's own are padding). A request no profile holds is split into equal pieces that fit
//              the largest profile (attention does not cross pieces), truncated to the largest profile,
//              or rejected (--on-overflow).
//   recompile  each request runs at its exact shape; a shape with no program in the cache is compiled
//              on first use on the host (npusim's own measured compile time x a host factor, or a fixed
//              per-layer cost) while the NPU may still be busy; the cache holds N programs (LRU) and
//              starts with the profiles (compiled ahead of time).
//   dynamic    each request runs at its exact shape with host-side shape inference and tiling before
//              every layer (a per-layer host cost) and no cross-layer prefetch: each layer starts after
//              the previous one ended (the sum of the layers' own cycles).
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "sim/dynamic/profiles.h"
#include "sim/dynamic/requests.h"
#include "traces/report_visitor.h"

namespace npusim::sim::dynamic {

// A valid request that the chosen policy cannot serve (--on-overflow error; the CLI exits 1).
class OverflowError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// What one shape costs: compiled and simulated once.
struct ShapeRun {
  uint64_t total_cycles = 0;
  double latency_ms = 0;       // the simulation's own latency figure
  uint64_t serial_cycles = 0;  // the layers' own cycles summed: no overlap between layers
  uint64_t macs = 0;
  size_t layers = 0;             // program layers (fused nodes not counted)
  double compile_seconds = 0;    // npusim's compile of the shape, measured
  uint64_t program_bytes = 0;    // the program without its data segments (weights, constants)
  uint64_t workspace_bytes = 0;  // activations (the memory plan's arena)
  uint64_t weight_bytes = 0;     // data segments
  double serial_ms() const;
};

// Compiles and simulates a shape (the caller caches: each distinct shape is asked for once).
using ShapeCost = std::function<const ShapeRun&(const DimBinding&)>;

enum class Policy { kPad, kRecompile, kDynamic };
enum class Overflow { kSplit, kTruncate, kError };

Policy parse_policy(const std::string& text);                 // DynamicUsageError naming --shape-policy
std::vector<Policy> parse_policies(const std::string& text);  // "all": the three
Overflow parse_overflow(const std::string& text);
const char* to_string(Policy p);
const char* to_string(Overflow o);

struct PolicyOptions {
  Overflow overflow = Overflow::kSplit;
  size_t program_cache = 8;                    // recompile: programs kept (LRU)
  double compile_host_factor = 1.0;            // recompile: x npusim's measured compile seconds
  std::optional<double> compile_ms_per_layer;  // recompile: fixed cost per layer instead of the measured one
  double host_us_per_layer = 20.0;             // dynamic: shape inference and tiling before each layer
};

struct RequestOutcome {
  const Request* request = nullptr;
  std::string ran_as;  // the program(s) it ran on: "seq=128", "2 x seq=256" (split)
  double start_ms = 0, end_ms = 0, compile_ms = 0;
  double latency_ms() const { return end_ms - request->arrival_ms; }
};

struct LatencyStats {
  double p50 = 0, p95 = 0, p99 = 0, max = 0, mean = 0;
};
// Nearest-rank percentiles (p-th: the smallest value with at least p% of the values at or below it).
LatencyStats latency_stats(std::vector<double> values);

struct PolicyResult {
  Policy policy = Policy::kPad;
  std::vector<RequestOutcome> outcomes;  // in service order
  LatencyStats latency;
  double makespan_ms = 0;     // first arrival to last completion
  double throughput_rps = 0;  // requests / makespan
  uint64_t useful_macs = 0;   // the requests' own shapes (pieces when split, the kept part when truncated)
  uint64_t executed_macs = 0;
  uint64_t padding_macs = 0;  // executed - useful
  size_t compile_events = 0;
  double compile_ms = 0;
  size_t split = 0, truncated = 0;
};

// Serves `requests` under `policy`. `profiles` may be empty except for kPad. Throws OverflowError
// ("FILE:LINE: request ... fits no profile (profiles: ...)") under Overflow::kError.
PolicyResult simulate_policy(Policy policy, const std::vector<Request>& requests,
                             const std::vector<DimBinding>& profiles, const ShapeCost& cost,
                             const PolicyOptions& options, const std::string& requests_name);

// The report's `requests` section: the request stream served under each policy, field by field
// (traces/report_visitor.h).
struct RequestsSection {
  std::string file;
  std::vector<PolicyResult> results;
  PolicyOptions options;
  size_t shapes_simulated = 0;
  std::shared_ptr<const std::vector<Request>> requests;  // what the outcomes point to, kept alive
  void visit(traces::ReportVisitor& v);
};

// The summary's table of the request stream.
std::string requests_text(const std::string& file, const std::vector<PolicyResult>& results);

// One compiled profile.
struct ProfileRun {
  DimBinding dims;
  ShapeRun run;
};
// The report's `profiles` section, field by field: every compiled profile, `main` the one the rest of the
// report shows.
struct ProfilesSection {
  std::vector<ProfileRun> profiles;
  DimBinding main;
  void visit(traces::ReportVisitor& v);
};
// The summary's table of the profiles (`main`: the profile the rest of the report shows).
std::string profiles_text(const std::vector<ProfileRun>& profiles, const DimBinding& main);

}  // namespace npusim::sim::dynamic
