#include "isa/numerics.h"

#include <cmath>
#include <stdexcept>
#include <string>

namespace npusim::isa::numerics {

float fp16_to_fp32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  if (exp == 0x1f) return fp32_from_bits(sign | 0x7f800000 | (mant << 13));  // inf / NaN
  if (exp != 0) return fp32_from_bits(sign | ((exp + 112) << 23) | (mant << 13));
  if (mant == 0) return fp32_from_bits(sign);
  // Subnormal: normalise. Value = mant * 2^-24; shift the leading one into the hidden bit.
  int e = 113;  // biased fp32 exponent of 2^-14
  while ((mant & 0x400) == 0) {
    mant <<= 1;
    --e;
  }
  return fp32_from_bits(sign | (static_cast<uint32_t>(e) << 23) | ((mant & 0x3ff) << 13));
}

uint16_t fp32_to_fp16(float f) {
  const uint32_t x = fp32_bits(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  const uint32_t ax = x & 0x7fffffff;
  if (ax > 0x7f800000) return static_cast<uint16_t>(sign | 0x7e00 | ((ax >> 13) & 0x3ff));  // NaN
  if (ax >= 0x477ff000) return static_cast<uint16_t>(sign | 0x7c00);  // >= 65520 (and inf): inf
  if (ax < 0x38800000) {                                              // below 2^-14: subnormal or 0
    if (ax <= 0x33000000) return sign;                                // <= 2^-25: ties to even = 0
    const uint32_t e = ax >> 23;
    const uint32_t m = (ax & 0x7fffff) | 0x800000;
    const uint32_t shift = 126 - e;  // value / 2^-24 = m * 2^(e-126)
    uint32_t r = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1))) ++r;
    return static_cast<uint16_t>(sign | r);
  }
  const uint32_t v = ax - 0x38000000;  // rebias exponent 127 -> 15
  uint32_t r = v >> 13;
  const uint32_t rem = v & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (r & 1))) ++r;  // a carry correctly bumps the exponent
  return static_cast<uint16_t>(sign | r);
}

uint16_t fp32_to_bf16(float f) {
  const uint32_t x = fp32_bits(f);
  if ((x & 0x7fffffff) > 0x7f800000) return static_cast<uint16_t>((x >> 16) | 0x40);
  const uint32_t rounded = x + 0x7fff + ((x >> 16) & 1);
  return static_cast<uint16_t>(rounded >> 16);
}

float round_to_precision(float x, DType t) {
  switch (t) {
    case DType::kFp16:
      return fp16_to_fp32(fp32_to_fp16(x));
    case DType::kBf16:
      return bf16_to_fp32(fp32_to_bf16(x));
    default:
      return x;
  }
}

int64_t dtype_min(DType t) {
  switch (t) {
    case DType::kInt8:
      return -128;
    case DType::kUint8:
      return 0;
    case DType::kInt16:
      return INT16_MIN;
    case DType::kInt64:
      return INT64_MIN;
    default:
      return INT32_MIN;
  }
}

int64_t dtype_max(DType t) {
  switch (t) {
    case DType::kInt8:
      return 127;
    case DType::kUint8:
      return 255;
    case DType::kInt16:
      return INT16_MAX;
    case DType::kInt64:
      return INT64_MAX;
    default:
      return INT32_MAX;
  }
}

int64_t float_to_int(float f, DType t) {
  if (std::isnan(f)) return 0;
  const double lo = static_cast<double>(dtype_min(t));
  const double hi = static_cast<double>(dtype_max(t));
  // nearbyint uses the current rounding mode, which is round-to-nearest-even unless someone changed it.
  const double r = std::nearbyint(static_cast<double>(f));
  if (r <= lo) return dtype_min(t);
  if (r >= hi) return dtype_max(t);
  return static_cast<int64_t>(r);
}

int32_t saturating_rounding_doubling_high_mul(int32_t a, int32_t b) {
  if (a == b && a == INT32_MIN) return INT32_MAX;
  const int64_t ab = static_cast<int64_t>(a) * b;
  const int64_t nudge = ab >= 0 ? (int64_t{1} << 30) : (1 - (int64_t{1} << 30));
  return static_cast<int32_t>((ab + nudge) / (int64_t{1} << 31));  // division truncates toward zero
}

