#pragma once
// Number formats of the NPU datapath. The pure conversions and the requantization (fp16/bf16 <-> fp32,
// saturation, gemmlowp/TFLite requantize, multiplier derivation) live in isa/numerics.h so the compiler
// can predict the datapath's numbers without linking arch; they are re-exported here under their
// datapath names. This header adds loading/storing one element of any isa::DType from raw bytes.
#include <cstdint>
#include <cstring>

#include "isa/isa.h"
#include "isa/numerics.h"

namespace npusim::arch::datapath {

// An element count or index as the unsigned type containers take (the datapath checks signs first).
inline uint64_t u(int64_t v) { return static_cast<uint64_t>(v); }

using isa::numerics::accumulator_dtype;
using isa::numerics::bf16_to_fp32;
using isa::numerics::clamp_i64;
using isa::numerics::dtype_max;
using isa::numerics::dtype_min;
using isa::numerics::float_to_int;
using isa::numerics::fp16_to_fp32;
using isa::numerics::fp32_bits;
using isa::numerics::fp32_from_bits;
using isa::numerics::fp32_to_bf16;
using isa::numerics::fp32_to_fp16;
using isa::numerics::is_integer;
using isa::numerics::quantize_multiplier;
using isa::numerics::QuantizedMultiplier;
using isa::numerics::requantize_int8;
using isa::numerics::requantize_unsaturated;
using isa::numerics::requantize_unsaturated_64;
using isa::numerics::round_to_precision;
using isa::numerics::rounding_divide_by_pot;
using isa::numerics::saturate_int16;
using isa::numerics::saturate_int32;
using isa::numerics::saturate_int8;
using isa::numerics::saturate_uint8;
using isa::numerics::saturating_rounding_doubling_high_mul;
using isa::numerics::weight_dtype;

// ---- elements in memory ------------------------------------------------------------------------

// Reads one element of `t` (little-endian) and returns it as fp32 (integers convert, int32 rounds).
float load_float(const uint8_t* p, isa::DType t);
// Reads one element of an integer type. Float types: rounded to nearest even and saturated to int64
// range is never needed by callers, so it is an internal error to call this on a float type.
int64_t load_int(const uint8_t* p, isa::DType t);
// Writes fp32 `v` as `t`: fp16/bf16 round to nearest even, integers round to nearest even and saturate.
void store_float(uint8_t* p, isa::DType t, float v);
// Writes integer `v` as `t`: integers saturate; float types convert through fp32 (int64 -> fp32 rounds
// to nearest even, then fp32 -> fp16/bf16 rounds again).
void store_int(uint8_t* p, isa::DType t, int64_t v);

}  // namespace npusim::arch::datapath
