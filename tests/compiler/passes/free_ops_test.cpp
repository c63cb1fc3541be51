#include <gtest/gtest.h>

#include <stdexcept>

#include "compiler/passes/passes.h"
#include "tests/compiler/passes/graph_builder.h"

namespace npusim::compiler::testing {
namespace {

TEST(FreeOps, IdentityAndDropoutAreRemovedAndReshapeIsAFreeAlias) {
  GraphBuilder b;
  auto x = b.input("x", {2, 6});
  auto i = b.node("Identity", {x}, "i", {2, 6});
  auto d = b.node("Dropout", {i}, "d", {2, 6});
  auto r = b.node("Reshape", {d, b.ints("shape", {3, 4})}, "r", {3, 4});
  b.output(b.node("Relu", {r}, "y", {3, 4}));
  Graph before = b.build();
  Graph g = before;
  passes::alias_free_ops(g);
  passes::assign_placement(g);
  g.verify();
  ASSERT_EQ(g.nodes.size(), 2u);
  EXPECT_EQ(g.nodes[0].op_type, "Reshape");
  EXPECT_EQ(g.nodes[0].inputs[0], "x");
  EXPECT_EQ(g.nodes[0].attr_string(kPlacement, ""), "free");
  EXPECT_EQ(g.nodes[1].attr_string(kPlacement, ""), "vector");
  EXPECT_TRUE(same_outputs(before, g));
}

// The attribute is text in the graph (it is written with the lowered model); the compiler reads it back
// as the op table's enum, and a value that is no placement is an internal error, not a default.
TEST(FreeOps, AssignedPlacementReadsTheAttributeAsTheOpTablesEnum) {
  GraphBuilder b;
  auto x = b.input("x", {2, 6});
  auto r = b.node("Reshape", {x, b.ints("shape", {3, 4})}, "r", {3, 4});
  b.output(b.node("Relu", {r}, "y", {3, 4}));
  Graph g = b.build();
  EXPECT_EQ(assigned_placement(g.nodes[0]), std::nullopt);
  passes::assign_placement(g);
  EXPECT_EQ(assigned_placement(g.nodes[0]), Placement::kFree);
  EXPECT_EQ(assigned_placement(g.nodes[1]), Placement::kNpuVector);
  g.nodes[1].attrs[kPlacement].value =
      std::string("npu-vector");  // to_string's spelling, not the attribute's
  EXPECT_THROW(assigned_placement(g.nodes[1]), std::logic_error);
}

// A Transpose that moves only dims of extent 1 leaves every byte where it was (torch's batch-first <->
// sequence-first swaps of a batch of one): a free alias, as a Reshape. One that reorders two dims of
// extent above 1 moves bytes and stays a copy on the vector unit.
TEST(FreeOps, ATransposeMovingOnlyUnitDimsIsAFreeAliasAndOneReorderingDataIsNot) {
  GraphBuilder b;
  auto x = b.input("x", {1, 5, 7});
  auto t1 = b.node("Transpose", {x}, "t1", {5, 1, 7}, {{"perm", attr_ints({1, 0, 2})}});
  auto t2 = b.node("Transpose", {t1}, "t2", {7, 1, 5}, {{"perm", attr_ints({2, 1, 0})}});
  auto u = b.node("Unsqueeze", {t2, b.ints("axes", {0})}, "u", {1, 7, 1, 5});
  auto t3 = b.node("Transpose", {u}, "t3", {7, 5, 1, 1}, {{"perm", attr_ints({1, 3, 0, 2})}});
  auto t4 = b.node("Transpose", {t3}, "t4", {5, 7, 1, 1}, {{"perm", attr_ints({1, 0, 2, 3})}});
  b.output(b.node("Relu", {t4}, "y", {5, 7, 1, 1}));
  Graph before = b.build();
  Graph g = before;
  passes::alias_free_ops(g);
  passes::assign_placement(g);
  g.verify();
  const auto placement = [&](const std::string& out) {
    for (const Node& n : g.nodes)
      if (n.outputs[0] == out) return n.attr_string(kPlacement, "");
    return std::string("(none)");
  };
  EXPECT_EQ(placement("t1"), "free");
  EXPECT_EQ(placement("t2"), "vector");  // 5 and 7 swap
  EXPECT_EQ(placement("t3"), "free");    // 7 before 5 kept, the ones move
  EXPECT_EQ(placement("t4"), "vector");
  EXPECT_TRUE(same_outputs(before, g));
}

TEST(FreeOps, IdentityProducingAGraphOutputStaysAsAFreeNode) {
  GraphBuilder b;
  auto x = b.input("x", {3});
  auto r = b.node("Relu", {x}, "r", {3});
  b.output(b.node("Identity", {r}, "y", {3}));
  Graph g = b.build();
  passes::alias_free_ops(g);
  passes::assign_placement(g);
  ASSERT_EQ(g.nodes.size(), 2u);
  EXPECT_EQ(g.nodes[1].attr_string(kPlacement, ""), "free");
}

TEST(FreeOps, APadOfZeroWidthsIsRemovedAndANonZeroOneStays) {
  // torchvision's DenseNet exports Pad(0, ..., 0) before each transition's AveragePool.
  GraphBuilder b;
  auto x = b.input("x", {1, 3, 4, 4});
  auto p = b.node("Pad", {x, b.ints("zeros", {0, 0, 0, 0, 0, 0, 0, 0})}, "p", {1, 3, 4, 4});
  auto r = b.node("Relu", {p}, "r", {1, 3, 4, 4});
  b.output(b.node("Pad", {r, b.ints("ones", {0, 0, 1, 1, 0, 0, 1, 1})}, "y", {1, 3, 6, 6}));
  Graph before = b.build();
  Graph g = before;
  passes::alias_free_ops(g);
  g.verify();
  ASSERT_EQ(g.nodes.size(), 2u);
  EXPECT_EQ(g.nodes[0].op_type, "Relu");
  EXPECT_EQ(g.nodes[0].inputs[0], "x");
  EXPECT_EQ(g.nodes[1].op_type, "Pad");
  EXPECT_TRUE(same_outputs(before, g));
}

TEST(Placement, FollowsTheOpTableAndItsConstraints) {
  GraphBuilder b;
  auto x = b.input("x", {2, 4});
  auto idx = b.input("idx", {3});
  auto m = b.node("MatMul", {x, b.random_constant("w", {4, 4}, 1)}, "m", {2, 4});
  auto gconst = b.node("Gather", {b.random_constant("table", {10, 4}, 2), idx}, "gc", {3, 4});
  auto grt = b.node("Gather", {m, idx}, "gr", {3, 4});
  auto sn = b.node("Sin", {grt}, "sn", {3, 4});
  b.output(gconst);
  b.output(sn);
  Graph g = b.build();
  passes::assign_placement(g);
  EXPECT_EQ(g.nodes[0].attr_string(kPlacement, ""), "matrix");
  EXPECT_EQ(g.nodes[1].attr_string(kPlacement, ""), "vector");  // constant table
  EXPECT_EQ(g.nodes[2].attr_string(kPlacement, ""), "host");    // runtime data and runtime indices
  EXPECT_EQ(g.nodes[3].attr_string(kPlacement, ""), "host");
}

TEST(Placement, NpuOpsAreVectorAndUnknownOpsGoToTheHost) {
  GraphBuilder b;
  auto x = b.input("x", {4});
  auto s = b.node("Silu", {x}, "s", {4}, {}, DataType::kFloat32, "npu");
  auto t = b.node("Gelu", {s}, "t", {4}, {}, DataType::kFloat32, "npu");
  auto u = b.node("FancyOp", {t}, "u", {4});
  b.output(b.node("Inverse", {u}, "y", {4}, {}, DataType::kFloat32, "com.microsoft"));
  Graph g = b.build();
  passes::assign_placement(g);
  EXPECT_EQ(g.nodes[0].attr_string(kPlacement, ""), "vector");
  EXPECT_EQ(g.nodes[1].attr_string(kPlacement, ""), "vector");
  EXPECT_EQ(g.nodes[2].attr_string(kPlacement, ""), "host");
  EXPECT_EQ(g.nodes[3].attr_string(kPlacement, ""), "host");
}

}  // namespace
}  // namespace npusim::compiler::testing
