#include "sim/dynamic/policies.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <list>
#include <numeric>

#include "isa/ceil_div.h"
#include "isa/json_text.h"

namespace npusim::sim::dynamic {

double ShapeRun::serial_ms() const {
  if (total_cycles == 0) return 0;
  return latency_ms * static_cast<double>(std::max(serial_cycles, total_cycles)) /
         static_cast<double>(total_cycles);
}

Policy parse_policy(const std::string& text) {
  if (text == "pad") return Policy::kPad;
  if (text == "recompile") return Policy::kRecompile;
  if (text == "dynamic") return Policy::kDynamic;
  throw DynamicUsageError(
      fmt::format("--shape-policy '{}' is not one of pad, recompile, dynamic, all", text));
}

std::vector<Policy> parse_policies(const std::string& text) {
  if (text == "all") return {Policy::kPad, Policy::kRecompile, Policy::kDynamic};
  return {parse_policy(text)};
}

Overflow parse_overflow(const std::string& text) {
  if (text == "split") return Overflow::kSplit;
  if (text == "truncate") return Overflow::kTruncate;
  if (text == "error") return Overflow::kError;
  throw DynamicUsageError(fmt::format("--on-overflow '{}' is not one of split, truncate, error", text));
}

const char* to_string(Policy p) {
  switch (p) {
    case Policy::kPad:
      return "pad";
    case Policy::kRecompile:
      return "recompile";
    case Policy::kDynamic:
      return "dynamic";
  }
  return "?";
}

const char* to_string(Overflow o) {
  switch (o) {
    case Overflow::kSplit:
      return "split";
    case Overflow::kTruncate:
      return "truncate";
    case Overflow::kError:
      return "error";
  }
  return "?";
}

LatencyStats latency_stats(std::vector<double> values) {
  LatencyStats s;
  if (values.empty()) return s;
  std::sort(values.begin(), values.end());
  auto rank = [&](double p) {
    const size_t k = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(values.size())));
    return values[std::clamp<size_t>(k, 1, values.size()) - 1];
  };
  s.p50 = rank(50);
  s.p95 = rank(95);
  s.p99 = rank(99);
  s.max = values.back();
  s.mean = std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
  return s;
}

namespace {

// The cheapest profile holding `shape` (fewest simulated cycles; the first listed on a tie), or none.
const DimBinding* cheapest_holder(const DimBinding& shape, const std::vector<DimBinding>& profiles,
                                  const ShapeCost& cost) {
  const DimBinding* best = nullptr;
  for (const DimBinding& p : profiles) {
    if (!holds(p, shape)) continue;
    if (!best || cost(p).total_cycles < cost(*best).total_cycles) best = &p;
  }
  return best;
}

// Each dimension's largest profile value.
DimBinding largest_values(const std::vector<DimBinding>& profiles) {
  DimBinding m;
  for (const DimBinding& p : profiles)
    for (const auto& [name, v] : p) m[name] = std::max(m[name], v);
  return m;
}

struct Service {
  std::string ran_as;
  double npu_ms = 0;
  uint64_t useful = 0, executed = 0;
};

Service pad_service(const Request& r, const std::vector<DimBinding>& profiles, const ShapeCost& cost,
                    const PolicyOptions& o, const std::string& file, PolicyResult& result) {
  Service s;
  if (const DimBinding* p = cheapest_holder(r.shape, profiles, cost)) {
    s.ran_as = binding_text(*p);
    s.npu_ms = cost(*p).latency_ms;
    s.executed = cost(*p).macs;
    s.useful = cost(r.shape).macs;
    return s;
  }
  if (o.overflow == Overflow::kError) {
    throw OverflowError(
        fmt::format("{}:{}: request {} fits no profile (profiles: {}); --on-overflow split or "
                    "truncate serves it",
                    file, r.line, binding_text(r.shape), bindings_list(profiles)));
  }
  const DimBinding largest = largest_values(profiles);
  DimBinding piece = r.shape;
  int64_t pieces = 1;
  for (auto& [name, v] : piece) {
    const int64_t cap = largest.at(name);
    if (v <= cap) continue;
    if (o.overflow == Overflow::kTruncate) {
      v = cap;
    } else {
      const int64_t n = ceil_div(v, cap);
      pieces *= n;
      v = ceil_div(v, n);
    }
  }
  ++(o.overflow == Overflow::kTruncate ? result.truncated : result.split);
  const DimBinding* p = cheapest_holder(piece, profiles, cost);
  const auto n = static_cast<uint64_t>(pieces);
  s.ran_as = (pieces > 1 ? fmt::format("{} x ", pieces) : "") + binding_text(*p);
  s.npu_ms = static_cast<double>(n) * cost(*p).latency_ms;
  s.executed = n * cost(*p).macs;
  s.useful = n * cost(piece).macs;
  return s;
}

}  // namespace

