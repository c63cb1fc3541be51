// The roofline bound the compiler gives each layer
// (compiler/backend/estimate/roofline.h, docs/report.md): expected values from the
// layer's shapes and the machine's declared rates, computed here from the
// config.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "compiler/backend/compile.h"
#include "compiler/backend/estimate/bounds.h"
#include "compiler/backend/estimate/roofline.h"
#include "compiler/import/import.h"
#include "compiler/passes/absorbed.h"
#include "compiler/passes/lowered.h"
#include "compiler/quant/accuracy.h"
#include "isa/timing/dram.h"
#include "tests/compiler/backend/functional.h"

namespace npusim::compiler::testing {
namespace {

const LayerPlan& layer(const CompileResult& r, const std::string& name) {
  for (const LayerPlan& p : r.layers) {
    if (p.name == name) return p;
  }
  throw std::runtime_error("no layer " + name);
}

// DRAM bytes per NPU cycle at the DRAM model's peak (GB/s = bytes per ns).
double peak_bytes_per_cycle(const isa::NpuConfig& c) {
  return isa::timing::dram_peak_bandwidth_gbps(c.dram) / (c.frequency_mhz / 1000.0);
}

int64_t roof(double compute, double bytes, const isa::NpuConfig& c) {
  return static_cast<int64_t>(std::ceil(std::max(compute, bytes / peak_bytes_per_cycle(c))));
}

// gemm:M,N,K compiled for the edge preset in `precision`; int8 through a
// calibrated plan.
CompileResult compile_gemm(int64_t m, int64_t n, int64_t k, quant::Precision precision,
                           quant::PrecisionPlan* plan) {
  const std::string spec =
      "gemm:M=" + std::to_string(m) + ",N=" + std::to_string(n) + ",K=" + std::to_string(k);
  const Graph imported = load_model(spec);
  Graph g = imported;
  lower(g);
  CompileOptions options;
  if (precision == quant::Precision::kInt8) {
    quant::PlanRequest req;
    req.spec.model = precision;
    req.calibration_count = 2;
    *plan = quant::build_plan(g, req, &imported);
    options.plan = plan;
  } else {
    options.precision = quant::to_dtype(precision);
  }
  return compile(g, isa::NpuConfig{}, options);
}

// A layer's compiled roof is its instructions' work: a dense GEMM's MATMULs occupy exactly M x N x K MAC
// slots (at the fp16 peak: rows x cols x fp16_rate per cycle), and its LOADs and STOREs move each operand
// at least once; its bound is the higher, rounded up.
TEST(CompiledRoofline, AGemmsArrayTermIsItsMacsAtThePeakAndItsDramTermAtLeastEachOperandOnce) {
  const int64_t m = 128, n = 256, k = 512;
  const CompileResult r = compile_gemm(m, n, k, quant::Precision::kFp16, nullptr);
  const isa::NpuConfig c;
  const std::vector<std::optional<backend::Roofline>> roofs = backend::compiled_rooflines(r.program, c);
  ASSERT_EQ(roofs.size(), r.program.layers.size());
  size_t gemm = roofs.size();
  for (size_t i = 0; i < r.layers.size(); ++i)
    if (r.layers[i].op == "Gemm" || r.layers[i].op == "MatMul") gemm = i;
  ASSERT_LT(gemm, roofs.size());
  ASSERT_TRUE(roofs[gemm].has_value());
  const isa::SystolicArrayConfig& a = c.systolic_array;
  EXPECT_DOUBLE_EQ(roofs[gemm]->compute_cycles,
                   static_cast<double>(m * n * k) / (a.rows * a.cols * a.fp16_rate));
  EXPECT_GE(roofs[gemm]->memory_cycles, 2.0 * (m * k + k * n + m * n) / peak_bytes_per_cycle(c) - 1e-9);
  EXPECT_EQ(
      roofs[gemm]->bound_cycles(),
      static_cast<int64_t>(std::ceil(std::max(roofs[gemm]->compute_cycles, roofs[gemm]->memory_cycles))));
}

TEST(Roofline, GemmBoundIsMacsOverArrayRateOrBytesOverDramPeakInFp16AndInt8) {
  const isa::NpuConfig c;  // the edge preset
  const double pes = static_cast<double>(c.systolic_array.rows * c.systolic_array.cols);
  struct Case {
    int64_t m, n, k;
  };
  // A square GEMM (compute-bound on the edge preset) and a thin one
  // (memory-bound: its weights dominate).
  for (const Case& g : {Case{256, 256, 256}, Case{4, 512, 512}}) {
    const double macs = static_cast<double>(g.m * g.n * g.k);
    const double elements = static_cast<double>(g.m * g.k + g.k * g.n + g.m * g.n);
    quant::PrecisionPlan plan;
    const CompileResult fp16 = compile_gemm(g.m, g.n, g.k, quant::Precision::kFp16, &plan);
    ASSERT_TRUE(layer(fp16, "gemm").bound_cycles.has_value());
    EXPECT_EQ(*layer(fp16, "gemm").bound_cycles,
              roof(macs / (pes * c.systolic_array.fp16_rate), 2 * elements, c))
        << g.m << "x" << g.n << "x" << g.k;
    const CompileResult int8 = compile_gemm(g.m, g.n, g.k, quant::Precision::kInt8, &plan);
    ASSERT_TRUE(layer(int8, "gemm").bound_cycles.has_value());
    EXPECT_EQ(*layer(int8, "gemm").bound_cycles, roof(macs / pes, elements, c))
        << g.m << "x" << g.n << "x" << g.k;
  }
}

// A 3x3 depthwise conv "dw" (pads 1) over ch channels of hw x hw pixels.
Graph depthwise_graph(int64_t ch, int64_t hw) {
  GraphBuilder b;
  b.input("x", {1, ch, hw, hw});
  b.constant("w", {ch, 1, 3, 3});
  Node& n = b.node("Conv", {"x", "w"}, {"y"}, "dw");
  n.attrs["pads"].value = std::vector<int64_t>{1, 1, 1, 1};
  n.attrs["group"].value = ch;
  n.attrs["kernel_shape"].value = std::vector<int64_t>{3, 3};
  b.output("y");
  return b.build();
}

TEST(Roofline, DepthwiseConvIsBoundedByTheVectorLanesNotTheArray) {
  const int64_t ch = 32, hw = 16;
  Graph g = depthwise_graph(ch, hw);
  lower(g);
  isa::NpuConfig c;
  c.dram.model = isa::DramModel::kIdeal;  // no memory roof: the compute roof alone
  const CompileResult r = compile(g, c);
  const int64_t macs = hw * hw * ch * 9;
  // On either unit (compiler/backend/matrix/depthwise.h): the bound is the layer's, not the mapping's.
  ASSERT_NE(layer(r, "dw").placement, Placement::kHost);
  ASSERT_TRUE(layer(r, "dw").bound_cycles.has_value());
  EXPECT_EQ(*layer(r, "dw").bound_cycles, macs / c.vector.lanes);
}

// In int8 a lane sums vector.int8_dot_width int8 products per cycle (isa/timing/units.h): the depthwise
// bound is the MACs over lanes x that width.
TEST(Roofline, Int8DepthwiseConvIsBoundedByTheLanesTimesTheProductsALaneSumsPerCycle) {
  const int64_t ch = 32, hw = 16;
  const Graph imported = depthwise_graph(ch, hw);
  Graph g = imported;
  lower(g);
  quant::PlanRequest req;
  req.spec.model = quant::Precision::kInt8;
  req.calibration_count = 2;
  const quant::PrecisionPlan plan = quant::build_plan(g, req, &imported);
  const int64_t macs = hw * hw * ch * 9;
  for (const int64_t width : {1, 4}) {
    isa::NpuConfig c;
    c.dram.model = isa::DramModel::kIdeal;
    c.vector.int8_dot_width = width;
    CompileOptions options;
    options.plan = &plan;
    const CompileResult r = compile(g, c, options);
    ASSERT_NE(layer(r, "dw").placement, Placement::kHost);
    ASSERT_TRUE(layer(r, "dw").bound_cycles.has_value());
    EXPECT_EQ(*layer(r, "dw").bound_cycles, macs / (c.vector.lanes * width)) << width;
  }
}

TEST(Roofline, VectorLayerIsBoundedByItsLargestTensorOverTheLanesOrItsBytes) {
  GraphBuilder b;
  b.input("a", {1, 64, 16, 16});
  b.input("c", {1, 64, 1, 1});
  b.node("Add", {"a", "c"}, {"y"}, "add");
  b.output("y");
  Graph g = b.build();
  lower(g);
  const double largest = 64 * 16 * 16, bytes = 4 * (largest + 64 + largest);
  isa::NpuConfig c;
  CompileResult r = compile(g, c);
  ASSERT_EQ(layer(r, "add").placement, Placement::kNpuVector);
  ASSERT_TRUE(layer(r, "add").bound_cycles.has_value());
  EXPECT_EQ(*layer(r, "add").bound_cycles, roof(largest / static_cast<double>(c.vector.lanes), bytes, c));
  c.dram.model = isa::DramModel::kIdeal;
  r = compile(g, c);
  EXPECT_EQ(*layer(r, "add").bound_cycles, static_cast<int64_t>(largest) / c.vector.lanes);
}

// conv -> BatchNormalization -> Add(residual) -> Relu, and a Reshape whose shape is computed from
// Shape -> Gather -> Concat: after lowering, one Conv layer (BN folded, Add and Relu its epilogue) and
// one free Reshape.
Graph residual_block() {
  GraphBuilder b;
  const int64_t c = 16, hw = 8;
  b.input("x", {1, c, hw, hw});
  b.constant("w", {c, c, 3, 3});
  for (const char* p : {"scale", "shift", "mean"}) b.constant(p, {c});
  b.constant("var", Tensor::from_floats({c}, std::vector<float>(static_cast<size_t>(c), 1.0f)));
  Node& conv = b.node("Conv", {"x", "w"}, {"y"}, "conv");
  conv.attrs["pads"].value = std::vector<int64_t>{1, 1, 1, 1};
  conv.attrs["kernel_shape"].value = std::vector<int64_t>{3, 3};
  b.node("BatchNormalization", {"y", "scale", "shift", "mean", "var"}, {"bn"}, "bn");
  b.node("Add", {"bn", "x"}, {"sum"}, "add");
  b.node("Relu", {"sum"}, {"act"}, "relu");
  b.node("Shape", {"act"}, {"shape"}, "shape");
  b.constant("first", Tensor::from_ints(DataType::kInt64, {1}, {0}));
  b.node("Gather", {"shape", "first"}, {"batch"}, "gather");
  b.constant("rest", Tensor::from_ints(DataType::kInt64, {1}, {-1}));
  b.node("Concat", {"batch", "rest"}, {"to"}, "concat").attrs["axis"].value = int64_t{0};
  b.node("Reshape", {"act", "to"}, {"flat"}, "reshape");
  b.output("flat");
  return b.build();
}

TEST(Roofline, FusedNodesAreFoundInTheLayerThatRunsThemAndShapeArithmeticIsLeftOut) {
  const Graph imported = residual_block();
  Graph g = imported;
  lower(g);
  for (const Node& n : g.nodes)
    EXPECT_TRUE(n.op_type == "Conv" || n.op_type == "Reshape" || n.has_attr(kLayoutChange)) << n.op_type;
  const std::vector<AbsorbedNode> a = absorbed_nodes(imported, g);
  ASSERT_EQ(a.size(), 3u);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].name, (std::vector<std::string>{"bn", "add", "relu"}[i]));
    EXPECT_EQ(a[i].into, "conv");
  }
}

