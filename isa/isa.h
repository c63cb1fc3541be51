#pragma once
// The npusim instruction set: the one source of truth for opcodes, fields, their bit layout and
// their meaning. The assembler, the disassembler, the program-file codec, the compiler's codegen
// and the hardware models all read this header; nothing else defines an instruction.
//
// Encoding. An instruction is one, two or three 128-bit words (its opcode decides how many). Bits
// are numbered from 0 = bit 0 of the first word's low 64-bit half; bit b lives in word b / 128.
// Every instruction starts with the common header:
//
//   bits  0..7   opcode
//   bits  8..12  wait    one bit per Queue: pop one token from channel (that queue -> this queue)
//                        before starting; the instruction does not start until every token arrived
//   bits 13..17  signal  one bit per Queue: push one token to channel (this queue -> that queue)
//                        when the instruction has completed
//   bits 18..33  layer   index into Program::layers (the ONNX node this instruction belongs to)
//
// The format-specific fields follow; each opcode's table below gives every field's name, low bit and
// width. Fields are unsigned unless marked signed (two's complement within their width). Words are
// stored little-endian, low 64-bit half first. Unused bits are zero; a decoder rejects set unused
// bits, so every valid word sequence has exactly one meaning.
//
// Synchronisation. The sequencer splits the single instruction stream into per-unit queues in
// program order (Queue). Units run concurrently and synchronise only through token channels: one
// counter per ordered pair of queues (VTA-style push/pop generalised to five queues). A token
// pushed by `signal` is consumed by exactly one later `wait` on the receiving queue. BARRIER waits
// until every queue is empty and every unit idle; HALT ends the program after a BARRIER.
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "isa/instruction_storage.h"

