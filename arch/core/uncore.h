#pragma once
// What the cores of one NPU share: the DRAM model (every core's DMA engines issue their bursts to the
// same channels, banks and row buffers, so their transfers contend for its bandwidth) and the host
// link (one link each way; a host call's transfers wait while another core's use it). A single-core
// NPU has an uncore of its own, which changes nothing: its one host queue runs one call at a time.
#include <cstdint>
#include <memory>

#include "isa/machine/config.h"
#include "isa/timing/dram.h"

namespace npusim::arch {

// Reservations of the host link, one per direction, first come first served in call order.
struct HostLinkBus {
  uint64_t in_free = 0;   // first cycle the NPU -> host direction is free
  uint64_t out_free = 0;  // first cycle the host -> NPU direction is free
};

class Uncore {
 public:
  Uncore(const isa::DramConfig& dram, isa::timing::Refresh refresh)
      : dram(isa::timing::make_dram(dram, refresh)) {}
  std::unique_ptr<isa::timing::Dram> dram;
  HostLinkBus link;
};

// Where core `core`'s DRAM addresses start in the shared address space: each core's program addresses
// its own region (the compiler places every program from 0), 64 GiB apart, a multiple of every
// interleave unit, page and alignment rule, so a core's bursts keep their channel, bank and alignment.
inline constexpr uint64_t core_dram_base(int core) { return static_cast<uint64_t>(core) << 36; }

}  // namespace npusim::arch
