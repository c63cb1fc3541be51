#pragma once
// DMA transfer timing: how a LOAD/STORE box becomes contiguous DRAM rows, rows become bursts (with
// the alignment rule), and bursts become time against a DRAM model under an outstanding-request
// limit. SystemC-free; the Dma engines and the compiler's estimates both use it.
//
// Alignment rule (dma.alignment_bytes): a contiguous row whose first byte is not on an alignment
// boundary costs one extra burst -- the aligned block holding its head is fetched too -- and that
// burst is counted as misaligned.
#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "isa/isa.h"
#include "isa/machine/config.h"
#include "isa/timing/banked_dram.h"
#include "isa/timing/dram.h"
#include "isa/timing/fast_div.h"

namespace npusim::isa::timing {

// The DRAM side of a LOAD/STORE as contiguous rows: `row_bytes` bytes at
// dram_addr + i0*stride[0] + i1*stride[1] + i2*stride[2] for i_d < count[d] (bytes).
// Dimensions that are contiguous with the row are merged into it.
struct DmaRows {
  uint64_t dram_addr = 0;
  int64_t row_bytes = 0;
  std::array<int64_t, 3> count{1, 1, 1};
  std::array<int64_t, 3> stride{0, 0, 0};
  int64_t rows() const { return count[0] * count[1] * count[2]; }
  int64_t bytes() const { return rows() * row_bytes; }
};

// Extent of dimension `d` (0..3) of a DMA instruction; size1..size3 of 0 mean 1 (unused dims). Inline:
// the simulator decodes every LOAD/STORE with it, and a constant `d` folds the field to constants.
inline int64_t dma_size(const Instruction& ins, int d) {
  const Field f = d == 0 ? Field::kSize0 : d == 1 ? Field::kSize1 : d == 2 ? Field::kSize2 : Field::kSize3;
  const int64_t v = ins.get(f);
  return d > 0 && v == 0 ? 1 : v;
}
DmaRows dma_rows(const Instruction& ins);
// Bytes the transfer writes to (LOAD) or reads from (STORE) SRAM: the dense box, halo included.
int64_t dma_sram_bytes(const Instruction& ins);

// How unevenly a transfer spreads over the DRAM channels: the busiest channel's bytes times the number
// of channels over all its bytes; 1 when balanced, `channels` when every byte falls in one channel (rows
// of 256 bytes, 3072 bytes apart, on two channels interleaved every 256 bytes). The transfer cannot
// move faster than its busiest channel: its DRAM time is bytes x skew / peak. Rows past the first 4096
// are not visited (the pattern repeats).
double channel_skew(const DmaRows& rows, const DramConfig& dram);

// Burst counts of a transfer.
struct BurstCount {
  int64_t bursts = 0;             // all bursts, misaligned ones included
  int64_t misaligned_bursts = 0;  // extra bursts paid for rows not starting on the alignment
};
BurstCount count_bursts(const DmaRows& rows, const DmaConfig& dma);

// Calls fn(addr) for the first byte of every row of the transfer, in issue order (the innermost
// dimension first).
template <class Fn>
void for_each_row(const DmaRows& r, Fn&& fn) {
  for (int64_t i2 = 0; i2 < r.count[2]; ++i2) {
    for (int64_t i1 = 0; i1 < r.count[1]; ++i1) {
      uint64_t a = r.dram_addr + i1 * r.stride[1] + i2 * r.stride[2];
      for (int64_t i0 = 0; i0 < r.count[0]; ++i0, a += r.stride[0]) fn(a);
    }
  }
}

// Calls fn(addr, bytes, misaligned) for every burst of the transfer, in issue order.
template <class Fn>
void for_each_burst(const DmaRows& r, const DmaConfig& dma, Fn&& fn) {
  const int64_t burst = dma.burst_bytes;
  const int64_t align = dma.alignment_bytes;
  for_each_row(r, [&](uint64_t a) {
    if (a % align != 0) fn(a - a % burst, static_cast<uint32_t>(burst), true);
    for (int64_t off = 0; off < r.row_bytes; off += burst) {
      fn(a + off, static_cast<uint32_t>(std::min<int64_t>(burst, r.row_bytes - off)), false);
    }
  });
}

// What one transfer cost on the DRAM side.
struct DmaTransfer {
  uint64_t first_issue_ps = 0;
  uint64_t done_ps = 0;  // last burst's data
  BurstCount bursts;
};

// How a burst loop reaches a DRAM model: Dram::access (called directly on a final model).
template <class Model>
class BurstPort {
 public:
  explicit BurstPort(Model& dram) : dram_(dram) {}
  uint64_t access(uint64_t addr, uint32_t bytes, bool write, uint64_t issue_ps) {
    return dram_.access(addr, bytes, write, issue_ps);
  }

