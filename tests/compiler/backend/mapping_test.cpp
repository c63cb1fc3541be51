// Imposed mappings (compiler/backend/mapping/mapping.h): the back end maps a layer as its entry says,
// searches what the entry leaves open, reproduces a compile from the mappings it reports, and rejects every
// value that cannot apply with WHERE: layer 'NAME': CONSTRAINT.
#include <gtest/gtest.h>

#include <string>

#include "compiler/backend/compile.h"
#include "compiler/import/import.h"
#include "compiler/passes/lowered.h"
#include "tests/compiler/backend/functional.h"

namespace npusim::compiler::testing {
namespace {

// x [1, 16, 12, 10] -> Conv 3x3 pad 1 (`groups` groups) -> [1, 24, 12, 10] -> GlobalAveragePool (a vector
// layer).
Graph conv_then_vector(int64_t groups = 1) {
  GraphBuilder b;
  b.input("x", {1, 16, 12, 10});
  b.constant("w", {24, 16 / groups, 3, 3}, 0.5f, 3);
  Node& n = b.node("Conv", {"x", "w"}, {"c"});
  n.attrs["pads"].value = std::vector<int64_t>{1, 1, 1, 1};
  n.attrs["kernel_shape"].value = std::vector<int64_t>{3, 3};
  n.attrs["group"].value = groups;
  b.node("GlobalAveragePool", {"c"}, {"y"});
  b.output("y");
  return b.build();
}

// x [40, 24] x w [24, 20] (a constant MatMul).
Graph matmul() {
  GraphBuilder b;
  b.input("x", {40, 24});
  b.constant("w", {24, 20}, 0.5f, 5);
  b.node("MatMul", {"x", "w"}, {"y"});
  b.output("y");
  return b.build();
}

const LayerPlan& layer(const CompileResult& r, const std::string& name) {
  for (const LayerPlan& p : r.layers) {
    if (p.name == name) return p;
  }
  throw std::logic_error("no layer " + name);
}

LayerMapping entry(const std::string& name) {
  LayerMapping m;
  m.name = name;
  m.where[""] = "m.yaml:3:5";
  return m;
}

CompileResult compile_with(const Graph& model, const MappingOverrides& mapping,
                           const isa::NpuConfig& config = {}) {
  Graph lowered = model;
  lower(lowered);
  CompileOptions o;
  o.mapping = &mapping;
  return compile(lowered, config, o);
}

// The MappingError of compiling `model` under one entry (empty when it compiles).
std::string error_of(const Graph& model, const LayerMapping& m, const isa::NpuConfig& config = {}) {
  MappingOverrides mapping;
  mapping.layers[m.name] = m;
  try {
    compile_with(model, mapping, config);
  } catch (const MappingError& e) {
    return e.what();
  }
  return "";
}

// Compiles `model` on the edge preset under one imposed entry and runs it against the interpreter:
// the largest relative error of its outputs (*r: the result).
double imposed_error(const Graph& model, const LayerMapping& m, CompileResult* r) {
  MappingOverrides mapping;
  mapping.layers[m.name] = m;
  CompileOptions o;
  o.mapping = &mapping;
  return compile_and_compare(model, isa::NpuConfig{}, r, {}, o);
}

TEST(Mapping, ImposedTileIsWhatTheLayerPlanReportsAndStillComputesTheModel) {
  LayerMapping m = entry("c_node");
  m.tile_oh = 5, m.tile_ow = 4, m.tile_c = 8, m.tile_n = 16, m.loop_order = LoopOrder::kChannelOuter;
  CompileResult r;
  EXPECT_LT(imposed_error(conv_then_vector(), m, &r), 1e-4);
  const LayerPlan& p = layer(r, "c_node");
  EXPECT_EQ(p.tile_oh, 5);
  EXPECT_EQ(p.tile_ow, 4);
  EXPECT_EQ(p.tile_m, 20);
  EXPECT_EQ(p.tile_k, 3 * 3 * 8);
  EXPECT_EQ(p.tile_n, 16);
  EXPECT_EQ(p.candidates, 1);  // nothing left to search
  EXPECT_NE(p.loop_order.find("channel-outer"), std::string::npos) << p.loop_order;
  EXPECT_EQ(p.chosen.tile_c, 8);
  EXPECT_EQ(p.chosen.loop_order, LoopOrder::kChannelOuter);
}

TEST(Mapping, AnInputResidentGemmLoadsEachInputTileOnceAndReadsItsKChunksInPlace) {
  // 37 x 300 x 45 with K chunks of 64 and column tiles of 16: spatial-outer reloads the input tile for
  // every (K chunk, column tile), 5 x 3 = 15 times per row tile; input-resident loads it once and each
  // MATMUL reads its chunk with a_stride = 300. Same numbers either way.
  GraphBuilder b;
  b.input("x", {37, 300});
  b.constant("w", {300, 45}, 0.5f, 5);
  b.node("MatMul", {"x", "w"}, {"y"}).name = "mm";
  b.output("y");
  const Graph g = b.build();
  for (LoopOrder order : {LoopOrder::kSpatialOuter, LoopOrder::kInputResident}) {
    LayerMapping m = entry("mm");
    m.tile_m = 37, m.tile_k = 64, m.tile_n = 16, m.loop_order = order;
    CompileResult r;
    EXPECT_LT(imposed_error(g, m, &r), 1e-4) << compile_summary(r);
    EXPECT_EQ(check_tokens(r.program), "");
    int input_loads = 0, strided = 0;
    for (const isa::Instruction& i : r.program.instructions) {
      if (i.opcode == isa::Opcode::kLoad &&
          i.get(isa::Field::kBuf) == static_cast<int64_t>(isa::Buffer::kInput))
        ++input_loads;
      if (i.opcode == isa::Opcode::kMatmul && i.get(isa::Field::kAStride) == 300) ++strided;
    }
    const bool resident = order == LoopOrder::kInputResident;
    EXPECT_EQ(input_loads, resident ? 1 : 15) << compile_summary(r);
    EXPECT_EQ(strided, resident ? 15 : 0) << compile_summary(r);
    EXPECT_EQ(layer(r, "mm").chosen.loop_order, order);
  }
  // A convolution cannot: its K chunks are not columns of one matrix.
  LayerMapping conv = entry("c_node");
  conv.loop_order = LoopOrder::kInputResident;
  EXPECT_NE(error_of(conv_then_vector(), conv).find("loop_order=input_resident applies to GEMMs"),
            std::string::npos)
      << error_of(conv_then_vector(), conv);
}

TEST(Mapping, WeightsLoadedOnceTakeOneSlotAndTheWholeWeightScratchpad) {
  // A 1x1 conv, 256 -> 96 channels on a 14x14 map, fp32 weights of 96 KiB: they fit the edge preset's
  // 128 KiB weight scratchpad, but not two 64 KiB ping-pong halves. As one tile for the whole layer
  // (Reuse::b_once) they take one slot and are loaded once; the input streams past them.
  GraphBuilder b;
  b.input("x", {1, 256, 14, 14});
  b.constant("w", {96, 256, 1, 1}, 0.5f, 7);
  Node& n = b.node("Conv", {"x", "w"}, {"y"}, "pw");
  n.attrs["kernel_shape"].value = std::vector<int64_t>{1, 1};
  b.output("y");
  const Graph g = b.build();
  LayerMapping m = entry("pw");
  m.tile_oh = 7, m.tile_ow = 14, m.tile_c = 256, m.tile_n = 96, m.loop_order = LoopOrder::kSpatialOuter;
  CompileResult r;
  EXPECT_LT(imposed_error(g, m, &r), 1e-4) << compile_summary(r);
  EXPECT_EQ(check_tokens(r.program), "");
  EXPECT_EQ(layer(r, "pw").sram_weight_bytes, 96 * 256 * 4);
  size_t pw = 0;
  while (r.layers[pw].name != "pw") ++pw;
  int weight_loads = 0, input_loads = 0;  // the conv's (the layout conversions around it load too)
  for (const isa::Instruction& i : r.program.instructions) {
    if (i.opcode != isa::Opcode::kLoad || i.layer() != pw) continue;
    weight_loads += i.get(isa::Field::kBuf) == static_cast<int64_t>(isa::Buffer::kWeight);
    input_loads += i.get(isa::Field::kBuf) == static_cast<int64_t>(isa::Buffer::kInput);
  }
  EXPECT_EQ(weight_loads, 1);  // not once per spatial tile
  EXPECT_EQ(input_loads, 2);   // two tiles of 7 rows
}

TEST(Mapping, ValuesTheEntryLeavesOutAreSearched) {
  MappingOverrides mapping;
  LayerMapping m = entry("c_node");
  m.tile_n = 8;
  mapping.layers[m.name] = m;
  const CompileResult r = compile_with(conv_then_vector(), mapping);
  const LayerPlan& p = layer(r, "c_node");
  EXPECT_EQ(p.tile_n, 8);
  EXPECT_GT(p.candidates, 1);
}

TEST(Mapping, ReimposingTheChosenMappingsReproducesTheProgram) {
  for (const Graph& model : {conv_then_vector(), conv_then_vector(4), matmul()}) {
    Graph lowered = model;
    lower(lowered);
    const CompileResult first = compile(lowered, isa::NpuConfig{});
    MappingOverrides mapping;
    for (const LayerPlan& p : first.layers) mapping.layers[p.name] = p.chosen;
    const CompileResult again = compile_with(model, mapping);
    ASSERT_EQ(again.program.instructions.size(), first.program.instructions.size());
    for (size_t i = 0; i < first.program.instructions.size(); ++i) {
      EXPECT_TRUE(again.program.instructions[i] == first.program.instructions[i]) << "instruction " << i;
    }
  }
}

TEST(Mapping, HostPlacementRunsTheLayerOnTheHostAndStillComputesTheModel) {
  MappingOverrides mapping;
  LayerMapping m = entry("c_node");
  m.placement = Placement::kHost;
  mapping.layers[m.name] = m;
  CompileOptions o;
  o.mapping = &mapping;
  CompileResult r;
  EXPECT_LT(compile_and_compare(conv_then_vector(), isa::NpuConfig{}, &r, {}, o), 1e-4);
  ASSERT_EQ(r.fallbacks.size(), 1u);
  EXPECT_EQ(r.fallbacks[0].node, "c_node");
  EXPECT_NE(r.fallbacks[0].reason.find("mapping file"), std::string::npos);
  EXPECT_EQ(layer(r, "c_node").chosen.placement, Placement::kHost);
}

TEST(Mapping, ANameNoLayerHasIsAnErrorWithASuggestion) {
  const std::string e = error_of(conv_then_vector(), entry("c_nod"));
  EXPECT_EQ(e.rfind("m.yaml:3:5: layer 'c_nod': no layer of the compiled model has this name", 0), 0u) << e;
  EXPECT_NE(e.find("did you mean 'c_node'"), std::string::npos) << e;
}

TEST(Mapping, TileLargerThanTheTensorNamesTheKeyLineAndTheExtent) {
  LayerMapping m = entry("c_node");
  m.tile_n = 300;
  m.where["tile_n"] = "m.yaml:7:12";
  EXPECT_EQ(error_of(conv_then_vector(), m),
            "m.yaml:7:12: layer 'c_node': tile_n=300 is larger than the layer's 24 output channels");
  m = entry("c_node");
  m.tile_oh = 13;
  EXPECT_EQ(error_of(conv_then_vector(), m),
            "m.yaml:3:5: layer 'c_node': tile_oh=13 is larger than the layer's 12 output rows");
  m = entry("y_node");
  m.tile_k = 25;
  EXPECT_EQ(error_of(matmul(), m),
            "m.yaml:3:5: layer 'y_node': tile_k=25 is larger than the layer's 24 reduction elements (K)");
}

TEST(Mapping, ZeroTileIsAnError) {
  LayerMapping m = entry("c_node");
  m.tile_ow = 0;
  EXPECT_EQ(error_of(conv_then_vector(), m), "m.yaml:3:5: layer 'c_node': tile_ow=0 must be at least 1");
}

TEST(Mapping, TileOverflowingAScratchpadNamesTheScratchpad) {
  isa::NpuConfig small;
  small.sram.input.size_kib = 4;
  LayerMapping m = entry("c_node");
  m.tile_oh = 12, m.tile_ow = 10, m.tile_c = 16;  // 14 x 12 x 16 fp32 = 10.5 KiB: the whole input, once
  std::string e = error_of(conv_then_vector(), m, small);
  EXPECT_EQ(
      e.rfind("m.yaml:3:5: layer 'c_node': the tile (tile_oh=12 tile_ow=10 tile_c=16) needs 10.5 KiB of "
              "sram.input with its slots",
              0),
      0u)
      << e;
  m.tile_oh = 6;  // two tiles of 8 x 12 x 16 fp32 = 6 KiB each: a ping-pong pair
  e = error_of(conv_then_vector(), m, small);
  EXPECT_EQ(e.rfind("m.yaml:3:5: layer 'c_node': the tile (tile_oh=6 tile_ow=10 tile_c=16) needs 12.0 KiB of "
                    "sram.input with its slots",
                    0),
            0u)
      << e;
}

TEST(Mapping, KeysTheLayersLoweringHasNoChoiceForAreErrors) {
  LayerMapping m = entry("y_node");  // the pool: a vector layer
  m.tile_n = 8;
  EXPECT_NE(error_of(conv_then_vector(), m).find("layer 'y_node': tile_n applies to matrix layers"),
            std::string::npos);
  m = entry("y_node");  // the MatMul
  m.tile_oh = 8;
  EXPECT_NE(error_of(matmul(), m).find("layer 'y_node': tile_oh applies to convolutions"), std::string::npos);
  m = entry("c_node");
  m.tile_m = 8;
  EXPECT_NE(error_of(conv_then_vector(), m).find("tile_m applies to Gemm/MatMul layers"), std::string::npos);
  m = entry("c_node");
  m.group_block = 1;
  EXPECT_NE(error_of(conv_then_vector(), m).find("group_block applies to grouped convolutions"),
            std::string::npos);
  m = entry("c_node");
  m.placement = Placement::kHost;
  m.tile_n = 8;
  EXPECT_NE(error_of(conv_then_vector(), m).find("cannot apply to a layer placed on the host"),
            std::string::npos);
}

// x [1, 32, 64, 64] -> Sigmoid: an element-wise layer whose 131072 elements stream through SRAM tiles.
Graph sigmoid() {
  GraphBuilder b;
  b.input("x", {1, 32, 64, 64});
  b.node("Sigmoid", {"x"}, {"y"});
  b.output("y");
  return b.build();
}

TEST(Mapping, AnImposedVectorTileIsTheLayersTileAndStillComputesTheModel) {
  Graph lowered = sigmoid();
  lower(lowered);
  const CompileResult whole = compile(lowered, isa::NpuConfig{});
  const LayerPlan& w = layer(whole, "y_node");
  ASSERT_GT(w.tile_elems, 8192);  // the largest tile the input scratchpad's ping-pong pair holds
  EXPECT_EQ(w.chosen.tile_elems, w.tile_elems);
  LayerMapping m = entry("y_node");
  m.tile_elems = 4096;
  CompileResult r;
  EXPECT_LT(imposed_error(sigmoid(), m, &r), 1e-6);
  const LayerPlan& p = layer(r, "y_node");
  EXPECT_EQ(p.tile_elems, 4096);
  EXPECT_EQ(p.tile_limit, "imposed by the mapping file");
  EXPECT_EQ(p.chosen.tile_elems, 4096);
  // 32 tiles of 4096 instead of a few whole-SRAM ones: a LOAD, a VEC and a STORE each.
  EXPECT_GE(p.instructions, 3 * 32);
  EXPECT_LT(w.instructions, p.instructions);
}

TEST(Mapping, BadVectorTilesAreErrors) {
  LayerMapping m = entry("y_node");
  m.tile_elems = 0;
  m.where["tile_elems"] = "m.yaml:4:17";
  EXPECT_EQ(error_of(sigmoid(), m), "m.yaml:4:17: layer 'y_node': tile_elems=0 must be at least 1");
  m.tile_elems = 131073;
  EXPECT_EQ(
      error_of(sigmoid(), m),
      "m.yaml:4:17: layer 'y_node': tile_elems=131073 is larger than the layer's largest tensor (131072 "
      "elements)");
  isa::NpuConfig small;
  small.sram.input.size_kib = 64;  // a ping-pong pair of 32 KiB: 8192 fp32 elements each
  m.tile_elems = 10000;
  EXPECT_EQ(error_of(sigmoid(), m, small),
            "m.yaml:4:17: layer 'y_node': tile_elems=10000 overflows the scratchpad: a ping-pong slot of "
            "this layer "
            "holds at most 8192 elements");
  m = entry("c_node");  // the conv: a matrix layer
  m.tile_elems = 64;
  EXPECT_EQ(error_of(conv_then_vector(), m)
                .rfind("m.yaml:3:5: layer 'c_node': tile_elems applies to layers that "
                       "stream SRAM tiles on the vector unit; this Conv runs on the array",
                       0),
            0u);
}

TEST(Mapping, GroupBlockMustDivideTheGroupsAndIsNotSplit) {
  LayerMapping m = entry("c_node");
  m.group_block = 3;
  EXPECT_EQ(error_of(conv_then_vector(4), m),
            "m.yaml:3:5: layer 'c_node': group_block=3 does not divide the layer's 4 groups");
  m.group_block = 2;
  m.tile_n = 6;
  EXPECT_EQ(
      error_of(conv_then_vector(4), m),
      "m.yaml:3:5: layer 'c_node': tile_n=6 splits a block: with group_block=2 the tile is the block's 12 "
      "output channels");
  m.tile_n = 12;
  MappingOverrides mapping;
  mapping.layers[m.name] = m;
  EXPECT_EQ(layer(compile_with(conv_then_vector(4), mapping), "c_node").group_block, 2);
}

// Grouped convolutions whose blocks share one input tile of every group (loop_order groups_inner,
// Tiling::groups_inner in compiler/backend/matrix/matrix_walk.h): one LOAD a spatial tile instead of one a
// block, each block's CONV reading its channels with a_stride and writing its columns of one accumulator
// tile with c_stride.

// x [1, C, H, W] -> Conv 3x3 pad 1 (`groups` groups, C output channels, `stride`) -> Relu -> y.
Graph grouped_conv(int64_t c, int64_t h, int64_t groups, int64_t stride = 1) {
  GraphBuilder b;
  b.input("x", {1, c, h, h});
  b.constant("w", {c, c / groups, 3, 3}, 0.5f, 7);
  b.constant("bias", {c}, 0.5f, 8);
  Node& n = b.node("Conv", {"x", "w", "bias"}, {"c"});
  n.name = "gconv";
  n.attrs["pads"].value = std::vector<int64_t>{1, 1, 1, 1};
  n.attrs["kernel_shape"].value = std::vector<int64_t>{3, 3};
  n.attrs["strides"].value = std::vector<int64_t>{stride, stride};
  n.attrs["group"].value = groups;
  b.node("Relu", {"c"}, {"y"});
  b.output("y");
  return b.build();
}

LayerMapping block_of_one(LoopOrder order) {
  LayerMapping m = entry("gconv");
  m.group_block = 1, m.tile_oh = 14, m.tile_ow = 14, m.tile_c = 8, m.tile_n = 8, m.loop_order = order;
  return m;
}

// A LOAD into the input scratchpad by layer `name` of program p.
bool is_input_load(const isa::Program& p, const isa::Instruction& i, const std::string& name) {
  return i.opcode == isa::Opcode::kLoad && i.layer() < p.layers.size() && p.layers[i.layer()].name == name &&
         i.get(isa::Field::kBuf) == static_cast<int64_t>(isa::Buffer::kInput);
}

TEST(GroupedConv, BlocksSharingOneInputTileLoadItOnceAndComputeTheSameNumbersAsBlockByBlock) {
  // 64 channels in 8 groups of 8 on a 14x14 map, one spatial tile, blocks of one group. Block by block
  // (spatial_outer) loads the tile 8 times, each load 8 channels a pixel (16 bytes of a 128-byte fp16
  // pixel, or 32 of 256 in fp32); groups_inner loads all 64 channels once, and its 8 CONVs read them with
  // a_stride = 64 and write the 8 columns each computes into one 64-column accumulator tile (c_stride).
  // The same products in the same order: bit-identical outputs.
  const Graph g = grouped_conv(64, 14, 8);
  std::map<std::string, Tensor> inputs = {{"x", random_tensor({1, 64, 14, 14}, 1.0f, 11)}};
  std::map<std::string, Tensor> out[2];
  int k = 0;
  for (LoopOrder order : {LoopOrder::kSpatialOuter, LoopOrder::kGroupsInner}) {
    MappingOverrides mapping;
    mapping.layers["gconv"] = block_of_one(order);
    CompileResult r = compile_with(g, mapping);
    EXPECT_EQ(check_tokens(r.program), "");
    int loads = 0, strided = 0;
    for (const isa::Instruction& i : r.program.instructions) {
      if (is_input_load(r.program, i, "gconv")) {
        ++loads;
        EXPECT_EQ(i.get(isa::Field::kSize0), order == LoopOrder::kGroupsInner ? 64 : 8);
      }
      if (i.opcode == isa::Opcode::kConv && i.get(isa::Field::kAStride) == 64 &&
          i.get(isa::Field::kCStride) == 64)
        ++strided;
    }
    const bool shared = order == LoopOrder::kGroupsInner;
    EXPECT_EQ(loads, shared ? 1 : 8) << compile_summary(r);
    EXPECT_EQ(strided, shared ? 8 : 0) << compile_summary(r);
    EXPECT_EQ(layer(r, "gconv").chosen.loop_order, order);
    out[k++] = run_program(r, isa::NpuConfig{}, inputs);
  }
  ASSERT_EQ(out[0].size(), 1u);
  const Tensor& a = out[0].begin()->second;
  const Tensor& b = out[1].begin()->second;
  ASSERT_EQ(a.f.size(), static_cast<size_t>(64 * 14 * 14));
  EXPECT_EQ(a.f, b.f);
  // And the model is computed (the interpreter's reference).
  MappingOverrides mapping;
  mapping.layers["gconv"] = block_of_one(LoopOrder::kGroupsInner);
  CompileOptions o;
  o.mapping = &mapping;
  EXPECT_LT(compile_and_compare(g, isa::NpuConfig{}, nullptr, {}, o), 1e-4);
  // Blocks of 3 groups, the last of 2 (3 does not divide 8): the block-diagonal zeros add nothing, the
  // same numbers. Without groups_inner such a block is an error.
  LayerMapping ragged = entry("gconv");
  ragged.group_block = 3, ragged.loop_order = LoopOrder::kGroupsInner;
  mapping.layers["gconv"] = ragged;
  const CompileResult r = compile_with(g, mapping);
  EXPECT_EQ(layer(r, "gconv").group_block, 3);
  EXPECT_EQ(check_tokens(r.program), "");
  EXPECT_EQ(run_program(r, isa::NpuConfig{}, inputs).begin()->second.f, a.f);
  ragged.loop_order = LoopOrder::kSpatialOuter;
  EXPECT_EQ(error_of(g, ragged),
            "m.yaml:3:5: layer 'gconv': group_block=3 does not divide the layer's 8 groups");
}

TEST(GroupedConv, TheSearchSharesTheInputTileWhereEachGroupsOwnChannelsAreAFewBytesAPixel) {
  // RegNetY-400MF's block2-0 conv: 104 channels in 13 groups of 8, 3x3 stride 2 on 56x56. A block's own
  // channels are 8 of a pixel's 104: each block loading them reads every pixel in short DMA rows.
  const CompileResult r = compile_with(grouped_conv(104, 56, 13, 2), MappingOverrides{});
  const LayerPlan& p = layer(r, "gconv");
  EXPECT_EQ(p.chosen.loop_order, LoopOrder::kGroupsInner) << p.loop_order;
  EXPECT_LT(p.group_block, 13);
}

TEST(GroupedConv, GroupsInnerAppliesToGroupedConvsOfSeveralBlocks) {
  for (int64_t gb : {int64_t{0}, int64_t{8}}) {  // 0: a dense conv
    const Graph g = gb == 0 ? grouped_conv(16, 14, 1) : grouped_conv(64, 14, 8);
    LayerMapping m = entry("gconv");
    if (gb) m.group_block = gb;
    m.loop_order = LoopOrder::kGroupsInner;
    EXPECT_NE(error_of(g, m).find("loop_order=groups_inner applies to grouped convolutions"),
              std::string::npos)
        << "group_block " << gb << ": " << error_of(g, m);
  }
}

TEST(Mapping, AMatrixLayerCannotBeForcedOntoTheVectorUnitNorAVectorLayerOntoTheArray) {
  LayerMapping m = entry("c_node");
  m.placement = Placement::kNpuVector;
  EXPECT_EQ(
      error_of(conv_then_vector(), m),
      "m.yaml:3:5: layer 'c_node': placement vector: this Conv is a matrix layer; only 'matrix' or 'host' "
      "can apply");
  m = entry("y_node");
  m.placement = Placement::kNpuMatrix;
  EXPECT_NE(
      error_of(conv_then_vector(), m).find("placement matrix: this GlobalAveragePool is a vector layer"),
      std::string::npos);
  // A grouped conv that is not depthwise: the vector unit's VEC dwconv cannot take it, and the array's
  // mapping is no silent substitute.
  m = entry("c_node");
  m.placement = Placement::kNpuVector;
  EXPECT_EQ(error_of(conv_then_vector(4), m)
                .rfind("m.yaml:3:5: layer 'c_node': placement vector: the back end "
                       "cannot map this layer there",
                       0),
            0u)
      << error_of(conv_then_vector(4), m);
}

}  // namespace
}  // namespace npusim::compiler::testing
