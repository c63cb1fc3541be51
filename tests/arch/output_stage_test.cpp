// systolic_array.output_stage in the simulator (arch/vector/vector_unit.h): a VEC output on accumulator sums
// runs on the output stage while the lanes take the next VEC, unless that VEC touches the output's bytes;
// tokens leave in program order; the values are those of the lanes' VEC output.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "arch/datapath/state.h"
#include "arch/simulate.h"
#include "isa/assembly.h"
#include "isa/timing/units.h"

namespace npusim {
namespace {

isa::NpuConfig stage_config(bool stage) {
  isa::NpuConfig c;
  c.sequencer.dispatch_cycles = 0;
  c.systolic_array.rows = 4;
  c.systolic_array.cols = 4;
  c.vector.lanes = 4;
  c.systolic_array.output_stage = stage;
  return c;
}

// A float output stage (bias, clamp to [-inf, inf], fp32 -> fp16) over 1024 accumulator sums, then a RELU of
// 1024 fp16 elements at input byte `relu_src`, then a NOP that waits for the RELU's token.
isa::Program program(const std::string& relu_src) {
  return isa::assemble(
      ".layer conv Conv\n.layer act Relu\n"
      "VEC layer=conv op=output dtype=fp32 dtype_out=fp16 src1_buf=acc src1=0x0 src2_buf=acc src2=0x8000 "
      "dst_buf=input dst=0x0 d0=4 d1=256 d2=1 bcast=row imm0=0xff800000 imm1=0x7f800000 imm2=0\n"
      "VEC layer=act signal=matrix op=relu dtype=fp16 dtype_out=fp16 src1_buf=input src1=" +
          relu_src + " dst_buf=input dst=0x8000 d0=1024 d1=1 d2=1\nNOP layer=act wait=vector\nHALT\n",
      "output_stage.s");
}

TEST(OutputStage, TheLanesRunTheNextVecBesideAnOutputOnAccumulatorSums) {
  const isa::Program p = program("0x4000");
  const isa::NpuConfig on = stage_config(true), off = stage_config(false);
  const int64_t out = isa::timing::output_stage_cycles(p.instructions[0], on);
  const int64_t lanes_out = isa::timing::vec_cycles(p.instructions[0], off.vector);
  const int64_t relu = isa::timing::vec_cycles(p.instructions[1], on.vector);
  ASSERT_GT(out, relu);  // the RELU ends first: its token waits for the output's end
  const traces::Report serial = arch::simulate(p, off, {});
  const traces::Report beside = arch::simulate(p, on, {});
  EXPECT_GE(serial.total_cycles, static_cast<uint64_t>(lanes_out + relu));
  // Beside: the output's cycles, the NOP's token pushed when the output (earlier in program order) ends.
  EXPECT_LT(beside.total_cycles, static_cast<uint64_t>(out + relu));
  EXPECT_GE(beside.total_cycles, static_cast<uint64_t>(out));
}

// The report has the stage as a unit of its own: its instruction and busy cycles, not the lanes'.
TEST(OutputStage, TheReportCountsTheStageAsItsOwnUnit) {
  const isa::Program p = program("0x4000");
  const isa::NpuConfig on = stage_config(true), off = stage_config(false);
  const auto unit = [](const traces::Report& r, const std::string& name) -> const traces::UnitReport* {
    for (const traces::UnitReport& u : r.units)
      if (u.name == name) return &u;
    return nullptr;
  };
  const traces::Report beside = arch::simulate(p, on, {});
  const traces::UnitReport* stage = unit(beside, "output_stage");
  ASSERT_NE(stage, nullptr);
  EXPECT_EQ(stage->instructions, 1u);
  EXPECT_EQ(stage->busy, static_cast<uint64_t>(isa::timing::output_stage_cycles(p.instructions[0], on)));
  ASSERT_NE(unit(beside, "vector"), nullptr);
  EXPECT_EQ(unit(beside, "vector")->busy,
            static_cast<uint64_t>(isa::timing::vec_cycles(p.instructions[1], on.vector)));
  EXPECT_EQ(unit(arch::simulate(p, off, {}), "output_stage"), nullptr);
}

TEST(OutputStage, AVecReadingTheOutputsBytesWaitsForIt) {
  const isa::NpuConfig on = stage_config(true);
  const isa::Program p = program("0x0");  // reads what the output writes
  const int64_t out = isa::timing::output_stage_cycles(p.instructions[0], on);
  const int64_t relu = isa::timing::vec_cycles(p.instructions[1], on.vector);
  EXPECT_GE(arch::simulate(p, on, {}).total_cycles, static_cast<uint64_t>(out + relu));
}

TEST(OutputStage, ValuesAreTheLanesOutputs) {
  for (const char* src : {"0x0", "0x4000"}) {
    const isa::Program p = program(src);
    std::vector<uint8_t> result[2];
    for (int stage = 0; stage < 2; ++stage) {
      arch::RunOptions o;
      o.functional = true;
      o.before_run = [](arch::datapath::MachineState& m) {
        // Sums and biases that round to fp16.
        float* sums = reinterpret_cast<float*>(m.sram_span(isa::Buffer::kAccumulator, 0, 4096, "sums"));
        for (int i = 0; i < 1024; ++i) sums[i] = static_cast<float>(i) * 0.3712f - 170.1f;
        float* bias = reinterpret_cast<float*>(m.sram_span(isa::Buffer::kAccumulator, 0x8000, 16, "bias"));
        for (int k = 0; k < 4; ++k) bias[k] = 0.1f * static_cast<float>(k) - 0.13f;
      };
      o.after_run = [&](arch::datapath::MachineState& m) {
        const uint8_t* b = m.sram_span(isa::Buffer::kInput, 0, 0xA000, "out");
        result[stage].assign(b, b + 0xA000);
      };
      arch::simulate(p, stage_config(stage == 1), o);
    }
    EXPECT_EQ(result[0], result[1]) << src;
  }
}

}  // namespace
}  // namespace npusim
