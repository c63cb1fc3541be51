#pragma once
// The one trace event record and the stall taxonomy. Every unit's cycles are busy, idle (nothing in
// its queue) or stalled for a Reason; events carry integers only (unit and layer indices), so
// emitting one costs no allocation and the output is deterministic.
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "isa/isa.h"

namespace npusim::traces {

enum class Kind : uint8_t { kBusy = 0, kStall = 1 };
inline constexpr std::array<std::string_view, 2> kKindNames = {"busy", "stall"};

// Why a unit is not doing useful work although it has an instruction.
enum class Reason : uint8_t {
  kNone = 0,
  kMemory = 1,        // waiting for DMA/DRAM (a token from the load or store queue, a DMA engine, DRAM)
  kBankConflict = 2,  // SRAM accesses colliding on a bank serialise (a kind of memory stall)
  kScheduling = 3,    // waiting for a token from the matrix or vector unit
  kQueueFull = 4,     // the sequencer cannot dispatch: the target queue is full
  kHost = 5,          // waiting for a token from a host call
};
inline constexpr int kNumReasons = 6;
inline constexpr std::array<std::string_view, kNumReasons> kReasonNames = {
    "none", "memory", "bank_conflict", "scheduling", "queue_full", "host"};

inline constexpr uint32_t kNoLayer = 0xffffffffu;

// One slice of one unit's timeline, in cycles [start, end).
struct Event {
  uint16_t unit = 0;  // index into TraceInfo::units
  Kind kind = Kind::kBusy;
  Reason reason = Reason::kNone;
  isa::Opcode opcode = isa::Opcode::kNop;
  uint32_t layer = kNoLayer;  // index into TraceInfo::layers
  int64_t instruction = -1;   // index in the program, -1 for none
  uint64_t start = 0;
  uint64_t end = 0;
  uint64_t bytes = 0;  // bytes moved (DMA, DRAM channel, host link)
};

// Names the events refer to, given to a sink before the first event.
struct TraceInfo {
  double frequency_mhz = 1000.0;
  std::vector<std::string> units;   // track names, in track order
  std::vector<std::string> layers;  // layer names
};

}  // namespace npusim::traces
