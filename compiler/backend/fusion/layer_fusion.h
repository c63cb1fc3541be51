#pragma once
// Line-buffer (row-band) tiling through a conv and its windowed reader (internal to the back end): a
// MaxPool / AveragePool (conv -> pool) or a depthwise Conv (conv -> depthwise conv, MobileNetV2's
// expand 1x1 -> depthwise 3x3). Layer by layer, a convolution stores its whole output and the reader
// loads it back: for a stem (ResNet-50's 7x7 stride-2 conv -> 112x112x64 -> 3x3 stride-2 max pool) or
// an inverted-residual block's expansion (112x112x96) that map is far larger than the scratchpad, so
// whole-tensor residency (backend/fusion/residency.h) cannot keep it. Fused, the conv runs as bands of output
// rows: each band is the conv's own matrix job restricted to those rows (the same tiling search, walk
// and epilogue), whose epilogue writes the rows into a line buffer at the top of the input scratchpad;
// the reader's VECs read their windows there and only the reader's output rows are stored. The conv
// output never touches DRAM.
//
// Halo rows (the rows two consecutive bands' windows share, kh - sh for a 3x3 stride-2 window) are
// kept, not recomputed: after a band is read one VEC copy moves its last rows to the start of the
// buffer and the next band's conv writes the rows after them.
//
// The two readers differ in the buffer's padding and in what reads it:
// - A pool reads the buffer without LOAD's halo: a window hanging over the input's edge (padding,
//   ceil_mode) is a VEC of its own over the rows and columns inside the input, which for a max pool is
//   exact (the padding is -inf); an average pool is fused only when every window lies inside the input.
//   Interior columns are one VEC whose rows are the buffer's rows (d1 = W, starting at the first interior
//   window's column); windows past the last interior one (reaching into the next row) are computed but
//   not stored (the rows are then stored one by one). The rows are dense [rows][W][C].
// - A depthwise conv (run by the vector unit's VEC dwconv) reads a padded buffer: its rows are
//   [pl + W + pr][C] pixels with the padding columns holding the value LOAD's halo would (0, or the
//   input's zero point for codes), written once per layer, the conv's rows between them
//   (MatrixJob::y_sram_row), and the padding rows above the first and below the last conv row loaded
//   from a data segment of that value when a band reaches them. One VEC dwconv per band reads the band's
//   rows whole, its sums go through the depthwise conv's own epilogue (bias, activation,
//   requantization) and are stored: each output is the same products added in the same order onto 0 as
//   layer by layer, over the same padding values.
// Every VEC computes what the layer-by-layer lowering computes on the same values, so --functional
// outputs are identical (fp32, fp16; int8 max pools run on the codes, int8 depthwise convs on codes
// padded with the zero point).
//
// The band height (reader output rows per band) is searched by simulation (Context::time_code), and the
// fusion is taken only when its best candidate is faster than the two layers layer by layer (the conv's
// own simulated tiling, then the reader's own lowering, timed together).
//
// An inverted-residual block's project conv (the pointwise conv reading the depthwise output alone) may run
// in the same band loop (ConvPool::project; line_buffer_readers.h, DepthwiseReader): one GEMM per band
// reading the depthwise rows where the depthwise epilogue wrote them, so the depthwise output never touches
// DRAM either. Taken when its best band height is faster than the pair with the project conv after it (or,
// where residency would keep the depthwise output on chip for it, than residency's plan).
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "compiler/backend/core/context.h"
#include "compiler/backend/matrix/matrix_walk.h"
#include "compiler/backend/vector/vector_lowerings.h"

