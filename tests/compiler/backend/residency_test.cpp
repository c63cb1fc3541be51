// On-chip residency between layers (compiler/backend/fusion/residency.h): a conv's output read only by the
// pointwise conv after it stays in the input scratchpad. The program computes exactly what the
// layer-by-layer one does (in program order and in random interleavings of the queues, so the tokens
// order the in-place reads after the writes), the value is never stored; a value with other readers is
// stored for them as well and still read on chip by the pointwise conv; a value a later conv adds as its
// residual is held on chip until that conv; values that do not fit stay in DRAM.
#include <gtest/gtest.h>

#include <algorithm>

#include "compiler/backend/compile.h"
#include "compiler/backend/matrix/matrix_walk.h"
#include "compiler/interp/interpreter.h"
#include "compiler/passes/lowered.h"
#include "tests/compiler/backend/functional.h"

namespace npusim::compiler::testing {
namespace {

// A producer writing its output padded for a 3x3 conv (residency.h, "Padded inputs"): rows of Wp = W + 2
// pixels, images of Hp = H + 2 rows, y_sram at the first real pixel; the output element (img, oy, ox, n)
// lies where the padded conv's tile reads input pixel (oy + 1, ox + 1) of its padded image, by the
// layout's definition, and consecutive images do not overlap.
TEST(Residency, APaddedOutputsElementsLieWhereThePaddedConvReadsThem) {
  backend::MatrixJob j;
  j.images = 3, j.OH = 5, j.OW = 7, j.M = 4;
  const int64_t Hp = j.OH + 2, Wp = j.OW + 2, es = 1;
  j.y_sram_row = Wp * j.M;
  j.y_sram_image = Hp * Wp * j.M;
  const int64_t first = (1 * Wp + 1) * j.M;  // y_sram's offset from the buffer: pixel (1, 1) of image 0
  for (int64_t img = 0; img < j.images; ++img)
    for (int64_t oy = 0; oy < j.OH; ++oy)
      for (int64_t ox = 0; ox < j.OW; ++ox)
        for (int64_t n = 0; n < j.M; ++n) {
          const int64_t padded = ((img * Hp + oy + 1) * Wp + ox + 1) * j.M + n;
          ASSERT_EQ(static_cast<int64_t>(j.y_sram_offset(img, oy, ox, n, es)) + first, padded);
        }
  // Dense (no padding): rows of OW pixels, images of OH rows, as before.
  backend::MatrixJob d = j;
  d.y_sram_row = 0, d.y_sram_image = 0;
  EXPECT_EQ(d.y_sram_offset(2, 3, 4, 1, 2), static_cast<uint64_t>((((2 * 5 + 3) * 7 + 4) * 4 + 1) * 2));
}

void conv(GraphBuilder& b, const std::string& x, const std::string& y, int64_t cin, int64_t cout, int64_t k,
          int64_t group, uint32_t seed) {
  b.constant(y + "_w", {cout, cin / group, k, k}, 0.5f, seed).constant(y + "_b", {cout}, 0.5f, seed + 1);
  Node& n = b.node("Conv", {x, y + "_w", y + "_b"}, {y + "_c"}, y + "_conv");
  n.attrs["pads"].value = std::vector<int64_t>{k / 2, k / 2, k / 2, k / 2};
  n.attrs["kernel_shape"].value = std::vector<int64_t>{k, k};
  n.attrs["group"].value = group;
  b.node("Relu", {y + "_c"}, {y}, y + "_relu");
}

// MobileNetV2's inverted residual (expand -> depthwise -> project, + x), then a ResNet-like 3x3 -> 1x1
// pair whose 3x3 output has a second reader (an Add), so it cannot stay on chip.
Graph blocks() {
  GraphBuilder b;
  b.input("x", {1, 16, 14, 14});
  conv(b, "x", "e", 16, 48, 1, 1, 1);
  conv(b, "e", "d", 48, 48, 3, 48, 3);
  b.constant("p_w", {16, 48, 1, 1}, 0.5f, 5).constant("p_b", {16}, 0.5f, 6);
  Node& p = b.node("Conv", {"d", "p_w", "p_b"}, {"p"}, "p_conv");
  p.attrs["kernel_shape"].value = std::vector<int64_t>{1, 1};
  b.node("Add", {"p", "x"}, {"r"}, "res");
  conv(b, "r", "t", 16, 24, 3, 1, 7);
  conv(b, "t", "u", 24, 16, 1, 1, 9);
  b.node("Add", {"t", "t"}, {"tt"}, "twice");
  b.output("u").output("tt");
  return b.build();
}

const LayerPlan& layer(const CompileResult& r, const std::string& name) {
  auto it =
      std::find_if(r.layers.begin(), r.layers.end(), [&](const LayerPlan& p) { return p.name == name; });
  if (it == r.layers.end()) throw std::runtime_error("no layer " + name);
  return *it;
}

bool on_chip(const CompileResult& r, const std::string& value) {
  return std::any_of(r.on_chip.begin(), r.on_chip.end(),
                     [&](const HostTensor& t) { return t.name == value; });
}

// The model lowered and compiled with residency (kept) and without it (stored, --no-fusion's).
struct Compiled {
  Graph lowered;
  CompileResult kept, stored;
};
Compiled compile_both(const Graph& g, isa::DType precision, const isa::NpuConfig& config,
                      const PipelineOptions& o = {}) {
  Compiled c;
  c.lowered = g;
  lower(c.lowered, o);
  CompileOptions on, off;
  on.precision = off.precision = precision;
  off.keep_on_chip = false;
  c.kept = compile(c.lowered, config, on);
  c.stored = compile(c.lowered, config, off);
  return c;
}

// The kept program computes exactly what the stored one does, in program order and in random interleavings
// of the queues (the tokens order every read on chip after its write); the stored one is the model's.
void expect_same_results(const Compiled& c, const Graph& model, const isa::NpuConfig& config,
                         const std::map<std::string, Tensor>& in, double tolerance) {
  EXPECT_EQ(check_tokens(c.kept.program), "");
  const auto want = run_program(c.stored, config, in);
  EXPECT_EQ(max_rel_error(run_program(c.kept, config, in), want), 0.0);
  for (uint32_t seed : {1u, 2u, 3u}) {
    RunOptions shuffled;
    shuffled.random_order = true;
    shuffled.seed = seed;
    EXPECT_EQ(max_rel_error(run_program(c.kept, config, in, shuffled), want), 0.0) << "interleaving " << seed;
  }
  EXPECT_LT(max_rel_error(want, interpret(model, in)), tolerance);
}

TEST(Residency, DepthwiseOutputStaysOnChipForItsPointwiseReaderAndComputesTheSame) {
  for (const isa::DType precision : {isa::DType::kFp32, isa::DType::kFp16}) {
    const isa::NpuConfig config;
    const Compiled both = compile_both(blocks(), precision, config);
    const Graph& lowered = both.lowered;
    const CompileResult& kept = both.kept;
    const CompileResult& stored = both.stored;
    // The depthwise conv's output (its fused Relu's value) is read where it lies.
    const LayerPlan& proj = layer(kept, "p_conv");
    EXPECT_EQ(proj.on_chip_input, "d");
    EXPECT_EQ(proj.on_chip_bytes_saved, 2 * 48 * 14 * 14 * isa::dtype_bytes(precision));
    EXPECT_TRUE(on_chip(kept, "d"));
    EXPECT_TRUE(layer(stored, "p_conv").on_chip_input.empty());
    EXPECT_TRUE(stored.on_chip.empty());
    // A value with a second reader is stored too, for that reader, and the pointwise conv after it still
    // reads it on chip: one read saved.
    EXPECT_FALSE(on_chip(kept, "t"));
    EXPECT_EQ(layer(kept, "u_conv").on_chip_input, "t");
    EXPECT_EQ(layer(kept, "u_conv").on_chip_bytes_saved, 24 * 14 * 14 * isa::dtype_bytes(precision));
    EXPECT_TRUE(layer(stored, "u_conv").on_chip_input.empty());
    // The depthwise layer stores nothing: its epilogue writes the tiles into the input scratchpad.
    int64_t stores = 0, dw_layer = -1;
    for (size_t i = 0; i < lowered.nodes.size(); ++i) {
      if (lowered.nodes[i].name == "d_conv") dw_layer = static_cast<int64_t>(i);
    }
    ASSERT_GE(dw_layer, 0);
    int64_t t_stored = 0;
    for (const isa::Instruction& ins : kept.program.instructions) {
      stores += ins.layer() == static_cast<uint32_t>(dw_layer) && ins.opcode == isa::Opcode::kStore;
      if (ins.opcode == isa::Opcode::kStore && kept.layers.at(ins.layer()).name == "t_conv")
        t_stored += ins.get(isa::Field::kSize0) * ins.get(isa::Field::kSize1) * ins.get(isa::Field::kSize2);
    }
    EXPECT_EQ(stores, 0);
    EXPECT_EQ(t_stored, 24 * 14 * 14);  // every element of t, once
    expect_same_results(both, blocks(), config, {{"x", random_tensor({1, 16, 14, 14}, 1.0f, 11)}},
                        precision == isa::DType::kFp32 ? 1e-5 : 2e-2);
  }
}

// Two ResNet bottleneck blocks after a stem conv, then a 1x1 conv: in the first, one of the two convs
// before the Add is read by the other only, as its residual (the lowering puts the downsample conv last and
// fuses the Add into it); the second block reads the first's output x1 with its 1x1 conv and, three layers
// on, as its residual.
Graph bottlenecks() {
  GraphBuilder b;
  b.input("x", {1, 8, 8, 8});
  conv(b, "x", "s", 8, 16, 3, 1, 1);
  conv(b, "s", "a1", 16, 8, 1, 1, 3);
  conv(b, "a1", "a2", 8, 8, 3, 1, 5);
  b.constant("ds_w", {32, 16, 1, 1}, 0.5f, 7).constant("ds_b", {32}, 0.5f, 8);
  b.node("Conv", {"s", "ds_w", "ds_b"}, {"ds"}, "ds_conv").attrs["kernel_shape"].value =
      std::vector<int64_t>{1, 1};
  b.constant("a3_w", {32, 8, 1, 1}, 0.5f, 9).constant("a3_b", {32}, 0.5f, 10);
  b.node("Conv", {"a2", "a3_w", "a3_b"}, {"a3"}, "a3_conv").attrs["kernel_shape"].value =
      std::vector<int64_t>{1, 1};
  b.node("Add", {"a3", "ds"}, {"x1s"}, "add1");
  b.node("Relu", {"x1s"}, {"x1"}, "relu1");
  conv(b, "x1", "b1", 32, 8, 1, 1, 11);
  conv(b, "b1", "b2", 8, 8, 3, 1, 13);
  b.constant("b3_w", {32, 8, 1, 1}, 0.5f, 15).constant("b3_b", {32}, 0.5f, 16);
  b.node("Conv", {"b2", "b3_w", "b3_b"}, {"b3"}, "b3_conv").attrs["kernel_shape"].value =
      std::vector<int64_t>{1, 1};
  b.node("Add", {"b3", "x1"}, {"y"}, "add2");
  conv(b, "y", "z", 32, 16, 1, 1, 17);
  b.output("z");
  return b.build();
}

TEST(Residency, AResidualStaysOnChipFromItsProducerToTheConvThatAddsItAndComputesTheSame) {
  for (const isa::DType precision : {isa::DType::kFp32, isa::DType::kFp16}) {
    const isa::NpuConfig config;
    const Compiled both = compile_both(bottlenecks(), precision, config);
    const CompileResult& kept = both.kept;
    const CompileResult& stored = both.stored;
    // Neither residual touches DRAM: a3 is read where it was written by the conv that adds it (ds_conv,
    // the next layer), and x1 by the next block's 1x1 conv in place and three layers on by its residual Add
    // (b3_conv, whose tiles hold every channel of whole rows, as it leaves its own output on chip for z).
    EXPECT_TRUE(on_chip(kept, "a3")) << "read only as a residual";
    EXPECT_TRUE(on_chip(kept, "x1")) << "block output";
    EXPECT_EQ(layer(kept, "b1_conv").on_chip_input, "x1");
    // The DRAM bytes the holds save: a3's write and read (its only reader is ds_conv, as its residual), and
    // x1's second read (b1_conv counts its write and first read), on top of what the layers read in place.
    const int64_t e = isa::dtype_bytes(precision);
    EXPECT_EQ(layer(kept, "ds_conv").on_chip_bytes_saved - layer(stored, "ds_conv").on_chip_bytes_saved,
              2 * 32 * 8 * 8 * e);
    EXPECT_EQ(layer(kept, "b1_conv").on_chip_bytes_saved, 2 * 32 * 8 * 8 * e);
    // b3_conv reads b2 in place (its write and read) and x1 where the hold kept it (its second read).
    EXPECT_EQ(layer(kept, "b3_conv").on_chip_input, "b2");
    EXPECT_EQ(layer(kept, "b3_conv").on_chip_bytes_saved, 2 * 8 * 8 * 8 * e + 32 * 8 * 8 * e);
    EXPECT_FALSE(on_chip(stored, "a3"));
    EXPECT_FALSE(on_chip(stored, "x1"));
    expect_same_results(both, bottlenecks(), config, {{"x", random_tensor({1, 8, 8, 8}, 1.0f, 21)}},
                        precision == isa::DType::kFp32 ? 1e-5 : 2e-2);
  }
}

// A transformer's FFN: MatMul -> bias -> GELU-like activation -> MatMul, the hidden layer wide. The hidden
// layer is read by the second MatMul only, so it stays in the input scratchpad, in column blocks of the
// first MatMul's output-channel tile (its tiles need not hold every channel), and is never stored.
Graph ffn(int64_t rows, int64_t d, int64_t hidden) {
  GraphBuilder b;
  b.input("x", {1, rows, d});
  b.constant("w1", {d, hidden}, 0.5f, 1).constant("b1", {hidden}, 0.5f, 2);
  b.node("MatMul", {"x", "w1"}, {"m1"}, "fc1");
  b.node("Add", {"m1", "b1"}, {"a1"}, "fc1_bias");
  b.node("Relu", {"a1"}, {"h"}, "act");
  b.constant("w2", {hidden, d}, 0.5f, 3);
  b.node("MatMul", {"h", "w2"}, {"y"}, "fc2");
  b.output("y");
  return b.build();
}

TEST(Residency, AnFfnsHiddenLayerStaysOnChipInColumnBlocksAndComputesTheSame) {
  for (const isa::DType precision : {isa::DType::kFp32, isa::DType::kFp16}) {
    const isa::NpuConfig config;
    const Compiled both = compile_both(ffn(64, 48, 512), precision, config);
    const CompileResult& kept = both.kept;
    ASSERT_TRUE(on_chip(kept, "h"));
    const auto h = std::find_if(kept.on_chip.begin(), kept.on_chip.end(),
                                [](const HostTensor& t) { return t.name == "h"; });
    // The first MatMul's tiles hold fewer than its 512 output channels: the value lies in blocks of them.
    EXPECT_GT(h->block, 0);
    EXPECT_LT(h->block, 512);
    EXPECT_EQ(512 % h->block, 0);
    EXPECT_EQ(layer(kept, "fc2").on_chip_input, "h");
    EXPECT_EQ(layer(kept, "fc2").on_chip_bytes_saved, 2 * 64 * 512 * isa::dtype_bytes(precision));
    EXPECT_FALSE(on_chip(both.stored, "h"));
    // Only x, the weights and y cross the DRAM interface: fc1 stores nothing.
    for (const isa::Instruction& ins : kept.program.instructions)
      EXPECT_FALSE(ins.opcode == isa::Opcode::kStore && kept.layers.at(ins.layer()).name == "fc1");
    expect_same_results(both, ffn(64, 48, 512), config, {{"x", random_tensor({1, 64, 48}, 1.0f, 31)}},
                        precision == isa::DType::kFp32 ? 1e-5 : 2e-2);
  }
}

// A LayerNorm read only by the MatMul after it (a ViT block's ln_2 -> mlp.0): the row-wise layer writes its
// rows where the residency planner reserved them, the MatMul reads them in place, nothing is stored.
TEST(Residency, ALayerNormsOutputStaysOnChipForTheMatMulAfterItAndComputesTheSame) {
  GraphBuilder b;
  b.input("x", {1, 64, 96});
  b.constant("g", {96}, 0.5f, 1).constant("be", {96}, 0.5f, 2).constant("w", {96, 40}, 0.5f, 3);
  b.node("LayerNormalization", {"x", "g", "be"}, {"n"}, "ln").attrs["epsilon"].value = 1e-5f;
  b.node("MatMul", {"n", "w"}, {"y"}, "fc");
  b.output("y");
  const Graph g = b.build();
  for (const isa::DType precision : {isa::DType::kFp32, isa::DType::kFp16}) {
    const isa::NpuConfig config;
    PipelineOptions whole;  // the LayerNorm as one row-wise layer
    whole.whole_row_limit = rowwise_row_limit(config);
    const Compiled both = compile_both(g, precision, config, whole);
    ASSERT_TRUE(on_chip(both.kept, "n"));
    EXPECT_EQ(layer(both.kept, "fc").on_chip_input, "n");
    EXPECT_EQ(layer(both.kept, "fc").on_chip_bytes_saved, 2 * 64 * 96 * isa::dtype_bytes(precision));
    EXPECT_FALSE(on_chip(both.stored, "n"));
    for (const isa::Instruction& ins : both.kept.program.instructions)
      EXPECT_FALSE(ins.opcode == isa::Opcode::kStore && both.kept.layers.at(ins.layer()).name == "ln");
    expect_same_results(both, g, config, {{"x", random_tensor({1, 64, 96}, 1.0f, 41)}},
                        precision == isa::DType::kFp32 ? 1e-5 : 2e-2);
  }
}

TEST(Residency, AValueTooLargeForTheScratchpadOrAskedOffStaysInDram) {
  Graph lowered = blocks();
  lower(lowered);
  isa::NpuConfig config = small_sram();  // 16 KiB input scratchpad: 48 x 14 x 14 fp32 does not fit
  const CompileResult r = compile(lowered, config);
  EXPECT_TRUE(r.on_chip.empty());
  EXPECT_TRUE(layer(r, "p_conv").on_chip_input.empty());
  std::map<std::string, Tensor> in{{"x", random_tensor({1, 16, 14, 14}, 1.0f, 11)}};
  EXPECT_LT(max_rel_error(run_program(r, config, in), interpret(blocks(), in)), 1e-5);
}

}  // namespace
}  // namespace npusim::compiler::testing

