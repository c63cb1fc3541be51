// The executor's DMA, PRELOAD, MATMUL, CONV and HOSTCALL semantics against plain C++ references.
#include "arch/datapath/executor.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>

#include "arch/datapath/error.h"
#include "tests/arch/datapath/dp_test_util.h"

namespace npusim::arch::datapath {
namespace {

using namespace test;  // NOLINT: test helpers

std::vector<int8_t> random_i8(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(-128, 127);
  std::vector<int8_t> v(n);
  for (auto& x : v) x = static_cast<int8_t>(d(rng));
  return v;
}

template <class A, class B>
std::vector<int32_t> ref_gemm(const std::vector<A>& a, const std::vector<B>& b, int m, int k, int n) {
  std::vector<int32_t> c(static_cast<size_t>(m * n));
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      int64_t s = 0;
      for (int kk = 0; kk < k; ++kk)
        s += int64_t{a[static_cast<size_t>(i * k + kk)]} * b[static_cast<size_t>(kk * n + j)];
      c[static_cast<size_t>(i * n + j)] = static_cast<int32_t>(s);
    }
  }
  return c;
}

TEST(Matmul, Int8Gemm64x64x64IsBitExactAndFast) {
  isa::NpuConfig cfg;
  MachineState st(cfg);
  const auto a = random_i8(64 * 64, 1), b = random_i8(64 * 64, 2);
  put(st, Buffer::kInput, 0x100, a);
  put(st, Buffer::kWeight, 0x40, b);
  const Instruction mm = matmul(DType::kInt8, 64, 64, 64, 0x100, 0x40, 0x200);
  execute(mm, cfg, st);
  EXPECT_EQ((get<int32_t>(st, Buffer::kAccumulator, 0x200, 64 * 64)), (ref_gemm(a, b, 64, 64, 64)));

  double best_us = 1e9;
  for (int rep = 0; rep < 30; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    execute(mm, cfg, st);
    const auto t1 = std::chrono::steady_clock::now();
    best_us = std::min(best_us, std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  RecordProperty("int8_64x64x64_best_us", std::to_string(best_us));
#ifndef NPUSIM_SANITIZE  // sanitizers slow everything several times: the figure means nothing there
  EXPECT_LT(best_us, 1000.0) << "a 64x64x64 int8 MATMUL must execute in well under a millisecond";
#endif
}

TEST(Matmul, Uint8ActivationsTimesInt8WeightsAccumulateOntoC) {
  isa::NpuConfig cfg;
  MachineState st(cfg);
  const int m = 5, k = 7, n = 3;
  std::vector<uint8_t> a(m * k);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<uint8_t>(200 + i);
  const auto b = random_i8(k * n, 3);
  std::vector<int32_t> c0(m * n);
  for (size_t i = 0; i < c0.size(); ++i) c0[i] = static_cast<int32_t>(i * 1000) - 7000;
  put(st, Buffer::kInput, 0, a);
  put(st, Buffer::kWeight, 0, b);
  put(st, Buffer::kAccumulator, 64, c0);
  execute(matmul(DType::kUint8, m, k, n, 0, 0, 64, /*acc=*/true), cfg, st);
  std::vector<int32_t> want = ref_gemm(a, b, m, k, n);
  for (size_t i = 0; i < want.size(); ++i) want[i] += c0[i];
  EXPECT_EQ((get<int32_t>(st, Buffer::kAccumulator, 64, m * n)), want);
}

TEST(Matmul, ARowsFollowAStride) {
  isa::NpuConfig cfg;
  MachineState st(cfg);
  const int m = 3, k = 4, n = 2, stride = 10;
  std::vector<int8_t> a_strided(static_cast<size_t>((m - 1) * stride + k), 99), a_dense;
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < k; ++j) {
      a_strided[static_cast<size_t>(i * stride + j)] = static_cast<int8_t>(i * 4 + j - 5);
      a_dense.push_back(static_cast<int8_t>(i * 4 + j - 5));
    }
  }
  const auto b = random_i8(k * n, 4);
  put(st, Buffer::kInput, 0, a_strided);
  put(st, Buffer::kWeight, 0, b);
  execute(matmul(DType::kInt8, m, k, n, 0, 0, 0, false, false, stride), cfg, st);
  EXPECT_EQ((get<int32_t>(st, Buffer::kAccumulator, 0, m * n)), (ref_gemm(a_dense, b, m, k, n)));
}