PolicyResult simulate_policy(Policy policy, const std::vector<Request>& requests,
                             const std::vector<DimBinding>& profiles, const ShapeCost& cost,
                             const PolicyOptions& options, const std::string& requests_name) {
  if (policy == Policy::kPad && profiles.empty()) {
    throw DynamicUsageError("--shape-policy pad needs profiles (--dynamic NAME=V1,V2,...)");
  }
  PolicyResult result;
  result.policy = policy;
  std::vector<const Request*> order;
  for (const Request& r : requests) order.push_back(&r);
  std::stable_sort(order.begin(), order.end(),
                   [](const Request* a, const Request* b) { return a->arrival_ms < b->arrival_ms; });
  // recompile: the program cache, most recently used first; the profiles were compiled ahead of time.
  std::list<DimBinding> cache;
  for (const DimBinding& p : profiles) {
    cache.push_front(p);
    if (cache.size() > options.program_cache) cache.pop_back();
  }
  double npu_free = 0, host_free = 0;
  std::vector<double> latencies;
  for (const Request* r : order) {
    Service s;
    double ready = r->arrival_ms, compile_ms = 0;
    if (policy == Policy::kPad) {
      s = pad_service(*r, profiles, cost, options, requests_name, result);
    } else {
      const ShapeRun& run = cost(r->shape);
      s.ran_as = binding_text(r->shape);
      s.useful = s.executed = run.macs;
      if (policy == Policy::kDynamic) {
        s.npu_ms = run.serial_ms() + static_cast<double>(run.layers) * options.host_us_per_layer / 1000.0;
      } else {
        s.npu_ms = run.latency_ms;
        auto hit = std::find(cache.begin(), cache.end(), r->shape);
        if (hit != cache.end()) {
          cache.splice(cache.begin(), cache, hit);
        } else {
          compile_ms = options.compile_ms_per_layer
                           ? *options.compile_ms_per_layer * static_cast<double>(run.layers)
                           : run.compile_seconds * 1000.0 * options.compile_host_factor;
          // The host compiles one shape at a time, possibly while the NPU still serves earlier requests.
          host_free = std::max(host_free, r->arrival_ms) + compile_ms;
          ready = host_free;
          ++result.compile_events;
          result.compile_ms += compile_ms;
          cache.push_front(r->shape);
          if (cache.size() > options.program_cache) cache.pop_back();
        }
      }
    }
    RequestOutcome out;
    out.request = r;
    out.ran_as = s.ran_as;
    out.compile_ms = compile_ms;
    out.start_ms = std::max(ready, npu_free);
    out.end_ms = out.start_ms + s.npu_ms;
    npu_free = out.end_ms;
    result.useful_macs += s.useful;
    result.executed_macs += s.executed;
    latencies.push_back(out.latency_ms());
    result.outcomes.push_back(std::move(out));
  }
  result.padding_macs =
      result.executed_macs > result.useful_macs ? result.executed_macs - result.useful_macs : 0;
  result.latency = latency_stats(latencies);
  if (!order.empty()) {
    result.makespan_ms = npu_free - order.front()->arrival_ms;
    result.throughput_rps =
        result.makespan_ms > 0 ? static_cast<double>(order.size()) / (result.makespan_ms / 1000.0) : 0;
  }
  return result;
}

