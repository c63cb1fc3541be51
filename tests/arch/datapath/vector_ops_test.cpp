// Every VecOp against a reference written here (double precision or exact integers).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>

#include "arch/datapath/error.h"
#include "arch/datapath/executor.h"
#include "tests/arch/datapath/dp_test_util.h"

namespace npusim::arch::datapath {
namespace {

using namespace test;  // NOLINT: test helpers
using isa::Bcast;
using isa::VecOp;

struct VecRun {
  isa::NpuConfig cfg;
  MachineState st{cfg};
  template <class In, class Out>
  std::vector<Out> run(Instruction ins, const std::vector<In>& a, const std::vector<In>& b, size_t n_out) {
    put(st, Buffer::kInput, 0, a);
    put(st, Buffer::kWeight, 0, b);
    execute(ins, cfg, st);
    return get<Out>(st, Buffer::kAccumulator, 0, n_out);
  }
};

std::vector<float> randoms(size_t n, float lo, float hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

TEST(Vec, FloatBinaryOpsWithEveryBroadcastMode) {
  const int d0 = 5, d1 = 3, d2 = 2, n = d0 * d1 * d2;
  const auto a = randoms(n, 0.5f, 4.0f, 1);
  const auto b = randoms(n, 0.5f, 4.0f, 2);
  const std::pair<VecOp, std::function<double(double, double)>> ops[] = {
      {VecOp::kAdd, [](double x, double y) { return x + y; }},
      {VecOp::kSub, [](double x, double y) { return x - y; }},
      {VecOp::kMul, [](double x, double y) { return x * y; }},
      {VecOp::kDiv, [](double x, double y) { return x / y; }},
      {VecOp::kMax, [](double x, double y) { return std::max(x, y); }},
      {VecOp::kMin, [](double x, double y) { return std::min(x, y); }},
      {VecOp::kPow, [](double x, double y) { return std::pow(x, y); }},
  };
  for (const auto& [op, f] : ops) {
    for (Bcast bc : {Bcast::kNone, Bcast::kScalar, Bcast::kRow, Bcast::kCol}) {
      VecRun r;
      Instruction ins = vec(op, DType::kFp32, DType::kFp32, d0, d1, d2);
      ins.set(Field::kBcast, static_cast<int64_t>(bc));
      const auto got = r.run<float, float>(ins, a, b, n);
      for (int i = 0; i < n; ++i) {
        const int i0 = i % d0, row = i / d0;
        const int j = bc == Bcast::kNone ? i : bc == Bcast::kScalar ? 0 : bc == Bcast::kRow ? i0 : row;
        const double want = f(a[i], b[j]);
        if (op == VecOp::kPow) {
          EXPECT_NEAR(got[i], want, std::fabs(want) * 1e-6) << i;
        } else {
          // One IEEE fp32 operation: the correctly rounded double result rounded to fp32.
          EXPECT_EQ(got[i], static_cast<float>(want))
              << isa::kVecOpNames[static_cast<size_t>(op)] << " " << i;
        }
      }
    }
  }
}

TEST(Vec, IntegerBinaryOpsAreExactThenSaturate) {
  const std::vector<int8_t> a{100, -100, 7, -7, 127, -128};
  const std::vector<int8_t> b{100, 100, 2, 2, -1, 0};
  VecRun r;
  EXPECT_EQ((r.run<int8_t, int8_t>(vec(VecOp::kAdd, DType::kInt8, DType::kInt8, 6), a, b, 6)),
            (std::vector<int8_t>{127, 0, 9, -5, 126, -128}));
  EXPECT_EQ((r.run<int8_t, int32_t>(vec(VecOp::kAdd, DType::kInt8, DType::kInt32, 6), a, b, 6)),
            (std::vector<int32_t>{200, 0, 9, -5, 126, -128}));
  EXPECT_EQ((r.run<int8_t, int32_t>(vec(VecOp::kSub, DType::kInt8, DType::kInt32, 6), a, b, 6)),
            (std::vector<int32_t>{0, -200, 5, -9, 128, -128}));
  EXPECT_EQ((r.run<int8_t, int32_t>(vec(VecOp::kMul, DType::kInt8, DType::kInt32, 6), a, b, 6)),
            (std::vector<int32_t>{10000, -10000, 14, -14, -127, 0}));
  // Division truncates toward zero; x / 0 = 0.
  EXPECT_EQ((r.run<int8_t, int8_t>(vec(VecOp::kDiv, DType::kInt8, DType::kInt8, 6), a, b, 6)),
            (std::vector<int8_t>{1, -1, 3, -3, -127, 0}));
  EXPECT_EQ((r.run<int8_t, int8_t>(vec(VecOp::kMax, DType::kInt8, DType::kInt8, 6), a, b, 6)),
            (std::vector<int8_t>{100, 100, 7, 2, 127, 0}));
  EXPECT_EQ((r.run<int8_t, int8_t>(vec(VecOp::kMin, DType::kInt8, DType::kInt8, 6), a, b, 6)),
            (std::vector<int8_t>{100, -100, 2, -7, -1, -128}));
  // int32 with a large product: exact in 64 bits, then saturated.
  VecRun r2;
  EXPECT_EQ((r2.run<int32_t, int32_t>(vec(VecOp::kMul, DType::kInt32, DType::kInt32, 2),
                                      std::vector<int32_t>{1 << 20, -(1 << 20)},
                                      std::vector<int32_t>{1 << 20, 1 << 20}, 2)),
            (std::vector<int32_t>{INT32_MAX, INT32_MIN}));
}

TEST(Vec, FloatUnaryOpsAndActivations) {
  const auto x = randoms(64, -5.0f, 5.0f, 3);
  const float alpha = 0.1f, lo = -1.5f, hi = 2.5f, hs_a = 0.2f, hs_b = 0.5f;
  struct Case {
    VecOp op;
    std::function<double(double)> f;
    double tol;  // relative (plus 1e-7 absolute)
    int64_t imm0 = 0, imm1 = 0;
  };
  const double inv_sqrt2 = 1.0 / std::sqrt(2.0);
  auto hsig = [](double v, double a, double b) { return std::max(0.0, std::min(1.0, a * v + b)); };
  const Case cases[] = {
      {VecOp::kCopy, [](double v) { return v; }, 0},
      {VecOp::kRelu, [](double v) { return v > 0 ? v : 0.0; }, 0},
      {VecOp::kLeakyRelu, [&](double v) { return v < 0 ? double{alpha} * v : v; }, 1e-7, fbits(alpha)},
      {VecOp::kClip, [&](double v) { return std::min(double{hi}, std::max(double{lo}, v)); }, 0, fbits(lo),
       fbits(hi)},
      {VecOp::kSigmoid, [](double v) { return 1.0 / (1.0 + std::exp(-v)); }, 1e-6},
      {VecOp::kTanh, [](double v) { return std::tanh(v); }, 1e-6},
      {VecOp::kGelu, [&](double v) { return 0.5 * v * (1.0 + std::erf(v * inv_sqrt2)); }, 1e-6},
      {VecOp::kErf, [](double v) { return std::erf(v); }, 1e-6},
      {VecOp::kExp, [](double v) { return std::exp(v); }, 1e-6},
      {VecOp::kHardSigmoid, [&](double v) { return hsig(v, hs_a, hs_b); }, 1e-6, fbits(hs_a), fbits(hs_b)},
      {VecOp::kHardSwish, [&](double v) { return v * hsig(v, 1.0 / 6.0, 0.5); }, 1e-6},
      {VecOp::kAbs, [](double v) { return std::fabs(v); }, 0},
      {VecOp::kNeg, [](double v) { return -v; }, 0},
      {VecOp::kRecip, [](double v) { return 1.0 / v; }, 1e-7},
  };
  for (const Case& c : cases) {
    VecRun r;
    Instruction ins = vec(c.op, DType::kFp32, DType::kFp32, 8, 8);
    ins.set(Field::kImm0, c.imm0).set(Field::kImm1, c.imm1);
    const auto got = r.run<float, float>(ins, x, {}, x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      const double want = c.f(x[i]);
      EXPECT_NEAR(got[i], want, std::fabs(want) * c.tol + (c.tol > 0 ? 1e-7 : 0.0))
          << isa::kVecOpNames[static_cast<size_t>(c.op)] << " x=" << x[i];
    }
  }
  // sqrt / rsqrt on positive inputs.
  const auto p = randoms(32, 0.01f, 100.0f, 4);
  VecRun r;
  auto got = r.run<float, float>(vec(VecOp::kSqrt, DType::kFp32, DType::kFp32, 32), p, {}, 32);
  for (size_t i = 0; i < p.size(); ++i) EXPECT_EQ(got[i], static_cast<float>(std::sqrt(double{p[i]})));
  got = r.run<float, float>(vec(VecOp::kRsqrt, DType::kFp32, DType::kFp32, 32), p, {}, 32);
  for (size_t i = 0; i < p.size(); ++i)
    EXPECT_NEAR(got[i], 1.0 / std::sqrt(double{p[i]}), 1e-6 / std::sqrt(p[i]));
  // NaN propagates through relu and max; relu(-0) = +0.
  got = r.run<float, float>(vec(VecOp::kRelu, DType::kFp32, DType::kFp32, 2), std::vector<float>{NAN, -0.0f},
                            {}, 2);
  EXPECT_TRUE(std::isnan(got[0]));
  EXPECT_FALSE(std::signbit(got[1]));
}

TEST(Vec, IntegerUnaryOpsAndActivationsOnIntegers) {
  const std::vector<int8_t> x{-128, -3, 0, 5, 127};
  VecRun r;
  EXPECT_EQ((r.run<int8_t, int8_t>(vec(VecOp::kRelu, DType::kInt8, DType::kInt8, 5), x, {}, 5)),
            (std::vector<int8_t>{0, 0, 0, 5, 127}));
  EXPECT_EQ((r.run<int8_t, int8_t>(vec(VecOp::kAbs, DType::kInt8, DType::kInt8, 5), x, {}, 5)),
            (std::vector<int8_t>{127, 3, 0, 5, 127}));
  EXPECT_EQ((r.run<int8_t, int8_t>(vec(VecOp::kNeg, DType::kInt8, DType::kInt8, 5), x, {}, 5)),
            (std::vector<int8_t>{127, 3, 0, -5, -127}));
  // Float-path ops on integers go through fp32 and round to nearest even: exp(0)=1, sigmoid(5)*... .
  const auto sig = r.run<int8_t, float>(vec(VecOp::kSigmoid, DType::kInt8, DType::kFp32, 5), x, {}, 5);
  EXPECT_NEAR(sig[3], 1.0 / (1.0 + std::exp(-5.0)), 1e-6);
  // Copy with dtype conversion: int8 -> fp16 -> uint8 -> bf16.
  const auto h = r.run<int8_t, uint16_t>(vec(VecOp::kCopy, DType::kInt8, DType::kFp16, 5), x, {}, 5);
  EXPECT_EQ(fp16_to_fp32(h[0]), -128.0f);
  EXPECT_EQ((r.run<int8_t, uint8_t>(vec(VecOp::kCopy, DType::kInt8, DType::kUint8, 5), x, {}, 5)),
            (std::vector<uint8_t>{0, 0, 0, 5, 127}));
  // fp32 -> int8 rounds to nearest even and saturates (quantize).
  VecRun q;
  EXPECT_EQ((q.run<float, int8_t>(vec(VecOp::kCopy, DType::kFp32, DType::kInt8, 5),
                                  std::vector<float>{2.5f, -2.5f, 3.5f, 1000.0f, NAN}, {}, 5)),
            (std::vector<int8_t>{2, -2, 4, 127, 0}));
  // fp32 -> fp16/bf16 round to nearest even.
  const auto r16 = q.run<float, uint16_t>(vec(VecOp::kCopy, DType::kFp32, DType::kFp16, 1),
                                          std::vector<float>{1.0f + std::ldexp(1.0f, -11)}, {}, 1);
  EXPECT_EQ(r16[0], 0x3c00);
}

TEST(Vec, RequantizeScalarAndPerChannel) {
  const int32_t m = static_cast<int32_t>(0.75 * 2147483648.0);
  const std::vector<int32_t> x{1000, -1000, 100000, 0, 17};
  VecRun r;
  Instruction ins = vec(VecOp::kRequantize, DType::kInt32, DType::kInt8, 5);
  ins.set(Field::kImm0, m).set(Field::kImm1, 4).set(Field::kImm2, -3);
  // 1000*0.75/16 = 46.875 -> 47; -46.875 -> -47; saturate; 0; 17*.75/16 = 0.797 -> 1.
  EXPECT_EQ((r.run<int32_t, int8_t>(ins, x, {}, 5)), (std::vector<int8_t>{44, -50, 127, -3, -2}));
  ins.set(Field::kDtypeOut, static_cast<int64_t>(DType::kUint8)).set(Field::kImm2, 128);
  EXPECT_EQ((r.run<int32_t, uint8_t>(ins, x, {}, 5)), (std::vector<uint8_t>{175, 81, 255, 128, 129}));
  // Per channel (bcast=row, d0 = 2 channels): channel 0 scale 0.75 >> 4, channel 1 scale 0.5 >> 0.
  VecRun pc;
  Instruction per = vec(VecOp::kRequantize, DType::kInt32, DType::kInt8, 2, 2);
  per.set(Field::kBcast, static_cast<int64_t>(Bcast::kRow));
  const std::vector<int32_t> params{m, 4, 1 << 30, 0};
  EXPECT_EQ((pc.run<int32_t, int8_t>(per, std::vector<int32_t>{1000, 101, -1000, -101}, params, 4)),
            (std::vector<int8_t>{47, 51, -47, -50}));  // 50.5 -> 51 (SRDHM rounds half up), -50.5 -> -50
}

// The output stage is exactly ADD (saturating int32), per-channel REQUANTIZE and CLIP, in one pass.
TEST(Vec, OutputStageIsAddRequantizeClipInOnePass) {
  const int C = 3, P = 40, n = C * P;
  std::mt19937 rng(7);
  std::uniform_int_distribution<int32_t> any(INT32_MIN, INT32_MAX), small(-40000, 40000);
  std::vector<int32_t> x(n), triples, bias, pairs;
  for (int i = 0; i < n; ++i) x[i] = i % 7 == 0 ? any(rng) : small(rng);  // some saturate in the add
  const int32_t biases[C] = {INT32_MAX - 5, -1234, 77}, mults[C] = {1 << 30, 1518500250, 2147483647},
                shifts[C] = {6, -2, 31};
  for (int c = 0; c < C; ++c) {
    triples.insert(triples.end(), {biases[c], mults[c], shifts[c]});
    bias.push_back(biases[c]);
    pairs.insert(pairs.end(), {mults[c], shifts[c]});
  }
  for (DType out : {DType::kUint8, DType::kInt8, DType::kInt32}) {
    for (bool clamp : {false, true}) {
      const float lo = clamp ? 3.0f : -INFINITY, hi = clamp ? 200.0f : INFINITY;
      // Three instructions, each in place in the accumulator.
      isa::NpuConfig cfg;
      MachineState st{cfg};
      put(st, Buffer::kAccumulator, 0, x);
      put(st, Buffer::kWeight, 0, bias);
      put(st, Buffer::kWeight, 4096, pairs);
      Instruction add = vec(VecOp::kAdd, DType::kInt32, DType::kInt32, C, P);
      add.set(Field::kSrc1Buf, static_cast<int64_t>(Buffer::kAccumulator))
          .set(Field::kBcast, static_cast<int64_t>(Bcast::kRow));
      execute(add, cfg, st);
      Instruction rq = vec(VecOp::kRequantize, DType::kInt32, out, C, P);
      rq.set(Field::kSrc1Buf, static_cast<int64_t>(Buffer::kAccumulator))
          .set(Field::kBcast, static_cast<int64_t>(Bcast::kRow));
      rq.set(Field::kSrc2Addr, 4096).set(Field::kImm2, 5);
      execute(rq, cfg, st);
      Instruction clip = vec(VecOp::kClip, out, out, n);
      clip.set(Field::kSrc1Buf, static_cast<int64_t>(Buffer::kAccumulator))
          .set(Field::kImm0, fbits(lo))
          .set(Field::kImm1, fbits(hi));
      if (clamp) execute(clip, cfg, st);  // bounds of -inf and +inf clip nothing: int32 stays exact
      const size_t bytes = static_cast<size_t>(n * isa::dtype_bytes(out));
      const std::vector<uint8_t> want = get<uint8_t>(st, Buffer::kAccumulator, 0, bytes);
      // One output-stage instruction.
      VecRun r;
      Instruction o = vec(VecOp::kOutput, DType::kInt32, out, C, P);
      o.set(Field::kBcast, static_cast<int64_t>(Bcast::kRow)).set(Field::kImm2, 5);
      o.set(Field::kImm0, fbits(lo)).set(Field::kImm1, fbits(hi));
      put(r.st, Buffer::kInput, 0, x);
      put(r.st, Buffer::kWeight, 0, triples);
      execute(o, r.cfg, r.st);
      EXPECT_EQ(get<uint8_t>(r.st, Buffer::kAccumulator, 0, bytes), want)
          << isa::kDTypeNames[static_cast<size_t>(out)] << (clamp ? " clamped" : "");
    }
  }
  // By hand: 100 + 20 = 120, x 0.5 >> 2 = 15, + zero point 1 = 16, clamped to [0, 10] -> 10.
  VecRun r;
  Instruction o = vec(VecOp::kOutput, DType::kInt32, DType::kUint8, 1);
  o.set(Field::kBcast, static_cast<int64_t>(Bcast::kScalar)).set(Field::kImm2, 1);
  o.set(Field::kImm0, fbits(0.0f)).set(Field::kImm1, fbits(10.0f));
  EXPECT_EQ((r.run<int32_t, uint8_t>(o, std::vector<int32_t>{100}, std::vector<int32_t>{20, 1 << 30, 2}, 1)),
            (std::vector<uint8_t>{10}));
}

// int64 sums (int16 layers): REQUANTIZE and the output stage take them with the 64-bit requantize, and
// write int16 codes as well as 8-bit ones.
TEST(Vec, Int64SumsRequantizeAndPassTheOutputStage) {
  const int64_t big = int64_t{1} << 36;  // beyond any int32 sum
  const std::vector<int64_t> x{big, -big, 1000, 0};
  const int32_t half = 1 << 30;
  VecRun r;
  Instruction ins = vec(VecOp::kRequantize, DType::kInt64, DType::kInt16, 4);
  ins.set(Field::kImm0, half).set(Field::kImm1, 22).set(Field::kImm2, 0);
  // 2^36 x 0.5 / 2^22 = 8192; 1000 x 0.5 / 2^22 -> 0.
  EXPECT_EQ((r.run<int64_t, int16_t>(ins, x, {}, 4)), (std::vector<int16_t>{8192, -8192, 0, 0}));
  ins.set(Field::kImm1, 10);  // 2^25: saturates int16
  EXPECT_EQ((r.run<int64_t, int16_t>(ins, x, {}, 4)), (std::vector<int16_t>{32767, -32768, 0, 0}));
  // Output stage: (x + bias) x 0.5 >> 22, + zero point 3, as uint8, clamped to [0, 200].
  VecRun o;
  Instruction out = vec(VecOp::kOutput, DType::kInt64, DType::kUint8, 1, 4);
  out.set(Field::kBcast, static_cast<int64_t>(Bcast::kRow)).set(Field::kImm2, 3);
  out.set(Field::kImm0, fbits(0.0f)).set(Field::kImm1, fbits(200.0f));
  const std::vector<int64_t> sums{(int64_t{1} << 29) - (int64_t{1} << 22), -big, int64_t{100} << 22, 0};
  put(o.st, Buffer::kInput, 0, sums);
  put(o.st, Buffer::kWeight, 0, std::vector<int32_t>{int32_t{1} << 22, half, 22});
  execute(out, o.cfg, o.st);
  // 2^29 x 0.5 / 2^22 = 64 (+3); -2^36 -> clamp 0; (100 x 2^22 + 2^22) x 0.5 / 2^22 = 50.5 -> 51 (+3); 2^22 x
  // 0.5 / 2^22 = 0.5 -> 1 (+3).
  EXPECT_EQ(get<uint8_t>(o.st, Buffer::kAccumulator, 0, 4), (std::vector<uint8_t>{67, 0, 54, 4}));
}

// Integer codes through the output stage (a residual brought to its conv's sums: compiler/backend/matrix/
// int8_matrix.cpp): the codes plus the record's bias, the per-channel requantize to int32 and, with bounds
// of -inf and +inf, no clip: the numbers of a SUB of the zero point and a REQUANTIZE, beyond fp32's 2^24 too.
TEST(Vec, OutputStageOfCodesIsSubAndRequantizeExactly) {
  const int C = 4, P = 256, n = C * P;
  std::vector<int8_t> x(n);
  for (int i = 0; i < n; ++i) x[i] = static_cast<int8_t>(i / C - 128);
  const int32_t zp = -128;
  const std::vector<int32_t> pairs{1 << 30, -20, 1234567890, -3, 2000000000, 5, 1 << 30, 0};
  std::vector<int32_t> triples;
  for (int c = 0; c < C; ++c) triples.insert(triples.end(), {-zp, pairs[2 * c], pairs[2 * c + 1]});
  const auto elems = static_cast<size_t>(n);
  // SUB then REQUANTIZE, int32 through.
  VecRun two;
  Instruction sub = vec(VecOp::kSub, DType::kInt8, DType::kInt32, C, P);
  sub.set(Field::kBcast, static_cast<int64_t>(Bcast::kScalar));
  put(two.st, Buffer::kInput, 0, x);
  put(two.st, Buffer::kWeight, 0, std::vector<int32_t>{zp});
  execute(sub, two.cfg, two.st);
  Instruction rq = vec(VecOp::kRequantize, DType::kInt32, DType::kInt32, C, P);
  rq.set(Field::kSrc1Buf, static_cast<int64_t>(Buffer::kAccumulator)).set(Field::kImm2, 0);
  rq.set(Field::kBcast, static_cast<int64_t>(Bcast::kRow));
  put(two.st, Buffer::kWeight, 0, pairs);
  execute(rq, two.cfg, two.st);
  const std::vector<int32_t> want = get<int32_t>(two.st, Buffer::kAccumulator, 0, elems);
  EXPECT_GT(*std::max_element(want.begin(), want.end()), 1 << 24);
  VecRun one;
  Instruction o = vec(VecOp::kOutput, DType::kInt8, DType::kInt32, C, P);
  o.set(Field::kBcast, static_cast<int64_t>(Bcast::kRow)).set(Field::kImm2, 0);
  o.set(Field::kImm0, fbits(-INFINITY)).set(Field::kImm1, fbits(INFINITY));
  put(one.st, Buffer::kInput, 0, x);
  put(one.st, Buffer::kWeight, 0, triples);
  execute(o, one.cfg, one.st);
  EXPECT_EQ(get<int32_t>(one.st, Buffer::kAccumulator, 0, elems), want);
}

TEST(Vec, FloatOutputStageIsAddClipAndTheNarrowing) {
  const int C = 4, P = 25, n = C * P;
  const auto x = randoms(n, -8.0f, 8.0f, 3), bias = randoms(C, -2.0f, 2.0f, 4);
  VecRun r;
  Instruction o = vec(VecOp::kOutput, DType::kFp32, DType::kFp16, C, P);
  o.set(Field::kBcast, static_cast<int64_t>(Bcast::kRow))
      .set(Field::kImm0, fbits(0.0f))
      .set(Field::kImm1, fbits(6.0f));
  const auto got = r.run<float, uint16_t>(o, x, bias, n);
  for (int i = 0; i < n; ++i) {
    const float want = std::min(std::max(x[i] + bias[i % C], 0.0f), 6.0f);
    EXPECT_EQ(got[i], fp32_to_fp16(want)) << i;
  }
}

// Expects `ins` to be rejected with a message containing `what`.
void expect_rejected(VecRun& r, const Instruction& ins, const char* what) {
  try {
    execute(ins, r.cfg, r.st);
    ADD_FAILURE() << "accepted: " << what;
  } catch (const DatapathError& e) {
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
  }
}

TEST(Vec, OutputStageRejectsWhatItCannotMean) {
  VecRun r;
  auto fails = [&](const Instruction& ins, const char* what) { expect_rejected(r, ins, what); };
  fails(vec(VecOp::kOutput, DType::kInt32, DType::kInt8, 4), "bcast must not be none");
  Instruction f = vec(VecOp::kOutput, DType::kInt32, DType::kFp16, 4);
  f.set(Field::kBcast, static_cast<int64_t>(Bcast::kRow));
  fails(f, "writes an integer type");
  Instruction z = vec(VecOp::kOutput, DType::kFp32, DType::kFp16, 4);
  z.set(Field::kBcast, static_cast<int64_t>(Bcast::kRow)).set(Field::kImm2, 3);
  fails(z, "imm2 must be 0");
  Instruction s = vec(VecOp::kOutput, DType::kInt32, DType::kInt8, 1);
  s.set(Field::kBcast, static_cast<int64_t>(Bcast::kScalar));
  put(r.st, Buffer::kWeight, 0, std::vector<int32_t>{0, 1 << 30, 40});
  fails(s, "outside [-31, 31]");
}

TEST(Vec, LutMapsEveryCodeThroughItsTableEntryCodeMinusTheSmallestCode) {
  // Every code of each 8-bit dtype, twice over (a box of 2 x 256), through a table of another dtype: entry
  // k holds a value unlike k (255 - k, read as the destination's codes), so an index off by one or by 128
  // (int8 read as uint8) shows.
  for (DType in : {DType::kInt8, DType::kUint8}) {
    for (DType out : {DType::kInt8, DType::kUint8}) {
      VecRun r;
      const int lo = in == DType::kInt8 ? -128 : 0;
      std::vector<uint8_t> codes(512), table(256);
      for (int i = 0; i < 512; ++i) codes[static_cast<size_t>(i)] = static_cast<uint8_t>(lo + (i * 37) % 256);
      for (int k = 0; k < 256; ++k) table[static_cast<size_t>(k)] = static_cast<uint8_t>(255 - k);
      const auto got = r.run<uint8_t, uint8_t>(vec(VecOp::kLut, in, out, 256, 2), codes, table, 512);
      for (int i = 0; i < 512; ++i) {
        const int code = in == DType::kInt8 ? static_cast<int8_t>(codes[static_cast<size_t>(i)])
                                            : codes[static_cast<size_t>(i)];
        EXPECT_EQ(got[static_cast<size_t>(i)], 255 - (code - lo)) << i;
      }
    }
  }
}

TEST(Vec, LutOnInt16CodesReadsEntryCodeMinusImm0OfAnImm1EntryTable) {
  // A 16-bit-input table (a table epilogue's refined pre-activation, quant::refined_table_grid): 1021
  // entries from code -510; codes at both ends of the window and across it, entry k = (k * 7) % 256 so that
  // an index off by one, or read from dtype_min (-32768) as for 8-bit codes, shows.
  const int base = -510, entries = 1021;
  std::vector<int16_t> codes;
  for (int i = 0; i < 64; ++i) codes.push_back(static_cast<int16_t>(base + (i * 389) % entries));
  codes[0] = static_cast<int16_t>(base), codes[1] = static_cast<int16_t>(base + entries - 1);
  std::vector<uint8_t> table(entries);
  for (int k = 0; k < entries; ++k) table[static_cast<size_t>(k)] = static_cast<uint8_t>((k * 7) % 256);
  VecRun r;
  put(r.st, Buffer::kWeight, 0, table);
  put(r.st, Buffer::kInput, 0, codes);
  Instruction l = vec(VecOp::kLut, DType::kInt16, DType::kUint8, 64);
  l.set(Field::kImm0, base).set(Field::kImm1, entries);
  execute(l, r.cfg, r.st);
  const auto got = get<uint8_t>(r.st, Buffer::kAccumulator, 0, 64);
  for (size_t i = 0; i < codes.size(); ++i) EXPECT_EQ(got[i], ((codes[i] - base) * 7) % 256) << codes[i];
  // A code outside the window is an error, not a read beyond the table.
  codes[5] = static_cast<int16_t>(base + entries);
  put(r.st, Buffer::kInput, 0, codes);
  expect_rejected(r, l, "outside the table's 1021 codes from -510");
}

TEST(Vec, LutRejectsWhatItCannotMean) {
  VecRun r;
  auto fails = [&](const Instruction& ins, const char* what) { expect_rejected(r, ins, what); };
  fails(vec(VecOp::kLut, DType::kInt32, DType::kInt8, 4), "lut maps int8, uint8 or int16 codes");
  fails(vec(VecOp::kLut, DType::kInt8, DType::kFp16, 4), "lut maps int8, uint8 or int16 codes");
  Instruction b = vec(VecOp::kLut, DType::kInt8, DType::kInt8, 4);
  b.set(Field::kBcast, static_cast<int64_t>(Bcast::kRow));
  fails(b, "bcast must be none");
  Instruction w = vec(VecOp::kLut, DType::kInt16, DType::kInt8, 4);
  fails(w, "an int16 lut's table has imm1 = 1..65536 entries, not 0");
  w.set(Field::kImm1, 65537);
  fails(w, "an int16 lut's table has imm1 = 1..65536 entries, not 65537");
}

TEST(Vec, PoolingWindowsAndStrides) {
  // H=4, W=5, C=2, window 2x3, stride 2x2 -> out 2 x 2 x 2.
  const int H = 4, W = 5, C = 2;
  std::vector<int8_t> x(H * W * C);
  for (int i = 0; i < H * W * C; ++i) x[i] = static_cast<int8_t>((i * 37) % 101 - 50);
  auto at = [&](int y, int xx, int c) { return int{x[(y * W + xx) * C + c]}; };
  std::vector<int8_t> want_max, want_avg;
  for (int y = 0; y < 2; ++y) {
    for (int xx = 0; xx < 2; ++xx) {
      for (int c = 0; c < C; ++c) {
        int mx = -1000, sum = 0;
        for (int i = 0; i < 2; ++i) {
          for (int j = 0; j < 3; ++j) {
            mx = std::max(mx, at(2 * y + i, 2 * xx + j, c));
            sum += at(2 * y + i, 2 * xx + j, c);
          }
        }
        want_max.push_back(static_cast<int8_t>(mx));
        want_avg.push_back(static_cast<int8_t>(std::lround(sum / 6.0)));  // half away from zero
      }
    }
  }
  VecRun r;
  Instruction pool = vec(VecOp::kMaxPool, DType::kInt8, DType::kInt8, C, W, H);
  pool.set(Field::kWinH, 2).set(Field::kWinW, 3).set(Field::kStrH, 2).set(Field::kStrW, 2);
  EXPECT_EQ((r.run<int8_t, int8_t>(pool, x, {}, 8)), want_max);
  pool.set(Field::kVop, static_cast<int64_t>(VecOp::kAvgPool));
  EXPECT_EQ((r.run<int8_t, int8_t>(pool, x, {}, 8)), want_avg);
  // Float average pool over the full window.
  std::vector<float> xf(x.begin(), x.end());
  pool.set(Field::kDtype, static_cast<int64_t>(DType::kFp32))
      .set(Field::kDtypeOut, static_cast<int64_t>(DType::kFp32));
  const auto gf = r.run<float, float>(pool, xf, {}, 8);
  int idx = 0;
  for (int y = 0; y < 2; ++y) {
    for (int xx = 0; xx < 2; ++xx) {
      for (int c = 0; c < C; ++c, ++idx) {
        double sum = 0;
        for (int i = 0; i < 2; ++i) {
          for (int j = 0; j < 3; ++j) sum += at(2 * y + i, 2 * xx + j, c);
        }
        EXPECT_NEAR(gf[idx], sum / 6.0, 1e-5);
      }
    }
  }
}

TEST(Vec, ReductionsAlongD0) {
  const std::vector<int32_t> x{1, 2, 3, 4, -5, -6, -7, -9, 100, 0, 0, 1};  // d0=4, d1=3
  VecRun r;
  EXPECT_EQ((r.run<int32_t, int32_t>(vec(VecOp::kReduceSum, DType::kInt32, DType::kInt32, 4, 3), x, {}, 3)),
            (std::vector<int32_t>{10, -27, 101}));
  EXPECT_EQ((r.run<int32_t, int32_t>(vec(VecOp::kReduceMax, DType::kInt32, DType::kInt32, 4, 3), x, {}, 3)),
            (std::vector<int32_t>{4, -5, 100}));
  // Means 2.5 -> 3, -6.75 -> -7, 25.25 -> 25 (nearest, ties away from zero).
  EXPECT_EQ((r.run<int32_t, int32_t>(vec(VecOp::kReduceMean, DType::kInt32, DType::kInt32, 4, 3), x, {}, 3)),
            (std::vector<int32_t>{3, -7, 25}));
  const std::vector<float> f{0.5f, 1.25f, -2.0f, 8.0f, 3.0f, -1.0f};  // d0=3, d1=2
  EXPECT_EQ((r.run<float, float>(vec(VecOp::kReduceSum, DType::kFp32, DType::kFp32, 3, 2), f, {}, 2)),
            (std::vector<float>{-0.25f, 10.0f}));
  EXPECT_EQ((r.run<float, float>(vec(VecOp::kReduceMean, DType::kFp32, DType::kFp32, 3, 2), f, {}, 2)),
            (std::vector<float>{static_cast<float>(-0.25 / 3), 10.0f / 3.0f}));
  EXPECT_EQ((r.run<float, float>(vec(VecOp::kReduceMax, DType::kFp32, DType::kFp32, 3, 2), f, {}, 2)),
            (std::vector<float>{1.25f, 8.0f}));
}

TEST(Vec, TransposeSwapsD0AndD1OfEverySlice) {
  const int d0 = 3, d1 = 4, d2 = 2;
  std::vector<uint16_t> x(d0 * d1 * d2);
  for (size_t i = 0; i < x.size(); ++i) x[i] = fp32_to_bf16(static_cast<float>(i));
  VecRun r;
  const auto got =
      r.run<uint16_t, float>(vec(VecOp::kTranspose, DType::kBf16, DType::kFp32, d0, d1, d2), x, {}, x.size());
  for (int i2 = 0; i2 < d2; ++i2) {
    for (int i1 = 0; i1 < d1; ++i1) {
      for (int i0 = 0; i0 < d0; ++i0) {
        EXPECT_EQ(got[(i2 * d0 + i0) * d1 + i1], static_cast<float>((i2 * d1 + i1) * d0 + i0));
      }
    }
  }
}

TEST(Vec, InPlaceOperationReadsBeforeWriting) {
  isa::NpuConfig cfg;
  MachineState st(cfg);
  put(st, Buffer::kInput, 0, std::vector<float>{1, 2, 3, 4});
  Instruction t = vec(VecOp::kTranspose, DType::kFp32, DType::kFp32, 2, 2);
  t.set(Field::kDstBuf, static_cast<int64_t>(Buffer::kInput));
  execute(t, cfg, st);
  EXPECT_EQ((get<float>(st, Buffer::kInput, 0, 4)), (std::vector<float>{1, 3, 2, 4}));
  // Add with src2 = dst = src1 + 4 bytes (overlapping, shifted).
  Instruction a = vec(VecOp::kAdd, DType::kFp32, DType::kFp32, 3);
  a.set(Field::kSrc2Buf, static_cast<int64_t>(Buffer::kInput)).set(Field::kSrc2Addr, 4);
  a.set(Field::kDstBuf, static_cast<int64_t>(Buffer::kInput)).set(Field::kDstAddr, 4);
  execute(a, cfg, st);
  EXPECT_EQ((get<float>(st, Buffer::kInput, 0, 4)), (std::vector<float>{1, 4, 5, 6}));
}

TEST(Vec, Fp16OutputsRoundAndBf16InputsWiden) {
  VecRun r;
  // bf16 1.0 + bf16 2^-8 in fp32 = 1.00390625, which rounds to fp16 1.00390625 exactly (2^-8 > fp16 ulp
  // 2^-10).
  const auto got = r.run<uint16_t, uint16_t>(vec(VecOp::kAdd, DType::kBf16, DType::kFp16, 1),
                                             std::vector<uint16_t>{fp32_to_bf16(1.0f)},
                                             std::vector<uint16_t>{fp32_to_bf16(std::ldexp(1.0f, -8))}, 1);
  EXPECT_EQ(got[0], fp32_to_fp16(1.00390625f));
  EXPECT_EQ(fp16_to_fp32(got[0]), 1.00390625f);
}

}  // namespace
}  // namespace npusim::arch::datapath
