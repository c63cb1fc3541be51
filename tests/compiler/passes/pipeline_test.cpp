#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "compiler/import/import.h"
#include "compiler/interp/interpreter.h"
#include "compiler/passes/passes.h"
#include "tests/compiler/passes/graph_builder.h"

namespace npusim::compiler::testing {
namespace {

void expect_every_node_placed(const Graph& g) {
  for (const auto& n : g.nodes) {
    const std::string p = n.attr_string(kPlacement, "");
    EXPECT_TRUE(p == "matrix" || p == "vector" || p == "free" || p == "host") << n.name << " '" << p << "'";
  }
}

TEST(Pipeline, DemoModelConvBnReluLowersToThreeFusedConvs) {
  Graph before = builtin_model("demo");
  Graph g = before;
  std::vector<std::string> seen;
  lower(g, {}, [&](const std::string& pass, const Graph& after) {
    seen.push_back(pass);
    after.verify();
  });
  std::vector<std::string> names;
  for (const auto& p : standard_pipeline({})) names.push_back(p.name);
  EXPECT_EQ(seen, names);
  EXPECT_EQ(count_ops(g, "BatchNormalization"), 0);
  EXPECT_EQ(count_ops(g, "Relu"), 0);
  EXPECT_EQ(count_ops(g, "Conv"), 3);
  for (const auto& n : g.nodes)
    if (n.op_type == "Conv") {
      EXPECT_EQ(n.attr_string(kActivation, ""), "Relu");
      EXPECT_EQ(n.attr_string(kPlacement, ""), "matrix");
    }
  expect_every_node_placed(g);
  EXPECT_TRUE(same_outputs(before, g));
}

TEST(Pipeline, TorchSmallCnnFoldsFusesAndConvertsLayoutOnceAtTheInput) {
  // The same network exported with BatchNormalization folded by torch and kept as nodes.
  for (const char* file : {"small_cnn_op13.onnx", "small_cnn_bn_op13.onnx"}) {
    SCOPED_TRACE(file);
    Graph before = import_onnx_file(std::string(NPUSIM_SOURCE_DIR) + "/tests/compiler/passes/data/" + file);
    Graph g = before;
    lower(g);
    expect_every_node_placed(g);
    EXPECT_EQ(count_ops(g, "BatchNormalization"), 0);
    EXPECT_EQ(count_ops(g, "Conv"), 2);
    EXPECT_EQ(count_ops(g, "Relu"), 0);
    EXPECT_EQ(count_ops(g, "Clip"), 0);
    EXPECT_EQ(count_ops(g, "Constant"), 0);
    EXPECT_EQ(count_ops(g, "Concat"), 0);  // the view's shape arithmetic was folded
    EXPECT_EQ(count_ops(g, "Softmax"), 0);
    // relu6 = Relu then Clip(0, 6) composed into the first conv; the residual add + relu into the second.
    int residual = 0, clip = 0;
    for (const auto& n : g.nodes) {
      residual += n.has_attr(kResidualInput);
      clip += n.attr_string(kActivation, "") == "Clip";
    }
    EXPECT_EQ(residual, 1);
    EXPECT_EQ(clip, 1);
    // The input is converted to NHWC; the pooled [1,8,1,1] map reshapes without a conversion.
    auto changes = layout_changes(g);
    ASSERT_EQ(changes.size(), 1u);
    EXPECT_EQ(changes[0].input, "x");
    EXPECT_EQ(g.nodes.size(), 11u);  // transpose, 2 convs, pool, reshape, gemm, 5 softmax primitives
    EXPECT_TRUE(same_outputs(before, g));
  }
}

TEST(Pipeline, TorchTransformerMlpKeepsValuesWithAndWithoutDecomposition) {
  Graph before = import_onnx_file(std::string(NPUSIM_SOURCE_DIR) +
                                  "/tests/compiler/passes/data/linear_ln_gelu_op13.onnx");
  for (bool decompose : {false, true}) {
    Graph g = before;
    PipelineOptions o;
    o.decompose = decompose;
    lower(g, o);
    expect_every_node_placed(g);
    EXPECT_EQ(count_ops(g, "LayerNormalization"), decompose ? 0 : 1);
    EXPECT_EQ(count_ops(g, "Gelu", "npu"), 1);
    const Node* mm = find_node(g, "MatMul");
    ASSERT_NE(mm, nullptr);
    EXPECT_TRUE(mm->has_input(2));  // the Linear's bias
    EXPECT_TRUE(same_outputs(before, g)) << "decompose " << decompose;
  }
}

}  // namespace
}  // namespace npusim::compiler::testing

namespace npusim::compiler::testing {
namespace {

// Every single-op model of ONNX's node tests that the importer and interpreter accept lowers to a graph
// computing the same outputs: as exported (all inputs at run time) and with every input but the first
// made a constant, which drives constant folding and the decompositions that need constant parameters.
TEST(Pipeline, OnnxNodeTestModelsKeepTheirOutputsThroughLowering) {
  namespace fs = std::filesystem;
  const fs::path root = "/usr/share/libonnx-testdata/data/node";
  if (!fs::exists(root)) GTEST_SKIP() << root << " is not installed";
  int lowered = 0;
  for (const auto& dir : fs::directory_iterator(root)) {
    const fs::path model = dir.path() / "model.onnx", data = dir.path() / "test_data_set_0";
    if (!fs::exists(model) || !fs::exists(data)) continue;
    for (bool constants : {false, true}) {
      Graph g;
      std::map<std::string, Tensor> in;
      try {  // what the importer or interpreter rejects is their business, not the passes'
        g = import_onnx_file(model.string());
        for (size_t k = 0; k < g.inputs.size(); ++k)
          in[g.inputs[k]] = read_tensor_file((data / ("input_" + std::to_string(k) + ".pb")).string());
        if (constants) {
          for (size_t k = 1; k < g.inputs.size(); ++k) {
            g.add_constant(g.inputs[k], in.at(g.inputs[k]));
            in.erase(g.inputs[k]);
          }
          g.inputs.resize(std::min<size_t>(g.inputs.size(), 1));
        }
        interpret(g, in);
      } catch (const std::exception&) {
        continue;
      }
      SCOPED_TRACE(dir.path().filename().string() + (constants ? " (constant parameters)" : ""));
      Graph l = g;
      ASSERT_NO_THROW(lower(l));
      for (const auto& n : l.nodes) EXPECT_TRUE(n.has_attr(kPlacement)) << n.name;
      std::map<std::string, Tensor> want = interpret(g, in), got;
      ASSERT_NO_THROW(got = interpret(reference_graph(l), in));
      for (const auto& [name, w] : want) {
        const Tensor& h = got.at(name);
        ASSERT_EQ(h.shape, w.shape) << name;
        double scale = 1e-30;
        for (int64_t k = 0; k < w.size(); ++k) scale = std::max(scale, std::fabs(w.as_double(k)));
        for (int64_t k = 0; k < w.size(); ++k) {
          const double a = w.as_double(k), b = h.as_double(k);
          if (a == b || (std::isnan(a) && std::isnan(b))) continue;  // infinities and NaNs (fp16/bf16 tests)
          ASSERT_LE(std::fabs(a - b), 1e-5 * scale) << name << "[" << k << "]";
        }
      }
      ++lowered;
    }
  }
  EXPECT_GT(lowered, 1000);  // 614 models twice on this machine's libonnx-testdata 1.12
}

}  // namespace
}  // namespace npusim::compiler::testing
