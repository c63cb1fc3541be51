#pragma once
// Pre-quantized models: ONNX QDQ graphs (QuantizeLinear / DequantizeLinear around float ops, as
// torch.onnx.export and onnxruntime's quantizer write them) and QLinearConv / QLinearMatMul run with the
// model's own scales. The pass turns them into a float graph plus a PrecisionPlan whose int8 layers
// carry the model's integer weights, scales and zero points, so the quantized reference (emulate.h)
// and the back end run them exactly like a calibrated model.
#include <map>
#include <string>
#include <vector>

#include "compiler/ir/graph.h"
#include "compiler/quant/precision.h"
#include "compiler/quant/quantize.h"

namespace npusim::compiler::quant {

// True when the graph has QuantizeLinear / DequantizeLinear / QLinearConv / QLinearMatMul nodes.
bool is_prequantized(const Graph& g);

// A pre-quantized model's own quantization, by value and node name, so it survives the graph passes
// (which keep the names of the values and matrix nodes they do not remove).
struct ModelQuant {
  std::map<std::string, QParams> values;  // activation values the model quantizes (Q -> DQ pairs)
  // Matrix node -> the model's weight scales per output channel (one entry: per tensor). The weights
  // themselves are the dequantized float constants (code x scale, exact in fp32), so dividing by the
  // scale gives the model's int8 codes back wherever the constant ends up after the passes.
  std::map<std::string, std::vector<float>> weight_scales;
};

struct QdqImport {
  Graph graph;               // float graph: Q/DQ pairs removed, weights dequantized, Relu/Clip fused into
                             // the matrix node that feeds them (npu.activation) when the pair is quantized
  ModelQuant quant;          // the model's scales, for model_plan on this graph or on it after lower()
  PrecisionPlan plan;        // model_plan(graph, quant): int8 where the model quantizes a node, else fp32
  int quantized_values = 0;  // activation values with model QParams
  int int8_layers = 0;       // matrix nodes with the model's int8 weights
  std::vector<std::string> notes;  // what could not be kept (e.g. weights with a zero point: re-quantized)
};

// The calibration record of a plan whose scales are the model's own (method "model").
CalibrationInfo model_calibration();

// Rewrites QLinearConv / QLinearMatMul into DequantizeLinear -> Conv / MatMul -> QuantizeLinear, then:
// a Q -> [Cast] -> DQ chain on a runtime value with one scale and zero point becomes that value with
// QParams; DQ of a constant int8 weight becomes a float constant whose scales (per-tensor or per output
// channel, zero point 0) the consuming matrix node keeps; DQ of an int32 bias becomes a float bias.
// Constant sub-expressions feeding Q/DQ (Constant, Cast, ConstantOfShape) are evaluated.
// What one static QParams per value cannot express (runtime scales or zero points, per-axis scales on
// an activation, a DQ with other parameters than its Q) stays as ordinary ops, computed exactly as
// ONNX defines them; `notes` says which.
QdqImport import_qdq(const Graph& g);

// Applies a model's own quantization to `plan` (resolved on `g`: the import's graph or the same graph
// after lower()):
//   - values of `g` named in mq.values take the model's QParams, and they flow forward through ops that
//     share their input's QParams (the layout transposes and reshapes the passes insert);
//   - with `follow_model`, every node the user did not override (NodePrecision::overridden) whose
//     runtime float inputs and outputs all have QParams becomes int8, as the model specifies;
//   - returns, per int8 matrix node with model weight scales, the model's weight codes recovered from
//     its float constant (for quantize_plan's `given`). Where a pass changed the weights (a
//     BatchNormalization folded into them), they are no longer codes x scale: `notes` says so and
//     quantize_plan re-quantizes them.
std::map<std::string, QuantizedWeights> apply_model_quant(const Graph& g, const ModelQuant& mq,
                                                          PrecisionPlan& plan, bool follow_model,
                                                          std::vector<std::string>* notes);

}  // namespace npusim::compiler::quant
