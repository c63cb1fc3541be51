#pragma once
// The precision-independent half of matrix-node lowering (internal to the back end): the tiling search,
// the tile walk with its input loads (halo included), weight-slot reuse, loop-order choice and SRAM
// accounting. The float path (matrix.cpp) and the int8 path (int8.cpp) each describe their node as a
// MatrixJob and supply a MatrixStrategy for what differs by precision: operand dtypes, the halo's pad
// value, the weight tiles' format, the accumulator slots and the epilogue. A tiling or scheduling fix
// is made here, once, for both.
//
// Every matrix node is a batch of "images" (NHWC in DRAM) convolved with a weight tensor. A
// Gemm/MatMul is the 1x1 case with the image H = M rows, W = 1, C = K (emitted as MATMUL); a grouped
// conv is a sequence of blocks, each a dense conv over `group_block` groups whose weights are
// block-diagonal (zeros between groups), so depthwise convs fill the array's rows with several channels
// at the price of multiplying zeros. The search picks the block size, the tile (output rows x cols,
// input-channel chunk, output-channel chunk) and the loop order (spatial tiles outer: the input tile
// stays in SRAM across output-channel tiles; or channels outer: the weight tile stays) with the
// smallest estimated cycles whose ping-pong slots fit the scratchpads.
#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "compiler/backend/core/context.h"

namespace npusim::compiler::backend {

// One matrix node as a batched, blocked convolution over NHWC images (the geometry and the operands the
// walk itself loads; the output side belongs to the strategy's epilogue).
struct MatrixJob {
  std::string what;   // "Conv 3x3x64->64" for messages
  bool gemm = false;  // emit MATMUL (1x1, stride 1, no padding)
  int64_t images = 1;
  int64_t H = 1, W = 1, C = 1;    // input image; C = channels of the whole input tensor (pixel stride)
  int64_t OH = 1, OW = 1, M = 1;  // output image; M = channels of the whole output tensor
  // Elements between output pixels in DRAM when not M: the output is written in place into its slice of
  // a Concat's buffer, whose channels are the row pitch (backend/memory/concat_in_place.h).
  int64_t y_pitch = 0;
  int64_t out_pitch() const { return y_pitch ? y_pitch : M; }
  // Elements between output rows in DRAM when not OW * out_pitch(): the output rows are every few rows
  // of a larger tensor (a ConvTranspose whose stride equals its kernel writes each kernel row's pixels
  // as one such job, lower_conv_transpose).
  int64_t y_row = 0;
  int64_t out_row() const { return y_row ? y_row : OW * out_pitch(); }
  // A stride = kernel ConvTranspose in one job (lower_conv_transpose_blocks): its M channels are y_rows
  // output rows' worth, ordered (kernel column, channel, kernel row); the float epilogue transposes each
  // tile (all M channels) so that each kernel row's pixels lie together, and stores y_rows row segments
  // out_row() / y_rows elements apart. 0: off.
  int64_t y_rows = 0;
  // The DRAM box a tile of n channels x w x h pixels is stored as: (d0, d1, d2) with d1's and d2's strides.
  struct OutBox {
    int64_t d0, d1, d2, s1, s2;
  };
  OutBox out_box(int64_t n, int64_t w, int64_t h) const {
    if (y_rows) return {w * out_pitch(), y_rows, h, out_row() / y_rows, out_row()};
    return {n, w, h, out_pitch(), out_row()};
  }
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, dh = 1, dw = 1, pt = 0, pl = 0;
  int64_t groups = 1, cg = 1, mg = 1;  // groups, input and output channels per group
  // A narrow conv packed `pack` output pixels a column (backend/matrix/pixel_packing.h): its geometry is the
  // packed one, and the search keeps the input-channel chunk fixed_tc (0: searched), the unpacked tiling's,
  // so that each sum adds its products in the unpacked order.
  int64_t pack = 1, fixed_tc = 0;
  std::function<uint64_t(int64_t)> a_base;  // DRAM address of image img's input
  Range a_range;
  Range y_range;  // the output's DRAM tensor (the strategy's epilogue stores it)
  // Weights: constant (tiles made by MatrixStrategy::weight_tile), or a runtime [K, N] matrix per image
  // (gemm only).
  bool b_const = true;
  std::function<uint64_t(int64_t)> b_base;
  Range b_range;

