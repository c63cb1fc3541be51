// The PE-level array model against a closed form written here from first principles (SCALE-Sim v2's
// per-fold fill + stream + drain on the physical array), and its values against a plain GEMM and the
// executor.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "arch/datapath/executor.h"
#include "arch/datapath/numerics.h"
#include "arch/datapath/pe_array.h"
#include "isa/ceil_div.h"

namespace npusim::arch::datapath {
namespace {

using isa::Dataflow;

// Closed form. WS: B stationary (K on rows, N on cols); each fold loads R rows of weights, streams M
// input rows skewed over R rows, and drains partial sums through R rows and C columns.
// OS: outputs stationary (M on rows, N on cols); K operands skewed over R rows and C columns.
// IS: A^T stationary (K on rows, M on cols); like WS with N streamed.
int64_t closed_form(Dataflow df, int64_t R, int64_t C, int64_t M, int64_t K, int64_t N) {
  switch (df) {
    case Dataflow::kWs:
      return ceil_div(K, R) * ceil_div(N, C) * (R + (M + R + C - 2));
    case Dataflow::kOs:
      return ceil_div(M, R) * ceil_div(N, C) * (K + R + C - 2);
    case Dataflow::kIs:
      return ceil_div(K, R) * ceil_div(M, C) * (R + (N + R + C - 2));
  }
  return -1;
}

int64_t closed_form_folds(Dataflow df, int64_t R, int64_t C, int64_t M, int64_t K, int64_t N) {
  switch (df) {
    case Dataflow::kWs:
      return ceil_div(K, R) * ceil_div(N, C);
    case Dataflow::kOs:
      return ceil_div(M, R) * ceil_div(N, C);
    case Dataflow::kIs:
      return ceil_div(K, R) * ceil_div(M, C);
  }
  return -1;
}

TEST(PeArray, CycleCountsEqualTheClosedFormOnAGridOfShapesAndArrays) {
  const int64_t arrays[][2] = {{1, 1}, {2, 2}, {3, 2}, {2, 5}, {4, 4}, {8, 3}, {8, 8}};
  const int64_t dims[] = {1, 2, 3, 5, 8, 9, 17};
  int checked = 0;
  for (Dataflow df : {Dataflow::kWs, Dataflow::kOs, Dataflow::kIs}) {
    for (const auto& rc : arrays) {
      const PeArray pe(rc[0], rc[1], df);
      for (int64_t m : dims) {
        for (int64_t k : dims) {
          for (int64_t n : dims) {
            const PeTileResult r = pe.run(m, k, n);
            ASSERT_EQ(r.cycles, closed_form(df, rc[0], rc[1], m, k, n))
                << isa::kDataflowNames[static_cast<size_t>(df)] << " " << rc[0] << "x" << rc[1] << " m=" << m
                << " k=" << k << " n=" << n;
            ASSERT_EQ(r.folds, closed_form_folds(df, rc[0], rc[1], m, k, n));
            ASSERT_EQ(r.macs, m * k * n);  // null tokens never multiply
            ASSERT_EQ(r.drain_tail_cycles, df == Dataflow::kOs ? rc[0] : 0);
            ++checked;
          }
        }
      }
    }
  }
  EXPECT_EQ(checked, 3 * 7 * 7 * 7 * 7);
}

// npusim's options: only exposed preloads cost R; a rate of 1/p stretches every fold's stream to p*T.
TEST(PeArray, DoubleBufferingPreloadedFirstFoldAndPrecisionRateFollowTheClosedForm) {
  const int64_t arrays[][2] = {{1, 1}, {2, 3}, {4, 4}, {5, 2}};
  const int64_t dims[] = {1, 2, 4, 7, 9};
  for (Dataflow df : {Dataflow::kWs, Dataflow::kOs, Dataflow::kIs}) {
    for (const auto& rc : arrays) {
      const int64_t R = rc[0], C = rc[1];
      const PeArray pe(R, C, df);
      for (int64_t p : {1, 2, 4}) {
        for (bool db : {false, true}) {
          for (bool pre : {false, true}) {
            for (int64_t m : dims) {
              for (int64_t k : dims) {
                for (int64_t n : dims) {
                  const int64_t folds = closed_form_folds(df, R, C, m, k, n);
                  const int64_t t = df == Dataflow::kWs ? m : df == Dataflow::kOs ? k : n;
                  const int64_t exposed = df == Dataflow::kOs ? 0 : (db ? 1 : folds) - (pre ? 1 : 0);
                  const int64_t want = exposed * R + folds * (p * t + R + C - 2);
                  const PeTileResult r =
                      pe.run(m, k, n, nullptr, PeTimingOptions{db, pre, 1.0 / static_cast<double>(p)});
                  ASSERT_EQ(r.cycles, want) << isa::kDataflowNames[static_cast<size_t>(df)] << " " << R << "x"
                                            << C << " m=" << m << " k=" << k << " n=" << n << " rate=1/" << p
                                            << " double_buffered=" << db << " preloaded=" << pre;
                  ASSERT_EQ(r.macs, m * k * n);
                }
              }
            }
          }
        }
      }
    }
  }
  // A rate that is not 1/p: 5 elements at rate 0.4 take ceil(12.5) = 13 beats.
  EXPECT_EQ(PeArray(2, 2, Dataflow::kOs).run(2, 5, 2, nullptr, PeTimingOptions{false, false, 0.4}).cycles,
            13 + 2);
}

// Pipelined folds (WS, IS): one exposed preload (none when preloaded), folds max(B, R) apart, one fill
// and drain: exposed * R + (folds - 1) * max(p*t, R) + p*t + R + C - 2.
TEST(PeArray, PipelinedFoldsFollowTheirClosedForm) {
  const int64_t arrays[][2] = {{1, 1}, {2, 3}, {4, 4}, {5, 2}};
  const int64_t dims[] = {1, 2, 4, 7, 9};
  for (Dataflow df : {Dataflow::kWs, Dataflow::kIs}) {
    for (const auto& rc : arrays) {
      const int64_t R = rc[0], C = rc[1];
      const PeArray pe(R, C, df);
      for (int64_t p : {1, 2}) {
        for (bool pre : {false, true}) {
          for (int64_t m : dims) {
            for (int64_t k : dims) {
              for (int64_t n : dims) {
                const int64_t folds = closed_form_folds(df, R, C, m, k, n);
                const int64_t b = p * (df == Dataflow::kWs ? m : n);
                const int64_t want = (pre ? 0 : R) + (folds - 1) * std::max(b, R) + b + R + C - 2;
                PeTimingOptions opt{true, pre, 1.0 / static_cast<double>(p)};
                opt.pipelined_folds = true;
                const PeTileResult r = pe.run(m, k, n, nullptr, opt);
                ASSERT_EQ(r.cycles, want)
                    << isa::kDataflowNames[static_cast<size_t>(df)] << " " << R << "x" << C << " m=" << m
                    << " k=" << k << " n=" << n << " rate=1/" << p << " preloaded=" << pre;
                ASSERT_EQ(r.macs, m * k * n);
              }
            }
          }
        }
      }
    }
  }
  PeTimingOptions single{false, false, 1.0};
  single.pipelined_folds = true;
  EXPECT_THROW(PeArray(2, 2, Dataflow::kWs).run(2, 2, 2, nullptr, single), std::invalid_argument);
}

TEST(PeArray, Gemm16x16WeightStationaryTakesPreloadPlusStreamPlusDrain) {
  // One fold: 16 cycles to load weights, then the last of 16 input rows enters row 15 at stream cycle
  // 15 + 15 and leaves column 15 at 15 + 15 + 15: 16 + 46 = 62 cycles.
  EXPECT_EQ(PeArray(16, 16, Dataflow::kWs).run(16, 16, 16).cycles, 62);
  // Output-stationary: the last operands meet in PE(15,15) at cycle 15 + 15 + 15 -> 46 cycles.
  EXPECT_EQ(PeArray(16, 16, Dataflow::kOs).run(16, 16, 16).cycles, 46);
}

TEST(PeArray, SingleMacOnOneByOneArray) {
  // 1x1 array, 1x1x1 GEMM: WS = 1 preload + 1 stream cycle; OS = 1 cycle then 1 cycle of drain.
  EXPECT_EQ(PeArray(1, 1, Dataflow::kWs).run(1, 1, 1).cycles, 2);
  const PeTileResult os = PeArray(1, 1, Dataflow::kOs).run(1, 1, 1);
  EXPECT_EQ(os.cycles, 1);
  EXPECT_EQ(os.drain_tail_cycles, 1);
  EXPECT_EQ(PeArray(1, 1, Dataflow::kIs).run(1, 1, 1).cycles, 2);
}

std::vector<int32_t> ref_gemm(const std::vector<int32_t>& a, const std::vector<int32_t>& b,
                              const std::vector<int32_t>& c0, int64_t m, int64_t k, int64_t n) {
  std::vector<int32_t> c(c0);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      int64_t s = c[static_cast<size_t>(i * n + j)];
      for (int64_t kk = 0; kk < k; ++kk)
        s += int64_t{a[static_cast<size_t>(i * k + kk)]} * b[static_cast<size_t>(kk * n + j)];
      c[static_cast<size_t>(i * n + j)] = static_cast<int32_t>(s);
    }
  }
  return c;
}

