// fp16/bf16 conversions, saturation and requantization against first principles: the fp16/bf16
// decoders against the formula value = (-1)^s * 2^(e-bias) * (1.m), the encoders against a brute-force
// "nearest representable value, ties to even mantissa" search over the decoded table.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "arch/datapath/numerics.h"

namespace npusim::arch::datapath {
namespace {

using isa::DType;

// fp16 value from its fields, in double, straight from the IEEE definition.
double fp16_formula(uint16_t h) {
  const int s = h >> 15, e = (h >> 10) & 0x1f, m = h & 0x3ff;
  const double sign = s ? -1.0 : 1.0;
  if (e == 0x1f) return m ? std::numeric_limits<double>::quiet_NaN() : sign * INFINITY;
  if (e == 0) return sign * std::ldexp(m, -24);
  return sign * std::ldexp(1024 + m, e - 25);
}

TEST(Fp16, EveryEncodingDecodesToItsIeeeValue) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = fp16_to_fp32(static_cast<uint16_t>(h));
    const double want = fp16_formula(static_cast<uint16_t>(h));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(f)) << h;
      EXPECT_EQ(std::signbit(f), (h >> 15) != 0) << h;
    } else {
      EXPECT_EQ(static_cast<double>(f), want) << h;
      EXPECT_EQ(std::signbit(f), (h >> 15) != 0) << h;  // -0 stays -0
    }
  }
}

TEST(Fp16, AllEncodingsRoundTripThroughFp32) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const uint16_t back = fp32_to_fp16(fp16_to_fp32(static_cast<uint16_t>(h)));
    const bool nan = ((h >> 10) & 0x1f) == 0x1f && (h & 0x3ff) != 0;
    if (nan) {
      // A NaN stays a NaN of the same sign; signalling NaNs come back quiet.
      EXPECT_EQ(back & 0x7c00, 0x7c00) << h;
      EXPECT_NE(back & 0x3ff, 0) << h;
      EXPECT_EQ(back & 0x8000, h & 0x8000) << h;
      EXPECT_EQ(back & 0x200, 0x200) << h;
    } else {
      EXPECT_EQ(back, h) << h;
    }
  }
}

// Brute force: the finite fp16 encodings sorted by value; nearest wins, ties go to the even mantissa,
// beyond 65504 + half an ulp (65520) rounds to inf.
struct Fp16Reference {
  std::vector<std::pair<double, uint16_t>> positives;  // value, encoding (0x0000 .. 0x7bff)
  Fp16Reference() {
    for (uint32_t h = 0; h <= 0x7bff; ++h) positives.emplace_back(fp16_formula(static_cast<uint16_t>(h)), h);
  }
  uint16_t round(float f) const {
    const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
    const double a = std::fabs(static_cast<double>(f));
    if (a >= 65520.0) return sign | 0x7c00;
    auto hi = std::lower_bound(positives.begin(), positives.end(), std::make_pair(a, uint16_t{0}));
    if (hi == positives.end()) return sign | 0x7bff;  // (65504, 65520): below the tie with 2^16
    if (hi->first == a) return sign | hi->second;
    auto lo = hi - 1;
    const double dl = a - lo->first, dh = hi->first - a;
    if (dl < dh) return sign | lo->second;
    if (dh < dl) return sign | hi->second;
    return sign | ((lo->second & 1) ? hi->second : lo->second);
  }
};

TEST(Fp16, Fp32ToFp16MatchesNearestEvenReferenceOnAStrideOfAllFloats) {
  const Fp16Reference ref;
  // Every 997th fp32 encoding (about 4.3 million values, all exponents, both signs)...
  for (uint64_t x = 0; x < (uint64_t{1} << 32); x += 997) {
    const float f = fp32_from_bits(static_cast<uint32_t>(x));
    if (std::isnan(f)) continue;
    ASSERT_EQ(fp32_to_fp16(f), ref.round(f)) << std::hex << x;
  }
  // ...and every fp32 in the neighbourhood of each fp16 value and of each midpoint between two.
  for (uint32_t h = 0; h < 0x7c00; ++h) {
    const uint32_t center = fp32_bits(fp16_to_fp32(static_cast<uint16_t>(h)));
    const uint32_t mid = center + (h < 0x0400 ? 0 : 0x1000);  // normal fp16: midpoint is 2^12 fp32 ulps up
    for (uint32_t c : {center, mid}) {
      for (int d = -3; d <= 3; ++d) {
        const float f = fp32_from_bits(c + static_cast<uint32_t>(d));
        if (std::isnan(f) || std::isinf(f)) continue;
        ASSERT_EQ(fp32_to_fp16(f), ref.round(f)) << std::hex << (c + static_cast<uint32_t>(d));
        ASSERT_EQ(fp32_to_fp16(-f), ref.round(-f)) << std::hex << (c + static_cast<uint32_t>(d));
      }
    }
  }
}

