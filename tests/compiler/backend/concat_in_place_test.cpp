// Concats folded into their producers' stores (compiler/backend/memory/concat_in_place.h): the folded program
// computes what the unfolded one does (fp32: within 1e-5 of the output's scale, in program order and in
// random interleavings of the queues), and the Concats it folds have no instructions left.
#include <gtest/gtest.h>

#include <algorithm>

#include "compiler/backend/compile.h"
#include "compiler/interp/interpreter.h"
#include "compiler/passes/lowered.h"
#include "tests/compiler/backend/functional.h"

namespace npusim::compiler::testing {
namespace {

void conv(GraphBuilder& b, const std::string& x, const std::string& y, int64_t cin, int64_t cout, int64_t k,
          uint32_t seed) {
  b.constant(y + "_w", {cout, cin, k, k}, 0.5f, seed);
  Node& n = b.node("Conv", {x, y + "_w"}, {y}, y + "_conv");
  n.attrs["pads"].value = std::vector<int64_t>{k / 2, k / 2, k / 2, k / 2};
  n.attrs["kernel_shape"].value = std::vector<int64_t>{k, k};
}

void batchnorm_relu(GraphBuilder& b, const std::string& x, const std::string& y, int64_t c, uint32_t seed) {
  b.constant(y + "_s", {c}, 0.5f, seed)
      .constant(y + "_b", {c}, 0.5f, seed + 1)
      .constant(y + "_m", {c}, 0.5f, seed + 2);
  std::vector<float> var(static_cast<size_t>(c));
  for (int64_t i = 0; i < c; ++i) var[static_cast<size_t>(i)] = 0.5f + 0.1f * static_cast<float>(i % 7);
  b.constant(y + "_v", Tensor::from_floats({c}, var));
  b.node("BatchNormalization", {x, y + "_s", y + "_b", y + "_m", y + "_v"}, {y + "_bn"}, y + "_norm");
  b.node("Relu", {y + "_bn"}, {y}, y + "_relu");
}

Node& concat(GraphBuilder& b, const std::vector<std::string>& in, const std::string& y) {
  Node& n = b.node("Concat", in, {y}, y + "_node");
  n.attrs["axis"].value = int64_t{1};
  return n;
}

// DenseNet's block: a stem conv and max pool give the block input x0; each layer concatenates x0 and
// every feature map before it (denselayerK/Concat: Concat(x0) for the first), runs BN -> ReLU -> conv,
// and the block ends with the Concat of all of them, then a transition (BN -> ReLU -> 1x1 conv -> average
// pool) into a second block. Every feature map is read by several Concats.
Graph dense_blocks(int64_t layers) {
  GraphBuilder b;
  b.input("x", {1, 3, 12, 10});
  conv(b, "x", "stem", 3, 8, 3, 1);
  Node& pool = b.node("MaxPool", {"stem"}, {"x0"}, "pool0");
  pool.attrs["kernel_shape"].value = std::vector<int64_t>{2, 2};
  pool.attrs["strides"].value = std::vector<int64_t>{2, 2};
  std::string block_in = "x0";
  int64_t c0 = 8;
  uint32_t seed = 10;
  for (int block = 0; block < 2; ++block) {
    const std::string p = "b" + std::to_string(block) + "_";
    std::vector<std::string> feats = {block_in};
    for (int64_t l = 0; l < layers; ++l) {
      const std::string q = p + "l" + std::to_string(l) + "_";
      concat(b, feats, q + "cat");
      const int64_t c = c0 + 4 * l;
      batchnorm_relu(b, q + "cat", q + "h", c, seed += 3);
      conv(b, q + "h", q + "f", c, 4, 3, seed += 3);
      feats.push_back(q + "f");
    }
    concat(b, feats, p + "out");
    c0 += 4 * layers;
    if (block == 1) break;
    batchnorm_relu(b, p + "out", p + "t", c0, seed += 3);
    conv(b, p + "t", p + "tc", c0, c0 / 2, 1, seed += 3);
    Node& avg = b.node("AveragePool", {p + "tc"}, {p + "tp"}, p + "tpool");
    avg.attrs["kernel_shape"].value = std::vector<int64_t>{2, 2};
    avg.attrs["strides"].value = std::vector<int64_t>{2, 2};
    block_in = p + "tp";
    c0 /= 2;
  }
  batchnorm_relu(b, "b1_out", "y", c0, seed + 3);
  b.output("y");
  return b.build();
}

// GoogLeNet's inception: four branches concatenated, one branch feeding a second Concat as well, and
// a branch also read by an Add (a reader that does not take views: that branch stays dense, and its
// Concat copies it).
Graph inception() {
  GraphBuilder b;
  b.input("x", {1, 6, 9, 7});
  conv(b, "x", "a", 6, 5, 1, 1);
  conv(b, "x", "c", 6, 7, 3, 2);
  conv(b, "x", "d", 6, 3, 3, 3);
  Node& mp = b.node("MaxPool", {"x"}, {"p"}, "pool");
  mp.attrs["kernel_shape"].value = std::vector<int64_t>{3, 3};
  mp.attrs["pads"].value = std::vector<int64_t>{1, 1, 1, 1};
  conv(b, "p", "e", 6, 4, 1, 4);
  concat(b, {"a", "c", "d", "e"}, "cat");
  concat(b, {"c", "e"}, "cat2");
  b.node("Add", {"d", "d"}, {"dd"}, "add");
  conv(b, "cat", "y1", 19, 2, 1, 5);
  conv(b, "cat2", "y2", 11, 2, 3, 6);
  b.output("y1").output("y2").output("dd");
  return b.build();
}

// Both programs on the same inputs: their worst relative difference, and each against the interpreter.
struct Both {
  CompileResult folded, unfolded;
  double between = 0, folded_vs_ref = 0;
};
Both run_both(const Graph& model, const isa::NpuConfig& config, const RunOptions& opts = {}) {
  Graph lowered = model;
  lower(lowered);
  Both r;
  CompileOptions off;
  off.fold_concats = false;
  r.folded = compile(lowered, config);
  r.unfolded = compile(lowered, config, off);
  std::map<std::string, Tensor> in;
  uint32_t seed = 7;
  for (const auto& i : model.inputs) in[i] = random_tensor(model.value(i).shape, 1.0f, seed++);
  const auto got = run_program(r.folded, config, in, opts);
  r.between = max_rel_error(got, run_program(r.unfolded, config, in, opts));
  r.folded_vs_ref = max_rel_error(got, interpret(model, in));
  return r;
}

const LayerPlan& layer(const CompileResult& r, const std::string& name) {
  auto it =
      std::find_if(r.layers.begin(), r.layers.end(), [&](const LayerPlan& p) { return p.name == name; });
  if (it == r.layers.end()) throw std::runtime_error("no layer " + name);
  return *it;
}

TEST(ConcatInPlace, DenseBlocksFoldEveryConcatAndComputeWhatTheCopiesDo) {
  const Graph g = dense_blocks(3);
  for (const isa::NpuConfig& config : {isa::NpuConfig{}, small_sram()}) {
    for (const bool random : {false, true}) {
      RunOptions opts;
      opts.random_order = random;
      const Both b = run_both(g, config, opts);
      EXPECT_LE(b.between, 1e-5) << compile_summary(b.folded);
      EXPECT_LT(b.folded_vs_ref, 1e-4);
      EXPECT_EQ(check_tokens(b.folded.program), "");
      EXPECT_TRUE(b.folded.fallbacks.empty()) << compile_summary(b.folded);
      // Every Concat of both blocks (Concat(x0) of the first layer, the growing ones, the block's last)
      // is an alias of its slices: the producers (max pool, convs, average pool) write in place.
      int concats = 0;
      for (const LayerPlan& p : b.folded.layers) {
        if (p.op != "Concat") continue;
        ++concats;
        EXPECT_EQ(p.placement, Placement::kFree) << p.name << ": " << p.mapping;
        EXPECT_EQ(p.instructions, 0) << p.name;
        EXPECT_NE(p.mapping.find("folded into its producers' stores"), std::string::npos) << p.mapping;
        EXPECT_EQ(p.bound_cycles, 0) << p.name;
      }
      EXPECT_EQ(concats, 8);
      for (const char* producer : {"pool0", "b0_l0_f_conv", "b0_l2_f_conv", "b0_tpool", "b1_l1_f_conv"}) {
        EXPECT_NE(layer(b.folded, producer).mapping.find("written in place into its slice"),
                  std::string::npos)
            << producer << ": " << layer(b.folded, producer).mapping;
      }
      // Without folding, every Concat copies.
      for (const LayerPlan& p : b.unfolded.layers) {
        if (p.op == "Concat") {
          EXPECT_GT(p.instructions, 0) << p.name;
        }
      }
      EXPECT_LT(b.folded.program.instructions.size(), b.unfolded.program.instructions.size());
    }
  }
}

TEST(ConcatInPlace, InceptionFoldsWhatItCanAndCopiesTheRest) {
  const Graph g = inception();
  for (const isa::NpuConfig& config : {isa::NpuConfig{}, small_sram()}) {
    const Both b = run_both(g, config, RunOptions{true, 3});
    EXPECT_TRUE(b.folded.fallbacks.empty()) << compile_summary(b.folded);
    EXPECT_LE(b.between, 1e-5) << compile_summary(b.folded);
    EXPECT_LT(b.folded_vs_ref, 1e-4);
    EXPECT_EQ(check_tokens(b.folded.program), "");
    // cat2 (the later one, decided first) takes c and e in place: folded. cat finds them in cat2's
    // buffer, not at its own offsets, so it copies them; d is also read by the Add, which does not read
    // views, so cat copies it too; a it takes in place.
    const LayerPlan& cat = layer(b.folded, "cat_node");
    EXPECT_EQ(cat.placement, Placement::kNpuVector);
    EXPECT_NE(cat.mapping.find("1 of 4 input(s) written in place"), std::string::npos) << cat.mapping;
    EXPECT_EQ(layer(b.folded, "cat2_node").placement, Placement::kFree)
        << layer(b.folded, "cat2_node").mapping;
    EXPECT_NE(layer(b.folded, "a_conv").mapping.find("written in place"), std::string::npos);
    EXPECT_NE(layer(b.folded, "c_conv").mapping.find("written in place"), std::string::npos);
    EXPECT_EQ(layer(b.folded, "d_conv").mapping.find("in place"), std::string::npos);
  }
}

TEST(ConcatInPlace, ProducersThatDoNotWriteViewsGetADenseCopyAndContiguousSlicesNeedNone) {
  // An Exp's and a MatMul's outputs (ONNX order) concatenated along their last axis: strided slices, which
  // the element-wise lowering does not write itself, so compile() hands it a dense scratch and copies it into
  // its slice, while the MATMUL stores its rows with the slice's pitch (backend/memory/strided_views.h,
  // writes_view); and along the first axis: contiguous slices, ordinary tensors at an offset that it writes
  // directly.
  GraphBuilder b;
  b.input("x", {6, 7});
  b.constant("w1", {7, 5}, 0.5f, 1).constant("w2", {7, 3}, 0.5f, 2).constant("w3", {7, 8}, 0.5f, 3);
  b.node("MatMul", {"x", "w1"}, {"a0"}, "a_mm");
  b.node("Exp", {"a0"}, {"a"}, "a_exp");
  b.node("MatMul", {"x", "w2"}, {"c"}, "c_mm");
  Node& side = b.node("Concat", {"a", "c"}, {"side"}, "side_node");
  side.attrs["axis"].value = int64_t{1};
  b.node("MatMul", {"x", "w3"}, {"d"}, "d_mm");
  b.node("Relu", {"side"}, {"r"}, "r_node");
  Node& rows = b.node("Concat", {"r", "d"}, {"rows"}, "rows_node");
  rows.attrs["axis"].value = int64_t{0};
  b.node("Sigmoid", {"rows"}, {"y"}, "y_node");
  b.output("y");
  const Both r = run_both(b.build(), small_sram(), RunOptions{true, 5});
  EXPECT_LE(r.between, 1e-5) << compile_summary(r.folded);
  EXPECT_LT(r.folded_vs_ref, 1e-4);
  EXPECT_EQ(check_tokens(r.folded.program), "");
  for (const char* c : {"side_node", "rows_node"})
    EXPECT_EQ(layer(r.folded, c).placement, Placement::kFree) << c;
  EXPECT_NE(layer(r.folded, "a_exp").mapping.find("copied between a Concat's slice and a dense DRAM scratch"),
            std::string::npos)
      << layer(r.folded, "a_exp").mapping;
  EXPECT_EQ(layer(r.folded, "c_mm").mapping.find("dense DRAM scratch"), std::string::npos);
  EXPECT_NE(layer(r.folded, "c_mm").mapping.find("written in place"), std::string::npos);
  EXPECT_EQ(layer(r.folded, "d_mm").mapping.find("dense DRAM scratch"), std::string::npos);
  EXPECT_NE(layer(r.folded, "d_mm").mapping.find("written in place"), std::string::npos);
}

TEST(ConcatInPlace, AClassTokenConcatWritesOnlyTheConstant) {
  // ViT: a constant class token prepended to the patch embeddings (a Transpose's output, a contiguous
  // slice of the Concat's buffer): the Transpose writes in place, the Concat copies only the token.
  GraphBuilder b;
  b.input("x", {1, 5, 8});
  b.constant("cls", {1, 1, 5}, 0.5f, 1).constant("w", {5, 4}, 0.5f, 2);
  Node& t = b.node("Transpose", {"x"}, {"e"}, "e_node");
  t.attrs["perm"].value = std::vector<int64_t>{0, 2, 1};
  Node& cat = b.node("Concat", {"cls", "e"}, {"cat"}, "cat_node");
  cat.attrs["axis"].value = int64_t{1};
  b.node("MatMul", {"cat", "w"}, {"y"}, "y_node");
  b.output("y");
  const Both r = run_both(b.build(), small_sram());
  EXPECT_LE(r.between, 1e-5) << compile_summary(r.folded);
  EXPECT_LT(r.folded_vs_ref, 1e-4);
  const LayerPlan& c = layer(r.folded, "cat_node");
  EXPECT_NE(c.mapping.find("1 constant input(s) from data segments"), std::string::npos) << c.mapping;
  EXPECT_NE(c.mapping.find("1 of 2 input(s) written in place"), std::string::npos) << c.mapping;
  EXPECT_NE(layer(r.folded, "e_node").mapping.find("written in place"), std::string::npos);
  EXPECT_LT(c.instructions, layer(r.unfolded, "cat_node").instructions);
}

TEST(ConcatInPlace, OffWhenAskedAndForAConcatAMappingFilePlaces) {
  Graph lowered = dense_blocks(2);
  lower(lowered);
  MappingOverrides m;
  LayerMapping keep;
  keep.name = "b0_out_node";
  keep.placement = Placement::kNpuVector;
  m.layers[keep.name] = keep;
  CompileOptions o;
  o.mapping = &m;
  const CompileResult r = compile(lowered, isa::NpuConfig{}, o);
  const LayerPlan& out = layer(r, "b0_out_node");
  EXPECT_EQ(out.placement, Placement::kNpuVector);
  EXPECT_GT(out.instructions, 0);
  EXPECT_EQ(layer(r, "b1_out_node").placement, Placement::kFree);
}

}  // namespace
}  // namespace npusim::compiler::testing
