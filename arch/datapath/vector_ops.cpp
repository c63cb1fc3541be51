#include "arch/datapath/vector_ops.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "arch/datapath/error.h"
#include "arch/datapath/numerics.h"

namespace npusim::arch::datapath {

using isa::Bcast;
using isa::DType;
using isa::Field;
using isa::Instruction;
using isa::VecOp;

namespace {

// Ops whose integer-typed inputs are computed exactly in 64-bit integers (vector_ops.h).
bool integer_capable(VecOp op) {
  switch (op) {
    case VecOp::kCopy:
    case VecOp::kAdd:
    case VecOp::kSub:
    case VecOp::kMul:
    case VecOp::kDiv:
    case VecOp::kMax:
    case VecOp::kMin:
    case VecOp::kRelu:
    case VecOp::kAbs:
    case VecOp::kNeg:
    case VecOp::kMaxPool:
    case VecOp::kAvgPool:
    case VecOp::kReduceSum:
    case VecOp::kReduceMax:
    case VecOp::kReduceMean:
    case VecOp::kTranspose:
    case VecOp::kRequantize:
      return true;
    default:
      return false;
  }
}

std::vector<int64_t> read_ints(const uint8_t* p, int64_t n, DType t) {
  std::vector<int64_t> v(u(n));
  const uint64_t es = u(isa::dtype_bytes(t));
  for (int64_t i = 0; i < n; ++i) v[u(i)] = load_int(p + u(i) * es, t);
  return v;
}

std::vector<float> read_floats(const uint8_t* p, int64_t n, DType t) {
  std::vector<float> v(u(n));
  const uint64_t es = u(isa::dtype_bytes(t));
  for (int64_t i = 0; i < n; ++i) v[u(i)] = load_float(p + u(i) * es, t);
  return v;
}

// Integer division rounding half away from zero (integer averages).
int64_t div_round_away(int64_t sum, int64_t count) {
  const int64_t half = count / 2;
  return sum >= 0 ? (sum + half) / count : -((-sum + half) / count);
}

float imm_float(const Instruction& ins, Field f) {
  return fp32_from_bits(static_cast<uint32_t>(ins.get(f) & 0xffffffff));
}

float nan_max(float a, float b) {
  if (std::isnan(a)) return a;
  if (std::isnan(b)) return b;
  return a < b ? b : a;
}
float nan_min(float a, float b) {
  if (std::isnan(a)) return a;
  if (std::isnan(b)) return b;
  return b < a ? b : a;
}

float unary_float(VecOp op, float x, const Instruction& ins) {
  switch (op) {
    case VecOp::kCopy:
      return x;
    case VecOp::kRelu:
      return std::isnan(x) ? x : (x > 0.0f ? x : 0.0f);
    case VecOp::kLeakyRelu:
      return x < 0.0f ? imm_float(ins, Field::kImm0) * x : x;
    case VecOp::kClip:
      return nan_min(nan_max(x, imm_float(ins, Field::kImm0)), imm_float(ins, Field::kImm1));
    case VecOp::kSigmoid:
      return isa::numerics::sigmoid(x);
    case VecOp::kTanh:
      return std::tanh(x);
    case VecOp::kGelu:
      return isa::numerics::gelu(x);
    case VecOp::kErf:
      return std::erf(x);
    case VecOp::kExp:
      return std::exp(x);
    case VecOp::kSqrt:
      return std::sqrt(x);
    case VecOp::kRsqrt:
      return 1.0f / std::sqrt(x);
    case VecOp::kHardSigmoid:
      return isa::numerics::hard_sigmoid(x, imm_float(ins, Field::kImm0), imm_float(ins, Field::kImm1));
    case VecOp::kHardSwish:
      return isa::numerics::hard_swish(x);
    case VecOp::kAbs:
      return std::fabs(x);
    case VecOp::kNeg:
      return -x;
    case VecOp::kRecip:
      return 1.0f / x;
    default:
      throw DatapathError("internal: unary_float on a non-unary op");
  }
}

float binary_float(VecOp op, float a, float b) {
  switch (op) {
    case VecOp::kAdd:
      return a + b;
    case VecOp::kSub:
      return a - b;
    case VecOp::kMul:
      return a * b;
    case VecOp::kDiv:
      return a / b;
    case VecOp::kMax:
      return nan_max(a, b);
    case VecOp::kMin:
      return nan_min(a, b);
    case VecOp::kPow:
      return std::pow(a, b);
    default:
      throw DatapathError("internal: binary_float on a non-binary op");
  }
}

int64_t unary_int(VecOp op, int64_t x) {
  switch (op) {
    case VecOp::kCopy:
      return x;
    case VecOp::kRelu:
      return x > 0 ? x : 0;
    case VecOp::kAbs:
      return x < 0 ? -x : x;
    case VecOp::kNeg:
      return -x;
    default:
      throw DatapathError("internal: unary_int on an unsupported op");
  }
}

int64_t binary_int(VecOp op, int64_t a, int64_t b) {
  switch (op) {
    case VecOp::kAdd:
      return a + b;
    case VecOp::kSub:
      return a - b;
    case VecOp::kMul:
      return a * b;
    case VecOp::kDiv:
      return b == 0 ? 0 : a / b;
    case VecOp::kMax:
      return a < b ? b : a;
    case VecOp::kMin:
      return b < a ? b : a;
    default:
      throw DatapathError("internal: binary_int on an unsupported op");
  }
}

// Index of src2's record for element (i2, i1, i0) = flat index `idx`.
int64_t src2_index(Bcast b, int64_t idx, int64_t d0) {
  switch (b) {
    case Bcast::kNone:
      return idx;
    case Bcast::kScalar:
      return 0;
    case Bcast::kRow:
      return idx % d0;
    case Bcast::kCol:
      return idx / d0;
  }
  return 0;
}

// Computes with element type T (int64_t on the exact integer path, float otherwise).
template <class T>
struct Kernel {
  const Instruction& ins;
  VecOp op;
  int64_t d0, d1, d2;
  Bcast bcast;
  const VecGeometry& g;

