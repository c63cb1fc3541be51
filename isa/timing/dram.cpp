#include "isa/timing/dram.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "isa/timing/banked_dram.h"
#include "isa/timing/fast_div.h"

namespace npusim::isa::timing {
namespace {

uint64_t ns_to_ps(double ns) { return static_cast<uint64_t>(std::llround(ns * 1000.0)); }

// Presets. Figures per channel; the config's dram.channels multiplies bandwidth.
//
// DDR4-3200 (JEDEC JESD79-4B, speed bin DDR4-3200AA, 22-22-22): tCK 0.625 ns; CL = tRCD = tRP =
// 22 tCK = 13.75 ns; tRAS 32 ns; 64-bit channel, BL8 -> 64 B per burst in 4 tCK = 2.5 ns
// (25.6 GB/s); 16 banks (4 groups x 4; bank-group tCCD_L is not modelled); rank row 8 KiB (eight
// x8 devices with 1 KiB pages); tREFI 7.8 us, tRFC 350 ns (8 Gb die); tWTR_L 7.5 ns; read-to-write
// turnaround CL + BL/2 + 2 - CWL = 22 + 4 + 2 - 16 = 12 tCK = 7.5 ns.
constexpr BankedDramTiming kDdr4_3200{"ddr4_3200", 64,    2.5, 13.75, 13.75, 13.75, 32.0,
                                      7800.0,      350.0, 7.5, 7.5,   16,    8192,  256};
// LPDDR4-4266 (JEDEC JESD209-4B): tCK 0.469 ns; 16-bit channel, BL16 -> 32 B per burst in 8 tCK =
// 3.75 ns (8.53 GB/s per channel); RL 36 tCK = 16.9 ns; tRCD 18 ns, tRPpb 18 ns, tRAS 42 ns;
// 8 banks; 2 KiB page; tREFI 3.904 us, tRFCab 280 ns (8 Gb per channel); tWTR 10 ns; read-to-write
// RL + BL/2 + 1 - WL (36 + 8 + 1 - 18 = 27 tCK) minus the burst already counted: 8.9 ns.
constexpr BankedDramTiming kLpddr4_4266{"lpddr4_4266", 32,    3.75, 16.9, 18.0, 18.0, 42.0,
                                        3904.0,        280.0, 10.0, 8.9,  8,    2048, 256};
// HBM2 (JEDEC JESD235A, 2.0 Gb/s per pin): tCK 1 ns; 128-bit legacy channel, BL4 -> 64 B per burst
// in 2 tCK = 2 ns (32 GB/s per channel); CL = tRCD = tRP = 14 ns, tRAS 33 ns; 16 banks; 2 KiB page;
// tREFI 3.9 us, tRFC 260 ns; tWTR 8 ns; read-to-write 4 ns.
constexpr BankedDramTiming kHbm2{"hbm2", 64,    2.0, 14.0, 14.0, 14.0, 33.0,
                                 3900.0, 260.0, 8.0, 4.0,  16,   2048, 256};

// Fixed latency, unlimited bandwidth.
class IdealDram : public Dram {
 public:
  explicit IdealDram(double latency_ns) : latency_ps_(ns_to_ps(latency_ns)), latency_ns_(latency_ns) {}
  uint64_t access(uint64_t, uint32_t, bool, uint64_t issue_ps) override {
    ++stats_.requests;
    return issue_ps + latency_ps_;
  }
  double peak_bandwidth_gbps() const override { return 0.0; }
  double idle_latency_ns() const override { return latency_ns_; }

 private:
  uint64_t latency_ps_;
  double latency_ns_;
};

// `channels` data paths sharing `bandwidth_gbps` equally, addresses interleaved every kSimpleInterleave
// bytes (as the banked presets are), each with a pipelined fixed latency. One channel is one shared
// data path; more channels serve concurrent requests to different channels in parallel, so a transfer
// spanning few interleave units uses only part of the total bandwidth.
constexpr uint64_t kSimpleInterleave = 256;

class SimpleDram : public Dram {
 public:
  SimpleDram(double latency_ns, double bandwidth_gbps, int channels)
      : latency_ps_(ns_to_ps(latency_ns)),
        ps_per_byte_(1000.0 * std::max(1, channels) / bandwidth_gbps),
        latency_ns_(latency_ns),
        bandwidth_gbps_(bandwidth_gbps),
        bus_free_ps_(static_cast<size_t>(std::max(1, channels)), 0.0),
        chan_(static_cast<uint64_t>(std::max(1, channels))) {}
  int channels() const override { return static_cast<int>(bus_free_ps_.size()); }
  int channel_of(uint64_t addr) const override {
    return static_cast<int>(chan_.mod(addr / kSimpleInterleave));
  }
  uint64_t access(uint64_t addr, uint32_t bytes, bool, uint64_t issue_ps) override {
    ++stats_.requests;
    // Bus time kept in fractional ps so that bursts shorter than 1 ps of rounding do not drift.
    double& bus_free = bus_free_ps_[static_cast<size_t>(channel_of(addr))];
    const double start = std::max(static_cast<double>(issue_ps), bus_free);
    bus_free = start + bytes * ps_per_byte_;
    return static_cast<uint64_t>(std::ceil(bus_free)) + latency_ps_;
  }
  double peak_bandwidth_gbps() const override { return bandwidth_gbps_; }
  double idle_latency_ns() const override { return latency_ns_; }

