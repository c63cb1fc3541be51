#pragma once
// The host lowering (docs/backend.md, "Host fallback"): a node the NPU does not run becomes one HOSTCALL
// with its tensors' bytes and an estimate of its CPU operations, a Program::host_ops entry, a Fallback
// with its cost and a HostCallInfo saying where its tensors live, so a functional run can evaluate it
// with the reference interpreter.
#include <string>

#include "compiler/backend/core/context.h"
#include "compiler/ir/graph.h"

namespace npusim::compiler::backend {

// Emits node n as a HOSTCALL, `reason` saying why it runs on the host (the Fallback's and the mapping
// line's). Throws CompileError when its CPU operations overflow the instruction's field.
void lower_host(Context& c, const Node& n, const std::string& reason);

}  // namespace npusim::compiler::backend
