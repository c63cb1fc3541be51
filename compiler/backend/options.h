#pragma once
// What a compile is asked to do (compile.h): the precision or per-layer precision plan, the simulator
// that times emitted code, imposed mappings and the fusions that may apply. Its own header so that the
// lowerings read it without including the driver.
#include <array>
#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include "compiler/backend/mapping/mapping.h"
#include "isa/isa.h"
#include "isa/program.h"

namespace npusim::compiler {

namespace quant {
struct PrecisionPlan;
struct QParams;
}  // namespace quant

// A program slice's simulated cycles (CompileOptions::timer): each layer's span as a report counts it, in
// order, and the whole slice's (its last instruction's end: the layers' spans overlap).
struct SliceCycles {
  std::vector<int64_t> layers;
  int64_t total = 0;
};
using CodeTimer = std::function<SliceCycles(const isa::Program&)>;
// Energy (mJ) of each layer of a program slice, simulated as CodeTimer times it (CompileOptions::energy).
using CodeEnergy = std::function<std::vector<double>(const isa::Program&)>;

// What the mapping search keeps among the candidates it simulates (--objective, docs/cli.md): the fewest
// cycles, the least energy, or the least energy x cycles (energy-delay product).
enum class MappingObjective : uint8_t { kCycles, kEnergy, kEdp };
inline constexpr std::array<std::string_view, 3> kMappingObjectiveNames = {"cycles", "energy", "edp"};

struct CompileOptions {
  // Whole-model precision of matrix and vector ops and of activations in DRAM: fp32, fp16 or bf16.
  isa::DType precision = isa::DType::kFp32;
  // Per-layer precision (compiler/quant/precision.h is the contract; back end: backend/int8/int8.h). When
  // set, each node runs in its plan precision, activations are stored in their producer's format
  // (int8 codes between int8 layers) and `precision` is only the format of graph inputs/outputs.
  const quant::PrecisionPlan* plan = nullptr;
  // Times a program (a slice of the one being compiled: isa/program_slice.h) on an idle machine and
  // returns the cycles of each of its layers as a report counts them (their spans), in order, and the
  // slice's own. The
  // simulator, injected by sim/ (the compiler does not link arch/): with it, every layer's estimate is
  // its code simulated between its neighbours (docs/backend.md, "Estimates"), and the mapping search
  // ranks its best few candidates by simulating each. Without it (the compiler's own tests), estimates
  // come from the closed-form cost model.
  CodeTimer timer;
  // What the search keeps among the candidates it simulates (a matrix layer's tilings, a depthwise conv's
  // array and vector mappings). kEnergy and kEdp need `energy` and `timer`; without them, cycles.
  MappingObjective objective = MappingObjective::kCycles;
  CodeEnergy energy;
  // Imposed per-layer mappings (compiler/backend/mapping/mapping.h); layers it does not name are searched.
  const MappingOverrides* mapping = nullptr;
  // Concats folded into their producers' stores where that is exact (backend/memory/concat_in_place.h): each
  // producer writes its output straight into its slice of the Concat's buffer and the Concat copies
  // nothing (or only the inputs left). false (`--no-fusion`): every Concat copies its inputs.
  bool fold_concats = true;
  // A convolution's output read only by the pointwise conv after it stays in SRAM
  // (backend/fusion/residency.h). false (`--no-fusion`): every layer's output goes to DRAM.
  bool keep_on_chip = true;
  // Each layer's instructions merged into the code of the layer before it where that simulates faster
  // (backend/schedule/interleave.h; needs `timer`). false: each layer's code after the one before it.
  bool interleave_layers = true;
};

}  // namespace npusim::compiler