void RequestsSection::visit(traces::ReportVisitor& v) {
  v.text({"file", "", "the --requests file"}, file);
  v.derived({"count", "requests", "requests in the file"},
            static_cast<uint64_t>(results.empty() ? 0 : results.front().outcomes.size()));
  v.integer({"shapes_simulated", "shapes", "distinct shapes compiled and simulated"}, shapes_simulated);
  v.object({"options", "", "the policies' options"}, [&] {
    if (!v.fills())
      v.derived({"on_overflow", "", "what a request past every profile does"}, to_string(options.overflow));
    v.integer({"program_cache", "programs", "recompile: programs kept (LRU)"}, options.program_cache);
    v.real({"compile_host_factor", "", "recompile: x npusim's measured compile seconds"},
           options.compile_host_factor);
    if (options.compile_ms_per_layer) {
      v.real({"compile_ms_per_layer", "ms", "recompile: a fixed cost per layer"},
             *options.compile_ms_per_layer);
    } else {
      v.null({"compile_ms_per_layer", "ms", "recompile: a fixed cost per layer"});
    }
    v.real({"host_us_per_layer", "us", "dynamic: shape inference and tiling before each layer"},
           options.host_us_per_layer);
  });
  v.list(
      {"policies", "", "the stream served under each shape policy"}, results, [&](PolicyResult& r, size_t) {
        v.object({"", "", "a policy"}, [&] {
          if (!v.fills()) v.derived({"policy", "", "pad, recompile or dynamic"}, to_string(r.policy));
          v.object({"latency_ms", "ms", "arrival to completion"}, [&] {
            v.real({"p50", "ms", "median"}, r.latency.p50);
            v.real({"p95", "ms", "95th percentile"}, r.latency.p95);
            v.real({"p99", "ms", "99th percentile"}, r.latency.p99);
            v.real({"max", "ms", "the largest"}, r.latency.max);
            v.real({"mean", "ms", "the mean"}, r.latency.mean);
          });
          v.real({"makespan_ms", "ms", "first arrival to last completion"}, r.makespan_ms);
          v.real({"throughput_rps", "requests/s", "requests / makespan"}, r.throughput_rps);
          v.integer({"useful_macs", "MACs", "the requests' own shapes"}, r.useful_macs);
          v.integer({"executed_macs", "MACs", "what the programs ran"}, r.executed_macs);
          v.integer({"padding_macs", "MACs", "executed - useful"}, r.padding_macs);
          v.derived({"padding_share", "", "padding_macs / executed_macs"},
                    r.executed_macs
                        ? static_cast<double>(r.padding_macs) / static_cast<double>(r.executed_macs)
                        : 0.0);
          v.integer({"compile_events", "compiles", "programs compiled while serving"}, r.compile_events);
          v.real({"compile_ms", "ms", "their time"}, r.compile_ms);
          v.integer({"split", "requests", "requests split (--on-overflow split)"}, r.split);
          v.integer({"truncated", "requests", "requests truncated (--on-overflow truncate)"}, r.truncated);
          v.list({"per_request", "", "each request, in service order"}, r.outcomes,
                 [&](RequestOutcome& q, size_t) {
                   v.object({"", "", "a request"}, [&] {
                     if (v.fills()) return;  // the request it refers to is the file's
                     v.derived({"line", "", "its line in the file"}, static_cast<uint64_t>(q.request->line));
                     v.derived({"shape", "", "its dimensions"}, binding_text(q.request->shape));
                     v.text({"ran_as", "", "the program(s) it ran on"}, q.ran_as);
                     v.derived({"arrival_ms", "ms", "when it arrived"}, q.request->arrival_ms);
                     v.real({"start_ms", "ms", "when it started"}, q.start_ms);
                     v.real({"end_ms", "ms", "when it completed"}, q.end_ms);
                     v.derived({"latency_ms", "ms", "end_ms - arrival_ms"}, q.latency_ms());
                     v.real({"compile_ms", "ms", "its share of compile time"}, q.compile_ms);
                   });
                 });
        });
      });
}

