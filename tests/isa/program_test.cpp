// The program file: layout from the comment in isa/program.h, round trips and every rejection.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "isa/assembly.h"
#include "isa/program.h"
#include "tests/isa/isa_test_util.h"

namespace npusim::isa {
namespace {

// Little-endian byte builders, written independently of program.cpp.
void put32(std::vector<uint8_t>& b, uint32_t v) {
  for (int i = 0; i < 4; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
void put64(std::vector<uint8_t>& b, uint64_t v) {
  for (int i = 0; i < 8; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
void put_str(std::vector<uint8_t>& b, const std::string& s) {
  put32(b, static_cast<uint32_t>(s.size()));
  b.insert(b.end(), s.begin(), s.end());
}
std::vector<uint8_t> header(uint32_t sections, uint32_t version = 1) {
  std::vector<uint8_t> b = {'N', 'P', 'U', 'S', 'I', 'M', 'P', 'G'};
  put32(b, version);
  put32(b, sections);
  return b;
}
void section(std::vector<uint8_t>& b, uint32_t kind, const std::vector<uint8_t>& payload) {
  put32(b, kind);
  put64(b, payload.size());
  b.insert(b.end(), payload.begin(), payload.end());
}

std::string error_of(const std::vector<uint8_t>& bytes) {
  try {
    deserialize(bytes);
  } catch (const ProgramError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(ProgramFile, EmptyProgramIsHeaderPlusSevenEmptySectionsInKindOrder) {
  std::vector<uint8_t> expect = header(7);
  std::vector<uint8_t> zero32, zero64;
  put32(zero32, 0);
  put64(zero64, 0);
  section(expect, 1, {});      // machine: no text
  section(expect, 2, zero32);  // layers: count 0
  section(expect, 3, zero32);  // data: count 0
  section(expect, 4, zero64);  // instructions: word count 0
  section(expect, 5, zero32);  // host ops: count 0
  section(expect, 6, zero32);  // tensors: count 0
  section(expect, 7, zero32);  // layer info: count 0
  EXPECT_EQ(expect.size(), 16u + 7 * 12 + 5 * 4 + 8);
  EXPECT_EQ(serialize(Program{}), expect);
  EXPECT_EQ(deserialize(expect), Program{});
}

TEST(ProgramFile, HandBuiltFileWithSectionsOutOfOrderAndSomeMissingReads) {
  std::vector<uint8_t> b = header(3);
  std::vector<uint8_t> ins;
  put64(ins, 2);  // two 128-bit words: HALT then BARRIER with layer 1
  put64(ins, 9);
  put64(ins, 0);
  put64(ins, 8 | (1ULL << 18));
  put64(ins, 0);
  section(b, 4, ins);
  std::vector<uint8_t> layers;
  put32(layers, 2);
  put_str(layers, "conv1");
  put_str(layers, "Conv");
  put_str(layers, "");
  put_str(layers, "Relu");
  section(b, 2, layers);
  std::vector<uint8_t> tensors;
  put32(tensors, 1);
  put_str(tensors, "images");
  tensors.push_back(0);  // input
  tensors.push_back(5);  // fp32
  put64(tensors, 0x1000);
  put32(tensors, 2);
  put64(tensors, 3);
  put64(tensors, 224);
  section(b, 6, tensors);

  const Program p = deserialize(b);
  ASSERT_EQ(p.instructions.size(), 2u);
  EXPECT_EQ(p.instructions[0].opcode, Opcode::kHalt);
  EXPECT_EQ(p.instructions[1].opcode, Opcode::kBarrier);
  EXPECT_EQ(p.instructions[1].layer(), 1u);
  EXPECT_EQ(p.layers, (std::vector<Layer>{{"conv1", "Conv"}, {"", "Relu"}}));
  ASSERT_EQ(p.tensors.size(), 1u);
  EXPECT_EQ(p.tensors[0].name, "images");
  EXPECT_EQ(p.tensors[0].role, TensorBinding::Role::kInput);
  EXPECT_EQ(p.tensors[0].dtype, DType::kFp32);
  EXPECT_EQ(p.tensors[0].dram_addr, 0x1000u);
  EXPECT_EQ(p.tensors[0].dims, (std::vector<uint64_t>{3, 224}));
  EXPECT_TRUE(p.machine.empty() && p.data.empty() && p.host_ops.empty());
}

TEST(ProgramFile, RandomProgramsRoundTripThroughBytes) {
  test::ProgramGen gen(11);
  for (int i = 0; i < 300; ++i) {
    const Program p = gen.program();
    const std::vector<uint8_t> bytes = serialize(p);
    const Program q = deserialize(bytes);
    ASSERT_EQ(q, p) << "program " << i;
    ASSERT_EQ(serialize(q), bytes);
  }
}

TEST(ProgramFile, BadMagicIsNotAProgram) {
  std::vector<uint8_t> b = serialize(Program{});
  b[0] = 'X';
  EXPECT_EQ(error_of(b), "not an npusim program (bad magic)");
  EXPECT_EQ(error_of({}), "not an npusim program (only 0 bytes, the header needs 16)");
  EXPECT_EQ(error_of({'N', 'P', 'U'}), "not an npusim program (only 3 bytes, the header needs 16)");
}

TEST(ProgramFile, OtherVersionIsRejectedNamingBoth) {
  EXPECT_EQ(error_of(header(0, 2)), "program format version 2 is not supported (this build reads version 1)");
}

TEST(ProgramFile, SectionLongerThanTheFileIsRejectedWithItsOffset) {
  std::vector<uint8_t> b = header(1);
  put32(b, 4);
  put64(b, 4096);
  b.resize(b.size() + 57);
  EXPECT_EQ(error_of(b), "section 'instructions' at byte 16 claims 4096 bytes but only 57 remain");
}

TEST(ProgramFile, UnknownAndDuplicateSectionsAreRejected) {
  std::vector<uint8_t> b = header(1);
  section(b, 8, {});
  EXPECT_EQ(error_of(b), "unknown section kind 8 at byte 16");
  b = header(2);
  section(b, 1, {});
  section(b, 1, {});
  EXPECT_EQ(error_of(b), "section 'machine' appears twice (at byte 16 and at byte 28)");
}

TEST(ProgramFile, SectionCountBeyondTheFileIsRejectedBeforeReading) {
  EXPECT_NE(error_of(header(1000000)).find("section count"), std::string::npos);
}

TEST(ProgramFile, HugeCountsAreRejectedWithoutAllocating) {
  std::vector<uint8_t> b = header(1);
  std::vector<uint8_t> payload;
  put32(payload, 0xffffffff);
  section(b, 2, payload);
  EXPECT_NE(error_of(b).find("layer count at byte 28 claims 4294967295 entries"), std::string::npos)
      << error_of(b);
  b = header(1);
  payload.clear();
  put64(payload, ~uint64_t{0});
  section(b, 4, payload);
  EXPECT_NE(error_of(b).find("instruction word count"), std::string::npos) << error_of(b);
}

TEST(ProgramFile, StringLongerThanItsSectionIsRejected) {
  std::vector<uint8_t> b = header(1);
  std::vector<uint8_t> payload;
  put32(payload, 1);
  put32(payload, 100);  // name of 100 bytes, only 8 present
  payload.insert(payload.end(), {'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'});
  section(b, 2, payload);
  EXPECT_EQ(error_of(b), "layer 0 name at byte 32 claims 100 bytes but only 8 remain in section 'layers'");
}

TEST(ProgramFile, LeftoverBytesInASectionOrAfterTheLastAreRejected) {
  std::vector<uint8_t> b = header(1);
  section(b, 5, {0, 0, 0, 0, 9});
  EXPECT_EQ(error_of(b), "section 'host_ops' at byte 16 has 1 unused bytes after its contents");
  b = serialize(Program{});
  b.push_back(0);
  EXPECT_EQ(error_of(b), "1 unexpected bytes after the last section (at byte 128)");
}

TEST(ProgramFile, UndecodableInstructionNamesItsIndex) {
  std::vector<uint8_t> b = header(1);
  std::vector<uint8_t> ins;
  put64(ins, 2);
  put64(ins, 0);  // NOP
  put64(ins, 0);
  put64(ins, 0x42);  // opcode 0x42
  put64(ins, 0);
  section(b, 4, ins);
  EXPECT_EQ(error_of(b), "instruction 1: unknown opcode 0x42 at word 1");
}

TEST(ProgramFile, TruncatedInstructionStreamIsRejected) {
  Program p;
  Instruction ld;
  ld.opcode = Opcode::kLoad;
  p.instructions.push_back(ld);
  std::vector<uint8_t> b = header(1);
  std::vector<uint8_t> ins;
  put64(ins, 2);  // LOAD needs 3 words
  for (int i = 0; i < 4; ++i) put64(ins, i == 0 ? 1 : 0);
  section(b, 4, ins);
  EXPECT_NE(error_of(b).find("instruction 0: LOAD at word 0 is truncated"), std::string::npos) << error_of(b);
}

TEST(ProgramFile, BadTensorRoleAndDtypeAreRejected) {
  for (auto [role, dtype] : {std::pair<uint8_t, uint8_t>{2, 0}, {0, 8}}) {
    std::vector<uint8_t> b = header(1);
    std::vector<uint8_t> t;
    put32(t, 1);
    put_str(t, "x");
    t.push_back(role);
    t.push_back(dtype);
    put64(t, 0);
    put32(t, 0);
    section(b, 6, t);
    EXPECT_NE(error_of(b).find("tensor 0 ('x') has " + std::string(role == 2 ? "role 2" : "dtype 8")),
              std::string::npos)
        << error_of(b);
  }
}

TEST(ProgramFile, MachineTextMustBeKeyValueLines) {
  Program p;
  p.machine = "rows=32\ncols";
  std::vector<uint8_t> b = serialize(p);
  EXPECT_EQ(error_of(b), "machine section line 2 does not end with a newline");
  p.machine = "rows=32\ncols\n";
  EXPECT_EQ(error_of(serialize(p)), "machine section line 2 is not of the form key=value");
}

TEST(ProgramFile, LayerAndHostOpReferencesMustExistWhenTheProgramDefinesAny) {
  Program p;
  Instruction nop;
  nop.set(Field::kLayer, 3);
  p.instructions.push_back(nop);
  EXPECT_EQ(deserialize(serialize(p)), p);  // no layers: the tag is free
  p.layers = {{"a", "Conv"}, {"b", "Relu"}};
  EXPECT_EQ(error_of(serialize(p)), "instruction 0 (NOP) refers to layer 3 but the program has 2 layers");
  p.layers.push_back({"c", "Add"});
  p.layers.push_back({"d", "Add"});
  Instruction hc;
  hc.opcode = Opcode::kHostCall;
  hc.set(Field::kHostOp, 1);
  p.instructions.push_back(hc);
  EXPECT_EQ(deserialize(serialize(p)), p);
  p.host_ops = {{"nms", "NonMaxSuppression", 1000}};
  EXPECT_EQ(error_of(serialize(p)), "instruction 1 (HOSTCALL) refers to host op 1 but the program has 1");
}

TEST(ProgramFile, SerializeRejectsAnInvalidInstructionWithItsIndex) {
  Program p;
  p.instructions.resize(2);
  p.instructions[1].opcode = Opcode::kPreload;
  p.instructions[1].set(Field::kRows, 1 << 16);
  try {
    serialize(p);
    ADD_FAILURE() << "serialized";
  } catch (const ProgramError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("instruction 1: PRELOAD field 'rows' = 65536", 0), 0u) << e.what();
  }
}

TEST(ProgramFile, FilesRoundTripAndErrorsNameThePath) {
  test::ProgramGen gen(5);
  const Program p = gen.program();
  const std::string path = std::string(NPUSIM_BINARY_DIR) + "/isa_test_program.npuprog";
  write_program_file(path, p);
  EXPECT_EQ(read_program_file(path), p);

  std::FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  std::fputs("hello", f);
  std::fclose(f);
  try {
    read_program_file(path);
    ADD_FAILURE() << "read garbage";
  } catch (const ProgramError& e) {
    EXPECT_EQ(std::string(e.what()), path + ": not an npusim program (bad magic)");
  }
  std::remove(path.c_str());

  const std::string missing = std::string(NPUSIM_BINARY_DIR) + "/no/such/dir/x.npuprog";
  for (auto fn : {+[](const std::string& s) { read_program_file(s); },
                  +[](const std::string& s) { write_program_file(s, Program{}); }}) {
    try {
      fn(missing);
      ADD_FAILURE() << "no error";
    } catch (const ProgramError& e) {
      EXPECT_NE(std::string(e.what()).find("'" + missing + "'"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace npusim::isa

namespace npusim::isa {
namespace {

// What the compiler records of each layer (useful MACs, precision) survives the file and the assembly
// text; a layer_info section that describes another number of layers than the program has is rejected.
TEST(ProgramFile, LayerMacsAndPrecisionRoundTripThroughTheFileAndTheAssembly) {
  Program p;
  p.layers = {{"conv", "Conv", 1234, DType::kInt8},
              {"relu", "Relu", 0, std::nullopt},
              {"fc", "Gemm", 5, DType::kFp16}};
  EXPECT_EQ(deserialize(serialize(p)), p);
  const std::string text = disassemble(p);
  EXPECT_NE(text.find(".layer conv Conv macs=1234 precision=int8\n"), std::string::npos) << text;
  EXPECT_NE(text.find(".layer relu Relu\n"), std::string::npos) << text;
  EXPECT_EQ(assemble(text, "p.s"), p);
  std::vector<uint8_t> b = header(2);
  std::vector<uint8_t> layers, info;
  put32(layers, 1);
  put32(layers, 1);
  layers.push_back('a');
  put32(layers, 1);
  layers.push_back('B');
  section(b, 2, layers);
  put32(info, 2);
  for (int i = 0; i < 2; ++i) {
    put64(info, 7);
    info.push_back(255);
  }
  section(b, 7, info);
  EXPECT_EQ(error_of(b), "section 'layer_info' describes 2 layers but the program has 1");
}

}  // namespace
}  // namespace npusim::isa
