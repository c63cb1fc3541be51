#include "arch/vector/vector_unit.h"

#include <algorithm>
#include <array>

#include "arch/datapath/footprint.h"
#include "isa/timing/units.h"

namespace npusim::arch {

using isa::Field;

VectorUnit::VectorUnit(const sc_core::sc_module_name& name, const isa::VectorConfig& config, traces::Sink*,
                       Fabric& fabric)
    : QueueUnit(name, fabric, isa::Queue::kVector), config_(config) {}

void VectorUnit::execute(const Dispatch& d, uint64_t) {
  const isa::Instruction& ins = fab_.program.instructions[d.index];
  fab_.execute(d.index);
  const uint64_t now = fab_.now();
  const uint64_t cycles = static_cast<uint64_t>(isa::timing::vec_cycles(ins, config_));
  // Operand bytes per scratchpad; each scratchpad touched is reserved once.
  const datapath::VecGeometry g = datapath::vec_geometry(ins);
  std::array<uint64_t, isa::kNumBuffers> bytes{};
  const int64_t in_b = isa::dtype_bytes(static_cast<isa::DType>(ins.get(Field::kDtype)));
  const int64_t out_b = isa::dtype_bytes(static_cast<isa::DType>(ins.get(Field::kDtypeOut)));
  bytes[static_cast<size_t>(ins.get(Field::kSrc1Buf))] += g.src1_elems * in_b;
  if (g.src2_elems) {
    bytes[static_cast<size_t>(ins.get(Field::kSrc2Buf))] +=
        g.src2_elems * (g.src2_record_bytes ? g.src2_record_bytes : in_b);
  }
  bytes[static_cast<size_t>(ins.get(Field::kDstBuf))] += g.dst_elems * out_b;
  uint64_t start = now;
  for (int b = 0; b < isa::kNumBuffers; ++b) {
    if (bytes[b]) start = std::max(start, fab_.sram.reserve(static_cast<isa::Buffer>(b), bytes[b], now));
  }
  if (start > now) {
    fab_.rec.stall(unit_, d.index, traces::Reason::kBankConflict, now, start, true);
    fab_.wait_cycles(start - now);
  }
  fab_.rec.busy(unit_, d.index, start, start + cycles, traces::Category::kCompute);
  if (auto* l = fab_.rec.layer(ins.layer())) l->vector_cycles += cycles;
  fab_.wait_cycles(cycles);
  fab_.complete(queue_, d.index);
}

}  // namespace npusim::arch