namespace npusim::isa {

// The five instruction queues the sequencer dispatches to, one per unit.
enum class Queue : uint8_t { kLoad = 0, kMatrix = 1, kVector = 2, kStore = 3, kHost = 4 };
inline constexpr int kNumQueues = 5;
inline constexpr std::array<std::string_view, kNumQueues> kQueueNames = {"load", "matrix", "vector", "store",
                                                                         "host"};

enum class Opcode : uint8_t {
  // No effect; occupies the matrix queue for zero cycles. Useful as a pure sync point.
  kNop = 0,
  // DMA DRAM -> SRAM. Reads a strided box of up to 4 dimensions (size0 innermost, contiguous
  // elements) starting at dram_addr (bytes); writes it densely into SRAM buffer `buf` at sram_addr
  // (bytes), with halo padding: dimension 1 gets pad_left/pad_right extra elements, dimension 2
  // pad_top/pad_bottom, filled with pad_value. The dense SRAM box is therefore
  // size0 x (size1+pad_left+pad_right) x (size2+pad_top+pad_bottom) x size3 elements of dtype.
  // dram strides are in elements: element (i0,i1,i2,i3) is at dram_addr + esize*(i0 + i1*stride1 +
  // i2*stride2 + i3*stride3). pad_value is a signed integer for integer dtypes and bf16 bits for
  // floating dtypes.
  // Precisely (arch/datapath): every size must be >= 1 (1 for an unused dimension); strides may be 0
  // (re-reading a row). SRAM element (j0,j1,j2,j3) of the dense box is at sram_addr + esize*(j0 +
  // S0*(j1 + S1*(j2 + S2*j3))) with S0 = size0, S1 = size1+pad_left+pad_right, S2 =
  // size2+pad_top+pad_bottom; it is pad_value when j1 < pad_left, j1 >= pad_left+size1, j2 < pad_top
  // or j2 >= pad_top+size2, else DRAM element (j0, j1-pad_left, j2-pad_top, j3). Integer pad values
  // saturate to the dtype (uint8 pad 300 -> 255); for float dtypes the field's 16-bit pattern is bf16
  // (so a negative bf16 is a negative field value), widened to fp32 and rounded to fp16 if needed.
  // All SRAM addresses of every opcode are byte addresses; DRAM addresses are < 2^40.
  kLoad = 1,
  // DMA SRAM -> DRAM: the reverse of LOAD without padding (pad fields must be zero).
  // Rows are written in box order (i1 fastest, then i2, i3), so where strides make rows overlap in
  // DRAM the later row wins.
  kStore = 2,
  // Matrix unit: load the stationary operand (weights in WS, inputs in IS) of rows x cols elements
  // from `buf` at sram_addr into the array's shadow registers; rows are row_stride elements apart.
  // row_stride=0 means dense (= cols). The operand is the GEMM operand in its natural layout: WS
  // loads B (rows = k <= array rows, cols = n <= array cols), IS loads A (rows = m <= array cols,
  // cols = k <= array rows; for CONV, the explicit im2col matrix oh*ow x r*s*in_c). dtype is the
  // operand's type (B of a uint8 MATMUL is int8). PRELOAD is an error in OS (nothing is stationary).
  kPreload = 3,
  // Matrix unit: C[m x n] (+)= A[m x k] * B[k x n]. A is row-major in the input buffer at a_addr
  // (rows a_stride elements apart), B row-major in the weight buffer at b_addr (rows n apart), C
  // row-major int32/fp32 in the accumulator at c_addr (rows n apart). accumulate=1 adds to C.
  // preloaded=1 takes the stationary operand from the last PRELOAD instead of streaming it.
  // Precisely (arch/datapath/executor.h): dtype is A's type; B is int8 when dtype is uint8 or int16,
  // else dtype; int32 and int64 inputs are an error. a_stride=0 means dense (= k). int8/uint8 inputs
  // accumulate in int32 (wrapping modulo 2^32), int16 inputs in int64 (C has 8-byte elements; wrapping
  // modulo 2^64, which K < 2^41 products never reach), float inputs in fp32 (fp16/bf16 products are exact;
  // with
  // systolic_array.fp16_accumulate_fp32=false every addition rounds to the input precision). Each
  // output adds its products in k order onto C (accumulate=1) or 0, so the result does not depend on
  // the dataflow, the array's row folds of K, or a K split into MATMULs that accumulate in k order.
  // preloaded=1: WS takes B, IS takes A from the stationary register, whose shape and
  // dtype must match; OS is an error. Every m, k, n must be >= 1.
  kMatmul = 4,
  // Matrix unit, implicit im2col: C[oh*ow x n] (+)= conv(A, B). A is an HWC tile of in_h x in_w x
  // in_c elements (halo included) in the input buffer at a_addr; B is [r*s*in_c x n] row-major in
  // the weight buffer; output pixel (y,x) reads A at (y*stride_h + i*dilation_h, x*stride_w +
  // j*dilation_w). The matrix unit times it as a GEMM of M = oh*ow, K = r*s*in_c, N = n.
  // r = kernel_h, s = kernel_w, oh = out_h, ow = out_w. A's pixel (y,x) starts at element
  // (y*in_w + x)*a_stride (a_stride=0 means in_c: dense), its in_c channels consecutive; C's row p
  // starts at element p*c_stride (c_stride=0 means n), its n columns consecutive. A stride wider than
  // the channels lets a grouped conv's blocks read their channels from one tile of every channel and
  // write their columns into one accumulator tile of every output channel (Gemmini's loop_conv_ws
  // in_stride and out_stride). im2col row y*out_w + x, column (i*kernel_w + j)*in_c + ch. Strides and
  // dilations must be >= 1 and the windows must stay inside the tile ((out_h-1)*stride_h +
  // (kernel_h-1)*dilation_h < in_h; likewise w): padding comes from LOAD's halo. Numerics and
  // preloaded as MATMUL, except the order of the additions: each output adds its products
  // channel-major, for ch = 0..in_c-1 its r*s taps in (i, j) order (the array's K index (ch*r + i)*s + j,
  // ONNX's weight order [O][C][kh][kw]; B's row (i*s + j)*in_c + ch feeds it), onto C (accumulate=1) or
  // 0. So a conv reduced over channel chunks, one CONV per chunk accumulating onto the one before, adds
  // in one order whatever the chunk, and as a MATMUL over an im2col matrix in ONNX's column order; a K
  // longer than the array's rows is folded, each row fold continuing the running sums the fold before
  // left (they enter the top of each column), so folds never change a sum either. Integer sums are exact
  // in any order.
  kConv = 5,
  // Vector unit: dst = vop(src1, src2, imm) over a d2 x d1 x d0 box (d0 innermost). See VecOp.
  // dtype is the type of src1 and src2, dtype_out that of dst; operands are dense; dst may overlap
  // the sources. Integer/float paths, rounding and NaN rules: arch/datapath/vector_ops.h.
  kVec = 6,
  // Host CPU: run host op `host_op` (an entry of Program::host_ops, or an anonymous op of cpu_ops
  // operations when the program has none) after sending in_bytes over the host link; return
  // out_bytes.
  kHostCall = 7,
  // Wait until every queue is empty and every unit is idle.
  kBarrier = 8,
  // End of program (implies BARRIER).
  kHalt = 9,
};
inline constexpr int kNumOpcodes = 10;

// Element types of tensors in DRAM and SRAM. int16 is an activation type (int16 x int8 MACs, at
// systolic_array.int16_rate); int64 is the accumulator type of int16 MATMUL/CONV (a sum of K products of
// up to 2^15 * 2^7 = 2^22 overflows int32 from K = 512 on, so the array accumulates int16 operands in
// 64 bits, as TFLite's 16x8 kernels do in int64 and Ethos-U's in 48-bit accumulators).
enum class DType : uint8_t {
  kInt8 = 0,
  kUint8 = 1,
  kInt32 = 2,
  kFp16 = 3,
  kBf16 = 4,
  kFp32 = 5,
  kInt16 = 6,
  kInt64 = 7
};
inline constexpr int kNumDTypes = 8;
inline constexpr std::array<std::string_view, kNumDTypes> kDTypeNames = {"int8", "uint8", "int32", "fp16",
                                                                         "bf16", "fp32",  "int16", "int64"};
constexpr int dtype_bytes(DType t) {
  switch (t) {
    case DType::kInt8:
    case DType::kUint8:
      return 1;
    case DType::kFp16:
    case DType::kBf16:
    case DType::kInt16:
      return 2;
    case DType::kInt32:
    case DType::kFp32:
      return 4;
    case DType::kInt64:
      return 8;
  }
  return 1;
}

// On-chip scratchpads.
enum class Buffer : uint8_t { kInput = 0, kWeight = 1, kAccumulator = 2 };
inline constexpr int kNumBuffers = 3;
inline constexpr std::array<std::string_view, kNumBuffers> kBufferNames = {"input", "weight", "acc"};

// Vector-unit operations. Unless noted: elementwise over the d2 x d1 x d0 box, src2 broadcast per
// `bcast` (none: same box; scalar: one element; row: one d0-vector reused for every row; col: one
// element per row), result converted to the destination dtype.
enum class VecOp : uint8_t {
  kCopy = 0,       // dst = src1 (with dtype conversion)
  kAdd = 1,        // dst = src1 + src2
  kSub = 2,        // dst = src1 - src2
  kMul = 3,        // dst = src1 * src2
  kDiv = 4,        // dst = src1 / src2
  kMax = 5,        // dst = max(src1, src2)
  kMin = 6,        // dst = min(src1, src2)
  kPow = 7,        // dst = src1 ^ src2
  kRelu = 8,       // dst = max(src1, 0)
  kLeakyRelu = 9,  // dst = src1 < 0 ? alpha * src1 : src1; alpha = imm0 as fp32 bits
  kClip = 10,      // dst = clamp(src1, imm0, imm1) (fp32 bits)
  kSigmoid = 11,   // lookup-table activations
  kTanh = 12,
  kGelu = 13,
  kErf = 14,
  kExp = 15,
  kSqrt = 16,
  kRsqrt = 17,
  kHardSigmoid = 18,  // max(0, min(1, alpha*x + beta)); alpha = imm0, beta = imm1 (fp32 bits)
  kHardSwish = 19,    // x * hardsigmoid(x) with alpha 1/6, beta 1/2
  kRequantize =
      20,  // int32 -> int8: sat(((x * imm0) >> imm1 rounded) + zero_point), gemmlowp semantics
           // (exact formula: arch/datapath/numerics.h; imm2 = zero point; imm1 < 0 shifts
           // left; dtype_out may be any integer type). dtype int64 (int16 layers' sums): the
           // same two roundings in 64 bits (isa/numerics.h requantize_unsaturated_64). bcast != none:
           // per-channel, src2 holds int32 (multiplier, shift) pairs broadcast per bcast and imm0 = imm1 = 0.
  kMaxPool = 21,    // d2 x d1 x d0 = H x W x C input; window win_h x win_w, stride str_h x str_w
  kAvgPool = 22,    // output (H-win_h)/str_h+1 x (W-win_w)/str_w+1 x C; avg divides by win_h*win_w
  kReduceSum = 23,  // reduce along d0: dst has d2 x d1 elements
  kReduceMax = 24,
  kReduceMean = 25,
  kTranspose = 26,  // swap d0 and d1 of every d2-slice
  kAbs = 27,
  kNeg = 28,
  kRecip = 29,
  kDwConv = 30,  // depthwise conv: d2 x d1 x d0 = H x W x C input tile (halo included) in src1; src2 holds
                 // the weights [win_h][win_w][C] (int8 for uint8/int8 inputs, else dtype); stride
                 // str_h x str_w, dilation imm0 x imm1 (0 = 1); dst = [OH][OW][C] sums in int32 (integer
                 // inputs) or fp32 (dtype_out must be that type), OH = (H - (win_h-1)*imm0 - 1)/str_h + 1.
                 // Each output adds its products in (i, j) window order onto 0, as CONV does.
  kOutput = 31,  // the output stage: a per-channel bias, the scaling and a clamp in one pass (as NVDLA's
                 // SDP or an Ethos-U output unit apply them on the way out of the accumulators). bcast
                 // (row, col or scalar, not none) picks each element's record in src2. dtype int32 (or
                 // narrower integer codes, read as int32): records are int32 triples (bias, multiplier,
                 // shift); y = clip(requantize(sat32(x + bias))) with zero point imm2, exactly ADD,
                 // per-channel REQUANTIZE to the integer dtype_out, then CLIP to [imm0, imm1] (fp32 bits;
                 // -inf and +inf clip nothing, so int32 values stay exact). dtype int64: the same records,
                 // sat64 and the 64-bit requantize. Float dtype: records are fp32 biases; y = clip(x + bias,
                 // imm0, imm1) in fp32 (CLIP's rule) rounded to the float dtype_out; imm2 = 0.
  kLut = 32,     // table lookup on codes: dst = table[src1 - dtype_min(dtype)]; dtype and dtype_out int8 or
                 // uint8, src2 the 256-entry table of dtype_out codes (entry 0 for the smallest code), bcast
                 // none. One lookup per element per lane: a nonlinear activation of int8 codes in one pass
                 // (Ethos-U's LUT activations); compiler/quant/emulate.h builds the tables. dtype int16
                 // (a 16-bit-input table, as Ethos-U's int16 LUT and TFLite's int16 activations read a finer
                 // code): dst = table[src1 - imm0], src2 the imm1-entry table (1 <= imm1 <= kLutMaxEntries),
                 // every src1 in [imm0, imm0 + imm1) (the output stage before it clamps them there).
};
inline constexpr int kNumVecOps = 33;
inline constexpr int kLutEntries = 256;       // a LUT's table: one entry per 8-bit code
inline constexpr int kLutMaxEntries = 65536;  // an int16-input LUT's table: at most one entry per code
inline constexpr std::array<std::string_view, kNumVecOps> kVecOpNames = {
    "copy",     "add",      "sub",        "mul",        "div",          "max",        "min",
    "pow",      "relu",     "leaky_relu", "clip",       "sigmoid",      "tanh",       "gelu",
    "erf",      "exp",      "sqrt",       "rsqrt",      "hard_sigmoid", "hard_swish", "requantize",
    "max_pool", "avg_pool", "reduce_sum", "reduce_max", "reduce_mean",  "transpose",  "abs",
    "neg",      "recip",    "dwconv",     "output",     "lut"};

enum class Bcast : uint8_t { kNone = 0, kScalar = 1, kRow = 2, kCol = 3 };
inline constexpr int kNumBcasts = 4;
inline constexpr std::array<std::string_view, kNumBcasts> kBcastNames = {"none", "scalar", "row", "col"};

// Every field any instruction may carry. Instruction stores them in one array indexed by Field.
enum class Field : uint8_t {
  kWait,
  kSignal,
  kLayer,
  // DMA
  kDtype,
  kBuf,
  kDramAddr,
  kSramAddr,
  kSize0,
  kSize1,
  kSize2,
  kSize3,
  kStride1,
  kStride2,
  kStride3,
  kPadTop,
  kPadBottom,
  kPadLeft,
  kPadRight,
  kPadValue,
  // matrix
  kRows,
  kCols,
  kRowStride,
  kAAddr,
  kAStride,
  kBAddr,
  kCAddr,
  kM,
  kK,
  kN,
  kAccumulate,
  kPreloaded,
  kInH,
  kInW,
  kInC,
  kOutH,
  kOutW,
  kKernelH,
  kKernelW,
  kStrideH,
  kStrideW,
  kDilationH,
  kDilationW,
  kCStride,
  // vector
  kVop,
  kDtypeOut,
  kSrc1Buf,
  kSrc1Addr,
  kSrc2Buf,
  kSrc2Addr,
  kDstBuf,
  kDstAddr,
  kD0,
  kD1,
  kD2,
  kBcast,
  kImm0,
  kImm1,
  kImm2,
  kWinH,
  kWinW,
  kStrH,
  kStrW,
  // host
  kHostOp,
  kInBytes,
  kOutBytes,
  kCpuOps,
  kCount
};
inline constexpr int kNumFields = static_cast<int>(Field::kCount);

// How a field's value is written in assembly.
enum class FieldKind : uint8_t { kUnsigned, kSigned, kQueueMask, kDType, kBuffer, kVecOp, kBcast, kLayer };

// One field of one format: where its bits are.
struct FieldSpec {
  Field field;
  std::string_view name;  // assembly keyword
  uint16_t lo;            // low bit
  uint8_t width;          // bits
  FieldKind kind;
};

// The layout of one opcode's instructions.
struct Format {
  Opcode opcode;
  std::string_view mnemonic;
  Queue queue;  // the unit that executes it (BARRIER and HALT: handled by the sequencer)
  uint8_t words;
  const FieldSpec* fields;  // the fields after the common header (kHeader), in bit order
  uint8_t num_fields;
};

inline constexpr int kWordBits = 128;
inline constexpr int kMaxWords = 3;

namespace layout {
using K = FieldKind;
// The common header every instruction starts with.
inline constexpr FieldSpec kHeader[] = {
    {Field::kWait, "wait", 8, 5, K::kQueueMask},
    {Field::kSignal, "signal", 13, 5, K::kQueueMask},
    {Field::kLayer, "layer", 18, 16, K::kLayer},
};
inline constexpr int kHeaderBits = 34;
inline constexpr FieldSpec kDma[] = {
    {Field::kDtype, "dtype", 34, 3, K::kDType},
    {Field::kBuf, "buf", 37, 2, K::kBuffer},
    {Field::kDramAddr, "dram", 39, 40, K::kUnsigned},
    {Field::kSramAddr, "sram", 79, 32, K::kUnsigned},
    {Field::kSize0, "size0", 111, 16, K::kUnsigned},
    {Field::kSize1, "size1", 127, 16, K::kUnsigned},
    {Field::kSize2, "size2", 143, 16, K::kUnsigned},
    {Field::kSize3, "size3", 159, 16, K::kUnsigned},
    {Field::kStride1, "stride1", 175, 32, K::kUnsigned},
    {Field::kStride2, "stride2", 207, 32, K::kUnsigned},
    {Field::kStride3, "stride3", 239, 32, K::kUnsigned},
    {Field::kPadTop, "pad_top", 271, 8, K::kUnsigned},
    {Field::kPadBottom, "pad_bottom", 279, 8, K::kUnsigned},
    {Field::kPadLeft, "pad_left", 287, 8, K::kUnsigned},
    {Field::kPadRight, "pad_right", 295, 8, K::kUnsigned},
    {Field::kPadValue, "pad_value", 303, 16, K::kSigned},
};
inline constexpr FieldSpec kPreload[] = {
    {Field::kDtype, "dtype", 34, 3, K::kDType},
    {Field::kBuf, "buf", 37, 2, K::kBuffer},
    {Field::kSramAddr, "sram", 39, 32, K::kUnsigned},
    {Field::kRows, "rows", 71, 16, K::kUnsigned},
    {Field::kCols, "cols", 87, 16, K::kUnsigned},
    {Field::kRowStride, "row_stride", 103, 16, K::kUnsigned},
};
inline constexpr FieldSpec kMatmul[] = {
    {Field::kDtype, "dtype", 34, 3, K::kDType},
    {Field::kAAddr, "a", 37, 32, K::kUnsigned},
    {Field::kAStride, "a_stride", 69, 16, K::kUnsigned},
    {Field::kBAddr, "b", 85, 32, K::kUnsigned},
    {Field::kCAddr, "c", 117, 32, K::kUnsigned},
    {Field::kM, "m", 149, 16, K::kUnsigned},
    {Field::kK, "k", 165, 16, K::kUnsigned},
    {Field::kN, "n", 181, 16, K::kUnsigned},
    {Field::kAccumulate, "acc", 197, 1, K::kUnsigned},
    {Field::kPreloaded, "preloaded", 198, 1, K::kUnsigned},
};
inline constexpr FieldSpec kConv[] = {
    {Field::kDtype, "dtype", 34, 3, K::kDType},
    {Field::kAAddr, "a", 37, 32, K::kUnsigned},
    {Field::kBAddr, "b", 69, 32, K::kUnsigned},
    {Field::kCAddr, "c", 101, 32, K::kUnsigned},
    {Field::kInH, "in_h", 133, 16, K::kUnsigned},
    {Field::kInW, "in_w", 149, 16, K::kUnsigned},
    {Field::kInC, "in_c", 165, 16, K::kUnsigned},
    {Field::kOutH, "out_h", 181, 16, K::kUnsigned},
    {Field::kOutW, "out_w", 197, 16, K::kUnsigned},
    {Field::kN, "n", 213, 16, K::kUnsigned},
    {Field::kKernelH, "kernel_h", 229, 8, K::kUnsigned},
    {Field::kKernelW, "kernel_w", 237, 8, K::kUnsigned},
    {Field::kStrideH, "stride_h", 245, 8, K::kUnsigned},
    {Field::kStrideW, "stride_w", 253, 8, K::kUnsigned},
    {Field::kDilationH, "dilation_h", 261, 8, K::kUnsigned},
    {Field::kDilationW, "dilation_w", 269, 8, K::kUnsigned},
    {Field::kAccumulate, "acc", 277, 1, K::kUnsigned},
    {Field::kPreloaded, "preloaded", 278, 1, K::kUnsigned},
    {Field::kAStride, "a_stride", 279, 16, K::kUnsigned},
    {Field::kCStride, "c_stride", 295, 16, K::kUnsigned},
};
inline constexpr FieldSpec kVec[] = {
    {Field::kVop, "op", 34, 6, K::kVecOp},
    {Field::kDtype, "dtype", 40, 3, K::kDType},
    {Field::kDtypeOut, "dtype_out", 43, 3, K::kDType},
    {Field::kSrc1Buf, "src1_buf", 46, 2, K::kBuffer},
    {Field::kSrc1Addr, "src1", 48, 32, K::kUnsigned},
    {Field::kSrc2Buf, "src2_buf", 80, 2, K::kBuffer},
    {Field::kSrc2Addr, "src2", 82, 32, K::kUnsigned},
    {Field::kDstBuf, "dst_buf", 114, 2, K::kBuffer},
    {Field::kDstAddr, "dst", 116, 32, K::kUnsigned},
    {Field::kD0, "d0", 148, 16, K::kUnsigned},
    {Field::kD1, "d1", 164, 16, K::kUnsigned},
    {Field::kD2, "d2", 180, 16, K::kUnsigned},
    {Field::kBcast, "bcast", 196, 2, K::kBcast},
    {Field::kImm0, "imm0", 198, 32, K::kSigned},
    {Field::kImm1, "imm1", 230, 32, K::kSigned},
    {Field::kImm2, "imm2", 262, 32, K::kSigned},
    {Field::kWinH, "win_h", 294, 8, K::kUnsigned},
    {Field::kWinW, "win_w", 302, 8, K::kUnsigned},
    {Field::kStrH, "str_h", 310, 8, K::kUnsigned},
    {Field::kStrW, "str_w", 318, 8, K::kUnsigned},
};
inline constexpr FieldSpec kHostCall[] = {
    {Field::kHostOp, "host_op", 34, 16, K::kUnsigned},
    {Field::kInBytes, "in_bytes", 50, 40, K::kUnsigned},
    {Field::kOutBytes, "out_bytes", 90, 40, K::kUnsigned},
    {Field::kCpuOps, "cpu_ops", 130, 48, K::kUnsigned},
};

constexpr Format make(Opcode op, std::string_view mnemonic, Queue q, uint8_t words) {
  return Format{op, mnemonic, q, words, nullptr, 0};
}
template <size_t N>
constexpr Format make(Opcode op, std::string_view mnemonic, Queue q, uint8_t words, const FieldSpec (&f)[N]) {
  return Format{op, mnemonic, q, words, f, static_cast<uint8_t>(N)};
}

// True when the fields are packed back to back after the header with no overlap and fit in `words`.
constexpr bool well_formed(const Format& fmt) {
  int next = kHeaderBits;
  for (int i = 0; i < fmt.num_fields; ++i) {
    if (fmt.fields[i].lo != next || fmt.fields[i].width == 0 || fmt.fields[i].width > 63) return false;
    next += fmt.fields[i].width;
  }
  return next <= fmt.words * kWordBits && fmt.words <= kMaxWords;
}
}  // namespace layout

// The format table, indexed by opcode value.
inline constexpr std::array<Format, kNumOpcodes> kFormats = {
    layout::make(Opcode::kNop, "NOP", Queue::kMatrix, 1),
    layout::make(Opcode::kLoad, "LOAD", Queue::kLoad, 3, layout::kDma),
    layout::make(Opcode::kStore, "STORE", Queue::kStore, 3, layout::kDma),
    layout::make(Opcode::kPreload, "PRELOAD", Queue::kMatrix, 1, layout::kPreload),
    layout::make(Opcode::kMatmul, "MATMUL", Queue::kMatrix, 2, layout::kMatmul),
    layout::make(Opcode::kConv, "CONV", Queue::kMatrix, 3, layout::kConv),
    layout::make(Opcode::kVec, "VEC", Queue::kVector, 3, layout::kVec),
    layout::make(Opcode::kHostCall, "HOSTCALL", Queue::kHost, 2, layout::kHostCall),
    layout::make(Opcode::kBarrier, "BARRIER", Queue::kMatrix, 1),
    layout::make(Opcode::kHalt, "HALT", Queue::kMatrix, 1),
};

constexpr bool all_formats_well_formed() {
  for (size_t i = 0; i < kFormats.size(); ++i) {
    if (static_cast<size_t>(kFormats[i].opcode) != i || !layout::well_formed(kFormats[i])) return false;
  }
  return true;
}
static_assert(all_formats_well_formed(), "an instruction format overlaps, leaves a gap or does not fit");

inline const Format& format(Opcode op) { return kFormats[static_cast<size_t>(op)]; }
std::optional<Opcode> opcode_from_mnemonic(std::string_view mnemonic);

// ---- in-memory storage of a decoded Instruction (not the encoding) ----------------------------
// The byte slots every field gets in an Instruction's 64 bytes are laid out by isa/instruction_storage.h
// from the format table above; the layout is checked here, at compile time.
namespace storage {
static_assert(kNumFields - kHeaderFields <= 64, "one presence bit per non-header field");
// Largest formats first: each field of a format at the lowest offset free among that format's fields.
inline constexpr Opcode kPlacementOrder[] = {Opcode::kVec,    Opcode::kLoad,    Opcode::kConv,
                                             Opcode::kMatmul, Opcode::kPreload, Opcode::kHostCall,
                                             Opcode::kStore};
inline constexpr SlotTable<kNumFields, kNumOpcodes> kSlots =
    make_slots<kNumFields, kNumOpcodes>(layout::kHeader, kFormats, kPlacementOrder);
static_assert(kSlots.end <= kDataBytes, "the fields of some format do not fit an Instruction's bytes");
static_assert(formats_do_not_share_bytes(kSlots, kFormats), "two fields of one format share storage bytes");
}  // namespace storage

// A decoded instruction: its opcode and the value of every field (absent fields are zero). Any
// int64 value can be stored in any field (validate() says whether it is encodable); two instructions
// are equal when their opcodes and all field values are.
struct Instruction {
  Opcode opcode = Opcode::kNop;