TEST(Roofline, ADecomposedNodeIsFoundAsItsPiecesAndARemovedIdentityUnderItsReader) {
  // Softmax decomposed (no row-wise kernel by default): its pieces, named after it, are layers of their
  // own, so the Softmax is not listed as fused into the last of them. The Identity before it is removed
  // (its reader reads its input): it is listed under the layer that took its place.
  GraphBuilder b;
  b.input("x", {1, 4, 64});
  b.node("Identity", {"x"}, {"xi"}, "id");
  b.node("Softmax", {"xi"}, {"y"}, "sm").attrs["axis"].value = int64_t{-1};
  b.output("y");
  const Graph imported = b.build();
  Graph g = imported;
  lower(g);
  bool pieces = false;
  for (const Node& n : g.nodes) pieces |= n.name.rfind("sm_", 0) == 0;
  ASSERT_TRUE(pieces) << "the Softmax was not decomposed";
  const std::vector<AbsorbedNode> a = absorbed_nodes(imported, g);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].name, "id");
  EXPECT_EQ(a[0].into.rfind("sm_", 0), 0u) << a[0].into;
  EXPECT_TRUE(a[0].on_chip_inputs.empty());  // it read the graph input, which the program still reads
}

TEST(Roofline, EveryLayerIsBoundAsTheModelsOwnNodeAndFusedNodesBringTheirOwnBounds) {
  const Graph imported = residual_block();
  Graph g = imported;
  lower(g);
  isa::NpuConfig c;
  CompileOptions options;
  options.precision = isa::DType::kFp16;
  CompileResult r = compile(g, c, options);
  const int64_t fused_bound = *layer(r, "conv").bound_cycles;  // the conv as compiled reads the residual too
  bound_as_imported(r, imported, g, c);
  const double act = 16 * 8 * 8, w = 16 * 16 * 9, pes = c.systolic_array.rows * c.systolic_array.cols;
  const double macs = act * 16 * 9;
  // The conv alone: x, w and y (BatchNormalization's parameters are the BN node's).
  EXPECT_EQ(*layer(r, "conv").bound_cycles,
            roof(macs / (pes * c.systolic_array.fp16_rate), 2 * (2 * act + w), c));
  EXPECT_LT(*layer(r, "conv").bound_cycles, fused_bound);
  EXPECT_EQ(*layer(r, "reshape").bound_cycles, roof(act / c.vector.lanes, 2 * (2 * act + 2), c))
      << "a free layer is bound as its node (its shape input is 2 elements)";
  ASSERT_EQ(r.absorbed.size(), 3u);
  const double lanes = c.vector.lanes;
  // Each in the conv's precision: BN moves y, four parameter vectors and bn; Add bn, x, sum; Relu two.
  EXPECT_EQ(r.absorbed[0].bound_cycles, roof(act / lanes, 2 * (2 * act + 4 * 16), c));
  EXPECT_EQ(r.absorbed[1].bound_cycles, roof(act / lanes, 2 * 3 * act, c));
  EXPECT_EQ(r.absorbed[2].bound_cycles, roof(act / lanes, 2 * 2 * act, c));
}

