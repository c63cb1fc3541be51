// The back end's driver: a short pipeline of named stages, each in its own file under stages/ and each
// reading the plan the stage before it produced (docs/backend.md, "Stages").
#include "compiler/backend/compile.h"

#include <fmt/format.h>

#include <chrono>
#include <stdexcept>
#include <utility>

#include "compiler/backend/core/context.h"
#include "compiler/backend/mapping/imposed.h"
#include "compiler/backend/stages/bind_tensors.h"
#include "compiler/backend/stages/lower_layers.h"
#include "compiler/backend/stages/plan_memory.h"
#include "compiler/backend/vector/rowwise.h"
#include "isa/machine/spec_text.h"

namespace npusim::compiler {

CompileResult compile(const Graph& g, const isa::NpuConfig& config, const CompileOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  if (options.precision != isa::DType::kFp32 && options.precision != isa::DType::kFp16 &&
      options.precision != isa::DType::kBf16) {
    throw std::invalid_argument(fmt::format("compile: precision {} is not supported (fp32, fp16, bf16)",
                                            isa::kDTypeNames[static_cast<size_t>(options.precision)]));
  }
  if (!options.plan && config.systolic_array.rate(options.precision) <= 0) {
    throw CompileError(fmt::format("the systolic array has no {} MACs (systolic_array.{}_rate is 0)",
                                   isa::kDTypeNames[static_cast<size_t>(options.precision)],
                                   isa::kDTypeNames[static_cast<size_t>(options.precision)]));
  }
  if (options.mapping) backend::check_mapping_names(g, *options.mapping);
  CompileResult result;
  backend::Context c(g, config, options, result);
  result.program.machine = isa::to_spec_text(config);
  for (const Node& n : g.nodes) result.program.layers.push_back({n.name, n.op_type});

  // 1. Plan memory: every runtime value's DRAM tensor; data segments and scratch follow the activations.
  backend::MemoryLayout memory = backend::plan_memory(g, config, options);
  c.tensors = std::move(memory.tensors);
  c.folding = std::move(memory.folding);
  c.views = std::move(memory.views);
  result.memory.activation_base = 0;
  result.memory.activation_bytes = memory.activation_bytes;
  result.memory.activation_bytes_no_reuse = memory.activation_bytes_no_reuse;
  c.data_base_ = c.data_end_ = c.align(memory.activation_bytes);
  result.memory.weight_base = c.data_end_;
  c.scratch_base_ = c.scratch_end_ = uint64_t{1} << 38;

  // 2. Lower each layer (and the groups fused with it) into the program.
  backend::lower_layers(c);

  // 3. Bind the graph's inputs and outputs; record where every value lives.
  backend::bind_tensors(c);

  result.compile_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return result;
}

int64_t rowwise_row_limit(const isa::NpuConfig& config) { return backend::longest_row(config); }

}  // namespace npusim::compiler