 private:
  Model& dram_;
};

// One DMA engine's burst issue logic: at most one burst per call, each waits for a free outstanding
// slot (the completion of the burst max_outstanding before it).
class DmaBurstEngine {
 public:
  explicit DmaBurstEngine(const DmaConfig& dma)
      : dma_(dma),
        burst_(static_cast<uint64_t>(dma.burst_bytes)),
        align_(static_cast<uint64_t>(dma.alignment_bytes)),
        slots_(std::max<int64_t>(1, dma.max_outstanding), 0) {}
  // Issues every burst of `rows` from `start_ps` on; returns when the last one completes.
  // `per_burst(channel, issue_ps, done_ps, bytes)` is called for each burst when non-null (traces).
  template <class PerBurst>
  DmaTransfer run(const DmaRows& rows, bool write, uint64_t start_ps, Dram& dram, PerBurst&& per_burst) {
    // The banked model called directly (its access() inlines into the loop), by interleave unit when a
    // unit has one place; the others through Dram.
    if (BankedDram* banked = dram.banked()) {
      if (banked->place_per_unit()) {
        if (banked->address_map().pow2() && burst_.pow2() && align_.pow2())
          return run_by_unit<true>(rows, write, start_ps, *banked, per_burst);
        return run_by_unit<false>(rows, write, start_ps, *banked, per_burst);
      }
      return run_on(rows, write, start_ps, *banked, per_burst);
    }
    return run_on(rows, write, start_ps, dram, per_burst);
  }
  DmaTransfer run(const DmaRows& rows, bool write, uint64_t start_ps, Dram& dram) {
    if (BankedDram* banked = dram.banked()) {
      if (banked->place_per_unit() && banked->address_map().pow2() && burst_.pow2() && align_.pow2() &&
          fits_window(rows))
        return run_fixed_issue(rows, write, start_ps, *banked);
    }
    return run(rows, write, start_ps, dram, [](uint64_t, uint64_t, uint64_t, uint32_t) {});
  }

 private:
  template <class Model, class PerBurst>
  DmaTransfer run_on(const DmaRows& rows, bool write, uint64_t start_ps, Model& dram, PerBurst& per_burst) {
    DmaTransfer x;
    x.first_issue_ps = start_ps;
    IssueWindow w = window(start_ps);
    BurstPort<Model> port(dram);
    auto one = [&](uint64_t addr, uint32_t bytes, bool misaligned) {
      const uint64_t issue = w.take();
      const uint64_t done = port.access(addr, bytes, write, issue);
      w.complete(done);
      ++x.bursts.bursts;
      x.bursts.misaligned_bursts += misaligned;
      per_burst(addr, issue, done, bytes);
    };
    // for_each_burst's order, with the divisions by burst and alignment precomputed.
    const int64_t burst = dma_.burst_bytes;
    for_each_row(rows, [&](uint64_t a) {
      if (align_.mod(a) != 0) one(a - burst_.mod(a), static_cast<uint32_t>(burst), true);
      for (int64_t off = 0; off < rows.row_bytes; off += burst) {
        one(a + off, static_cast<uint32_t>(std::min<int64_t>(burst, rows.row_bytes - off)), false);
      }
    });
    x.done_ps = w.done_max;
    used(x);
    return x;
  }