TEST(PeArray, Int8ValuesEqualAPlainGemmForEveryDataflow) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> d(-128, 127);
  const int64_t shapes[][3] = {{1, 1, 1}, {5, 7, 3}, {9, 4, 11}, {16, 16, 16}, {3, 20, 2}};
  for (const auto& s : shapes) {
    const int64_t m = s[0], k = s[1], n = s[2];
    PeOperands ops;
    ops.integer = true;
    for (int64_t i = 0; i < m * k; ++i) ops.a_int.push_back(d(rng));
    for (int64_t i = 0; i < k * n; ++i) ops.b_int.push_back(d(rng));
    for (int64_t i = 0; i < m * n; ++i) ops.c_int.push_back(d(rng) * 1000);
    const std::vector<int32_t> want = ref_gemm(ops.a_int, ops.b_int, ops.c_int, m, k, n);
    for (Dataflow df : {Dataflow::kWs, Dataflow::kOs, Dataflow::kIs}) {
      for (int64_t r : {1, 3, 4}) {
        EXPECT_EQ(PeArray(r, 5, df).run(m, k, n, &ops).c_int, want)
            << isa::kDataflowNames[static_cast<size_t>(df)] << " m=" << m << " k=" << k << " n=" << n;
        // Double buffering and a reduced rate change the timing, never the numbers.
        EXPECT_EQ(PeArray(r, 5, df).run(m, k, n, &ops, PeTimingOptions{true, false, 0.25}).c_int, want);
        // Pipelined folds read each partial sum after the previous row fold wrote it (checked inside).
        PeTimingOptions piped{true, false, 1.0};
        piped.pipelined_folds = true;
        EXPECT_EQ(PeArray(r, 5, df).run(m, k, n, &ops, piped).c_int, want);
      }
    }
  }
}

