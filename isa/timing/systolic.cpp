#include "isa/timing/systolic.h"

#include <algorithm>
#include <cmath>

#include "isa/ceil_div.h"

namespace npusim::isa::timing {
GemmShape gemm_shape(const Instruction& ins) {
  if (ins.opcode == Opcode::kConv) {
    return {ins.get(Field::kOutH) * ins.get(Field::kOutW),
            ins.get(Field::kKernelH) * ins.get(Field::kKernelW) * ins.get(Field::kInC), ins.get(Field::kN)};
  }
  return {ins.get(Field::kM), ins.get(Field::kK), ins.get(Field::kN)};
}

FoldMap fold_map(const SystolicArrayConfig& a, const GemmShape& g) {
  FoldMap f;
  switch (a.dataflow) {
    case Dataflow::kWs:
      f.sr = g.k, f.sc = g.n, f.t = g.m;
      break;
    case Dataflow::kOs:
      f.sr = g.m, f.sc = g.n, f.t = g.k;
      break;
    case Dataflow::kIs:
      f.sr = g.k, f.sc = g.m, f.t = g.n;
      break;
  }
  f.row_folds = ceil_div(f.sr, a.rows);
  f.col_folds = ceil_div(f.sc, a.cols);
  return f;
}

int64_t preload_cycles(const SystolicArrayConfig& a) { return a.rows; }

int64_t skew_cycles(const SystolicArrayConfig& a) { return a.rows + a.cols - 2; }

int64_t stream_cycles(int64_t t, double rate) {
  if (rate >= 1.0) return t;
  // Exact for the rates configs use (1/2, 1/4, ...); the epsilon keeps 8 / 0.5 from becoming 17.
  return static_cast<int64_t>(std::ceil(static_cast<double>(t) / rate - 1e-9));
}

int64_t streamed_pixels(const SystolicArrayConfig& a, int64_t m, int64_t row_pixels) {
  if (a.dataflow != Dataflow::kWs || a.min_block_cycles <= 1) return m;
  const int64_t w = row_pixels > 0 ? row_pixels : m;
  const int64_t full = w / a.rows, rest = w % a.rows;
  const int64_t row =
      full * std::max(a.rows, a.min_block_cycles) + (rest > 0 ? std::max(rest, a.min_block_cycles) : 0);
  return m / w * row;
}

int64_t last_block_cycles(const SystolicArrayConfig& a, int64_t m, int64_t row_pixels) {
  const int64_t w = row_pixels > 0 ? row_pixels : m;
  const int64_t rest = w % a.rows;
  return std::max(rest > 0 ? rest : std::min(w, a.rows), a.min_block_cycles);
}

ArrayCycles gemm_cycles(const SystolicArrayConfig& a, const GemmShape& g, DType dtype, bool preloaded,
                        int64_t row_pixels) {
  const FoldMap f = fold_map(a, g);
  ArrayCycles c;
  c.folds = f.folds();
  c.macs = g.m * g.k * g.n;
  const int64_t t = a.dataflow == Dataflow::kWs ? streamed_pixels(a, f.t, row_pixels) : f.t;
  const int64_t beats = stream_cycles(t, a.rate(dtype));
  c.stream = c.folds * beats;
  if (a.folds_pipelined()) {
    // Fold i+1 enters as fold i's last row has: one skew fill and drain for the instruction. A fold
    // shorter than R waits for the shadow registers (its successor's operand takes R cycles to shift
    // in), which is charged here too.
    int64_t wait = std::max<int64_t>(0, a.rows - beats);
    if (a.preload_in_stream && a.dataflow == Dataflow::kWs && a.model == ArrayModel::kTile)
      wait =
          std::max<int64_t>(0, a.rows - stream_cycles(last_block_cycles(a, f.t, row_pixels), a.rate(dtype)));
    c.fill_drain = skew_cycles(a) + (c.folds - 1) * wait;
    c.chained = c.stream + c.folds * wait;
  } else {
    c.fill_drain = c.folds * skew_cycles(a);
  }
  if (a.dataflow != Dataflow::kOs) {
    // Folds whose stationary operand is shifted in while nothing else happens.
    int64_t exposed = a.double_buffered ? 1 : c.folds;
    if (preloaded) exposed -= 1;
    c.preload = exposed * preload_cycles(a);
  }
  c.total = c.preload + c.stream + c.fill_drain;
  return c;
}

ArrayCycles matrix_cycles(const Instruction& ins, const SystolicArrayConfig& a) {
  return gemm_cycles(a, gemm_shape(ins), static_cast<DType>(ins.get(Field::kDtype)),
                     ins.get(Field::kPreloaded) != 0,
                     ins.opcode == Opcode::kConv ? ins.get(Field::kOutW) : 0);
}

}  // namespace npusim::isa::timing