// `imported` lowered, compiled in fp16 and bound as imported (the model limit set).
CompileResult compiled_in_fp16(const Graph& imported, const isa::NpuConfig& config) {
  Graph g = imported;
  lower(g);
  CompileOptions options;
  options.precision = isa::DType::kFp16;
  CompileResult r = compile(g, config, options);
  bound_as_imported(r, imported, g, config);
  return r;
}

// A dense conv, then a depthwise 3x3 conv: the whole model's limit (compiler/backend/estimate/model_limit.h).
TEST(ModelLimit, DenseMacsAtTheArrayPeakDepthwiseAtTheLanesWeightsAndModelIoOnceAtDramPeak) {
  GraphBuilder b;
  const int64_t c = 16, hw = 8;
  b.input("x", {1, c, hw, hw});
  b.constant("w", {c, c, 1, 1});
  b.constant("dw", {c, 1, 3, 3});
  b.constant("bias", {c});  // fewer than 64 elements: not a weight the limit streams
  b.node("Conv", {"x", "w", "bias"}, {"y"}, "conv").attrs["kernel_shape"].value = std::vector<int64_t>{1, 1};
  Node& dw = b.node("Conv", {"y", "dw"}, {"z"}, "dwconv");
  dw.attrs["kernel_shape"].value = std::vector<int64_t>{3, 3};
  dw.attrs["pads"].value = std::vector<int64_t>{1, 1, 1, 1};
  dw.attrs["group"].value = c;
  b.output("z");
  const isa::NpuConfig config;
  const CompileResult r = compiled_in_fp16(b.build(), config);
  ASSERT_TRUE(r.model_limit.has_value());
  const backend::ModelLimit& l = *r.model_limit;
  const isa::SystolicArrayConfig& a = config.systolic_array;
  const double act = c * hw * hw;
  EXPECT_DOUBLE_EQ(l.array_cycles, act * c / (a.rows * a.cols * a.fp16_rate));
  // One group on the array: min(rows, 9) x min(cols, 1) MACs per cycle, fewer than the lanes.
  ASSERT_LE(std::min<int64_t>(a.rows, 9) * a.fp16_rate, config.vector.lanes);
  EXPECT_DOUBLE_EQ(l.vector_cycles, act * 9 / config.vector.lanes);
  EXPECT_DOUBLE_EQ(l.dram_cycles, 2 * (c * c + c * 9 + 2 * act) / peak_bytes_per_cycle(config));
  EXPECT_EQ(l.cycles(),
            static_cast<int64_t>(std::ceil(std::max({l.array_cycles, l.vector_cycles, l.dram_cycles}))));
  EXPECT_DOUBLE_EQ(l.node_cycles.at("conv"), l.array_cycles);
  EXPECT_DOUBLE_EQ(l.node_cycles.at("dwconv"), l.vector_cycles);
}