TEST(Fp16, KnownRoundingCases) {
  EXPECT_EQ(fp32_to_fp16(1.0f), 0x3c00);
  EXPECT_EQ(fp32_to_fp16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);      // tie between 1 and 1+2^-10: even
  EXPECT_EQ(fp32_to_fp16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);  // tie between odd and even: up
  EXPECT_EQ(fp32_to_fp16(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)), 0x3c01);  // above the tie
  EXPECT_EQ(fp32_to_fp16(65504.0f), 0x7bff);
  EXPECT_EQ(fp32_to_fp16(65519.0f), 0x7bff);
  EXPECT_EQ(fp32_to_fp16(65520.0f), 0x7c00);  // the tie above max rounds to even = inf
  EXPECT_EQ(fp32_to_fp16(-1e9f), 0xfc00);
  EXPECT_EQ(fp32_to_fp16(INFINITY), 0x7c00);
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1.0f, -14)), 0x0400);               // smallest normal
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1.0f, -24)), 0x0001);               // smallest subnormal
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1.0f, -25)), 0x0000);               // half of it: ties to even (0)
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1.0f, -25) * 1.0000001f), 0x0001);  // just above half
  EXPECT_EQ(fp32_to_fp16(3 * std::ldexp(1.0f, -25)), 0x0002);           // 1.5 ulp: ties to even (2)
  EXPECT_EQ(fp32_to_fp16(-std::ldexp(1.0f, -26)), 0x8000);              // underflow keeps the sign
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1.0f, -14) - std::ldexp(1.0f, -25)), 0x0400);  // rounds up into normal
  EXPECT_EQ(fp32_to_fp16(0.1f), 0x2e66);
}

TEST(Bf16, AllEncodingsRoundTripThroughFp32) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const float f = bf16_to_fp32(static_cast<uint16_t>(b));
    EXPECT_EQ(fp32_bits(f), b << 16);
    const uint16_t back = fp32_to_bf16(f);
    if (std::isnan(f)) {
      EXPECT_EQ(back & 0x7f80, 0x7f80);
      EXPECT_NE(back & 0x7f, 0);
      EXPECT_EQ(back & 0x8000, b & 0x8000);
    } else {
      EXPECT_EQ(back, b);
    }
  }
}

TEST(Bf16, Fp32ToBf16IsNearestEven) {
  // Reference: the two bf16 neighbours are the truncation t and t+1 (in encoding order within a sign);
  // compare distances in double.
  for (uint64_t x = 0; x < (uint64_t{1} << 32); x += 101) {
    const float f = fp32_from_bits(static_cast<uint32_t>(x));
    if (std::isnan(f)) continue;
    const uint16_t t = static_cast<uint16_t>(x >> 16);
    const double lo = bf16_to_fp32(t), v = f;
    uint16_t want;
    if ((t & 0x7f80) == 0x7f80) {
      want = t;  // inf
    } else {
      const double hi = (static_cast<uint16_t>(t + 1) & 0x7fff) == 0x7f80
                            ? std::ldexp(std::copysign(1.0, v), 128)
                            : bf16_to_fp32(static_cast<uint16_t>(t + 1));
      const double dl = std::fabs(v - lo), dh = std::fabs(hi - v);
      want = (dl < dh || (dl == dh && (t & 1) == 0)) ? t : static_cast<uint16_t>(t + 1);
    }
    ASSERT_EQ(fp32_to_bf16(f), want) << std::hex << x;
  }
  EXPECT_EQ(fp32_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);          // tie: even
  EXPECT_EQ(fp32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);      // tie: up to even
  EXPECT_EQ(fp32_to_bf16(fp32_from_bits(0x7f7fffff)), 0x7f80);           // max float rounds to inf
  EXPECT_EQ(fp32_to_bf16(fp32_from_bits(0x7f800001)) & 0x7fc0, 0x7fc0);  // sNaN -> qNaN, not inf
}

