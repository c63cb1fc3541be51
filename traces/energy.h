#pragma once
// Energy, power and area: an observer of the counts the simulator already makes (docs/energy.md).
// The units count actions per layer (traces::Activity, filled by arch/core/activity.h); this file
// multiplies them by the per-action energies of the configuration (isa::EnergyConfig), adds static
// power x time, and estimates the area (isa::AreaConfig). No state in the units, no SystemC.
#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "isa/isa.h"
#include "isa/machine/config.h"

namespace npusim::traces {

struct Report;

// What one layer did, in actions that cost energy.
struct Activity {
  std::array<uint64_t, isa::kMacPrecisions.size()> macs{};  // MAC slots the array executed, by
                                                            // isa::kMacPrecisions (padding included)
  // Scratchpad accesses (one access = bank_width_bytes of that scratchpad), by the storage buffer.
  std::array<uint64_t, isa::kNumBuffers> sram_reads{};
  std::array<uint64_t, isa::kNumBuffers> sram_writes{};
  uint64_t dram_activates = 0;   // row misses the layer's transfers caused (banked DRAM models)
  uint64_t vector_elements = 0;  // element operations x initiation interval
  uint64_t dma_bytes = 0;        // bytes the DMA moved (both directions)
  uint64_t host_link_bytes = 0;  // bytes over the host link (both directions)
};

// The components energy is reported in, in report order.
enum class EnergyComponent : uint8_t { kMac, kSram, kDram, kVector, kDma, kHostLink, kStatic };
inline constexpr size_t kNumEnergyComponents = 7;
inline constexpr std::array<std::string_view, kNumEnergyComponents> kEnergyComponentNames = {
    "mac", "sram", "dram", "vector", "dma", "host_link", "static"};

// Energies are multiples of 2^-kEnergyGridExponent mJ (docs/energy.md, "Adding up exactly").
inline constexpr int kEnergyGridExponent = 36;

// Energy in millijoules by component; total() adds them in component order.
struct EnergyBreakdown {
  std::array<double, kNumEnergyComponents> mj{};
  double total() const;
  double& operator[](EnergyComponent c) { return mj[static_cast<size_t>(c)]; }
  double operator[](EnergyComponent c) const { return mj[static_cast<size_t>(c)]; }
};

// One step of the power profile: `watts` from start_cycle until the next step (the last step is 0 W at
// the end of the run).
struct PowerStep {
  uint64_t start_cycle = 0;
  double watts = 0;
};

struct EnergyReport {
  // The sum of the layers' energies, component by component, layer by layer in program order (so a
  // reader adding the layers in that order gets these numbers exactly). A run without layers keeps its
  // energy here alone.
  EnergyBreakdown by_component;
  double total_mj = 0;         // by_component.total()
  double average_power_w = 0;  // total / latency
  double peak_power_w = 0;     // the highest step of the power profile
  double tops_per_w = 0;       // 2 x useful MACs / energy, in tera-operations per joule
  std::vector<PowerStep> profile;
};

// Area in mm2 by unit, at technology.node_nm.
enum class AreaUnit : uint8_t { kArray, kSramInput, kSramWeight, kSramAccumulator, kVector, kDma };
inline constexpr size_t kNumAreaUnits = 6;
inline constexpr std::array<std::string_view, kNumAreaUnits> kAreaUnitNames = {
    "array", "sram_input", "sram_weight", "sram_accumulator", "vector", "dma"};
struct AreaReport {
  std::array<double, kNumAreaUnits> by_unit_mm2{};
  double total_mm2 = 0;
};

AreaReport estimate_area(const isa::NpuConfig& c);

// A layer's dynamic energy from its activity and DRAM bytes (no static energy).
EnergyBreakdown dynamic_energy(const Activity& a, uint64_t dram_bytes, const isa::NpuConfig& c);

// Fills r.area, r.energy and every layer's energy from the layers' activity. Static power (area x
// static_mw_per_mm2) over the whole run is divided among the layers in proportion to their cycles, so
// idle time between layers is charged to the layers too and the layers add up to the total.
void add_energy(Report& r, const isa::NpuConfig& c);

}  // namespace npusim::traces
