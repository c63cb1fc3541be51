#pragma once
// What the layer tables show of a layer's node (docs/report.md, "Layer tables"): its runtime input and
// output shapes and, for convolutions and pools, its kernel, strides and groups, from the compiler's
// graphs.
#include "compiler/ir/graph.h"
#include "traces/report.h"

namespace npusim::sim {

// Sets l's input_shape, output_shape, kernel, stride and groups from the node of the same name in
// `imported` (the model as its file gives it), else in `lowered` (a node the compiler inserted or
// decomposed); leaves them empty for a name neither graph has.
void describe_layer_node(const compiler::Graph& imported, const compiler::Graph& lowered,
                         traces::LayerReport& l);

}  // namespace npusim::sim
