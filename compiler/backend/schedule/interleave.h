#pragma once
// Neighbouring layers' instructions interleaved (docs/backend.md, "Neighbouring layers interleaved").
//
// Each unit runs its queue in program order, so a layer emitted after another waits on every unit for the
// other's last instruction there: a depthwise conv's VECs queue behind every epilogue of the MatMul before
// it, a MatMul's epilogues behind every tile of the LayerNorm before it, and the array idles while the
// vector unit works through them. interleave_order() merges the next layer's instructions into the tail
// of the program so that each unit's queue holds work of both where their data allow it.
//
// Correctness: the merge keeps each layer's own order, and places an instruction of the next layer only
// after every instruction of the earlier code that it, or an instruction of its layer before it, reads
// bytes written by, writes bytes read by, or writes bytes written by (SRAM and DRAM ranges as emitted:
// Access). Every pair of instructions that touch the same bytes, one of them writing, keeps its order, so
// the emitter, deriving the tokens for the new order, orders them on the units as before and every value
// read is the one read before: the results are bit for bit the same. Two more orders are kept whole: the
// array's queue (a PRELOAD's operand stays in the array for the MATMULs after it) and the host's; code
// holding a BARRIER or HALT is not merged.
#include <cstdint>
#include <vector>

#include "compiler/backend/core/emitter.h"
#include "isa/isa.h"
#include "isa/machine/config.h"

namespace npusim::compiler::backend {

// For each instruction of B = [b, code.size()): the last instruction of A = [0, b) it must follow (-1:
// none): the latest one it or an earlier instruction of B conflicts with. -2 for every one when the code
// cannot be merged (a BARRIER, HALT or HOSTCALL in it).
std::vector<int64_t> merge_limits(const std::vector<isa::Instruction>& code,
                                  const std::vector<Access>& access, size_t b);

// An order of instructions [0, code.size()) that keeps A's and B's own orders and merge_limits(), chosen by
// list scheduling: each unit's time estimated from isa/timing, the next instruction the one of A or B
// that could start first (A on a tie). The identity when nothing may move.
std::vector<int64_t> interleave_order(const std::vector<isa::Instruction>& code,
                                      const std::vector<Access>& access, size_t b,
                                      const isa::NpuConfig& config);

}  // namespace npusim::compiler::backend
