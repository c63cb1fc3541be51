#pragma once
// `--batch N` on a model exported at a fixed batch: the constant shapes that carry the exported batch follow
// N where that is provable, and the import stops with one sentence where it is not, so a run never
// reports the exported batch's work under the requested batch.
#include <onnx/onnx_pb.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <unordered_set>

namespace npusim::compiler::detail {

// What the model recorded before --batch rebinds its inputs.
struct ExportedBatch {
  int64_t batch = 0;                       // the runtime inputs' common static first dimension; 0: none
  std::map<std::string, int64_t> outputs;  // each graph output's recorded static first dimension
};

// Drops the intermediate and output shapes recorded in `g`, so that shape inference recomputes them from
// the inputs instead of reporting a conflict with the exporter's.
void forget_inferred_shapes(onnx::GraphProto& g);

ExportedBatch exported_batch(const onnx::GraphProto& g, const std::unordered_set<std::string>& initializers);

// After shape inference of the rebound model (`infer` runs it again): each Reshape whose constant shape
// (an initializer, or shape arithmetic on constants and sized tensors: Shape, Gather, Unsqueeze, Concat,
// Slice, ...) starts with the exported batch while its input starts with `batch`, and which resolves
// against the input once that first entry is `batch`, gets that shape; and each operand that sizes an
// output (a Reshape's or Expand's shape, a Slice's bounds) computed from sized tensors becomes a constant,
// so that a model traced with a symbolic batch and declared at batch 1 sizes its views at `batch`. A
// Reshape whose constant shape still does not fit its input, a Concat whose inputs no longer agree, and a
// graph output that had the exported batch in front and does not have `batch` now, are a ModelError naming
// the node or output.
void follow_batch(onnx::ModelProto& model, int64_t batch, const ExportedBatch& exported,
                  const std::string& model_name, const std::function<void()>& infer);

}  // namespace npusim::compiler::detail
