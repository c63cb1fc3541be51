#include "traces/energy.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "traces/report.h"

namespace npusim::traces {
namespace {

constexpr double kPjToMj = 1e-9;

// Every energy is kept on a grid of 2^-36 mJ (0.015 pJ): sums of such numbers below 2^17 mJ (131 J) are
// exact in a double in any order, so the layers add up to the total exactly for every reader.
double on_grid(double mj) {
  return std::ldexp(std::round(std::ldexp(mj, kEnergyGridExponent)), -kEnergyGridExponent);
}

// Energy of one access to scratchpad `b`: 8 * width bits, per-bit energy growing with the square root of
// the bank's capacity (longer bit lines and word lines), as CACTI's trend and Horowitz's 8 KB / 32 KB /
// 1 MB points (10, 20, 100 pJ per 64-bit read) show.
double sram_access_pj(const isa::ScratchpadConfig& s, double pj_per_bit) {
  const double bank_kib = static_cast<double>(s.size_kib) / static_cast<double>(s.banks);
  return 8.0 * static_cast<double>(s.bank_width_bytes) * pj_per_bit * std::sqrt(bank_kib / 8.0);
}

}  // namespace

double EnergyBreakdown::total() const {
  double t = 0;
  for (double x : mj) t += x;
  return t;
}

AreaReport estimate_area(const isa::NpuConfig& c) {
  AreaReport a;
  const double s = c.technology.area_scale(c.area.reference_nm);
  auto sram = [&](const isa::ScratchpadConfig& p) {
    return static_cast<double>(p.size_kib) / 1024.0 * c.area.sram_mm2_per_mib * s;
  };
  auto set = [&](AreaUnit u, double mm2) { a.by_unit_mm2[static_cast<size_t>(u)] = mm2; };
  set(AreaUnit::kArray,
      static_cast<double>(c.systolic_array.rows * c.systolic_array.cols) * c.area.pe_um2 * 1e-6 * s);
  set(AreaUnit::kSramInput, sram(c.sram.input));
  set(AreaUnit::kSramWeight, c.sram.shared_scratchpad ? 0.0 : sram(c.sram.weight));  // shared: inside input
  set(AreaUnit::kSramAccumulator, sram(c.sram.accumulator));
  set(AreaUnit::kVector, static_cast<double>(c.vector.lanes) * c.area.vector_lane_um2 * 1e-6 * s);
  set(AreaUnit::kDma, static_cast<double>(c.dma.engines) * c.area.dma_engine_mm2 * s);
  for (double x : a.by_unit_mm2) a.total_mm2 += x;
  return a;
}

EnergyBreakdown dynamic_energy(const Activity& a, uint64_t dram_bytes, const isa::NpuConfig& c) {
  const isa::EnergyConfig& e = c.energy;
  const double s = c.technology.energy_scale(e.reference_nm);
  EnergyBreakdown b;
  double mac = 0;
  for (size_t i = 0; i < a.macs.size(); ++i) mac += static_cast<double>(a.macs[i]) * e.mac_pj[i];
  b[EnergyComponent::kMac] = mac * s;
  double sram = 0;
  for (int i = 0; i < isa::kNumBuffers; ++i) {
    const isa::ScratchpadConfig& p = c.sram.buffer(static_cast<isa::Buffer>(i));
    sram += static_cast<double>(a.sram_reads[i]) * sram_access_pj(p, e.sram_read_pj_per_bit) +
            static_cast<double>(a.sram_writes[i]) * sram_access_pj(p, e.sram_write_pj_per_bit);
  }
  b[EnergyComponent::kSram] = sram * s;
  const isa::DramEnergyConfig& d = e.dram[static_cast<size_t>(c.dram.model)];
  b[EnergyComponent::kDram] = 8.0 * static_cast<double>(dram_bytes) * d.pj_per_bit +
                              static_cast<double>(a.dram_activates) * d.activate_pj;
  b[EnergyComponent::kVector] = static_cast<double>(a.vector_elements) * e.vector_pj_per_element * s;
  b[EnergyComponent::kDma] = static_cast<double>(a.dma_bytes) * e.dma_pj_per_byte * s;
  b[EnergyComponent::kHostLink] = static_cast<double>(a.host_link_bytes) * e.host_link_pj_per_byte;
  for (double& x : b.mj) x = on_grid(x * kPjToMj);
  return b;
}

void add_energy(Report& r, const isa::NpuConfig& c) {
  const AreaReport area = estimate_area(c);
  r.area = area;
  const double seconds_per_cycle = 1e-6 / c.frequency_mhz;
  const double static_w = area.total_mm2 * c.energy.static_mw_per_mm2 * 1e-3;
  const double static_mj = static_w * static_cast<double>(r.total_cycles) * seconds_per_cycle * 1e3;

  EnergyReport e;
  uint64_t layer_cycles = 0;
  for (const LayerReport& l : r.layers) layer_cycles += l.cycles;
  std::map<uint64_t, double> steps;  // cycle -> change of power there (W)
  for (LayerReport& l : r.layers) {
    l.energy = dynamic_energy(l.activity, l.dram_bytes_read + l.dram_bytes_written, c);
    const double dynamic_mj = l.energy.total();
    // Static energy by the layer's share of the layers' cycles (equal shares when no layer has any).
    const double share = layer_cycles ? static_cast<double>(l.cycles) / static_cast<double>(layer_cycles)
                                      : 1.0 / static_cast<double>(r.layers.size());
    l.energy[EnergyComponent::kStatic] = on_grid(static_mj * share);
    for (size_t k = 0; k < kNumEnergyComponents; ++k) e.by_component.mj[k] += l.energy.mj[k];
    if (l.cycles > 0 && dynamic_mj > 0) {
      const double watts = dynamic_mj * 1e-3 / (static_cast<double>(l.cycles) * seconds_per_cycle);
      steps[l.start_cycle] += watts;
      steps[l.end_cycle] -= watts;
    }
  }
  if (r.layers.empty()) e.by_component[EnergyComponent::kStatic] = on_grid(static_mj);
  e.total_mj = e.by_component.total();

  // The power profile: static power over the run plus each layer's dynamic energy spread evenly over
  // its span (layers that overlap in time add up).
  steps[0] += static_w;
  steps[r.total_cycles] -= static_w;
  double watts = 0;
  for (const auto& [cycle, delta] : steps) {
    watts += delta;
    if (cycle >= r.total_cycles) break;
    const double w = std::max(0.0, watts);
    e.profile.push_back({cycle, w});
    e.peak_power_w = std::max(e.peak_power_w, w);
  }
  e.profile.push_back({r.total_cycles, 0.0});
  const double seconds = static_cast<double>(r.total_cycles) * seconds_per_cycle;
  e.average_power_w = seconds > 0 ? e.total_mj * 1e-3 / seconds : 0.0;
  e.tops_per_w = e.total_mj > 0 ? 2.0 * static_cast<double>(r.macs) / (e.total_mj * 1e-3) / 1e12 : 0.0;
  r.energy = std::move(e);
}

}  // namespace npusim::traces
