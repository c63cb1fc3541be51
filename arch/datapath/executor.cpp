#include "arch/datapath/executor.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "arch/datapath/error.h"
#include "arch/datapath/footprint.h"
#include "arch/datapath/numerics.h"
#include "arch/datapath/vector_ops.h"

namespace npusim::arch::datapath {

using isa::Buffer;
using isa::DType;
using isa::Field;
using isa::Instruction;
using isa::Opcode;

namespace {

// The pad element of a LOAD as bytes of dtype `t`: integers take pad_value as a signed integer
// (saturated to the type), float types take it as bf16 bits.
std::vector<uint8_t> pad_element(const Instruction& ins, DType t) {
  std::vector<uint8_t> e(static_cast<size_t>(isa::dtype_bytes(t)));
  const int64_t pv = ins.get(Field::kPadValue);
  if (is_integer(t)) {
    store_int(e.data(), t, pv);
  } else {
    store_float(e.data(), t, bf16_to_fp32(static_cast<uint16_t>(pv & 0xffff)));
  }
  return e;
}

void do_load(const Instruction& ins, const Footprint& fp, MachineState& st) {
  const auto t = static_cast<DType>(ins.get(Field::kDtype));
  const uint64_t es = u(isa::dtype_bytes(t));
  const SramRange& dst_range = fp.sram.front();
  uint8_t* dst = st.sram_span(dst_range.buf, dst_range.begin, dst_range.bytes(), describe(ins));
  const int64_t s0 = ins.get(Field::kSize0), s1 = ins.get(Field::kSize1), s2 = ins.get(Field::kSize2),
                s3 = ins.get(Field::kSize3);
  const int64_t pt = ins.get(Field::kPadTop), pb = ins.get(Field::kPadBottom), pl = ins.get(Field::kPadLeft),
                pr = ins.get(Field::kPadRight);
  const uint64_t st1 = u(ins.get(Field::kStride1)), st2 = u(ins.get(Field::kStride2)),
                 st3 = u(ins.get(Field::kStride3));
  const uint64_t dram = u(ins.get(Field::kDramAddr));
  const int64_t s1p = s1 + pl + pr, s2p = s2 + pt + pb;
  const uint64_t row_bytes = u(s0) * es;
  const std::vector<uint8_t> pad = pad_element(ins, t);
  const bool pad_uniform = std::all_of(pad.begin(), pad.end(), [&](uint8_t b) { return b == pad[0]; });
  for (int64_t j3 = 0; j3 < s3; ++j3) {
    for (int64_t j2 = 0; j2 < s2p; ++j2) {
      for (int64_t j1 = 0; j1 < s1p; ++j1) {
        uint8_t* row = dst + row_bytes * u(j1 + s1p * (j2 + s2p * j3));
        const bool halo = j2 < pt || j2 >= pt + s2 || j1 < pl || j1 >= pl + s1;
        if (!halo) {
          st.dram().read(dram + es * (u(j1 - pl) * st1 + u(j2 - pt) * st2 + u(j3) * st3), row, row_bytes);
        } else if (pad_uniform) {
          std::memset(row, pad[0], row_bytes);
        } else {
          for (int64_t i = 0; i < s0; ++i) std::memcpy(row + u(i) * es, pad.data(), es);
        }
      }
    }
  }
}

void do_store(const Instruction& ins, const Footprint& fp, MachineState& st) {
  const auto t = static_cast<DType>(ins.get(Field::kDtype));
  const uint64_t es = u(isa::dtype_bytes(t));
  const SramRange& src_range = fp.sram.front();
  const uint8_t* src = st.sram_span(src_range.buf, src_range.begin, src_range.bytes(), describe(ins));
  const int64_t s0 = ins.get(Field::kSize0), s1 = ins.get(Field::kSize1), s2 = ins.get(Field::kSize2),
                s3 = ins.get(Field::kSize3);
  const uint64_t st1 = u(ins.get(Field::kStride1)), st2 = u(ins.get(Field::kStride2)),
                 st3 = u(ins.get(Field::kStride3));
  const uint64_t dram = u(ins.get(Field::kDramAddr));
  const uint64_t row_bytes = u(s0) * es;
  // Rows are written in box order, so with overlapping strides the last row written wins.
  for (int64_t j3 = 0; j3 < s3; ++j3) {
    for (int64_t j2 = 0; j2 < s2; ++j2) {
      for (int64_t j1 = 0; j1 < s1; ++j1) {
        const uint8_t* row = src + row_bytes * u(j1 + s1 * (j2 + s2 * j3));
        st.dram().write(dram + es * (u(j1) * st1 + u(j2) * st2 + u(j3) * st3), row, row_bytes);
      }
    }
  }
}

void do_preload(const Instruction& ins, const Footprint& fp, MachineState& st) {
  const auto t = static_cast<DType>(ins.get(Field::kDtype));
  const uint64_t es = u(isa::dtype_bytes(t));
  const int64_t rows = ins.get(Field::kRows), cols = ins.get(Field::kCols);
  const int64_t stride = ins.get(Field::kRowStride) == 0 ? cols : ins.get(Field::kRowStride);
  const SramRange& r = fp.sram.front();
  const uint8_t* src = st.sram_span(r.buf, r.begin, r.bytes(), describe(ins));
  StationaryOperand& s = st.stationary();
  s.valid = true;
  s.dtype = t;
  s.rows = rows;
  s.cols = cols;
  s.bytes.resize(u(rows * cols) * es);
  for (int64_t i = 0; i < rows; ++i) {
    std::memcpy(s.bytes.data() + u(i * cols) * es, src + u(i * stride) * es, u(cols) * es);
  }
}

// A matrix operand in memory: rows of `cols` elements of `t`, `stride` elements apart.
struct MatView {
  const uint8_t* base;
  int64_t rows;
  int64_t cols;
  int64_t stride;
  DType t;
};

std::vector<int32_t> to_int32(const MatView& v) {
  std::vector<int32_t> out(u(v.rows * v.cols));
  const uint64_t es = u(isa::dtype_bytes(v.t));
  for (int64_t i = 0; i < v.rows; ++i) {
    const uint8_t* row = v.base + u(i * v.stride) * es;
    int32_t* o = out.data() + i * v.cols;
    if (v.t == DType::kInt8) {
      for (int64_t j = 0; j < v.cols; ++j) o[j] = static_cast<int8_t>(row[j]);
    } else if (v.t == DType::kUint8) {
      for (int64_t j = 0; j < v.cols; ++j) o[j] = row[j];
    } else {
      for (int64_t j = 0; j < v.cols; ++j) o[j] = static_cast<int32_t>(load_int(row + u(j) * es, v.t));
    }
  }
  return out;
}

std::vector<float> to_fp32(const MatView& v) {
  std::vector<float> out(u(v.rows * v.cols));
  const uint64_t es = u(isa::dtype_bytes(v.t));
  for (int64_t i = 0; i < v.rows; ++i) {
    const uint8_t* row = v.base + u(i * v.stride) * es;
    for (int64_t j = 0; j < v.cols; ++j) out[u(i * v.cols + j)] = load_float(row + u(j) * es, v.t);
  }
  return out;
}

// C[m x n] (+)= A[m x k] * B[k x n] of integer operands in the unsigned accumulator type Acc (uint32_t:
// int32 sums wrapping modulo 2^32; uint64_t: the int64 sums of int16 operands).
template <class Acc>
void integer_gemm(const MatView& a, const MatView& b, uint8_t* c, bool accumulate) {
  const int64_t m = a.rows, k = a.cols, n = b.cols;
  const size_t mn = u(m * n);
  const std::vector<int32_t> av = to_int32(a), bv = to_int32(b);
  std::vector<Acc> acc(mn, 0);  // unsigned: wraps like the hardware adder
  if (accumulate) std::memcpy(acc.data(), c, mn * sizeof(Acc));
  for (int64_t i = 0; i < m; ++i) {
    Acc* crow = acc.data() + i * n;
    for (int64_t kk = 0; kk < k; ++kk) {
      const int32_t x = av[u(i * k + kk)];
      if (x == 0) continue;
      const int32_t* brow = bv.data() + kk * n;
      for (int64_t j = 0; j < n; ++j) crow[j] += static_cast<Acc>(static_cast<int64_t>(x * brow[j]));
    }
  }
  std::memcpy(c, acc.data(), mn * sizeof(Acc));
}

// C[m x n] (+)= A[m x k] * B[k x n] with the rules in executor.h. `c` points at m*n elements of
// accumulator_dtype(a.t). `order` (optional, a permutation of 0..k-1) is the order in which each output
// adds its k products (CONV's channel-major order, conv_order); null: k order. Integer sums wrap modulo
// 2^32 (2^64), so they are the same in any order and ignore it.
void gemm(const MatView& a, const MatView& b, uint8_t* c, bool accumulate, const isa::NpuConfig& config,
          const std::vector<int64_t>* order = nullptr) {
  const int64_t m = a.rows, k = a.cols, n = b.cols;
  const size_t mn = u(m * n);
  if (a.t == DType::kInt16) return integer_gemm<uint64_t>(a, b, c, accumulate);
  if (is_integer(a.t)) return integer_gemm<uint32_t>(a, b, c, accumulate);
  const std::vector<float> av = to_fp32(a), bv = to_fp32(b);
  std::vector<float> acc(mn, 0.0f);
  if (accumulate) std::memcpy(acc.data(), c, mn * 4);
  const bool reduced =
      (a.t == DType::kFp16 || a.t == DType::kBf16) && !config.systolic_array.fp16_accumulate_fp32;
  if (reduced) {
    for (float& x : acc) x = round_to_precision(x, a.t);
    for (int64_t i = 0; i < m; ++i) {
      float* crow = acc.data() + i * n;
      for (int64_t q = 0; q < k; ++q) {
        const int64_t kk = order ? (*order)[u(q)] : q;
        const float x = av[u(i * k + kk)];
        const float* brow = bv.data() + kk * n;
        for (int64_t j = 0; j < n; ++j) crow[j] = round_to_precision(crow[j] + x * brow[j], a.t);
      }
    }
  } else {
    for (int64_t i = 0; i < m; ++i) {
      float* crow = acc.data() + i * n;
      for (int64_t q = 0; q < k; ++q) {
        const int64_t kk = order ? (*order)[u(q)] : q;
        const float x = av[u(i * k + kk)];
        const float* brow = bv.data() + kk * n;
        for (int64_t j = 0; j < n; ++j) crow[j] = crow[j] + x * brow[j];
      }
    }
  }
  std::memcpy(c, acc.data(), mn * 4);
}

const StationaryOperand& stationary_for(const Instruction& ins, const MachineState& st, const char* what,
                                        DType t, int64_t rows, int64_t cols) {
  const StationaryOperand& s = st.stationary();
  if (!s.valid) fail(ins, fmt::format("preloaded=1 but no PRELOAD has loaded the stationary {}", what));
  if (s.dtype != t || s.rows != rows || s.cols != cols) {
    fail(ins,
         fmt::format("preloaded=1 needs a stationary {} of {}x{} {}, but the last PRELOAD loaded {}x{} {}",
                     what, rows, cols, isa::kDTypeNames[static_cast<size_t>(t)], s.rows, s.cols,
                     isa::kDTypeNames[static_cast<size_t>(s.dtype)]));
  }
  return s;
}

uint8_t* acc_span(const Instruction& ins, MachineState& st, int64_t m, int64_t n) {
  const auto t = static_cast<DType>(ins.get(Field::kDtype));
  return st.sram_span(Buffer::kAccumulator, u(ins.get(Field::kCAddr)),
                      u(m * n) * u(isa::dtype_bytes(accumulator_dtype(t))), describe(ins));
}

void do_matmul(const Instruction& ins, const isa::NpuConfig& config, MachineState& st) {
  const auto t = static_cast<DType>(ins.get(Field::kDtype));
  const DType wt = weight_dtype(t);
  const int64_t m = ins.get(Field::kM), k = ins.get(Field::kK), n = ins.get(Field::kN);
  const int64_t a_stride = ins.get(Field::kAStride) == 0 ? k : ins.get(Field::kAStride);
  MatView a{nullptr, m, k, a_stride, t};
  if (a_from_stationary(ins, config)) {
    a.base = stationary_for(ins, st, "A (input-stationary)", t, m, k).bytes.data();
    a.stride = k;
  } else {
    const uint64_t bytes = (u(m - 1) * u(a_stride) + u(k)) * u(isa::dtype_bytes(t));
    a.base = st.sram_span(Buffer::kInput, u(ins.get(Field::kAAddr)), bytes, describe(ins));
  }
  MatView b{nullptr, k, n, n, wt};
  if (b_from_stationary(ins, config)) {
    b.base = stationary_for(ins, st, "B (weight-stationary)", wt, k, n).bytes.data();
  } else {
    b.base = st.sram_span(Buffer::kWeight, u(ins.get(Field::kBAddr)), u(k * n) * u(isa::dtype_bytes(wt)),
                          describe(ins));
  }
  gemm(a, b, acc_span(ins, st, m, n), ins.get(Field::kAccumulate) != 0, config);
}

// The order in which a CONV adds each output's products (isa.h, CONV): channel-major, every input
// channel's kernel_h x kernel_w taps in (i, j) order, i.e. ONNX's weight order [O][C][kh][kw]. Entry q =
// (ch*kh + i)*kw + j is the im2col column (i*kw + j)*in_c + ch that holds that product. Empty for a 1x1
// kernel or a single channel, whose two orders agree.
std::vector<int64_t> conv_order(int64_t kh, int64_t kw, int64_t in_c) {
  std::vector<int64_t> order;
  if (kh * kw == 1 || in_c == 1) return order;
  order.reserve(u(kh * kw * in_c));
  for (int64_t ch = 0; ch < in_c; ++ch) {
    for (int64_t tap = 0; tap < kh * kw; ++tap) order.push_back(tap * in_c + ch);
  }
  return order;
}

void do_conv(const Instruction& ins, const isa::NpuConfig& config, MachineState& st) {
  const auto t = static_cast<DType>(ins.get(Field::kDtype));
  const DType wt = weight_dtype(t);
  const uint64_t es = u(isa::dtype_bytes(t));
  const int64_t in_h = ins.get(Field::kInH), in_w = ins.get(Field::kInW), in_c = ins.get(Field::kInC);
  const int64_t oh = ins.get(Field::kOutH), ow = ins.get(Field::kOutW), n = ins.get(Field::kN);
  const int64_t kh = ins.get(Field::kKernelH), kw = ins.get(Field::kKernelW);
  const int64_t sh = ins.get(Field::kStrideH), sw = ins.get(Field::kStrideW);
  const int64_t dh = ins.get(Field::kDilationH), dw = ins.get(Field::kDilationW);
  const int64_t m = oh * ow, k = kh * kw * in_c;
  const int64_t a_pitch = ins.get(Field::kAStride) ? ins.get(Field::kAStride) : in_c;
  const int64_t c_pitch = ins.get(Field::kCStride) ? ins.get(Field::kCStride) : n;
  std::vector<uint8_t> im2col;
  MatView a{nullptr, m, k, k, t};
  if (a_from_stationary(ins, config)) {
    a.base = stationary_for(ins, st, "im2col A (input-stationary)", t, m, k).bytes.data();
  } else {
    const uint8_t* src = st.sram_span(Buffer::kInput, u(ins.get(Field::kAAddr)),
                                      (u(in_h * in_w - 1) * u(a_pitch) + u(in_c)) * es, describe(ins));
    // Implicit im2col made explicit: row p = y*out_w + x, column (i*kernel_w + j)*in_c + ch.
    im2col.resize(u(m * k) * es);
    const uint64_t pixel_bytes = u(in_c) * es;
    for (int64_t y = 0; y < oh; ++y) {
      for (int64_t x = 0; x < ow; ++x) {
        uint8_t* row = im2col.data() + u((y * ow + x) * k) * es;
        for (int64_t i = 0; i < kh; ++i) {
          for (int64_t j = 0; j < kw; ++j) {
            const int64_t iy = y * sh + i * dh, ix = x * sw + j * dw;
            std::memcpy(row + u((i * kw + j) * in_c) * es, src + u((iy * in_w + ix) * a_pitch) * es,
                        pixel_bytes);
          }
        }
      }
    }
    a.base = im2col.data();
  }
  MatView b{nullptr, k, n, n, wt};
  if (b_from_stationary(ins, config)) {
    b.base = stationary_for(ins, st, "B (weight-stationary)", wt, k, n).bytes.data();
  } else {
    b.base = st.sram_span(Buffer::kWeight, u(ins.get(Field::kBAddr)), u(k * n) * u(isa::dtype_bytes(wt)),
                          describe(ins));
  }
  const bool accumulate = ins.get(Field::kAccumulate) != 0;
  const std::vector<int64_t> order = is_integer(t) ? std::vector<int64_t>{} : conv_order(kh, kw, in_c);
  const std::vector<int64_t>* ord = order.empty() ? nullptr : &order;
  if (c_pitch == n) return gemm(a, b, acc_span(ins, st, m, n), accumulate, config, ord);
  // Rows of C c_stride elements apart: gathered into a dense m x n, multiplied, written back.
  const uint64_t ec = u(isa::dtype_bytes(accumulator_dtype(t))), row_bytes = u(n) * ec;
  uint8_t* c = st.sram_span(Buffer::kAccumulator, u(ins.get(Field::kCAddr)),
                            (u(m - 1) * u(c_pitch) + u(n)) * ec, describe(ins));
  std::vector<uint8_t> dense(u(m) * row_bytes);
  if (accumulate) {
    for (int64_t r = 0; r < m; ++r)
      std::memcpy(dense.data() + u(r) * row_bytes, c + u(r * c_pitch) * ec, row_bytes);
  }
  gemm(a, b, dense.data(), accumulate, config, ord);
  for (int64_t r = 0; r < m; ++r)
    std::memcpy(c + u(r * c_pitch) * ec, dense.data() + u(r) * row_bytes, row_bytes);
}

void do_hostcall(const Instruction& ins, MachineState& st) {
  if (!st.host_op_handler()) return;
  const int64_t id = ins.get(Field::kHostOp);
  const auto& ops = st.host_ops();
  if (ops.empty()) {
    st.host_op_handler()(isa::HostOp{"", "", static_cast<uint64_t>(ins.get(Field::kCpuOps))}, st);
    return;
  }
  if (id < 0 || u(id) >= ops.size()) {
    fail(ins, fmt::format("host_op={} but the program has {} host ops", id, ops.size()));
  }
  st.host_op_handler()(ops[u(id)], st);
}

}  // namespace

void execute(const Instruction& ins, const isa::NpuConfig& config, MachineState& state) {
  const Footprint fp = footprint(ins, config);  // validates shape and capacity first
  switch (ins.opcode) {
    case Opcode::kLoad:
      do_load(ins, fp, state);
      return;
    case Opcode::kStore:
      do_store(ins, fp, state);
      return;
    case Opcode::kPreload:
      do_preload(ins, fp, state);
      return;
    case Opcode::kMatmul:
      do_matmul(ins, config, state);
      return;
    case Opcode::kConv:
      do_conv(ins, config, state);
      return;
    case Opcode::kVec:
      execute_vec(ins, state);
      return;
    case Opcode::kHostCall:
      do_hostcall(ins, state);
      return;
    case Opcode::kNop:
    case Opcode::kBarrier:
    case Opcode::kHalt:
      return;
  }
}

}  // namespace npusim::arch::datapath
