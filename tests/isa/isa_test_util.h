#pragma once
// Helpers shared by the isa tests: field limits and a generator of random valid programs.
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "isa/isa.h"
#include "isa/program.h"

namespace npusim::isa::test {

// Every field an opcode's instructions carry: the header first, then the format's own fields.
inline std::vector<FieldSpec> all_fields(Opcode op) {
  std::vector<FieldSpec> v(std::begin(layout::kHeader), std::end(layout::kHeader));
  const Format& fmt = format(op);
  v.insert(v.end(), fmt.fields, fmt.fields + fmt.num_fields);
  return v;
}

// The fields of `op` that may hold any value of their range: STORE shares LOAD's format but its
// padding fields must be zero.
inline std::vector<FieldSpec> free_fields(Opcode op) {
  std::vector<FieldSpec> v;
  for (const FieldSpec& s : all_fields(op)) {
    const bool pad = s.field == Field::kPadTop || s.field == Field::kPadBottom ||
                     s.field == Field::kPadLeft || s.field == Field::kPadRight || s.field == Field::kPadValue;
    if (!(op == Opcode::kStore && pad)) v.push_back(s);
  }
  return v;
}

// Number of valid values of an enumerated field, or 0 for numeric fields.
inline int64_t enum_count(FieldKind k) {
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
      return 0;
  }
}

// Smallest and largest value a field accepts, from its width and kind alone.
inline int64_t field_min(const FieldSpec& s) {
  return s.kind == FieldKind::kSigned ? -(int64_t{1} << (s.width - 1)) : 0;
}
inline int64_t field_max(const FieldSpec& s) {
  if (const int64_t n = enum_count(s.kind)) return n - 1;
  return s.kind == FieldKind::kSigned ? (int64_t{1} << (s.width - 1)) - 1 : (int64_t{1} << s.width) - 1;
}

// Random valid programs, biased towards the limits and towards awkward names.
class ProgramGen {
 public:
  explicit ProgramGen(uint64_t seed) : rng_(seed) {}

  uint64_t below(uint64_t n) { return std::uniform_int_distribution<uint64_t>(0, n - 1)(rng_); }
  int64_t in(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng_); }

  int64_t value(const FieldSpec& s) {
    switch (below(4)) {
      case 0:
        return field_min(s);
      case 1:
        return field_max(s);
      case 2:
        return 0;
      default:
        return in(field_min(s), field_max(s));
    }
  }

  std::string name() {
    static const char* const kPieces[] = {"conv",  "/model/layer1/Conv", "relu_3", "a b", "",     "x\"y",
                                          "#hash", "tab\there",          "12",     "-",   "q\\z", "ünï"};
    std::string s = kPieces[below(std::size(kPieces))];
    if (below(3) == 0) s += std::to_string(below(5));
    return s;
  }

  Instruction instruction(size_t num_layers, size_t num_host_ops) {
    Instruction ins;
    ins.opcode = static_cast<Opcode>(below(kNumOpcodes));
    for (const FieldSpec& s : free_fields(ins.opcode)) {
      if (below(3) == 0) continue;  // leave some fields zero
      ins.set(s.field, value(s));
    }
    if (num_layers) ins.set(Field::kLayer, static_cast<int64_t>(below(num_layers)));
    if (ins.opcode == Opcode::kHostCall && num_host_ops) {
      ins.set(Field::kHostOp, static_cast<int64_t>(below(num_host_ops)));
    }
    return ins;
  }

  Program program(size_t max_instructions = 40) {
    Program p;
    for (uint64_t i = below(4); i > 0; --i) {
      p.machine += "key" + std::to_string(i) + "=" + (below(2) ? "v " + name() : std::to_string(below(100)));
      p.machine += '\n';
    }
    if (below(4)) {
      for (uint64_t i = below(6) + 1; i > 0; --i) p.layers.push_back({name(), name()});
    }
    for (uint64_t i = below(3); i > 0; --i) p.host_ops.push_back({name(), name(), below(1ULL << 40)});
    for (uint64_t i = below(3); i > 0; --i) {
      TensorBinding t;
      t.name = name();
      t.role = below(2) ? TensorBinding::Role::kInput : TensorBinding::Role::kOutput;
      t.dtype = static_cast<DType>(below(kNumDTypes));
      t.dram_addr = below(2) ? ~uint64_t{0} : below(1ULL << 32);
      for (uint64_t d = below(5); d > 0; --d) t.dims.push_back(below(300));
      p.tensors.push_back(t);
    }
    for (uint64_t i = below(3); i > 0; --i) {
      DataSegment d;
      d.dram_addr = below(1ULL << 40);
      for (uint64_t b = below(40); b > 0; --b) d.bytes.push_back(static_cast<uint8_t>(below(256)));
      p.data.push_back(d);
    }
    for (uint64_t i = below(max_instructions + 1); i > 0; --i) {
      p.instructions.push_back(instruction(p.layers.size(), p.host_ops.size()));
    }
    return p;
  }

  std::mt19937_64& rng() { return rng_; }

 private:
  std::mt19937_64 rng_;
};

}  // namespace npusim::isa::test