TEST(Matmul, PreloadedOperandGivesTheSameNumbersInEveryDataflow) {
  const int m = 4, k = 6, n = 5;
  const auto a = random_i8(m * k, 5), b = random_i8(k * n, 6);
  const auto want = ref_gemm(a, b, m, k, n);
  for (isa::Dataflow df : {isa::Dataflow::kWs, isa::Dataflow::kIs, isa::Dataflow::kOs}) {
    isa::NpuConfig cfg;
    cfg.systolic_array.rows = 8;
    cfg.systolic_array.cols = 8;
    cfg.systolic_array.dataflow = df;
    MachineState st(cfg);
    put(st, Buffer::kInput, 0, a);
    put(st, Buffer::kWeight, 0, b);
    if (df == isa::Dataflow::kWs) {
      // The weights come from the stationary register; the weight buffer's copy is clobbered to prove it.
      put(st, Buffer::kWeight, 512, b);
      execute(preload(DType::kInt8, Buffer::kWeight, 512, k, n), cfg, st);
      put(st, Buffer::kWeight, 0, std::vector<int8_t>(k * n, 0));
    } else if (df == isa::Dataflow::kIs) {
      put(st, Buffer::kInput, 512, a);
      execute(preload(DType::kInt8, Buffer::kInput, 512, m, k), cfg, st);
      put(st, Buffer::kInput, 0, std::vector<int8_t>(m * k, 0));
    }
    const bool pre = df != isa::Dataflow::kOs;
    execute(matmul(DType::kInt8, m, k, n, 0, 0, 0, false, pre), cfg, st);
    EXPECT_EQ((get<int32_t>(st, Buffer::kAccumulator, 0, m * n)), want) << static_cast<int>(df);
    if (df == isa::Dataflow::kOs) {
      EXPECT_THROW(execute(matmul(DType::kInt8, m, k, n, 0, 0, 0, false, true), cfg, st), DatapathError);
    }
  }
}

