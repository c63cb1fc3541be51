#pragma once
// Internal to compiler/passes: small graph-editing helpers the passes share.
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "compiler/ir/graph.h"

namespace npusim::compiler::passes::detail {

// The constant tensor of `name`, or nullptr when it is not a constant (or the name is empty).
const Tensor* constant_of(const Graph& g, const std::string& name);

// The nodes that replace the If `node` when it takes the then (or else) branch: the branch's nodes with
// their values renamed into `g` (added to g.values; the captured names read the If's inputs, the branch
// outputs write the If's outputs). The caller puts them where the If was.
std::vector<Node> inline_branch(Graph& g, const Node& node, bool then_branch);

// True when `name` is a graph output.
bool is_graph_output(const Graph& g, const std::string& name);

// Number of node inputs reading `name` (a node reading it twice counts twice).
int use_count(const Graph& g, const std::string& name);

// The index of the only node reading `name`, when exactly one input of one node reads it and it is not
// a graph output; otherwise -1. (The precondition for fusing the producer into that consumer.)
int sole_consumer(const Graph& g, const std::string& name);

// producer() / sole_consumer() answered from maps built once (Graph's own lookups scan every node).
// Valid while the edits keep each value's producer index and its readers' indices, e.g. when a fused
// node replaces the last node of the chain it absorbs and the others are only marked dead.
class UseIndex {
 public:
  explicit UseIndex(const Graph& g);
  int producer(const std::string& v) const;
  int sole_consumer(const std::string& v) const;

 private:
  std::unordered_map<std::string, int> producer_, reader_, uses_;
  std::unordered_set<std::string> outputs_;
};

// The first float value of a constant whose every element is equal (a scalar in any shape), if so; nullopt
// for a shape-only constant (Tensor::shape_only), whose values are not known.
std::optional<float> scalar_constant(const Graph& g, const std::string& name);

// A constant `c` applied element-wise to value `v` that varies only along v's axis `axis`, as one value per
// index of that axis ([v.shape[axis]], a scalar repeated); nullopt when it does not broadcast that way to
// v's shape or is not a float constant with values.
std::optional<Tensor> channel_constant(const Graph& g, const std::string& v, size_t axis, const Tensor& c);

// The channel axis of matrix node m's output: 1 for Conv / ConvTranspose, the last for Gemm / MatMul.
size_t output_channel_axis(const Graph& g, const Node& m);

// Adds a new constant under a fresh name derived from `base`; returns the name.
std::string add_constant(Graph& g, const std::string& base, Tensor t);

// Replaces node n's input k by a new constant holding t, named after the old one plus `suffix`; drops the
// old constant when nothing else reads it.
void replace_constant(Graph& g, Node& n, size_t k, Tensor t, const std::string& suffix);

// Adds a new non-constant value with a fresh name derived from `base`; returns the name.
std::string add_value(Graph& g, const std::string& base, DataType dtype, const Shape& shape,
                      bool shape_known = true);

// A node with a fresh name derived from `base`.
Node make_node(const Graph& g, const std::string& op_type, const std::string& base,
               std::vector<std::string> inputs, std::vector<std::string> outputs);

// Replaces every node input reading `from` by `to`.
void replace_uses(Graph& g, const std::string& from, const std::string& to);

// Erases the nodes whose flag is set (keeps order).
void erase_nodes(Graph& g, const std::vector<bool>& dead);

// Removes values that are neither graph inputs/outputs nor referenced by any node.
void drop_unreferenced_values(Graph& g);

// An int64 1-D constant (shape arithmetic, axes inputs).
Tensor int64_vector(const std::vector<int64_t>& v);

// Adds a reduction node over `axes` (keepdims=1 unless said otherwise), spelling the axes the way g.opset
// wants (attribute before opset 18, ReduceSum's input from opset 13). Returns the node (not yet inserted).
Node make_reduce(Graph& g, const std::string& op_type, const std::string& base, const std::string& input,
                 const std::vector<int64_t>& axes, const std::string& output, bool keepdims = true);

// The axes of a Reduce* node (attribute or input), normalised to [0, rank); nullopt when not constant.
std::optional<std::vector<int64_t>> reduce_axes(const Graph& g, const Node& n, int64_t rank);

// Normalise a possibly negative axis.
inline int64_t norm_axis(int64_t axis, int64_t rank) { return axis < 0 ? axis + rank : axis; }

}  // namespace npusim::compiler::passes::detail
