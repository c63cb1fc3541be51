// Multi-core runs (arch::simulate_cores): cores with their own units sharing the DRAM model and the host
// link, checked against one core alone and against the bandwidth they share.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "arch/simulate.h"
#include "test_util.h"

namespace npusim {
namespace {

using testing::load_program;

isa::NpuConfig two_cores() {
  isa::NpuConfig c;
  c.cores = 2;
  c.frequency_mhz = 1000;
  c.sequencer.dispatch_cycles = 0;
  c.systolic_array.rows = 4;
  c.systolic_array.cols = 4;
  c.systolic_array.double_buffered = false;
  return c;
}

// A memory-bound program: one 1 MiB LOAD. The simple DRAM's 10 GB/s is the bound.
isa::NpuConfig streaming(isa::NpuConfig c) {
  c.dram.model = isa::DramModel::kSimple;
  c.dram.bandwidth_gbps = 10;
  c.dram.latency_ns = 100;
  c.dma.max_outstanding = 64;
  c.sram.input.size_kib = 1024;
  return c;
}

TEST(Multicore, OneProgramOnACoreTakesExactlyItsSingleCoreCycles) {
  const isa::Program p = load_program("all_opcodes.s");
  const isa::NpuConfig c = two_cores();
  const std::vector<traces::Report> r = arch::simulate_cores({&p}, c);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].total_cycles, arch::simulate(p, c, {}).total_cycles);
}

TEST(Multicore, ComputeBoundProgramsOnIdealDramRunInTheTimeOfOne) {
  // Ideal DRAM: unlimited bandwidth, nothing shared is contended, so each core takes its time alone.
  const isa::Program p = load_program("gemm_tile.s");
  isa::NpuConfig c = two_cores();
  c.dram.model = isa::DramModel::kIdeal;
  const uint64_t alone = arch::simulate(p, c, {}).total_cycles;
  const std::vector<traces::Report> r = arch::simulate_cores({&p, &p}, c);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].total_cycles, alone);
  EXPECT_EQ(r[1].total_cycles, alone);
}

TEST(Multicore, EachCoreRunsWithItsOwnConfiguration) {
  // Ideal DRAM: each core takes exactly its time alone on its own configuration; core 1's sequencer
  // takes longer to dispatch.
  const isa::Program p = load_program("gemm_tile.s");
  isa::NpuConfig a = two_cores();
  a.dram.model = isa::DramModel::kIdeal;
  isa::NpuConfig b = a;
  b.sequencer.dispatch_cycles = 7;
  const uint64_t alone_a = arch::simulate(p, a, {}).total_cycles,
                 alone_b = arch::simulate(p, b, {}).total_cycles;
  ASSERT_NE(alone_a, alone_b);
  const std::vector<traces::Report> r = arch::simulate_cores({&p, &p}, {&a, &b});
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].total_cycles, alone_a);
  EXPECT_EQ(r[1].total_cycles, alone_b);
}

TEST(Multicore, TwoMemoryBoundCoresShareTheDramBandwidth) {
  // Each core streams 1 MiB; together 2 MiB at 10 GB/s: the pair ends at twice one core's time alone
  // (bytes / bandwidth), not at the time of one (the ideal of two independent memories), and is no
  // slower than running the two one after the other.
  const isa::Program p = load_program("dma_bound.s");
  const isa::NpuConfig c = streaming(two_cores());
  const uint64_t alone = arch::simulate(p, c, {}).total_cycles;
  const double expected_alone = (1 << 20) / 10.0;  // ns = cycles at 1 GHz
  EXPECT_NEAR(static_cast<double>(alone), expected_alone, 0.02 * expected_alone);
  const std::vector<traces::Report> r = arch::simulate_cores({&p, &p}, c);
  ASSERT_EQ(r.size(), 2u);
  const uint64_t makespan = std::max(r[0].total_cycles, r[1].total_cycles);
  EXPECT_NEAR(static_cast<double>(makespan), 2 * expected_alone, 0.02 * expected_alone);
  EXPECT_LE(makespan, 2 * alone);
  for (const traces::Report& x : r) {
    EXPECT_GE(x.total_cycles, alone);
    EXPECT_EQ(x.dram.bytes_read, 1u << 20);  // each core's own traffic
  }
}

