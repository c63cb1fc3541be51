// The report's fields, declared once (traces/report_visitor.h): the order here is the JSON's.
#include <string>
#include <vector>

#include "traces/layer_tables.h"
#include "traces/report.h"
#include "traces/report_visitor.h"

namespace npusim::traces {
namespace {

using Layout = ReportVisitor::Layout;

// {"total_mj": T, "by_component_mj": {"mac": .., ..}}: a layer's energy (its total derived).
void visit_energy_components(ReportVisitor& v, EnergyBreakdown& e) {
  v.object({"by_component_mj", "mJ", "energy by component (docs/energy.md)"}, [&] {
    for (size_t k = 0; k < kNumEnergyComponents; ++k)
      v.real({kEnergyComponentNames[k], "mJ", "energy of this component"}, e.mj[k]);
  });
}

void visit_energy(ReportVisitor& v, EnergyReport& e) {
  v.real({"total_mj", "mJ", "energy of the run: the sum of by_component_mj"}, e.total_mj);
  visit_energy_components(v, e.by_component);
  v.real({"average_power_w", "W", "total_mj / latency_ms"}, e.average_power_w);
  v.real({"peak_power_w", "W", "the highest step of the power profile"}, e.peak_power_w);
  v.real({"tops_per_w", "TOPS/W", "2 x macs / energy"}, e.tops_per_w);
}

void visit_area(ReportVisitor& v, AreaReport& a) {
  v.real({"total_mm2", "mm2", "area estimate at technology.node_nm"}, a.total_mm2);
  v.object({"by_unit_mm2", "mm2", "the area by unit"}, [&] {
    for (size_t k = 0; k < kNumAreaUnits; ++k)
      v.real({kAreaUnitNames[k], "mm2", "area of this unit"}, a.by_unit_mm2[k]);
  });
}

void visit_unit(ReportVisitor& v, UnitReport& u) {
  v.integer({"instructions", "instructions", "instructions it executed (DMA engines: transfers)"},
            u.instructions);
  v.integer({"busy", "cycles", "cycles doing work"}, u.busy);
  v.integer({"idle", "cycles", "cycles with nothing to do"}, u.idle);
  v.object({"stalls", "cycles", "stalled cycles by reason"}, [&] {
    for (int k = 1; k < kNumReasons; ++k)
      v.integer({kReasonNames[k], "cycles", "stalled for this reason"}, u.stalls[k]);
  });
}

// One element of layers[]; `shown` its display name (none while reading), `energy` whether the run has
// energy.
void visit_layer(ReportVisitor& v, LayerReport& l, std::string_view shown, bool energy, const Report& r) {
  v.text({"name", "", "the ONNX node (or SCALE-Sim layer)"}, l.name);
  if (!v.fills()) v.derived({"display_name", "", "the short, unique name the summary and plots show"}, shown);
  v.text({"op", "", "the op type"}, l.op);
  size_t placement = static_cast<size_t>(l.placement);
  v.choice({"placement", "", "npu, host (a CPU fallback) or fused (a node another layer does the work of)"},
           placement,
           std::vector<std::string_view>(kLayerPlacementNames.begin(), kLayerPlacementNames.end()));
  if (v.fills()) l.placement = static_cast<LayerPlacement>(placement);
  if (!v.fills())
    v.derived({"unit", "", "where its work ran: array, vector, dma, host, fused or none"}, layer_unit(l));
  if (l.fused())
    v.text({"fused_into", "", "fused nodes: the program layer that does its work"}, l.fused_into);
  if (v.fills() || !l.precision.empty())
    v.text({"precision", "", "the number format the layer runs in (absent when unknown)"}, l.precision);
  if (v.fills() || !l.input_shape.empty())
    v.text({"input_shape", "", "its runtime inputs' shapes (compiled models)"}, l.input_shape);
  if (v.fills() || !l.output_shape.empty())
    v.text({"output_shape", "", "its outputs' shapes (compiled models)"}, l.output_shape);
  if (v.fills() || !l.kernel.empty()) {
    v.text({"kernel", "", "a convolution's or pool's kernel"}, l.kernel);
    v.text({"stride", "", "its strides"}, l.stride);
  }
  v.integer({"groups", "", "a convolution's groups"}, l.groups);
  v.integer({"start_cycle", "cycle", "first start of the layer's activity"}, l.start_cycle);
  v.integer({"end_cycle", "cycle", "last end of the layer's activity"}, l.end_cycle);
  v.integer({"cycles", "cycles", "end_cycle - start_cycle"}, l.cycles);
  v.integer({"compute_cycles", "cycles", "matrix-unit cycles, fill and drain included"}, l.compute_cycles);
  v.integer({"vector_cycles", "cycles", "vector-unit busy cycles"}, l.vector_cycles);
  v.integer({"macs", "MACs", "useful multiply-accumulates"}, l.macs);
  v.integer({"instructions", "instructions", "instructions tagged with the layer"}, l.instructions);
  v.integer({"dram_bytes_read", "bytes", "bytes the layer's LOADs read"}, l.dram_bytes_read);
  v.integer({"dram_bytes_written", "bytes", "bytes the layer's STOREs wrote"}, l.dram_bytes_written);
  v.integer({"misaligned_bursts", "bursts", "extra DMA bursts its misaligned rows paid"},
            l.misaligned_bursts);
  v.integer({"bank_conflict_cycles", "cycles", "its instructions' waits on SRAM bank conflicts"},
            l.bank_conflict_cycles);
  if (!v.fills()) v.derived({"bound", "", "what the layer's cycles were mostly spent on"}, bound_label(l));
  v.object({"breakdown", "cycles", "the layer's cycles by where they went"}, [&] { l.breakdown.visit(v); });
  v.object(
      {"energy", "mJ", "the layer's energy (runs with energy)"},
      [&] {
        if (!v.fills())
          v.derived({"total_mj", "mJ", "the layer's energy: the sum of by_component_mj"}, l.energy.total());
        visit_energy_components(v, l.energy);
      },
      Layout::kInline, energy);
  v.integer({"array_macs", "MACs", "the MAC slots the array spent, when they differ from macs"},
            l.array_macs);
  if (l.bound_cycles) v.same_line();
  v.integer({"bound_cycles", "cycles", "the roofline bound of the layer's node as the model gives it"},
            l.bound_cycles);
  if (l.compiled_bound_cycles) v.same_line();
  v.integer({"compiled_bound_cycles", "cycles",
             "the roofline bound of the layer's own instructions (array MAC slots, vector work, DRAM bytes, "
             "each at its unit's peak; the highest)"},
            l.compiled_bound_cycles);
  if (l.limit_cycles) v.same_line();
  v.integer({"limit_cycles", "cycles",
             "the node's share of the model limit: its MACs at the peak of the unit that bounds them"},
            l.limit_cycles);
  if (!v.fills()) {
    if (const std::optional<double> u = mac_utilization(r, l)) {
      v.same_line();
      v.derived({"mac_utilization", "", "macs / (the peak MACs per cycle of its unit x cycles)"}, *u);
    }
    if (const std::optional<double> e = efficiency(l)) {
      v.same_line();
      v.derived({"efficiency", "", "compiled_bound_cycles / cycles, at most 1"}, *e);
    }
    if (const std::optional<uint64_t> saved = fusion_saved_cycles(l)) {
      v.same_line();
      v.derived({"fusion_saved_cycles", "cycles",
                 "the bounds of the nodes fused into the layer: work fusion removed"},
                *saved);
    }
  }
  v.optional_object({"mapping", "", "what the compiler chose for the layer"}, l.mapping,
                    [&](LayerMapping& m) { m.visit(v); });
  if (v.fills() || !l.on_chip_input.empty()) {
    v.text({"on_chip_input", "", "the value it read where the layer before left it in SRAM"},
           l.on_chip_input);
    v.integer({"on_chip_bytes_saved", "bytes", "the DRAM bytes that did not move"}, l.on_chip_bytes_saved);
  }
  if (v.fills() || !l.fusion_group.empty())
    v.text({"fusion_group", "", "the group of layers fused across layers it belongs to"}, l.fusion_group);
  if (l.absorbed()) {
    v.list({"on_chip_inputs", "", "fused nodes: the values it reads that never touch DRAM"}, l.on_chip_inputs,
           [&](std::string& value, size_t) {
             v.text({"", "", "a value"}, value);
           });
    v.integer({"dram_bytes_saved", "bytes",
               "fused nodes: the DRAM bytes a layer-by-layer program would have moved"},
              l.dram_bytes_saved);
  }
}

void visit_op(ReportVisitor& v, OpRollup& x) {
  v.derived({"op", "", "the op type"}, x.op);
  v.derived({"layers", "layers", "program layers of the op type"}, x.layers);
  v.derived({"fused_nodes", "nodes", "nodes of the op type fused into other layers"}, x.fused_nodes);
  v.derived({"cycles", "cycles", "the sum of its layers' cycles"}, x.cycles);
  v.derived({"share", "", "of the sum over all op types"}, x.share);
  v.derived({"macs", "MACs", "its layers' MACs"}, x.macs);
  v.derived({"dram_bytes_read", "bytes", "its layers' DRAM bytes read"}, x.dram_bytes_read);
  v.derived({"dram_bytes_written", "bytes", "its layers' DRAM bytes written"}, x.dram_bytes_written);
  v.object({"breakdown", "cycles", "its layers' breakdowns, summed"}, [&] { x.breakdown.visit(v); });
  v.integer({"bound_cycles", "cycles", "the sum of its layers' bounds, when one has a bound"},
            x.bound_cycles);
}

}  // namespace

void JsonSection::visit(ReportVisitor& v) {
  v.json({key_, "", "a section a stage outside the simulator adds, as JSON"}, json_);
}

void Breakdown::visit(ReportVisitor& v) {
  v.integer({"compute", "cycles", "the matrix or vector unit busy"}, compute);
  v.integer({"memory", "cycles", "a DMA transfer in flight or a bank conflict, nothing computing"}, memory);
  v.integer({"scheduling", "cycles", "everyone waiting on a token, or the queues empty"}, scheduling);
  v.integer({"host", "cycles", "a host call running"}, host);
}

void LayerMapping::visit(ReportVisitor& v) {
  v.text({"placement", "", "matrix, vector, free or host"}, placement);
  v.text({"description", "", "how the layer was lowered"}, description);
  if (v.fills() || !int8_scheme.empty())
    v.text(
        {"int8_scheme", "",
         "an int8 layer's arithmetic: integer (int32 sums requantized), integer+lut-epilogue (requantized "
         "to the pre-activation's codes, then a table), integer+float-epilogue, lut (a table on the codes), "
         "codes (moves codes) or float (dequantize, fp32, quantize)"},
        int8_scheme);
  v.object({"tile", "", "the tile"}, [&] {
    v.integer({"m", "rows", "output pixels or rows per tile"}, tile_m);
    v.integer({"k", "", "the reduction chunk"}, tile_k);
    v.integer({"n", "channels", "output channels per tile"}, tile_n);
    v.integer({"oh", "rows", "conv output rows per tile"}, tile_oh);
    v.integer({"ow", "cols", "conv output cols per tile"}, tile_ow);
    v.integer({"elems", "elements", "vector layers: elements per tile"}, tile_elems);
  });
  v.text({"loop_order", "", "which operand stays resident across the tile loop"}, loop_order);
  if (!v.fills()) v.derived({"short", "", "the mapping in a few characters"}, short_text());
  v.object({"sram_bytes", "bytes", "its slots in each scratchpad"}, [&] {
    v.integer({"input", "bytes", "in the input scratchpad"}, sram_input_bytes);
    v.integer({"weight", "bytes", "in the weight scratchpad"}, sram_weight_bytes);
    v.integer({"accumulator", "bytes", "in the accumulator"}, sram_accumulator_bytes);
  });
  v.integer({"estimated_cycles", "cycles", "the compiler's estimate"}, estimated_cycles);
  v.integer({"estimated_compute_cycles", "cycles", "its compute part"}, estimated_compute_cycles);
  v.integer({"estimated_dma_cycles", "cycles", "its DMA part"}, estimated_dma_cycles);
  v.integer({"candidates", "tilings", "tilings the search evaluated"}, candidates);
  v.text({"tile_limit", "", "what bounded the tile"}, tile_limit);
}

void Report::Fusion::visit(ReportVisitor& v) {
  v.integer({"fused_nodes", "nodes", "nodes fused into program layers"}, nodes);
  v.integer({"tensors_on_chip", "values", "values that never touch DRAM"}, tensors);
  v.integer({"dram_bytes_saved", "bytes", "DRAM bytes a layer-by-layer program would have moved for them"},
            bytes_saved);
}

void Report::ModelLimit::visit(ReportVisitor& v) {
  v.real({"array_cycles", "cycles", "the dense matrix work at the array's peak in its precision", 1},
         array_cycles);
  v.real({"vector_cycles", "cycles", "depthwise and grouped convs at the vector lanes' peak", 1},
         vector_cycles);
  v.real({"dram_cycles", "cycles", "every weight and the model's inputs and outputs, once at DRAM peak", 1},
         dram_cycles);
  v.real({"array_fold_cycles", "cycles", "the array term's layers each alone in whole folds of the array", 1},
         array_fold_cycles);
  if (!v.fills())
    v.derived({"bound_by", "", "the term that sets the limit: array, vector or dram"}, limit_bound_by(*this));
}

void DramReport::visit(ReportVisitor& v) {
  v.text({"model", "", "the DRAM model"}, model);
  v.integer({"bytes_read", "bytes", "bytes LOADs read"}, bytes_read);
  v.integer({"bytes_written", "bytes", "bytes STOREs wrote"}, bytes_written);
  v.real({"avg_bandwidth_gbps", "GB/s", "(bytes_read + bytes_written) / latency"}, avg_bandwidth_gbps);
  v.real({"peak_bandwidth_gbps", "GB/s", "the model's peak; 0 = unlimited (ideal)"}, peak_bandwidth_gbps);
  v.integer({"requests", "requests", "DMA bursts served"}, requests);
  v.integer({"row_hits", "accesses", "column accesses to an open row"}, row_hits);
  v.integer({"row_misses", "accesses", "column accesses needing an activate"}, row_misses);
  v.integer({"refreshes", "refreshes", "refresh cycles applied"}, refreshes);
}

void DmaReport::visit(ReportVisitor& v) {
  v.integer({"transfers", "transfers", "LOAD/STORE descriptors executed"}, transfers);
  v.integer({"bursts", "bursts", "DRAM bursts issued, misaligned ones included"}, bursts);
  v.integer({"misaligned_bursts", "bursts", "extra bursts paid for misaligned rows"}, misaligned_bursts);
  v.integer({"misalignment_extra_cycles", "cycles", "the DRAM data-bus cycles those bursts occupied"},
            misalignment_extra_cycles);
}

void SramReport::visit(ReportVisitor& v) {
  v.integer({"bank_conflicts", "instructions", "instructions that hit a bank conflict"}, bank_conflicts);
  v.integer({"bank_conflict_cycles", "cycles", "cycles those conflicts added"}, bank_conflict_cycles);
}

void HostReport::visit(ReportVisitor& v) {
  v.integer({"calls", "calls", "HOSTCALLs"}, calls);
  v.integer({"bytes_to_host", "bytes", "bytes moved to the host"}, bytes_to_host);
  v.integer({"bytes_from_host", "bytes", "bytes moved back from the host"}, bytes_from_host);
}

void SimInfo::visit(ReportVisitor& v) {
  v.real({"wall_seconds", "s", "host time of the simulation"}, wall_seconds);
  v.integer({"instructions", "instructions", "instructions dispatched"}, instructions);
  v.boolean({"functional", "", "whether values were computed"}, functional);
}

void PhaseTimes::visit(ReportVisitor& v) {
  v.real({"import_seconds", "s", "reading the model and inferring its shapes"}, import_seconds);
  v.real({"calibration_seconds", "s", "the precision plan: calibration, equalization, recipe search"},
         calibration_seconds);
  v.real({"compile_seconds", "s", "the passes and the back end"}, compile_seconds);
  v.real({"accuracy_seconds", "s", "--accuracy, --advise-sqnr: the reference and quantized runs"},
         accuracy_seconds);
}

void RunInfo::visit(ReportVisitor& v) {
  v.text({"command", "", "the command line"}, command);
  v.text({"version", "", "npusim's version"}, version);
  v.text({"model", "", "the MODEL argument"}, model);
  v.text({"model_sha256", "", "SHA-256 of the model file's bytes"}, model_sha256);
  v.text({"config", "", "--config as given (empty: the built-in edge preset)"}, config);
  v.list({"sets", "", "the --set overrides, in order"}, sets, [&](std::string& s, size_t) {
    v.text({"", "", "a --set override"}, s);
  });
  v.text({"precision_source", "", "who chose a compiled model's precision"}, precision_source);
  v.text({"objective", "", "what a compiled model's mapping search minimised: cycles, energy or edp"},
         objective);
  std::vector<std::string> keys;
  for (const auto& [key, value] : parameters) keys.push_back(key);
  keys =
      v.begin_map({"parameters", "", "every configuration parameter as resolved"}, keys, Layout::kLines, "");
  if (v.fills()) parameters.resize(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    if (v.fills()) parameters[i].first = keys[i];
    v.parameter({keys[i], "", "a configuration parameter"}, parameters[i].second);
  }
  v.end();
}

void Report::visit(ReportVisitor& v) {
  v.integer({"total_cycles", "cycles", "from the start until the last instruction completed"}, total_cycles);
  v.real({"frequency_mhz", "MHz", "the NPU clock"}, frequency_mhz);
  v.real({"latency_ms", "ms", "total_cycles / frequency_mhz / 1000"}, latency_ms);
  v.integer({"macs", "MACs", "useful multiply-accumulates"}, macs);
  v.real({"array_utilization", "", "macs / (rows x cols x total_cycles): of the int8 peak"},
         array_utilization);
  if (!v.fills()) {
    if (std::optional<PrecisionFigures> pf = precision_figures(*this)) {
      v.object({"precision", "", "the precision plan the layers ran in"}, [&] {
        v.derived({"plan", "", "one precision, or mixed: N p1, M p2"}, pf->plan);
        std::vector<std::string> names;
        for (const auto& [precision, layers] : pf->layers) names.push_back(precision);
        v.begin_map({"layers", "layers", "layers per precision"}, names, Layout::kInline, "");
        for (const auto& [precision, layers] : pf->layers) v.derived({precision, "layers", "layers"}, layers);
        v.end();
        v.derived({"peak_macs_per_cycle", "MACs/cycle", "the array's peak under the plan"},
                  pf->peak_macs_per_cycle);
        v.derived({"utilization", "", "macs / (peak_macs_per_cycle x total_cycles)"}, pf->utilization);
      });
    }
    if (const std::optional<uint64_t> bound = model_bound_cycles(*this)) {
      v.same_line();
      v.derived({"bound_cycles", "cycles", "the sum of the layers' bounds"}, *bound);
    }
    if (const std::optional<double> e = unfused_bound_ratio(*this)) {
      v.same_line();
      v.derived({"unfused_bound_ratio", "", "bound_cycles / total_cycles (not an efficiency)"}, *e);
    }
  }
  if (compiled_bound_cycles) v.same_line();
  v.integer({"compiled_bound_cycles", "cycles",
             "the roof of the program's instructions, each unit at its peak, the three overlapping"},
            compiled_bound_cycles);
  if (!v.fills()) {
    if (const std::optional<double> e = compiled_efficiency(*this)) {
      v.same_line();
      v.derived({"compiled_efficiency", "", "compiled_bound_cycles / total_cycles"}, *e);
    }
  }
  v.integer({"model_limit_cycles", "cycles",
             "the whole model's physical limit: the highest of model_limit's terms (docs/report.md)"},
            model_limit_cycles);
  if (!v.fills()) {
    if (const std::optional<double> e = model_limit_efficiency(*this)) {
      v.same_line();
      v.derived({"model_efficiency", "", "model_limit_cycles / total_cycles"}, *e);
    }
  }
  if (model_limit) v.same_line();
  v.optional_object({"model_limit", "cycles", "the model limit's three terms, each unit at its peak"},
                    model_limit, [&](ModelLimit& m) { m.visit(v); });
  v.object({"array", "", "the matrix unit simulated"}, [&] {
    v.integer({"rows", "PEs", "rows of the array"}, array_rows);
    v.integer({"cols", "PEs", "columns of the array"}, array_cols);
    v.text({"dataflow", "", "ws, os or is"}, dataflow);
    std::vector<std::string> names;
    for (const auto& [precision, rate] : array_macs_per_pe_per_cycle) names.push_back(precision);
    names = v.begin_map({"macs_per_pe_per_cycle", "MACs", "the array's MACs per PE per cycle by precision"},
                        names, Layout::kInline, "");
    if (v.fills()) array_macs_per_pe_per_cycle.resize(names.size());
    for (size_t i = 0; i < names.size(); ++i) {
      if (v.fills()) array_macs_per_pe_per_cycle[i].first = names[i];
      v.real({names[i], "MACs", "MACs per PE per cycle in this precision"},
             array_macs_per_pe_per_cycle[i].second);
    }
    v.end();
  });
  v.object({"vector", "", "the vector unit simulated"}, [&] {
    v.integer({"lanes", "lanes", "elements (or depthwise MACs) per cycle"}, vector_lanes);
    v.integer({"int8_dot_width", "MACs", "int8 products a lane sums per cycle in a depthwise conv on codes"},
              vector_int8_dot_width);
  });
  v.object({"breakdown", "cycles", "the run's cycles by where they went"}, [&] { breakdown.visit(v); });
  v.object({"dram", "", "DRAM traffic"}, [&] { dram.visit(v); });
  v.object({"dma", "", "DMA transfers"}, [&] { dma.visit(v); });
  v.object({"sram", "", "scratchpad bank conflicts"}, [&] { sram.visit(v); });
  v.object({"host", "", "host calls"}, [&] { host.visit(v); });
  const bool energy_and_area = energy && area;
  v.object(
      {"energy", "mJ", "energy of the run (docs/energy.md)"},
      [&] { visit_energy(v, energy ? *energy : energy.emplace()); }, Layout::kInline, energy_and_area);
  v.object(
      {"area", "mm2", "the area estimate"}, [&] { visit_area(v, area ? *area : area.emplace()); },
      Layout::kInline, energy_and_area);
  std::vector<std::string> names;
  for (const UnitReport& u : units) names.push_back(u.name);
  names = v.begin_map({"units", "", "one entry per unit"}, names, Layout::kLines, "<name>");
  if (v.fills()) units.resize(names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    if (v.fills()) units[i].name = names[i];
    v.object({names[i], "", "a unit"}, [&] { visit_unit(v, units[i]); });
  }
  v.end();
  std::vector<std::string> shown;
  if (!v.fills()) shown = display_names(*this);
  const bool with_energy = energy.has_value();
  v.list(
      {"layers", "", "one entry per program layer, each followed by the nodes fused into it"}, layers,
      [&](LayerReport& l, size_t i) {
        v.object({"", "", "a layer"},
                 [&] { visit_layer(v, l, i < shown.size() ? shown[i] : "", with_energy, *this); });
      },
      Layout::kLines);
  if (!v.fills()) {
    std::vector<OpRollup> ops = op_rollup(*this);
    v.list(
        {"ops", "", "the layers rolled up by op type, most cycles first"}, ops,
        [&](OpRollup& x, size_t) {
          v.object({"", "", "an op type"}, [&] { visit_op(v, x); });
        },
        Layout::kLines);
  }
  for (const std::shared_ptr<ReportSection>& s : sections) s->visit(v);
  v.optional_object({"run", "", "what was run"}, run, [&](RunInfo& info) { info.visit(v); });
  v.optional_object({"phases", "s", "host time of each phase before and after the simulation"}, phases,
                    [&](PhaseTimes& p) { p.visit(v); });
  v.object({"sim", "", "the simulation itself"}, [&] { sim.visit(v); });
}

}  // namespace npusim::traces
