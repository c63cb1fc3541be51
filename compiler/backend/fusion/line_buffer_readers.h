#pragma once
// The line buffer's geometry and its windowed readers (internal to the back end;
// backend/fusion/layer_fusion.h describes the fusion): the bands a candidate band height cuts the reader's
// output rows into, and what each reader -- a MaxPool / AveragePool, a depthwise Conv -- emits per fused
// layer and per band.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "compiler/backend/core/context.h"
#include "compiler/backend/fusion/layer_fusion.h"
#include "compiler/backend/fusion/se_pool_fusion.h"
#include "compiler/backend/matrix/matrix_walk.h"

namespace npusim::compiler::backend {

// A window's rows (or columns) clipped to the input [0, n): first and last.
struct WindowSpan {
  int64_t lo = 0, hi = 0;
  bool full = false;  // the window lies inside the input
};
inline WindowSpan clip(int64_t o, int64_t stride, int64_t pad, int64_t k, int64_t n) {
  const int64_t a = o * stride - pad, b = a + k - 1;
  return WindowSpan{std::max<int64_t>(0, a), std::min(n - 1, b), a >= 0 && b <= n - 1};
}

// One band: reader output rows [p0, p1), the input rows [lo, hi] it reads (counted from the first padding
// row), of which [lo, lo + kept) are the previous band's and the rest the conv computes (or padding). Row lo
// lies at line-buffer row `at`; the kept rows lie at buffer row `from` before the band, and one VEC copy
// moves them to `at` when the two differ (the band starts over at the buffer's start).
struct LineBand {
  int64_t p0 = 0, p1 = 0, lo = 0, hi = 0, kept = 0, from = 0, at = 0;
  int64_t r0 = 0, r1 = 0;  // the conv's output rows [r0, r1) the band computes (r0 == r1: none)
  Tiling t;
  Tiling pt;  // the project conv's tiling of the band's rows (ConvPool::project)
  // The line-buffer row of input row r (lo <= r <= hi).
  int64_t row(int64_t r) const { return at + r - lo; }
};

// A candidate band height and the bands it cuts the reader's output rows into.
struct BandHeight {
  int64_t rows = 0;  // reader output rows per band
  // Line-buffer rows (a pool's one more than a band reads: the interior VEC's rows run on). A buffer of
  // more rows than a band reads takes the bands one after the other (LineBand::at): the conv writes a band's
  // new rows while the reader still reads the band before, and the halo rows move only when the buffer's end
  // is reached.
  int64_t buf_rows = 0;
  int64_t resident = -1;  // the conv's weights resident in the weight scratchpad at this address (-1: none)
  // The reader's work on a band emitted in pieces between the next band's conv tiles (LineReader::pieces),
  // else after the band's conv; both simulated where the reader can.
  bool pieces = false;
  // Bytes of the reader's epilogue operand slots (LineReader::side_bytes) placed in the input scratchpad,
  // right above the line buffer, instead of the accumulator (0: in the accumulator).
  int64_t side = 0;
  // With a project conv: bytes of each of the two slots the depthwise epilogue writes a band's output rows
  // into (right above the line buffer and `side`), and the largest accumulator bytes of the conv's band
  // tilings (the project conv's tiles take the accumulator's other end, below them and the sums).
  int64_t out_slot = 0, conv_acc = 0;
  std::vector<LineBand> bands;
};

// The stride of an edge column's VEC: its one window, then past the row (d1 = W).
inline int64_t edge_stride(const WindowSpan& s, int64_t W) { return W - (s.hi - s.lo + 1) + 1; }

// The weight scratchpad's end a layer's own slots do not start from (Context::slots: even layers take
// the bottom), `need` bytes.
uint64_t free_weight_end(const Context& c, int64_t need);

// What a windowed reader of the line buffer emits in the fused layer.
class LineReader {
 public:
  virtual ~LineReader() = default;
  // Bytes the reader takes at the end of the weight scratchpad the conv's weight tiles leave free.
  virtual int64_t weight_bytes(const BandHeight& cand) const = 0;
  // Of the reader's accumulator bytes for bands of `rows` output rows, those of its epilogue's tile-sized
  // operand slots (a SiLU temporary: MatrixStrategy::side_bytes), which may lie in the input scratchpad.
  virtual int64_t side_bytes(int64_t /*rows*/) const { return 0; }
  // Bytes of one of the slots a band of `rows` output rows is written into for a reader of the reader's
  // output in the same band loop (BandHeight::out_slot; 0: none).
  virtual int64_t out_bytes(int64_t /*rows*/) const { return 0; }
  // Chooses what the reader maps per band once the conv's band tilings are chosen (the buffer at `buf`, the
  // scratchpads' reservations set for the candidate); false when it does not fit.
  virtual bool choose(BandHeight& /*cand*/, uint64_t /*buf*/) { return true; }
  // Accumulator bytes the reader's own tiles take per band beside its sums, left to them when the conv's band
  // tilings are chosen.
  virtual int64_t acc_share(const BandHeight& /*cand*/) { return 0; }
  // Once per fused layer, before the first band (slots, constants; the buffer at `buf`).
  virtual void begin(const BandHeight& cand, uint64_t buf) = 0;
  // Reads band b of image img from the buffer (its rows at `buf`, the conv's rows written).
  virtual void read(const LineBand& b, int64_t img, uint64_t buf) = 0;
  // Whether the reader can emit its work on a band in pieces between the next band's conv tiles
  // (BandHeight::pieces).
  virtual bool pieces() const { return false; }
  // Before band `next` (the kept rows' copy, then the conv's `tiles` output tiles of its rows): a reader that
  // holds work of the band before to emit between those tiles (step, called after each tile's epilogue) emits
  // it now instead where band `next` writes rows that work still reads, or where the candidate does not
  // take pieces.
  virtual void before_band(const LineBand& /*next*/, int64_t /*tiles*/) {}
  virtual void step() {}
  // After the last band of the last image.
  virtual void end() {}
  // The fused layer is taken (emitted for good, not as a trial).
  virtual void taken() {}
  // The VEC dwconvs the last emission ran (a band's depthwise work in pieces: DepthwiseReader), 0: none.
  virtual int64_t dwconvs() const { return 0; }
};

// A MaxPool / AveragePool: its windows pooled in the buffer, the pooled tiles stored from ping-pong
// slots in the weight scratchpad.
std::unique_ptr<LineReader> pool_reader(Context& c, const ConvPool& p);

// A depthwise conv (its job `dw` built by its own lowering): one VEC dwconv per band over the padded
// buffer rows, then its own epilogue (which stores the band's output rows). Its weights stay in the weight
// scratchpad for the whole layer, its sums and the epilogue's slots take the top of the accumulator
// (FusionState::acc_reserved).
//
// With a project conv (`project`, ConvPool::project: the pointwise conv reading the depthwise output, its
// job built by its own lowering, its operands `project_act`): the depthwise epilogue writes each band's
// output rows into one of two slots above the line buffer instead of storing them, and the project conv runs
// on them there as one GEMM per band (its weights resident in the weight scratchpad beside the depthwise
// conv's, its tiles at the scratchpads' other end: FusionState::slots_flipped), storing its output rows.
// Software-pipelined for in-order queues: a band's depthwise conv and epilogue are emitted in pieces of
// output rows between the next band's conv tiles (FusionState::after_tile; at once where that band writes
// buffer rows they read), so that the vector unit takes each conv tile's epilogue soon after the array
// computes it instead of holding the array's next tiles (two accumulator slots) behind a whole band's
// dwconv; a band's project GEMM is emitted once the next band's depthwise work is. The depthwise and the
// project weights load before their first use, behind the first band's loads.
//
// Without a project conv, where the depthwise output is an SE block's input that the SE group cannot hold and
// its pool reads it with the integer scheme (int8 codes: fusion/se_pool_fusion.h), the bands also pool their
// output rows where the epilogue leaves them for their STORE: each band's int32 sums of the codes per channel
// by one VEC dwconv of unit weights, added up, then the pool's output stage and one STORE of its codes; the
// pool emits nothing (pool_credit: its own time, which the fused layer saves).
class DepthwiseReader : public LineReader {
 public:
  DepthwiseReader(Context& c, const ConvPool& p, ConvBands& dw, ConvBands* project = nullptr,
                  isa::DType project_act = isa::DType::kFp32);
  // The accumulator bytes of bands of `rows` output rows (both ping-pong sides, the epilogue's slots).
  int64_t acc_bytes(int64_t rows) const;
  int64_t weight_bytes(const BandHeight& cand) const override;
  int64_t side_bytes(int64_t rows) const override;
  int64_t out_bytes(int64_t rows) const override;
  bool choose(BandHeight& cand, uint64_t buf) override;
  int64_t acc_share(const BandHeight& cand) override;
  void begin(const BandHeight& cand, uint64_t buf) override;
  void read(const LineBand& b, int64_t img, uint64_t buf) override;
  void before_band(const LineBand& next, int64_t tiles) override;
  void step() override;
  void end() override;
  void taken() override;
  int64_t dwconvs() const override { return dwconvs_; }
  bool pieces() const override { return project_ != nullptr; }
  // The cycles the SE pool run in the bands saves (SePoolBands::saved_cycles), 0 without one.
  double pool_credit() const { return pool_ ? pool_->saved_cycles : 0.0; }

