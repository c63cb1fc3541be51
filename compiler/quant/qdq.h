#pragma once
// Pre-quantized models: ONNX QDQ graphs (QuantizeLinear / DequantizeLinear around float ops, as
// torch.onnx.export and onnxruntime's quantizer write them) and QLinearConv / QLinearMatMul run with the
// model's own scales. The pass turns them into a float graph plus a PrecisionPlan whose int8 layers
// carry the model's integer weights, scales and zero points, so the quantized reference (emulate.h)
// and the back end run them exactly like a calibrated model.
#include <string>
#include <vector>

#include "compiler/ir/graph.h"
#include "compiler/quant/precision.h"

namespace npusim::compiler::quant {

// True when the graph has QuantizeLinear / DequantizeLinear / QLinearConv / QLinearMatMul nodes.
bool is_prequantized(const Graph& g);

struct QdqImport {
  Graph graph;           // float graph: Q/DQ pairs removed, weights dequantized, Relu/Clip fused into
                         // the matrix node that feeds them (npu.activation) when the pair is quantized
  PrecisionPlan plan;    // int8 where a node's runtime inputs and outputs all carry the model's QParams
  int quantized_values = 0;  // activation values with model QParams
  int int8_layers = 0;       // matrix nodes with the model's int8 weights
  std::vector<std::string> notes;  // what could not be kept (e.g. weights with a zero point: re-quantized)
};

// Rewrites QLinearConv / QLinearMatMul into DequantizeLinear -> Conv / MatMul -> QuantizeLinear, then:
// a Q -> [Cast] -> DQ chain on a runtime value with one scale and zero point becomes that value with
// QParams; DQ of a constant int8 weight becomes a float constant whose codes (per-tensor or per-axis
// scales, zero point 0) the consuming matrix node's LayerQuant keeps; DQ of an int32 bias becomes a
// float bias. Constant sub-expressions feeding Q/DQ (Constant, Cast, ConstantOfShape) are evaluated.
// Throws ModelError on a QDQ construct it cannot represent (e.g. a DQ with other parameters than its Q).
QdqImport import_qdq(const Graph& g);

}  // namespace npusim::compiler::quant
