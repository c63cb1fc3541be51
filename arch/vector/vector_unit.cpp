#include "arch/vector/vector_unit.h"

#include <algorithm>
#include <array>

#include "arch/datapath/footprint.h"
#include "isa/timing/units.h"

namespace npusim::arch {

using isa::Field;

VectorUnit::VectorUnit(const sc_core::sc_module_name& name, const isa::VectorConfig& config, Fabric& fabric,
                       uint16_t stage_unit)
    : QueueUnit(name, fabric, isa::Queue::kVector), config_(config), stage_unit_(stage_unit) {
  SC_METHOD(retire);
  sensitive << retire_event_;
  dont_initialize();
}

void VectorUnit::decode(const isa::Instruction& ins, Dispatch& d) const {
  d.work.vector = Dispatch::VectorWork{};
  Dispatch::VectorWork& w = d.work.vector;
  w.stage = isa::timing::on_output_stage(ins, fab_.config);
  w.cycles = static_cast<uint64_t>(w.stage ? isa::timing::output_stage_cycles(ins, fab_.config)
                                           : isa::timing::vec_cycles(ins, config_));
  // Operand bytes per scratchpad; each scratchpad touched is reserved once.
  const datapath::VecOperandBytes b = datapath::vec_operand_bytes(ins, datapath::vec_geometry_unchecked(ins));
  w.bytes[static_cast<size_t>(ins.get(Field::kSrc1Buf))] += b.src1;
  if (b.src2) w.bytes[static_cast<size_t>(ins.get(Field::kSrc2Buf))] += b.src2;
  w.bytes[static_cast<size_t>(ins.get(Field::kDstBuf))] += b.dst;
  w.src1 = b.src1;
  w.src2 = b.src2;
  w.dst = b.dst;
  const isa::SramConfig& sram = fab_.config.sram;
  const std::array<Field, 3> bufs = {Field::kSrc1Buf, Field::kSrc2Buf, Field::kDstBuf};
  const std::array<Field, 3> addrs = {Field::kSrc1Addr, Field::kSrc2Addr, Field::kDstAddr};
  for (size_t k = 0; k < 3; ++k) {
    w.buf[k] = static_cast<uint8_t>(sram.storage(static_cast<isa::Buffer>(ins.get(bufs[k]))));
    w.addr[k] = static_cast<uint32_t>(ins.get(addrs[k]));
  }
}

bool VectorUnit::hazard(const Dispatch::VectorWork& w) const {
  const std::array<int64_t, 3> a = {w.src1, w.src2, w.dst},
                               s = {stage_work_.src1, stage_work_.src2, stage_work_.dst};
  for (size_t i = 0; i < 3; ++i) {
    for (size_t j = 0; j < 3; ++j) {
      if (a[i] == 0 || s[j] == 0 || (i != 2 && j != 2) || w.buf[i] != stage_work_.buf[j]) continue;
      const uint64_t b0 = w.addr[i], e0 = b0 + static_cast<uint64_t>(a[i]);
      const uint64_t b1 = stage_work_.addr[j], e1 = b1 + static_cast<uint64_t>(s[j]);
      if (b0 < e1 && b1 < e0) return true;
    }
  }
  return false;
}

void VectorUnit::retire_at(uint64_t cycle, uint8_t signal) {
  if (pending_.empty() && cycle <= fab_.now()) {
    fab_.complete(queue_, signal);
    return;
  }
  cycle = std::max(cycle, pending_.empty() ? cycle : pending_.back().cycle);
  if (pending_.empty()) retire_event_.notify(fab_.cycles_time(cycle - fab_.now()));
  pending_.push_back({cycle, signal});
}

void VectorUnit::retire() {
  const uint64_t now = fab_.now();
  while (!pending_.empty() && pending_.front().cycle <= now) {
    fab_.complete(queue_, pending_.front().signal);
    pending_.pop_front();
  }
  if (!pending_.empty()) retire_event_.notify(fab_.cycles_time(pending_.front().cycle - now));
}

bool VectorUnit::advance(const Dispatch& d, uint64_t) {
  const Dispatch::VectorWork& w = d.work.vector;
  switch (step_) {
    case Step::kStart:
      break;
    case Step::kReserved:
      return compute(d);
    case Step::kDone:
      step_ = Step::kStart;
      retire_at(fab_.now(), d.signal);
      return true;
  }
  const uint64_t now = fab_.now();
  // The output stage holds one instruction; a lane instruction waits for it only on a shared operand.
  if (stage_free_ > now && (w.stage || hazard(w))) {
    resume_after(stage_free_ - now);
    return false;
  }
  fab_.execute(d.index);
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
  if (d.work.vector.stage) {
    // On the output stage: the lanes are free for the next instruction now.
    stage_free_ = start + cycles;
    stage_work_ = d.work.vector;
    if (stage_unit_ != kNoTrack) {
      fab_.rec.count_instruction(stage_unit_);
      fab_.rec.busy(stage_unit_, d, start, stage_free_, traces::Category::kCompute);
    }
    step_ = Step::kStart;
    retire_at(stage_free_, d.signal);
    return true;
  }
  fab_.rec.busy(unit_, d, start, start + cycles, traces::Category::kCompute);
  if (auto* l = fab_.rec.layer(d.layer)) l->vector_cycles += cycles;
  step_ = Step::kDone;
  if (cycles > 0) {
    resume_after(cycles);
    return false;
  }
  step_ = Step::kStart;
  retire_at(start, d.signal);
  return true;
}

}  // namespace npusim::arch
