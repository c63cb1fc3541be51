#pragma once
// The model pipeline the CLI runs: import -> passes -> back end, and the glue that lets a functional
// simulation of the compiled program read the user's inputs, execute host fallbacks with the reference
// interpreter, and write the outputs.
#include <functional>
#include <iosfwd>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "arch/simulate.h"
#include "compiler/backend/compile.h"
#include "compiler/ir/graph.h"
#include "compiler/quant/accuracy.h"
#include "isa/machine/config.h"
#include "traces/report.h"

namespace npusim::sim {

// Times a slice of a program on an idle machine (compiler::CompileOptions::timer).
using CodeTimer = compiler::CodeTimer;

// The simulator as the compiler's timer: estimates and the choice among the best candidate mappings
// come from simulating the code (arch::simulate, timing only). In its own file so that users of the
// model pipeline that do not link SystemC's main (unit tests) can leave it out.
CodeTimer simulation_timer(const isa::NpuConfig& config);
// The timer and the energy of the same simulations (one simulation per slice for both), for a search
// whose objective is energy or energy x cycles (compiler::CompileOptions::objective).
struct SimulationTimers {
  CodeTimer timer;
  compiler::CodeEnergy energy;
};
SimulationTimers simulation_timers(const isa::NpuConfig& config);

struct ModelOptions {
  std::vector<std::string> input_shapes;  // "NAME=1x3x224x224"
  std::vector<std::string>
      input_values;  // "NAME=V[,V...]": inputs fixed to constants (compiler::ImportOptions)
  std::map<std::string, int64_t> dim_params;  // named dynamic dimensions bound (compiler::ImportOptions)
  int64_t batch = 0;                          // > 0: every input's first dimension (compiler::ImportOptions)
  // Whole-model precision, per-layer overrides, int8 quantization options and calibration inputs
  // (compiler/quant). An fp32/fp16/bf16 model without overrides compiles exactly as before the plan
  // existed; int8 or overrides compile through the plan (per-layer dtypes, conversions between them).
  compiler::quant::PlanRequest plan;
  // The compiler's timer (simulation_timer for the CLI); empty: closed-form estimates only.
  CodeTimer timer;
  // What the mapping search minimises among the candidates it simulates (--objective); energy and edp
  // need `energy` (simulation_timers), else they rank by cycles.
  compiler::MappingObjective objective = compiler::MappingObjective::kCycles;
  compiler::CodeEnergy energy;
  // false (--no-fusion): no node is fused into its producer's epilogue (bias, residual Add, activations
  // stay layers of their own) and no Concat into its producers' stores (CompileOptions::fold_concats),
  // to show what fusion buys.
  bool fusion = true;
  // false (--no-interleave; always for --dynamic's profiles): each layer's code after the one before it,
  // never merged into it (CompileOptions::interleave_layers).
  bool interleave = true;
  // Imposed per-layer mappings (--mapping, sim/mapping/mapping_file.h); must outlive the compile.
  const compiler::MappingOverrides* mapping = nullptr;
  // false: a timing-only compile: built-in models' MatMul weights carry their shape only
  // (compiler::ImportOptions::weight_values), so their program cannot run functionally nor be written.
  // A plan with int8 keeps the values (calibration runs the model).
  bool weight_values = true;
  // Called as each phase starts ("import", "calibration", "compile"): a terminal's progress line.
  std::function<void(std::string_view phase)> on_phase;
};

struct CompiledModel {
  compiler::Graph imported;  // before the passes (op-type override keys, the accuracy report's names)
  compiler::Graph lowered;
  compiler::quant::PrecisionPlan plan;
  compiler::CompileResult result;
  bool prequantized = false;             // a QDQ / QLinear model: its own scales were imported
  bool fusion = true;                    // ModelOptions::fusion
  std::vector<std::string> quant_notes;  // what of the model's quantization could not be kept
  // The calibration statistics the plan was quantized from (quant::requantize_plan; --advise-sqnr).
  std::map<std::string, compiler::quant::TensorStats> calibration_stats;
  // The host's time in each phase (import, calibration, compile; accuracy is the command's).
  traces::PhaseTimes phases;
};

// Imports `spec` (ONNX file, SCALE-Sim CSV, built-in micro-model), lowers it and compiles it for
// `config`. A pre-quantized model (QuantizeLinear/DequantizeLinear, QLinearConv, QLinearMatMul) is
// first turned into its float graph plus its own scales (compiler/quant/qdq.h), which the precision
// plan then uses (options.plan.follow_model: its quantized nodes run in int8). With `verbose`, prints the
// graph after import and after every pass. Throws compiler::ModelError (the model), compiler::CompileError
// (the mapping).
CompiledModel compile_model(const std::string& spec, const isa::NpuConfig& config,
                            const ModelOptions& options, std::ostream* verbose);

// The same from an imported graph (compile_model = load_model + compile_graph).
CompiledModel compile_graph(compiler::Graph imported, const isa::NpuConfig& config,
                            const ModelOptions& options, std::ostream* verbose);

// Compiles `lowered` for `config` under `plan` (the uniform float plans take the original path), with
// the layers `mapping` names mapped as it imposes; `fold_concats`: CompileOptions::fold_concats;
// `objective` and `energy`: CompileOptions::objective and energy; `interleave`:
// CompileOptions::interleave_layers.
compiler::CompileResult compile_with_plan(
    const compiler::Graph& lowered, const isa::NpuConfig& config, const compiler::quant::PrecisionPlan& plan,
    const CodeTimer& timer = {}, const compiler::MappingOverrides* mapping = nullptr,
    bool fold_concats = true, compiler::MappingObjective objective = compiler::MappingObjective::kCycles,
    const compiler::CodeEnergy& energy = {}, bool interleave = true);

// Adds the compiler's view to a simulation report: per layer its mapping (tiles, loop order, SRAM
// bytes, estimated cycles) next to the simulated cycles, and a `compile` section (memory plan,
// fallbacks with their cost, inserted layout conversions, the precision plan's calibration and notes).
void attach_compile_info(const CompiledModel& compiled, traces::Report& report);

// The DRAM a compiled model occupies: weights, peak activations (with lifetime reuse) and scratch.
uint64_t dram_footprint_bytes(const compiler::MemoryPlan& memory);
// Why the model does not fit the configuration's dram.capacity_mib ("" when it does or capacity is
// unlimited): one sentence naming the key and the model's footprint.
std::string dram_capacity_problem(const compiler::MemoryPlan& memory, const isa::NpuConfig& config);

// Where a functional run takes its inputs and puts its outputs.
struct FunctionalIo {
  std::string inputs_dir;                            // empty: seeded random inputs
  const compiler::Preprocess* preprocess = nullptr;  // how images in inputs_dir become inputs
  std::string outputs_dir;                           // empty: outputs are not written
  uint32_t seed = 1;
  std::vector<std::string>* written = nullptr;  // when set: "PATH (SHAPE)" of each output file written
};

// Sets the functional hooks of `run`: inputs into DRAM before the run, host fallbacks executed by the
// reference interpreter (when `compiled` is given), outputs read back (and written) after it. The
// hooks keep references to `program`, `compiled` and `io`, which must outlive the run.
void add_functional_hooks(const isa::Program& program, const CompiledModel* compiled, const FunctionalIo& io,
                          arch::RunOptions& run);

}  // namespace npusim::sim
