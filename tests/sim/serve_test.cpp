// Serving scenarios (sim/serve): the scenario file's validation, arrival processes, and the scheduler's
// invariants: a model alone takes exactly its own cycles, two models at low load stay within 5% of
// alone, a higher priority never has a worse p99 at the same load.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <string>

#include "sim/serve/scenario.h"
#include "sim/serve/scheduler.h"

namespace npusim::sim::serve {
namespace {

std::string errors_of(const std::string& text) {
  try {
    parse_scenario_text(text, "s.yaml", NPUSIM_SOURCE_DIR);
  } catch (const ScenarioError& e) {
    return e.what();
  }
  return "";
}

const std::string kModel = "models:\n  - name: a\n    model: demo\n";

TEST(Scenario, ParsesModelsArrivalsAndPolicy) {
  const Scenario s = parse_scenario_text(R"(policy: round_robin
duration_ms: 500
seed: 9
set: [systolic_array.rows=16]
models:
  - {name: a, model: demo, priority: 2, deadline_ms: 5, batch: 2, precision: int8,
     arrival: {type: periodic, period_ms: 10, phase_ms: 3}}
  - {name: b, model: "gemm:M=64,N=64,K=64", arrival: {type: poisson, rate_hz: 50}}
  - {name: c, model: demo, arrival: {type: poisson, rate_hz: 50, seed: 4}}
)",
                                         "s.yaml", ".");
  EXPECT_EQ(s.policy, Policy::kRoundRobin);
  EXPECT_DOUBLE_EQ(s.duration_ms, 500);
  ASSERT_EQ(s.models.size(), 3u);
  EXPECT_EQ(s.models[0].priority, 2);
  EXPECT_EQ(s.models[0].batch, 2);
  EXPECT_EQ(s.models[0].precision, "int8");
  EXPECT_DOUBLE_EQ(s.models[0].arrivals.phase_ms, 3);
  EXPECT_EQ(s.models[1].arrivals.seed, 10u);  // the scenario's seed + its index
  EXPECT_EQ(s.models[2].arrivals.seed, 4u);
  EXPECT_EQ(s.sets, std::vector<std::string>{"systolic_array.rows=16"});
}

TEST(Scenario, BadFilesNameFileLineColumnAndKey) {
  EXPECT_EQ(errors_of("polcy: fifo\n" + kModel + "    arrival: {type: periodic, period_ms: 1}\n"),
            "s.yaml:1:1: polcy: unknown key (did you mean 'policy'?)");
  EXPECT_EQ(errors_of(kModel + "    arrival: {type: poisson, rate_hz: -5}\n"),
            "s.yaml:4:39: models[0].arrival.rate_hz: -5 is out of range (1e-09..1e+09)");
  EXPECT_EQ(errors_of(kModel + "    priority: high\n    arrival: {type: periodic, period_ms: 1}\n"),
            "s.yaml:4:15: models[0].priority: 'high' is not an integer");
  EXPECT_EQ(errors_of(kModel + "    priority: 1.5\n    arrival: {type: periodic, period_ms: 1}\n"),
            "s.yaml:4:15: models[0].priority: '1.5' is not an integer");
  EXPECT_EQ(
      errors_of(
          "models:\n  - name: a\n    model: no/such.onnx\n    arrival: {type: periodic, period_ms: 1}\n"),
      "s.yaml:3:12: models[0].model: 'no/such.onnx' does not exist");
  EXPECT_EQ(errors_of(kModel + "    arrival: {type: periodic}\n"),
            "s.yaml:4:14: models[0].arrival.period_ms: missing (periodic arrivals need a period)");
  EXPECT_EQ(errors_of(kModel + "    arrival: {type: periodic, period_ms: 1, rate_hz: 3}\n"),
            "s.yaml:4:45: models[0].arrival.rate_hz: unknown key (valid: type, period_ms, phase_ms)");
  EXPECT_EQ(errors_of(kModel + "    arrival: {type: trace, file: none.csv}\n"),
            "s.yaml:4:34: models[0].arrival.file: '" + std::string(NPUSIM_SOURCE_DIR) +
                "/none.csv' cannot be read");
  EXPECT_EQ(errors_of("duration_ms: 0\n" + kModel + "    arrival: {type: periodic, period_ms: 1}\n"),
            "s.yaml:1:14: duration_ms: 0 is out of range (1e-06..1e+09)");
  EXPECT_EQ(errors_of("policy: edf\n" + kModel + "    arrival: {type: periodic, period_ms: 1}\n"),
            "s.yaml:1:9: policy: 'edf' is not one of priority, fifo, round_robin");
  EXPECT_EQ(errors_of("sram: private\n" + kModel + "    arrival: {type: periodic, period_ms: 1}\n"),
            "s.yaml:1:7: sram: 'private' is neither 'shared' nor 'partitioned'");
  EXPECT_EQ(errors_of("duration_ms: 10\n"),
            "s.yaml:1:1: models: missing (a list of models, docs/scenarios.md)");
}

// input_shape: and dynamic: bind a model's inputs as run's --input-shape and --dynamic do.
TEST(Scenario, AModelsInputShapeAndDynamicBindItsInputs) {
  const Scenario s =
      parse_scenario_text(kModel +
                              "    input_shape: {x: 1x3x48x320, mask: 1x48}\n    dynamic: {seq: 128}\n"
                              "    arrival: {type: periodic, period_ms: 1}\n",
                          "s.yaml", ".");
  EXPECT_EQ(s.models[0].input_shapes, (std::vector<std::string>{"x=1x3x48x320", "mask=1x48"}));
  EXPECT_EQ(s.models[0].dynamic, (std::map<std::string, int64_t>{{"seq", 128}}));
  EXPECT_EQ(
      errors_of(kModel + "    input_shape: {x: 1x0x4}\n    arrival: {type: periodic, period_ms: 1}\n"),
      "s.yaml:4:22: models[0].input_shape.x: '1x0x4' is not a shape D0xD1x... of positive integers (e.g. "
      "1x3x48x320)");
  EXPECT_EQ(errors_of(kModel + "    input_shape: 1x3\n    arrival: {type: periodic, period_ms: 1}\n"),
            "s.yaml:4:18: models[0].input_shape: expected a mapping of input names to shapes, e.g. {x: "
            "1x3x48x320}");
  EXPECT_EQ(errors_of(kModel + "    dynamic: {seq: many}\n    arrival: {type: periodic, period_ms: 1}\n"),
            "s.yaml:4:20: models[0].dynamic.seq: 'many' is not an integer");
}

TEST(Scenario, PartitionedSramDividesEveryScratchpad) {
  isa::NpuConfig c;  // 256 / 128 / 128 KiB
  const isa::NpuConfig third = partitioned_sram(c, 3);
  EXPECT_EQ(third.sram.input.size_kib, 85);
  EXPECT_EQ(third.sram.weight.size_kib, 42);
  EXPECT_EQ(third.sram.accumulator.size_kib, 42);
  EXPECT_EQ(third.sram.input.banks, c.sram.input.banks);
  EXPECT_EQ(partitioned_sram(c, 1000).sram.input.size_kib, 1);
  EXPECT_TRUE(
      parse_scenario_text("sram: partitioned\n" + kModel + "    arrival: {type: periodic, period_ms: 1}\n",
                          "s.yaml", ".")
          .sram_partitioned);
}

TEST(Scenario, TraceArrivalsComeFromACsvFile) {
  const std::string dir = std::filesystem::temp_directory_path() / "npusim_serve_trace";
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/t.csv") << "time_ms\n5\n1.5\n\n20\n";
  const Scenario s = parse_scenario_text(kModel + "    arrival: {type: trace, file: t.csv}\n", "s.yaml", dir);
  EXPECT_EQ(s.models[0].arrivals.trace_ms, (std::vector<double>{1.5, 5, 20}));
  EXPECT_EQ(arrival_times_ms(s.models[0].arrivals, 10), (std::vector<double>{1.5, 5}));
  std::ofstream(dir + "/bad.csv") << "1\nsoon\n";
  EXPECT_NE(errors_of(kModel + "    arrival: {type: trace, file: " + dir + "/bad.csv}\n")
                .find("bad.csv:2: models[0].arrival.file (from s.yaml): 'soon' is not an arrival time"),
            std::string::npos);
}

TEST(Scenario, APipelinePerModelIsCheckedToo) {
  const std::string dir = std::filesystem::temp_directory_path() / "npusim_serve_pipeline";
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/p.yaml") << "post:\n  - {op: fixed, time_us: 10}\n";
  std::ofstream(dir + "/stream.yaml") << "stream: {frames: 3}\n";
  std::ofstream(dir + "/bad.yaml") << "post:\n  - {op: fixd}\n";
  const std::string head = kModel + "    arrival: {type: periodic, period_ms: 1}\n    pipeline: ";
  const Scenario s = parse_scenario_text(head + "p.yaml\n", "s.yaml", dir);
  ASSERT_TRUE(s.models[0].pipeline_spec.has_value());
  EXPECT_EQ(s.models[0].pipeline_spec->post.size(), 1u);
  EXPECT_EQ(errors_of(head + dir + "/stream.yaml\n"),
            "s.yaml:5:15: models[0].pipeline: '" + dir +
                "/stream.yaml' has a stream: section; in a scenario the model's arrivals are its stream");
  EXPECT_EQ(errors_of(head + dir + "/bad.yaml\n"),
            dir + "/bad.yaml:2:10: post[0].op: 'fixd' is not a kernel (did you mean 'fixed'?)");
  EXPECT_EQ(errors_of(head + "none.yaml\n"), "s.yaml:5:15: models[0].pipeline: 'none.yaml' does not exist");
}

TEST(Scenario, ArrivalProcesses) {
  Arrivals p;
  p.period_ms = 10;
  p.phase_ms = 2.5;
  EXPECT_EQ(arrival_times_ms(p, 40), (std::vector<double>{2.5, 12.5, 22.5, 32.5}));
  Arrivals q;
  q.kind = Arrivals::Kind::kPoisson;
  q.rate_hz = 1000;
  q.seed = 3;
  const std::vector<double> t = arrival_times_ms(q, 10000);
  EXPECT_NEAR(static_cast<double>(t.size()), 10000, 400);  // 1000/s for 10 s
  EXPECT_EQ(t, arrival_times_ms(q, 10000));                // the seed fixes them
  q.seed = 4;
  EXPECT_NE(t, arrival_times_ms(q, 10000));
}

TEST(Scheduler, LayerSegmentsAddUpToTheRun) {
  EXPECT_EQ(layer_segments({100, 90, 250, 250, 400}, 420), (std::vector<int64_t>{100, 150, 150, 20}));
  EXPECT_EQ(layer_segments({}, 50), std::vector<int64_t>{50});
  traces::Report report;
  report.total_cycles = 300;
  traces::LayerReport conv, relu, fc;
  conv.end_cycle = 120;
  relu.placement = traces::LayerPlacement::kFused;  // no boundary of its own
  relu.end_cycle = 10;
  fc.end_cycle = 280;
  report.layers = {conv, relu, fc};
  traces::UnitReport matrix;
  matrix.name = "matrix";
  matrix.busy = 200;
  report.units = {matrix};
  const ModelProfile p = profile_of("m", report);
  EXPECT_EQ(p.segments, (std::vector<int64_t>{120, 160, 20}));
  EXPECT_EQ(p.total_cycles, 300);
  EXPECT_EQ(p.unit_busy, (std::vector<std::pair<std::string, int64_t>>{{"matrix", 200}}));
}

// A model of `layers` layers of `cycles` each.
ModelProfile profile(const std::string& name, int layers, int64_t cycles) {
  ModelProfile p;
  p.name = name;
  p.segments.assign(layers, cycles);
  p.total_cycles = layers * cycles;
  p.unit_busy = {{"matrix", p.total_cycles / 2}};
  return p;
}

ScenarioModel model(const std::string& name, int64_t priority, Arrivals a) {
  ScenarioModel m;
  m.name = name;
  m.priority = priority;
  m.arrivals = a;
  return m;
}

Arrivals poisson(double rate_hz, uint32_t seed) {
  Arrivals a;
  a.kind = Arrivals::Kind::kPoisson;
  a.rate_hz = rate_hz;
  a.seed = seed;
  return a;
}

TEST(Scheduler, AModelAloneTakesExactlyItsOwnCycles) {
  Scenario s;
  s.duration_ms = 1000;
  Arrivals once;
  once.period_ms = 1e6;  // one request
  s.models = {model("a", 0, once)};
  const ModelProfile p = {"a", {123, 4567, 89}, 123 + 4567 + 89, {{"matrix", 2000}}};
  for (Policy policy : {Policy::kPriority, Policy::kFifo, Policy::kRoundRobin}) {
    s.policy = policy;
    const ServeResult r = run_scenario(s, {p}, 1000);
    ASSERT_EQ(r.models[0].requests, 1);
    EXPECT_DOUBLE_EQ(r.models[0].latency_max_ms, 4779 / 1e6);
    EXPECT_DOUBLE_EQ(r.models[0].alone_ms, 4779 / 1e6);
    EXPECT_NEAR(r.units[0].second, 2000.0 / 1e9, 1e-15);  // busy over the 1 s span
  }
}

TEST(Scheduler, APipelinesHostStagesAddToEachRequestAndItsNpuStagesToTheNpu) {
  e2e::E2eResult pipeline;
  pipeline.batch = 1;
  auto stage = [](const std::string& unit, int64_t cycles) {
    e2e::Stage st;
    st.unit = unit;
    st.cycles = cycles;
    return st;
  };
  pipeline.stages = {stage("host_cpu", 700), stage("host_link", 300), stage("npu", 50),
                     stage("npu", 1000),     stage("host_link", 20),  stage("host_cpu", 4000)};
  pipeline.model_stage = 3;
  ModelProfile p = profile("a", 2, 500);
  add_pipeline(p, pipeline);
  EXPECT_EQ(p.host_before_cycles, 1000);
  EXPECT_EQ(p.host_after_cycles, 4020);
  EXPECT_EQ(p.segments, (std::vector<int64_t>{50, 500, 500}));
  EXPECT_EQ(p.total_cycles, 1050);
  Scenario s;
  s.duration_ms = 0.01;
  Arrivals a;
  a.period_ms = 0.002;  // 5 requests, 2000 cycles apart: the host stages overlap, the NPU (1050) keeps up
  s.models = {model("a", 0, a)};
  const ServeResult r = run_scenario(s, {p}, 1000);
  EXPECT_EQ(r.models[0].requests, 5);
  EXPECT_DOUBLE_EQ(r.models[0].alone_ms, 6070 / 1e6);
  EXPECT_DOUBLE_EQ(r.models[0].latency_max_ms, 6070 / 1e6);
  EXPECT_EQ(r.slices.front().start, 1000);  // the first request reaches the NPU after its host stages
}

TEST(Scheduler, TwoModelsAtLowLoadStayWithinFivePercentOfAlone) {
  // 2 ms and 1 ms models at 5 requests/s each: 1.5% load. A request that meets the other model's waits for
  // it (or, round robin, shares the NPU with it), so the mean rises by about the load times the other's time.
  for (Policy policy : {Policy::kPriority, Policy::kFifo, Policy::kRoundRobin}) {
    for (uint32_t seed = 1; seed <= 5; ++seed) {
      Scenario s;
      s.policy = policy;
      s.duration_ms = 40000;
      s.models = {model("a", 1, poisson(5, seed)), model("b", 0, poisson(5, seed + 100))};
      const ServeResult r = run_scenario(s, {profile("a", 40, 50000), profile("b", 20, 50000)}, 1000);
      for (const ModelStats& m : r.models) {
        EXPECT_GT(m.requests, 150);
        EXPECT_LE(m.latency_mean_ms, 1.05 * m.alone_ms) << m.name << " seed " << seed << " " << r.policy;
        EXPECT_EQ(m.latency_p50_ms, m.alone_ms) << m.name;
      }
    }
  }
}

TEST(Scheduler, AHigherPriorityNeverHasAWorseP99AtTheSameLoad) {
  for (double rate :
       {50.0, 150.0, 300.0}) {  // 10% to 60% load each of two 1 ms models... up to 120% in total
    for (uint32_t seed = 1; seed <= 4; ++seed) {
      Scenario s;
      s.policy = Policy::kPriority;
      s.duration_ms = 5000;
      s.models = {model("low", 0, poisson(rate, seed)), model("high", 5, poisson(rate, seed + 50))};
      const ServeResult r = run_scenario(s, {profile("low", 10, 100000), profile("high", 10, 100000)}, 1000);
      EXPECT_LE(r.models[1].latency_p99_ms, r.models[0].latency_p99_ms)
          << "rate " << rate << " seed " << seed;
      if (rate >= 150) {
        EXPECT_GT(r.models[1].preemptions + r.models[0].preemptions, 0);
      }
    }
  }
}

// Models "a" and "b" of priorities `pa` and `pb`, one request each at time 0, over 1 ms.
Scenario both_at_zero(int64_t pa, int64_t pb) {
  Scenario s;
  s.duration_ms = 1;
  Arrivals at0;
  at0.period_ms = 1e6;
  s.models = {model("a", pa, at0), model("b", pb, at0)};
  return s;
}

// Requests of 1 ms alone arriving every 0.5 ms ask twice the NPU's time: offered load 2, an OVERLOAD line,
// and the served rate is what one request per ms of NPU time allows over the time the last completes.
TEST(Scheduler, AnOverloadedNpuSaysSoAndServesFewerRequestsPerSecondThanArrive) {
  Scenario s;
  s.duration_ms = 10;
  Arrivals every;
  every.period_ms = 0.5;
  s.models = {model("a", 0, every)};
  const ServeResult r = run_scenario(s, {profile("a", 2, 500000)}, 1000);  // 1 ms at 1 GHz
  ASSERT_EQ(r.models[0].requests, 20);
  EXPECT_DOUBLE_EQ(r.offered_load, 2.0);
  EXPECT_DOUBLE_EQ(r.models[0].throughput_per_s, 2000.0);
  // Back to back from the first arrival: the 20th completes at 20 ms.
  EXPECT_DOUBLE_EQ(r.models[0].served_per_s, 1000.0);
  EXPECT_NE(serve_text(r).find("OVERLOAD: the arrivals ask 2.00x the NPU time of the NPU"), std::string::npos)
      << serve_text(r);
  // At half the rate the NPU keeps up: no overload line, served = offered.
  every.period_ms = 2;
  s.models = {model("a", 0, every)};
  const ServeResult calm = run_scenario(s, {profile("a", 2, 500000)}, 1000);
  EXPECT_DOUBLE_EQ(calm.offered_load, 0.5);
  EXPECT_DOUBLE_EQ(calm.models[0].served_per_s, calm.models[0].throughput_per_s);
  EXPECT_EQ(serve_text(calm).find("OVERLOAD"), std::string::npos);
}

TEST(Scheduler, FifoNeverPreemptsAndRoundRobinAlternates) {
  Scenario s = both_at_zero(0, 9);
  const std::vector<ModelProfile> p = {profile("a", 3, 10), profile("b", 3, 10)};
  s.policy = Policy::kFifo;
  ServeResult r = run_scenario(s, p, 1000);
  EXPECT_EQ(r.slices.size(), 2u);  // a then b, each in one piece
  EXPECT_EQ(r.models[0].preemptions + r.models[1].preemptions, 0);
  s.policy = Policy::kRoundRobin;
  r = run_scenario(s, p, 1000);
  ASSERT_EQ(r.slices.size(), 6u);  // a b a b a b
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(r.slices[i].model, i % 2);
  s.policy = Policy::kPriority;
  r = run_scenario(s, p, 1000);
  ASSERT_EQ(r.slices.size(), 2u);
  EXPECT_EQ(r.slices[0].model, 1u);  // b first: its priority is higher
}

TEST(Scheduler, ModelsOnDifferentCoresDoNotWaitForEachOther) {
  // Both arrive at 0: on one core the second waits for the first; pinned to two cores, neither waits.
  Scenario s = both_at_zero(1, 0);
  const std::vector<ModelProfile> p = {profile("a", 3, 1000), profile("b", 2, 1000)};
  ServeResult r = run_scenario(s, p, 1000);
  EXPECT_EQ(r.cores, 1);
  EXPECT_DOUBLE_EQ(r.models[1].latency_max_ms, 5000 / 1e6);  // after a's 3000 cycles
  s.models[1].core = 1;
  r = run_scenario(s, p, 1000);
  EXPECT_EQ(r.cores, 2);
  EXPECT_DOUBLE_EQ(r.models[0].latency_max_ms, 3000 / 1e6);
  EXPECT_DOUBLE_EQ(r.models[1].latency_max_ms, 2000 / 1e6);
  // Busy 5000 cycles over two cores' 1 ms span (the duration).
  EXPECT_NEAR(r.npu_busy, 5000.0 / (2 * 1e6), 1e-12);
}

TEST(Scheduler, OverlappingSegmentsOnTwoCoresAreEachSlowerAndApartTheyAreNot) {
  // a slows down x2 while b runs on the other core, b x1.5 while a runs. Both at 0: a runs at 1/2, b at
  // 2/3 until b's 1000 cycles end at 1500 (a has done 750 of its 1000), then a alone: 1750.
  Scenario s = both_at_zero(0, 0);
  s.models[1].core = 1;
  const std::vector<ModelProfile> p = {profile("a", 2, 500), profile("b", 1, 1000)};
  const Slowdowns slow = {{1, 2}, {1.5, 1}};
  ServeResult r = run_scenario(s, p, 1000, 0, slow);
  EXPECT_DOUBLE_EQ(r.models[0].latency_max_ms, 1750 / 1e6);
  EXPECT_DOUBLE_EQ(r.models[1].latency_max_ms, 1500 / 1e6);
  // The report says by how much each slows down next to the other.
  EXPECT_NE(serve_text(r).find("shared DRAM/link: a x2.000 next to b"), std::string::npos) << serve_text(r);
  const std::string j = serve_json(r, s);
  EXPECT_NE(j.find("\"slowdown_next_to\": {\"b\": 2.0000}"), std::string::npos) << j;
  EXPECT_NE(j.find("\"slowdown_next_to\": {\"a\": 1.5000}"), std::string::npos) << j;
  // b arrives when a is done: neither is slowed.
  s.models[1].arrivals.phase_ms = 0.002;
  r = run_scenario(s, p, 1000, 0, slow);
  EXPECT_DOUBLE_EQ(r.models[0].latency_max_ms, 1000 / 1e6);
  EXPECT_DOUBLE_EQ(r.models[1].latency_max_ms, 1000 / 1e6);
  // On one core they never overlap: the slowdowns do not apply, b waits instead.
  s.models[1].core = 0;
  s.models[1].arrivals.phase_ms = 0;
  r = run_scenario(s, p, 1000, 0, slow);
  EXPECT_DOUBLE_EQ(r.models[0].latency_max_ms, 1000 / 1e6);
  EXPECT_DOUBLE_EQ(r.models[1].latency_max_ms, 2000 / 1e6);
}

TEST(Scheduler, ThreeCoresAddTheirSlowdowns) {
  Scenario s = both_at_zero(0, 0);
  s.models[1].core = 1;
  s.models.push_back(s.models[1]);
  s.models[2].name = "c";
  s.models[2].core = 2;
  const std::vector<ModelProfile> p = {profile("a", 1, 1000), profile("b", 1, 1000), profile("c", 1, 1000)};
  // Each x1.5 next to each other: 1 + 0.5 + 0.5 = x2 with both others running, all 3 end at 2000.
  const Slowdowns slow = {{1, 1.5, 1.5}, {1.5, 1, 1.5}, {1.5, 1.5, 1}};
  const ServeResult r = run_scenario(s, p, 1000, 0, slow);
  for (const ModelStats& m : r.models) EXPECT_DOUBLE_EQ(m.latency_max_ms, 2000 / 1e6) << m.name;
}

traces::Report run_with_layer_ends(std::vector<uint64_t> ends) {
  traces::Report r;
  for (uint64_t e : ends) {
    traces::LayerReport l;
    l.end_cycle = e;
    r.layers.push_back(l);
  }
  r.total_cycles = ends.back();
  return r;
}

TEST(Scheduler, CoRunSlowdownsOfTheShorterRunAreItsWholeRunsAndOfTheLongerTheOverlappedPart) {
  // a: 1000 alone, 1500 next to b. b: two layers of 1000 alone; next to a its first layer took 2000, so by
  // a's end (1500) it had done 750 cycles' work: x2.
  const auto [a, b] = co_run_slowdowns(run_with_layer_ends({1000}), run_with_layer_ends({1500}),
                                       run_with_layer_ends({1000, 2000}), run_with_layer_ends({2000, 3000}));
  EXPECT_DOUBLE_EQ(a, 1.5);
  EXPECT_DOUBLE_EQ(b, 2.0);
  // Never below 1.
  const auto [c, d] = co_run_slowdowns(run_with_layer_ends({1000}), run_with_layer_ends({999}),
                                       run_with_layer_ends({1000}), run_with_layer_ends({1000}));
  EXPECT_DOUBLE_EQ(c, 1.0);
  EXPECT_DOUBLE_EQ(d, 1.0);
}

TEST(Scenario, AModelsOwnSetKeepsItsKeysAndRefusesSharedOnes) {
  const Scenario s = parse_scenario_text(
      "models:\n  - {name: a, model: demo, set: [systolic_array.rows=16, lowering.conv=im2col], arrival: "
      "{type: "
      "periodic, period_ms: 1}}\n",
      "s.yaml", ".");
  EXPECT_EQ(s.models[0].sets, (std::vector<std::string>{"systolic_array.rows=16", "lowering.conv=im2col"}));
  EXPECT_EQ(s.models[0].set_line, 2);
  EXPECT_EQ(s.models[0].set_column, 33);
  EXPECT_EQ(
      errors_of(kModel + "    set: [host.cpu_gops=1]\n    arrival: {type: periodic, period_ms: 1}\n"),
      "s.yaml:4:11: models[0].set: 'host.cpu_gops' is shared by every model of the NPU (or describes the "
      "whole chip); set it in the scenario's set");
}

TEST(Scenario, CoreIsCheckedAgainstTheConfigurationsCores) {
  const Scenario s = parse_scenario_text(
      "models:\n  - {name: a, model: demo, core: 1, arrival: {type: periodic, period_ms: 1}}\n"
      "  - {name: b, model: demo, arrival: {type: periodic, period_ms: 1}}\n",
      "s.yaml", ".");
  EXPECT_EQ(models_per_core(s, 2), (std::vector<size_t>{1, 1}));
  EXPECT_EQ(models_per_core(s, 4), (std::vector<size_t>{1, 1}));
  try {
    models_per_core(s, 1);
    ADD_FAILURE() << "core 1 of 1 accepted";
  } catch (const ScenarioError& e) {
    EXPECT_EQ(std::string(e.what()),
              "s.yaml:2:34: models[0].core: 1 but the configuration has 1 core (0..0)");
  }
  EXPECT_EQ(errors_of(kModel + "    core: 1.5\n    arrival: {type: periodic, period_ms: 1}\n"),
            "s.yaml:4:11: models[0].core: '1.5' is not an integer");
}

// Two models of 1000 weight bytes each that alternate on one core; the link reloads weights in 700 cycles.
struct Alternating {
  Scenario s;
  std::vector<ModelProfile> p = {profile("a", 1, 100), profile("b", 1, 100)};
  Alternating() {
    s.duration_ms = 1;
    Arrivals a, b;
    a.period_ms = b.period_ms = 0.25;  // a at 0, 0.25, 0.5, 0.75 ms; b 0.1 ms after each
    b.phase_ms = 0.1;
    s.models = {model("a", 0, a), model("b", 0, b)};
    for (ModelProfile& m : p) {
      m.weight_bytes = 1000;
      m.activation_bytes = 200;
      m.reload_cycles = 700;
    }
  }
};

TEST(Scheduler, WeightsStayResidentWhenDramHoldsEveryModel) {
  Alternating x;
  const ServeResult r = run_scenario(x.s, x.p, 1000, 2400);  // 2 x (1000 + 200): everything fits
  EXPECT_TRUE(r.weights_resident);
  EXPECT_EQ(r.reload_cycles, 0);
  for (const ModelStats& m : r.models) {
    EXPECT_EQ(m.weight_reloads, 0);
    EXPECT_DOUBLE_EQ(m.latency_max_ms, 100 / 1e6);
  }
}

TEST(Scheduler, EveryModelSwitchReloadsWeightsWhenDramHoldsOnlyOne) {
  // 400 bytes of activations + one model's 1000 weight bytes fit in 1500, two do not: a is loaded
  // before the run; b's first request reloads (evicting a), a's next reloads (evicting b), and so on.
  Alternating x;
  const ServeResult r = run_scenario(x.s, x.p, 1000, 1500);
  EXPECT_FALSE(r.weights_resident);
  EXPECT_EQ(r.dram_needed_bytes, 2400);
  EXPECT_EQ(r.models[0].weight_reloads, 3);  // all but the first of its 4 requests
  EXPECT_EQ(r.models[1].weight_reloads, 4);
  EXPECT_EQ(r.reload_cycles, 7 * 700);
  EXPECT_DOUBLE_EQ(r.models[0].latency_p50_ms, (700 + 100) / 1e6);
  EXPECT_DOUBLE_EQ(r.models[1].latency_max_ms, (700 + 100) / 1e6);
  EXPECT_NE(serve_json(r, x.s).find("\"weights_resident\": false"), std::string::npos);
  EXPECT_NE(serve_text(r).find("7 weight reloads over the host link"), std::string::npos) << serve_text(r);
}

TEST(Scheduler, DramTooSmallForOneModelPerCoreIsAScenarioError) {
  Alternating x;
  EXPECT_THROW(run_scenario(x.s, x.p, 1000, 1300), ScenarioError);  // 400 + 1000 > 1300
  x.s.models[1].core = 1;  // each core's model must fit at once: 400 + 1000 + 1000
  EXPECT_THROW(run_scenario(x.s, x.p, 1000, 2399), ScenarioError);
  EXPECT_NO_THROW(run_scenario(x.s, x.p, 1000, 2400));
}

TEST(Scheduler, WeightReloadsOnSeveralCoresTakeTheLinkInTurnAndNeverEvictARunningModel) {
  // a and b on core 0, c on core 1; 1000 weight bytes and 200 of activations each; DRAM holds the
  // activations and two models' weights (a and b, loaded before the run). At 0 a runs (resident) and c
  // reloads over the link (evicting b, the least recently used) until 700, then runs to 800. b arrives at
  // 50 and is picked at 100: its weights evict a (c's are in use on core 1) and wait for the link until
  // 700: reload to 1400, run to 1500.
  Scenario s;
  s.duration_ms = 1;
  Arrivals at0, at50;
  at0.period_ms = at50.period_ms = 1e6;
  at50.phase_ms = 50 / 1e6;
  s.models = {model("a", 0, at0), model("b", 0, at50), model("c", 0, at0)};
  s.models[2].core = 1;
  std::vector<ModelProfile> p = {profile("a", 1, 100), profile("b", 1, 100), profile("c", 1, 100)};
  for (ModelProfile& m : p) {
    m.weight_bytes = 1000;
    m.activation_bytes = 200;
    m.reload_cycles = 700;
  }
  const ServeResult r = run_scenario(s, p, 1000, 2600);
  EXPECT_FALSE(r.weights_resident);
  EXPECT_EQ(r.models[0].weight_reloads, 0);
  EXPECT_EQ(r.models[1].weight_reloads, 1);
  EXPECT_EQ(r.models[2].weight_reloads, 1);
  EXPECT_DOUBLE_EQ(r.models[0].latency_max_ms, 100 / 1e6);
  EXPECT_DOUBLE_EQ(r.models[2].latency_max_ms, 800 / 1e6);
  EXPECT_DOUBLE_EQ(r.models[1].latency_max_ms, 1450 / 1e6);
  // The activations and the largest weights of each core must fit: 600 + 1000 + 1000.
  EXPECT_THROW(run_scenario(s, p, 1000, 2599), ScenarioError);
}

// Issue 40, item 4: dependent stages (docs/scenarios.md, "Dependent stages").
TEST(Scenario, DependentStagesNameAnotherModelAndHaveNoArrivalsOfTheirOwn) {
  const Scenario s = parse_scenario_text(R"(models:
  - {name: det, model: demo, arrival: {type: periodic, period_ms: 100}}
  - {name: cls, model: demo, after: det, fanout: [3, 0, 5]}
  - {name: rec, model: demo, after: cls}
)",
                                         "s.yaml", ".");
  ASSERT_EQ(s.models.size(), 3u);
  EXPECT_EQ(s.models[1].after, "det");
  EXPECT_EQ(s.models[1].upstream, 0u);
  EXPECT_EQ(s.models[1].fanout, (std::vector<int64_t>{3, 0, 5}));
  EXPECT_EQ(s.models[2].upstream, 1u);
  EXPECT_EQ(s.models[2].fanout, std::vector<int64_t>{1});
  const std::string det = "models:\n  - {name: det, model: demo, arrival: {type: periodic, period_ms: 1}}\n";
  EXPECT_EQ(errors_of(det + "  - {name: rec, model: demo, after: dett}\n"),
            "s.yaml:3:37: models[1].after: 'dett' is not a model of the scenario (det, rec)");
  EXPECT_EQ(
      errors_of(det + "  - {name: rec, model: demo, after: det, arrival: {type: periodic, period_ms: 1}}\n"),
      "s.yaml:3:51: models[1].arrival: a model that runs after another has no arrivals of its own (its "
      "requests are made by 'det')");
  EXPECT_EQ(
      errors_of(det + "  - {name: rec, model: demo, fanout: 2, arrival: {type: periodic, period_ms: 1}}\n"),
      "s.yaml:3:38: models[1].fanout: only a model that runs after another (after: MODEL) has a fanout");
  EXPECT_EQ(errors_of(det + "  - {name: rec, model: demo, after: det, fanout: [2, -1]}\n"),
            "s.yaml:3:54: models[1].fanout[1]: -1 is out of range (0..1000)");
  EXPECT_EQ(
      errors_of(det + "  - {name: a, model: demo, after: b}\n  - {name: b, model: demo, after: a}\n"),
      "s.yaml:3:35: models[1].after: 'b' leads back to 'a' (a cycle): the first stage needs arrivals of "
      "its own\ns.yaml:4:35: models[2].after: 'a' leads back to 'b' (a cycle): the first stage needs "
      "arrivals of its own");
  EXPECT_EQ(
      errors_of("models:\n  - {name: a, model: demo}\n"),
      "s.yaml:2:5: models[0].arrival: missing (periodic, poisson or trace; or after: MODEL for a dependent "
      "stage)");
}

