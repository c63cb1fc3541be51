// transposes-after-matmuls and scalar-ops-first (compiler/passes/data_movement_last.cpp): torch's batch_first
// multi-head attention at batch 2 -- x [B, S, D] transposed to [S, B, D] before the QKV projection, Q cut
// out, its heads split by view(S, B * H, dh) and brought outside, then scaled -- gets its projection before
// the Transpose and its scale before the head split, computing the same values bit for bit.
#include <gtest/gtest.h>

#include "compiler/passes/lowered.h"
#include "compiler/passes/passes.h"
#include "tests/compiler/passes/graph_builder.h"

namespace npusim::compiler::testing {
namespace {

constexpr int64_t kB = 2, kS = 5, kH = 3, kDh = 4, kD = kH * kDh;

Graph batch_first_q(float scale, int64_t kB = 2) {
  GraphBuilder b;
  auto x = b.input("x", {kB, kS, kD});
  b.node("Transpose", {x}, "xt", {kS, kB, kD}, {{"perm", attr_ints({1, 0, 2})}});
  b.node("MatMul", {"xt", b.random_constant("w", {kD, 3 * kD}, 3)}, "qkv", {kS, kB, 3 * kD});
  b.node("Slice", {"qkv", b.ints("start", {0}), b.ints("end", {kD}), b.ints("axes", {2})}, "q", {kS, kB, kD});
  b.node("Reshape", {"q", b.ints("heads", {kS, kB * kH, kDh})}, "qr", {kS, kB * kH, kDh});
  b.node("Transpose", {"qr"}, "qt", {kB * kH, kS, kDh}, {{"perm", attr_ints({1, 0, 2})}});
  b.node("Div", {"qt", b.scalar("scale", scale)}, "y", {kB * kH, kS, kDh});
  b.output("y");
  return b.build();
}

// The node reading value v (the first), or nullptr.
const Node* reader(const Graph& g, const std::string& v) {
  for (const Node& n : g.nodes)
    for (const auto& in : n.inputs)
      if (in == v) return &n;
  return nullptr;
}

TEST(DataMovementLast, TheProjectionRunsBeforeTheBatchTransposeAndTheScaleBeforeTheHeadSplit) {
  const Graph before = batch_first_q(2.8284271f);
  Graph g = before;
  passes::transposes_after_matmuls(g);
  passes::scalar_ops_first(g);
  g.verify();
  // The MatMul reads x itself; the Transpose that fed it now reads the MatMul's [B, S, 3D] rows.
  const Node* m = reader(g, "x");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->op_type, "MatMul");
  EXPECT_EQ(g.value(m->outputs[0]).shape, (Shape{kB, kS, 3 * kD}));
  EXPECT_EQ(reader(g, m->outputs[0])->op_type, "Transpose");
  // The Div reads the Slice's output; the Reshape and Transpose move its result, and write y.
  const Node* d = reader(g, "q");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->op_type, "Div");
  EXPECT_EQ(g.value(d->outputs[0]).shape, (Shape{kS, kB, kD}));
  const Node* r = reader(g, d->outputs[0]);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->op_type, "Reshape");
  const Node* t = reader(g, r->outputs[0]);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->op_type, "Transpose");
  EXPECT_EQ(t->outputs[0], "y");
  // Each element computed by the same operations: bit for bit.
  EXPECT_TRUE(same_outputs(before, g, 0.0));
}

TEST(DataMovementLast, AScaleWhoseOperandHasAnotherReaderAndAMatMulWithRuntimeWeightsStayWhereTheyAre) {
  GraphBuilder b;
  auto x = b.input("x", {kS, kB, kD});
  auto w = b.input("w", {kD, kD});
  b.node("Transpose", {x}, "xt", {kB, kS, kD}, {{"perm", attr_ints({1, 0, 2})}});
  b.node("MatMul", {"xt", w}, "y", {kB, kS, kD});
  b.node("Transpose", {"y"}, "t", {kS, kB, kD}, {{"perm", attr_ints({1, 0, 2})}});
  b.node("Mul", {"t", b.scalar("two", 2.0f)}, "z", {kS, kB, kD});
  b.node("Add", {"t", "z"}, "out", {kS, kB, kD});
  b.output("out");
  const Graph before = b.build();
  Graph g = before;
  passes::transposes_after_matmuls(g);
  passes::scalar_ops_first(g);
  EXPECT_EQ(reader(g, "x")->op_type, "Transpose");
  EXPECT_EQ(reader(g, "xt")->op_type, "MatMul");
  EXPECT_EQ(g.value("t").shape, (Shape{kS, kB, kD}));
  EXPECT_EQ(find_node(g, "Mul")->inputs[0], "t");
  EXPECT_TRUE(same_outputs(before, g, 0.0));
}

TEST(DataMovementLast, AtBatchOneTheScaleStaysAfterTheHeadSplitItReadsAsAView) {
  // [S, 1, D] -> [S, H, dh] only splits a dim: the scale's reader reads the head split in place already.
  const Graph before = batch_first_q(2.8284271f, 1);
  Graph g = before;
  passes::transposes_after_matmuls(g);
  passes::scalar_ops_first(g);
  // The Transpose to [S, 1, D] moves no row (it is free): the projection stays after it.
  EXPECT_EQ(reader(g, "x")->op_type, "Transpose");
  EXPECT_EQ(reader(g, "qt")->op_type, "Div");
  EXPECT_EQ(reader(g, "q")->op_type, "Reshape");
}

}  // namespace
}  // namespace npusim::compiler::testing
