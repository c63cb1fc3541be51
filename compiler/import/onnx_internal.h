#pragma once
// Internal to compiler/import: the ModelProto-level entry point and a small builder the SCALE-Sim and
// built-in importers use, so every model source goes through the same checker, shape inference and
// conversion as an ONNX file.
#include <onnx/onnx_pb.h>

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/import/import.h"

namespace npusim::compiler::detail {

// `lifted`: per graph initializer, its raw_data in the mapped file when lift_raw_data took it out of
// `model` (compiler/import/onnx_wire.h); the mapping must outlive the call.
Graph import_model_proto(onnx::ModelProto& model, const ImportOptions& options, const std::string& base_dir,
                         const std::string& display_name,
                         const std::vector<std::string_view>* lifted = nullptr);

// Builds a float32 ONNX model node by node (opset 17).
class ModelBuilder {
 public:
  // `weight_values` false: add_weight records weights by shape only (ImportOptions::weight_values).
  explicit ModelBuilder(const std::string& graph_name, bool weight_values = true);
  void add_input(const std::string& name, const Shape& shape);
  void add_output(const std::string& name);
  // A float32 initializer with the given values (size must match the shape).
  void add_initializer(const std::string& name, const Shape& shape, const std::vector<float>& values);
  // A float32 weight: an initializer of `values()`, or, without weight values, a graph input of that
  // shape (so ONNX's checker and shape inference see it) that import_built() turns into a shape-only
  // constant; `values` is not called then.
  void add_weight(const std::string& name, const Shape& shape,
                  const std::function<std::vector<float>()>& values);
  bool weight_values() const { return weight_values_; }
  const std::vector<std::string>& shape_only_weights() const { return shape_only_; }
  void add_int64_initializer(const std::string& name, const Shape& shape, const std::vector<int64_t>& values);
  onnx::NodeProto& add_node(const std::string& op_type, const std::string& name,
                            const std::vector<std::string>& inputs, const std::vector<std::string>& outputs);
  static void set_attr(onnx::NodeProto& n, const std::string& key, int64_t v);
  static void set_attr(onnx::NodeProto& n, const std::string& key, float v);
  static void set_attr(onnx::NodeProto& n, const std::string& key, const std::vector<int64_t>& v);
  // The finished model, graph outputs typed and shaped by ONNX's shape inference.
  onnx::ModelProto& model();

 private:
  onnx::ModelProto model_;
  bool weight_values_ = true;
  std::vector<std::string> shape_only_;
};

// Imports the builder's model; its shape-only weights become constants without values.
Graph import_built(ModelBuilder& b, const std::string& display_name);

// The llm: micro-model's graph (compiler/import/builtin_llm.cpp), built into `b`.
void llm_model(const LlmSpec& spec, ModelBuilder& b);

// Deterministic pseudo-random weights in [-scale, scale] (a fixed LCG, so built-in models are the same
// on every machine and run).
std::vector<float> pseudo_random(int64_t n, float scale, uint32_t seed);

}  // namespace npusim::compiler::detail
