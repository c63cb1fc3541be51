// SmoothQuant (compiler/passes/smoothquant.h): the smoothed graph computes what the original computes (fp32,
// within 1e-5 of each output's largest magnitude), with alpha 0.5 every smoothed channel's activation range
// equals its weight range (max|x_j| / s_j = max|w_j| s_j = sqrt(max|x_j| max|w_j|)), and a LayerNormalization
// whose output a residual Add also reads (a post-LN block) is left alone and named.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "compiler/passes/smoothquant.h"
#include "compiler/quant/calibration.h"
#include "tests/compiler/passes/graph_builder.h"

namespace npusim::compiler::testing {
namespace {

using passes::smooth_linear_inputs;

// x [1, 8, 16] (channel j scaled by 3^(j/3): outlier channels, as transformers' activations have them)
// -> LayerNormalization (scale 1 + j, bias) -> MatMul [16, 32] and -> Transpose (1, 0, 2) -> MatMul [16, 16].
// With `residual`, the norm's output is also added to the first MatMul's output (post-LN).
Graph pre_ln_block(bool residual) {
  GraphBuilder b;
  const std::string x = b.input("x", {1, 8, 16});
  std::vector<float> scale(16), bias = uniform(16, 4);
  for (int j = 0; j < 16; ++j)
    scale[static_cast<size_t>(j)] = static_cast<float>((1 + j) * std::pow(3.0, j / 3.0));
  const std::string y = b.node("LayerNormalization",
                               {x, b.constant("ln_scale", Tensor::from_floats({16}, scale)),
                                b.constant("ln_bias", Tensor::from_floats({16}, bias))},
                               "y", {1, 8, 16}, {{"axis", attr_i(-1)}, {"epsilon", attr_f(1e-5f)}});
  const std::string h = b.node("MatMul", {y, b.random_constant("w1", {16, 32}, 5)}, "h", {1, 8, 32});
  const std::string t = b.node("Transpose", {y}, "t", {8, 1, 16}, {{"perm", attr_ints({1, 0, 2})}});
  const std::string k = b.node("MatMul", {t, b.random_constant("w2", {16, 16}, 6)}, "k", {8, 1, 16});
  b.output(k);
  if (residual) {
    b.output(b.node("Add", {b.node("MatMul", {y, b.random_constant("w3", {16, 16}, 7)}, "p", {1, 8, 16}), y},
                    "r", {1, 8, 16}));
  }
  b.output(h);
  return b.build();
}

quant::TensorStats stats_of(const Graph& g, const std::string& value) {
  std::vector<quant::Sample> samples;
  for (uint32_t seed = 1; seed <= 4; ++seed) samples.push_back(random_inputs(g, seed));
  return quant::collect_statistics(g, samples).at(value);
}

TEST(SmoothQuant, SmoothedPreLnBlockComputesTheSameAndEqualisesEachChannelsActivationAndWeightRange) {
  const Graph before = pre_ln_block(false);
  Graph g = before;
  const std::vector<double> xmax = stats_of(g, "y").last_dim_max_abs();
  ASSERT_EQ(xmax.size(), 16u);
  const passes::Smoothing s = smooth_linear_inputs(
      g, 0.5, [&](const std::string& v) { return v == "y" ? xmax : std::vector<double>{}; });
  g.verify();
  ASSERT_EQ(s.layers.size(), 1u);
  EXPECT_TRUE(s.skipped.empty());
  EXPECT_EQ(s.layers[0].linears.size(), 2u);
  EXPECT_GT(s.layers[0].max_scale / s.layers[0].min_scale, 10.0);
  EXPECT_TRUE(same_outputs(before, g, 1e-5));
  // After smoothing, channel j of the norm's output ranges over max|x_j| / s_j, and the rows j of both
  // MatMuls over max|w_j| s_j: with alpha 0.5 the two are equal.
  const std::vector<double> smoothed = stats_of(g, "y").last_dim_max_abs();
  for (int64_t j = 0; j < 16; ++j) {
    double w = 0;
    for (const Node& n : g.nodes) {
      if (n.op_type != "MatMul") continue;
      const Tensor& t = *g.value(n.inputs[1]).constant;
      for (int64_t c = 0; c < t.shape[1]; ++c) w = std::max(w, std::fabs(double(t.f[j * t.shape[1] + c])));
    }
    EXPECT_NEAR(smoothed[static_cast<size_t>(j)] / w, 1.0, 1e-4) << "channel " << j;
  }
}

TEST(SmoothQuant, ANormWhoseOutputAResidualAddAlsoReadsIsLeftAloneAndNamed) {
  const Graph before = pre_ln_block(true);
  Graph g = before;
  const passes::Smoothing s =
      smooth_linear_inputs(g, 0.5, [&](const std::string&) { return std::vector<double>(16, 1.0); });
  EXPECT_TRUE(s.layers.empty());
  ASSERT_EQ(s.skipped.size(), 1u);
  EXPECT_NE(s.skipped[0].reason.find("also read by Add"), std::string::npos) << s.skipped[0].reason;
  EXPECT_EQ(g.value("ln_scale").constant->f, before.value("ln_scale").constant->f);
}

}  // namespace
}  // namespace npusim::compiler::testing