// The PE model and the executor compute the same bits, including fp32 accumulation order.
TEST(PeArray, ValuesEqualTheExecutorsMatmulBitForBit) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> d(-2.0f, 2.0f);
  const int64_t m = 7, k = 13, n = 6;
  for (isa::DType t : {isa::DType::kFp32, isa::DType::kBf16, isa::DType::kFp16}) {
    for (bool fp32_acc : {true, false}) {
      isa::NpuConfig cfg;
      cfg.systolic_array.fp16_accumulate_fp32 = fp32_acc;
      MachineState st(cfg);
      const int es = isa::dtype_bytes(t);
      PeOperands ops;
      ops.integer = false;
      ops.accumulate_in = (t != isa::DType::kFp32 && !fp32_acc) ? t : isa::DType::kFp32;
      for (int64_t i = 0; i < m * k; ++i) {
        store_float(st.sram(isa::Buffer::kInput).data() + i * es, t, d(rng));
        ops.a_fp.push_back(load_float(st.sram(isa::Buffer::kInput).data() + i * es, t));
      }
      for (int64_t i = 0; i < k * n; ++i) {
        store_float(st.sram(isa::Buffer::kWeight).data() + i * es, t, d(rng));
        ops.b_fp.push_back(load_float(st.sram(isa::Buffer::kWeight).data() + i * es, t));
      }
      for (int64_t i = 0; i < m * n; ++i) {
        const float c = d(rng);
        store_float(st.sram(isa::Buffer::kAccumulator).data() + i * 4, isa::DType::kFp32, c);
        ops.c_fp.push_back(c);
      }
      isa::Instruction mm;
      mm.opcode = isa::Opcode::kMatmul;
      mm.set(isa::Field::kDtype, static_cast<int64_t>(t)).set(isa::Field::kM, m).set(isa::Field::kK, k);
      mm.set(isa::Field::kN, n).set(isa::Field::kAccumulate, 1);
      execute(mm, cfg, st);
      PeTimingOptions piped{true, false, 1.0};
      piped.pipelined_folds = true;
      for (auto [df, opt] :
           {std::pair{Dataflow::kWs, PeTimingOptions{}}, std::pair{Dataflow::kOs, PeTimingOptions{}},
            std::pair{Dataflow::kIs, PeTimingOptions{}}, std::pair{Dataflow::kWs, piped},
            std::pair{Dataflow::kIs, piped}}) {
        const PeTileResult r = PeArray(4, 3, df).run(m, k, n, &ops, opt);
        for (int64_t i = 0; i < m * n; ++i) {
          ASSERT_EQ(
              fp32_bits(r.c_fp[static_cast<size_t>(i)]),
              fp32_bits(load_float(st.sram(isa::Buffer::kAccumulator).data() + i * 4, isa::DType::kFp32)))
              << isa::kDTypeNames[static_cast<size_t>(t)] << " fp32_acc=" << fp32_acc
              << " df=" << static_cast<int>(df) << " pipelined=" << opt.pipelined_folds << " i=" << i;
        }
      }
    }
  }
}

}  // namespace
}  // namespace npusim::arch::datapath
