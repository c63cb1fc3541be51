#pragma once
// Model import: ONNX files, SCALE-Sim topology CSVs and built-in micro-models, all into the same
// graph IR. Every failure a user can cause (bad file, unbound dynamic dimension, unknown op, ...) is a
// ModelError with one sentence naming the file, input, node or dimension.
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "compiler/ir/graph.h"

namespace npusim::compiler {

// A model the compiler cannot accept because of the model itself (or how the user described it).
class ModelError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct ImportOptions {
  // Shapes that bind graph inputs' dynamic dimensions (`--input-shape NAME=1x3x224x224`). A bound
  // shape must have the input's rank and agree with its static dimensions.
  std::map<std::string, Shape> input_shapes;
  // When > 0 (`--batch N`): the first dimension of every runtime input becomes N, static or not, and
  // ONNX shape inference propagates it. A Reshape to a constant shape with the exported batch in front
  // follows N; any other constant shape that no longer fits, or a graph output that loses the batch, is a
  // ModelError (compiler/import/batch_shapes.h).
  int64_t batch = 0;
  // Values of named dynamic dimensions (`--dynamic seq=128`): every input dimension whose dim_param is
  // a key takes the value. Each key must name a dim_param of some runtime input.
  std::map<std::string, int64_t> dim_params;
  // false (timing-only runs): the weights are shape-only constants (Tensor::shape_only): never generated,
  // converted nor held, since no cycle count depends on them. That is the MatMul weights of built-in
  // models (gemm:, llm:) and of SCALE-Sim GEMM rows, and an ONNX file's floating initializers of 64 KiB
  // or more (smaller ones, such as shapes, scales and per-channel vectors, keep their values). The
  // reference interpreter, int8 calibration and functional runs need true.
  bool weight_values = true;
  // Runtime inputs fixed to constants (`--input-value sr=16000`): each becomes an initializer of the
  // input's type and (bound) shape before ONNX's shape inference, so shape arithmetic and control flow
  // that depend on it fold; the input is no longer a runtime input. One value fills the whole shape,
  // otherwise there must be one value per element. A name that is no input of the model but close to one
  // (`sr_` for `sr`) is a typo: a ModelError with the closest name. A name far from every input fixes
  // nothing and goes to `warn` (the same options serve every variant of a model: one of Silero VAD's
  // files has no `sr`).
  std::map<std::string, std::vector<double>> input_values;
  // Receives each warning of the import, one sentence each (null: dropped).
  std::function<void(const std::string&)> warn;
};

// Parse "NAME=1x3x224x224" (a scalar input is "NAME="). Throws ModelError on a malformed spec.
std::pair<std::string, Shape> parse_input_shape(const std::string& spec);

// Parse "NAME=V[,V...]" (--input-value). Throws ModelError on a malformed spec.
std::pair<std::string, std::vector<double>> parse_input_value(const std::string& spec);

// Read an ONNX model file (opset 7 or later). Initializers stored as external data are read from
// files relative to the model's directory. Runs ONNX's checker and ONNX's shape inference with data
// propagation; values whose shape inference could not determine keep shape_known = false.
Graph import_onnx_file(const std::string& path, const ImportOptions& options = {});
// The same from serialized bytes; external data locations are relative to `base_dir`, and
// `display_name` stands for the file in error messages.
Graph import_onnx_bytes(const std::string& bytes, const ImportOptions& options = {},
                        const std::string& base_dir = ".", const std::string& display_name = "<model>");

// Read a serialized ONNX TensorProto (the node tests' input_N.pb / output_N.pb files).
Tensor read_tensor_file(const std::string& path);
Tensor tensor_from_bytes(const std::string& bytes, const std::string& display_name = "<tensor>");
// The name recorded in a serialized TensorProto file ("" when it has none).
std::string read_tensor_name(const std::string& path);

// A SCALE-Sim topology CSV. A conv topology (`Layer name, IFMAP Height, IFMAP Width, Filter Height,
// Filter Width, Channels, Num Filter, Strides,`) becomes one Conv node per row, each reading its own
// pre-padded input (batch 1, no padding, output size ceil((H - R + stride) / stride) as SCALE-Sim
// computes it, the input growing by the rows the ceiling adds), stored NHWC (Graph::nhwc_io); a GEMM
// topology (`Layer Name, M, N, K,`) becomes one MatMul [M x K] x [K x N] per row. Weights are
// pseudo-random constants (a topology carries no data). Rows are independent layers, as in SCALE-Sim:
// every layer's output is a graph output.
Graph import_scalesim_csv(const std::string& path, bool weight_values = true);
Graph import_scalesim_csv_text(const std::string& text, const std::string& display_name = "<csv>",
                               bool weight_values = true);

// Built-in models (and llm: above): "demo" (a small CNN: 3 x conv-bn-relu, global pool, gemm on 1x3x32x32),
// "gemm:M=..,N=..,K=.." (one MatMul) and "conv:H=..,W=..,C=..,K=..,R=..,S=..,stride=..,pad=.."
// (one Conv on 1xCxHxW; stride defaults to 1, pad to 0). Weights are deterministic pseudo-random
// values so functional runs compute something non-trivial.
// "llm:layers=..,hidden=..,heads=..,kv_heads=..,ffn=..,vocab=..[,seq=..][,past=..]": a Llama-shaped decoder
// (RMSNorm, rotary embeddings, grouped-query attention, SwiGLU, LM head on the last position) on token
// embeddings llm.x [seq, hidden], with the KV cache as inputs llm.past_kL / llm.past_vL [kv_heads, past,
// head_dim] (when past > 0) and outputs llm.present_kL / llm.present_vL [kv_heads, past + seq, head_dim].
// seq defaults to 1 and past to 0: a prefill of P tokens is seq=P, a decode step over L cached positions
// is seq=1,past=L.
struct LlmSpec {
  int64_t layers = 0, hidden = 0, heads = 0, kv_heads = 0, ffn = 0, vocab = 0, seq = 1, past = 0;
  int64_t head_dim() const { return hidden / heads; }
  int64_t parameters() const;  // weights of the decoder (norm gains included)
};
// Throws ModelError naming the parameter (unknown or missing key, hidden not divisible by heads, heads
// not a multiple of kv_heads, odd head_dim).
LlmSpec parse_llm_spec(const std::string& spec);
std::string llm_spec_text(const LlmSpec& s);

// `weight_values`: ImportOptions::weight_values.
Graph builtin_model(const std::string& spec, bool weight_values = true);
bool is_builtin_model_spec(const std::string& spec);
// The built-in model as a serialized ONNX ModelProto (to save it, or to feed import_onnx_bytes).
std::string builtin_model_onnx(const std::string& spec);

// Dispatch on the spec: a built-in model spec, a *.csv SCALE-Sim topology, otherwise an ONNX file.
Graph load_model(const std::string& spec, const ImportOptions& options = {});

}  // namespace npusim::compiler
