#pragma once
// The fusion groups' state while the lowering stage walks the layers (internal to the back end): what a
// layer left in the input scratchpad for the next one (residency.h), the squeeze-and-excitation block's
// input held from its pool to its Mul (se_fusion.h), the conv -> pool / depthwise pair the current conv
// may fuse with (layer_fusion.h), and the scratchpad bytes these hold. Only fusion/ reads and writes it,
// and the core that accounts for it (Context::capacity leaves the held bytes out; Context::load spills a
// value kept on chip before a DRAM reader): the matrix and vector lowerings ask fusion/'s functions.
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "compiler/backend/core/emitter.h"
#include "isa/isa.h"

namespace npusim::compiler::quant {
struct QParams;  // compiler/quant/precision.h
}  // namespace npusim::compiler::quant

namespace npusim::compiler::backend {

struct ConvPool;        // fusion/layer_fusion.h
class ChannelScaleMul;  // int8/int8.h
class ConvBands;        // fusion/layer_fusion.h

// A value its producer left in the input scratchpad for its one consumer instead of storing it to DRAM
// (residency.h): dense [pixels][channels] at `addr`, `bytes` long, the top of the scratchpad.
struct OnChipValue {
  std::string value;  // graph value name ("" = none)
  Range dram;         // its DRAM tensor (still allocated: a spill writes it there)
  uint64_t addr = 0;
  int64_t bytes = 0;
  std::array<int64_t, 4> box{};      // the DRAM tensor as one STORE box (sizes, innermost first) ...
  std::array<int64_t, 3> strides{};  // ... and its strides, in elements
  isa::DType dtype = isa::DType::kFp32;
  uint32_t producer = 0;  // its layer
  bool imposed = false;   // a mapping file's on_chip=true: the reader takes it without costing
  bool pending = false;   // in SRAM only: a DRAM reader must spill it first
  bool in_dram = false;   // its producer stored it too, for its other readers (MatrixJob::y_store): a spill
                          // stores nothing
  bool spilled = false;
  // A later layer reads the value as its residual (a Conv's inputs[3]): it stays in SRAM until that layer
  // is lowered (FusionState::residual), -1 = none.
  int64_t residual_reader = -1;
  // ... which reads it as its input instead, in place where it lies (a stage's strided 1x1 downsample conv,
  // reading the block output the next layer also reads in place: residency.h, hold_for_residual).
  bool reader_reads_input = false;
  bool next_reads = true;  // the layer after its producer reads it in place (a pointwise conv)
  // A GEMM chain's value (residency.h): rows of its last dim in column blocks [N / block][rows][block]
  // (MatrixJob::y_block), 0 = dense.
  int64_t block = 0;
  // A value read by a padded conv (residency.h, PaddedLayout): its images lie padded in SRAM, `pad.h` rows
  // of `pad.w` pixels each, the value's pixel (y, x) at padded (pad.t + y, pad.l + x), the rest LOAD's halo
  // value; addr is the padded buffer's start. pad.w == 0: dense [pixels][channels].
  struct Padded {
    int64_t h = 0, w = 0, t = 0, l = 0;
    int64_t value = 0;  // the halo value (0, or the reader's input zero point for codes)
  } pad;
};

// A squeeze-and-excitation block's input held in the input scratchpad from its GlobalAveragePool to
// its Mul (se_fusion.h): dense [pixels][channels] at `addr`, `bytes` long, at the top of the
// scratchpad. Its DRAM copy stays (the pool reads it there); the Mul reads it here instead of again.
struct HeldValue {
  std::string value;  // graph value name ("" = none)
  Range dram;         // its DRAM tensor
  uint64_t addr = 0;
  int64_t bytes = 0;
  isa::DType dtype = isa::DType::kFp32;
  size_t pool = 0, mul = 0;  // the GlobalAveragePool's and the Mul's layers
  bool loaded = false;       // the pool loaded it there (set by lower_pool)
  bool read = false;         // the Mul read it there (set by lower_binary)
  // The Mul may leave its product in place of it for the pointwise conv after it (as residency does,
  // residency.h: FusionState::on_chip).
  bool keep_output = false;
  bool keep_imposed = false;  // ... because a mapping file tiles the reader as reading it in place
};

// A squeeze-and-excitation block's pool that its depthwise producer ran in its epilogue
// (se_pool_fusion.h): the pool emits nothing.
struct PoolInEpilogue {
  int64_t pool = -1;      // the GlobalAveragePool's layer (-1 = none)
  uint32_t producer = 0;  // the depthwise conv's layer
  int64_t rows = 0;       // the pool's bands: rows of the input each
  int64_t x_bytes = 0;    // the pool's input: the DRAM read saved
};

// An int8 SE pool summed by its producer conv's STOREs (store_pool.h): the sums and constants at the top of
// the input scratchpad, below what was reserved before.
struct StorePool {
  int64_t pool = -1;      // the GlobalAveragePool's layer (-1 = none)
  uint32_t producer = 0;  // the conv whose STOREs carry it
  Range x, y;             // the conv's output (the pool's input) and the pooled vector
  int64_t channels = 0;   // x's channels
  isa::DType dtype{}, y_dtype{};
  int64_t y_zero_point = 0;
  int64_t x_bytes = 0;     // the pool's read saved
  uint64_t ones = 0;       // input-scratchpad bytes: ones_elems int8 unit weights ...
  int64_t ones_elems = 0;  // ...
  uint64_t sums = 0;       // ... the running int32 sums [channels] ...
  uint64_t part = 0;       // ... one tile's sums ...
  uint64_t stage = 0;      // ... the output stage (bias, multiplier, shift) ...
  uint64_t pooled = 0;     // ... and the pooled codes
  int64_t reserved = 0;    // bytes of input_reserved this holds
  int64_t stores = 0;      // STOREs summed (the final code's and its trials')
  bool unsummed = false;   // a STORE whose box the sums could not take: not taken
  bool taken = false;      // the producer's code summed X: the pool's layer emits nothing
};

// A MatMul whose epilogue runs the layer scale (a Mul) and the residual Add after it (project_tail.h): node
// indices, -1 = none.
struct ProjectTail {
  int64_t matmul = -1, mul = -1, add = -1;
  bool fused = false;  // the MatMul's lowering took them
};

// A constant affine map (a BatchNormalization left after a conv's activation) applied where its producer's
// epilogue leaves each output tile for the STORE (post_affine.h): the producer's STOREs of its output y are
// redirected to the map's output z, each preceded by the map's VECs on the tile in place.
struct PostAffine {
  int64_t bn = -1;        // the BatchNormalization's layer (-1 = none)
  uint32_t producer = 0;  // the layer whose STOREs carry it
  Range y, z;             // the producer's output (never written) and the map's output
  int64_t channels = 0;   // y's innermost (channel) extent
  enum class Mode { kScalar, kRow, kLut } mode = Mode::kScalar;
  uint64_t params = 0;    // accumulator bytes holding the constants (scale, then shift; or the table)
  uint64_t shift_at = 0;  // ... and where the shift starts
  int64_t reserved = 0;   // bytes of acc_reserved this holds
  // The producer's output goes through a line buffer to the depthwise conv reading the map's output
  // (layer_fusion.h): the map applied to each tile the producer writes there (post_affine_on_chip).
  bool line_buffer = false;
  int64_t bytes = 0;   // y's bytes: its write and its read saved
  int64_t stores = 0;  // STOREs redirected (the final code's and its trials')
  bool taken = false;  // the producer's NPU code applied it: the map's layer emits nothing
};

// What a map done in its reader's loads (PreAffine, PrePool) keeps besides its own operands.
struct ReaderMap {
  int64_t node = -1;    // the map's layer (-1 = none)
  int64_t reader = -1;  // the conv whose LOADs carry it
  Range x;              // the map's output (never written), the conv's input
  int64_t reserved =
      0;  // scratchpad bytes (acc_reserved or input_reserved) this holds while the reader is lowered
  int64_t bytes = 0;  // x's bytes: its write and its read saved
  int64_t loads = 0;  // LOADs redirected (the final code's and its trials')
  // Whether reader `layer` loads x through the map.
  bool carried_by(int64_t layer) const { return node >= 0 && reader == layer; }
  // Whether a load of `dram` by the layer being lowered, `layer`, is one of x (the map's to serve).
  bool serves(int64_t layer, const Range& dram) const {
    return carried_by(layer) && dram.space == x.space && dram.begin == x.begin && dram.end == x.end;
  }
};

// A constant affine map with its activation (a BatchNormalization and Relu before a pointwise conv:
// DenseNet's norm1 -> relu1 -> conv1) applied where the conv loads its input (pre_affine.h): the conv's
// LOADs of the map's output x read the map's input y instead, each followed by the map's VECs on the tile
// in place. x is never written, the map's layer emits nothing.
struct PreAffine : ReaderMap {  // node: the BatchNormalization's layer
  uint64_t y_addr = 0;          // the map's input: its first element ...
  Range y;                      // ... the DRAM it spans ...
  int64_t y_pixel = 0;  // ... and elements between its pixels (a Concat's view: that Concat's channels)
  isa::DType y_dtype = isa::DType::kFp32;
  int64_t channels = 0;                 // x's innermost (channel) extent
  isa::DType work = isa::DType::kFp32;  // the constants' and the arithmetic's type (int8: fp32)
  isa::VecOp act = isa::VecOp::kCopy;   // the fused activation's VEC (kCopy: none)
  int64_t act_imm0 = 0, act_imm1 = 0;
  std::vector<float> mul, add;  // the per-channel constants, as the map's own lowering computes them
  uint64_t params = 0;          // accumulator bytes holding the constants (scale, then shift)
  uint64_t shift_at = 0;
  // # int8: codes in (y's zero point subtracted into fp32 work rows) and out (the clamp, or the add,
  // writes x's codes back into the tile), as the map's own lowering runs them.
  bool codes = false;
  bool clamp = false;  // an activation: kClip to [act_imm0, act_imm1] (fp32 immediates) writes the codes
  const quant::QParams* zero_point = nullptr;  // y's QParams (its conversion constants)
  uint64_t conv_at = 0;                        // accumulator bytes of the conversion constants
  uint64_t work_at = 0;                        // ... and of the work rows
  int64_t work_elems = 0;
  // While `hold` (the walk loading the next input tile ahead: pre_affine.h, hold_pre_affine), each LOAD's
  // map waits in `held`, one box a channel run, until the walk emits it.
  struct Box {
    isa::Buffer buf = isa::Buffer::kInput;
    uint64_t at = 0;
    int64_t d0 = 0, d1 = 0, d2 = 0, ch = 0;
    isa::DType t = isa::DType::kFp32;
  };
  bool hold = false;
  std::vector<Box> held;
};

// A LayerNormalization before a GEMM applied where the GEMM loads its input (pre_norm.h): the GEMM's LOADs
// of the LayerNorm's output x read its input y instead, each followed by the LayerNorm's steps on the tile's
// rows. x is never written, the LayerNorm's layer emits nothing.
struct PreNorm : ReaderMap {  // node: the LayerNormalization's layer
  uint64_t x_addr = 0;        // x's first element (the GEMM's loads are of x)
  Range y;                    // the LayerNorm's input: the DRAM it spans ...
  uint64_t y_addr = 0;        // ... and its first element
  isa::DType x_dtype = isa::DType::kFp32, y_dtype = isa::DType::kFp32;
  int64_t D = 0;                     // the row's elements (the GEMM's K)
  bool gamma = false, beta = false;  // LayerNorm's scale and bias given
  float epsilon = 1e-5f;
  isa::DType work = isa::DType::kFp32;  // the steps' compute format (int8: fp32)
  // # int8: y's and x's codes (the steps dequantize y's and write x's, as the layer's own lowering).
  bool codes = false;
  const quant::QParams* qx = nullptr;  // the steps' input codes: y's
  const quant::QParams* qy = nullptr;  // ... and their output codes: x's
  int64_t chunk = 0;                   // rows the steps take at a time (their statistics and work tiles)
  // Accumulator bytes while the GEMM is lowered: conversion constants (base, base + 16), epsilon (base + 32),
  // gamma, beta, the statistics m and v (chunk values each), the work tile(s) of chunk rows.
  uint64_t base = 0, gamma_at = 0, beta_at = 0, m_at = 0, v_at = 0, work_at = 0, work2_at = 0;
  bool begun = false;  // the GEMM's lowering reserved them
  bool ready = false;  // ... and loaded the constants: its loads apply the LayerNorm (pre_norm_choose)
  bool apart = false;  // ... and its simulation chose the LayerNorm lowered apart before it (pre_norm_choose)
  int64_t apart_cycles = 0;  // the LayerNorm's figure of that simulation (its plan's estimate)
  // While `hold` (the walk loading the next input tile ahead: pre_affine.h, hold_pre_affine), each LOAD's
  // steps wait in `held` (d0 = D, d1 = rows) until the walk emits them.
  bool hold = false;
  std::vector<PreAffine::Box> held;
};

// A max pool of stride 1 before a pointwise conv (GoogLeNet's branch-4 pool -> 1x1 conv) done on the conv's
// tiles (pre_pool.h): the conv's LOADs of the pool's output x become LOADs of the pool's input window (halo
// and padding) into scratch rows at the top of the input scratchpad and one VEC max_pool each into the tile.
struct PrePool : ReaderMap {  // node: the MaxPool's layer
  Range y;                    // the pool's input, dense NHWC
  uint64_t y_addr = 0;
  int64_t H = 0, W = 0, C = 0;  // y's (and x's) rows, columns, channels
  int64_t kh = 1, kw = 1, pt = 0, pl = 0;
  isa::DType dtype = isa::DType::kFp32;
  int64_t pad_value = 0;  // LOAD's pad: the lowest value (-inf, or the lowest code)
  uint64_t scratch = 0;   // input scratchpad bytes of the two scratch halves
  int64_t half = 0;       // bytes of each
  int next = 0;           // the half the next window goes to
};

// The layout change of a graph input (NCHW to NHWC; # int8: quantized on its way) done in its conv's loads
// (pre_transpose.h): the conv's LOADs of the NHWC copy x read the NCHW source y channel by channel into the
// tile (# int8: fp32 work rows of the accumulator) and one VEC transpose each makes them pixels.
struct PreTranspose : ReaderMap {  // node: the Transpose's layer
  Range y;                         // the source, dense NCHW: the DRAM it spans ...
  uint64_t y_addr = 0;             // ... and its first element
  int64_t H = 0, W = 0, C = 0;     // the image's rows, columns, channels
  isa::DType y_dtype = isa::DType::kFp32, x_dtype = isa::DType::kFp32;
  // # int8: y fp32, x the conv's codes (quantize_tile_into, as the Transpose's own tile loop converts).
  const quant::QParams* qx = nullptr;
  uint64_t conv_at = 0;    // accumulator bytes of the conversion constants
  uint64_t work_at = 0;    // ... and of the two work halves
  int64_t work_elems = 0;  // fp32 elements of each half
  int next = 0;            // the half the next chunk goes to
};

// A squeeze-and-excitation Mul X * s before a pointwise conv, applied where the conv loads its input
// (pre_scale.h): the conv's LOADs of the product x read X instead, each followed by the Mul's VEC on the tile
// in place with s. x is never written, the Mul emits nothing.
struct PreScale : ReaderMap {            // node: the Mul's layer
  Range in;                              // X: the DRAM it spans (dense, x's layout) ...
  uint64_t in_addr = 0;                  // ... and its first element
  Range scale;                           // s: one value per channel, dense ...
  uint64_t scale_addr = 0;               // ... its first element
  int64_t channels = 0;                  // x's innermost (channel) extent
  isa::DType dtype = isa::DType::kFp32;  // X's and x's type (the activation type, or their codes')
  uint64_t params = 0;                   // accumulator bytes holding s while the conv is lowered
  // # int8: X, s and x codes under the integer scheme, the Mul's two passes (int8.h, ChannelScaleMul): s's
  // triples after its codes, then int32 work rows of `work_elems`.
  bool codes = false;
  int32_t multiplier = 0, shift = 0;  // the Mul's quantized multiplier
  const quant::QParams* x_q = nullptr;
  const quant::QParams* y_q = nullptr;
  std::shared_ptr<ChannelScaleMul> scale_mul;  // made when the conv's lowering begins
  uint64_t work_at = 0;
  int64_t work_elems = 0;
};

// A squeeze-and-excitation Mul whose tile loop also adds its full operand back, the Add after it
// (scaled_residual.h).
struct ScaledResidual {
  int64_t add = -1;    // the Add's layer (-1 = none)
  uint32_t mul = 0;    // the Mul's layer
  int64_t bytes = 0;   // the product's bytes: its write and its read saved
  bool off = false;    // the simulated choice keeps the Add apart (scaled_residual_choose)
  bool done = false;   // the Mul's lowering emitted the fused tile loop
  bool taken = false;  // ... and its code is the program's: the Add emits nothing
};

// A nearest upsampling whose only reader, an Add, reads it as its operand (upsample_add.h).
struct UpsampledOperand {
  int64_t add = -1;        // the Add's layer (-1 = none)
  int64_t resize = -1;     // the Resize's layer
  std::string z;           // the Resize's input, which the Add reads instead
  int64_t sh = 1, sw = 1;  // the factors along H and W
};

// An SE residual y = x + x * s that waits for the top-down Add reading y with an upsampled operand
// (deferred_residual.h): the Mul and its Add emit nothing, the top-down Add's tile loop does their VECs.
struct DeferredResidual {
  int64_t mul = -1;     // the Mul's layer (-1 = none)
  int64_t add = -1;     // its residual Add's layer
  int64_t reader = -1;  // the top-down Add's layer
  std::string x, s;     // the Mul's full operand and its per-channel scale
  int64_t bytes = 0;    // y's bytes (and the product's): their writes and reads saved
  bool done = false;    // the reader's lowering emitted the fused tile loop
};

struct FusionState {
  // ---- on-chip residency (residency.h) ----
  // Bytes at the top of the input scratchpad held for a value kept on chip (no lowering allocates them:
  // Context::capacity(kInput) leaves them out).
  int64_t input_reserved = 0;
  // The value the node being lowered may leave in the scratchpad (residency planner), "" = none.
  std::string keep_output;
  bool keep_imposed = false;  // ... because a mapping file says on_chip=true
  bool keep_in_dram = false;  // ... and it has other readers, which read it in DRAM (OnChipValue::in_dram)
  OnChipValue on_chip;
  std::map<std::string, uint64_t> kept_on_chip;  // values read in place (never in DRAM) -> their SRAM address
  std::map<std::string, int64_t> kept_blocks;    // ... those of them in column blocks -> the block
  // ... those of them padded (OnChipValue::pad) -> elements between consecutive indices of each dim in
  // memory order (HostTensor::strides), their address that of the first real pixel.
  std::map<std::string, std::vector<int64_t>> kept_strides;
  // The padded layout the planner chose for keep_output (its reader a padded conv), pad.w == 0: dense.
  OnChipValue::Padded keep_pad;
  // The residual reader the planner found for keep_output (OnChipValue::residual_reader), -1 = none, and the
  // address it chose for the value (the highest free bytes: residency.h).
  int64_t keep_residual_reader = -1;
  bool keep_reader_input = false;  // ... which reads it as its input (OnChipValue::reader_reads_input)
  bool keep_next_reads = true;
  uint64_t keep_addr = 0;
  int64_t keep_reserved = 0;  // the bytes plan_on_chip added to input_reserved for keep_output
  // The planner's choice for the node being lowered, in one place: the seven keep_* fields above but
  // keep_addr (keep_output "" = nothing kept, the others then at their defaults).
  void set_keep(std::string output = "", bool imposed = false, bool in_dram = false,
                int64_t residual_reader = -1, bool reader_input = false, bool next_reads = true,
                OnChipValue::Padded pad = {}) {
    keep_output = std::move(output);
    keep_imposed = imposed;
    keep_in_dram = in_dram;
    keep_residual_reader = residual_reader;
    keep_reader_input = reader_input;
    keep_next_reads = next_reads;
    keep_pad = pad;
  }
  // A value held in the input scratchpad after its producer's next layer, until the layer that reads it
  // as its residual (residency.h); pending while only its SRAM copy is current or still needed.
  OnChipValue residual;
  // ---- line-buffer fusion (layer_fusion.h) ----
  // A conv -> pool or conv -> depthwise conv pair the conv's lowering may fuse with line-buffer tiling.
  ConvPool* conv_pool = nullptr;
  // Bytes at the top of the accumulator held by a fused reader (a depthwise conv's sums):
  // Context::capacity(kAccumulator) leaves them out.
  int64_t acc_reserved = 0;
  // Set while layer_fusion.h lowers the depthwise reader of a line buffer: the conv lowerings hand the
  // job they built for their node to it instead of mapping it (its result is the lowering's).
  std::function<bool(ConvBands&)> take_conv_job;
  // Set while a line buffer's fused layer emits its project conv's bands (layer_fusion.h): Context::slots
  // hands out the end of each scratchpad the layer's own parity does not take, so that the project conv's
  // tiles and the conv's band tiles do not share slots.
  bool slots_flipped = false;
  // Set while a line buffer's fused layer emits a band of its conv (layer_fusion.h): called by the matrix
  // walk after each output tile's epilogue, so that the reader emits a piece of the band before's depthwise
  // work between the conv's tiles (the vector unit's in-order queue then convolves while the array
  // multiplies, instead of holding the array's next tiles behind the whole band's depthwise conv).
  std::function<void()> after_tile;
  // ---- squeeze-and-excitation groups (se_fusion.h) ----
  // The block's input held from its pool to its Mul; its bytes are the first of input_reserved
  // (input_held of them), below which residency reserves its own.
  HeldValue held;
  int64_t input_held = 0;
  PoolInEpilogue pool_in_epilogue;
  StorePool store_pool;  // an int8 SE pool in its producer conv's STOREs (store_pool.h)
  // ---- a block's layer scale and residual in its project GEMM (project_tail.h) ----
  ProjectTail project_tail;
  // ---- an affine map in its producer's epilogue (post_affine.h) ----
  PostAffine post_affine;
  ScaledResidual scaled_residual;
  UpsampledOperand upsampled;
  std::vector<DeferredResidual> deferred;  // several may wait at once (det: one per level)
  // ---- an affine map and activation in its reader's loads (pre_affine.h) ----
  PreAffine pre_affine;
  // ---- a LayerNorm in its GEMM's loads (pre_norm.h) ----
  PreNorm pre_norm;
  // ---- a max pool on its reader's tiles (pre_pool.h) ----
  PrePool pre_pool;
  // ---- an SE block's channel scale in its project conv's loads (pre_scale.h) ----
  PreScale pre_scale;
  // ---- a graph input's layout change in its conv's loads (pre_transpose.h) ----
  PreTranspose pre_transpose;
  std::set<std::string> unwritten;  // producers' outputs that carried a map: never written anywhere
};

}  // namespace npusim::compiler::backend
