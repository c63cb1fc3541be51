#include <gtest/gtest.h>

#include <cmath>

#include "compiler/import/import.h"
#include "compiler/interp/interpreter.h"
#include "compiler/ops/op_table.h"

namespace npusim::compiler {
namespace {

// A one-node graph over float inputs named a, b, c... with output "y".
Graph single(const std::string& op, size_t n_inputs, std::map<std::string, Attribute> attrs = {},
             int64_t opset = 17) {
  Graph g;
  g.opset = opset;
  Node n;
  n.op_type = op;
  n.name = op + "_node";
  for (size_t k = 0; k < n_inputs; ++k) {
    std::string name(1, static_cast<char>('a' + k));
    g.ensure_value(name);
    g.inputs.push_back(name);
    n.inputs.push_back(name);
  }
  n.outputs = {"y"};
  n.attrs = std::move(attrs);
  g.ensure_value("y");
  g.outputs = {"y"};
  g.nodes.push_back(n);
  return g;
}

Attribute ints(std::vector<int64_t> v) { return Attribute{std::move(v)}; }
Attribute int1(int64_t v) { return Attribute{v}; }

TEST(Interpreter, AddBroadcastsRowAgainstColumn) {
  Graph g = single("Add", 2);
  auto out = interpret(
      g, {{"a", Tensor::from_floats({2, 1}, {10, 20})}, {"b", Tensor::from_floats({3}, {1, 2, 3})}});
  const Tensor& y = out.at("y");
  EXPECT_EQ(y.shape, (Shape{2, 3}));
  EXPECT_EQ(y.f, (std::vector<float>{11, 12, 13, 21, 22, 23}));
}

TEST(Interpreter, ConvWithOnesKernelSumsEachWindow) {
  // 4x4 input 0..15, 3x3 ones kernel, pad 1, stride 2: output (0,0) sums rows 0-1 x cols 0-1 = 0+1+4+5.
  Graph g = single("Conv", 2, {{"pads", ints({1, 1, 1, 1})}, {"strides", ints({2, 2})}});
  std::vector<float> x(16);
  for (int k = 0; k < 16; ++k) x[k] = static_cast<float>(k);
  auto out = interpret(g, {{"a", Tensor::from_floats({1, 1, 4, 4}, x)},
                           {"b", Tensor::from_floats({1, 1, 3, 3}, std::vector<float>(9, 1.0f))}});
  const Tensor& y = out.at("y");
  EXPECT_EQ(y.shape, (Shape{1, 1, 2, 2}));
  // (0,0): x[0..1][0..1] = 0+1+4+5 = 10; (0,1): rows 0-1, cols 1-3 = 1+2+3+5+6+7 = 24;
  // (1,0): rows 1-3, cols 0-1 = 4+5+8+9+12+13 = 51; (1,1): rows 1-3, cols 1-3 = 5+6+7+9+10+11+13+14+15 = 90.
  EXPECT_EQ(y.f, (std::vector<float>{10, 24, 51, 90}));
}

TEST(Interpreter, GroupedConvKeepsChannelsApart) {
  Graph g = single("Conv", 2, {{"group", int1(2)}});
  // Two channels of 1x1 images, 1x1 kernels with weights 2 and 3.
  auto out = interpret(g, {{"a", Tensor::from_floats({1, 2, 1, 1}, {5, 7})},
                           {"b", Tensor::from_floats({2, 1, 1, 1}, {2, 3})}});
  EXPECT_EQ(out.at("y").f, (std::vector<float>{10, 21}));
}

TEST(Interpreter, GemmTransposedBWithBias) {
  Graph g = single("Gemm", 3, {{"transB", int1(1)}});
  // A = [1 2], B^T rows = [1 0], [0 1], [1 1]  ->  A*B = [1 2 3]; + bias [10 20 30].
  auto out = interpret(g, {{"a", Tensor::from_floats({1, 2}, {1, 2})},
                           {"b", Tensor::from_floats({3, 2}, {1, 0, 0, 1, 1, 1})},
                           {"c", Tensor::from_floats({3}, {10, 20, 30})}});
  EXPECT_EQ(out.at("y").f, (std::vector<float>{11, 22, 33}));
}

TEST(Interpreter, SoftmaxAxisSemanticsChangeAtOpset13) {
  // Shape 1x2x2, axis 1. Opset 11 flattens [1, 4] and normalises all four values together; opset 13
  // normalises the two values along axis 1 only.
  std::vector<float> x{0, 0, 0, 0};
  auto o11 =
      interpret(single("Softmax", 1, {{"axis", int1(1)}}, 11), {{"a", Tensor::from_floats({1, 2, 2}, x)}});
  auto o13 =
      interpret(single("Softmax", 1, {{"axis", int1(1)}}, 13), {{"a", Tensor::from_floats({1, 2, 2}, x)}});
  for (float v : o11.at("y").f) EXPECT_FLOAT_EQ(v, 0.25f);
  for (float v : o13.at("y").f) EXPECT_FLOAT_EQ(v, 0.5f);
}

TEST(Interpreter, MaxPoolCeilModeAddsPartialWindow) {
  // 1x1x5 input, kernel 2, stride 2: floor mode gives 2 outputs, ceil mode 3 (last window = x[4] only).
  std::vector<float> x{1, 5, 2, 4, 3};
  auto fl = interpret(single("MaxPool", 1, {{"kernel_shape", ints({2})}, {"strides", ints({2})}}),
                      {{"a", Tensor::from_floats({1, 1, 5}, x)}});
  auto ce = interpret(
      single("MaxPool", 1, {{"kernel_shape", ints({2})}, {"strides", ints({2})}, {"ceil_mode", int1(1)}}),
      {{"a", Tensor::from_floats({1, 1, 5}, x)}});
  EXPECT_EQ(fl.at("y").f, (std::vector<float>{5, 4}));
  EXPECT_EQ(ce.at("y").f, (std::vector<float>{5, 4, 3}));
}

TEST(Interpreter, AveragePoolCountIncludePad) {
  // 1x1x2 input [2, 4], kernel 2, pad 1 each side, stride 1 -> windows [pad,2], [2,4], [4,pad].
  auto excl = interpret(single("AveragePool", 1, {{"kernel_shape", ints({2})}, {"pads", ints({1, 1})}}),
                        {{"a", Tensor::from_floats({1, 1, 2}, {2, 4})}});
  auto incl =
      interpret(single("AveragePool", 1,
                       {{"kernel_shape", ints({2})}, {"pads", ints({1, 1})}, {"count_include_pad", int1(1)}}),
                {{"a", Tensor::from_floats({1, 1, 2}, {2, 4})}});
  EXPECT_EQ(excl.at("y").f, (std::vector<float>{2, 3, 4}));
  EXPECT_EQ(incl.at("y").f, (std::vector<float>{1, 3, 2}));
}

TEST(Interpreter, IntegerArithmeticIsExact) {
  Graph g = single("Mul", 2);
  auto out = interpret(g, {{"a", Tensor::from_ints(DataType::kInt64, {2}, {int64_t{1} << 40, 3})},
                           {"b", Tensor::from_ints(DataType::kInt64, {2}, {3, -7})}});
  EXPECT_EQ(out.at("y").dtype, DataType::kInt64);
  EXPECT_EQ(out.at("y").i, (std::vector<int64_t>{3 * (int64_t{1} << 40), -21}));
}

TEST(Interpreter, UnsupportedOpAndMissingInputNameTheNode) {
  Graph g = single("TfIdfVectorizer", 1);
  try {
    interpret(g, {{"a", Tensor::scalar_float(1)}});
    FAIL();
  } catch (const InterpretError& e) {
    EXPECT_NE(std::string(e.what()).find("TfIdfVectorizer_node"), std::string::npos) << e.what();
  }
  EXPECT_THROW(interpret(single("Relu", 1), {}), InterpretError);
  // A float-only op fed an integer tensor fails cleanly instead of reading the wrong storage.
  EXPECT_THROW(interpret(single("Conv", 2), {{"a", Tensor(DataType::kInt64, {1, 1, 2, 2})},
                                             {"b", Tensor(DataType::kInt64, {1, 1, 1, 1})}}),
               InterpretError);
}

TEST(Interpreter, ResizeWithNonsenseRuntimeScalesOrSizesFailsNamingThem) {
  // Resize(x, roi, scales) with the scales a runtime input: a negative or huge scale is the data's error,
  // reported in one sentence, not an allocation of a negative or astronomical size.
  const Tensor x = Tensor::from_floats({1, 1, 2, 2}, {1, 2, 3, 4});
  const Tensor roi = Tensor::from_floats({0}, {});
  auto error_with = [&](const Tensor& scales) -> std::string {
    try {
      interpret(single("Resize", 3), {{"a", x}, {"b", roi}, {"c", scales}});
    } catch (const InterpretError& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_NE(error_with(Tensor::from_floats({4}, {1, 1, -2, 2})).find("scale -2 of axis 2 is not positive"),
            std::string::npos);
  EXPECT_NE(error_with(Tensor::from_floats({4}, {1, 1, 1e9f, 2})).find("gives more than"), std::string::npos);
  auto out =
      interpret(single("Resize", 3), {{"a", x}, {"b", roi}, {"c", Tensor::from_floats({4}, {1, 1, 2, 2})}});
  EXPECT_EQ(out.at("y").shape, (Shape{1, 1, 4, 4}));
}

TEST(Interpreter, DemoModelRunsAndExposesEveryIntermediate) {
  Graph g = builtin_model("demo");
  Tensor x(DataType::kFloat32, {1, 3, 32, 32});
  for (int64_t k = 0; k < x.size(); ++k) x.f[k] = std::sin(0.1f * static_cast<float>(k));
  int calls = 0;
  auto out = interpret(g, {{"input", x}}, [&](const Node&, const std::vector<const Tensor*>& outs) {
    ++calls;
    EXPECT_EQ(outs.size(), 1u);
  });
  EXPECT_EQ(calls, 12);
  ASSERT_EQ(out.at("logits").shape, (Shape{1, 10}));
  auto all = interpret_all(g, {{"input", x}});
  for (const auto& n : g.nodes) EXPECT_TRUE(all.count(n.outputs[0])) << n.outputs[0];
  // ReLU outputs are non-negative, and the final logits agree between the two entry points.
  for (float v : all.at("relu2.out").f) EXPECT_GE(v, 0.0f);
  EXPECT_EQ(all.at("logits").f, out.at("logits").f);
  // GlobalAveragePool really averages: channel 0 of pool.out is the mean of relu3.out channel 0.
  double s = 0;
  for (int k = 0; k < 64; ++k) s += all.at("relu3.out").f[k];
  EXPECT_NEAR(all.at("pool.out").f[0], s / 64, 1e-5);
}

TEST(Interpreter, AResizeWhoseAxesMultiplyBeyondATensorIsASentence) {
  // Each axis 2^24 long is within the per-axis bound; together 2^96 elements (runtime scales of a fuzzed
  // chain asked for such): the C++ library's own length error reached the user before.
  Graph g = single("Resize", 3);
  std::map<std::string, Tensor> in{{"a", Tensor::from_floats({1, 1, 1, 1}, {1.0f})},
                                   {"b", Tensor::from_floats({0}, {})},  // no roi
                                   {"c", Tensor::from_floats({4}, std::vector<float>(4, 16777216.0f))}};
  try {
    interpret(g, in);
    FAIL() << "expected an InterpretError";
  } catch (const InterpretError& e) {
    EXPECT_NE(std::string(e.what()).find("has more than"), std::string::npos) << e.what();
  }
}

TEST(OpTable, EveryRowHasAKernelAndPlacementsFollowTheUnits) {
  for (const auto& row : op_table()) EXPECT_TRUE(interpreter_supports(std::string(row.op))) << row.op;
  for (const char* op : {"Conv", "ConvTranspose", "Gemm", "MatMul"})
    EXPECT_EQ(find_op(op)->placement, Placement::kNpuMatrix) << op;
  for (const char* op :
       {"Relu", "Add", "MaxPool", "Softmax", "Concat", "Resize", "Transpose", "LayerNormalization"})
    EXPECT_EQ(find_op(op)->placement, Placement::kNpuVector) << op;
  for (const char* op : {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Dropout"})
    EXPECT_EQ(find_op(op)->placement, Placement::kFree) << op;
  for (const char* op : {"Shape", "Range", "Equal", "Not"})
    EXPECT_EQ(find_op(op)->placement, Placement::kHost) << op;
  EXPECT_EQ(find_op("Bernoulli"), nullptr);  // random: no kernel, no row
  EXPECT_EQ(to_string(Placement::kNpuMatrix), "npu-matrix");
}

}  // namespace
}  // namespace npusim::compiler