  std::vector<T> run(const std::vector<T>& a, const std::vector<T>& b) const {
    std::vector<T> out(u(g.dst_elems));
    switch (op) {
      case VecOp::kMaxPool:
      case VecOp::kAvgPool:
        pool(a, out);
        break;
      case VecOp::kReduceSum:
      case VecOp::kReduceMax:
      case VecOp::kReduceMean:
        reduce(a, out);
        break;
      case VecOp::kTranspose:
        for (int64_t i2 = 0; i2 < d2; ++i2) {
          for (int64_t i1 = 0; i1 < d1; ++i1) {
            for (int64_t i0 = 0; i0 < d0; ++i0)
              out[u((i2 * d0 + i0) * d1 + i1)] = a[u((i2 * d1 + i1) * d0 + i0)];
          }
        }
        break;
      default:
        if (vec_is_binary(op)) {
          for (int64_t i = 0; i < g.dst_elems; ++i)
            out[u(i)] = binary(a[u(i)], b[u(src2_index(bcast, i, d0))]);
        } else {
          for (int64_t i = 0; i < g.dst_elems; ++i) out[u(i)] = unary(a[u(i)]);
        }
    }
    return out;
  }

  T unary(T x) const {
    if constexpr (std::is_same_v<T, float>) {
      return unary_float(op, x, ins);
    } else {
      return unary_int(op, x);
    }
  }
  T binary(T a, T b) const {
    if constexpr (std::is_same_v<T, float>) {
      return binary_float(op, a, b);
    } else {
      return binary_int(op, a, b);
    }
  }
  T maximum(T a, T b) const {
    if constexpr (std::is_same_v<T, float>) {
      return nan_max(a, b);
    } else {
      return a < b ? b : a;
    }
  }
  T mean(T sum, int64_t count) const {
    if constexpr (std::is_same_v<T, float>) {
      return sum / static_cast<float>(count);
    } else {
      return div_round_away(sum, count);
    }
  }

