// Data movement folded into its readers' loads (compiler/backend/memory/strided_views.h): torch's
// nn.MultiheadAttention as it exports -- a fused QKV projection, three Slices, Reshapes splitting the
// heads, Transposes bringing them outside -- compiled with the simulation timer as `npusim run` compiles.
// The Slices and the head-split Transposes become strided views of the projection's output (free, no
// instructions), the Transpose merging the heads back is written in place by the value MatMul, and the
// program's outputs are bit for bit those of the program that copies them.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "compiler/backend/compile.h"
#include "compiler/backend/memory/strided_views.h"
#include "compiler/passes/lowered.h"
#include "compiler/quant/accuracy.h"
#include "sim/model/model.h"
#include "tests/compiler/backend/functional.h"

namespace npusim::compiler::testing {
namespace {

using V = std::vector<int64_t>;

// x [S, 1, D] -> MatMul w [D, 3D] + bias -> Slice q, k, v along the last axis -> Reshape [S, H, dh] ->
// Transpose q, v to [H, S, dh] and k to [H, dh, S] -> q / sqrt(dh) -> MatMul -> Softmax -> MatMul ->
// Transpose [S, H, dh] -> Reshape [S, D] -> MatMul wo: S, H and dh are no multiples of the array or lanes.
// With a batch B > 1, torch's batch_first form: x [B, S, D] -> Transpose [S, B, D] first, the heads split by
// Reshape [S, B*H, dh] (the batch merged with the heads), merged back by Reshape [S*B, D].
Graph multihead_attention(int64_t S, int64_t H, int64_t dh, int64_t B = 1) {
  const int64_t D = H * dh;
  GraphBuilder b;
  b.input("x", B > 1 ? Shape{B, S, D} : Shape{S, 1, D}).constant("w", {D, 3 * D}, 0.5f, 31);
  b.constant("bias", {3 * D}, 0.5f, 32);
  b.constant("wo", {D, D}, 0.5f, 33).constant("scale", Tensor::from_floats({}, {2.8284271f}));
  b.constant("heads", Tensor::from_ints(DataType::kInt64, {3}, {S, B * H, dh}));
  b.constant("merged", Tensor::from_ints(DataType::kInt64, {2}, {S * B, D}));
  b.constant("axes", Tensor::from_ints(DataType::kInt64, {1}, {2}));
  if (B > 1) b.node("Transpose", {"x"}, {"xt"}, "batch_first").attrs["perm"].value = V{1, 0, 2};
  b.node("MatMul", {B > 1 ? "xt" : "x", "w"}, {"m"}, "in_proj");
  b.node("Add", {"bias", "m"}, {"qkv"}, "in_proj_bias");
  for (int64_t i = 0; i < 3; ++i) {
    const std::string p = std::string(1, "qkv"[i]);
    b.constant(p + "_start", Tensor::from_ints(DataType::kInt64, {1}, {i * D}));
    b.constant(p + "_end", Tensor::from_ints(DataType::kInt64, {1}, {(i + 1) * D}));
    b.node("Slice", {"qkv", p + "_start", p + "_end", "axes"}, {p + "_s"}, "slice_" + p);
    b.node("Reshape", {p + "_s", "heads"}, {p + "_r"}, "split_" + p);
    b.node("Transpose", {p + "_r"}, {p + "_t"}, "heads_" + p).attrs["perm"].value =
        i == 1 ? V{1, 2, 0} : V{1, 0, 2};
  }
  b.node("Div", {"q_t", "scale"}, {"q_scaled"}, "scale_q");
  b.node("MatMul", {"q_scaled", "k_t"}, {"s"}, "scores");
  b.node("Softmax", {"s"}, {"p"}, "softmax").attrs["axis"].value = int64_t{-1};
  b.node("MatMul", {"p", "v_t"}, {"o"}, "values");
  b.node("Transpose", {"o"}, {"o_t"}, "merge").attrs["perm"].value = V{1, 0, 2};
  b.node("Reshape", {"o_t", "merged"}, {"o_r"}, "merge_heads");
  b.node("MatMul", {"o_r", "wo"}, {"y"}, "out_proj");
  b.output("y");
  return b.build();
}

struct Program {
  CompileResult result;
  Tensor y;
};

// Compiles (fp32/fp16, or int8 with a plan calibrated on the model) and runs on the datapath. `views`:
// CompileOptions::fold_concats (off: every Slice and Transpose copies); `fusion`: the attention block fused.
Program compile_and_run(const Graph& model, const isa::NpuConfig& config, isa::DType precision, bool int8,
                        bool views, bool fusion) {
  Graph lowered = model;
  PipelineOptions o;
  o.whole_row_limit = rowwise_row_limit(config);
  lower(lowered, o);
  quant::PrecisionPlan plan;
  CompileOptions co;
  co.precision = precision;
  if (int8) {
    quant::PlanRequest req;
    req.spec.model = quant::Precision::kInt8;
    req.calibration_count = 2;
    plan = quant::build_plan(lowered, req, &model);
    co.plan = &plan;
  }
  co.fold_concats = views;
  co.keep_on_chip = fusion;
  co.timer = sim::simulation_timer(config);
  Program r;
  r.result = compile(lowered, config, co);
  r.y = run_program(r.result, config, {{"x", random_tensor(model.value("x").shape, 2.0f, 5)}}).at("y");
  return r;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.size() == b.size() && std::memcmp(a.f.data(), b.f.data(), a.f.size() * sizeof(float)) == 0;
}

const LayerPlan& layer(const CompileResult& r, const std::string& name) {
  for (const LayerPlan& l : r.layers)
    if (l.name == name) return l;
  throw std::runtime_error("no layer " + name);
}

int64_t dram_bytes(const CompileResult& r) {
  int64_t bytes = 0;
  for (const isa::Instruction& ins : r.program.instructions) {
    if (ins.opcode != isa::Opcode::kLoad && ins.opcode != isa::Opcode::kStore) continue;
    const auto dt = static_cast<isa::DType>(ins.get(isa::Field::kDtype));
    bytes += static_cast<int64_t>(ins.get(isa::Field::kSize0) * ins.get(isa::Field::kSize1) *
                                  ins.get(isa::Field::kSize2) * ins.get(isa::Field::kSize3)) *
             isa::dtype_bytes(dt);
  }
  return bytes;
}

TEST(StridedViews, QkvSlicesAndHeadSplitTransposesAreFreeViewsAndTheOutputsStayTheCopyingProgramsBitForBit) {
  const Graph g = multihead_attention(13, 3, 8);
  struct Case {
    isa::DType dt;
    bool int8;
  };
  for (const Case& k :
       {Case{isa::DType::kFp32, false}, Case{isa::DType::kFp16, false}, Case{isa::DType::kFp32, true}}) {
    for (bool fusion : {true, false}) {
      for (const isa::NpuConfig& config : {isa::NpuConfig{}, small_sram()}) {
        const std::string what = std::string(k.int8 ? "int8" : isa::kDTypeNames[static_cast<size_t>(k.dt)]) +
                                 (fusion ? " fused" : " layer by layer");
        const Program folded = compile_and_run(g, config, k.dt, k.int8, true, fusion);
        const Program copied = compile_and_run(g, config, k.dt, k.int8, false, fusion);
        EXPECT_TRUE(same_bits(folded.y, copied.y)) << what;
        for (const char* name : {"slice_q", "slice_k", "slice_v", "heads_q", "heads_v"}) {
          const LayerPlan& l = layer(folded.result, name);
          EXPECT_EQ(l.placement, Placement::kFree) << what << " " << name << ": " << l.mapping;
          EXPECT_EQ(l.instructions, 0) << what << " " << name;
          EXPECT_NE(l.mapping.find("a strided view of 'qkv'"), std::string::npos) << what << " " << l.mapping;
          EXPECT_EQ(layer(copied.result, name).placement, Placement::kNpuVector) << what << " " << name;
        }
        // K is read by the transpose that remains (VEC transpose into [H, dh, S]) from the projection's
        // output; the heads merge back as the value MatMul (or the fused block) writes its output in place.
        EXPECT_GT(layer(folded.result, "heads_k").instructions, 0) << what;
        const LayerPlan& merge = layer(folded.result, "merge");
        EXPECT_EQ(merge.placement, Placement::kFree) << what << ": " << merge.mapping;
        EXPECT_EQ(merge.instructions, 0) << what;
        EXPECT_NE(merge.mapping.find("'values' writes its output in place into 'o_t'"), std::string::npos)
            << what << ": " << merge.mapping;
        EXPECT_EQ(layer(copied.result, "merge").placement, Placement::kNpuVector) << what;
        const bool fused = layer(folded.result, "scores").mapping.rfind("fused attention", 0) == 0;
        if (!k.int8) {
          EXPECT_EQ(fused, fusion) << what << ": " << layer(folded.result, "scores").mapping;
        }
        // Q, K and V are no longer written and read back: 2 x 3 x S x D elements fewer.
        EXPECT_LT(dram_bytes(folded.result), dram_bytes(copied.result)) << what;
      }
    }
  }
}

// The scores half of the pattern in torch's node order (BERT): the Slices and head splits, then the Q scale
// and right after it the K transpose: two independent vector layers in a row, both reading the projection's
// output.
Graph scaled_scores(int64_t S, int64_t H, int64_t dh) {
  const int64_t D = H * dh;
  GraphBuilder b;
  b.input("x", {S, 1, D}).constant("w", {D, 3 * D}, 0.5f, 31);
  b.constant("scale", Tensor::from_floats({}, {8.0f}));
  b.constant("heads", Tensor::from_ints(DataType::kInt64, {3}, {S, H, dh}));
  b.constant("axes", Tensor::from_ints(DataType::kInt64, {1}, {2}));
  b.node("MatMul", {"x", "w"}, {"qkv"}, "in_proj");
  for (int64_t i = 0; i < 2; ++i) {
    const std::string p = std::string(1, "qk"[i]);
    b.constant(p + "_start", Tensor::from_ints(DataType::kInt64, {1}, {i * D}));
    b.constant(p + "_end", Tensor::from_ints(DataType::kInt64, {1}, {(i + 1) * D}));
    b.node("Slice", {"qkv", p + "_start", p + "_end", "axes"}, {p + "_s"}, "slice_" + p);
    b.node("Reshape", {p + "_s", "heads"}, {p + "_r"}, "split_" + p);
  }
  b.node("Transpose", {"q_r"}, {"q_t"}, "heads_q").attrs["perm"].value = V{1, 0, 2};
  b.node("Div", {"q_t", "scale"}, {"q_scaled"}, "scale_q");
  b.node("Transpose", {"k_r"}, {"k_t"}, "heads_k").attrs["perm"].value = V{1, 2, 0};
  b.node("MatMul", {"q_scaled", "k_t"}, {"y"}, "scores");
  b.output("y");
  return b.build();
}

// Input-scratchpad byte ranges the LOADs and STOREs of layer `name` touch.
std::vector<std::pair<uint64_t, uint64_t>> input_tiles(const CompileResult& r, const std::string& name) {
  std::vector<std::pair<uint64_t, uint64_t>> t;
  for (const isa::Instruction& ins : r.program.instructions) {
    if ((ins.opcode != isa::Opcode::kLoad && ins.opcode != isa::Opcode::kStore) ||
        r.program.layers.at(ins.layer()).name != name ||
        static_cast<isa::Buffer>(ins.get(isa::Field::kBuf)) != isa::Buffer::kInput)
      continue;
    const auto dt = static_cast<isa::DType>(ins.get(isa::Field::kDtype));
    const uint64_t bytes = ins.get(isa::Field::kSize0) * ins.get(isa::Field::kSize1) *
                           ins.get(isa::Field::kSize2) * ins.get(isa::Field::kSize3) *
                           static_cast<uint64_t>(isa::dtype_bytes(dt));
    t.emplace_back(ins.get(isa::Field::kSramAddr), ins.get(isa::Field::kSramAddr) + bytes);
  }
  return t;
}

TEST(StridedViews, TheKTransposeAfterTheQScaleTakesScratchpadTheScaleDoesNotUse) {
  // Its tile (the whole [H, S, dh] here) is smaller than its slot: it sits at the slot's end, where the Q
  // scale's tiles are not, so it does not wait for the scale's last stores to overwrite their SRAM; before,
  // it started at the same address and waited for them, overlapping the scale's last store only by a race
  // the DRAM refreshes decided (bert_small's Div_1 estimated 25% short in two layers of four).
  const Graph g = scaled_scores(64, 4, 16);
  for (isa::DType dt : {isa::DType::kFp32, isa::DType::kFp16}) {
    const Program p = compile_and_run(g, isa::NpuConfig{}, dt, false, true, false);
    const auto k = input_tiles(p.result, "heads_k"), q = input_tiles(p.result, "scale_q");
    ASSERT_FALSE(k.empty());
    ASSERT_FALSE(q.empty());
    for (const auto& a : k)
      for (const auto& b : q)
        EXPECT_TRUE(a.second <= b.first || b.second <= a.first)
            << isa::kDTypeNames[static_cast<size_t>(dt)] << ": K transpose [" << a.first << ", " << a.second
            << ") overlaps a Q scale tile [" << b.first << ", " << b.second << ")";
    const Program copied = compile_and_run(g, isa::NpuConfig{}, dt, false, false, false);
    EXPECT_TRUE(same_bits(p.y, copied.y));
  }
}

TEST(StridedViews, AReshapeKeepsAViewOnlyWhereTheElementsItMergesAreEvenlySpaced) {
  // A Slice of [S, 1, 3D] along the last axis, heads split: rows 3D apart, heads dh apart.
  EXPECT_EQ(backend::reshaped_strides({5, 1, 12}, {36, 36, 1}, {5, 3, 4}), (V{36, 4, 1}));
  EXPECT_EQ(backend::reshaped_strides({5, 1, 12}, {36, 36, 1}, {1, 5, 12}), (V{180, 36, 1}));
  // Heads in front ([H, S, dh] of a dense [S, H, dh]): merging S and dh back needs a copy.
  EXPECT_EQ(backend::reshaped_strides({5, 3, 4}, {4, 20, 1}, {5, 12}), V{});
  // Dense: the dense strides.
  EXPECT_EQ(backend::reshaped_strides({6, 4}, {4, 1}, {2, 3, 4}), (V{12, 4, 1}));
}

TEST(StridedViews, AReshapeMergingDimsAtTwoStridesKeepsTheViewWithSplitDims) {
  using L = std::map<size_t, std::vector<std::array<int64_t, 2>>>;
  // Q sliced out of [S, B, 3D] (S = 5, B = 2, D = 12: rows 72 apart, images 36 apart), heads split by
  // view(S, B * H, dh) with H = 3, dh = 4: the B*H dim steps 36 per image and 4 per head.
  const auto q = backend::reshaped_levels({5, 2, 12}, {72, 36, 1}, {}, {5, 6, 4});
  ASSERT_TRUE(q);
  EXPECT_EQ(q->strides, (V{72, 4, 1}));
  EXPECT_EQ(q->split, (L{{1, {{2, 36}, {3, 4}}}}));
  // The same of the batch_first order ([B, S, 3D] transposed: images 180 apart, rows 36).
  const auto t = backend::reshaped_levels({5, 2, 12}, {36, 180, 1}, {}, {5, 6, 4});
  ASSERT_TRUE(t);
  EXPECT_EQ(t->split, (L{{1, {{2, 180}, {3, 4}}}}));
  // Evenly spaced dims merge into one stride, with no split; a split dim splits back along its levels.
  const auto even = backend::reshaped_levels({5, 3, 4}, {12, 4, 1}, {}, {5, 12});
  ASSERT_TRUE(even);
  EXPECT_EQ(even->strides, (V{12, 1}));
  EXPECT_TRUE(even->split.empty());
  const auto back = backend::reshaped_levels({5, 6, 4}, {72, 4, 1}, q->split, {5, 2, 3, 4});
  ASSERT_TRUE(back);
  EXPECT_EQ(back->strides, (V{72, 36, 4, 1}));
  EXPECT_TRUE(back->split.empty());
  // A dim of the new shape taking part of a dim: its outer indices ([5, 8, 3]: 2 images x 4 of 12), or no
  // view where the extents do not divide ([5, 3, 8]: 3 of 2 images).
  const auto part = backend::reshaped_levels({5, 2, 12}, {72, 36, 1}, {}, {5, 8, 3});
  ASSERT_TRUE(part);
  EXPECT_EQ(part->split, (L{{1, {{2, 36}, {4, 3}}}}));
  EXPECT_FALSE(backend::reshaped_levels({5, 2, 12}, {72, 36, 1}, {}, {5, 3, 8}));
}

TEST(StridedViews, AtBatchTwoTheSlicesWhoseHeadSplitMergesTheBatchAreViewsWithSplitDimsBitForBit) {
  const Graph g = multihead_attention(13, 3, 8, 2);
  struct Case {
    isa::DType dt;
    bool int8;
  };
  for (const Case& k :
       {Case{isa::DType::kFp32, false}, Case{isa::DType::kFp16, false}, Case{isa::DType::kFp32, true}}) {
    for (bool fusion : {true, false}) {
      for (const isa::NpuConfig& config : {isa::NpuConfig{}, small_sram()}) {
        const std::string what = std::string(k.int8 ? "int8" : isa::kDTypeNames[static_cast<size_t>(k.dt)]) +
                                 (fusion ? " fused" : " layer by layer");
        const Program folded = compile_and_run(g, config, k.dt, k.int8, true, fusion);
        const Program copied = compile_and_run(g, config, k.dt, k.int8, false, fusion);
        EXPECT_TRUE(same_bits(folded.y, copied.y)) << what;
        // The batch Transpose (after the projection now), the Slices and the V and Q head splits.
        for (const char* name : {"batch_first", "slice_q", "slice_k", "slice_v", "heads_q", "heads_v"}) {
          const LayerPlan& l = layer(folded.result, name);
          EXPECT_EQ(l.placement, Placement::kFree) << what << " " << name << ": " << l.mapping;
          EXPECT_EQ(l.instructions, 0) << what << " " << name;
        }
        // K's transpose copies from its split view of the projection's output.
        EXPECT_GT(layer(folded.result, "heads_k").instructions, 0) << what;
        EXPECT_NE(layer(folded.result, "split_k").mapping.find("a strided view of"), std::string::npos)
            << what << ": " << layer(folded.result, "split_k").mapping;
        EXPECT_LT(dram_bytes(folded.result), dram_bytes(copied.result)) << what;
      }
    }
  }
}

// A log-mel front end whose STFT (a MatMul by the DFT matrix) writes each bin's real and imaginary part
// side by side, as torch.view_as_real lays them out: x [1, F, 64] -> [1, F, 66] -> Reshape [1, F, 33, 2]
// -> Slice the real and the imaginary part ([1, F, 33, 1] each) -> Pow 2 -> Add -> Squeeze -> mel MatMul
// -> Add eps -> Log -> Clip -> Transpose. Each Slice is a view whose elements lie 2 apart: the vector unit
// cannot stream it (its rows must be adjacent elements), so the Pows run on the host with the reason in
// the user's words, and the program computes the reference's outputs (it used to stop the compile with
// "backend: element-wise operand without a contiguous innermost dim").
TEST(StridedViews, AnElementWiseOpOnAViewWithItsInnermostElementsApartRunsOnTheHostAndMatchesTheReference) {
  const int64_t F = 61, bins = 33;
  GraphBuilder b;
  Tensor mel_w = random_tensor({bins, 16}, 0.5f, 42);  // a filter bank: no negative weights
  for (float& w : mel_w.f) w = std::fabs(w);
  b.input("x", {1, F, 64}).constant("dft", {64, 2 * bins}, 0.5f, 41).constant("mel_w", mel_w);
  b.constant("interleaved", Tensor::from_ints(DataType::kInt64, {4}, {1, F, bins, 2}));
  b.constant("axis", Tensor::from_ints(DataType::kInt64, {1}, {3}));
  b.constant("zero", Tensor::from_ints(DataType::kInt64, {1}, {0}));
  b.constant("one", Tensor::from_ints(DataType::kInt64, {1}, {1}));
  b.constant("two", Tensor::from_ints(DataType::kInt64, {1}, {2}));
  b.constant("square", Tensor::from_floats({}, {2.0f})).constant("eps", Tensor::from_floats({}, {1e-6f}));
  b.constant("lo", Tensor::from_floats({}, {-10.0f})).constant("hi", Tensor::from_floats({}, {10.0f}));
  b.node("MatMul", {"x", "dft"}, {"spec"}, "stft");
  b.node("Reshape", {"spec", "interleaved"}, {"complex"}, "as_complex");
  b.node("Slice", {"complex", "zero", "one", "axis"}, {"re"}, "real");
  b.node("Slice", {"complex", "one", "two", "axis"}, {"im"}, "imag");
  b.node("Pow", {"re", "square"}, {"re2"}, "real_squared");
  b.node("Pow", {"im", "square"}, {"im2"}, "imag_squared");
  b.node("Add", {"re2", "im2"}, {"power4"}, "power");
  b.node("Squeeze", {"power4", "axis"}, {"power3"}, "squeeze");
  b.node("MatMul", {"power3", "mel_w"}, {"mel"}, "mel");
  b.node("Add", {"mel", "eps"}, {"mel_eps"}, "floor");
  b.node("Log", {"mel_eps"}, {"log_mel"}, "log");
  b.node("Clip", {"log_mel", "lo", "hi"}, {"clipped"}, "clip");
  b.node("Transpose", {"clipped"}, {"y"}, "to_bins_frames").attrs["perm"].value = V{0, 2, 1};
  b.output("y");
  const Graph model = b.build();
  CompileResult r;
  EXPECT_LT(compile_and_compare(model, isa::NpuConfig{}, &r), 1e-5);
  std::map<std::string, std::string> reasons;
  for (const Fallback& f : r.fallbacks) reasons[f.node] = f.reason;
  for (const char* node : {"real_squared", "imag_squared"}) {
    ASSERT_TRUE(reasons.count(node)) << node << " should run on the host";
    EXPECT_NE(reasons[node].find("cannot stream"), std::string::npos) << reasons[node];
    EXPECT_EQ(reasons[node].find("backend:"), std::string::npos) << reasons[node];
  }
}

// A transformer's residual after the output projection at batch B > 1 (torch's batch_first form): the
// projection runs on [S, B, D], a Transpose brings it back to [B, S, D], and element-wise ops read it with
// the residual, in either operand order, and scaled. The Transpose becomes a view every reader streams itself
// (the second operand of an Add swapped into the stream's first; the boxes of a view whose rows lie far
// apart in slabs of three dims where that simulates faster), and the outputs stay the copying program's.
TEST(StridedViews, TheTransposeBackToBatchFirstIsAViewItsElementWiseReadersStreamBitForBit) {
  const int64_t S = 13, B = 3, D = 24;
  GraphBuilder b;
  b.input("x", {S, B, D}).input("res", {B, S, D}).constant("w", {D, D}, 0.5f, 51);
  b.constant("scale", Tensor::from_floats({}, {8.0f}));
  b.node("MatMul", {"x", "w"}, {"proj"}, "out_proj");
  b.node("Transpose", {"proj"}, {"back"}, "batch_first").attrs["perm"].value = V{1, 0, 2};
  b.node("Add", {"res", "back"}, {"y1"}, "residual");       // the view as the second operand
  b.node("Add", {"back", "y1"}, {"y2"}, "residual_again");  // ... and as the first
  b.node("Div", {"back", "scale"}, {"y3"}, "scaled");       // against one scalar
  b.node("Add", {"y2", "y3"}, {"y"}, "sum");
  b.output("y");
  const Graph model = b.build();
  const std::map<std::string, Tensor> inputs = {{"x", random_tensor({S, B, D}, 2.0f, 5)},
                                                {"res", random_tensor({B, S, D}, 2.0f, 6)}};
  for (const isa::DType dt : {isa::DType::kFp32, isa::DType::kFp16}) {
    for (const isa::NpuConfig& config : {isa::NpuConfig{}, small_sram()}) {
      std::map<bool, CompileResult> r;
      std::map<bool, Tensor> y;
      for (const bool views : {true, false}) {
        Graph lowered = model;
        PipelineOptions o;
        o.whole_row_limit = rowwise_row_limit(config);
        lower(lowered, o);
        CompileOptions co;
        co.precision = dt;
        co.fold_concats = views;
        co.timer = sim::simulation_timer(config);
        r[views] = compile(lowered, config, co);
        y[views] = run_program(r[views], config, inputs).at("y");
      }
      const std::string what(isa::kDTypeNames[static_cast<size_t>(dt)]);
      EXPECT_TRUE(same_bits(y[true], y[false])) << what;
      const LayerPlan& t = layer(r[true], "batch_first");
      EXPECT_EQ(t.placement, Placement::kFree) << what << ": " << t.mapping;
      EXPECT_EQ(t.instructions, 0) << what;
      EXPECT_EQ(layer(r[false], "batch_first").placement, Placement::kNpuVector) << what;
      for (const char* name : {"residual", "residual_again", "scaled"}) {
        EXPECT_EQ(layer(r[true], name).placement, Placement::kNpuVector) << what << " " << name;
        EXPECT_TRUE(r[true].fallbacks.empty()) << what;
      }
      EXPECT_LT(dram_bytes(r[true]), dram_bytes(r[false])) << what;
    }
  }
}

}  // namespace
}  // namespace npusim::compiler::testing
