// Attention's score -> softmax -> value as one layer (compiler/backend/fusion/attention_fusion.h), compiled
// with the simulation timer as `npusim run` compiles (the fusion is decided by simulating its candidates):
// the fused program's outputs are bit for bit those of the layer-by-layer one, its scores and
// probabilities never touch DRAM, and the report's view of it (fused rows, bytes saved) is consistent.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "compiler/backend/compile.h"
#include "compiler/passes/lowered.h"
#include "compiler/quant/accuracy.h"
#include "sim/model/model.h"
#include "tests/compiler/backend/functional.h"

namespace npusim::compiler::testing {
namespace {

// q [3, Sq, 16] x kt [3, 16, Sk] -> Softmax (last axis) -> x v [3, Sk, 24]: Sq and Sk are not multiples of
// the array, the lanes or any block, so blocks end partial.
// With `scale`, a Div (a runtime mask [3, 1, sk] added after it) or a Mul (a constant mask [1, sk]) by a
// scalar constant between the score MatMul and the Softmax.
enum class Between { kNothing, kDivAndRuntimeMask, kMulAndConstantMask };

Graph attention(int64_t sq, int64_t sk, Between between = Between::kNothing) {
  GraphBuilder b;
  b.input("q", {3, sq, 16}).input("kt", {3, 16, sk}).input("v", {3, sk, 24});
  b.node("MatMul", {"q", "kt"}, {"s"}, "scores");
  std::string x = "s";
  if (between != Between::kNothing) {
    const bool div = between == Between::kDivAndRuntimeMask;
    b.constant("c", {1}, 3.0f, 11);
    b.node(div ? "Div" : "Mul", {"s", "c"}, {"scaled"}, "scale");
    if (div)
      b.input("mask", {3, 1, sk});
    else
      b.constant("mask", {1, sk}, 4.0f, 12);
    b.node("Add", {"scaled", "mask"}, {"masked"}, "mask_add");
    x = "masked";
  }
  b.node("Softmax", {x}, {"p"}, "softmax");
  b.node("MatMul", {"p", "v"}, {"y"}, "values");
  b.output("y");
  return b.build();
}

struct Compiled {
  CompileResult result;
  Tensor y;
};

Compiled compile_and_run(const Graph& model, const isa::NpuConfig& config, isa::DType precision,
                         bool fusion) {
  Graph lowered = model;
  PipelineOptions o;
  o.whole_row_limit = rowwise_row_limit(config);
  lower(lowered, o);
  CompileOptions co;
  co.precision = precision;
  co.keep_on_chip = fusion;
  co.timer = sim::simulation_timer(config);
  Compiled r;
  r.result = compile(lowered, config, co);
  std::map<std::string, Tensor> in;
  uint32_t seed = 3;
  for (const auto& i : model.inputs) in[i] = random_tensor(model.value(i).shape, 2.0f, seed++);
  r.y = run_program(r.result, config, in).at("y");
  return r;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.size() != b.size()) return false;
  for (int64_t k = 0; k < a.size(); ++k)
    if (std::memcmp(&a.f[k], &b.f[k], sizeof(float)) != 0) return false;
  return true;
}

TEST(AttentionFusion, AScaleAndAMaskRunInTheBlockAndTheOutputsStayTheLayerByLayerProgramsBitForBit) {
  for (Between between : {Between::kDivAndRuntimeMask, Between::kMulAndConstantMask}) {
    const Graph g = attention(37, 29, between);
    for (isa::DType dt : {isa::DType::kFp32, isa::DType::kFp16}) {
      const Compiled fused = compile_and_run(g, small_sram(), dt, true);
      const Compiled plain = compile_and_run(g, small_sram(), dt, false);
      const std::vector<LayerPlan>& l = fused.result.layers;
      ASSERT_EQ(l.size(), 5u) << compile_summary(fused.result);
      EXPECT_NE(l[0].mapping.find("score MatMul -> scale -> mask -> softmax -> value MatMul"),
                std::string::npos)
          << l[0].mapping;
      for (size_t k = 1; k < 5; ++k) {
        EXPECT_EQ(l[k].fused_into, "scores") << l[k].name;
        EXPECT_EQ(l[k].instructions, 0) << l[k].name;
      }
      EXPECT_EQ(l[4].on_chip_input, "p");
      EXPECT_TRUE(same_bits(fused.y, plain.y)) << isa::kDTypeNames[static_cast<size_t>(dt)];
    }
  }
}

TEST(AttentionFusion, OneLayerWhoseOutputsAreTheLayerByLayerProgramsBitForBit) {
  const Graph g = attention(37, 29);
  for (const isa::NpuConfig& config : {isa::NpuConfig{}, small_sram()}) {
    for (isa::DType dt : {isa::DType::kFp32, isa::DType::kFp16}) {
      const Compiled fused = compile_and_run(g, config, dt, true);
      const Compiled plain = compile_and_run(g, config, dt, false);
      const std::vector<LayerPlan>& l = fused.result.layers;
      ASSERT_EQ(l.size(), 3u);
      EXPECT_EQ(l[0].mapping.rfind("fused attention", 0), 0u) << l[0].mapping;
      EXPECT_GT(l[0].instructions, 0);
      for (size_t k = 1; k < 3; ++k) {
        EXPECT_EQ(l[k].fused_into, "scores");
        EXPECT_EQ(l[k].instructions, 0);
        // Each intermediate written once and read once, in the activation format.
        EXPECT_EQ(l[k].on_chip_bytes_saved, 2 * 3 * 37 * 29 * isa::dtype_bytes(dt));
      }
      EXPECT_EQ(l[1].on_chip_input, "s");
      EXPECT_EQ(l[2].on_chip_input, "p");
      for (const LayerPlan& p : plain.result.layers) EXPECT_TRUE(p.fused_into.empty()) << p.name;
      EXPECT_TRUE(same_bits(fused.y, plain.y)) << isa::kDTypeNames[static_cast<size_t>(dt)];
      // The fused program moves q, k^T and v once and writes y once: no byte of the scores or the
      // probabilities (the layer-by-layer one moves each twice more).
      const auto moved = [](const CompileResult& r) {
        int64_t bytes = 0;
        for (const isa::Instruction& ins : r.program.instructions) {
          if (ins.opcode != isa::Opcode::kLoad && ins.opcode != isa::Opcode::kStore) continue;
          bytes += static_cast<int64_t>(ins.get(isa::Field::kSize0) * ins.get(isa::Field::kSize1) *
                                        ins.get(isa::Field::kSize2) * ins.get(isa::Field::kSize3));
        }
        return bytes * isa::dtype_bytes(r.program.tensors.front().dtype);
      };
      const int64_t io = 3 * (37 * 16 + 16 * 29 + 29 * 24 + 37 * 24) * isa::dtype_bytes(dt);
      EXPECT_EQ(moved(fused.result), io);
      EXPECT_EQ(moved(plain.result), io + 4 * 3 * 37 * 29 * isa::dtype_bytes(dt));
    }
  }
}

// heads x [sq, 16] queries against [16, sk] keys and [sk, 24] values, as attention() with more heads.
Graph many_heads(int64_t heads, int64_t sq, int64_t sk) {
  GraphBuilder b;
  b.input("q", {heads, sq, 16}).input("kt", {heads, 16, sk}).input("v", {heads, sk, 24});
  b.node("MatMul", {"q", "kt"}, {"s"}, "scores");
  b.node("Softmax", {"s"}, {"p"}, "softmax");
  b.node("MatMul", {"p", "v"}, {"y"}, "values");
  b.output("y");
  return b.build();
}

// On an array that chains instructions, a block's value MATMUL waits for its softmax on the vector unit:
// emitted in the order scores(0), values(0), scores(1), ... the array idles during every softmax and
// each value MATMUL pays its skew fill and drain. Software-pipelined, the next block's scores MATMUL comes
// between them (scores(0), scores(1), values(0), scores(2), values(1), ...), and the K^T, V and Q loads
// run ahead in sets of their own: the simulated candidates choose it, and the outputs stay bit for bit.
TEST(AttentionFusion,
     OnAChainingArrayTheNextBlocksScoresRunBeforeThisBlocksValuesAndTheOutputsStayBitForBit) {
  const int64_t heads = 12, sq = 40, sk = 48;
  const Graph g = many_heads(heads, sq, sk);
  isa::NpuConfig config;
  config.systolic_array.model = isa::ArrayModel::kTile;
  config.systolic_array.chained_instructions = true;
  ASSERT_TRUE(config.systolic_array.instructions_chained());
  const Compiled fused = compile_and_run(g, config, isa::DType::kFp32, true);
  const Compiled plain = compile_and_run(g, config, isa::DType::kFp32, false);
  const LayerPlan& block = fused.result.layers.at(0);
  EXPECT_NE(block.loop_order.find("software-pipelined"), std::string::npos) << block.mapping;
  // The block's MATMULs in program order, told apart by their reduction: dk = 16 (scores) or sk (values).
  std::vector<int64_t> k;
  for (const isa::Instruction& ins : fused.result.program.instructions)
    if (ins.opcode == isa::Opcode::kMatmul && ins.layer() == 0)
      k.push_back(static_cast<int64_t>(ins.get(isa::Field::kK)));
  const int64_t blocks = static_cast<int64_t>(k.size()) / 2;
  ASSERT_GE(blocks, heads);
  std::vector<int64_t> want{16};
  for (int64_t i = 0; i < blocks; ++i) {
    if (i + 1 < blocks) want.push_back(16);
    want.push_back(sk);
  }
  EXPECT_EQ(k, want);
  EXPECT_TRUE(same_bits(fused.y, plain.y));
}

// # int8: the block between int8 MatMuls with constant weights, so that q, k^T, v and the attention's
// output are int8 codes as in a transformer (graph inputs and outputs are fp32 under a plan):
// xq [3, sq, 8] x wq -> q [3, sq, 16]; xk [3, 16, 8] x wk -> kt [3, 16, sk]; xv [3, sk, 8] x wv -> v;
// attention as above -> y [3, sq, 24] x wo -> out.
Graph projected_attention(int64_t sq, int64_t sk) {
  GraphBuilder b;
  b.input("xq", {3, sq, 8}).input("xk", {3, 16, 8}).input("xv", {3, sk, 8});
  b.constant("wq", {8, 16}, 0.5f, 21).constant("wk", {8, sk}, 0.5f, 22).constant("wv", {8, 24}, 0.5f, 23);
  b.constant("wo", {24, 8}, 0.5f, 24);
  b.node("MatMul", {"xq", "wq"}, {"q"}, "proj_q");
  b.node("MatMul", {"xk", "wk"}, {"kt"}, "proj_k");
  b.node("MatMul", {"xv", "wv"}, {"v"}, "proj_v");
  b.node("MatMul", {"q", "kt"}, {"s"}, "scores");
  b.node("Softmax", {"s"}, {"p"}, "softmax");
  b.node("MatMul", {"p", "v"}, {"y"}, "values");
  b.node("MatMul", {"y", "wo"}, {"out"}, "proj_o");
  b.output("out");
  return b.build();
}

struct CompiledInt8 {
  Graph lowered;
  quant::PrecisionPlan plan;
  CompileResult result;
  Tensor out;
};

void compile_and_run_int8(const Graph& model, const isa::NpuConfig& config, bool fusion, CompiledInt8* r) {
  r->lowered = model;
  PipelineOptions o;
  o.whole_row_limit = rowwise_row_limit(config);
  lower(r->lowered, o);
  quant::PlanRequest req;
  req.spec.model = quant::Precision::kInt8;
  req.calibration_count = 2;
  r->plan = quant::build_plan(r->lowered, req, &model);
  CompileOptions co;
  co.plan = &r->plan;
  co.keep_on_chip = fusion;
  co.timer = sim::simulation_timer(config);
  r->result = compile(r->lowered, config, co);
  std::map<std::string, Tensor> in;
  uint32_t seed = 3;
  for (const auto& i : model.inputs) in[i] = random_tensor(model.value(i).shape, 2.0f, seed++);
  r->out = run_program(r->result, config, in).at("out");
}

// Bytes of int8/uint8 codes the LOADs and STOREs of the named layers move.
int64_t code_bytes_moved(const CompileResult& r, const std::vector<std::string>& layers) {
  int64_t bytes = 0;
  for (const isa::Instruction& ins : r.program.instructions) {
    if (ins.opcode != isa::Opcode::kLoad && ins.opcode != isa::Opcode::kStore) continue;
    const auto dt = static_cast<isa::DType>(ins.get(isa::Field::kDtype));
    if (isa::dtype_bytes(dt) != 1) continue;
    const std::string& name = r.layers.at(ins.layer()).name;
    if (std::find(layers.begin(), layers.end(), name) == layers.end()) continue;
    bytes += static_cast<int64_t>(ins.get(isa::Field::kSize0) * ins.get(isa::Field::kSize1) *
                                  ins.get(isa::Field::kSize2) * ins.get(isa::Field::kSize3));
  }
  return bytes;
}

TEST(AttentionFusion, Int8BlockKeepsEveryQuantizationPointAndItsOutputsAreTheLayerByLayerProgramsBitForBit) {
  const Graph g = projected_attention(37, 29);
  for (const isa::NpuConfig& config : {isa::NpuConfig{}, small_sram()}) {
    CompiledInt8 fused, plain;
    compile_and_run_int8(g, config, true, &fused);
    compile_and_run_int8(g, config, false, &plain);
    // The quantization points the block must keep: the scores and the probabilities are int8 codes
    // between int8 layers in the layer-by-layer program.
    ASSERT_TRUE(fused.plan.values.count("s") && fused.plan.values.count("p"));
    const std::vector<LayerPlan>& l = fused.result.layers;
    const auto at = [&](const std::string& name) {
      return std::find_if(l.begin(), l.end(), [&](const LayerPlan& p) { return p.name == name; });
    };
    ASSERT_NE(at("scores"), l.end());
    EXPECT_EQ(at("scores")->mapping.rfind("fused attention", 0), 0u) << compile_summary(fused.result);
    EXPECT_NE(at("scores")->mapping.find("requantized to int8 codes"), std::string::npos);
    EXPECT_EQ(at("softmax")->fused_into, "scores");
    EXPECT_EQ(at("values")->fused_into, "scores");
    EXPECT_EQ(at("values")->instructions, 0);
    // The intermediates as codes: one byte per element, written once and read once.
    EXPECT_EQ(at("values")->on_chip_bytes_saved, 2 * 3 * 37 * 29);
    for (const LayerPlan& p : plain.result.layers) EXPECT_TRUE(p.fused_into.empty()) << p.name;
    EXPECT_EQ(fused.out.size(), plain.out.size());
    EXPECT_TRUE(same_bits(fused.out, plain.out));
    // The block moves the codes of q, k^T and v once and writes y once; the layer-by-layer program also
    // stores and loads the scores and the probabilities.
    const std::vector<std::string> block = {"scores", "softmax", "values"};
    const int64_t io = 3 * (37 * 16 + 16 * 29 + 29 * 24 + 37 * 24);
    EXPECT_EQ(code_bytes_moved(fused.result, block), io);
    EXPECT_GE(code_bytes_moved(plain.result, block), io + 4 * 3 * 37 * 29);
  }
}

}  // namespace
}  // namespace npusim::compiler::testing
