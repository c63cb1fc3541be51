// decompose-recurrent: LSTM / GRU / RNN become one input-projection MatMul per direction and per-step
// recurrent MatMuls plus element-wise gates, computing what the interpreter's recurrent kernels compute
// (those are checked against ONNX's node tests).
#include <gtest/gtest.h>

#include "compiler/ops/recurrent.h"
#include "compiler/passes/passes.h"
#include "tests/compiler/passes/graph_builder.h"

namespace npusim::compiler::testing {
namespace {

struct Case {
  std::string op = "LSTM";
  int64_t seq = 5, batch = 2, input = 3, hidden = 4;
  std::string direction = "forward";
  int64_t layout = 0;
  bool bias = true, initial = false, peepholes = false;
  std::optional<float> clip;
  std::vector<std::string> activations;
  int64_t linear_before_reset = 0;
};

Graph recurrent_graph(const Case& c) {
  GraphBuilder b;
  const int64_t g = c.op == "LSTM" ? 4 : c.op == "GRU" ? 3 : 1, d = c.direction == "bidirectional" ? 2 : 1;
  const bool bl = c.layout == 1;
  auto x = b.input("x", bl ? Shape{c.batch, c.seq, c.input} : Shape{c.seq, c.batch, c.input});
  std::vector<std::string> in = {x, b.random_constant("W", {d, g * c.hidden, c.input}, 1),
                                 b.random_constant("R", {d, g * c.hidden, c.hidden}, 2)};
  in.push_back(c.bias ? b.random_constant("B", {d, 2 * g * c.hidden}, 3) : "");
  in.push_back("");
  const Shape state = bl ? Shape{c.batch, d, c.hidden} : Shape{d, c.batch, c.hidden};
  if (c.initial) {
    in.push_back(b.input("h0", state));
    if (c.op == "LSTM") in.push_back(b.input("c0", state));
  }
  if (c.peepholes) {
    if (!c.initial) in.push_back(""), in.push_back("");
    in.push_back(b.random_constant("P", {d, 3 * c.hidden}, 4));
  }
  std::map<std::string, Attribute> attrs = {
      {"hidden_size", attr_i(c.hidden)}, {"direction", attr_s(c.direction)}, {"layout", attr_i(c.layout)}};
  if (c.clip) attrs["clip"] = attr_f(*c.clip);
  if (!c.activations.empty()) attrs["activations"] = Attribute{c.activations};
  if (c.op == "GRU") attrs["linear_before_reset"] = attr_i(c.linear_before_reset);
  b.node(c.op, in, "y", bl ? Shape{c.batch, c.seq, d, c.hidden} : Shape{c.seq, d, c.batch, c.hidden}, attrs);
  Node& n = b.graph().nodes.back();
  n.outputs.push_back("y_h");
  b.graph().ensure_value("y_h") = Value{"y_h", DataType::kFloat32, state, true, nullptr, {}, false};
  b.output("y");
  b.output("y_h");
  if (c.op == "LSTM") {
    n.outputs.push_back("y_c");
    b.graph().ensure_value("y_c") = Value{"y_c", DataType::kFloat32, state, true, nullptr, {}, false};
    b.output("y_c");
  }
  return b.build();
}

void expect_decomposed(const Case& c) {
  SCOPED_TRACE(c.op + " " + c.direction + " layout " + std::to_string(c.layout));
  const Graph before = recurrent_graph(c);
  Graph g = before;
  passes::decompose_recurrent(g);
  g.verify();
  EXPECT_EQ(count_ops(g, c.op), 0);
  const int64_t d = c.direction == "bidirectional" ? 2 : 1;
  // One input projection per direction over all steps ([seq * batch, input] rows), then the recurrent
  // products: one per step (GRU without linear_before_reset: two), the first step's folded away when
  // the initial state is zero.
  int projections = 0;
  for (const auto& n : g.nodes)
    if (n.op_type == "MatMul" && g.value(n.inputs[0]).shape == Shape{c.seq * c.batch, c.input}) ++projections;
  EXPECT_EQ(projections, d);
  const int per_step = c.op == "GRU" && c.linear_before_reset == 0 ? 2 : 1;
  const int64_t steps = c.initial ? c.seq : c.seq - 1;
  EXPECT_EQ(count_ops(g, "MatMul"), d + d * per_step * steps + (c.initial || per_step == 1 ? 0 : d));
  EXPECT_TRUE(same_outputs(before, g, 1e-5));
}

TEST(DecomposeRecurrent, LstmForwardIsOneProjectionAndPerStepProducts) { expect_decomposed({}); }

TEST(DecomposeRecurrent, LstmBidirectionalWithStatesPeepholesAndClip) {
  Case c;
  c.direction = "bidirectional", c.initial = true, c.peepholes = true, c.clip = 0.7f;
  expect_decomposed(c);
}

TEST(DecomposeRecurrent, LstmReverseBatchMajorWithOtherActivations) {
  Case c;
  c.direction = "reverse", c.layout = 1, c.bias = false;
  c.activations = {"HardSigmoid", "LeakyRelu", "Softsign"};
  expect_decomposed(c);
}

TEST(DecomposeRecurrent, GruBothResetForms) {
  for (int64_t lbr : {0, 1}) {
    Case c;
    c.op = "GRU", c.linear_before_reset = lbr, c.direction = "bidirectional", c.initial = lbr == 1;
    expect_decomposed(c);
  }
}

TEST(DecomposeRecurrent, RnnWithReluAndAffine) {
  Case c;
  c.op = "RNN", c.direction = "bidirectional", c.activations = {"Relu", "Affine"}, c.initial = true;
  expect_decomposed(c);
}

TEST(DecomposeRecurrent, ShapeOnlyWeightsGiveTheSameStructure) {
  // A timing compile's weights carry no values: the decomposition is the same, node for node.
  const Graph with = recurrent_graph({});
  Graph without = with;
  for (const char* w : {"W", "R", "B"}) {
    const Tensor& t = *without.value(w).constant;
    without.add_constant(w, Tensor::shape_only(t.dtype, t.shape));
  }
  Graph a = with, b = without;
  passes::decompose_recurrent(a);
  passes::decompose_recurrent(b);
  ASSERT_EQ(a.nodes.size(), b.nodes.size());
  for (size_t k = 0; k < a.nodes.size(); ++k) {
    EXPECT_EQ(a.nodes[k].op_type, b.nodes[k].op_type);
    EXPECT_EQ(a.nodes[k].inputs, b.nodes[k].inputs);
  }
}

TEST(DecomposeRecurrent, RuntimeWeightsOrShortSequencesStayWholeWithAReason) {
  Graph g = recurrent_graph({});
  g.values.at("W").constant = nullptr;
  g.inputs.push_back("W");
  passes::decompose_recurrent(g);
  EXPECT_EQ(count_ops(g, "LSTM"), 1);
  EXPECT_EQ(passes::recurrent_host_reason(g, g.nodes[0]), "W, R, B or P is not a constant");
  Graph s = recurrent_graph({});
  s.nodes[0].inputs[4] = "lens";
  s.add_constant("lens", Tensor::from_ints(DataType::kInt32, {2}, {5, 3}));
  passes::decompose_recurrent(s);
  EXPECT_EQ(count_ops(s, "LSTM"), 1);
  EXPECT_EQ(passes::recurrent_host_reason(s, s.nodes[0]), "sequence_lens ends some sequences early");
}

TEST(RecurrentSpec, ActivationParametersAreConsumedInOrderByTheActivationsThatTakeThem) {
  Node n;
  n.op_type = "LSTM";
  n.attrs["hidden_size"] = attr_i(2);
  n.attrs["activations"] = Attribute{std::vector<std::string>{"sigmoid", "LeakyRelu", "ScaledTanh"}};
  n.attrs["activation_alpha"] = Attribute{std::vector<float>{0.3f, 2.0f}};
  n.attrs["activation_beta"] = Attribute{std::vector<float>{0.5f}};
  std::string err;
  auto s = recurrent_spec(n, &err);
  ASSERT_TRUE(s) << err;
  EXPECT_EQ(s->activations[0][0].name, "Sigmoid");
  EXPECT_FLOAT_EQ(s->activations[0][1].alpha, 0.3f);
  EXPECT_FLOAT_EQ(s->activations[0][2].alpha, 2.0f);
  EXPECT_FLOAT_EQ(s->activations[0][2].beta, 0.5f);
  n.attrs["activations"] = Attribute{std::vector<std::string>{"Sigmoid", "Swish", "Tanh"}};
  EXPECT_FALSE(recurrent_spec(n, &err));
  EXPECT_NE(err.find("'Swish'"), std::string::npos);
}

}  // namespace
}  // namespace npusim::compiler::testing
