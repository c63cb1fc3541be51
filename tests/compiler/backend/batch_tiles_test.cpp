// Convolutions over a batch with whole images stacked in one tile (Tiling::ti, the mapping key tile_images):
// one LOAD brings several images with their halos, one CONV per chunk streams them all through the array,
// the epilogue stores each image's rows. The program computes bit for bit what one image a tile computes
// (fp32, fp16 and int8; stride 1 and 2, a fused residual), and a tile of the whole batch loads every weight
// once, where one image a tile loads them once per image. And a convolution tile of more than 65,535 output
// pixels (MatrixMapper::max_tile_pixels): where the scratchpads hold it, a layer streams as one CONV, its
// epilogue's VECs spanning rows x columns (tile_box), and computes bit for bit what tiles of at most 65,535
// pixels compute. Two conv steps for the big presets' batches (docs/models.md, "Batch 8 on tpu-v1: fewer
// epilogue passes, whole input tiles"): an int8 conv that adds a residual adds it before its bias, so that
// the bias, the requantization and the clamp take one output-stage VEC, the residual's codes reach the sums'
// grid in another (its zero point off and its rescale: three passes over a tile instead of five), and
// computes what the quantized reference computes; an int8 conv's input tile resident across its
// K chunks (one LOAD of every channel, each chunk's CONV reading its channels in place with a_stride)
// computes bit for bit what a LOAD of each chunk's channels computes, and a float conv is not offered it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <optional>

#include "compiler/backend/compile.h"
#include "compiler/interp/interpreter.h"
#include "compiler/passes/lowered.h"
#include "compiler/quant/accuracy.h"
#include "compiler/quant/emulate.h"
#include "tests/compiler/backend/functional.h"

