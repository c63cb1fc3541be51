// Tests of isa/timing: the closed forms against first principles and the DRAM presets' datasheet
// figures. The PE-level model's cross-check against the closed form is in
// tests/arch/datapath/pe_timing_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "isa/ceil_div.h"
#include "isa/timing/dma.h"
#include "isa/timing/dram.h"
#include "isa/timing/systolic.h"
#include "isa/timing/units.h"
#include "tests/isa/timing_test_util.h"

namespace npusim {
namespace {

using isa::Dataflow;
using testing::array;
namespace timing = isa::timing;

TEST(SystolicTiming, WeightStationaryFoldIsPreloadPlusSkewedStreamPlusDrain) {
  // 4x4 array, M=8, K=10, N=6: K folds over rows (3), N over cols (2). Each fold: R cycles to
  // shift weights in, the first input reaches the last row after R-1 cycles of skew, M rows of
  // input stream, and the last partial sum leaves after crossing C-1 more columns.
  const auto a = array(4, 4, Dataflow::kWs);
  const timing::ArrayCycles c = timing::gemm_cycles(a, {8, 10, 6}, isa::DType::kInt8, false);
  const int64_t per_fold = 4 + (4 - 1) + 8 + (4 - 1);
  EXPECT_EQ(c.folds, 3 * 2);
  EXPECT_EQ(c.total, 6 * per_fold);
  EXPECT_EQ(c.macs, 8 * 10 * 6);
}

TEST(SystolicTiming, OutputStationaryFoldHasNoPreload) {
  const auto a = array(4, 4, Dataflow::kOs);
  const timing::ArrayCycles c = timing::gemm_cycles(a, {9, 5, 4}, isa::DType::kInt8, false);
  // M folds over rows (3), N over cols (1); K operands stream, skewed over R-1 rows and C-1 cols.
  EXPECT_EQ(c.folds, 3);
  EXPECT_EQ(c.total, 3 * (5 + (4 - 1) + (4 - 1)));
  EXPECT_EQ(c.preload, 0);
}

TEST(SystolicTiming, InputStationaryStreamsFilters) {
  const auto a = array(4, 4, Dataflow::kIs);
  const timing::ArrayCycles c = timing::gemm_cycles(a, {6, 4, 7}, isa::DType::kInt8, false);
  // K over rows (1 fold), M over cols (2 folds), N streams.
  EXPECT_EQ(c.folds, 2);
  EXPECT_EQ(c.total, 2 * (4 + 3 + 7 + 3));
}

TEST(SystolicTiming, DoubleBufferingHidesAllButTheFirstPreload) {
  const timing::GemmShape g{16, 12, 8};
  const auto plain = timing::gemm_cycles(array(4, 4, Dataflow::kWs, false), g, isa::DType::kInt8, false);
  const auto db = timing::gemm_cycles(array(4, 4, Dataflow::kWs, true), g, isa::DType::kInt8, false);
  EXPECT_EQ(plain.total - db.total, (plain.folds - 1) * 4);
  const auto pre = timing::gemm_cycles(array(4, 4, Dataflow::kWs, true), g, isa::DType::kInt8, true);
  EXPECT_EQ(db.total - pre.total, 4);
}

TEST(SystolicTiming, PrecisionRateStretchesOnlyTheStream) {
  auto a = array(8, 8, Dataflow::kWs);
  const timing::GemmShape g{20, 8, 8};
  const auto i8 = timing::gemm_cycles(a, g, isa::DType::kInt8, false);
  const auto f16 = timing::gemm_cycles(a, g, isa::DType::kFp16, false);  // rate 0.5
  const auto f32 = timing::gemm_cycles(a, g, isa::DType::kFp32, false);  // rate 0.25
  EXPECT_EQ(f16.total - i8.total, 20);
  EXPECT_EQ(f32.total - i8.total, 60);
}

TEST(SystolicTiming, PipelinedFoldsPayFillAndDrainOnce) {
  // 4x4 WS, M=8, K=10, N=6: 6 folds of 8 rows. Pipelined: one preload, the folds' rows back to back,
  // one fill and drain (C-1).
  const timing::GemmShape g{8, 10, 6};
  const auto db = timing::gemm_cycles(array(4, 4, Dataflow::kWs, true), g, isa::DType::kInt8, false);
  const auto piped = timing::gemm_cycles(array(4, 4, Dataflow::kWs, true, true), g, isa::DType::kInt8, false);
  EXPECT_EQ(db.total, 4 + 6 * (8 + 3 + 3));
  EXPECT_EQ(piped.total, 4 + 6 * 8 + 3 + 3);
  EXPECT_EQ(piped.fill_drain, 6);
  // Folds shorter than R wait for the shadow registers: 2 rows per fold on 4 rows -> 4-cycle slots.
  const auto short_folds =
      timing::gemm_cycles(array(4, 4, Dataflow::kWs, true, true), {2, 10, 6}, isa::DType::kInt8, false);
  EXPECT_EQ(short_folds.total, 4 + 5 * 4 + 2 + 3 + 3);
  // It needs the shadow registers and a stationary operand: without them nothing changes.
  EXPECT_EQ(timing::gemm_cycles(array(4, 4, Dataflow::kWs, false, true), g, isa::DType::kInt8, false).total,
            timing::gemm_cycles(array(4, 4, Dataflow::kWs, false, false), g, isa::DType::kInt8, false).total);
  EXPECT_EQ(timing::gemm_cycles(array(4, 4, Dataflow::kOs, true, true), g, isa::DType::kInt8, false).total,
            timing::gemm_cycles(array(4, 4, Dataflow::kOs, true, false), g, isa::DType::kInt8, false).total);
}

TEST(SystolicTiming, AChainedInstructionAddsItsStreamAndItsFoldSwitches) {
  // 4x4 WS, pipelined: an instruction entering behind another pays no preload and no skew of its own.
  const auto a = array(4, 4, Dataflow::kWs, true, true);
  const auto full = timing::gemm_cycles(a, {8, 10, 6}, isa::DType::kInt8, false);  // 6 folds of 8 rows
  EXPECT_EQ(full.chained, 6 * 8);
  EXPECT_EQ(full.total - full.chained, 4 + timing::skew_cycles(a));
  EXPECT_EQ(timing::skew_cycles(a), 3 + 3);
  // Folds of 2 rows on 4 rows: each, the first too, waits 2 cycles for its operand to shift in.
  EXPECT_EQ(timing::gemm_cycles(a, {2, 10, 6}, isa::DType::kInt8, false).chained, 6 * (2 + 2));
}

TEST(SystolicTiming, PreloadInStreamOverlapsOnlyTheLastBlockOfTheFoldBefore) {
  // 8x8, pipelined, blocks of at least 4 cycles: a CONV of 3 output rows of 17 pixels (8 + 8 + 1), K = 16
  // (two folds of 60 stream cycles), N = 8.
  auto a = array(8, 8, Dataflow::kWs, true, true);
  a.min_block_cycles = 4;
  const auto under_fold = timing::gemm_cycles(a, {3 * 17, 16, 8}, isa::DType::kInt8, false, 17);
  EXPECT_EQ(under_fold.total, 8 + 2 * 60 + 7 + 7);  // the second operand shifted in under the first fold
  a.preload_in_stream = true;
  EXPECT_EQ(timing::last_block_cycles(a, 3 * 17, 17), 4);
  const auto in_stream = timing::gemm_cycles(a, {3 * 17, 16, 8}, isa::DType::kInt8, false, 17);
  EXPECT_EQ(in_stream.total, 8 + 60 + (8 - 4) + 60 + 7 + 7);  // it waits behind the last 4-cycle block
  EXPECT_EQ(in_stream.chained, 2 * (60 + 8 - 4));
  // 14-pixel rows end in a block of 6, 7-pixel rows in one of 7, full rows in one of 8 (no wait).
  EXPECT_EQ(timing::gemm_cycles(a, {3 * 14, 16, 8}, isa::DType::kInt8, false, 14).fill_drain, 14 + 2);
  EXPECT_EQ(timing::gemm_cycles(a, {7 * 7, 16, 8}, isa::DType::kInt8, false, 7).fill_drain, 14 + 1);
  EXPECT_EQ(timing::gemm_cycles(a, {512, 16, 8}, isa::DType::kInt8, false).fill_drain, 14);
  // A MATMUL of one row: the fold is shorter than R either way.
  EXPECT_EQ(timing::gemm_cycles(a, {1, 16, 8}, isa::DType::kInt8, false).total,
            under_fold.preload + 2 * 4 + (8 - 4) + 14);
}

TEST(SystolicTiming, MinBlockCyclesStreamsEachOutputRowInBlocksOfRowsPixels) {
  // Gemmini's conv: one COMPUTE per output row and DIM pixels, each at least 4 cycles on the array.
  // 8x8, pipelined folds, a CONV of 3 output rows of 17 pixels (8 + 8 + 1), K = 8, N = 8: one fold.
  auto a = array(8, 8, Dataflow::kWs, true, true);
  a.min_block_cycles = 4;
  EXPECT_EQ(timing::streamed_pixels(a, 3 * 17, 17), 3 * (8 + 8 + 4));
  EXPECT_EQ(timing::streamed_pixels(a, 3 * 14, 14), 3 * 14);  // 8 + 6: both blocks fill their minimum
  EXPECT_EQ(timing::streamed_pixels(a, 1, 0), 4);             // a MATMUL's one row of one pixel
  const auto c = timing::gemm_cycles(a, {3 * 17, 8, 8}, isa::DType::kInt8, false, 17);
  EXPECT_EQ(c.stream, 60);
  EXPECT_EQ(c.total, 8 + 60 + 7 + 7);  // preload, stream, skew fill and drain
  // The rows do not matter when every block fills its minimum, nor at min_block_cycles 1, nor in os.
  EXPECT_EQ(timing::gemm_cycles(a, {3 * 16, 8, 8}, isa::DType::kInt8, false, 16).total,
            timing::gemm_cycles(a, {3 * 16, 8, 8}, isa::DType::kInt8, false).total);
  auto plain = a;
  plain.min_block_cycles = 1;
  EXPECT_EQ(timing::gemm_cycles(plain, {3 * 17, 8, 8}, isa::DType::kInt8, false, 17).stream, 51);
  auto os = a;
  os.dataflow = Dataflow::kOs;
  EXPECT_EQ(timing::gemm_cycles(os, {3 * 17, 8, 8}, isa::DType::kInt8, false, 17).total,
            timing::gemm_cycles(os, {3 * 17, 8, 8}, isa::DType::kInt8, false).total);
}

TEST(SramTiming, BankConflictFactorCountsRowsSharingABank) {
  isa::ScratchpadConfig s;  // 8 banks x 16 bytes, 1 port
  s.banks = 8;
  s.bank_width_bytes = 16;
  s.ports = 1;
  EXPECT_EQ(timing::bank_conflict_factor(0, 128, 4, s), 4);  // every row in bank 0
  EXPECT_EQ(timing::bank_conflict_factor(0, 16, 4, s), 1);   // banks 0..3
  EXPECT_EQ(timing::bank_conflict_factor(0, 64, 8, s), 4);   // banks 0,4,0,4,...
  EXPECT_EQ(timing::bank_conflict_factor(0, 8, 4, s), 1);    // two rows per bank word
  s.ports = 2;
  EXPECT_EQ(timing::bank_conflict_factor(0, 128, 4, s), 2);
}

TEST(DmaTiming, ContiguousDimensionsMergeIntoOneRow) {
  isa::Instruction ins;
  ins.opcode = isa::Opcode::kLoad;
  ins.set(isa::Field::kDtype, static_cast<int>(isa::DType::kInt32))
      .set(isa::Field::kSize0, 16)
      .set(isa::Field::kSize1, 4)
      .set(isa::Field::kStride1, 16)
      .set(isa::Field::kSize2, 3)
      .set(isa::Field::kStride2, 100);
  const timing::DmaRows r = timing::dma_rows(ins);
  EXPECT_EQ(r.row_bytes, 16 * 4 * 4);
  EXPECT_EQ(r.rows(), 3);
  EXPECT_EQ(r.stride[0], 400);
}

TEST(DmaTiming, MisalignedRowsCostOneExtraBurstEach) {
  isa::DmaConfig d;
  d.burst_bytes = 64;
  d.alignment_bytes = 64;
  timing::DmaRows r;
  r.row_bytes = 100;
  r.count = {5, 1, 1};
  r.stride = {256, 0, 0};
  r.dram_addr = 0;
  EXPECT_EQ(timing::count_bursts(r, d).bursts, 5 * 2);
  EXPECT_EQ(timing::count_bursts(r, d).misaligned_bursts, 0);
  r.dram_addr = 8;
  const auto b = timing::count_bursts(r, d);
  EXPECT_EQ(b.bursts, 5 * 3);
  EXPECT_EQ(b.misaligned_bursts, 5);
  int64_t seen = 0;
  timing::for_each_burst(r, d, [&](uint64_t, uint32_t, bool) { ++seen; });
  EXPECT_EQ(seen, b.bursts);
}

TEST(VectorTiming, LatencyPlusLanesTimesInitiationInterval) {
  isa::VectorConfig v;
  v.lanes = 16;
  isa::Instruction ins;
  ins.opcode = isa::Opcode::kVec;
  ins.set(isa::Field::kVop, static_cast<int>(isa::VecOp::kDiv))
      .set(isa::Field::kD0, 100)
      .set(isa::Field::kD1, 3);
  const auto& t = v.ops[static_cast<int>(isa::VecOp::kDiv)];
  EXPECT_EQ(timing::vec_cycles(ins, v), t.latency_cycles + ceil_div(300, 16) * t.ii_cycles);
}

// systolic_array.output_stage: a VEC output on accumulator sums runs on the output stage, one accumulator row
// of `cols` elements a cycle after the op's latency, and leaves the lanes free; other VECs, and a VEC output
// whose sums are elsewhere, keep the lanes' timing; with the key off every VEC is the lanes'.
TEST(OutputStageTiming, AnOutputOnAccumulatorSumsTakesOneRowOfColsACycleOffTheLanes) {
  isa::NpuConfig c;
  c.systolic_array.cols = 16;
  c.vector.lanes = 8;
  EXPECT_TRUE(c.systolic_array.output_stage);  // edge's default (configs/edge.yaml)
  isa::Instruction out;
  out.opcode = isa::Opcode::kVec;
  out.set(isa::Field::kVop, static_cast<int64_t>(isa::VecOp::kOutput))
      .set(isa::Field::kSrc1Buf, static_cast<int64_t>(isa::Buffer::kAccumulator))
      .set(isa::Field::kD0, 24)
      .set(isa::Field::kD1, 10);
  const auto& t = c.vector.ops[static_cast<int>(isa::VecOp::kOutput)];
  ASSERT_TRUE(timing::on_output_stage(out, c));
  EXPECT_EQ(timing::output_stage_cycles(out, c), t.latency_cycles + ceil_div(240, 16));
  EXPECT_EQ(timing::vec_lane_cycles(out, c), 0);
  isa::Instruction in_input = out;
  in_input.set(isa::Field::kSrc1Buf, static_cast<int64_t>(isa::Buffer::kInput));
  EXPECT_FALSE(timing::on_output_stage(in_input, c));
  EXPECT_EQ(timing::vec_lane_cycles(in_input, c), t.latency_cycles + ceil_div(240, 8) * t.ii_cycles);
  isa::Instruction add = out;
  add.set(isa::Field::kVop, static_cast<int64_t>(isa::VecOp::kAdd));
  EXPECT_FALSE(timing::on_output_stage(add, c));
  c.systolic_array.output_stage = false;
  EXPECT_FALSE(timing::on_output_stage(out, c));
  EXPECT_EQ(timing::vec_lane_cycles(out, c), timing::vec_cycles(out, c.vector));
}

TEST(HostTiming, LinkBothWaysPlusOverheadPlusCpu) {
  isa::HostConfig h;
  h.link_bandwidth_gbps = 4;
  h.link_latency_us = 2;
  h.cpu_gops = 20;
  h.call_overhead_us = 10;
  // 4000 B in: 2 us + 1 us; 8000 B out: 2 us + 2 us; 20000 ops: 1 us; overhead 10 us. At 500 MHz.
  const auto c = timing::host_cycles(4000, 8000, 20000, h, 500);
  EXPECT_EQ(c.total(), (3 + 4 + 1 + 10) * 500);
}

// Streams `bytes` sequentially or as random 64-byte requests through a DMA burst engine.
double stream_gbps(timing::Dram& dram, uint64_t bytes, int64_t outstanding, uint64_t* first_done = nullptr) {
  isa::DmaConfig d;
  d.burst_bytes = 64;
  d.max_outstanding = outstanding;
  timing::DmaBurstEngine engine(d);
  timing::DmaRows r;
  r.row_bytes = static_cast<int64_t>(bytes);
  const auto x = engine.run(r, false, 0, dram);
  if (first_done) *first_done = x.done_ps;
  return static_cast<double>(bytes) / (x.done_ps / 1000.0);
}

class DramPresetTest : public ::testing::TestWithParam<isa::DramModel> {};

TEST_P(DramPresetTest, LongSequentialStreamSustainsNinetyPercentOfPeak) {
  isa::DramConfig c;
  c.model = GetParam();
  c.channels = 2;
  auto dram = timing::make_dram(c);
  const timing::BankedDramTiming& t = timing::banked_preset(c.model);
  const double peak = t.burst_bytes / t.t_burst_ns * 2;  // GB/s = bytes per ns, two channels
  EXPECT_DOUBLE_EQ(dram->peak_bandwidth_gbps(), peak);
  // 64 MiB: long enough to cross thousands of pages and many refresh intervals.
  const double gbps = stream_gbps(*dram, 64ull << 20, 64);
  EXPECT_GE(gbps, 0.9 * peak) << t.name;
  EXPECT_LE(gbps, peak);
  EXPECT_GT(dram->stats().refreshes, 0);
  EXPECT_GT(dram->stats().row_hits, 10 * dram->stats().row_misses);
}

TEST_P(DramPresetTest, RandomSmallRequestsPayTheRowMissPenalty) {
  isa::DramConfig c;
  c.model = GetParam();
  c.channels = 1;
  const timing::BankedDramTiming& t = timing::banked_preset(c.model);
  // One request at a time, so each one's latency is visible.
  const int n = 4000;
  auto seq = timing::make_dram(c);
  auto rnd = timing::make_dram(c);
  std::mt19937_64 gen(1);
  uint64_t ts = 0, tr = 0;
  for (int i = 0; i < n; ++i) {
    ts = seq->access(static_cast<uint64_t>(i) * 64, 64, false, ts);
    tr = rnd->access((gen() % (1ull << 32)) & ~63ull, 64, false, tr);
  }
  const double seq_ns = ts / 1000.0 / n, rnd_ns = tr / 1000.0 / n;
  // A hit costs CL + the request's bursts; a miss on a bank with another row open adds precharge +
  // activate. The sequential stream misses once per page; refresh stretches everything by about
  // tRFC / tREFI.
  const double hit_ns = t.t_cl_ns + (64 / t.burst_bytes) * t.t_burst_ns;
  const double seq_expected =
      (hit_ns + (t.t_rp_ns + t.t_rcd_ns) * 64 / t.page_bytes) * (1 + t.t_rfc_ns / t.t_refi_ns);
  EXPECT_NEAR(seq_ns, seq_expected, 0.03 * seq_expected) << t.name;
  EXPECT_GE(rnd_ns - seq_ns, 0.9 * (t.t_rp_ns + t.t_rcd_ns)) << t.name;
  EXPECT_GT(rnd->stats().row_misses, n * 9 / 10);
}

TEST_P(DramPresetTest, AveragedRefreshLosesTheSameBandwidthWithoutAPhase) {
  isa::DramConfig c;
  c.model = GetParam();
  c.channels = 2;
  const timing::BankedDramTiming& t = timing::banked_preset(c.model);
  // Over many refresh intervals the averaged model moves data as fast as the scheduled one.
  auto scheduled = timing::make_dram(c);
  auto averaged = timing::make_dram(c, timing::Refresh::kAveraged);
  const double s = stream_gbps(*scheduled, 64ull << 20, 64), a = stream_gbps(*averaged, 64ull << 20, 64);
  EXPECT_NEAR(a, s, 0.02 * s) << t.name;
  EXPECT_EQ(averaged->stats().refreshes, 0);
  // A stream shorter than one interval: the scheduled model, whose first refresh is a whole tREFI away,
  // runs at full speed; the averaged one pays the interval's share of tRFC wherever the stream falls.
  const uint64_t short_bytes = static_cast<uint64_t>(0.5 * t.t_refi_ns * t.peak_gbps());
  auto s1 = timing::make_dram(c);
  auto a1 = timing::make_dram(c, timing::Refresh::kAveraged);
  const double fast = stream_gbps(*s1, short_bytes, 64), even = stream_gbps(*a1, short_bytes, 64);
  EXPECT_EQ(s1->stats().refreshes, 0);
  EXPECT_NEAR(fast / even, t.t_refi_ns / (t.t_refi_ns - t.t_rfc_ns), 0.01) << t.name;
}

INSTANTIATE_TEST_SUITE_P(Presets, DramPresetTest,
                         ::testing::Values(isa::DramModel::kDdr4_3200, isa::DramModel::kLpddr4_4266,
                                           isa::DramModel::kHbm2),
                         [](const auto& info) {
                           return std::string(isa::kDramModelNames[static_cast<int>(info.param)]);
                         });

// A DRAM model seen only through the Dram interface (banked() is null), so that a burst loop takes the
// generic path: one virtual access() per burst.
class Opaque : public timing::Dram {
 public:
  explicit Opaque(std::unique_ptr<timing::Dram> inner) : inner_(std::move(inner)) {}
  uint64_t access(uint64_t addr, uint32_t bytes, bool write, uint64_t issue_ps) override {
    return inner_->access(addr, bytes, write, issue_ps);
  }
  double peak_bandwidth_gbps() const override { return inner_->peak_bandwidth_gbps(); }
  double idle_latency_ns() const override { return inner_->idle_latency_ns(); }
  const timing::DramStats& inner_stats() const { return inner_->stats(); }

