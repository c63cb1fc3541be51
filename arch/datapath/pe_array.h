#pragma once
// A cycle-stepping model of an R x C systolic array of PEs: every cycle every PE's registers take
// their neighbours' values of the previous cycle. It exists to prove the closed-form tile timing
// (isa/timing/systolic.h) exact, and runs as the `pe` array model on small arrays. It can also carry
// values, so a test can check the PE-level dataflow computes the executor's numbers: the partial sum
// entering the top of a column (OS: a PE's initial value) is the accumulator's running sum, so every
// output is one sum in K order across the row folds, never fold partial sums added afterwards (isa.h,
// MATMUL and CONV; a CONV's K is its im2col in channel-major order, conv_order_test.cpp).
//
// ---- Per-fold timing, as in SCALE-Sim v2 -------------------------------------------------------
// Source: scalesim-project/scale-sim-v2, scalesim/compute/systolic_compute_ws.py,
// systolic_compute_os.py, systolic_compute_is.py (create_*_demand_mat). SCALE-Sim maps the layer as a
// GEMM  C[M x N] = A[M x K] * B[K x N]  (M = output pixels, K = window x channels, N = filters) onto the
// physical R x C array, cuts it into folds, and builds per-fold demand matrices whose row count is the
// fold's cycle count; every fold pays the full fill and drain on the physical R and C whatever its
// occupancy, and folds run back to back (loops `for fc in col_fold: for fr in row_fold`).
//
//   dataflow  stationary      array rows x cols map   folds                      cycles per fold
//   WS        B (K x N)       K x N                   ceil(K/R) * ceil(N/C)      2R + C + M - 2
//   OS        outputs (M x N) M x N                   ceil(M/R) * ceil(N/C)       R + C + K - 2
//   IS        A^T (K x M)     K x M                   ceil(K/R) * ceil(M/C)      2R + C + N - 2
//
// Derivation from the demand matrices (T = the streamed length: M in WS, K in OS, N in IS):
//   WS/IS: the streamed operand's demand is R rows of prefix (the stationary operand being loaded),
//          T rows, C-1 rows of suffix, then skewed over the R array rows (+R-1): 2R + C + T - 2.
//          The stationary operand's demand is R rows followed by R + C + T - 2 idle rows: the same.
//   OS:    the A demand is T rows + C-1 suffix, skewed over R rows (+R-1): R + C + T - 2; B likewise.
// SCALE-Sim's reported "total cycles" is the index of the last serviced demand row, i.e. one less than
// the sum over folds (upstream issue #125); this model reports the sum (the number of cycles stepped).
//
// ---- How this model's register movement produces those counts -----------------------------------
// WS (S = the B tile, stream X = rows of A, T = M), IS (S = the A^T tile, X = columns of B, T = N):
//   preload: R cycles. The stationary tile enters at the top edge one row per cycle (bottom row
//            first) and every column's weight registers shift down one PE per cycle; after R cycles
//            PE(r,c) holds S[r][c].
//   stream:  X[t][r] enters PE(r,0) at stream cycle t + r (skewed fill) and moves right one PE per
//            cycle; PE(r,c) sees it at t + r + c, multiplies it by its stationary value and adds the
//            partial sum arriving from PE(r-1,c) (PE(0,c) takes the accumulator's current value of
//            output (t, c) as its incoming partial sum). Partial sums move down one PE per cycle and
//            leave the bottom of column c at stream cycle t + R - 1 + c (drain).
//   end:     the fold ends in the cycle the last token leaves the array: X[T-1][R-1] reaches PE(R-1,
//            C-1) at stream cycle T - 1 + R - 1 + C - 1, so a fold is R + (T + R + C - 2) cycles.
//            Unused rows/columns carry null tokens (SCALE-Sim's -1 demands) that move but do not
//            multiply, so occupancy never shortens a fold.
// OS:
//   stream:  A[m][k] enters PE(r,0) (r = m - m0) at fold cycle k + r and moves right; B[k][n] enters
//            PE(0,c) at k + c and moves down; they meet in PE(r,c) at k + r + c, which adds the
//            product to its accumulator (initialised from the accumulator buffer's value).
//   end:     the last tokens meet in PE(R-1,C-1) at K - 1 + R - 1 + C - 1: the fold is K + R + C - 2
//            cycles, then the next fold's operands start entering.
//   drain:   when column c's bottom PE finishes (fold cycle K + R + c - 2) the column's R results are
//            latched in parallel into a shadow register chain that shifts down one PE per cycle and out
//            of the bottom edge (bottom row first, as SCALE-Sim's flipped OFMAP demand). The chain
//            drains while the next fold computes (the model checks no result is ever overwritten), so
//            only the last fold's drain is not hidden: it is reported separately as
//            drain_tail_cycles (= R) and, like SCALE-Sim, not included in `cycles`.
//
// ---- npusim's two additions (PeTimingOptions; defaults = plain SCALE-Sim) -------------------------
// As isa/timing/systolic.h: with those options the count becomes
//   exposed_preloads * R + folds * (ceil(T / rate) + R + C - 2),
//   exposed_preloads = (double_buffered ? 1 : folds) - (first_fold_preloaded ? 1 : 0)   (WS, IS; OS: 0).
//  - double_buffered: every PE has a shadow weight register; during the first R cycles of fold f's
//    stream the next fold's tile shifts down the shadow chain (the same movement as a preload), and
//    the shadows become the active weights the cycle fold f ends (fold f lasts >= R cycles, checked).
//  - first_fold_preloaded: fold 0's stationary tile is already in the array (MATMUL preloaded=1).
//  - pipelined_folds (WS, IS; needs double_buffered): fold f+1's rows enter right behind fold f's, every
//    token tagged with its fold; a PE switches to its shadow register when the first token of the next
//    fold reaches it, and column c's shadow chain shifts the following tile in over R cycles starting c
//    cycles after the fold's start (a wavefront, so no PE loses an operand it still needs). Folds start
//    max(B, R) cycles apart; a fold reading partial sums at the top of a column checks the previous row
//    fold already wrote them. Count: exposed_preloads * R + (folds - 1) * max(B, R) + B + R + C - 2.
//  - rate < 1 (fp16/bf16/fp32 on an array whose int8 MAC is the unit): every streamed element occupies
//    beats of the int8 datapath; the T elements take B = ceil(T / rate) beats, element t completing
//    on beat floor((t+1)B/T) - 1 (the others are filler beats that move but never multiply). Each beat
//    moves one PE per cycle, so fill and drain keep their int8 length and the stream phase is B.
#include <cstdint>
#include <vector>