namespace npusim::compiler::testing {
namespace {

constexpr int64_t kImages = 5;  // not a power of two: the last tile of a 4-image tiling holds one image

Node& conv(GraphBuilder& b, const std::string& x, const std::string& y, int64_t cin, int64_t cout,
           int64_t stride, uint32_t seed) {
  b.constant(y + "_w", {cout, cin, 3, 3}, 0.5f, seed).constant(y + "_b", {cout}, 0.5f, seed + 1);
  Node& n = b.node("Conv", {x, y + "_w", y + "_b"}, {y}, y + "_conv");
  n.attrs["pads"].value = std::vector<int64_t>{1, 1, 1, 1};
  n.attrs["kernel_shape"].value = std::vector<int64_t>{3, 3};
  n.attrs["strides"].value = std::vector<int64_t>{stride, stride};
  return n;
}

// x [5, 8, 6, 6] -> 3x3 conv, Relu -> 3x3 stride-2 conv (3 x 3 outputs, an odd image of 7 input rows) -> 3x3
// conv + its input (a fused residual). Every layer's weights take more than small_sram()'s weight scratchpad.
Graph model() {
  GraphBuilder b;
  b.input("x", {kImages, 8, 6, 6});
  conv(b, "x", "a", 8, 32, 1, 1);
  b.node("Relu", {"a"}, {"ar"}, "a_relu");
  conv(b, "ar", "s", 32, 32, 2, 3);
  conv(b, "s", "c", 32, 32, 1, 5);
  b.node("Add", {"c", "s"}, {"y"}, "res");
  b.output("y");
  return b.build();
}

const std::vector<std::string> kConvs = {"a_conv", "s_conv", "c_conv"};

// The same channel chunks whatever the images a tile: floating-point sums add in the order of the chunks.
MappingOverrides images_a_tile(int64_t n, int64_t tile_n = 8, std::optional<LoopOrder> order = std::nullopt) {
  MappingOverrides m;
  for (const std::string& name : kConvs) {
    LayerMapping e;
    e.name = name;
    e.tile_images = n;
    e.tile_c = 4;
    e.tile_n = tile_n;
    e.loop_order = order;
    e.where[""] = "m.yaml:1:1";
    m.layers[name] = e;
  }
  return m;
}

const LayerPlan& layer(const CompileResult& r, const std::string& name) { return layer_named(r, name); }

TEST(BatchTiles, ImagesStackedInOneTileComputeBitForBitWhatOneImageATileComputes) {
  const Graph g = model();
  for (const isa::DType p : {isa::DType::kFp32, isa::DType::kFp16, isa::DType::kInt8}) {
    Compiled one, four, all;
    compile_and_run(g, isa::NpuConfig{}, p, images_a_tile(1), &one);
    compile_and_run(g, isa::NpuConfig{}, p, images_a_tile(4), &four);
    compile_and_run(g, isa::NpuConfig{}, p, images_a_tile(kImages), &all);
    for (const std::string& name : kConvs) {
      EXPECT_EQ(layer(one.result, name).loop_order.find("images a tile"), std::string::npos);
      EXPECT_NE(layer(four.result, name).loop_order.find("4 images a tile"), std::string::npos)
          << isa::kDTypeNames[static_cast<size_t>(p)] << " " << name << ": "
          << layer(four.result, name).loop_order;
      EXPECT_NE(layer(all.result, name).loop_order.find("5 images a tile"), std::string::npos);
      EXPECT_LT(layer(all.result, name).instructions, layer(one.result, name).instructions);
    }
    EXPECT_TRUE(same_bits(one.out, four.out)) << isa::kDTypeNames[static_cast<size_t>(p)];
    EXPECT_TRUE(same_bits(one.out, all.out)) << isa::kDTypeNames[static_cast<size_t>(p)];
    if (p == isa::DType::kFp32) {
      const std::map<std::string, Tensor> ref =
          interpret(g, {{"x", random_tensor(g.value("x").shape, 2.0f, 7)}});
      EXPECT_LT(max_rel_error({{"y", all.out}}, ref), 1e-5);
    }
  }
}

TEST(BatchTiles, ATileOfTheWholeBatchLoadsEachWeightOnce) {
  // Small scratchpads: every layer's weights come in several chunks, so one image a tile, its output
  // channels inner, reloads them for every image (at least).
  const isa::NpuConfig config = small_sram();
  const Graph g = model();
  Compiled one, all;
  compile_and_run(g, config, isa::DType::kFp32, images_a_tile(1, 2, LoopOrder::kSpatialOuter), &one);
  compile_and_run(g, config, isa::DType::kFp32, images_a_tile(kImages, 2, LoopOrder::kSpatialOuter), &all);
  EXPECT_TRUE(same_bits(one.out, all.out));
  for (const auto& [name, cin] :
       {std::pair<std::string, int64_t>{"a_conv", 8}, {"s_conv", 32}, {"c_conv", 32}}) {
    const int64_t weights = 9 * cin * 32 * 4;  // fp32
    EXPECT_EQ(weight_bytes_loaded(all.result, name), weights) << name;
    EXPECT_GE(weight_bytes_loaded(one.result, name), kImages * weights) << name;
  }
}

TEST(BatchTiles, AMappingFileGivesTileImagesToBatchConvolutionsOnly) {
  const Graph g = model();
  Compiled c;
  // More images than the batch: the key names the layer and its images.
  EXPECT_THROW(compile_and_run(g, isa::NpuConfig{}, isa::DType::kFp32, images_a_tile(kImages + 1), &c),
               MappingError);
  // Whole images only.
  MappingOverrides m = images_a_tile(2);
  m.layers["a_conv"].tile_oh = 2;
  try {
    compile_and_run(g, isa::NpuConfig{}, isa::DType::kFp32, m, &c);
    ADD_FAILURE() << "tile_images with tile_oh below the image compiled";
  } catch (const MappingError& e) {
    EXPECT_NE(std::string(e.what()).find("tile_images above 1 takes whole images"), std::string::npos)
        << e.what();
  }
}

// x [1, 4, 260, 260] -> 3x3 conv to 8 channels with a bias, Relu: 258 x 258 = 66,564 output pixels.
Graph wide_conv() {
  GraphBuilder b;
  b.input("x", {1, 4, 260, 260});
  b.constant("w", {8, 4, 3, 3}, 0.5f, 3).constant("b", {8}, 0.5f, 4);
  Node& n = b.node("Conv", {"x", "w", "b"}, {"c"}, "conv");
  n.attrs["kernel_shape"].value = std::vector<int64_t>{3, 3};
  b.node("Relu", {"c"}, {"y"}, "relu");
  b.output("y");
  return b.build();
}

TEST(LargeTiles, AConvTileOfMoreThan65535PixelsComputesWhatSmallerTilesCompute) {
  // Scratchpads that hold the whole layer (fp32 sums of 66,564 pixels x 8 channels, both sides: 4.3 MB), an
  // array that pays each fold's preload, fill and drain, memory without latency: one tile is the fastest.
  isa::NpuConfig whole;
  whole.systolic_array.pipelined_folds = false;
  whole.systolic_array.double_buffered = false;
  whole.sram.input.size_kib = 4096;
  whole.sram.accumulator.size_kib = 8192;
  whole.dram.model = isa::DramModel::kIdeal;
  whole.dram.latency_ns = 0;
  const Graph g = wide_conv();
  // One output pixel a column: 8 channels of 32 columns would pack 3 (pixel_packing.h), a third of the
  // pixels.
  MappingOverrides unpacked;
  unpacked.layers["conv"].name = "conv";
  unpacked.layers["conv"].pack_pixels = 1;
  for (const isa::DType p : {isa::DType::kFp32, isa::DType::kInt8}) {
    const std::string name(isa::kDTypeNames[static_cast<size_t>(p)]);
    Compiled tiled, one;
    compile_and_run(g, isa::NpuConfig{}, p, unpacked, &tiled);
    compile_and_run(g, whole, p, unpacked, &one);
    EXPECT_LE(layer(tiled.result, "conv").tile_m, 65535) << name;
    EXPECT_EQ(layer(one.result, "conv").tile_m, 258 * 258) << name;
    EXPECT_TRUE(same_bits(tiled.out, one.out)) << name;
    if (p == isa::DType::kFp32) {
      const std::map<std::string, Tensor> ref =
          interpret(g, {{"x", random_tensor(g.value("x").shape, 2.0f, 7)}});
      EXPECT_LT(max_rel_error({{"y", one.out}}, ref), 1e-5);
    }
  }
}

TEST(ConvEpilogue, AnInt8ResidualIsAddedBeforeOneOutputStagePassAndMatchesTheQuantizedReference) {
  const Graph g = model();
  Compiled c;
  compile_and_run(g, isa::NpuConfig{}, isa::DType::kInt8, MappingOverrides{}, &c);
  // The residual conv: per output tile, one output-stage VEC of the residual's codes (its zero point off, its
  // rescale), the add, then one output-stage VEC of the sums (bias, requantization and clamp): no VEC adds
  // the bias row on its own.
  int64_t outputs = 0, residual_stages = 0, vecs = 0, bias_adds = 0;
  for (const isa::Instruction& ins : c.result.program.instructions) {
    if (ins.opcode != isa::Opcode::kVec || c.result.layers.at(ins.layer()).name != "c_conv") continue;
    ++vecs;
    const auto op = static_cast<isa::VecOp>(ins.get(isa::Field::kVop));
    const bool sums = static_cast<isa::DType>(ins.get(isa::Field::kDtype)) == isa::DType::kInt32;
    outputs += op == isa::VecOp::kOutput && sums;
    residual_stages += op == isa::VecOp::kOutput && !sums;
    bias_adds +=
        op == isa::VecOp::kAdd && static_cast<isa::Bcast>(ins.get(isa::Field::kBcast)) == isa::Bcast::kRow;
  }
  EXPECT_GT(outputs, 0);
  EXPECT_EQ(bias_adds, 0);
  EXPECT_EQ(residual_stages, outputs);
  EXPECT_EQ(vecs, 3 * outputs);
  // The same codes as the quantized reference: the sums saturate in neither order.
  const std::map<std::string, Tensor> in = {{"x", random_tensor(g.value("x").shape, 2.0f, 7)}};
  EXPECT_TRUE(same_bits(c.out, quant::emulate(c.lowered, c.plan, in).at("y")));
}

// Every conv with 4 input channels a K chunk, all 32 output channels, one whole image a tile, under `order`.
MappingOverrides chunks(LoopOrder order) {
  MappingOverrides m = images_a_tile(1, 32, order);
  for (const std::string& name : kConvs)
    m.layers[name].tile_oh = m.layers[name].tile_ow = name == "a_conv" ? 6 : 3;
  return m;
}

// LOADs into the input scratchpad of layer `name`.
int64_t input_loads(const CompileResult& r, const std::string& name) {
  int64_t n = 0;
  for (const isa::Instruction& ins : r.program.instructions) {
    n += ins.opcode == isa::Opcode::kLoad && r.layers.at(ins.layer()).name == name &&
         static_cast<isa::Buffer>(ins.get(isa::Field::kBuf)) == isa::Buffer::kInput;
  }
  return n;
}

TEST(ConvInputResident, AnInt8ConvTileResidentAcrossItsKChunksComputesBitForBitWhatChunkLoadsCompute) {
  const Graph g = model();
  Compiled chunked, resident;
  compile_and_run(g, isa::NpuConfig{}, isa::DType::kInt8, chunks(LoopOrder::kSpatialOuter), &chunked);
  compile_and_run(g, isa::NpuConfig{}, isa::DType::kInt8, chunks(LoopOrder::kInputResident), &resident);
  for (const std::string& conv : kConvs) {
    const LayerPlan& l = layer(resident.result, conv);
    EXPECT_NE(l.loop_order.find("input tile resident across its K chunks"), std::string::npos)
        << conv << ": " << l.loop_order;
    // One LOAD of every channel an image, not one per chunk of 4 channels (2 or 8 chunks).
    const int64_t nk = conv == "a_conv" ? 2 : 8;
    EXPECT_EQ(input_loads(resident.result, conv), kImages) << conv;
    EXPECT_EQ(input_loads(chunked.result, conv), kImages * nk) << conv;
  }
  EXPECT_TRUE(same_bits(chunked.out, resident.out));
  // A float conv's chunks add their partial sums in order: the search does not offer the loop order (its
  // tilings would change the outputs), and a mapping file naming it is an error.
  Compiled f;
  EXPECT_ANY_THROW(
      compile_and_run(g, isa::NpuConfig{}, isa::DType::kFp32, chunks(LoopOrder::kInputResident), &f));
}

}  // namespace
}  // namespace npusim::compiler::testing