  // run_on's bursts on a banked model whose interleave units each have one place (BankedDram::Place):
  // the bursts of a row that start in one unit go to BankedDram::serve_run together. The same bursts, in
  // the same order, with the same issue times as run_on. The rows are walked here, not through
  // for_each_row's lambda: the window, the divisors and the address map are locals of this one frame, so
  // that they stay in registers. kPow2: every divisor (address map, burst, alignment) is a power of two.
  template <bool kPow2, class PerBurst>
  DmaTransfer run_by_unit(const DmaRows& rows, bool write, uint64_t start_ps, BankedDram& dram,
                          PerBurst& per_burst) {
    DmaTransfer x;
    x.first_issue_ps = start_ps;
    IssueWindow w = window(start_ps);
    const FastDiv burst_div = burst_, align = align_;
    const BankedDram::AddressMap map = dram.address_map();
    const uint64_t burst = burst_div.divisor();
    const uint64_t unit = map.unit.divisor();
    const auto full_bytes = static_cast<uint32_t>(burst);
    const uint64_t full_beats = dram.beats(full_bytes);
    const auto row_bytes = static_cast<uint64_t>(rows.row_bytes);
    int64_t bursts = 0, misaligned = 0;
    for (int64_t i2 = 0; i2 < rows.count[2]; ++i2) {
      for (int64_t i1 = 0; i1 < rows.count[1]; ++i1) {
        uint64_t a = rows.dram_addr + i1 * rows.stride[1] + i2 * rows.stride[2];
        for (int64_t i0 = 0; i0 < rows.count[0]; ++i0, a += rows.stride[0]) {
          if (align.mod_as<kPow2>(a) != 0) {  // the aligned block holding the row's head
            const uint64_t head = a - burst_div.mod_as<kPow2>(a);
            dram.serve_run(
                map.place<kPow2>(head), full_beats, write, 1, w,
                [&](int64_t, uint64_t issue, uint64_t done) { per_burst(head, issue, done, full_bytes); });
            ++misaligned;
          }
          const uint64_t row_end = a + row_bytes;
          uint64_t addr = a;
          while (addr < row_end) {
            // The bursts starting in addr's unit: full ones, then the row's short last one if it is here.
            const uint64_t unit_end = (map.unit.div_as<kPow2>(addr) + 1) * unit;
            const uint64_t starts = burst_div.div_as<kPow2>(std::min(unit_end, row_end) - addr + burst - 1);
            const bool short_last = addr + starts * burst > row_end;
            const BankedDram::Place place = map.place<kPow2>(addr);
            const int64_t full = static_cast<int64_t>(starts) - (short_last ? 1 : 0);
            if (full > 0) {
              dram.serve_run(place, full_beats, write, full, w,
                             [&](int64_t j, uint64_t issue, uint64_t done) {
                               per_burst(addr + static_cast<uint64_t>(j) * burst, issue, done, full_bytes);
                             });
              addr += static_cast<uint64_t>(full) * burst;
            }
            if (short_last) {
              const auto bytes = static_cast<uint32_t>(row_end - addr);
              dram.serve_run(
                  place, dram.beats(bytes), write, 1, w,
                  [&](int64_t, uint64_t issue, uint64_t done) { per_burst(addr, issue, done, bytes); });
              addr = row_end;
            }
            bursts += static_cast<int64_t>(starts);
          }
        }
      }
    }
    x.done_ps = w.done_max;
    x.bursts.bursts = bursts + misaligned;
    x.bursts.misaligned_bursts = misaligned;
    used(x);
    return x;
  }

  // Whether no request of the transfer can wait for a window slot: it has at most as many bursts as the
  // window has slots (each row's bursts, plus its head's when a row may start off the alignment).
  bool fits_window(const DmaRows& rows) const {
    bool aligned = align_.mod(rows.dram_addr) == 0;
    for (int d = 0; d < 3; ++d)
      aligned = aligned && (rows.count[d] == 1 || align_.mod(static_cast<uint64_t>(rows.stride[d])) == 0);
    const auto size = static_cast<int64_t>(slots_.size());
    if (rows.row_bytes < 0 || rows.rows() > size) return false;
    const int64_t per_row =
        static_cast<int64_t>(burst_.div(static_cast<uint64_t>(rows.row_bytes) + burst_.divisor() - 1)) +
        (aligned ? 0 : 1);
    return per_row <= size && rows.rows() * per_row <= size;
  }