  Instruction() = default;
  Instruction(const Instruction& o) { *this = o; }
  Instruction& operator=(const Instruction& o) {
    if (this == &o) return *this;
    opcode = o.opcode;
    std::copy(o.raw_, o.raw_ + sizeof(raw_), raw_);
    wide_.reset(o.wide_ ? new std::array<int64_t, kNumFields>(*o.wide_) : nullptr);
    return *this;
  }
  Instruction(Instruction&&) noexcept = default;
  Instruction& operator=(Instruction&&) noexcept = default;

  // Always inlined: every hot caller names a constant field, for which the slot folds to constants (a
  // presence-bit test, one load, two shifts); left to itself GCC splits get() and looks the slot up
  // out of line, which was 9% of the simulation core's host instructions (docs/performance.md).
  [[gnu::always_inline]] int64_t get(Field x) const {
    const int i = static_cast<int>(x);
    if (wide_) return (*wide_)[i];
    const storage::Slot& s = storage::kSlots.slot[i];
    if (s.bit >= 0 && !((present() >> s.bit) & 1)) return 0;
    // One unaligned 8-byte load (a slot starts at most 47 bytes in, raw_ has 55), then the slot's
    // bytes, sign-extended for signed fields.
    uint64_t raw;
    std::memcpy(&raw, raw_ + s.offset, sizeof raw);
    const int shift = 64 - 8 * s.bytes;
    raw <<= shift;
    return s.is_signed ? static_cast<int64_t>(raw) >> shift : static_cast<int64_t>(raw >> shift);
  }
  Instruction& set(Field x, int64_t v) {
    const int i = static_cast<int>(x);
    if (wide_) {
      (*wide_)[i] = v;
      return *this;
    }
    const storage::Slot& s = storage::kSlots.slot[i];
    if (s.bit < 0) {
      if (!fits_slot(s, v)) return widen(i, v);
      store(s, v);
      return *this;
    }
    const uint64_t bit = uint64_t{1} << s.bit;
    const uint64_t p = present();
    if (v == 0) {
      if (p & bit) {
        store(s, 0);
        set_present(p & ~bit);
      }
      return *this;
    }
    if (!fits_slot(s, v) || (p & storage::kSlots.overlap[i])) return widen(i, v);
    store(s, v);
    set_present(p | bit);
    return *this;
  }
  Queue queue() const { return format(opcode).queue; }
  bool waits_on(Queue q) const { return (get(Field::kWait) >> static_cast<int>(q)) & 1; }
  bool signals(Queue q) const { return (get(Field::kSignal) >> static_cast<int>(q)) & 1; }
  uint32_t layer() const { return static_cast<uint32_t>(get(Field::kLayer)); }
  bool operator==(const Instruction& o) const;
  bool operator!=(const Instruction& o) const { return !(*this == o); }

