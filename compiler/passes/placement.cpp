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

// A Transpose whose output, in its layout, holds the bytes in the order its input holds them in its own
// (the dims of extent above 1 appear in the same memory order): [1, S, D] -> [S, 1, D] in ONNX order, as
// torch's batch-first <-> sequence-first swaps around attention, or NHWC-stored [N, C, H, W] -> ONNX-order
// [N, H, W, C], as ConvNeXt's permutes around its LayerNorms (compiler/passes/layout.cpp lets such a
// Transpose read its input's layout). It moves nothing: a free alias, no instructions.
bool keeps_bytes_in_place(const Graph& g, const Node& n) {
  if (n.op_type != "Transpose" || !n.has_input(0) || n.outputs.size() != 1) return false;
  const Value& x = g.value(n.inputs[0]);
  const Value& y = g.value(n.outputs[0]);
  if (!x.fully_known()) return false;
  const size_t r = x.shape.size();
  std::vector<int64_t> perm = n.attr_ints("perm", {});
  if (perm.empty())
    for (size_t i = 0; i < r; ++i) perm.push_back(static_cast<int64_t>(r - 1 - i));
  if (perm.size() != r || (!x.layout.empty() && x.layout.size() != r) ||
      (!y.layout.empty() && y.layout.size() != r))
    return false;
  for (int64_t d : perm)
    if (d < 0 || d >= static_cast<int64_t>(r)) return false;
  // The input's dims of extent above 1 in memory order: as the input stores them, and as the output does.
  std::vector<int64_t> stored, written;
  for (size_t k = 0; k < r; ++k) {
    const int64_t dx = x.layout.empty() ? static_cast<int64_t>(k) : x.layout[k];
    const int64_t dy = perm[static_cast<size_t>(y.layout.empty() ? static_cast<int>(k) : y.layout[k])];
    if (x.shape[static_cast<size_t>(dx)] != 1) stored.push_back(dx);
    if (x.shape[static_cast<size_t>(dy)] != 1) written.push_back(dy);
  }
  return stored == written;
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
  if (keeps_bytes_in_place(g, n)) return Placement::kFree;
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
