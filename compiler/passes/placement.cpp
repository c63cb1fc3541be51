// Placement: which unit runs each node. The op table (compiler/ops) is the one source of truth for
// which ops run where; this pass applies the table's stated constraints to the node as lowered (its
// operands' constness, layouts, types), so the back end never re-derives them.
#include <stdexcept>

#include "compiler/ops/op_table.h"
#include "compiler/passes/pass_util.h"
#include "compiler/passes/passes.h"

namespace npusim::compiler::passes {
namespace {

bool float_operand(const Graph& g, const std::string& v) { return !v.empty() && is_float(g.value(v).dtype); }

bool in_onnx_order(const Graph& g, const std::string& v) {
  const Value& val = g.value(v);
  if (val.layout.empty()) return true;
  std::vector<int> order;
  for (size_t k = 0; k < val.layout.size(); ++k)
    if (val.shape[val.layout[k]] != 1) order.push_back(val.layout[k]);
  for (size_t k = 1; k < order.size(); ++k)
    if (order[k] < order[k - 1]) return false;
  return true;
}

// A Transpose that only moves dims of extent 1 (the others keep their order: [1, S, D] -> [S, 1, D], as
// torch's batch-first <-> sequence-first swaps around attention), on ONNX-order data both sides: the
// bytes are the same in the same order, so it is a Reshape (a free alias, no instructions).
bool moves_only_unit_dims(const Graph& g, const Node& n) {
  if (n.op_type != "Transpose" || !n.has_input(0) || n.outputs.size() != 1) return false;
  const Value& x = g.value(n.inputs[0]);
  if (!x.fully_known() || !in_onnx_order(g, n.inputs[0]) || !in_onnx_order(g, n.outputs[0])) return false;
  const size_t r = x.shape.size();
  std::vector<int64_t> perm = n.attr_ints("perm", {});
  if (perm.empty())
    for (size_t i = 0; i < r; ++i) perm.push_back(static_cast<int64_t>(r - 1 - i));
  if (perm.size() != r) return false;
  int64_t last = -1;
  for (int64_t d : perm) {
    if (d < 0 || d >= static_cast<int64_t>(r)) return false;
    if (x.shape[static_cast<size_t>(d)] == 1) continue;
    if (d < last) return false;
    last = d;
  }
  return true;
}

}  // namespace

Placement placement_of(const Graph& g, const Node& n) {
  if (n.domain == kNpuDomain) {
    // Gelu: VecOp gelu; Silu: sigmoid + mul; RMSNormalization: the row-wise kernel or its pieces; layout
    // conversions: VecOp transpose.
    if (n.op_type == "Gelu" || n.op_type == "Silu" || n.op_type == "RMSNormalization" ||
        n.op_type == "Transpose")
      return Placement::kNpuVector;
    return Placement::kHost;
  }
  if (!n.domain.empty()) return Placement::kHost;
  const OpSupport* row = find_op(n.op_type);
  if (!row) return Placement::kHost;
  const std::string& op = n.op_type;
  // Constraints the table states in words, checked on the node.
  if (op == "Gather" && !detail::constant_of(g, n.inputs[0]) && !detail::constant_of(g, n.inputs[1]))
    return Placement::kHost;
  if (op == "Cast") return detail::constant_of(g, n.inputs[0]) ? Placement::kFree : Placement::kNpuVector;
  if (op == "Reshape" || op == "Flatten" || op == "Squeeze" || op == "Unsqueeze")
    return in_onnx_order(g, n.inputs[0]) ? Placement::kFree : Placement::kNpuVector;
  if (moves_only_unit_dims(g, n)) return Placement::kFree;
  if ((op == "Conv" || op == "ConvTranspose" || op == "Gemm" || op == "MatMul") &&
      !(float_operand(g, n.inputs[0]) && float_operand(g, n.inputs[1])))
    return Placement::kHost;
  return row->placement;
}

void assign_placement(Graph& g) {
  for (auto& n : g.nodes) n.attrs[kPlacement].value = std::string(placement_name(placement_of(g, n)));
}

}  // namespace npusim::compiler::passes

namespace npusim::compiler {

std::optional<Placement> assigned_placement(const Node& n) {
  const std::string text = n.attr_string(kPlacement, "");
  if (text.empty()) return std::nullopt;
  const std::optional<Placement> p = parse_placement(text);
  if (!p)
    throw std::logic_error("node '" + n.name + "': " + kPlacement + " is '" + text + "', not a placement");
  return p;
}

}  // namespace npusim::compiler
