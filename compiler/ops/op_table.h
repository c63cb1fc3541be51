#pragma once
// The operator support table: for every ONNX op npusim knows, where it runs on the NPU and under
// which constraints. `npusim ops` prints it, codegen places nodes by it and the reference
// interpreter implements exactly these ops, so the three can never disagree (a test checks that
// every row has an interpreter kernel and every kernel a row).
#include <optional>
#include <string_view>
#include <vector>

namespace npusim::compiler {

enum class Placement {
  kNpuMatrix,  // the systolic array (GEMM-shaped work)
  kNpuVector,  // the vector unit (element-wise, activations, norms, pools, reductions, data movement)
  kFree,       // no work at run time: a view or metadata change folded by the compiler
  kHost,       // falls back to the host CPU (HOSTCALL)
};

std::string_view to_string(Placement p);
// The short names of the npu.placement attribute, mapping files, the report's layers[].mapping.placement
// and `npusim compile -v`: "matrix", "vector", "free", "host".
std::string_view placement_name(Placement p);
std::optional<Placement> parse_placement(std::string_view text);

struct OpSupport {
  std::string_view op;  // ONNX op type (default domain)
  Placement placement;
  std::string_view constraints;  // when the placement holds; otherwise the node falls back to host
};

// All rows, sorted by op name.
const std::vector<OpSupport>& op_table();
// The row for `op`, or nullptr when npusim does not support it at all.
const OpSupport* find_op(std::string_view op);

}  // namespace npusim::compiler
