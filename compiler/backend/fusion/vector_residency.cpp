#include "compiler/backend/fusion/vector_residency.h"

#include <algorithm>
#include <string>
#include <vector>

#include "compiler/backend/fusion/residency.h"

namespace npusim::compiler::backend {

namespace {

// The element-wise ops whose stream (vector/elementwise.cpp, lower_binary) can write its tiles on chip.
bool elementwise_binary(const Node& n) {
  static const char* const kOps[] = {"Add", "Sum", "Sub", "Mul", "Div", "Max", "Min", "Pow"};
  return n.domain.empty() && n.outputs.size() == 1 &&
         std::any_of(std::begin(kOps), std::end(kOps), [&](const char* o) { return n.op_type == o; });
}

}  // namespace

std::string rowwise_reads_on_chip(const Context& c, size_t i, bool* others) {
  const Node& p = c.g.nodes[i];
  if (!elementwise_binary(p)) return "not an element-wise layer";
  if (i + 1 >= c.g.nodes.size()) return "no layer after it";
  const Node& q = c.g.nodes[i + 1];
  if (q.op_type != "LayerNormalization" || !q.domain.empty())
    return "the next layer is not a LayerNormalization";
  const std::string& v = p.outputs[0];
  if (q.inputs.empty() || q.inputs[0] != v) return "the next layer does not read the output as its input";
  for (size_t k = 1; k < q.inputs.size(); ++k) {
    if (q.inputs[k] == v) return "the next layer reads the output twice";
  }
  if (c.folding.folded(p) || c.folding.folded(q)) return "the output is written into a Concat's buffer";
  for (const std::string& o : c.g.outputs) {
    if (o == v) return "the output is a graph output";
  }
  const std::string rows = rows_fit_on_chip(c, v);
  if (!rows.empty()) return rows;
  *others = c.g.consumers(v).size() != 1;
  return "";
}

void plan_vector_rows(Context& c, size_t i) {
  if (!c.options.keep_on_chip || c.g.nhwc_io || c.shared_capacity() > 0) return;
  // Nothing else held: a value left for this layer, one held for a residual reader, an SE block's input.
  if (!c.fusion.keep_output.empty() || c.fusion.on_chip.pending || !c.fusion.residual.value.empty() ||
      c.fusion.input_held > 0)
    return;
  const Node& p = c.g.nodes[i];
  const LayerMapping* imposed = c.options.mapping ? c.options.mapping->find(p.name) : nullptr;
  if (imposed && imposed->on_chip == false) return;
  bool others = false;
  if (!rowwise_reads_on_chip(c, i, &others).empty()) return;
  const DramTensor& y = c.tensor(p.outputs[0]);
  const int64_t bytes = round64(num_elements(y.shape) * isa::dtype_bytes(y.dtype));
  const int64_t cap = scratchpad_capacity(c.config, isa::Buffer::kInput);
  const int64_t reserved = c.fusion.input_reserved + bytes;
  if (4 * reserved > 3 * cap) return;
  c.fusion.set_keep(p.outputs[0], false, others);
  c.fusion.keep_addr = static_cast<uint64_t>(cap - reserved);
  c.fusion.input_reserved = reserved;
}

std::optional<uint64_t> vector_rows_planned(const Context& c, const DramTensor& y) {
  if (c.fusion.keep_output.empty() || c.fusion.on_chip.pending) return std::nullopt;
  const DramTensor& k = c.tensor(c.fusion.keep_output);
  if (k.addr != y.addr || k.range().end != y.range().end || k.dtype != y.dtype) return std::nullopt;
  return c.fusion.keep_addr;
}

void vector_rows_written(Context& c, const DramTensor& y, bool* stored) {
  OnChipValue o = rows_on_chip(c.fusion.keep_output, y, c.fusion.keep_addr, c.layer, 0);
  o.in_dram = c.fusion.keep_in_dram;
  o.residual_reader = -1;
  o.next_reads = true;
  *stored = o.in_dram;
  c.fusion.on_chip = o;
}

bool vector_rows_pending(const Context& c) {
  return c.fusion.on_chip.pending && c.fusion.on_chip.producer == c.layer;
}

int64_t free_planned_rows(Context& c, const DramTensor& y) {
  const int64_t reserved = c.fusion.input_reserved;
  c.fusion.input_reserved =
      std::max<int64_t>(0, reserved - round64(num_elements(y.shape) * isa::dtype_bytes(y.dtype)));
  return reserved;
}

void restore_planned_rows(Context& c, int64_t reserved) { c.fusion.input_reserved = reserved; }

std::optional<uint64_t> rows_read_in_place(Context& c, const std::string& value, isa::DType t) {
  OnChipValue& v = c.fusion.on_chip;
  if (!v.pending || v.value != value || v.block != 0 || v.pad.w > 0 || v.dtype != t ||
      v.residual_reader >= 0 || v.producer + 1 != c.layer)
    return std::nullopt;
  const uint64_t addr = v.addr;
  read_in_place(c, v);
  return addr;
}

}  // namespace npusim::compiler::backend
