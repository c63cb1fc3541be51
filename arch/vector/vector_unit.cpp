#include "arch/vector/vector_unit.h"

#include <algorithm>
#include <array>

#include "arch/datapath/footprint.h"
#include "isa/timing/units.h"

namespace npusim::arch {

using isa::Field;

VectorUnit::VectorUnit(const sc_core::sc_module_name& name, const isa::VectorConfig& config, Fabric& fabric)
    : QueueUnit(name, fabric, isa::Queue::kVector), config_(config) {}

void VectorUnit::decode(const isa::Instruction& ins, Dispatch& d) const {
  d.work.vector = Dispatch::VectorWork{};
  Dispatch::VectorWork& w = d.work.vector;
  w.cycles = static_cast<uint64_t>(isa::timing::vec_cycles(ins, config_));
  // Operand bytes per scratchpad; each scratchpad touched is reserved once.
  const datapath::VecOperandBytes b = datapath::vec_operand_bytes(ins, datapath::vec_geometry_unchecked(ins));
  w.bytes[static_cast<size_t>(ins.get(Field::kSrc1Buf))] += b.src1;
  if (b.src2) w.bytes[static_cast<size_t>(ins.get(Field::kSrc2Buf))] += b.src2;
  w.bytes[static_cast<size_t>(ins.get(Field::kDstBuf))] += b.dst;
  w.src1 = b.src1;
  w.src2 = b.src2;
  w.dst = b.dst;
}

bool VectorUnit::advance(const Dispatch& d, uint64_t) {
  switch (step_) {
    case Step::kStart:
      break;
    case Step::kReserved:
      return compute(d);
    case Step::kDone:
      step_ = Step::kStart;
      fab_.complete(queue_, d.signal);
      return true;
  }
  fab_.execute(d.index);
  const uint64_t now = fab_.now();
  const Dispatch::VectorWork& w = d.work.vector;
  uint64_t start = now;
  auto* layer = fab_.rec.layer(d.layer);
  for (int b = 0; b < isa::kNumBuffers; ++b) {
    if (w.bytes[b])
      start = std::max(start, fab_.sram.reserve(static_cast<isa::Buffer>(b), w.bytes[b], now,
                                                layer ? &layer->bank_conflict_cycles : nullptr));
  }
  step_ = Step::kReserved;
  if (start > now) {
    fab_.rec.stall(unit_, d, traces::Reason::kBankConflict, now, start, true);
    resume_after(start - now);
    return false;
  }
  return compute(d);
}

bool VectorUnit::compute(const Dispatch& d) {
  const uint64_t start = fab_.now();
  const uint64_t cycles = d.work.vector.cycles;
  fab_.rec.busy(unit_, d, start, start + cycles, traces::Category::kCompute);
  if (auto* l = fab_.rec.layer(d.layer)) l->vector_cycles += cycles;
  step_ = Step::kDone;
  if (cycles > 0) {
    resume_after(cycles);
    return false;
  }
  step_ = Step::kStart;
  fab_.complete(queue_, d.signal);
  return true;
}

}  // namespace npusim::arch