  // Where the input's pixels lie: pixel (y, x) of the image is y * row_stride() + x * pixel_stride()
  // elements from its start. A 1x1 conv with stride and no padding reads only every stride-th pixel, so
  // subsample_pointwise makes it a stride-1 conv over those pixels (H = OH, W = OW) that lie step_h
  // source rows of src_w pixels / step_w pixels apart: tiles load only what the array uses.
  int64_t step_h = 1, step_w = 1, src_w = 0;  // src_w 0: rows of W pixels
  // Elements between the input's pixels (a GEMM's rows) in DRAM when not C: the input is a strided view
  // (backend/memory/strided_views.h: one head of a QKV projection's output, its rows 3 x H x dh elements
  // apart).
  int64_t a_pitch = 0;
  int64_t pixel_stride() const { return step_w * (a_pitch ? a_pitch : C); }
  int64_t row_stride() const { return step_h * (src_w ? src_w : W) * (a_pitch ? a_pitch : C); }
  // Elements between the rows of a runtime B in DRAM when not M (a strided view, likewise).
  int64_t b_pitch = 0;
  int64_t b_row() const { return b_pitch ? b_pitch : M; }

  // On-chip residency (backend/fusion/residency.h), byte addresses in the input scratchpad, -1 = none:
  // a_sram: the input is where its producer left it, dense [rows][C] (GEMMs: MATMUL reads each K chunk in
  // place; nothing is loaded); y_sram: the output stays there for the next layer, dense [pixels][M] (the
  // epilogue's one VEC writes it, nothing is stored), which needs tiles of every output channel over
  // whole rows of pixels (y_sram_tile).
  int64_t a_sram = -1, y_sram = -1;
  // Elements between output rows at y_sram when not OW * M: rows written into a line buffer whose rows
  // carry padding columns (backend/fusion/layer_fusion.h); each tile row is then a VEC of its own.
  int64_t y_sram_row = 0;
  // Elements between images at y_sram when not OH rows: each image written into its padded place for a
  // padded conv reading it (backend/fusion/residency.h), y_sram the first real pixel of the first image.
  int64_t y_sram_image = 0;
  // With y_sram_image: the padded buffer the walk fills with the halo value before the epilogues write
  // into it (one LOAD of a pixel a row, the rest its padding: the halo's DRAM bytes are a pixel a row).
  struct PadFill {
    uint64_t at = 0;             // the buffer's first byte
    int64_t rows = 0, cols = 0;  // padded rows of every image, padded pixels a row
    int64_t value = 0;           // LOAD's pad value
  } y_fill;
  // A padded conv (backend/fusion/residency.h): the input lies at a_sram with its padding, a_pad_h rows of
  // a_pad_w pixels an image, pixel (y, x) of the padded image at (y * a_pad_w + x) * C elements: tiles of
  // whole rows read it in place (CONV's in_w = a_pad_w, a_stride = C), nothing is loaded.
  int64_t a_pad_h = 0, a_pad_w = 0;
  // With y_sram: the output has other readers too, which read it in DRAM: each tile is also stored from
  // where the epilogue wrote it (the next layer still reads it on chip: one read of it saved).
  bool y_store = false;
  // Constant weights already in the weight scratchpad at this byte address (-1 = none), as the one tile
  // [kh][kw][C][M] of a single block (layer_fusion.h loads them once for all of a conv's bands): the
  // tiling then takes every input and output channel in one tile and the walk loads no weights.
  int64_t b_sram = -1;
  // GEMM chains (backend/fusion/residency.h): the value at y_sram (a_sram) lies in column blocks
  // [M / block][rows][block] instead of dense [rows][M] (0): a tile of `block` output channels is one
  // contiguous run, so the producer's tiles need not hold every channel, and the reader's K chunks (within
  // one block) are read in place `block` elements a row.
  int64_t y_block = 0, a_block = 0;
  bool y_sram_tile(int64_t gb, int64_t toh, int64_t tow, int64_t tn) const {
    if (y_sram >= 0 && y_block > 0) return gb == groups && tn == y_block;
    return y_sram < 0 || (gb == groups && tn >= gb * mg && (tow >= OW || toh == 1));
  }
  // Bytes from y_sram to output element (img, oy, ox, n) of `es`-byte elements.
  uint64_t y_sram_offset(int64_t img, int64_t oy, int64_t ox, int64_t n, int64_t es) const {
    if (y_block > 0) {
      const int64_t rows = images * OH * OW, pixel = (img * OH + oy) * OW + ox;
      return static_cast<uint64_t>((((n / y_block) * rows + pixel) * y_block + n % y_block) * es);
    }
    const int64_t row = y_sram_row ? y_sram_row : OW * M, image = y_sram_image ? y_sram_image : OH * row;
    return static_cast<uint64_t>((img * image + oy * row + ox * M + n) * es);
  }

