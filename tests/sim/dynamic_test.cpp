// Shape profiles, request files and shape policies (sim/dynamic) on a model whose cost is given in closed
// form: a shape of sequence length s takes s/100 ms and s * 1000 MACs over 10 layers, so every expected
// latency below follows from the arrival times and these figures.
#include <gtest/gtest.h>

#include <map>

#include "sim/dynamic/policies.h"
#include "sim/dynamic/profiles.h"
#include "sim/dynamic/requests.h"

namespace npusim::sim::dynamic {
namespace {

struct FakeModel {
  std::map<DimBinding, ShapeRun> runs;
  int asked = 0;
  ShapeCost cost() {
    return [this](const DimBinding& b) -> const ShapeRun& {
      auto it = runs.find(b);
      if (it != runs.end()) return it->second;
      ++asked;
      const int64_t s = b.at("seq");
      ShapeRun r;
      r.total_cycles = static_cast<uint64_t>(s) * 1000;
      r.latency_ms = static_cast<double>(s) / 100.0;
      r.serial_cycles = r.total_cycles * 3 / 2;  // layers would take 1.5x without overlap
      r.macs = static_cast<uint64_t>(s) * 1000;
      r.layers = 10;
      r.compile_seconds = 0.5;
      return runs.emplace(b, r).first->second;
    };
  }
};

std::vector<DimBinding> seq_profiles() { return profile_bindings(parse_dynamic_specs({"seq=256,64,128"})); }

std::vector<Request> stream(const std::vector<std::pair<int64_t, double>>& rows) {
  std::string text = "seq,arrival_ms\n";
  for (const auto& [s, t] : rows) text += std::to_string(s) + "," + std::to_string(t) + "\n";
  return parse_requests(text, "r.csv", {"seq"});
}

TEST(DynamicProfiles, ValuesSortedAndEveryCombinationListed) {
  const auto dims = parse_dynamic_specs({"seq=128,64", "batch=1,4"});
  ASSERT_EQ(dims.size(), 2u);
  EXPECT_EQ(dims[0].values, (std::vector<int64_t>{64, 128}));
  const auto ps = profile_bindings(dims);
  ASSERT_EQ(ps.size(), 4u);
  EXPECT_EQ(binding_text(ps.front()), "batch=1,seq=64");
  EXPECT_EQ(binding_text(ps.back()), "batch=4,seq=128");
}

TEST(DynamicProfiles, MalformedSpecsAreRejectedByName) {
  EXPECT_THROW(parse_dynamic_specs({"seq"}), DynamicUsageError);
  EXPECT_THROW(parse_dynamic_specs({"seq=64,x"}), DynamicUsageError);
  EXPECT_THROW(parse_dynamic_specs({"seq=0"}), DynamicUsageError);
  EXPECT_THROW(parse_dynamic_specs({"seq=64,64"}), DynamicUsageError);
  EXPECT_THROW(parse_dynamic_specs({"seq=64", "seq=128"}), DynamicUsageError);
  EXPECT_THROW(parse_dynamic_specs({"seq=64,"}), DynamicUsageError);
}

TEST(DynamicRequests, RowsCommentsAndDefaultArrival) {
  const auto rs = parse_requests("# a stream\nseq\n\n127\n129\n", "r.csv", {"seq"});
  ASSERT_EQ(rs.size(), 2u);
  EXPECT_EQ(rs[0].line, 4u);
  EXPECT_EQ(rs[1].shape.at("seq"), 129);
  EXPECT_EQ(rs[1].arrival_ms, 0.0);
}

TEST(DynamicRequests, BadRowsNameFileAndLine) {
  auto message = [](const std::string& text) {
    try {
      parse_requests(text, "r.csv", {"seq"});
    } catch (const DynamicUsageError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message("seq\n12x\n"), "r.csv:2: seq '12x' is not a positive integer");
  EXPECT_EQ(message("seq,arrival_ms\n12,-1\n"), "r.csv:2: arrival_ms '-1' is not a non-negative number");
  EXPECT_EQ(message("seq\n1,2\n"), "r.csv:2: 2 values for 1 columns (1,2)");
  EXPECT_NE(message("len\n12\n").find("r.csv:1: column 'len' is neither"), std::string::npos);
  EXPECT_EQ(message("arrival_ms\n1\n"), "r.csv:1: the header has no column for the dynamic dimension 'seq'");
  EXPECT_EQ(message("seq\n"), "r.csv:1: no requests after the header");
}

TEST(DynamicPolicies, PadRunsOnTheSmallestHoldingProfileAndCountsPadding) {
  FakeModel m;
  // Spaced far apart: no queueing, each latency is its own service time.
  const auto rs = stream({{127, 0}, {128, 100}, {129, 200}});
  const PolicyResult r = simulate_policy(Policy::kPad, rs, seq_profiles(), m.cost(), {}, "r.csv");
  ASSERT_EQ(r.outcomes.size(), 3u);
  EXPECT_EQ(r.outcomes[0].ran_as, "seq=128");
  EXPECT_NEAR(r.outcomes[0].latency_ms(), 1.28, 1e-9);
  EXPECT_NEAR(r.outcomes[1].latency_ms(), 1.28, 1e-9);
  EXPECT_EQ(r.outcomes[2].ran_as, "seq=256");  // the cliff: one token more, twice the time
  EXPECT_NEAR(r.outcomes[2].latency_ms(), 2.56, 1e-9);
  EXPECT_EQ(r.useful_macs, (127u + 128u + 129u) * 1000u);
  EXPECT_EQ(r.executed_macs, (128u + 128u + 256u) * 1000u);
  EXPECT_EQ(r.padding_macs, (1u + 0u + 127u) * 1000u);
  EXPECT_NEAR(r.latency.max, 2.56, 1e-9);
  EXPECT_NEAR(r.makespan_ms, 200 + 2.56, 1e-9);
}

TEST(DynamicPolicies, OverflowSplitsTruncatesOrNamesTheRow) {
  FakeModel m;
  const auto rs = stream({{600, 0}});
  PolicyOptions o;
  const PolicyResult split = simulate_policy(Policy::kPad, rs, seq_profiles(), m.cost(), o, "r.csv");
  // 600 > 256: three pieces of 200, each padded to 256.
  EXPECT_EQ(split.outcomes[0].ran_as, "3 x seq=256");
  EXPECT_NEAR(split.outcomes[0].latency_ms(), 3 * 2.56, 1e-9);
  EXPECT_EQ(split.useful_macs, 3u * 200u * 1000u);
  EXPECT_EQ(split.split, 1u);
  o.overflow = Overflow::kTruncate;
  const PolicyResult cut = simulate_policy(Policy::kPad, rs, seq_profiles(), m.cost(), o, "r.csv");
  EXPECT_EQ(cut.outcomes[0].ran_as, "seq=256");
  EXPECT_EQ(cut.truncated, 1u);
  EXPECT_EQ(cut.padding_macs, 0u);
  o.overflow = Overflow::kError;
  try {
    simulate_policy(Policy::kPad, rs, seq_profiles(), m.cost(), o, "r.csv");
    FAIL() << "no error";
  } catch (const OverflowError& e) {
    EXPECT_EQ(
        std::string(e.what()),
        "r.csv:2: request seq=600 fits no profile (profiles: seq=64, seq=128, seq=256); --on-overflow split "
        "or truncate serves it");
  }
}

TEST(DynamicPolicies, RecompileCompilesNewShapesOnceAndEvictsLeastRecentlyUsed) {
  FakeModel m;
  PolicyOptions o;
  o.compile_ms_per_layer = 5;  // 10 layers: 50 ms per compile
  o.program_cache = 4;         // the three profiles and one more
  const auto rs = stream({{128, 0}, {127, 100}, {127, 200}, {129, 300}, {127, 400}});
  const PolicyResult r = simulate_policy(Policy::kRecompile, rs, seq_profiles(), m.cost(), o, "r.csv");
  EXPECT_NEAR(r.outcomes[0].compile_ms, 0, 1e-9);  // a profile: compiled ahead of time
  EXPECT_NEAR(r.outcomes[0].latency_ms(), 1.28, 1e-9);
  EXPECT_NEAR(r.outcomes[1].compile_ms, 50, 1e-9);
  EXPECT_NEAR(r.outcomes[1].latency_ms(), 50 + 1.27, 1e-9);
  EXPECT_NEAR(r.outcomes[2].compile_ms, 0, 1e-9);  // cached
  // 129 evicts the least recently used program (seq=64), not 127's.
  EXPECT_NEAR(r.outcomes[3].compile_ms, 50, 1e-9);
  EXPECT_NEAR(r.outcomes[4].compile_ms, 0, 1e-9);
  EXPECT_EQ(r.compile_events, 2u);
  EXPECT_NEAR(r.compile_ms, 100, 1e-9);
  // Measured compile time x host factor when no per-layer cost is given.
  o.compile_ms_per_layer.reset();
  o.compile_host_factor = 3;
  const PolicyResult measured =
      simulate_policy(Policy::kRecompile, stream({{100, 0}}), seq_profiles(), m.cost(), o, "r.csv");
  EXPECT_NEAR(measured.compile_ms, 1500, 1e-9);
}

TEST(DynamicPolicies, HostCompilesWhileTheNpuServesEarlierRequests) {
  FakeModel m;
  PolicyOptions o;
  o.compile_ms_per_layer = 0.1;  // 1 ms per compile
  // 256 (a profile, 2.56 ms) arrives at 0; 100 arrives at 0.5 and compiles from 0.5 to 1.5 while the NPU
  // is still busy until 2.56; it starts then and ends at 3.56.
  const auto rs = stream({{256, 0}, {100, 0.5}});
  const PolicyResult r = simulate_policy(Policy::kRecompile, rs, seq_profiles(), m.cost(), o, "r.csv");
  EXPECT_NEAR(r.outcomes[1].start_ms, 2.56, 1e-9);
  EXPECT_NEAR(r.outcomes[1].end_ms, 3.56, 1e-9);
  EXPECT_NEAR(r.outcomes[1].latency_ms(), 3.06, 1e-9);
}

TEST(DynamicPolicies, DynamicRunsExactShapesWithoutOverlapPlusHostTimePerLayer) {
  FakeModel m;
  PolicyOptions o;
  o.host_us_per_layer = 100;  // 10 layers: 1 ms
  const auto rs = stream({{129, 0}});
  const PolicyResult r = simulate_policy(Policy::kDynamic, rs, seq_profiles(), m.cost(), o, "r.csv");
  EXPECT_NEAR(r.outcomes[0].latency_ms(), 1.29 * 1.5 + 1.0, 1e-9);
  EXPECT_EQ(r.padding_macs, 0u);
  EXPECT_EQ(r.compile_events, 0u);
}

TEST(DynamicPolicies, QueueingIsFifoByArrival) {
  FakeModel m;
  // Listed out of order; served by arrival: 64 (0..0.64), then 128 (0.64..1.92).
  const auto rs = stream({{128, 0.1}, {64, 0}});
  const PolicyResult r = simulate_policy(Policy::kPad, rs, seq_profiles(), m.cost(), {}, "r.csv");
  EXPECT_EQ(r.outcomes[0].request->line, 3u);
  EXPECT_NEAR(r.outcomes[1].start_ms, 0.64, 1e-9);
  EXPECT_NEAR(r.outcomes[1].latency_ms(), 1.92 - 0.1, 1e-9);
  EXPECT_NEAR(r.throughput_rps, 2 / (1.92 / 1000), 1e-9);
}

TEST(DynamicPolicies, NearestRankPercentiles) {
  std::vector<double> v;
  for (int i = 1; i <= 100; ++i) v.push_back(i);
  const LatencyStats s = latency_stats(v);
  EXPECT_EQ(s.p50, 50);
  EXPECT_EQ(s.p95, 95);
  EXPECT_EQ(s.p99, 99);
  EXPECT_EQ(s.max, 100);
  EXPECT_NEAR(s.mean, 50.5, 1e-9);
  EXPECT_EQ(latency_stats({7}).p99, 7);
}

TEST(DynamicPolicies, EachShapeIsAskedForOnce) {
  FakeModel m;
  const auto rs = stream({{127, 0}, {127, 1}, {127, 2}});
  const ShapeCost cost = m.cost();
  for (Policy p : parse_policies("all")) simulate_policy(p, rs, seq_profiles(), cost, {}, "r.csv");
  EXPECT_EQ(m.asked, 3);  // the two profiles holding 127 (to pick the cheaper) and 127 itself
}

}  // namespace
}  // namespace npusim::sim::dynamic