  void pool(const std::vector<T>& a, std::vector<T>& out) const {
    const int64_t wh = ins.get(Field::kWinH), ww = ins.get(Field::kWinW);
    const int64_t sh = ins.get(Field::kStrH), sw = ins.get(Field::kStrW);
    const bool is_max = op == VecOp::kMaxPool;
    for (int64_t y = 0; y < g.out_h; ++y) {
      for (int64_t x = 0; x < g.out_w; ++x) {
        for (int64_t c = 0; c < d0; ++c) {
          T acc = a[u(((y * sh) * d1 + x * sw) * d0 + c)];
          bool first = true;
          for (int64_t i = 0; i < wh; ++i) {
            for (int64_t j = 0; j < ww; ++j) {
              if (first) {
                first = false;
                continue;
              }
              const T v = a[u(((y * sh + i) * d1 + x * sw + j) * d0 + c)];
              acc = is_max ? maximum(acc, v) : static_cast<T>(acc + v);
            }
          }
          out[u((y * g.out_w + x) * d0 + c)] = is_max ? acc : mean(acc, wh * ww);
        }
      }
    }
  }

  void reduce(const std::vector<T>& a, std::vector<T>& out) const {
    for (int64_t r = 0; r < d1 * d2; ++r) {
      T acc = a[u(r * d0)];
      for (int64_t i = 1; i < d0; ++i) {
        const T v = a[u(r * d0 + i)];
        acc = op == VecOp::kReduceMax ? maximum(acc, v) : static_cast<T>(acc + v);
      }
      out[u(r)] = op == VecOp::kReduceMean ? mean(acc, d0) : acc;
    }
  }
};

void requantize(const Instruction& ins, const VecGeometry& g, const std::vector<int64_t>& x,
                const uint8_t* src2, std::vector<int64_t>& out) {
  const auto bcast = static_cast<Bcast>(ins.get(Field::kBcast));
  const int64_t d0 = ins.get(Field::kD0);
  const auto zp = static_cast<int32_t>(ins.get(Field::kImm2));
  const bool wide = static_cast<DType>(ins.get(Field::kDtype)) == DType::kInt64;  // int16 layers' sums
  for (int64_t i = 0; i < g.dst_elems; ++i) {
    int32_t mult = static_cast<int32_t>(ins.get(Field::kImm0));
    int32_t shift = static_cast<int32_t>(ins.get(Field::kImm1));
    if (bcast != Bcast::kNone) {
      const uint8_t* rec = src2 + u(src2_index(bcast, i, d0)) * 8;
      std::memcpy(&mult, rec, 4);
      std::memcpy(&shift, rec + 4, 4);
      if (shift < -31 || shift > 31) {
        throw DatapathError(fmt::format("{}: per-channel shift {} (record {}) is outside [-31, 31]",
                                        describe(ins), shift, src2_index(bcast, i, d0)));
      }
    }
    out[u(i)] = wide ? requantize_unsaturated_64(x[u(i)], mult, shift, zp)
                     : requantize_unsaturated(static_cast<int32_t>(x[u(i)]), mult, shift, zp);
  }
}

// output (isa.h): element by element through the same conversions as the instructions it stands for.
// Integer: ADD (int32, or int64 for int64 sums, saturating), per-channel REQUANTIZE to dtype_out, CLIP;
// float: ADD in fp32, CLIP, rounded to dtype_out.
void output_stage(const Instruction& ins, const VecGeometry& g, const uint8_t* src1, const uint8_t* src2,
                  uint8_t* dst) {
  const auto in = static_cast<DType>(ins.get(Field::kDtype)),
             out = static_cast<DType>(ins.get(Field::kDtypeOut));
  const auto bcast = static_cast<Bcast>(ins.get(Field::kBcast));
  const int64_t d0 = ins.get(Field::kD0);
  const float lo = imm_float(ins, Field::kImm0), hi = imm_float(ins, Field::kImm1);
  const uint64_t es_out = u(isa::dtype_bytes(out));
  // Every source element is read before anything is written (dst may overlap src1, as in place).
  const bool ints = is_integer(in);  // sums, or codes (as int32 sums)
  const std::vector<int64_t> xi = ints ? read_ints(src1, g.src1_elems, in) : std::vector<int64_t>{};
  const std::vector<float> xf = ints ? std::vector<float>{} : read_floats(src1, g.src1_elems, in);
  for (int64_t i = 0; i < g.dst_elems; ++i) {
    const int64_t r = src2_index(bcast, i, d0);
    uint8_t* y = dst + u(i) * es_out;
    if (ints) {
      int32_t rec[3];
      std::memcpy(rec, src2 + u(r) * 12, 12);
      if (rec[2] < -31 || rec[2] > 31) {
        throw DatapathError(fmt::format("{}: per-channel shift {} (record {}) is outside [-31, 31]",
                                        describe(ins), rec[2], r));
      }
      const auto zp = static_cast<int32_t>(ins.get(Field::kImm2));
      if (in == DType::kInt64) {
        const int64_t a = xi[u(i)], b = rec[0];
        const int64_t x = (b > 0 && a > INT64_MAX - b)   ? INT64_MAX
                          : (b < 0 && a < INT64_MIN - b) ? INT64_MIN
                                                         : a + b;
        store_int(y, out, requantize_unsaturated_64(x, rec[1], rec[2], zp));
      } else {
        const int32_t x = saturate_int32(xi[u(i)] + rec[0]);
        store_int(y, out, requantize_unsaturated(x, rec[1], rec[2], zp));
      }
      // Bounds of -inf and +inf clip nothing: an int32 dtype_out keeps every value (fp32 would round it).
      if (!(std::isinf(lo) && lo < 0 && std::isinf(hi) && hi > 0))
        store_float(y, out, nan_min(nan_max(load_float(y, out), lo), hi));
    } else {
      float bias;
      std::memcpy(&bias, src2 + u(r) * 4, 4);
      store_float(y, out, nan_min(nan_max(xf[u(i)] + bias, lo), hi));
    }
  }
}

// dwconv (isa.h): per channel, the window's products added in (i, j) order onto 0; integer sums wrap
// modulo 2^32 (int64 sums of int16 inputs: modulo 2^64) as the array's adder does, float sums are fp32
// (products of fp16/bf16 inputs are exact).
void dwconv(const Instruction& ins, const VecGeometry& g, const uint8_t* src1, const uint8_t* w,
            uint8_t* dst) {
  const auto in = static_cast<DType>(ins.get(Field::kDtype));
  const DType wt = weight_dtype(in);
  const int64_t c = ins.get(Field::kD0), width = ins.get(Field::kD1);
  const int64_t kh = ins.get(Field::kWinH), kw = ins.get(Field::kWinW);
  const int64_t sh = ins.get(Field::kStrH), sw = ins.get(Field::kStrW);
  const int64_t dh = std::max<int64_t>(1, ins.get(Field::kImm0)),
                dw = std::max<int64_t>(1, ins.get(Field::kImm1));
  const int64_t taps = kh * kw;
  auto at = [&](int64_t y, int64_t x, int64_t i, int64_t j) {
    return ((y * sh + i * dh) * width + x * sw + j * dw) * c;
  };
  if (is_integer(in)) {
    const DType sum_t = accumulator_dtype(in);
    const std::vector<int64_t> a = read_ints(src1, g.src1_elems, in), b = read_ints(w, taps * c, wt);
    for (int64_t y = 0; y < g.out_h; ++y) {
      for (int64_t x = 0; x < g.out_w; ++x) {
        for (int64_t ch = 0; ch < c; ++ch) {
          uint64_t acc = 0;
          for (int64_t t = 0; t < taps; ++t) {
            acc += static_cast<uint64_t>(a[u(at(y, x, t / kw, t % kw) + ch)] * b[u(t * c + ch)]);
          }
          if (sum_t == DType::kInt64) {
            std::memcpy(dst + u((y * g.out_w + x) * c + ch) * 8, &acc, 8);
          } else {
            const auto v = static_cast<uint32_t>(acc);
            std::memcpy(dst + u((y * g.out_w + x) * c + ch) * 4, &v, 4);
          }
        }
      }
    }
    return;
  }
  const std::vector<float> a = read_floats(src1, g.src1_elems, in), b = read_floats(w, taps * c, wt);
  for (int64_t y = 0; y < g.out_h; ++y) {
    for (int64_t x = 0; x < g.out_w; ++x) {
      for (int64_t ch = 0; ch < c; ++ch) {
        float acc = 0.0f;
        for (int64_t t = 0; t < taps; ++t) acc = acc + a[u(at(y, x, t / kw, t % kw) + ch)] * b[u(t * c + ch)];
        store_float(dst + u((y * g.out_w + x) * c + ch) * 4, DType::kFp32, acc);
      }
    }
  }
}

}  // namespace

void execute_vec(const Instruction& ins, MachineState& st) {
  const VecGeometry g = vec_geometry(ins);
  const auto op = static_cast<VecOp>(ins.get(Field::kVop));
  const auto in = static_cast<DType>(ins.get(Field::kDtype));
  const auto out = static_cast<DType>(ins.get(Field::kDtypeOut));
  const auto bcast = static_cast<Bcast>(ins.get(Field::kBcast));
  const std::string what = describe(ins);
  const uint64_t es_in = u(isa::dtype_bytes(in)), es_out = u(isa::dtype_bytes(out));
  const uint8_t* s1 = st.sram_span(static_cast<isa::Buffer>(ins.get(Field::kSrc1Buf)),
                                   u(ins.get(Field::kSrc1Addr)), u(g.src1_elems) * es_in, what);
  // src2 is copied before anything is written, so dst may overlap it.
  std::vector<uint8_t> s2;
  if (g.src2_elems > 0) {
    const uint64_t n = u(g.src2_elems * g.src2_record_bytes);
    const uint8_t* p = st.sram_span(static_cast<isa::Buffer>(ins.get(Field::kSrc2Buf)),
                                    u(ins.get(Field::kSrc2Addr)), n, what);
    s2.assign(p, p + n);
  }
  uint8_t* dst = st.sram_span(static_cast<isa::Buffer>(ins.get(Field::kDstBuf)), u(ins.get(Field::kDstAddr)),
                              u(g.dst_elems) * es_out, what);
  const int64_t d0 = ins.get(Field::kD0), d1 = ins.get(Field::kD1), d2 = ins.get(Field::kD2);

  if (op == VecOp::kDwConv) {
    dwconv(ins, g, s1, s2.data(), dst);
    return;
  }
  if (op == VecOp::kOutput) {
    output_stage(ins, g, s1, s2.data(), dst);
    return;
  }
  if (op == VecOp::kLut) {  // entry code - base, an entry of dtype_out's codes (vec_geometry checked)
    // int8/uint8 codes: base dtype_min, 256 entries; int16 codes: base imm0, imm1 entries.
    const int64_t base = in == DType::kInt16 ? ins.get(Field::kImm0) : isa::numerics::dtype_min(in);
    const std::vector<int64_t> a = read_ints(s1, g.src1_elems, in);
    const std::vector<int64_t> table = read_ints(s2.data(), g.src2_elems, out);
    for (int64_t i = 0; i < g.dst_elems; ++i) {
      const int64_t k = a[u(i)] - base;
      if (k < 0 || k >= g.src2_elems)
        fail(ins, fmt::format("lut: code {} is outside the table's {} codes from {}", a[u(i)], g.src2_elems,
                              base));
      store_int(dst + u(i) * es_out, out, table[u(k)]);
    }
    return;
  }
  if (is_integer(in) && integer_capable(op)) {
    const std::vector<int64_t> a = read_ints(s1, g.src1_elems, in);
    std::vector<int64_t> r;
    if (op == VecOp::kRequantize) {
      r.resize(u(g.dst_elems));
      requantize(ins, g, a, s2.data(), r);
    } else {
      const std::vector<int64_t> b =
          vec_is_binary(op) ? read_ints(s2.data(), g.src2_elems, in) : std::vector<int64_t>{};
      r = Kernel<int64_t>{ins, op, d0, d1, d2, bcast, g}.run(a, b);
    }
    for (int64_t i = 0; i < g.dst_elems; ++i) store_int(dst + u(i) * es_out, out, r[u(i)]);
    return;
  }
  const std::vector<float> a = read_floats(s1, g.src1_elems, in);
  const std::vector<float> b =
      vec_is_binary(op) ? read_floats(s2.data(), g.src2_elems, in) : std::vector<float>{};
  const std::vector<float> r = Kernel<float>{ins, op, d0, d1, d2, bcast, g}.run(a, b);
  for (int64_t i = 0; i < g.dst_elems; ++i) store_float(dst + u(i) * es_out, out, r[u(i)]);
}

}  // namespace npusim::arch::datapath