// A detector of 1000 cycles, then per crop a classifier of 100 and a recogniser of 200 (one layer each),
// one frame every 10 ms with 2, 0 and 1 crops. Frame 0: det 0..1000, cls 1000..1100 and 1100..1200 (each
// crop's recognition becomes ready as its classification ends, after the other crop's classification,
// which arrived first), rec 1200..1400 and 1400..1600: done at 1600. Frame 1: det only, 1000. Frame 2:
// 1000 + 100 + 200 = 1300.
TEST(Scheduler, AFrameEndsWithTheLastRequestItLedTo) {
  Scenario s;
  s.duration_ms = 30;
  Arrivals a;
  a.period_ms = 10;
  ScenarioModel det = model("det", 0, a), cls = model("cls", 0, {}), rec = model("rec", 0, {});
  cls.after = "det";
  cls.upstream = 0;
  cls.fanout = {2, 0, 1};
  rec.after = "cls";
  rec.upstream = 1;
  s.models = {det, cls, rec};
  for (Policy policy : {Policy::kPriority, Policy::kFifo}) {
    s.policy = policy;
    const ServeResult r =
        run_scenario(s, {profile("det", 1, 1000), profile("cls", 1, 100), profile("rec", 1, 200)}, 1000);
    ASSERT_EQ(r.frames.size(), 1u);
    const FrameStats& f = r.frames[0];
    EXPECT_EQ(f.model, "det");
    EXPECT_EQ(f.stages, "det -> cls -> rec");
    EXPECT_EQ(f.frames, 3);
    EXPECT_EQ(f.requests, 6);  // 3 classifications, 3 recognitions
    EXPECT_DOUBLE_EQ(f.latency_max_ms, 1600 / 1e6);
    EXPECT_DOUBLE_EQ(f.latency_p50_ms, 1300 / 1e6);
    EXPECT_DOUBLE_EQ(f.latency_mean_ms, (1600 + 1000 + 1300) / 3.0 / 1e6);
    EXPECT_EQ(r.models[1].requests, 3);
    EXPECT_EQ(r.models[2].requests, 3);
    // A recognition's own latency runs from its classification's end: frame 0's second waits for the first
    // (1200..1400), made at 1200, done at 1600: 400.
    EXPECT_DOUBLE_EQ(r.models[2].latency_max_ms, 400 / 1e6);
    // The offered load counts the dependent requests: (3 x 1000 + 3 x 100 + 3 x 200) / 30 ms of 1e6 cycles.
    EXPECT_DOUBLE_EQ(r.offered_load, 3900.0 / 30e6);
  }
  // A tree: two stages after one; the frame waits for both.
  ScenarioModel other = model("other", 0, {});
  other.after = "det";
  other.upstream = 0;
  other.fanout = {1};
  s.models = {det, cls, rec, other};
  s.policy = Policy::kFifo;
  const ServeResult r = run_scenario(
      s, {profile("det", 1, 1000), profile("cls", 1, 100), profile("rec", 1, 200), profile("other", 1, 5000)},
      1000);
  ASSERT_EQ(r.frames.size(), 1u);
  EXPECT_EQ(r.frames[0].stages, "det -> cls, det -> other, cls -> rec");
  EXPECT_GE(r.frames[0].latency_max_ms, 6000 / 1e6);
}

