#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <string>

#include "compiler/ir/graph.h"

namespace npusim::compiler {
namespace {

Graph chain_out_of_order() {
  Graph g;
  g.ensure_value("x").shape_known = true;
  g.inputs = {"x"};
  g.ensure_value("a");
  g.ensure_value("b");
  g.outputs = {"b"};
  g.nodes.push_back(Node{"Relu", "second", "", {"a"}, {"b"}, {}});
  g.nodes.push_back(Node{"Neg", "first", "", {"x"}, {"a"}, {}});
  return g;
}

TEST(GraphIr, TopologicalSortPutsProducersBeforeConsumers) {
  Graph g = chain_out_of_order();
  EXPECT_THROW(g.verify(), std::runtime_error);
  g.topological_sort();
  ASSERT_EQ(g.nodes.size(), 2u);
  EXPECT_EQ(g.nodes[0].name, "first");
  EXPECT_EQ(g.nodes[1].name, "second");
  EXPECT_NO_THROW(g.verify());
  EXPECT_EQ(g.producer("b"), 1);
  EXPECT_EQ(g.consumers("a"), std::vector<int>{1});
}

TEST(GraphIr, TopologicalSortReportsCycles) {
  Graph g;
  g.ensure_value("a");
  g.ensure_value("b");
  g.nodes.push_back(Node{"Neg", "n1", "", {"b"}, {"a"}, {}});
  g.nodes.push_back(Node{"Neg", "n2", "", {"a"}, {"b"}, {}});
  EXPECT_THROW(g.topological_sort(), std::runtime_error);
}

TEST(GraphIr, VerifyRejectsValueProducedTwice) {
  Graph g;
  g.ensure_value("x");
  g.inputs = {"x"};
  g.ensure_value("y");
  g.nodes.push_back(Node{"Neg", "n1", "", {"x"}, {"y"}, {}});
  g.nodes.push_back(Node{"Abs", "n2", "", {"x"}, {"y"}, {}});
  EXPECT_THROW(g.verify(), std::runtime_error);
}

TEST(GraphIr, AttributesAreTypedWithDefaults) {
  Node n;
  n.attrs["k"].value = int64_t{3};
  n.attrs["alpha"].value = 0.5f;
  n.attrs["pads"].value = std::vector<int64_t>{1, 2};
  n.attrs["mode"].value = std::string("edge");
  EXPECT_EQ(n.attr_int("k", 0), 3);
  EXPECT_EQ(n.attr_int("missing", 7), 7);
  EXPECT_FLOAT_EQ(n.attr_float("alpha", 0), 0.5f);
  EXPECT_EQ(n.attr_ints("pads"), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(n.attr_string("mode", ""), "edge");
  EXPECT_EQ(n.attrs["pads"].kind(), Attribute::Kind::kInts);
  EXPECT_THROW(n.attrs["k"].f(), std::bad_variant_access);
}

TEST(GraphIr, PrinterShowsEveryNodeWithShapes) {
  Graph g = chain_out_of_order();
  g.topological_sort();
  g.value("x").dtype = DataType::kFloat32;
  g.value("x").shape = {1, 4};
  std::string s = to_string(g);
  EXPECT_NE(s.find("input  x:float32[1x4]"), std::string::npos) << s;
  EXPECT_NE(s.find("first = Neg("), std::string::npos) << s;
  EXPECT_NE(s.find("second = Relu("), std::string::npos) << s;
}

// `--graphs` prints the dump at a terminal's width: a node too long for one line puts its outputs and its
// attributes on lines of their own, and long input lists wrap; nothing is left out.
TEST(GraphIr, PrinterKeepsLongNodesWithinTheWidthWithOutputsAndAttributesOnTheirOwnLines) {
  Graph g;
  const std::string in = "/features/features.1/conv/conv.0/conv.0.0/Conv_output_0";
  const std::string out = "/features/features.1/conv/conv.1/Conv_output_0";
  g.ensure_value(in).shape = {1, 32, 112, 112};
  g.ensure_value(in).shape_known = true;
  for (const std::string& v : {in, std::string("w"), out}) g.ensure_value(v).dtype = DataType::kFloat32;
  g.inputs = {in};
  g.outputs = {out};
  Node n{"Conv", "/features/features.1/conv/conv.1/Conv", "", {in, "w", in}, {out}, {}};
  n.attrs["kernel_shape"].value = std::vector<int64_t>{3, 3};
  n.attrs["pads"].value = std::vector<int64_t>{1, 1, 1, 1};
  n.attrs["group"].value = int64_t{32};
  g.nodes.push_back(n);
  const std::string full = to_string(g);
  const std::string wrapped = to_string(g, 100);
  std::istringstream lines(wrapped);
  size_t longest = 0;
  for (std::string line; std::getline(lines, line);) longest = std::max(longest, line.size());
  EXPECT_LE(longest, 100u) << wrapped;
  EXPECT_GT(full.find(" -> "), 150u) << full;  // one line without a width
  EXPECT_NE(wrapped.find("\n  /features/features.1/conv/conv.1/Conv =\n      Conv(" + in +
                         ":float32[1x32x112x112],\n"),
            std::string::npos)
      << wrapped;
  EXPECT_NE(wrapped.find("\n      -> " + out + ":float32[?]\n"), std::string::npos) << wrapped;
  EXPECT_NE(wrapped.find("\n      {group=32, kernel_shape=[3,3], pads=[1,1,1,1]}\n"), std::string::npos)
      << wrapped;
  EXPECT_NE(wrapped.find("\n  output " + out + ":float32[?]\n"), std::string::npos) << wrapped;
  auto squeeze = [](const std::string& s) {
    std::string r;
    for (char c : s)
      if (c != ' ' && c != '\n') r += c;
    return r;
  };
  EXPECT_EQ(squeeze(wrapped), squeeze(full));
}

TEST(PassManager, RunsPassesInOrderAndNamesABrokenOne) {
  Graph g = chain_out_of_order();
  g.topological_sort();
  PassManager pm;
  std::vector<std::string> seen;
  pm.add("rename", [](Graph& gr) { gr.nodes[0].name = "renamed"; });
  pm.set_observer(
      [&](const std::string& name, const Graph& gr) { seen.push_back(name + ":" + gr.nodes[0].name); });
  pm.run(g);
  EXPECT_EQ(seen, std::vector<std::string>{"rename:renamed"});
  PassManager bad;
  bad.add("break-order", [](Graph& gr) { std::swap(gr.nodes[0], gr.nodes[1]); });
  try {
    bad.run(g);
    FAIL() << "expected an error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("pass 'break-order'"), std::string::npos) << e.what();
  }
}

TEST(Tensor, WrapIntegerBehavesLikeTwosComplementCasts) {
  EXPECT_EQ(wrap_integer(DataType::kInt8, 200), -56);
  EXPECT_EQ(wrap_integer(DataType::kUInt8, -1), 255);
  EXPECT_EQ(wrap_integer(DataType::kBool, 5), 1);
  EXPECT_EQ(num_elements({2, 3, 4}), 24);
  EXPECT_EQ(num_elements({}), 1);
  EXPECT_EQ(shape_to_string({1, 3, 224, 224}), "1x3x224x224");
}

}  // namespace
}  // namespace npusim::compiler
