// isa::Instruction's compact storage (isa/instruction_storage.h): whatever is set is what get()
// returns, for any field, value and opcode, and == / validate() behave as on a plain array of every
// field. Checked against such an array on random operations that mix valid values, values at and
// past each field's width, fields outside the opcode's format and opcode changes.
#include <gtest/gtest.h>

#include <array>
#include <random>

#include "isa/isa.h"

namespace {

using namespace npusim::isa;

using Reference = std::array<int64_t, kNumFields>;

// The fields of an opcode's format (header included), from the format table.
std::vector<FieldSpec> specs(Opcode op) {
  std::vector<FieldSpec> v(std::begin(layout::kHeader), std::end(layout::kHeader));
  const Format& f = format(op);
  v.insert(v.end(), f.fields, f.fields + f.num_fields);
  return v;
}

// validate()'s contract from isa.h: every field of the format fits its width (enumerations: one of
// their names), the others are zero, STORE's padding is zero.
bool reference_valid(Opcode op, const Reference& r) {
  std::array<bool, kNumFields> in_format{};
  for (const FieldSpec& s : specs(op)) {
    const int64_t v = r[static_cast<int>(s.field)];
    in_format[static_cast<int>(s.field)] = true;
    int64_t lo = 0, hi = (int64_t{1} << s.width) - 1;
    switch (s.kind) {
      case FieldKind::kSigned:
        lo = -(int64_t{1} << (s.width - 1));
        hi = (int64_t{1} << (s.width - 1)) - 1;
        break;
      case FieldKind::kDType:
        hi = kNumDTypes - 1;
        break;
      case FieldKind::kBuffer:
        hi = kNumBuffers - 1;
        break;
      case FieldKind::kVecOp:
        hi = kNumVecOps - 1;
        break;
      case FieldKind::kBcast:
        hi = kNumBcasts - 1;
        break;
      case FieldKind::kQueueMask:
        hi = (1 << kNumQueues) - 1;
        break;
      default:
        break;
    }
    if (v < lo || v > hi) return false;
  }
  for (int i = 0; i < kNumFields; ++i) {
    if (!in_format[i] && r[i] != 0) return false;
  }
  if (op == Opcode::kStore) {
    for (Field f : {Field::kPadTop, Field::kPadBottom, Field::kPadLeft, Field::kPadRight, Field::kPadValue}) {
      if (r[static_cast<int>(f)] != 0) return false;
    }
  }
  return true;
}

Instruction build(Opcode op, const Reference& r, bool reverse) {
  Instruction ins;
  ins.opcode = op;
  for (int k = 0; k < kNumFields; ++k) {
    const int i = reverse ? kNumFields - 1 - k : k;
    ins.set(static_cast<Field>(i), r[i]);
  }
  return ins;
}

TEST(InstructionStorage, IsOneCacheLine) { EXPECT_EQ(sizeof(Instruction), 64u); }

TEST(InstructionStorage, GetReturnsWhatWasSetAndEqualityIsByValue) {
  std::mt19937_64 rng(12345);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint64_t>(n)); };
  const Opcode ops[] = {Opcode::kLoad, Opcode::kStore,    Opcode::kPreload, Opcode::kMatmul, Opcode::kConv,
                        Opcode::kVec,  Opcode::kHostCall, Opcode::kNop,     Opcode::kHalt};
  int valid_seen = 0, invalid_seen = 0;
  for (int round = 0; round < 3000; ++round) {
    Opcode op = ops[pick(9)];
    Instruction ins;
    ins.opcode = op;
    Reference ref{};
    const int steps = 1 + pick(40);
    const bool clean = pick(2) == 0;  // half the rounds set only in-range values of the format
    for (int step = 0; step < steps; ++step) {
      if (!clean && pick(50) == 0) {  // the opcode may change after fields were set
        op = ops[pick(9)];
        ins.opcode = op;
      }
      // Mostly fields of the current format with values in range, sometimes anything.
      const std::vector<FieldSpec> fs = specs(op);
      Field f;
      int64_t v;
      if (clean || pick(10) < 8) {
        const FieldSpec& s = fs[static_cast<size_t>(pick(static_cast<int>(fs.size())))];
        f = s.field;
        const int64_t span = int64_t{1} << (s.kind == FieldKind::kSigned ? s.width - 1 : s.width);
        switch (clean ? 4 + pick(2) * pick(2) : pick(6)) {
          case 0:
            v = 0;
            break;
          case 1:
            v = span - 1;  // the largest value that fits
            break;
          case 2:
            v = s.kind == FieldKind::kSigned ? -span : span;  // smallest signed / one past unsigned
            break;
          case 3:
            v = s.kind == FieldKind::kSigned ? -span - 1 : -1;  // past the low end
            break;
          default:
            v = static_cast<int64_t>(rng() % static_cast<uint64_t>(span));
            if (s.kind == FieldKind::kSigned && pick(2)) v = -v;
            // An enumeration holds one of its names.
            if (s.kind == FieldKind::kDType) v %= kNumDTypes;
            if (s.kind == FieldKind::kBuffer) v %= kNumBuffers;
            if (s.kind == FieldKind::kVecOp) v %= kNumVecOps;
            if (s.kind == FieldKind::kBcast) v %= kNumBcasts;
            if (clean && op == Opcode::kStore &&
                (f == Field::kPadTop || f == Field::kPadBottom || f == Field::kPadLeft ||
                 f == Field::kPadRight || f == Field::kPadValue)) {
              v = 0;
            }
            break;
        }
      } else {
        f = static_cast<Field>(pick(kNumFields));
        v = pick(3) == 0 ? static_cast<int64_t>(rng()) : pick(4) - 1;
      }
      ins.set(f, v);
      ref[static_cast<int>(f)] = v;
    }
    for (int i = 0; i < kNumFields; ++i) ASSERT_EQ(ins.get(static_cast<Field>(i)), ref[i]) << "field " << i;
    // The same values set in another order (and so possibly another storage mode) compare equal.
    const Instruction other = build(op, ref, true);
    EXPECT_TRUE(ins == other);
    EXPECT_TRUE(other == build(op, ref, false));
    const Instruction copy = ins;
    EXPECT_TRUE(copy == ins);
    for (int i = 0; i < kNumFields; ++i) ASSERT_EQ(copy.get(static_cast<Field>(i)), ref[i]);
    // One field changed: unequal.
    Reference changed = ref;
    const int i = pick(kNumFields);
    changed[i] = ref[i] == 0 ? 1 : 0;
    EXPECT_FALSE(build(op, changed, false) == ins) << "field " << i;
    // validate() agrees with the contract.
    const bool valid = reference_valid(op, ref);
    EXPECT_EQ(validate(ins).empty(), valid) << validate(ins);
    (valid ? valid_seen : invalid_seen)++;
  }
  EXPECT_GT(valid_seen, 300);
  EXPECT_GT(invalid_seen, 300);
}

TEST(InstructionStorage, OutOfRangeValuesSurviveCopyMoveAndReset) {
  Instruction a;
  a.opcode = Opcode::kMatmul;
  a.set(Field::kM, int64_t{1} << 40).set(Field::kSize0, 7).set(Field::kK, -3);  // size0: not a MATMUL field
  Instruction b = a;
  Instruction c = std::move(a);
  for (const Instruction* x : {&b, &c}) {
    EXPECT_EQ(x->get(Field::kM), int64_t{1} << 40);
    EXPECT_EQ(x->get(Field::kSize0), 7);
    EXPECT_EQ(x->get(Field::kK), -3);
    EXPECT_FALSE(validate(*x).empty());
  }
  b.set(Field::kM, 4).set(Field::kSize0, 0).set(Field::kK, 4).set(Field::kN, 4);
  Instruction fresh;
  fresh.opcode = Opcode::kMatmul;
  fresh.set(Field::kM, 4).set(Field::kK, 4).set(Field::kN, 4);
  EXPECT_TRUE(b == fresh);
  EXPECT_TRUE(validate(b).empty()) << validate(b);
}

}  // namespace
