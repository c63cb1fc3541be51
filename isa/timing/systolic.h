#pragma once
// Systolic-array timing: the one place its cycle formulas live. The SystemC SystolicArray and the
// compiler's cost model both call these, so the mapper and the simulator cannot disagree silently.
//
// The model is SCALE-Sim v2's (scalesim/compute/systolic_compute_{ws,os,is}.py): a MATMUL or CONV is
// a GEMM of M output pixels x K reduction x N filters. Each dataflow maps two of those dimensions
// (Sr, Sc) onto the physical R x C array and streams the third (T):
//   ws: Sr = K, Sc = N, T = M     os: Sr = M, Sc = N, T = K     is: Sr = K, Sc = M, T = N
// and folds the mapped dimensions: ceil(Sr / R) x ceil(Sc / C) folds, run back to back. Every fold
// pays its full phases on the physical dimensions, whatever its occupancy:
//   ws, is: R cycles to shift the stationary operand in, T cycles of stream, R + C - 2 of skew fill
//           and drain: 2R + C + T - 2 (SCALE-Sim's ifmap/filter/ofmap demand matrices all have this
//           many rows per fold);
//   os:     T + R + C - 2 (no stationary preload; the demand matrices of systolic_compute_os.py).
// These are the cycles SCALE-Sim steps. Its printed "Compute cycles" is one less per layer (it
// reports the index of the last cycle; upstream SCALE-Sim issue #125): we count cycles, not indices,
// and docs/architecture.md says so.
//
// npusim additions, each neutral under configs/scalesim.yaml:
//   - precision: the stream phase is stretched to ceil(T / rate(dtype)) (an fp16 MAC at rate 0.5
//     takes two int8 MAC slots);
//   - double_buffered: the stationary operand of fold i+1 shifts into shadow registers while fold i
//     streams, so only the first fold pays its preload; a MATMUL with preloaded=1 takes its first
//     fold's operand from an earlier PRELOAD and pays no preload at all.
//   - pipelined_folds (ws, is; with double_buffered): fold i+1's first row enters the array the cycle
//     after fold i's last row, the stationary operand switching in each PE as the new fold's first row
//     reaches it (a tag travelling with the data, as Gemmini's propagate bit). The skew fill and drain
//     are paid once per instruction; a fold streams for max(ceil(T / rate), R) cycles (the next
//     operand's shift into the shadow registers takes R), which also lets fold i+1 read the partial
//     sums fold i left: fill_drain = (R + C - 2) + (folds - 1) * max(0, R - ceil(T / rate)).
//   - min_block_cycles (ws; 1 under scalesim.yaml): the streamed pixels enter in blocks of at most R
//     pixels of one output row (a CONV's rows of out_w pixels; a MATMUL's M is one row), each block
//     taking at least min_block_cycles: a row of w pixels streams for
//     floor(w / R) * max(R, min) + max(w mod R, min) (the last term only when w mod R > 0), and T is
//     out_h of those rows. This is Gemmini's conv loop (gemmini-rocc-tests include/gemmini.h,
//     sp_tiled_conv and the LoopConv unroller): one COMPUTE per output row and DIM pixels, I =
//     min(DIM, ocols - ocol); ONNXim's model of the same RTL (src/SystolicWS.cc) keeps each COMPUTE
//     on the array for max(I, 4) cycles, and Gemmini's per-layer RTL cycles follow it
//     (docs/validation.md): a 17-pixel row, 8 + 8 + 1, takes 20 cycles, a 14-pixel row 14.
//   - preload_in_stream (ws, pipelined folds; false under scalesim.yaml): the next fold's operand enters
//     the array as R cycles of the stream behind the last block of the fold before, overlapping only
//     that block: a fold switch waits max(0, R - last block's cycles) instead of max(0, R - the fold's).
//     Gemmini's PRELOAD command follows the fold's last COMPUTE through the mesh; ONNXim's model of the
//     RTL issues it R cycles after that COMPUTE starts (src/SystolicWS.cc, `offset = core_height`).
//   - chained_instructions (with pipelined folds; false under scalesim.yaml): an instruction that follows
//     another MATMUL/CONV on the array enters right behind its last row, as a fold enters behind the
//     previous fold: it adds `chained` = stream + folds * max(0, R - ceil(T / rate)) cycles to the run
//     (no preload and no skew fill and drain of its own; a short fold still waits for its successor's
//     operand to shift in), and the run's results leave skew_cycles after its last row. This is
//     Gemmini's mesh, where every PRELOAD and COMPUTE command of a layer flows through one pipeline
//     (ONNXim's src/SystolicWS.cc issues each command behind the previous one and drains once).
#include <cstdint>

