// arch/core/instruction_memo.h: the pre-run check skips an instruction equal to one that passed. The memo
// must never find an instruction that differs from every one added (in any field, the opcode included),
// and check_program with it must fail exactly where checking each instruction on its own fails first, with
// the same message.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <unordered_set>
#include <vector>

#include "arch/core/instruction_memo.h"
#include "arch/simulate.h"

namespace npusim::arch {
namespace {

using isa::Field;
using isa::Opcode;

// Instructions from a small space, so that many are equal and many differ in one field only; `bad_rate`
// of them read or write past a scratchpad, or have a zero size (both rejected by the check).
isa::Instruction random_instruction(std::mt19937& rng, int bad_rate_percent) {
  auto pick = [&](int n) { return static_cast<int64_t>(std::uniform_int_distribution<int>(0, n - 1)(rng)); };
  const bool bad = pick(100) < bad_rate_percent;
  isa::Instruction i;
  switch (pick(3)) {
    case 0:
      i.opcode = pick(2) ? Opcode::kLoad : Opcode::kStore;
      i.set(Field::kDtype, 0)
          .set(Field::kBuf, pick(3))
          .set(Field::kDramAddr, pick(4) * 1024)
          .set(Field::kSramAddr, bad ? 300 * 1024 : pick(4) * 1024)
          .set(Field::kSize0, 256 << pick(2))
          .set(Field::kSize1, 1 + pick(2))
          .set(Field::kSize2, 1)
          .set(Field::kSize3, 1)
          .set(Field::kStride1, 1024);
      break;
    case 1:
      i.opcode = Opcode::kMatmul;
      i.set(Field::kDtype, 0)
          .set(Field::kAAddr, pick(2) * 1024)
          .set(Field::kCAddr, pick(2) * 4096)
          .set(Field::kM, bad ? 0 : 16 << pick(2))
          .set(Field::kK, 32)
          .set(Field::kN, 16 << pick(2))
          .set(Field::kAccumulate, pick(2));
      break;
    default:
      i.opcode = Opcode::kVec;
      i.set(Field::kVop, static_cast<int>(isa::VecOp::kRequantize))
          .set(Field::kDtype, static_cast<int>(isa::DType::kInt32))
          .set(Field::kDtypeOut, 0)
          .set(Field::kSrc1Buf, 2)
          .set(Field::kSrc1Addr, pick(2) * 4096)
          .set(Field::kDstBuf, 0)
          .set(Field::kDstAddr, bad ? 255 * 1024 : 8192 + pick(2) * 1024)
          .set(Field::kD0, 32)
          .set(Field::kD1, 16 << pick(2))
          .set(Field::kD2, 1)
          .set(Field::kImm0, 1 << 30)
          .set(Field::kImm1, 31);
  }
  i.set(Field::kWait, pick(2)).set(Field::kSignal, pick(2) * 2).set(Field::kLayer, pick(2));
  return i;
}

// An instruction's bytes, as a key for the reference set (compact instructions only: their bytes are their
// value).
std::string bytes_of(const isa::Instruction& i) {
  return std::string(reinterpret_cast<const char*>(&i), sizeof i);
}

TEST(InstructionMemo, FindsOnlyInstructionsEqualToOnesAdded) {
  std::mt19937 rng(7);
  InstructionMemo memo;
  std::unordered_set<std::string> added;
  int found = 0;
  const int n = 20000;
  for (int k = 0; k < n; ++k) {
    const isa::Instruction i = random_instruction(rng, 0);
    ASSERT_TRUE(i.compact_and_in_format());
    // The instruction, and the same with one field or the opcode changed: found only if added before.
    isa::Instruction other_layer = i;
    other_layer.set(Field::kLayer, 2);  // never added
    isa::Instruction other_opcode = i;
    other_opcode.opcode = i.opcode == Opcode::kLoad ? Opcode::kStore : Opcode::kLoad;
    for (const isa::Instruction* probe : {&i, static_cast<const isa::Instruction*>(&other_layer),
                                          static_cast<const isa::Instruction*>(&other_opcode)}) {
      if (!memo.contains(*probe)) continue;
      ASSERT_TRUE(added.count(bytes_of(*probe))) << "instruction " << k << " found but never added";
      found += probe == &i;
    }
    memo.add(i);
    added.insert(bytes_of(i));
    ASSERT_TRUE(memo.contains(i));  // the last one added is always there
  }
  EXPECT_GT(found, n / 10);
}

TEST(InstructionMemo, NeverFindsAnInstructionOutsideItsCompactStorage) {
  InstructionMemo memo;
  isa::Instruction wide;
  wide.opcode = Opcode::kLoad;
  wide.set(Field::kSize0, int64_t{1} << 40);  // past its slot: the plain array of every field
  ASSERT_FALSE(wide.compact_and_in_format());
  memo.add(wide);
  EXPECT_FALSE(memo.contains(wide));
  isa::Instruction stray;
  stray.opcode = Opcode::kLoad;
  stray.set(Field::kM, 4);  // a field LOAD does not have
  ASSERT_FALSE(stray.compact_and_in_format());
  memo.add(stray);
  EXPECT_FALSE(memo.contains(stray));
}

// The first instruction check_program rejects in `p`, checked one at a time, and the message it gives.
std::string first_failure_alone(const isa::Program& p, const isa::NpuConfig& config) {
  for (size_t i = 0; i < p.instructions.size(); ++i) {
    isa::Program one;
    one.layers = p.layers;
    one.instructions.push_back(p.instructions[i]);
    try {
      check_program(one, config);
    } catch (const SimError& e) {
      std::string m = e.what();
      const std::string prefix = "instruction 0: ";
      EXPECT_EQ(m.rfind(prefix, 0), 0u) << m;
      return "instruction " + std::to_string(i) + ": " + m.substr(prefix.size());
    }
  }
  return "";
}

TEST(InstructionMemo, CheckProgramFailsWhereCheckingEachInstructionAloneFailsFirst) {
  std::mt19937 rng(11);
  const isa::NpuConfig config;
  int failed = 0;
  for (int trial = 0; trial < 300; ++trial) {
    isa::Program p;
    p.layers = {{"a", "Gemm"}, {"b", "Gemm"}};
    const int n = 50 + trial;
    for (int k = 0; k < n; ++k) p.instructions.push_back(random_instruction(rng, trial % 3 == 0 ? 0 : 1));
    const std::string expected = first_failure_alone(p, config);
    std::string got;
    try {
      check_program(p, config);
    } catch (const SimError& e) {
      got = e.what();
    }
    EXPECT_EQ(got, expected) << "trial " << trial;
    failed += !expected.empty();
  }
  EXPECT_GT(failed, 100);  // most programs with bad instructions in them fail, late or early
}

}  // namespace
}  // namespace npusim::arch