namespace npusim::compiler::testing {
namespace {

TEST(Residency, AMappingFileImposesItOrForbidsItAndNamesWhyItCannot) {
  Graph lowered = blocks();
  lower(lowered);
  const isa::NpuConfig config;
  MappingOverrides m;
  CompileOptions opt;
  opt.mapping = &m;
  m.layers["d_conv"].name = "d_conv";
  m.layers["d_conv"].on_chip = false;
  EXPECT_TRUE(compile(lowered, config, opt).on_chip.empty());
  m.layers["d_conv"].on_chip = true;
  const CompileResult r = compile(lowered, config, opt);
  EXPECT_EQ(layer(r, "p_conv").on_chip_input, "d");
  EXPECT_EQ(*layer(r, "d_conv").chosen.on_chip, true);
  // The 3x3 conv's output has a second reader, which reads the copy the conv stores as well.
  m.layers["t_conv"].name = "t_conv";
  m.layers["t_conv"].on_chip = true;
  EXPECT_EQ(layer(compile(lowered, config, opt), "u_conv").on_chip_input, "t");
  // The expand conv's reader is the depthwise conv.
  m.layers["e_conv"].name = "e_conv";
  m.layers["e_conv"].on_chip = true;
  try {
    compile(lowered, config, opt);
    ADD_FAILURE() << "on_chip=true before a depthwise conv compiled";
  } catch (const MappingError& e) {
    EXPECT_NE(
        std::string(e.what()).find("layer 'e_conv': on_chip=true: the next layer is not a pointwise Conv"),
        std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace npusim::compiler::testing
