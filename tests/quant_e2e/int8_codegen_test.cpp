// INT8 code generation: a compiled int8 program, run on the functional datapath, writes exactly the
// int8 codes the quantized reference (compiler/quant/emulate.h, expected_int8_tensors) predicts, for
// every int8 layer; and precision changes the program's bytes and MAC rate.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>

#include "arch/datapath/executor.h"
#include "arch/datapath/state.h"
#include "compiler/backend/compile.h"
#include "compiler/import/import.h"
#include "compiler/interp/kernels.h"
#include "compiler/passes/lowered.h"
#include "compiler/quant/accuracy.h"
#include "compiler/quant/emulate.h"
#include "compiler/quant/qdq.h"
#include "compiler/quant/quantize.h"
#include "isa/machine/config.h"
#include "isa/numerics.h"
#include "isa/timing/units.h"
#include "sim/model/model.h"
#include "tests/compiler/passes/graph_builder.h"

namespace npusim {
namespace {

namespace q = compiler::quant;
using compiler::Graph;
using compiler::Shape;

struct Compiled {
  Graph imported, lowered;
  q::PrecisionPlan plan;
  compiler::CompileResult result;
};

// `imported` lowered, planned in int8 (min-max calibration on 8 synthetic samples, `req`'s other
// choices) and compiled for `config`.
Compiled compile_graph_int8(Graph imported, const isa::NpuConfig& config, q::PlanRequest req = {}) {
  Compiled c;
  c.imported = std::move(imported);
  c.lowered = c.imported;
  compiler::lower(c.lowered);
  req.spec.model = q::Precision::kInt8;
  req.quant.calibration.method = q::CalibrationMethod::kMinMax;
  req.calibration_count = 8;
  c.plan = q::build_plan(c.lowered, req, &c.imported);
  compiler::CompileOptions opt;
  opt.plan = &c.plan;
  c.result = compiler::compile(c.lowered, config, opt);
  return c;
}

Compiled compile_int8(const std::string& spec, const isa::NpuConfig& config, bool per_channel, bool symmetric,
                      const std::string& overrides = "") {
  q::PlanRequest req;
  if (!overrides.empty()) req.spec.overrides = q::parse_overrides(overrides);
  req.quant.per_channel = per_channel;
  req.quant.symmetric_activations = symmetric;
  return compile_graph_int8(compiler::load_model(spec), config, req);
}

// Reads a value's elements from DRAM (or, on_chip, the input scratchpad: CompileResult::on_chip) in
// logical (ONNX) order as integers (codes) or floats.
std::vector<double> read_value(arch::datapath::MachineState& st, const compiler::HostTensor& t,
                               bool on_chip = false) {
  const int64_t n = compiler::num_elements(t.shape);
  const int es = isa::dtype_bytes(t.dtype);
  // Physical strides: layout[i] is the logical dim at memory position i; a view (a Concat's slice its
  // producer wrote in place) has the strides t.strides gives.
  const size_t r = t.shape.size();
  std::vector<int> layout = t.layout;
  if (layout.empty()) {
    for (size_t i = 0; i < r; ++i) layout.push_back(static_cast<int>(i));
  }
  std::vector<int64_t> stride(r, 1);  // per logical dim
  int64_t s = 1, span = 1;
  for (size_t i = r; i-- > 0;) {
    stride[static_cast<size_t>(layout[i])] = t.strides.empty() ? s : t.strides[i];
    span += (t.shape[static_cast<size_t>(layout[i])] - 1) * stride[static_cast<size_t>(layout[i])];
    s *= t.shape[static_cast<size_t>(layout[i])];
  }
  std::vector<uint8_t> raw(static_cast<size_t>(std::max(n, span) * es));
  if (on_chip) {
    std::memcpy(raw.data(), st.sram_span(isa::Buffer::kInput, t.dram_addr, raw.size(), t.name), raw.size());
  } else {
    st.dram().read(t.dram_addr, raw.data(), raw.size());
  }
  std::vector<double> out(static_cast<size_t>(n));
  std::vector<int64_t> idx(r, 0);
  for (int64_t k = 0; k < n; ++k) {
    int64_t off = 0;
    for (size_t d = 0; d < r; ++d) off += idx[d] * stride[d];
    if (t.block > 0) {  // a GEMM chain's value in column blocks [N / block][rows][block]
      const int64_t cols = t.shape.back(), row = k / cols, col = k % cols;
      off = ((col / t.block) * (n / cols) + row) * t.block + col % t.block;
    }
    const uint8_t* p = &raw[static_cast<size_t>(off * es)];
    double v = 0;
    switch (t.dtype) {
      case isa::DType::kInt8:
        v = static_cast<int8_t>(*p);
        break;
      case isa::DType::kUint8:
        v = *p;
        break;
      case isa::DType::kInt16: {
        int16_t h;
        std::memcpy(&h, p, 2);
        v = h;
        break;
      }
      case isa::DType::kFp32: {
        float f;
        std::memcpy(&f, p, 4);
        v = f;
        break;
      }
      default:
        ADD_FAILURE() << t.name << ": unexpected storage dtype";
        break;
    }
    out[static_cast<size_t>(k)] = v;
    for (size_t d = r; d-- > 0;) {
      if (++idx[d] < t.shape[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

// Runs the program on `sample` and compares every int8 value with the quantized reference. Returns the
// number of int8 matrix layers whose output codes were compared; the outputs of the vector layers named
// in `vector_layers` are compared too (not counted).
int check_bit_exact(const Compiled& c, const isa::NpuConfig& config, const q::Sample& sample,
                    const std::set<std::string>& only = {}, const std::set<std::string>& vector_layers = {}) {
  arch::datapath::MachineState st(config, c.result.program);
  for (const auto& b : c.result.program.tensors) {
    if (b.role != isa::TensorBinding::Role::kInput) continue;
    EXPECT_EQ(b.dtype, isa::DType::kFp32);
    const std::vector<float> v = sample.at(b.name).to_float_vector();
    st.dram().write(b.dram_addr, reinterpret_cast<const uint8_t*>(v.data()), v.size() * 4);
  }
  // DRAM buffers are reused once a value is dead: read each layer's output right after the layer's
  // instructions (program order; a layer's instructions are contiguous).
  std::map<uint32_t, std::string> layer_of;  // node index -> its int8 matrix output
  for (size_t i = 0; i < c.lowered.nodes.size(); ++i) {
    auto it = c.plan.layers.find(c.lowered.nodes[i].name);
    if (it != c.plan.layers.end()) layer_of[static_cast<uint32_t>(i)] = it->second.output;
    if (vector_layers.count(c.lowered.nodes[i].name))
      layer_of[static_cast<uint32_t>(i)] = c.lowered.nodes[i].outputs[0];
  }
  std::map<std::string, std::vector<double>> snapshot;
  const auto& prog = c.result.program.instructions;
  for (size_t i = 0; i < prog.size(); ++i) {
    arch::datapath::execute(prog[i], config, st);
    const uint32_t l = prog[i].layer();
    if (i + 1 < prog.size() && prog[i + 1].layer() == l) continue;
    auto out = layer_of.find(l);
    if (out == layer_of.end()) continue;
    for (const auto& v : c.result.values) {
      if (v.name == out->second) snapshot[v.name] = read_value(st, v);
    }
    for (const auto& v : c.result.on_chip) {  // where its producer left it for the next layer
      if (v.name == out->second) snapshot[v.name] = read_value(st, v, true);
    }
  }
  const auto expected = q::expected_int8_tensors(c.lowered, c.plan, sample);
  int matrix_layers = 0;
  for (const auto& [name, L] : c.plan.layers) {
    if (!only.empty() && !only.count(name)) continue;
    const auto e = expected.find(L.output);
    if (e == expected.end()) continue;
    const compiler::HostTensor* where = nullptr;
    for (const auto& v : c.result.values) {
      if (v.name == L.output) where = &v;
    }
    for (const auto& v : c.result.on_chip) {
      if (v.name == L.output) where = &v;
    }
    if (!where || !snapshot.count(L.output)) continue;  // an alias
    const std::vector<double>& got = snapshot.at(L.output);
    const q::Int8Tensor& want = e->second;
    EXPECT_EQ(got.size(), want.codes.size()) << name;
    int64_t mismatches = 0;
    for (size_t k = 0; k < got.size() && k < want.codes.size(); ++k) {
      // A graph output is stored dequantized (fp32): the exact dequantized code.
      const double w = where->dtype == isa::DType::kFp32
                           ? static_cast<double>(want.qparams.dequantize(want.codes[k]))
                           : static_cast<double>(want.codes[k]);
      mismatches += got[k] != w;
    }
    EXPECT_EQ(mismatches, 0) << "layer " << name << " (" << L.output << "): " << mismatches << " of "
                             << got.size() << " elements differ from the quantized reference";
    ++matrix_layers;
  }
  for (const compiler::Node& n : c.lowered.nodes) {
    if (!vector_layers.count(n.name)) continue;
    const q::Int8Tensor& want = expected.at(n.outputs[0]);
    const std::vector<double>& got = snapshot.at(n.outputs[0]);
    EXPECT_EQ(got.size(), want.codes.size()) << n.name;
    int64_t mismatches = 0;
    for (size_t k = 0; k < got.size() && k < want.codes.size(); ++k) mismatches += got[k] != want.codes[k];
    EXPECT_EQ(mismatches, 0) << "vector layer " << n.name << ": " << mismatches << " of " << got.size()
                             << " codes differ from the quantized reference";
  }
  return matrix_layers;
}

const std::string kBlocks = std::string(NPUSIM_SOURCE_DIR) + "/tests/quant_e2e/data/mbv2_block.onnx";

TEST(Int8Codegen, SmallCnnMatchesQuantizedReferenceBitExactly) {
  const isa::NpuConfig config;
  for (bool per_channel : {true, false}) {
    for (bool symmetric : {false, true}) {
      const Compiled c = compile_int8("demo", config, per_channel, symmetric);
      const auto samples = q::synthetic_samples(c.lowered, 2, 99);
      for (const auto& s : samples) {
        EXPECT_EQ(check_bit_exact(c, config, s), 4)
            << "per_channel " << per_channel << " symmetric " << symmetric;
      }
    }
  }
}

TEST(Int8Codegen, DepthwiseInvertedResidualBlocksMatchBitExactly) {
  const isa::NpuConfig config;
  for (bool per_channel : {true, false}) {
    for (bool symmetric : {false, true}) {
      const Compiled c = compile_int8(kBlocks, config, per_channel, symmetric);
      const auto samples = q::synthetic_samples(c.lowered, 2, 5);
      // expand, dw, project (+ residual), expand, dw stride 2, project, head, fc.
      for (const auto& s : samples) EXPECT_EQ(check_bit_exact(c, config, s), 8);
    }
  }
}

TEST(Int8Codegen, DepthwiseConvsOnTheVectorUnitMatchBitExactly) {
  // The same blocks with both depthwise convs placed on the vector unit (VEC dwconv, uint8 codes x
  // int8 weights summed in int32, the input zero point folded into the bias as on the array).
  const isa::NpuConfig config;
  for (bool per_channel : {true, false}) {
    for (bool symmetric : {false, true}) {
      Compiled c = compile_int8(kBlocks, config, per_channel, symmetric);
      compiler::MappingOverrides vector;
      for (const auto& n : c.lowered.nodes) {
        if (n.op_type != "Conv" || n.attr_int("group", 1) == 1) continue;
        compiler::LayerMapping e;
        e.name = n.name;
        e.placement = compiler::Placement::kNpuVector;
        vector.layers[n.name] = e;
      }
      ASSERT_EQ(vector.layers.size(), 2u);
      compiler::CompileOptions opt;
      opt.plan = &c.plan;
      opt.mapping = &vector;
      c.result = compiler::compile(c.lowered, config, opt);
      int on_vector = 0;
      for (const auto& l : c.result.layers)
        on_vector += l.op == "Conv" && l.placement == compiler::Placement::kNpuVector;
      EXPECT_EQ(on_vector, 2);
      for (const auto& s : q::synthetic_samples(c.lowered, 2, 5)) EXPECT_EQ(check_bit_exact(c, config, s), 8);
    }
  }
}

// int16 activations (--precision-override NODE=int16): the layers named read int16 codes (written in
// int16 by their int8 producers' output stages), multiply them with int8 weights into int64 sums on the
// array at systolic_array.int16_rate, and every layer's codes equal the quantized reference's.
TEST(Int8Codegen, Int16ActivationLayersMatchTheQuantizedReferenceBitExactly) {
  const isa::NpuConfig config;
  for (bool per_channel : {true, false}) {
    for (bool symmetric : {false, true}) {
      // b1_dw: a depthwise conv (on the array or the vector unit, whichever the search takes); b1_project:
      // a 1x1 conv with a fused residual; b2_expand reads the residual sum; head a stride-1 1x1 conv.
      const Compiled c = compile_int8(kBlocks, config, per_channel, symmetric,
                                      "b1_dw=int16,b1_project=int16,b2_expand=int16,head=int16");
      for (const char* name : {"b1_dw", "b1_project", "b2_expand", "head"}) {
        EXPECT_TRUE(c.plan.nodes.at(name).int16) << name << ": " << c.plan.nodes.at(name).reason;
        EXPECT_EQ(c.plan.reported_precision(name), q::Precision::kInt16);
        EXPECT_EQ(c.plan.values.at(c.plan.layers.at(name).input).dtype, isa::DType::kInt16) << name;
      }
      bool int16_macs = false;
      for (const auto& ins : c.result.program.instructions) {
        const bool dwconv = ins.opcode == isa::Opcode::kVec &&
                            ins.get(isa::Field::kVop) == static_cast<int64_t>(isa::VecOp::kDwConv);
        if (ins.opcode != isa::Opcode::kConv && ins.opcode != isa::Opcode::kMatmul && !dwconv) continue;
        int16_macs |= static_cast<isa::DType>(ins.get(isa::Field::kDtype)) == isa::DType::kInt16;
      }
      EXPECT_TRUE(int16_macs);
      for (const auto& s : q::synthetic_samples(c.lowered, 2, 5)) EXPECT_EQ(check_bit_exact(c, config, s), 8);
    }
  }
}

TEST(Int8Codegen, MixedPrecisionOverrideConvertsAtTheBoundaries) {
  const isa::NpuConfig config;
  const Compiled c = compile_int8(kBlocks, config, true, false, "b1_dw=fp16,GlobalAveragePool=fp32");
  EXPECT_EQ(c.plan.precision_of("b1_dw"), q::Precision::kFp16);
  // b1_dw runs on fp16 operands: its convolution instructions say so (CONV on the array or VEC dwconv on
  // the vector unit, whichever the back end chose); its neighbours stay int8.
  bool fp16_conv = false, int8_conv = false;
  for (const auto& ins : c.result.program.instructions) {
    const bool dwconv = ins.opcode == isa::Opcode::kVec &&
                        ins.get(isa::Field::kVop) == static_cast<int64_t>(isa::VecOp::kDwConv);
    if (ins.opcode != isa::Opcode::kConv && !dwconv) continue;
    const auto t = static_cast<isa::DType>(ins.get(isa::Field::kDtype));
    fp16_conv |= t == isa::DType::kFp16;
    int8_conv |= t == isa::DType::kUint8;
  }
  EXPECT_TRUE(fp16_conv);
  EXPECT_TRUE(int8_conv);
  // The int8 layer upstream of the fp16 one is still bit-exact (downstream ones see fp16 results, whose
  // emulation accumulates in another order: docs/quantization.md).
  const auto samples = q::synthetic_samples(c.lowered, 1, 3);
  EXPECT_EQ(check_bit_exact(c, config, samples[0], {"b1_expand"}), 1);
}

TEST(Int8Codegen, Int8MovesFewerBytesAndRunsAtTheInt8Rate) {
  const isa::NpuConfig config;
  const Compiled i8 = compile_int8(kBlocks, config, true, false);
  Graph g = compiler::load_model(kBlocks);
  compiler::lower(g);
  compiler::CompileOptions fp16;
  fp16.precision = isa::DType::kFp16;
  const compiler::CompileResult f = compiler::compile(g, config, fp16);
  // Weights: 1 byte per int8 weight vs 2 per fp16 weight (plus int32 bias/multiplier tables).
  EXPECT_LT(i8.result.memory.weight_bytes, f.memory.weight_bytes);
  // Activations between int8 layers are 1 byte, so the activation footprint shrinks too.
  EXPECT_LT(i8.result.memory.activation_bytes, f.memory.activation_bytes);
  // Every int8 conv's estimated compute uses the int8 rate (1 MAC/PE/cycle vs fp16's 0.5 by default).
  ASSERT_GT(config.systolic_array.rate(isa::DType::kUint8), config.systolic_array.rate(isa::DType::kFp16));
}

// A graph of one MatMul of two runtime inputs (attention's Q x K^T), a [a_shape] x b [b_shape].
Graph runtime_matmul(const Shape& a_shape, const Shape& b_shape, const Shape& y_shape) {
  Graph g;
  g.opset = 13;
  for (const char* in : {"a", "b"}) {
    compiler::Value& v = g.ensure_value(in);
    v.dtype = compiler::DataType::kFloat32;
    v.shape = std::string(in) == "a" ? a_shape : b_shape;
    v.shape_known = true;
    g.inputs.push_back(in);
  }
  compiler::Node mm;
  mm.op_type = "MatMul";
  mm.name = "qk";
  mm.inputs = {"a", "b"};
  mm.outputs = {"y"};
  g.nodes.push_back(mm);
  compiler::Value& y = g.ensure_value("y");
  y.dtype = compiler::DataType::kFloat32;
  y.shape = y_shape;
  y.shape_known = true;
  g.outputs.push_back("y");
  return g;
}

TEST(Int8Codegen, MatMulOfTwoRuntimeOperandsRunsInt8OnTheArrayBitExactly) {
  // Attention's Q x K^T and P x V: both operands are activations. The plan quantizes both symmetrically
  // (zero point 0), so the array's integer sums need no runtime correction and the node runs int8 --
  // also on an int8-only array (tpu-v1, gemmini), where it would otherwise fall back to the host.
  isa::NpuConfig int8_only;
  int8_only.systolic_array.fp32_rate = int8_only.systolic_array.fp16_rate =
      int8_only.systolic_array.bf16_rate = 0;
  struct Case {
    Shape a, b, y;
  };
  for (const Case& k :
       {Case{{2, 8, 16}, {2, 16, 8}, {2, 8, 8}}, Case{{2, 3, 5, 16}, {2, 3, 16, 7}, {2, 3, 5, 7}},
        Case{{3, 4, 24}, {24, 9}, {3, 4, 9}}}) {
    Compiled c;
    c.imported = runtime_matmul(k.a, k.b, k.y);
    c.lowered = c.imported;
    compiler::lower(c.lowered);
    q::PlanRequest req;
    req.spec.model = q::Precision::kInt8;
    req.quant.calibration.method = q::CalibrationMethod::kMinMax;
    req.calibration_count = 2;
    c.plan = q::build_plan(c.lowered, req, &c.imported);
    ASSERT_EQ(c.plan.values.at("a").zero_point, 0);
    ASSERT_EQ(c.plan.values.at("b").zero_point, 0);
    for (const isa::NpuConfig& config : {isa::NpuConfig{}, int8_only}) {
      compiler::CompileOptions opt;
      opt.plan = &c.plan;
      c.result = compiler::compile(c.lowered, config, opt);
      EXPECT_TRUE(c.result.fallbacks.empty());
      ASSERT_FALSE(c.result.layers.empty());
      bool int8_matmul = false;
      for (const auto& l : c.result.layers) int8_matmul |= l.mapping.rfind("int8 MATMUL", 0) == 0;
      EXPECT_TRUE(int8_matmul);
      for (const auto& s : q::synthetic_samples(c.lowered, 2, 21))
        EXPECT_EQ(check_bit_exact(c, config, s), 1);
    }
  }
}

TEST(Int8Codegen, MatMulOfRuntimeOperandsWithAZeroPointFallsBackToTheHostOnAnInt8OnlyArray) {
  // A pre-quantized model may give an attention operand a zero point: the integer path does not take
  // it, so it computes in fp32 -- which an int8-only array lacks: it runs on the host, not fail.
  Graph g = runtime_matmul({1, 8, 16}, {1, 16, 8}, {1, 8, 8});
  Graph imported = g;
  compiler::lower(g);
  q::PlanRequest req;
  req.spec.model = q::Precision::kInt8;
  req.quant.calibration.method = q::CalibrationMethod::kMinMax;
  req.calibration_count = 2;
  q::PrecisionPlan plan = q::build_plan(g, req, &imported);
  plan.values.at("a").zero_point = 3;
  plan.values.at("a").dtype = isa::DType::kUint8;
  isa::NpuConfig int8_only;
  int8_only.systolic_array.fp32_rate = int8_only.systolic_array.fp16_rate =
      int8_only.systolic_array.bf16_rate = 0;
  compiler::CompileOptions opt;
  opt.plan = &plan;
  const compiler::CompileResult r = compiler::compile(g, int8_only, opt);
  ASSERT_EQ(r.fallbacks.size(), 1u);
  EXPECT_EQ(r.fallbacks[0].node, "qk");
  EXPECT_NE(r.fallbacks[0].reason.find("no fp32 MACs"), std::string::npos) << r.fallbacks[0].reason;
  // With fp32 MACs the same node stays on the array.
  EXPECT_TRUE(compiler::compile(g, isa::NpuConfig{}, opt).fallbacks.empty());
}

// ---- pre-quantized (QDQ) models, through the pipeline `npusim run` uses (sim::compile_model) -----

Compiled compile_prequantized(const std::string& path, const isa::NpuConfig& config) {
  sim::ModelOptions o;
  o.plan.spec.model = q::Precision::kFp32;  // --precision auto on an array with fp32 MACs
  o.plan.follow_model = true;
  sim::CompiledModel m = sim::compile_model(path, config, o, nullptr);
  EXPECT_TRUE(m.prequantized) << path;
  return Compiled{std::move(m.imported), std::move(m.lowered), std::move(m.plan), std::move(m.result)};
}

// The int8 tensors of a model (the weight codes torch wrote, as initializers or Constant nodes), each
// as a sorted multiset.
std::set<std::vector<int64_t>> int8_initializers(const Graph& g) {
  std::set<std::vector<int64_t>> out;
  auto add = [&](const compiler::Tensor& t) {
    if (t.dtype != compiler::DataType::kInt8 || t.size() < 2) return;
    std::vector<int64_t> codes(t.i.begin(), t.i.end());
    std::sort(codes.begin(), codes.end());
    out.insert(codes);
  };
  for (const auto& [name, v] : g.values)
    if (v.is_constant()) add(*v.constant);
  for (const auto& n : g.nodes)
    if (n.op_type == "Constant" && n.has_attr("value")) add(n.attrs.at("value").t());
  return out;
}

TEST(Int8Codegen, PreQuantizedTorchModelsRunWithTheirOwnScalesAndWeightsBitExactly) {
  const isa::NpuConfig config;
  const std::string src = NPUSIM_SOURCE_DIR;
  struct Case {
    std::string model, input;
    int matrix_layers;
  };
  const std::vector<Case> cases = {
      {src + "/tests/compiler/quant/data/qdq_tiny.onnx", src + "/tests/compiler/quant/data/input.npy", 4},
      {src + "/tests/quant_e2e/data/qdq_resblock.onnx", src + "/tests/quant_e2e/data/qdq_resblock_input.npy",
       5}};
  for (const Case& k : cases) {
    const Compiled c = compile_prequantized(k.model, config);
    EXPECT_EQ(c.plan.calibration.method, "model") << k.model;
    EXPECT_EQ(c.plan.calibration.inputs, 0) << k.model;
    // Every matrix layer is int8 and its weights are the model's own codes (a Gemm's are transposed by
    // the passes, hence the multiset comparison), with the model's per-tensor scales.
    const auto codes = int8_initializers(c.imported);
    int matrix = 0;
    for (const auto& n : c.lowered.nodes) {
      if (!q::is_matrix_op(n)) continue;
      ++matrix;
      ASSERT_EQ(c.plan.precision_of(n.name), q::Precision::kInt8) << n.name;
      const q::LayerQuant& L = c.plan.layers.at(n.name);
      std::vector<int64_t> w(L.weight_q.begin(), L.weight_q.end());
      std::sort(w.begin(), w.end());
      EXPECT_TRUE(codes.count(w)) << n.name << ": weights are not the model's int8 initializer";
      EXPECT_FALSE(L.per_channel) << n.name;  // qnnpack's default qconfig: per-tensor weights
    }
    EXPECT_EQ(matrix, k.matrix_layers) << k.model;
    // Every int8 layer's output codes on the functional datapath equal the quantized reference's.
    q::Sample s{{"input", q::read_npy_tensor(k.input)}};
    EXPECT_EQ(check_bit_exact(c, config, s), k.matrix_layers) << k.model;
    for (const auto& extra : q::synthetic_samples(c.lowered, 1, 11))
      EXPECT_EQ(check_bit_exact(c, config, extra), k.matrix_layers) << k.model;
  }
}

TEST(Int8Codegen, PreQuantizedModelKeepsItsQuantizationPointsThroughThePasses) {
  // The model quantizes conv3's output before the residual add: the add is not fused into conv3 (that
  // would skip a rounding the model specifies); it runs as an int8 node with the model's scales.
  const Compiled c = compile_prequantized(
      std::string(NPUSIM_SOURCE_DIR) + "/tests/quant_e2e/data/qdq_resblock.onnx", isa::NpuConfig{});
  bool add = false;
  for (const auto& n : c.lowered.nodes) {
    if (n.op_type == "Conv") {
      EXPECT_FALSE(n.has_attr(compiler::kResidualInput)) << n.name;
    }
    if (n.op_type != "Add") continue;
    add = true;
    EXPECT_EQ(c.plan.precision_of(n.name), q::Precision::kInt8);
    for (const auto& v : n.inputs) EXPECT_TRUE(c.plan.values.count(v)) << v;
    EXPECT_TRUE(c.plan.values.count(n.outputs[0]));
  }
  EXPECT_TRUE(add);
  // And the vector layers run in one pass over int8 data: the add rescales the codes in int32 in its tile
  // loop (the integer scheme, quant::integer_add), the relu after it (the model gives it its input's scale)
  // clamps the codes at the zero point and the max pool selects on the codes themselves; no fp32 DRAM copies
  // for them.
  std::map<std::string, std::string> mapping;
  for (const auto& l : c.result.layers) mapping[l.op] += l.mapping + "; ";
  EXPECT_NE(mapping["Add"].find("int8 integer: centred codes rescaled"), std::string::npos) << mapping["Add"];
  EXPECT_NE(mapping["Relu"].find("on int8 codes"), std::string::npos) << mapping["Relu"];
  EXPECT_NE(mapping["MaxPool"].find("on int8 codes"), std::string::npos) << mapping["MaxPool"];
  for (const auto& ins : c.result.program.instructions) {
    if (ins.opcode != isa::Opcode::kStore) continue;
    const std::string& op = c.lowered.nodes.at(ins.layer()).op_type;
    if (op == "Add" || op == "Relu" || op == "MaxPool") {
      EXPECT_NE(static_cast<isa::DType>(ins.get(isa::Field::kDtype)), isa::DType::kFp32)
          << op << " stores fp32";
    }
  }
}

TEST(Int8Codegen, MutatedPreQuantizedModelsAreAClearErrorOrRunNeverACrash) {
  // Semantic fuzzing of the QDQ path: the resblock model with its Q/DQ scales, zero points and weight
  // codes replaced by hostile values (0, negative, NaN, infinity, denormal, huge; zero points across the
  // range; codes at the limits), through the whole pipeline npusim run uses and, when it compiles, one
  // functional run. Every outcome must be a success or a ModelError / CompileError with a message.
  const std::string path = std::string(NPUSIM_SOURCE_DIR) + "/tests/quant_e2e/data/qdq_resblock.onnx";
  const Graph original = compiler::load_model(path);
  std::mt19937 rng(99);
  const std::vector<float> bad_scales = {0.0f, -0.5f, std::nanf(""), INFINITY, 1e-40f, 1e30f, 1e-12f, 3.0f};
  int ok = 0, rejected = 0;
  for (int it = 0; it < 200; ++it) {
    Graph g = original;
    // Constant tensors feeding Q/DQ nodes (Constant nodes' values), by input position: 1 scale, 2 zp, 0 x.
    std::vector<std::pair<compiler::Node*, size_t>> targets;
    std::map<std::string, compiler::Node*> constant_of;
    for (auto& n : g.nodes)
      if (n.op_type == "Constant" && n.has_attr("value")) constant_of[n.outputs[0]] = &n;
    for (auto& n : g.nodes) {
      if (n.op_type != "QuantizeLinear" && n.op_type != "DequantizeLinear") continue;
      for (size_t k = 0; k < n.inputs.size(); ++k)
        if (constant_of.count(n.inputs[k])) targets.push_back({constant_of[n.inputs[k]], k});
    }
    ASSERT_FALSE(targets.empty());
    const int mutations = 1 + static_cast<int>(rng() % 3);
    for (int m = 0; m < mutations; ++m) {
      auto [node, k] = targets[rng() % targets.size()];
      compiler::Tensor t = node->attrs.at("value").t();
      if (t.floating()) {
        for (auto& v : t.f) v = bad_scales[rng() % bad_scales.size()];
      } else {
        int64_t lo, hi;
        compiler::interp::integer_range(t.dtype, lo, hi);
        for (auto& v : t.i)
          v = (rng() % 2) ? lo + static_cast<int64_t>(rng() % static_cast<uint64_t>(hi - lo + 1))
                          : (rng() % 2 ? lo : hi);
      }
      node->attrs.at("value").value = t;
      (void)k;
    }
    try {
      sim::ModelOptions o;
      o.plan.spec.model = q::Precision::kFp32;
      o.plan.follow_model = true;
      o.plan.calibration_count = 1;
      sim::CompiledModel cm = sim::compile_graph(g, isa::NpuConfig{}, o, nullptr);
      Compiled c{std::move(cm.imported), std::move(cm.lowered), std::move(cm.plan), std::move(cm.result)};
      arch::datapath::MachineState st(isa::NpuConfig{}, c.result.program);
      for (const auto& ins : c.result.program.instructions) {
        if (ins.opcode == isa::Opcode::kHostCall) break;  // host ops need the interpreter hook: stop here
        arch::datapath::execute(ins, isa::NpuConfig{}, st);
      }
      ++ok;
    } catch (const compiler::ModelError& e) {
      EXPECT_GT(std::string(e.what()).size(), 10u);
      ++rejected;
    } catch (const compiler::CompileError& e) {
      EXPECT_GT(std::string(e.what()).size(), 10u);
      ++rejected;
    } catch (const q::CalibrationError& e) {
      EXPECT_GT(std::string(e.what()).size(), 10u);
      ++rejected;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "iteration " << it << ": unexpected exception: " << e.what();
    }
  }
  EXPECT_GT(rejected, 10);
  EXPECT_GT(ok, 10);
}

// Names the builder's nodes after their outputs, lowers the graph and plans it in int8 (min-max
// calibration on `samples` synthetic inputs).
Compiled lower_and_plan_int8(compiler::testing::GraphBuilder& b, int samples, int64_t whole_row_limit = 0,
                             q::Int8Vector scheme = q::Int8Vector::kInteger, bool symmetric = false) {
  for (auto& n : b.graph().nodes) n.name = n.outputs[0] + "_node";
  Compiled k;
  k.imported = b.build();
  k.lowered = k.imported;
  compiler::PipelineOptions o;
  o.whole_row_limit = whole_row_limit;
  compiler::lower(k.lowered, o);
  q::PlanRequest req;
  req.spec.model = q::Precision::kInt8;
  req.quant.calibration.method = q::CalibrationMethod::kMinMax;
  req.calibration_count = samples;
  req.quant.int8_vector = scheme;
  req.quant.symmetric_activations = symmetric;
  k.plan = q::build_plan(k.lowered, req, &k.imported);
  return k;
}

// Every STORE of the layers of `op` writes int8/uint8 codes.
void expect_stores_codes(const Compiled& k, const std::string& op) {
  for (const auto& ins : k.result.program.instructions) {
    if (ins.opcode != isa::Opcode::kStore || k.lowered.nodes.at(ins.layer()).op_type != op) continue;
    const auto dt = static_cast<isa::DType>(ins.get(isa::Field::kDtype));
    EXPECT_TRUE(dt == isa::DType::kUint8 || dt == isa::DType::kInt8)
        << op << ": " << isa::kDTypeNames[static_cast<size_t>(dt)];
  }
}

// The graph outputs (fp32) of a compiled program run in program order on the datapath.
std::map<std::string, std::vector<float>> run_outputs(const compiler::CompileResult& r,
                                                      const isa::NpuConfig& config, const q::Sample& sample) {
  arch::datapath::MachineState st(config, r.program);
  for (const auto& b : r.program.tensors) {
    if (b.role != isa::TensorBinding::Role::kInput) continue;
    const std::vector<float> v = sample.at(b.name).to_float_vector();
    st.dram().write(b.dram_addr, reinterpret_cast<const uint8_t*>(v.data()), v.size() * 4);
  }
  for (const auto& ins : r.program.instructions) arch::datapath::execute(ins, config, st);
  std::map<std::string, std::vector<float>> out;
  for (const auto& b : r.program.tensors) {
    if (b.role != isa::TensorBinding::Role::kOutput) continue;
    int64_t n = 1;
    for (uint64_t d : b.dims) n *= static_cast<int64_t>(d);
    std::vector<float> v(static_cast<size_t>(n));
    st.dram().read(b.dram_addr, reinterpret_cast<uint8_t*>(v.data()), v.size() * 4);
    out[b.name] = v;
  }
  return out;
}

// The program with every Concat copying its inputs (CompileOptions::fold_concats off).
compiler::CompileResult compile_unfolded(const Compiled& k, const isa::NpuConfig& config) {
  compiler::CompileOptions opt;
  opt.plan = &k.plan;
  opt.fold_concats = false;
  return compiler::compile(k.lowered, config, opt);
}

TEST(Int8Codegen, ConcatInputsShareQParamsAndTheConcatMovesCodes) {
  // Inception/DenseNet-style: two convs (and the first conv's output again) concatenated, then a conv.
  // Calibration gives every value joined through the Concat one QParams (the widest member's), so the
  // Concat only moves int8 codes (no fp32 DRAM copies) and everything stays bit-exact.
  compiler::testing::GraphBuilder b;
  auto x = b.input("x", {1, 4, 6, 6});
  auto a = b.node("Conv", {x, b.random_constant("wa", {4, 4, 1, 1}, 1, -0.5f, 0.5f)}, "a", {1, 4, 6, 6});
  auto c = b.node("Conv", {x, b.random_constant("wc", {4, 4, 3, 3}, 2, -0.5f, 0.5f)}, "c", {1, 4, 6, 6},
                  {{"pads", compiler::testing::attr_ints({1, 1, 1, 1})}});
  auto cat = b.node("Concat", {a, c, a}, "cat", {1, 12, 6, 6}, {{"axis", compiler::testing::attr_i(1)}});
  b.output(b.node("Conv", {cat, b.random_constant("wd", {2, 12, 1, 1}, 3, -0.5f, 0.5f)}, "y", {1, 2, 6, 6}));
  Compiled k = lower_and_plan_int8(b, 4);
  const q::QParams &qa = k.plan.values.at("a"), &qc = k.plan.values.at("c"), &qcat = k.plan.values.at("cat");
  EXPECT_EQ(qa.scale, qcat.scale);
  EXPECT_EQ(qc.scale, qcat.scale);
  EXPECT_EQ(qa.zero_point, qcat.zero_point);
  const isa::NpuConfig config;
  compiler::CompileOptions opt;
  opt.plan = &k.plan;
  k.result = compiler::compile(k.lowered, config, opt);
  bool concat_seen = false;
  for (const auto& ins : k.result.program.instructions) {
    if (ins.opcode != isa::Opcode::kStore || k.lowered.nodes.at(ins.layer()).op_type != "Concat") continue;
    concat_seen = true;
    EXPECT_NE(static_cast<isa::DType>(ins.get(isa::Field::kDtype)), isa::DType::kFp32)
        << "the Concat stores fp32";
  }
  EXPECT_TRUE(concat_seen);
  for (const auto& sample : q::synthetic_samples(k.lowered, 2, 8))
    EXPECT_EQ(check_bit_exact(k, config, sample), 3);
}

TEST(Int8Codegen, ConcatWithAConstantInputCompilesAndStaysExact) {
  // ViT prepends a learned class token (a constant) to its patch embeddings: the Concat cannot run on
  // codes (the constant is written as floats), and must still compile (this threw map::at) and stay
  // bit-exact downstream.
  compiler::testing::GraphBuilder b;
  auto x = b.input("x", {1, 4, 8});
  auto e = b.node("MatMul", {x, b.random_constant("we", {8, 8}, 1, -0.5f, 0.5f)}, "e", {1, 4, 8});
  auto cat = b.node("Concat", {b.random_constant("cls", {1, 1, 8}, 2), e}, "cat", {1, 5, 8},
                    {{"axis", compiler::testing::attr_i(1)}});
  b.output(b.node("MatMul", {cat, b.random_constant("wo", {8, 3}, 3, -0.5f, 0.5f)}, "y", {1, 5, 3}));
  Compiled k = lower_and_plan_int8(b, 2);
  isa::NpuConfig int8_only;
  int8_only.systolic_array.fp32_rate = int8_only.systolic_array.fp16_rate =
      int8_only.systolic_array.bf16_rate = 0;
  for (const isa::NpuConfig& config : {isa::NpuConfig{}, int8_only}) {
    compiler::CompileOptions opt;
    opt.plan = &k.plan;
    ASSERT_NO_THROW(k.result = compiler::compile(k.lowered, config, opt));
    // The MatMul writes its codes in place (a contiguous slice); the Concat quantizes only the token.
    for (const auto& l : k.result.layers) {
      if (l.op == "Concat") {
        EXPECT_NE(l.mapping.find("1 constant input(s) from data segments quantized"), std::string::npos)
            << l.mapping;
      }
      if (l.name == "e_node") {
        EXPECT_NE(l.mapping.find("written in place"), std::string::npos) << l.mapping;
      }
    }
    expect_stores_codes(k, "Concat");
    const compiler::CompileResult unfolded = compile_unfolded(k, config);
    for (const auto& sample : q::synthetic_samples(k.lowered, 1, 4)) {
      EXPECT_EQ(check_bit_exact(k, config, sample), 2);
      EXPECT_EQ(run_outputs(k.result, config, sample), run_outputs(unfolded, config, sample));
    }
  }
}

TEST(Int8Codegen, RowwiseLayerNormAndSoftmaxConvertCodesOnceAndMatchTheReferenceBitExactly) {
  // A transformer's int8 path: MatMul -> LayerNormalization -> Softmax -> MatMul, rows of 45 (not a
  // multiple of the lanes), 87 rows in tiles of up to 14 on a small input buffer. Each row-wise layer
  // reads int8 codes, dequantizes once, computes in fp32 and quantizes once (the output scale folded into
  // its last step): the codes it writes, and the MatMul after it, are the quantized reference's bit for bit.
  // The last step, which writes int32 with the output scale folded in, is the add of beta or (no bias)
  // the multiply by gamma: both forms, and an RMSNormalization (npu domain, params 0) in its place.
  for (int params = 0; params <= 2; ++params) {
    compiler::testing::GraphBuilder b;
    auto x = b.input("x", {3, 29, 16});
    auto h = b.node("MatMul", {x, b.random_constant("w1", {16, 45}, 1, -0.5f, 0.5f)}, "h", {3, 29, 45});
    std::vector<std::string> ln_in = {h, b.random_constant("gamma", {45}, 2, 0.5f, 1.5f)};
    if (params >= 2) ln_in.push_back(b.random_constant("beta", {45}, 3, -0.5f, 0.5f));
    auto n = b.node(params == 0 ? "RMSNormalization" : "LayerNormalization", ln_in, "n", {3, 29, 45},
                    {{"epsilon", compiler::testing::attr_f(1e-5f)}}, compiler::DataType::kFloat32,
                    params == 0 ? compiler::kNpuDomain : "");
    auto s = b.node("Softmax", {n}, "s", {3, 29, 45}, {{"axis", compiler::testing::attr_i(-1)}});
    b.output(b.node("MatMul", {s, b.random_constant("w2", {45, 7}, 4, -0.5f, 0.5f)}, "y", {3, 29, 7}));
    isa::NpuConfig config;
    config.sram.input.size_kib = 8;  // three 2688-byte slots: 672 fp32 elements, 14 rows of 45
    Compiled k = lower_and_plan_int8(b, 4, compiler::rowwise_row_limit(config));
    ASSERT_EQ(k.lowered.nodes.size(), 4u);
    compiler::CompileOptions opt;
    opt.plan = &k.plan;
    k.result = compiler::compile(k.lowered, config, opt);
    EXPECT_TRUE(k.result.fallbacks.empty());
    for (const char* layer : {"n_node", "s_node"}) {
      const auto l = std::find_if(k.result.layers.begin(), k.result.layers.end(),
                                  [&](const compiler::LayerPlan& p) { return p.name == layer; });
      ASSERT_NE(l, k.result.layers.end()) << layer;
      EXPECT_NE(l->mapping.find("7 tile(s) of up to 14 rows x 45 elements"), std::string::npos) << l->mapping;
      EXPECT_NE(l->mapping.find("int8 codes converted once"), std::string::npos) << l->mapping;
    }
    // Between the layers only int8 codes travel: no fp32 scratch copies of h, n or s.
    for (const auto& v : k.result.values) {
      if (v.name == "n" || v.name == "s") {
        EXPECT_NE(v.dtype, isa::DType::kFp32) << v.name;
      }
    }
    for (const auto& sample : q::synthetic_samples(k.lowered, 2, 9))
      EXPECT_EQ(check_bit_exact(k, config, sample, {}, {"n_node", "s_node"}), 2)
          << params << " LayerNorm parameters";
  }
}

TEST(Int8Codegen, FloatEpilogueActivationsAreTheDatapathsBitForBit) {
  // MatMul + GELU / SiLU / HardSwish / Sigmoid, int8 with the float epilogue (--int8-vector float; the
  // integer scheme takes a table: FusedActivationsAreARequantizeAndOneTableLookup...): quantize(act(acc *
  // scale)) must give the reference's codes (the activations themselves are compared bit for bit on a dense
  // sweep in backend_test's Vector.ActivationsAreTheQuantizedReferencesBitForBit; with x / sqrt(2) in the
  // reference ConvNeXt-Tiny had 1 code in 301 056 off).
  for (const char* act : {"Gelu", "Silu", "HardSwish", "Sigmoid"}) {
    compiler::testing::GraphBuilder b;
    auto x = b.input("x", {1, 16384, 8});
    auto m = b.node("MatMul", {x, b.random_constant("w", {8, 64}, 5, -1.0f, 1.0f)}, "m", {1, 16384, 64});
    if (std::string(act) == "Gelu" || std::string(act) == "Silu") {
      // SiLU: sigmoid into a scratch tile, then the multiply (x * sigmoid(x) in the reference too).
      b.output(b.node(act, {m}, "y", {1, 16384, 64}, {}, compiler::DataType::kFloat32, compiler::kNpuDomain));
    } else {
      b.output(b.node(act, {m}, "y", {1, 16384, 64}));
    }
    Compiled k = lower_and_plan_int8(b, 2, 0, q::Int8Vector::kFloat);
    ASSERT_EQ(k.plan.layers.size(), 1u) << act;
    EXPECT_TRUE(k.plan.layers.begin()->second.float_epilogue) << act;
    EXPECT_FALSE(k.plan.layers.begin()->second.lut_epilogue) << act;
    const isa::NpuConfig config;
    compiler::CompileOptions opt;
    opt.plan = &k.plan;
    k.result = compiler::compile(k.lowered, config, opt);
    EXPECT_EQ(check_bit_exact(k, config, q::synthetic_samples(k.lowered, 1, 13)[0]), 1) << act;
  }
}

// A pre-quantized model's Concat of two convs (a: 4 channels, c: 6) followed by a conv, planned with the
// model's own QParams; `a` has scale `a_scale` and zero point `a_zp`, c and the Concat others.
Compiled prequantized_concat(float a_scale, int32_t a_zp) {
  compiler::testing::GraphBuilder b;
  auto x = b.input("x", {1, 4, 6, 6});
  auto a = b.node("Conv", {x, b.random_constant("wa", {4, 4, 1, 1}, 1, -0.5f, 0.5f)}, "a", {1, 4, 6, 6});
  auto c = b.node("Conv", {x, b.random_constant("wc", {6, 4, 1, 1}, 2, -0.5f, 0.5f)}, "c", {1, 6, 6, 6});
  auto cat = b.node("Concat", {a, c}, "cat", {1, 10, 6, 6}, {{"axis", compiler::testing::attr_i(1)}});
  b.output(b.node("Conv", {cat, b.random_constant("wd", {2, 10, 1, 1}, 3, -0.5f, 0.5f)}, "y", {1, 2, 6, 6}));
  for (auto& n : b.graph().nodes) n.name = n.outputs[0] + "_node";
  Compiled k;
  k.imported = b.build();
  q::ModelQuant mq;  // as import_qdq would record a QDQ model's scales
  auto qp = [](float scale, int32_t zp) {
    q::QParams p;
    p.scale = scale, p.zero_point = zp, p.dtype = isa::DType::kUint8;
    return p;
  };
  mq.values = {{"x", qp(0.03f, 128)},
               {"a", qp(a_scale, a_zp)},
               {"c", qp(0.017f, 131)},
               {"cat", qp(0.02f, 127)},
               {"y", qp(0.05f, 128)}};
  for (const auto& [v, p] : mq.values) k.imported.values.at(v).materialized = true;
  k.lowered = k.imported;
  compiler::lower(k.lowered);
  q::PlanRequest req;
  req.follow_model = true;
  std::vector<std::string> notes;
  k.plan = q::build_plan(k.lowered, req, &k.imported, &mq, &notes);
  return k;
}

TEST(Int8Codegen, ConcatOfDifferentlyQuantizedInputsRequantizesInItsTileLoop) {
  // A pre-quantized model's Concat whose inputs carry other scales than its output (torch's quantized
  // cat): each such input is requantized on its way through SRAM, bit-exact with the reference, and no
  // fp32 DRAM copy is made.
  Compiled k = prequantized_concat(0.011f, 120);
  ASSERT_EQ(k.plan.precision_of("cat_node"), q::Precision::kInt8);
  // The last conv writes the graph output through a layout change: the model's QParams of "y" reach
  // the conv's NHWC result, so it runs in int8 too.
  EXPECT_EQ(k.plan.precision_of("y_node"), q::Precision::kInt8);
  EXPECT_NE(k.plan.values.at("a").scale, k.plan.values.at("cat").scale);
  const isa::NpuConfig config;
  compiler::CompileOptions opt;
  opt.plan = &k.plan;
  k.result = compiler::compile(k.lowered, config, opt);
  for (const auto& l : k.result.layers) {
    if (l.op == "Concat") {
      EXPECT_NE(l.mapping.find("2 input(s) requantized"), std::string::npos) << l.mapping;
    }
  }
  for (const auto& ins : k.result.program.instructions)
    if (ins.opcode == isa::Opcode::kStore && k.lowered.nodes.at(ins.layer()).op_type == "Concat") {
      EXPECT_EQ(static_cast<isa::DType>(ins.get(isa::Field::kDtype)), isa::DType::kUint8);
    }
  for (const auto& sample : q::synthetic_samples(k.lowered, 2, 17))
    EXPECT_EQ(check_bit_exact(k, config, sample), 3);
}

// A BatchNormalization `y` of x (NCHW `shape`) with random parameters (positive scales and variances).
std::string random_batchnorm(compiler::testing::GraphBuilder& b, const std::string& x, const std::string& y,
                             const Shape& shape, uint32_t seed) {
  const int64_t c = shape[1];
  return b.node(
      "BatchNormalization",
      {x, b.random_constant(y + "_g", {c}, seed + 1, 0.5f, 1.5f), b.random_constant(y + "_b", {c}, seed + 2),
       b.random_constant(y + "_m", {c}, seed + 3), b.random_constant(y + "_v", {c}, seed + 4, 0.5f, 2.0f)},
      y, shape);
}

TEST(Int8Codegen, UnfoldedBatchNormsRunOnCodesInOnePassBitExactly) {
  // DenseNet's pre-activation layer: Concat -> BatchNormalization -> activation -> Conv. Each BN (with a
  // Relu, a Clip, a Sigmoid or nothing after it) is one int8 vector layer reading and writing codes:
  // with a clamp or no activation the conversions fold into its per-channel constants (no VEC div);
  // the convs after them see exactly the codes the quantized reference predicts.
  namespace t = compiler::testing;
  t::GraphBuilder b;
  auto x = b.input("x", {1, 4, 7, 5});
  auto a = b.node("Conv", {x, b.random_constant("wa", {6, 4, 3, 3}, 1, -0.5f, 0.5f)}, "a", {1, 6, 7, 5},
                  {{"pads", t::attr_ints({1, 1, 1, 1})}});
  auto cat = b.node("Concat", {x, a}, "cat", {1, 10, 7, 5}, {{"axis", t::attr_i(1)}});
  const std::vector<std::string> acts = {"Relu", "Clip", "Sigmoid", ""};
  for (size_t i = 0; i < acts.size(); ++i) {
    const std::string k = std::to_string(i);
    const uint32_t seed = static_cast<uint32_t>(10 * i);
    auto bn = random_batchnorm(b, cat, "bn" + k, {1, 10, 7, 5}, seed);
    std::string h = bn;
    if (acts[i] == "Clip") {
      h = b.node("Clip", {bn, b.scalar("lo" + k, -0.5f), b.scalar("hi" + k, 1.0f)}, "act" + k, {1, 10, 7, 5});
    } else if (!acts[i].empty()) {
      h = b.node(acts[i], {bn}, "act" + k, {1, 10, 7, 5});
    }
    // Padded: a BN right before an unpadded conv would fold into its weights (fold-batchnorm).
    b.output(b.node("Conv", {h, b.random_constant("w" + k, {3, 10, 3, 3}, seed + 5, -0.5f, 0.5f)}, "y" + k,
                    {1, 3, 7, 5}, {{"pads", t::attr_ints({1, 1, 1, 1})}}));
  }
  const Graph g = b.build();
  isa::NpuConfig small;  // an accumulator of 2 KiB: the BN's fp32 work takes several tiles
  small.sram.accumulator.size_kib = 2;
  for (const isa::NpuConfig& config : {isa::NpuConfig{}, small}) {
    const Compiled k = compile_graph_int8(g, config);
    int bns = 0;
    for (const auto& l : k.result.layers) {
      EXPECT_TRUE(l.op != "Mul" && l.op != "Add" && l.op != "Relu" && l.op != "Clip" && l.op != "Sigmoid")
          << l.op;
      if (l.op != "BatchNormalization") continue;
      ++bns;
      EXPECT_EQ(k.plan.precision_of(l.name), q::Precision::kInt8) << l.name;
      const bool folded = l.mapping.find("Sigmoid") == std::string::npos;
      EXPECT_NE(l.mapping.find(folded ? "codes in and out" : "codes converted in the tile loop"),
                std::string::npos)
          << l.mapping;
    }
    EXPECT_EQ(bns, 4);
    expect_stores_codes(k, "BatchNormalization");  // no fp32 DRAM copies around the BNs
    for (const auto& sample : q::synthetic_samples(k.lowered, 2, 23))
      EXPECT_EQ(check_bit_exact(k, config, sample), 5);
  }
}

// Exactly one layer of `op`, its mapping says `mapping`, and it stores codes.
void expect_one_layer_storing_codes(const Compiled& k, const std::string& op, const std::string& mapping) {
  int layers = 0;
  for (const auto& l : k.result.layers) {
    if (l.op != op) continue;
    ++layers;
    EXPECT_NE(l.mapping.find(mapping), std::string::npos) << l.mapping;
  }
  EXPECT_EQ(layers, 1) << op;
  expect_stores_codes(k, op);
}

TEST(Int8Codegen, ConstantPadMovesCodesWithItsHaloTheValuesCode) {
  // Conv -> Pad(H, W; value 0 and 0.75) -> Conv in int8: the Pad runs on the codes (its input and
  // output share QParams) with the LOAD halo writing the code of the pad value, bit-exact.
  for (const float value : {0.0f, 0.75f}) {
    namespace t = compiler::testing;
    t::GraphBuilder b;
    auto x = b.input("x", {1, 5, 6, 7});
    auto a = b.node("Conv", {x, b.random_constant("wa", {6, 5, 1, 1}, 1, -0.5f, 0.5f)}, "a", {1, 6, 6, 7});
    auto p = b.node("Pad", {a, b.ints("pads", {0, 0, 2, 1, 0, 0, 1, 3}), b.scalar("value", value)}, "p",
                    {1, 6, 9, 11});
    b.output(b.node("Conv", {p, b.random_constant("wb", {4, 6, 3, 3}, 2, -0.5f, 0.5f)}, "y", {1, 4, 7, 9}));
    const isa::NpuConfig config;
    const Compiled k = compile_graph_int8(b.build(), config);
    expect_one_layer_storing_codes(k, "Pad", "LOAD halo");
    for (const auto& sample : q::synthetic_samples(k.lowered, 2, 29))
      EXPECT_EQ(check_bit_exact(k, config, sample), 2);
  }
}

TEST(Int8Codegen, NearestResizeMovesCodesOnceEachWay) {
  // Conv -> Resize(nearest, x2 x2 and x4 x2) -> Conv in int8: the Resize shares its input's QParams and
  // copies codes (each input tile loaded once, stored once per output position), bit-exact.
  for (const float sw : {2.0f, 4.0f}) {
    namespace t = compiler::testing;
    t::GraphBuilder b;
    auto x = b.input("x", {1, 5, 6, 7});
    auto a = b.node("Conv", {x, b.random_constant("wa", {16, 5, 1, 1}, 1, -0.5f, 0.5f)}, "a", {1, 16, 6, 7});
    auto u = b.node("Resize",
                    {a, b.constant("roi", compiler::Tensor::from_floats({0}, {})),
                     b.constant("sc", compiler::Tensor::from_floats({4}, {1, 1, 2, sw}))},
                    "u", {1, 16, 12, static_cast<int64_t>(7 * sw)}, {{"mode", t::attr_s("nearest")}});
    b.output(b.node("Conv", {u, b.random_constant("wb", {4, 16, 1, 1}, 2, -0.5f, 0.5f)}, "y",
                    {1, 4, 12, static_cast<int64_t>(7 * sw)}));
    const isa::NpuConfig config;
    const Compiled k = compile_graph_int8(b.build(), config);
    EXPECT_EQ(k.plan.values.at("u").scale, k.plan.values.at("a").scale);
    expect_one_layer_storing_codes(k, "Resize", "nearest upsampling");
    for (const auto& sample : q::synthetic_samples(k.lowered, 2, 31))
      EXPECT_EQ(check_bit_exact(k, config, sample), 2);
  }
}

TEST(Int8Codegen, LayoutTransposesOfFloatGraphIOConvertCodesInTheirTileLoop) {
  // A float NCHW graph input into an int8 conv: the layout change to NHWC quantizes its transposed
  // tiles on the way (one pass, codes stored), instead of storing floats for a separate conversion. The
  // same on the way out: a Transpose of the conv's int8 output to a float graph output dequantizes in
  // its tile loop. Bit-exact against the quantized reference.
  namespace t = compiler::testing;
  t::GraphBuilder b;
  auto x = b.input("x", {1, 3, 9, 7});
  auto a = b.node("Conv", {x, b.random_constant("wa", {5, 3, 3, 3}, 1, -0.5f, 0.5f)}, "a", {1, 5, 9, 7},
                  {{"pads", t::attr_ints({1, 1, 1, 1})}});
  b.output(b.node("Transpose", {a}, "y", {1, 9, 5, 7}, {{"perm", t::attr_ints({0, 2, 1, 3})}}));
  const isa::NpuConfig config;
  const Compiled k = compile_graph_int8(b.build(), config);
  // (A third Transpose, the conv's NHWC output back to NCHW for `y`, moves codes as they are.)
  std::set<std::string> converting;
  for (const auto& l : k.result.layers)
    if (l.op == "Transpose" && l.mapping.find("converted in the tile loop") != std::string::npos)
      converting.insert(l.name);
  EXPECT_EQ(converting, (std::set<std::string>{"layout_0_x", "Transpose_1"}));  // Transpose_1 makes y
  // The input's layout change stores codes only, and no other layer converts the conv's input.
  for (const auto& ins : k.result.program.instructions) {
    const compiler::Node& n = k.lowered.nodes.at(ins.layer());
    if (ins.opcode != isa::Opcode::kStore || n.op_type != "Transpose" || n.inputs[0] != "x") continue;
    const auto dt = static_cast<isa::DType>(ins.get(isa::Field::kDtype));
    EXPECT_TRUE(dt == isa::DType::kUint8 || dt == isa::DType::kInt8)
        << isa::kDTypeNames[static_cast<size_t>(dt)];
  }
  for (const auto& sample : q::synthetic_samples(k.lowered, 2, 31))
    EXPECT_EQ(check_bit_exact(k, config, sample), 1);
}

TEST(Int8Codegen, DepthwiseSearchSimulatesTheBestTileOfEveryChannelChunk) {
  // MobileNetV2's features.2 depthwise conv in int8 (96 channels, 112 x 112, stride 2): the closed form
  // ranks 64-channel tiles first, whose input rows are 64 of every 96 bytes (short strided DMA rows,
  // half of them misaligned: 10 GB/s against 14.6 for whole pixel rows). Simulated, the tile of all
  // 96 channels is far faster, and it is the one chosen.
  namespace t = compiler::testing;
  t::GraphBuilder b;
  auto x = b.input("x", {1, 96, 112, 112});
  auto a = b.node("Conv", {x, b.random_constant("w", {96, 1, 3, 3}, 1, -0.5f, 0.5f)}, "a", {1, 96, 56, 56},
                  {{"pads", t::attr_ints({1, 1, 1, 1})},
                   {"strides", t::attr_ints({2, 2})},
                   {"group", t::attr_i(96)},
                   {"kernel_shape", t::attr_ints({3, 3})}});
  b.output(b.node("Clip", {a, b.scalar("lo", 0.0f), b.scalar("hi", 6.0f)}, "y", {1, 96, 56, 56}));
  Compiled k;
  k.imported = b.build();
  k.lowered = k.imported;
  compiler::lower(k.lowered);
  q::PlanRequest req;
  req.spec.model = q::Precision::kInt8;
  req.calibration_count = 2;
  k.plan = q::build_plan(k.lowered, req, &k.imported);
  const isa::NpuConfig config;
  compiler::CompileOptions opt;
  opt.plan = &k.plan;
  opt.timer = sim::simulation_timer(config);  // as npusim run: the search simulates its candidates
  k.result = compiler::compile(k.lowered, config, opt);
  int convs = 0;
  for (const auto& l : k.result.layers) {
    if (l.op != "Conv") continue;
    ++convs;
    EXPECT_EQ(l.placement, compiler::Placement::kNpuVector) << l.mapping;
    EXPECT_EQ(l.tile_n, 96) << l.mapping;
  }
  EXPECT_EQ(convs, 1);
}

TEST(Int8Codegen, AReluSharingItsInputsQParamsClampsTheCodesInOnePass) {
  // Concat -> Relu -> Conv: no producer to fuse the Relu into. Its output takes its input's QParams, so
  // it runs on the codes: one VEC clamp at the zero point per tile instead of dequantize, relu and
  // quantize (with a VEC div) in fp32, which had made such layers cost 3x their bound.
  namespace t = compiler::testing;
  t::GraphBuilder b;
  auto x = b.input("x", {1, 3, 7, 6});
  auto a = b.node("Conv", {x, b.random_constant("wa", {5, 3, 1, 1}, 1, -0.5f, 0.5f)}, "a", {1, 5, 7, 6});
  auto cat = b.node("Concat", {x, a}, "cat", {1, 8, 7, 6}, {{"axis", t::attr_i(1)}});
  auto r = b.node("Relu", {cat}, "r", {1, 8, 7, 6});
  b.output(b.node("Conv", {r, b.random_constant("wb", {4, 8, 1, 1}, 2, -0.5f, 0.5f)}, "y", {1, 4, 7, 6}));
  const isa::NpuConfig config;
  const Compiled k = compile_graph_int8(b.build(), config);
  expect_one_layer_storing_codes(k, "Relu", "on int8 codes");
  for (const auto& ins : k.result.program.instructions) {
    if (ins.opcode == isa::Opcode::kVec && k.lowered.nodes.at(ins.layer()).op_type == "Relu") {
      EXPECT_EQ(static_cast<isa::VecOp>(ins.get(isa::Field::kVop)), isa::VecOp::kClip);
    }
  }
  for (const auto& sample : q::synthetic_samples(k.lowered, 2, 31))
    EXPECT_EQ(check_bit_exact(k, config, sample), 2);
}

// Gemmini as configs/gemmini.yaml describes it, at DIM x DIM with a shared scratchpad of spad_kib and an
// accumulator of acc_kib (the compiler tests cannot read YAML).
isa::NpuConfig gemmini(int64_t dim, int64_t spad_kib, int64_t acc_kib) {
  isa::NpuConfig c;
  c.systolic_array.rows = c.systolic_array.cols = dim;
  c.systolic_array.fp16_rate = c.systolic_array.bf16_rate = c.systolic_array.fp32_rate = 0;
  c.sram.shared_scratchpad = true;
  c.sram.input.size_kib = spad_kib;
  c.sram.accumulator.size_kib = acc_kib;
  c.lowering.conv_reduction = isa::ConvReduction::kPerPosition;
  c.lowering.mapping_policy = isa::MappingPolicy::kGemmini;
  return c;
}

// The one matrix layer of a built-in single-layer model compiled int8 on `config`, checked bit-exact.
compiler::LayerPlan compiled_layer(const std::string& spec, const isa::NpuConfig& config, Compiled* out) {
  *out = compile_int8(spec, config, true, false);
  for (const auto& s : q::synthetic_samples(out->lowered, 1, 5))
    EXPECT_EQ(check_bit_exact(*out, config, s), 1);
  for (const auto& l : out->result.layers) {
    if (l.tile_n > 0) return l;
  }
  ADD_FAILURE() << "no matrix layer";
  return {};
}

// The tiles Gemmini's own software picks (gemmini-rocc-tests include/gemmini.h), derived here by hand
// from its rules, and the programs bit-exact under them.
TEST(Int8Codegen, GemminiPolicyPicksGemminisTilesAndStaysBitExact) {
  // A batch-1 FC layer, 2048 -> 1000, by tiled_matmul_auto: scratchpad 256 KiB / DIM 16 = 16384 rows
  // (BANK_NUM * BANK_ROWS), accumulator 64 KiB / (16 x 4 B) = 1024 rows (ACC_ROWS). WS is double
  // buffered: max_spad_rows = 8192, max_acc_rows = 512. The start: db_mats_in_acc = 512 / 16 = 32,
  // db_max_tile_i_j = floor(sqrt(32)) = 5, db_mats_in_partition = 4096 / 16 = 256, db_max_tile_k =
  // 256 / 5 = 51; tile_I = min(1, 5) = 1, tile_J = min(63, 5) = 5, tile_K = min(128, 51) = 51 (blocks).
  // "Fill scratchpad as much as possible" grows J, I, K in turn while (I*K + K*J) * 16 <= 8192, i.e.
  // K * (1 + J) <= 512, and I * J * 16 <= 512: J 6, K 52; J 7, K 53; J 8, K 54; (J 9: 540) K 55; K 56;
  // (K 57: 513) stop. tile = I 16 x J 128 x K 896 elements, the M = 1 row within the 16 of tile_I.
  {
    Compiled c;
    const compiler::LayerPlan l = compiled_layer("gemm:M=1,N=1000,K=2048", gemmini(16, 256, 64), &c);
    EXPECT_EQ(l.tile_m, 1);
    EXPECT_EQ(l.tile_n, 128);
    EXPECT_EQ(l.tile_k, 896);
    EXPECT_LE(l.sram_input_bytes + l.sram_weight_bytes, 256 * 1024);  // one scratchpad for both
  }
  // The same FC at 8x8 with 64 KiB / 16 KiB: 8192 scratchpad rows of DIM 8, 512 accumulator rows, so the
  // same row limits and the same start (db_max_tile_i_j = floor(sqrt(256 / 8)) = 5, db_max_tile_k =
  // (2048 / 8) / 5 = 51) and trace: J 8, K 56 blocks of 8 = 64 x 448.
  {
    Compiled c;
    const compiler::LayerPlan l = compiled_layer("gemm:M=1,N=1000,K=2048", gemmini(8, 64, 16), &c);
    EXPECT_EQ(l.tile_n, 64);
    EXPECT_EQ(l.tile_k, 448);
  }
  // A 3x3 conv, 32x32x16 -> 16, pad 1, by tiled_conv_auto: args {batch 1, orows 32, ocols 32, ochs 16,
  // krows 3, kcols 3, kchs 16}; tiled_conv_total_spad_rows: A = ceil(16/16) * (32+2) * (32+2) = 1156 and
  // B = 1 * 3 * 3 * 16 = 144 rows fit 8192, but C = 32 * 32 = 1024 accumulator rows exceed 512. The
  // shrink loop takes the largest arg (the first of equals): orows and ocols alternately, 1 at a time
  // (ocols is spared only once <= DIM), until orows * ocols <= 512: 22 x 23 = 506. Growing ocols
  // (22 x 24 = 528) or orows (23 x 23) no longer fits; the rest are at their maximum.
  {
    Compiled c;
    const compiler::LayerPlan l =
        compiled_layer("conv:H=32,W=32,C=16,K=16,R=3,S=3,stride=1,pad=1", gemmini(16, 256, 64), &c);
    EXPECT_EQ(l.tile_oh, 22);
    EXPECT_EQ(l.tile_ow, 23);
    EXPECT_EQ(l.tile_n, 16);
    // Per kernel position: one 1x1 CONV of 16 channels per (r, s) of each tile.
    int64_t convs = 0;
    for (const isa::Instruction& i : c.result.program.instructions) {
      if (i.opcode != isa::Opcode::kConv) continue;
      ++convs;
      EXPECT_EQ(i.get(isa::Field::kKernelH) * i.get(isa::Field::kKernelW), 1);
      EXPECT_EQ(i.get(isa::Field::kInC), 16);
    }
    EXPECT_EQ(convs, 9 * 2 * 2);  // 9 positions x (32/22 -> 2) x (32/23 -> 2) tiles
  }
  // The whole demo CNN (convs with and without padding, stride, the FC) on the preset: bit-exact.
  {
    const isa::NpuConfig config = gemmini(16, 256, 64);
    const Compiled c = compile_int8("demo", config, true, false);
    for (const auto& s : q::synthetic_samples(c.lowered, 1, 99)) EXPECT_EQ(check_bit_exact(c, config, s), 4);
  }
}

TEST(Int8Codegen, ConcatsFoldedIntoTheirProducersStoresGiveTheUnfoldedProgramsBitsExactly) {
  // DenseNet's block in int8: stem conv -> max pool (x0) -> [Concat(x0, f1..fk) -> BN+Relu -> 3x3 conv fk+1]
  // x 3 -> Concat of all. Calibration gives the Concats and the feature maps one QParams, but the max
  // pool's output keeps its input's (a pool only selects codes): the first Concat requantizes x0 into the
  // block's buffer, the later ones find it there; the convs write their codes in place. Every value,
  // views included, is the quantized reference's code, and the outputs equal the unfolded program's.
  namespace t = compiler::testing;
  t::GraphBuilder b;
  auto x = b.input("x", {1, 3, 10, 8});
  auto stem = b.node("Conv", {x, b.random_constant("ws", {8, 3, 3, 3}, 1, -0.5f, 0.5f)}, "stem",
                     {1, 8, 10, 8}, {{"pads", t::attr_ints({1, 1, 1, 1})}});
  auto x0 = b.node("MaxPool", {stem}, "x0", {1, 8, 5, 4},
                   {{"kernel_shape", t::attr_ints({2, 2})}, {"strides", t::attr_ints({2, 2})}});
  std::vector<std::string> feats = {x0};
  for (int l = 0; l < 3; ++l) {
    const std::string k = std::to_string(l);
    const int64_t c = 8 + 4 * l;
    const uint32_t seed = static_cast<uint32_t>(10 * (l + 1));
    auto cat = b.node("Concat", feats, "cat" + k, {1, c, 5, 4}, {{"axis", t::attr_i(1)}});
    auto bn = random_batchnorm(b, cat, "bn" + k, {1, c, 5, 4}, seed);
    auto h = b.node("Relu", {bn}, "h" + k, {1, c, 5, 4});
    feats.push_back(b.node("Conv", {h, b.random_constant("w" + k, {4, c, 3, 3}, seed + 5, -0.5f, 0.5f)},
                           "f" + k, {1, 4, 5, 4}, {{"pads", t::attr_ints({1, 1, 1, 1})}}));
  }
  auto out = b.node("Concat", feats, "out", {1, 20, 5, 4}, {{"axis", t::attr_i(1)}});
  b.output(b.node("Conv", {out, b.random_constant("wy", {3, 20, 1, 1}, 7, -0.5f, 0.5f)}, "y", {1, 3, 5, 4}));
  Compiled k = lower_and_plan_int8(b, 4);
  EXPECT_NE(k.plan.values.at("x0").scale, k.plan.values.at("out").scale);
  EXPECT_EQ(k.plan.values.at("f0").scale, k.plan.values.at("out").scale);
  isa::NpuConfig small;  // several output tiles per conv
  small.sram.accumulator.size_kib = 2;
  for (const isa::NpuConfig& config : {isa::NpuConfig{}, small}) {
    compiler::CompileOptions opt;
    opt.plan = &k.plan;
    k.result = compiler::compile(k.lowered, config, opt);
    EXPECT_TRUE(k.result.fallbacks.empty());
    for (const auto& l : k.result.layers) {
      if (l.op != "Concat") continue;
      if (l.name == "cat0_node") {  // the first: it requantizes x0 into the block's buffer
        EXPECT_EQ(l.placement, compiler::Placement::kNpuVector);
        EXPECT_NE(l.mapping.find("1 input(s) requantized"), std::string::npos) << l.mapping;
      } else {
        EXPECT_EQ(l.placement, compiler::Placement::kFree) << l.name << ": " << l.mapping;
        EXPECT_EQ(l.instructions, 0) << l.name;
      }
    }
    const compiler::CompileResult unfolded = compile_unfolded(k, config);
    EXPECT_LT(k.result.program.instructions.size(), unfolded.program.instructions.size());
    for (const auto& sample : q::synthetic_samples(k.lowered, 2, 31)) {
      EXPECT_EQ(check_bit_exact(k, config, sample, {}, {"cat0_node", "bn2_node"}), 5);
      EXPECT_EQ(run_outputs(k.result, config, sample), run_outputs(unfolded, config, sample));
    }
  }
}

TEST(Int8Codegen, AConcatInputOfAnotherScaleIsRequantizedNotFolded) {
  // A pre-quantized model's Concat of two convs: `a` carries the Concat's own QParams (its conv writes
  // its codes in place), `c` another scale (the Concat must requantize it: folding would change bits).
  Compiled k = prequantized_concat(0.02f, 127);
  const isa::NpuConfig config;
  compiler::CompileOptions opt;
  opt.plan = &k.plan;
  k.result = compiler::compile(k.lowered, config, opt);
  for (const auto& l : k.result.layers) {
    if (l.op == "Concat") {
      EXPECT_EQ(l.placement, compiler::Placement::kNpuVector);
      EXPECT_NE(l.mapping.find("1 input(s) requantized"), std::string::npos) << l.mapping;
      EXPECT_NE(l.mapping.find("1 of 2 input(s) written in place"), std::string::npos) << l.mapping;
    }
    if (l.name == "a_node") {
      EXPECT_NE(l.mapping.find("written in place"), std::string::npos) << l.mapping;
    }
    if (l.name == "c_node") {
      EXPECT_EQ(l.mapping.find("in place"), std::string::npos) << l.mapping;
    }
  }
  const compiler::CompileResult unfolded = compile_unfolded(k, config);
  for (const auto& sample : q::synthetic_samples(k.lowered, 2, 17)) {
    EXPECT_EQ(check_bit_exact(k, config, sample), 3);
    EXPECT_EQ(run_outputs(k.result, config, sample), run_outputs(unfolded, config, sample));
  }
}

// EfficientNet's SE block, planned in int8: conv -> GlobalAveragePool -> 1x1 conv + Relu -> 1x1 conv +
// Sigmoid -> Mul with the conv's output -> 1x1 conv.
Compiled squeeze_excitation_int8() {
  namespace t = compiler::testing;
  t::GraphBuilder b;
  // A 1x1 conv of `in` (cin channels) to `out` (cout channels) on h x h pixels.
  auto pointwise = [&](const std::string& in, const std::string& out, int64_t cin, int64_t cout, int64_t h,
                       uint32_t seed) {
    return b.node("Conv", {in, b.random_constant("w" + out, {cout, cin, 1, 1}, seed, -0.5f, 0.5f)}, out,
                  {1, cout, h, h});
  };
  const std::string x = b.input("x", {1, 3, 12, 12});
  const std::string d = b.node("Conv", {x, b.random_constant("wd", {16, 3, 3, 3}, 1, -0.5f, 0.5f)}, "d",
                               {1, 16, 12, 12}, {{"pads", t::attr_ints({1, 1, 1, 1})}});
  const std::string p = b.node("GlobalAveragePool", {d}, "p", {1, 16, 1, 1});
  const std::string r = b.node("Relu", {pointwise(p, "rc", 16, 4, 1, 2)}, "r", {1, 4, 1, 1});
  const std::string e = b.node("Sigmoid", {pointwise(r, "ec", 4, 16, 1, 3)}, "e", {1, 16, 1, 1});
  b.output(pointwise(b.node("Mul", {d, e}, "m", {1, 16, 12, 12}), "y", 16, 8, 12, 4));
  return lower_and_plan_int8(b, 4);
}

TEST(Int8Codegen, SqueezeExcitationGroupRunsInTheAccumulatorAndGivesTheUnfusedProgramsBitsExactly) {
  // The pool sums the codes in int32 (the integer scheme, quant::integer_global_average_pool), the Mul
  // multiplies centred codes in int32 in the accumulator buffer (quant::integer_mul); the pool holds the
  // block's input in SRAM for the Mul (compiler/backend/fusion/se_fusion.h). Every value is the quantized
  // reference's code, and the outputs equal those of the program without the group, bit for bit.
  Compiled k = squeeze_excitation_int8();
  const isa::NpuConfig config;
  compiler::CompileOptions opt;
  opt.plan = &k.plan;
  k.result = compiler::compile(k.lowered, config, opt);
  opt.keep_on_chip = false;
  const compiler::CompileResult unfused = compiler::compile(k.lowered, config, opt);
  EXPECT_TRUE(k.result.fallbacks.empty());
  int checked = 0;
  for (const auto& l : k.result.layers) {
    if (l.op != "Mul" && l.op != "GlobalAveragePool") continue;
    ++checked;
    EXPECT_NE(l.mapping.find(l.op == "Mul" ? "multiplied in int32" : "int8 codes summed in int32"),
              std::string::npos)
        << l.mapping;
    EXPECT_EQ(l.fusion_group, "se:p_node") << l.name;
    EXPECT_EQ(l.on_chip_input, l.op == "Mul" ? "d" : "");
  }
  EXPECT_EQ(checked, 2);
  // The Mul's codes stay in SRAM for the 1x1 conv after it.
  const auto y = std::find_if(k.result.layers.begin(), k.result.layers.end(),
                              [](const compiler::LayerPlan& l) { return l.name == "y_node"; });
  ASSERT_NE(y, k.result.layers.end());
  EXPECT_EQ(y->on_chip_input, "m");
  for (const auto& l : unfused.layers) EXPECT_EQ(l.fusion_group, "") << l.name;
  for (const auto& sample : q::synthetic_samples(k.lowered, 2, 41)) {
    EXPECT_EQ(check_bit_exact(k, config, sample, {}, {"p_node", "m_node"}), 4);
    EXPECT_EQ(run_outputs(k.result, config, sample), run_outputs(unfused, config, sample));
  }
}

// Cosine between two equally long vectors.
double cosine(const std::vector<float>& a, const std::vector<float>& b) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t k = 0; k < a.size() && k < b.size(); ++k) {
    ab += static_cast<double>(a[k]) * b[k];
    aa += static_cast<double>(a[k]) * a[k];
    bb += static_cast<double>(b[k]) * b[k];
  }
  return aa > 0 && bb > 0 ? ab / std::sqrt(aa * bb) : 0.0;
}

// The program of `k` (compiled for `config`): every int8 layer's codes are the quantized reference's on
// two samples, the ConvTransposes run in int8 on the array (no fp16 fallback, codes stored), and the
// int8 output is near the fp32 interpreter's (an independent reference of ConvTranspose: the
// interpreter's col2im kernel, not the zero-inserted conv the back end and the emulation share): 8-bit
// weights and activations on N(0, 1) inputs leave about -30 dB of noise, cosine ~0.999.
void expect_int8_conv_transposes(const Compiled& k, const isa::NpuConfig& config, const std::string& what,
                                 int matrix_layers, const std::string& mapping) {
  EXPECT_TRUE(k.result.fallbacks.empty()) << what;
  int transposes = 0;
  for (const compiler::Node& n : k.lowered.nodes) {
    if (n.op_type != "ConvTranspose") continue;
    ++transposes;
    EXPECT_EQ(k.plan.precision_of(n.name), q::Precision::kInt8)
        << what << ": " << k.plan.nodes.at(n.name).reason;
    EXPECT_TRUE(k.plan.layers.count(n.name)) << what;
  }
  EXPECT_GE(transposes, 1) << what;
  for (const auto& l : k.result.layers) {
    if (l.op != "ConvTranspose") continue;
    EXPECT_EQ(l.placement, compiler::Placement::kNpuMatrix) << what;
    EXPECT_NE(l.mapping.find(mapping), std::string::npos) << what << ": " << l.mapping;
  }
  expect_stores_codes(k, "ConvTranspose");
  q::PrecisionPlan fp32;
  fp32.model = q::Precision::kFp32;
  for (const auto& sample : q::synthetic_samples(k.lowered, 2, 23)) {
    EXPECT_EQ(check_bit_exact(k, config, sample), matrix_layers) << what;
    const auto want = q::emulate(k.lowered, fp32, sample);
    const auto got = run_outputs(k.result, config, sample);
    for (const auto& [name, t] : want) EXPECT_GT(cosine(got.at(name), t.f), 0.998) << what << ": " << name;
  }
}

TEST(Int8Codegen, ConvTransposesRunInInt8OnTheArrayBitExactlyInEveryForm) {
  // A stride = kernel ConvTranspose runs as kernel-row 1x1 convs (no zero multiplied); any other form
  // as a conv over its input with the zero point inserted between and around the pixels. Each form
  // with a plain output stage, a Relu clamp, the float epilogue (Sigmoid, as PP-OCR det's last layer),
  // and a fused residual.
  namespace t = compiler::testing;
  struct Case {
    std::string what;
    int64_t k, s, pad, opad, dil, group, out;
    std::string act;
    std::string mapping;
  };
  const std::vector<Case> cases = {
      {"k2 s2", 2, 2, 0, 0, 1, 1, 12, "", "stride = kernel 2x2"},
      {"k2 s2 relu", 2, 2, 0, 0, 1, 1, 12, "Relu", "stride = kernel 2x2"},
      {"k2 s2 sigmoid", 2, 2, 0, 0, 1, 1, 12, "Sigmoid", "stride = kernel 2x2"},
      {"k3 s2 pads 1 output_padding 1", 3, 2, 1, 1, 1, 1, 12, "", "zero-inserted input (stride 2x2"},
      {"k4 s2 pads 1 groups 2 relu", 4, 2, 1, 0, 1, 2, 12, "Relu", "zero-inserted input (stride 2x2"},
      {"k3 s1 dilation 2", 3, 1, 0, 0, 2, 1, 10, "", "zero-inserted input (stride 1x1"},
      {"k3 s3 sigmoid", 3, 3, 0, 0, 1, 1, 18, "Sigmoid", "stride = kernel 3x3"},
  };
  const isa::NpuConfig config;
  for (const Case& cs : cases) {
    t::GraphBuilder b;
    const int64_t C = 8, M = 6;
    const std::string x = b.input("x", {1, C, 6, 6});
    std::map<std::string, compiler::Attribute> attrs = {
        {"strides", t::attr_ints({cs.s, cs.s})},
        {"pads", t::attr_ints({cs.pad, cs.pad, cs.pad, cs.pad})},
        {"output_padding", t::attr_ints({cs.opad, cs.opad})},
        {"dilations", t::attr_ints({cs.dil, cs.dil})},
        {"group", t::attr_i(cs.group)}};
    const std::string w = b.random_constant("w", {C, M / cs.group, cs.k, cs.k}, 3, -0.5f, 0.5f);
    const std::string bias = b.random_constant("b", {M}, 4, -0.5f, 0.5f);
    std::string y = b.node("ConvTranspose", {x, w, bias}, "y", {1, M, cs.out, cs.out}, attrs);
    if (!cs.act.empty()) y = b.node(cs.act, {y}, "a", {1, M, cs.out, cs.out});
    b.output(y);
    Compiled k = lower_and_plan_int8(b, 4);
    compiler::CompileOptions opt;
    opt.plan = &k.plan;
    k.result = compiler::compile(k.lowered, config, opt);
    expect_int8_conv_transposes(k, config, cs.what, 1, cs.mapping);
  }
  // A residual Add fused into the second of two ConvTransposes of the same input.
  t::GraphBuilder b;
  const std::string x = b.input("x", {1, 8, 6, 6});
  std::map<std::string, compiler::Attribute> attrs = {{"strides", t::attr_ints({2, 2})},
                                                      {"pads", t::attr_ints({1, 1, 1, 1})},
                                                      {"output_padding", t::attr_ints({1, 1})}};
  const std::string y1 = b.node("ConvTranspose", {x, b.random_constant("w1", {8, 6, 3, 3}, 5, -0.5f, 0.5f)},
                                "y1", {1, 6, 12, 12}, attrs);
  const std::string y2 = b.node("ConvTranspose", {x, b.random_constant("w2", {8, 6, 3, 3}, 6, -0.5f, 0.5f)},
                                "y2", {1, 6, 12, 12}, attrs);
  b.output(b.node("Add", {y1, y2}, "s", {1, 6, 12, 12}));
  Compiled k = lower_and_plan_int8(b, 4);
  int residuals = 0;
  for (const auto& [name, L] : k.plan.layers) residuals += !L.residual.empty();
  EXPECT_EQ(residuals, 1);
  compiler::CompileOptions opt;
  opt.plan = &k.plan;
  k.result = compiler::compile(k.lowered, config, opt);
  expect_int8_conv_transposes(k, config, "fused residual", 2, "zero-inserted input (stride 2x2");
}

TEST(Int8Codegen, OnnxConvTransposeNodeTestsRunInInt8NearTheirExpectedOutputs) {
  // ONNX's own 2-D ConvTranspose node tests (libonnx-testdata: auto_pad SAME_UPPER, dilations,
  // output_shape, output_padding, asymmetric pads), their weights made constants: planned in int8
  // (calibrated on the test's input), compiled, run on the datapath; the codes are the quantized
  // reference's and the output the test's expected one within the int8 rounding (cosine >= 0.999).
  const std::string dir = "/usr/share/libonnx-testdata/data/node/";
  const isa::NpuConfig config;
  for (const char* name :
       {"test_convtranspose", "test_convtranspose_autopad_same", "test_convtranspose_dilations",
        "test_convtranspose_kernel_shape", "test_convtranspose_output_shape", "test_convtranspose_pad",
        "test_convtranspose_pads", "test_convtranspose_with_kernel"}) {
    const std::string test = dir + name + "/";
    Compiled k;
    k.imported = compiler::import_onnx_file(test + "model.onnx");
    ASSERT_EQ(k.imported.inputs.size(), 2u) << name;
    const std::string xname = k.imported.inputs[0], wname = k.imported.inputs[1];
    k.imported.values.at(wname).constant =
        std::make_shared<compiler::Tensor>(compiler::read_tensor_file(test + "test_data_set_0/input_1.pb"));
    k.imported.inputs.erase(k.imported.inputs.begin() + 1);
    k.lowered = k.imported;
    compiler::lower(k.lowered);
    q::Sample sample = {{xname, compiler::read_tensor_file(test + "test_data_set_0/input_0.pb")}};
    q::PrecisionSpec spec;
    spec.model = q::Precision::kInt8;
    k.plan = q::resolve_plan(k.lowered, spec, &k.imported);
    q::QuantOptions quant;
    quant.calibration.method = q::CalibrationMethod::kMinMax;
    q::quantize_plan(k.lowered, k.plan, q::collect_statistics(k.lowered, {sample}, quant.calibration.bins),
                     quant);
    compiler::CompileOptions opt;
    opt.plan = &k.plan;
    k.result = compiler::compile(k.lowered, config, opt);
    EXPECT_TRUE(k.result.fallbacks.empty()) << name;
    EXPECT_EQ(check_bit_exact(k, config, sample), 1) << name;
    const compiler::Tensor want = compiler::read_tensor_file(test + "test_data_set_0/output_0.pb");
    const auto got = run_outputs(k.result, config, sample);
    ASSERT_EQ(got.size(), 1u) << name;
    EXPECT_GT(cosine(got.begin()->second, want.f), 0.999) << name;
  }
}

// Layer `node` of `k` compiled for `config` under `scheme` (k.result holds the program): its VEC
// instructions' cycles and ops, and the report's int8_scheme for it.
struct SchemeRun {
  int64_t vector_cycles = 0;
  std::map<isa::VecOp, int> ops;
  std::string int8_scheme;
};
SchemeRun compile_scheme(Compiled& k, const isa::NpuConfig& config, q::Int8Vector scheme,
                         const std::string& node) {
  SchemeRun r;
  size_t layer = k.lowered.nodes.size();
  for (size_t i = 0; i < k.lowered.nodes.size(); ++i)
    if (k.lowered.nodes[i].name == node) layer = i;
  EXPECT_LT(layer, k.lowered.nodes.size()) << node;
  k.plan.int8_vector = scheme;
  compiler::CompileOptions opt;
  opt.plan = &k.plan;
  k.result = compiler::compile(k.lowered, config, opt);
  for (const auto& ins : k.result.program.instructions) {
    if (ins.opcode != isa::Opcode::kVec || ins.layer() != layer) continue;
    r.vector_cycles += isa::timing::vec_cycles(ins, config.vector);
    ++r.ops[static_cast<isa::VecOp>(ins.get(isa::Field::kVop))];
  }
  for (const compiler::LayerPlan& l : k.result.layers)
    if (l.name == node) r.int8_scheme = l.int8_scheme;
  return r;
}

TEST(Int8Codegen, ActivationsOnCodesAreOneTableLookupGivingTheReferencesCodes) {
  // Conv -> MaxPool -> activation -> Conv: the activation reads and writes int8 codes. Under the integer
  // scheme it is one VEC lut per tile (its table loaded once, no float step) and writes the reference's codes
  // bit for bit; under --int8-vector float it dequantizes, computes and quantizes in the tile loop, with the
  // same codes. The table costs one lane-cycle per element against the float path's five steps (a
  // quarter-rate divide among them): under half the vector cycles.
  namespace t = compiler::testing;
  const isa::NpuConfig config;
  const std::pair<const char*, const char*> acts[] = {
      {"Sigmoid", ""}, {"HardSwish", ""}, {"Tanh", ""}, {"HardSigmoid", ""}, {"Exp", ""}, {"Gelu", "npu"}};
  for (const auto& [act, domain] : acts) {
    t::GraphBuilder b;
    auto x = b.input("x", {1, 8, 16, 16});
    auto c = b.node("Conv", {x, b.random_constant("w", {8, 8, 1, 1}, 1)}, "c", {1, 8, 16, 16});
    auto p = b.node("MaxPool", {c}, "p", {1, 8, 8, 8},
                    {{"kernel_shape", t::attr_ints({2, 2})}, {"strides", t::attr_ints({2, 2})}});
    auto a = b.node(act, {p}, "a", {1, 8, 8, 8}, {}, compiler::DataType::kFloat32,
                    std::string(domain).empty() ? "" : compiler::kNpuDomain);
    b.output(b.node("Conv", {a, b.random_constant("w2", {4, 8, 1, 1}, 2)}, "y", {1, 4, 8, 8}));
    Compiled k = lower_and_plan_int8(b, 2);
    const auto sample = q::synthetic_samples(k.lowered, 1, 21)[0];
    const SchemeRun lut = compile_scheme(k, config, q::Int8Vector::kInteger, "a_node");
    check_bit_exact(k, config, sample, {}, {"a_node"});
    const SchemeRun fl = compile_scheme(k, config, q::Int8Vector::kFloat, "a_node");
    check_bit_exact(k, config, sample, {}, {"a_node"});
    EXPECT_GT(lut.ops.count(isa::VecOp::kLut), 0u) << act;
    EXPECT_EQ(fl.ops.count(isa::VecOp::kLut), 0u) << act;
    EXPECT_EQ(lut.int8_scheme, "lut") << act;
    EXPECT_EQ(fl.int8_scheme, "float") << act;
    EXPECT_LT(2 * lut.vector_cycles, fl.vector_cycles) << act;
  }
}

TEST(Int8Codegen, SqueezeExcitationMulIsIntegerOnlyAndGivesTheReferencesCodes) {
  // x -> Conv -> (GlobalAveragePool -> Conv -> Sigmoid) * Conv -> Conv: the squeeze-and-excitation Mul of
  // two int8 values. Integer scheme: centred codes multiplied in int32 and one REQUANTIZE (no divide, no
  // float step), the reference's codes bit for bit (quant::integer_mul); float scheme: dequantize,
  // multiply, quantize, the float rule's codes. The Sigmoid's codes have zero point 0, so the integer Mul
  // multiplies the codes as they are and its output stage adds the per-channel bias -zero point x scale
  // (backend/int8/int8.h, ChannelScaleMul): two passes over the tile (mul, output), no centring sub; it takes
  // under half the float one's vector cycles (sub, mul, mul, a quarter-rate divide and an add).
  namespace t = compiler::testing;
  const isa::NpuConfig config;
  t::GraphBuilder b;
  auto x = b.input("x", {1, 16, 12, 12});
  auto c = b.node("Conv", {x, b.random_constant("w", {16, 16, 1, 1}, 1)}, "c", {1, 16, 12, 12});
  auto g = b.node("GlobalAveragePool", {c}, "g", {1, 16, 1, 1});
  auto f = b.node("Conv", {g, b.random_constant("wf", {16, 16, 1, 1}, 2)}, "f", {1, 16, 1, 1});
  auto s = b.node("Sigmoid", {f}, "s", {1, 16, 1, 1});
  auto m = b.node("Mul", {c, s}, "m", {1, 16, 12, 12});
  b.output(b.node("Conv", {m, b.random_constant("wo", {8, 16, 1, 1}, 3)}, "y", {1, 8, 12, 12}));
  Compiled k = lower_and_plan_int8(b, 2);
  const auto samples = q::synthetic_samples(k.lowered, 2, 17);
  const SchemeRun in = compile_scheme(k, config, q::Int8Vector::kInteger, "m_node");
  for (const auto& sample : samples) check_bit_exact(k, config, sample, {}, {"m_node"});
  const SchemeRun fl = compile_scheme(k, config, q::Int8Vector::kFloat, "m_node");
  for (const auto& sample : samples) check_bit_exact(k, config, sample, {}, {"m_node"});
  EXPECT_GT(in.ops.count(isa::VecOp::kOutput), 0u);
  EXPECT_EQ(in.ops.count(isa::VecOp::kSub), 0u);
  EXPECT_EQ(in.ops.count(isa::VecOp::kRequantize), 0u);
  EXPECT_EQ(in.ops.count(isa::VecOp::kDiv), 0u);
  EXPECT_EQ(fl.ops.count(isa::VecOp::kRequantize), 0u);
  EXPECT_GT(fl.ops.count(isa::VecOp::kDiv), 0u);
  EXPECT_EQ(in.int8_scheme, "integer");
  EXPECT_EQ(fl.int8_scheme, "float");
  EXPECT_LT(2 * in.vector_cycles, fl.vector_cycles);
}

namespace npusim {
namespace {

// One matrix layer `node` compiled under `scheme` (planned under it too: the epilogue is the plan's choice).
struct EpilogueRun {
  Compiled k;
  SchemeRun run;
};
EpilogueRun plan_and_compile(compiler::testing::GraphBuilder b, q::Int8Vector scheme, const std::string& node,
                             const isa::NpuConfig& config) {
  EpilogueRun e{lower_and_plan_int8(b, 2, 0, scheme), {}};
  e.run = compile_scheme(e.k, config, scheme, node);
  return e;
}

TEST(Int8Codegen, FusedActivationsAreARequantizeAndOneTableLookupGivingTheReferencesCodes) {
  // Conv / MatMul + HardSwish, SiLU, Sigmoid, HardSigmoid, GELU fused into the int8 layer. Integer scheme:
  // the sums requantized to the pre-activation's own codes (calibrated before the activation) and one VEC lut
  // (no float step: no divide, no fp32 VEC), the reference's codes bit for bit; float scheme: the float
  // epilogue, also bit for bit. The table epilogue (output stage + lut: two lane passes on int8) costs under
  // half the float one's vector cycles (copy, multiply, the activation, a quarter-rate divide and an add).
  namespace t = compiler::testing;
  const isa::NpuConfig config;
  const std::pair<const char*, bool> acts[] = {
      {"HardSwish", false}, {"Silu", true}, {"Sigmoid", false}, {"HardSigmoid", false}, {"Gelu", true}};
  for (const auto& [act, npu] : acts) {
    for (const bool conv : {true, false}) {
      t::GraphBuilder b;
      std::string mid;
      if (conv) {
        auto x = b.input("x", {1, 8, 12, 12});
        mid =
            b.node("Conv", {x, b.random_constant("w", {16, 8, 3, 3}, 1, -0.5f, 0.5f)}, "m", {1, 16, 10, 10});
      } else {
        // A first MatMul, so that m reads codes (the graph input's quantization is its reader's work).
        auto x = b.input("x", {1, 256, 8});
        auto p = b.node("MatMul", {x, b.random_constant("w0", {8, 8}, 6, -1.0f, 1.0f)}, "p", {1, 256, 8});
        mid = b.node("MatMul", {p, b.random_constant("w", {8, 32}, 5, -1.0f, 1.0f)}, "m", {1, 256, 32});
      }
      const compiler::Shape shape = conv ? compiler::Shape{1, 16, 10, 10} : compiler::Shape{1, 256, 32};
      auto a =
          b.node(act, {mid}, "a", shape, {}, compiler::DataType::kFloat32, npu ? compiler::kNpuDomain : "");
      b.output(conv ? b.node("Conv", {a, b.random_constant("w2", {4, 16, 1, 1}, 2)}, "y", {1, 4, 10, 10})
                    : b.node("MatMul", {a, b.random_constant("w2", {32, 4}, 2)}, "y", {1, 256, 4}));
      const std::string what = std::string(act) + (conv ? " after a Conv" : " after a MatMul");
      EpilogueRun in = plan_and_compile(b, q::Int8Vector::kInteger, "m_node", config);
      ASSERT_TRUE(in.k.plan.layers.count("m_node")) << what;
      const q::LayerQuant& L = in.k.plan.layers.at("m_node");
      EXPECT_TRUE(L.lut_epilogue) << what;
      EXPECT_FALSE(L.float_epilogue) << what;
      EXPECT_EQ(L.activation, act) << what;  // fused by the passes
      // The table reads the pre-activation as a 16-bit code (quant::refined_table_grid).
      EXPECT_EQ(L.pre_activation.dtype, isa::DType::kInt16) << what;
      EXPECT_EQ(L.epilogue_lut.size(), static_cast<size_t>(q::lut_epilogue_entries(q::kLutEpilogueRefine)))
          << what;
      const auto samples = q::synthetic_samples(in.k.lowered, 2, 31);
      for (const auto& sample : samples)
        EXPECT_EQ(check_bit_exact(in.k, config, sample, {"m_node"}), 1) << what;
      EXPECT_GT(in.run.ops.count(isa::VecOp::kLut), 0u) << what;
      EXPECT_EQ(in.run.ops.count(isa::VecOp::kDiv), 0u) << what;
      EXPECT_EQ(in.run.int8_scheme, "integer+lut-epilogue") << what;
      EpilogueRun fl = plan_and_compile(b, q::Int8Vector::kFloat, "m_node", config);
      EXPECT_TRUE(fl.k.plan.layers.at("m_node").float_epilogue) << what;
      for (const auto& sample : samples)
        EXPECT_EQ(check_bit_exact(fl.k, config, sample, {"m_node"}), 1) << what;
      EXPECT_EQ(fl.run.ops.count(isa::VecOp::kLut), 0u) << what;
      EXPECT_EQ(fl.run.int8_scheme, "integer+float-epilogue") << what;
      EXPECT_LT(2 * in.run.vector_cycles, fl.run.vector_cycles) << what;
    }
  }
}

TEST(Int8Codegen, AnFfnsHiddenLayerLeftOnChipInColumnBlocksGivesTheReferencesCodes) {
  // MatMul -> MatMul + GELU (the integer scheme's table epilogue) -> MatMul, the hidden layer 2048 wide: each
  // MatMul's output is read only by the next one, so it stays in the input scratchpad (the first in column
  // blocks of its output-channel tile, backend/fusion/residency.h) and never touches DRAM. Every layer's
  // codes, read where they lie, are the reference's; the program's output equals --no-fusion's bit for bit.
  namespace t = compiler::testing;
  const isa::NpuConfig config;
  t::GraphBuilder b;
  auto x = b.input("x", {1, 64, 32});
  auto p = b.node("MatMul", {x, b.random_constant("w0", {32, 32}, 6, -1.0f, 1.0f)}, "p", {1, 64, 32});
  auto m = b.node("MatMul", {p, b.random_constant("w", {32, 2048}, 5, -0.5f, 0.5f)}, "m", {1, 64, 2048});
  auto a = b.node("Gelu", {m}, "a", {1, 64, 2048}, {}, compiler::DataType::kFloat32, compiler::kNpuDomain);
  b.output(b.node("MatMul", {a, b.random_constant("w2", {2048, 16}, 2, -0.1f, 0.1f)}, "y", {1, 64, 16}));
  Compiled k = lower_and_plan_int8(b, 2, 0, q::Int8Vector::kInteger);
  compiler::CompileOptions opt;
  opt.plan = &k.plan;
  k.result = compiler::compile(k.lowered, config, opt);
  const std::string hidden = k.plan.layers.at("m_node").output;
  const auto h = std::find_if(k.result.on_chip.begin(), k.result.on_chip.end(),
                              [&](const compiler::HostTensor& v) { return v.name == hidden; });
  ASSERT_NE(h, k.result.on_chip.end());
  EXPECT_GT(h->block, 0);
  EXPECT_LT(h->block, 2048);
  const auto samples = q::synthetic_samples(k.lowered, 2, 17);
  for (const auto& sample : samples) EXPECT_EQ(check_bit_exact(k, config, sample), 3);
  Compiled off = k;
  opt.keep_on_chip = false;
  off.result = compiler::compile(off.lowered, config, opt);
  EXPECT_TRUE(off.result.on_chip.empty());
  for (const auto& sample : samples) EXPECT_EQ(check_bit_exact(off, config, sample), 3);
}

TEST(Int8Codegen, ALayerNormLeftOnChipForTheMatMulAfterItGivesTheReferencesCodes) {
  // MatMul -> LayerNorm -> MatMul (a ViT block's mlp.3 -> ln_2 -> mlp.0, after the residual): the
  // LayerNorm's codes are written where the residency planner reserved them and the MatMul reads them in
  // place (backend/fusion/residency.h); they, and every MatMul's codes, are the reference's.
  namespace t = compiler::testing;
  const isa::NpuConfig config;
  t::GraphBuilder b;
  auto x = b.input("x", {1, 64, 48});
  auto p = b.node("MatMul", {x, b.random_constant("w0", {48, 96}, 6, -1.0f, 1.0f)}, "p", {1, 64, 96});
  auto n =
      b.node("LayerNormalization",
             {p, b.random_constant("g", {96}, 7, 0.5f, 1.5f), b.random_constant("be", {96}, 8, -0.5f, 0.5f)},
             "n", {1, 64, 96});
  b.output(b.node("MatMul", {n, b.random_constant("w1", {96, 16}, 2, -0.3f, 0.3f)}, "y", {1, 64, 16}));
  Compiled k = lower_and_plan_int8(b, 2, compiler::rowwise_row_limit(config), q::Int8Vector::kInteger);
  compiler::CompileOptions opt;
  opt.plan = &k.plan;
  k.result = compiler::compile(k.lowered, config, opt);
  std::string ln;
  for (const auto& node : k.lowered.nodes) {
    if (node.op_type == "LayerNormalization") ln = node.outputs[0];
  }
  ASSERT_FALSE(ln.empty());
  EXPECT_TRUE(std::any_of(k.result.on_chip.begin(), k.result.on_chip.end(),
                          [&](const compiler::HostTensor& v) { return v.name == ln; }));
  for (const auto& sample : q::synthetic_samples(k.lowered, 2, 19))
    EXPECT_EQ(check_bit_exact(k, config, sample, {}, {"n_node"}), 2);
}

TEST(Int8Codegen, AResidualConvWithATableEpilogueClampsItsInt16CodesToTheTablesWindow) {
  // Conv + residual Add + HardSwish: the sums plus the rescaled residual, the requantize to int16 codes, a
  // clip to the table's window (an int16 code saturates at int16's range, not the window's), the lookup:
  // the reference's codes bit for bit (sums below HardSwish's -3 fall outside the narrowed window).
  namespace t = compiler::testing;
  const isa::NpuConfig config;
  t::GraphBuilder b;
  auto x = b.input("x", {1, 8, 10, 10});
  auto c = b.node("Conv", {x, b.random_constant("w", {8, 8, 3, 3}, 1, -0.8f, 0.8f)}, "c", {1, 8, 10, 10},
                  {{"pads", t::attr_ints({1, 1, 1, 1})}});
  auto a = b.node("Add", {c, x}, "a", {1, 8, 10, 10});
  auto h = b.node("HardSwish", {a}, "h", {1, 8, 10, 10});
  b.output(b.node("Conv", {h, b.random_constant("w2", {4, 8, 1, 1}, 2)}, "y", {1, 4, 10, 10}));
  Compiled k = lower_and_plan_int8(b, 2);
  compiler::CompileOptions opt;
  opt.plan = &k.plan;
  k.result = compiler::compile(k.lowered, config, opt);
  int residual_luts = 0;
  for (const auto& [name, L] : k.plan.layers) residual_luts += L.lut_epilogue && !L.residual.empty();
  EXPECT_EQ(residual_luts, 1);
  for (const auto& sample : q::synthetic_samples(k.lowered, 2, 43))
    EXPECT_GE(check_bit_exact(k, config, sample), 1);
}

TEST(Int8Codegen, MobileNetV3BlockRunsIntegerOnlyAndGivesTheReferencesCodesInBothSchemes) {
  // A MobileNetV3 inverted residual with squeeze-and-excitation: 1x1 expansion + HardSwish, depthwise 3x3 +
  // HardSwish, GlobalAveragePool -> 1x1 + Relu -> 1x1 + HardSigmoid -> Mul, 1x1 projection, the residual
  // Add. Every int8 layer's codes equal the reference's on both schemes; under the integer scheme no
  // layer's epilogue is in float.
  namespace t = compiler::testing;
  const isa::NpuConfig config;
  t::GraphBuilder b;
  auto x = b.input("x", {1, 16, 14, 14});
  auto e = b.node("Conv", {x, b.random_constant("we", {48, 16, 1, 1}, 1, -0.4f, 0.4f)}, "e", {1, 48, 14, 14});
  auto eh = b.node("HardSwish", {e}, "eh", {1, 48, 14, 14});
  auto d = b.node("Conv", {eh, b.random_constant("wd", {48, 1, 3, 3}, 2, -0.5f, 0.5f)}, "d", {1, 48, 14, 14},
                  {{"group", t::attr_i(48)}, {"pads", t::attr_ints({1, 1, 1, 1})}});
  auto dh = b.node("HardSwish", {d}, "dh", {1, 48, 14, 14});
  auto g = b.node("GlobalAveragePool", {dh}, "g", {1, 48, 1, 1});
  auto s1 = b.node("Conv", {g, b.random_constant("ws1", {12, 48, 1, 1}, 3)}, "s1", {1, 12, 1, 1});
  auto r = b.node("Relu", {s1}, "r", {1, 12, 1, 1});
  auto s2 = b.node("Conv", {r, b.random_constant("ws2", {48, 12, 1, 1}, 4)}, "s2", {1, 48, 1, 1});
  auto hs = b.node("HardSigmoid", {s2}, "hs", {1, 48, 1, 1},
                   {{"alpha", t::attr_f(1.0f / 6)}, {"beta", t::attr_f(0.5f)}});
  auto m = b.node("Mul", {dh, hs}, "m", {1, 48, 14, 14});
  auto p = b.node("Conv", {m, b.random_constant("wp", {16, 48, 1, 1}, 5, -0.3f, 0.3f)}, "p", {1, 16, 14, 14});
  b.output(b.node("Add", {p, x}, "y", {1, 16, 14, 14}));
  for (const q::Int8Vector scheme : {q::Int8Vector::kInteger, q::Int8Vector::kFloat}) {
    Compiled k = lower_and_plan_int8(b, 2, 0, scheme);
    compiler::CompileOptions opt;
    opt.plan = &k.plan;
    k.result = compiler::compile(k.lowered, config, opt);
    int luts = 0;
    for (const auto& [name, L] : k.plan.layers) {
      luts += L.lut_epilogue;
      EXPECT_FALSE(scheme == q::Int8Vector::kInteger && L.float_epilogue) << name;
    }
    EXPECT_EQ(luts, scheme == q::Int8Vector::kInteger ? 3 : 0);  // e, d, s2 (HardSigmoid)
    for (const auto& sample : q::synthetic_samples(k.lowered, 2, 41))
      EXPECT_GE(check_bit_exact(k, config, sample), 5);  // of the 6 (a layer kept on chip is not read back)
  }
}

}  // namespace
}  // namespace npusim

namespace npusim {
namespace {

TEST(Int8Codegen, GlobalAveragePoolSumsCodesInInt32AndRequantizesOnceGivingTheReferencesCodes) {
  // Conv -> GlobalAveragePool -> Conv at three sizes (one band; several bands added in int32; many channels).
  // Integer scheme: the exact int32 sum of each channel's codes (a VEC dwconv of unit weights per band) and
  // one output stage with the single-rounding multiplier x.scale / (y.scale H W), no float step, the
  // reference's codes bit for bit; float scheme: dequantize, average, quantize, also bit for bit.
  namespace t = compiler::testing;
  const isa::NpuConfig config;
  for (const auto& [c, h] : {std::pair<int64_t, int64_t>{8, 7}, {8, 112}, {96, 14}}) {
    t::GraphBuilder b;
    auto x = b.input("x", {1, 4, h, h});
    auto cv = b.node("Conv", {x, b.random_constant("w", {c, 4, 1, 1}, 1)}, "c", {1, c, h, h});
    auto g = b.node("GlobalAveragePool", {cv}, "g", {1, c, 1, 1});
    b.output(b.node("Conv", {g, b.random_constant("w2", {4, c, 1, 1}, 2)}, "y", {1, 4, 1, 1}));
    const std::string what =
        std::to_string(c) + " channels of " + std::to_string(h) + "x" + std::to_string(h);
    const isa::NpuConfig cfg = config;
    Compiled k = lower_and_plan_int8(b, 2);
    ASSERT_TRUE(q::integer_global_average_pool(k.lowered, k.plan, k.lowered.nodes[0]).has_value() ||
                k.lowered.nodes.size() > 1)
        << what;
    const auto samples = q::synthetic_samples(k.lowered, 2, 51);
    const SchemeRun in = compile_scheme(k, cfg, q::Int8Vector::kInteger, "g_node");
    for (const auto& sample : samples) check_bit_exact(k, cfg, sample, {}, {"g_node"});
    EXPECT_EQ(in.int8_scheme, "integer") << what;
    EXPECT_EQ(in.ops.count(isa::VecOp::kDiv), 0u) << what;
    EXPECT_EQ(in.ops.count(isa::VecOp::kAvgPool), 0u) << what;
    EXPECT_GT(in.ops.count(isa::VecOp::kOutput), 0u) << what;
    Compiled kf = lower_and_plan_int8(b, 2, 0, q::Int8Vector::kFloat);
    const SchemeRun fl = compile_scheme(kf, cfg, q::Int8Vector::kFloat, "g_node");
    for (const auto& sample : samples) check_bit_exact(kf, cfg, sample, {}, {"g_node"});
    EXPECT_EQ(fl.int8_scheme, "float") << what;
    EXPECT_GT(fl.ops.count(isa::VecOp::kDiv), 0u) << what;
    EXPECT_LT(in.vector_cycles, fl.vector_cycles) << what;
  }
}

}  // namespace
}  // namespace npusim

namespace npusim {
namespace {

TEST(Int8Codegen, AddAndSubOfTwoInt8ValuesAreIntegerOnlyAndGiveTheReferencesCodes) {
  // Two convs of other scales, each through a MaxPool (so the passes fuse no residual into a conv), then
  // their Add or Sub, and a per-channel broadcast of a pooled value as either operand (as the first one of a
  // Sub, the back end computes a - b and negates it). Integer scheme (quant::integer_add, TFLite's integer
  // add): centred codes rescaled to a common grid in int32, added, one REQUANTIZE -- no divide, no float step
  // -- and the reference's codes bit for bit; float scheme: dequantize, add, quantize, also bit for bit. The
  // integer Add takes fewer vector cycles (six int32 passes at full rate against the float rule's
  // dequantizations, add and quarter-rate divide).
  namespace t = compiler::testing;
  const isa::NpuConfig config;
  for (const char* op : {"Add", "Sub"}) {
    for (int form = 0; form < 4; ++form) {  // full x full, full x broadcast, broadcast x full, + Relu
      t::GraphBuilder b;
      auto x = b.input("x", {1, 8, 16, 16});
      auto c1 =
          b.node("Conv", {x, b.random_constant("w1", {16, 8, 1, 1}, 1, -0.3f, 0.3f)}, "c1", {1, 16, 16, 16});
      auto c2 =
          b.node("Conv", {x, b.random_constant("w2", {16, 8, 1, 1}, 2, -1.0f, 1.0f)}, "c2", {1, 16, 16, 16});
      const std::map<std::string, compiler::Attribute> pool = {{"kernel_shape", t::attr_ints({2, 2})},
                                                               {"strides", t::attr_ints({2, 2})}};
      auto p1 = b.node("MaxPool", {c1}, "p1", {1, 16, 8, 8}, pool);
      auto p2 = b.node("MaxPool", {c2}, "p2", {1, 16, 8, 8}, pool);
      std::string lhs = p1, rhs = p2;
      if (form == 1 || form == 2) {
        auto g = b.node("GlobalAveragePool", {p2}, "g", {1, 16, 1, 1});
        (form == 1 ? rhs : lhs) = g;
        if (form == 2) rhs = p1;
      }
      auto y = b.node(op, {lhs, rhs}, "a", {1, 16, 8, 8});
      if (form == 3) y = b.node("Relu", {y}, "r", {1, 16, 8, 8});
      b.output(b.node("Conv", {y, b.random_constant("wo", {4, 16, 1, 1}, 3)}, "y", {1, 4, 8, 8}));
      const std::string what = std::string(op) + " form " + std::to_string(form);
      // Symmetric int8 activations for the Relu: the clamp at the zero point is then above the codes' lowest
      // (an asymmetric output calibrated after the Relu starts at its zero point, and the requantize's
      // saturation is the clamp).
      Compiled k = lower_and_plan_int8(b, 2, 0, q::Int8Vector::kInteger, form == 3);
      if (form == 3) {
        const compiler::Node* add = compiler::testing::find_node(k.lowered, op);
        ASSERT_NE(add, nullptr) << what;
        EXPECT_EQ(add->attr_string(compiler::kActivation, ""), "Relu") << what;
        EXPECT_EQ(compiler::testing::find_node(k.lowered, "Relu"), nullptr) << what;
      }
      const auto samples = q::synthetic_samples(k.lowered, 2, 61);
      const SchemeRun in = compile_scheme(k, config, q::Int8Vector::kInteger, "a_node");
      for (const auto& sample : samples) check_bit_exact(k, config, sample, {}, {"a_node"});
      EXPECT_EQ(in.int8_scheme, "integer") << what;
      EXPECT_GT(in.ops.count(isa::VecOp::kRequantize), 0u) << what;
      EXPECT_EQ(in.ops.count(isa::VecOp::kDiv), 0u) << what;
      EXPECT_EQ(in.ops.count(isa::VecOp::kMul), 0u) << what;
      EXPECT_EQ(in.ops.count(isa::VecOp::kNeg) > 0, form == 2 && std::string(op) == "Sub") << what;
      EXPECT_EQ(in.ops.count(isa::VecOp::kClip) > 0, form == 3) << what;
      const SchemeRun fl = compile_scheme(k, config, q::Int8Vector::kFloat, "a_node");
      for (const auto& sample : samples) check_bit_exact(k, config, sample, {}, {"a_node"});
      EXPECT_EQ(fl.int8_scheme, "float") << what;
      EXPECT_EQ(fl.ops.count(isa::VecOp::kRequantize), 0u) << what;
      EXPECT_GT(fl.ops.count(isa::VecOp::kDiv), 0u) << what;
      EXPECT_LT(in.vector_cycles, fl.vector_cycles) << what;
    }
  }
}

TEST(Int8Codegen, AveragePoolSumsEachWindowsCodesInInt32AndRequantizesOncePerPixel) {
  // Conv -> AveragePool -> Conv: a 2x2 stride-2 pool; 3x3 stride 1 with padding (the border pixels divide by
  // fewer elements: a record per pixel); 3x3 stride 2 with padding counted and ceil_mode (the overhang is not
  // counted); PP-OCRv4 rec's 3x2 window of stride (3, 2). Integer scheme (quant::integer_average_pool): the
  // exact int32 sum of each window's codes (a VEC dwconv of unit weights over the tile padded with the zero
  // point's code) and one output stage per pixel, no float step, the reference's codes bit for bit; float
  // scheme: dequantize, average, quantize, also bit for bit, in more vector cycles.
  namespace t = compiler::testing;
  const isa::NpuConfig config;
  struct Form {
    std::vector<int64_t> k, s, pads;
    int64_t include_pad, ceil;
    int64_t oh, ow;
  };
  const Form forms[] = {{{2, 2}, {2, 2}, {0, 0, 0, 0}, 0, 0, 6, 10},
                        {{3, 3}, {1, 1}, {1, 1, 1, 1}, 0, 0, 12, 20},
                        {{3, 3}, {2, 2}, {1, 1, 1, 1}, 1, 1, 7, 11},
                        {{3, 2}, {3, 2}, {0, 0, 0, 0}, 0, 0, 4, 10}};
  for (const Form& f : forms) {
    t::GraphBuilder b;
    auto x = b.input("x", {1, 4, 12, 20});
    auto cv = b.node("Conv", {x, b.random_constant("w", {24, 4, 1, 1}, 1)}, "c", {1, 24, 12, 20});
    auto p = b.node("AveragePool", {cv}, "p", {1, 24, f.oh, f.ow},
                    {{"kernel_shape", t::attr_ints(f.k)},
                     {"strides", t::attr_ints(f.s)},
                     {"pads", t::attr_ints(f.pads)},
                     {"count_include_pad", t::attr_i(f.include_pad)},
                     {"ceil_mode", t::attr_i(f.ceil)}});
    b.output(b.node("Conv", {p, b.random_constant("w2", {4, 24, 1, 1}, 2)}, "y", {1, 4, f.oh, f.ow}));
    const std::string what = std::to_string(f.k[0]) + "x" + std::to_string(f.k[1]) + " s" +
                             std::to_string(f.s[0]) + " pad " + std::to_string(f.pads[0]);
    Compiled k = lower_and_plan_int8(b, 2);
    const auto samples = q::synthetic_samples(k.lowered, 2, 71);
    const SchemeRun in = compile_scheme(k, config, q::Int8Vector::kInteger, "p_node");
    for (const auto& sample : samples) check_bit_exact(k, config, sample, {}, {"p_node"});
    EXPECT_EQ(in.int8_scheme, "integer") << what;
    EXPECT_EQ(in.ops.count(isa::VecOp::kDiv), 0u) << what;
    EXPECT_EQ(in.ops.count(isa::VecOp::kAvgPool), 0u) << what;
    EXPECT_GT(in.ops.count(isa::VecOp::kDwConv), 0u) << what;
    EXPECT_GT(in.ops.count(isa::VecOp::kOutput), 0u) << what;
    const SchemeRun fl = compile_scheme(k, config, q::Int8Vector::kFloat, "p_node");
    for (const auto& sample : samples) check_bit_exact(k, config, sample, {}, {"p_node"});
    EXPECT_EQ(fl.int8_scheme, "float") << what;
    EXPECT_GT(fl.ops.count(isa::VecOp::kAvgPool), 0u) << what;
    EXPECT_LT(in.vector_cycles, fl.vector_cycles) << what;
  }
}

TEST(Int8Codegen, ConcatRequantizesInputsOfOtherScalesInIntegersUnderTheIntegerScheme) {
  // The pre-quantized Concat of ConcatOfDifferentlyQuantizedInputsRequantizesInItsTileLoop: two inputs carry
  // other QParams than its output. Integer scheme (quant::integer_concat): each is requantized on its way by
  // a VEC sub of its zero point and one REQUANTIZE (no float step, no divide), the reference's codes bit for
  // bit; float scheme: dequantize, quantize, also bit for bit, in more vector cycles.
  Compiled k = prequantized_concat(0.011f, 120);
  const isa::NpuConfig config;
  const auto samples = q::synthetic_samples(k.lowered, 2, 17);
  const SchemeRun in = compile_scheme(k, config, q::Int8Vector::kInteger, "cat_node");
  for (const auto& sample : samples) EXPECT_EQ(check_bit_exact(k, config, sample, {}, {"cat_node"}), 3);
  EXPECT_EQ(in.int8_scheme, "integer");
  EXPECT_EQ(in.ops.count(isa::VecOp::kDiv), 0u);
  EXPECT_GT(in.ops.count(isa::VecOp::kRequantize), 0u);
  const SchemeRun fl = compile_scheme(k, config, q::Int8Vector::kFloat, "cat_node");
  for (const auto& sample : samples) EXPECT_EQ(check_bit_exact(k, config, sample, {}, {"cat_node"}), 3);
  EXPECT_EQ(fl.int8_scheme, "float");
  EXPECT_GT(fl.ops.count(isa::VecOp::kDiv), 0u);
  EXPECT_LT(in.vector_cycles, fl.vector_cycles);
}

}  // namespace
}  // namespace npusim

TEST(Int8Codegen, AScalarAffineMapAfterAConvIsOneTableInItsEpilogueGivingTheReferencesCodes) {
  // Conv 1x1 + HardSwish -> Mul(scalar) -> Add(scalar) -> padded Conv 3x3: PP-OCRv4's LCNet "learnable affine
  // block", which the passes make a BatchNormalization that no conv absorbs (the conv after it is padded).
  // Its map of the 256 codes is one table: the first conv applies it to each output tile before the STORE
  // (backend/fusion/post_affine.h), the map's layer emits nothing, the first conv's own output is written
  // nowhere, and the second conv reads the reference's codes (so computes them bit for bit), on edge's
  // scratchpads and on small ones.
  namespace t = compiler::testing;
  t::GraphBuilder b;
  auto x = b.input("x", {1, 8, 12, 10});
  auto c = b.node("Conv", {x, b.random_constant("w", {16, 8, 1, 1}, 3, -0.5f, 0.5f)}, "c", {1, 16, 12, 10});
  auto h = b.node("HardSwish", {c}, "h", {1, 16, 12, 10});
  auto m = b.node("Mul", {h, b.scalar("s", 1.3f)}, "m", {1, 16, 12, 10});
  auto a = b.node("Add", {m, b.scalar("t", -0.2f)}, "a", {1, 16, 12, 10});
  b.output(b.node("Conv", {a, b.random_constant("w2", {4, 16, 3, 3}, 4, -0.5f, 0.5f)}, "y", {1, 4, 12, 10},
                  {{"pads", t::attr_ints({1, 1, 1, 1})}}));
  const Graph g = b.build();
  isa::NpuConfig small;
  small.sram.accumulator.size_kib = 4;
  small.sram.input.size_kib = 8;
  for (const isa::NpuConfig& config : {isa::NpuConfig{}, small}) {
    const Compiled k = compile_graph_int8(g, config);
    int maps = 0;
    std::string conv;
    for (const auto& l : k.result.layers) {
      if (l.op == "Conv" && conv.empty()) conv = l.name;
      if (l.op != "BatchNormalization") continue;
      ++maps;
      EXPECT_EQ(l.fused_into, conv);
      EXPECT_EQ(l.instructions, 0);
      EXPECT_NE(l.mapping.find("VEC lut"), std::string::npos) << l.mapping;
    }
    EXPECT_EQ(maps, 1);
    for (const auto& v : k.result.values) EXPECT_NE(v.name, "h") << "the conv's own output was bound";
    // The first conv's output is nowhere (skipped); the second conv reads the map's codes.
    for (const auto& sample : q::synthetic_samples(k.lowered, 2, 29))
      EXPECT_EQ(check_bit_exact(k, config, sample), 1);
  }
}

// One RSEFPN level (PP-OCRv4 det's neck): a k x k conv of 8 input channels to the map x (C x H x W), its SE
// block (pool, 1x1 conv + Relu to C / 4, 1x1 conv + HardSigmoid), the Mul, the residual Add of x, a padded
// 3x3 conv reading it. Weights seeded from `seed` on.
Graph rsefpn_level(int64_t C, int64_t H, int64_t W, int64_t k, uint32_t seed) {
  namespace t = compiler::testing;
  t::GraphBuilder b;
  const int64_t r4 = C / 4;
  auto in = b.input("in", {1, 8, H, W});
  std::map<std::string, compiler::Attribute> pads;
  if (k > 1) pads = {{"pads", t::attr_ints({k / 2, k / 2, k / 2, k / 2})}};
  auto x =
      b.node("Conv", {in, b.random_constant("w0", {C, 8, k, k}, seed, -0.5f, 0.5f)}, "x", {1, C, H, W}, pads);
  auto p = b.node("GlobalAveragePool", {x}, "p", {1, C, 1, 1});
  auto r =
      b.node("Conv", {p, b.random_constant("w1", {r4, C, 1, 1}, seed + 1, -0.5f, 0.5f)}, "r", {1, r4, 1, 1});
  auto rr = b.node("Relu", {r}, "rr", {1, r4, 1, 1});
  auto e =
      b.node("Conv", {rr, b.random_constant("w2", {C, r4, 1, 1}, seed + 2, -0.5f, 0.5f)}, "e", {1, C, 1, 1});
  auto s = b.node("HardSigmoid", {e}, "s", {1, C, 1, 1});
  auto m = b.node("Mul", {x, s}, "m", {1, C, H, W});
  auto a = b.node("Add", {x, m}, "a", {1, C, H, W});
  b.output(b.node("Conv", {a, b.random_constant("w3", {4, C, 3, 3}, seed + 3, -0.5f, 0.5f)}, "y",
                  {1, 4, H, W}, {{"pads", t::attr_ints({1, 1, 1, 1})}}));
  return b.build();
}

TEST(Int8Codegen, AnSeResidualAddInItsMulsTileLoopGivesTheReferencesCodes) {
  // Conv -> SE (pool, 1x1 conv + Relu, 1x1 conv + HardSigmoid) -> Mul -> Add of the conv's output -> padded
  // conv: PP-OCRv4's RSEFPN. Without a timer (no simulated choice) the Add runs in the Mul's tile loop
  // (backend/fusion/scaled_residual.h): the Mul's integer scheme into the product's codes, then the Add's on
  // x's and the product's codes; the product is written nowhere and the last conv reads the reference's
  // codes.
  const Graph g = rsefpn_level(16, 12, 10, 1, 6);
  isa::NpuConfig small;
  small.sram.accumulator.size_kib = 4;
  small.sram.input.size_kib = 8;
  for (const isa::NpuConfig& config : {isa::NpuConfig{}, small}) {
    const Compiled k = compile_graph_int8(g, config);
    auto op = [&](const std::string& o) {
      return std::find_if(k.result.layers.begin(), k.result.layers.end(),
                          [&](const compiler::LayerPlan& l) { return l.op == o; });
    };
    const auto add = op("Add"), mul = op("Mul");
    ASSERT_NE(add, k.result.layers.end());
    ASSERT_NE(mul, k.result.layers.end());
    EXPECT_EQ(add->fused_into, mul->name);
    EXPECT_EQ(add->instructions, 0);
    for (const auto& v : k.result.values) EXPECT_NE(v.name, "m") << "the product was bound";
    // Seven passes a tile: x's centred codes kept for the Add (one sub of x's codes, none of the product's),
    // the products made the product's centred codes by one output stage.
    std::map<isa::VecOp, int> ops;
    int centred_in_acc = 0;  // subs of codes already in the accumulator (the product's, x's again)
    const auto& layers = k.result.program.layers;
    for (const auto& ins : k.result.program.instructions) {
      if (ins.opcode != isa::Opcode::kVec || layers.at(ins.layer()).name != mul->name) continue;
      const auto vop = static_cast<isa::VecOp>(ins.get(isa::Field::kVop));
      ++ops[vop];
      centred_in_acc += vop == isa::VecOp::kSub &&
                        static_cast<isa::Buffer>(ins.get(isa::Field::kSrc1Buf)) == isa::Buffer::kAccumulator;
    }
    EXPECT_GT(ops[isa::VecOp::kOutput], 0);
    EXPECT_EQ(centred_in_acc, 0);
    EXPECT_EQ(ops[isa::VecOp::kRequantize], 3 * ops[isa::VecOp::kOutput]);
    // Every bound matrix layer's codes, the last conv's (the graph output, reading the Add's codes) among
    // them.
    for (const auto& sample : q::synthetic_samples(k.lowered, 2, 31))
      EXPECT_GE(check_bit_exact(k, config, sample), 4);
  }
}

TEST(Int8Codegen, AnSePoolSummedByItsConvsStoresGivesTheReferencesCodes) {
  // RSEFPN's level: a conv on the array whose output x three layers read (the SE pool, its Mul and the
  // residual Add). The pool is summed in the conv's STOREs (backend/fusion/store_pool.h): a VEC dwconv of
  // unit weights per stored tile, the sums added, one output stage after the last tile; the pool emits
  // nothing and the SE convs read the reference's codes. On edge's scratchpads and on small ones (the map
  // in many tiles, a channel chunk a tile).
  const Graph g = rsefpn_level(40, 18, 14, 3, 16);
  isa::NpuConfig small;
  small.sram.accumulator.size_kib = 4;
  small.sram.input.size_kib = 8;
  for (const isa::NpuConfig& config : {isa::NpuConfig{}, small}) {
    const Compiled k = compile_graph_int8(g, config);
    auto op = [&](const std::string& o) {
      return std::find_if(k.result.layers.begin(), k.result.layers.end(),
                          [&](const compiler::LayerPlan& l) { return l.op == o; });
    };
    const auto pool = op("GlobalAveragePool"), conv = op("Conv");
    ASSERT_NE(pool, k.result.layers.end());
    EXPECT_EQ(pool->fused_into, conv->name) << pool->mapping;
    EXPECT_EQ(pool->instructions, 0);
    EXPECT_EQ(pool->fusion_group, "store_pool:" + conv->name);
    // The conv's code sums its tiles: VEC dwconvs of unit weights and one output stage into the pooled codes.
    int dwconvs = 0;
    const auto& layers = k.result.program.layers;
    for (const auto& ins : k.result.program.instructions) {
      dwconvs += ins.opcode == isa::Opcode::kVec && layers.at(ins.layer()).name == conv->name &&
                 static_cast<isa::VecOp>(ins.get(isa::Field::kVop)) == isa::VecOp::kDwConv;
    }
    EXPECT_GT(dwconvs, 0);
    // Every bound matrix layer's codes: r reads the pooled codes.
    for (const auto& sample : q::synthetic_samples(k.lowered, 2, 37))
      EXPECT_GE(check_bit_exact(k, config, sample), 4);
  }
}

}  // namespace
}  // namespace npusim
