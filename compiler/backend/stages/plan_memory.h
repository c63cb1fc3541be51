#pragma once
// The back end's first stage: where every runtime value lives in DRAM (docs/backend.md, "Memory plan").
// One buffer per alias group (free ops alias their input; Concats folded into their producers' stores
// and Slices/Transposes read in place alias into their buffer: memory/concat_in_place.h,
// memory/strided_views.h), placed first-fit by size over lifetime intervals. The lowering stage reads
// the tensors it places; the data segments and DRAM scratch start after its peak.
#include <cstdint>
#include <map>
#include <string>

#include "compiler/backend/core/context.h"
#include "compiler/backend/memory/concat_in_place.h"
#include "compiler/backend/memory/strided_views.h"
#include "compiler/backend/options.h"
#include "compiler/ir/graph.h"
#include "isa/machine/config.h"

namespace npusim::compiler::backend {

// The memory plan: every runtime value's DRAM tensor (a view into another's buffer where it is folded),
// the folds that decided those views, and the activations' peak with and without lifetime reuse.
struct MemoryLayout {
  std::map<std::string, DramTensor> tensors;
  ConcatFolding folding;
  StridedViews views;
  uint64_t activation_bytes = 0;
  uint64_t activation_bytes_no_reuse = 0;
};

MemoryLayout plan_memory(const Graph& g, const isa::NpuConfig& config, const CompileOptions& options);

// The unit a node runs on: its assigned placement (compiler/passes/placement), else the array for Conv,
// Gemm and MatMul and the vector unit for the rest.
Placement placement_of(const Node& n);

// How a value is stored in DRAM without a precision plan: floats in the precision `act`, integers and
// bools as int32.
isa::DType storage_dtype(const Value& v, isa::DType act);

}  // namespace npusim::compiler::backend
