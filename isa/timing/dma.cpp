#include "isa/timing/dma.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "isa/ceil_div.h"
#include "isa/machine/spec_text.h"
#include "isa/timing/fast_div.h"

namespace npusim::isa::timing {

DmaRows dma_rows(const Instruction& ins) {
  const int64_t esize = dtype_bytes(static_cast<DType>(ins.get(Field::kDtype)));
  const int64_t size[4] = {dma_size(ins, 0), dma_size(ins, 1), dma_size(ins, 2), dma_size(ins, 3)};
  const int64_t stride[4] = {1, ins.get(Field::kStride1), ins.get(Field::kStride2), ins.get(Field::kStride3)};
  DmaRows r;
  r.dram_addr = static_cast<uint64_t>(ins.get(Field::kDramAddr));
  // Merge outer dimensions into the row while they continue it contiguously.
  int64_t row_elems = size[0];
  int d = 1;
  while (d < 4 && (size[d] == 1 || stride[d] == row_elems)) row_elems *= size[d++];
  r.row_bytes = row_elems * esize;
  for (int slot = 0; d < 4; ++d) {
    if (size[d] == 1) continue;
    r.count[slot] = size[d];
    r.stride[slot] = stride[d] * esize;
    ++slot;
  }
  return r;
}

int64_t dma_sram_bytes(const Instruction& ins) {
  const int64_t esize = dtype_bytes(static_cast<DType>(ins.get(Field::kDtype)));
  const int64_t w = dma_size(ins, 1) + ins.get(Field::kPadLeft) + ins.get(Field::kPadRight);
  const int64_t h = dma_size(ins, 2) + ins.get(Field::kPadTop) + ins.get(Field::kPadBottom);
  return dma_size(ins, 0) * w * h * dma_size(ins, 3) * esize;
}

BurstCount count_bursts(const DmaRows& r, const DmaConfig& dma) {
  BurstCount c;
  const int64_t per_row = ceil_div(r.row_bytes, dma.burst_bytes);
  c.bursts = per_row * r.rows();
  // Alignment depends on each row's address: count the misaligned rows.
  const FastDiv align(static_cast<uint64_t>(dma.alignment_bytes));
  for_each_row(r, [&](uint64_t a) { c.misaligned_bursts += align.mod(a) != 0; });
  c.bursts += c.misaligned_bursts;
  return c;
}

double channel_skew(const DmaRows& r, const DramConfig& dram) {
  const int64_t channels = dram_channel_count(dram);
  if (channels <= 1 || dram_peak_bandwidth_gbps(dram) <= 0 || r.row_bytes <= 0) return 1.0;
  const uint64_t unit = dram_interleave_bytes(dram), stripe = unit * static_cast<uint64_t>(channels);
  const FastDiv unit_div(unit), chan_div(static_cast<uint64_t>(channels)), stripe_div(stripe);
  std::vector<uint64_t> per(static_cast<size_t>(channels), 0);
  auto add = [&](uint64_t a, uint64_t left) {
    while (left > 0 && unit_div.mod(a) != 0) {  // head, up to the next unit boundary
      const uint64_t take = std::min(left, unit - unit_div.mod(a));
      per[chan_div.mod(unit_div.div(a))] += take;
      a += take, left -= take;
    }
    const uint64_t stripes = stripe_div.div(left);
    for (uint64_t& p : per) p += stripes * unit;  // whole stripes
    a += stripes * stripe, left -= stripes * stripe;
    for (; left > 0; a += std::min(left, unit), left -= std::min(left, unit)) {
      per[chan_div.mod(unit_div.div(a))] += std::min(left, unit);
    }
  };
  int64_t visited = 0;
  for (int64_t i2 = 0; i2 < r.count[2] && visited < 4096; ++i2) {
    for (int64_t i1 = 0; i1 < r.count[1] && visited < 4096; ++i1) {
      uint64_t a = r.dram_addr + i1 * r.stride[1] + i2 * r.stride[2];
      for (int64_t i0 = 0; i0 < r.count[0] && visited < 4096; ++i0, ++visited, a += r.stride[0]) {
        add(a, static_cast<uint64_t>(r.row_bytes));
      }
    }
  }
  uint64_t total = 0, busiest = 0;
  for (uint64_t p : per) total += p, busiest = std::max(busiest, p);
  return total > 0 ? static_cast<double>(busiest) * static_cast<double>(channels) / static_cast<double>(total)
                   : 1.0;
}

double estimate_dma_cycles(const Instruction& ins, const NpuConfig& config) {
  const DmaRows rows = dma_rows(ins);
  return estimate_dma_cycles(rows, channel_skew(rows, config.dram), config);
}

double estimate_dma_cycles(const DmaRows& rows, double skew, const NpuConfig& config) {
  const BurstCount b = count_bursts(rows, config.dma);
  const double latency_ns = dram_idle_latency_ns(config.dram);
  const double bytes = static_cast<double>(b.bursts) * config.dma.burst_bytes;
  const double peak = dram_peak_bandwidth_gbps(config.dram);
  double ns = 0.0;
  if (peak > 0) ns = bytes * skew / peak;  // the busiest channel's time
  // Little's law: max_outstanding bursts per round trip.
  if (latency_ns > 0)
    ns = std::max(ns, bytes * latency_ns / (config.dma.max_outstanding * config.dma.burst_bytes));
  return config.dma.setup_cycles + (latency_ns + ns) * config.frequency_mhz / 1000.0;
}

double sustained_dram_bytes_per_cycle(const NpuConfig& config, int64_t transfer_bytes) {
  if (dram_peak_bandwidth_gbps(config.dram) <= 0 || transfer_bytes <= 0) return 0.0;
  std::unique_ptr<Dram> dram = make_dram(config.dram);
  const int64_t engines = std::max<int64_t>(1, config.dma.engines);
  std::vector<DmaBurstEngine> units(static_cast<size_t>(engines), DmaBurstEngine(config.dma));
  // kBytes an engine in all (at least 8 transfers, at most 64), engine e streaming its own region; each
  // engine alternates a read and a write.
  constexpr int64_t kBytes = int64_t{1} << 18;
  const int64_t transfers = std::clamp<int64_t>(kBytes / transfer_bytes, 8, 64);
  const double ps_per_cycle = 1e6 / config.frequency_mhz;
  const auto setup_ps = static_cast<uint64_t>(static_cast<double>(config.dma.setup_cycles) * ps_per_cycle);
  std::vector<uint64_t> free_ps(static_cast<size_t>(engines), 0);
  uint64_t end_ps = 0;
  int64_t bytes = 0;
  for (int64_t i = 0; i < transfers; ++i) {
    for (int64_t e = 0; e < engines; ++e) {
      DmaRows rows;
      rows.dram_addr =
          static_cast<uint64_t>((e * 2 + (i & 1)) * (int64_t{1} << 24) + (i / 2) * transfer_bytes);
      rows.row_bytes = transfer_bytes;
      const DmaTransfer x = units[static_cast<size_t>(e)].run(
          rows, (i & 1) != 0, free_ps[static_cast<size_t>(e)] + setup_ps, *dram);
      free_ps[static_cast<size_t>(e)] = x.done_ps;
      end_ps = std::max(end_ps, x.done_ps);
      bytes += transfer_bytes;
    }
  }
  const double cycles = static_cast<double>(end_ps) / ps_per_cycle;
  return cycles > 0 ? static_cast<double>(bytes) / cycles : 0.0;
}

struct DramStreamRates::Table {
  std::mutex mutex;
  std::array<double, kMaxLog2 + 1> rates{};  // 0 = not measured yet
};

DramStreamRates::DramStreamRates(const NpuConfig& config) : config_(config) {
  static std::mutex mutex;
  static std::map<std::string, std::shared_ptr<Table>> tables;
  const std::string key = to_spec_text(config);
  const std::lock_guard<std::mutex> lock(mutex);
  std::shared_ptr<Table>& t = tables[key];
  if (!t) t = std::make_shared<Table>();
  table_ = t;
}

double DramStreamRates::at(int log2) const {
  double& r = rates_[static_cast<size_t>(log2)];
  if (r == 0) {
    const std::lock_guard<std::mutex> lock(table_->mutex);
    double& shared = table_->rates[static_cast<size_t>(log2)];
    if (shared == 0) shared = std::max(1e-9, sustained_dram_bytes_per_cycle(config_, int64_t{1} << log2));
    r = shared;
  }
  return r;
}

double DramStreamRates::bytes_per_cycle(double transfer_bytes) const {
  if (dram_peak_bandwidth_gbps(config_.dram) <= 0) return 0.0;
  const double b = std::clamp(transfer_bytes, std::ldexp(1.0, kMinLog2), std::ldexp(1.0, kMaxLog2));
  const int lo = std::min(kMaxLog2 - 1, static_cast<int>(std::floor(std::log2(b))));
  const double b0 = std::ldexp(1.0, lo), b1 = 2 * b0;
  // A transfer's time is about fixed + bytes / rate: linear in bytes between the two measured sizes.
  const double t0 = b0 / at(lo), t1 = b1 / at(lo + 1);
  const double t = t0 + (t1 - t0) * (b - b0) / (b1 - b0);
  return b / t;
}

double dram_cost_factor(const DmaRows& rows, bool write, const NpuConfig& config) {
  if (dram_peak_bandwidth_gbps(config.dram) <= 0 || rows.bytes() <= 0) return 1.0;
  // The first kRows rows in issue order (the innermost dimension first).
  constexpr int64_t kRows = 64;
  DmaRows part = rows;
  int64_t room = kRows;
  for (size_t d = 0; d < 3; ++d) {
    part.count[d] = std::min(rows.count[d], std::max<int64_t>(1, room));
    room /= std::max<int64_t>(1, part.count[d]);
  }
  // The bus time: the transfer's span less the first burst's unloaded latency (which overlaps the
  // transfers before it in a stream).
  const double latency_ps = dram_idle_latency_ns(config.dram) * 1000.0;
  const auto busy_ps = [&](const DmaRows& r) {
    std::unique_ptr<Dram> dram = make_dram(config.dram, Refresh::kAveraged);
    DmaBurstEngine engine(config.dma);
    const DmaTransfer x = engine.run(r, write, 0, *dram);
    return std::max(1.0, static_cast<double>(x.done_ps) - latency_ps);
  };
  DmaRows line;  // as many bytes in one contiguous row, aligned
  line.row_bytes = part.bytes();
  return std::max(1.0, busy_ps(part) / busy_ps(line));
}

}  // namespace npusim::isa::timing
