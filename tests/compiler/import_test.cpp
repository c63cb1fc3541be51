#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <random>

#include "compiler/import/import.h"
#include "compiler/import/onnx_wire.h"
#include "tests/compiler/model_error.h"

namespace npusim::compiler {
namespace {

const Node* find_node(const Graph& g, const std::string& op) {
  for (const auto& n : g.nodes)
    if (n.op_type == op) return &n;
  return nullptr;
}

TEST(BuiltinModels, DemoIsConvBnReluTimesThreeThenPoolAndGemm) {
  Graph g = builtin_model("demo");
  std::vector<std::string> ops;
  for (const auto& n : g.nodes) ops.push_back(n.op_type);
  EXPECT_EQ(ops, (std::vector<std::string>{"Conv", "BatchNormalization", "Relu", "Conv", "BatchNormalization",
                                           "Relu", "Conv", "BatchNormalization", "Relu", "GlobalAveragePool",
                                           "Flatten", "Gemm"}));
  ASSERT_EQ(g.inputs, std::vector<std::string>{"input"});
  EXPECT_EQ(g.value("input").shape, (Shape{1, 3, 32, 32}));
  // Strides 1, 2, 2 with pad 1 and 3x3 kernels: 32 -> 32 -> 16 -> 8 (shape inference, not us).
  EXPECT_EQ(g.value("relu3.out").shape, (Shape{1, 64, 8, 8}));
  EXPECT_EQ(g.value("logits").shape, (Shape{1, 10}));
  EXPECT_TRUE(g.value("conv1.weight").is_constant());
  EXPECT_NO_THROW(g.verify());
}

TEST(BuiltinModels, GemmSpecIsOneMatMul) {
  Graph g = builtin_model("gemm:M=4,N=5,K=6");
  ASSERT_EQ(g.nodes.size(), 1u);
  EXPECT_EQ(g.nodes[0].op_type, "MatMul");
  EXPECT_EQ(g.value(g.nodes[0].inputs[0]).shape, (Shape{4, 6}));
  EXPECT_EQ(g.value(g.nodes[0].inputs[1]).shape, (Shape{6, 5}));
  EXPECT_EQ(g.value(g.outputs[0]).shape, (Shape{4, 5}));
}

TEST(BuiltinModels, ConvSpecHonoursStrideAndPad) {
  Graph g = builtin_model("conv:H=10,W=12,C=3,K=8,R=3,S=3,stride=2,pad=1");
  const Node* conv = find_node(g, "Conv");
  ASSERT_NE(conv, nullptr);
  // (10 + 2 - 3) / 2 + 1 = 5, (12 + 2 - 3) / 2 + 1 = 6
  EXPECT_EQ(g.value(g.outputs[0]).shape, (Shape{1, 8, 5, 6}));
  EXPECT_EQ(conv->attr_ints("pads"), (std::vector<int64_t>{1, 1, 1, 1}));
}

TEST(BuiltinModels, MalformedSpecsAreModelErrors) {
  EXPECT_NE(error_of([] { builtin_model("gemm:M=4,N=5"); }).find("K="), std::string::npos);
  EXPECT_NE(error_of([] { builtin_model("gemm:M=4,N=5,K=0"); }).find("positive"), std::string::npos);
  EXPECT_NE(error_of([] { builtin_model("conv:H=4,W=4,C=1,K=1,R=3,S=3,dilation=2"); }).find("dilation"),
            std::string::npos);
  EXPECT_NE(error_of([] { builtin_model("resnet"); }).find("unknown built-in"), std::string::npos);
}

TEST(ScaleSimCsv, ConvRowBecomesConvWithScaleSimOutputSize) {
  Graph g = import_scalesim_csv_text(
      "Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width, Channels, Num Filter, Strides,\n"
      "Conv1, 224, 224, 7, 7, 3, 64, 2,\n"
      "CB2a_1, 56, 56, 1, 1, 64, 64, 1,\n",
      "resnet.csv");
  ASSERT_EQ(g.nodes.size(), 2u);
  EXPECT_EQ(g.nodes[0].op_type, "Conv");
  EXPECT_EQ(g.nodes[0].name, "Conv1");
  // SCALE-Sim: ceil((224 - 7 + 2) / 2) = ceil(109.5) = 110 outputs, which read (110 - 1) * 2 + 7 = 225
  // pre-padded rows: the map grows by the one the ceiling adds, and the Conv has no padding.
  EXPECT_EQ(g.value(g.nodes[0].inputs[0]).shape, (Shape{1, 3, 225, 225}));
  EXPECT_EQ(g.value(g.nodes[0].inputs[1]).shape, (Shape{64, 3, 7, 7}));
  EXPECT_EQ(g.value(g.nodes[0].outputs[0]).shape, (Shape{1, 64, 110, 110}));
  EXPECT_EQ(g.nodes[0].attr_ints("pads"), (std::vector<int64_t>{0, 0, 0, 0}));
  EXPECT_EQ(g.value(g.nodes[1].outputs[0]).shape, (Shape{1, 64, 56, 56}));
  EXPECT_TRUE(g.nhwc_io);
}

// The forms of SCALE-Sim v2's own topology files: a blank line after the header, a remark after the last
// column ("1,#dw", which SCALE-Sim drops with the field after the last comma), a row without the
// trailing comma (its stride stays), separate stride height and width.
TEST(ScaleSimCsv, BlankLinesRemarksAndMissingTrailingCommasKeepEveryRowAndStride) {
  Graph g = import_scalesim_csv_text(
      "Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width, Channels, Num Filter, Strides,\n"
      "\n"
      "dw, 56, 56, 3, 3, 1, 1, 1,#dw\n"
      "proj, 56, 56, 1, 1, 24, 48, 2\n"
      "rect, 30, 20, 3, 3, 8, 16, 2, 1,\n"
      "\n",
      "forms.csv");
  ASSERT_EQ(g.nodes.size(), 3u);
  EXPECT_EQ(g.nodes[0].attr_ints("strides"), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(g.value(g.nodes[0].outputs[0]).shape, (Shape{1, 1, 54, 54}));
  // ceil((56 - 1 + 2) / 2) = 29 outputs of a 1x1 stride-2 filter: the map is 57 rows pre-padded.
  EXPECT_EQ(g.nodes[1].attr_ints("strides"), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(g.value(g.nodes[1].outputs[0]).shape, (Shape{1, 48, 29, 29}));
  EXPECT_EQ(g.value(g.nodes[1].inputs[0]).shape, (Shape{1, 24, 57, 57}));
  // Height: ceil((30 - 3 + 2) / 2) = 15; width: 20 - 3 + 1 = 18.
  EXPECT_EQ(g.nodes[2].attr_ints("strides"), (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(g.value(g.nodes[2].outputs[0]).shape, (Shape{1, 16, 15, 18}));
}

// DLRM's rows: one filter row spanning a single-channel map 512 wide (wider than a conv instruction's
// kernel field) is the GEMM SCALE-Sim computes for it: M = OH = 128, K = 512, N = 16 filters.
TEST(ScaleSimCsv, FilterSpanningTheWholeSingleChannelMapBecomesItsGemm) {
  Graph g = import_scalesim_csv_text(
      "Layer name,Ifmap height,ifmap width,filter height,filter width,channels,num filters,strides,\n"
      "MLP_Bottom_3,128,512,1,512,1,16,1,\n",
      "dlrm.csv");
  ASSERT_EQ(g.nodes.size(), 1u);
  EXPECT_EQ(g.nodes[0].op_type, "MatMul");
  EXPECT_EQ(g.nodes[0].name, "MLP_Bottom_3");
  EXPECT_EQ(g.value(g.nodes[0].inputs[0]).shape, (Shape{128, 512}));
  EXPECT_EQ(g.value(g.nodes[0].outputs[0]).shape, (Shape{128, 16}));
}

TEST(ScaleSimCsv, GemmRowBecomesMatMul) {
  Graph g = import_scalesim_csv_text("Layer Name, M, N, K,\nfc1, 128, 256, 512,\n", "g.csv");
  ASSERT_EQ(g.nodes.size(), 1u);
  EXPECT_EQ(g.nodes[0].op_type, "MatMul");
  EXPECT_EQ(g.value(g.nodes[0].inputs[0]).shape, (Shape{128, 512}));
  EXPECT_EQ(g.value(g.outputs[0]).shape, (Shape{128, 256}));
}

TEST(ScaleSimCsv, BadRowsNameTheLine) {
  std::string e =
      error_of([] { import_scalesim_csv_text("Layer Name, M, N, K,\nfc1, 128, x, 512,\n", "g.csv"); });
  EXPECT_NE(e.find("g.csv:2"), std::string::npos) << e;
  e = error_of([] { import_scalesim_csv_text("a,b,c\n1,2,3\n", "h.csv"); });
  EXPECT_NE(e.find("not a SCALE-Sim topology"), std::string::npos) << e;
}

TEST(OnnxImport, BuiltinBytesRoundTripThroughTheOnnxPath) {
  Graph g = import_onnx_bytes(builtin_model_onnx("demo"));
  EXPECT_EQ(g.nodes.size(), 12u);
  EXPECT_EQ(g.value("logits").shape, (Shape{1, 10}));
}

TEST(OnnxImport, NotAnOnnxFileIsAModelError) {
  std::string e =
      error_of([] { import_onnx_bytes("Layer name, IFMAP Height\nconv1, 3\n", {}, ".", "x.onnx"); });
  EXPECT_NE(e.find("x.onnx"), std::string::npos) << e;
  e = error_of([] { import_onnx_file("/nonexistent/model.onnx"); });
  EXPECT_NE(e.find("cannot open"), std::string::npos) << e;
}

TEST(OnnxImport, TruncatedFileIsAModelError) {
  std::string bytes = builtin_model_onnx("demo");
  std::string e = error_of([&] { import_onnx_bytes(bytes.substr(0, bytes.size() / 2), {}, ".", "t.onnx"); });
  EXPECT_NE(e.find("t.onnx"), std::string::npos) << e;
}

// Replaces the first occurrence of `from` (same length as `to`) in serialized bytes: protobuf strings
// are stored verbatim, so this edits an op type or a name without needing ONNX in the test.
std::string patch(std::string bytes, const std::string& from, const std::string& to) {
  auto p = bytes.find(from);
  EXPECT_NE(p, std::string::npos) << from;
  EXPECT_EQ(from.size(), to.size());
  if (p != std::string::npos) bytes.replace(p, from.size(), to);
  return bytes;
}

TEST(OnnxImport, UnknownOpNamesTheNode) {
  std::string bytes = patch(builtin_model_onnx("demo"), "Relu", "Rulo");
  std::string e = error_of([&] { import_onnx_bytes(bytes, {}, ".", "m.onnx"); });
  EXPECT_NE(e.find("relu1"), std::string::npos) << e;
  EXPECT_NE(e.find("Rulo"), std::string::npos) << e;
}

TEST(OnnxImport, MissingInitializerNamesTheNodeAndValue) {
  std::string bytes = patch(builtin_model_onnx("demo"), "fc.weight", "fc.wxight");  // the initializer's name
  std::string e = error_of([&] { import_onnx_bytes(bytes, {}, ".", "m.onnx"); });
  EXPECT_NE(e.find("'fc'"), std::string::npos) << e;
  EXPECT_NE(e.find("missing initializer"), std::string::npos) << e;
}

TEST(OnnxImport, ShapeInferenceFailureIsAModelError) {
  // Make A's K dimension (6) of gemm:M=4,N=5,K=6 dynamic, then bind it to 9 while B is 6x5: ONNX's
  // MatMul shape inference rejects the product.
  std::string bytes = builtin_model_onnx("gemm:M=4,N=5,K=6");
  const std::string k_dim("\x0a\x02\x08\x06", 4), dyn("\x0a\x02\x12\x00", 4);
  auto p = bytes.find(k_dim);
  ASSERT_NE(p, std::string::npos);
  bytes.replace(p, 4, dyn);
  ImportOptions o;
  o.input_shapes["gemm.a"] = {4, 9};
  std::string e = error_of([&] { import_onnx_bytes(bytes, o, ".", "g.onnx"); });
  EXPECT_NE(e.find("shape inference failed"), std::string::npos) << e;
  EXPECT_NE(e.find("g.onnx"), std::string::npos) << e;
  // A binding that contradicts a static dimension is caught before inference, naming the dimension.
  ImportOptions bad;
  bad.input_shapes["conv.ifmap"] = {1, 7, 9, 6};
  e = error_of(
      [&] { import_onnx_bytes(builtin_model_onnx("conv:H=5,W=6,C=7,K=2,R=3,S=3"), bad, ".", "g.onnx"); });
  EXPECT_NE(e.find("dimension 2"), std::string::npos) << e;
}

TEST(OnnxImport, InputShapeOfUnknownInputIsAModelError) {
  ImportOptions o;
  o.input_shapes["nope"] = {1};
  std::string e = error_of([&] { import_onnx_bytes(builtin_model_onnx("demo"), o, ".", "d.onnx"); });
  EXPECT_NE(e.find("'nope'"), std::string::npos) << e;
  EXPECT_NE(e.find("input"), std::string::npos) << e;
}

TEST(OnnxImport, ParseInputShape) {
  auto [name, shape] = parse_input_shape("images=1x3x224x224");
  EXPECT_EQ(name, "images");
  EXPECT_EQ(shape, (Shape{1, 3, 224, 224}));
  EXPECT_THROW(parse_input_shape("images"), ModelError);
  EXPECT_THROW(parse_input_shape("images=1x0"), ModelError);
  EXPECT_THROW(parse_input_shape("images=1xa"), ModelError);
}

std::string node_test_model(const std::string& test) {
  return std::string("/usr/share/libonnx-testdata/data/node/") + test + "/model.onnx";
}

TEST(OnnxImport, NodeTestModelImportsWithInferredShapes) {
  const std::string path = node_test_model("test_conv_with_strides_padding");
  if (!std::ifstream(path)) GTEST_SKIP() << "libonnx-testdata not installed";
  Graph g = import_onnx_file(path);
  ASSERT_EQ(g.nodes.size(), 1u);
  EXPECT_EQ(g.nodes[0].op_type, "Conv");
  EXPECT_EQ(g.value(g.outputs[0]).shape, (Shape{1, 1, 4, 3}));
}

// The batch dimension (dim_value 1, encoded 0x0a 0x02 0x08 0x01) becomes a dimension with neither value
// nor parameter (0x0a 0x02 0x12 0x00, an empty dim_param) - same length, so no enclosing length changes.
TEST(OnnxImport, UnboundDynamicDimensionNamesInputAndDimension) {
  std::string bytes = builtin_model_onnx("conv:H=5,W=6,C=7,K=2,R=3,S=3");
  const std::string batch("\x0a\x02\x08\x01", 4), dyn("\x0a\x02\x12\x00", 4);
  auto q = bytes.find(batch);
  ASSERT_NE(q, std::string::npos);
  bytes.replace(q, 4, dyn);
  std::string e = error_of([&] { import_onnx_bytes(bytes, {}, ".", "c.onnx"); });
  EXPECT_NE(e.find("'conv.ifmap'"), std::string::npos) << e;
  EXPECT_NE(e.find("dimension 0"), std::string::npos) << e;
  EXPECT_NE(e.find("--input-shape"), std::string::npos) << e;
  // Binding it fixes the model.
  ImportOptions o;
  o.input_shapes["conv.ifmap"] = {1, 7, 5, 6};
  Graph g = import_onnx_bytes(bytes, o, ".", "c.onnx");
  EXPECT_EQ(g.value(g.outputs[0]).shape, (Shape{1, 2, 3, 4}));
}

TEST(OnnxImport, FuzzedBytesNeverCrashOnlyModelErrors) {
  const std::string good = builtin_model_onnx("demo");
  std::mt19937 rng(1234);
  int accepted = 0, rejected = 0;
  for (int it = 0; it < 3000; ++it) {
    std::string b = good;
    const int kind = it % 3;
    if (kind == 0) {
      b.resize(std::uniform_int_distribution<size_t>(0, good.size() - 1)(rng));
    } else {
      const int flips = 1 + static_cast<int>(rng() % 8);
      for (int f = 0; f < flips; ++f) {
        // Bias towards the structural head of the message (the weights are the bulk of the bytes).
        size_t pos = (rng() % 2) ? rng() % std::min<size_t>(b.size(), 2048) : rng() % b.size();
        b[pos] = kind == 1 ? static_cast<char>(rng()) : static_cast<char>(b[pos] ^ (1u << (rng() % 8)));
      }
    }
    try {
      Graph g = import_onnx_bytes(b, {}, "/nonexistent", "fuzz.onnx");
      g.verify();
      ++accepted;
    } catch (const ModelError& e) {
      EXPECT_GT(std::string(e.what()).size(), 10u);
      ++rejected;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "iteration " << it << ": non-ModelError exception: " << e.what();
    }
  }
  EXPECT_GT(rejected, 1000);
  EXPECT_EQ(accepted + rejected, 3000);
}

}  // namespace
}  // namespace npusim::compiler

namespace npusim::compiler {
namespace {

TEST(OnnxImport, BatchRebindsTheFirstDimensionOfEveryInputAndInferencePropagatesIt) {
  ImportOptions batch;
  batch.batch = 3;
  const Graph g = import_onnx_bytes(builtin_model_onnx("demo"), batch);
  ASSERT_EQ(g.inputs.size(), 1u);
  EXPECT_EQ(g.value(g.inputs[0]).shape, (Shape{3, 3, 32, 32}));
  ASSERT_EQ(g.outputs.size(), 1u);
  EXPECT_EQ(g.value(g.outputs[0]).shape.at(0), 3);  // the Gemm's output follows the batch
}

TEST(OnnxImport, BatchDoesNotApplyToFixedShapeModels) {
  ImportOptions batch;
  batch.batch = 2;
  EXPECT_THROW(load_model("gemm:M=4,N=5,K=6", batch), ModelError);
}

// A model file's large raw_data fields are converted from the mapped file (compiler/import/onnx_wire.h):
// the graph is the one parsing the whole file gives, and protobuf sees only the model's structure.
TEST(OnnxWire, LargeInitializersAreLiftedOutAndImportTheSame) {
  const std::string bytes = builtin_model_onnx("gemm:M=2,N=96,K=200");  // a 75 KiB weight
  const std::optional<detail::LiftedModel> lifted = detail::lift_raw_data(bytes, 64 * 1024);
  ASSERT_TRUE(lifted.has_value());
  ASSERT_EQ(lifted->raw.size(), 1u);
  ASSERT_NE(lifted->raw[0].data(), nullptr);
  EXPECT_EQ(lifted->raw[0].size(), 96u * 200u * 4u);
  EXPECT_GE(lifted->raw[0].data(), bytes.data());  // a view into the file's bytes, not a copy
  EXPECT_LT(lifted->proto.size(), 2048u);

  const std::string path = ::testing::TempDir() + "/lifted_gemm.onnx";
  std::ofstream(path, std::ios::binary) << bytes;
  const Graph from_file = import_onnx_file(path);     // lifted
  const Graph from_bytes = import_onnx_bytes(bytes);  // parsed whole
  std::remove(path.c_str());
  int constants = 0;
  for (const auto& [name, v] : from_bytes.values) {
    if (!v.is_constant()) continue;
    ++constants;
    ASSERT_TRUE(from_file.value(name).is_constant()) << name;
    EXPECT_EQ(from_file.value(name).constant->f, v.constant->f) << name;
    EXPECT_EQ(from_file.value(name).constant->shape, v.constant->shape) << name;
  }
  EXPECT_GE(constants, 1);
}

TEST(OnnxWire, SmallTensorsAndOtherFieldsPassThroughByteForByte) {
  const std::string bytes = builtin_model_onnx("gemm:M=2,N=8,K=8");
  const std::optional<detail::LiftedModel> lifted = detail::lift_raw_data(bytes, 64 * 1024);
  ASSERT_TRUE(lifted.has_value());
  EXPECT_EQ(lifted->proto, bytes);
  for (std::string_view r : lifted->raw) EXPECT_EQ(r.data(), nullptr);
}

TEST(OnnxWire, BytesThatAreNotWireDataAreLeftToProtobuf) {
  EXPECT_FALSE(detail::lift_raw_data(std::string("\xff\xff\xff", 3), 1).has_value());
  const std::string bytes = builtin_model_onnx("gemm:M=2,N=96,K=200");
  EXPECT_FALSE(detail::lift_raw_data(std::string_view(bytes).substr(0, bytes.size() / 2), 1).has_value());
}

}  // namespace
}  // namespace npusim::compiler
