#pragma once
// What one instruction does in actions that cost energy (traces::Activity): MACs by precision,
// scratchpad accesses by buffer, vector element operations, DMA and host-link bytes. A function of the
// instruction and the machine alone, counted once per instruction when it is dispatched; DRAM row
// activates are counted by the DMA engines, which see the DRAM model's row misses. No SystemC.
#include <array>

#include "arch/core/dispatch.h"
#include "isa/isa.h"
#include "isa/machine/config.h"
#include "traces/energy.h"

namespace npusim::arch {

// Adds what `ins` does to `a`. The instruction must have passed check_program; `d` is its queue entry as
// its unit decoded it (QueueUnit::decode), whose DMA rows and vector operand bytes are reused.
//
// Scratchpad traffic of a MATMUL/CONV follows the dataflow's folds (isa::timing::fold_map): the streamed
// operand is read once per fold of the array's columns, the stationary one once (not at all when
// preloaded: its PRELOAD read it), and the outputs are written once per fold of the reduction over the
// array's rows (ws, is; once in os), read back before every write but the first unless accumulating.
void count_activity(const isa::Instruction& ins, const Dispatch& d, const isa::NpuConfig& config,
                    traces::Activity& a);

// count_activity with each scratchpad's bank width (as a shift when it is a power of two) and storage
// looked up once, not per access: the sequencer counts every instruction it dispatches. The same counts.
class ActivityCounter {
 public:
  explicit ActivityCounter(const isa::NpuConfig& config);
  void count(const isa::Instruction& ins, const Dispatch& d, traces::Activity& a) const;

 private:
  // Accesses of `bytes` to scratchpad `b`, `times` over, counted on its storage in whole bank words.
  void access(traces::Activity& a, isa::Buffer b, int64_t bytes, int64_t times, bool write) const;
  void count_matrix(const isa::Instruction& ins, traces::Activity& a) const;

  struct Banks {
    uint64_t width;  // bank_width_bytes
    int shift;       // log2(width) when a power of two, else -1 (divide)
    size_t storage;  // SramConfig::storage(b)
  };
  const isa::NpuConfig& config_;
  std::array<Banks, isa::kNumBuffers> banks_{};
};

}  // namespace npusim::arch
