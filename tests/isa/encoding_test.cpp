// The instruction encoding: bit positions from the header comment of isa/isa.h, limits, validation
// and the decoder's rejections.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "isa/isa.h"
#include "tests/isa/isa_test_util.h"

namespace npusim::isa {
namespace {

using test::all_fields;
using test::field_max;
using test::field_min;
using test::free_fields;

std::vector<uint64_t> encoded(const Instruction& ins) {
  std::vector<uint64_t> w;
  encode(ins, w);
  return w;
}

Instruction decoded(const std::vector<uint64_t>& w) {
  size_t pos = 0;
  Instruction ins = decode(w, pos);
  EXPECT_EQ(pos, w.size());
  return ins;
}

TEST(Encoding, NopIsOneWordHoldingOnlyTheOpcodeAndHeader) {
  Instruction nop;
  EXPECT_EQ(encoded(nop), (std::vector<uint64_t>{0, 0}));
  // wait = load|store (bits 8 and 11), signal = matrix (bit 14), layer 5 (bits 18..): by hand.
  nop.set(Field::kWait, 0b01001).set(Field::kSignal, 0b00010).set(Field::kLayer, 5);
  EXPECT_EQ(encoded(nop),
            (std::vector<uint64_t>{(1ULL << 8) | (1ULL << 11) | (1ULL << 14) | (5ULL << 18), 0}));
}

TEST(Encoding, MatmulFieldsLandAtTheirDocumentedBits) {
  Instruction mm;
  mm.opcode = Opcode::kMatmul;
  mm.set(Field::kDtype, 4)         // bf16, bits 34..36
      .set(Field::kAAddr, 0x10)    // bits 37..68
      .set(Field::kM, 16)          // bits 149..164: half 2, bit 21
      .set(Field::kN, 0xffff)      // bits 181..196: half 2, bits 53..63 and half 3, bits 0..4
      .set(Field::kPreloaded, 1);  // bit 198: half 3, bit 6
  const std::vector<uint64_t> expect = {
      4ULL | (4ULL << 34) | (0x10ULL << 37),
      0,
      (16ULL << 21) | (0x7ffULL << 53),
      0x1fULL | (1ULL << 6),
  };
  EXPECT_EQ(encoded(mm), expect);
  EXPECT_EQ(decoded(expect), mm);
}

TEST(Encoding, DmaFieldStraddlingTheFirstWordBoundaryIsSplitLowBitsFirst) {
  Instruction ld;
  ld.opcode = Opcode::kLoad;
  ld.set(Field::kSize1, 0xabcd);  // bits 127..142: bit 63 of half 1, then bits 0..14 of half 2
  const std::vector<uint64_t> w = encoded(ld);
  ASSERT_EQ(w.size(), 6u);
  EXPECT_EQ(w[0], 1u);
  EXPECT_EQ(w[1], 1ULL << 63);
  EXPECT_EQ(w[2], 0xabcdULL >> 1);
  EXPECT_EQ(w[3] | w[4] | w[5], 0u);
  EXPECT_EQ(decoded(w), ld);
}

TEST(Encoding, SignedFieldIsTwosComplementWithinItsWidth) {
  Instruction ld;
  ld.opcode = Opcode::kLoad;
  ld.set(Field::kPadValue, -1);  // bits 303..318: half 4, bits 47..62
  const std::vector<uint64_t> w = encoded(ld);
  EXPECT_EQ(w[4], 0xffffULL << 47);
  EXPECT_EQ(w[5], 0u);
  EXPECT_EQ(decoded(w).get(Field::kPadValue), -1);
}

TEST(Encoding, WordCountsMatchTheFormatTable) {
  const int expect[kNumOpcodes] = {1, 3, 3, 1, 2, 3, 3, 2, 1, 1};
  for (int op = 0; op < kNumOpcodes; ++op) {
    Instruction ins;
    ins.opcode = static_cast<Opcode>(op);
    EXPECT_EQ(encoded(ins).size(), 2u * expect[op]) << kFormats[op].mnemonic;
  }
}

TEST(Encoding, EveryFieldRoundTripsAtItsLimits) {
  for (int op = 0; op < kNumOpcodes; ++op) {
    for (const FieldSpec& s : free_fields(static_cast<Opcode>(op))) {
      for (int64_t v : {int64_t{0}, int64_t{1}, field_min(s), field_max(s)}) {
        Instruction ins;
        ins.opcode = static_cast<Opcode>(op);
        ins.set(s.field, v);
        ASSERT_EQ(validate(ins), "") << kFormats[op].mnemonic << " " << s.name << "=" << v;
        EXPECT_EQ(decoded(encoded(ins)), ins) << kFormats[op].mnemonic << " " << s.name << "=" << v;
      }
    }
  }
}

TEST(Encoding, AllFieldsAtMaximumAndMinimumTogetherRoundTrip) {
  for (int op = 0; op < kNumOpcodes; ++op) {
    Instruction hi, lo;
    hi.opcode = lo.opcode = static_cast<Opcode>(op);
    for (const FieldSpec& s : free_fields(hi.opcode)) {
      hi.set(s.field, field_max(s));
      lo.set(s.field, field_min(s) != 0 ? field_min(s) : 1);
    }
    EXPECT_EQ(decoded(encoded(hi)), hi) << kFormats[op].mnemonic;
    EXPECT_EQ(decoded(encoded(lo)), lo) << kFormats[op].mnemonic;
  }
}

TEST(Encoding, RandomInstructionsEncodeAndDecodeToThemselves) {
  test::ProgramGen gen(7);
  std::vector<uint64_t> stream;
  std::vector<Instruction> all;
  for (int i = 0; i < 5000; ++i) {
    all.push_back(gen.instruction(0, 0));
    encode(all.back(), stream);
  }
  size_t pos = 0;
  for (const Instruction& ins : all) EXPECT_EQ(decode(stream, pos), ins);
  EXPECT_EQ(pos, stream.size());
}

TEST(Validate, RejectsEveryNumericFieldOneBeyondItsRange) {
  for (int op = 0; op < kNumOpcodes; ++op) {
    for (const FieldSpec& s : all_fields(static_cast<Opcode>(op))) {
      Instruction ins;
      ins.opcode = static_cast<Opcode>(op);
      ins.set(s.field, field_max(s) + 1);
      const std::string err = validate(ins);
      EXPECT_NE(err.find("'" + std::string(s.name) + "'"), std::string::npos) << err;
      if (test::enum_count(s.kind) == 0 && s.kind != FieldKind::kLayer) {
        EXPECT_NE(err.find(std::to_string(field_max(s))), std::string::npos) << "range missing: " << err;
      }
      ins.set(s.field, field_min(s) - 1);
      EXPECT_NE(validate(ins), "") << s.name << " below its minimum";
    }
  }
}

TEST(Validate, RejectsEnumeratedValuesPastTheirNamesEvenWhenTheyFitTheWidth) {
  Instruction vec;
  vec.opcode = Opcode::kVec;
  vec.set(Field::kDtype, kNumDTypes);  // 6 fits in 3 bits but names no dtype
  EXPECT_NE(validate(vec).find("'dtype'"), std::string::npos);
  vec.set(Field::kDtype, 0).set(Field::kVop, kNumVecOps);
  EXPECT_NE(validate(vec).find("'op'"), std::string::npos);
  vec.set(Field::kVop, 0).set(Field::kSrc1Buf, kNumBuffers);
  EXPECT_NE(validate(vec).find("'src1_buf'"), std::string::npos);
  vec.set(Field::kSrc1Buf, 0).set(Field::kBcast, kNumBcasts);
  EXPECT_EQ(kNumBcasts, 4);  // bcast has 2 bits: every value is named, so 4 is too wide instead
  EXPECT_NE(validate(vec).find("'bcast'"), std::string::npos);
}

TEST(Validate, RejectsAFieldTheFormatDoesNotHave) {
  Instruction mm;
  mm.opcode = Opcode::kMatmul;
  mm.set(Field::kSramAddr, 4);
  const std::string err = validate(mm);
  EXPECT_NE(err.find("MATMUL has no field 'sram'"), std::string::npos) << err;
  std::vector<uint64_t> w;
  EXPECT_THROW(encode(mm, w), EncodeError);
  EXPECT_TRUE(w.empty());
}

TEST(Validate, StoreMustNotPadAndDecodeRejectsAPaddedStore) {
  Instruction st;
  st.opcode = Opcode::kStore;
  st.set(Field::kPadValue, -3);
  EXPECT_EQ(validate(st), "STORE field 'pad_value' = -3 must be 0 (STORE does not pad)");
  Instruction ld = st;
  ld.opcode = Opcode::kLoad;
  std::vector<uint64_t> w = encoded(ld);  // same format: flip the opcode byte from LOAD to STORE
  w[0] = (w[0] & ~uint64_t{0xff}) | static_cast<uint64_t>(Opcode::kStore);
  size_t pos = 0;
  try {
    decode(w, pos);
    ADD_FAILURE() << "decoded a padded STORE";
  } catch (const EncodeError& e) {
    EXPECT_EQ(std::string(e.what()),
              "instruction at word 0: STORE field 'pad_value' = -3 must be 0 (STORE does not pad)");
  }
}

TEST(Validate, RejectsAnOpcodeOutsideTheTable) {
  Instruction bad;
  bad.opcode = static_cast<Opcode>(kNumOpcodes);
  EXPECT_NE(validate(bad), "");
}

TEST(Decode, RejectsUnknownOpcodes) {
  for (uint64_t op : {uint64_t{kNumOpcodes}, uint64_t{0x7f}, uint64_t{0xff}}) {
    std::vector<uint64_t> w = {op, 0};
    size_t pos = 0;
    try {
      decode(w, pos);
      ADD_FAILURE() << "opcode " << op << " decoded";
    } catch (const EncodeError& e) {
      EXPECT_NE(std::string(e.what()).find("unknown opcode"), std::string::npos) << e.what();
    }
    EXPECT_EQ(pos, 0u);
  }
}

TEST(Decode, RejectsTruncatedInstructions) {
  for (int op = 0; op < kNumOpcodes; ++op) {
    Instruction ins;
    ins.opcode = static_cast<Opcode>(op);
    std::vector<uint64_t> w = encoded(ins);
    for (size_t keep = 0; keep < w.size(); ++keep) {
      std::vector<uint64_t> cut(w.begin(), w.begin() + static_cast<long>(keep));
      size_t pos = 0;
      EXPECT_THROW(decode(cut, pos), EncodeError) << kFormats[op].mnemonic << " cut to " << keep << " halves";
    }
  }
}

TEST(Decode, RejectsEverySetUnusedBit) {
  for (int op = 0; op < kNumOpcodes; ++op) {
    const Format& fmt = kFormats[op];
    int used = layout::kHeaderBits;
    for (int i = 0; i < fmt.num_fields; ++i) used += fmt.fields[i].width;
    Instruction ins;
    ins.opcode = fmt.opcode;
    const std::vector<uint64_t> w = encoded(ins);
    for (int bit = used; bit < fmt.words * kWordBits; ++bit) {
      std::vector<uint64_t> bad = w;
      bad[bit / 64] |= 1ULL << (bit % 64);
      size_t pos = 0;
      EXPECT_THROW(decode(bad, pos), EncodeError) << fmt.mnemonic << " bit " << bit;
    }
  }
}

TEST(Decode, RejectsRawEnumValuesWithoutANameAndNamesTheField) {
  Instruction vec;
  vec.opcode = Opcode::kVec;
  std::vector<uint64_t> w = encoded(vec);
  w[0] |= uint64_t{63} << 34;  // op = 63, beyond the 30 vector ops
  size_t pos = 0;
  try {
    decode(w, pos);
    ADD_FAILURE() << "decoded";
  } catch (const EncodeError& e) {
    EXPECT_NE(std::string(e.what()).find("'op'"), std::string::npos) << e.what();
  }
}

TEST(Decode, ReadsFromTheGivenPositionAndAdvancesPastOneInstruction) {
  Instruction a, b;
  b.opcode = Opcode::kHostCall;
  b.set(Field::kCpuOps, (int64_t{1} << 48) - 1);
  std::vector<uint64_t> w;
  encode(a, w);
  encode(b, w);
  size_t pos = 2;
  EXPECT_EQ(decode(w, pos), b);
  EXPECT_EQ(pos, 6u);
}

TEST(Names, EveryNameTableIsCompleteAndUnique) {
  auto check = [](const auto& names) {
    std::set<std::string_view> seen;
    for (std::string_view n : names) {
      EXPECT_FALSE(n.empty());
      EXPECT_TRUE(seen.insert(n).second) << "duplicate " << n;
    }
  };
  check(kQueueNames);
  check(kDTypeNames);
  check(kBufferNames);
  check(kVecOpNames);
  check(kBcastNames);
  std::vector<std::string_view> mnemonics;
  for (const Format& f : kFormats) mnemonics.push_back(f.mnemonic);
  check(mnemonics);
  EXPECT_EQ(kVecOpNames[static_cast<int>(VecOp::kRequantize)], "requantize");
  EXPECT_EQ(kVecOpNames[static_cast<int>(VecOp::kRecip)], "recip");
  EXPECT_EQ(kVecOpNames[static_cast<int>(VecOp::kOutput)], "output");
  EXPECT_EQ(kVecOpNames[static_cast<int>(VecOp::kLut)], "lut");
}

TEST(Names, FieldNamesAreUniqueWithinAFormatAndMeanOneFieldAcrossFormats) {
  std::map<std::string_view, Field> meaning;
  for (int op = 0; op < kNumOpcodes; ++op) {
    std::set<std::string_view> seen;
    for (const FieldSpec& s : all_fields(static_cast<Opcode>(op))) {
      EXPECT_TRUE(seen.insert(s.name).second) << kFormats[op].mnemonic << " repeats " << s.name;
      const auto [it, fresh] = meaning.emplace(s.name, s.field);
      EXPECT_TRUE(fresh || it->second == s.field) << s.name << " names two different fields";
    }
  }
}

TEST(Names, MnemonicLookupIgnoresCase) {
  EXPECT_EQ(opcode_from_mnemonic("matmul"), Opcode::kMatmul);
  EXPECT_EQ(opcode_from_mnemonic("HostCall"), Opcode::kHostCall);
  EXPECT_EQ(opcode_from_mnemonic("MATMULX"), std::nullopt);
  EXPECT_EQ(opcode_from_mnemonic(""), std::nullopt);
}

}  // namespace
}  // namespace npusim::isa
