// The energy and area model (traces/energy.h, docs/energy.md) on one GEMM tile, every figure derived
// from the configuration's per-action energies and the tile's shape, not from a previous run.
#include <gtest/gtest.h>

#include <cmath>

#include "arch/simulate.h"
#include "tests/arch/test_util.h"

namespace npusim {
namespace {

using traces::EnergyComponent;

// gemm_tile.s: one 8 x 4 x 4 int8 MATMUL (not preloaded, not accumulating) on a 4 x 4 weight-stationary
// array with the default (edge) scratchpads and energies.
TEST(Energy, Gemm8x4x4TileCostsItsMacsItsScratchpadWordsAndLeakageOverItsCycles) {
  const isa::Program p = testing::load_program("gemm_tile.s");
  isa::NpuConfig c;
  c.systolic_array.rows = c.systolic_array.cols = 4;
  const traces::Report r = arch::simulate(p, c, {});
  ASSERT_TRUE(r.energy && r.area);
  ASSERT_EQ(r.layers.size(), 1u);
  const double scale = c.technology.node_nm / c.energy.reference_nm;  // 28 / 45
  const double pj = 1e-9;                                             // mJ per pJ
  const double step = std::ldexp(1.0, -traces::kEnergyGridExponent);  // energies are rounded to it

  // 128 int8 MACs.
  EXPECT_NEAR(r.energy->by_component[EnergyComponent::kMac], 128 * c.energy.mac_pj[0] * scale * pj, step);

  // One fold in each direction: A (8 x 4 int8 = 32 B) read once from the input scratchpad (256 KiB in 8
  // banks of 16 B: 2 words of a 32 KiB bank), B (16 B) once from the weight scratchpad (128 KiB in 8 banks:
  // 1 word of a 16 KiB bank), C (8 x 4 int32 = 128 B) written once into the accumulator (128 KiB in 8
  // banks of 32 B: 4 words of a 16 KiB bank), never read back.
  const double read_bit = c.energy.sram_read_pj_per_bit, write_bit = c.energy.sram_write_pj_per_bit;
  const double sram = 2 * 8 * 16 * read_bit * std::sqrt(32.0 / 8) +
                      1 * 8 * 16 * read_bit * std::sqrt(16.0 / 8) +
                      4 * 8 * 32 * write_bit * std::sqrt(16.0 / 8);
  EXPECT_NEAR(r.energy->by_component[EnergyComponent::kSram], sram * scale * pj, step);
  for (EnergyComponent k :
       {EnergyComponent::kDram, EnergyComponent::kVector, EnergyComponent::kDma, EnergyComponent::kHostLink})
    EXPECT_EQ(r.energy->by_component[k], 0.0);

  // Area at 28 nm: 16 PEs, 512 KiB of SRAM, 32 lanes, 2 DMA engines; static power over the run.
  const double a = scale * scale;
  const double area = 16 * c.area.pe_um2 * 1e-6 * a + 0.5 * c.area.sram_mm2_per_mib * a +
                      32 * c.area.vector_lane_um2 * 1e-6 * a + 2 * c.area.dma_engine_mm2 * a;
  EXPECT_NEAR(r.area->total_mm2, area, 1e-12);
  const double static_mj =
      area * c.energy.static_mw_per_mm2 * 1e-3 * r.total_cycles / (c.frequency_mhz * 1e6) * 1e3;
  EXPECT_NEAR(r.energy->by_component[EnergyComponent::kStatic], static_mj, step);

  // One layer: it holds all of it.
  EXPECT_EQ(r.layers[0].energy.mj, r.energy->by_component.mj);
  EXPECT_EQ(r.energy->total_mj, r.energy->by_component.total());
  EXPECT_NEAR(r.energy->average_power_w, r.energy->total_mj / r.latency_ms, 1e-12);
}

// Energy is an observer: any energy or area key leaves every cycle as it was.
TEST(Energy, EnergyAndAreaKeysChangeNoCycle) {
  const isa::Program p = testing::load_program("gemm_tile.s");
  isa::NpuConfig c;
  isa::NpuConfig d = c;
  d.technology.node_nm = 7;
  d.energy.mac_pj = {9, 9, 9, 9};
  d.energy.static_mw_per_mm2 = 1000;
  d.area.pe_um2 = 1;
  const traces::Report a = arch::simulate(p, c, {}), b = arch::simulate(p, d, {});
  EXPECT_EQ(a.total_cycles, b.total_cycles);
  EXPECT_EQ(a.layers[0].cycles, b.layers[0].cycles);
  EXPECT_NE(a.energy->total_mj, b.energy->total_mj);
}

}  // namespace
}  // namespace npusim