int32_t rounding_divide_by_pot(int32_t x, int exponent) {
  const int32_t mask = static_cast<int32_t>((int64_t{1} << exponent) - 1);
  const int32_t remainder = x & mask;
  const int32_t threshold = (mask >> 1) + (x < 0 ? 1 : 0);
  return (x >> exponent) + (remainder > threshold ? 1 : 0);
}

int64_t requantize_unsaturated(int32_t x, int32_t multiplier, int32_t shift, int32_t zero_point) {
  int32_t y;
  if (shift >= 0) {
    y = rounding_divide_by_pot(saturating_rounding_doubling_high_mul(x, multiplier), shift);
  } else {
    const int32_t shifted = saturate_int32(static_cast<int64_t>(x) * (int64_t{1} << -shift));
    y = saturating_rounding_doubling_high_mul(shifted, multiplier);
  }
  return static_cast<int64_t>(y) + zero_point;
}

int64_t requantize_unsaturated_64(int64_t x, int32_t multiplier, int32_t shift, int32_t zero_point) {
  using I128 = __int128;
  const auto sat64 = [](I128 v) {
    return static_cast<int64_t>(v < INT64_MIN ? I128{INT64_MIN} : v > INT64_MAX ? I128{INT64_MAX} : v);
  };
  // SaturatingRoundingDoublingHighMul in 64 bits: (a*b + nudge) / 2^31, truncating, as the int32 form.
  const auto high_mul = [&](int64_t a) {
    const I128 ab = static_cast<I128>(a) * multiplier;
    const I128 nudge = ab >= 0 ? (I128{1} << 30) : (1 - (I128{1} << 30));
    return sat64((ab + nudge) / (I128{1} << 31));
  };
  int64_t y;
  if (shift >= 0) {
    const int64_t h = high_mul(x);
    // RoundingDivideByPOT: nearest, ties away from zero.
    const int64_t mask = static_cast<int64_t>((uint64_t{1} << shift) - 1);
    const int64_t remainder = h & mask;
    const int64_t threshold = (mask >> 1) + (h < 0 ? 1 : 0);
    y = (h >> shift) + (remainder > threshold ? 1 : 0);
  } else {
    y = high_mul(sat64(static_cast<I128>(x) * (I128{1} << -shift)));
  }
  return sat64(static_cast<I128>(y) + zero_point);
}

std::optional<QuantizedMultiplier> try_quantize_multiplier(double real) {
  if (!(real >= 0.0) || std::isinf(real)) return std::nullopt;
  QuantizedMultiplier r;
  if (real == 0.0) return r;
  int e = 0;
  const double q = std::frexp(real, &e);  // real = q * 2^e, q in [0.5, 1)
  int64_t q_fixed = static_cast<int64_t>(std::round(q * static_cast<double>(int64_t{1} << 31)));
  if (q_fixed == (int64_t{1} << 31)) {
    q_fixed /= 2;
    ++e;
  }
  if (e < -31) return r;  // below what a 31-bit right shift can express: flushes to zero, as TFLite
  if (e > 31) return std::nullopt;
  r.multiplier = static_cast<int32_t>(q_fixed);
  r.shift = -e;
  return r;
}

QuantizedMultiplier quantize_multiplier(double real) {
  if (!(real >= 0.0) || std::isinf(real)) {
    throw std::invalid_argument("quantize_multiplier: the real multiplier " + std::to_string(real) +
                                " is not a finite non-negative number");
  }
  const std::optional<QuantizedMultiplier> r = try_quantize_multiplier(real);
  if (!r) {
    throw std::invalid_argument("quantize_multiplier: the real multiplier " + std::to_string(real) +
                                " needs a left shift beyond 31 bits");
  }
  return *r;
}

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

float gelu(float x) { return 0.5f * x * (1.0f + std::erf(x * 0.70710678118654752440f)); }

float hard_sigmoid(float x, float alpha, float beta) {
  const float y = alpha * x + beta;
  if (std::isnan(y)) return y;
  return y < 0.0f ? 0.0f : (y > 1.0f ? 1.0f : y);
}

float hard_swish(float x) { return x * hard_sigmoid(x, 1.0f / 6.0f, 0.5f); }

}  // namespace npusim::isa::numerics