  // Sibling layers as one job (backend/fusion/siblings.h): the output channels are one segment per layer,
  // [begin, end) of its real channels, each beginning at a multiple of n_align (its channels padded with
  // zero weights up to one); the search takes output-channel chunks that divide n_align, and a tile ends
  // at its segment's real end (tile_end), so no tile spans two layers' outputs nor holds padding.
  std::vector<std::array<int64_t, 2>> segments;
  int64_t n_align = 0;
  // The end of the output-channel tile [n0, n1): n1, or where n0's segment's real channels end (n0 when
  // it lies in padding: an empty tile).
  int64_t tile_end(int64_t n0, int64_t n1) const {
    for (const auto& sg : segments)
      if (n0 >= sg[0] && n0 < sg[0] + n_align * ceil_div(sg[1] - sg[0], n_align))
        return std::max(n0, std::min(n1, sg[1]));
    return n1;
  }

  int64_t in_rows(int64_t toh) const { return (toh - 1) * sh + (kh - 1) * dh + 1; }
  int64_t in_cols(int64_t tow) const { return (tow - 1) * sw + (kw - 1) * dw + 1; }
  // Whether the walk can map this conv: tiles read at least one real row/column only when no padding
  // exceeds the kernel's reach, and pads, kernel, stride and dilation fit the instruction fields.
  bool conv_mappable() const {
    if (pt > (kh - 1) * dh || pl > (kw - 1) * dw) return false;
    if ((OH - 1) * sh + (kh - 1) * dh - pt - (H - 1) > (kh - 1) * dh) return false;
    if ((OW - 1) * sw + (kw - 1) * dw - pl - (W - 1) > (kw - 1) * dw) return false;
    return !(pt > 255 || pl > 255 || kh > 255 || kw > 255 || sh > 255 || dh > 255);
  }
};

struct Tiling {
  int64_t gb = 1;            // groups per block
  int64_t toh = 1, tow = 1;  // output rows x cols per tile
  int64_t tc = 1, tn = 1;    // input-channel chunk, output-channel chunk (within a block)
  // Convolutions over a batch: whole images per tile (toh = OH, tow = OW). One LOAD stacks `ti` images,
  // each with its halo, into one tall input tile and one CONV per chunk streams them all through the array
  // (the batch folded into the array's rows, as TPU v1 runs a layer over its batch): the rows between two
  // images' outputs are computed and never stored. A late layer's few pixels an image no longer pay a fill
  // and drain of the array per image, nor a weight load per image.
  int64_t ti = 1;
  bool spatial_outer = true;
  // GEMMs, with spatial_outer: each [m][K] input tile is loaded once with every K chunk and stays while
  // the K chunks (MATMUL reads its chunk in place with a_stride = K) and the output-channel tiles pass,
  // instead of one load per (K chunk, output-channel tile).
  bool input_resident = false;
  // Grouped convs of several blocks (gb < groups), with spatial_outer: each spatial tile's input is loaded
  // once with every group's channels, rows of whole pixels (a narrow group's own channels are a few bytes
  // a pixel, a DMA row each), and the blocks' CONVs read their channels from it (a_stride = every input
  // channel) and write their sums into one accumulator tile of every output channel (c_stride), which
  // one epilogue stores; every block's weights stay in the weight scratchpad, loaded once.
  bool groups_inner = false;
  // Every output tile's sums in one accumulator slot instead of a ping-pong pair: the next tile's MATMULs
  // wait for this tile's epilogue and store, but the slot holds twice the pixels x channels, so a GEMM
  // whose other operand streams once per tile of the one it keeps (ViT-B/16's MLP: 197 tokens x 3072
  // reduction x 768 outputs; the weights once per row tile, the input once per column tile) moves far
  // fewer bytes. Offered where the same tile's two sides do not fit the accumulator.
  bool one_side = false;
  int sides() const { return one_side ? 1 : 2; }
  // A conv that maps its input in its loads (fusion/pre_affine.h), one K chunk, its spatial tiles in
  // order: three input slots, and each tile's LOAD goes ahead of the tile before's map in program order.
  // With two, a tile's load waited for the CONV two tiles back and its map for the load, so two tiles
  // took a load, a map and a CONV end to end; and the in-order vector queue, full of one tile's map, held
  // the next tile's load behind it (DenseNet-121's 1x1 convs, docs/models.md "DenseNet-121 int8 and
  // RegNetY (dn)"). Set by slot_bytes where the third slot fits.
  bool prefetch_input = false;
  bool no_prefetch = false;  // the candidate without it (MatrixMapper::choose times both)
  double est = 1e300;        // closed-form cycles (cost model)
  double compute = 0, dma = 0;
  int64_t simulated = -1;  // cycles of its code simulated (Context::time_layer), -1 = not timed
  // Simulated whatever its closed form (MatrixMapper::search_among: the best tiling without a conv's
  // resident input tile, beside those that rank above it).
  bool always_timed = false;
  // Added as the fewest-instruction tiling among closed-form ties (kTieRange in matrix_walk.cpp).
  bool tie_break = false;
  int64_t in_bytes = 0, w_bytes = 0, acc_bytes = 0;
  // The epilogue's tile-sized slots (MatrixStrategy::side_bytes) lie in the input scratchpad, after the
  // input tiles, rather than in the accumulator: whenever they fit there, unless the accumulator moves more
  // bytes a cycle and holds them with the sums (a rule of the tile, so a mapping file's tile reproduces it).
  bool side_in_input = false;
};

// One output tile handed to the epilogue: image, output rows [oy0, oy0 + oh) x cols [ox0, ox0 + ow),
// output channels [n0, n0 + tn) of the whole output tensor.
// acc_px: pixels of the side's slots before the tile's (the images of a tile of several, Tiling::ti).
struct OutTile {
  int64_t img, oy0, oh, ox0, ow, n0, tn;
  int64_t acc_px = 0;
};

// Sets the box of a VEC over output tile t's sums, dense in their slot: d0 = its channels, d1 = its pixels;
// past a VEC field's 16 bits (a CONV tile of more than 65,535 pixels, MatrixMapper::max_tile_pixels)
// d2 = its rows x d1 = its columns, the same elements in the same order.
inline void tile_box(Context::VecArgs& v, const OutTile& t) {
  const int64_t p = t.oh * t.ow;
  v.d0 = t.tn;
  v.d1 = p <= 65535 ? p : t.ow;
  v.d2 = p <= 65535 ? 1 : t.oh;
}

// The epilogue's per-channel vectors (bias, requantization pairs, scales) held in a ping-pong side's
// slots. A side loads them again only when its previous tile had other channels, so a walk that keeps
// the channel range while the spatial tiles pass (one output-channel tile; depthwise channel chunks
// outer) loads them once per side, not once per tile. Strategies keep one per node (reset by allocate).
class EpilogueParams {
 public:
  void reset() { held_.fill({-1, -1}); }
  // Whether side `side` (0 or 1) must load the vectors of channels [n0, n0 + tn); records them as held.
  bool need_load(int side, int64_t n0, int64_t tn) {
    auto& h = held_[static_cast<size_t>(side)];
    if (h[0] == n0 && h[1] == tn) return false;
    h = {n0, tn};
    return true;
  }
  // How many times a walk loads them (the cost model's count of need_load == true): `blocks` times
  // `nn` output-channel tiles by `nsp` spatial tiles, sides alternating tile by tile.
  static int64_t loads(bool spatial_outer, int64_t blocks, int64_t nn, int64_t nsp) {
    if (!spatial_outer || nn == 1)
      return blocks * nn * std::min<int64_t>(2, nsp);  // runs of one channel range
    if (nn == 2) return blocks * 2;                    // each side keeps one of the two ranges
    return blocks * nn * nsp;
  }

