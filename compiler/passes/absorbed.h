#pragma once
// Where the nodes of a model went that the passes removed: fused into a matrix layer's epilogue
// (bias, residual Add, activations), folded into its weights (BatchNormalization), recognised as part
// of one op (LayerNormalization, Gelu, HardSwish, Silu), or removed (Identity, Dropout, a zero Pad).
// The report lists each under the program layer that runs its work (docs/report.md, "Fused nodes"),
// so that every ONNX node of the model can be found in it.
#include <string>
#include <vector>

#include "compiler/ir/graph.h"

namespace npusim::compiler {

struct AbsorbedNode {
  std::string name;  // the node of the imported graph
  std::string op;
  std::string into;  // the node of the lowered graph (a program layer) that does its work
  // The runtime values it reads that the lowered graph no longer has: intermediates of the fused
  // chain, which never touch DRAM (each listed under its first reader).
  std::vector<std::string> on_chip_inputs;
};

// The nodes of `imported` that `lowered` (lower(imported)) no longer has, each with the lowered node
// that took its work, in `imported` order. Left out: nodes evaluated at compile time (constants and
// the shape arithmetic the passes fold), and nodes decomposed into several lowered nodes (those
// pieces are program layers of their own, named after the node: compiler/passes/expand.cpp), and the
// quantization scaffolding of a pre-quantized model (QuantizeLinear, DequantizeLinear and a Cast
// between them: a number format, which the precision plan takes, not work).
std::vector<AbsorbedNode> absorbed_nodes(const Graph& imported, const Graph& lowered);

}  // namespace npusim::compiler
