#pragma once
// Division by a divisor fixed at construction, a shift and a mask when it is a power of two. The
// DRAM address map and the burst split divide every burst address by configured sizes; those are
// powers of two in every preset, and a hardware divide is tens of cycles.
#include <cstdint>

namespace npusim::isa::timing {

class FastDiv {
 public:
  FastDiv() = default;
  explicit FastDiv(uint64_t d) : d_(d ? d : 1) {
    pow2_ = (d_ & (d_ - 1)) == 0;
    while ((uint64_t{1} << shift_) < d_) ++shift_;
  }
  uint64_t div(uint64_t x) const { return pow2_ ? x >> shift_ : x / d_; }
  uint64_t mod(uint64_t x) const { return pow2_ ? x & (d_ - 1) : x % d_; }
  uint64_t divisor() const { return d_; }
  bool pow2() const { return pow2_; }
  // div() and mod() when the caller knows (kPow2) that the divisor is a power of two: a loop over many
  // addresses tests that once, not per division.
  template <bool kPow2>
  uint64_t div_as(uint64_t x) const {
    if constexpr (kPow2) return x >> shift_;
    return div(x);
  }
  template <bool kPow2>
  uint64_t mod_as(uint64_t x) const {
    if constexpr (kPow2) return x & (d_ - 1);
    return mod(x);
  }

 private:
  uint64_t d_ = 1;
  int shift_ = 0;
  bool pow2_ = true;
};

}  // namespace npusim::isa::timing