// fanout: {poisson_mean: 3}: each frame's crop count drawn from Poisson(3), the same for the same frame.
TEST(Scheduler, APoissonFanoutAveragesItsMean) {
  const Scenario parsed = parse_scenario_text(R"(seed: 5
models:
  - {name: det, model: demo, arrival: {type: periodic, period_ms: 1}}
  - {name: rec, model: demo, after: det, fanout: {poisson_mean: 3}}
)",
                                              "s.yaml", ".");
  EXPECT_DOUBLE_EQ(parsed.models[1].fanout_mean, 3);
  EXPECT_EQ(parsed.models[1].fanout_seed, 6u);  // the scenario's seed + the model's index
  EXPECT_EQ(errors_of("models:\n  - {name: det, model: demo, arrival: {type: periodic, period_ms: 1}}\n"
                      "  - {name: rec, model: demo, after: det, fanout: {mean: 3}}\n"),
            "s.yaml:3:51: models[1].fanout.mean: unknown key (valid: poisson_mean, seed)\n"
            "s.yaml:3:50: models[1].fanout.poisson_mean: missing (the mean crop count per upstream request)");
  Scenario s = parsed;
  s.duration_ms = 2000;  // 2000 frames, 1 ms apart; 10 + 3 x 1 cycles each: no queueing
  const ServeResult a = run_scenario(s, {profile("det", 1, 10), profile("rec", 1, 1)}, 1000);
  ASSERT_EQ(a.models[0].requests, 2000);
  // Poisson(3) over 2000 frames: the mean within 4 standard deviations (sqrt(3 / 2000) = 0.039).
  EXPECT_NEAR(static_cast<double>(a.models[1].requests) / 2000.0, 3.0, 0.16);
  EXPECT_GT(a.frames[0].latency_max_ms, a.frames[0].latency_p50_ms);  // the counts differ
  // The same counts under another policy (each request draws from its own stream).
  s.policy = Policy::kRoundRobin;
  EXPECT_EQ(run_scenario(s, {profile("det", 1, 10), profile("rec", 1, 1)}, 1000).models[1].requests,
            a.models[1].requests);
}

TEST(Scheduler, AModelWithoutRequestsHasNoLatencies) {
  Scenario s;
  s.duration_ms = 1;
  Arrivals late;
  late.period_ms = 1;
  late.phase_ms = 5;  // after the duration
  s.models = {model("late", 0, late)};
  const ServeResult r = run_scenario(s, {profile("late", 2, 10)}, 1000);
  EXPECT_EQ(r.models[0].requests, 0);
  const std::string j = serve_json(r, s);
  EXPECT_NE(j.find("\"latency_p99_ms\": null"), std::string::npos) << j;
  EXPECT_NE(j.find("\"deadline_ms\": null"), std::string::npos) << j;
  EXPECT_NE(serve_text(r).find("(no request arrived)"), std::string::npos);
}

}  // namespace
}  // namespace npusim::sim::serve
