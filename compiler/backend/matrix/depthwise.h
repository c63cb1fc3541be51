#pragma once
// Depthwise convolutions on the vector unit (internal to the back end). A depthwise conv (groups ==
// input channels == output channels) on the systolic array is a block-diagonal CONV: the array
// multiplies zeros between the groups and pays fill and drain per fold for a few useful MACs. The
// vector unit's VEC dwconv does one MAC per lane per cycle instead. This file tiles the job over output
// rows, columns and channels (input tiles with their halo from LOAD's pads, ping-pong slots), writes the
// sums where the array would (the strategy's accumulator slots), so the precision's own epilogue (bias,
// activation, requantization, residual) runs unchanged, and chooses between the two mappings by
// simulating both (Context::time_code), so that neither path makes a layer slower than the other.
#include <cstdint>
#include <string>
#include <vector>

#include "compiler/backend/core/context.h"
#include "compiler/backend/fusion/se_pool_fusion.h"
#include "compiler/backend/matrix/matrix_walk.h"

namespace npusim::compiler::backend {

// Depthwise weights [groups][kh][kw][1][1] (MatrixJob order) as the dwconv operand [kh][kw][C].
template <typename T>
std::vector<T> depthwise_weight_values(const MatrixJob& j, const std::vector<T>& w) {
  std::vector<T> r(static_cast<size_t>(j.kh * j.kw * j.groups));
  for (int64_t g = 0; g < j.groups; ++g) {
    for (int64_t t = 0; t < j.kh * j.kw; ++t)
      r[static_cast<size_t>(t * j.groups + g)] = w[static_cast<size_t>(g * j.kh * j.kw + t)];
  }
  return r;
}

// The weight dtype of a VEC dwconv on `a` (the array's rule: int8 weights for uint8 codes).
isa::DType depthwise_weight_dtype(isa::DType a);
// The VEC dwconv of job j's window over an input tile of in_h x in_w pixels x c channels (halo included)
// at src of the input scratchpad, weights [kh][kw][c] at w of the weight scratchpad, its sums
// [OH][OW][c] (int32 for codes, else fp32) at dst of the accumulator.
isa::Instruction dwconv_instruction(uint32_t layer, isa::DType a, uint64_t src, uint64_t w, uint64_t dst,
                                    int64_t c, int64_t in_w, int64_t in_h, const MatrixJob& j);

// A tiling of the vector mapping: output rows x cols x channels per tile.
struct DepthwiseTiling {
  int64_t toh = 1, tow = 1, tn = 1;
  double est = 1e300;  // closed-form cycles
  double compute = 0, dma = 0;
  int64_t simulated = -1;  // cycles of its code simulated, -1 = not timed
  int64_t in_bytes = 0, w_bytes = 0, acc_bytes = 0;
  // The epilogue's tile-sized slots (MatrixStrategy::side_bytes: SiLU temporaries) in the input scratchpad
  // after the input tiles, where the accumulator cannot hold them beside the sums (a rule of the tile).
  bool side_in_input = false;
  // Rows of a sliding input buffer (0: ping-pong input tiles). Tiles of whole rows (tow == OW) walk down the
  // image in one region of this many input rows (the padded image where it fits): each tile loads only the
  // rows the one before did not (its window's overlap, kh - sh rows, stays where it lies), and starts over at
  // the region's start, loading its overlap again, where it would run past the end. A 7x7 map in tiles of two
  // output rows read each input row 13/7 times; sliding, once.
  int64_t slide_rows = 0;
};

class DepthwiseMapper {
 public:
  // `pool`: an SE pool the tiles also run in their epilogue (fusion/se_pool_fusion.h): the tilings are
  // then whole output rows, their heights multiples of the pool's bands.
  DepthwiseMapper(Context& c, const MatrixJob& j, MatrixStrategy& s, const SePoolBands* pool = nullptr)
      : c_(c), j_(j), s_(s), pool_(pool) {}

  // Whether job j is a depthwise conv the vector unit can run (constant weights, not subsampled, fields
  // within VEC's widths).
  static bool applies(const MatrixJob& j);
  // The `keep` tilings that fit with the smallest closed-form estimate, best first; a mapping file's
  // tile_oh, tile_ow and tile_n (`imposed`, checked by the caller) are the only candidates of theirs.
  std::vector<DepthwiseTiling> search(size_t keep, const LayerMapping* imposed = nullptr) const;
  // Emits the job under tiling t and records its SRAM use in c.plan.
  void generate(const DepthwiseTiling& t);

 private:
  bool fits(DepthwiseTiling& t) const;
  void estimate(DepthwiseTiling& t) const;
  // The pool's bands in output tile t, whose epilogue left it dense for its STORE (the program's last
  // instruction); the band means of channel chunk n0 at `means`.
  void pool_tile(const OutTile& t, uint64_t means) const;

  Context& c_;
  const MatrixJob& j_;
  MatrixStrategy& s_;
  const SePoolBands* pool_;
};

// For a depthwise job whose array tiling `array` MatrixMapper::choose picked: when the vector mapping is
// faster (both simulated when the context can time code, else by the closed forms) or a mapping file
// places the layer on the vector unit, emits it, records it in c.plan (placement "vector", mapping
// line, tile) and returns true. Returns false, emitting nothing, otherwise (not depthwise, the array is
// faster or imposed): the caller maps the job on the array under `array`, and c.timed, when set, is
// that code's time.
// `array` null: the array has no tiling for the job (none honours MatrixJob::y_sram), so the vector unit
// maps it when it can.
bool lower_depthwise_on_vector(Context& c, const MatrixJob& j, MatrixStrategy& s, MatrixMapper& mm,
                               const Tiling* array);

}  // namespace npusim::compiler::backend