 private:
  // The SE pool's bytes at the end of the reader's weight-scratchpad bytes: unit weights for a band of
  // `rows` output rows, a band's sums, the running sums, the pooled codes, the output stage's constants.
  int64_t pool_bytes(int64_t rows) const;
  // The band's int32 sums added to the running ones (the band's codes where the STORE just read them).
  void pool_band(int64_t oh);
  // The project conv's rows of band b of image img, read at output slot `side` (ConvBands::generate_rows).
  struct ProjectBand {
    const LineBand* b = nullptr;
    int64_t img = 0;
    int side = 0;
  };
  void project(const ProjectBand& pb);
  // The project conv's weights as one tile [C][M] (MatrixJob::b_sram).
  int64_t project_weight_bytes() const;
  // Where the two output slots start (above the line buffer at `buf` and the epilogue's side slots).
  uint64_t out_base(const BandHeight& cand, uint64_t buf) const;
  // Runs f as the project conv's tiles are mapped and emitted: its operands, the other end of each
  // scratchpad (FusionState::slots_flipped).
  template <class F>
  void as_project(F f);
  // The strategy's figures (one made for the question).
  const MatrixStrategy& strategy() const;
  // Runs f with Context::act and esize the depthwise conv's operands' (MatrixStrategy's contract).
  template <class F>
  void with_operands(F f);
  int64_t es() const;
  // Ping-pong sides of the depthwise sums: one where a project conv reads the band's output (the depthwise
  // epilogue writes it into the output slots, the vector unit alone reads the sums, in its queue's order, so
  // the next band's dwconv never overwrites sums still to be read), two where a STORE reads the epilogue's
  // tile. One side leaves the accumulator to the conv's band tiles.
  int sum_sides() const { return project_ ? 1 : 2; }
  Context& c_;
  const ConvPool& p_;
  ConvBands& dw_;
  std::unique_ptr<MatrixStrategy> s_;
  mutable std::unique_ptr<MatrixStrategy> probe_;
  uint64_t w_slot_ = 0, pad_ = 0;
  Range pad_range_;
  int64_t pad_rows_ = 1;
  int side_ = 0;
  ConvBands* project_;
  isa::DType project_act_;
  uint64_t out_[2] = {0, 0};  // the output slots (begin)
  // The band whose project rows are still to run: each runs once the next band's depthwise work is emitted
  // (flush_held), so that the array multiplies them while the vector unit finishes that band.
  ProjectBand pending_;
  // With a project conv, the band whose depthwise conv and epilogue are still to be emitted (`done` of its
  // output rows emitted): in pieces of output rows between the next band's conv tiles (before_band, step),
  // the vector unit's in-order queue then taking each conv tile's epilogue soon after the array computes it
  // (with two accumulator slots the array waits for the epilogue two tiles back), the rest before the band
  // after reads the buffer. Then its project rows run (pending_).
  struct HeldBand {
    const LineBand* b = nullptr;
    int64_t img = 0, done = 0, pieces = 0;
    int side = 0;
  };
  HeldBand held_;
  bool pieces_ = false;  // the candidate's BandHeight::pieces (begin)
  // The depthwise weights' DRAM address (begin), loaded once before the first band's dwconv.
  uint64_t w_addr_ = 0;
  bool w_loaded_ = false;
  void load_weights();
  // The project conv's resident weights (begin), loaded before its first rows.
  uint64_t project_w_ = 0;
  bool project_w_loaded_ = false;
  uint64_t buf_ = 0;
  int64_t dwconvs_ = 0;
  // The padding columns of every row of a buffer of `buf_rows` rows, once (begin).
  void fill_columns(uint64_t buf, int64_t buf_rows);
  // The padding rows among band b's new rows (above the conv's first row, below its last) from the data
  // segment of the padding value.
  void load_padding(const LineBand& b, uint64_t buf);
  // One VEC dwconv over `in_h` buffer rows from `src` into the sums' side `sums` (`oh` output rows).
  void dwconv(uint64_t src, int64_t in_h, int64_t oh, int sums);
  // Emits the held band's output rows [done, done + rows): its padding rows' loads with the first, one VEC
  // dwconv, its epilogue into the band's output slot.
  void emit_rows(int64_t rows);
  // Emits the rest of the held band, then its project rows.
  void flush_held();
  std::optional<SePoolBands> pool_;
  uint64_t ones_ = 0, band_sums_ = 0, sums_ = 0, pooled_ = 0, stage_ = 0;  // pool_bytes' slots (begin)
  bool first_band_ = true;
};

}  // namespace npusim::compiler::backend
