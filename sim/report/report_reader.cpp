#include "sim/report/report_reader.h"

#include <string>

#include "sim/report/report_file.h"

namespace npusim::sim {
namespace {

// A member's value as T (0, "" or false when absent, or when the section `n` it belongs to is absent);
// ReportReadError naming the key when it is not a T.
template <class T>
T get(const YAML::Node& n, const char* key) {
  if (!n) return T{};
  const YAML::Node v = n[key];
  if (!v || v.IsNull()) return T{};
  try {
    return v.as<T>();
  } catch (const YAML::Exception&) {
    throw ReportReadError(std::string("the report's '") + key + "' is not what npusim writes there");
  }
}

template <class T>
std::optional<T> get_optional(const YAML::Node& n, const char* key) {
  if (!n[key]) return std::nullopt;
  return get<T>(n, key);
}

traces::Breakdown breakdown(const YAML::Node& n) {
  traces::Breakdown b;
  b.compute = get<uint64_t>(n, "compute");
  b.memory = get<uint64_t>(n, "memory");
  b.scheduling = get<uint64_t>(n, "scheduling");
  b.host = get<uint64_t>(n, "host");
  return b;
}

traces::EnergyBreakdown energy_breakdown(const YAML::Node& n) {
  traces::EnergyBreakdown e;
  const YAML::Node by = n["by_component_mj"];
  for (size_t k = 0; k < traces::kNumEnergyComponents; ++k)
    e.mj[k] = get<double>(by, std::string(traces::kEnergyComponentNames[k]).c_str());
  return e;
}

traces::Report read_fields(const YAML::Node& root) {
  traces::Report r;
  r.total_cycles = get<uint64_t>(root, "total_cycles");
  r.frequency_mhz = get<double>(root, "frequency_mhz");
  r.latency_ms = get<double>(root, "latency_ms");
  r.macs = get<uint64_t>(root, "macs");
  r.array_utilization = get<double>(root, "array_utilization");
  r.compiled_bound_cycles = get_optional<uint64_t>(root, "compiled_bound_cycles");
  const YAML::Node array = root["array"];
  r.array_rows = get<int64_t>(array, "rows");
  r.array_cols = get<int64_t>(array, "cols");
  r.dataflow = get<std::string>(array, "dataflow");
  if (array) {
    for (const auto& kv : array["macs_per_pe_per_cycle"])
      r.array_macs_per_pe_per_cycle.emplace_back(kv.first.Scalar(), kv.second.as<double>());
  }
  r.breakdown = breakdown(root["breakdown"]);
  const YAML::Node dram = root["dram"];
  r.dram.model = get<std::string>(dram, "model");
  r.dram.bytes_read = get<uint64_t>(dram, "bytes_read");
  r.dram.bytes_written = get<uint64_t>(dram, "bytes_written");
  r.dram.avg_bandwidth_gbps = get<double>(dram, "avg_bandwidth_gbps");
  r.dram.peak_bandwidth_gbps = get<double>(dram, "peak_bandwidth_gbps");
  r.dram.requests = get<uint64_t>(dram, "requests");
  r.dram.row_hits = get<uint64_t>(dram, "row_hits");
  r.dram.row_misses = get<uint64_t>(dram, "row_misses");
  r.dram.refreshes = get<uint64_t>(dram, "refreshes");
  const YAML::Node dma = root["dma"];
  r.dma.transfers = get<uint64_t>(dma, "transfers");
  r.dma.bursts = get<uint64_t>(dma, "bursts");
  r.dma.misaligned_bursts = get<uint64_t>(dma, "misaligned_bursts");
  r.dma.misalignment_extra_cycles = get<uint64_t>(dma, "misalignment_extra_cycles");
  r.sram.bank_conflicts = get<uint64_t>(root["sram"], "bank_conflicts");
  r.sram.bank_conflict_cycles = get<uint64_t>(root["sram"], "bank_conflict_cycles");
  const YAML::Node host = root["host"];
  r.host.calls = get<uint64_t>(host, "calls");
  r.host.bytes_to_host = get<uint64_t>(host, "bytes_to_host");
  r.host.bytes_from_host = get<uint64_t>(host, "bytes_from_host");
  if (const YAML::Node e = root["energy"]; e && root["area"]) {
    traces::EnergyReport& energy = r.energy.emplace();
    energy.by_component = energy_breakdown(e);
    energy.total_mj = get<double>(e, "total_mj");
    energy.average_power_w = get<double>(e, "average_power_w");
    energy.peak_power_w = get<double>(e, "peak_power_w");
    energy.tops_per_w = get<double>(e, "tops_per_w");
    const YAML::Node a = root["area"];
    traces::AreaReport& area = r.area.emplace();
    area.total_mm2 = get<double>(a, "total_mm2");
    for (size_t k = 0; k < traces::kNumAreaUnits; ++k)
      area.by_unit_mm2[k] = get<double>(a["by_unit_mm2"], std::string(traces::kAreaUnitNames[k]).c_str());
  }
  for (const auto& kv : root["units"]) {
    traces::UnitReport u;
    u.name = kv.first.Scalar();
    u.instructions = get<uint64_t>(kv.second, "instructions");
    u.busy = get<uint64_t>(kv.second, "busy");
    u.idle = get<uint64_t>(kv.second, "idle");
    for (int k = 1; k < traces::kNumReasons; ++k)
      u.stalls[k] = get<uint64_t>(kv.second["stalls"], std::string(traces::kReasonNames[k]).c_str());
    r.units.push_back(u);
  }
  for (const YAML::Node& n : root["layers"]) {
    traces::LayerReport l;
    l.name = get<std::string>(n, "name");
    l.op = get<std::string>(n, "op");
    const std::string placement = get<std::string>(n, "placement");
    if (!placement.empty()) {  // absent: on the NPU, as LayerReport has it
      const std::optional<traces::LayerPlacement> p = traces::parse_layer_placement(placement);
      if (!p)
        throw ReportReadError("the report's 'placement' is '" + placement + "', not npu, host or fused");
      l.placement = *p;
    }
    l.fused_into = get<std::string>(n, "fused_into");
    l.precision = get<std::string>(n, "precision");
    l.start_cycle = get<uint64_t>(n, "start_cycle");
    l.end_cycle = get<uint64_t>(n, "end_cycle");
    l.cycles = get<uint64_t>(n, "cycles");
    l.compute_cycles = get<uint64_t>(n, "compute_cycles");
    l.vector_cycles = get<uint64_t>(n, "vector_cycles");
    l.macs = get<uint64_t>(n, "macs");
    l.array_macs = get_optional<uint64_t>(n, "array_macs");
    l.instructions = get<uint64_t>(n, "instructions");
    l.dram_bytes_read = get<uint64_t>(n, "dram_bytes_read");
    l.dram_bytes_written = get<uint64_t>(n, "dram_bytes_written");
    l.breakdown = breakdown(n["breakdown"]);
    if (n["energy"]) l.energy = energy_breakdown(n["energy"]);
    l.bound_cycles = get_optional<uint64_t>(n, "bound_cycles");
    r.layers.push_back(l);
  }
  for (const traces::LayerReport& f : r.layers) {
    if (!f.fused() || !f.bound_cycles) continue;
    for (traces::LayerReport& l : r.layers) {
      if (l.name == f.fused_into && !l.fused() && l.bound_cycles) l.fused_bound_cycles += *f.bound_cycles;
    }
  }
  if (const YAML::Node run = root["run"]) {
    traces::RunInfo& info = r.run.emplace();
    info.command = get<std::string>(run, "command");
    info.version = get<std::string>(run, "version");
    info.model = get<std::string>(run, "model");
    info.model_sha256 = get<std::string>(run, "model_sha256");
    info.config = get<std::string>(run, "config");
    for (const YAML::Node& s : run["sets"]) info.sets.push_back(s.Scalar());
    for (const auto& kv : run["parameters"])
      info.parameters.emplace_back(kv.first.Scalar(), kv.second.Scalar());
  }
  const YAML::Node sim = root["sim"];
  r.sim.wall_seconds = get<double>(sim, "wall_seconds");
  r.sim.instructions = get<uint64_t>(sim, "instructions");
  r.sim.functional = get<bool>(sim, "functional");
  return r;
}

}  // namespace

traces::Report read_report(const YAML::Node& root) {
  try {
    return read_fields(root);
  } catch (const YAML::Exception& e) {
    throw ReportReadError("the report does not have the fields npusim writes (" + e.msg + ")");
  }
}

}  // namespace npusim::sim
