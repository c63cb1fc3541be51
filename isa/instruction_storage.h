#pragma once
// The in-memory storage of a decoded Instruction (not its encoding): which bytes hold which field.
//
// A program holds one Instruction per instruction, so their size is the program's memory and the
// simulator's cache footprint: 64 bytes each, instead of one int64 per Field (528 bytes). Every
// field gets a byte slot wide enough for its widest format (wait/signal 1 byte, layer 2, a 16-bit
// size 2, a 40-bit address 5, ...). Fields that never occur in the same format may share bytes
// (VEC's d0 and LOAD's size0, say); a presence bit per field says which of them is set. Values that
// do not fit their slot, or a field set on top of a set field it shares bytes with (both only
// happen in instructions validate() rejects), move the instruction to a plain array of every
// field, so get() always returns exactly what set() stored.
//
// The allocator runs at compile time over isa/isa.h's format table (which instantiates it as
// storage::kSlots); it is written against the table's shape (a field spec has `field`, `width`,
// `kind`; a format has `num_fields` and `fields`) so that this header does not need isa.h.
#include <array>
#include <cstddef>
#include <cstdint>

namespace npusim::isa::storage {

inline constexpr int kHeaderFields = 3;  // wait, signal, layer: dedicated bytes, no presence bit
inline constexpr int kDataBytes = 47;    // with the opcode byte, presence bits and overflow pointer: 64

struct Slot {
  uint8_t offset = 0;  // first byte in Instruction's data
  uint8_t bytes = 0;   // little-endian, two's complement when is_signed
  bool is_signed = false;
  int8_t bit = -1;  // presence bit; -1 for the header fields
};

template <int NumFields, int NumOpcodes>
struct SlotTable {
  std::array<Slot, NumFields> slot{};
  std::array<uint64_t, NumFields> overlap{};     // presence bits of the other fields sharing bytes with it
  std::array<uint64_t, NumOpcodes> in_format{};  // presence bits of each opcode's fields
  int end = 0;                                   // bytes used
};

// Lays out the fields: the header's fields first in dedicated bytes, then the formats in `order`,
// each field at the lowest offset free among the fields of its format. A field no format has makes
// `end` too large (the caller's static_assert fails).
template <int NumFields, int NumOpcodes, class Spec, size_t NumHeader, class Formats, class Opcode,
          size_t NumOrder>
constexpr SlotTable<NumFields, NumOpcodes> make_slots(const Spec (&header)[NumHeader], const Formats& formats,
                                                      const Opcode (&order)[NumOrder]) {
  SlotTable<NumFields, NumOpcodes> t{};
  int width[NumFields] = {};
  bool is_signed[NumFields] = {};
  auto note = [&](const Spec& s) {
    const int i = static_cast<int>(s.field);
    if (s.width > width[i]) width[i] = s.width;
    if (s.kind == decltype(s.kind)::kSigned) is_signed[i] = true;
  };
  for (const Spec& s : header) note(s);
  for (const auto& fmt : formats) {
    for (int k = 0; k < fmt.num_fields; ++k) note(fmt.fields[k]);
  }
  bool placed[NumFields] = {};
  int next = 0;
  for (const Spec& s : header) {
    const int i = static_cast<int>(s.field);
    t.slot[i] = Slot{static_cast<uint8_t>(next), static_cast<uint8_t>((width[i] + 7) / 8), is_signed[i], -1};
    next += t.slot[i].bytes;
    placed[i] = true;
  }
  const int base = next;
  t.end = next;
  for (Opcode op : order) {
    const auto& fmt = formats[static_cast<size_t>(op)];
    bool used[kDataBytes + 8] = {};
    for (int k = 0; k < fmt.num_fields; ++k) {
      const int i = static_cast<int>(fmt.fields[k].field);
      if (!placed[i]) continue;
      for (int b = 0; b < t.slot[i].bytes; ++b) used[t.slot[i].offset + b] = true;
    }
    for (int k = 0; k < fmt.num_fields; ++k) {
      const int i = static_cast<int>(fmt.fields[k].field);
      if (placed[i]) continue;
      const int bytes = (width[i] + 7) / 8;
      int off = base;
      for (;; ++off) {
        bool free = true;
        for (int b = 0; b < bytes && free; ++b) free = off + b >= kDataBytes + 8 || !used[off + b];
        if (free) break;
      }
      t.slot[i] = Slot{static_cast<uint8_t>(off), static_cast<uint8_t>(bytes), is_signed[i],
                       static_cast<int8_t>(i - kHeaderFields)};
      for (int b = 0; b < bytes && off + b < kDataBytes + 8; ++b) used[off + b] = true;
      placed[i] = true;
      if (off + bytes > t.end) t.end = off + bytes;
    }
  }
  for (int i = kHeaderFields; i < NumFields; ++i) {
    if (!placed[i]) t.end = 1000;  // a field no format has
    for (int j = kHeaderFields; j < NumFields; ++j) {
      const Slot a = t.slot[i], b = t.slot[j];
      if (i != j && a.offset < b.offset + b.bytes && b.offset < a.offset + a.bytes) {
        t.overlap[i] |= uint64_t{1} << b.bit;
      }
    }
  }
  for (int op = 0; op < NumOpcodes; ++op) {
    for (int k = 0; k < formats[op].num_fields; ++k) {
      t.in_format[op] |= uint64_t{1} << t.slot[static_cast<int>(formats[op].fields[k].field)].bit;
    }
  }
  return t;
}

// True when no two fields of one format share bytes.
template <int NumFields, int NumOpcodes, class Formats>
constexpr bool formats_do_not_share_bytes(const SlotTable<NumFields, NumOpcodes>& slots,
                                          const Formats& formats) {
  for (const auto& fmt : formats) {
    for (int a = 0; a < fmt.num_fields; ++a) {
      for (int b = 0; b < fmt.num_fields; ++b) {
        const int i = static_cast<int>(fmt.fields[a].field), j = static_cast<int>(fmt.fields[b].field);
        if (i != j && (slots.overlap[i] >> slots.slot[j].bit) & 1) return false;
      }
    }
  }
  return true;
}

}  // namespace npusim::isa::storage
