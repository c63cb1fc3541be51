// Footprints: the byte ranges each opcode touches, and the errors for out-of-capacity or malformed ones.
#include "arch/datapath/footprint.h"

#include <gtest/gtest.h>

#include <random>
#include <set>

#include "arch/datapath/error.h"
#include "arch/datapath/executor.h"
#include "isa/assembly.h"
#include "tests/arch/datapath/dp_test_util.h"

namespace npusim::arch::datapath {
namespace {

using namespace test;  // NOLINT: test helpers

isa::NpuConfig small_config() {
  isa::NpuConfig cfg;
  cfg.sram.input.size_kib = 4;
  cfg.sram.weight.size_kib = 2;
  cfg.sram.accumulator.size_kib = 8;
  cfg.systolic_array.rows = 8;
  cfg.systolic_array.cols = 8;
  return cfg;
}

TEST(Footprint, LoadWritesTheDenseHaloBoxAndReadsTheDramHull) {
  Box b{4, 5, 6, 2, 10, 100, 1000, 1, 1, 2, 2, 0};
  const Footprint fp =
      footprint(dma(Opcode::kLoad, DType::kFp16, Buffer::kInput, 0x100, 64, b), small_config());
  ASSERT_EQ(fp.sram.size(), 1u);
  // 4 x (5+4) x (6+2) x 2 fp16 elements.
  EXPECT_EQ(fp.sram[0], (SramRange{Buffer::kInput, 64, 64 + 4 * 9 * 8 * 2 * 2, Access::kWrite}));
  ASSERT_EQ(fp.dram.size(), 1u);
  // Last element: 3 + 4*10 + 5*100 + 1*1000 = 1543 -> hull of 1544 elements.
  EXPECT_EQ(fp.dram[0], (DramRange{0x100, 0x100 + 1544 * 2, Access::kRead}));
}

TEST(Footprint, StoreReadsSramAndWritesDram) {
  Box b{8, 2, 1, 1, 16};
  const Footprint fp =
      footprint(dma(Opcode::kStore, DType::kInt32, Buffer::kAccumulator, 0x40, 0, b), small_config());
  EXPECT_EQ(fp.sram[0], (SramRange{Buffer::kAccumulator, 0, 64, Access::kRead}));
  EXPECT_EQ(fp.dram[0], (DramRange{0x40, 0x40 + (7 + 16 + 1) * 4, Access::kWrite}));
}

TEST(Footprint, MatmulReadsOperandsAndAccumulatorOnlyWhenAccumulating) {
  isa::NpuConfig cfg = small_config();
  Footprint fp = footprint(matmul(DType::kInt8, 4, 8, 16, 10, 20, 30, false, false, 12), cfg);
  ASSERT_EQ(fp.sram.size(), 3u);
  EXPECT_EQ(fp.sram[0], (SramRange{Buffer::kInput, 10, 10 + 3 * 12 + 8, Access::kRead}));
  EXPECT_EQ(fp.sram[1], (SramRange{Buffer::kWeight, 20, 20 + 8 * 16, Access::kRead}));
  EXPECT_EQ(fp.sram[2], (SramRange{Buffer::kAccumulator, 30, 30 + 4 * 16 * 4, Access::kWrite}));
  fp = footprint(matmul(DType::kFp16, 4, 8, 16, 0, 0, 0, true, true), cfg);  // WS preloaded: no B read
  ASSERT_EQ(fp.sram.size(), 3u);
  EXPECT_EQ(fp.sram[0].buf, Buffer::kInput);
  EXPECT_EQ(fp.sram[0].bytes(), 4u * 8 * 2);
  EXPECT_EQ(fp.sram[1], (SramRange{Buffer::kAccumulator, 0, 256, Access::kRead}));
  EXPECT_EQ(fp.sram[2], (SramRange{Buffer::kAccumulator, 0, 256, Access::kWrite}));
  cfg.systolic_array.dataflow = isa::Dataflow::kIs;  // IS preloaded: no A read
  fp = footprint(matmul(DType::kInt8, 4, 8, 16, 0, 0, 0, false, true), cfg);
  ASSERT_EQ(fp.sram.size(), 2u);
  EXPECT_EQ(fp.sram[0].buf, Buffer::kWeight);
}

TEST(Footprint, ConvReadsTheWholeTileAndRSInCByNWeights) {
  const Footprint fp = footprint(conv(DType::kInt8, ConvShape{10, 10, 3, 8, 8, 16, 3, 3}), small_config());
  EXPECT_EQ(fp.sram[0].bytes(), 10u * 10 * 3);
  EXPECT_EQ(fp.sram[1].bytes(), 27u * 16);
  EXPECT_EQ(fp.sram[2].bytes(), 64u * 16 * 4);
}

TEST(Footprint, VecOperandSizesFollowTheOp) {
  const isa::NpuConfig cfg = small_config();
  Instruction v = vec(isa::VecOp::kAdd, DType::kInt8, DType::kFp32, 16, 4, 2);
  v.set(Field::kBcast, static_cast<int64_t>(isa::Bcast::kRow));
  Footprint fp = footprint(v, cfg);
  ASSERT_EQ(fp.sram.size(), 3u);
  EXPECT_EQ(fp.sram[0].bytes(), 128u);
  EXPECT_EQ(fp.sram[1].bytes(), 16u);  // one row
  EXPECT_EQ(fp.sram[2].bytes(), 128u * 4);
  v.set(Field::kBcast, static_cast<int64_t>(isa::Bcast::kCol));
  EXPECT_EQ(footprint(v, cfg).sram[1].bytes(), 8u);  // one per row
  fp = footprint(vec(isa::VecOp::kReduceSum, DType::kInt32, DType::kInt32, 16, 4, 2), cfg);
  ASSERT_EQ(fp.sram.size(), 2u);
  EXPECT_EQ(fp.sram[1].bytes(), 8u * 4);
  Instruction pool = vec(isa::VecOp::kMaxPool, DType::kInt8, DType::kInt8, 3, 7, 6);
  pool.set(Field::kWinH, 2).set(Field::kWinW, 3).set(Field::kStrH, 2).set(Field::kStrW, 2);
  EXPECT_EQ(footprint(pool, cfg).sram[1].bytes(), 3u * 3 * 3);  // out 3 x 3 x C
  Instruction rq = vec(isa::VecOp::kRequantize, DType::kInt32, DType::kInt8, 5, 2);
  rq.set(Field::kBcast, static_cast<int64_t>(isa::Bcast::kRow));
  EXPECT_EQ(footprint(rq, cfg).sram[1].bytes(), 5u * 8);  // (multiplier, shift) per channel
}

std::string error_of(const Instruction& ins, const isa::NpuConfig& cfg) {
  try {
    footprint(ins, cfg);
  } catch (const DatapathError& e) {
    return e.what();
  }
  return "";
}

TEST(Footprint, OutOfCapacityNamesInstructionBufferRangeAndCapacity) {
  const isa::NpuConfig cfg = small_config();
  Instruction mm = matmul(DType::kInt8, 32, 64, 64, 0, 0, 0);  // B = 4096 bytes > 2 KiB weight buffer
  mm.set(Field::kLayer, 7);
  const std::string e = error_of(mm, cfg);
  EXPECT_NE(e.find("MATMUL (layer 7)"), std::string::npos) << e;
  EXPECT_NE(e.find("weight buffer"), std::string::npos) << e;
  EXPECT_NE(e.find("[0x0, 0x1000)"), std::string::npos) << e;
  EXPECT_NE(e.find("2048 bytes"), std::string::npos) << e;
  // The executor refuses it before touching anything.
  MachineState st(cfg);
  EXPECT_THROW(execute(mm, cfg, st), DatapathError);

  Box b{16, 16, 1, 1, 16};
  b.pad_left = b.pad_right = 1;
  const std::string e2 = error_of(dma(Opcode::kLoad, DType::kInt8, Buffer::kInput, 0, 4096 - 200, b), cfg);
  EXPECT_NE(e2.find("LOAD"), std::string::npos) << e2;
  EXPECT_NE(e2.find("writes bytes [0xf38, 0x1058) of the input buffer, which holds 4096 bytes"),
            std::string::npos)
      << e2;

  Instruction v = vec(isa::VecOp::kRelu, DType::kFp32, DType::kFp32, 1024, 3);
  EXPECT_NE(error_of(v, cfg).find("VEC relu"), std::string::npos);
}

TEST(Footprint, MalformedShapesAreErrors) {
  const isa::NpuConfig cfg = small_config();
  Box zero{4, 0};
  EXPECT_NE(error_of(dma(Opcode::kLoad, DType::kInt8, Buffer::kInput, 0, 0, zero), cfg).find("size1=0"),
            std::string::npos);
  EXPECT_NE(error_of(matmul(DType::kInt8, 4, 8, 4, 0, 0, 0, false, false, 5), cfg).find("a_stride=5"),
            std::string::npos);
  ConvShape s{5, 5, 1, 3, 3, 1, 3, 3, 0, 1};
  EXPECT_NE(error_of(conv(DType::kInt8, s), cfg).find("stride_h=0"), std::string::npos);
  Instruction relu = vec(isa::VecOp::kRelu, DType::kInt8, DType::kInt8, 4);
  relu.set(Field::kBcast, 1);
  EXPECT_NE(error_of(relu, cfg).find("unary"), std::string::npos);
  Instruction rq = vec(isa::VecOp::kRequantize, DType::kFp32, DType::kInt8, 4);
  EXPECT_NE(error_of(rq, cfg).find("int32"), std::string::npos);
  Instruction pool = vec(isa::VecOp::kAvgPool, DType::kInt8, DType::kInt8, 1, 2, 2);
  pool.set(Field::kWinH, 3).set(Field::kWinW, 1).set(Field::kStrH, 1).set(Field::kStrW, 1);
  EXPECT_NE(error_of(pool, cfg).find("window"), std::string::npos);
  Box far{16};
  EXPECT_NE(
      error_of(dma(Opcode::kLoad, DType::kInt8, Buffer::kInput, DramImage::kAddressBytes - 8, 0, far), cfg)
          .find("40-bit"),
      std::string::npos);
  isa::NpuConfig os = cfg;
  os.systolic_array.dataflow = isa::Dataflow::kOs;
  EXPECT_NE(error_of(preload(DType::kInt8, Buffer::kWeight, 0, 2, 2), os).find("output-stationary"),
            std::string::npos);
}

TEST(Footprint, SyncAndHostInstructionsTouchNothing) {
  for (Opcode op : {Opcode::kNop, Opcode::kBarrier, Opcode::kHalt, Opcode::kHostCall}) {
    Instruction i;
    i.opcode = op;
    const Footprint fp = footprint(i, small_config());
    EXPECT_TRUE(fp.sram.empty());
    EXPECT_TRUE(fp.dram.empty());
  }
}

// The vector unit sizes each VEC with vec_geometry_unchecked, after the pre-run check ran vec_geometry's
// checks: for every instruction those accept, the two agree. Random fields, invalid ones included so that
// every check is taken (a fixed seed: the same instructions each run).
TEST(Footprint, VecGeometryWithoutChecksIsTheCheckedOneForEveryValidInstruction) {
  std::mt19937_64 rng(39);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  int valid = 0;
  std::set<int64_t> valid_ops;
  for (int n = 0; n < 60000; ++n) {
    Instruction i;
    i.opcode = Opcode::kVec;
    i.set(Field::kVop, pick(0, isa::kNumVecOps - 1))
        .set(Field::kDtype, pick(0, isa::kNumDTypes - 1))
        .set(Field::kDtypeOut, pick(0, isa::kNumDTypes - 1))
        .set(Field::kSrc1Buf, pick(0, isa::kNumBuffers - 1))
        .set(Field::kSrc2Buf, pick(0, isa::kNumBuffers - 1))
        .set(Field::kDstBuf, pick(0, isa::kNumBuffers - 1))
        .set(Field::kBcast, pick(0, isa::kNumBcasts - 1))
        .set(Field::kD0, pick(0, 9))
        .set(Field::kD1, pick(0, 9))
        .set(Field::kD2, pick(0, 9));
    if (pick(0, 1))
      i.set(Field::kImm0, pick(-2, 3)).set(Field::kImm1, pick(-40, 40)).set(Field::kImm2, pick(0, 1));
    if (pick(0, 1)) {
      i.set(Field::kWinH, pick(0, 3))
          .set(Field::kWinW, pick(0, 3))
          .set(Field::kStrH, pick(0, 2))
          .set(Field::kStrW, pick(0, 2));
    }
    VecGeometry checked;
    try {
      checked = vec_geometry(i);
    } catch (const DatapathError&) {
      continue;  // the pre-run check stops such an instruction
    }
    ++valid;
    valid_ops.insert(i.get(Field::kVop));
    const VecGeometry g = vec_geometry_unchecked(i);
    ASSERT_EQ(g.src1_elems, checked.src1_elems) << isa::disassemble(i);
    ASSERT_EQ(g.src2_elems, checked.src2_elems) << isa::disassemble(i);
    ASSERT_EQ(g.src2_record_bytes, checked.src2_record_bytes) << isa::disassemble(i);
    ASSERT_EQ(g.dst_elems, checked.dst_elems) << isa::disassemble(i);
    ASSERT_EQ(g.out_h, checked.out_h) << isa::disassemble(i);
    ASSERT_EQ(g.out_w, checked.out_w) << isa::disassemble(i);
  }
  EXPECT_GT(valid, 2000);
  EXPECT_EQ(valid_ops.size(), static_cast<size_t>(isa::kNumVecOps));  // every op was compared
}

}  // namespace
}  // namespace npusim::arch::datapath