TEST(Matmul, PreloadRowStrideAndMismatchedStationaryOperand) {
  isa::NpuConfig cfg;
  cfg.systolic_array.rows = 8;
  cfg.systolic_array.cols = 8;
  MachineState st(cfg);
  // A 2x3 weight tile stored with rows 5 elements apart.
  put(st, Buffer::kWeight, 0, std::vector<int8_t>{1, 2, 3, 0, 0, 4, 5, 6, 0, 0});
  execute(preload(DType::kInt8, Buffer::kWeight, 0, 2, 3, 5), cfg, st);
  EXPECT_EQ(st.stationary().bytes, (std::vector<uint8_t>{1, 2, 3, 4, 5, 6}));
  put(st, Buffer::kInput, 0, std::vector<int8_t>{1, 10});
  execute(matmul(DType::kInt8, 1, 2, 3, 0, 0, 0, false, true), cfg, st);
  EXPECT_EQ((get<int32_t>(st, Buffer::kAccumulator, 0, 3)), (std::vector<int32_t>{41, 52, 63}));
  // k=3 does not match the 2x3 stationary tile.
  try {
    execute(matmul(DType::kInt8, 1, 3, 3, 0, 0, 0, false, true), cfg, st);
    FAIL() << "no error";
  } catch (const DatapathError& e) {
    EXPECT_NE(std::string(e.what()).find("MATMUL"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("2x3"), std::string::npos) << e.what();
  }
  // A 9-row weight tile does not fit an 8x8 array.
  EXPECT_THROW(execute(preload(DType::kInt8, Buffer::kWeight, 0, 9, 2), cfg, st), DatapathError);
}

// fp16 inputs: products are exact in fp32, so with fp32 accumulation the result is within a few fp32
// ulps of a double-precision reference over the same (fp16-rounded) inputs; fp16 accumulation is
// within fp16 precision but measurably worse.
TEST(Matmul, Fp16AgainstFp32ReferenceWithinTolerance) {
  const int m = 16, k = 64, n = 16;
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<uint16_t> a(m * k), b(k * n);
  for (auto& x : a) x = fp32_to_fp16(d(rng));
  for (auto& x : b) x = fp32_to_fp16(d(rng));
  std::vector<double> ref(m * n, 0.0);
  double scale = 0;
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      double s = 0, mag = 0;
      for (int kk = 0; kk < k; ++kk) {
        const double p = double{fp16_to_fp32(a[i * k + kk])} * fp16_to_fp32(b[kk * n + j]);
        s += p;
        mag += std::fabs(p);
      }
      ref[i * n + j] = s;
      scale = std::max(scale, mag);
    }
  }
  double err32 = 0, err16 = 0;
  for (bool fp32_acc : {true, false}) {
    isa::NpuConfig cfg;
    cfg.systolic_array.fp16_accumulate_fp32 = fp32_acc;
    MachineState st(cfg);
    put(st, Buffer::kInput, 0, a);
    put(st, Buffer::kWeight, 0, b);
    execute(matmul(DType::kFp16, m, k, n), cfg, st);
    const auto c = get<float>(st, Buffer::kAccumulator, 0, m * n);
    double worst = 0;
    for (int i = 0; i < m * n; ++i) {
      worst = std::max(worst, std::fabs(c[i] - ref[i]));
      if (!fp32_acc) {
        EXPECT_EQ(c[i], round_to_precision(c[i], DType::kFp16)) << "fp16 accumulation stores fp16 values";
      }
    }
    (fp32_acc ? err32 : err16) = worst;
  }
  EXPECT_LT(err32, scale * k * std::ldexp(1.0, -24));  // k roundings of at most half an fp32 ulp of the sum
  EXPECT_LT(err16, scale * k * std::ldexp(1.0, -11));
  EXPECT_GT(err16, err32);
}

TEST(Matmul, Bf16WithFp32AccumulationAndUnsupportedDtypes) {
  isa::NpuConfig cfg;
  MachineState st(cfg);
  // bf16 1.5 * 2.0 + 0.25 * -4.0 = 2.0 exactly.
  put(st, Buffer::kInput, 0, std::vector<uint16_t>{fp32_to_bf16(1.5f), fp32_to_bf16(0.25f)});
  put(st, Buffer::kWeight, 0, std::vector<uint16_t>{fp32_to_bf16(2.0f), fp32_to_bf16(-4.0f)});
  execute(matmul(DType::kBf16, 1, 2, 1), cfg, st);
  EXPECT_EQ((get<float>(st, Buffer::kAccumulator, 0, 1))[0], 2.0f);
  cfg.systolic_array.fp32_rate = 0;
  EXPECT_THROW(execute(matmul(DType::kFp32, 1, 2, 1), cfg, st), DatapathError);
  EXPECT_THROW(execute(matmul(DType::kInt32, 1, 2, 1), cfg, st), DatapathError);
}