 private:
  std::array<std::array<int64_t, 2>, 2> held_ = {{{-1, -1}, {-1, -1}}};
};

// What a precision supplies to the shared search and walk. Contract: Context::act is `ops.a` while the
// walk runs (CONV/MATMUL take their operand dtype from it).
class MatrixStrategy {
 public:
  struct Operands {
    isa::DType a = isa::DType::kFp32;  // input tiles and the array's operand dtype
    isa::DType w = isa::DType::kFp32;  // weight tiles
    isa::DType y = isa::DType::kFp32;  // output tiles as stored (cost model)
    bool tile_read = false;            // the epilogue loads an output-sized tile (residual, full bias) ...
    isa::DType r = isa::DType::kFp32;  // ... in this dtype (cost model)
    int64_t pad = 0;                   // halo value of input tiles (the zero point for codes)
  };
  Operands ops;

  virtual ~MatrixStrategy() = default;
  // Accumulator bytes a tile of p output pixels x tn channels needs: `sides` ping-pong sides (2; 1 for a
  // Tiling::one_side walk) and any slots shared by the whole node.
  virtual int64_t acc_bytes(int64_t p, int64_t tn, int sides) const = 0;
  int64_t acc_bytes(int64_t p, int64_t tn) const { return acc_bytes(p, tn, 2); }
  // VEC instructions of the epilogue per output tile (cost model; each counted as an add of the tile).
  virtual int epilogue_ops() const = 0;
  // The per-channel vectors the epilogue loads through an EpilogueParams for a tile of tn channels, one
  // entry per LOAD, in 4-byte elements (cost model).
  virtual std::vector<int64_t> param_loads(int64_t /*tn*/) const { return {}; }
  // Of acc_bytes, the bytes of the epilogue's tile-sized operand slots (a residual or full-bias tile, a
  // SiLU temporary), both sides: the walk may place them in the input scratchpad instead, where the
  // vector unit reaches them as well, so that the accumulator holds twice the pixels per tile (a longer
  // stream per fold of the array: ResNet's residual convolutions).
  virtual int64_t side_bytes(int64_t /*p*/, int64_t /*tn*/, int /*sides*/) const { return 0; }
  int64_t side_bytes(int64_t p, int64_t tn) const { return side_bytes(p, tn, 2); }
  // Reserves the accumulator slots of `sides` sides for tiles of up to p_max pixels x tn channels (in the
  // same order as acc_bytes counts them), the side_bytes slots from `side` (the accumulator's allocator or
  // the input scratchpad's), and emits any loads of node-wide constants.
  virtual void allocate(SramAlloc& acc, SramAlloc& side, int64_t p_max, int64_t tn, int sides) = 0;
  void allocate(SramAlloc& acc, SramAlloc& side, int64_t p_max, int64_t tn) {
    allocate(acc, side, p_max, tn, 2);
  }
  // Accumulator slot the array writes for ping-pong side `side` (0 or 1; 0 alone with one side).
  virtual uint64_t acc_slot(int side) const = 0;
  // DRAM address of a data segment holding the constant weight tile of block b, input channels
  // [k0, k1) and output channels [n0, n1) within the block, laid out as the CONV/MATMUL B operand
  // [kh][kw][k1 - k0][n1 - n0] in ops.w (use weight_tile_values).
  virtual uint64_t weight_tile(int64_t b, int64_t gb, int64_t k0, int64_t k1, int64_t n0, int64_t n1) = 0;
  // A depthwise job's (groups == C == M) constant weights for the vector unit's dwconv: the DRAM address
  // of a data segment [kh][kw][C] in ops.w (depthwise_weight_values, compiler/backend/matrix/depthwise.h).
  virtual uint64_t depthwise_weights() = 0;
  // Emits the epilogue of one output tile whose sums are in acc_slot(side), ending with its STORE (or,
  // with MatrixJob::y_sram, its one VEC writing the tile into the input scratchpad).
  virtual void epilogue(const OutTile& t, int side) = 0;
  // Whether the epilogue ends with a VEC that writes the whole tile, which can then write it into the
  // input scratchpad instead of its slot (MatrixJob::y_sram).
  virtual bool ends_with_vec() const = 0;
};

// The epilogue's last VEC `last` of output tile t (its result `es`-byte elements) writing the tile where
// the next layer reads it (MatrixJob::y_sram): one VEC, or one per tile row when the rows there are
// further apart than the tile's (MatrixJob::y_sram_row).
void write_on_chip(Context& c, const MatrixJob& j, Context::VecArgs last, const OutTile& t, int64_t es);

// The values of a constant weight tile (see MatrixStrategy::weight_tile) from weights laid out
// [groups][kh][kw][cg][mg]; zeros off the block diagonal.
template <typename T>
std::vector<T> weight_tile_values(const MatrixJob& j, const std::vector<T>& w, int64_t b, int64_t gb,
                                  int64_t k0, int64_t k1, int64_t n0, int64_t n1) {
  std::vector<T> tile(static_cast<size_t>(j.kh * j.kw * (k1 - k0) * (n1 - n0)), T(0));
  size_t q = 0;
  if (gb == 1 && j.groups == 1) {  // dense: copy rows
    for (int64_t i = 0; i < j.kh * j.kw; ++i) {
      for (int64_t k = k0; k < k1; ++k, q += static_cast<size_t>(n1 - n0)) {
        const T* src = &w[static_cast<size_t>((i * j.cg + k) * j.mg + n0)];
        std::copy(src, src + (n1 - n0), tile.begin() + static_cast<long>(q));
      }
    }
    return tile;
  }
  for (int64_t i = 0; i < j.kh; ++i) {
    for (int64_t jj = 0; jj < j.kw; ++jj) {
      for (int64_t k = k0; k < k1; ++k) {
        for (int64_t n = n0; n < n1; ++n, ++q) {
          const int64_t gk = b * gb + k / j.cg, gn = b * gb + n / j.mg;
          if (gk != gn) continue;  // off the block diagonal
          const int64_t c = k % j.cg, m = n % j.mg;
          tile[q] = w[static_cast<size_t>(((gk * j.kh + i) * j.kw + jj) * j.cg * j.mg + c * j.mg + m)];
        }
      }
    }
  }
  return tile;
}

// Conv weights [M][cg][kh][kw] in the job's layout [groups][kh][kw][cg][mg]: per group and kernel
// position a transpose, done in blocks of output channels so that reads and writes both stay in cache
// (ResNet-50's 3x3 weights written one output channel at a time strode 2 MiB per element).
template <typename T>
std::vector<T> grouped_weights(const MatrixJob& j, const std::vector<T>& w) {
  std::vector<T> r(w.size());
  const int64_t taps = j.kh * j.kw;
  constexpr int64_t kBlock = 32;
  for (int64_t g = 0; g < j.groups; ++g) {
    for (int64_t m0 = 0; m0 < j.mg; m0 += kBlock) {
      const int64_t m1 = std::min(j.mg, m0 + kBlock);
      for (int64_t c0 = 0; c0 < j.cg; c0 += kBlock) {
        const int64_t c1 = std::min(j.cg, c0 + kBlock);
        for (int64_t mm = m0; mm < m1; ++mm) {
          const T* src = &w[static_cast<size_t>((g * j.mg + mm) * j.cg * taps)];  // [cg][kh][kw]
          for (int64_t ci = c0; ci < c1; ++ci) {
            for (int64_t tap = 0; tap < taps; ++tap) {
              r[static_cast<size_t>(((g * taps + tap) * j.cg + ci) * j.mg + mm)] = src[ci * taps + tap];
            }
          }
        }
      }
    }
  }
  return r;
}

// A batched MatMul A [..., M, K] x B [..., K, N] -> Y [..., M, N] with numpy broadcasting of the batch
// dims: `images` output matrices, and for each the index of its A and B matrix (multiply by M*K and
// K*N elements). nullopt when a batch rank exceeds the output's.
struct MatmulBatches {
  int64_t images = 1;
  std::vector<int64_t> a_off, b_off;
};
std::optional<MatmulBatches> matmul_batches(const Shape& a, const Shape& b, const Shape& y);

// A MatMul operand [..., rows, cols] in DRAM (ONNX order), dense or a strided view
// (backend/memory/strided_views.h): the element where each of its matrices starts (row-major over its batch
// dims; MatmulBatches' offsets index it), the elements between its rows, and whether the rows of all its
// matrices are evenly spaced
// (`pitch` apart, so the batch dims fold into the rows). nullopt when a row's elements are not contiguous.
// A dense operand gives matrix i at i x rows x cols with a pitch of cols.
struct MatrixRows {
  std::vector<int64_t> start;
  int64_t pitch = 0;
  bool uniform = true;
};
std::optional<MatrixRows> matrix_rows(const DramTensor& t);

// Turns a 1x1 conv with stride > 1 and no padding into a stride-1 conv over the pixels it reads (see
// MatrixJob::pixel_stride); call after the job's input addressing (a_base) is set. False: left as is.
bool subsample_pointwise(MatrixJob& j);

// Sets j.pt / j.pl of Conv node n: its pads, or what auto_pad SAME_UPPER / SAME_LOWER implies for the
// job's geometry (sizes, kernel, strides and dilations already set).
void set_conv_pads(const Node& n, MatrixJob& j);

// The VEC op and immediates of a fused activation named `act` (the kActivation attribute of n, whose
// other attributes hold the parameters). False when the name is not one the vector unit has.
bool fused_activation(const Node& n, const std::string& act, isa::VecOp* op, int64_t* imm0, int64_t* imm1);

// Tiling search, cost model and code generation of one MatrixJob.
class MatrixMapper {
 public:
  MatrixMapper(Context& c, const MatrixJob& j, MatrixStrategy& s) : c_(c), j_(j), s_(s) {}

