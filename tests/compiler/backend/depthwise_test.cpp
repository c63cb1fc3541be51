// Depthwise convolutions on the vector unit (compiler/backend/matrix/depthwise.h): the VEC dwconv mapping
// matches the FP32 reference interpreter on odd shapes, strides, pads, dilation and fused epilogues;
// the back end picks it by cost where the array wastes its MACs, keeps the array where that is faster,
// and a mapping file imposes either placement and round-trips.
#include <gtest/gtest.h>

#include <string>

#include "compiler/backend/compile.h"
#include "compiler/import/import.h"
#include "compiler/passes/lowered.h"
#include "tests/compiler/backend/functional.h"

namespace npusim::compiler::testing {
namespace {

constexpr double kTol = 1e-4;

struct DwCase {
  const char* name;
  int64_t n, c, h, w, k, stride, pad, dilation;
  bool bias;
  const char* act;  // nullptr, or an activation the passes fuse into the conv
};

Graph depthwise_graph(const DwCase& d) {
  GraphBuilder b;
  b.input("x", {d.n, d.c, d.h, d.w});
  b.constant("w", {d.c, 1, d.k, d.k}, 0.5f, 3);
  std::vector<std::string> ins = {"x", "w"};
  if (d.bias) {
    b.constant("b", {d.c}, 0.5f, 4);
    ins.push_back("b");
  }
  Node& n = b.node("Conv", ins, {d.act ? "c" : "y"}, "dw");
  n.attrs["strides"].value = std::vector<int64_t>{d.stride, d.stride};
  n.attrs["pads"].value = std::vector<int64_t>{d.pad, d.pad, d.pad, d.pad};
  n.attrs["dilations"].value = std::vector<int64_t>{d.dilation, d.dilation};
  n.attrs["group"].value = d.c;
  n.attrs["kernel_shape"].value = std::vector<int64_t>{d.k, d.k};
  if (d.act && std::string(d.act) == "Clip") {
    b.constant("lo", Tensor::scalar_float(0.0f)).constant("hi", Tensor::scalar_float(6.0f));
    b.node("Clip", {"c", "lo", "hi"}, {"y"});
  } else if (d.act) {
    b.node(d.act, {"c"}, {"y"});
  }
  b.output("y");
  return b.build();
}

const LayerPlan& dw_layer(const CompileResult& r) {
  for (const LayerPlan& p : r.layers) {
    if (p.op == "Conv") return p;
  }
  throw std::logic_error("no Conv layer");
}

MappingOverrides on(Placement p) {
  MappingOverrides m;
  LayerMapping e;
  e.name = "dw";
  e.placement = p;
  e.where[""] = "m.yaml:1:1";
  m.layers["dw"] = e;
  return m;
}

class DepthwiseOnVector : public ::testing::TestWithParam<DwCase> {};

TEST_P(DepthwiseOnVector, MatchesTheInterpreterOnDefaultAndSmallSram) {
  const Graph g = depthwise_graph(GetParam());
  const MappingOverrides vec = on(Placement::kNpuVector);
  CompileOptions o;
  o.mapping = &vec;
  for (const isa::NpuConfig& config : {isa::NpuConfig{}, small_sram()}) {
    for (isa::DType precision : {isa::DType::kFp32, isa::DType::kFp16}) {
      o.precision = precision;
      CompileResult r;
      EXPECT_LT(compile_and_compare(g, config, &r, {}, o), precision == isa::DType::kFp32 ? kTol : 2e-2)
          << compile_summary(r);
      EXPECT_EQ(check_tokens(r.program), "");
      EXPECT_TRUE(r.fallbacks.empty()) << compile_summary(r);
      const LayerPlan& p = dw_layer(r);
      EXPECT_EQ(p.placement, Placement::kNpuVector) << p.mapping;
      EXPECT_NE(p.mapping.find("VEC dwconv"), std::string::npos) << p.mapping;
      // The tokens capture every hazard of the ping-pong slots: a random interleaving computes the same.
      RunOptions random;
      random.random_order = true;
      EXPECT_LT(compile_and_compare(g, config, &r, random, o), precision == isa::DType::kFp32 ? kTol : 2e-2);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Depthwise, DepthwiseOnVector,
                         ::testing::Values(DwCase{"k3_pad1", 1, 24, 10, 10, 3, 1, 1, 1, true, nullptr},
                                           DwCase{"k3_stride2_odd", 2, 37, 13, 11, 3, 2, 1, 1, true, "Relu"},
                                           DwCase{"k5_pad2_stride2", 1, 40, 15, 15, 5, 2, 2, 1, false,
                                                  "Clip"},
                                           DwCase{"k3_dilation2", 1, 16, 12, 12, 3, 1, 2, 2, true, "Sigmoid"},
                                           DwCase{"k3_no_pad", 1, 8, 7, 9, 3, 1, 0, 1, true, "HardSwish"},
                                           DwCase{"wide_112", 1, 32, 30, 112, 3, 1, 1, 1, true, "Clip"}),
                         [](const ::testing::TestParamInfo<DwCase>& i) { return std::string(i.param.name); });

TEST(Depthwise, TheChoiceIsTheFasterMappingAndEitherPlacementCanBeImposed) {
  // MobileNetV2's late depthwise layer (7 x 7 x 960): the array multiplies 31 zeros per useful MAC
  // and pays fill and drain on 49-pixel streams; the vector unit runs it far faster.
  const Graph g = depthwise_graph(DwCase{"late", 1, 960, 7, 7, 3, 1, 1, 1, true, "Clip"});
  Graph lowered = g;
  lower(lowered);
  isa::NpuConfig edge;  // 32 lanes, 32 x 32 array
  const CompileResult chosen = compile(lowered, edge);
  EXPECT_EQ(dw_layer(chosen).placement, Placement::kNpuVector) << dw_layer(chosen).mapping;
  EXPECT_EQ(dw_layer(chosen).chosen.placement, Placement::kNpuVector);
  const MappingOverrides matrix = on(Placement::kNpuMatrix);
  CompileOptions o;
  o.mapping = &matrix;
  const CompileResult forced = compile(lowered, edge, o);
  EXPECT_EQ(dw_layer(forced).placement, Placement::kNpuMatrix);
  EXPECT_NE(dw_layer(forced).mapping.find("block-diagonal"), std::string::npos);
  EXPECT_LT(dw_layer(chosen).est_cycles, dw_layer(forced).est_cycles);

  // With a vector unit of 1 lane the array is faster: the back end keeps it.
  isa::NpuConfig slow = edge;
  slow.vector.lanes = 1;
  EXPECT_EQ(dw_layer(compile(lowered, slow)).placement, Placement::kNpuMatrix);
}

TEST(Depthwise, AScaleSimTopologysDepthwiseRowsStayOnTheArrayAsSCALESimRunsThem) {
  // The MobileNet topology's late depthwise row: on the vector unit it would be faster (the test above),
  // but the SCALE-Sim cross-checks compare the array's cycles.
  Graph g = import_scalesim_csv_text(
      "Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width, Channels, Num Filter, Strides,\n"
      "Conv_DP_15, 9, 9, 3, 3, 960, 1, 1,\n");
  lower(g);
  const CompileResult r = compile(g, isa::NpuConfig{});
  EXPECT_EQ(dw_layer(r).placement, Placement::kNpuMatrix) << dw_layer(r).mapping;
  EXPECT_NE(dw_layer(r).mapping.find("block-diagonal"), std::string::npos) << dw_layer(r).mapping;
}

TEST(Depthwise, ReimposingTheChosenMappingsReproducesTheProgram) {
  for (const DwCase& d : {DwCase{"late", 1, 960, 7, 7, 3, 1, 1, 1, true, "Clip"},
                          DwCase{"stride2", 1, 48, 14, 14, 3, 2, 1, 1, true, "Relu"}}) {
    Graph lowered = depthwise_graph(d);
    lower(lowered);
    const CompileResult first = compile(lowered, isa::NpuConfig{});
    MappingOverrides mapping;
    for (const LayerPlan& p : first.layers) mapping.layers[p.name] = p.chosen;
    CompileOptions o;
    o.mapping = &mapping;
    const CompileResult again = compile(lowered, isa::NpuConfig{}, o);
    ASSERT_EQ(again.program.instructions.size(), first.program.instructions.size()) << d.name;
    for (size_t i = 0; i < first.program.instructions.size(); ++i) {
      EXPECT_TRUE(again.program.instructions[i] == first.program.instructions[i])
          << d.name << " instruction " << i;
    }
    EXPECT_EQ(dw_layer(again).placement, dw_layer(first).placement);
  }
}

// Bytes the LOADs into the input scratchpad of the depthwise layer move (pads excluded: LOAD's halo).
int64_t input_bytes_loaded(const CompileResult& r) {
  int64_t bytes = 0;
  for (const isa::Instruction& ins : r.program.instructions) {
    if (ins.opcode != isa::Opcode::kLoad || r.layers.at(ins.layer()).op != "Conv") continue;
    if (static_cast<isa::Buffer>(ins.get(isa::Field::kBuf)) != isa::Buffer::kInput) continue;
    bytes += ins.get(isa::Field::kSize0) * ins.get(isa::Field::kSize1) * ins.get(isa::Field::kSize2) *
             ins.get(isa::Field::kSize3) *
             isa::dtype_bytes(static_cast<isa::DType>(ins.get(isa::Field::kDtype)));
  }
  return bytes;
}

// Tiles of whole rows slide down one input buffer (DepthwiseTiling::slide_rows): a 7x7 map in tiles of two
// output rows reads its 7 input rows once, not 3 + 4 + 4 + 2 = 13 rows (each tile with its two halo rows),
// plus row 6 again for the last tile, whose one new row is the bottom padding (a LOAD carries at least one
// row of the input, its pads around it); and it computes what the interpreter does whatever order the queues
// run in (the tokens order the rows a tile loads after the dwconv that still reads the rows before them).
// Stride 2 slides too (one halo row). Where the padded image does not fit the input scratchpad (16 KiB:
// 30 rows of 22 x 32 fp16 pixels), a buffer of a tile's 3 rows and three steps starts over at its start,
// loading the two halo rows again: six times for 28 rows in tiles of one.
TEST(Depthwise, TilesOfWholeRowsLoadEachInputRowOnceFromASlidingBuffer) {
  struct Slide {
    DwCase d;
    int64_t toh;
    int64_t rows_read;  // input rows the tiles load
    bool small;         // on small_sram()
  };
  for (const Slide& c :
       {Slide{DwCase{"k3", 1, 64, 7, 7, 3, 1, 1, 1, true, "Clip"}, 2, 7 + 1, false},
        Slide{DwCase{"k3_stride2", 1, 32, 15, 9, 3, 2, 1, 1, true, nullptr}, 1, 15, false},
        Slide{DwCase{"k3_tall", 1, 32, 28, 20, 3, 1, 1, 1, false, "Relu"}, 1, 28 + 2 * 6 + 1, true}}) {
    const Graph g = depthwise_graph(c.d);
    MappingOverrides m = on(Placement::kNpuVector);
    m.layers["dw"].tile_oh = c.toh, m.layers["dw"].tile_ow = (c.d.w + 2 * c.d.pad - c.d.k) / c.d.stride + 1,
    m.layers["dw"].tile_n = c.d.c;
    CompileOptions o;
    o.mapping = &m;
    o.precision = isa::DType::kFp16;
    const isa::NpuConfig config = c.small ? small_sram() : isa::NpuConfig{};
    CompileResult r;
    EXPECT_LT(compile_and_compare(g, config, &r, {}, o), 2e-2) << c.d.name;
    EXPECT_EQ(input_bytes_loaded(r), c.rows_read * c.d.w * c.d.c * 2)
        << c.d.name << ": " << dw_layer(r).mapping;
    EXPECT_EQ(check_tokens(r.program), "") << c.d.name;
    RunOptions random;
    random.random_order = true;
    EXPECT_LT(compile_and_compare(g, config, &r, random, o), 2e-2) << c.d.name;
  }
}

// A mapping file tiles a depthwise conv on the vector unit with tile_oh, tile_ow and tile_n (what
// --mapping-out writes for it); the array's keys, and tiles larger than the layer, exit 2.
TEST(Depthwise, TheVectorPlacementTakesItsTilesAndRejectsTheArraysKeys) {
  const Graph g = depthwise_graph(DwCase{"late", 1, 64, 7, 7, 3, 1, 1, 1, true, nullptr});
  MappingOverrides m = on(Placement::kNpuVector);
  m.layers["dw"].tile_oh = 2, m.layers["dw"].tile_ow = 7, m.layers["dw"].tile_n = 32;
  CompileOptions o;
  o.mapping = &m;
  CompileResult r;
  EXPECT_LT(compile_and_compare(g, isa::NpuConfig{}, &r, {}, o), kTol);
  const LayerPlan& p = dw_layer(r);
  EXPECT_EQ(p.placement, Placement::kNpuVector) << p.mapping;
  EXPECT_EQ(p.tile_oh, 2);
  EXPECT_EQ(p.tile_ow, 7);
  EXPECT_EQ(p.tile_n, 32);
  EXPECT_EQ(p.chosen.tile_oh, 2);
  EXPECT_EQ(p.chosen.tile_n, 32);
  EXPECT_NE(p.mapping.find("2x7x32 output tiles"), std::string::npos) << p.mapping;
  Graph lowered = g;
  lower(lowered);
  auto error = [&](const MappingOverrides& bad) {
    CompileOptions b;
    b.mapping = &bad;
    try {
      compile(lowered, isa::NpuConfig{}, b);
    } catch (const MappingError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  MappingOverrides bad = on(Placement::kNpuVector);
  bad.layers["dw"].tile_c = 8;
  bad.layers["dw"].where["tile_c"] = "m.yaml:2:3";
  EXPECT_EQ(error(bad).rfind(
                "m.yaml:2:3: layer 'dw': tile_c applies to the array's mapping; on the vector unit", 0),
            0u)
      << error(bad);
  bad = on(Placement::kNpuVector);
  bad.layers["dw"].tile_oh = 8;
  EXPECT_EQ(error(bad), "m.yaml:1:1: layer 'dw': tile_oh=8 is larger than the layer's 7 output rows");
  bad = on(Placement::kNpuVector);
  bad.layers["dw"].loop_order = LoopOrder::kChannelOuter;
  EXPECT_NE(error(bad).find("loop_order applies to the array's mapping"), std::string::npos) << error(bad);
}

}  // namespace
}  // namespace npusim::compiler::testing
