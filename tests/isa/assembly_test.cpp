// The assembly text: parsing, the canonical disassembly, round trips and error messages.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "isa/assembly.h"
#include "tests/isa/isa_test_util.h"

namespace npusim::isa {
namespace {

using test::all_fields;
using test::field_max;
using test::field_min;
using test::free_fields;

std::string read_text(const std::string& path) {
  std::ifstream f(path);
  EXPECT_TRUE(f) << path;
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string error_of(const std::string& text) {
  try {
    assemble(text, "prog.s");
  } catch (const ProgramError& e) {
    return e.what();
  }
  return "(no error)";
}

// Both directions: text -> program -> text is the identity on canonical text, and program -> text ->
// program and program -> bytes -> text -> bytes are the identity on programs.
void expect_round_trips(const Program& p) {
  const std::string text = disassemble(p);
  const Program q = assemble(text);
  ASSERT_EQ(q, p) << text;
  EXPECT_EQ(disassemble(q), text);
  const std::vector<uint8_t> bytes = serialize(p);
  EXPECT_EQ(serialize(assemble(disassemble(deserialize(bytes)))), bytes);
}

TEST(Assemble, ParsesDirectivesAndInstructionsIntoTheProgram) {
  const Program p = assemble(R"(# a comment line

.machine systolic_array.rows=16   # trailing comment
.machine name=edge tpu like
.layer conv1 Conv
.layer "fc 2" Gemm
.hostop nms NonMaxSuppression 123456
.tensor input images uint8 0x1000 1x3x8x8
.tensor output logits fp32 4096 -
.data 0x20 00ff10Ab
.data 0x40 -
NOP layer=1   # "fc 2" can only be named by its index
Halt layer=conv1
)");
  EXPECT_EQ(p.machine, "systolic_array.rows=16\nname=edge tpu like\n");
  EXPECT_EQ(p.layers, (std::vector<Layer>{{"conv1", "Conv"}, {"fc 2", "Gemm"}}));
  EXPECT_EQ(p.host_ops, (std::vector<HostOp>{{"nms", "NonMaxSuppression", 123456}}));
  ASSERT_EQ(p.tensors.size(), 2u);
  EXPECT_EQ(p.tensors[0],
            (TensorBinding{"images", TensorBinding::Role::kInput, DType::kUint8, 0x1000, {1, 3, 8, 8}}));
  EXPECT_EQ(p.tensors[1], (TensorBinding{"logits", TensorBinding::Role::kOutput, DType::kFp32, 4096, {}}));
  EXPECT_EQ(p.data, (std::vector<DataSegment>{{0x20, {0x00, 0xff, 0x10, 0xab}}, {0x40, {}}}));
  ASSERT_EQ(p.instructions.size(), 2u);
  EXPECT_EQ(p.instructions[0], Instruction().set(Field::kLayer, 1));
  Instruction halt;
  halt.opcode = Opcode::kHalt;
  EXPECT_EQ(p.instructions[1], halt);
}

TEST(Assemble, FieldsInAnyOrderOmittedFieldsZeroAndValueSpellings) {
  const Program p = assemble(
      ".layer conv1 Conv\n.layer fc Gemm\n"
      "matmul n=0x10 m=16 k=32 layer=fc wait=load|vector signal=store acc=1\n"
      "VEC op=clip dtype=fp32 dtype_out=BF16 imm0=-5 imm1=0xbf800000 imm2=0x7fffffff bcast=scalar layer=1\n"
      "HOSTCALL cpu_ops=281474976710655\n"
      "LOAD dtype=2 buf=acc pad_value=-32768 wait=9 layer=0\n");
  ASSERT_EQ(p.instructions.size(), 4u);
  Instruction mm;
  mm.opcode = Opcode::kMatmul;
  mm.set(Field::kM, 16).set(Field::kK, 32).set(Field::kN, 16).set(Field::kLayer, 1);
  mm.set(Field::kWait, 0b00101).set(Field::kSignal, 0b01000).set(Field::kAccumulate, 1);
  EXPECT_EQ(p.instructions[0], mm);
  Instruction vec;
  vec.opcode = Opcode::kVec;
  vec.set(Field::kVop, static_cast<int>(VecOp::kClip)).set(Field::kDtype, 5).set(Field::kDtypeOut, 4);
  // Hex in a signed field is the raw 32-bit pattern: 0xbf800000 is the fp32 bits of -1.0.
  vec.set(Field::kImm0, -5).set(Field::kImm1, -0x40800000).set(Field::kImm2, 0x7fffffff);
  vec.set(Field::kBcast, 1).set(Field::kLayer, 1);
  EXPECT_EQ(p.instructions[1], vec);
  Instruction hc;
  hc.opcode = Opcode::kHostCall;
  hc.set(Field::kCpuOps, (int64_t{1} << 48) - 1);
  EXPECT_EQ(p.instructions[2], hc);
  Instruction ld;
  ld.opcode = Opcode::kLoad;
  ld.set(Field::kDtype, 2).set(Field::kBuf, 2).set(Field::kPadValue, -32768).set(Field::kWait, 9);
  EXPECT_EQ(p.instructions[3], ld);
}

// A one-instruction program survives disassembly and reassembly, and its instruction encoding and decoding.
void expect_text_and_words_round_trip(const Program& p) {
  EXPECT_TRUE(assemble(disassemble(p)) == p);
  std::vector<uint64_t> words;
  encode(p.instructions.at(0), words);
  size_t pos = 0;
  EXPECT_TRUE(decode(words, pos) == p.instructions.at(0));
}

TEST(Assemble, DwconvCarriesItsWindowStridesAndDilationsThroughTextAndWords) {
  const Program p = assemble(
      "VEC op=dwconv dtype=uint8 dtype_out=int32 src1_buf=input src1=0x100 src2_buf=weight src2=0x40 "
      "dst_buf=acc dst=0x0 d0=96 d1=17 d2=9 win_h=3 win_w=5 str_h=2 str_w=1 imm0=2 imm1=0\n");
  ASSERT_EQ(p.instructions.size(), 1u);
  const Instruction& i = p.instructions[0];
  EXPECT_EQ(i.get(Field::kVop), static_cast<int64_t>(VecOp::kDwConv));
  EXPECT_EQ(i.get(Field::kWinH), 3);
  EXPECT_EQ(i.get(Field::kWinW), 5);
  EXPECT_EQ(i.get(Field::kStrH), 2);
  EXPECT_EQ(i.get(Field::kImm0), 2);
  EXPECT_NE(disassemble(i).find("op=dwconv"), std::string::npos) << disassemble(i);
  expect_text_and_words_round_trip(p);
}

TEST(Assemble, LutCarriesItsCodesAndTableThroughTextAndWords) {
  const Program p = assemble(
      "VEC op=lut dtype=uint8 dtype_out=int8 src1_buf=input src1=0x200 src2_buf=acc src2=0x0 dst_buf=input "
      "dst=0x200 d0=4096 d1=3 d2=1\n");
  ASSERT_EQ(p.instructions.size(), 1u);
  const Instruction& i = p.instructions[0];
  EXPECT_EQ(i.get(Field::kVop), static_cast<int64_t>(VecOp::kLut));
  EXPECT_EQ(i.get(Field::kDtype), static_cast<int64_t>(DType::kUint8));
  EXPECT_EQ(i.get(Field::kDtypeOut), static_cast<int64_t>(DType::kInt8));
  EXPECT_EQ(i.get(Field::kSrc2Buf), static_cast<int64_t>(Buffer::kAccumulator));
  EXPECT_NE(disassemble(i).find("op=lut"), std::string::npos) << disassemble(i);
  expect_text_and_words_round_trip(p);
}

TEST(Disassemble, CanonicalTextListsEveryFormatFieldInTableOrderAndHeaderFieldsOnlyWhenSet) {
  Instruction nop;
  EXPECT_EQ(disassemble(nop), "NOP");
  nop.set(Field::kWait, 0b01001).set(Field::kSignal, 0b10000).set(Field::kLayer, 2);
  EXPECT_EQ(disassemble(nop), "NOP wait=load|store signal=host layer=2");

  Instruction pre;
  pre.opcode = Opcode::kPreload;
  pre.set(Field::kBuf, 1).set(Field::kSramAddr, 256).set(Field::kRows, 16).set(Field::kCols, 8);
  pre.set(Field::kRowStride, 8);
  EXPECT_EQ(disassemble(pre), "PRELOAD dtype=int8 buf=weight sram=0x100 rows=16 cols=8 row_stride=8");

  Instruction mm;
  mm.opcode = Opcode::kMatmul;
  EXPECT_EQ(disassemble(mm), "MATMUL dtype=int8 a=0x0 a_stride=0 b=0x0 c=0x0 m=0 k=0 n=0 acc=0 preloaded=0");

  Instruction vec;
  vec.opcode = Opcode::kVec;
  vec.set(Field::kVop, static_cast<int>(VecOp::kMaxPool)).set(Field::kImm0, -7).set(Field::kBcast, 3);
  vec.set(Field::kDstBuf, 2).set(Field::kDstAddr, 0xabc);
  EXPECT_EQ(disassemble(vec),
            "VEC op=max_pool dtype=int8 dtype_out=int8 src1_buf=input src1=0x0 src2_buf=input src2=0x0 "
            "dst_buf=acc dst=0xabc d0=0 d1=0 d2=0 bcast=col imm0=-7 imm1=0 imm2=0 win_h=0 win_w=0 str_h=0 "
            "str_w=0");

  Instruction hc;
  hc.opcode = Opcode::kHostCall;
  hc.set(Field::kInBytes, 4096);
  EXPECT_EQ(disassemble(hc), "HOSTCALL host_op=0 in_bytes=4096 out_bytes=0 cpu_ops=0");
}

TEST(Disassemble, LayerIsItsNameWhenThatNameReadsBackToTheSameIndex) {
  Program p;
  p.layers = {{"conv1", "Conv"}, {"conv1", "Conv"}, {"7up", "Relu"},
              {"a b", "Add"},    {"", "Mul"},       {"fc", "Gemm"}};
  for (int i = 0; i < 6; ++i) {
    Instruction nop;
    nop.set(Field::kLayer, i);
    p.instructions.push_back(nop);
  }
  Instruction bar;
  bar.opcode = Opcode::kBarrier;
  bar.set(Field::kLayer, 5);
  EXPECT_EQ(disassemble(bar, &p), "BARRIER layer=fc");
  EXPECT_EQ(disassemble(bar), "BARRIER layer=5");
  EXPECT_EQ(disassemble(p),
            ".layer conv1 Conv\n.layer conv1 Conv\n.layer 7up Relu\n.layer \"a b\" Add\n.layer \"\" Mul\n"
            ".layer fc Gemm\n"
            "NOP\nNOP layer=1\nNOP layer=2\nNOP layer=3\nNOP layer=4\nNOP layer=fc\n");
  expect_round_trips(p);
}

TEST(Disassemble, DirectivesComeFirstWithQuotingOnlyWhereNeeded) {
  Program p;
  p.machine = "rows=32\nname=edge tpu\nnote=a # b\n";
  p.host_ops = {{"my op", "Custom", 7}};
  p.tensors = {{"x\"y", TensorBinding::Role::kOutput, DType::kBf16, 0x10, {2, 3}}};
  p.data = {{0xff, {1, 0xab}}};
  p.instructions.emplace_back();
  EXPECT_EQ(disassemble(p),
            ".machine rows=32\n.machine name=edge tpu\n.machine \"note=a # b\"\n"
            ".hostop \"my op\" Custom 7\n.tensor output \"x\\\"y\" bf16 0x10 2x3\n.data 0xff 01ab\nNOP\n");
  expect_round_trips(p);
}

TEST(RoundTrip, EveryFieldOfEveryOpcodeAtItsLimitsThroughTextAndBinary) {
  for (int op = 0; op < kNumOpcodes; ++op) {
    Program p;
    for (const FieldSpec& s : free_fields(static_cast<Opcode>(op))) {
      for (int64_t v : {int64_t{0}, int64_t{1}, field_min(s), field_max(s), field_max(s) / 3}) {
        Instruction ins;
        ins.opcode = static_cast<Opcode>(op);
        ins.set(s.field, v);
        p.instructions.push_back(ins);
      }
    }
    Instruction hi, lo;
    hi.opcode = lo.opcode = static_cast<Opcode>(op);
    for (const FieldSpec& s : free_fields(hi.opcode)) {
      hi.set(s.field, field_max(s));
      lo.set(s.field, field_min(s));
    }
    p.instructions.push_back(hi);
    p.instructions.push_back(lo);
    SCOPED_TRACE(kFormats[op].mnemonic);
    expect_round_trips(p);
  }
}

TEST(RoundTrip, RandomProgramsWithAwkwardNames) {
  test::ProgramGen gen(3);
  for (int i = 0; i < 300; ++i) {
    SCOPED_TRACE(i);
    expect_round_trips(gen.program());
  }
}

TEST(RoundTrip, AllOpcodesProgramAssemblesUsesEveryOpcodeAndRoundTrips) {
  const std::string path = std::string(NPUSIM_SOURCE_DIR) + "/tests/programs/all_opcodes.s";
  const Program p = assemble(read_text(path), path);
  std::set<Opcode> used;
  for (const Instruction& ins : p.instructions) used.insert(ins.opcode);
  EXPECT_EQ(used.size(), static_cast<size_t>(kNumOpcodes));
  EXPECT_EQ(p.layers.size(), 4u);
  EXPECT_EQ(p.host_ops.size(), 1u);
  EXPECT_FALSE(p.tensors.empty());
  EXPECT_FALSE(p.data.empty());
  expect_round_trips(p);

  // Every token pushed on a channel (from -> to) is popped by exactly one later wait, and no wait
  // pops a token that was not pushed before it in program order.
  std::map<std::pair<int, int>, int> tokens;
  for (const Instruction& ins : p.instructions) {
    const int self = static_cast<int>(ins.queue());
    for (int q = 0; q < kNumQueues; ++q) {
      if (ins.waits_on(static_cast<Queue>(q))) {
        EXPECT_GT((tokens[{q, self}]--), 0) << disassemble(ins, &p) << " waits for a token never pushed";
      }
    }
    for (int q = 0; q < kNumQueues; ++q) {
      if (ins.signals(static_cast<Queue>(q))) ++tokens[{self, q}];
    }
  }
  for (const auto& [channel, left] : tokens) {
    EXPECT_EQ(left, 0) << kQueueNames[channel.first] << " -> " << kQueueNames[channel.second];
  }
}

TEST(AssemblyErrors, NameTheLineTheTokenAndAFix) {
  const std::pair<const char*, const char*> cases[] = {
      {"NOP\n\nMATMUL m=1 kk=3\n", "prog.s:3: MATMUL has no field 'kk' (did you mean 'k'?)"},
      {"MATMLU m=1", "prog.s:1: unknown instruction 'MATMLU' (did you mean 'MATMUL'?)"},
      {"PRELOAD dram_addr=5",
       "prog.s:1: PRELOAD has no field 'dram_addr' (valid: wait, signal, layer, dtype, buf, "
       "sram, rows, cols, row_stride)"},
      {"LOAD dram_addr=5", "prog.s:1: LOAD has no field 'dram_addr' (did you mean 'dram'?)"},
      {"FROBNICATE",
       "prog.s:1: unknown instruction 'FROBNICATE' (valid: NOP, LOAD, STORE, PRELOAD, MATMUL, "
       "CONV, VEC, HOSTCALL, BARRIER, HALT)"},
      {"MATMUL m=70000", "prog.s:1: MATMUL field 'm' = 70000 does not fit in 16 bits (0..65535)"},
      {"MATMUL m=-1", "prog.s:1: MATMUL field 'm' = -1 does not fit in 16 bits (0..65535)"},
      {"VEC imm0=2147483648",
       "prog.s:1: VEC field 'imm0' = 2147483648 does not fit in 32 signed bits (-2147483648..2147483647)"},
      {"VEC imm0=0x100000000",
       "prog.s:1: VEC field 'imm0' = 4294967296 does not fit in 32 signed bits (-2147483648..2147483647)"},
      {"MATMUL m=99999999999999999999",
       "prog.s:1: MATMUL field 'm': 99999999999999999999 is far out of range"},
      {"STORE pad_top=1", "prog.s:1: STORE field 'pad_top' = 1 must be 0 (STORE does not pad)"},
      {"MATMUL m=1 m=2", "prog.s:1: MATMUL field 'm' is given twice"},
      {"MATMUL m", "prog.s:1: expected field=value, got 'm'"},
      {"MATMUL m=", "prog.s:1: MATMUL field 'm' has no value"},
      {"MATMUL m=12ab", "prog.s:1: MATMUL field 'm': '12ab' is not a number (decimal or 0x hex)"},
      {"LOAD dtype=int4", "prog.s:1: unknown dtype 'int4' (did you mean 'int8'?)"},
      {"LOAD dtype=9", "prog.s:1: LOAD field 'dtype' = 9 is not a valid value (0..7)"},
      {"VEC op=rleu", "prog.s:1: unknown vector op 'rleu' (did you mean 'relu'?)"},
      {"VEC bcast=everywhere", "prog.s:1: unknown broadcast 'everywhere' (valid: none, scalar, row, col)"},
      {"LOAD buf=acum", "prog.s:1: unknown buffer 'acum' (did you mean 'acc'?)"},
      {"NOP wait=lod", "prog.s:1: NOP field 'wait': unknown queue 'lod' (did you mean 'load'?)"},
      {"NOP wait=load|",
       "prog.s:1: NOP field 'wait': unknown queue '' (valid: load, matrix, vector, store, host)"},
      {"NOP signal=32", "prog.s:1: NOP field 'signal' = 32 is not a valid value (0..31)"},
      {".layer conv1 Conv\nNOP layer=conv9", "prog.s:2: unknown layer 'conv9' (did you mean 'conv1'?)"},
      {"NOP layer=conv1\n.layer conv1 Conv",
       "prog.s:1: unknown layer 'conv1' (no layer is defined yet: declare it with .layer before use)"},
      {".layer a A\n.layer b B\nNOP\nNOP layer=5\n",
       "prog.s:4: layer 5 does not exist (the program defines 2 layers)"},
      {".hostop nms NMS 5\nHOSTCALL host_op=1\n",
       "prog.s:2: host_op 1 does not exist (the program defines 1 host ops)"},
      {".layr a b", "prog.s:1: unknown directive '.layr' (did you mean '.layer'?)"},
      {".layer a", "prog.s:1: .layer takes 2 to 4 arguments (NAME OPTYPE [macs=N] [precision=P]), got 1"},
      {".layer a Conv flops=3", "prog.s:1: .layer takes NAME OPTYPE [macs=N] [precision=P], got 'flops=3'"},
      {".hostop a b c", "prog.s:1: cpu op count 'c' is not a number (decimal or 0x hex, 0..2^64-1)"},
      {".data 0x0 abc", "prog.s:1: data has an odd number of hex digits (3)"},
      {".data 0x0 00zz", "prog.s:1: data byte 1 has a non-hex digit 'z'"},
      {".tensor inout x int8 0 1", "prog.s:1: tensor role 'inout' is neither 'input' nor 'output'"},
      {".tensor input x int8 0 1xx2",
       "prog.s:1: tensor dims '1xx2' are not decimal sizes joined by 'x' (e.g. 1x3x224x224, or - for a "
       "scalar)"},
      {".tensor input x int9 0 1", "prog.s:1: unknown dtype 'int9' (did you mean 'int8'?)"},
      {".tensor input x 8 0 1", "prog.s:1: dtype '8' is not valid (0..7 or a name)"},
      {".machine rows", "prog.s:1: .machine takes key=value, got 'rows'"},
      {".machine \"a\\nb=1\"", "prog.s:1: .machine takes key=value, got 'a\nb=1'"},
      {".layer \"abc x", "prog.s:1: unterminated string \"abc x"},
      {".layer \"a\"b c", "prog.s:1: unexpected 'b' right after the string \"a\""},
      {".layer \"a\\q\" b", "prog.s:1: unknown escape '\\q' in \"a\\q\""},
      {".layer \"a\\x4\" b", "prog.s:1: bad \\x escape in \"a\\x4\" (two hex digits expected)"},
  };
  for (const auto& [text, message] : cases) EXPECT_EQ(error_of(text), message) << text;
}

TEST(AssemblyErrors, UseTheSourceNameAndCountLinesAcrossCommentsAndCrLf) {
  try {
    assemble("# header\r\n\r\nNOP\r\n   # indented comment\r\nHALT x=1\r\n", "model.s");
    ADD_FAILURE() << "assembled";
  } catch (const ProgramError& e) {
    EXPECT_EQ(std::string(e.what()), "model.s:5: HALT has no field 'x' (valid: wait, signal, layer)");
  }
}

TEST(Assemble, EmptyTextIsAnEmptyProgram) {
  EXPECT_EQ(assemble(""), Program{});
  EXPECT_EQ(assemble("\n# nothing\n   \n"), Program{});
  EXPECT_EQ(disassemble(Program{}), "");
}

}  // namespace
}  // namespace npusim::isa
