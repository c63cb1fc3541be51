#pragma once
// Test support: build small graphs, lower + compile them, run the program on the functional datapath
// (in program order, or in a random interleaving that only respects queue order and tokens) and
// compare with the FP32 reference interpreter.
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "compiler/backend/compile.h"
#include "compiler/ir/graph.h"
#include "compiler/quant/precision.h"
#include "isa/machine/config.h"

namespace npusim::compiler::testing {

// A graph under construction: shapes of node outputs are filled in by running the interpreter.
class GraphBuilder {
 public:
  GraphBuilder() { g_.opset = 17; }
  GraphBuilder& input(const std::string& name, const Shape& shape);
  GraphBuilder& constant(const std::string& name, const Shape& shape, float scale = 0.5f, uint32_t seed = 1);
  GraphBuilder& constant(const std::string& name, Tensor t);
  Node& node(const std::string& op, const std::vector<std::string>& inputs,
             const std::vector<std::string>& outputs, const std::string& name = "");
  GraphBuilder& output(const std::string& name);
  // Finishes: infers every value's shape and dtype with the interpreter on random inputs.
  Graph build();

 private:
  Graph g_;
};

Tensor random_tensor(const Shape& s, float scale, uint32_t seed);

struct RunOptions {
  bool random_order = false;  // interleave queues randomly (tokens and per-queue order respected)
  uint32_t seed = 1;
};

// A machine whose every scratchpad forces small tiles (8 x 8 array, 16/8/8 KiB input/weight/accumulator).
isa::NpuConfig small_sram();

// Runs a compiled program on the datapath with `inputs` (ONNX order) and returns the outputs.
std::map<std::string, Tensor> run_program(const CompileResult& r, const isa::NpuConfig& config,
                                          const std::map<std::string, Tensor>& inputs,
                                          const RunOptions& opts = {});

// Checks that every token is produced before it is consumed and none is left over, by simulating the
// queues greedily (each unit executes its queue in order, an instruction starts when its tokens are
// there). Returns "" or a sentence describing the first problem.
std::string check_tokens(const isa::Program& p);

// Max |a - b| / max |ref| over all outputs (the relative error of the worst element at tensor scale).
double max_rel_error(const std::map<std::string, Tensor>& got, const std::map<std::string, Tensor>& ref);

// A model compiled and run on the datapath (compile_and_run).
struct Compiled {
  Graph lowered;
  quant::PrecisionPlan plan;
  CompileResult result;
  Tensor out;
};
// Lowers and compiles g (int8: under a plan calibrated on 2 samples; else in `precision`) with `mapping`
// imposed, and runs it on input "x" (random_tensor of scale 2, seed 7): c->out is output "y".
void compile_and_run(const Graph& g, const isa::NpuConfig& config, isa::DType precision,
                     const MappingOverrides& mapping, Compiled* c);
// The same shape and the same bits (floats compared as bit patterns).
bool same_bits(const Tensor& a, const Tensor& b);
// The layer of r named `name` (throws when none is).
const LayerPlan& layer_named(const CompileResult& r, const std::string& name);
// Bytes the LOADs into the weight scratchpad of layer `name` move.
int64_t weight_bytes_loaded(const CompileResult& r, const std::string& name);

// lower() + compile() + run + compare; returns the worst relative error (and fills `result`).
double compile_and_compare(const Graph& model, const isa::NpuConfig& config, CompileResult* result = nullptr,
                           const RunOptions& opts = {}, const CompileOptions& copts = {});

}  // namespace npusim::compiler::testing