  // run_by_unit's transfer when it fits the window (fits_window), with no per-burst callback. Every request
  // is then issued at start_ps (each takes a slot whose time is start_ps or earlier), so the channels do not
  // wait on each other: each channel serves its own requests in their order, whatever the others do. The
  // interleave units of one channel that follow each other within one DRAM row (consecutive units of a row
  // alternate over the channels) are served as one run, their row hits in closed form
  // (BankedDram::serve_fixed_issue). The same requests, in the same order per channel, at the same issue
  // time as run_by_unit: the same completions, DRAM state and statistics. The window is not touched: its
  // slots' times would all be at or before start_ps (window()), which is all this relies on, and a later
  // transfer's window() finds the slots as the last transfer that used them left them (used_, free_by_).
  DmaTransfer run_fixed_issue(const DmaRows& rows, bool write, uint64_t start_ps, BankedDram& dram) {
    DmaTransfer x;
    x.first_issue_ps = start_ps;
    const FastDiv burst_div = burst_, align = align_;
    const BankedDram::AddressMap map = dram.address_map();
    const uint64_t burst = burst_div.divisor();
    const uint64_t unit = map.unit.divisor();
    const uint64_t full_beats = dram.beats(static_cast<uint32_t>(burst));
    const auto row_bytes = static_cast<uint64_t>(rows.row_bytes);
    pending_.resize(static_cast<size_t>(map.chan.divisor()));
    uint64_t done = start_ps;
    // Each channel's last run not served yet: the next run on the channel joins it when it has the same
    // place and burst size.
    auto add = [&](const BankedDram::Place& p, uint64_t beats, int64_t n) {
      Run& r = pending_[static_cast<size_t>(p.ch - map.chans)];
      if (r.count > 0 && r.place.bank == p.bank && r.place.row == p.row && r.beats == beats) {
        r.count += n;
        return;
      }
      if (r.count > 0) dram.serve_fixed_issue(r.place, r.beats, write, r.count, start_ps, done);
      r = Run{p, beats, n};
    };
    int64_t bursts = 0, misaligned = 0;
    for (int64_t i2 = 0; i2 < rows.count[2]; ++i2) {
      for (int64_t i1 = 0; i1 < rows.count[1]; ++i1) {
        uint64_t a = rows.dram_addr + i1 * rows.stride[1] + i2 * rows.stride[2];
        for (int64_t i0 = 0; i0 < rows.count[0]; ++i0, a += rows.stride[0]) {
          if (align.mod_as<true>(a) != 0) {  // the aligned block holding the row's head
            add(map.place<true>(a - burst_div.mod_as<true>(a)), full_beats, 1);
            ++misaligned;
          }
          const uint64_t row_end = a + row_bytes;
          uint64_t addr = a;
          while (addr < row_end) {
            // The bursts starting in addr's unit: full ones, then the row's short last one if it is here.
            const uint64_t unit_end = (map.unit.div_as<true>(addr) + 1) * unit;
            const uint64_t starts = burst_div.div_as<true>(std::min(unit_end, row_end) - addr + burst - 1);
            const bool short_last = addr + starts * burst > row_end;
            const BankedDram::Place place = map.place<true>(addr);
            const int64_t full = static_cast<int64_t>(starts) - (short_last ? 1 : 0);
            if (full > 0) {
              add(place, full_beats, full);
              addr += static_cast<uint64_t>(full) * burst;
            }
            if (short_last) {
              add(place, dram.beats(static_cast<uint32_t>(row_end - addr)), 1);
              addr = row_end;
            }
            bursts += static_cast<int64_t>(starts);
          }
        }
      }
    }
    for (Run& r : pending_) {
      if (r.count > 0) dram.serve_fixed_issue(r.place, r.beats, write, r.count, start_ps, done);
      r.count = 0;
    }
    x.done_ps = done;
    x.bursts.bursts = bursts + misaligned;
    x.bursts.misaligned_bursts = misaligned;
    return x;
  }

