// The vector-unit dispatcher: which lowering takes a vector or data-movement node (element-wise in
// elementwise.cpp, pooling and reductions in pooling.cpp, copies in data_movement.cpp).
#include <fmt/format.h>

#include <numeric>

#include "compiler/backend/core/context.h"
#include "compiler/backend/memory/movement.h"
#include "compiler/backend/vector/rowwise.h"
#include "compiler/backend/vector/vector_lowerings.h"

namespace npusim::compiler::backend {

bool lower_vector(Context& c, const Node& n, std::string* why) {
  const std::string& t = n.op_type;
  for (const auto& in : n.inputs) {
    if (!in.empty() && !c.g.value(in).is_constant() && !c.tensors.count(in)) {
      *why = "input without DRAM placement";
      return false;
    }
  }
  if (n.outputs.empty() || !c.tensors.count(n.outputs[0])) {
    *why = "output without DRAM placement";
    return false;
  }
  if (is_rowwise(n)) return lower_rowwise(c, n, why);
  // # int8: only lower_binary, lower_unary, lower_batchnorm, lower_pool, lower_concat and lower_transpose
  // convert codes PlanScope deferred to the tile loop.
  if (!c.codes.empty()) {
    Context::VecArgs probe;
    const bool binary =
        t == "Add" || t == "Sub" || t == "Mul" || t == "Div" || t == "Max" || t == "Min" || t == "Sum";
    const bool pool =
        t == "MaxPool" || t == "AveragePool" || t == "GlobalAveragePool" || t == "GlobalMaxPool";
    if (!binary && !pool && t != "Concat" && t != "Transpose" && t != "BatchNormalization" &&
        !unary_op(n, c, probe))
      throw std::logic_error("backend: int8 codes deferred to a lowering of " + t);
  }
  // Data movement: any element type (DMA copies bytes).
  if (t == "Transpose") return lower_transpose(c, n, why);
  if (t == "Concat")
    return lower_concat(c, n, why) || (c.codes.empty() && (why->clear(), lower_index_map(c, n, why)));
  if (t == "Slice") return lower_slice(c, n, why) || (why->clear(), lower_index_map(c, n, why));
  if (t == "Split") return lower_split(c, n, why) || (why->clear(), lower_index_map(c, n, why));
  if (t == "Pad") return lower_pad(c, n, why) || (why->clear(), lower_index_map(c, n, why));
  if (t == "Identity" || t == "Dropout") {
    std::vector<int64_t> perm(c.tensor(n.outputs[0]).shape.size());
    std::iota(perm.begin(), perm.end(), 0);
    c.plan->mapping = permute_copy(c, c.tensor(n.inputs[0]), c.tensor(n.outputs[0]), perm);
    return true;
  }
  if (!data_inputs(c, n).empty()) return lower_index_map(c, n, why);
  if (!is_float(c.g.value(n.outputs[0]).dtype)) {
    *why = "non-float result";
    return false;
  }
  if (t == "MaxPool" || t == "AveragePool" || t == "GlobalAveragePool" || t == "GlobalMaxPool") {
    return lower_pool(c, n, why);
  }
  if (t == "ReduceMean" || t == "ReduceSum" || t == "ReduceMax") return lower_reduce(c, n, why);
  if (t == "BatchNormalization") return lower_batchnorm(c, n, why);
  if (t == "Add" || t == "Sub" || t == "Mul" || t == "Div" || t == "Max" || t == "Min" || t == "Pow" ||
      t == "Sum") {
    return lower_binary(c, n, why);
  }
  if (lower_unary(c, n, why)) return true;
  if (why->empty()) *why = fmt::format("{} is not lowered to the vector unit by the back end", t);
  return false;
}

}  // namespace npusim::compiler::backend
