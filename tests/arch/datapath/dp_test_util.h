#pragma once
// Instruction builders and SRAM helpers for the datapath tests.
#include <cstdint>
#include <cstring>
#include <vector>

#include "arch/datapath/numerics.h"
#include "arch/datapath/state.h"
#include "isa/isa.h"

namespace npusim::arch::datapath::test {

using isa::Buffer;
using isa::DType;
using isa::Field;
using isa::Instruction;
using isa::Opcode;

inline int64_t e(DType t) { return static_cast<int64_t>(t); }
inline int64_t e(Buffer b) { return static_cast<int64_t>(b); }

struct Box {
  int64_t size0 = 1, size1 = 1, size2 = 1, size3 = 1;
  int64_t stride1 = 0, stride2 = 0, stride3 = 0;
  int64_t pad_top = 0, pad_bottom = 0, pad_left = 0, pad_right = 0, pad_value = 0;
};

inline Instruction dma(Opcode op, DType t, Buffer b, uint64_t dram, uint64_t sram, const Box& x) {
  Instruction i;
  i.opcode = op;
  i.set(Field::kDtype, e(t)).set(Field::kBuf, e(b)).set(Field::kDramAddr, static_cast<int64_t>(dram));
  i.set(Field::kSramAddr, static_cast<int64_t>(sram));
  i.set(Field::kSize0, x.size0)
      .set(Field::kSize1, x.size1)
      .set(Field::kSize2, x.size2)
      .set(Field::kSize3, x.size3);
  i.set(Field::kStride1, x.stride1).set(Field::kStride2, x.stride2).set(Field::kStride3, x.stride3);
  i.set(Field::kPadTop, x.pad_top).set(Field::kPadBottom, x.pad_bottom).set(Field::kPadLeft, x.pad_left);
  i.set(Field::kPadRight, x.pad_right).set(Field::kPadValue, x.pad_value);
  return i;
}

inline Instruction matmul(DType t, int64_t m, int64_t k, int64_t n, int64_t a = 0, int64_t b = 0,
                          int64_t c = 0, bool acc = false, bool preloaded = false, int64_t a_stride = 0) {
  Instruction i;
  i.opcode = Opcode::kMatmul;
  i.set(Field::kDtype, e(t)).set(Field::kM, m).set(Field::kK, k).set(Field::kN, n);
  i.set(Field::kAAddr, a).set(Field::kBAddr, b).set(Field::kCAddr, c).set(Field::kAStride, a_stride);
  i.set(Field::kAccumulate, acc).set(Field::kPreloaded, preloaded);
  return i;
}

inline Instruction preload(DType t, Buffer b, int64_t addr, int64_t rows, int64_t cols,
                           int64_t row_stride = 0) {
  Instruction i;
  i.opcode = Opcode::kPreload;
  i.set(Field::kDtype, e(t)).set(Field::kBuf, e(b)).set(Field::kSramAddr, addr);
  i.set(Field::kRows, rows).set(Field::kCols, cols).set(Field::kRowStride, row_stride);
  return i;
}

struct ConvShape {
  int64_t in_h, in_w, in_c, out_h, out_w, n, kh, kw, sh = 1, sw = 1, dh = 1, dw = 1;
};
inline Instruction conv(DType t, const ConvShape& s, int64_t a = 0, int64_t b = 0, int64_t c = 0,
                        bool acc = false) {
  Instruction i;
  i.opcode = Opcode::kConv;
  i.set(Field::kDtype, e(t)).set(Field::kAAddr, a).set(Field::kBAddr, b).set(Field::kCAddr, c);
  i.set(Field::kInH, s.in_h).set(Field::kInW, s.in_w).set(Field::kInC, s.in_c).set(Field::kOutH, s.out_h);
  i.set(Field::kOutW, s.out_w).set(Field::kN, s.n).set(Field::kKernelH, s.kh).set(Field::kKernelW, s.kw);
  i.set(Field::kStrideH, s.sh)
      .set(Field::kStrideW, s.sw)
      .set(Field::kDilationH, s.dh)
      .set(Field::kDilationW, s.dw);
  i.set(Field::kAccumulate, acc);
  return i;
}

inline Instruction vec(isa::VecOp op, DType in, DType out, int64_t d0, int64_t d1 = 1, int64_t d2 = 1) {
  Instruction i;
  i.opcode = Opcode::kVec;
  i.set(Field::kVop, static_cast<int64_t>(op)).set(Field::kDtype, e(in)).set(Field::kDtypeOut, e(out));
  i.set(Field::kD0, d0).set(Field::kD1, d1).set(Field::kD2, d2);
  i.set(Field::kSrc1Buf, e(Buffer::kInput))
      .set(Field::kSrc2Buf, e(Buffer::kWeight))
      .set(Field::kDstBuf, e(Buffer::kAccumulator));
  return i;
}

inline int64_t fbits(float f) { return static_cast<int64_t>(fp32_bits(f)); }

// Writes/reads typed values to/from a scratchpad at a byte address.
template <class T>
void put(MachineState& st, Buffer b, uint64_t addr, const std::vector<T>& v) {
  if (!v.empty()) std::memcpy(st.sram(b).data() + addr, v.data(), v.size() * sizeof(T));
}
template <class T>
std::vector<T> get(const MachineState& st, Buffer b, uint64_t addr, size_t n) {
  std::vector<T> v(n);
  std::memcpy(v.data(), st.sram(b).data() + addr, n * sizeof(T));
  return v;
}

}  // namespace npusim::arch::datapath::test
