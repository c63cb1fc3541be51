#include <gtest/gtest.h>

#include "compiler/passes/passes.h"
#include "tests/compiler/passes/graph_builder.h"

namespace npusim::compiler::testing {
namespace {

// x.view(x.size(0), -1) as exporters emit it: Shape -> Gather -> Unsqueeze -> Concat -> Reshape.
Graph shape_arithmetic_graph() {
  GraphBuilder b;
  auto x = b.input("x", {2, 3, 4, 5});
  auto s = b.node("Shape", {x}, "s", {4}, {}, DataType::kInt64);
  auto i0 = b.constant("i0", Tensor::scalar_int(DataType::kInt64, 0));
  auto n = b.node("Gather", {s, i0}, "n", {}, {{"axis", attr_i(0)}}, DataType::kInt64);
  auto n1 = b.node("Unsqueeze", {n, b.ints("ax0", {0})}, "n1", {1}, {}, DataType::kInt64);
  auto shape =
      b.node("Concat", {n1, b.ints("minus1", {-1})}, "shape", {2}, {{"axis", attr_i(0)}}, DataType::kInt64);
  auto y = b.node("Reshape", {x, shape}, "y", {2, 60});
  b.output(y);
  return b.build();
}

TEST(FoldConstants, ShapeGatherUnsqueezeConcatCollapsesIntoReshapesConstantShape) {
  Graph before = shape_arithmetic_graph();
  Graph g = before;
  passes::fold_constants(g);
  g.verify();
  ASSERT_EQ(g.nodes.size(), 1u);
  EXPECT_EQ(g.nodes[0].op_type, "Reshape");
  const Value& shape = g.value(g.nodes[0].inputs[1]);
  ASSERT_TRUE(shape.is_constant());
  EXPECT_EQ(shape.constant->to_int_vector(), (std::vector<int64_t>{2, -1}));
  EXPECT_TRUE(same_outputs(before, g));
}

TEST(FoldConstants, ConstantNodeCastAndArithmeticOnConstantsBecomeOneConstant) {
  GraphBuilder b;
  auto x = b.input("x", {4});
  Tensor three = Tensor::from_ints(DataType::kInt64, {4}, {1, 2, 3, 4});
  auto c = b.node("Constant", {}, "c", {4}, {{"value", Attribute{three}}}, DataType::kInt64);
  auto cf = b.node("Cast", {c}, "cf", {4}, {{"to", attr_i(1)}});
  auto twice = b.node("Mul", {cf, b.scalar("two", 2.0f)}, "twice", {4});
  auto y = b.node("Add", {x, twice}, "y", {4});
  b.output(y);
  Graph before = b.build();
  Graph g = before;
  passes::fold_constants(g);
  g.verify();
  ASSERT_EQ(g.nodes.size(), 1u);
  EXPECT_EQ(g.nodes[0].op_type, "Add");
  const Tensor* t = g.value(g.nodes[0].inputs[1]).constant.get();
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->to_float_vector(), (std::vector<float>{2, 4, 6, 8}));
  EXPECT_TRUE(same_outputs(before, g));
}

TEST(FoldConstants, ShapesLeftOpenBehindShapeArithmeticAreFilledInOnceItFolds) {
  // x[:, : x.shape[1] // 2] then relu then flatten, with shape inference having given up after the Slice.
  GraphBuilder b;
  auto x = b.input("x", {2, 6});
  auto s = b.node("Shape", {x}, "s", {2}, {}, DataType::kInt64);
  auto w = b.node("Gather", {s, b.constant("one", Tensor::scalar_int(DataType::kInt64, 1))}, "w", {},
                  {{"axis", attr_i(0)}}, DataType::kInt64);
  auto h = b.node("Div", {w, b.constant("two", Tensor::scalar_int(DataType::kInt64, 2))}, "h", {}, {},
                  DataType::kInt64);
  auto end = b.node("Unsqueeze", {h, b.ints("ax", {0})}, "end", {1}, {}, DataType::kInt64);
  auto sl = b.node("Slice", {x, b.ints("start", {0}), end, b.ints("axes", {1})}, "sl", {});
  auto r = b.node("Relu", {sl}, "r", {});
  auto y = b.node("Reshape", {r, b.ints("flat", {-1})}, "y", {});
  b.output(y);
  for (const char* v : {"sl", "r", "y"}) b.graph().value(v).shape_known = false;
  Graph before = b.build();
  Graph g = before;
  passes::fold_constants(g);
  g.verify();
  EXPECT_EQ(g.nodes.size(), 3u);  // Slice, Relu, Reshape
  EXPECT_EQ(g.value("sl").shape, (Shape{2, 3}));
  EXPECT_EQ(g.value("r").shape, (Shape{2, 3}));
  EXPECT_EQ(g.value("y").shape, (Shape{6}));
  EXPECT_TRUE(g.value("y").fully_known());
  EXPECT_TRUE(same_outputs(before, g));
}

TEST(FoldConstants, ShapesBehindShapeArithmeticAreTheSameWithShapeOnlyWeights) {
  // shufflenet's chunk: x[:, x.shape[1] // 2 :] through a conv whose weight is 2^20 elements, shape
  // inference having given up after the Slice. A timing compile's shape-only weight (fed as zeros) refines
  // the conv's output as the weight's values do: its size counts no more than the values' does.
  auto graph = [](Tensor w) {
    GraphBuilder b;
    auto x = b.input("x", {1, 8, 32, 32});
    auto s = b.node("Shape", {x}, "s", {4}, {}, DataType::kInt64);
    auto c = b.node("Gather", {s, b.constant("one", Tensor::scalar_int(DataType::kInt64, 1))}, "c", {},
                    {{"axis", attr_i(0)}}, DataType::kInt64);
    auto h = b.node("Div", {c, b.constant("two", Tensor::scalar_int(DataType::kInt64, 2))}, "h", {}, {},
                    DataType::kInt64);
    auto start = b.node("Unsqueeze", {h, b.ints("ax", {0})}, "start", {1}, {}, DataType::kInt64);
    auto sl = b.node("Slice", {x, start, b.ints("end", {8}), b.ints("axes", {1})}, "sl", {});
    auto y = b.node("Conv", {sl, b.constant("w", std::move(w))}, "y", {});
    b.output(y);
    for (const char* v : {"sl", "y"}) b.graph().value(v).shape_known = false;
    return b.build();
  };
  const Shape ws = {256, 4, 32, 32};
  Graph values = graph(Tensor::from_floats(ws, uniform(num_elements(ws), 3)));
  Graph shapes = graph(Tensor::shape_only(DataType::kFloat32, ws));
  passes::fold_constants(values);
  passes::fold_constants(shapes);
  EXPECT_EQ(values.value("y").shape, (Shape{1, 256, 1, 1}));
  EXPECT_TRUE(values.value("y").fully_known());
  EXPECT_EQ(shapes.value("y").shape, values.value("y").shape);
  EXPECT_TRUE(shapes.value("y").fully_known());
}

TEST(FoldConstants, ShapesBehindRuntimeIndicesAndLabelsAreFilledInTheirValuesNeverSizeTheOutput) {
  // softmax cross-entropy written out (ONNX's *_expanded node tests): the log-probabilities' shape comes
  // back through a Reshape to Shape(x), and the loss reads runtime int64 labels; a Gather of runtime
  // indices too. Neither output's shape depends on the integers' values.
  GraphBuilder b;
  auto x = b.input("x", {3, 5});
  auto labels = b.input("labels", {3});
  b.graph().value(labels).dtype = DataType::kInt64;
  auto idx = b.input("idx", {2});
  b.graph().value(idx).dtype = DataType::kInt64;
  auto s = b.node("Shape", {x}, "s", {2}, {}, DataType::kInt64);
  auto lp = b.node("LogSoftmax", {x}, "lp", {3, 5});
  auto r = b.node("Reshape", {lp, s}, "r", {});
  auto loss = b.node("NegativeLogLikelihoodLoss", {r, labels}, "loss", {}, {{"reduction", attr_s("sum")}});
  auto rows = b.node("Gather", {x, idx}, "rows", {}, {{"axis", attr_i(0)}});
  b.output(loss);
  b.output(rows);
  for (const char* v : {"r", "loss", "rows"}) b.graph().value(v).shape_known = false;
  Graph before = b.build();
  Graph g = before;
  passes::fold_constants(g);
  EXPECT_TRUE(g.value("r").fully_known());
  EXPECT_EQ(g.value("loss").shape, (Shape{}));
  EXPECT_TRUE(g.value("loss").fully_known());
  EXPECT_EQ(g.value("rows").shape, (Shape{2, 5}));
  EXPECT_TRUE(g.value("rows").fully_known());
  // A Reshape to a runtime shape stays open: its integers size the output.
  GraphBuilder d;
  auto y = d.input("y", {6});
  auto to = d.input("to", {2});
  d.graph().value(to).dtype = DataType::kInt64;
  auto z = d.node("Reshape", {y, to}, "z", {});
  d.output(z);
  d.graph().value("z").shape_known = false;
  Graph open = d.build();
  passes::fold_constants(open);
  EXPECT_FALSE(open.value("z").fully_known());
}

TEST(FoldConstants, NodeReadingARuntimeValueStays) {
  GraphBuilder b;
  auto x = b.input("x", {3});
  auto y = b.node("Relu", {x}, "y", {3});
  b.output(y);
  Graph g = b.build();
  passes::fold_constants(g);
  EXPECT_EQ(g.nodes.size(), 1u);
}

TEST(Dce, RemovesUnreadNodesAndConstantsButKeepsGraphOutputs) {
  GraphBuilder b;
  auto x = b.input("x", {3});
  b.random_constant("unused_w", {3}, 1);
  auto w = b.random_constant("w", {3}, 2);
  auto dead1 = b.node("Mul", {x, w}, "dead1", {3});
  b.node("Relu", {dead1}, "dead2", {3});
  auto y = b.node("Sigmoid", {x}, "y", {3});
  b.output(y);
  Graph g = b.build();
  passes::eliminate_dead_nodes(g);
  g.verify();
  ASSERT_EQ(g.nodes.size(), 1u);
  EXPECT_EQ(g.nodes[0].op_type, "Sigmoid");
  EXPECT_FALSE(g.has_value("unused_w"));
  EXPECT_FALSE(g.has_value("w"));
  EXPECT_FALSE(g.has_value("dead1"));
}

}  // namespace
}  // namespace npusim::compiler::testing
