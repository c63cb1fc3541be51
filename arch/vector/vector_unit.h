#pragma once
// The vector unit: VEC instructions, latency + ceil(work / lanes) * ii cycles from the config's
// per-op table (isa/timing/units.h); its operands reserve SRAM bandwidth and wait on collisions.
//
// With systolic_array.output_stage, a VEC output on accumulator sums runs on the output stage, a second
// pipeline on the accumulator's read path (isa::timing::output_stage_cycles), while the lanes take the next
// instructions of the queue: in order, one instruction on the stage at a time, and a lane instruction that
// touches the bytes the stage's instruction reads or writes (one of them writing) waits for it. Tokens
// leave in program order: an instruction that completes while an earlier one is still on the stage has its
// tokens pushed when that one ends.
#include <systemc>

#include <cstdint>
#include <deque>

#include "arch/core/queue_unit.h"

namespace npusim::arch {

class VectorUnit : public QueueUnit {
 public:
  SC_HAS_PROCESS(VectorUnit);
  // stage_unit: the output stage's track (Npu::track_names), kNoTrack: not recorded.
  static constexpr uint16_t kNoTrack = UINT16_MAX;
  VectorUnit(const sc_core::sc_module_name& name, const isa::VectorConfig& config, Fabric& fabric,
             uint16_t stage_unit = kNoTrack);

 private:
  void decode(const isa::Instruction& ins, Dispatch& d) const override;
  bool advance(const Dispatch& d, uint64_t token_cycle) override;
  bool compute(const Dispatch& d);  // once its operands' SRAM windows are free
  // Completes an instruction now, or behind the instructions still on the output stage (program order).
  void retire_at(uint64_t cycle, uint8_t signal);
  void retire();  // the method process that pushes the queued completions' tokens
  // Whether lane work `w` touches the bytes of the output stage's instruction, one of the two writing.
  bool hazard(const Dispatch::VectorWork& w) const;

  isa::VectorConfig config_;
  enum class Step : uint8_t { kStart, kReserved, kDone };
  Step step_ = Step::kStart;

  const uint16_t stage_unit_;
  uint64_t stage_free_ = 0;            // the cycle the output stage's instruction ends
  Dispatch::VectorWork stage_work_{};  // that instruction's operands
  struct Pending {
    uint64_t cycle;
    uint8_t signal;
  };
  std::deque<Pending> pending_;  // completions whose tokens wait for program order, oldest first
  sc_core::sc_event retire_event_;
};

}  // namespace npusim::arch