  // Bytes of each slot kind for a tiling (ping-pong pairs included).
  void slot_bytes(Tiling& t) const;
  bool fits(const Tiling& t) const;
  // The `keep` tilings with the smallest closed-form estimate among those that fit, best first;
  // *evaluated = how many fit (0: none, and the result is empty). Under a mapping policy
  // (lowering.mapping_policy) the candidate is the policy's tile, shrunk row by row until it fits.
  std::vector<Tiling> search(int64_t* evaluated, size_t keep = 1) const;
  // The tile a mapping policy other than `search` picks for this job (nullopt: none, or it cannot
  // express the job: grouped convs, a kernel split).
  std::optional<Tiling> policy_tiling() const;
  // The tiling to generate: the closed form's best few, each emitted, simulated (Context::time_layer,
  // when the context can time code) and undone; the fastest simulated wins (ties: the closed form's
  // order) and Context::timed remembers its time. *evaluated as for search.
  Tiling choose(int64_t* evaluated);
  // Emits the node under tiling t and records its SRAM use in c.plan.
  void generate(const Tiling& t);
  // Tiles of several whole images (Tiling::ti): the elements between two images' inputs (0: they do not lie
  // evenly spaced, or the job cannot take such tiles), the input rows each image takes in the tall tile
  // (its window plus rows up to a multiple of the stride, so every image's outputs start on a row of the
  // CONV's output), and the output rows (pixels) of a tile of n images, the unused rows between them
  // included.
  int64_t image_pitch() const;
  int64_t image_rows() const { return ceil_div(j_.in_rows(j_.OH), j_.sh) * j_.sh; }
  int64_t tall_rows(int64_t n) const { return (n - 1) * (image_rows() / j_.sh) + j_.OH; }
  int64_t tile_pixels(const Tiling& t) const { return t.ti > 1 ? tall_rows(t.ti) * j_.OW : t.toh * t.tow; }
  int64_t tile_in_rows(const Tiling& t) const { return t.ti > 1 ? t.ti * image_rows() : j_.in_rows(t.toh); }
  // The most output pixels one tile may stream. A MATMUL's m and a VEC's d1 are 16-bit fields, so a GEMM
  // tile, and a tile whose output stays on chip (write_on_chip spans it with one VEC), stop at 65,535; a
  // CONV has 16-bit out_h and out_w and its epilogue spans rows x columns (tile_box), so its tile is
  // bounded by the scratchpads alone: a layer that fits is one tile, and pays each fold's preload, fill
  // and drain once, as SCALE-Sim counts a layer (its 4k-image rows stream up to 4.2 M pixels a fold).
  int64_t max_tile_pixels() const { return j_.gemm || j_.y_sram >= 0 ? 65535 : int64_t{65535} * 65535; }
  // Whether the job may take one-sided tilings (Tiling::one_side).
  bool one_side_job() const;
  // Spatial tiles of the walk (tiles of several images count once).
  int64_t spatial_tiles(const Tiling& t) const {
    return ceil_div(j_.images, t.ti) * ceil_div(j_.OH, t.toh) * ceil_div(j_.OW, t.tow);
  }