 private:
  std::unique_ptr<timing::Dram> inner_;
};

// The burst loop calls the banked model directly and serves the bursts of a row that start in one
// interleave unit together (BankedDram::serve_run, row hits in locals): every burst's issue, completion,
// address and size, the stats and the transfer's end must be those of one Dram::access per burst, on
// random strided, misaligned, mixed read/write transfers (rows shorter than a burst, rows ending just
// past a unit), with scheduled refreshes and averaged ones, outstanding limits of 1, 2, 8 and 256, three
// channels (a non-power-of-two map) and a page smaller than the interleave unit (no place per unit).
TEST(DmaBurstEngine, DirectBankedPathEqualsOneVirtualAccessPerBurst) {
  timing::BankedDramTiming small_page = timing::banked_preset(isa::DramModel::kLpddr4_4266);
  small_page.page_bytes = 128;  // below the 256-byte interleave unit: no place per unit
  const std::vector<std::pair<timing::BankedDramTiming, int>> models = {
      {timing::banked_preset(isa::DramModel::kHbm2), 16},
      {timing::banked_preset(isa::DramModel::kLpddr4_4266), 2},
      {timing::banked_preset(isa::DramModel::kDdr4_3200), 3},
      {small_page, 2}};
  struct Burst {
    uint64_t addr, issue, done;
    uint32_t bytes;
    bool operator==(const Burst& o) const {
      return addr == o.addr && issue == o.issue && done == o.done && bytes == o.bytes;
    }
  };
  for (const auto& [t, channels] : models) {
    for (const timing::Refresh refresh : {timing::Refresh::kScheduled, timing::Refresh::kAveraged}) {
      for (const int64_t outstanding : {1, 2, 8, 256}) {
        const std::string what = std::string(t.name) +
                                 (refresh == timing::Refresh::kAveraged ? " averaged" : "") +
                                 " outstanding " + std::to_string(outstanding);
        auto direct = timing::make_banked_dram(t, channels, refresh);
        Opaque generic(timing::make_banked_dram(t, channels, refresh));
        ASSERT_NE(direct->banked(), nullptr);
        ASSERT_EQ(generic.banked(), nullptr);
        isa::DmaConfig d;
        d.burst_bytes = 64;
        d.alignment_bytes = 64;
        d.max_outstanding = outstanding;
        timing::DmaBurstEngine a(d), b(d);
        std::mt19937_64 gen(7);
        uint64_t start = 0;
        for (int i = 0; i < 400; ++i) {
          timing::DmaRows r;
          r.dram_addr = gen() % (1ull << 26) & ~uint64_t{gen() % 2 ? 63u : 3u};
          r.row_bytes = static_cast<int64_t>(gen() % 4 == 0 ? 1 + gen() % 80 : 1 + gen() % 3000);
          r.count = {static_cast<int64_t>(1 + gen() % 4), static_cast<int64_t>(1 + gen() % 3), 1};
          r.stride = {static_cast<int64_t>(r.row_bytes + gen() % 5000), static_cast<int64_t>(gen() % 40000),
                      0};
          if (i % 50 == 0) r = timing::DmaRows{r.dram_addr, 64 * 1024, {1, 1, 1}, {0, 0, 0}};  // a stream
          const bool write = gen() % 3 == 0;
          std::vector<Burst> da, db;
          const timing::DmaTransfer xa =
              a.run(r, write, start, *direct, [&](uint64_t addr, uint64_t issue, uint64_t done, uint32_t n) {
                da.push_back({addr, issue, done, n});
              });
          const timing::DmaTransfer xb =
              b.run(r, write, start, generic, [&](uint64_t addr, uint64_t issue, uint64_t done, uint32_t n) {
                db.push_back({addr, issue, done, n});
              });
          ASSERT_TRUE(da == db) << what << " transfer " << i;
          ASSERT_EQ(xa.done_ps, xb.done_ps) << what;
          ASSERT_EQ(xa.bursts.bursts, xb.bursts.bursts) << what;
          ASSERT_EQ(xa.bursts.misaligned_bursts, xb.bursts.misaligned_bursts) << what;
          start = gen() % 2 ? xa.done_ps : start + gen() % 20000;  // back to back, or overlapping
        }
        EXPECT_EQ(direct->stats().requests, generic.inner_stats().requests) << what;
        EXPECT_EQ(direct->stats().row_hits, generic.inner_stats().row_hits) << what;
        EXPECT_EQ(direct->stats().row_misses, generic.inner_stats().row_misses) << what;
        EXPECT_EQ(direct->stats().refreshes, generic.inner_stats().refreshes) << what;
        if (refresh == timing::Refresh::kScheduled) {
          EXPECT_GT(direct->stats().refreshes, 0) << what;
        }
        EXPECT_GT(direct->stats().row_misses, 0) << what;
        EXPECT_GT(direct->stats().row_hits, 0) << what;
      }
    }
  }
}

TEST(DramTiming, SimpleModelIsLatencyPlusBytesOverBandwidth) {
  isa::DramConfig c;
  c.model = isa::DramModel::kSimple;
  c.latency_ns = 100;
  c.bandwidth_gbps = 8;
  auto dram = timing::make_dram(c);
  uint64_t done = 0;
  const double gbps = stream_gbps(*dram, 1 << 20, 64, &done);
  EXPECT_NEAR(done / 1000.0, 100 + (1 << 20) / 8.0, 1.0);
  EXPECT_LE(gbps, 8.0);
}

TEST(DmaTiming, ChannelSkewIsTheBusiestChannelsShare) {
  isa::DramConfig dram;  // lpddr4_4266, two channels interleaved every 256 bytes
  timing::DmaRows r;
  r.row_bytes = 256;
  r.count = {197, 1, 1};
  r.stride = {3072, 0, 0};  // an int8 A tile of 256 columns out of 3072: every row on channel 0
  EXPECT_DOUBLE_EQ(timing::channel_skew(r, dram), 2.0);
  r.row_bytes = 512;  // 512 columns: each row covers both channels
  EXPECT_DOUBLE_EQ(timing::channel_skew(r, dram), 1.0);
  r.row_bytes = 256;
  r.stride = {256 * 3, 0, 0};  // odd stride: rows alternate channels
  EXPECT_NEAR(timing::channel_skew(r, dram), 1.0, 0.02);
  r.dram_addr = 100;  // a row that straddles a unit boundary: 156 bytes on one channel, 100 on the other
  r.count = {1, 1, 1};
  EXPECT_DOUBLE_EQ(timing::channel_skew(r, dram), 2.0 * 156 / 256);
  dram.model = isa::DramModel::kIdeal;
  EXPECT_DOUBLE_EQ(timing::channel_skew(r, dram), 1.0);
}

TEST(DmaTiming, CostFactorChargesRowsThatMissTheOpenDramRows) {
  isa::NpuConfig c;  // edge: lpddr4_4266, 2 KiB pages
  timing::DmaRows r;
  // One long contiguous run is the yardstick itself.
  r.row_bytes = 64 * 1024;
  EXPECT_DOUBLE_EQ(timing::dram_cost_factor(r, false, c), 1.0);
  // A column of an NHWC map: 28 pixels of 144 channels, one per image row 8064 bytes apart: every row
  // opens a DRAM row, and the transfer keeps the DRAM busy well beyond a contiguous one of its bytes.
  r.row_bytes = 144;
  r.count = {28, 1, 1};
  r.stride = {8064, 0, 0};
  const double column = timing::dram_cost_factor(r, false, c);
  EXPECT_GT(column, 1.5);
  // Its first 64 rows stand for the rest: the same pattern 10 times longer costs the same per byte.
  r.count = {280, 1, 1};
  EXPECT_NEAR(timing::dram_cost_factor(r, false, c), column, 0.1 * column);
  c.dram.model = isa::DramModel::kIdeal;
  EXPECT_DOUBLE_EQ(timing::dram_cost_factor(r, false, c), 1.0);
}

// datacenter.yaml's DMA and DRAM: four engines of 256 bursts of 64 bytes in flight on 16 HBM2 channels.
isa::NpuConfig hbm2_machine() {
  isa::NpuConfig c;
  c.frequency_mhz = 940.0;
  c.dram.model = isa::DramModel::kHbm2;
  c.dram.channels = 16;
  c.dma.engines = 4;
  c.dma.burst_bytes = 64;
  c.dma.max_outstanding = 256;
  c.dma.alignment_bytes = 64;
  c.dma.setup_cycles = 16;
  return c;
}

TEST(DmaTiming, ShortTransfersPayTheirLatencyLongOnesStreamNearTheDramPeak) {
  const isa::NpuConfig c = hbm2_machine();
  const double peak = timing::dram_peak_bytes_per_cycle(c);
  const double latency = timing::dram_idle_latency_ns(c.dram) * c.frequency_mhz / 1000.0;
  // A 4 KiB transfer takes at least its setup and the DRAM's latency: even with every engine busy the
  // stream cannot beat engines x 4096 bytes per (setup + latency) cycles.
  const double small = timing::sustained_dram_bytes_per_cycle(c, 4096);
  EXPECT_LE(small, static_cast<double>(c.dma.engines) * 4096.0 / (c.dma.setup_cycles + latency));
  // 1 MiB transfers hide both: the stream moves most of the peak (row misses, refresh and read/write
  // turnaround take the rest), over four times the 4 KiB rate.
  const double large = timing::sustained_dram_bytes_per_cycle(c, 1 << 20);
  EXPECT_GE(large, 0.7 * peak);
  EXPECT_LE(large, peak);
  EXPECT_GT(large, 4.0 * small);
  // The cost model's table: the measured rate at powers of two, and between two of them the rate of a
  // transfer whose time lies on the line through theirs; past 1 MiB the 1 MiB rate.
  const timing::DramStreamRates rates(c);
  EXPECT_DOUBLE_EQ(rates.bytes_per_cycle(4096), small);
  EXPECT_DOUBLE_EQ(rates.bytes_per_cycle(1 << 20), large);
  EXPECT_DOUBLE_EQ(rates.bytes_per_cycle(64 << 20), large);
  const double r8 = rates.bytes_per_cycle(8192), r6 = rates.bytes_per_cycle(6144);
  EXPECT_NEAR(6144.0 / r6, (4096.0 / small + 8192.0 / r8) / 2, 1e-6 * 6144.0 / r6);
  EXPECT_DOUBLE_EQ(rates.cycles_per_byte(6144), 1.0 / r6);
  isa::NpuConfig ideal = c;
  ideal.dram.model = isa::DramModel::kIdeal;
  EXPECT_EQ(timing::sustained_dram_bytes_per_cycle(ideal, 4096), 0.0);
  EXPECT_EQ(timing::DramStreamRates(ideal).cycles_per_byte(4096), 0.0);
}

TEST(DmaTiming, TheEstimateChargesTheBusiestChannelAsTheEnginesDo) {
  isa::NpuConfig c;  // edge: lpddr4_4266 on two channels
  auto dram_time = [&](int64_t row_bytes, int64_t stride, int64_t rows) {
    auto dram = timing::make_dram(c.dram);
    timing::DmaBurstEngine engine(c.dma);
    timing::DmaRows r;
    r.row_bytes = row_bytes;
    r.count = {rows, 1, 1};
    r.stride = {stride, 0, 0};
    return engine.run(r, false, 0, *dram).done_ps * c.frequency_mhz * 1e-6;
  };
  auto estimate = [&](int64_t cols, int64_t stride, int64_t rows) {
    isa::Instruction ins;
    ins.opcode = isa::Opcode::kLoad;
    ins.set(isa::Field::kDtype, static_cast<int>(isa::DType::kInt8))
        .set(isa::Field::kSize0, cols)
        .set(isa::Field::kSize1, rows)
        .set(isa::Field::kStride1, stride);
    return timing::estimate_dma_cycles(ins, c);
  };
  // The same 50 KB: rows on one channel take about twice as long as rows spread over both.
  const double one = dram_time(256, 3072, 197), both = dram_time(512, 3072, 98);
  EXPECT_GT(one, 1.6 * both);
  EXPECT_NEAR(estimate(256, 3072, 197), one, 0.2 * one);
  EXPECT_NEAR(estimate(512, 3072, 98), both, 0.2 * both);
}

TEST(DramTiming, IdealModelIsFixedLatency) {
  isa::DramConfig c;
  c.model = isa::DramModel::kIdeal;
  c.latency_ns = 50;
  auto dram = timing::make_dram(c);
  EXPECT_EQ(dram->access(0, 64, false, 1000), 51000u);
  EXPECT_EQ(dram->access(64, 4096, true, 1000), 51000u);
}

}  // namespace
}  // namespace npusim
