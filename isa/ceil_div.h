#pragma once
// The one integer ceiling division (tiles, folds, bursts, chunks): ceil(a / b) for a >= 0, b > 0.
#include <cstdint>

namespace npusim {

constexpr int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace npusim
