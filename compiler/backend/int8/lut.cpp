// Int8 element-wise functions of one input as a lookup table on the codes (int8.h: lut_applies).
#include <fmt/format.h>

#include "compiler/backend/int8/int8.h"
#include "compiler/quant/emulate.h"

namespace npusim::compiler::backend {

namespace {
bool is_code8(isa::DType t) { return t == isa::DType::kInt8 || t == isa::DType::kUint8; }
}  // namespace

bool lut_applies(const Context& c, const Node& n) {
  if (!c.options.plan || c.options.plan->int8_vector != quant::Int8Vector::kInteger) return false;
  if (n.inputs.empty() || n.outputs.empty()) return false;
  const quant::QParams* qx = c.codes_of(n.inputs[0]);
  const quant::QParams* qy = c.codes_of(n.outputs[0]);
  return qx && qy && is_code8(qx->dtype) && is_code8(qy->dtype) && quant::is_code_function(c.g, n);
}

uint64_t lut_segment(Context& c, const std::vector<int32_t>& table) {
  std::vector<uint8_t> bytes(table.size());
  for (size_t k = 0; k < table.size(); ++k) bytes[k] = static_cast<uint8_t>(table[k] & 0xff);
  return c.add_data(std::move(bytes));
}

Context::VecArgs begin_lut(Context& c, const Node& n) {
  const quant::QParams& qx = *c.codes_of(n.inputs[0]);
  const quant::QParams& qy = *c.codes_of(n.outputs[0]);
  const uint64_t addr = lut_segment(c, quant::activation_lut(c.g, n, qx, qy));
  const auto entries = static_cast<uint64_t>(isa::kLutEntries);
  c.load(isa::Buffer::kAccumulator, kLutSlot, Range{kDram, addr, addr + entries}, addr, qy.dtype,
         {isa::kLutEntries, 1, 1, 1}, {0, 0, 0});
  c.act = qx.dtype;
  c.esize = 1;
  c.plan->int8_scheme = "lut";
  Context::VecArgs v;
  v.op = isa::VecOp::kLut;
  v.in = qx.dtype;
  v.out = qy.dtype;
  v.src2_buf = isa::Buffer::kAccumulator;
  v.src2 = kLutSlot;
  return v;
}

}  // namespace npusim::compiler::backend
