#pragma once
// The one integer ceiling division (tiles, folds, bursts, chunks): ceil(a / b) for a >= 0, b > 0.
#include <cstdint>

namespace npusim {

// A power-of-two divisor (the sizes of every preset: lanes, bank widths, array sides) shifts instead of
// dividing: the simulator and the compiler's estimates divide per instruction, and a 64-bit divide costs
// tens of cycles. The same quotient: a + b - 1 >= 0 shifted right by log2(b) is its division by b.
constexpr int64_t ceil_div(int64_t a, int64_t b) {
  const int64_t n = a + b - 1;
  if (n >= 0 && b > 0 && (b & (b - 1)) == 0) return n >> __builtin_ctzll(static_cast<uint64_t>(b));
  return n / b;
}

}  // namespace npusim
