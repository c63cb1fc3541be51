#pragma once
// The vector unit: VEC instructions, latency + ceil(work / lanes) * ii cycles from the config's
// per-op table (isa/timing/units.h); its operands reserve SRAM bandwidth and wait on collisions.
#include "arch/core/queue_unit.h"

namespace npusim::arch {

class VectorUnit : public QueueUnit {
 public:
  SC_HAS_PROCESS(VectorUnit);
  VectorUnit(const sc_core::sc_module_name& name, const isa::VectorConfig& config, Fabric& fabric);

 private:
  void decode(const isa::Instruction& ins, Dispatch& d) const override;
  bool advance(const Dispatch& d, uint64_t token_cycle) override;
  bool compute(const Dispatch& d);  // once its operands' SRAM windows are free
  isa::VectorConfig config_;
  enum class Step : uint8_t { kStart, kReserved, kDone };
  Step step_ = Step::kStart;
};

}  // namespace npusim::arch
