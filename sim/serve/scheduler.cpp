#include "sim/serve/scheduler.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <stdexcept>

#include "isa/json_text.h"
#include "isa/timing/units.h"
#include "sim/e2e/pipeline.h"
#include "traces/sink.h"

namespace npusim::sim::serve {
namespace {

struct Request {
  size_t model = 0;
  int64_t index = 0;  // among its model's requests
  int64_t arrival = 0;
  int64_t ready = 0;  // when it reaches the NPU: arrival + the host stages before it
  size_t next = 0;    // next segment
  int64_t done = -1;  // when its last NPU segment ended
  size_t frame = 0;   // the first stage's request it descends from (Frame), itself for a first stage
};

// A request of a model with arrivals of its own and everything that runs after it (`after:`), e.g. a
// camera frame, its detection and the recognition of each text crop: done when the last of them is.
struct Frame {
  size_t model = 0;  // the first stage
  int64_t arrival = 0;
  int64_t end = 0;  // the latest completion among its requests (post-processing included)
};

// Weights in DRAM, least recently used first (dram.capacity_mib): use(m) makes model m's weights resident
// and most recently used, evicting others as needed (never a pinned model's: one running on another core),
// and returns the cycles their reload takes (0 when they were there). Before the run the weights are
// loaded in model order while they fit.
class WeightCache {
 public:
  WeightCache(const std::vector<ModelProfile>& profiles, int64_t capacity)
      : p_(profiles), capacity_(capacity) {
    for (size_t m = 0; m < p_.size(); ++m) {
      if (used_ + p_[m].weight_bytes > capacity_) continue;
      lru_.push_back(m);
      used_ += p_[m].weight_bytes;
    }
  }
  int64_t use(size_t m, const std::vector<bool>& pinned) {
    auto it = std::find(lru_.begin(), lru_.end(), m);
    if (it != lru_.end()) {
      lru_.erase(it);
      lru_.push_back(m);
      return 0;
    }
    for (auto e = lru_.begin(); used_ + p_[m].weight_bytes > capacity_ && e != lru_.end();) {
      if (pinned[*e]) {
        ++e;
        continue;
      }
      used_ -= p_[*e].weight_bytes;
      e = lru_.erase(e);
    }
    // run_scenario checked that the activations and one model per core fit.
    if (used_ + p_[m].weight_bytes > capacity_) throw std::logic_error("serve: the weight cache overflowed");
    lru_.push_back(m);
    used_ += p_[m].weight_bytes;
    return p_[m].reload_cycles;
  }

