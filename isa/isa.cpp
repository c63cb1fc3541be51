#include "isa/isa.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

namespace npusim::isa {
namespace {

// Bit access over a little-endian array of 64-bit halves (two per 128-bit word).
uint64_t get_bits(const uint64_t* w, int lo, int width) {
  uint64_t v = 0;
  for (int i = 0; i < width;) {
    const int bit = lo + i;
    const int off = bit % 64;
    const int take = std::min(width - i, 64 - off);
    const uint64_t mask = take == 64 ? ~0ULL : ((1ULL << take) - 1);
    v |= ((w[bit / 64] >> off) & mask) << i;
    i += take;
  }
  return v;
}

void set_bits(uint64_t* w, int lo, int width, uint64_t v) {
  for (int i = 0; i < width;) {
    const int bit = lo + i;
    const int off = bit % 64;
    const int take = std::min(width - i, 64 - off);
    const uint64_t mask = take == 64 ? ~0ULL : ((1ULL << take) - 1);
    w[bit / 64] = (w[bit / 64] & ~(mask << off)) | (((v >> i) & mask) << off);
    i += take;
  }
}

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
int64_t enum_limit(FieldKind k) {
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

std::string validate(const Instruction& ins) {
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
        err = fmt::format("{} field '{}' = {} is not a valid value (0..{})", fmt.mnemonic, s.name, v, lim - 1);
      }
    } else if (!fits(s, v)) {
      err = s.kind == FieldKind::kSigned
                ? fmt::format("{} field '{}' = {} does not fit in {} signed bits ({}..{})", fmt.mnemonic, s.name,
                              v, s.width, -(int64_t{1} << (s.width - 1)), (int64_t{1} << (s.width - 1)) - 1)
                : fmt::format("{} field '{}' = {} does not fit in {} bits (0..{})", fmt.mnemonic, s.name, v,
                              s.width, (uint64_t{1} << s.width) - 1);
    }
  });
  if (!err.empty()) return err;
  for (int i = 0; i < kNumFields; ++i) {
    if (!used[i] && ins.f[i] != 0) {
      return fmt::format("{} has no field '{}' but it is set to {}", fmt.mnemonic, field_name(static_cast<Field>(i)),
                         ins.f[i]);
    }
  }
  return {};
}

void encode(const Instruction& ins, std::vector<uint64_t>& out) {
  if (std::string err = validate(ins); !err.empty()) throw EncodeError(err);
  const Format& fmt = format(ins.opcode);
  uint64_t w[2 * kMaxWords] = {};
  set_bits(w, 0, 8, static_cast<uint64_t>(ins.opcode));
  for_each_field(fmt, [&](const FieldSpec& s) { set_bits(w, s.lo, s.width, static_cast<uint64_t>(ins.get(s.field))); });
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
    throw EncodeError(fmt::format("{} at word {} is truncated: needs {} words, {} left", fmt.mnemonic, pos / 2,
                                  fmt.words, (words.size() - pos) / 2));
  }
  uint64_t w[2 * kMaxWords] = {};
  std::copy(words.begin() + pos, words.begin() + pos + n, w);
  Instruction ins;
  ins.opcode = fmt.opcode;
  uint64_t check[2 * kMaxWords] = {};
  set_bits(check, 0, 8, op);
  for_each_field(fmt, [&](const FieldSpec& s) {
    uint64_t raw = get_bits(w, s.lo, s.width);
    set_bits(check, s.lo, s.width, raw);
    int64_t v = static_cast<int64_t>(raw);
    if (s.kind == FieldKind::kSigned && (raw >> (s.width - 1)) & 1) v -= int64_t{1} << s.width;
    ins.set(s.field, v);
  });
  for (size_t i = 0; i < n; ++i) {
    if (check[i] != w[i]) {
      throw EncodeError(fmt::format("{} at word {} has bits set outside its fields", fmt.mnemonic, pos / 2));
    }
  }
  if (std::string err = validate(ins); !err.empty()) {
    throw EncodeError(fmt::format("instruction at word {}: {}", pos / 2, err));
  }
  pos += n;
  return ins;
}

}  // namespace npusim::isa