#include "isa/isa.h"
#include "isa/machine/config.h"

namespace npusim::isa::timing {

// A GEMM: C[m x n] = A[m x k] * B[k x n].
struct GemmShape {
  int64_t m = 0;
  int64_t k = 0;
  int64_t n = 0;
};

// How a GEMM lies on the array in one dataflow.
struct FoldMap {
  int64_t sr = 0;         // GEMM extent mapped onto the array's rows
  int64_t sc = 0;         // GEMM extent mapped onto the array's columns
  int64_t t = 0;          // GEMM extent streamed through time
  int64_t row_folds = 0;  // ceil(sr / rows)
  int64_t col_folds = 0;  // ceil(sc / cols)
  int64_t folds() const { return row_folds * col_folds; }
};

// Where the cycles of one matrix instruction go. total = preload + stream + fill_drain.
struct ArrayCycles {
  int64_t folds = 0;
  int64_t preload = 0;     // stationary-operand shift-in not hidden by double buffering
  int64_t stream = 0;      // moving operand streaming, stretched by the precision rate
  int64_t fill_drain = 0;  // skew fill and drain: R + C - 2 per fold, or once when folds pipeline
  int64_t total = 0;
  int64_t chained = 0;  // cycles it adds entering right behind another instruction (pipelined folds)
  int64_t macs = 0;     // useful multiply-accumulates, m * k * n
};

// The GEMM a MATMUL or CONV instruction computes (CONV: M = out_h*out_w, K = kh*kw*in_c, N = n).
GemmShape gemm_shape(const Instruction& ins);

FoldMap fold_map(const SystolicArrayConfig& array, const GemmShape& g);

// Cycles of one GEMM on the array. `preloaded`: the first fold's stationary operand is already in
// the array (MATMUL preloaded=1). `row_pixels`: how many of the m streamed pixels form one output row
// (a CONV's out_w; 0 = all m, a MATMUL). Precondition: array.rate(dtype) > 0 and m, k, n > 0.
ArrayCycles gemm_cycles(const SystolicArrayConfig& array, const GemmShape& g, DType dtype, bool preloaded,
                        int64_t row_pixels = 0);

// The stream length, in pixel slots, of m pixels in rows of `row_pixels` (0 = one row) under the
// array's min_block_cycles (ws): m itself when every block fills its minimum.
int64_t streamed_pixels(const SystolicArrayConfig& array, int64_t m, int64_t row_pixels);

// The pixel slots the last block of a fold's stream takes (ws): the last block of an output row of
// `row_pixels` (0 = all m) pixels, at most R of them, at least min_block_cycles.
int64_t last_block_cycles(const SystolicArrayConfig& array, int64_t m, int64_t row_pixels);

// Cycles of a MATMUL or CONV instruction (gemm_shape + gemm_cycles).
ArrayCycles matrix_cycles(const Instruction& ins, const SystolicArrayConfig& array);

// Cycles from a row's entry into the array to its last result leaving it: the skew fill and drain,
// R + C - 2 (a chain of instructions pays it once, after its last row).
int64_t skew_cycles(const SystolicArrayConfig& array);

// Cycles to shift a stationary operand into the array: one row per cycle through all R rows, as
// SCALE-Sim's per-fold prefix of R cycles (independent of how many rows the tile uses).
int64_t preload_cycles(const SystolicArrayConfig& array);

// Stream cycles for `t` moving rows at the precision's rate: ceil(t / rate).
int64_t stream_cycles(int64_t t, double rate);

}  // namespace npusim::isa::timing