// int16 activations x int8 weights accumulate in int64: full-scale operands over K = 1024 reach
// 1024 x 32767 x 127 = 4.26e9, beyond int32, and the sums are exact.
TEST(Matmul, Int16TimesInt8AccumulatesInInt64BeyondInt32) {
  isa::NpuConfig cfg;
  MachineState st(cfg);
  const int m = 3, k = 1024, n = 2;
  std::vector<int16_t> a(static_cast<size_t>(m * k));
  std::vector<int8_t> b(static_cast<size_t>(k * n));
  std::mt19937 rng(4);
  std::uniform_int_distribution<int> d16(-32768, 32767), d8(-127, 127);
  for (int i = 0; i < m * k; ++i) a[static_cast<size_t>(i)] = static_cast<int16_t>(i < k ? 32767 : d16(rng));
  for (int i = 0; i < k * n; ++i) b[static_cast<size_t>(i)] = static_cast<int8_t>(i % n == 0 ? 127 : d8(rng));
  put(st, Buffer::kInput, 0, a);
  put(st, Buffer::kWeight, 0, b);
  std::vector<int64_t> want(static_cast<size_t>(m * n), 5);  // accumulated onto C = 5
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j)
      for (int kk = 0; kk < k; ++kk)
        want[static_cast<size_t>(i * n + j)] +=
            int64_t{a[static_cast<size_t>(i * k + kk)]} * b[static_cast<size_t>(kk * n + j)];
  EXPECT_EQ(want[0], 5 + int64_t{1024} * 32767 * 127);
  put(st, Buffer::kAccumulator, 64, std::vector<int64_t>(static_cast<size_t>(m * n), 5));
  execute(matmul(DType::kInt16, m, k, n, 0, 0, 64, true), cfg, st);
  EXPECT_EQ((get<int64_t>(st, Buffer::kAccumulator, 64, static_cast<size_t>(m * n))), want);
  // The array without int16 MACs refuses it; int64 is no operand type.
  EXPECT_THROW(execute(matmul(DType::kInt64, 1, 2, 1), cfg, st), DatapathError);
  cfg.systolic_array.int16_rate = 0;
  EXPECT_THROW(execute(matmul(DType::kInt16, 1, 2, 1), cfg, st), DatapathError);
}

// ---- convolution through LOAD's halo ---------------------------------------------------------

// Direct convolution of an H x W x C int8 image (NHWC) with [kh][kw][C][N] weights, `pad` pixels of
// value `pad_value` on each side, stride s: the textbook definition.
std::vector<int32_t> ref_conv(const std::vector<int8_t>& img, const std::vector<int8_t>& w, int H, int W,
                              int C, int N, int kh, int kw, int pad, int s, int pad_value, int& oh, int& ow) {
  oh = (H + 2 * pad - kh) / s + 1;
  ow = (W + 2 * pad - kw) / s + 1;
  std::vector<int32_t> out(static_cast<size_t>(oh * ow * N));
  for (int y = 0; y < oh; ++y) {
    for (int x = 0; x < ow; ++x) {
      for (int o = 0; o < N; ++o) {
        int64_t sum = 0;
        for (int i = 0; i < kh; ++i) {
          for (int j = 0; j < kw; ++j) {
            const int iy = y * s + i - pad, ix = x * s + j - pad;
            for (int c = 0; c < C; ++c) {
              const int v = (iy < 0 || iy >= H || ix < 0 || ix >= W)
                                ? pad_value
                                : img[static_cast<size_t>((iy * W + ix) * C + c)];
              sum += int64_t{v} * w[static_cast<size_t>(((i * kw + j) * C + c) * N + o)];
            }
          }
        }
        out[static_cast<size_t>((y * ow + x) * N + o)] = static_cast<int32_t>(sum);
      }
    }
  }
  return out;
}

void conv_through_dram(int stride, int pad_value) {
  const int H = 9, W = 7, C = 3, N = 4, K = 3, pad = 1;
  isa::NpuConfig cfg;
  isa::Program prog;
  const auto img = random_i8(H * W * C, 20 + stride), w = random_i8(K * K * C * N, 30 + stride);
  prog.data.push_back({0x1000, std::vector<uint8_t>(img.begin(), img.end())});
  prog.data.push_back({0x8000, std::vector<uint8_t>(w.begin(), w.end())});
  MachineState st(cfg, prog);
  Box in;
  in.size0 = C;
  in.size1 = W;
  in.size2 = H;
  in.stride1 = C;
  in.stride2 = W * C;
  in.pad_top = in.pad_bottom = in.pad_left = in.pad_right = pad;
  in.pad_value = pad_value;
  execute(dma(Opcode::kLoad, DType::kInt8, Buffer::kInput, 0x1000, 64, in), cfg, st);
  Box wb;
  wb.size0 = K * K * C * N;
  execute(dma(Opcode::kLoad, DType::kInt8, Buffer::kWeight, 0x8000, 0, wb), cfg, st);
  int oh, ow;
  const auto want = ref_conv(img, w, H, W, C, N, K, K, pad, stride, pad_value, oh, ow);
  ConvShape s{H + 2 * pad, W + 2 * pad, C, oh, ow, N, K, K, stride, stride, 1, 1};
  execute(conv(DType::kInt8, s, 64, 0, 128), cfg, st);
  Box out;
  out.size0 = oh * ow * N;
  execute(dma(Opcode::kStore, DType::kInt32, Buffer::kAccumulator, 0x40000, 128, out), cfg, st);
  std::vector<int32_t> got(want.size());
  st.dram().read(0x40000, got.data(), got.size() * 4);
  EXPECT_EQ(got, want) << "stride " << stride;
}

