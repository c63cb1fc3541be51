#pragma once
// The compiler's graph IR: what the importers produce and every later stage (passes, tiling,
// memory planning, codegen, the reference interpreter) reads.
//
// Values are named (ONNX's convention: a tensor is identified by its name, an empty name is an
// absent optional input). Graph::values holds every tensor's type, shape and, for constants
// (initializers, folded values), its data. Graph::nodes is kept in topological order; passes that
// add or reorder nodes call Graph::topological_sort() (or insert in order) before handing on.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "compiler/ir/tensor.h"

namespace npusim::compiler {

class Graph;

// A node attribute with its ONNX type. Graph-valued attributes (If/Loop/Scan bodies) are Node::subgraphs.
struct Attribute {
  enum class Kind { kInt, kFloat, kString, kInts, kFloats, kStrings, kTensor };
  std::variant<int64_t, float, std::string, std::vector<int64_t>, std::vector<float>,
               std::vector<std::string>, Tensor>
      value;

  Kind kind() const { return static_cast<Kind>(value.index()); }
  // Typed access; throws std::bad_variant_access on a kind mismatch.
  int64_t i() const { return std::get<int64_t>(value); }
  float f() const { return std::get<float>(value); }
  const std::string& s() const { return std::get<std::string>(value); }
  const std::vector<int64_t>& ints() const { return std::get<std::vector<int64_t>>(value); }
  const std::vector<float>& floats() const { return std::get<std::vector<float>>(value); }
  const std::vector<std::string>& strings() const { return std::get<std::vector<std::string>>(value); }
  const Tensor& t() const { return std::get<Tensor>(value); }
};

// One operator application. `inputs` may contain "" for an omitted optional input.
struct Node {
  std::string op_type;
  std::string name;    // unique within the graph (the importer names unnamed nodes)
  std::string domain;  // "" = the default ONNX domain
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
  std::map<std::string, Attribute> attrs;
  // Graph-valued attributes (If's then_branch/else_branch, Loop's and Scan's body), by attribute name.
  // A subgraph's `inputs` are its formal inputs (Loop/Scan); the names it reads from the enclosing
  // scope are the node's captures: the last kCaptures.size() entries of `inputs` hold the enclosing
  // values, kCaptures (a strings attribute) the names the subgraphs use for them, in the same order.
  // Passes may rename those inputs like any other; the subgraphs keep their own names.
  std::map<std::string, std::shared_ptr<const Graph>> subgraphs{};

  bool has_attr(const std::string& key) const { return attrs.count(key) != 0; }
  int64_t attr_int(const std::string& key, int64_t fallback) const;
  float attr_float(const std::string& key, float fallback) const;
  std::string attr_string(const std::string& key, const std::string& fallback) const;
  std::vector<int64_t> attr_ints(const std::string& key, const std::vector<int64_t>& fallback = {}) const;
  std::vector<float> attr_floats(const std::string& key, const std::vector<float>& fallback = {}) const;
  // Number of inputs actually given (trailing omitted optionals excluded).
  size_t num_given_inputs() const;
  bool has_input(size_t k) const { return k < inputs.size() && !inputs[k].empty(); }
};

// The attribute listing a control-flow node's captured names (Node::subgraphs).
inline constexpr const char* kCaptures = "npu.captures";
// The number of inputs of `n` that are its own (not captures of its subgraphs).
size_t num_formal_inputs(const Node& n);

// A tensor of the graph. shape_known=false means ONNX shape inference could not determine the
// rank; a dimension of -1 means the rank is known but that dimension is not.
struct Value {
  std::string name;
  DataType dtype = DataType::kUndefined;
  Shape shape;
  bool shape_known = false;
  std::shared_ptr<const Tensor> constant;  // set for initializers and folded constants
  // Physical order chosen by the layout pass (compiler/passes/lowered.h): the logical dims in memory
  // order, outermost first, e.g. {0, 2, 3, 1} = NHWC for a logical NCHW tensor. Empty = ONNX order.
  std::vector<int> layout;
  // The model fixes this value's representation (a quantization point of a pre-quantized model,
  // compiler/quant/qdq.h): no pass may fuse it away (epilogue fusion and BatchNorm folding stop here).
  bool materialized = false;

  bool is_constant() const { return constant != nullptr; }
  bool fully_known() const;  // shape known with every dimension >= 0
};

class Graph {
 public:
  std::string name;
  // Opset version of the default ONNX domain (ops' semantics depend on it, e.g. Softmax's axis).
  int64_t opset = 17;
  std::vector<Node> nodes;  // topological order
  std::map<std::string, Value> values;
  std::vector<std::string> inputs;  // runtime inputs (not constants)
  std::vector<std::string> outputs;
  // The runtime 4-D inputs and outputs are stored NHWC, as the array reads and writes feature maps (a
  // SCALE-Sim topology: its rows are independent layers on pre-padded maps, so nothing converts them).
  // Their program bindings list the dimensions in that memory order.
  bool nhwc_io = false;

  // The value called `name`; throws std::out_of_range naming it when absent.
  const Value& value(const std::string& name) const;
  Value& value(const std::string& name);
  bool has_value(const std::string& name) const { return values.count(name) != 0; }
  // The value, creating an empty entry if it does not exist yet.
  Value& ensure_value(const std::string& name);
  // Add a constant value (replacing any existing value of that name).
  Value& add_constant(const std::string& name, Tensor t);

  // Index of the node producing `value` in `nodes`, or -1 (graph input, constant or unknown).
  int producer(const std::string& value) const;
  // Indices of the nodes reading `value`.
  std::vector<int> consumers(const std::string& value) const;

  // Reorder `nodes` topologically (stable: keeps the current order where it is already valid).
  // Throws std::runtime_error naming a node on a cycle or an input no one produces.
  void topological_sort();
  // Throws std::runtime_error with a sentence when an invariant is broken: node inputs produced
  // before use, every value referenced has an entry, names unique, outputs produced.
  void verify() const;
  // A node name not used yet, derived from `base`.
  std::string unique_node_name(const std::string& base) const;
  std::string unique_value_name(const std::string& base) const;
};

// `npusim --graphs`' line width: a terminal's, rather than ONNX paths' 400 characters.
inline constexpr size_t kGraphTextWidth = 120;

// Human-readable dump: inputs, constants (shape only), one line per node with input/output shapes and
// attributes, outputs. `npusim compile --graphs` prints it after every pass. With a `width` (> 0) no line
// is longer: a node that does not fit puts its outputs and its attributes on lines of their own, and each
// part wraps at spaces (isa::wrap_lines: names stay whole unless one is longer than a line).
std::string to_string(const Graph& g, size_t width = 0);
std::string to_string(const Attribute& a);

// A graph transformation with a name (for -v output and error messages).
struct Pass {
  std::string name;
  std::function<void(Graph&)> run;
};

// Runs passes in order; after each, re-verifies the graph and calls the observer (the CLI's -v
// printer). A pass that breaks the graph's invariants is reported by name.
class PassManager {
 public:
  using Observer = std::function<void(const std::string& pass_name, const Graph&)>;
  void add(Pass p) { passes_.push_back(std::move(p)); }
  void add(std::string name, std::function<void(Graph&)> run) {
    passes_.push_back({std::move(name), std::move(run)});
  }
  void set_observer(Observer o) { observer_ = std::move(o); }
  const std::vector<Pass>& passes() const { return passes_; }
  // Throws std::runtime_error "pass 'NAME' left an invalid graph: ..." on a broken invariant.
  void run(Graph& g) const;

 private:
  std::vector<Pass> passes_;
  Observer observer_;
};

}  // namespace npusim::compiler
