#include "isa/isa.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <utility>

namespace npusim::isa {
namespace {

// Bit access over a little-endian array of 64-bit halves (two per 128-bit word). A field is at most
// 63 bits wide, so it spans at most two halves.
inline uint64_t get_bits(const uint64_t* w, int lo, int width) {
  const int off = lo % 64;
  uint64_t v = w[lo / 64] >> off;
  if (off + width > 64) v |= w[lo / 64 + 1] << (64 - off);
  return v & ((uint64_t{1} << width) - 1);
}

constexpr void set_bits(uint64_t* w, int lo, int width, uint64_t v) {
  const uint64_t mask = (uint64_t{1} << width) - 1;
  v &= mask;
  const int off = lo % 64;
  w[lo / 64] = (w[lo / 64] & ~(mask << off)) | (v << off);
  if (off + width > 64) {
    const int rest = off + width - 64;
    const uint64_t hi_mask = (uint64_t{1} << rest) - 1;
    w[lo / 64 + 1] = (w[lo / 64 + 1] & ~hi_mask) | (v >> (64 - off));
  }
}

// Per opcode, the bits its opcode byte, header and fields occupy; a decoder rejects any other set bit.
using UsedBits = std::array<std::array<uint64_t, 2 * kMaxWords>, kNumOpcodes>;
constexpr UsedBits make_used_bits() {
  UsedBits u{};
  for (int op = 0; op < kNumOpcodes; ++op) {
    uint64_t* w = u[op].data();
    set_bits(w, 0, 8, 0xff);
    for (const FieldSpec& s : layout::kHeader) set_bits(w, s.lo, s.width, ~uint64_t{0});
    for (int i = 0; i < kFormats[op].num_fields; ++i) {
      set_bits(w, kFormats[op].fields[i].lo, kFormats[op].fields[i].width, ~uint64_t{0});
    }
  }
  return u;
}
constexpr UsedBits kUsedBits = make_used_bits();

template <class Fn>
void for_each_field(const Format& fmt, Fn&& fn) {
  for (const FieldSpec& s : layout::kHeader) fn(s);
  for (int i = 0; i < fmt.num_fields; ++i) fn(fmt.fields[i]);
}

bool fits(const FieldSpec& s, int64_t v) {
  if (s.kind == FieldKind::kSigned) {
    const int64_t lim = int64_t{1} << (s.width - 1);
    return v >= -lim && v < lim;
  }
  return v >= 0 && (s.width >= 63 || v < (int64_t{1} << s.width));
}

// Largest value an enumerated field may hold (the enum's range, which may be below its width).
constexpr int64_t enum_limit(FieldKind k) {
  switch (k) {
    case FieldKind::kDType:
      return kNumDTypes;
    case FieldKind::kBuffer:
      return kNumBuffers;
    case FieldKind::kVecOp:
      return kNumVecOps;
    case FieldKind::kBcast:
      return kNumBcasts;
    case FieldKind::kQueueMask:
      return int64_t{1} << kNumQueues;
    default:
      return -1;
  }
}

// The assembly name of a field, from the first format that has it (names agree across formats).
std::string_view field_name(Field f) {
  for (const FieldSpec& s : layout::kHeader) {
    if (s.field == f) return s.name;
  }
  for (const Format& fmt : kFormats) {
    for (int i = 0; i < fmt.num_fields; ++i) {
      if (fmt.fields[i].field == f) return fmt.fields[i].name;
    }
  }
  return "?";
}

}  // namespace

std::optional<Opcode> opcode_from_mnemonic(std::string_view mnemonic) {
  for (const Format& f : kFormats) {
    if (f.mnemonic.size() != mnemonic.size()) continue;
    bool same = true;
    for (size_t i = 0; i < mnemonic.size() && same; ++i) {
      same = std::toupper(static_cast<unsigned char>(mnemonic[i])) == f.mnemonic[i];
    }
    if (same) return f.opcode;
  }
  return std::nullopt;
}

namespace {

// The full check, which names the first bad field.
std::string validate_slow(const Instruction& ins) {
  if (static_cast<int>(ins.opcode) >= kNumOpcodes) {
    return fmt::format("opcode {} does not exist", static_cast<int>(ins.opcode));
  }
  const Format& fmt = format(ins.opcode);
  std::array<bool, kNumFields> used{};
  std::string err;
  for_each_field(fmt, [&](const FieldSpec& s) {
    used[static_cast<int>(s.field)] = true;
    const int64_t v = ins.get(s.field);
    if (!err.empty()) return;
    if (const int64_t lim = enum_limit(s.kind); lim >= 0) {
      // Enumerated fields are checked against their names, which may be fewer than their width allows.
      if (v < 0 || v >= lim) {
        err =
            fmt::format("{} field '{}' = {} is not a valid value (0..{})", fmt.mnemonic, s.name, v, lim - 1);
      }
    } else if (!fits(s, v)) {
      err = s.kind == FieldKind::kSigned
                ? fmt::format("{} field '{}' = {} does not fit in {} signed bits ({}..{})", fmt.mnemonic,
                              s.name, v, s.width, -(int64_t{1} << (s.width - 1)),
                              (int64_t{1} << (s.width - 1)) - 1)
                : fmt::format("{} field '{}' = {} does not fit in {} bits (0..{})", fmt.mnemonic, s.name, v,
                              s.width, (uint64_t{1} << s.width) - 1);
    }
  });
  if (!err.empty()) return err;
  // STORE shares LOAD's format but writes no halo (isa.h), so its padding fields must stay zero.
  if (ins.opcode == Opcode::kStore) {
    for (const FieldSpec& s : layout::kDma) {
      if ((s.field == Field::kPadTop || s.field == Field::kPadBottom || s.field == Field::kPadLeft ||
           s.field == Field::kPadRight || s.field == Field::kPadValue) &&
          ins.get(s.field) != 0) {
        return fmt::format("STORE field '{}' = {} must be 0 (STORE does not pad)", s.name, ins.get(s.field));
      }
    }
  }
  for (int i = 0; i < kNumFields; ++i) {
    if (!used[i] && ins.get(static_cast<Field>(i)) != 0) {
      return fmt::format("{} has no field '{}' but it is set to {}", fmt.mnemonic,
                         field_name(static_cast<Field>(i)), ins.get(static_cast<Field>(i)));
    }
  }
  return {};
}

// Per opcode, the inclusive range of each of its fields (header first) that its compact storage can
// hold out of range: validate()'s fast path.
struct FieldRange {
  Field field;
  int64_t lo, hi;
};
struct FormatRanges {
  std::array<FieldRange, 3 + 24> r{};
  int n = 0;
};
constexpr FieldRange range_of(const FieldSpec& s) {
  switch (s.kind) {
    case FieldKind::kDType:
      return {s.field, 0, kNumDTypes - 1};
    case FieldKind::kBuffer:
      return {s.field, 0, kNumBuffers - 1};
    case FieldKind::kVecOp:
      return {s.field, 0, kNumVecOps - 1};
    case FieldKind::kBcast:
      return {s.field, 0, kNumBcasts - 1};
    case FieldKind::kQueueMask:
      return {s.field, 0, (int64_t{1} << kNumQueues) - 1};
    case FieldKind::kSigned:
      return {s.field, -(int64_t{1} << (s.width - 1)), (int64_t{1} << (s.width - 1)) - 1};
    default:
      return {s.field, 0, (int64_t{1} << s.width) - 1};
  }
}
// A field needs a range check unless every value its storage slot can hold is a valid value: a
// 16-bit size in 2 bytes does not, a 3-bit dtype in 1 byte does.
constexpr bool needs_check(const FieldSpec& s) {
  const storage::Slot& slot = storage::kSlots.slot[static_cast<int>(s.field)];
  return enum_limit(s.kind) >= 0 || s.width != 8 * slot.bytes ||
         (s.kind == FieldKind::kSigned) != slot.is_signed;
}
constexpr std::array<FormatRanges, kNumOpcodes> make_ranges() {
  std::array<FormatRanges, kNumOpcodes> t{};
  for (int op = 0; op < kNumOpcodes; ++op) {
    for (const FieldSpec& s : layout::kHeader) {
      if (needs_check(s)) t[op].r[t[op].n++] = range_of(s);
    }
    for (int i = 0; i < kFormats[op].num_fields; ++i) {
      if (needs_check(kFormats[op].fields[i])) t[op].r[t[op].n++] = range_of(kFormats[op].fields[i]);
    }
  }
  return t;
}
constexpr std::array<FormatRanges, kNumOpcodes> kRanges = make_ranges();

// Whether each of opcode Op's checked fields is in range, one comparison pair per field with the field a
// constant (so that Instruction::get folds its slot: a load and two shifts, not a table lookup per field).
template <size_t Op, size_t... I>
bool fields_in_range(const Instruction& ins, std::index_sequence<I...>) {
  return ((ins.get(kRanges[Op].r[I].field) >= kRanges[Op].r[I].lo &&
           ins.get(kRanges[Op].r[I].field) <= kRanges[Op].r[I].hi) &
          ... & true);
}
template <size_t Op>
bool in_range(const Instruction& ins) {
  return fields_in_range<Op>(ins, std::make_index_sequence<static_cast<size_t>(kRanges[Op].n)>{});
}
template <size_t... Op>
constexpr std::array<bool (*)(const Instruction&), kNumOpcodes> make_in_range(std::index_sequence<Op...>) {
  return {&in_range<Op>...};
}
constexpr std::array<bool (*)(const Instruction&), kNumOpcodes> kInRange =
    make_in_range(std::make_index_sequence<kNumOpcodes>{});

}  // namespace

Instruction& Instruction::widen(int i, int64_t v) {
  auto all = std::make_unique<std::array<int64_t, kNumFields>>();
  for (int k = 0; k < kNumFields; ++k) (*all)[k] = get(static_cast<Field>(k));
  (*all)[i] = v;
  wide_ = std::move(all);
  std::fill(raw_, raw_ + sizeof(raw_), uint8_t{0});
  return *this;
}

bool Instruction::operator==(const Instruction& o) const {
  if (opcode != o.opcode) return false;
  if (!wide_ && !o.wide_) {
    // Compact storage is canonical: bytes of absent fields are zero.
    return std::equal(raw_, raw_ + sizeof(raw_), o.raw_);
  }
  for (int k = 0; k < kNumFields; ++k) {
    if (get(static_cast<Field>(k)) != o.get(static_cast<Field>(k))) return false;
  }
  return true;
}

std::string validate(const Instruction& ins) {
  // Fast path without allocation: only the format's fields are set and each is in range.
  if (ins.compact_and_in_format()) {
    bool ok = kInRange[static_cast<size_t>(ins.opcode)](ins);
    if (ins.opcode == Opcode::kStore) {
      ok &= (ins.get(Field::kPadTop) | ins.get(Field::kPadBottom) | ins.get(Field::kPadLeft) |
             ins.get(Field::kPadRight) | ins.get(Field::kPadValue)) == 0;
    }
    if (ok) return {};
  }
  return validate_slow(ins);
}

void encode(const Instruction& ins, std::vector<uint64_t>& out) {
  if (std::string err = validate(ins); !err.empty()) throw EncodeError(err);
  const Format& fmt = format(ins.opcode);
  uint64_t w[2 * kMaxWords] = {};
  set_bits(w, 0, 8, static_cast<uint64_t>(ins.opcode));
  for_each_field(
      fmt, [&](const FieldSpec& s) { set_bits(w, s.lo, s.width, static_cast<uint64_t>(ins.get(s.field))); });
  out.insert(out.end(), w, w + 2 * fmt.words);
}

Instruction decode(const std::vector<uint64_t>& words, size_t& pos) {
  if (pos >= words.size()) throw EncodeError("instruction stream ends where an instruction was expected");
  const uint64_t op = words[pos] & 0xff;
  if (op >= static_cast<uint64_t>(kNumOpcodes)) {
    throw EncodeError(fmt::format("unknown opcode 0x{:02x} at word {}", op, pos / 2));
  }
  const Format& fmt = format(static_cast<Opcode>(op));
  const size_t n = 2 * fmt.words;
  if (pos + n > words.size()) {
    throw EncodeError(fmt::format("{} at word {} is truncated: needs {} words, {} left", fmt.mnemonic,
                                  pos / 2, fmt.words, (words.size() - pos) / 2));
  }
  const uint64_t* w = words.data() + pos;
  const uint64_t* used = kUsedBits[op].data();
  for (size_t i = 0; i < n; ++i) {
    if (w[i] & ~used[i]) {
      throw EncodeError(fmt::format("{} at word {} has bits set outside its fields", fmt.mnemonic, pos / 2));
    }
  }
  Instruction ins;
  ins.opcode = fmt.opcode;
  // Decoded values fit their widths and fields outside the format stay zero by construction, so only
  // enumerated fields (and STORE's padding) need the full check here.
  bool enums_ok = fmt.opcode != Opcode::kStore;
  for_each_field(fmt, [&](const FieldSpec& s) {
    const uint64_t raw = get_bits(w, s.lo, s.width);
    int64_t v = static_cast<int64_t>(raw);
    if (s.kind == FieldKind::kSigned && (raw >> (s.width - 1)) & 1) v -= int64_t{1} << s.width;
    const int64_t lim = enum_limit(s.kind);
    if (lim >= 0 && v >= lim) enums_ok = false;
    ins.set(s.field, v);
  });
  if (!enums_ok) {
    if (std::string err = validate(ins); !err.empty()) {
      throw EncodeError(fmt::format("instruction at word {}: {}", pos / 2, err));
    }
  }
  pos += n;
  return ins;
}

}  // namespace npusim::isa
