#pragma once
// The entry of a unit's instruction queue.
#include <cstdint>
#include <ostream>

#include "isa/isa.h"

namespace npusim::arch {

// One queue entry: the instruction, pre-decoded for its unit when the sequencer dispatched it, and
// the cycle it was dispatched. Units read the entry, not the program: the entry is a few cache lines
// that the sequencer has just written, the program may be far larger than the caches.
struct Dispatch {
  // The instruction's timing parameters, which depend only on the instruction and the config.
  struct MatrixWork {
    int64_t total, stream, chained, macs, factor;  // ArrayCycles of MATMUL/CONV; factor: bank conflicts
  };
  struct VectorWork {
    uint64_t cycles;
    uint64_t bytes[isa::kNumBuffers];  // operand bytes per scratchpad
    int64_t src1, src2, dst;           // bytes per operand (datapath::vec_operand_bytes)
    uint32_t addr[3];                  // src1, src2, dst: byte addresses
    uint8_t buf[3];                    // ... and the scratchpads that hold their bytes
    bool stage;                        // runs on the output stage (isa::timing::on_output_stage)
  };
  struct HostWork {  // timing::HostCycles: the link each way (latency included) and the host's own time
    uint64_t link_in, host, link_out;
    uint64_t occupy_in, occupy_out;  // cycles the bytes occupy the link each way (no latency)
    int64_t in, out;
  };
  struct DmaWork {  // timing::DmaRows and the SRAM side
    uint64_t dram_addr;
    int64_t row_bytes;
    int64_t count[3];
    int64_t stride[3];
    uint64_t sram_bytes;
    isa::Buffer buf;
  };

  uint32_t index = 0;
  uint32_t layer = 0;
  uint64_t ready = 0;
  isa::Opcode opcode = isa::Opcode::kNop;
  uint8_t wait = 0;  // token masks (isa.h header)
  uint8_t signal = 0;
  union {
    MatrixWork matrix;
    VectorWork vector;
    HostWork host;
    DmaWork dma;
  } work{};
};
inline std::ostream& operator<<(std::ostream& os, const Dispatch& d) {
  return os << d.index << '@' << d.ready;
}

}  // namespace npusim::arch
