// The PE-level model (arch/datapath/pe_array.h) against the closed form of isa/timing/systolic.h,
// cycle for cycle, on every dataflow, shape and timing option.
#include <gtest/gtest.h>

#include <cstdint>
#include <utility>

#include "arch/datapath/pe_array.h"
#include "isa/timing/systolic.h"
#include "tests/isa/timing_test_util.h"

namespace npusim {
namespace {

using isa::Dataflow;
using testing::array;
namespace timing = isa::timing;

// With every option (double buffering, pipelined folds, a preloaded first fold, a reduced rate) the
// PE-level model and the closed form agree.
TEST(SystolicTiming, PeModelMatchesClosedFormWithEveryTimingOption) {
  const int64_t sizes[] = {1, 2, 3, 5, 8, 9};
  for (auto [r, c] : {std::pair<int64_t, int64_t>{4, 4}, {3, 5}, {5, 2}}) {
    for (Dataflow df : {Dataflow::kWs, Dataflow::kOs, Dataflow::kIs}) {
      const arch::datapath::PeArray pe(r, c, df);
      for (bool db : {false, true}) {
        for (bool piped : {false, true}) {
          for (bool pre : {false, true}) {
            for (isa::DType t : {isa::DType::kInt8, isa::DType::kFp16, isa::DType::kInt16}) {
              auto a = array(r, c, df, db, piped);
              a.int16_rate = 0.25;  // int16 x int8 at a quarter of the int8 rate (TPU v1's 16 x 16 rate)
              arch::datapath::PeTimingOptions opt;
              opt.double_buffered = db;
              opt.first_fold_preloaded = pre;
              opt.rate = a.rate(t);
              opt.pipelined_folds = a.folds_pipelined();
              for (int64_t m : sizes) {
                for (int64_t k : sizes) {
                  for (int64_t n : sizes) {
                    const auto closed = timing::gemm_cycles(a, {m, k, n}, t, pre);
                    ASSERT_EQ(pe.run(m, k, n, nullptr, opt).cycles, closed.total)
                        << r << "x" << c << " " << isa::kDataflowNames[static_cast<int>(df)] << " m=" << m
                        << " k=" << k << " n=" << n << " db=" << db << " pipelined=" << piped
                        << " pre=" << pre << " " << isa::kDTypeNames[static_cast<size_t>(t)];
                  }
                }
              }
            }
          }
        }
      }
    }
  }
}

// The PE-level model steps every PE every cycle; the closed form must agree on every shape,
// including those that do not fill the array.
TEST(SystolicTiming, PeModelMatchesClosedFormOverShapeGrid) {
  const int64_t sizes[] = {1, 2, 3, 4, 5, 7, 8, 9};
  for (auto [r, c] : {std::pair<int64_t, int64_t>{4, 4}, {3, 5}, {2, 6}}) {
    for (Dataflow df : {Dataflow::kWs, Dataflow::kOs, Dataflow::kIs}) {
      const auto a = array(r, c, df);
      const arch::datapath::PeArray pe(r, c, df);
      for (int64_t m : sizes) {
        for (int64_t k : sizes) {
          for (int64_t n : sizes) {
            const auto closed = timing::gemm_cycles(a, {m, k, n}, isa::DType::kInt8, false);
            const auto stepped = pe.run(m, k, n);
            ASSERT_EQ(stepped.cycles, closed.total)
                << r << "x" << c << " " << isa::kDataflowNames[static_cast<int>(df)] << " m=" << m
                << " k=" << k << " n=" << n;
            ASSERT_EQ(stepped.folds, closed.folds);
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace npusim