namespace npusim::compiler::backend {

// A Conv whose one reader is the MaxPool / AveragePool or the depthwise Conv right after it (the
// line buffer's reader, `pool`), as the planner found it.
struct ConvPool {
  size_t conv = 0, pool = 0;
  bool depthwise = false;  // the reader is a depthwise Conv (else a pool)
  PoolWindow w;            // the reader's window (a depthwise conv's pads: the ones its output reads)
  bool is_max = true;
  // The conv's output (the reader's input) and the reader's output.
  int64_t H = 0, W = 0, C = 0, OH = 0, OW = 0;
  int64_t ox_a = 0, ox_b = 0;  // the pool's output columns whose windows lie inside the input
  int64_t vec_cols = 0;        // the windows the interior VEC computes per row (>= ox_b - ox_a)
  // The line buffer's geometry: buffer rows counted from the first padding row (depthwise: w.pt of
  // them above the conv's row 0; a pool: none), `rows` of them in all, `pitch` pixels per row of
  // which `left` padding columns come before the conv's W.
  int64_t top = 0, rows = 0, pitch = 0, left = 0;
  int64_t reader_macs = 0;  // the depthwise conv's MACs (its report row)
  // An inverted-residual block's project conv: the pointwise Conv after a depthwise reader that is its
  // output's one reader (-1: none). The fused layer may run it in the same band loop, reading each band of
  // the depthwise output where the depthwise epilogue wrote it (line_buffer_readers.h, DepthwiseReader).
  int64_t project = -1;
  // Whether the pair may fuse without it: not where residency keeps the depthwise output on chip for the
  // project conv (then only the whole block in one band loop is weighed against that).
  bool pair_alone = true;
  // Set by lower_conv_pool when it emitted the fused layer.
  bool fused = false;
  bool project_fused = false;       // ... with the project conv in its band loop
  int64_t project_macs = 0;         // the project conv's MACs (its report row)
  int64_t project_bytes_saved = 0;  // DRAM bytes of the depthwise output written and read back
  int64_t band_rows = 0;            // reader output rows per band
  int64_t bytes_saved = 0;          // DRAM bytes of the conv output written and read back layer by layer
};

// Whether node i is a Conv whose output only the MaxPool / AveragePool or the depthwise Conv right after
// it reads (the graph's side of plan_conv_pool), or only a constant affine map right after it that its
// epilogue may apply (post_affine.h) whose output only the depthwise Conv after that reads. The memory plan
// starts such a reader's output at the conv: fused, the reader writes it while the conv still reads its
// input, so the two must not share DRAM.
bool conv_pool_pair(const Graph& g, size_t i);
// That reader's node (i + 1, or i + 2 behind an affine map), else -1.
int64_t conv_pool_reader(const Graph& g, size_t i);
// For such a pair whose reader is a depthwise conv: the Conv after it reading its output (a project conv the
// fused layer may run in its band loop, writing its output while the conv still reads its input: the memory
// plan starts that output at the conv too), or -1.
int64_t project_of(const Graph& g, size_t i);

// Before matrix node i is lowered: whether it is a Conv whose output only the pool or depthwise conv
// after it reads and that fusion may take (see the header comment); fills *p.
bool plan_conv_pool(const Context& c, size_t i, ConvPool* p);
// The pair's side of plan_conv_pool, whatever SRAM holds before it: whether node i and its reader could
// form a line buffer once nothing else holds the scratchpad's top; fills *p.
bool conv_pool_shape(const Context& c, size_t i, ConvPool* p);

// How a conv lowering maps and emits its job restricted to a band of output rows (the float and the
// int8 lowerings each give one: JobBands).
class ConvBands {
 public:
  virtual ~ConvBands() = default;
  virtual const MatrixJob& job() const = 0;
  // Whether the epilogue ends with a VEC that can write its tile into the scratchpad (MatrixJob::y_sram).
  virtual bool ends_with_vec() const = 0;
  // The tiling of output rows [r0, r1) written dense at y_sram of the input scratchpad (MatrixMapper::
  // choose: simulated, outside any trial); *evaluated == 0: none fits.
  virtual Tiling choose(int64_t r0, int64_t r1, uint64_t y_sram, int64_t* evaluated) = 0;
  // Emits image img's rows [r0, r1) under tiling t.
  virtual void generate(int64_t r0, int64_t r1, int64_t img, uint64_t y_sram, const Tiling& t) = 0;
  // The whole job as the layer-by-layer program maps it.
  virtual Tiling choose_whole(int64_t* evaluated) = 0;
  virtual void generate_whole(const Tiling& t) = 0;
  // The node lowered whole, as layer by layer (its own mapping search, array or vector unit).
  virtual void lower_whole() = 0;
  // The precision's strategy for the whole job (a line buffer's depthwise reader drives its epilogue).
  virtual std::unique_ptr<MatrixStrategy> make_strategy() = 0;
  // Elements between the rows choose and generate write at y_sram (0: dense rows; MatrixJob::y_sram_row).
  void set_line_pitch(int64_t elements) { line_pitch_ = elements; }
  // Where the band jobs find their weights resident in the weight scratchpad (-1: they load them;
  // MatrixJob::b_sram).
  void set_resident_weights(int64_t addr) { b_sram_ = addr; }

