#pragma once
// What memory an instruction touches: the one definition shared by the functional executor (bounds
// checks), the SystemC timing model (capacity checks, bank-conflict accounting) and the compiler.
//
// SRAM ranges are byte ranges [begin, end) of one scratchpad. Dense operands (every LOAD destination,
// STORE source, VEC operand, MATMUL B and C, CONV A/B/C) are exact; a strided operand (PRELOAD with
// row_stride > cols, MATMUL A with a_stride > k) is given as its hull from the first to one past the
// last byte read. DRAM ranges are always hulls: a LOAD/STORE box of size1*size2*size3 rows is reported as
// [dram_addr, one past its highest byte), not row by row (the DMA timing model walks the rows itself).
//
// footprint() also validates the instruction's shape (sizes >= 1, enum fields in range, strides and
// windows that make sense, dtype combinations the opcode accepts) and that every SRAM range fits its
// scratchpad; it throws DatapathError naming the instruction, the buffer, the byte range and the
// capacity. So a footprint that returns is one the executor can run.
#include <cstdint>
#include <vector>

#include "arch/datapath/numerics.h"
#include "isa/isa.h"
#include "isa/machine/config.h"

namespace npusim::arch::datapath {

enum class Access : uint8_t { kRead = 0, kWrite = 1 };

struct SramRange {
  isa::Buffer buf;
  uint64_t begin;
  uint64_t end;
  Access access;
  uint64_t bytes() const { return end - begin; }
  bool operator==(const SramRange& o) const {
    return buf == o.buf && begin == o.begin && end == o.end && access == o.access;
  }
};

struct DramRange {
  uint64_t begin;
  uint64_t end;
  Access access;
  uint64_t bytes() const { return end - begin; }
  bool operator==(const DramRange& o) const { return begin == o.begin && end == o.end && access == o.access; }
};

struct Footprint {
  std::vector<SramRange> sram;  // reads first, then writes; accumulate=1 reads C before writing it
  std::vector<DramRange> dram;
};

// Throws DatapathError (see above). NOP, BARRIER, HALT and HOSTCALL touch no NPU memory (a host op's
// DRAM traffic is the host's business and is not described by the instruction).
Footprint footprint(const isa::Instruction& ins, const isa::NpuConfig& config);
// The same checks as footprint() without building the ranges (no allocation): the pre-run check.
void check_footprint(const isa::Instruction& ins, const isa::NpuConfig& config);

// ---- derived shapes the executor and footprint agree on ----------------------------------------

// A VEC instruction's operand sizes in elements (src2 in records: one element, or one 8-byte
// (multiplier, shift) pair for a per-channel requantize).
struct VecGeometry {
  int64_t src1_elems = 0;
  int64_t src2_elems = 0;  // 0: the op reads no src2
  int64_t src2_record_bytes = 0;
  int64_t dst_elems = 0;
  int64_t out_h = 0;  // pooling only
  int64_t out_w = 0;
};
// The bytes a VEC instruction reads from its src1 and src2 buffers and writes to its dst buffer.
struct VecOperandBytes {
  int64_t src1 = 0;
  int64_t src2 = 0;  // 0: the op reads no src2
  int64_t dst = 0;
};
VecOperandBytes vec_operand_bytes(const isa::Instruction& ins, const VecGeometry& g);
bool vec_is_binary(isa::VecOp op);  // reads src2 (add, sub, mul, div, max, min, pow)
// Validates the VEC fields (throws DatapathError) and returns the sizes.
VecGeometry vec_geometry(const isa::Instruction& ins);
// The same sizes without the checks, for an instruction that passed them (arch::check_program runs them
// before a simulation; the vector unit's decode then sizes every VEC again).
VecGeometry vec_geometry_unchecked(const isa::Instruction& ins);

// Whether a MATMUL/CONV takes A / B from the stationary register under the configured dataflow
// (preloaded=1: WS -> B, IS -> A; OS never).
bool a_from_stationary(const isa::Instruction& ins, const isa::NpuConfig& config);
bool b_from_stationary(const isa::Instruction& ins, const isa::NpuConfig& config);
// weight_dtype and accumulator_dtype (the element types of B and C for an input dtype) are
// isa/numerics.h's, re-exported by arch/datapath/numerics.h.

}  // namespace npusim::arch::datapath