  // The outstanding-request window of a transfer starting at start_ps: every slot free from then on. A slot
  // holding a time at or before start_ps is free as it is (a request's issue is never earlier than
  // start_ps), so only the slots the last transfer used are reset, unless a slot it left may hold a later
  // time (`free_by_`: no slot from `used_` on holds a time after it).
  IssueWindow window(uint64_t start_ps) {
    const size_t reset = start_ps >= free_by_ ? used_ : slots_.size();
    std::fill(slots_.begin(), slots_.begin() + static_cast<std::ptrdiff_t>(reset), start_ps);
    free_by_ = start_ps;  // every slot now holds start_ps or an earlier time
    return IssueWindow{slots_.data(), slots_.size(), 0, start_ps, start_ps};
  }
  // After a transfer: the slots it used, from the first on.
  void used(const DmaTransfer& x) { used_ = std::min(slots_.size(), static_cast<size_t>(x.bursts.bursts)); }

  // A run of requests at one place waiting to be served (run_fixed_issue), one per channel.
  struct Run {
    BankedDram::Place place;
    uint64_t beats;
    int64_t count = 0;
  };

  DmaConfig dma_;
  FastDiv burst_, align_;
  std::vector<uint64_t> slots_;  // completion time of the bursts in flight, a ring
  size_t used_ = 0;              // slots the last transfer used (from the first)
  uint64_t free_by_ = 0;         // no slot from used_ on holds a later time
  std::vector<Run> pending_;     // run_fixed_issue's, kept between transfers so as not to allocate
};

// A closed-form estimate of a LOAD/STORE in cycles on an otherwise idle machine (compiler cost
// model): setup + latency + bytes / min(peak bandwidth, outstanding-limited bandwidth).
double estimate_dma_cycles(const Instruction& ins, const NpuConfig& config);
// The same for the instruction's rows (dma_rows) whose channel_skew is `skew`.
double estimate_dma_cycles(const DmaRows& rows, double skew, const NpuConfig& config);

// How many times a contiguous transfer's DRAM time one byte of this transfer costs (>= 1): the transfer
// and a contiguous one of as many bytes, each simulated alone on an idle DRAM model, their bus occupancy
// compared (row misses of rows shorter than a page and far apart, channel imbalance, alignment bursts).
// Transfers of many rows are measured on their first rows (the pattern repeats). 1 with the ideal DRAM.
double dram_cost_factor(const DmaRows& rows, bool write, const NpuConfig& config);

// Bytes per NPU cycle the DRAM model sustains when every DMA engine streams transfers of
// `transfer_bytes` each (what a memory-bound layer gets, not the datasheet peak): each engine streams its
// own contiguous region, one transfer after the other (dma.setup_cycles between them, as an engine
// starts its next descriptor), reads and writes alternating by transfer as the engines' load and store
// queues do, measured on the DRAM model itself with the simulator's burst engines (row misses, refresh,
// read/write turnaround, the outstanding-request limit, each transfer's latency). Short transfers pay
// the latency each; long ones reach the DRAM's own streaming rate. 0 = unlimited (ideal DRAM).
double sustained_dram_bytes_per_cycle(const NpuConfig& config, int64_t transfer_bytes = 4096);

// sustained_dram_bytes_per_cycle as a function of the transfer's size, for cost models that ask it for
// many sizes: measured at powers of two (on first use) and interpolated linearly in the transfer time
// between them; transfers of 1 MiB and more take the 1 MiB rate (longer ones stream no faster).
// The measured rates are shared by every DramStreamRates of one configuration in the process (a table per
// configuration's spec text), so compiles after the first (a generated sequence's steps, a sweep's points)
// do not measure them again.
class DramStreamRates {
 public:
  explicit DramStreamRates(const NpuConfig& config);
  // Bytes per cycle (0 = unlimited).
  double bytes_per_cycle(double transfer_bytes) const;
  // The NPU cycles one byte of such a stream takes (0 = unlimited).
  double cycles_per_byte(double transfer_bytes) const {
    const double r = bytes_per_cycle(transfer_bytes);
    return r > 0 ? 1.0 / r : 0.0;
  }

 private:
  static constexpr int kMinLog2 = 6, kMaxLog2 = 20;
  double at(int log2) const;
  struct Table;
  const NpuConfig& config_;
  std::shared_ptr<Table> table_;                      // shared by the configuration's instances
  mutable std::array<double, kMaxLog2 + 1> rates_{};  // this instance's copy; 0 = not read yet
};

}  // namespace npusim::isa::timing
