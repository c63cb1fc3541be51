#pragma once
// What the cores of one NPU share: the DRAM model (every core's DMA engines issue their bursts to the
// same channels, banks and row buffers, so their transfers contend for its bandwidth) and the host
// link (one link each way; a host call's transfers wait while another core's use it). A single-core
// NPU has an uncore of its own, which changes nothing: its one host queue runs one call at a time.
#include <algorithm>
#include <cstdint>
#include <memory>

#include "isa/machine/config.h"
#include "isa/timing/banked_dram.h"
#include "isa/timing/dram.h"

namespace npusim::arch {

// Reservations of the host link, one per direction, first come first served in call order.
struct HostLinkBus {
  uint64_t in_free = 0;   // first cycle the NPU -> host direction is free
  uint64_t out_free = 0;  // first cycle the host -> NPU direction is free
};

class Uncore {
 public:
  // `cores`: the NPU's (config.cores), over which core_base() spreads the cores' regions.
  Uncore(const isa::DramConfig& dram, isa::timing::Refresh refresh, int64_t cores = 1)
      : dram(isa::timing::make_dram(dram, refresh)), cores_(std::max<int64_t>(cores, 1)) {}
  std::unique_ptr<isa::timing::Dram> dram;
  HostLinkBus link;

  // Where core `core`'s DRAM addresses start in the shared address space: each core's program addresses
  // its own region (the compiler places every program from 0), 64 GiB apart, moved on by whole pages to
  // start core * banks / cores banks over on a banked DRAM. A core's bursts keep their channel, column
  // and alignment, and each core's accesses conflict among themselves exactly as alone (a rotation of
  // the banks keeps which pages share a bank). Without the move, the same program on two cores (a batch
  // split) put each buffer of one core in the same bank as the other's, in another row: every access of
  // one closed the row the other had open (a small CNN on edge with 2 cores ran x1.62 slower per core,
  // 56 row misses where each core alone had 2), a pattern that bank hashing in DRAM controllers and the
  // different placements of a real runtime's buffers avoid.
  uint64_t core_base(int core) const {
    uint64_t base = static_cast<uint64_t>(core) << 36;
    const isa::timing::BankedDram* b = dram->banked();
    if (b && b->place_per_unit())
      base += b->bank_stride_bytes() * static_cast<uint64_t>((core * b->banks() / cores_) % b->banks());
    return base;
  }

 private:
  int64_t cores_;
};

}  // namespace npusim::arch
