// The host lowering (host_call.h).
#include "compiler/backend/host/host_call.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "compiler/backend/result.h"
#include "isa/timing/units.h"

namespace npusim::compiler::backend {

namespace {

int64_t host_cpu_ops(const Graph& g, const Node& n) {
  int64_t in = 0, out = 0;
  for (const auto& s : n.inputs) {
    if (!s.empty() && g.has_value(s) && g.value(s).fully_known()) in += num_elements(g.value(s).shape);
  }
  for (const auto& s : n.outputs) {
    if (!s.empty() && g.has_value(s) && g.value(s).fully_known()) out += num_elements(g.value(s).shape);
  }
  if ((n.op_type == "Conv" || n.op_type == "ConvTranspose" || n.op_type == "Gemm" || n.op_type == "MatMul") &&
      n.inputs.size() >= 2 && g.value(n.inputs[1]).fully_known()) {
    // 2 ops per MAC: output elements x reduction length.
    const Shape& w = g.value(n.inputs[1]).shape;
    int64_t red = 1;
    if (n.op_type == "Conv" || n.op_type == "ConvTranspose") {
      for (size_t d = 1; d < w.size(); ++d) red *= w[d];
    } else if (w.size() >= 2) {
      red = w[w.size() - 2];
    }
    return 2 * out * red;
  }
  return std::max<int64_t>(1, in + 4 * out);
}

}  // namespace

void lower_host(Context& c, const Node& n, const std::string& reason) {
  c.spill_on_chip();  // the host reads DRAM
  CompileResult& r = c.result;
  HostCallInfo info;
  info.host_op = static_cast<uint32_t>(c.program.host_ops.size());
  info.node = n;
  info.opset = c.g.opset;
  std::vector<Range> reads, writes;
  int64_t in_bytes = 0, out_bytes = 0;
  for (const auto& s : n.inputs) {
    if (s.empty()) continue;
    const Value& v = c.g.value(s);
    if (v.is_constant()) {
      info.constants.push_back({s, *v.constant});
      in_bytes += num_elements(v.shape) * std::max<int64_t>(1, element_size(v.dtype));
      continue;
    }
    const DramTensor& t = c.tensor(s);
    info.inputs.push_back({s, t.addr, t.shape, t.layout, t.dtype, v.dtype, t.view_strides});
    reads.push_back(t.range());
    in_bytes += static_cast<int64_t>(t.bytes);
  }
  for (const auto& s : n.outputs) {
    if (s.empty() || !c.tensors.count(s)) continue;
    const DramTensor& t = c.tensor(s);
    info.outputs.push_back({s, t.addr, t.shape, t.layout, t.dtype, c.g.value(s).dtype, t.view_strides});
    writes.push_back(t.range());
    out_bytes += static_cast<int64_t>(t.bytes);
  }
  const int64_t ops = host_cpu_ops(c.g, n);
  constexpr int64_t kMaxCpuOps = (int64_t{1} << 48) - 1;  // HOSTCALL's cpu_ops field (isa/isa.h)
  if (ops > kMaxCpuOps) {
    throw CompileError(
        fmt::format("layer '{}' ({}) would run on the host ({}) and needs {:.3g} CPU operations, more "
                    "than one host call can carry ({:.3g}): the model is too large to simulate",
                    n.name, n.op_type, reason, static_cast<double>(ops), static_cast<double>(kMaxCpuOps)));
  }
  isa::Instruction h;
  h.opcode = isa::Opcode::kHostCall;
  h.set(isa::Field::kLayer, c.layer).set(isa::Field::kHostOp, info.host_op);
  h.set(isa::Field::kInBytes, in_bytes).set(isa::Field::kOutBytes, out_bytes).set(isa::Field::kCpuOps, ops);
  c.em.emit(h, reads, writes);
  c.program.host_ops.push_back({n.name, n.op_type, static_cast<uint64_t>(ops)});
  Fallback f;
  f.node = n.name;
  f.op = n.op_type;
  f.reason = reason;
  f.est_cycles =
      isa::timing::host_cycles(in_bytes, out_bytes, ops, c.config.host, c.config.frequency_mhz).total();
  c.plan->est_cycles = f.est_cycles;
  c.plan->mapping = "HOSTCALL: " + reason;
  c.plan->instructions = 1;
  r.fallbacks.push_back(f);
  r.host_calls.push_back(std::move(info));
}

}  // namespace npusim::compiler::backend