  // A depthwise reader whose output a project conv reads on chip: the strategy of a copy of the job whose
  // epilogue writes each tile dense at the address set_output_sram gives (MatrixJob::y_sram; the tile's
  // OutTile at image 0, row 0), and stores nothing.
  virtual std::unique_ptr<MatrixStrategy> make_sram_strategy() = 0;
  virtual void set_output_sram(int64_t addr) = 0;
  // A pointwise conv (the project conv) restricted to image img's output rows [r0, r1) as one GEMM over
  // their pixels, reading them dense [pixels][C] at a_sram of the input scratchpad (MatrixJob::a_sram), its
  // output (and residual) at those rows in DRAM. Whether the job is such a conv: pointwise().
  virtual bool pointwise() const = 0;
  virtual Tiling choose_rows(int64_t r0, int64_t r1, int64_t a_sram, int64_t* evaluated) = 0;
  virtual void generate_rows(int64_t r0, int64_t r1, int64_t img, int64_t a_sram, const Tiling& t) = 0;

 protected:
  int64_t line_pitch_ = 0;
  int64_t b_sram_ = -1;
};

// The job restricted to output rows [r0, r1) of image 0 (the caller loops images through a_base),
// written dense [rows][OW][M] at y_sram.
void restrict_to_band(MatrixJob& j, int64_t r0, int64_t r1, int64_t img, int64_t y_sram, int64_t in_bytes);

template <class Job, class Strategy>
class JobBands : public ConvBands {
 public:
  // `whole`: how the lowering maps the node layer by layer (lower_whole).
  JobBands(Context& c, const Job& j, std::function<void()> whole) : c_(c), j_(j), whole_(std::move(whole)) {}
  const MatrixJob& job() const override { return j_; }
  bool ends_with_vec() const override { return Strategy(c_, j_).ends_with_vec(); }
  Tiling choose(int64_t r0, int64_t r1, uint64_t y_sram, int64_t* evaluated) override {
    return choose_job(band(r0, r1, 0, y_sram), evaluated);
  }
  void generate(int64_t r0, int64_t r1, int64_t img, uint64_t y_sram, const Tiling& t) override {
    generate_job(band(r0, r1, img, y_sram), t);
  }
  Tiling choose_whole(int64_t* evaluated) override { return choose_job(j_, evaluated); }
  void generate_whole(const Tiling& t) override { generate_job(j_, t); }
  void lower_whole() override { whole_(); }
  std::unique_ptr<MatrixStrategy> make_strategy() override { return std::make_unique<Strategy>(c_, j_); }
  std::unique_ptr<MatrixStrategy> make_sram_strategy() override {
    out_ = std::make_unique<Job>(j_);
    out_->y_sram = 0;
    return std::make_unique<Strategy>(c_, *out_);
  }
  void set_output_sram(int64_t addr) override { out_->y_sram = addr; }
  bool pointwise() const override {
    const Job& j = j_;
    return !j.gemm && j.kh == 1 && j.kw == 1 && j.sh == 1 && j.sw == 1 && j.pt == 0 && j.pl == 0 &&
           j.OH == j.H && j.OW == j.W && j.step_h == 1 && j.step_w == 1 && j.src_w == 0 && j.a_pitch == 0 &&
           j.y_pitch == 0 && j.y_row == 0 && j.groups == 1 && j.b_const && j.a_sram < 0 && j.y_sram < 0;
  }
  Tiling choose_rows(int64_t r0, int64_t r1, int64_t a_sram, int64_t* evaluated) override {
    return choose_job(rows_gemm(r0, r1, 0, a_sram), evaluated);
  }
  void generate_rows(int64_t r0, int64_t r1, int64_t img, int64_t a_sram, const Tiling& t) override {
    generate_job(rows_gemm(r0, r1, img, a_sram), t);
  }

