#pragma once
// DRAM timing models behind one interface: ideal (fixed latency, unlimited bandwidth), simple
// (latency + a bandwidth shared by interleaved channels) and banked (channels, banks, row buffers,
// refresh, read/write turnaround) with the ddr4_3200, lpddr4_4266 and hbm2 presets. SystemC-free: the DMA
// engines call them with times in picoseconds, and tests drive them directly.
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "isa/machine/config.h"

namespace npusim::isa::timing {

// Counters every model keeps (banked ones fill the row-buffer fields).
struct DramStats {
  int64_t requests = 0;
  int64_t row_hits = 0;
  int64_t row_misses = 0;  // includes row-empty activations
  int64_t refreshes = 0;
};

class BankedDram;

class Dram {
 public:
  virtual ~Dram() = default;
  // This model as the banked one (banked_dram.h), or null: the DMA burst loop calls it directly.
  virtual BankedDram* banked() { return nullptr; }
  // Serves one request of `bytes` at byte address `addr`, issued at `issue_ps`; returns the time
  // its last data beat is on the bus. Callers may issue requests out of time order (a DMA engine
  // computes a whole transfer when it starts): each resource serves its requests first come,
  // first served, in call order.
  virtual uint64_t access(uint64_t addr, uint32_t bytes, bool write, uint64_t issue_ps) = 0;
  // Data bandwidth with every channel streaming, GB/s (0 = unlimited).
  virtual double peak_bandwidth_gbps() const = 0;
  // The unloaded latency of one request, ns (used by the compiler's estimates).
  virtual double idle_latency_ns() const = 0;
  virtual int channels() const { return 1; }
  virtual int channel_of(uint64_t /*addr*/) const { return 0; }
  const DramStats& stats() const { return stats_; }

 protected:
  DramStats stats_;
};

// The timing parameters of a banked device, per channel. Times in ns.
struct BankedDramTiming {
  std::string_view name;
  int64_t burst_bytes;       // bytes one device burst moves on the channel (bus width x burst length)
  double t_burst_ns;         // data-bus occupancy of one burst (BL / 2 clocks)
  double t_cl_ns;            // read (CAS) latency
  double t_rcd_ns;           // activate to column command
  double t_rp_ns;            // precharge
  double t_ras_ns;           // activate to precharge, minimum
  double t_refi_ns;          // refresh interval
  double t_rfc_ns;           // refresh cycle time (all banks blocked)
  double t_wtr_ns;           // write-to-read turnaround on the data bus
  double t_rtw_ns;           // read-to-write turnaround on the data bus
  int64_t banks;             // banks per channel
  int64_t page_bytes;        // row-buffer size per channel
  int64_t interleave_bytes;  // consecutive bytes mapped to one channel before moving to the next
  double peak_gbps() const { return static_cast<double>(burst_bytes) / t_burst_ns; }
};

// How a banked model refreshes. kScheduled: every channel blocks for tRFC every tREFI from time 0, as
// a device does. kAveraged: no blocking; each burst takes tREFI / (tREFI - tRFC) times longer, the
// same lost bandwidth spread evenly. A slice of a program timed alone (the compiler's estimates) cannot
// know where the refreshes of the whole run will fall on it: a 2 us layer meets one or none, +-7% on
// LPDDR4, so its estimate takes the average over that phase instead.
enum class Refresh { kScheduled, kAveraged };

// The built-in presets (model must be a banked one).
const BankedDramTiming& banked_preset(isa::DramModel model);

// Builds the model the config names (DramConfig says which keys each model uses).
std::unique_ptr<Dram> make_dram(const DramConfig& config, Refresh refresh = Refresh::kScheduled);
// A banked model with explicit timing (tests, studies).
std::unique_ptr<Dram> make_banked_dram(const BankedDramTiming& timing, int channels,
                                       Refresh refresh = Refresh::kScheduled);

// Peak and idle latency of the configured model without building it (compiler estimates).
double dram_peak_bandwidth_gbps(const DramConfig& config);
double dram_idle_latency_ns(const DramConfig& config);
// Channels whose bandwidth is separate (1 for the ideal model) and the bytes mapped to one channel
// before the next (every model interleaves channels every 256 bytes).
int dram_channel_count(const DramConfig& config);
uint64_t dram_interleave_bytes(const DramConfig& config);
// The peak in bytes per NPU clock cycle (0 = unlimited: the ideal model), for roofline bounds.
double dram_peak_bytes_per_cycle(const NpuConfig& config);

}  // namespace npusim::isa::timing
