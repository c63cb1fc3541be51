#pragma once
// Running a serving scenario: requests of several models share one NPU, which runs one layer at a time;
// at every layer boundary the policy picks the request to run next (docs/scenarios.md). Each model's
// layers take the cycles of its own simulation (`npusim run`), so a model alone takes exactly its run's
// cycles; what the scenario adds is the waiting.
#include <cstdint>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "sim/e2e/pipeline.h"
#include "sim/serve/scenario.h"
#include "traces/report.h"
#include "traces/report_visitor.h"

namespace npusim::sim::serve {

// One model as simulated alone.
struct ModelProfile {
  std::string name;
  // Cycles from one layer boundary to the next (the layers' end cycles in program order); they add up
  // to total_cycles.
  std::vector<int64_t> segments;
  int64_t total_cycles = 0;
  std::vector<std::pair<std::string, int64_t>> unit_busy;  // per unit: busy cycles of one inference
  // With a pipeline (docs/e2e.md): the host stages before the NPU (pre-processing, copies, the input
  // transfer) and after it (output transfer, copies, post-processing); they run for each request
  // without waiting for other requests. NPU-inserted stages are segments of their own.
  int64_t host_before_cycles = 0;
  int64_t host_after_cycles = 0;
  // DRAM (dram.capacity_mib): its weights, and its activations plus scratch, in bytes; the cycles a
  // reload of its weights over the host link takes (link latency + weight bytes / link bandwidth).
  int64_t weight_bytes = 0;
  int64_t activation_bytes = 0;
  int64_t reload_cycles = 0;
};

// How much models on different cores slow each other down through what the cores share (the DRAM and
// the host link): slowdown[i][j] is model i's time over its time alone while model j runs on another
// core, measured by co_run_slowdowns (empty: no contention; 1 where it is not measured).
using Slowdowns = std::vector<std::vector<double>>;

// From one simulation of two programs started together on two cores (arch::simulate_cores): each one's
// slowdown while the other ran. The one that finished first was slowed over all of its run; the other
// over the part of its work done by then (its layers' end cycles map its co-run time to its time alone).
// {slowdown of a, slowdown of b}; each at least 1.
std::pair<double, double> co_run_slowdowns(
    const traces::Report& a_alone, const traces::Report& a_shared, const traces::Report& b_alone,
    const traces::Report& b_shared);  // A model's profile from its run's report: segments at its program
                                      // layers' end cycles (fused nodes are
// not layers), its units' busy cycles.
ModelProfile profile_of(const std::string& name, const traces::Report& report);

// Adds a model's end-to-end pipeline (plan_pipeline + add_npu_run on its program and cycles) to its
// profile: host stages before and after the NPU, NPU-inserted stages as a first segment.
void add_pipeline(ModelProfile& p, const e2e::E2eResult& pipeline);

// The boundaries of a simulated run: segment i ends at the i-th layer's end (running maximum), the last
// at total_cycles; zero-length segments are dropped.
std::vector<int64_t> layer_segments(const std::vector<int64_t>& layer_end_cycles, int64_t total_cycles);

// The arrival times (ms) of one model's requests in [0, duration_ms).
std::vector<double> arrival_times_ms(const Arrivals& a, double duration_ms);

struct ModelStats {
  std::string name;
  int64_t priority = 0;
  double deadline_ms = 0;
  int64_t requests = 0;
  double alone_ms = 0;  // one request alone: total_cycles plus the pipeline's host stages
  double latency_p50_ms = 0, latency_p95_ms = 0, latency_p99_ms = 0, latency_max_ms = 0, latency_mean_ms = 0;
  int64_t deadline_misses = 0;
  double throughput_per_s = 0;  // requests completed / duration: the offered rate (every request completes)
  // Requests / the time its last one completed (at least the duration): the rate the NPU served, below
  // the offered one when the NPU is overloaded.
  double served_per_s = 0;
  int64_t preemptions = 0;     // times a request of this model was set aside at a layer boundary
  int64_t weight_reloads = 0;  // times its weights were loaded over the host link (DRAM too small)
};

// A first stage with stages after it (`after:`, docs/scenarios.md): its frames end to end, each from its
// arrival to the completion of the last request it led to (post-processing included).
struct FrameStats {
  std::string model;     // the first stage
  std::string stages;    // "det -> cls -> rec": its stages, upstream first
  int64_t frames = 0;    // its requests
  int64_t requests = 0;  // the requests its dependent stages made
  double latency_p50_ms = 0, latency_p95_ms = 0, latency_p99_ms = 0, latency_max_ms = 0, latency_mean_ms = 0;
  double served_per_s = 0;  // frames / the time the last one completed (at least the duration)
};

// A stretch of one request running on the NPU, for the trace.
struct Slice {
  size_t model = 0;
  int64_t request = 0;  // index among the model's requests
  int64_t start = 0, end = 0;
};

struct ServeResult {
  std::string policy;
  std::string sram;  // "shared" or "partitioned"
  double duration_ms = 0;
  double frequency_mhz = 0;
  int64_t span_cycles = 0;  // until the last request finished (at least the duration)
  int64_t cores = 1;        // cores the models are pinned to (the highest `core` + 1)
  double npu_busy = 0;      // fraction of span x cores the cores ran a layer
  // The NPU time the arrivals ask of the busiest core: its models' requests x their cycles alone / the
  // duration. Above 1 the core is overloaded: its queue grows for as long as requests arrive.
  double offered_load = 0;
  int64_t busiest_core = 0;
  // per unit (below): its busy cycles over all cores / (span x cores)
  std::vector<ModelStats> models;
  std::vector<FrameStats> frames;                     // first stages with dependent stages
  std::vector<std::pair<std::string, double>> units;  // per unit: utilization over the span
  std::vector<Slice> slices;
  // DRAM: the capacity (0 = unlimited), the bytes every model needs, whether all weights stay resident,
  // and the cycles spent reloading weights.
  int64_t dram_capacity_bytes = 0;
  int64_t dram_needed_bytes = 0;
  bool weights_resident = true;
  int64_t reload_cycles = 0;
  Slowdowns slowdown;  // as given to run_scenario (models on different cores)
  // The scenario's report (`npusim serve --report`), field by field (traces/report_visitor.h); `s` the
  // scenario it ran.
  void visit(traces::ReportVisitor& v, const Scenario& s);
};

// The most requests a scenario may make (arrivals over all models).
inline constexpr int64_t kMaxRequests = 2000000;

// Runs `s` over `profiles` (parallel to s.models). Throws ScenarioError when the arrivals make more than
// kMaxRequests requests.
// Each core runs one segment at a time. A segment alone on the NPU takes its cycles; while models j run
// segments on other cores, model i's segment progresses at 1 / (1 + sum over j of (slowdown[i][j] - 1))
// of its pace alone (docs/scenarios.md, "Several cores").
// `dram_capacity_bytes` (0 = unlimited): the activations and scratch of every model stay in DRAM; the
// weights of all models too when everything fits, else weights live in DRAM least recently used first
// (never those of a segment running on another core) and a model's layer that finds its weights evicted
// waits for their reload over the host link (ModelProfile::reload_cycles) first; reloads of different
// cores take the link one after the other. Throws ScenarioError when the activations plus, per core, the
// largest weights of its models do not fit.
ServeResult run_scenario(const Scenario& s, const std::vector<ModelProfile>& profiles, double frequency_mhz,
                         int64_t dram_capacity_bytes = 0, const Slowdowns& slowdown = {});

// The scenario's report as JSON (ServeResult::visit).
std::string serve_json(const ServeResult& r, const Scenario& s);
std::string serve_text(const ServeResult& r);
// A Chrome/Perfetto trace: one lane per model, one slice per stretch a request ran.
void write_serve_trace(const ServeResult& r, std::ostream& out);

}  // namespace npusim::sim::serve