TEST(Conv, ThreeByThreeWithHaloStrideOne) { conv_through_dram(1, 0); }
TEST(Conv, ThreeByThreeWithHaloStrideTwo) { conv_through_dram(2, 0); }
TEST(Conv, HaloPadValueIsTheZeroPoint) { conv_through_dram(1, -7); }

TEST(Conv, DilationAndUnevenStrides) {
  isa::NpuConfig cfg;
  MachineState st(cfg);
  // 1-channel 6x7 input 0..41, 2x2 kernel of ones with dilation 2x3, stride 2x1: out 2x2.
  std::vector<int8_t> a(42);
  for (int i = 0; i < 42; ++i) a[static_cast<size_t>(i)] = static_cast<int8_t>(i);
  put(st, Buffer::kInput, 0, a);
  put(st, Buffer::kWeight, 0, std::vector<int8_t>{1, 1, 1, 1});
  ConvShape s{6, 7, 1, 2, 2, 1, 2, 2, 2, 1, 2, 3};
  execute(conv(DType::kInt8, s), cfg, st);
  // Output (y,x) sums A at rows {2y, 2y+2} and columns {x, x+3}.
  auto at = [](int r, int c) { return r * 7 + c; };
  std::vector<int32_t> want;
  for (int y = 0; y < 2; ++y) {
    for (int x = 0; x < 2; ++x)
      want.push_back(at(2 * y, x) + at(2 * y, x + 3) + at(2 * y + 2, x) + at(2 * y + 2, x + 3));
  }
  EXPECT_EQ((get<int32_t>(st, Buffer::kAccumulator, 0, 4)), want);
  // One more output row would read row 6 of a 6-row tile.
  s.out_h = 3;
  EXPECT_THROW(execute(conv(DType::kInt8, s), cfg, st), DatapathError);
}

TEST(Conv, ReadsAChannelSliceOfAWiderTileAndWritesColumnsOfAWiderAccumulatorTile) {
  // A grouped conv's second block: a 4x5 tile of 6 channels (two groups of 3) and an accumulator tile of
  // 4 columns (two groups of 2). The CONV reads channels 3..5 (a = 3 elements in, a_stride = 6) and
  // writes columns 2..3 (c = 2 columns in, c_stride = 4); columns 0..1 keep what they held.
  const int H = 4, W = 5, C_all = 6, C = 3, N = 2, N_all = 4, K = 2;
  isa::NpuConfig cfg;
  MachineState st(cfg);
  const auto tile = random_i8(H * W * C_all, 41), w = random_i8(K * K * C * N, 42);
  std::vector<int8_t> slice;  // the block's channels as a dense tile: the textbook conv's input
  for (int p = 0; p < H * W; ++p) {
    for (int ch = 0; ch < C; ++ch) slice.push_back(tile[static_cast<size_t>(p * C_all + C + ch)]);
  }
  int oh, ow;
  const auto want = ref_conv(slice, w, H, W, C, N, K, K, 0, 1, 0, oh, ow);
  put(st, Buffer::kInput, 0, tile);
  put(st, Buffer::kWeight, 0, w);
  const std::vector<int32_t> before(static_cast<size_t>(oh * ow * N_all), -12345);
  put(st, Buffer::kAccumulator, 0, before);
  Instruction i = conv(DType::kInt8, ConvShape{H, W, C, oh, ow, N, K, K}, C, 0, N * 4);
  i.set(Field::kAStride, C_all).set(Field::kCStride, N_all);
  execute(i, cfg, st);
  const auto got = get<int32_t>(st, Buffer::kAccumulator, 0, oh * ow * N_all);
  for (int p = 0; p < oh * ow; ++p) {
    for (int n = 0; n < N_all; ++n) {
      const int32_t expect = n < N ? -12345 : want[static_cast<size_t>(p * N + n - N)];
      EXPECT_EQ(got[static_cast<size_t>(p * N_all + n)], expect) << "pixel " << p << " column " << n;
    }
  }
  // Strides narrower than the channels or columns they step over are errors.
  i.set(Field::kAStride, C - 1);
  EXPECT_THROW(execute(i, cfg, st), DatapathError);
  i.set(Field::kAStride, C_all).set(Field::kCStride, N - 1);
  EXPECT_THROW(execute(i, cfg, st), DatapathError);
}

