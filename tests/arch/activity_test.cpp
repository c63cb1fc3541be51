// arch/core/activity.h's ActivityCounter looks each scratchpad's bank width and storage up once and counts
// with a shift when the width is a power of two: its counts must be whole bank words of the storage the
// buffer lives in, ceil(bytes / bank_width_bytes), for any width (a divide when it is not a power of two)
// and with the weights in the input scratchpad (shared_scratchpad).
#include <gtest/gtest.h>

#include "arch/core/activity.h"

namespace npusim::arch {
namespace {

using isa::Buffer;

// A LOAD (write = true) or STORE of `bytes` to buffer `b`, as its unit decodes it.
Dispatch transfer(Buffer b, uint64_t bytes, bool load) {
  Dispatch d;
  d.opcode = load ? isa::Opcode::kLoad : isa::Opcode::kStore;
  d.work.dma.buf = b;
  d.work.dma.sram_bytes = bytes;
  d.work.dma.row_bytes = static_cast<int64_t>(bytes);
  for (int i = 0; i < 3; ++i) d.work.dma.count[i] = 1;
  return d;
}

isa::Instruction of(const Dispatch& d) {
  isa::Instruction ins;
  ins.opcode = d.opcode;
  return ins;
}

uint64_t words(uint64_t bytes, uint64_t width) { return (bytes + width - 1) / width; }

TEST(ActivityCounter, CountsWholeBankWordsOfTheStorageForAnyBankWidth) {
  isa::NpuConfig config;
  config.sram.input.bank_width_bytes = 16;        // a power of two: the shift
  config.sram.weight.bank_width_bytes = 24;       // not one: the divide
  config.sram.accumulator.bank_width_bytes = 48;  // not one either
  const ActivityCounter counter(config);
  traces::Activity a;
  for (uint64_t bytes : {1, 15, 16, 17, 23, 24, 25, 47, 48, 49, 1000, 4096}) {
    for (Buffer b : {Buffer::kInput, Buffer::kWeight, Buffer::kAccumulator}) {
      for (bool load : {true, false}) {
        const Dispatch d = transfer(b, bytes, load);
        traces::Activity got;
        counter.count(of(d), d, got);
        const uint64_t width = static_cast<uint64_t>(config.sram.buffer(b).bank_width_bytes);
        traces::Activity want;
        (load ? want.sram_writes : want.sram_reads)[static_cast<size_t>(b)] = words(bytes, width);
        want.dma_bytes = bytes;
        EXPECT_EQ(got.sram_reads, want.sram_reads) << bytes << " bytes, buffer " << static_cast<int>(b);
        EXPECT_EQ(got.sram_writes, want.sram_writes) << bytes << " bytes, buffer " << static_cast<int>(b);
        EXPECT_EQ(got.dma_bytes, want.dma_bytes);
        counter.count(of(d), d, a);
      }
    }
  }
  // count_activity, which looks the scratchpads up per call, counts the same.
  traces::Activity b;
  for (uint64_t bytes : {1, 15, 16, 17, 23, 24, 25, 47, 48, 49, 1000, 4096})
    for (Buffer buf : {Buffer::kInput, Buffer::kWeight, Buffer::kAccumulator})
      for (bool load : {true, false}) {
        const Dispatch d = transfer(buf, bytes, load);
        count_activity(of(d), d, config, b);
      }
  EXPECT_EQ(a.sram_reads, b.sram_reads);
  EXPECT_EQ(a.sram_writes, b.sram_writes);
}

TEST(ActivityCounter, CountsWeightAccessesOnTheInputScratchpadWhenShared) {
  isa::NpuConfig config;
  config.sram.shared_scratchpad = true;
  config.sram.input.bank_width_bytes = 32;
  config.sram.weight.bank_width_bytes = 8;  // not used: the weights live in the input scratchpad
  const ActivityCounter counter(config);
  const Dispatch d = transfer(Buffer::kWeight, 100, true);
  traces::Activity a;
  counter.count(of(d), d, a);
  EXPECT_EQ(a.sram_writes[static_cast<size_t>(Buffer::kInput)], 4u);  // ceil(100 / 32)
  EXPECT_EQ(a.sram_writes[static_cast<size_t>(Buffer::kWeight)], 0u);
}

}  // namespace
}  // namespace npusim::arch