  // True when every set field is one of the opcode's and fits its storage slot: the common case,
  // in which validate() only has to range-check the format's fields.
  bool compact_and_in_format() const {
    return !wide_ && static_cast<int>(opcode) < kNumOpcodes &&
           (present() & ~storage::kSlots.in_format[static_cast<size_t>(opcode)]) == 0;
  }

 private:
  static bool fits_slot(const storage::Slot& s, int64_t v) {
    const int bits = 8 * s.bytes;
    if (s.is_signed) return v >= -(int64_t{1} << (bits - 1)) && v < (int64_t{1} << (bits - 1));
    return v >= 0 && v < (int64_t{1} << bits);
  }
  void store(const storage::Slot& s, int64_t v) {
    const auto raw = static_cast<uint64_t>(v);
    for (int b = 0; b < s.bytes; ++b) raw_[s.offset + b] = static_cast<uint8_t>(raw >> (8 * b));
  }
  uint64_t present() const {
    uint64_t p;
    std::memcpy(&p, raw_ + storage::kDataBytes, sizeof p);
    return p;
  }
  void set_present(uint64_t p) { std::memcpy(raw_ + storage::kDataBytes, &p, sizeof p); }
  // Moves to the plain array (kept from then on) and stores v in field i.
  Instruction& widen(int i, int64_t v);

  // The field bytes, then the presence bits (a little-endian uint64, unaligned).
  uint8_t raw_[storage::kDataBytes + 8] = {};
  std::unique_ptr<std::array<int64_t, kNumFields>> wide_;
};
static_assert(sizeof(void*) != 8 || sizeof(Instruction) == 64, "an Instruction is one cache line");

// Raised for an instruction that cannot be encoded or words that do not decode.
class EncodeError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Checks that every field of `ins` fits its width and that fields not in its format are zero;
// returns an empty string when valid, else one sentence naming the field.
std::string validate(const Instruction& ins);

// Appends the encoded words (2 x uint64 per 128-bit word, low half first). Throws EncodeError.
void encode(const Instruction& ins, std::vector<uint64_t>& out);

// Decodes one instruction from `words` starting at `pos` (in uint64 units); advances pos.
// Throws EncodeError with the reason on an unknown opcode, truncation or set unused bits.
Instruction decode(const std::vector<uint64_t>& words, size_t& pos);

}  // namespace npusim::isa
