// The DMA engines' burst loop without a per-burst callback (the simulator's path when not tracing): a
// transfer with no more bursts than the outstanding window has slots is served per channel, each
// channel's runs of row hits in closed form (DmaBurstEngine::run_fixed_issue,
// BankedDram::serve_fixed_issue). Its reference is the loop with a callback (run_by_unit: one burst after
// the other, each issued when the window frees a slot), which tests/isa/timing_test.cpp's
// DirectBankedPathEqualsOneVirtualAccessPerBurst holds to one Dram::access per burst.
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>

#include "isa/timing/dma.h"
#include "isa/timing/dram.h"

namespace npusim {
namespace {

namespace timing = isa::timing;

// Random transfers, most within the window (a few rows of up to a few bursts, aligned or not, strided,
// reads and writes mixed) and some far larger (the loop that waits for slots), back to back, overlapping
// or after a pause long enough for refreshes; on every banked preset, two and four channels, windows of
// 4, 16 and 64 slots. Each transfer's end and burst counts, and the model's statistics at the end, must
// be those of the loop with a callback; so must every later transfer's, which sees the DRAM state (open rows,
// bank and bus times, refreshes) and the window the earlier ones left.
TEST(DmaBurstEngine, TransferWithinTheWindowServedPerChannelEqualsTheBurstByBurstLoop) {
  for (const isa::DramModel model :
       {isa::DramModel::kLpddr4_4266, isa::DramModel::kDdr4_3200, isa::DramModel::kHbm2}) {
    for (const int channels : {2, 4}) {
      for (const int64_t outstanding : {4, 16, 64}) {
        const timing::BankedDramTiming t = timing::banked_preset(model);
        const std::string what = std::string(t.name) + " channels " + std::to_string(channels) +
                                 " outstanding " + std::to_string(outstanding);
        auto direct = timing::make_banked_dram(t, channels, timing::Refresh::kScheduled);
        auto reference = timing::make_banked_dram(t, channels, timing::Refresh::kScheduled);
        ASSERT_NE(direct->banked(), nullptr);
        isa::DmaConfig d;
        d.burst_bytes = 64;
        d.alignment_bytes = 64;
        d.max_outstanding = outstanding;
        timing::DmaBurstEngine fast(d), ref(d);
        std::mt19937_64 gen(11);
        uint64_t start = 0;
        int64_t within = 0;
        for (int i = 0; i < 3000; ++i) {
          timing::DmaRows r;
          r.dram_addr = gen() % (1ull << 22) & ~uint64_t{gen() % 3 ? 63u : 7u};
          r.row_bytes = static_cast<int64_t>(1 + gen() % (gen() % 4 == 0 ? 4096 : 700));
          r.count = {static_cast<int64_t>(1 + gen() % 3), static_cast<int64_t>(1 + gen() % 2), 1};
          r.stride = {static_cast<int64_t>(r.row_bytes + (gen() % 2 ? 0 : gen() % 3000)),
                      static_cast<int64_t>(gen() % 2 ? 4096 : gen() % 20000), 0};
          if (gen() % 3 == 0) r.count = {1, 1, 1};
          const bool write = gen() % 2 == 0;
          const timing::DmaTransfer a = fast.run(r, write, start, *direct);
          const timing::DmaTransfer b = ref.run(r, write, start, *reference, [](auto...) {});
          ASSERT_EQ(a.done_ps, b.done_ps) << what << " transfer " << i;
          ASSERT_EQ(a.first_issue_ps, b.first_issue_ps) << what << " transfer " << i;
          ASSERT_EQ(a.bursts.bursts, b.bursts.bursts) << what << " transfer " << i;
          ASSERT_EQ(a.bursts.misaligned_bursts, b.bursts.misaligned_bursts) << what << " transfer " << i;
          within += b.bursts.bursts <= outstanding;
          const uint64_t pick = gen() % 8;
          start = pick < 4 ? a.done_ps : pick < 7 ? start + gen() % 30000 : a.done_ps + 4'000'000;
        }
        EXPECT_EQ(direct->stats().requests, reference->stats().requests) << what;
        EXPECT_EQ(direct->stats().row_hits, reference->stats().row_hits) << what;
        EXPECT_EQ(direct->stats().row_misses, reference->stats().row_misses) << what;
        EXPECT_EQ(direct->stats().refreshes, reference->stats().refreshes) << what;
        // Both kinds of transfer and every kind of request were exercised.
        EXPECT_GT(within, 300) << what;
        EXPECT_LT(within, 2900) << what;
        EXPECT_GT(direct->stats().refreshes, 0) << what;
        EXPECT_GT(direct->stats().row_misses, 0) << what;
        EXPECT_GT(direct->stats().row_hits, direct->stats().row_misses) << what;
      }
    }
  }
}

}  // namespace
}  // namespace npusim
