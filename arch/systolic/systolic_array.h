#pragma once
// The matrix unit: PRELOAD, MATMUL, CONV (and NOP). One wait per instruction: its cycles come from
// isa/timing/systolic.h (model: tile) or from stepping datapath::PeArray (model: pe), plus the
// serialisation of strided operand reads that collide on an SRAM bank. With chained_instructions a
// MATMUL/CONV overlaps the previous one's fill and drain (isa/timing/systolic.h).
#include <memory>

#include "arch/core/queue_unit.h"
#include "arch/datapath/pe_array.h"
#include "isa/timing/systolic.h"

namespace npusim::arch {

class SystolicArray : public QueueUnit {
 public:
  SC_HAS_PROCESS(SystolicArray);
  SystolicArray(const sc_core::sc_module_name& name, const isa::SystolicArrayConfig& config, Fabric& fabric);

  // Cycles of a MATMUL/CONV on this array without bank conflicts (either model).
  isa::timing::ArrayCycles tile_cycles(const isa::Instruction& ins) const;
  // Stream slow-down from strided reads of the streamed operand colliding on SRAM banks (>= 1).
  int64_t conflict_factor(const isa::Instruction& ins) const;
  uint64_t macs() const { return macs_; }
  void decode(const isa::Instruction& ins, Dispatch& d) const override;

 private:
  bool advance(const Dispatch& d, uint64_t token_cycle) override;
  // MATMUL/CONV from its stream phase on, once a bank conflict's extra cycles are over.
  bool compute(const Dispatch& d, uint64_t token_cycle);
  bool finish(const Dispatch& d);

  enum class Step : uint8_t { kStart, kConflictOver, kDone };
  Step step_ = Step::kStart;
  uint64_t end_ = 0;  // when the MATMUL/CONV in progress ends

  isa::SystolicArrayConfig config_;
  std::unique_ptr<datapath::PeArray> pe_;  // model: pe
  uint64_t last_compute_start_ = 0;        // when the shadow registers were last freed
  bool chain_open_ = false;                // the last instruction on the array was a MATMUL/CONV
  uint64_t last_row_in_ = 0;               // the cycle its last row entered the array
  uint64_t macs_ = 0;
};

}  // namespace npusim::arch