// Where the array does more of a grouped conv per cycle than the lanes (wide groups), the limit counts
// it on the array at that rate.
TEST(ModelLimit, GroupedConvWithWideGroupsCountsOnTheArrayAtOneGroupsRate) {
  GraphBuilder b;
  const int64_t c = 64, group = 2, hw = 4;
  b.input("x", {1, c, hw, hw});
  b.constant("w", {c, c / group, 3, 3});
  Node& conv = b.node("Conv", {"x", "w"}, {"y"}, "gconv");
  conv.attrs["kernel_shape"].value = std::vector<int64_t>{3, 3};
  conv.attrs["pads"].value = std::vector<int64_t>{1, 1, 1, 1};
  conv.attrs["group"].value = group;
  b.output("y");
  const isa::NpuConfig config;
  const CompileResult r = compiled_in_fp16(b.build(), config);
  ASSERT_TRUE(r.model_limit.has_value());
  const isa::SystolicArrayConfig& a = config.systolic_array;
  const double per_cycle = static_cast<double>(std::min<int64_t>(a.rows, c / group * 9)) *
                           static_cast<double>(std::min<int64_t>(a.cols, c / group)) * a.fp16_rate;
  ASSERT_GT(per_cycle, config.vector.lanes);
  EXPECT_DOUBLE_EQ(r.model_limit->array_cycles, c * hw * hw * (c / group) * 9 / per_cycle);
  EXPECT_EQ(r.model_limit->vector_cycles, 0.0);
}

