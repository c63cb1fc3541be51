#include "tests/compiler/backend/functional.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "arch/datapath/executor.h"
#include "arch/datapath/numerics.h"
#include "arch/datapath/state.h"
#include "compiler/interp/interpreter.h"
#include "compiler/passes/lowered.h"
#include "compiler/quant/accuracy.h"
#include "sim/model/host_calls.h"

namespace npusim::compiler::testing {

namespace dp = arch::datapath;

Tensor random_tensor(const Shape& s, float scale, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<float> v(static_cast<size_t>(num_elements(s)));
  for (float& x : v) x = u(rng);
  return Tensor::from_floats(s, v);
}

GraphBuilder& GraphBuilder::input(const std::string& name, const Shape& shape) {
  Value& v = g_.ensure_value(name);
  v.name = name;
  v.dtype = DataType::kFloat32;
  v.shape = shape;
  v.shape_known = true;
  g_.inputs.push_back(name);
  return *this;
}

GraphBuilder& GraphBuilder::constant(const std::string& name, const Shape& shape, float scale,
                                     uint32_t seed) {
  g_.add_constant(name, random_tensor(shape, scale, seed));
  return *this;
}

GraphBuilder& GraphBuilder::constant(const std::string& name, Tensor t) {
  g_.add_constant(name, std::move(t));
  return *this;
}

Node& GraphBuilder::node(const std::string& op, const std::vector<std::string>& inputs,
                         const std::vector<std::string>& outputs, const std::string& name) {
  Node n;
  n.op_type = op;
  n.name = name.empty() ? outputs.at(0) + "_node" : name;
  n.inputs = inputs;
  n.outputs = outputs;
  for (const auto& o : outputs) {
    Value& v = g_.ensure_value(o);
    v.name = o;
  }
  g_.nodes.push_back(n);
  return g_.nodes.back();
}

GraphBuilder& GraphBuilder::output(const std::string& name) {
  g_.outputs.push_back(name);
  return *this;
}

Graph GraphBuilder::build() {
  std::map<std::string, Tensor> in;
  uint32_t seed = 100;
  for (const auto& i : g_.inputs) in[i] = random_tensor(g_.value(i).shape, 1.0f, seed++);
  const auto all = interpret_all(g_, in);
  for (auto& [name, t] : all) {
    Value& v = g_.value(name);
    if (v.is_constant()) continue;
    v.dtype = t.dtype;
    v.shape = t.shape;
    v.shape_known = true;
  }
  g_.verify();
  return g_;
}

isa::NpuConfig small_sram() {
  isa::NpuConfig c;
  c.systolic_array.rows = 8;
  c.systolic_array.cols = 8;
  c.sram.input.size_kib = 16;
  c.sram.weight.size_kib = 8;
  c.sram.accumulator.size_kib = 8;
  return c;
}

std::map<std::string, Tensor> run_program(const CompileResult& r, const isa::NpuConfig& config,
                                          const std::map<std::string, Tensor>& inputs,
                                          const RunOptions& opts) {
  const isa::Program& p = r.program;
  dp::MachineState st(config, p);
  st.set_host_op_handler(sim::host_op_handler(r));
  for (const auto& b : p.tensors) {
    if (b.role != isa::TensorBinding::Role::kInput) continue;
    const Tensor& t = inputs.at(b.name);
    HostTensor h{b.name, b.dram_addr, t.shape, {}, b.dtype, t.dtype, {}};
    sim::write_host_tensor(st, h, t);
  }
  if (!opts.random_order) {
    for (const auto& ins : p.instructions) dp::execute(ins, config, st);
  } else {
    std::vector<std::vector<size_t>> q(isa::kNumQueues);
    for (size_t i = 0; i < p.instructions.size(); ++i)
      q[static_cast<size_t>(p.instructions[i].queue())].push_back(i);
    std::vector<size_t> head(isa::kNumQueues, 0);
    int tokens[isa::kNumQueues][isa::kNumQueues] = {};
    std::vector<bool> done(p.instructions.size(), false);
    size_t first_undone = 0;
    std::mt19937 rng(opts.seed);
    size_t executed = 0;
    while (executed < p.instructions.size()) {
      std::vector<int> ready;
      for (int k = 0; k < isa::kNumQueues; ++k) {
        if (head[k] >= q[k].size()) continue;
        const isa::Instruction& ins = p.instructions[q[k][head[k]]];
        bool ok = true;
        if (ins.opcode == isa::Opcode::kHalt || ins.opcode == isa::Opcode::kBarrier)
          ok = first_undone == q[k][head[k]];
        for (int s = 0; s < isa::kNumQueues; ++s) {
          if (ins.waits_on(static_cast<isa::Queue>(s)) && tokens[s][k] == 0) ok = false;
        }
        if (ok) ready.push_back(k);
      }
      if (ready.empty()) throw std::runtime_error("random-order run deadlocked");
      const int k = ready[std::uniform_int_distribution<size_t>(0, ready.size() - 1)(rng)];
      const size_t idx = q[k][head[k]++];
      const isa::Instruction& ins = p.instructions[idx];
      for (int s = 0; s < isa::kNumQueues; ++s) {
        if (ins.waits_on(static_cast<isa::Queue>(s))) --tokens[s][k];
      }
      dp::execute(ins, config, st);
      for (int s = 0; s < isa::kNumQueues; ++s) {
        if (ins.signals(static_cast<isa::Queue>(s))) ++tokens[k][s];
      }
      done[idx] = true;
      while (first_undone < done.size() && done[first_undone]) ++first_undone;
      ++executed;
    }
  }
  std::map<std::string, Tensor> out;
  for (const auto& b : p.tensors) {
    if (b.role != isa::TensorBinding::Role::kOutput) continue;
    Shape s;
    for (uint64_t d : b.dims) s.push_back(static_cast<int64_t>(d));
    // int32 storage holds an integer or bool value (compile() binds float values in the precision).
    const DataType vt = b.dtype == isa::DType::kInt32 ? DataType::kInt64 : DataType::kFloat32;
    out[b.name] = sim::read_host_tensor(st, HostTensor{b.name, b.dram_addr, s, {}, b.dtype, vt, {}});
  }
  return out;
}

std::string check_tokens(const isa::Program& p) {
  std::vector<std::vector<size_t>> q(isa::kNumQueues);
  for (size_t i = 0; i < p.instructions.size(); ++i)
    q[static_cast<size_t>(p.instructions[i].queue())].push_back(i);
  std::vector<size_t> head(isa::kNumQueues, 0);
  int64_t tokens[isa::kNumQueues][isa::kNumQueues] = {};
  size_t executed = 0;
  std::vector<bool> done(p.instructions.size(), false);
  size_t first_undone = 0;
  while (executed < p.instructions.size()) {
    bool progress = false;
    for (int k = 0; k < isa::kNumQueues; ++k) {
      while (head[k] < q[k].size()) {
        const size_t idx = q[k][head[k]];
        const isa::Instruction& ins = p.instructions[idx];
        bool ok = true;
        if (ins.opcode == isa::Opcode::kHalt || ins.opcode == isa::Opcode::kBarrier) ok = first_undone == idx;
        for (int s = 0; s < isa::kNumQueues; ++s) {
          if (ins.waits_on(static_cast<isa::Queue>(s)) && tokens[s][k] == 0) ok = false;
        }
        if (!ok) break;
        for (int s = 0; s < isa::kNumQueues; ++s) {
          if (ins.waits_on(static_cast<isa::Queue>(s))) --tokens[s][k];
          if (ins.signals(static_cast<isa::Queue>(s))) ++tokens[k][s];
        }
        done[idx] = true;
        while (first_undone < done.size() && done[first_undone]) ++first_undone;
        ++head[k];
        ++executed;
        progress = true;
      }
    }
    if (!progress) {
      for (int k = 0; k < isa::kNumQueues; ++k) {
        if (head[k] < q[k].size()) {
          return fmt::format("deadlock: {} queue blocked at instruction {}",
                             isa::kQueueNames[static_cast<size_t>(k)], q[k][head[k]]);
        }
      }
    }
  }
  for (int a = 0; a < isa::kNumQueues; ++a) {
    for (int b = 0; b < isa::kNumQueues; ++b) {
      if (tokens[a][b] != 0) {
        return fmt::format("{} token(s) {} -> {} never consumed", tokens[a][b],
                           isa::kQueueNames[static_cast<size_t>(a)],
                           isa::kQueueNames[static_cast<size_t>(b)]);
      }
    }
  }
  return "";
}

double max_rel_error(const std::map<std::string, Tensor>& got, const std::map<std::string, Tensor>& ref) {
  double worst = 0;
  for (const auto& [name, r] : ref) {
    const Tensor& gt = got.at(name);
    if (gt.shape != r.shape) return INFINITY;
    double scale = 1e-6, err = 0;
    for (int64_t i = 0; i < r.size(); ++i) scale = std::max(scale, std::fabs(r.as_double(i)));
    for (int64_t i = 0; i < r.size(); ++i) {
      const double d = std::fabs(gt.as_double(i) - r.as_double(i));
      if (std::isnan(d)) return INFINITY;
      err = std::max(err, d);
    }
    worst = std::max(worst, err / scale);
  }
  return worst;
}

double compile_and_compare(const Graph& model, const isa::NpuConfig& config, CompileResult* result,
                           const RunOptions& opts, const CompileOptions& copts) {
  Graph lowered = model;
  lower(lowered);
  CompileResult r = compile(lowered, config, copts);
  std::map<std::string, Tensor> in;
  uint32_t seed = 7;
  for (const auto& i : model.inputs) in[i] = random_tensor(model.value(i).shape, 1.0f, seed++);
  const auto ref = interpret(model, in);
  const auto got = run_program(r, config, in, opts);
  const double e = max_rel_error(got, ref);
  if (result) *result = std::move(r);
  return e;
}

void compile_and_run(const Graph& g, const isa::NpuConfig& config, isa::DType precision,
                     const MappingOverrides& mapping, Compiled* c) {
  c->lowered = g;
  lower(c->lowered);
  CompileOptions o;
  o.mapping = &mapping;
  if (precision == isa::DType::kInt8) {
    quant::PlanRequest req;
    req.spec.model = quant::Precision::kInt8;
    req.calibration_count = 2;
    c->plan = quant::build_plan(c->lowered, req, &g);
    o.plan = &c->plan;
  } else {
    o.precision = precision;
  }
  c->result = compile(c->lowered, config, o);
  std::map<std::string, Tensor> in;
  in["x"] = random_tensor(g.value("x").shape, 2.0f, 7);
  c->out = run_program(c->result, config, in).at("y");
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape == b.shape && a.f.size() == b.f.size() && a.i == b.i &&
         std::memcmp(a.f.data(), b.f.data(), a.f.size() * sizeof(float)) == 0;
}

const LayerPlan& layer_named(const CompileResult& r, const std::string& name) {
  auto it =
      std::find_if(r.layers.begin(), r.layers.end(), [&](const LayerPlan& p) { return p.name == name; });
  if (it == r.layers.end()) throw std::runtime_error("no layer " + name);
  return *it;
}

int64_t weight_bytes_loaded(const CompileResult& r, const std::string& name) {
  int64_t bytes = 0;
  for (const isa::Instruction& ins : r.program.instructions) {
    if (ins.opcode != isa::Opcode::kLoad || r.layers.at(ins.layer()).name != name) continue;
    if (static_cast<isa::Buffer>(ins.get(isa::Field::kBuf)) != isa::Buffer::kWeight) continue;
    const auto dt = static_cast<isa::DType>(ins.get(isa::Field::kDtype));
    bytes += ins.get(isa::Field::kSize0) * ins.get(isa::Field::kSize1) * ins.get(isa::Field::kSize2) *
             ins.get(isa::Field::kSize3) * isa::dtype_bytes(dt);
  }
  return bytes;
}

}  // namespace npusim::compiler::testing