// ---- DMA ---------------------------------------------------------------------------------------

TEST(Dma, StridedFourDimensionalLoadWithHaloAndPerDtypePadValues) {
  isa::NpuConfig cfg;
  MachineState st(cfg);
  // fp16 elements, so the pad value goes the bf16-bits path. Box size0=2, size1=3, size2=2, size3=2; strides
  // in elements 5, 20, 50.
  const int s0 = 2, s1 = 3, s2 = 2, s3 = 2, st1 = 5, st2 = 20, st3 = 50;
  const int pt = 1, pb = 0, pl = 2, pr = 1;
  auto value = [](int i0, int i1, int i2, int i3) {
    return static_cast<float>(i0 + 10 * i1 + 100 * i2 + 1000 * i3) / 8.0f;
  };
  for (int i3 = 0; i3 < s3; ++i3) {
    for (int i2 = 0; i2 < s2; ++i2) {
      for (int i1 = 0; i1 < s1; ++i1) {
        for (int i0 = 0; i0 < s0; ++i0) {
          const uint16_t h = fp32_to_fp16(value(i0, i1, i2, i3));
          st.dram().write(0x500 + 2 * (i0 + i1 * st1 + i2 * st2 + i3 * st3), &h, 2);
        }
      }
    }
  }
  // pad_value is a signed 16-bit field: bf16 bits with the sign bit set are a negative field value.
  Box b{s0, s1, s2, s3, st1, st2, st3, pt, pb, pl, pr, static_cast<int16_t>(fp32_to_bf16(-1.5f))};
  execute(dma(Opcode::kLoad, DType::kFp16, Buffer::kInput, 0x500, 32, b), cfg, st);
  const int S1 = s1 + pl + pr, S2 = s2 + pt + pb;
  const auto got = get<uint16_t>(st, Buffer::kInput, 32, static_cast<size_t>(s0 * S1 * S2 * s3));
  for (int j3 = 0; j3 < s3; ++j3) {
    for (int j2 = 0; j2 < S2; ++j2) {
      for (int j1 = 0; j1 < S1; ++j1) {
        for (int j0 = 0; j0 < s0; ++j0) {
          const bool halo = j2 < pt || j2 >= pt + s2 || j1 < pl || j1 >= pl + s1;
          const float want = halo ? -1.5f : value(j0, j1 - pl, j2 - pt, j3);
          EXPECT_EQ(fp16_to_fp32(got[static_cast<size_t>(j0 + s0 * (j1 + S1 * (j2 + S2 * j3)))]), want)
              << j0 << " " << j1 << " " << j2 << " " << j3;
        }
      }
    }
  }
  // Integer pad values are signed integers saturated to the type.
  Box p{1, 1, 1, 1, 0, 0, 0, 1, 0, 0, 0, -5};
  execute(dma(Opcode::kLoad, DType::kInt8, Buffer::kInput, 0, 0, p), cfg, st);
  EXPECT_EQ((get<int8_t>(st, Buffer::kInput, 0, 1))[0], -5);
  p.pad_value = 300;
  execute(dma(Opcode::kLoad, DType::kUint8, Buffer::kInput, 0, 0, p), cfg, st);
  EXPECT_EQ((get<uint8_t>(st, Buffer::kInput, 0, 1))[0], 255);
  p.pad_value = -2;
  execute(dma(Opcode::kLoad, DType::kInt32, Buffer::kInput, 0, 0, p), cfg, st);
  EXPECT_EQ((get<int32_t>(st, Buffer::kInput, 0, 1))[0], -2);
  p.pad_value = fp32_to_bf16(0.5f);
  execute(dma(Opcode::kLoad, DType::kFp32, Buffer::kInput, 0, 0, p), cfg, st);
  EXPECT_EQ((get<float>(st, Buffer::kInput, 0, 1))[0], 0.5f);
}