TEST(Multicore, TheSameProgramOnTwoCoresClosesNoRowTheOtherCoreOpened) {
  // Eight 256-byte LOADs, one after the other, all in the first page of channel 0 on the default banked
  // DRAM (LPDDR4-4266: 2 channels interleaved every 256 B, a 2 KiB page per channel): alone they open one
  // row. Two cores running the program at once (a batch split) each open their own row, in banks of
  // their own, once: 2 activates. (In the same bank, each core's LOAD closed the row the other core's
  // had opened: up to 16.)
  std::string text = ".layer l Load\n";
  for (int k = 0; k < 8; ++k)
    text += "LOAD layer=l dtype=int8 buf=input dram=" + std::to_string(k * 512) +
            " sram=" + std::to_string(k * 256) +
            " size0=256 size1=1 size2=1 size3=1 stride1=256 stride2=0 stride3=0\n";
  const isa::Program p = isa::assemble(text + "HALT\n", "loads.s");
  const isa::NpuConfig c = two_cores();
  ASSERT_EQ(c.dram.model, isa::DramModel::kLpddr4_4266);
  ASSERT_EQ(c.dram.channels, 2);
  const traces::Report alone = arch::simulate(p, c, {});
  EXPECT_EQ(alone.dram.row_misses, 1u);
  const std::vector<traces::Report> r = arch::simulate_cores({&p, &p}, c);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].dram.refreshes, 0u);
  EXPECT_EQ(r[0].dram.row_misses, 2u);  // the shared DRAM's: each core's one
  for (const traces::Report& x : r) EXPECT_GE(x.total_cycles, alone.total_cycles);
}

TEST(Multicore, TwoIndependentProgramsAreNoSlowerTogetherThanOneAfterTheOther) {
  // A compute-bound and a memory-bound program: each is at least as slow as alone (they share the
  // DRAM), and the pair ends no later than the two run back to back on one core.
  const isa::Program gemm = load_program("gemm_tile.s"), stream = load_program("dma_bound.s");
  const isa::NpuConfig c = streaming(two_cores());
  const uint64_t alone_gemm = arch::simulate(gemm, c, {}).total_cycles;
  const uint64_t alone_stream = arch::simulate(stream, c, {}).total_cycles;
  const std::vector<traces::Report> r = arch::simulate_cores({&gemm, &stream}, c);
  EXPECT_GE(r[0].total_cycles, alone_gemm);
  EXPECT_GE(r[1].total_cycles, alone_stream);
  EXPECT_LE(std::max(r[0].total_cycles, r[1].total_cycles), alone_gemm + alone_stream);
}

TEST(Multicore, HostCallsOfTwoCoresWaitForEachOthersLinkTransfers) {
  // One HOSTCALL sending 1 MB at 1 GB/s (1 ms on the link, no latency, no CPU time): alone it takes the
  // transfer; on two cores the second call's bytes follow the first's on the shared link.
  const isa::Program p = isa::assemble(
      ".layer fallback Softmax\n"
      "HOSTCALL layer=fallback host_op=0 in_bytes=1000000 out_bytes=0 cpu_ops=0\nHALT\n",
      "host.s");
  isa::NpuConfig c = two_cores();
  c.host.link_bandwidth_gbps = 1;
  c.host.link_latency_us = 0;
  c.host.call_overhead_us = 0;
  const uint64_t alone = arch::simulate(p, c, {}).total_cycles;
  EXPECT_NEAR(static_cast<double>(alone), 1e6, 100);  // 1 ms at 1 GHz
  const std::vector<traces::Report> r = arch::simulate_cores({&p, &p}, c);
  EXPECT_EQ(std::min(r[0].total_cycles, r[1].total_cycles), alone);
  EXPECT_NEAR(static_cast<double>(std::max(r[0].total_cycles, r[1].total_cycles)), 2e6, 100);
}

TEST(Multicore, MoreProgramsThanCoresIsASimError) {
  const isa::Program p = load_program("gemm_tile.s");
  isa::NpuConfig c = two_cores();
  c.cores = 1;
  EXPECT_THROW(arch::simulate_cores({&p, &p}, c), arch::SimError);
}

}  // namespace
}  // namespace npusim
