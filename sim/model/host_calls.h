#pragma once
// Executing the compiler's host fallbacks on real bytes: a HOSTCALL's node runs on the FP32 reference
// interpreter, reading its inputs from and writing its outputs to the functional model's DRAM. Used by
// functional runs of the CLI and by the compiler's functional tests (one implementation for both).
#include "arch/datapath/state.h"
#include "compiler/backend/compile.h"

namespace npusim::sim {

// A DRAM tensor as the interpreter sees it: logical (ONNX) order; integer and bool values exact.
compiler::Tensor read_host_tensor(const arch::datapath::MachineState& state, const compiler::HostTensor& t);
void write_host_tensor(arch::datapath::MachineState& state, const compiler::HostTensor& t,
                       const compiler::Tensor& value);

// Runs one host call. Throws std::runtime_error naming the node if the interpreter fails.
void run_host_call(const compiler::HostCallInfo& call, arch::datapath::MachineState& state);

// A handler for MachineState::set_host_op_handler that services every host op of `result` (which
// must outlive it).
arch::datapath::HostOpHandler host_op_handler(const compiler::CompileResult& result);

}  // namespace npusim::sim