// The array term's layers each alone in whole folds (model_limit.h): a 100 x 70 x 40 GEMM (M x K x N) on
// a 32 x 32 array holds 70 x 40 weights in 3 x 2 folds of 100 rows (weight-stationary), 100 x 40 outputs
// in 4 x 2 folds of 70 (output-stationary), 70 x 100 inputs in 3 x 4 folds of 40 (input-stationary), at
// fp16's half rate; the array term counts only the MACs.
TEST(ModelLimit, TheArrayTermsLayersInWholeFoldsFollowTheDataflowsStationaryOperand) {
  const int64_t m = 100, k = 70, n = 40;
  GraphBuilder b;
  b.input("x", {m, k});
  b.constant("w", {k, n});
  b.node("MatMul", {"x", "w"}, {"y"}, "mm");
  b.output("y");
  const Graph g = b.build();
  for (const auto& [dataflow, passes] :
       {std::pair{isa::Dataflow::kWs, 3 * 2 * m}, std::pair{isa::Dataflow::kOs, 4 * 2 * k},
        std::pair{isa::Dataflow::kIs, 3 * 4 * n}}) {
    isa::NpuConfig config;
    config.systolic_array.dataflow = dataflow;
    ASSERT_EQ(config.systolic_array.rows, 32);
    ASSERT_EQ(config.systolic_array.cols, 32);
    const CompileResult r = compiled_in_fp16(g, config);
    ASSERT_TRUE(r.model_limit.has_value());
    const double rate = config.systolic_array.fp16_rate;
    EXPECT_DOUBLE_EQ(r.model_limit->array_fold_cycles, passes / rate)
        << isa::kDataflowNames[size_t(dataflow)];
    EXPECT_DOUBLE_EQ(r.model_limit->array_cycles, m * k * n / (32 * 32 * rate));
  }
}

// A batched MatMul of two runtime operands holds each batch matrix's B in its own folds; a constant B is
// one matrix every batch's rows stream through (weight-stationary: the same folds, the rows of all).
TEST(ModelLimit, ABatchedMatMulsRuntimeBFoldsPerBatchMatrixUnderOutputStationary) {
  const int64_t batch = 3, m = 20, k = 40, n = 20;
  GraphBuilder b;
  b.input("a", {batch, m, k});
  b.input("bt", {batch, k, n});
  b.node("MatMul", {"a", "bt"}, {"y"}, "bmm");
  b.output("y");
  isa::NpuConfig config;
  config.systolic_array.dataflow = isa::Dataflow::kOs;
  const CompileResult r = compiled_in_fp16(b.build(), config);
  ASSERT_TRUE(r.model_limit.has_value());
  // Each of the 3 matrices: ceil(20 / 32) x ceil(20 / 32) = 1 fold of 40 (not ceil(60 / 32) = 2 folds for
  // all three).
  EXPECT_DOUBLE_EQ(r.model_limit->array_fold_cycles, batch * 1 * 1 * k / config.systolic_array.fp16_rate);
}

}  // namespace
}  // namespace npusim::compiler::testing
