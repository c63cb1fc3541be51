// Machine state: sparse DRAM paging, scratchpad sizes, data segments and tensor I/O.
#include "arch/datapath/state.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <fstream>
#include <numeric>

#include "arch/datapath/error.h"

namespace npusim::arch::datapath {
namespace {

TEST(DramImage, AHighAddressCostsOnePageAndUntouchedMemoryReadsZero) {
  DramImage d;
  const uint64_t addr = 0x40'0000'0000ull;
  const uint32_t v = 0xdeadbeef;
  d.write(addr, &v, 4);
  EXPECT_EQ(d.pages_allocated(), 1u);
  EXPECT_EQ(d.bytes_allocated(), DramImage::kPageBytes);
  uint32_t back = 0;
  d.read(addr, &back, 4);
  EXPECT_EQ(back, v);
  std::vector<uint8_t> untouched(1 << 20, 0xff);
  d.read(0x10'0000'0000ull, untouched.data(), untouched.size());
  EXPECT_TRUE(std::all_of(untouched.begin(), untouched.end(), [](uint8_t b) { return b == 0; }));
  EXPECT_EQ(d.pages_allocated(), 1u) << "reads must not allocate";
}

TEST(DramImage, AccessesCrossPageBoundaries) {
  DramImage d;
  std::vector<uint8_t> data(3 * DramImage::kPageBytes + 10);
  std::iota(data.begin(), data.end(), 0);
  const uint64_t addr = 5 * DramImage::kPageBytes - 7;  // starts 7 bytes before a boundary
  d.write(addr, data.data(), data.size());
  EXPECT_EQ(d.pages_allocated(), 5u);  // pages 4..8
  std::vector<uint8_t> back(data.size());
  d.read(addr, back.data(), back.size());
  EXPECT_EQ(back, data);
  uint8_t before = 1;
  d.read(addr - 1, &before, 1);
  EXPECT_EQ(before, 0);
  d.fill(addr, 0xab, 20);
  d.read(addr, back.data(), 21);
  EXPECT_EQ(back[19], 0xab);
  EXPECT_EQ(back[20], data[20]);
}

TEST(DramImage, AccessBeyondTheFortyBitAddressSpaceIsAnError) {
  DramImage d;
  uint8_t b = 0;
  EXPECT_NO_THROW(d.read(DramImage::kAddressBytes - 1, &b, 1));
  EXPECT_THROW(d.read(DramImage::kAddressBytes - 1, &b, 2), DatapathError);
  EXPECT_THROW(d.write(DramImage::kAddressBytes, &b, 1), DatapathError);
}

TEST(MachineState, ScratchpadsAreSizedFromTheConfigAndSegmentsArePlaced) {
  isa::NpuConfig cfg;
  cfg.sram.input.size_kib = 3;
  cfg.sram.weight.size_kib = 5;
  cfg.sram.accumulator.size_kib = 7;
  isa::Program p;
  p.data.push_back({0x123, {1, 2, 3}});
  p.data.push_back({0x3f'ffff'fff0ull, std::vector<uint8_t>(32, 9)});  // straddles a page boundary
  MachineState st(cfg, p);
  EXPECT_EQ(st.sram(isa::Buffer::kInput).size(), 3u * 1024);
  EXPECT_EQ(st.sram(isa::Buffer::kWeight).size(), 5u * 1024);
  EXPECT_EQ(st.sram(isa::Buffer::kAccumulator).size(), 7u * 1024);
  uint8_t b[3];
  st.dram().read(0x123, b, 3);
  EXPECT_EQ(b[2], 3);
  st.dram().read(0x40'0000'000full, b, 1);
  EXPECT_EQ(b[0], 9);
  EXPECT_EQ(st.dram().pages_allocated(), 3u);
  EXPECT_THROW(st.sram_span(isa::Buffer::kInput, 3 * 1024 - 1, 2, "test"), DatapathError);
}

// The process's resident set, from /proc/self/statm (its second field, in pages).
uint64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

TEST(MachineState, ScratchpadsCostOnlyThePagesAProgramTouches) {
  isa::NpuConfig cfg;
  for (isa::ScratchpadConfig* pad : {&cfg.sram.input, &cfg.sram.weight, &cfg.sram.accumulator}) {
    pad->size_kib = 256 * 1024;  // 3 x 256 MiB: zero-filled up front they were 768 MiB resident
  }
  const uint64_t before = resident_bytes();
  MachineState st(cfg);
  const uint64_t last = 256ull << 20;
  for (isa::Buffer b : {isa::Buffer::kInput, isa::Buffer::kWeight, isa::Buffer::kAccumulator}) {
    ASSERT_EQ(st.sram(b).size(), last);
    EXPECT_EQ(*st.sram_span(b, 0, 1, "test"), 0);
    EXPECT_EQ(*st.sram_span(b, last / 2, 1, "test"), 0);
    *st.sram_span(b, last - 1, 1, "test") = 0x5a;
    EXPECT_EQ(st.sram(b).data()[last - 1], 0x5a);
  }
  EXPECT_LT(resident_bytes() - std::min(before, resident_bytes()), uint64_t{32} << 20);
}

TEST(MachineState, TensorsReadAndWriteAsRawBytes) {
  isa::NpuConfig cfg;
  isa::Program p;
  isa::TensorBinding in;
  in.name = "x";
  in.dtype = isa::DType::kFp16;
  in.dram_addr = 0x1000;
  in.dims = {2, 3};
  isa::TensorBinding out = in;
  out.name = "y";
  out.role = isa::TensorBinding::Role::kOutput;
  out.dtype = isa::DType::kInt32;
  out.dram_addr = 0x2000;
  out.dims = {4};
  p.tensors = {in, out};
  MachineState st(cfg, p);
  EXPECT_EQ(MachineState::tensor_bytes(st.tensor("x")), 12u);
  std::vector<uint8_t> bytes(12);
  std::iota(bytes.begin(), bytes.end(), 1);
  st.write_tensor("x", bytes);
  uint8_t raw[12];
  st.dram().read(0x1000, raw, 12);
  EXPECT_EQ(raw[11], 12);
  EXPECT_EQ(st.read_tensor("x"), bytes);
  EXPECT_EQ(st.read_tensor("y"), std::vector<uint8_t>(16, 0));
  EXPECT_THROW(st.write_tensor("x", std::vector<uint8_t>(11)), DatapathError);
  try {
    st.read_tensor("z");
    FAIL();
  } catch (const DatapathError& e) {
    EXPECT_NE(std::string(e.what()).find("x, y"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace npusim::arch::datapath
