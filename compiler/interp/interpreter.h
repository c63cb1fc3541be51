#pragma once
// The FP32 reference interpreter: runs a graph IR with ONNX semantics (broadcasting, attribute
// defaults per opset) on the host. It is the numerical reference the NPU's functional mode and the
// accuracy report compare against, validated on ONNX's own node tests.
#include <functional>
#include <map>
#include <stdexcept>
#include <string>

#include "compiler/ir/graph.h"

namespace npusim::compiler {

// A graph the interpreter cannot run (unsupported op or dtype, missing input, invalid attribute or
// shapes at run time); the message names the node.
class InterpretError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Called after each node with its outputs (in node.outputs order; an omitted optional output is an
// empty tensor). Lets the accuracy report compare per layer without keeping every tensor.
using NodeObserver = std::function<void(const Node& node, const std::vector<const Tensor*>& outputs)>;

// Runs `g` on `inputs` (one per graph input, by name) and returns the graph outputs by name.
std::map<std::string, Tensor> interpret(const Graph& g, std::map<std::string, Tensor> inputs,
                                        const NodeObserver& observer = nullptr);

// Same, but returns every value computed (graph inputs and every node output), by name.
std::map<std::string, Tensor> interpret_all(const Graph& g, std::map<std::string, Tensor> inputs);

// True when the interpreter has a kernel for `op_type` in the default ONNX domain.
bool interpreter_supports(const std::string& op_type);

}  // namespace npusim::compiler
