// A convolution's floating-point sums do not depend on how it is mapped (isa.h, CONV's order): the same
// 3x3 conv as one CONV, as CONVs over channel chunks accumulating onto each other, as an im2col GEMM in
// ONNX's weight order (one MATMUL or K chunks), and on the PE-level array with K folded over its rows,
// gives the same bits, equal to a textbook loop adding the products channel-major.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "arch/datapath/executor.h"
#include "arch/datapath/pe_array.h"
#include "tests/arch/datapath/dp_test_util.h"

// Names of their own: unity builds put several test files in one translation unit.
namespace npusim::arch::datapath::conv_order_test {
namespace {

using namespace test;  // NOLINT: test helpers

// The conv: an H x W x C input tile (no padding: LOAD's halo is not what is tested), N filters of
// KH x KW, stride 1: OH x OW outputs.
constexpr int64_t H = 6, W = 7, C = 12, N = 5, KH = 3, KW = 3, OH = H - KH + 1, OW = W - KW + 1;
constexpr int64_t M = OH * OW, K = C * KH * KW;

// A precision and where its sums are rounded.
struct Numerics {
  DType t;
  bool fp32_acc;  // systolic_array.fp16_accumulate_fp32 (fp32 accumulates in fp32 either way)
  std::string name() const {
    return std::string(isa::kDTypeNames[static_cast<size_t>(t)]) + (fp32_acc ? "/fp32 acc" : "/own acc");
  }
  isa::NpuConfig config() const {
    isa::NpuConfig cfg;
    cfg.systolic_array.fp16_accumulate_fp32 = fp32_acc;
    return cfg;
  }
  DType acc_rounding() const { return (t != DType::kFp32 && !fp32_acc) ? t : DType::kFp32; }
};

const std::vector<Numerics>& all_numerics() {
  static const std::vector<Numerics> v = {{DType::kFp16, false},
                                          {DType::kFp16, true},
                                          {DType::kBf16, false},
                                          {DType::kBf16, true},
                                          {DType::kFp32, true}};
  return v;
}

// Values of several binades, so that the order of additions shows in the rounding; each representable
// in the precision.
struct Data {
  std::vector<float> x;  // [H][W][C]
  std::vector<float> w;  // [N][C][KH][KW] (ONNX's layout)
  float at(int64_t y, int64_t xx, int64_t ch) const { return x[static_cast<size_t>((y * W + xx) * C + ch)]; }
  float wt(int64_t n, int64_t ch, int64_t i, int64_t j) const {
    return w[static_cast<size_t>(((n * C + ch) * KH + i) * KW + j)];
  }
};

Data make_data(DType t, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> mant(-1.0f, 1.0f);
  std::uniform_int_distribution<int> expo(-4, 4);  // sums stay far below fp16's 65504
  const auto draw = [&] {
    return round_to_precision(std::ldexp(mant(rng), expo(rng)), t == DType::kFp32 ? DType::kFp32 : t);
  };
  Data d;
  for (int64_t i = 0; i < H * W * C; ++i) d.x.push_back(draw());
  for (int64_t i = 0; i < N * C * KH * KW; ++i) d.w.push_back(draw());
  return d;
}

void put_floats(MachineState& st, Buffer b, uint64_t addr, DType t, const std::vector<float>& v) {
  const size_t es = static_cast<size_t>(isa::dtype_bytes(t));
  for (size_t i = 0; i < v.size(); ++i) store_float(st.sram(b).data() + addr + i * es, t, v[i]);
}

std::vector<uint32_t> acc_bits(const MachineState& st) {
  std::vector<uint32_t> bits;
  for (float f : get<float>(st, Buffer::kAccumulator, 0, static_cast<size_t>(M * N)))
    bits.push_back(fp32_bits(f));
  return bits;
}

// A textbook loop: each output's products added one by one onto 0, in channel-major order (ch, i, j)
// or, for contrast, taps-major (i, j, ch), each sum rounded as the array rounds it.
std::vector<uint32_t> reference(const Data& d, const Numerics& nu, bool channel_major) {
  std::vector<uint32_t> bits;
  for (int64_t y = 0; y < OH; ++y) {
    for (int64_t xx = 0; xx < OW; ++xx) {
      for (int64_t n = 0; n < N; ++n) {
        float acc = 0.0f;
        for (int64_t a = 0; a < C * KH * KW; ++a) {
          const int64_t ch = channel_major ? a / (KH * KW) : a % C;
          const int64_t tap = channel_major ? a % (KH * KW) : a / C;
          const int64_t i = tap / KW, j = tap % KW;
          acc = round_to_precision(acc + d.at(y + i, xx + j, ch) * d.wt(n, ch, i, j), nu.acc_rounding());
        }
        bits.push_back(fp32_bits(acc));
      }
    }
  }
  return bits;
}

// The conv as CONVs over consecutive channel chunks of the given sizes (a mapping's tile_c), each
// reading its channels of the whole tile (a_stride = C) with its chunk's weights [KH*KW*tc][N], the
// first writing the accumulator, the others adding to it.
std::vector<uint32_t> conv_in_chunks(const Data& d, const Numerics& nu, const std::vector<int64_t>& chunks) {
  const isa::NpuConfig cfg = nu.config();
  MachineState st(cfg);
  const int64_t es = isa::dtype_bytes(nu.t);
  put_floats(st, Buffer::kInput, 0, nu.t, d.x);
  int64_t c0 = 0;
  for (int64_t tc : chunks) {
    std::vector<float> b;  // row (i*KW + j)*tc + (ch - c0), column n
    for (int64_t i = 0; i < KH; ++i) {
      for (int64_t j = 0; j < KW; ++j) {
        for (int64_t ch = c0; ch < c0 + tc; ++ch) {
          for (int64_t n = 0; n < N; ++n) b.push_back(d.wt(n, ch, i, j));
        }
      }
    }
    put_floats(st, Buffer::kWeight, 0, nu.t, b);
    Instruction ins = conv(nu.t, ConvShape{H, W, tc, OH, OW, N, KH, KW}, c0 * es, 0, 0, c0 > 0);
    ins.set(Field::kAStride, C);
    execute(ins, cfg, st);
    c0 += tc;
  }
  EXPECT_EQ(c0, C);
  return acc_bits(st);
}

// The explicit im2col matrix in ONNX's order: row y*OW + x, column (ch*KH + i)*KW + j.
std::vector<float> im2col_onnx(const Data& d) {
  std::vector<float> a;
  for (int64_t y = 0; y < OH; ++y) {
    for (int64_t xx = 0; xx < OW; ++xx) {
      for (int64_t ch = 0; ch < C; ++ch) {
        for (int64_t i = 0; i < KH; ++i) {
          for (int64_t j = 0; j < KW; ++j) a.push_back(d.at(y + i, xx + j, ch));
        }
      }
    }
  }
  return a;
}

// ONNX's weights as the GEMM's B [K x N]: row (ch*KH + i)*KW + j.
std::vector<float> weights_onnx(const Data& d) {
  std::vector<float> b;
  for (int64_t ch = 0; ch < C; ++ch) {
    for (int64_t tap = 0; tap < KH * KW; ++tap) {
      for (int64_t n = 0; n < N; ++n) b.push_back(d.wt(n, ch, tap / KW, tap % KW));
    }
  }
  return b;
}

// The conv as an im2col GEMM: MATMULs over consecutive K chunks of the given sizes (a GEMM's tile_k),
// each reading its columns of A (a_stride = K) and its rows of B.
std::vector<uint32_t> gemm_in_chunks(const Data& d, const Numerics& nu, const std::vector<int64_t>& chunks) {
  const isa::NpuConfig cfg = nu.config();
  MachineState st(cfg);
  const int64_t es = isa::dtype_bytes(nu.t);
  put_floats(st, Buffer::kInput, 0, nu.t, im2col_onnx(d));
  put_floats(st, Buffer::kWeight, 0, nu.t, weights_onnx(d));
  int64_t k0 = 0;
  for (int64_t tk : chunks) {
    execute(matmul(nu.t, M, tk, N, k0 * es, k0 * N * es, 0, k0 > 0, false, K), cfg, st);
    k0 += tk;
  }
  EXPECT_EQ(k0, K);
  return acc_bits(st);
}

// "fp16/own acc tile_c 6 6": a case's name in a failure message.
std::string label(const Numerics& nu, const char* key, const std::vector<int64_t>& chunks) {
  std::string s = nu.name() + " " + key;
  for (int64_t c : chunks) s += " " + std::to_string(c);
  return s;
}

TEST(ConvOrder, FloatSumsAreChannelMajorWhateverTheChannelChunk) {
  for (const Numerics& nu : all_numerics()) {
    const Data d = make_data(nu.t, 7);
    const std::vector<uint32_t> want = reference(d, nu, true);
    // The data tells the two orders apart, so equal bits below pin the order.
    EXPECT_NE(want, reference(d, nu, false)) << nu.name();
    for (const std::vector<int64_t>& chunks : std::vector<std::vector<int64_t>>{
             {12}, {6, 6}, {4, 4, 4}, {5, 7}, {1, 11}, {3, 3, 3, 3}, {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}}) {
      EXPECT_EQ(conv_in_chunks(d, nu, chunks), want) << label(nu, "tile_c", chunks);
    }
  }
}

TEST(ConvOrder, ConvEqualsTheIm2colGemmInOnnxWeightOrderBitForBit) {
  for (const Numerics& nu : all_numerics()) {
    const Data d = make_data(nu.t, 8);
    const std::vector<uint32_t> conv = conv_in_chunks(d, nu, {C});
    EXPECT_EQ(conv, reference(d, nu, true)) << nu.name();
    // K chunks of the GEMM, including ones that end inside a channel's taps.
    for (const std::vector<int64_t>& chunks :
         std::vector<std::vector<int64_t>>{{K}, {K / 2, K / 2}, {50, 58}, {9, 9, 9, 81}, {1, K - 1}}) {
      EXPECT_EQ(gemm_in_chunks(d, nu, chunks), conv) << label(nu, "tile_k", chunks);
    }
  }
}

// The PE-level array fed the im2col matrix in ONNX's order: K = 108 over 4 rows is 27 row folds, each
// continuing the running sums the fold before left in the accumulator (the partial sum enters the top of
// the column), in every dataflow: the executor's CONV bits. So the array's own order is the contract's.
TEST(ConvOrder, ThePeArraysRowFoldsContinueOneSumInTheConvsOrder) {
  for (const Numerics& nu : all_numerics()) {
    const Data d = make_data(nu.t, 9);
    const std::vector<uint32_t> conv = conv_in_chunks(d, nu, {C});
    PeOperands ops;
    ops.integer = false;
    ops.accumulate_in = nu.acc_rounding();
    ops.a_fp = im2col_onnx(d);
    ops.b_fp = weights_onnx(d);
    PeTimingOptions piped{true, false, 1.0};
    piped.pipelined_folds = true;
    for (auto [df, opt] :
         {std::pair{isa::Dataflow::kWs, PeTimingOptions{}}, std::pair{isa::Dataflow::kOs, PeTimingOptions{}},
          std::pair{isa::Dataflow::kIs, PeTimingOptions{}}, std::pair{isa::Dataflow::kWs, piped}}) {
      const PeTileResult r = PeArray(4, 3, df).run(M, K, N, &ops, opt);
      std::vector<uint32_t> bits;
      for (float f : r.c_fp) bits.push_back(fp32_bits(f));
      EXPECT_EQ(bits, conv) << nu.name() << " dataflow " << static_cast<int>(df)
                            << " pipelined=" << opt.pipelined_folds;
    }
  }
}

}  // namespace
}  // namespace npusim::arch::datapath::conv_order_test