TEST(Saturation, IntegersClampToTheirRange) {
  EXPECT_EQ(saturate_int8(127), 127);
  EXPECT_EQ(saturate_int8(128), 127);
  EXPECT_EQ(saturate_int8(-129), -128);
  EXPECT_EQ(saturate_uint8(-1), 0);
  EXPECT_EQ(saturate_uint8(256), 255);
  EXPECT_EQ(saturate_int32(int64_t{1} << 40), INT32_MAX);
  EXPECT_EQ(float_to_int(2.5f, DType::kInt8), 2);  // nearest even
  EXPECT_EQ(float_to_int(3.5f, DType::kInt8), 4);
  EXPECT_EQ(float_to_int(-2.5f, DType::kInt8), -2);
  EXPECT_EQ(float_to_int(300.0f, DType::kInt8), 127);
  EXPECT_EQ(float_to_int(-1.0f, DType::kUint8), 0);
  EXPECT_EQ(float_to_int(NAN, DType::kInt32), 0);
  EXPECT_EQ(float_to_int(INFINITY, DType::kInt32), INT32_MAX);
  EXPECT_EQ(float_to_int(-INFINITY, DType::kInt32), INT32_MIN);
}

// Independent forms: SRDHM = floor((a*b + 2^30) / 2^31) (round half up); RDBP = nearest, ties away.
int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }
int32_t srdhm_ref(int32_t a, int32_t b) {
  if (a == INT32_MIN && b == INT32_MIN) return INT32_MAX;
  return static_cast<int32_t>(floor_div(static_cast<int64_t>(a) * b + (int64_t{1} << 30), int64_t{1} << 31));
}
int32_t rdbp_ref(int32_t x, int e) {
  if (e == 0) return x;
  const int64_t half = int64_t{1} << (e - 1), d = int64_t{1} << e;
  return static_cast<int32_t>(x >= 0 ? (x + half) / d : -((-static_cast<int64_t>(x) + half) / d));
}

TEST(Requantize, HighMulAndDivideMatchTheirDefinitions) {
  uint64_t s = 0x9e3779b97f4a7c15ull;
  auto next = [&] {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return static_cast<int32_t>(s);
  };
  const int32_t edges[] = {0, 1, -1, 2, -2, 3, -3, INT32_MAX, INT32_MIN, INT32_MIN + 1, 1 << 30, -(1 << 30)};
  for (int32_t a : edges) {
    for (int32_t b : edges)
      EXPECT_EQ(saturating_rounding_doubling_high_mul(a, b), srdhm_ref(a, b)) << a << " " << b;
  }
  for (int i = 0; i < 200000; ++i) {
    const int32_t a = next(), b = next();
    ASSERT_EQ(saturating_rounding_doubling_high_mul(a, b), srdhm_ref(a, b)) << a << " " << b;
    const int e = static_cast<int>(static_cast<uint32_t>(next()) % 32);
    ASSERT_EQ(rounding_divide_by_pot(a, e), rdbp_ref(a, e)) << a << " " << e;
  }
  EXPECT_EQ(rounding_divide_by_pot(-3, 1), -2);  // -1.5: away from zero
  EXPECT_EQ(rounding_divide_by_pot(3, 1), 2);
  EXPECT_EQ(rounding_divide_by_pot(-5, 2), -1);                       // -1.25
  EXPECT_EQ(saturating_rounding_doubling_high_mul(3, 1 << 30), 2);    // 1.5 -> 2
  EXPECT_EQ(saturating_rounding_doubling_high_mul(-3, 1 << 30), -1);  // -1.5 -> -1 (half up)
}

TEST(Requantize, Int8ResultFollowsTheDocumentedFormula) {
  // Multiplier 0.75 (Q0.31), shift 4: 1000 * 0.75 / 16 = 46.875 -> 47, + zero point -3 = 44.
  const int32_t m = static_cast<int32_t>(0.75 * 2147483648.0);
  EXPECT_EQ(requantize_int8(1000, m, 4, -3), 44);
  EXPECT_EQ(requantize_int8(-1000, m, 4, -3), -50);  // -46.875 -> -47, -3
  EXPECT_EQ(requantize_int8(100000, m, 4, 0), 127);  // saturates
  EXPECT_EQ(requantize_int8(-100000, m, 4, 0), -128);
  // Negative shift = left shift before the high multiply: 10 * 4 * 0.75 = 30.
  EXPECT_EQ(requantize_int8(10, m, -2, 0), 30);
  EXPECT_EQ(requantize_unsaturated(INT32_MAX, INT32_MAX, 0, 0), INT32_MAX - 1);
}