 private:
  void estimate(Tiling& t) const;
  // The search over the candidates (the policy's tile alone when given); report_none: throw when an
  // imposed tile fits nowhere.
  std::vector<Tiling> search_among(int64_t* evaluated, size_t keep, const Tiling* policy,
                                   bool report_none) const;
  // lowering.conv_reduction = per_position on a conv with a kernel larger than 1x1.
  bool per_position() const {
    return !j_.gemm && j_.kh * j_.kw > 1 &&
           c_.config.lowering.conv_reduction == isa::ConvReduction::kPerPosition;
  }
  // Pixels past an input tile a per-position CONV's footprint reaches (its window starts up to
  // (kw-1)*dw pixels in and spans whole rows).
  int64_t position_slack() const { return per_position() ? (j_.kw - 1) * j_.dw : 0; }
  // One box's DMA: its cycles alone (isa::timing::estimate_dma_cycles) and the DRAM's time for it in a
  // stream of such boxes from every engine (`dram`, cycles): its bytes at the rate the DRAM sustains for
  // transfers of its size (isa::timing::DramStreamRates), times its channel skew
  // (isa::timing::channel_skew), or more when its rows miss the DRAM's open rows
  // (isa::timing::dram_cost_factor: the box on the DRAM model).
  struct BoxCost {
    double cycles = 0, dram = 0;
  };
  BoxCost dma_cost(int64_t s0, int64_t s1, int64_t s2, int64_t st1, int64_t st2, isa::DType t) const;
  double dma_cycles(int64_t s0, int64_t s1, int64_t s2, int64_t st1, int64_t st2, isa::DType t) const {
    return dma_cost(s0, s1, s2, st1, st2, t).cycles;
  }
  // The DMA cycles of storing an output tile of n channels x w x h pixels (MatrixJob::out_box).
  double out_dma_cycles(int64_t n, int64_t w, int64_t h, isa::DType t) const {
    const MatrixJob::OutBox b = j_.out_box(n, w, h);
    return dma_cycles(b.d0, b.d1, b.d2, b.s1, b.s2, t);
  }
  double vec_cost(int64_t elems) const;
  // Whether tiling t may keep its input tile resident across its K chunks (Tiling::input_resident).
  bool input_resident_ok(const Tiling& t) const;
  // The most output channels, in whole folds of the array's columns and spread evenly over the tiles, one
  // accumulator side of p pixels holds (Tiling::one_side; 0: none).
  int64_t one_side_channels(int64_t p, int64_t cout_b) const;
  // Whether tiling t may share one input tile of every group among its blocks (Tiling::groups_inner).
  bool groups_inner_ok(const Tiling& t) const;
  // The cost model and the walk of a groups_inner tiling.
  void estimate_groups_inner(Tiling& t) const;
  void generate_groups_inner(const Tiling& t);
  // How often the walk loads each operand: a load is skipped when the slot loaded last already holds
  // the same tile (the loop order decides how often that happens). One rule for the cost model and
  // the walk.
  struct Reuse {
    bool a = false;       // an input tile is loaded once per spatial tile (not again per output-channel tile)
    bool b = false;       // a weight tile is loaded once per output-channel tile (not again per spatial tile)
    bool a_once = false;  // the layer's input is one tile, loaded once: one slot, no ping-pong partner
    bool b_once = false;  // the layer's weights are one tile, loaded once: one slot
  };
  Reuse reuse(const Tiling& t) const;
  // ni > 0: ni whole images from img on, stacked into one tall tile (Tiling::ti).
  void load_input(int64_t img, int64_t oy0, int64_t oh, int64_t ox0, int64_t ow, int64_t c0, int64_t tc,
                  uint64_t slot, int64_t ni = 0);
  // The padded buffer of MatrixJob::y_fill filled with the halo value (nothing without one).
  void fill_padding();

