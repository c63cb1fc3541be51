// Unit tests of compiler/quant: multiplier derivation, overrides, calibration thresholds, the int8
// reference's arithmetic, the accuracy report's outlier and first-bad-layer markers, and the QDQ import.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <random>

#include "compiler/import/import.h"
#include "compiler/interp/interpreter.h"
#include "compiler/io/npy.h"
#include "compiler/passes/lowered.h"
#include "compiler/quant/accuracy.h"
#include "compiler/quant/calibration.h"
#include "compiler/quant/emulate.h"
#include "compiler/quant/precision.h"
#include "compiler/quant/qdq.h"
#include "compiler/quant/quantize.h"
#include "isa/numerics.h"
#include "tests/compiler/passes/graph_builder.h"

namespace npusim::compiler::quant {
namespace {

using testing::attr_i;
using testing::attr_ints;
using testing::GraphBuilder;
namespace num = isa::numerics;

// ---- multiplier and shift ---------------------------------------------------------------------

TEST(QuantizeMultiplier, MatchesTfliteQuantizeMultiplierByHand) {
  // TFLite: frexp(real) = q * 2^e, M = round(q * 2^31); our shift is -e.
  auto m = num::quantize_multiplier(0.5);  // q = 0.5, e = 0
  EXPECT_EQ(m.multiplier, 1 << 30);
  EXPECT_EQ(m.shift, 0);
  m = num::quantize_multiplier(0.25);  // q = 0.5, e = -1
  EXPECT_EQ(m.multiplier, 1 << 30);
  EXPECT_EQ(m.shift, 1);
  m = num::quantize_multiplier(1.0);  // q = 0.5, e = 1: a left shift
  EXPECT_EQ(m.multiplier, 1 << 30);
  EXPECT_EQ(m.shift, -1);
  m = num::quantize_multiplier(0.1);  // 0.1 = 0.8 * 2^-3; 0.8 * 2^31 = 1717986918.4
  EXPECT_EQ(m.multiplier, 1717986918);
  EXPECT_EQ(m.shift, 3);
  m = num::quantize_multiplier(0.75);  // 0.75 * 2^31
  EXPECT_EQ(m.multiplier, 1610612736);
  EXPECT_EQ(m.shift, 0);
  m = num::quantize_multiplier(1.0 - std::ldexp(1.0, -40));  // q * 2^31 rounds to 2^31: halved, e + 1
  EXPECT_EQ(m.multiplier, 1 << 30);
  EXPECT_EQ(m.shift, -1);
  m = num::quantize_multiplier(std::ldexp(1.0, -40));  // e = -39 < -31: flushed to zero as TFLite does
  EXPECT_EQ(m.multiplier, 0);
  EXPECT_EQ(m.shift, 0);
  m = num::quantize_multiplier(0.0);
  EXPECT_EQ(m.multiplier, 0);
  EXPECT_THROW(num::quantize_multiplier(-0.5), std::invalid_argument);
}

TEST(QuantizeMultiplier, RequantizeWithDerivedMultiplierRoundsHalfAwayFromZero) {
  const auto m = num::quantize_multiplier(0.1);
  // 1000 * 0.1 = 100 exactly.
  EXPECT_EQ(num::requantize_int8(1000, m.multiplier, m.shift, 0), 100);
  // 1005 * 0.8 = 804 (high mul: 1005 * 1717986918 / 2^31 = 803.9999998 -> 804), 804 / 8 = 100.5 -> 101.
  EXPECT_EQ(num::requantize_int8(1005, m.multiplier, m.shift, 0), 101);
  EXPECT_EQ(num::requantize_int8(-1005, m.multiplier, m.shift, 0), -101);
  // Saturates to int8 after the zero point.
  EXPECT_EQ(num::requantize_int8(5000, m.multiplier, m.shift, 10), 127);
}

// ---- precision plan ---------------------------------------------------------------------------

TEST(PrecisionOverrides, ParsesCommaListAndYamlLikeLines) {
  auto o = parse_overrides("conv1=fp16, Softmax: FP32\n- fc: bf16  # the classifier\n\n");
  ASSERT_EQ(o.size(), 3u);
  EXPECT_EQ(o[0].key, "conv1");
  EXPECT_EQ(o[0].precision, Precision::kFp16);
  EXPECT_EQ(o[1].key, "Softmax");
  EXPECT_EQ(o[1].precision, Precision::kFp32);
  EXPECT_EQ(o[2].key, "fc");
  EXPECT_EQ(o[2].precision, Precision::kBf16);
  EXPECT_EQ(format_overrides(o), "conv1=fp16,Softmax=fp32,fc=bf16");
  EXPECT_THROW(parse_overrides("conv1=fp64"), PrecisionError);
  EXPECT_THROW(parse_overrides("conv1"), PrecisionError);
}

Graph two_conv_softmax() {
  GraphBuilder b;
  auto x = b.input("x", {1, 2, 4, 4});
  auto w = b.random_constant("w", {2, 2, 1, 1}, 1);
  auto c1 = b.node("Conv", {x, w}, "c1", {1, 2, 4, 4});
  b.graph().nodes.back().name = "conv1";
  auto c2 = b.node("Conv", {c1, w}, "c2", {1, 2, 4, 4});
  b.graph().nodes.back().name = "conv2";
  auto s = b.node("Softmax", {c2}, "s", {1, 2, 4, 4}, {{"axis", attr_i(1)}});
  b.graph().nodes.back().name = "sm";
  b.output(s);
  return b.build();
}

TEST(PrecisionPlan, NodeNamesWinOverOpTypesAndDerivedNodesFollowTheirOrigin) {
  Graph g = two_conv_softmax();
  PrecisionSpec spec;
  spec.model = Precision::kInt8;
  spec.overrides = parse_overrides("conv1=fp16,Conv=bf16,Softmax=fp32");
  PrecisionPlan p = resolve_plan(g, spec);
  EXPECT_EQ(p.precision_of("conv1"), Precision::kFp16);  // name beats the later op-type key
  EXPECT_EQ(p.precision_of("conv2"), Precision::kBf16);
  EXPECT_EQ(p.precision_of("sm"), Precision::kFp32);
  // A lowered graph whose Softmax became sm_ReduceMax, ...: op-type keys find them via the original.
  Graph lowered = g;
  lowered.nodes.back().op_type = "ReduceMax";
  lowered.nodes.back().name = "sm_ReduceMax";
  PrecisionPlan q = resolve_plan(lowered, spec, &g);
  EXPECT_EQ(q.precision_of("sm_ReduceMax"), Precision::kFp32);
  spec.overrides = parse_overrides("convX=fp16");
  EXPECT_THROW(resolve_plan(g, spec), PrecisionError);
}

// int16 is a per-layer request for matrix layers: it resolves to the int8 datapath with int16 activations;
// a model-wide int16, or int16 on a node that is no matrix layer, is refused with the reason.
TEST(PrecisionPlan, Int16IsAPerLayerOptionForMatrixLayers) {
  Graph g = two_conv_softmax();
  PrecisionSpec spec;
  spec.model = Precision::kInt8;
  spec.overrides = parse_overrides("conv2=int16");
  EXPECT_EQ(spec.overrides[0].precision, Precision::kInt16);
  PrecisionPlan p = resolve_plan(g, spec);
  EXPECT_EQ(p.precision_of("conv2"), Precision::kInt8);
  EXPECT_TRUE(p.nodes.at("conv2").int16);
  EXPECT_EQ(p.reported_precision("conv2"), Precision::kInt16);
  EXPECT_FALSE(p.nodes.at("conv2").fell_back());
  EXPECT_FALSE(p.nodes.at("conv1").int16);
  spec.overrides = parse_overrides("Softmax=int16");
  try {
    resolve_plan(g, spec);
    ADD_FAILURE() << "int16 on a Softmax was accepted";
  } catch (const PrecisionError& e) {
    EXPECT_NE(std::string(e.what()).find("matrix layers"), std::string::npos) << e.what();
  }
  spec.overrides.clear();
  spec.model = Precision::kInt16;
  EXPECT_THROW(resolve_plan(g, spec), PrecisionError);
}

// The input of an int16 layer is quantized symmetric int16 over its min-max range (its int8 producer writes
// it in int16), and the layer's codes equal a plain integer reference with 64-bit sums.
TEST(Int8Reference, Int16InputLayerMatchesAPlainIntegerReference) {
  Graph g = two_conv_softmax();
  PrecisionSpec spec;
  spec.model = Precision::kInt8;
  spec.overrides = parse_overrides("conv2=int16");
  PrecisionPlan plan = resolve_plan(g, spec);
  auto samples = synthetic_samples(g, 4, 5);
  const auto stats = collect_statistics(g, samples);
  quantize_plan(g, plan, stats, QuantOptions{});
  ASSERT_TRUE(plan.nodes.at("conv2").int16) << plan.nodes.at("conv2").reason;
  const QParams xq = plan.values.at("c1");
  EXPECT_EQ(xq.dtype, isa::DType::kInt16);
  EXPECT_EQ(xq.zero_point, 0);
  const float amax = std::max(std::fabs(stats.at("c1").min()), std::fabs(stats.at("c1").max()));
  EXPECT_FLOAT_EQ(xq.scale, amax / 32767.0f);
  EXPECT_EQ(plan.values.at("x").dtype, isa::DType::kUint8);  // conv1's own input stays 8-bit
  const auto expected = expected_int8_tensors(g, plan, samples[0]);
  const LayerQuant& L = plan.layers.at("conv2");
  const QParams yq = plan.values.at("c2");
  const auto& x = expected.at("c1").codes;
  int mismatches = 0;
  for (int m = 0; m < 2; ++m)
    for (int p = 0; p < 16; ++p) {
      int64_t acc = L.bias[static_cast<size_t>(m)];
      for (int c = 0; c < 2; ++c)
        acc += int64_t{x[static_cast<size_t>(c * 16 + p)]} * L.weight_q[static_cast<size_t>(m * 2 + c)];
      const double real =
          static_cast<double>(acc) * xq.scale * L.weight_scale[static_cast<size_t>(m)] / yq.scale;
      const int64_t want = std::clamp<int64_t>(std::llround(real) + yq.zero_point, yq.qmin(), yq.qmax());
      // The integer multiplier rounds once more than the double: at most one code apart, rarely.
      mismatches += std::abs(expected.at("c2").codes[static_cast<size_t>(m * 16 + p)] - want) > 1;
    }
  EXPECT_EQ(mismatches, 0);
  // int16 inputs are finer: conv2's own output error is smaller than with int8 activations.
  PrecisionSpec int8_spec;
  int8_spec.model = Precision::kInt8;
  PrecisionPlan int8_plan = resolve_plan(g, int8_spec);
  quantize_plan(g, int8_plan, stats, QuantOptions{});
  EXPECT_GT(evaluate_accuracy(g, plan, samples).layers[1].sqnr_db,
            evaluate_accuracy(g, int8_plan, samples).layers[1].sqnr_db);
}

// ---- calibration ------------------------------------------------------------------------------

TensorStats gaussian_with_outliers(int n, int outliers, float outlier_value) {
  std::mt19937 rng(3);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  for (int k = 0; k < outliers; ++k) v[k * 97] = (k % 2 ? -1.0f : 1.0f) * outlier_value;
  TensorStats s;
  s.add(v.data(), v.size());
  return s;
}

// Calibration inputs are read by the one .npy reader (compiler/io/npy.h): integer codes stay integers,
// and a bad file is a CalibrationError naming it with the reader's own reason.
TEST(Calibration, NpyInputsGoThroughTheOneReader) {
  const std::string dir = ::testing::TempDir();
  NpyArray a;
  a.descr = "|i1";
  a.shape = {2, 3};
  a.data = {1, 2, 3, 0xff, 0xfe, 0x80};
  write_npy(dir + "/codes.npy", a);
  const Tensor t = read_npy_tensor(dir + "/codes.npy");
  // A calibration folder tells .npy files by their magic (compiler/io/npy.h), whatever their name.
  EXPECT_TRUE(is_npy_file(dir + "/codes.npy"));
  std::ofstream(dir + "/not_npy.npy") << "\x93NUMPz";  // closed at the end of the statement
  EXPECT_FALSE(is_npy_file(dir + "/not_npy.npy"));
  EXPECT_FALSE(is_npy_file(dir + "/missing.npy"));
  EXPECT_EQ(t.dtype, DataType::kInt8);
  EXPECT_EQ(t.shape, (Shape{2, 3}));
  EXPECT_EQ(t.to_int_vector(), (std::vector<int64_t>{1, 2, 3, -1, -2, -128}));
  a.descr = "<f4";
  a.data.resize(4);  // 1 of 6 floats
  std::vector<uint8_t> bytes = format_npy(a);
  {
    std::ofstream out(dir + "/short.npy", std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
  try {
    read_npy_tensor(dir + "/short.npy");
    ADD_FAILURE() << "a truncated .npy was read";
  } catch (const CalibrationError& e) {
    EXPECT_NE(std::string(e.what()).find("short.npy: .npy data is 4 bytes"), std::string::npos) << e.what();
  }
}

TEST(Calibration, ASoftmaxsConfidentProbabilitiesAreNotClippedByEntropyOrPercentile) {
  // 20000 classes, one confident class per input (p ~ 0.9), the rest spread over ~1e-10..1e-3: the
  // confident values are 1 in 20000 of the histogram, a tail entropy (max 1e-3 clipped) and percentile
  // (99.99 %) cut.
  // Clipping them would flatten exactly what the argmax reads; the plan takes min-max instead.
  GraphBuilder b;
  auto x = b.input("x", {1, 20000});
  b.output(b.node("Softmax", {x}, "y", {1, 20000}, {{"axis", attr_i(-1)}}));
  Graph g = b.build();
  std::vector<Sample> samples;
  std::mt19937 rng(3);
  std::normal_distribution<float> logits(0.0f, 2.5f);
  for (int k = 0; k < 16; ++k) {
    std::vector<float> v(20000);
    for (float& f : v) f = logits(rng);
    v[static_cast<size_t>(k * 997)] = 20.0f;
    samples.push_back({{"x", Tensor::from_floats({1, 20000}, v)}});
  }
  const auto stats = collect_statistics(g, samples);
  ASSERT_GT(stats.at("y").max(), 0.8f);
  for (CalibrationMethod m : {CalibrationMethod::kEntropy, CalibrationMethod::kPercentile}) {
    CalibrationOptions co;
    co.method = m;
    // Percentile really clips that tail for a value that is not a Softmax output (on a symmetric grid: on
    // an asymmetric one the never-negative tensor keeps what its least-error threshold keeps) ...
    if (m == CalibrationMethod::kPercentile) {
      EXPECT_LT(choose_range(stats.at("y"), co, true).hi, 0.5f);
    }
    // ... but not for the Softmax's output.
    PrecisionSpec spec;
    spec.model = Precision::kInt8;
    PrecisionPlan plan = resolve_plan(g, spec);
    QuantOptions qo;
    qo.calibration = co;
    quantize_plan(g, plan, stats, qo);
    const QParams& q = plan.values.at("y");
    EXPECT_GE(q.dequantize(q.qmax()), stats.at("y").max() * 0.999f) << to_string(m);
  }
}

TEST(Calibration, EntropyAndPercentileClipAGaussiansOutliersMinMaxKeepsThem) {
  const TensorStats s = gaussian_with_outliers(200000, 10, 40.0f);
  EXPECT_FLOAT_EQ(std::max(-s.min(), s.max()), 40.0f);
  CalibrationOptions o;
  o.method = CalibrationMethod::kMinMax;
  EXPECT_FLOAT_EQ(choose_range(s, o, true).hi, 40.0f);
  o.method = CalibrationMethod::kPercentile;
  o.percentile = 99.99;
  // 99.99 % of |N(0,1)| lies below ~3.9; the 10 outliers are 0.005 % of the data.
  const float p = choose_range(s, o, true).hi;
  EXPECT_GT(p, 3.0f);
  EXPECT_LT(p, 5.0f);
  o.method = CalibrationMethod::kEntropy;
  const float e = choose_range(s, o, true).hi;
  // KL keeps the bulk of the Gaussian (several sigma) and clips far below the outliers.
  EXPECT_GT(e, 2.0f);
  EXPECT_LT(e, 15.0f);
}

TEST(Calibration, PercentileClipsAOneSidedTensorNoMoreThanItsFinerGridWarrants) {
  // |N(0, 1)| (a ReLU-like tensor, never negative) on an asymmetric grid: 255 steps over [0, t]. Its
  // expected squared error 2((1 + t^2) Q(t) - t phi(t)) + (1 - 2 Q(t)) (t / 255)^2 / 12 is smallest at
  // t = 4.21 (numerical minimisation of that formula), above the 99.99th percentile, 3.89: the range
  // keeps that much more of the tail.
  std::mt19937 rng(5);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(2000000);
  for (auto& x : v) x = std::fabs(d(rng));
  TensorStats half;
  half.add(v.data(), v.size());
  CalibrationOptions o;
  ASSERT_EQ(o.method, CalibrationMethod::kPercentile);
  const ClipRange r = choose_range(half, o, false);
  EXPECT_GT(r.hi, 4.05f);
  EXPECT_LT(r.hi, 4.4f);
  EXPECT_EQ(r.lo, 0.0f);
  // The symmetric grid and a two-sided tensor keep the percentile's 3.89.
  EXPECT_LT(choose_range(half, o, true).hi, 3.95f);
  const ClipRange g = choose_range(gaussian_with_outliers(200000, 0, 0.0f), o, false);
  EXPECT_GT(g.hi, 3.5f);
  EXPECT_LT(g.hi, 3.95f);
  // Where the least-error threshold lies below the percentile's (uniform on [0, 1): 0.998, against the
  // percentile's 0.9999), the percentile's stands: the rule only ever clips less.
  std::vector<float> u(100000);
  for (size_t k = 0; k < u.size(); ++k) u[k] = (k + 0.5f) / u.size();
  TensorStats flat;
  flat.add(u.data(), u.size());
  EXPECT_FLOAT_EQ(choose_range(flat, o, false).hi,
                  static_cast<float>(std::min<double>(
                      flat.max(), percentile_threshold(flat.positive_histogram(), flat.bin_width(), 99.99))));
}

TEST(Calibration, MseClipsAGaussianWhereClippingAndRoundingNoiseBalanceButKeepsCostlyOutliers) {
  // For N(0, 1) quantized symmetrically with 127 steps a side, the expected squared error
  // 2((1 + a^2) Q(a) - a phi(a)) + (1 - 2 Q(a)) (a / 127)^2 / 12 is smallest at a = 3.92 (numerical
  // minimisation of that formula).
  CalibrationOptions o;
  o.method = CalibrationMethod::kMse;
  const TensorStats s = gaussian_with_outliers(200000, 0, 0.0f);
  const float t = choose_range(s, o, true).hi;
  EXPECT_GT(t, 3.4f);
  EXPECT_LT(t, 4.5f);
  // Asymmetric: each side of the same Gaussian settles near the same threshold (255 steps in all).
  const ClipRange r = choose_range(s, o, false);
  EXPECT_GT(r.hi, 3.4f);
  EXPECT_LT(r.hi, 4.5f);
  EXPECT_LT(r.lo, -3.4f);
  EXPECT_GT(r.lo, -4.5f);
  // Ten values at +-40 among 200 000: clipping them at 4 costs 10 x 36^2 = 12 960, more than the
  // rounding noise of the whole range, 200 000 x (40 / 127)^2 / 12 = 1 653 -- unlike percentile and
  // entropy, MSE keeps (nearly all of) them.
  const float w = choose_range(gaussian_with_outliers(200000, 10, 40.0f), o, true).hi;
  EXPECT_GT(w, 30.0f);
}

TEST(Calibration, MseKeepsNearlyAllOfAUniformDistributionAndCountsClippingExactly) {
  // Uniform on [0, 1) with density n: clipping at t costs n (1 - t)^3 / 3, rounding n t (t / 127)^2 / 12;
  // the derivative vanishes at 1 - t = t sqrt(3 / 193548), t = 0.99608: the edge 2040/2048.
  std::vector<double> uniform(2048, 1.0);
  EXPECT_DOUBLE_EQ(mse_threshold(uniform, 1.0 / 2048, 127), 2040.0 / 2048);
  // N values at 0.5 (bin 0's centre) and one at 100.5 (bin 100's). For a threshold t <= 100 the error is
  // (100.5 - t)^2 + N (t / 127)^2 / 12 (no value is below half a step), smallest at
  // t = 100.5 / (1 + N / 193548): N = 1000 -> 99.98, so the edge 100 (0.25 + 51.67 = 51.92, against
  // 52.76 for keeping all at 101 and 52.90 at 99); N = 10^6 -> 16.3, so 16 (8462.9, 17: 8465.4).
  std::vector<double> h(101, 0.0);
  h[0] = 1000;
  h[100] = 1;
  EXPECT_DOUBLE_EQ(mse_threshold(h, 1.0, 127), 100.0);
  h[0] = 1e6;
  EXPECT_DOUBLE_EQ(mse_threshold(h, 1.0, 127), 16.0);
  EXPECT_DOUBLE_EQ(mse_threshold(std::vector<double>(8, 0.0), 1.0, 127), 0.0);
}

TEST(Calibration, EntropyKeepsTheFullRangeOfAUniformDistribution) {
  std::vector<float> v(100000);
  for (size_t k = 0; k < v.size(); ++k) v[k] = -1.0f + 2.0f * (k + 0.5f) / v.size();
  TensorStats s;
  s.add(v.data(), v.size());
  CalibrationOptions o;
  const float e = choose_range(s, o, true).hi;
  EXPECT_GT(e, 0.9f);
  EXPECT_LE(e, 1.0f);
}

TEST(Calibration, EntropyDoesNotFoldADistributionFarFromZeroIntoOneLevel) {
  // A global average pool's output: every value in [0.5, 1.5], nothing near zero. Plain KL picks a
  // threshold below almost all of it (folding the tail into the last bin leaves P ~ one spike that Q
  // reproduces exactly, KL ~ 0), which crushed random-weight ResNet-18 to 4 dB output SQNR.
  std::vector<float> v(20000);
  uint32_t seed = 12345;
  for (float& x : v) {
    seed = seed * 1664525u + 1013904223u;
    x = 0.5f + static_cast<float>(seed >> 8) / static_cast<float>(1u << 24);
  }
  TensorStats s;
  s.add(v.data(), v.size());
  CalibrationOptions o;
  const ClipRange r = choose_range(s, o, false);
  size_t clipped = 0;
  for (float x : v) clipped += x > r.hi;
  EXPECT_LE(clipped, static_cast<size_t>(o.entropy_max_clipped * static_cast<double>(v.size())) + 1);
  EXPECT_GT(r.hi, 1.45f);
  // The guard is what keeps it: without it the same histogram clips most of the values.
  const double unguarded = entropy_threshold(s.magnitude_histogram(), s.bin_width(), 255, 1.0);
  EXPECT_LT(unguarded, 1.0);
}

TEST(Calibration, HistogramRangeDoublesWhenALaterBatchIsWider) {
  TensorStats s(16);
  std::vector<float> a = {0.5f, 1.0f}, b = {3.5f};
  s.add(a.data(), a.size());
  s.add(b.data(), b.size());
  EXPECT_GE(s.bin_width() * s.bins(), 3.5);
  double total = 0;
  for (double c : s.positive_histogram()) total += c;
  EXPECT_EQ(total, 3.0);
}

TEST(QParams, AsymmetricAndSymmetricFromRange) {
  // [-1, 3] as uint8: scale 4/255, zero point 0 - round(-1 / (4/255)) = round(63.75) = 64.
  QParams a = qparams_for_range({-1.0f, 3.0f}, false, isa::DType::kUint8);
  EXPECT_FLOAT_EQ(a.scale, 4.0f / 255.0f);
  EXPECT_EQ(a.zero_point, 64);
  EXPECT_EQ(a.quantize(0.0f), 64);
  EXPECT_EQ(a.quantize(100.0f), 255);
  QParams s = qparams_for_range({-2.0f, 1.0f}, true, isa::DType::kUint8);
  EXPECT_EQ(s.dtype, isa::DType::kInt8);
  EXPECT_FLOAT_EQ(s.scale, 2.0f / 127.0f);
  EXPECT_EQ(s.zero_point, 0);
  EXPECT_EQ(s.quantize(-2.0f), -127);
  // Ties round to even, as ONNX QuantizeLinear.
  QParams one{1.0f, 0, isa::DType::kInt8};
  EXPECT_EQ(one.quantize(2.5f), 2);
  EXPECT_EQ(one.quantize(3.5f), 4);
}

TEST(Weights, PerChannelScalesFollowEachChannelsMax) {
  Tensor w = Tensor::from_floats({2, 2}, {1.0f, -0.5f, 0.01f, 0.02f});
  auto pc = quantize_weights(w, 0, true);
  EXPECT_FLOAT_EQ(pc.scale[0], 1.0f / 127.0f);
  EXPECT_FLOAT_EQ(pc.scale[1], 0.02f / 127.0f);
  EXPECT_EQ(pc.q[0], 127);
  EXPECT_EQ(pc.q[1], -64);  // -63.5 rounds to even
  EXPECT_EQ(pc.q[3], 127);
  auto pt = quantize_weights(w, 0, false);
  EXPECT_EQ(pt.q[2], 1);  // 0.01 * 127 = 1.27: the small channel keeps 1-2 levels per tensor
  EXPECT_EQ(pt.q[3], 3);  // 2.54 -> 3
}

TEST(Weights, MseRangeClipsALoneOutlierWhenTheRestRoundsFinerForItAndKeepsAUniformRange) {
  // Channel 0: 16 383 evenly spaced values on [-1, 1] and one at 1.1. Min-max: step 1.1 / 127, rounding
  // noise 16 384 x step^2 / 12 = 0.102; clipping near 1.0 costs the outlier (0.1)^2 = 0.01 and leaves
  // 0.085 of rounding noise: the mse range is below max |w| and its error lower. Channel 1: the evenly
  // spaced values alone, where clipping only adds error: the whole range.
  constexpr int kN = 16384;
  std::vector<float> v;
  for (int k = 0; k < kN - 1; ++k) v.push_back(-1.0f + 2.0f * static_cast<float>(k) / (kN - 2));
  v.push_back(1.1f);
  for (int k = 0; k < kN; ++k) v.push_back(-1.0f + 2.0f * static_cast<float>(k) / (kN - 1));
  const Tensor w = Tensor::from_floats({2, kN}, v);
  const auto mm = quantize_weights(w, 0, true);
  const auto mse = quantize_weights(w, 0, true, WeightRange::kMse);
  auto error = [&](const QuantizedWeights& q, int c) {
    double e = 0;
    for (int k = 0; k < kN; ++k) {
      const double d = v[c * kN + k] - q.q[c * kN + k] * static_cast<double>(q.scale[c]);
      e += d * d;
    }
    return e;
  };
  EXPECT_LT(mse.scale[0], 0.97f * mm.scale[0]);
  EXPECT_GT(mse.scale[0], 0.85f * mm.scale[0]);
  EXPECT_LT(error(mse, 0), 0.95 * error(mm, 0));
  EXPECT_FLOAT_EQ(mse.scale[1], mm.scale[1]);  // a uniform channel: clipping only adds error
  EXPECT_EQ(parse_weight_range("output-mse"), WeightRange::kOutputMse);
  EXPECT_THROW(parse_weight_range("kl"), std::invalid_argument);
}

TEST(Weights, OutputMseRangeWeighsEachWeightByItsInputsStatistics) {
  // Two weights per output channel, the second near max |w|: its rounding error matters only if its
  // input varies. With the first input constant at 0 (mean 0, variance 0) every clip is equally good for
  // it, and the choice is the largest range that rounds the second weight best; with the second input
  // constant at 0 instead, only the first weight counts and the clip is the one that rounds it best.
  const Tensor w = Tensor::from_floats({1, 2}, {0.3f, 1.0f});
  const auto keep = quantize_weights(w, 0, true, WeightRange::kOutputMse, {0.0, 0.0}, {0.0, 1.0});
  EXPECT_FLOAT_EQ(keep.scale[0], 1.0f / 127.0f);  // 1.0 is exact on the full range
  const auto first = quantize_weights(w, 0, true, WeightRange::kOutputMse, {0.0, 0.0}, {1.0, 0.0});
  const double d = 0.3 - first.q[0] * static_cast<double>(first.scale[0]);
  const double d_full = 0.3 - std::nearbyint(0.3 * 127.0) / 127.0;
  EXPECT_LE(std::fabs(d), std::fabs(d_full));
  EXPECT_LT(first.scale[0], 1.0f / 127.0f);  // the second weight clips: it multiplies a constant 0
  // Constant inputs 1, 1 (variance 0) under the two smaller of three weights: the objective is their
  // output's mean shift (d_0 + d_1)^2, which the clip search drives below min-max's (ignoring the mean
  // term, every clip would score 0 and min-max's range would stay).
  const Tensor w3 = Tensor::from_floats({1, 3}, {0.3f, 0.5f, 1.0f});
  const auto shift = quantize_weights(w3, 0, true, WeightRange::kOutputMse, {1.0, 1.0, 0.0}, {0.0, 0.0, 0.0});
  auto mean_shift = [&](const QuantizedWeights& q) {
    return std::fabs(0.3 + 0.5 - (q.q[0] + q.q[1]) * static_cast<double>(q.scale[0]));
  };
  EXPECT_LT(mean_shift(shift), mean_shift(quantize_weights(w3, 0, true)));
}

TEST(Weights, InputChannelOfEachWeightElementForConvGroupsAndGemm) {
  Node conv;
  conv.op_type = "Conv";
  // Grouped conv: 4 outputs, 2 groups, 2 input channels per group, 1x1 kernel -> 4 input channels.
  const Tensor wc = Tensor::from_floats({4, 2, 1, 1}, std::vector<float>(8, 1.0f));
  EXPECT_EQ(weight_input_channels(conv, wc, 0, 4), (std::vector<int64_t>{0, 1, 0, 1, 2, 3, 2, 3}));
  EXPECT_TRUE(weight_input_channels(conv, wc, 0, 3).empty());
  Node gemm;
  gemm.op_type = "Gemm";
  const Tensor wg = Tensor::from_floats({2, 3}, std::vector<float>(6, 1.0f));  // transB: [N, K]
  EXPECT_EQ(weight_input_channels(gemm, wg, 0, 3), (std::vector<int64_t>{0, 1, 2, 0, 1, 2}));
  Node mm;
  mm.op_type = "MatMul";  // [K, N]
  EXPECT_EQ(weight_input_channels(mm, wg, 1, 2), (std::vector<int64_t>{0, 0, 0, 1, 1, 1}));
}

// ---- the int8 reference -----------------------------------------------------------------------

TEST(Int8Reference, ConvLayerMatchesAPlainIntegerReference) {
  GraphBuilder b;
  auto x = b.input("x", {1, 3, 6, 6});
  auto w = b.random_constant("w", {4, 3, 3, 3}, 11);
  auto bias = b.random_constant("b", {4}, 12, -0.3f, 0.3f);
  auto y = b.node("Conv", {x, w, bias}, "y", {1, 4, 3, 3},
                  {{"pads", attr_ints({1, 1, 1, 1})}, {"strides", attr_ints({2, 2})}});
  b.graph().nodes.back().name = "conv";
  b.output(y);
  Graph g = b.build();
  PrecisionSpec spec;
  spec.model = Precision::kInt8;
  PrecisionPlan plan = resolve_plan(g, spec);
  auto samples = synthetic_samples(g, 4, 5);
  quantize_plan(g, plan, collect_statistics(g, samples), QuantOptions{});
  auto expected = expected_int8_tensors(g, plan, samples[0]);
  ASSERT_TRUE(expected.count("y"));
  // Independent reference: integer loops, double-precision requantization, round half away from zero.
  const QParams xq = plan.values.at("x"), yq = plan.values.at("y");
  const LayerQuant& L = plan.layers.at("conv");
  const Tensor& xs = samples[0].at("x");
  const Tensor& wf = *g.value("w").constant;
  const Tensor& bf = *g.value("b").constant;
  int mismatches = 0;
  for (int m = 0; m < 4; ++m) {
    // Weights per channel from first principles: scale max|w| / 127.
    float amax = 0;
    for (int k = 0; k < 27; ++k) amax = std::max(amax, std::fabs(wf.f[m * 27 + k]));
    const float sw = amax / 127.0f;
    ASSERT_FLOAT_EQ(L.weight_scale[m], sw);
    const double acc_scale = static_cast<double>(xq.scale * sw);
    const int64_t bq = std::llround(bf.f[m] / (xq.scale * sw));
    for (int oy = 0; oy < 3; ++oy)
      for (int ox = 0; ox < 3; ++ox) {
        int64_t acc = bq;
        for (int c = 0; c < 3; ++c)
          for (int i = 0; i < 3; ++i)
            for (int j = 0; j < 3; ++j) {
              const int iy = oy * 2 - 1 + i, ix = ox * 2 - 1 + j;
              if (iy < 0 || iy >= 6 || ix < 0 || ix >= 6) continue;
              const int32_t xcode = xq.quantize(xs.f[(c * 6 + iy) * 6 + ix]);
              const int64_t wcode = std::lrint(wf.f[((m * 3 + c) * 3 + i) * 3 + j] / sw);
              acc += (xcode - xq.zero_point) * wcode;
            }
        const double real = static_cast<double>(acc) * acc_scale / yq.scale;
        const int64_t want = std::clamp<int64_t>(std::llround(real) + yq.zero_point, yq.qmin(), yq.qmax());
        if (expected.at("y").codes[(m * 3 + oy) * 3 + ox] != want) ++mismatches;
      }
  }
  EXPECT_EQ(mismatches, 0);
}

TEST(Int8Reference, Fp32PlanIsExactAndFp16IsCloserThanInt8) {
  Graph g = two_conv_softmax();
  auto samples = synthetic_samples(g, 4, 9);
  auto run = [&](Precision p) {
    PrecisionSpec spec;
    spec.model = p;
    PrecisionPlan plan = resolve_plan(g, spec);
    if (p == Precision::kInt8) quantize_plan(g, plan, collect_statistics(g, samples), QuantOptions{});
    return evaluate_accuracy(g, plan, {samples[0], samples[1]});
  };
  const auto f32 = run(Precision::kFp32), f16 = run(Precision::kFp16), i8 = run(Precision::kInt8);
  EXPECT_EQ(f32.output_sqnr_db, kExactSqnrDb);
  EXPECT_GT(f16.output_sqnr_db, 50.0);
  EXPECT_LT(f16.output_sqnr_db, kExactSqnrDb);
  EXPECT_GT(f16.output_sqnr_db, i8.output_sqnr_db);
  EXPECT_GT(i8.output_sqnr_db, 15.0);
  EXPECT_EQ(i8.layers.size(), 3u);
}

// A three-conv chain with ReLU fused into each conv (npu.activation, as the passes leave it);
// `outlier` multiplies one weight of conv2 by 300.
Graph conv_chain(bool outlier) {
  GraphBuilder b;
  auto x = b.input("x", {1, 8, 8, 8});
  std::string v = x;
  for (int k = 1; k <= 3; ++k) {
    auto w = b.random_constant("w" + std::to_string(k), {8, 8, 3, 3}, 20 + k, -0.2f, 0.2f);
    v = b.node("Conv", {v, w}, "c" + std::to_string(k), {1, 8, 8, 8},
               {{"pads", attr_ints({1, 1, 1, 1})}, {kActivation, testing::attr_s("Relu")}});
    b.graph().nodes.back().name = "conv" + std::to_string(k);
  }
  b.output(v);
  Graph g = b.build();
  if (outlier) {
    Tensor w2 = *g.value("w2").constant;
    w2.f[5 * 72 + 7] *= 300.0f;  // output channel 5
    g.add_constant("w2", w2);
  }
  return g;
}

TEST(BiasCorrection, WeightRoundingShiftIsTheRoundingErrorTimesTheInputChannelMeansByHand) {
  // Grouped Conv (2 groups, 1 input channel each), W = [2, 1, 1, 2]; codes chosen so that channel 0's
  // second weight is off by -0.25 (code -1 x 0.5 = -0.5 for -0.25) and channel 1's second by -0.25
  // (2 x 0.25 = 0.5 for 0.75). Means per input channel {2, -4}: shifts {-0.25 x 2, -0.25 x -4}.
  Node conv;
  conv.op_type = "Conv";
  const Tensor w = Tensor::from_floats({2, 1, 1, 2}, {0.5f, -0.25f, 1.0f, 0.75f});
  QuantizedWeights q{{1, -1, 4, 2}, {0.5f, 0.25f}};
  EXPECT_EQ(weight_rounding_shift(conv, w, q, 0, {2.0, -4.0}), (std::vector<double>{-0.5, 1.0}));
  // With the input's shape, a tap that reads padding for some outputs counts only where it reads inside:
  // W = [1, 1, 1, 3] on a 1x3 row with pads 1 left and right, all three codes off by +0.5 (code 1 x 1 for
  // 0.5), mean 1: the outer taps read inside for 2 of 3 outputs, so 0.5 x (2/3 + 1 + 2/3).
  Node padded;
  padded.op_type = "Conv";
  padded.attrs["pads"] = attr_ints({0, 1, 0, 1});
  const std::vector<double> edge =
      weight_rounding_shift(padded, Tensor::from_floats({1, 1, 1, 3}, {0.5f, 0.5f, 0.5f}),
                            QuantizedWeights{{1, 1, 1}, {1.0f}}, 0, {1.0}, Shape{1, 1, 1, 3});
  ASSERT_EQ(edge.size(), 1u);
  EXPECT_NEAR(edge[0], 0.5 * (2.0 / 3 + 1 + 2.0 / 3), 1e-12);
  // The means must cover the input channels: 3 channels cannot be split into groups of 1 for 2 outputs.
  EXPECT_TRUE(weight_rounding_shift(conv, w, q, 0, {1.0, 1.0, 1.0}).empty());
  // MatMul B = [K = 2, N = 2] (channels last): column 1's errors {0, -0.25} meet means {2, -4}.
  Node mm;
  mm.op_type = "MatMul";
  EXPECT_EQ(weight_rounding_shift(mm, Tensor::from_floats({2, 2}, {0.5f, 1.0f, -0.25f, 0.75f}),
                                  QuantizedWeights{{1, 4, 0, 3}, {0.5f, 0.25f}}, 1, {2.0, -4.0}),
            (std::vector<double>{0.25 * -4.0, 0.0}));
  // Gemm with transB, B = [N = 2, K = 2], the Conv's numbers: now both outputs read both inputs, and
  // each row's error (-0.25 on its second weight) meets the second input's mean: {1, 1}.
  Node gemm;
  gemm.op_type = "Gemm";
  EXPECT_EQ(weight_rounding_shift(gemm, Tensor::from_floats({2, 2}, {0.5f, -0.25f, 1.0f, 0.75f}), q, 0,
                                  {2.0, -4.0}),
            (std::vector<double>{1.0, 1.0}));
}

// One MatMul [1, 64] x [64, 8] with random weights, and 3 + N(0, 1) inputs (their magnitudes if
// `nonnegative`): the bias correction tests' layer.
Graph one_matmul() {
  GraphBuilder b;
  auto x = b.input("x", {1, 64});
  b.output(b.node("MatMul", {x, b.random_constant("w", {64, 8}, 5)}, "y", {1, 8}));
  return b.build();
}

// g's int8 plan, every layer int8, per-tensor weights, bias correction `correct`.
PrecisionPlan per_tensor_plan(const Graph& g, const std::map<std::string, TensorStats>& stats,
                              BiasCorrection correct, bool empirical = false) {
  PrecisionSpec spec;
  spec.model = Precision::kInt8;
  PrecisionPlan plan = resolve_plan(g, spec);
  QuantOptions qo;
  qo.per_channel = false;
  qo.bias_correction = correct;
  qo.empirical_bias_correction = empirical;
  qo.calibration.method = CalibrationMethod::kMinMax;
  quantize_plan(g, plan, stats, qo);
  return plan;
}

std::vector<Sample> shifted_inputs(int count, bool nonnegative) {
  std::mt19937 rng(9);
  std::normal_distribution<float> d(3.0f, 1.0f);
  std::vector<Sample> samples;
  for (int k = 0; k < count; ++k) {
    std::vector<float> v(64);
    for (float& f : v) f = nonnegative ? std::fabs(d(rng)) : d(rng);
    samples.push_back({{"x", Tensor::from_floats({1, 64}, v)}});
  }
  return samples;
}

TEST(BiasCorrection, RemovesTheOutputMeanShiftOfRoundedWeightsOnInputsWithANonzeroMean) {
  // One MatMul, per-tensor weights (coarse: the rounding errors are large), inputs 3 + N(0, 1): without
  // correction each output channel's int8 mean is off by about sum_k err[k][c] x 3. Those inputs dip below
  // zero, so kNonNegativeInputs leaves them alone; |3 + N(0, 1)| it corrects.
  const Graph g = one_matmul();
  auto mean_shift = [&](BiasCorrection correct, bool nonnegative) {
    const std::vector<Sample> samples = shifted_inputs(64, nonnegative);
    const auto stats = collect_statistics(g, samples);
    EXPECT_EQ(stats.at("x").last_dim_means().size(), 64u);
    EXPECT_EQ(stats.at("x").min() >= 0, nonnegative);
    const PrecisionPlan plan = per_tensor_plan(g, stats, correct);
    std::vector<double> diff(8, 0.0);
    for (const Sample& s : samples) {
      const Tensor q = emulate(g, plan, s).at("y");
      const Tensor f = emulate(g, PrecisionPlan{}, s).at("y");
      for (int c = 0; c < 8; ++c) diff[c] += (q.f[c] - f.f[c]) / samples.size();
    }
    double total = 0;
    for (double v : diff) total += std::fabs(v);
    return total;
  };
  for (bool nonnegative : {false, true}) {
    const double without = mean_shift(BiasCorrection::kNone, nonnegative);
    const double with = mean_shift(BiasCorrection::kAll, nonnegative);
    EXPECT_LT(with, 0.5 * without) << "mean |shift| per channel summed: " << with << " vs " << without;
    const double restricted = mean_shift(BiasCorrection::kNonNegativeInputs, nonnegative);
    if (nonnegative)
      EXPECT_EQ(restricted, with);
    else
      EXPECT_EQ(restricted, without);
  }
  // The default corrects the layers with non-negative inputs (docs/quantization.md, "Bias correction as the
  // default, measured").
  EXPECT_EQ(QuantOptions{}.bias_correction, BiasCorrection::kNonNegativeInputs);
}

TEST(BiasCorrection, EmpiricalCorrectionSupersedesTheAnalyticOne) {
  // Empirical bias correction measures the whole mean shift, the weights' rounding included: with it,
  // build_layer applies no analytic correction, whatever bias_correction says, so the two are not stacked.
  const Graph g = one_matmul();
  const auto stats = collect_statistics(g, shifted_inputs(16, true));
  auto bias_of = [&](BiasCorrection correct, bool empirical) {
    return per_tensor_plan(g, stats, correct, empirical).layers.begin()->second.bias;
  };
  const auto none = bias_of(BiasCorrection::kNone, false);
  EXPECT_NE(bias_of(BiasCorrection::kNonNegativeInputs, false), none);  // the input is >= 0: corrected
  EXPECT_EQ(bias_of(BiasCorrection::kNonNegativeInputs, true), none);
  EXPECT_EQ(bias_of(BiasCorrection::kAll, true), none);
  QuantOptions qo;
  EXPECT_EQ(bias_correction_name(qo), "nonnegative-inputs");
  qo.empirical_bias_correction = true;
  EXPECT_EQ(effective_bias_correction(qo), BiasCorrection::kNone);
  EXPECT_EQ(bias_correction_name(qo), "empirical");
}

TEST(BiasCorrection, EmpiricalCorrectionCentresEachLayersOutputOnFp32sWithTheLayersAboveCorrectedFirst) {
  // Three Convs with a ReLU on the middle one, per-tensor weights, inputs 3 + N(0, 1): rounded weights and
  // the coarse activations shift each channel's mean, and the shift of conv1 reaches conv2 and conv3. After
  // correct_output_bias every layer's mean error per channel (ReLU: over the values both runs leave above
  // zero) is within half an accumulator unit plus the output codes' rounding of fp32's, on the same inputs;
  // the weights are untouched. (Layer by layer because a layer's measured error includes the shift of the
  // layers above, which their own corrections remove.)
  GraphBuilder b;
  auto x = b.input("x", {1, 4, 6, 6});
  auto c1 = b.node("Conv", {x, b.random_constant("w1", {8, 4, 1, 1}, 31)}, "c1", {1, 8, 6, 6});
  b.graph().nodes.back().name = "conv1";
  auto c2 = b.node("Conv", {c1, b.random_constant("w2", {8, 8, 1, 1}, 32)}, "c2", {1, 8, 6, 6},
                   {{kActivation, testing::attr_s("Relu")}});
  b.graph().nodes.back().name = "conv2";
  auto c3 = b.node("Conv", {c2, b.random_constant("w3", {8, 8, 1, 1}, 33)}, "c3", {1, 8, 6, 6});
  b.graph().nodes.back().name = "conv3";
  b.output(c3);
  const Graph g = b.build();
  std::mt19937 rng(7);
  std::normal_distribution<float> d(3.0f, 1.0f);
  std::vector<Sample> samples;
  for (int k = 0; k < 16; ++k) {
    std::vector<float> v(4 * 36);
    for (float& f : v) f = d(rng);
    samples.push_back({{"x", Tensor::from_floats({1, 4, 6, 6}, v)}});
  }
  PrecisionSpec spec;
  spec.model = Precision::kInt8;
  PrecisionPlan plan = resolve_plan(g, spec);
  QuantOptions qo;
  qo.per_channel = false;
  quantize_plan(g, plan, collect_statistics(g, samples), qo);
  // Mean error per channel of every layer's output (ReLU: on its linear piece), summed over channels.
  auto mean_errors = [&](const PrecisionPlan& p) {
    std::map<std::string, Tensor> ref;
    std::map<std::string, std::vector<double>> sum, count;
    for (const Sample& s : samples) {
      emulate(g, PrecisionPlan{}, s,
              [&](const Node& n, const std::vector<const Tensor*>& o) { ref[n.name] = *o[0]; });
      emulate(g, p, s, [&](const Node& n, const std::vector<const Tensor*>& o) {
        auto& ds = sum[n.name];
        auto& dc = count[n.name];
        ds.resize(8, 0.0);
        dc.resize(8, 0.0);
        for (size_t e = 0; e < o[0]->f.size(); ++e) {
          const double q = o[0]->f[e], r = ref.at(n.name).f[e];
          if (n.name == "conv2" && !(q > 0 && r > 0)) continue;
          ds[e / 36] += q - r;
          dc[e / 36] += 1;
        }
      });
    }
    std::map<std::string, double> out;
    for (const auto& [name, ds] : sum)
      for (size_t c = 0; c < 8; ++c) out[name] += count[name][c] ? std::fabs(ds[c] / count[name][c]) : 0.0;
    return out;
  };
  const auto before = mean_errors(plan);
  const std::vector<int8_t> weights = plan.layers.at("conv2").weight_q;
  PrecisionPlan corrected = plan;
  EXPECT_EQ(correct_output_bias(g, corrected, samples), 3);
  EXPECT_EQ(corrected.layers.at("conv2").weight_q, weights);
  const auto after = mean_errors(corrected);
  for (const char* layer : {"conv1", "conv2", "conv3"}) {
    const LayerQuant& L = corrected.layers.at(layer);
    // Half an accumulator unit (the bias is an integer) plus half an output step, per channel.
    const double bound = 8 * (0.5 * L.acc_scale[0] + 0.5 * corrected.values.at(L.output).scale);
    EXPECT_LT(after.at(layer), bound)
        << layer << ": " << after.at(layer) << " (before " << before.at(layer) << ")";
    EXPECT_LT(after.at(layer), before.at(layer)) << layer;
  }
}

TEST(RangeSearch, KeepsAnOutlierThePercentileClipsWhenTheModelsOutputPaysForIt) {
  // x (2 channels: uniform in [-1, 1], and zeros but for one 1 per sample) -> Conv 1x1 (w = [1, 49]) -> y,
  // the graph output: y's 40 000 values are uniform in [-1, 1] but one at +50, 0.005 % of its positive ones,
  // so the 99.99 % percentile clips y near 1, which costs the output (50 - 1)^2 ~ 2400 per sample, where a
  // range that keeps the outlier ([-1, ~50] in 255 steps) costs about 40 000 x 0.2^2 / 12 ~ 130. Both carry
  // the weight 1's rounding on the channel's 49 / 127 grid (3 steps = 1.157: about 40 000 x 0.157^2 / 3 ~
  // 330). So on the model's error the search widens y's range to keep the outlier, the scored error falls
  // about 2900 -> 460 per sample, the same on every sample (the noise rule passes), and the plan with the
  // chosen range has the lower output error on other samples too (signal ~40 000 / 3 + 2500 per sample: 10
  // log10(15 800 / 2900) = 7.4 dB before, 10 log10(15 800 / 460) = 15.4 dB after).
  GraphBuilder b;
  auto x = b.input("x", {1, 2, 200, 200});
  auto y = b.node("Conv", {x, b.constant("w", Tensor::from_floats({1, 2, 1, 1}, {1.0f, 49.0f}))}, "y",
                  {1, 1, 200, 200});
  b.output(y);
  const Graph g = b.build();
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  auto make = [&](int n) {
    std::vector<Sample> out;
    for (int k = 0; k < n; ++k) {
      std::vector<float> v(80000, 0.0f);
      for (size_t i = 0; i < 40000; ++i) v[i] = u(rng);
      v[40000 + static_cast<size_t>(k * 997 % 40000)] = 1.0f;
      out.push_back({{"x", Tensor::from_floats({1, 2, 200, 200}, v)}});
    }
    return out;
  };
  const std::vector<Sample> calibration = make(8), evaluation = make(4);
  PrecisionSpec spec;
  spec.model = Precision::kInt8;
  const PrecisionPlan unquantized = resolve_plan(g, spec);
  const auto stats = collect_statistics(g, calibration);
  QuantOptions qo;
  ASSERT_LT(choose_range(stats.at(y), qo.calibration, false).hi, 2.0f);  // the percentile clips the outlier
  const RangeSearch rs = search_ranges(g, unquantized, stats, qo, {}, calibration);
  ASSERT_TRUE(rs.ranges.count(y));
  EXPECT_GE(rs.ranges.at(y).hi, 45.0f);
  EXPECT_LT(rs.chosen_error, rs.default_error / 4);
  PrecisionPlan before = unquantized, after = unquantized;
  quantize_plan(g, before, stats, qo);
  qo.range_overrides = rs.ranges;
  quantize_plan(g, after, stats, qo);
  const auto refs = fp32_outputs(g, evaluation);
  EXPECT_GT(output_sqnr(g, after, evaluation, refs).overall,
            output_sqnr(g, before, evaluation, refs).overall + 6);
}

TEST(AccuracyReport, InjectedOutlierWeightIsFlaggedByTheOutlierTableAndFirstBadLayer) {
  for (bool outlier : {false, true}) {
    Graph g = conv_chain(outlier);
    PrecisionSpec spec;
    spec.model = Precision::kInt8;
    PrecisionPlan plan = resolve_plan(g, spec);
    QuantOptions qo;
    qo.per_channel = false;  // per-tensor: the outlier channel sets every channel's scale
    qo.calibration.method = CalibrationMethod::kMinMax;
    // The crushed channels' rounding error itself, not what bias correction leaves of its mean.
    qo.bias_correction = BiasCorrection::kNone;
    auto samples = synthetic_samples(g, 4, 1);
    quantize_plan(g, plan, collect_statistics(g, samples), qo);
    auto r = evaluate_accuracy(g, plan, {samples[0]});
    if (!outlier) {
      EXPECT_TRUE(r.weight_outliers.empty());
      EXPECT_EQ(r.first_bad_layer, "");
      continue;
    }
    ASSERT_FALSE(r.weight_outliers.empty());
    EXPECT_EQ(r.weight_outliers[0].layer, "conv2");
    EXPECT_EQ(r.weight_outliers[0].channel, 5);
    EXPECT_GT(r.weight_outliers[0].factor, 8.0);
    EXPECT_EQ(r.first_bad_layer, "conv2");
    const std::string json = accuracy_json(r);
    EXPECT_NE(json.find("\"first_bad_layer\": \"conv2\""), std::string::npos);
  }
}

// Each quantized layer's own error (alone, on the fp32 reference's inputs) next to what it has in the
// quantized run. conv1 reads the graph input, so the two are the same figure; conv2's outlier channel
// crushes its other channels, and conv3 inherits that: its error in the run is well below its own. An
// fp32 layer adds nothing and has no own figure.
TEST(AccuracyReport, OwnErrorSeparatesWhatALayerAddsFromWhatItInherits) {
  Graph g = conv_chain(true);
  PrecisionSpec spec;
  spec.model = Precision::kInt8;
  spec.overrides = parse_overrides("conv1=fp32");
  PrecisionPlan plan = resolve_plan(g, spec);
  QuantOptions qo;
  qo.per_channel = false;
  qo.calibration.method = CalibrationMethod::kMinMax;
  qo.bias_correction = BiasCorrection::kNone;
  auto samples = synthetic_samples(g, 4, 1);
  quantize_plan(g, plan, collect_statistics(g, samples), qo);
  auto r = evaluate_accuracy(g, plan, {samples[0], samples[1]});
  ASSERT_EQ(r.layers.size(), 3u);
  const LayerAccuracy &c1 = r.layers[0], &c2 = r.layers[1], &c3 = r.layers[2];
  EXPECT_FALSE(c1.own_sqnr_db.has_value());
  ASSERT_TRUE(c2.own_sqnr_db && c3.own_sqnr_db && c2.own_cosine);
  // conv2's inputs are conv1's exact fp32 outputs in both runs.
  EXPECT_NEAR(*c2.own_sqnr_db, c2.sqnr_db, 1e-9);
  EXPECT_NEAR(*c2.own_cosine, c2.cosine, 1e-12);
  EXPECT_LT(c3.sqnr_db + 10.0, *c3.own_sqnr_db)
      << "conv3 inherits conv2's error: " << c3.sqnr_db << " dB, own " << *c3.own_sqnr_db;
  const std::string summary = accuracy_summary(r);
  const size_t adders = summary.find("layers adding the most error");
  ASSERT_NE(adders, std::string::npos) << summary;
  EXPECT_LT(summary.find("conv2", adders), summary.find("conv3", adders)) << summary;
  EXPECT_NE(accuracy_json(r).find("\"own_sqnr_db\""), std::string::npos);
  AccuracyOptions output_only;
  output_only.own_error = false;
  const AccuracyReport off = evaluate_accuracy(g, plan, {samples[0], samples[1]}, output_only);
  EXPECT_FALSE(off.layers.at(1).own_sqnr_db.has_value());
  EXPECT_EQ(off.layers.at(2).sqnr_db, c3.sqnr_db);
}

// A model ending in Softmax: the headline is the logits' figure (the last real layer's, conv3 here), the
// probabilities' after it; a model without one has no such figure (JSON null).
TEST(AccuracyReport, AFinalSoftmaxPutsTheLogitsFigureFirst) {
  Graph plain = conv_chain(true);
  GraphBuilder b;
  auto x = b.input("x", {1, 8, 8, 8});
  std::string v = x;
  for (int k = 1; k <= 3; ++k) {
    auto w = b.random_constant("w" + std::to_string(k), {8, 8, 3, 3}, 20 + k, -0.2f, 0.2f);
    v = b.node("Conv", {v, w}, "c" + std::to_string(k), {1, 8, 8, 8}, {{"pads", attr_ints({1, 1, 1, 1})}});
    b.graph().nodes.back().name = "conv" + std::to_string(k);
  }
  v = b.node("Softmax", {v}, "probs", {1, 8, 8, 8}, {{"axis", testing::attr_i(1)}});
  b.output(v);
  Graph g = b.build();
  for (Graph* graph : {&plain, &g}) {
    PrecisionSpec spec;
    spec.model = Precision::kInt8;
    PrecisionPlan plan = resolve_plan(*graph, spec);
    auto samples = synthetic_samples(*graph, 2, 1);
    quantize_plan(*graph, plan, collect_statistics(*graph, samples), QuantOptions{});
    const AccuracyReport r = evaluate_accuracy(*graph, plan, samples);
    if (graph == &plain) {
      EXPECT_FALSE(r.before_softmax.has_value());
      EXPECT_NE(accuracy_json(r).find("\"before_softmax\": null"), std::string::npos);
      continue;
    }
    ASSERT_TRUE(r.before_softmax.has_value());
    EXPECT_EQ(r.before_softmax->value, "c3");
    EXPECT_EQ(r.before_softmax->layer, "conv3");
    const auto conv3 = std::find_if(r.layers.begin(), r.layers.end(),
                                    [](const LayerAccuracy& l) { return l.name == "conv3"; });
    ASSERT_NE(conv3, r.layers.end());
    EXPECT_DOUBLE_EQ(r.before_softmax->sqnr_db, conv3->sqnr_db);
    EXPECT_DOUBLE_EQ(r.before_softmax->cosine, conv3->cosine);
    const std::string summary = accuracy_summary(r);
    EXPECT_NE(summary.find(fmt::format("inputs): SQNR {:.2f} dB", conv3->sqnr_db)), std::string::npos)
        << summary;
    EXPECT_LT(summary.find("before the final Softmax (conv3)"), summary.find("output SQNR")) << summary;
    EXPECT_NE(accuracy_json(r).find("\"before_softmax\": {\"value\": \"c3\", \"layer\": \"conv3\""),
              std::string::npos)
        << accuracy_json(r);
  }
}

// The task lines give shares with one decimal and ratios with four digits (not "90.9091%", "0.987742").
TEST(AccuracyReport, TaskSummaryGivesSensibleDigits) {
  TaskMetrics c;
  c.task = Task::kClassify;
  c.inputs = 11;
  c.top1_agree = 10;
  c.top5_agree = 11;
  EXPECT_EQ(task_summary(c),
            "task classify (11 inputs, quantized vs fp32): top-1 agreement 90.9%, top-5 agreement 100%\n");
  TaskMetrics d;
  d.task = Task::kOcrDet;
  d.inputs = 2;
  d.det_reference_pixels = 1000;
  d.det_quantized_pixels = 990;
  d.det_both_pixels = 977;  // F1 = 2 x 977 / 1990 = 0.98191, IoU = 977 / 1013 = 0.96446
  EXPECT_EQ(task_summary(d),
            "task ocr-det (2 inputs, quantized vs fp32): text-map F1 0.9819, IoU 0.9645 (pixels above the "
            "threshold)\n");
}

// The outlier crushes conv2's other channels (per-tensor weight scale) and stretches conv2's output
// range, which conv3 reads quantized: the advice must start with conv2 or conv3, never conv1.
TEST(AccuracyReport, MixedPrecisionAdviceStartsAtTheOutlierLayer) {
  Graph g = conv_chain(true);
  PrecisionSpec spec;
  spec.model = Precision::kInt8;
  PrecisionPlan plan = resolve_plan(g, spec);
  QuantOptions qo;
  qo.per_channel = false;
  auto samples = synthetic_samples(g, 4, 1);
  quantize_plan(g, plan, collect_statistics(g, samples), qo);
  const double before = evaluate_accuracy(g, plan, {samples[0]}).output_sqnr_db;
  auto a = advise_mixed_precision(g, plan, {samples[0]}, before + 6.0);
  EXPECT_TRUE(a.met);
  ASSERT_FALSE(a.layers.empty());
  EXPECT_TRUE(a.layers[0] == "conv2" || a.layers[0] == "conv3") << a.layers[0];
  EXPECT_EQ(a.overrides.substr(0, 11), a.layers[0] + "=fp16");
  // The advice is ready to use: applying the override list reaches the SQNR it reports.
  spec.overrides = parse_overrides(a.overrides);
  PrecisionPlan advised = resolve_plan(g, spec);
  advised.values = plan.values;
  advised.layers = plan.layers;
  EXPECT_NEAR(evaluate_accuracy(g, advised, {samples[0]}).output_sqnr_db, a.achieved_sqnr_db, 1e-9);
}

// conv_chain quantized in int8 from 4 synthetic samples, with the requantizer an array with int16 MACs gives
// the advice (the mixed-precision advice tests below).
struct Int16AdviceChain {
  Graph g = conv_chain(false);
  PrecisionSpec spec = [] {
    PrecisionSpec s;
    s.model = Precision::kInt8;
    return s;
  }();
  PrecisionPlan plan = resolve_plan(g, spec);
  std::vector<Sample> samples = synthetic_samples(g, 4, 1);
  std::map<std::string, TensorStats> stats = collect_statistics(g, samples);
  PlanRequantizer requant = [this](const PrecisionPlan& p) {
    return requantize_plan(g, p, stats, QuantOptions{});
  };
  Int16AdviceChain() { quantize_plan(g, plan, stats, QuantOptions{}); }
  Int16AdviceChain(const Int16AdviceChain&) = delete;  // requant refers to this object's members
  Int16AdviceChain& operator=(const Int16AdviceChain&) = delete;
};

// With a requantizer (an array with int16 MACs), the advice moves layers to int16 first and to fp16 only
// when int16 is not enough.
TEST(AccuracyReport, MixedPrecisionAdviceTriesInt16BeforeFp16) {
  Int16AdviceChain c;
  Graph& g = c.g;
  PrecisionSpec& spec = c.spec;
  const PrecisionPlan& plan = c.plan;
  const std::vector<Sample>& samples = c.samples;
  const auto& stats = c.stats;
  const PlanRequantizer& requant = c.requant;
  const double before = evaluate_accuracy(g, plan, {samples[0]}).output_sqnr_db;
  auto a = advise_mixed_precision(g, plan, {samples[0]}, before + 1.0, nullptr, requant);
  EXPECT_TRUE(a.met);
  EXPECT_TRUE(a.layers.empty()) << a.overrides;
  ASSERT_FALSE(a.int16_layers.empty());
  EXPECT_NE(a.overrides.find("=int16"), std::string::npos) << a.overrides;
  // The override list rebuilt into a plan reaches the SQNR the advice reports.
  spec.overrides = parse_overrides(a.overrides);
  PrecisionPlan advised = resolve_plan(g, spec);
  quantize_plan(g, advised, stats, QuantOptions{});
  EXPECT_NEAR(evaluate_accuracy(g, advised, {samples[0]}).output_sqnr_db, a.achieved_sqnr_db, 1e-9);
  // A target int16 cannot reach goes on to fp16.
  auto b = advise_mixed_precision(g, plan, {samples[0]}, 200.0, nullptr, requant);
  EXPECT_FALSE(b.met);
  EXPECT_FALSE(b.layers.empty());
}

// int16 moves are taken on SQNR alone; when the resulting int16 + fp16 mix costs more than the same layers
// all in fp16 (which meets the target too), the advice takes the fp16 twin; when the mix is cheaper it
// keeps the mix and reports the twin it was compared with.
TEST(AccuracyReport, MixedPrecisionAdviceTakesTheFp16TwinWhenTheMixCostsMore) {
  Int16AdviceChain c;
  Graph& g = c.g;
  const PrecisionPlan& plan = c.plan;
  const std::vector<Sample>& samples = c.samples;
  const PlanRequantizer& requant = c.requant;
  // A target between every layer in int16 and every layer in fp16: the greedy ends with a mix.
  PrecisionPlan all16 = plan, allfp16 = plan;
  for (const char* n : {"conv1", "conv2", "conv3"}) {
    all16.nodes[n].requested = Precision::kInt16;
    allfp16.nodes[n].requested = allfp16.nodes[n].effective = Precision::kFp16;
  }
  all16 = requant(all16);
  const double sqnr16 = evaluate_accuracy(g, all16, {samples[0]}).output_sqnr_db;
  const double sqnr_fp16 = evaluate_accuracy(g, requant(allfp16), {samples[0]}).output_sqnr_db;
  ASSERT_GT(sqnr_fp16, sqnr16 + 2.0);
  const double target = sqnr16 + 0.5;
  auto cost_with = [](double int16_cost) {
    return [int16_cost](const PrecisionPlan& p) {
      double c = 0;
      for (const auto& [name, np] : p.nodes)
        c += np.int16 ? int16_cost : np.effective == Precision::kFp16 ? 3.0 : 1.0;
      return c;
    };
  };
  auto dear = advise_mixed_precision(g, plan, {samples[0]}, target, cost_with(10.0), requant);
  EXPECT_TRUE(dear.met);
  EXPECT_TRUE(dear.took_fp16_twin);
  EXPECT_TRUE(dear.int16_layers.empty()) << dear.overrides;
  EXPECT_FALSE(dear.layers.empty());
  EXPECT_EQ(dear.overrides.find("int16"), std::string::npos) << dear.overrides;
  ASSERT_TRUE(dear.fp16_twin_cost.has_value());
  EXPECT_EQ(dear.cost, *dear.fp16_twin_cost);
  EXPECT_GT(dear.mix_cost, dear.cost);
  EXPECT_GE(dear.mix_sqnr_db, target);
  EXPECT_GE(dear.achieved_sqnr_db, target);
  EXPECT_NE(accuracy_json([&] {
              AccuracyReport r;
              r.advice = dear;
              return r;
            }())
                .find("\"fp16_twin\": {\"taken\": true"),
            std::string::npos);
  auto cheap = advise_mixed_precision(g, plan, {samples[0]}, target, cost_with(1.5), requant);
  EXPECT_TRUE(cheap.met);
  EXPECT_FALSE(cheap.took_fp16_twin);
  EXPECT_FALSE(cheap.int16_layers.empty()) << cheap.overrides;
  ASSERT_TRUE(cheap.fp16_twin_cost.has_value());
  EXPECT_LT(cheap.cost, *cheap.fp16_twin_cost);
}

// A vector node can cost more than any matrix layer: here the output Mul's per-tensor int8 range is set by
// one channel 1000x larger than the others, which collapse to a few codes. The advice ranks every int8
// node, vector nodes too, and moves the Mul first.
TEST(AccuracyReport, MixedPrecisionAdviceRanksVectorNodesToo) {
  GraphBuilder b;
  auto x = b.input("x", {1, 8, 8, 8});
  auto w = b.random_constant("w", {8, 8, 3, 3}, 21, -0.2f, 0.2f);
  auto c = b.node("Conv", {x, w}, "c", {1, 8, 8, 8}, {{"pads", attr_ints({1, 1, 1, 1})}});
  b.graph().nodes.back().name = "conv";
  auto s = b.random_constant("s", {1, 8, 1, 1}, 22, 0.5f, 1.0f);
  auto y = b.node("Mul", {c, s}, "y", {1, 8, 8, 8});
  b.graph().nodes.back().name = "mul";
  b.output(y);
  Graph g = b.build();
  Tensor st = *g.value("s").constant;
  st.f[3] *= 1000.0f;
  g.add_constant("s", st);
  PrecisionSpec spec;
  spec.model = Precision::kInt8;
  PrecisionPlan plan = resolve_plan(g, spec);
  auto samples = synthetic_samples(g, 4, 1);
  quantize_plan(g, plan, collect_statistics(g, samples), QuantOptions{});
  ASSERT_EQ(plan.precision_of("mul"), Precision::kInt8);
  const double before = evaluate_accuracy(g, plan, {samples[0]}).output_sqnr_db;
  auto a = advise_mixed_precision(g, plan, {samples[0]}, before + 10.0);
  ASSERT_EQ(a.sensitivity.size(), 2u);
  EXPECT_EQ(a.sensitivity[0].name, "mul");
  EXPECT_EQ(a.sensitivity[0].op, "Mul");
  EXPECT_LT(a.sensitivity[0].sqnr_db, a.sensitivity[1].sqnr_db);
  EXPECT_TRUE(a.met) << a.achieved_sqnr_db << " dB from " << before;
  ASSERT_FALSE(a.layers.empty());
  EXPECT_EQ(a.layers[0], "mul");
  EXPECT_NE(accuracy_json([&] {
              AccuracyReport r;
              r.advice = a;
              return r;
            }())
                .find("\"sensitivity\": ["),
            std::string::npos);
}

TEST(AccuracyReport, SyntheticCalibrationIsFlaggedLoudly) {
  Graph g = conv_chain(false);
  PlanRequest req;
  req.spec.model = Precision::kInt8;
  req.calibration_count = 2;
  PrecisionPlan plan = build_plan(g, req);
  EXPECT_TRUE(plan.calibration.synthetic);
  auto r = evaluate_accuracy(g, plan, synthetic_samples(g, 1, 99));
  ASSERT_FALSE(r.warnings.empty());
  EXPECT_NE(r.warnings[0].find("SYNTHETIC"), std::string::npos);
  EXPECT_NE(accuracy_summary(r).find("SYNTHETIC"), std::string::npos);
}

// Scales every weight of conv `which` of conv_chain by `factor`.
Graph scaled_chain(const std::string& which, float factor) {
  Graph g = conv_chain(false);
  Tensor w = *g.value(which).constant;
  for (float& v : w.f) v *= factor;
  g.add_constant(which, w);
  return g;
}

TEST(AccuracyReport, Fp16OverflowIsFlaggedNotReportedAsExact) {
  // conv2's outputs reach ~1e5 > 65504: fp16 turns them into inf, and everything after is inf/NaN. The
  // report must say so (SQNR -300, cosine 0, counts, a warning naming the layer), never "300 dB exact".
  Graph g = scaled_chain("w2", 2e5f);
  PrecisionSpec spec;
  spec.model = Precision::kFp16;
  const PrecisionPlan plan = resolve_plan(g, spec);
  auto r = evaluate_accuracy(g, plan, synthetic_samples(g, 2, 3));
  ASSERT_EQ(r.layers.size(), 3u);
  EXPECT_EQ(r.layers[0].overflow, 0);
  EXPECT_GT(r.layers[1].overflow, 0);
  EXPECT_GT(r.layers[1].nonfinite, 0);
  EXPECT_GT(r.layers[1].ref_max_abs, 65504.0);
  EXPECT_EQ(r.layers[1].sqnr_db, -kExactSqnrDb);
  EXPECT_EQ(r.layers[1].cosine, 0.0);
  EXPECT_EQ(r.first_bad_layer, "conv2");
  EXPECT_GT(r.output_nonfinite, 0);
  EXPECT_EQ(r.output_sqnr_db, -kExactSqnrDb);
  bool warned = false;
  for (const auto& w : r.warnings)
    warned |= w.find("conv2") != std::string::npos && w.find("infinite") != std::string::npos;
  EXPECT_TRUE(warned);
  EXPECT_NE(accuracy_summary(r).find("INF/NaN"), std::string::npos);
  EXPECT_NE(accuracy_json(r).find("\"overflow\": "), std::string::npos);
  // bf16 has fp32's exponent range: no overflow there.
  spec.model = Precision::kBf16;
  auto rb = evaluate_accuracy(g, resolve_plan(g, spec), synthetic_samples(g, 2, 3));
  EXPECT_EQ(rb.layers[1].overflow, 0);
  EXPECT_EQ(rb.output_nonfinite, 0);
  EXPECT_GT(rb.output_sqnr_db, 20.0);
}

TEST(Emulate, FusedEpiloguesOfConvTransposeAndElementwiseNodesApply) {
  // After lower(), a ConvTranspose and an Add each carry a fused Relu (npu.activation). The fp32
  // emulation (the accuracy report's reference) must apply them: it equals the interpreter on the
  // imported graph. (It used to drop the ConvTranspose's.)
  GraphBuilder b;
  auto x = b.input("x", {1, 4, 5, 5});
  auto t = b.node("ConvTranspose", {x, b.random_constant("w", {4, 4, 3, 3}, 3)}, "t", {1, 4, 7, 7});
  auto r = b.node("Relu", {t}, "r", {1, 4, 7, 7});
  auto s = b.node("Add", {r, b.input("y", {1, 4, 7, 7})}, "s", {1, 4, 7, 7});
  b.output(b.node("Relu", {s}, "z", {1, 4, 7, 7}));
  const Graph imported = b.build();
  Graph g = imported;
  lower(g);
  int fused = 0;
  for (const auto& n : g.nodes) fused += n.attr_string(kActivation, "") == "Relu";
  EXPECT_EQ(fused, 2);
  const auto samples = synthetic_samples(g, 1, 4);
  const auto want = interpret(imported, samples[0]);
  const auto got = emulate(g, PrecisionPlan{}, samples[0]);
  ASSERT_EQ(want.at("z").f.size(), got.at("z").f.size());
  for (size_t k = 0; k < want.at("z").f.size(); ++k)
    EXPECT_NEAR(got.at("z").f[k], want.at("z").f[k], 1e-4) << k;
}

TEST(AccuracyReport, AllZeroReferenceOutputIsCalledOut) {
  // conv3's weights zeroed (as torchvision zero-initialises ViT's head): every precision is "exact" at
  // the output, which must not pass for a result.
  Graph g = scaled_chain("w3", 0.0f);
  PrecisionSpec spec;
  spec.model = Precision::kFp16;
  auto r = evaluate_accuracy(g, resolve_plan(g, spec), synthetic_samples(g, 1, 3));
  EXPECT_EQ(r.output_sqnr_db, kExactSqnrDb);
  bool warned = false;
  for (const auto& w : r.warnings) warned |= w.find("all zeros") != std::string::npos;
  EXPECT_TRUE(warned);
  EXPECT_TRUE(
      evaluate_accuracy(conv_chain(false), resolve_plan(conv_chain(false), spec), synthetic_samples(g, 1, 3))
          .warnings.empty());
}

TEST(AccuracyReport, Fp16UnderflowIsCounted) {
  // conv1's weights x 1e-6: its outputs lie around 1e-6, below fp16's smallest normal (6.1e-5).
  Graph g = scaled_chain("w1", 1e-6f);
  PrecisionSpec spec;
  spec.model = Precision::kFp16;
  auto r = evaluate_accuracy(g, resolve_plan(g, spec), synthetic_samples(g, 1, 3));
  EXPECT_GT(r.layers[0].underflow, r.layers[0].elements / 4);
  bool warned = false;
  for (const auto& w : r.warnings)
    warned |= w.find("conv1") != std::string::npos && w.find("smallest normal") != std::string::npos;
  EXPECT_TRUE(warned);
}

TEST(AccuracyReport, UnrepresentativeCalibrationShowsAsSaturation) {
  // Calibrated on inputs 20x smaller than the ones evaluated (the seed's "dark calibration images"):
  // the int8 ranges are too narrow and a large share of the evaluated values saturates.
  Graph g = conv_chain(false);
  for (bool representative : {true, false}) {
    PrecisionSpec spec;
    spec.model = Precision::kInt8;
    PrecisionPlan plan = resolve_plan(g, spec);
    auto calib = synthetic_samples(g, 4, 1);
    if (!representative)
      for (auto& sample : calib)
        for (auto& [name, t] : sample)
          for (float& v : t.f) v *= 0.05f;
    QuantOptions qo;
    qo.calibration.method = CalibrationMethod::kMinMax;
    quantize_plan(g, plan, collect_statistics(g, calib), qo);
    auto r = evaluate_accuracy(g, plan, synthetic_samples(g, 2, 7));
    int64_t saturated = 0;
    for (const auto& l : r.layers) saturated += l.saturated;
    bool warned = false;
    for (const auto& w : r.warnings) warned |= w.find("representative") != std::string::npos;
    EXPECT_EQ(warned, !representative);
    if (representative)
      EXPECT_LT(saturated * 1000, r.layers[0].elements * 2 * 3);
    else
      EXPECT_GT(saturated, r.layers[0].elements);
  }
}

// A value clipped by at most half a step loses no more than rounding would: HardSwish's minimum -0.375 below
// a range whose zero point was rounded up is rounding, not saturation; a value far above the range is.
TEST(AccuracyReport, ValuesWithinHalfAStepOfTheRangeRoundRatherThanSaturate) {
  GraphBuilder b;
  auto x = b.input("x", {1, 1, 1, 5});
  b.output(b.node("HardSwish", {x}, "y", {1, 1, 1, 5}));
  Graph g = b.build();
  PrecisionSpec spec;
  spec.model = Precision::kInt8;
  PrecisionPlan plan = resolve_plan(g, spec);
  Sample s;
  s["x"] = Tensor::from_floats({1, 1, 1, 5}, {-1.5f, -1.5f, 0.0f, 2.0f, 20.0f});  // y: -0.375 x2, 0, 1.67, 20
  quantize_plan(g, plan, collect_statistics(g, {s}), QuantOptions{});
  QParams& y = plan.values.at("y");
  y.dtype = isa::DType::kUint8;
  y.scale = 0.052f;  // real range [-0.364, 12.896]: -0.375 lies 0.21 steps below it, 20 far above
  y.zero_point = 7;
  const AccuracyReport r = evaluate_accuracy(g, plan, {s});
  ASSERT_EQ(r.layers.size(), 1u);
  EXPECT_EQ(r.layers[0].saturated, 1);
}

// ---- pre-quantized (QDQ) models -----------------------------------------------------------------

std::string data(const std::string& f) {
  return std::string(NPUSIM_SOURCE_DIR) + "/tests/compiler/quant/data/" + f;
}

TEST(Qdq, TorchExportedModelRunsWithItsOwnScalesBitExactWithAPlainReference) {
  Graph model = import_onnx_file(data("qdq_tiny.onnx"));
  ASSERT_TRUE(is_prequantized(model));
  QdqImport q = import_qdq(model);
  EXPECT_EQ(q.int8_layers, 4);  // conv1, conv2 (depthwise), conv3, fc
  EXPECT_EQ(q.plan.calibration.method, "model");
  Sample s{{"input", read_npy_tensor(data("input.npy"))}};
  auto expected = expected_int8_tensors(q.graph, q.plan, s);
  // For every int8 matrix layer: recompute its output codes from its input codes with plain loops and
  // a double-precision requantization; they must be equal bit for bit.
  int layers = 0;
  for (const Node& n : q.graph.nodes) {
    if (!q.plan.layers.count(n.name)) continue;
    const LayerQuant& L = q.plan.layers.at(n.name);
    ASSERT_TRUE(expected.count(L.output)) << n.name;
    Int8Tensor xin;
    if (expected.count(L.input)) {
      xin = expected.at(L.input);
    } else {  // the graph input: quantized on entry with the model's QuantizeLinear parameters
      const Tensor& t = s.at(L.input);
      xin.shape = t.shape;
      xin.qparams = q.plan.values.at(L.input);
      for (float v : t.f) xin.codes.push_back(xin.qparams.quantize(v));
    }
    // The weights are the model's int8 initializers: dequantized constant / scale gives them back.
    const Tensor& wf = *q.graph.value(L.weight).constant;
    const Int8Tensor& y = expected.at(L.output);
    const QParams xq = xin.qparams, yq = y.qparams;
    const int64_t channels = static_cast<int64_t>(L.weight_scale.size());
    int64_t inner = 1;
    for (size_t d = L.weight_channel_axis + 1; d < L.weight_shape.size(); ++d) inner *= L.weight_shape[d];
    std::vector<int64_t> wq(wf.f.size());
    for (size_t k = 0; k < wq.size(); ++k) {
      wq[k] = std::lrint(wf.f[k] / L.weight_scale[(k / inner) % channels]);
      ASSERT_EQ(wq[k], L.weight_q[k]);
    }
    // gemmlowp's two roundings written out plainly: acc * M / 2^31 rounded half up (half away from zero
    // for negatives), then / 2^shift rounded half away from zero.
    int64_t off_by_one = 0;
    auto requant = [&](int64_t acc, int64_t c) {
      const int64_t M = L.requant[c].multiplier, sh = L.requant[c].shift;
      EXPECT_GE(sh, 0);
      EXPECT_NEAR(static_cast<double>(M) / 2147483648.0 / std::ldexp(1.0, static_cast<int>(sh)),
                  static_cast<double>(xq.scale) * L.weight_scale[c] / yq.scale, 1e-9);
      const int64_t p = acc * M;
      const int64_t hi_mul =
          (p >= 0 ? p + (int64_t{1} << 30) : p - (int64_t{1} << 30) + 1) / (int64_t{1} << 31);
      const int64_t den = int64_t{1} << sh;
      const int64_t q = hi_mul >= 0 ? (2 * hi_mul + den) / (2 * den) : -((2 * -hi_mul + den) / (2 * den));
      int64_t lo = yq.qmin(), hi = yq.qmax();
      if (L.activation == "Relu") lo = std::max<int64_t>(lo, yq.zero_point);
      const int64_t v = std::clamp(q + yq.zero_point, lo, hi);
      // A single rounding of the exact real product differs by at most one code.
      const double real =
          static_cast<double>(acc) * (static_cast<double>(xq.scale) * L.weight_scale[c]) / yq.scale;
      const int64_t once = std::clamp(static_cast<int64_t>(std::llround(real)) + yq.zero_point, lo, hi);
      EXPECT_LE(std::abs(once - v), 1);
      if (once != v) ++off_by_one;
      return v;
    };
    int64_t mismatches = 0, count = 0;
    if (n.op_type == "Conv") {
      const int64_t C = xin.shape[1], H = xin.shape[2], W = xin.shape[3];
      const int64_t M = L.weight_shape[0], CG = L.weight_shape[1], R = L.weight_shape[2],
                    S = L.weight_shape[3];
      const int64_t group = n.attr_int("group", 1), st = n.attr_ints("strides", {1, 1})[0];
      const int64_t pad = n.attr_ints("pads", {0, 0, 0, 0})[0];
      const int64_t OH = y.shape[2], OW = y.shape[3];
      for (int64_t m = 0; m < M; ++m) {
        const int64_t gi = m / (M / group);
        for (int64_t oy = 0; oy < OH; ++oy)
          for (int64_t ox = 0; ox < OW; ++ox) {
            int64_t acc = L.bias[m];
            for (int64_t c = 0; c < CG; ++c)
              for (int64_t i = 0; i < R; ++i)
                for (int64_t j = 0; j < S; ++j) {
                  const int64_t iy = oy * st - pad + i, ix = ox * st - pad + j;
                  if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
                  acc += (xin.codes[((gi * CG + c) * H + iy) * W + ix] - xq.zero_point) *
                         wq[((m * CG + c) * R + i) * S + j];
                }
            (void)C;
            ++count;
            if (y.codes[(m * OH + oy) * OW + ox] != requant(acc, m)) ++mismatches;
          }
      }
    } else {  // Gemm, transB = 1: W [N, K]
      const int64_t K = xin.shape[1], N = L.weight_shape[0];
      for (int64_t j = 0; j < N; ++j) {
        int64_t acc = L.bias[j];
        for (int64_t k = 0; k < K; ++k) acc += (xin.codes[k] - xq.zero_point) * wq[j * K + k];
        ++count;
        if (y.codes[j] != requant(acc, j)) ++mismatches;
      }
    }
    EXPECT_EQ(mismatches, 0) << n.name << ": " << mismatches << " of " << count << " codes differ";
    EXPECT_LT(off_by_one * 100, count) << n.name;  // double rounding moves well under 1 % of the codes
    ++layers;
  }
  EXPECT_EQ(layers, 4);
  // And torch's own int8 kernels (qnnpack) agree within one code on the final output: they requantize
  // in floating point and average-pool in integers, so exact ties may round differently.
  Tensor torch_codes = read_npy_tensor(data("torch_out_codes.npy"));
  const Int8Tensor& out = expected.at("output");
  ASSERT_EQ(out.codes.size(), torch_codes.i.size());
  for (size_t k = 0; k < out.codes.size(); ++k) EXPECT_LE(std::abs(out.codes[k] - torch_codes.i[k]), 1) << k;
}

}  // namespace
}  // namespace npusim::compiler::quant

namespace npusim::compiler::quant {
namespace {

// A graph of one node `op` on a runtime input (and the node, by reference into the graph).
Graph one_node(const std::string& op, const std::string& domain = "",
               std::map<std::string, Attribute> attrs = {}) {
  testing::GraphBuilder b;
  const std::string x = b.input("x", {1, 8});
  b.output(b.node(op, {x}, "y", {1, 8}, std::move(attrs), DataType::kFloat32, domain));
  return b.build();
}

QParams qp(float scale, int32_t zp, isa::DType dt) {
  QParams p;
  p.scale = scale, p.zero_point = zp, p.dtype = dt;
  return p;
}

TEST(ActivationLut, EntryKIsTheOutputCodeOfTheFunctionOfInputCodeQminPlusK) {
  // Sigmoid from uint8 codes (scale 1/16, zero point 128: reals -8 .. 7.94) to uint8 codes of scale 1/256:
  // entry k = round(256 / (1 + exp(-(k - 128) / 16))), saturated at 255, computed here in double. fp32's
  // sigmoid may round a value lying within 1e-4 of a half code the other way; none of these do but allow it.
  const Graph g = one_node("Sigmoid");
  const std::vector<int32_t> t = activation_lut(g, g.nodes[0], qp(1.0f / 16, 128, isa::DType::kUint8),
                                                qp(1.0f / 256, 0, isa::DType::kUint8));
  ASSERT_EQ(t.size(), 256u);
  for (int k = 0; k < 256; ++k) {
    const double v = 256.0 / (1.0 + std::exp(-(k - 128) / 16.0));
    const double want = std::min(255.0, std::nearbyint(v));
    const bool near_tie = std::fabs(v - std::floor(v) - 0.5) < 1e-4;
    if (!near_tie) {
      EXPECT_EQ(t[static_cast<size_t>(k)], want) << k;
    }
  }
  EXPECT_EQ(t[0], 0);      // sigmoid(-8) * 256 = 0.086
  EXPECT_EQ(t[128], 128);  // sigmoid(0) = 1/2
  EXPECT_EQ(t[255], 255);  // saturated
}

TEST(ActivationLut, Int8CodesIndexFromMinus128AndHardSwishIsExactOnItsLinearPiece) {
  // int8 codes of scale 1/8, zero point 0 (reals -16 .. 15.875) -> int8 codes of scale 1/8: HardSwish is
  // 0 below -3, x above 3, so entry k (code k - 128) is 0 for codes <= -24 and the code itself from 24 on.
  const Graph g = one_node("HardSwish");
  const std::vector<int32_t> t =
      activation_lut(g, g.nodes[0], qp(0.125f, 0, isa::DType::kInt8), qp(0.125f, 0, isa::DType::kInt8));
  for (int code = -128; code <= 127; ++code) {
    const int32_t e = t[static_cast<size_t>(code + 128)];
    if (code <= -24) {
      EXPECT_EQ(e, 0) << code;
    }
    if (code >= 24) {
      EXPECT_EQ(e, code) << code;
    }
  }
  EXPECT_EQ(t[128 + 8], 5);  // code 8, x = 1: 1 * (1 + 3) / 6 = 0.667 = 5.33 codes of 1/8
}

TEST(ActivationLut, OnlyElementwiseFunctionsOfOneRuntimeInputAreTables) {
  EXPECT_TRUE(is_code_function(one_node("Sigmoid"), one_node("Sigmoid").nodes[0]));
  const Graph silu = one_node("Silu", kNpuDomain);
  EXPECT_TRUE(is_code_function(silu, silu.nodes[0]));
  const Graph fused = one_node("Sigmoid", "", {{kActivation, testing::attr_s("Relu")}});
  EXPECT_FALSE(is_code_function(fused, fused.nodes[0]));  // a fused epilogue: not the node's function alone
  const Graph softmax = one_node("Softmax");
  EXPECT_FALSE(is_code_function(softmax, softmax.nodes[0]));  // each output depends on the whole row
  testing::GraphBuilder b;
  const std::string x = b.input("x", {1, 8}), z = b.input("z", {1, 8});
  b.output(b.node("Add", {x, z}, "y", {1, 8}));
  const Graph add = b.build();
  EXPECT_FALSE(is_code_function(add, add.nodes[0]));  // two runtime inputs
}

TEST(ActivationLut, TheReferenceLooksUpTheTableAndGivesTheFloatRulesCodes) {
  // Gelu's int8 layer in the reference: codes out = table[codes in - qmin], equal to quantize(gelu(
  // dequantize(code))) element by element; the result does not depend on the scheme.
  for (Int8Vector scheme : {Int8Vector::kInteger, Int8Vector::kFloat}) {
    testing::GraphBuilder b;
    const std::string x = b.input("x", {1, 4, 8, 8});
    const std::string c = b.node("Conv", {x, b.random_constant("w", {4, 4, 1, 1}, 3)}, "c", {1, 4, 8, 8});
    const std::string a = b.node("Gelu", {c}, "a", {1, 4, 8, 8}, {}, DataType::kFloat32, kNpuDomain);
    b.output(b.node("Conv", {a, b.random_constant("w2", {4, 4, 1, 1}, 4)}, "y", {1, 4, 8, 8}));
    const Graph g = b.build();
    PlanRequest req;
    req.spec.model = Precision::kInt8;
    req.calibration_count = 4;
    req.quant.int8_vector = scheme;
    const PrecisionPlan plan = build_plan(g, req);
    EXPECT_EQ(plan.int8_vector, scheme);
    const auto sample = synthetic_samples(g, 1, 3)[0];
    const auto t = expected_int8_tensors(g, plan, sample);
    const Int8Tensor& in = t.at("c");
    const Int8Tensor& out = t.at("a");
    ASSERT_EQ(in.codes.size(), out.codes.size());
    for (size_t k = 0; k < in.codes.size(); ++k) {
      const float real = in.qparams.dequantize(in.codes[k]);
      EXPECT_EQ(out.codes[k], out.qparams.quantize(num::gelu(real))) << k;
    }
  }
}

// `g` planned in int8 (4 synthetic calibration inputs) under the integer scheme and under the float one.
std::pair<PrecisionPlan, PrecisionPlan> int8_plans_of_both_schemes(const Graph& g) {
  PlanRequest req;
  req.spec.model = Precision::kInt8;
  req.calibration_count = 4;
  PrecisionPlan integer = build_plan(g, req);
  req.quant.int8_vector = Int8Vector::kFloat;
  return {std::move(integer), build_plan(g, req)};
}

// round_half_up(v) of the exact rational v = num / 2^31 (num in int64): floor((num + 2^30) / 2^31).
int64_t round_half_up_q31(int64_t num) {
  const int64_t d = int64_t{1} << 31, t = num + (int64_t{1} << 30);
  return t >= 0 ? t / d : -((-t + d - 1) / d);
}

TEST(IntegerMul, SingleRoundingMultiplierRoundsTheExactProductOnceToTheNearestCode) {
  // TFLite's integer Mul with one rounding: y = round(x * real), x the product of two centred 8-bit codes
  // (|x| <= 255^2). For every such x, the VEC requantize with single_rounding_multiplier's (M, shift) gives
  // the nearest integer to x * real (halves up), except within 2^-14 of a half, where M's own rounding (2^-32
  // of real) may decide. quantize_multiplier's normalised form rounds twice (the high multiply, then the
  // right shift) and misses the nearest integer for some x of the same scales.
  for (const double real : {0.0037, 0.019, 0.3, 0.77, 1.5, 3.25}) {
    const auto m = single_rounding_multiplier(real);
    ASSERT_TRUE(m.has_value()) << real;
    EXPECT_LE(m->shift, 0) << real;  // never a right shift after the multiply
    const num::QuantizedMultiplier twice = num::quantize_multiplier(real);
    int64_t off_once = 0, off_twice = 0;
    for (int32_t x = -65025; x <= 65025; ++x) {
      const double v = static_cast<double>(x) * real;
      const double frac = v - std::floor(v);
      if (std::fabs(frac - 0.5) < 1.0 / 16384) continue;
      const auto nearest = static_cast<int64_t>(std::floor(v + 0.5));
      off_once += num::requantize_unsaturated(x, m->multiplier, m->shift, 0) != nearest;
      off_twice += num::requantize_unsaturated(x, twice.multiplier, twice.shift, 0) != nearest;
    }
    EXPECT_EQ(off_once, 0) << real;
    EXPECT_TRUE(twice.shift <= 0 || off_twice > 0) << real;
  }
  EXPECT_FALSE(single_rounding_multiplier(-0.5).has_value());
  EXPECT_FALSE(single_rounding_multiplier(std::nan("")).has_value());
}

TEST(IntegerMul, CodesAreTheCentredCodesProductRoundedOnceAndAgreeWithTheFloatRuleButForTies) {
  // Mul of two runtime values, int8 throughout: under the integer scheme each output code is
  // sat(round_half_up((a - za)(b - zb) * M / 2^31) + zy), the exact product rounded once, as TFLite's
  // single-rounding integer Mul; the float rule rounds the fp32 product once too (half to even), so the two
  // agree on every code but a tie's.
  testing::GraphBuilder b;
  const std::string x = b.input("x", {1, 4, 6, 6}), z = b.input("z", {1, 4, 1, 1});
  b.output(b.node("Mul", {x, z}, "y", {1, 4, 6, 6}));
  const Graph g = b.build();
  const auto [integer, fl] = int8_plans_of_both_schemes(g);
  const auto m = integer_mul(g, integer, g.nodes[0]);
  ASSERT_TRUE(m.has_value());
  EXPECT_FALSE(integer_mul(g, fl, g.nodes[0]).has_value());
  int differ = 0, total = 0;
  for (const auto& sample : synthetic_samples(g, 8, 5)) {
    const auto ti = expected_int8_tensors(g, integer, sample), tf = expected_int8_tensors(g, fl, sample);
    const Int8Tensor &yi = ti.at("y"), &yf = tf.at("y");
    // The inputs' codes as the int8 Mul reads them: quantized on entry.
    const QParams &qa = integer.values.at("x"), &qs = integer.values.at("z");
    const double real = static_cast<double>(qa.scale) * qs.scale / yi.qparams.scale;
    ASSERT_LT(real, 1.0);
    EXPECT_EQ(m->shift, 0);
    EXPECT_LE(std::fabs(m->multiplier - std::ldexp(real, 31)), 0.5);
    const std::vector<float> xa = sample.at("x").to_float_vector(), xs = sample.at("z").to_float_vector();
    for (size_t k = 0; k < yi.codes.size(); ++k) {
      const size_t ch = k / 36;
      const int64_t prod = (qa.quantize(xa[k]) - qa.zero_point) * (qs.quantize(xs[ch]) - qs.zero_point);
      const int64_t want =
          std::clamp<int64_t>(round_half_up_q31(prod * m->multiplier) + yi.qparams.zero_point,
                              yi.qparams.qmin(), yi.qparams.qmax());
      EXPECT_EQ(yi.codes[k], want) << k;
      EXPECT_LE(std::abs(yi.codes[k] - yf.codes[k]), 1) << k;
      differ += yi.codes[k] != yf.codes[k];
      ++total;
    }
  }
  EXPECT_LE(differ * 200, total) << differ << " of " << total;  // ties only: well under 0.5 %
}

TEST(IntegerGlobalAveragePool, EachChannelsCodesSummedExactlyAndRoundedOnceToTheOutputsCodes) {
  // GlobalAveragePool of int8 codes under the integer scheme: y = sat(round_half_up((S - H W zx) M / 2^31) +
  // zy) with S the exact sum of a channel's codes and M = round(2^31 x.scale / (y.scale H W)): the channel's
  // real mean in y's codes rounded once, so within half a code (plus M's 2^-16) of the exact mean, and equal
  // to the float rule's codes but at ties. The float scheme has no integer pool.
  testing::GraphBuilder b;
  const std::string x = b.input("x", {2, 3, 5, 7});
  b.output(b.node("GlobalAveragePool", {x}, "y", {2, 3, 1, 1}));
  const Graph g = b.build();
  const auto [integer, fl] = int8_plans_of_both_schemes(g);
  const auto m = integer_global_average_pool(g, integer, g.nodes[0]);
  ASSERT_TRUE(m.has_value());
  EXPECT_FALSE(integer_global_average_pool(g, fl, g.nodes[0]).has_value());
  const QParams &qx = integer.values.at("x"), &qy = integer.values.at("y");
  const double real = static_cast<double>(qx.scale) / (static_cast<double>(qy.scale) * 35);
  EXPECT_EQ(m->shift, 0);
  EXPECT_LE(std::fabs(m->multiplier - std::ldexp(real, 31)), 0.5);
  int differ = 0, total = 0;
  for (const auto& sample : synthetic_samples(g, 6, 9)) {
    const Int8Tensor yi = expected_int8_tensors(g, integer, sample).at("y");
    const Int8Tensor yf = expected_int8_tensors(g, fl, sample).at("y");
    const std::vector<float> xs = sample.at("x").to_float_vector();
    for (size_t p = 0; p < 6; ++p) {
      int64_t sum = 0;
      for (size_t k = 0; k < 35; ++k) sum += qx.quantize(xs[p * 35 + k]) - qx.zero_point;
      const int64_t want =
          std::clamp<int64_t>(round_half_up_q31(sum * m->multiplier) + qy.zero_point, qy.qmin(), qy.qmax());
      EXPECT_EQ(yi.codes[p], want) << p;
      EXPECT_LE(std::fabs(static_cast<double>(want - qy.zero_point) - static_cast<double>(sum) * real),
                0.5 + 1e-4)
          << p;
      EXPECT_LE(std::abs(yi.codes[p] - yf.codes[p]), 1) << p;
      differ += yi.codes[p] != yf.codes[p];
      ++total;
    }
  }
  EXPECT_LE(differ * 10, total);
}

TEST(IntegerAdd, EachCodeIsTheExactSumOfTheInputsRealsRoundedToTheOutputsGridButForTies) {
  // Add and Sub of two int8 values (one broadcast per channel) under the integer scheme, TFLite's
  // integer-only add: each input's centred codes rescaled in int32 to the common grid 2 max(sa, sb) / 2^20,
  // summed, one requantize. Checked against exact rational arithmetic: every code that does not saturate lies
  // within half a code of (a_real +- b_real) / y.scale + zy (plus 2^-10 for the grid's and multipliers'
  // rounding), and it equals the float rule's code except within that distance of a tie. The float scheme has
  // no integer Add.
  for (const char* op : {"Add", "Sub"}) {
    testing::GraphBuilder b;
    const std::string x = b.input("x", {1, 4, 6, 6}), z = b.input("z", {1, 4, 1, 1});
    b.output(b.node(op, {x, z}, "y", {1, 4, 6, 6}));
    const Graph g = b.build();
    const auto [integer, fl] = int8_plans_of_both_schemes(g);
    const auto m = integer_add(g, integer, g.nodes[0]);
    ASSERT_TRUE(m.has_value()) << op;
    EXPECT_FALSE(integer_add(g, fl, g.nodes[0]).has_value()) << op;
    EXPECT_EQ(m->subtract, std::string(op) == "Sub");
    const QParams &qa = integer.values.at("x"), &qb = integer.values.at("z"), &qy = integer.values.at("y");
    // The larger-scale input's real multiplier is exactly 1/2: M = 2^30 with the whole 2^20 left shift.
    const num::QuantizedMultiplier& big = qa.scale >= qb.scale ? m->a : m->b;
    EXPECT_EQ(big.multiplier, 1 << 30);
    EXPECT_EQ(big.shift, -kAddLeftShift);
    int differ = 0, total = 0;
    for (const auto& sample : synthetic_samples(g, 6, 13)) {
      const Int8Tensor yi = expected_int8_tensors(g, integer, sample).at("y");
      const Int8Tensor yf = expected_int8_tensors(g, fl, sample).at("y");
      const std::vector<float> xa = sample.at("x").to_float_vector(), xb = sample.at("z").to_float_vector();
      for (size_t k = 0; k < yi.codes.size(); ++k) {
        const double ra = qa.scale * static_cast<double>(qa.quantize(xa[k]) - qa.zero_point);
        const double rb = qb.scale * static_cast<double>(qb.quantize(xb[k / 36]) - qb.zero_point);
        const double exact = (std::string(op) == "Add" ? ra + rb : ra - rb) / qy.scale + qy.zero_point;
        if (exact < qy.qmin() - 0.5 || exact > qy.qmax() + 0.5) {
          EXPECT_EQ(yi.codes[k], exact < qy.qmin() ? qy.qmin() : qy.qmax()) << op << " " << k;
          continue;
        }
        EXPECT_LE(std::fabs(yi.codes[k] - exact), 0.5 + 1.0 / 1024) << op << " " << k;
        const double frac = exact - std::floor(exact);
        if (std::fabs(frac - 0.5) > 1.0 / 1024) {
          EXPECT_EQ(yi.codes[k], yf.codes[k]) << op << " " << k;
        }
        differ += yi.codes[k] != yf.codes[k];
        ++total;
      }
    }
    EXPECT_LE(differ * 100, total) << op << ": " << differ << " of " << total;
  }
}

TEST(IntegerAveragePool, EachPixelIsItsWindowsExactMeanRoundedOnceWithOnnxsDivisor) {
  // AveragePool 3x3 stride 2, pads 1, ceil_mode, on an 8x10 map, with and without count_include_pad, under
  // the integer scheme: every output code is the window's real mean in y's codes -- the exact sum of the
  // centred codes inside the input over ONNX's divisor (the elements inside the input, or inside the padded
  // input; the ceil_mode overhang never counts) -- rounded once: within half a code of it (plus the
  // multiplier's 2^-16), and the float rule's code but at ties. The float scheme has no integer pool.
  for (const int64_t include_pad : {0, 1}) {
    testing::GraphBuilder b;
    const std::string x = b.input("x", {1, 2, 8, 10});
    b.output(b.node("AveragePool", {x}, "y", {1, 2, 5, 6},
                    {{"kernel_shape", attr_ints({3, 3})},
                     {"strides", attr_ints({2, 2})},
                     {"pads", attr_ints({1, 1, 1, 1})},
                     {"ceil_mode", attr_i(1)},
                     {"count_include_pad", attr_i(include_pad)}}));
    const Graph g = b.build();
    const auto [integer, fl] = int8_plans_of_both_schemes(g);
    const auto m = integer_average_pool(g, integer, g.nodes[0]);
    ASSERT_TRUE(m.has_value());
    EXPECT_FALSE(integer_average_pool(g, fl, g.nodes[0]).has_value());
    const QParams &qx = integer.values.at("x"), &qy = integer.values.at("y");
    int differ = 0, total = 0;
    for (const auto& sample : synthetic_samples(g, 6, 19)) {
      const Int8Tensor yi = expected_int8_tensors(g, integer, sample).at("y");
      const Int8Tensor yf = expected_int8_tensors(g, fl, sample).at("y");
      const std::vector<float> xs = sample.at("x").to_float_vector();
      for (int64_t c = 0; c < 2; ++c) {
        for (int64_t oy = 0; oy < 5; ++oy) {
          for (int64_t ox = 0; ox < 6; ++ox) {
            int64_t sum = 0, inside = 0, padded = 0;
            for (int64_t i = 2 * oy - 1; i < 2 * oy + 2; ++i) {
              for (int64_t j = 2 * ox - 1; j < 2 * ox + 2; ++j) {
                padded += i >= -1 && i < 9 && j >= -1 && j < 11;  // [-1, 8 + 1) x [-1, 10 + 1)
                if (i < 0 || i >= 8 || j < 0 || j >= 10) continue;
                sum += qx.quantize(xs[static_cast<size_t>((c * 8 + i) * 10 + j)]) - qx.zero_point;
                ++inside;
              }
            }
            const int64_t d = include_pad ? padded : inside;
            const double exact = static_cast<double>(sum) * qx.scale / (qy.scale * static_cast<double>(d));
            const size_t k = static_cast<size_t>((c * 5 + oy) * 6 + ox);
            const double got = yi.codes[k] - qy.zero_point;
            if (exact + qy.zero_point < qy.qmin() || exact + qy.zero_point > qy.qmax()) continue;
            EXPECT_LE(std::fabs(got - exact), 0.5 + 1.0 / 65536) << include_pad << " " << k;
            EXPECT_LE(std::abs(yi.codes[k] - yf.codes[k]), 1) << k;
            differ += yi.codes[k] != yf.codes[k];
            ++total;
          }
        }
      }
    }
    EXPECT_LE(differ * 10, total) << differ << " of " << total;
  }
}

TEST(LutEpilogue, ConvSumsAreRequantizedToThePreActivationsCodesThenLookedUpInTheActivationsTable) {
  // A 1x1 Conv of one channel, weight code 1, with a fused HardSwish under the integer scheme. The plan
  // calibrates the conv's output before the HardSwish (its own QParams, pre), and every output code is
  // y.quantize(hardswish(pre.dequantize(p))) with p = clamp(requantize(acc, x.scale * w.scale / pre.scale) +
  // pre.zp): checked for every input code, p within gemmlowp's rounding of the exact product.
  GraphBuilder b;
  auto x = b.input("x", {1, 1, 16, 16});
  Tensor wt(DataType::kFloat32, {1, 1, 1, 1});
  wt.f = {0.5f};
  auto w = b.constant("w", wt);
  auto c = b.node("Conv", {x, w}, "c", {1, 1, 16, 16});
  b.output(b.node("HardSwish", {c}, "y", {1, 1, 16, 16}));
  Graph g = b.build();
  lower(g);
  ASSERT_EQ(g.nodes.size(), 1u);
  PlanRequest req;
  req.spec.model = Precision::kInt8;
  req.quant.calibration.method = CalibrationMethod::kMinMax;
  req.calibration_count = 4;
  PrecisionPlan plan = build_plan(g, req);
  const Node& n = g.nodes[0];
  ASSERT_TRUE(plan.layers.count(n.name));
  const LayerQuant& L = plan.layers.at(n.name);
  ASSERT_TRUE(L.lut_epilogue);
  EXPECT_FALSE(L.float_epilogue);
  // pre: the min-max range of 0.5 * x over the calibration inputs, not the HardSwish output's range.
  const auto stats = collect_statistics(g, synthetic_samples(g, 4, req.seed));
  ASSERT_TRUE(stats.count(pre_activation_key(n.outputs[0])));
  const TensorStats& ps = stats.at(pre_activation_key(n.outputs[0]));
  const QParams& yq = plan.values.at(n.outputs[0]);
  EXPECT_LT(ps.min(), -0.5f);
  // Its grid spans at most that range (less where the output code no longer changes: table_input_range).
  EXPECT_LE(L.pre_activation.scale, (ps.max() - std::min(0.0f, ps.min())) / 255.0f * (1 + 1e-6));
  EXPECT_NE(L.pre_activation.scale, yq.scale);
  Int8Tensor xt;
  xt.shape = {1, 1, 16, 16};
  xt.qparams = plan.values.at(n.inputs[0]);
  for (int k = 0; k < 256; ++k) xt.codes.push_back(xt.qparams.qmin() + k);
  Shape out_shape;
  const std::vector<int32_t> got = run_int8_layer(g, n, plan, xt, nullptr, nullptr, out_shape);
  const QParams& pre = L.pre_activation;
  const double ratio = static_cast<double>(L.acc_scale[0]) / pre.scale;
  for (int k = 0; k < 256; ++k) {
    const int64_t acc =
        static_cast<int64_t>(xt.codes[static_cast<size_t>(k)] - xt.qparams.zero_point) * L.weight_q[0] +
        L.bias_folded[0] + static_cast<int64_t>(xt.qparams.zero_point) * L.weight_q[0];
    // The sum in the pre-activation's codes: the ISA's requantize (gemmlowp's two roundings: within half a
    // code of the exact product, plus 2^-(shift+1) for the first rounding when it shifts right).
    // Clamped to the table's window of int16 codes (quant::refined_table_grid).
    const int64_t p =
        std::clamp<int64_t>(num::requantize_unsaturated(static_cast<int32_t>(acc), L.requant[0].multiplier,
                                                        L.requant[0].shift, pre.zero_point),
                            L.clamp_min, L.clamp_max);
    const double v = static_cast<double>(acc) * ratio + pre.zero_point;
    if (v > L.clamp_min && v < L.clamp_max) {
      const int32_t sh = L.requant[0].shift;
      EXPECT_LE(std::fabs(static_cast<double>(p) - v), 0.5 + (sh > 0 ? std::ldexp(0.5, -sh) : 0.0) + 1e-6)
          << k;
    }
    const float pr = pre.dequantize(static_cast<int32_t>(p));
    const float hs = pr * std::min(std::max(pr / 6.0f + 0.5f, 0.0f), 1.0f);
    EXPECT_EQ(got[static_cast<size_t>(k)], yq.quantize(hs))
        << "input code " << xt.codes[static_cast<size_t>(k)];
  }
}

TEST(LutEpilogue, TheTablesInputGridSpansOnlyWhereTheOutputCodeChanges) {
  // table_input_range: HardSwish is 0 below -3, HardSigmoid constant outside [-3, 3], a Sigmoid's tails round
  // to y's first and last codes: the narrowed range drops those parts (less one step of the narrowed grid),
  // and every input of the calibrated range clamped to it gives the output code the input itself gives.
  GraphBuilder b;
  auto x = b.input("x", {1, 1, 2, 2});
  b.output(b.node("Conv", {x, b.random_constant("w", {1, 1, 1, 1}, 1)}, "y", {1, 1, 2, 2}));
  const Graph g = b.build();
  const Node& n = g.nodes[0];
  struct Case {
    const char* act;
    ClipRange r, y;        // calibrated input range, output range
    float lo_max, hi_min;  // the narrowed range's ends at most / at least
  };
  const Case cases[] = {{"HardSwish", {-8, 6}, {-0.375f, 6}, -2.9f, 5.9f},
                        {"HardSigmoid", {-8, 8}, {0, 1}, -2.9f, 2.9f},
                        {"Sigmoid", {-20, 20}, {0, 1}, -5.0f, 5.0f}};
  for (const Case& c : cases) {
    Node m = n;
    m.attrs[kActivation] = testing::attr_s(c.act);
    if (std::string(c.act) == "HardSigmoid") {
      m.attrs[kAlpha] = testing::attr_f(1.0f / 6);
      m.attrs[kBeta] = testing::attr_f(0.5f);
    }
    const QParams y = qparams_for_range(c.y, false, isa::DType::kUint8);
    const ClipRange t = table_input_range(m, c.act, c.r, y);
    EXPECT_GT(t.lo, c.r.lo + 1.0f) << c.act;
    EXPECT_LT(t.hi, c.r.hi - (std::string(c.act) == "HardSwish" ? -1.0f : 1.0f)) << c.act;
    EXPECT_LE(t.lo, c.lo_max) << c.act;
    EXPECT_GE(t.hi, c.hi_min) << c.act;
    const std::vector<int32_t> table =
        epilogue_lut(m, c.act, qparams_for_range(t, false, isa::DType::kUint8), y);
    const QParams pre = qparams_for_range(t, false, isa::DType::kUint8);
    for (int i = 0; i <= 1000; ++i) {
      const float v = c.r.lo + (c.r.hi - c.r.lo) * static_cast<float>(i) / 1000;
      if (v >= t.lo && v <= t.hi) continue;  // inside: rounded to the grid as any value
      const float f = std::string(c.act) == "HardSwish"     ? num::hard_swish(v)
                      : std::string(c.act) == "HardSigmoid" ? num::hard_sigmoid(v, 1.0f / 6, 0.5f)
                                                            : num::sigmoid(v);
      EXPECT_EQ(table[static_cast<size_t>(pre.quantize(v) - pre.qmin())], y.quantize(f)) << c.act << " " << v;
    }
  }
}

TEST(LutEpilogue, ThePreActivationIsA16BitCodeOnTheNarrowed8BitGridRefinedFourTimes) {
  // A Conv + Sigmoid / HardSwish: the table reads int16 codes whose grid holds every code of the 8-bit grid
  // (scale / 4, the same real value at code base + 4 (q8 - q8.qmin)), clamped to a window of 4 * 255 + 1
  // codes from -510, with one table entry per code. Against the exact fp32 activation of the exact
  // pre-activation, the refined table's output codes are never further and, summed over a sweep of the
  // range, closer than the 8-bit table's (a Sigmoid's steep middle moves up to three output codes per
  // 8-bit input code).
  for (const char* act : {"Sigmoid", "HardSwish"}) {
    GraphBuilder b;
    auto x = b.input("x", {1, 4, 8, 8});
    auto c = b.node("Conv", {x, b.random_constant("w", {4, 4, 3, 3}, 1, -1.0f, 1.0f)}, "c", {1, 4, 6, 6});
    b.output(b.node(act, {c}, "y", {1, 4, 6, 6}));
    Graph g = b.build();
    lower(g);
    PlanRequest req;
    req.spec.model = Precision::kInt8;
    req.calibration_count = 4;
    const PrecisionPlan plan = build_plan(g, req);
    const Node* conv = nullptr;
    for (const Node& m : g.nodes)
      if (m.op_type == "Conv") conv = &m;
    ASSERT_NE(conv, nullptr);
    const Node& n = *conv;
    ASSERT_EQ(n.attr_string(kActivation, ""), act);
    const LayerQuant& L = plan.layers.at(n.name);
    ASSERT_TRUE(L.lut_epilogue) << act;
    const QParams& pre = L.pre_activation;
    const QParams& y = plan.values.at(n.outputs[0]);
    EXPECT_EQ(pre.dtype, isa::DType::kInt16) << act;
    EXPECT_EQ(kLutEpilogueRefine, 4);
    EXPECT_EQ(L.clamp_min, -510) << act;
    EXPECT_EQ(L.clamp_max, -510 + 1020) << act;
    ASSERT_EQ(L.epilogue_lut.size(), 1021u) << act;
    // The 8-bit grid it refines: the narrowed range's QParams as the integer scheme had them.
    const auto stats = collect_statistics(g, synthetic_samples(g, 4, req.seed));
    const ClipRange r = table_input_range(
        n, act, choose_range(stats.at(pre_activation_key(n.outputs[0])), req.quant.calibration, false), y);
    const QParams q8 = qparams_for_range(r, false, req.quant.asymmetric_dtype);
    EXPECT_FLOAT_EQ(pre.scale * 4, q8.scale) << act;
    for (int k = 0; k < 256; ++k)
      EXPECT_FLOAT_EQ(pre.dequantize(-510 + 4 * k), q8.dequantize(q8.qmin() + k)) << act << " " << k;
    const std::vector<int32_t> t8 = epilogue_lut(n, act, q8, y);
    const auto f = [&](float v) {
      return std::string(act) == "Sigmoid" ? num::sigmoid(v) : num::hard_swish(v);
    };
    int64_t err8 = 0, err16 = 0;
    for (int i = 0; i <= 4000; ++i) {
      const float v =
          q8.dequantize(q8.qmin()) + (q8.dequantize(q8.qmax()) - q8.dequantize(q8.qmin())) * i / 4000;
      const int32_t exact = y.quantize(f(v));
      const int32_t c8 = std::clamp(q8.quantize(v), q8.qmin(), q8.qmax()) - q8.qmin();
      const int32_t c16 = std::clamp(pre.quantize(v), L.clamp_min, L.clamp_max) - L.clamp_min;
      const int32_t e8 = std::abs(t8[static_cast<size_t>(c8)] - exact);
      const int32_t e16 = std::abs(L.epilogue_lut[static_cast<size_t>(c16)] - exact);
      EXPECT_LE(e16, std::max(e8, 1)) << act << " " << v;
      err8 += e8, err16 += e16;
    }
    EXPECT_LT(2 * err16, err8) << act;
  }
}

TEST(LutEpilogue, TheFloatSchemeAndAPlanWithoutThePreActivationsStatisticsKeepTheFloatEpilogue) {
  GraphBuilder b;
  auto x = b.input("x", {1, 2, 4, 4});
  auto c = b.node("Conv", {x, b.random_constant("w", {2, 2, 1, 1}, 3)}, "c", {1, 2, 4, 4});
  b.output(b.node("Sigmoid", {c}, "y", {1, 2, 4, 4}));
  Graph g = b.build();
  lower(g);
  const Node* conv = nullptr;
  for (const Node& n : g.nodes)
    if (n.op_type == "Conv") conv = &n;
  ASSERT_NE(conv, nullptr);
  ASSERT_EQ(conv->attr_string(kActivation, ""), "Sigmoid");
  PrecisionSpec spec;
  spec.model = Precision::kInt8;
  const auto samples = synthetic_samples(g, 2, 7);
  auto stats = collect_statistics(g, samples);
  for (const bool with_pre : {true, false}) {
    for (const Int8Vector scheme : {Int8Vector::kInteger, Int8Vector::kFloat}) {
      PrecisionPlan plan = resolve_plan(g, spec);
      plan.int8_vector = scheme;
      if (!with_pre) stats.erase(pre_activation_key(conv->outputs[0]));
      quantize_plan(g, plan, stats, QuantOptions{});
      const LayerQuant& L = plan.layers.at(conv->name);
      const bool lut = with_pre && scheme == Int8Vector::kInteger;
      EXPECT_EQ(L.lut_epilogue, lut);
      EXPECT_EQ(L.float_epilogue, !lut);
      EXPECT_EQ(L.epilogue_lut.size(),
                lut ? static_cast<size_t>(lut_epilogue_entries(kLutEpilogueRefine)) : 0u);
    }
  }
}

}  // namespace
}  // namespace npusim::compiler::quant
