// The matrix search's closed form counts a layer's DMA as the simulator's engines move it
// (isa::timing::DramStreamRates): each box at the rate the DRAM sustains for transfers of its size, so a
// layer of long transfers on HBM2 is counted near the DRAM's peak, not at the rate of 4 KiB transfers,
// where each transfer's latency dominates.
#include <gtest/gtest.h>

#include <string>

#include "compiler/backend/compile.h"
#include "compiler/passes/lowered.h"
#include "isa/timing/dram.h"
#include "tests/compiler/backend/functional.h"

namespace npusim::compiler::testing {
namespace {

// datacenter.yaml's array, scratchpads, DMA and DRAM: a 128 x 256 bf16 array, 16 HBM2 channels, four
// engines of 256 bursts of 64 bytes in flight.
isa::NpuConfig hbm2_machine() {
  isa::NpuConfig c;
  c.frequency_mhz = 940.0;
  c.systolic_array.rows = 128;
  c.systolic_array.cols = 256;
  c.systolic_array.bf16_rate = 1.0;
  c.sram.input.size_kib = 16384;
  c.sram.weight.size_kib = 8192;
  c.sram.accumulator.size_kib = 4096;
  c.dram.model = isa::DramModel::kHbm2;
  c.dram.channels = 16;
  c.dma.engines = 4;
  c.dma.burst_bytes = 64;
  c.dma.max_outstanding = 256;
  c.dma.alignment_bytes = 64;
  c.dma.setup_cycles = 16;
  return c;
}

TEST(DmaEstimate, ALayerOfLongTransfersOnHbm2IsCountedNearTheDramPeak) {
  // x [8192, 64] x w [64, 256] in bf16 (ResNet-50's layer1 conv3 at batch 8 as one GEMM): 8 k cycles of
  // array work against 1 MiB read and 4 MiB written, DMA-bound.
  constexpr int64_t kM = 8192, kK = 64, kN = 256;
  GraphBuilder b;
  b.input("x", {kM, kK});
  b.constant("w", {kK, kN}, 0.5f, 5);
  b.node("MatMul", {"x", "w"}, {"y"}, "mm");
  b.output("y");
  Graph g = b.build();
  lower(g);
  const isa::NpuConfig c = hbm2_machine();
  CompileOptions o;
  o.precision = isa::DType::kBf16;
  const CompileResult r = compile(g, c, o);  // no timer: the closed form alone decides
  const LayerPlan* mm = nullptr;
  for (const LayerPlan& p : r.layers)
    if (p.name == "mm") mm = &p;
  ASSERT_NE(mm, nullptr);
  // Every byte crosses the DRAM at least once: no faster than the peak. Long transfers stream at most of
  // it (the DRAM model's row misses, refresh and turnaround take about a fifth): within twice the peak's
  // time. Counted at the 4 KiB transfers' rate (89.5 bytes a cycle here) it was 6 times the peak's.
  const double bytes = static_cast<double>((kM * kK + kK * kN + kM * kN) * 2);
  const double peak = isa::timing::dram_peak_bytes_per_cycle(c);
  EXPECT_GE(static_cast<double>(mm->est_dma_cycles), bytes / peak) << mm->mapping;
  EXPECT_LE(static_cast<double>(mm->est_dma_cycles), 2.0 * bytes / peak) << mm->mapping;
}

}  // namespace
}  // namespace npusim::compiler::testing