  Context& c_;
  const MatrixJob& j_;
  MatrixStrategy& s_;
};

// Records a chosen tiling in c.plan (tile shape, loop order, estimates, MACs).
void record_tiling(Context& c, const MatrixJob& j, const Tiling& t, int64_t evaluated);

// A stride = kernel ConvTranspose lowered either as one job of all its kernel rows' channels (`one_job`,
// MatrixJob::y_rows; `one` says whether it applies) or as a job per kernel row of `row_channels` channels
// (`row_jobs`): both emitted and simulated, the faster kept (ties to one job). A mapping file's tile_n for
// the layer says which: more than row_channels is the one job (--mapping-out writes its whole width).
void choose_conv_transpose_jobs(Context& c, const Node& n, int64_t row_channels, bool one,
                                const std::function<void()>& one_job, const std::function<void()>& row_jobs);

// A layer lowered as several matrix jobs (a stride = kernel ConvTranspose's kernel rows): add() each
// job's figures from c.plan after it is emitted, then write() their sums into the layer's plan.
// conv_transpose_rows() is such a ConvTranspose's mapping line.
class JobCosts {
 public:
  void add(const LayerPlan& p) {
    t_.est_cycles += p.est_cycles, t_.model_cycles += p.model_cycles;
    t_.est_compute_cycles += p.est_compute_cycles, t_.est_dma_cycles += p.est_dma_cycles;
    t_.macs += p.macs, t_.instructions += p.instructions, t_.candidates += p.candidates;
  }
  void write(LayerPlan& p) const {
    p.est_cycles = t_.est_cycles, p.model_cycles = t_.model_cycles;
    p.est_compute_cycles = t_.est_compute_cycles, p.est_dma_cycles = t_.est_dma_cycles;
    p.macs = t_.macs, p.instructions = t_.instructions, p.candidates = t_.candidates;
  }
  static std::string conv_transpose_rows(int64_t kh, int64_t kw, int64_t m) {
    return "ConvTranspose with stride = kernel " + std::to_string(kh) + "x" + std::to_string(kw) + ": " +
           std::to_string(kh) + " 1x1 CONVs of " + std::to_string(kw * m) +
           " channels, each writing one output row in " + std::to_string(kh) + " (strided STORE)";
  }

 private:
  LayerPlan t_;
};

}  // namespace npusim::compiler::backend
