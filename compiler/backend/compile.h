#pragma once
// The compiler's back end: turns a lowered graph (compiler/passes/lowered.h) into an isa::Program for
// one NPU configuration. Per matrix node it searches tile sizes and loop orders with a cost model built
// on isa/timing, plans DRAM (weights as data segments in the precision's format, activations with
// lifetime-based reuse) and SRAM (ping-pong slots), and emits instructions for every queue with the
// dependency tokens that make DMA overlap compute. Nodes it cannot lower run on the host (HOSTCALL);
// the result lists them with their cost and where their tensors live, so a functional run can execute
// them with the reference interpreter.
//
// Scheduling model (docs/compiler.md, "Back end"): dependencies are derived from the SRAM ranges and
// DRAM tensors each instruction reads and writes; a dependency between two queues becomes one token
// (the producer signals, the consumer waits), redundant ones are dropped using the knowledge each queue
// already has. This relies on every unit completing its own queue's instructions in program order.
#include <cstdint>
#include <string>

#include "compiler/backend/options.h"
#include "compiler/backend/result.h"
#include "compiler/ir/graph.h"
#include "isa/machine/config.h"

namespace npusim::compiler {

// Compiles a graph lowered by compiler/passes. Throws CompileError naming the layer when it cannot be
// mapped, std::invalid_argument for an unsupported precision.
CompileResult compile(const Graph& lowered, const isa::NpuConfig& config, const CompileOptions& options = {});

// The longest Softmax / LayerNormalization row (elements) the back end runs as one row-wise layer on
// this machine (backend/vector/rowwise.h): one fp32 row fits an input slot and, with scale, bias and a
// scratch row, the weight scratchpad. The pipeline's PipelineOptions::whole_row_limit.
int64_t rowwise_row_limit(const isa::NpuConfig& config);

// The compile table's line width: its columns take 133 characters, a long mapping description wraps in
// the rest.
inline constexpr size_t kCompileTableWidth = 200;

// Human-readable report: per layer tiles, SRAM, estimated cycles; fallbacks with their cost; the memory
// plan; the inserted layout conversions. No line is longer than kCompileTableWidth.
std::string compile_summary(const CompileResult& r);

}  // namespace npusim::compiler
