#pragma once
// Collects what the units report: per-unit busy/stall counters, per-layer counters, the cycle
// accounting (traces::Accounting) and, when a sink is attached, the trace events. Plain integers
// indexed by unit and layer; the hot path never looks up a string or allocates.
#include <array>
#include <cstdint>
#include <vector>

#include "arch/core/dispatch.h"
#include "isa/program.h"
#include "traces/accounting.h"
#include "traces/energy.h"
#include "traces/sink.h"

namespace npusim::arch {

class Recorder {
 public:
  struct UnitCounters {
    uint64_t instructions = 0;
    uint64_t busy = 0;
    std::array<uint64_t, traces::kNumReasons> stalls{};
  };
  struct LayerCounters {
    uint64_t compute_cycles = 0;  // matrix unit
    uint64_t vector_cycles = 0;
    uint64_t macs = 0;
    uint64_t instructions = 0;
    uint64_t dram_bytes_read = 0;       // LOADs of the layer
    uint64_t dram_bytes_written = 0;    // STOREs of the layer
    traces::Activity activity;          // actions that cost energy (arch/core/activity.h)
    uint64_t misaligned_bursts = 0;     // extra DMA bursts of the layer's misaligned rows
    uint64_t bank_conflict_cycles = 0;  // its instructions' waits on SRAM bank conflicts (Sram)
  };

  Recorder(const isa::Program& program, size_t units, traces::Sink* sink)
      : program_(program), units_(units), layers_(program.layers.size()), sink_(sink) {
    accounting_.reset(program.layers.size());
  }

  bool tracing() const { return sink_ != nullptr; }

  // A unit starts busy work [start, end) for instruction d. Must be called at simulated time
  // `start` (the accounting relies on starts arriving in order). Category: what the cycles count as.
  void busy(uint16_t unit, const Dispatch& d, uint64_t start, uint64_t end, traces::Category category,
            uint64_t bytes = 0) {
    units_[unit].busy += end - start;
    accounting_.add(d.layer, category, start, end);
    if (sink_)
      emit(unit, d.index, d.layer, d.opcode, traces::Kind::kBusy, traces::Reason::kNone, start, end, bytes);
  }
  // A unit was (or will be) stalled over [start, end) on instruction d. Memory stalls known when
  // they start (bank conflicts) are charged to memory in the accounting when `account` is set.
  void stall(uint16_t unit, const Dispatch& d, traces::Reason reason, uint64_t start, uint64_t end,
             bool account = false) {
    if (end <= start) return;
    units_[unit].stalls[static_cast<int>(reason)] += end - start;
    if (account) accounting_.add(d.layer, traces::Category::kMemory, start, end);
    if (sink_) emit(unit, d.index, d.layer, d.opcode, traces::Kind::kStall, reason, start, end, 0);
  }
  // The same for instruction `index` of the program (-1: none), not charged to memory.
  void stall(uint16_t unit, int64_t index, traces::Reason reason, uint64_t start, uint64_t end) {
    if (end <= start) return;
    units_[unit].stalls[static_cast<int>(reason)] += end - start;
    if (sink_) {
      const isa::Instruction* ins = index >= 0 ? &program_.instructions[index] : nullptr;
      emit(unit, index, ins ? ins->layer() : traces::kNoLayer, ins ? ins->opcode : isa::Opcode::kNop,
           traces::Kind::kStall, reason, start, end, 0);
    }
  }
  void count_instruction(uint16_t unit) { ++units_[unit].instructions; }
  // A trace-only slice (DRAM channel activity).
  void slice(uint16_t unit, const Dispatch& d, uint64_t start, uint64_t end, uint64_t bytes) {
    if (sink_)
      emit(unit, d.index, d.layer, d.opcode, traces::Kind::kBusy, traces::Reason::kNone, start, end, bytes);
  }
  LayerCounters* layer(uint32_t layer) { return layer < layers_.size() ? &layers_[layer] : nullptr; }

  const std::vector<UnitCounters>& units() const { return units_; }
  const std::vector<LayerCounters>& layers() const { return layers_; }
  const traces::Accounting& accounting() const { return accounting_; }

 private:
  void emit(uint16_t unit, int64_t index, uint32_t layer, isa::Opcode op, traces::Kind kind,
            traces::Reason reason, uint64_t start, uint64_t end, uint64_t bytes) {
    traces::Event e;
    e.unit = unit;
    e.kind = kind;
    e.reason = reason;
    e.opcode = op;
    e.layer = layer;
    e.instruction = index;
    e.start = start;
    e.end = end;
    e.bytes = bytes;
    sink_->event(e);
  }

  const isa::Program& program_;
  std::vector<UnitCounters> units_;
  std::vector<LayerCounters> layers_;
  traces::Accounting accounting_;
  traces::Sink* sink_;
};

}  // namespace npusim::arch
