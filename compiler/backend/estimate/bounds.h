#pragma once
// The roofline bounds of a compiled model's layers as the model's own (ONNX) nodes, fused or not.
#include "compiler/backend/result.h"
#include "isa/machine/config.h"

namespace npusim::compiler {

// Bounds of the model as imported (the ONNX nodes', docs/report.md "Roofline"): every layer whose node
// the imported graph has gets that node's own bound (its tensors before fusion: a conv's residual Add
// is the Add's), and r.absorbed lists the nodes the passes fused away, each with its own bound in the
// precision of the layer that runs it; r.compiled_bound_cycles keeps the sum of the bounds as compiled.
// Call after compile(lowered), lowered = lower(imported) (for a pre-quantized model, after its QDQ
// import: compiler/quant/qdq.h).
// Each layer's fusion group becomes its `chosen.fused` (what --mapping-out writes); an imposed entry's
// `fused` list must be that group (backend/mapping/imposed.h check_fusion, MappingError otherwise).
void bound_as_imported(CompileResult& r, const Graph& imported, const Graph& lowered,
                       const isa::NpuConfig& config, const MappingOverrides* mapping = nullptr);

}  // namespace npusim::compiler
