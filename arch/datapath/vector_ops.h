#pragma once
// The vector unit's functional semantics (VEC instruction). Rules beyond isa/isa.h's table:
//  - dtype is the type of src1 and src2, dtype_out the type of dst. Operands are dense boxes of
//    d2 x d1 x d0 elements (d0 innermost); dst may overlap the sources (all inputs are read first).
//    src2 broadcast: none = the same box, scalar = element 0, row = element i0 (a d0-vector),
//    col = element i2*d1 + i1 (one per d0-row). Unary ops require bcast = none and read no src2.
//  - Exact integer path: when dtype is an integer type, copy, add, sub, mul, div (truncating toward
//    zero; x/0 = 0), max, min, relu, abs, neg, max_pool, avg_pool, reduce_sum, reduce_max, reduce_mean,
//    transpose compute in 64-bit integers; integer averages (avg_pool, reduce_mean) round half away
//    from zero. Results saturate to an integer dtype_out, or convert through fp32 to a float one.
//  - Every other case computes in fp32 (integer sources converted to fp32 first): arithmetic is one
//    IEEE fp32 operation per step, the LUT activations use the C library's fp32 functions (sigmoid =
//    1/(1+exp(-x)), gelu = 0.5x(1+erf(x/sqrt 2)), rsqrt = 1/sqrt(x)), and the result is rounded to
//    dtype_out (fp16/bf16: nearest even; integers: nearest even, saturated, NaN -> 0). max/min/relu
//    propagate NaN; relu(-0) = +0.
//  - Immediates used as reals (leaky_relu alpha, clip bounds, hard_sigmoid alpha/beta) are fp32 bit
//    patterns in the low 32 bits of imm0/imm1.
//  - avg_pool divides by the full window (win_h*win_w), halo included (count_include_pad).
//  - reduce_*: the sum/max/mean of the d0 elements of each (i2, i1) row, in i0 order.
//  - requantize: numerics.h. bcast=none: imm0 = multiplier, imm1 = shift for every element. bcast
//    row/col/scalar: src2 holds little-endian int32 pairs (multiplier, shift), broadcast per bcast
//    (row = one pair per channel i0), and imm0/imm1 must be 0. imm2 is the zero point.
//  - lut: src1 codes (int8/uint8) index the 256-entry table at src2 (codes of dtype_out, int8/uint8):
//    dst = table[code - dtype_min(dtype)], exactly; bcast none, no immediates.
//  - dwconv: src2 holds win_h*win_w*d0 weights (weight_dtype(dtype), footprint.h), dst the
//    accumulator_dtype(dtype) sums. Each sum starts at 0 and adds the window's products in (i, j) order:
//    integers (codes as stored, no zero point: the caller folds -zp * sum(w) into its bias, as for
//    CONV) multiply exactly and add modulo 2^32; floats multiply and add in fp32, one rounding per
//    operation (fp16/bf16 products are exact), whatever systolic_array.fp16_accumulate_fp32 says.
#include "arch/datapath/footprint.h"
#include "arch/datapath/state.h"

namespace npusim::arch::datapath {

void execute_vec(const isa::Instruction& ins, MachineState& state);

}  // namespace npusim::arch::datapath
