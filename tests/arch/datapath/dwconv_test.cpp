// VEC dwconv: against a direct reference written here (exact integers, double-precision floats) and
// against the array's CONV on the same weights made block-diagonal (the mapping it replaces), on odd
// shapes, strides 1 and 2, dilation, every input dtype; its validation; its timing.
#include <gtest/gtest.h>

#include <random>

#include "arch/datapath/error.h"
#include "arch/datapath/executor.h"
#include "isa/timing/units.h"
#include "tests/arch/datapath/dp_test_util.h"

namespace npusim::arch::datapath {
namespace {

using namespace test;  // NOLINT: test helpers
using isa::VecOp;

struct Geometry {
  int64_t H, W, C, kh, kw, sh, sw, dh, dw;
  int64_t oh() const { return (H - (kh - 1) * dh - 1) / sh + 1; }
  int64_t ow() const { return (W - (kw - 1) * dw - 1) / sw + 1; }
};

Instruction dwconv(DType in, const Geometry& g) {
  const DType out = (in == DType::kInt8 || in == DType::kUint8) ? DType::kInt32 : DType::kFp32;
  Instruction i = vec(VecOp::kDwConv, in, out, g.C, g.W, g.H);
  i.set(Field::kWinH, g.kh).set(Field::kWinW, g.kw).set(Field::kStrH, g.sh).set(Field::kStrW, g.sw);
  i.set(Field::kImm0, g.dh == 1 ? 0 : g.dh).set(Field::kImm1, g.dw);
  return i;
}

// Input value (y, x, c) and weight (i, j, c) of a test case: the codes or reals as doubles.
struct Case {
  Geometry g;
  std::vector<double> x, w;
};

Case make_case(const Geometry& g, double lo, double hi, double wlo, double whi, bool integer, uint32_t seed) {
  std::mt19937 rng(seed);
  Case k{g, {}, {}};
  auto draw = [&](double a, double b) {
    if (integer)
      return static_cast<double>(
          std::uniform_int_distribution<int>(static_cast<int>(a), static_cast<int>(b))(rng));
    return std::uniform_real_distribution<double>(a, b)(rng);
  };
  for (int64_t i = 0; i < g.H * g.W * g.C; ++i) k.x.push_back(draw(lo, hi));
  for (int64_t i = 0; i < g.kh * g.kw * g.C; ++i) k.w.push_back(draw(wlo, whi));
  return k;
}

// out[(y*OW + x)*C + c] = sum over (i, j) of x[(y*sh + i*dh, x*sw + j*dw, c)] * w[(i, j, c)].
std::vector<double> reference(const Case& k) {
  const Geometry& g = k.g;
  std::vector<double> out;
  for (int64_t y = 0; y < g.oh(); ++y) {
    for (int64_t x = 0; x < g.ow(); ++x) {
      for (int64_t c = 0; c < g.C; ++c) {
        double s = 0;
        for (int64_t i = 0; i < g.kh; ++i) {
          for (int64_t j = 0; j < g.kw; ++j) {
            s += k.x[static_cast<size_t>(((y * g.sh + i * g.dh) * g.W + x * g.sw + j * g.dw) * g.C + c)] *
                 k.w[static_cast<size_t>((i * g.kw + j) * g.C + c)];
          }
        }
        out.push_back(s);
      }
    }
  }
  return out;
}

template <class T>
std::vector<T> as(const std::vector<double>& v) {
  std::vector<T> r;
  for (double x : v) r.push_back(static_cast<T>(x));
  return r;
}

// The weights as CONV's B operand [kh][kw][C][C], zero off the diagonal.
template <class T>
std::vector<T> block_diagonal(const Case& k) {
  const Geometry& g = k.g;
  std::vector<T> b(static_cast<size_t>(g.kh * g.kw * g.C * g.C), T(0));
  for (int64_t t = 0; t < g.kh * g.kw; ++t) {
    for (int64_t c = 0; c < g.C; ++c)
      b[static_cast<size_t>((t * g.C + c) * g.C + c)] = static_cast<T>(k.w[static_cast<size_t>(t * g.C + c)]);
  }
  return b;
}

ConvShape conv_shape(const Geometry& g) {
  return ConvShape{g.H, g.W, g.C, g.oh(), g.ow(), g.C, g.kh, g.kw, g.sh, g.sw, g.dh, g.dw};
}

const Geometry kShapes[] = {
    {5, 7, 3, 3, 3, 1, 1, 1, 1},  // odd sizes, stride 1
    {9, 8, 5, 3, 3, 2, 2, 1, 1},  // stride 2, even width
    {7, 9, 4, 3, 3, 1, 2, 2, 1},  // mixed strides, dilation 2 vertically
    {6, 6, 34, 5, 5, 1, 1, 1,
     1},  // 5x5 window, more channels than 32 lanes (fp32 block-diagonal fits 128 KiB)
    {4, 11, 2, 1, 3, 1, 3, 1, 2},  // 1x3 window, stride 3, dilation 2 horizontally
};

TEST(DwConv, Uint8CodesWithInt8WeightsSumExactlyInInt32AndMatchTheBlockDiagonalConv) {
  for (const Geometry& g : kShapes) {
    const Case k = make_case(g, 0, 255, -128, 127, true, static_cast<uint32_t>(g.C * 7 + g.sh));
    const std::vector<int32_t> want = as<int32_t>(reference(k));
    isa::NpuConfig cfg;
    MachineState st{cfg};
    put(st, Buffer::kInput, 0, as<uint8_t>(k.x));
    put(st, Buffer::kWeight, 0, as<int8_t>(k.w));
    execute(dwconv(DType::kUint8, g), cfg, st);
    EXPECT_EQ(get<int32_t>(st, Buffer::kAccumulator, 0, want.size()), want)
        << g.H << "x" << g.W << "x" << g.C;
    // The array's CONV over the block-diagonal weights computes the same sums.
    put(st, Buffer::kWeight, 0, block_diagonal<int8_t>(k));
    execute(conv(DType::kUint8, conv_shape(g), 0, 0, 1024), cfg, st);
    EXPECT_EQ(get<int32_t>(st, Buffer::kAccumulator, 1024, want.size()), want);
  }
}

TEST(DwConv, Int8CodesSumExactly) {
  for (const Geometry& g : kShapes) {
    const Case k = make_case(g, -128, 127, -128, 127, true, static_cast<uint32_t>(g.W));
    isa::NpuConfig cfg;
    MachineState st{cfg};
    put(st, Buffer::kInput, 0, as<int8_t>(k.x));
    put(st, Buffer::kWeight, 0, as<int8_t>(k.w));
    execute(dwconv(DType::kInt8, g), cfg, st);
    const std::vector<int32_t> want = as<int32_t>(reference(k));
    EXPECT_EQ(get<int32_t>(st, Buffer::kAccumulator, 0, want.size()), want);
  }
}

TEST(DwConv, FloatInputsAccumulateInFp32LikeTheArray) {
  for (DType t : {DType::kFp32, DType::kFp16, DType::kBf16}) {
    for (const Geometry& g : kShapes) {
      Case k = make_case(g, -2, 2, -1, 1, false, static_cast<uint32_t>(g.C + static_cast<int>(t)));
      // Values representable in t, so the reference sees what the datapath reads.
      for (auto* v : {&k.x, &k.w}) {
        for (double& x : *v) x = round_to_precision(static_cast<float>(x), t);
      }
      const int64_t es = isa::dtype_bytes(t);
      std::vector<uint8_t> xb(k.x.size() * static_cast<size_t>(es)), wb(k.w.size() * static_cast<size_t>(es));
      for (size_t i = 0; i < k.x.size(); ++i)
        store_float(&xb[i * static_cast<size_t>(es)], t, static_cast<float>(k.x[i]));
      for (size_t i = 0; i < k.w.size(); ++i)
        store_float(&wb[i * static_cast<size_t>(es)], t, static_cast<float>(k.w[i]));
      isa::NpuConfig cfg;
      MachineState st{cfg};
      put(st, Buffer::kInput, 0, xb);
      put(st, Buffer::kWeight, 0, wb);
      execute(dwconv(t, g), cfg, st);
      const std::vector<double> want = reference(k);
      const std::vector<float> got = get<float>(st, Buffer::kAccumulator, 0, want.size());
      for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5 * g.kh * g.kw);
      // Bit for bit what the array's CONV (fp32 accumulation) sums over the block-diagonal weights.
      std::vector<uint8_t> bd;
      for (float v : block_diagonal<float>(k)) {
        uint8_t b[4];
        store_float(b, t, v);
        bd.insert(bd.end(), b, b + es);
      }
      put(st, Buffer::kWeight, 0, bd);
      execute(conv(t, conv_shape(g), 0, 0, 4096), cfg, st);
      EXPECT_EQ(get<float>(st, Buffer::kAccumulator, 4096, want.size()), got)
          << isa::kDTypeNames[static_cast<size_t>(t)];
    }
  }
}

TEST(DwConv, RejectsWrongSumTypeInt32InputsBroadcastAndWindowsPastTheTile) {
  const Geometry g{5, 5, 4, 3, 3, 1, 1, 1, 1};
  isa::NpuConfig cfg;
  MachineState st{cfg};
  EXPECT_NO_THROW(execute(dwconv(DType::kUint8, g), cfg, st));
  Instruction bad = dwconv(DType::kUint8, g);
  bad.set(Field::kDtypeOut, e(DType::kFp32));
  EXPECT_THROW(execute(bad, cfg, st), DatapathError);
  bad = dwconv(DType::kFp16, g);
  bad.set(Field::kDtype, e(DType::kInt32)).set(Field::kDtypeOut, e(DType::kInt32));
  EXPECT_THROW(execute(bad, cfg, st), DatapathError);
  bad = dwconv(DType::kFp32, g);
  bad.set(Field::kBcast, static_cast<int64_t>(isa::Bcast::kRow));
  EXPECT_THROW(execute(bad, cfg, st), DatapathError);
  bad = dwconv(DType::kFp32, g);
  bad.set(Field::kImm0, 3);  // a 3-tap window dilated by 3 reaches 7 rows of 5
  EXPECT_THROW(execute(bad, cfg, st), DatapathError);
  bad = dwconv(DType::kFp32, g);
  bad.set(Field::kStrW, 0);
  EXPECT_THROW(execute(bad, cfg, st), DatapathError);
}

TEST(DwConv, TakesOneMacPerLanePerCyclePlusTheOpsLatency) {
  isa::VectorConfig v;
  v.lanes = 32;
  v.ops[static_cast<size_t>(VecOp::kDwConv)] = {7, 1};
  // 9 x 9 x 40 input, 3x3 window, stride 2: 4 x 4 x 40 outputs, 9 MACs each = 5760 MACs = 180 cycles.
  const Geometry g{9, 9, 40, 3, 3, 2, 2, 1, 1};
  EXPECT_EQ(isa::timing::vec_work_elements(dwconv(DType::kFp16, g)), 5760);
  EXPECT_EQ(isa::timing::vec_cycles(dwconv(DType::kFp16, g), v), 7 + 180);
  v.ops[static_cast<size_t>(VecOp::kDwConv)] = {7, 2};
  v.int8_dot_width = 1;
  EXPECT_EQ(isa::timing::vec_cycles(dwconv(DType::kUint8, g), v), 7 + 360);
}

TEST(DwConv, OnInt8CodesALaneSumsDotWidthProductsPerCycleRoundedUpPerOutput) {
  isa::VectorConfig v;
  v.lanes = 32;
  v.ops[static_cast<size_t>(VecOp::kDwConv)] = {7, 1};
  v.int8_dot_width = 4;
  // 640 outputs of 9 taps: ceil(9 / 4) = 3 cycles each on a lane = 1920 lane-cycles = 60 cycles.
  const Geometry g{9, 9, 40, 3, 3, 2, 2, 1, 1};
  for (DType t : {DType::kUint8, DType::kInt8}) {
    EXPECT_EQ(isa::timing::vec_lane_work(dwconv(t, g), v), 1920);
    EXPECT_EQ(isa::timing::vec_cycles(dwconv(t, g), v), 7 + 60);
  }
  // Float types keep one MAC per lane per cycle.
  EXPECT_EQ(isa::timing::vec_cycles(dwconv(DType::kFp16, g), v), 7 + 180);
  // A 5x5 window: ceil(25 / 4) = 7 cycles per output, not 25 / 4.
  const Geometry g5{6, 6, 32, 5, 5, 1, 1, 1, 1};  // 2 x 2 x 32 outputs
  EXPECT_EQ(isa::timing::vec_cycles(dwconv(DType::kUint8, g5), v), 7 + 2 * 2 * 7);
  // Other ops on codes are not dot products.
  Instruction add = vec(VecOp::kAdd, DType::kInt8, DType::kInt32, 64, 1, 1);
  EXPECT_EQ(isa::timing::vec_lane_work(add, v), 64);
}

}  // namespace
}  // namespace npusim::arch::datapath