 private:
  const std::vector<ModelProfile>& p_;
  int64_t capacity_;
  int64_t used_ = 0;
  std::vector<size_t> lru_;
};

// The latency figures of `out` (a ModelStats or FrameStats) from latencies in cycles: p50, p95, p99
// (nearest rank), max and mean, in ms.
template <class Stats>
void latency_figures(std::vector<int64_t> cycles, double ms_per_cycle, Stats& out) {
  std::sort(cycles.begin(), cycles.end());
  out.latency_p50_ms = static_cast<double>(e2e::percentile(cycles, 50)) * ms_per_cycle;
  out.latency_p95_ms = static_cast<double>(e2e::percentile(cycles, 95)) * ms_per_cycle;
  out.latency_p99_ms = static_cast<double>(e2e::percentile(cycles, 99)) * ms_per_cycle;
  out.latency_max_ms = cycles.empty() ? 0 : static_cast<double>(cycles.back()) * ms_per_cycle;
  double sum = 0;
  for (int64_t l : cycles) sum += static_cast<double>(l);
  out.latency_mean_ms = cycles.empty() ? 0 : sum / static_cast<double>(cycles.size()) * ms_per_cycle;
}

// The requests a dependent stage makes for its upstream's request `k` (ScenarioModel::fanout, fanout_mean).
int64_t fanout_count(const ScenarioModel& m, int64_t k) {
  if (m.fanout_mean <= 0) return m.fanout[static_cast<size_t>(k) % m.fanout.size()];
  // Its own stream per request: the count does not depend on the order requests complete in.
  std::mt19937 rng(m.fanout_seed ^ (static_cast<uint32_t>(k) * 2654435761u));
  return std::min<int64_t>(std::poisson_distribution<int64_t>(m.fanout_mean)(rng), 1000);
}

}  // namespace

ModelProfile profile_of(const std::string& name, const traces::Report& report) {
  ModelProfile p;
  p.name = name;
  p.total_cycles = static_cast<int64_t>(report.total_cycles);
  std::vector<int64_t> ends;
  for (const traces::LayerReport& l : report.layers)
    if (!l.fused()) ends.push_back(static_cast<int64_t>(l.end_cycle));
  p.segments = layer_segments(ends, p.total_cycles);
  for (const traces::UnitReport& u : report.units)
    p.unit_busy.emplace_back(u.name, static_cast<int64_t>(u.busy));
  return p;
}

void add_pipeline(ModelProfile& p, const e2e::E2eResult& pipeline) {
  int64_t npu_before = 0;
  for (size_t i = 0; i < pipeline.stages.size(); ++i) {
    const e2e::Stage& st = pipeline.stages[i];
    if (i < pipeline.model_stage) {
      (st.unit == "npu" ? npu_before : p.host_before_cycles) += st.cycles;
    } else if (i > pipeline.model_stage) {
      p.host_after_cycles += st.cycles;
    }
  }
  if (npu_before > 0) {
    p.segments.insert(p.segments.begin(), npu_before);
    p.total_cycles += npu_before;
  }
}

std::vector<int64_t> layer_segments(const std::vector<int64_t>& layer_end_cycles, int64_t total_cycles) {
  std::vector<int64_t> seg;
  int64_t at = 0;
  for (int64_t e : layer_end_cycles) {
    const int64_t end = std::min(e, total_cycles);
    if (end > at) {
      seg.push_back(end - at);
      at = end;
    }
  }
  if (total_cycles > at) seg.push_back(total_cycles - at);
  return seg;
}

namespace {

// The run's layer boundaries, as (its cycle, the cycle the same layers end at in another run) pairs:
// the layers' end cycles in program order (running maximum), from 0 to the two totals.
std::vector<std::pair<double, double>> boundary_map(const traces::Report& run, const traces::Report& other) {
  std::vector<std::pair<double, double>> m = {{0, 0}};
  double a = 0, b = 0;
  for (size_t i = 0; i < run.layers.size() && i < other.layers.size(); ++i) {
    if (run.layers[i].fused()) continue;
    a = std::max(a, static_cast<double>(run.layers[i].end_cycle));
    b = std::max(b, static_cast<double>(other.layers[i].end_cycle));
    m.emplace_back(a, b);
  }
  m.emplace_back(static_cast<double>(run.total_cycles), static_cast<double>(other.total_cycles));
  return m;
}

// The work (cycles alone) `shared` had done by cycle `t` of its shared run, interpolated between layer
// boundaries.
double work_done_by(const traces::Report& alone, const traces::Report& shared, double t) {
  const std::vector<std::pair<double, double>> m = boundary_map(shared, alone);
  for (size_t k = 1; k < m.size(); ++k) {
    if (t > m[k].first) continue;
    const double span = m[k].first - m[k - 1].first;
    const double f = span > 0 ? (t - m[k - 1].first) / span : 1;
    return m[k - 1].second + f * (m[k].second - m[k - 1].second);
  }
  return static_cast<double>(alone.total_cycles);
}

}  // namespace

std::pair<double, double> co_run_slowdowns(const traces::Report& a_alone, const traces::Report& a_shared,
                                           const traces::Report& b_alone, const traces::Report& b_shared) {
  const double ta = static_cast<double>(a_shared.total_cycles),
               tb = static_cast<double>(b_shared.total_cycles);
  auto ratio = [](double shared, double alone) { return alone > 0 ? std::max(1.0, shared / alone) : 1.0; };
  if (ta <= tb) {
    return {ratio(ta, static_cast<double>(a_alone.total_cycles)),
            ratio(ta, work_done_by(b_alone, b_shared, ta))};
  }
  return {ratio(tb, work_done_by(a_alone, a_shared, tb)),
          ratio(tb, static_cast<double>(b_alone.total_cycles))};
}

std::vector<double> arrival_times_ms(const Arrivals& a, double duration_ms) {
  std::vector<double> t;
  switch (a.kind) {
    case Arrivals::Kind::kPeriodic:
      for (int64_t i = 0;; ++i) {
        const double x = a.phase_ms + static_cast<double>(i) * a.period_ms;
        if (x >= duration_ms || static_cast<int64_t>(t.size()) > kMaxRequests) break;
        t.push_back(x);
      }
      break;
    case Arrivals::Kind::kPoisson: {
      std::mt19937_64 rng(a.seed);
      std::exponential_distribution<double> gap(a.rate_hz / 1000.0);  // per ms
      for (double x = gap(rng); x < duration_ms && static_cast<int64_t>(t.size()) <= kMaxRequests;
           x += gap(rng))
        t.push_back(x);
      break;
    }
    case Arrivals::Kind::kTrace:
      for (double x : a.trace_ms)
        if (x < duration_ms) t.push_back(x);
      break;
  }
  return t;
}

ServeResult run_scenario(const Scenario& s, const std::vector<ModelProfile>& profiles, double f_mhz,
                         int64_t dram_capacity_bytes, const Slowdowns& slowdown) {
  ServeResult r;
  r.policy = std::string(policy_name(s.policy));
  r.sram = s.sram_partitioned ? "partitioned" : "shared";
  r.duration_ms = s.duration_ms;
  r.frequency_mhz = f_mhz;
  r.slowdown = slowdown;
  const size_t n_models = s.models.size();

  std::vector<Request> reqs;
  std::vector<Frame> frames;
  std::vector<int64_t> made(n_models, 0);  // requests made per model (its next request's index)
  for (size_t m = 0; m < n_models; ++m) {
    if (!s.models[m].after.empty()) continue;  // a dependent stage: its requests come from its upstream's
    const std::vector<double> t = arrival_times_ms(s.models[m].arrivals, s.duration_ms);
    for (size_t i = 0; i < t.size(); ++i) {
      const int64_t at = isa::timing::us_to_cycles(t[i] * 1000.0, f_mhz);
      reqs.push_back(
          {m, static_cast<int64_t>(i), at, at + profiles[m].host_before_cycles, 0, -1, frames.size()});
      frames.push_back({m, at, 0});
    }
    made[m] = static_cast<int64_t>(t.size());
    if (static_cast<int64_t>(reqs.size()) > kMaxRequests) {
      throw ScenarioError(
          {fmt::format("{}: the arrivals make more than {} requests in {} ms; shorten duration_ms or "
                       "lower the rates",
                       s.path, kMaxRequests, s.duration_ms)});
    }
  }
  std::stable_sort(reqs.begin(), reqs.end(),
                   [](const Request& a, const Request& b) { return a.ready < b.ready; });

  std::vector<double> unit_busy;
  std::vector<std::string> unit_names;
  for (const ModelProfile& p : profiles) {
    for (const auto& [name, busy] : p.unit_busy) {
      (void)busy;
      if (std::find(unit_names.begin(), unit_names.end(), name) == unit_names.end())
        unit_names.push_back(name);
    }
  }
  unit_busy.assign(unit_names.size(), 0.0);
  std::vector<int64_t> preemptions(n_models, 0);

  // Each core schedules the requests of the models pinned to it with the policy, on its own; the cores
  // meet in the DRAM (capacity and bandwidth) and the host link.
  int64_t cores = 1, span = 0, npu_busy = 0;
  for (const ScenarioModel& m : s.models) cores = std::max(cores, m.core + 1);

  // DRAM: activations and scratch of every model stay; the weights too when everything fits.
  int64_t activations = 0, weights = 0;
  std::vector<int64_t> largest(static_cast<size_t>(cores), 0);  // per core, its largest model's weights
  for (size_t m = 0; m < n_models; ++m) {
    activations += profiles[m].activation_bytes;
    weights += profiles[m].weight_bytes;
    int64_t& l = largest[static_cast<size_t>(s.models[m].core)];
    l = std::max(l, profiles[m].weight_bytes);
  }
  r.dram_capacity_bytes = dram_capacity_bytes;
  r.dram_needed_bytes = activations + weights;
  r.weights_resident = dram_capacity_bytes == 0 || activations + weights <= dram_capacity_bytes;
  if (!r.weights_resident) {
    constexpr double kMib = 1 << 20;
    const int64_t running = std::accumulate(largest.begin(), largest.end(), int64_t{0});
    if (activations + running > dram_capacity_bytes) {
      throw ScenarioError(
          {fmt::format("{}: dram.capacity_mib: the models' activations and scratch ({:.2f} MiB) and the "
                       "largest model's weights "
                       "{}({:.2f} MiB) do not fit in {:.2f} MiB",
                       s.path, activations / kMib, cores > 1 ? "of each core " : "", running / kMib,
                       dram_capacity_bytes / kMib)});
    }
  }
  WeightCache cache(profiles, r.weights_resident ? weights : dram_capacity_bytes - activations);
  std::vector<int64_t> reloads(n_models, 0);
  std::vector<bool> pinned(n_models, false);  // models with a segment in progress (their weights stay)
  int64_t link_free = 0;                      // when the host link is free for the next reload

  struct Core {
    std::vector<size_t> order;  // its requests, by the time they reach the NPU
    size_t next_arrival = 0;
    std::vector<size_t> ready;  // requests that reached the NPU and are not done, in that order
    long last = -1;             // the request that ran the last segment
    size_t rr_last = 0;         // round-robin: the model served last
    long active = -1;           // the request whose segment is in progress
    int64_t start = 0;          // when that segment was picked (its slice starts; a reload first)
    int64_t run_from = 0;       // when it runs (after its reload)
    double left = 0;            // its cycles alone not yet done
    int64_t end = 0;            // when it ends at the current rates
    double rate = 1;
    long slice = -1;  // its last slice in r.slices
  };
  std::vector<Core> core(static_cast<size_t>(cores));
  for (Core& c : core) c.rr_last = n_models - 1;
  for (size_t i = 0; i < reqs.size(); ++i)
    core[static_cast<size_t>(s.models[reqs[i].model].core)].order.push_back(i);

  // Request `id` completed its NPU work at `t`: its frame learns when it is done (its post-processing
  // after it), and each dependent stage (`after:`) gets its fanout of requests, which reach their core's
  // queue after their own host stages. May grow `reqs`: no reference into it survives a call.
  auto complete = [&](size_t id, int64_t t) {
    reqs[id].done = t;
    const size_t m = reqs[id].model, f = reqs[id].frame;
    const int64_t finish = t + profiles[m].host_after_cycles, upstream_index = reqs[id].index;
    frames[f].end = std::max(frames[f].end, finish);
    for (size_t d = 0; d < n_models; ++d) {
      const ScenarioModel& dm = s.models[d];
      if (dm.after.empty() || dm.upstream != m) continue;
      const int64_t count = fanout_count(dm, upstream_index);
      Core& c = core[static_cast<size_t>(dm.core)];
      for (int64_t k = 0; k < count; ++k) {
        const size_t at = reqs.size();
        reqs.push_back({d, made[d]++, finish, finish + profiles[d].host_before_cycles, 0, -1, f});
        if (static_cast<int64_t>(reqs.size()) > kMaxRequests)
          throw ScenarioError(
              {fmt::format("{}: the arrivals and their dependent stages make more than {} "
                           "requests; shorten duration_ms or lower the rates or fanouts",
                           s.path, kMaxRequests)});
        // In its core's queue by the time it reaches the NPU (after the ones already there at that time).
        const auto pos = std::upper_bound(
            c.order.begin() + static_cast<long>(c.next_arrival), c.order.end(), reqs[at].ready,
            [&](int64_t ready, size_t other) { return ready < reqs[other].ready; });
        c.order.insert(pos, at);
      }
    }
  };

  auto pick = [&](Core& c) -> size_t {  // index into c.ready
    switch (s.policy) {
      case Policy::kFifo: {
        for (size_t i = 0; i < c.ready.size(); ++i)
          if (static_cast<long>(c.ready[i]) == c.last) return i;  // runs to completion
        return 0;
      }
      case Policy::kPriority: {
        size_t best = 0;
        for (size_t i = 1; i < c.ready.size(); ++i) {
          if (s.models[reqs[c.ready[i]].model].priority > s.models[reqs[c.ready[best]].model].priority)
            best = i;
        }
        return best;  // the earliest arrival among the highest priority
      }
      case Policy::kRoundRobin: {
        for (size_t k = 1; k <= n_models; ++k) {
          const size_t m = (c.rr_last + k) % n_models;
          for (size_t i = 0; i < c.ready.size(); ++i)
            if (reqs[c.ready[i]].model == m) return i;
        }
        return 0;
      }
    }
    return 0;
  };

  int64_t t = 0;
  for (;;) {
    // Idle cores pick their next segment.
    bool pending = false;
    for (Core& c : core) {
      while (c.active < 0) {
        while (c.next_arrival < c.order.size() && reqs[c.order[c.next_arrival]].ready <= t)
          c.ready.push_back(c.order[c.next_arrival++]);
        if (c.ready.empty()) break;
        const size_t slot = pick(c);
        const size_t id = c.ready[slot];
        Request& q = reqs[id];
        if (c.last >= 0 && static_cast<size_t>(c.last) != id && reqs[c.last].done < 0 &&
            reqs[c.last].next > 0)
          ++preemptions[reqs[c.last].model];
        const ModelProfile& p = profiles[q.model];
        if (p.segments.empty()) {  // a model without cycles is done on arrival
          c.ready.erase(c.ready.begin() + static_cast<long>(slot));
          complete(id, t);
          continue;
        }
        // Its weights first, when they were evicted (the core waits for the host link).
        c.active = static_cast<long>(id);
        c.start = c.run_from = t;
        pinned[q.model] = true;
        const int64_t reload = cache.use(q.model, pinned);
        if (reload > 0) {
          ++reloads[q.model];
          r.reload_cycles += reload;
          c.run_from = std::max(t, link_free) + reload;
          link_free = c.run_from;
        }
        c.left = static_cast<double>(p.segments[q.next]);
        c.last = static_cast<long>(id);
        c.rr_last = q.model;
      }
      pending = pending || c.active >= 0 || c.next_arrival < c.order.size();
    }
    if (!pending) break;

    // The segments running now slow each other down (what the cores share: DRAM, the host link).
    std::vector<size_t> running;
    for (const Core& c : core)
      if (c.active >= 0 && c.run_from <= t) running.push_back(reqs[c.active].model);
    int64_t next = std::numeric_limits<int64_t>::max();
    for (Core& c : core) {
      if (c.active < 0) {
        if (c.next_arrival < c.order.size()) next = std::min(next, reqs[c.order[c.next_arrival]].ready);
        continue;
      }
      if (c.run_from > t) {
        next = std::min(next, c.run_from);
        continue;
      }
      const size_t m = reqs[c.active].model;
      double slower = 1;
      if (!slowdown.empty())
        for (size_t other : running)
          if (other != m) slower += slowdown[m][other] - 1;
      c.rate = 1 / slower;
      // Whole cycles, rounded up (exact alone: left is whole and the rate 1).
      c.end = t + static_cast<int64_t>(std::ceil(c.left / c.rate - 1e-6));
      next = std::min(next, c.end);
    }
    const int64_t dt = next - t;
    t = next;
    for (Core& c : core) {
      if (c.active < 0 || c.run_from > t - dt) continue;  // not running over [t - dt, t)
      c.left -= static_cast<double>(dt) * c.rate;
      if (c.end != t) continue;
      // Its segment is done.
      Request& q = reqs[c.active];
      const ModelProfile& p = profiles[q.model];
      const int64_t seg = p.segments[q.next];
      if (c.slice >= 0 && r.slices[c.slice].model == q.model && r.slices[c.slice].request == q.index &&
          r.slices[c.slice].end == c.start) {
        r.slices[c.slice].end = t;
      } else {
        c.slice = static_cast<long>(r.slices.size());
        r.slices.push_back({q.model, q.index, c.start, t});
      }
      for (const auto& [name, busy] : p.unit_busy) {
        const size_t u =
            static_cast<size_t>(std::find(unit_names.begin(), unit_names.end(), name) - unit_names.begin());
        unit_busy[u] +=
            static_cast<double>(busy) * static_cast<double>(seg) / static_cast<double>(p.total_cycles);
      }
      npu_busy += t - c.run_from;
      pinned[q.model] = false;
      const size_t id = static_cast<size_t>(c.active);
      c.active = -1;
      span = std::max(span, t);
      if (++q.next == p.segments.size()) {
        c.ready.erase(std::find(c.ready.begin(), c.ready.end(), id));
        complete(id, t);  // may grow reqs: q is not used after it
      }
    }
  }

  const int64_t duration_cycles = isa::timing::us_to_cycles(s.duration_ms * 1000.0, f_mhz);
  r.cores = cores;
  r.span_cycles = std::max(span, duration_cycles);
  // Over every core the models use: busy cycles over span x cores.
  const double capacity = static_cast<double>(r.span_cycles) * static_cast<double>(cores);
  r.npu_busy = capacity > 0 ? static_cast<double>(npu_busy) / capacity : 0;
  for (size_t u = 0; u < unit_names.size(); ++u)
    r.units.emplace_back(unit_names[u], capacity > 0 ? unit_busy[u] / capacity : 0);

  const double ms_per_cycle = 1e-3 / f_mhz;
  for (size_t m = 0; m < n_models; ++m) {
    ModelStats st;
    st.name = s.models[m].name;
    st.priority = s.models[m].priority;
    st.deadline_ms = s.models[m].deadline_ms;
    const ModelProfile& p = profiles[m];
    st.alone_ms =
        static_cast<double>(p.host_before_cycles + p.total_cycles + p.host_after_cycles) * ms_per_cycle;
    st.preemptions = preemptions[m];
    st.weight_reloads = reloads[m];
    std::vector<int64_t> lat;
    int64_t last_done = duration_cycles;
    for (const Request& q : reqs) {
      if (q.model != m) continue;
      last_done = std::max(last_done, q.done + p.host_after_cycles);
      const int64_t latency = q.done + p.host_after_cycles - q.arrival;
      lat.push_back(latency);
      if (st.deadline_ms > 0 && static_cast<double>(latency) * ms_per_cycle > st.deadline_ms)
        ++st.deadline_misses;
    }
    st.requests = static_cast<int64_t>(lat.size());
    latency_figures(lat, ms_per_cycle, st);
    st.throughput_per_s = static_cast<double>(st.requests) / (s.duration_ms / 1000.0);
    st.served_per_s =
        last_done > 0 ? static_cast<double>(st.requests) / (last_done * ms_per_cycle / 1000.0) : 0;
    r.models.push_back(st);
  }
  // Frames: each first stage with stages after it, from its arrival to the last of its requests.
  for (size_t m = 0; m < n_models; ++m) {
    if (!s.models[m].after.empty()) continue;
    std::vector<size_t> stages = {m};  // the stages, upstream first
    for (size_t k = 0; k < stages.size(); ++k)
      for (size_t d = 0; d < n_models; ++d)
        if (!s.models[d].after.empty() && s.models[d].upstream == stages[k]) stages.push_back(d);
    if (stages.size() == 1) continue;
    FrameStats fs;
    fs.model = s.models[m].name;
    // A chain as "det -> cls -> rec", else each stage after its upstream: "det -> cls, det -> other".
    bool chain = true;
    for (size_t k = 1; k < stages.size(); ++k) {
      chain = chain && s.models[stages[k]].upstream == stages[k - 1];
      fs.requests += r.models[stages[k]].requests;
    }
    for (size_t k = chain ? 0 : 1; k < stages.size(); ++k) {
      const ScenarioModel& sm = s.models[stages[k]];
      fs.stages += chain ? (k ? " -> " : "") + sm.name : (k > 1 ? ", " : "") + sm.after + " -> " + sm.name;
    }
    std::vector<int64_t> lat;
    int64_t last = duration_cycles;
    for (const Frame& f : frames) {
      if (f.model != m) continue;
      lat.push_back(f.end - f.arrival);
      last = std::max(last, f.end);
    }
    fs.frames = static_cast<int64_t>(lat.size());
    latency_figures(lat, ms_per_cycle, fs);
    fs.served_per_s = static_cast<double>(fs.frames) / (static_cast<double>(last) * ms_per_cycle / 1000.0);
    r.frames.push_back(fs);
  }
  // The load the arrivals offer each core: its models' NPU cycles over the duration.
  std::vector<double> offered(static_cast<size_t>(cores), 0.0);
  for (size_t m = 0; m < n_models; ++m)
    offered[static_cast<size_t>(s.models[m].core)] +=
        static_cast<double>(r.models[m].requests) * static_cast<double>(profiles[m].total_cycles) /
        static_cast<double>(std::max<int64_t>(1, duration_cycles));
  for (size_t c = 0; c < offered.size(); ++c) {
    if (offered[c] <= r.offered_load) continue;
    r.offered_load = offered[c];
    r.busiest_core = static_cast<int64_t>(c);
  }
  return r;
}

void ServeResult::visit(traces::ReportVisitor& v, const Scenario& s) {
  using Layout = traces::ReportVisitor::Layout;
  if (!v.fills()) v.derived({"scenario", "", "the scenario file"}, s.path);
  v.text({"policy", "", "priority, fifo or round_robin"}, policy);
  v.text({"sram", "", "shared or partitioned"}, sram);
  v.real({"duration_ms", "ms", "arrivals in [0, duration_ms)"}, duration_ms);
  v.real({"frequency_mhz", "MHz", "the NPU clock"}, frequency_mhz);
  v.integer({"span_cycles", "cycles", "until the last request finished"}, span_cycles);
  v.integer({"cores", "cores", "cores the models are pinned to"}, cores);
  v.real({"npu_busy", "", "fraction of span x cores the cores ran a layer", 6}, npu_busy);
  v.real({"offered_load", "", "the busiest core's requests x cycles alone / duration", 6}, offered_load);
  v.integer({"busiest_core", "", "the core offered the most"}, busiest_core);
  v.list({"models", "", "each model of the scenario"}, models, [&](ModelStats& m, size_t i) {
    v.object({"", "", "a model"}, [&] {
      v.text({"name", "", "its name"}, m.name);
      if (!v.fills()) {
        v.derived({"model", "", "the model file or spec"}, s.models[i].model);
        v.derived({"core", "", "the core it is pinned to"}, static_cast<uint64_t>(s.models[i].core));
      }
      v.integer({"priority", "", "higher runs first"}, m.priority);
      const traces::Field deadline{"deadline_ms", "ms", "its deadline (null: none)"};
      if (m.deadline_ms > 0 || v.fills()) {
        v.real(deadline, m.deadline_ms);
      } else {
        v.null(deadline);
      }
      v.integer({"requests", "requests", "requests that arrived"}, m.requests);
      v.real({"alone_ms", "ms", "one request alone", 6}, m.alone_ms);
      // Latencies of a model without requests are null.
      for (auto& [key, value] : {std::pair<const char*, double*>{"latency_p50_ms", &m.latency_p50_ms},
                                 {"latency_p95_ms", &m.latency_p95_ms},
                                 {"latency_p99_ms", &m.latency_p99_ms},
                                 {"latency_max_ms", &m.latency_max_ms},
                                 {"latency_mean_ms", &m.latency_mean_ms}}) {
        const traces::Field f{key, "ms", "arrival to completion (null: no request)", 6};
        if (m.requests > 0 || v.fills()) {
          v.real(f, *value);
        } else {
          v.null(f);
        }
      }
      v.integer({"deadline_misses", "requests", "requests completed past their deadline"}, m.deadline_misses);
      v.real({"throughput_per_s", "requests/s", "requests completed / duration", 6}, m.throughput_per_s);
      v.real({"served_per_s", "requests/s", "requests / the time the last one completed", 6}, m.served_per_s);
      v.integer({"preemptions", "", "times a request was set aside at a layer boundary"}, m.preemptions);
      v.integer({"weight_reloads", "", "times its weights were loaded over the host link"}, m.weight_reloads);
      // Its slowdown next to each model on another core (measured on their two programs together).
      std::vector<std::string> names;
      for (size_t j = 0; !slowdown.empty() && j < models.size(); ++j)
        if (s.models[j].core != s.models[i].core) names.push_back(models[j].name);
      v.begin_map({"slowdown_next_to", "", "its slowdown next to each model on another core"}, names,
                  Layout::kInline, "");
      for (size_t j = 0, k = 0; !v.fills() && j < models.size() && k < names.size(); ++j) {
        if (s.models[j].core == s.models[i].core) continue;
        v.derived({names[k++], "", "the slowdown", 4}, slowdown[i][j]);
      }
      v.end();
    });
  });
  v.list(
      {"frames", "", "each first stage with stages after it (after:), per frame end to end"}, frames,
      [&](FrameStats& f, size_t) {
        v.object({"", "", "a first stage and its dependent stages"}, [&] {
          v.text({"model", "", "the first stage (arrivals of its own)"}, f.model);
          v.text({"stages", "", "its stages, upstream first"}, f.stages);
          v.integer({"frames", "frames", "its requests (frames)"}, f.frames);
          v.integer({"requests", "requests", "the requests its dependent stages made"}, f.requests);
          for (auto& [key, value] : {std::pair<const char*, double*>{"latency_p50_ms", &f.latency_p50_ms},
                                     {"latency_p95_ms", &f.latency_p95_ms},
                                     {"latency_p99_ms", &f.latency_p99_ms},
                                     {"latency_max_ms", &f.latency_max_ms},
                                     {"latency_mean_ms", &f.latency_mean_ms}})
            v.real({key, "ms", "a frame's arrival to its last stage's completion", 6}, *value);
          v.real({"served_per_s", "frames/s", "frames / the time the last one completed", 6}, f.served_per_s);
        });
      });
  constexpr double kMib = 1 << 20;
  v.object({"dram", "", "DRAM capacity and weights"}, [&] {
    if (v.fills()) return;
    if (dram_capacity_bytes > 0) {
      v.derived({"capacity_mib", "MiB", "the capacity (null: unlimited)"}, dram_capacity_bytes / kMib);
    } else {
      v.null({"capacity_mib", "MiB", "the capacity (null: unlimited)"});
    }
    v.derived({"needed_mib", "MiB", "what every model needs", 6}, dram_needed_bytes / kMib);
    v.boolean({"weights_resident", "", "whether all weights stay in DRAM"}, weights_resident);
    v.derived({"reload_ms", "ms", "time spent reloading weights", 6},
              static_cast<double>(reload_cycles) / frequency_mhz / 1000.0);
  });
  const size_t n =
      v.begin_list({"units", "", "each unit's utilization over the span"}, units.size(), Layout::kInline);
  if (v.fills()) units.resize(n);
  for (size_t i = 0; i < n && i < units.size(); ++i) {
    v.element(i);
    v.object({"", "", "a unit"}, [&] {
      v.text({"name", "", "the unit"}, units[i].first);
      v.real({"utilization", "", "busy cycles over all cores / (span x cores)", 6}, units[i].second);
    });
  }
  v.end();
}

std::string serve_json(const ServeResult& r, const Scenario& s) {
  // The writer only reads (no copy of the slices).
  return traces::section_json([&](traces::ReportVisitor& v) { const_cast<ServeResult&>(r).visit(v, s); }) +
         "\n";
}

std::string serve_text(const ServeResult& r) {
  std::string t = fmt::format(
      "scenario: policy {}, SRAM {}, {:g} ms of arrivals, run until {:.3f} ms; NPU busy {:.1f}%{}\n",
      r.policy, r.sram, r.duration_ms, static_cast<double>(r.span_cycles) / r.frequency_mhz / 1000.0,
      100.0 * r.npu_busy, r.cores > 1 ? fmt::format(" (over {} cores)", r.cores) : std::string());
  t += fmt::format("  {:<16} {:>4} {:>8} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8} {:>9} {:>9}\n", "model", "prio",
                   "requests", "alone ms", "p50 ms", "p95 ms", "p99 ms", "max ms", "missed", "offered/s",
                   "served/s");
  for (const ModelStats& m : r.models) {
    if (m.requests == 0) {
      t += fmt::format("  {:<16} {:>4} {:>8} {:>9.3f}   (no request arrived)\n", m.name, m.priority, 0,
                       m.alone_ms);
      continue;
    }
    t += fmt::format(
        "  {:<16} {:>4} {:>8} {:>9.3f} {:>9.3f} {:>9.3f} {:>9.3f} {:>9.3f} {:>8} {:>9.1f} {:>9.1f}\n", m.name,
        m.priority, m.requests, m.alone_ms, m.latency_p50_ms, m.latency_p95_ms, m.latency_p99_ms,
        m.latency_max_ms, m.deadline_ms > 0 ? std::to_string(m.deadline_misses) : std::string("-"),
        m.throughput_per_s, m.served_per_s);
  }
  for (const FrameStats& f : r.frames) {
    t += fmt::format(
        "  frames of {} ({}): {} frame{}, {} dependent requests; end to end p50 {:.3f} p95 {:.3f} p99 {:.3f} "
        "max {:.3f} ms; served {:.1f} frames/s\n",
        f.model, f.stages, f.frames, f.frames == 1 ? "" : "s", f.requests, f.latency_p50_ms, f.latency_p95_ms,
        f.latency_p99_ms, f.latency_max_ms, f.served_per_s);
  }
  if (r.offered_load > 1)
    t += fmt::format(
        "  OVERLOAD: the arrivals ask {:.2f}x the NPU time of {} (requests x alone / duration): its queue "
        "grows "
        "as long as requests arrive, so its latencies grow with duration_ms; served/s is what it kept up "
        "with\n",
        r.offered_load, r.cores > 1 ? fmt::format("core {}", r.busiest_core) : std::string("the NPU"));
  if (!r.weights_resident) {
    int64_t reloads = 0;
    for (const ModelStats& m : r.models) reloads += m.weight_reloads;
    t += fmt::format(
        "  DRAM: the models need {:.1f} MiB of {:.1f} MiB: {} weight reloads over the host link, {:.3f} ms\n",
        r.dram_needed_bytes / double(1 << 20), r.dram_capacity_bytes / double(1 << 20), reloads,
        static_cast<double>(r.reload_cycles) / r.frequency_mhz / 1000.0);
  }
  // Models on different cores: how much each slows down next to each other (their runs together).
  for (size_t i = 0; i < r.slowdown.size(); ++i) {
    std::string next;
    for (size_t j = 0; j < r.slowdown[i].size(); ++j)
      if (r.slowdown[i][j] > 1)
        next +=
            fmt::format("{}x{:.3f} next to {}", next.empty() ? "" : ", ", r.slowdown[i][j], r.models[j].name);
    if (!next.empty()) t += fmt::format("  shared DRAM/link: {} {}\n", r.models[i].name, next);
  }
  t += "  unit utilization:";
  for (const auto& [name, u] : r.units) t += fmt::format(" {} {:.1f}%", name, 100.0 * u);
  t += "\n";
  return t;
}

void write_serve_trace(const ServeResult& r, std::ostream& out) {
  traces::ChromeTraceSink sink(out);
  traces::TraceInfo info;
  info.frequency_mhz = r.frequency_mhz;
  std::vector<int64_t> first_label(r.models.size(), 0);
  for (size_t m = 0; m < r.models.size(); ++m) {
    info.units.push_back(r.models[m].name);
    first_label[m] = static_cast<int64_t>(info.layers.size());
    for (int64_t q = 0; q < r.models[m].requests; ++q)
      info.layers.push_back(fmt::format("{} #{}", r.models[m].name, q));
  }
  sink.begin(info);
  for (const Slice& s : r.slices) {
    traces::Event e;
    e.unit = static_cast<uint16_t>(s.model);
    e.layer = static_cast<uint32_t>(first_label[s.model] + s.request);
    e.start = static_cast<uint64_t>(s.start);
    e.end = static_cast<uint64_t>(s.end);
    sink.event(e);
  }
  sink.finish();
}

}  // namespace npusim::sim::serve
