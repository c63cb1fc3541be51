#include "traces/layer_tables.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "traces/sink.h"

namespace npusim::traces {

std::string_view bound_label(const LayerReport& l) {
  if (l.placement == LayerPlacement::kHost) return "host";
  const Breakdown& b = l.breakdown;
  if (b.total() == 0) return "none";
  const std::pair<uint64_t, std::string_view> parts[] = {
      {b.compute, "compute"}, {b.memory, "memory"}, {b.scheduling, "scheduling"}, {b.host, "host"}};
  const auto* best = &parts[0];
  for (const auto& p : parts) {
    if (p.first > best->first) best = &p;
  }
  return best->second;
}

std::vector<OpRollup> op_rollup(const Report& r) {
  std::map<std::string, OpRollup> by_op;
  uint64_t all = 0;
  for (const LayerReport& l : r.layers) {
    OpRollup& o = by_op[l.op];
    o.op = l.op;
    ++(l.fused() ? o.fused_nodes : o.layers);
    o.cycles += l.cycles;
    o.macs += l.macs;
    o.dram_bytes_read += l.dram_bytes_read;
    o.dram_bytes_written += l.dram_bytes_written;
    o.breakdown.compute += l.breakdown.compute;
    o.breakdown.memory += l.breakdown.memory;
    o.breakdown.scheduling += l.breakdown.scheduling;
    o.breakdown.host += l.breakdown.host;
    if (l.bound_cycles) o.bound_cycles = o.bound_cycles.value_or(0) + *l.bound_cycles;
    all += l.cycles;
  }
  std::vector<OpRollup> out;
  for (auto& [op, o] : by_op) {
    o.share = all ? static_cast<double>(o.cycles) / static_cast<double>(all) : 0.0;
    out.push_back(std::move(o));
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const OpRollup& a, const OpRollup& b) { return a.cycles > b.cycles; });
  return out;
}

void write_layers_csv(const Report& r, std::ostream& out) {
  std::string o =
      "index,name,display_name,op,placement,precision,start_cycle,end_cycle,cycles,compute,memory,scheduling,"
      "host,macs,"
      "dram_bytes_read,dram_bytes_written,bound,bound_cycles,efficiency,fused_into,energy_mj,limit_cycles,"
      "unit,input_shape,output_shape,kernel,stride,groups,mac_utilization,compiled_bound_cycles,"
      "fusion_saved_cycles,mapping\n";
  const std::vector<std::string> shown = display_names(r);
  for (size_t i = 0; i < r.layers.size(); ++i) {
    const LayerReport& l = r.layers[i];
    o += fmt::format("{},", i);
    append_csv_field(o, l.name);
    o += ',';
    append_csv_field(o, shown[i]);
    o += ',';
    append_csv_field(o, l.op);
    o += fmt::format(",{},{},{},{},{},{},{},{},{},{},{},{},{},", layer_placement_name(l.placement),
                     l.precision, l.start_cycle, l.end_cycle, l.cycles, l.breakdown.compute,
                     l.breakdown.memory, l.breakdown.scheduling, l.breakdown.host, l.macs, l.dram_bytes_read,
                     l.dram_bytes_written, bound_label(l));
    if (l.bound_cycles) o += std::to_string(*l.bound_cycles);
    o += ',';
    if (const std::optional<double> e = efficiency(l)) o += fmt::format("{:.4f}", *e);
    o += ',';
    append_csv_field(o, l.fused_into);
    o += ',';
    if (r.energy) o += fmt::format("{}", l.energy.total());
    o += ',';
    if (l.limit_cycles) o += std::to_string(*l.limit_cycles);
    o += fmt::format(",{},", layer_unit(l));
    for (const std::string* text : {&l.input_shape, &l.output_shape, &l.kernel, &l.stride}) {
      append_csv_field(o, *text);
      o += ',';
    }
    if (l.groups) o += std::to_string(*l.groups);
    o += ',';
    if (const std::optional<double> u = mac_utilization(r, l)) o += fmt::format("{:.4f}", *u);
    o += ',';
    if (l.compiled_bound_cycles) o += std::to_string(*l.compiled_bound_cycles);
    o += ',';
    if (const std::optional<uint64_t> saved = fusion_saved_cycles(l)) o += std::to_string(*saved);
    o += ',';
    if (l.mapping) append_csv_field(o, l.mapping->short_text());
    o += '\n';
  }
  out << o;
}

}  // namespace npusim::traces
