// The binding stage (bind_tensors.h).
#include "compiler/backend/stages/bind_tensors.h"

#include <fmt/format.h>

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "compiler/backend/fusion/post_affine.h"
#include "compiler/backend/fusion/residency.h"
#include "compiler/backend/stages/plan_memory.h"

namespace npusim::compiler::backend {

void bind_tensors(Context& c) {
  const Graph& g = c.g;
  CompileResult& result = c.result;
  isa::Program& prog = c.program;
  auto bind = [&](const std::string& name, isa::TensorBinding::Role role) {
    const Value& v = g.value(name);
    isa::TensorBinding b;
    b.name = name;
    b.role = role;
    b.dtype = v.is_constant() ? storage_dtype(v, c.act) : c.tensor(name).dtype;
    if (v.is_constant()) {
      if (b.dtype == isa::DType::kInt32) {
        // Integer and bool constants are bound as int32: write them as such.
        const std::vector<int64_t> iv = v.constant->to_int_vector();
        std::vector<uint8_t> bytes(iv.size() * 4);
        for (size_t k = 0; k < iv.size(); ++k) {
          const int32_t x = static_cast<int32_t>(iv[k]);
          std::memcpy(&bytes[k * 4], &x, 4);
        }
        b.dram_addr = c.add_data(std::move(bytes));
      } else {
        b.dram_addr = c.add_constant(*v.constant, b.dtype);
      }
    } else {
      const DramTensor& t = c.tensor(name);
      if (!t.layout.empty()) {
        bool identity = true;
        for (size_t k = 0; k < t.layout.size(); ++k) identity &= t.layout[k] == static_cast<int>(k);
        if (!identity && !g.nhwc_io) {
          throw CompileError(fmt::format("graph {} '{}' is not in ONNX order after lowering",
                                         role == isa::TensorBinding::Role::kInput ? "input" : "output",
                                         name));
        }
      }
      b.dram_addr = t.addr;
    }
    // Dimensions in memory order (Graph::nhwc_io binds NHWC; everything else is in ONNX order).
    const std::vector<int> phys = v.is_constant() ? std::vector<int>{} : c.tensor(name).layout;
    for (size_t k = 0; k < v.shape.size(); ++k)
      b.dims.push_back(static_cast<uint64_t>(v.shape[phys.empty() ? k : static_cast<size_t>(phys[k])]));
    prog.tensors.push_back(b);
  };
  for (const auto& in : g.inputs) {
    if (!g.value(in).is_constant()) bind(in, isa::TensorBinding::Role::kInput);
  }
  for (const auto& out : g.outputs) bind(out, isa::TensorBinding::Role::kOutput);

  const std::map<std::string, uint64_t>& on_chip = kept_on_chip(c);  // never in DRAM (fusion/residency.h)
  for (const auto& [name, t] : c.tensors) {
    if (written_nowhere(c, name)) continue;  // nowhere: its reader's map was applied on the way out
    if (!t.view_split.empty()) continue;     // no one stride a dim (strided_views.h's levels): not listed
    auto kept = on_chip.find(name);
    auto& list = kept == on_chip.end() ? result.values : result.on_chip;
    list.push_back({name, kept == on_chip.end() ? t.addr : kept->second, t.shape, t.layout, t.dtype,
                    g.value(name).dtype, t.view_strides});
    if (auto b = kept_blocks(c).find(name); kept != on_chip.end() && b != kept_blocks(c).end())
      list.back().block = b->second;
    if (auto st = kept_strides(c).find(name); kept != on_chip.end() && st != kept_strides(c).end())
      list.back().strides = st->second;  // padded (fusion/residency.h)
  }
  uint64_t wbytes = 0;
  for (const auto& d : prog.data) wbytes += d.size();
  result.memory.weight_bytes = wbytes;
  result.memory.scratch_bytes = c.scratch_end_ - (uint64_t{1} << 38);
}

}  // namespace npusim::compiler::backend