 private:
  uint64_t latency_ps_;
  double ps_per_byte_;  // per channel
  double latency_ns_;
  double bandwidth_gbps_;
  std::vector<double> bus_free_ps_;  // per channel
  FastDiv chan_;
};

}  // namespace

BankedDram::BankedDram(const BankedDramTiming& t, int channels, Refresh refresh)
    : t_(t), channels_(std::max(1, channels)) {
  const bool averaged = refresh == Refresh::kAveraged && t.t_refi_ns > t.t_rfc_ns;
  // Averaged: every operation takes the share of time refresh would block, bandwidth and latency alike.
  const double s = averaged ? t.t_refi_ns / (t.t_refi_ns - t.t_rfc_ns) : 1.0;
  t_burst_ = ns_to_ps(t.t_burst_ns * s);
  t_cl_ = ns_to_ps(t.t_cl_ns * s);
  t_rcd_ = ns_to_ps(t.t_rcd_ns * s);
  t_rp_ = ns_to_ps(t.t_rp_ns * s);
  t_ras_ = ns_to_ps(t.t_ras_ns * s);
  t_refi_ = averaged ? std::numeric_limits<uint64_t>::max() / 2 : ns_to_ps(t.t_refi_ns);  // never
  t_rfc_ = ns_to_ps(t.t_rfc_ns);
  t_wtr_ = ns_to_ps(t.t_wtr_ns * s);
  t_rtw_ = ns_to_ps(t.t_rtw_ns * s);
  unit_ = FastDiv(static_cast<uint64_t>(t.interleave_bytes));
  chan_ = FastDiv(static_cast<uint64_t>(channels_));
  stripe_ = FastDiv(static_cast<uint64_t>(t.interleave_bytes) * channels_);
  page_ = FastDiv(static_cast<uint64_t>(t.page_bytes));
  bank_ = FastDiv(static_cast<uint64_t>(t.banks));
  burst_ = FastDiv(static_cast<uint64_t>(t.burst_bytes));
  chans_.resize(channels_);
  for (Channel& c : chans_) {
    c.banks.resize(t.banks);
    c.next_refresh = t_refi_;
  }
}

const BankedDramTiming& banked_preset(isa::DramModel model) {
  switch (model) {
    case isa::DramModel::kDdr4_3200:
      return kDdr4_3200;
    case isa::DramModel::kHbm2:
      return kHbm2;
    default:
      return kLpddr4_4266;
  }
}

std::unique_ptr<Dram> make_banked_dram(const BankedDramTiming& timing, int channels, Refresh refresh) {
  return std::make_unique<BankedDram>(timing, channels, refresh);
}

std::unique_ptr<Dram> make_dram(const DramConfig& c, Refresh refresh) {
  switch (c.model) {
    case isa::DramModel::kIdeal:
      return std::make_unique<IdealDram>(c.latency_ns);
    case isa::DramModel::kSimple:
      return std::make_unique<SimpleDram>(c.latency_ns, c.bandwidth_gbps, static_cast<int>(c.channels));
    default:
      return make_banked_dram(banked_preset(c.model), static_cast<int>(c.channels), refresh);
  }
}

int dram_channel_count(const DramConfig& c) {
  return c.model == isa::DramModel::kIdeal ? 1 : std::max(1, static_cast<int>(c.channels));
}

uint64_t dram_interleave_bytes(const DramConfig& c) {
  switch (c.model) {
    case isa::DramModel::kIdeal:
    case isa::DramModel::kSimple:
      return kSimpleInterleave;
    default:
      return static_cast<uint64_t>(banked_preset(c.model).interleave_bytes);
  }
}

double dram_peak_bandwidth_gbps(const DramConfig& c) {
  switch (c.model) {
    case isa::DramModel::kIdeal:
      return 0.0;
    case isa::DramModel::kSimple:
      return c.bandwidth_gbps;
    default:
      return banked_preset(c.model).peak_gbps() * c.channels;
  }
}

double dram_peak_bytes_per_cycle(const NpuConfig& c) {
  // GB/s are bytes per ns; the clock gives frequency_mhz / 1000 cycles per ns.
  return dram_peak_bandwidth_gbps(c.dram) * 1000.0 / c.frequency_mhz;
}

double dram_idle_latency_ns(const DramConfig& c) {
  if (c.model == isa::DramModel::kIdeal || c.model == isa::DramModel::kSimple) return c.latency_ns;
  const BankedDramTiming& t = banked_preset(c.model);
  return t.t_rcd_ns + t.t_cl_ns + t.t_burst_ns;
}

}  // namespace npusim::isa::timing