// The 64-bit requantize (int16 layers' int64 sums) is the 32-bit formula wherever that one does not
// saturate, and keeps going where an int32 sum could not reach.
TEST(Requantize, SixtyFourBitFormEqualsThe32BitOneOnInt32SumsAndExtendsIt) {
  uint64_t s = 0x243f6a8885a308d3ull;
  auto next = [&] {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return s;
  };
  for (int i = 0; i < 200000; ++i) {
    const auto x = static_cast<int32_t>(next());
    const auto m = static_cast<int32_t>(next() & 0x7fffffff);
    const int shift = static_cast<int>(next() % 63) - 31;
    const auto zp = static_cast<int32_t>(static_cast<int64_t>(next() % 65536) - 32768);
    // The 32-bit left shift saturates x * 2^-shift to int32; compare where it does not.
    if (shift < 0 && (static_cast<int64_t>(x) * (int64_t{1} << -shift) > INT32_MAX ||
                      static_cast<int64_t>(x) * (int64_t{1} << -shift) < INT32_MIN))
      continue;
    ASSERT_EQ(requantize_unsaturated_64(x, m, shift, zp), requantize_unsaturated(x, m, shift, zp))
        << x << " " << m << " " << shift << " " << zp;
  }
  // 2^40 x 0.75 / 2^20 = 786432; -(2^40 + 2^19) x 0.5 / 2^20 = -524288.25 -> -524288 (then + zero point 3).
  const int32_t three_quarters = static_cast<int32_t>(0.75 * 2147483648.0);
  EXPECT_EQ(requantize_unsaturated_64(int64_t{1} << 40, three_quarters, 20, 0), 786432);
  EXPECT_EQ(requantize_unsaturated_64(-((int64_t{1} << 40) + (int64_t{1} << 19)), 1 << 30, 20, 3),
            -524288 + 3);
  // Half away from zero in the divide: (2^33 + 2^13) x 0.5 / 2^13 = 2^19 + 0.5 -> 2^19 + 1, and the negative
  // half away from zero too.
  EXPECT_EQ(requantize_unsaturated_64((int64_t{1} << 33) + (int64_t{1} << 13), 1 << 30, 13, 0),
            (1 << 19) + 1);
  EXPECT_EQ(requantize_unsaturated_64(-(int64_t{1} << 33) - (int64_t{1} << 13), 1 << 30, 13, 0),
            -(1 << 19) - 1);
  // A left shift that int32 would saturate: 2^31 x 2 x 0.5 = 2^31.
  EXPECT_EQ(requantize_unsaturated_64(int64_t{1} << 31, 1 << 30, -1, 0), int64_t{1} << 31);
}

TEST(Elements, Int16AndInt64AreLittleEndianAndSaturate) {
  uint8_t buf[8];
  store_int(buf, DType::kInt16, 40000);
  EXPECT_EQ(load_int(buf, DType::kInt16), 32767);
  store_int(buf, DType::kInt16, -40000);
  EXPECT_EQ(load_int(buf, DType::kInt16), -32768);
  store_int(buf, DType::kInt16, -2);
  EXPECT_EQ(buf[0], 0xfe);
  EXPECT_EQ(buf[1], 0xff);
  store_int(buf, DType::kInt64, -(int64_t{1} << 40) - 1);
  EXPECT_EQ(load_int(buf, DType::kInt64), -(int64_t{1} << 40) - 1);
  EXPECT_EQ(buf[0], 0xff);
  store_float(buf, DType::kInt16, 2.5f);  // nearest even
  EXPECT_EQ(load_int(buf, DType::kInt16), 2);
  EXPECT_EQ(isa::dtype_bytes(DType::kInt16), 2);
  EXPECT_EQ(isa::dtype_bytes(DType::kInt64), 8);
  EXPECT_EQ(accumulator_dtype(DType::kInt16), DType::kInt64);
  EXPECT_EQ(weight_dtype(DType::kInt16), DType::kInt8);
  EXPECT_EQ(accumulator_dtype(DType::kUint8), DType::kInt32);
}

TEST(Elements, LoadAndStoreEveryDtype) {
  uint8_t buf[4];
  store_float(buf, DType::kFp16, 1.5f);
  EXPECT_EQ(buf[0] | (buf[1] << 8), 0x3e00);
  EXPECT_EQ(load_float(buf, DType::kFp16), 1.5f);
  store_float(buf, DType::kBf16, -2.0f);
  EXPECT_EQ(buf[0] | (buf[1] << 8), 0xc000);
  store_int(buf, DType::kInt8, -300);
  EXPECT_EQ(load_int(buf, DType::kInt8), -128);
  store_int(buf, DType::kUint8, 300);
  EXPECT_EQ(load_int(buf, DType::kUint8), 255);
  store_int(buf, DType::kInt32, -123456789);
  EXPECT_EQ(load_int(buf, DType::kInt32), -123456789);
  EXPECT_EQ(buf[0], 0xeb);                 // little-endian
  store_int(buf, DType::kFp32, 16777217);  // 2^24 + 1 rounds to nearest even in fp32
  EXPECT_EQ(load_float(buf, DType::kFp32), 16777216.0f);
  store_float(buf, DType::kInt8, 2.5f);
  EXPECT_EQ(load_int(buf, DType::kInt8), 2);
}

}  // namespace
}  // namespace npusim::arch::datapath
