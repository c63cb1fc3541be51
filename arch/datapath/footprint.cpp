#include "arch/datapath/footprint.h"

#include <fmt/format.h>

#include "arch/datapath/error.h"
#include "arch/datapath/numerics.h"
#include "arch/datapath/state.h"

namespace npusim::arch::datapath {

using isa::Bcast;
using isa::Buffer;
using isa::DType;
using isa::Field;
using isa::Instruction;
using isa::Opcode;
using isa::VecOp;

std::string describe(const Instruction& ins) {
  const auto op = static_cast<size_t>(ins.opcode);
  std::string s =
      op < isa::kFormats.size() ? std::string(isa::kFormats[op].mnemonic) : fmt::format("opcode {}", op);
  if (ins.opcode == Opcode::kVec) {
    const auto v = static_cast<size_t>(ins.get(Field::kVop));
    s += v < isa::kVecOpNames.size() ? " " + std::string(isa::kVecOpNames[v]) : fmt::format(" op {}", v);
  }
  return fmt::format("{} (layer {})", s, ins.layer());
}

void fail(const Instruction& ins, const std::string& msg) {
  throw DatapathError(fmt::format("{}: {}", describe(ins), msg));
}

namespace {

[[noreturn, gnu::cold, gnu::noinline]] void fail_field(const Instruction& ins, const char* name, int64_t v,
                                                       const char* what) {
  fail(ins, fmt::format("{}={}{}", name, v, what));
}

int64_t field(const Instruction& ins, Field f) { return ins.get(f); }

inline DType dtype_field(const Instruction& ins, Field f, const char* name) {
  const int64_t v = ins.get(f);
  if (v < 0 || v >= isa::kNumDTypes) fail_field(ins, name, v, " is not a dtype");
  return static_cast<DType>(v);
}

inline Buffer buffer_field(const Instruction& ins, Field f, const char* name) {
  const int64_t v = ins.get(f);
  if (v < 0 || v >= isa::kNumBuffers) fail_field(ins, name, v, " is not a buffer");
  return static_cast<Buffer>(v);
}

// Every listed field must be >= 1.
inline void require_positive(const Instruction& ins,
                             std::initializer_list<std::pair<Field, const char*>> fields) {
  for (const auto& [f, name] : fields) {
    const int64_t v = ins.get(f);
    if (v < 1) fail_field(ins, name, v, "; it must be at least 1 (use 1 for an unused dimension)");
  }
}

std::string_view dtype_name(DType t) { return isa::kDTypeNames[static_cast<size_t>(t)]; }

void require_mac_dtype(const Instruction& ins, DType t, const isa::NpuConfig& config) {
  if (t == DType::kInt32 || t == DType::kInt64) {
    fail(ins,
         fmt::format("the array has no {} multipliers (dtype must be int8, uint8, int16, fp16, bf16 or fp32)",
                     dtype_name(t)));
  }
  if (config.systolic_array.rate(t) <= 0) {
    fail(ins, fmt::format("the array does not support {} (systolic_array.{}_rate = 0)", dtype_name(t),
                          dtype_name(t)));
  }
}

// The ranges of one instruction, built without allocating (the pre-run check visits every
// instruction of the program); footprint() copies them into a Footprint.
struct Ranges {
  SramRange sram[4];  // MATMUL/CONV: A, B, C read, C write
  DramRange dram[1];
  int num_sram = 0;
  int num_dram = 0;
};

void add_sram(Ranges& fp, Buffer b, uint64_t begin, uint64_t bytes, Access a) {
  fp.sram[fp.num_sram++] = SramRange{b, begin, begin + bytes, a};
}

// The DRAM hull of a LOAD/STORE box (strides are unsigned, so the first element is the lowest).
DramRange dma_dram_hull(const Instruction& ins, DType t, Access a) {
  const uint64_t es = u(isa::dtype_bytes(t));
  const uint64_t last = u(field(ins, Field::kSize0) - 1) +
                        u(field(ins, Field::kSize1) - 1) * u(field(ins, Field::kStride1)) +
                        u(field(ins, Field::kSize2) - 1) * u(field(ins, Field::kStride2)) +
                        u(field(ins, Field::kSize3) - 1) * u(field(ins, Field::kStride3));
  const uint64_t begin = u(field(ins, Field::kDramAddr));
  const uint64_t end = begin + (last + 1) * es;
  if (end > DramImage::kAddressBytes) {
    fail(ins, fmt::format("DRAM bytes [{:#x}, {:#x}) leave the 40-bit DRAM address space", begin, end));
  }
  return DramRange{begin, end, a};
}

void dma(const Instruction& ins, Ranges& fp) {
  const DType t = dtype_field(ins, Field::kDtype, "dtype");
  const Buffer b = buffer_field(ins, Field::kBuf, "buf");
  require_positive(ins, {{Field::kSize0, "size0"},
                         {Field::kSize1, "size1"},
                         {Field::kSize2, "size2"},
                         {Field::kSize3, "size3"}});
  const uint64_t es = u(isa::dtype_bytes(t));
  const bool load = ins.opcode == Opcode::kLoad;
  const int64_t pt = field(ins, Field::kPadTop), pb = field(ins, Field::kPadBottom);
  const int64_t pl = field(ins, Field::kPadLeft), pr = field(ins, Field::kPadRight);
  if (!load && (pt | pb | pl | pr | field(ins, Field::kPadValue)) != 0) {
    fail(ins, "STORE has no padding: pad_top, pad_bottom, pad_left, pad_right and pad_value must be 0");
  }
  const uint64_t elems = u(field(ins, Field::kSize0)) * u(field(ins, Field::kSize1) + pl + pr) *
                         u(field(ins, Field::kSize2) + pt + pb) * u(field(ins, Field::kSize3));
  const DramRange d = dma_dram_hull(ins, t, load ? Access::kRead : Access::kWrite);
  fp.dram[fp.num_dram++] = d;
  add_sram(fp, b, u(field(ins, Field::kSramAddr)), elems * es, load ? Access::kWrite : Access::kRead);
}

void preload(const Instruction& ins, const isa::NpuConfig& config, Ranges& fp) {
  const DType t = dtype_field(ins, Field::kDtype, "dtype");
  const Buffer b = buffer_field(ins, Field::kBuf, "buf");
  require_mac_dtype(ins, t, config);
  require_positive(ins, {{Field::kRows, "rows"}, {Field::kCols, "cols"}});
  const int64_t rows = field(ins, Field::kRows), cols = field(ins, Field::kCols);
  const int64_t stride = field(ins, Field::kRowStride) == 0 ? cols : field(ins, Field::kRowStride);
  if (stride < cols) fail(ins, fmt::format("row_stride={} is less than cols={}", stride, cols));
  const auto& sa = config.systolic_array;
  switch (sa.dataflow) {
    case isa::Dataflow::kWs:
      if (rows > sa.rows || cols > sa.cols) {
        fail(ins, fmt::format(
                      "a {}x{} weight tile does not fit the {}x{} array (weight-stationary holds k <= rows, "
                      "n <= cols)",
                      rows, cols, sa.rows, sa.cols));
      }
      break;
    case isa::Dataflow::kIs:
      if (rows > sa.cols || cols > sa.rows) {
        fail(ins,
             fmt::format("a {}x{} input tile does not fit the {}x{} array (input-stationary holds m <= cols, "
                         "k <= rows)",
                         rows, cols, sa.rows, sa.cols));
      }
      break;
    case isa::Dataflow::kOs:
      fail(ins, "the output-stationary dataflow streams both operands; there is nothing to preload");
  }
  const uint64_t es = u(isa::dtype_bytes(t));
  add_sram(fp, b, u(field(ins, Field::kSramAddr)), (u(rows - 1) * u(stride) + u(cols)) * es, Access::kRead);
}

void matrix(const Instruction& ins, const isa::NpuConfig& config, Ranges& fp) {
  const DType t = dtype_field(ins, Field::kDtype, "dtype");
  require_mac_dtype(ins, t, config);
  if (field(ins, Field::kPreloaded) && config.systolic_array.dataflow == isa::Dataflow::kOs) {
    fail(ins, "preloaded=1 but the output-stationary dataflow has no stationary operand");
  }
  const uint64_t es = u(isa::dtype_bytes(t));
  const uint64_t wes = u(isa::dtype_bytes(weight_dtype(t)));
  int64_t m, k, n;
  int64_t c_pitch = 0;  // elements between rows of C (CONV's c_stride; MATMUL's are n apart)
  uint64_t a_bytes;
  if (ins.opcode == Opcode::kMatmul) {
    require_positive(ins, {{Field::kM, "m"}, {Field::kK, "k"}, {Field::kN, "n"}});
    m = field(ins, Field::kM);
    k = field(ins, Field::kK);
    n = field(ins, Field::kN);
    const int64_t stride = field(ins, Field::kAStride) == 0 ? k : field(ins, Field::kAStride);
    if (stride < k) fail(ins, fmt::format("a_stride={} is less than k={}", stride, k));
    a_bytes = (u(m - 1) * u(stride) + u(k)) * es;
  } else {
    require_positive(ins, {{Field::kInH, "in_h"},
                           {Field::kInW, "in_w"},
                           {Field::kInC, "in_c"},
                           {Field::kOutH, "out_h"},
                           {Field::kOutW, "out_w"},
                           {Field::kN, "n"},
                           {Field::kKernelH, "kernel_h"},
                           {Field::kKernelW, "kernel_w"},
                           {Field::kStrideH, "stride_h"},
                           {Field::kStrideW, "stride_w"},
                           {Field::kDilationH, "dilation_h"},
                           {Field::kDilationW, "dilation_w"}});
    const int64_t reach_h = (field(ins, Field::kOutH) - 1) * field(ins, Field::kStrideH) +
                            (field(ins, Field::kKernelH) - 1) * field(ins, Field::kDilationH) + 1;
    const int64_t reach_w = (field(ins, Field::kOutW) - 1) * field(ins, Field::kStrideW) +
                            (field(ins, Field::kKernelW) - 1) * field(ins, Field::kDilationW) + 1;
    if (reach_h > field(ins, Field::kInH) || reach_w > field(ins, Field::kInW)) {
      fail(ins,
           fmt::format("out {}x{} with kernel {}x{}, stride {}x{}, dilation {}x{} reads {}x{} input pixels "
                       "but the tile is {}x{} (include the halo in in_h/in_w)",
                       field(ins, Field::kOutH), field(ins, Field::kOutW), field(ins, Field::kKernelH),
                       field(ins, Field::kKernelW), field(ins, Field::kStrideH), field(ins, Field::kStrideW),
                       field(ins, Field::kDilationH), field(ins, Field::kDilationW), reach_h, reach_w,
                       field(ins, Field::kInH), field(ins, Field::kInW)));
    }
    m = field(ins, Field::kOutH) * field(ins, Field::kOutW);
    k = field(ins, Field::kKernelH) * field(ins, Field::kKernelW) * field(ins, Field::kInC);
    n = field(ins, Field::kN);
    const int64_t in_c = field(ins, Field::kInC);
    const int64_t a_pitch = field(ins, Field::kAStride) == 0 ? in_c : field(ins, Field::kAStride);
    if (a_pitch < in_c) fail(ins, fmt::format("a_stride={} is less than in_c={}", a_pitch, in_c));
    c_pitch = field(ins, Field::kCStride) == 0 ? n : field(ins, Field::kCStride);
    if (c_pitch < n) fail(ins, fmt::format("c_stride={} is less than n={}", c_pitch, n));
    a_bytes = (u(field(ins, Field::kInH) * field(ins, Field::kInW) - 1) * u(a_pitch) + u(in_c)) * es;
  }
  if (!a_from_stationary(ins, config))
    add_sram(fp, Buffer::kInput, u(field(ins, Field::kAAddr)), a_bytes, Access::kRead);
  if (!b_from_stationary(ins, config)) {
    add_sram(fp, Buffer::kWeight, u(field(ins, Field::kBAddr)), u(k) * u(n) * wes, Access::kRead);
  }
  const uint64_t c_bytes =
      (u(m - 1) * u(c_pitch ? c_pitch : n) + u(n)) * u(isa::dtype_bytes(accumulator_dtype(t)));
  if (field(ins, Field::kAccumulate))
    add_sram(fp, Buffer::kAccumulator, u(field(ins, Field::kCAddr)), c_bytes, Access::kRead);
  add_sram(fp, Buffer::kAccumulator, u(field(ins, Field::kCAddr)), c_bytes, Access::kWrite);
}

void vec(const Instruction& ins, Ranges& fp) {
  const VecGeometry g = vec_geometry(ins);
  const DType in = static_cast<DType>(field(ins, Field::kDtype));
  const DType out = static_cast<DType>(field(ins, Field::kDtypeOut));
  add_sram(fp, static_cast<Buffer>(field(ins, Field::kSrc1Buf)), u(field(ins, Field::kSrc1Addr)),
           u(g.src1_elems) * u(isa::dtype_bytes(in)), Access::kRead);
  if (g.src2_elems > 0) {
    add_sram(fp, static_cast<Buffer>(field(ins, Field::kSrc2Buf)), u(field(ins, Field::kSrc2Addr)),
             u(g.src2_elems) * u(g.src2_record_bytes), Access::kRead);
  }
  add_sram(fp, static_cast<Buffer>(field(ins, Field::kDstBuf)), u(field(ins, Field::kDstAddr)),
           u(g.dst_elems) * u(isa::dtype_bytes(out)), Access::kWrite);
}

void check_capacity(const Instruction& ins, const isa::NpuConfig& config, const Ranges& fp) {
  for (int i = 0; i < fp.num_sram; ++i) {
    const SramRange& r = fp.sram[i];
    const auto& sp = config.sram.buffer(r.buf);
    const uint64_t cap = u(sp.size_bytes());
    if (r.end > cap || r.end < r.begin) {
      fail(ins, fmt::format("{} bytes [{:#x}, {:#x}) of the {} buffer, which holds {} bytes ({} KiB)",
                            r.access == Access::kRead ? "reads" : "writes", r.begin, r.end,
                            isa::kBufferNames[static_cast<size_t>(r.buf)], cap, sp.size_kib));
    }
  }
}

}  // namespace

bool vec_is_binary(VecOp op) {
  switch (op) {
    case VecOp::kAdd:
    case VecOp::kSub:
    case VecOp::kMul:
    case VecOp::kDiv:
    case VecOp::kMax:
    case VecOp::kMin:
    case VecOp::kPow:
      return true;
    default:
      return false;
  }
}

namespace {
// dwconv (isa.h): the window, strides and dilations, the operand types and the output box.
VecGeometry dwconv_geometry(const Instruction& ins, DType in, DType out, Bcast bcast, int64_t d0, int64_t d1,
                            int64_t d2) {
  if (bcast != Bcast::kNone) fail(ins, "dwconv reads whole weights from src2; bcast must be none");
  if (in == DType::kInt32 || in == DType::kInt64)
    fail(ins, "dwconv inputs are int8, uint8, int16 or float, not int32 or int64");
  if (out != accumulator_dtype(in)) {
    fail(ins, fmt::format("dwconv of {} writes {} sums, not {}", dtype_name(in),
                          dtype_name(accumulator_dtype(in)), dtype_name(out)));
  }
  buffer_field(ins, Field::kSrc2Buf, "src2_buf");
  require_positive(
      ins,
      {{Field::kWinH, "win_h"}, {Field::kWinW, "win_w"}, {Field::kStrH, "str_h"}, {Field::kStrW, "str_w"}});
  const int64_t dh = field(ins, Field::kImm0), dw = field(ins, Field::kImm1);
  if (dh < 0 || dw < 0 || dh > 255 || dw > 255) {
    fail(ins, fmt::format("dwconv dilations imm0={} and imm1={} must be in 0..255 (0 = 1)", dh, dw));
  }
  if (field(ins, Field::kImm2) != 0) fail(ins, "dwconv has no imm2; it must be 0");
  const int64_t reach_h = (field(ins, Field::kWinH) - 1) * std::max<int64_t>(1, dh) + 1;
  const int64_t reach_w = (field(ins, Field::kWinW) - 1) * std::max<int64_t>(1, dw) + 1;
  if (reach_h > d2 || reach_w > d1) {
    fail(ins, fmt::format(
                  "a dwconv window reaching {}x{} does not fit the {}x{} input (d2 x d1; pad with the LOAD "
                  "halo)",
                  reach_h, reach_w, d2, d1));
  }
  VecGeometry g;
  g.src1_elems = d0 * d1 * d2;
  g.src2_elems = field(ins, Field::kWinH) * field(ins, Field::kWinW) * d0;
  g.src2_record_bytes = isa::dtype_bytes(weight_dtype(in));
  g.out_h = (d2 - reach_h) / field(ins, Field::kStrH) + 1;
  g.out_w = (d1 - reach_w) / field(ins, Field::kStrW) + 1;
  g.dst_elems = g.out_h * g.out_w * d0;
  return g;
}
}  // namespace

VecOperandBytes vec_operand_bytes(const Instruction& ins, const VecGeometry& g) {
  const int64_t in_b = isa::dtype_bytes(static_cast<DType>(ins.get(Field::kDtype)));
  const int64_t out_b = isa::dtype_bytes(static_cast<DType>(ins.get(Field::kDtypeOut)));
  VecOperandBytes b;
  b.src1 = g.src1_elems * in_b;
  b.src2 = g.src2_elems * (g.src2_record_bytes ? g.src2_record_bytes : in_b);
  b.dst = g.dst_elems * out_b;
  return b;
}

namespace {

// vec_geometry, and without its checks (kCheck false) for an instruction that passed them: the same
// geometry, one definition.
template <bool kCheck>
VecGeometry vec_geometry_of(const Instruction& ins) {
  const int64_t vop = field(ins, Field::kVop);
  if (kCheck && (vop < 0 || vop >= isa::kNumVecOps)) fail(ins, fmt::format("op={} is not a vector op", vop));
  const auto op = static_cast<VecOp>(vop);
  const DType in =
      kCheck ? dtype_field(ins, Field::kDtype, "dtype") : static_cast<DType>(field(ins, Field::kDtype));
  const DType out = kCheck ? dtype_field(ins, Field::kDtypeOut, "dtype_out")
                           : static_cast<DType>(field(ins, Field::kDtypeOut));
  if constexpr (kCheck) {
    buffer_field(ins, Field::kSrc1Buf, "src1_buf");
    buffer_field(ins, Field::kDstBuf, "dst_buf");
  }
  const int64_t bc = field(ins, Field::kBcast);
  if (kCheck && (bc < 0 || bc >= isa::kNumBcasts))
    fail(ins, fmt::format("bcast={} is not a broadcast mode", bc));
  const auto bcast = static_cast<Bcast>(bc);
  if constexpr (kCheck) require_positive(ins, {{Field::kD0, "d0"}, {Field::kD1, "d1"}, {Field::kD2, "d2"}});
  const int64_t d0 = field(ins, Field::kD0), d1 = field(ins, Field::kD1), d2 = field(ins, Field::kD2);
  VecGeometry g;
  g.src1_elems = d0 * d1 * d2;
  g.dst_elems = g.src1_elems;
  auto src2_count = [&] {
    switch (bcast) {
      case Bcast::kNone:
        return d0 * d1 * d2;
      case Bcast::kScalar:
        return int64_t{1};
      case Bcast::kRow:
        return d0;
      case Bcast::kCol:
        return d1 * d2;
    }
    return int64_t{0};
  };
  if (vec_is_binary(op)) {
    if constexpr (kCheck) buffer_field(ins, Field::kSrc2Buf, "src2_buf");
    g.src2_elems = src2_count();
    g.src2_record_bytes = isa::dtype_bytes(in);
  } else if (op == VecOp::kRequantize) {
    if (kCheck && in != DType::kInt32 && in != DType::kInt64) {
      fail(ins, fmt::format("requantize reads int32 or int64, not {}", dtype_name(in)));
    }
    if (kCheck && !is_integer(out))
      fail(ins, fmt::format("requantize writes an integer type, not {}", dtype_name(out)));
    if (bcast != Bcast::kNone) {
      if constexpr (kCheck) buffer_field(ins, Field::kSrc2Buf, "src2_buf");
      if (kCheck && (field(ins, Field::kImm0) != 0 || field(ins, Field::kImm1) != 0)) {
        fail(ins,
             "per-channel requantize (bcast != none) takes multiplier and shift from src2; imm0 and imm1 "
             "must be 0");
      }
      g.src2_elems = src2_count();
      g.src2_record_bytes = 8;
    } else if constexpr (kCheck) {
      const int64_t s = field(ins, Field::kImm1);
      if (s < -31 || s > 31) fail(ins, fmt::format("requantize shift imm1={} is outside [-31, 31]", s));
    }
  } else if (op == VecOp::kOutput) {
    if (kCheck && bcast == Bcast::kNone)
      fail(ins, "output reads one record per channel (or one for all): bcast must not be none");
    if constexpr (kCheck) buffer_field(ins, Field::kSrc2Buf, "src2_buf");
    g.src2_elems = src2_count();
    if (is_integer(in)) {
      if (kCheck && !is_integer(out)) {
        fail(ins, fmt::format("output of {} values writes an integer type, not {}", dtype_name(in),
                              dtype_name(out)));
      }
      g.src2_record_bytes = 12;  // (bias, multiplier, shift)
    } else {
      if (kCheck && (is_integer(in) || is_integer(out))) {
        fail(ins, fmt::format("output of float sums writes a float type, not {} -> {}", dtype_name(in),
                              dtype_name(out)));
      }
      if (kCheck && field(ins, Field::kImm2) != 0)
        fail(ins, "a float output stage has no zero point; imm2 must be 0");
      g.src2_record_bytes = 4;  // fp32 bias
    }
  } else if (op == VecOp::kLut) {
    const auto code = [](DType t) { return t == DType::kInt8 || t == DType::kUint8; };
    if (kCheck && (!(code(in) || in == DType::kInt16) || !code(out)))
      fail(ins, fmt::format("lut maps int8, uint8 or int16 codes to int8 or uint8 codes, not {} -> {}",
                            dtype_name(in), dtype_name(out)));
    if (kCheck && bcast != Bcast::kNone) fail(ins, "lut reads its whole table; bcast must be none");
    if constexpr (kCheck) buffer_field(ins, Field::kSrc2Buf, "src2_buf");
    g.src2_elems = isa::kLutEntries;
    if (in == DType::kInt16) {
      g.src2_elems = field(ins, Field::kImm1);
      if (kCheck && (g.src2_elems < 1 || g.src2_elems > isa::kLutMaxEntries))
        fail(ins, fmt::format("an int16 lut's table has imm1 = 1..{} entries, not {}", isa::kLutMaxEntries,
                              g.src2_elems));
    }
    g.src2_record_bytes = 1;
  } else if (op == VecOp::kDwConv) {
    return dwconv_geometry(ins, in, out, bcast, d0, d1, d2);
  } else if (kCheck && bcast != Bcast::kNone) {
    fail(ins, fmt::format("{} is unary; bcast must be none", isa::kVecOpNames[static_cast<size_t>(op)]));
  }
  switch (op) {
    case VecOp::kMaxPool:
    case VecOp::kAvgPool: {
      if constexpr (kCheck) {
        require_positive(ins, {{Field::kWinH, "win_h"},
                               {Field::kWinW, "win_w"},
                               {Field::kStrH, "str_h"},
                               {Field::kStrW, "str_w"}});
      }
      const int64_t wh = field(ins, Field::kWinH), ww = field(ins, Field::kWinW);
      if (kCheck && (wh > d2 || ww > d1)) {
        fail(ins, fmt::format("a {}x{} window does not fit the {}x{} input (d2 x d1; pad with the LOAD halo)",
                              wh, ww, d2, d1));
      }
      g.out_h = (d2 - wh) / field(ins, Field::kStrH) + 1;
      g.out_w = (d1 - ww) / field(ins, Field::kStrW) + 1;
      g.dst_elems = g.out_h * g.out_w * d0;
      break;
    }
    case VecOp::kReduceSum:
    case VecOp::kReduceMax:
    case VecOp::kReduceMean:
      g.dst_elems = d1 * d2;
      break;
    default:
      break;
  }
  if (kCheck && op != VecOp::kMaxPool && op != VecOp::kAvgPool &&
      (field(ins, Field::kWinH) | field(ins, Field::kWinW) | field(ins, Field::kStrH) |
       field(ins, Field::kStrW)) != 0) {
    fail(ins, "win_h, win_w, str_h and str_w are only for max_pool/avg_pool and must be 0");
  }
  return g;
}

}  // namespace

VecGeometry vec_geometry(const Instruction& ins) { return vec_geometry_of<true>(ins); }

VecGeometry vec_geometry_unchecked(const Instruction& ins) { return vec_geometry_of<false>(ins); }

bool a_from_stationary(const Instruction& ins, const isa::NpuConfig& config) {
  return ins.get(Field::kPreloaded) != 0 && config.systolic_array.dataflow == isa::Dataflow::kIs;
}

bool b_from_stationary(const Instruction& ins, const isa::NpuConfig& config) {
  return ins.get(Field::kPreloaded) != 0 && config.systolic_array.dataflow == isa::Dataflow::kWs;
}

namespace {

Ranges ranges(const Instruction& ins, const isa::NpuConfig& config) {
  Ranges fp;
  switch (ins.opcode) {
    case Opcode::kLoad:
    case Opcode::kStore:
      dma(ins, fp);
      break;
    case Opcode::kPreload:
      preload(ins, config, fp);
      break;
    case Opcode::kMatmul:
    case Opcode::kConv:
      matrix(ins, config, fp);
      break;
    case Opcode::kVec:
      vec(ins, fp);
      break;
    case Opcode::kNop:
    case Opcode::kHostCall:
    case Opcode::kBarrier:
    case Opcode::kHalt:
      break;
    default:
      fail(ins, "unknown opcode");
  }
  check_capacity(ins, config, fp);
  return fp;
}

}  // namespace

Footprint footprint(const Instruction& ins, const isa::NpuConfig& config) {
  const Ranges r = ranges(ins, config);
  Footprint fp;
  fp.sram.assign(r.sram, r.sram + r.num_sram);
  fp.dram.assign(r.dram, r.dram + r.num_dram);
  return fp;
}

void check_footprint(const Instruction& ins, const isa::NpuConfig& config) { ranges(ins, config); }

}  // namespace npusim::arch::datapath
