#include "compiler/backend/estimate/bounds.h"

#include <map>

#include "compiler/backend/estimate/model_limit.h"
#include "compiler/backend/estimate/roofline.h"
#include "compiler/backend/mapping/imposed.h"
#include "compiler/passes/absorbed.h"

namespace npusim::compiler {
namespace {

// The model's limit with each node in the precision of the layer that runs it (its own, or the layer it is
// fused into), and the model's inputs, outputs and unplaced nodes in the precision of most of its MACs
// (of most layers, when none has MACs). None when no layer's precision is known.
std::optional<backend::ModelLimit> limit_as_imported(const CompileResult& r, const Graph& imported,
                                                     const Graph& lowered, const isa::NpuConfig& config) {
  std::map<std::string, isa::DType> precision;
  std::map<isa::DType, std::pair<int64_t, int64_t>> weight;  // MACs, layers
  for (size_t i = 0; i < r.layers.size() && i < r.program.layers.size(); ++i) {
    const std::optional<isa::DType> p = r.program.layers[i].precision;
    if (!p) continue;
    precision[r.layers[i].name] = *p;
    weight[*p].first += r.layers[i].macs;
    ++weight[*p].second;
  }
  if (weight.empty()) return std::nullopt;
  for (const AbsorbedLayer& a : r.absorbed) {
    if (auto p = precision.find(a.into); p != precision.end()) precision.emplace(a.name, p->second);
  }
  const isa::DType model = std::max_element(weight.begin(), weight.end(), [](const auto& a, const auto& b) {
                             return a.second < b.second;
                           })->first;
  return backend::model_limit(
      imported, lowered,
      [&](const Node& n) {
        auto p = precision.find(n.name);
        return p == precision.end() ? model : p->second;
      },
      model, config);
}

}  // namespace

void bound_as_imported(CompileResult& r, const Graph& imported, const Graph& lowered,
                       const isa::NpuConfig& config, const MappingOverrides* mapping) {
  std::map<std::string, const Node*> original;
  std::map<std::string, int64_t> readers;
  for (const Node& n : imported.nodes) {
    original[n.name] = &n;
    for (const std::string& v : n.inputs) ++readers[v];
  }
  std::map<std::string, size_t> layer_of;
  // The program's own work: each layer's roof, and the whole program's with its units overlapping.
  const std::vector<std::optional<backend::Roofline>> compiled =
      backend::compiled_rooflines(r.program, config);
  std::optional<backend::Roofline> program;
  r.compiled_bound_cycles.reset();
  for (size_t i = 0; i < r.layers.size(); ++i) {
    LayerPlan& p = r.layers[i];
    layer_of[p.name] = i;
    p.compiled_bound_cycles.reset();
    if (i < compiled.size() && compiled[i] && p.placement != Placement::kHost) {
      p.compiled_bound_cycles = compiled[i]->bound_cycles();
      backend::Roofline& sum = program ? *program : program.emplace();
      sum.compute_cycles += compiled[i]->compute_cycles;
      sum.vector_cycles += compiled[i]->vector_cycles;
      sum.memory_cycles += compiled[i]->memory_cycles;
      sum.stage_cycles += compiled[i]->stage_cycles;
    }
    auto it = original.find(p.name);
    const std::optional<isa::DType> precision =
        i < r.program.layers.size() ? r.program.layers[i].precision : std::nullopt;
    if (!p.bound_cycles || it == original.end() || !precision) continue;
    if (auto b = backend::standalone_roofline(imported, lowered, *it->second, p.macs, *precision, config))
      p.bound_cycles = b->bound_cycles();
  }
  if (program) r.compiled_bound_cycles = program->bound_cycles();
  r.absorbed.clear();
  for (const AbsorbedNode& a : absorbed_nodes(imported, lowered)) {
    AbsorbedLayer l{a.name, a.op, a.into, std::nullopt, a.on_chip_inputs, 0};
    auto at = layer_of.find(a.into);
    if (at == layer_of.end()) continue;
    const LayerPlan& host = r.layers[at->second];
    const std::optional<isa::DType> precision =
        at->second < r.program.layers.size() ? r.program.layers[at->second].precision : std::nullopt;
    if (host.bound_cycles && precision) {
      if (auto b =
              backend::standalone_roofline(imported, lowered, *original.at(a.name), 0, *precision, config))
        l.bound_cycles = b->bound_cycles();
      for (const std::string& v : l.on_chip_inputs) {
        if (imported.has_value(v) && imported.value(v).fully_known())
          l.dram_bytes_saved +=
              num_elements(imported.value(v).shape) * isa::dtype_bytes(*precision) * (1 + readers[v]);
      }
    }
    r.absorbed.push_back(std::move(l));
  }
  r.model_limit = limit_as_imported(r, imported, lowered, config);
  // Fusion groups: recorded in each layer's chosen mapping, checked against an imposed one.
  std::map<std::string, std::vector<std::string>> groups;
  for (const AbsorbedLayer& a : r.absorbed) groups[a.into].push_back(a.name);
  for (LayerPlan& p : r.layers) {
    auto g = groups.find(p.name);
    p.chosen.fused = g == groups.end() ? std::nullopt : std::optional<std::vector<std::string>>(g->second);
    if (mapping) {
      if (const LayerMapping* m = mapping->find(p.name))
        backend::check_fusion(*m, g == groups.end() ? std::vector<std::string>{} : g->second);
    }
  }
}

}  // namespace npusim::compiler
