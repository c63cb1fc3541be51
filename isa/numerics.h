#pragma once
// Exact number formats shared by the compiler and the hardware models: fp16/bf16 <-> fp32 conversion,
// integer saturation, the gemmlowp/TFLite requantization and the derivation of its integer multiplier
// and shift. The functional datapath (arch/datapath) executes exactly these functions and the
// compiler's quantized reference (compiler/quant) predicts with them, so "what the compiler expects"
// and "what the NPU computes" cannot drift apart. Plain C++: no SystemC, no ONNX.
//
// Every rounding here is round-to-nearest, ties-to-even unless stated otherwise, so results are a
// property of the formats, not of the host compiler.
#include <cstdint>
#include <cstring>
#include <optional>

#include "isa/isa.h"

namespace npusim::isa::numerics {

// ---- floating point --------------------------------------------------------------------------

inline uint32_t fp32_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float fp32_from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// IEEE binary16 -> binary32: exact (every fp16 value, subnormals included, is an fp32 value).
// A NaN keeps its sign and payload (shifted into the top of the fp32 mantissa).
float fp16_to_fp32(uint16_t h);
// binary32 -> binary16, round to nearest even. |x| >= 65520 becomes inf; results below 2^-14 become
// fp16 subnormals (2^-25 itself ties to +-0). A NaN stays a NaN of the same sign with the quiet bit set
// and the top 9 payload bits kept.
uint16_t fp32_to_fp16(float f);

// bfloat16 -> binary32: exact (the high half of the fp32 encoding).
inline float bf16_to_fp32(uint16_t b) { return fp32_from_bits(static_cast<uint32_t>(b) << 16); }
// binary32 -> bfloat16, round to nearest even; overflow rounds to inf; NaN stays a quiet NaN of the
// same sign (rounding must not carry a NaN payload into inf).
uint16_t fp32_to_bf16(float f);

// Rounds an fp32 value to the precision of `t` and back (fp16/bf16; fp32 and integer types: identity).
float round_to_precision(float x, DType t);

// ---- integers --------------------------------------------------------------------------------

inline int64_t clamp_i64(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : (v > hi ? hi : v); }
inline int8_t saturate_int8(int64_t v) { return static_cast<int8_t>(clamp_i64(v, -128, 127)); }
inline uint8_t saturate_uint8(int64_t v) { return static_cast<uint8_t>(clamp_i64(v, 0, 255)); }
inline int16_t saturate_int16(int64_t v) { return static_cast<int16_t>(clamp_i64(v, INT16_MIN, INT16_MAX)); }
inline int32_t saturate_int32(int64_t v) { return static_cast<int32_t>(clamp_i64(v, INT32_MIN, INT32_MAX)); }

// Range of an integer dtype (int8, uint8, int16, int32, int64).
int64_t dtype_min(DType t);
int64_t dtype_max(DType t);
constexpr bool is_integer(DType t) {
  return t == DType::kInt8 || t == DType::kUint8 || t == DType::kInt16 || t == DType::kInt32 ||
         t == DType::kInt64;
}
// The element type of B (and of a WS stationary operand, and of dwconv weights) for a MATMUL/CONV of
// input dtype `a`: int8 for uint8 and int16 activations, otherwise `a`.
constexpr DType weight_dtype(DType a) { return a == DType::kUint8 || a == DType::kInt16 ? DType::kInt8 : a; }
// The accumulator type of the array for operand type `a`: int32 for int8/uint8, int64 for int16 (see
// isa.h's DType), fp32 for floats. The one place that decides it: the datapath, the simulator's
// footprints and the compiler's tiles read it here.
constexpr DType accumulator_dtype(DType a) {
  return a == DType::kInt16                                                ? DType::kInt64
         : (a == DType::kInt8 || a == DType::kUint8 || a == DType::kInt32) ? DType::kInt32
                                                                           : DType::kFp32;
}

// fp32 -> integer of `t`: round to nearest even, saturate to the type's range, NaN -> 0.
int64_t float_to_int(float f, DType t);

// ---- requantization (gemmlowp / TFLite reference semantics) -------------------------------------
//
// The VEC requantize op maps an int32 accumulator x to an int8 (or uint8/int32) output with a 32-bit
// fixed-point multiplier M (imm0, a Q0.31 value: real multiplier = M / 2^31), a shift s (imm1) and a
// zero point z (imm2):
//
//   s >= 0 (right shift):  y = RoundingDivideByPOT(SaturatingRoundingDoublingHighMul(x, M), s)
//   s <  0 (left shift):   y = SaturatingRoundingDoublingHighMul(sat32(x * 2^-s), M)
//   result = saturate_to_output_type(y + z)
//
// SaturatingRoundingDoublingHighMul(a, b) = floor((a*b + 2^30) / 2^31) computed exactly in 64 bits
//   (round half up), except a == b == INT32_MIN which saturates to INT32_MAX.
// RoundingDivideByPOT(x, s) = x / 2^s rounded to nearest, ties away from zero; s in [0, 31].
// So the real-valued result is approximately x * (M / 2^31) * 2^-s + z. This is gemmlowp's
// fixedpoint.h and TFLite's MultiplyByQuantizedMultiplier, except that TFLite's sign convention
// for the shift is the opposite (there positive means left) and its left shift is not saturating.
int32_t saturating_rounding_doubling_high_mul(int32_t a, int32_t b);
int32_t rounding_divide_by_pot(int32_t x, int exponent);
// The formula above without the final saturation: returns y + z in 64 bits. shift in [-31, 31].
int64_t requantize_unsaturated(int32_t x, int32_t multiplier, int32_t shift, int32_t zero_point);
// The same formula for an int64 accumulator (int16 layers): the two roundings computed exactly in
// 128 bits, SaturatingRoundingDoublingHighMul saturating to int64 and the left shift saturating x * 2^-s
// to int64. Equal to requantize_unsaturated for every int32 x whose left shift does not saturate int32.
int64_t requantize_unsaturated_64(int64_t x, int32_t multiplier, int32_t shift, int32_t zero_point);
inline int8_t requantize_int8(int32_t x, int32_t multiplier, int32_t shift, int32_t zero_point) {
  return saturate_int8(requantize_unsaturated(x, multiplier, shift, zero_point));
}

// An integer multiplier and shift in the VEC requantize convention: real ~= multiplier / 2^31 * 2^-shift.
struct QuantizedMultiplier {
  int32_t multiplier = 0;  // Q0.31, in [2^30, 2^31) for a non-zero real; 0 for real == 0
  int32_t shift = 0;       // >= 0 shifts right, < 0 shifts left; in [-31, 31]
};

// TFLite's QuantizeMultiplier (tensorflow/lite/kernels/internal/quantization_util.cc): frexp splits
// real = q * 2^e with q in [0.5, 1); multiplier = round(q * 2^31) (half away from zero, as std::round),
// and a multiplier that rounds up to 2^31 becomes 2^30 with e + 1. Returned with this ISA's shift sign
// (shift = -e). Reals so small that e < -31 flush to multiplier 0 (TFLite does the same); e > 31
// (real >= 2^31) throws std::invalid_argument. Negative reals are not requantization scales: throws.
QuantizedMultiplier quantize_multiplier(double real);
// The same without throwing: nullopt where quantize_multiplier throws (not finite, negative, >= 2^31).
std::optional<QuantizedMultiplier> try_quantize_multiplier(double real);

// Activation functions in fp32, defined once for the vector unit of the functional datapath, the
// quantized reference (compiler/quant/emulate) and the FP32 interpreter, so their results are the
// same bits (an int8 layer's codes must not depend on which of them computed its float epilogue).
float sigmoid(float x);                                // 1 / (1 + exp(-x))
float gelu(float x);                                   // erf form: 0.5 x (1 + erf(x / sqrt(2)))
float hard_sigmoid(float x, float alpha, float beta);  // clamp(alpha x + beta, 0, 1); NaN stays NaN
float hard_swish(float x);                             // x * hard_sigmoid(x, 1/6, 1/2)

}  // namespace npusim::isa::numerics
