#pragma once
// The functional semantics of every instruction on real bytes, exactly as isa/isa.h documents them.
// The SystemC units call execute() once per instruction (at the point in simulated time where the
// instruction's effect becomes visible); the timing is theirs, the values are computed here.
//
// Summary of the numeric rules (isa/isa.h has the per-opcode text):
//  - MATMUL/CONV: int8 x int8 and uint8 x int8 -> int32 accumulate exactly, wrapping modulo 2^32 like
//    a hardware adder; int16 x int8 -> int64 likewise (modulo 2^64; C has 8-byte elements). fp16/bf16 inputs:
//    each product is exact in fp32; with systolic_array.fp16_accumulate_fp32 the running sum is fp32 (acc =
//    fp32(acc + a*b)), otherwise it is rounded to the input precision after every addition (acc =
//    round_in(fp32(acc + a*b)), and an accumulated C is first rounded to the input precision); results are
//    stored as fp32. fp32 inputs accumulate in fp32 (product and sum each rounded, never fused). For every
//    output element the additions happen in one running sum starting from C (accumulate=1) or 0, whatever
//    the dataflow and the array's row folds (pe_array.h steps them), so WS, OS and IS give identical bits:
//    MATMUL adds in k order, CONV channel-major (each input channel's taps in (i, j) order, ONNX's
//    [O][C][kh][kw]), so that CONVs over channel chunks accumulating onto each other add in one order
//    whatever the chunk, and as a MATMUL over an im2col matrix in ONNX's column order.
//  - VEC: see vector_ops.h.
#include "arch/datapath/state.h"
#include "isa/isa.h"
#include "isa/machine/config.h"

namespace npusim::arch::datapath {

// Executes one instruction. Throws DatapathError (with the instruction named) when it cannot run:
// out-of-capacity SRAM access, malformed shape, MATMUL with preloaded=1 whose stationary operand does
// not match, etc. On a throw the state may be partially updated only for HOSTCALL handlers.
void execute(const isa::Instruction& ins, const isa::NpuConfig& config, MachineState& state);

}  // namespace npusim::arch::datapath
