// Cross-layer equalisation: the equalised graph computes what the original computes, the ranges of each
// equalised pair's shared channels become equal (sqrt(r1 r2), Nagel et al. 2019), and pairs joined by an
// activation no per-channel scale passes through exactly (ReLU6, HardSwish) are left alone and named.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "compiler/passes/cross_layer_equalization.h"
#include "compiler/passes/lowered.h"
#include "compiler/passes/passes.h"
#include "tests/compiler/passes/graph_builder.h"

namespace npusim::compiler::testing {
namespace {

using passes::equalize_cross_layer;

// Conv weight [m, c, k, k] uniform in [-1, 1], output channel i multiplied by spread^(i - m/2): channel
// ranges a factor spread apart, as trained (or BN-folded) convolutions have them.
std::string spread_weight(GraphBuilder& b, const std::string& name, const Shape& shape, uint32_t seed,
                          double spread) {
  std::vector<float> v = uniform(num_elements(shape), seed);
  const int64_t m = shape[0], per = num_elements(shape) / m;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t k = 0; k < per; ++k)
      v[i * per + k] *= static_cast<float>(std::pow(spread, static_cast<double>(i - m / 2)));
  return b.constant(name, Tensor::from_floats(shape, v));
}

const Node& node_named(const Graph& g, const std::string& name) {
  for (const Node& n : g.nodes)
    if (n.name == name) return n;
  throw std::runtime_error("no node " + name);
}

// max |w| of conv `n`'s output channel i (out = true) or over the weights reading input channel i.
double channel_range(const Graph& g, const Node& n, int64_t i, bool out) {
  const Tensor& w = *g.value(n.inputs[1]).constant;
  const int64_t group = n.attr_int("group", 1), cpg = w.shape[1], taps = w.size() / (w.shape[0] * cpg);
  double r = 0;
  if (out) {
    for (int64_t k = 0; k < cpg * taps; ++k) r = std::max(r, std::fabs(double(w.f[i * cpg * taps + k])));
    return r;
  }
  const int64_t outs = w.shape[0] / group, grp = i / cpg;
  for (int64_t o = grp * outs; o < (grp + 1) * outs; ++o)
    for (int64_t t = 0; t < taps; ++t)
      r = std::max(r, std::fabs(double(w.f[(o * cpg + i % cpg) * taps + t])));
  return r;
}

// x -> pointwise conv (Relu) -> depthwise 3x3 conv (Relu) -> MaxPool -> pointwise conv -> y.
Graph pointwise_depthwise_pointwise() {
  GraphBuilder b;
  const std::string x = b.input("x", {1, 4, 8, 8});
  const std::string w1 = spread_weight(b, "w1", {8, 4, 1, 1}, 1, 3.0);
  const std::string b1 = b.random_constant("b1", {8}, 2);
  const std::string w2 = spread_weight(b, "w2", {8, 1, 3, 3}, 3, 0.5);
  const std::string b2 = b.random_constant("b2", {8}, 4);
  const std::string w3 = b.random_constant("w3", {5, 8, 1, 1}, 5);
  const std::string h1 = b.node("Conv", {x, w1, b1}, "h1", {1, 8, 8, 8});
  const std::string r1 = b.node("Relu", {h1}, "r1", {1, 8, 8, 8});
  const std::string h2 = b.node("Conv", {r1, w2, b2}, "h2", {1, 8, 8, 8},
                                {{"group", attr_i(8)}, {"pads", attr_ints({1, 1, 1, 1})}});
  const std::string r2 = b.node("Relu", {h2}, "r2", {1, 8, 8, 8});
  const std::string p2 = b.node("MaxPool", {r2}, "p2", {1, 8, 4, 4},
                                {{"kernel_shape", attr_ints({2, 2})}, {"strides", attr_ints({2, 2})}});
  const std::string y = b.node("Conv", {p2, w3}, "y", {1, 5, 4, 4});
  b.output(y);
  return b.build();
}

TEST(CrossLayerEqualization, PointwiseDepthwisePointwiseComputesTheSameAndEqualisesEachPairsRanges) {
  const Graph before = pointwise_depthwise_pointwise();
  Graph g = before;
  lower(g);  // the Relus become the convs' epilogues, the layout pass adds NHWC conversions
  const passes::Equalization e = equalize_cross_layer(g);
  g.verify();
  ASSERT_EQ(e.pairs.size(), 2u);
  EXPECT_TRUE(e.skipped.empty());
  EXPECT_EQ(e.pairs[0].between, "Relu");
  EXPECT_EQ(e.pairs[1].between, "Relu, MaxPool");
  EXPECT_TRUE(same_outputs(before, g, 1e-5));
  // Both pairs settled together: the shared channels' ranges are equal in each pair.
  for (const passes::EqualizedPair& p : e.pairs) {
    SCOPED_TRACE(p.first + " -> " + p.second);
    const Node& n1 = node_named(g, p.first);
    const Node& n2 = node_named(g, p.second);
    for (int64_t i = 0; i < 8; ++i) {
      const double r1 = channel_range(g, n1, i, true), r2 = channel_range(g, n2, i, false);
      EXPECT_NEAR(r1 / r2, 1.0, 1e-3) << "channel " << i;
    }
  }
  // The first conv's channels were 3^8 apart; equalised, their spread is the square root of the product's.
  EXPECT_GT(e.pairs[0].max_scale / e.pairs[0].min_scale, 10.0);
  // The old weights are gone (nothing reads them), so no weight memory is counted twice.
  EXPECT_FALSE(g.has_value("w1"));
  EXPECT_FALSE(g.has_value("w2"));
}

TEST(CrossLayerEqualization, Relu6AndHardSwishPairsAreSkippedWithTheirReasonAndLeftUnchanged) {
  for (const char* act : {"Clip", "HardSwish"}) {
    SCOPED_TRACE(act);
    GraphBuilder b;
    const std::string x = b.input("x", {1, 4, 6, 6});
    const std::string w1 = spread_weight(b, "w1", {6, 4, 3, 3}, 1, 3.0);
    const std::string w2 = b.random_constant("w2", {3, 6, 1, 1}, 2);
    const std::string h1 = b.node("Conv", {x, w1}, "h1", {1, 6, 6, 6}, {{"pads", attr_ints({1, 1, 1, 1})}});
    std::string a;
    if (std::string(act) == "Clip") {
      a = b.node("Clip", {h1, b.scalar("lo", 0.0f), b.scalar("hi", 6.0f)}, "a", {1, 6, 6, 6});
    } else {
      a = b.node("HardSwish", {h1}, "a", {1, 6, 6, 6});
    }
    b.output(b.node("Conv", {a, w2}, "y", {1, 3, 6, 6}));
    Graph g = b.build();
    lower(g);
    const Graph lowered = g;
    const passes::Equalization e = equalize_cross_layer(g);
    EXPECT_TRUE(e.pairs.empty());
    ASSERT_EQ(e.skipped.size(), 1u);
    EXPECT_NE(e.skipped[0].reason.find(std::string(act) == "Clip" ? "Clip(0, 6)" : "HardSwish"),
              std::string::npos)
        << e.skipped[0].reason;
    for (size_t k = 0; k < g.nodes.size(); ++k) EXPECT_EQ(g.nodes[k].inputs, lowered.nodes[k].inputs);
  }
}

TEST(CrossLayerEqualization, ConvWhoseOutputHasTwoReadersOrAResidualIsNotEqualised) {
  GraphBuilder b;
  const std::string x = b.input("x", {1, 4, 6, 6});
  const std::string w1 = spread_weight(b, "w1", {4, 4, 1, 1}, 1, 3.0);
  const std::string w2 = b.random_constant("w2", {4, 4, 1, 1}, 2);
  const std::string h1 = b.node("Conv", {x, w1}, "h1", {1, 4, 6, 6});
  const std::string r1 = b.node("Relu", {h1}, "r1", {1, 4, 6, 6});
  const std::string h2 = b.node("Conv", {r1, w2}, "h2", {1, 4, 6, 6});
  b.output(b.node("Add", {h2, r1}, "y", {1, 4, 6, 6}));  // r1 is read twice: the block's skip path
  const Graph before = b.build();
  Graph g = before;
  lower(g);
  const passes::Equalization e = equalize_cross_layer(g);
  EXPECT_TRUE(e.pairs.empty());
  EXPECT_TRUE(g.has_value("w1"));
  EXPECT_TRUE(same_outputs(before, g, 1e-6));
}

}  // namespace
}  // namespace npusim::compiler::testing