std::string requests_text(const std::string& file, const std::vector<PolicyResult>& results) {
  const size_t count = results.empty() ? 0 : results.front().outcomes.size();
  std::string o = fmt::format("\nrequests: {} from {} (one NPU, FIFO by arrival)\n", count, file);
  o += fmt::format("  {:<10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8} {:>9} {:>10}\n", "policy", "p50 ms",
                   "p95 ms", "p99 ms", "max ms", "mean ms", "req/s", "padding", "compiles", "compile ms");
  for (const PolicyResult& r : results) {
    const double share =
        r.executed_macs ? 100.0 * static_cast<double>(r.padding_macs) / static_cast<double>(r.executed_macs)
                        : 0.0;
    o += fmt::format(
        "  {:<10} {:>9.3f} {:>9.3f} {:>9.3f} {:>9.3f} {:>9.3f} {:>9.1f} {:>7.1f}% {:>9} {:>10.3f}\n",
        to_string(r.policy), r.latency.p50, r.latency.p95, r.latency.p99, r.latency.max, r.latency.mean,
        r.throughput_rps, share, r.compile_events, r.compile_ms);
    if (r.split || r.truncated)
      o += fmt::format("  {:<10} {} request(s) split, {} truncated (--on-overflow)\n", "", r.split,
                       r.truncated);
  }
  return o;
}

void ProfilesSection::visit(traces::ReportVisitor& v) {
  if (!v.fills()) {
    uint64_t programs = 0, workspace = 0, weights = 0;
    for (const ProfileRun& p : profiles) {
      programs += p.run.program_bytes;
      workspace = std::max(workspace, p.run.workspace_bytes);
      weights = std::max(weights, p.run.weight_bytes);
    }
    v.derived({"main", "", "the profile the rest of the report shows"}, binding_text(main));
    v.derived({"weight_bytes", "bytes", "weights, stored once and shared by every profile"}, weights);
    v.derived({"program_bytes", "bytes", "the profiles' programs together"}, programs);
    v.derived({"workspace_bytes", "bytes", "the largest profile's workspace"}, workspace);
    v.derived({"footprint_bytes", "bytes", "weights + programs + workspace"}, weights + programs + workspace);
  }
  v.list({"profiles", "", "every compiled profile"}, profiles, [&](ProfileRun& p, size_t) {
    v.object({"", "", "a profile"}, [&] {
      if (!v.fills()) v.derived({"name", "", "its dimensions as text"}, binding_text(p.dims));
      std::vector<std::string> names;
      for (const auto& [name, value] : p.dims) names.push_back(name);
      names = v.begin_map({"dims", "", "its dimensions"}, names, traces::ReportVisitor::Layout::kInline, "");
      for (const std::string& name : names) v.integer({name, "", "a dimension"}, p.dims[name]);
      v.end();
      v.integer({"total_cycles", "cycles", "its simulated cycles"}, p.run.total_cycles);
      v.real({"latency_ms", "ms", "its latency"}, p.run.latency_ms);
      v.integer({"macs", "MACs", "its MACs"}, p.run.macs);
      v.integer({"program_bytes", "bytes", "its program without data segments"}, p.run.program_bytes);
      v.integer({"workspace_bytes", "bytes", "its activations"}, p.run.workspace_bytes);
      v.real({"compile_seconds", "s", "npusim's compile of the profile, measured"}, p.run.compile_seconds);
    });
  });
}

std::string profiles_text(const std::vector<ProfileRun>& profiles, const DimBinding& main) {
  std::string o =
      fmt::format("\nprofiles: {} (the report above shows {})\n", profiles.size(), binding_text(main));
  o += fmt::format("  {:<20} {:>12} {:>11} {:>14} {:>15} {:>11}\n", "profile", "cycles", "latency ms",
                   "program bytes", "workspace bytes", "compile s");
  uint64_t programs = 0, workspace = 0, weights = 0;
  for (const ProfileRun& p : profiles) {
    o += fmt::format("  {:<20} {:>12} {:>11.4f} {:>14} {:>15} {:>11.3f}\n", binding_text(p.dims),
                     p.run.total_cycles, p.run.latency_ms, p.run.program_bytes, p.run.workspace_bytes,
                     p.run.compile_seconds);
    programs += p.run.program_bytes;
    workspace = std::max(workspace, p.run.workspace_bytes);
    weights = std::max(weights, p.run.weight_bytes);
  }
  o += fmt::format(
      "  weights {} bytes (stored once, shared by every profile); programs {}; workspace {} (the largest)\n",
      weights, programs, workspace);
  return o;
}

}  // namespace npusim::sim::dynamic
