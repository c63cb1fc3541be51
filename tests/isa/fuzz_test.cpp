// Robustness: the program-file reader and the assembler take any input and either succeed or throw
// ProgramError; never a crash, a hang, an out-of-bounds read or another exception. What they accept
// must survive the round trips.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "isa/assembly.h"
#include "tests/isa/isa_test_util.h"

namespace npusim::isa {
namespace {

enum class Outcome { kOk, kProgramError };

template <class Fn>
Outcome outcome(Fn&& fn) {
  try {
    fn();
    return Outcome::kOk;
  } catch (const ProgramError&) {
    return Outcome::kProgramError;
  }
  // Any other exception propagates and fails the test with its message.
}

// A valid program exercising every section, serialized, with the byte offsets of every length and
// count field so that mutations can target them.
struct Target {
  std::vector<uint8_t> bytes;
  std::vector<size_t> length_fields;  // u64 section lengths
  std::vector<size_t> count_fields;   // u32 / u64 counts and string lengths near section starts
};

Target make_target() {
  test::ProgramGen gen(99);
  Program p = gen.program(30);
  p.machine = "rows=32\ncols=32\n";
  p.layers = {{"conv1", "Conv"}, {"relu", "Relu"}};
  p.host_ops = {{"nms", "NonMaxSuppression", 1000}};
  p.tensors = {{"in", TensorBinding::Role::kInput, DType::kInt8, 0, {1, 3, 8, 8}}};
  p.data = {{0x100, {1, 2, 3, 4, 5, 6, 7, 8}}};
  for (Instruction& ins : p.instructions) {
    ins.set(Field::kLayer, ins.get(Field::kLayer) % 2);
    if (ins.opcode == Opcode::kHostCall) ins.set(Field::kHostOp, 0);
  }
  Target t;
  t.bytes = serialize(p);
  // Walk the sections as documented in isa/program.h.
  auto u64_at = [&](size_t at) {
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= uint64_t{t.bytes[at + i]} << (8 * i);
    return v;
  };
  t.count_fields.push_back(12);  // section count
  size_t pos = 16;
  while (pos < t.bytes.size()) {
    t.length_fields.push_back(pos + 4);
    t.count_fields.push_back(pos + 12);  // first field of the payload: a count (or machine text)
    if (t.bytes.size() > pos + 16) t.count_fields.push_back(pos + 16);  // e.g. the first name's length
    pos += 12 + u64_at(pos + 4);
  }
  EXPECT_EQ(pos, t.bytes.size());
  EXPECT_EQ(t.length_fields.size(), 7u);
  return t;
}

void set_le(std::vector<uint8_t>& b, size_t at, uint64_t v, int n) {
  for (int i = 0; i < n && at + i < b.size(); ++i) b[at + i] = static_cast<uint8_t>(v >> (8 * i));
}

TEST(Fuzz, DeserializeSurvivesRandomBytes) {
  std::mt19937_64 rng(1);
  const Target t = make_target();
  int ok = 0;
  for (int i = 0; i < 10000; ++i) {
    std::vector<uint8_t> b(rng() % 300);
    for (uint8_t& x : b) x = static_cast<uint8_t>(rng());
    // Most inputs get a valid header so that the section parsers are reached.
    if (i % 4 != 0 && b.size() >= 16) std::copy(t.bytes.begin(), t.bytes.begin() + 12, b.begin());
    if (i % 8 == 1 && b.size() >= 16) b[12] = static_cast<uint8_t>(rng() % 7), b[13] = b[14] = b[15] = 0;
    ok += outcome([&] { deserialize(b); }) == Outcome::kOk;
  }
  EXPECT_LT(ok, 10000);
}

TEST(Fuzz, DeserializeSurvivesMutationsOfAValidProgramAndWhatItAcceptsRoundTrips) {
  const Target t = make_target();
  ASSERT_EQ(serialize(deserialize(t.bytes)), t.bytes);
  std::mt19937_64 rng(2);
  int ok = 0, rejected = 0;
  for (int i = 0; i < 12000; ++i) {
    std::vector<uint8_t> b = t.bytes;
    switch (i % 6) {
      case 0:  // flip a few bits anywhere
      case 1:
        for (int k = 1 + static_cast<int>(rng() % 3); k > 0; --k)
          b[rng() % b.size()] ^= uint8_t(1u << (rng() % 8));
        break;
      case 2:  // truncate
        b.resize(rng() % b.size());
        break;
      case 3: {  // corrupt a section length
        const size_t at = t.length_fields[rng() % t.length_fields.size()];
        const uint64_t old = t.bytes[at];
        const uint64_t choices[] = {
            0, 1, old + 1, old - 1, old + 8, ~uint64_t{0}, uint64_t{1} << 63, rng() % 4096, rng()};
        set_le(b, at, choices[rng() % std::size(choices)], 8);
        break;
      }
      case 4: {  // corrupt a count or a string length
        const size_t at = t.count_fields[rng() % t.count_fields.size()];
        const uint64_t choices[] = {0, 1, 2, 0xffffffff, 0x7fffffff, rng() % 100, rng()};
        set_le(b, at, choices[rng() % std::size(choices)], rng() % 2 ? 4 : 8);
        break;
      }
      case 5:  // splice: duplicate or drop a random range
        if (rng() % 2) {
          const size_t from = rng() % b.size(), len = rng() % 64;
          std::vector<uint8_t> piece(b.begin() + from, b.begin() + std::min(b.size(), from + len));
          b.insert(b.begin() + rng() % b.size(), piece.begin(), piece.end());
        } else {
          const size_t from = rng() % b.size();
          b.erase(b.begin() + from, b.begin() + std::min(b.size(), from + rng() % 32));
        }
        break;
    }
    Program p;
    if (outcome([&] { p = deserialize(b); }) == Outcome::kOk) {
      ++ok;
      // Anything the reader accepts is a valid program: it re-encodes to the same bytes and survives
      // the text round trip.
      ASSERT_EQ(serialize(p), b) << "mutation " << i;
      ASSERT_EQ(assemble(disassemble(p)), p) << "mutation " << i;
    } else {
      ++rejected;
    }
  }
  EXPECT_GT(ok, 0);
  EXPECT_GT(rejected, 5000);
}

TEST(Fuzz, AssembleSurvivesMutatedTextAndWhatItAcceptsRoundTrips) {
  std::ifstream f(std::string(NPUSIM_SOURCE_DIR) + "/tests/programs/all_opcodes.s");
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string base = ss.str() + ".machine rows=8\n.layer \"a \\\"q\\\" \\x01\" Add\n";
  ASSERT_NO_THROW(assemble(base));
  const std::string alphabet = "abcdefxyz0123456789 =|-.#\"\\\n\t_ABCDEFGHLMNOPRSTUVWX";
  std::mt19937_64 rng(3);
  int ok = 0;
  for (int i = 0; i < 10000; ++i) {
    std::string s = base;
    for (int k = 1 + static_cast<int>(rng() % 4); k > 0; --k) {
      const size_t at = rng() % (s.size() + 1);
      switch (rng() % 5) {
        case 0:
          if (at < s.size()) s[at] = alphabet[rng() % alphabet.size()];
          break;
        case 1:
          s.insert(at, 1, alphabet[rng() % alphabet.size()]);
          break;
        case 2:
          s.erase(at, rng() % 8);
          break;
        case 3:
          s.resize(at);
          break;
        case 4:
          if (at < s.size()) s[at] = static_cast<char>(rng());
          break;
      }
    }
    Program p;
    if (outcome([&] { p = assemble(s, "fuzz.s"); }) == Outcome::kOk) {
      ++ok;
      const std::string text = disassemble(p);
      ASSERT_EQ(assemble(text), p) << s;
      ASSERT_EQ(disassemble(assemble(text)), text);
      ASSERT_EQ(deserialize(serialize(p)), p);
    }
  }
  EXPECT_GT(ok, 0);
}

}  // namespace
}  // namespace npusim::isa