TEST(Dma, StoreScattersRowsAndLaterRowsWin) {
  isa::NpuConfig cfg;
  MachineState st(cfg);
  put(st, Buffer::kAccumulator, 0, std::vector<int32_t>{1, 2, 3, 4, 5, 6});
  Box b;
  b.size0 = 2;
  b.size1 = 3;
  b.stride1 = 4;  // rows 4 elements apart in DRAM
  execute(dma(Opcode::kStore, DType::kInt32, Buffer::kAccumulator, 0x2000, 0, b), cfg, st);
  std::vector<int32_t> d(10);
  st.dram().read(0x2000, d.data(), 40);
  EXPECT_EQ(d, (std::vector<int32_t>{1, 2, 0, 0, 3, 4, 0, 0, 5, 6}));
  b.stride1 = 1;  // overlapping rows: written in order, the last one wins where they overlap
  execute(dma(Opcode::kStore, DType::kInt32, Buffer::kAccumulator, 0x3000, 0, b), cfg, st);
  std::vector<int32_t> o(4);
  st.dram().read(0x3000, o.data(), 16);
  EXPECT_EQ(o, (std::vector<int32_t>{1, 3, 5, 6}));
  b.pad_left = 1;
  EXPECT_THROW(execute(dma(Opcode::kStore, DType::kInt32, Buffer::kAccumulator, 0x3000, 0, b), cfg, st),
               DatapathError);
}

TEST(HostCall, RunsTheRegisteredHandlerWithTheProgramsHostOp) {
  isa::NpuConfig cfg;
  isa::Program p;
  p.host_ops = {{"nms0", "NonMaxSuppression", 100}, {"topk", "TopK", 7}};
  MachineState st(cfg, p);
  Instruction h;
  h.opcode = Opcode::kHostCall;
  h.set(Field::kHostOp, 1);
  execute(h, cfg, st);  // no handler: no effect, no error
  std::string seen;
  st.set_host_op_handler([&](const isa::HostOp& op, MachineState& s) {
    seen = op.name + "/" + op.op_type;
    const uint8_t one = 1;
    s.dram().write(0x10, &one, 1);
  });
  execute(h, cfg, st);
  EXPECT_EQ(seen, "topk/TopK");
  uint8_t v = 0;
  st.dram().read(0x10, &v, 1);
  EXPECT_EQ(v, 1);
  h.set(Field::kHostOp, 2);
  EXPECT_THROW(execute(h, cfg, st), DatapathError);
  // A program without host ops gets an anonymous op carrying cpu_ops.
  MachineState st2(cfg);
  uint64_t ops = 0;
  st2.set_host_op_handler([&](const isa::HostOp& op, MachineState&) { ops = op.cpu_ops; });
  h.set(Field::kHostOp, 0).set(Field::kCpuOps, 1234);
  execute(h, cfg, st2);
  EXPECT_EQ(ops, 1234u);
}

TEST(Sync, NopBarrierHaltChangeNothing) {
  isa::NpuConfig cfg;
  MachineState st(cfg);
  for (Opcode op : {Opcode::kNop, Opcode::kBarrier, Opcode::kHalt}) {
    Instruction i;
    i.opcode = op;
    execute(i, cfg, st);
  }
  EXPECT_EQ(st.dram().pages_allocated(), 0u);
  EXPECT_FALSE(st.stationary().valid);
}

}  // namespace
}  // namespace npusim::arch::datapath
