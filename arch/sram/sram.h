#pragma once
// The three scratchpads as timing resources. Capacity is checked once per instruction by
// datapath::footprint() before the run (an access past capacity is a SimError); here each buffer is
// a bandwidth resource of banks x bank_width x ports bytes per cycle. Dense transfers (DMA, vector
// operands) reserve it for their transfer cycles; two that collide in the same window serialise and
// the wait is counted as bank-conflict stall cycles. Strided parallel reads of the matrix unit pay
// their bank conflicts through timing::bank_conflict_factor.
#include <array>
#include <cstdint>

#include "isa/machine/config.h"
#include "isa/timing/units.h"

namespace npusim::arch {

class Sram {
 public:
  explicit Sram(const isa::SramConfig& config) : config_(config) {}

  // Reserves `buf` for a dense transfer of `bytes` wanting to start at `cycle`; returns when it can
  // start (>= cycle). The difference is a bank-conflict stall, counted here and added to `*layer` (the
  // instruction's layer's count) when given.
  uint64_t reserve(isa::Buffer buf, uint64_t bytes, uint64_t cycle, uint64_t* layer = nullptr) {
    const auto b = static_cast<size_t>(config_.storage(buf));  // a shared scratchpad is one resource
    const uint64_t start = cycle > busy_until_[b] ? cycle : busy_until_[b];
    busy_until_[b] =
        start + static_cast<uint64_t>(isa::timing::sram_transfer_cycles(bytes, config_.buffer(buf)));
    if (start > cycle) {
      ++conflicts_;
      conflict_cycles_ += start - cycle;
      if (layer) *layer += start - cycle;
    }
    return start;
  }
  // When `buf`'s storage is free again: right after reserve(), the reserved transfer's end (its start plus
  // transfer_cycles()).
  uint64_t busy_until(isa::Buffer buf) const {
    return busy_until_[static_cast<size_t>(config_.storage(buf))];
  }
  // Records a conflict found by another rule (strided reads).
  void count_conflict(uint64_t cycles, uint64_t* layer = nullptr) {
    ++conflicts_;
    conflict_cycles_ += cycles;
    if (layer) *layer += cycles;
  }
  int64_t transfer_cycles(isa::Buffer buf, uint64_t bytes) const {
    return isa::timing::sram_transfer_cycles(bytes, config_.buffer(buf));
  }
  const isa::ScratchpadConfig& buffer(isa::Buffer b) const { return config_.buffer(b); }
  uint64_t conflicts() const { return conflicts_; }
  uint64_t conflict_cycles() const { return conflict_cycles_; }

 private:
  isa::SramConfig config_;
  std::array<uint64_t, isa::kNumBuffers> busy_until_{};
  uint64_t conflicts_ = 0;
  uint64_t conflict_cycles_ = 0;
};

}  // namespace npusim::arch
