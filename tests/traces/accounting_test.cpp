// The cycle accounting (traces/accounting.h) against a cycle-by-cycle count: each cycle of the span goes
// to the first category that covers it (compute, then memory, then host), the rest to scheduling.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "traces/accounting.h"

namespace npusim {
namespace {

using traces::Accounting;
using traces::Breakdown;
using traces::Category;

struct Interval {
  uint32_t layer;
  Category category;
  uint64_t start, end;
};

// The reference: a per-cycle mark of the best (lowest) category covering it, over [from, to).
Breakdown per_cycle(const std::vector<Interval>& intervals, uint32_t layer, bool all, uint64_t from,
                    uint64_t to) {
  std::vector<int> best(to - from, 3);  // 3: nothing covers the cycle
  for (const Interval& i : intervals) {
    if (!all && i.layer != layer) continue;
    for (uint64_t c = std::max(i.start, from); c < std::min(i.end, to); ++c)
      best[c - from] = std::min(best[c - from], static_cast<int>(i.category));
  }
  Breakdown b;
  for (int k : best) {
    (k == 0 ? b.compute : k == 1 ? b.memory : k == 2 ? b.host : b.scheduling) += 1;
  }
  return b;
}

void expect_same(const Breakdown& got, const Breakdown& want, int trial) {
  EXPECT_EQ(got.compute, want.compute) << "trial " << trial;
  EXPECT_EQ(got.memory, want.memory) << "trial " << trial;
  EXPECT_EQ(got.host, want.host) << "trial " << trial;
  EXPECT_EQ(got.scheduling, want.scheduling) << "trial " << trial;
}

TEST(Accounting, SweepOfIntervalsInStartOrderEqualsACycleByCycleCount) {
  std::mt19937_64 rng(39);
  for (int trial = 0; trial < 300; ++trial) {
    const uint32_t layers = 1 + rng() % 3;
    std::vector<Interval> intervals(1 + rng() % 40);
    uint64_t start = 0;
    for (Interval& i : intervals) {
      start += rng() % 6;                                     // non-decreasing starts, several at one cycle
      i.layer = static_cast<uint32_t>(rng() % (layers + 1));  // layers: no layer's work
      i.category = static_cast<Category>(rng() % 3);
      i.start = start;
      i.end = start + rng() % 25;  // empty intervals too
    }
    Accounting a;
    a.reset(layers);
    uint64_t span = 0;
    for (const Interval& i : intervals) {
      a.add(i.layer, i.category, i.start, i.end);
      span = std::max(span, i.end);
    }
    span += rng() % 5;
    expect_same(a.total(span), per_cycle(intervals, 0, true, 0, span), trial);
    for (uint32_t l = 0; l < layers; ++l) {
      uint64_t from = UINT64_MAX, to = 0;
      for (const Interval& i : intervals) {
        if (i.layer != l || i.end <= i.start) continue;
        from = std::min(from, i.start);
        to = std::max(to, i.end);
      }
      uint64_t s = 0, e = 0;
      Breakdown b;
      ASSERT_EQ(a.layer(l, s, e, b), from != UINT64_MAX) << "trial " << trial;
      if (from == UINT64_MAX) continue;
      EXPECT_EQ(s, from);
      EXPECT_EQ(e, to);
      expect_same(b, per_cycle(intervals, l, false, from, to), trial);
    }
  }
}

}  // namespace
}  // namespace npusim
