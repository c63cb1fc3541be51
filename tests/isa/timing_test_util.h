#pragma once
// Shared by the closed-form timing tests (tests/isa/timing_test.cpp) and the PE-level model's
// cross-check against them (tests/arch/datapath/pe_timing_test.cpp).
#include <cstdint>

#include "isa/machine/config.h"

namespace npusim::testing {

inline isa::SystolicArrayConfig array(int64_t r, int64_t c, isa::Dataflow df, bool double_buffered = false,
                                      bool pipelined_folds = false) {
  isa::SystolicArrayConfig a;
  a.rows = r;
  a.cols = c;
  a.dataflow = df;
  a.double_buffered = double_buffered;
  a.pipelined_folds = pipelined_folds;
  return a;
}

}  // namespace npusim::testing
