// The compiler's simulation timer (sim/model/simulation_timer.cpp) remembers the slices it simulated: a
// slice timed before takes the first simulation's cycles without simulating again, and a slice that
// differs in one field of one instruction, or in its layer count, is simulated on its own.
#include <gtest/gtest.h>

#include <algorithm>

#include <systemc>

#include "arch/simulate.h"
#include "sim/model/model.h"

namespace npusim {
namespace {

using isa::Field;

int64_t mask(isa::Queue q) { return int64_t{1} << static_cast<int>(q); }

// Two layers: a LOAD of `bytes` and a MATMUL on it, then a STORE.
isa::Program slice(int64_t bytes) {
  isa::Program p;
  p.layers.push_back({"load", "Gemm"});
  p.layers.push_back({"gemm", "Gemm"});
  isa::Instruction ld;
  ld.opcode = isa::Opcode::kLoad;
  ld.set(Field::kBuf, 0)
      .set(Field::kSize0, bytes)
      .set(Field::kSize1, 1)
      .set(Field::kSize2, 1)
      .set(Field::kSize3, 1);
  ld.set(Field::kDtype, static_cast<int64_t>(isa::DType::kInt8))
      .set(Field::kSignal, mask(isa::Queue::kMatrix));
  isa::Instruction mm;
  mm.opcode = isa::Opcode::kMatmul;
  mm.set(Field::kLayer, 1).set(Field::kDtype, static_cast<int64_t>(isa::DType::kInt8)).set(Field::kM, 16);
  mm.set(Field::kK, 16).set(Field::kN, 16).set(Field::kWait, mask(isa::Queue::kLoad));
  mm.set(Field::kSignal, mask(isa::Queue::kStore));
  isa::Instruction st;
  st.opcode = isa::Opcode::kStore;
  st.set(Field::kLayer, 1).set(Field::kBuf, 0).set(Field::kDramAddr, 1 << 20).set(Field::kSize0, 256);
  st.set(Field::kSize1, 1)
      .set(Field::kSize2, 1)
      .set(Field::kSize3, 1)
      .set(Field::kWait, mask(isa::Queue::kMatrix));
  p.instructions = {ld, mm, st};
  return p;
}

TEST(SimulationTimer, ARepeatedSliceTakesTheFirstSimulationsCyclesAndADifferentSliceIsSimulated) {
  const isa::NpuConfig config;
  const compiler::CodeTimer timer = sim::simulation_timer(config);
  const compiler::SliceCycles first = timer(slice(4096));
  ASSERT_EQ(first.layers.size(), 2u);
  // Every simulation makes a new SystemC context while the previous one is alive (arch/simulate.cpp), so an
  // unchanged current context means nothing was simulated.
  const sc_core::sc_simcontext* after_first = sc_core::sc_curr_simcontext;
  EXPECT_EQ(timer(slice(4096)).layers, first.layers);
  EXPECT_EQ(timer(slice(4096)).total, first.total);
  EXPECT_EQ(sc_core::sc_curr_simcontext, after_first);

  // One field of one instruction differs: simulated, and its cycles are a fresh timer's.
  const compiler::SliceCycles bigger = timer(slice(8192));
  EXPECT_NE(sc_core::sc_curr_simcontext, after_first);
  EXPECT_GT(bigger.layers[0], first.layers[0]);
  EXPECT_EQ(bigger.layers, sim::simulation_timer(config)(slice(8192)).layers);

  // The same instructions with a third (empty) layer: one figure per layer.
  isa::Program three = slice(4096);
  three.layers.push_back({"empty", "Relu"});
  EXPECT_EQ(timer(three).layers.size(), 3u);
}

// The slice's own cycles are the run's total as a report counts it (the layers' spans may overlap and
// need not add up to it), simulated as the timer simulates (DRAM refresh averaged).
TEST(SimulationTimer, TheSlicesCyclesAreItsRunsTotal) {
  const isa::NpuConfig config;
  const compiler::SliceCycles c = sim::simulation_timer(config)(slice(4096));
  arch::RunOptions options;
  options.dram_refresh = isa::timing::Refresh::kAveraged;
  EXPECT_EQ(c.total, static_cast<int64_t>(arch::simulate(slice(4096), config, options).total_cycles));
  EXPECT_GE(c.total, std::max(c.layers[0], c.layers[1]));
}

}  // namespace
}  // namespace npusim