 private:
  Tiling choose_job(const Job& b, int64_t* evaluated) {
    Strategy s(c_, b);
    MatrixMapper mm(c_, b, s);
    return mm.choose(evaluated);
  }
  void generate_job(const Job& b, const Tiling& t) {
    Strategy s(c_, b);
    MatrixMapper(c_, b, s).generate(t);
  }
  Job rows_gemm(int64_t r0, int64_t r1, int64_t img, int64_t a_sram) const {
    Job b = j_;
    // The output and residual pixels of image img from row r0 on (shift_output: each job's own addressing).
    shift_output(b, img, r0 * j_.OW * j_.M, c_.esize);
    b.H = b.OH = (r1 - r0) * j_.OW;
    b.W = b.OW = 1;
    b.images = 1;
    b.gemm = true;
    b.a_sram = a_sram;
    b.b_sram = b_sram_;
    return b;
  }
  Job band(int64_t r0, int64_t r1, int64_t img, uint64_t y_sram) const {
    Job b = j_;
    restrict_to_band(b, r0, r1, img, static_cast<int64_t>(y_sram), c_.esize);
    b.y_sram_row = line_pitch_;
    b.b_sram = b_sram_;
    return b;
  }
  Context& c_;
  const Job& j_;
  std::function<void()> whole_;
  std::unique_ptr<Job> out_;  // make_sram_strategy's job
};

// Called by the conv lowerings with their job (c.act and c.esize the operands'): when FusionState::conv_pool
// names this conv, emits the fused conv -> reader layer if its best band height is faster than the two
// layers, sets conv_pool->fused and returns true; otherwise emits nothing and returns false. A
// depthwise reader's job is built by its own lowering, called here (FusionState::take_conv_job).
bool lower_conv_pool(Context& c, ConvBands& bands);
// Whether the conv lowering runs for a fused depthwise reader, which takes the job it builds
// (FusionState::take_conv_job): the lowering then calls hand_conv_job instead of mapping the job.
bool conv_job_wanted(const Context& c);
// Whether lower_conv_pool may take the current conv into a pool's line buffer (FusionState::conv_pool names
// it, the reader a pool, not a depthwise conv): backend/matrix/pixel_packing.h then decides its packing
// first.
bool pool_line_buffer_next(const Context& c);
// Called by the matrix walk after each output tile's epilogue: while a line buffer's fused layer emits a
// band of its conv, its reader may emit a piece of its work on the band before there
// (FusionState::after_tile).
void line_buffer_tile_done(Context& c);
// Hands the job to the fused reader's lowering (once) and returns its result.
bool hand_conv_job(Context& c, ConvBands& bands);

// The report's fusion group of a fused pair (LayerPlan::fusion_group): "conv_pool:" or "conv_dwconv:" +
// the conv's name.
std::string fusion_group(const Context& c, const ConvPool& p);
// The mapping description of the reader fused into the conv's layer.
std::string describe_fused_pool(const Context& c, const ConvPool& p);
// The mapping description of the project conv fused into the conv's layer (ConvPool::project_fused).
std::string describe_fused_project(const Context& c, const ConvPool& p);

}  // namespace npusim::compiler::backend