#include "isa/isa.h"
#include "isa/machine/config.h"

namespace npusim::arch::datapath {

// Values to push through the array (optional): A [m x k], B [k x n], initial C [m x n] (empty = 0),
// all row-major. Integer operands (int8/uint8/int32 values) use the *_int vectors and accumulate in
// int32 modulo 2^32; float operands use the *_fp vectors and accumulate in fp32, or rounded to fp16/bf16
// after every addition when `accumulate_in` is fp16/bf16 (executor.h's rules).
struct PeOperands {
  bool integer = true;
  std::vector<int32_t> a_int, b_int, c_int;
  std::vector<float> a_fp, b_fp, c_fp;
  isa::DType accumulate_in = isa::DType::kFp32;
};

struct PeTileResult {
  int64_t cycles = 0;  // sum over folds of each fold's cycles (SCALE-Sim's count + 1)
  int64_t folds = 0;
  int64_t drain_tail_cycles = 0;  // OS: cycles after the last fold until its results left the array
  int64_t macs = 0;               // multiplications performed on non-null operands
  std::vector<int32_t> c_int;     // when operands were given: the final C [m x n]
  std::vector<float> c_fp;
};

// Timing options of one run (see the top of this file).
struct PeTimingOptions {
  bool double_buffered = false;
  bool first_fold_preloaded = false;
  double rate = 1.0;             // SystolicArrayConfig::rate(dtype)
  bool pipelined_folds = false;  // ws/is: folds stream back to back (needs double_buffered; os ignores it)
};

class PeArray {
 public:
  PeArray(int64_t rows, int64_t cols, isa::Dataflow dataflow);

  // Runs one MATMUL tile M x K x N folded onto the array, cycle by cycle. `ops` may be null (timing
  // only). Throws std::invalid_argument for non-positive sizes or rate, or operand vectors of the wrong
  // size. The values do not depend on `opt`.
  PeTileResult run(int64_t m, int64_t k, int64_t n, const PeOperands* ops = nullptr,
                   const PeTimingOptions& opt = {}) const;

  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  isa::Dataflow dataflow() const { return dataflow_; }

 private:
  int64_t rows_;
  int64_t cols_;
  isa::Dataflow dataflow_;
};

}  // namespace npusim::arch::datapath
