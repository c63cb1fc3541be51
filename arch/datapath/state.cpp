#include "arch/datapath/state.h"

#include <fmt/format.h>

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "arch/datapath/error.h"

namespace npusim::arch::datapath {

void DramImage::check(uint64_t addr, uint64_t n) {
  if (addr > kAddressBytes || n > kAddressBytes - addr) {
    throw DatapathError(
        fmt::format("DRAM access [{:#x}, {:#x}) leaves the 40-bit DRAM address space", addr, addr + n));
  }
}

void DramImage::read(uint64_t addr, void* dst, uint64_t n) const {
  check(addr, n);
  auto* out = static_cast<uint8_t*>(dst);
  while (n > 0) {
    const uint64_t page = addr >> kPageBits;
    const uint64_t off = addr & (kPageBytes - 1);
    const uint64_t take = std::min(n, kPageBytes - off);
    const auto it = pages_.find(page);
    if (it == pages_.end()) {
      std::memset(out, 0, take);
    } else {
      std::memcpy(out, it->second.get() + off, take);
    }
    out += take;
    addr += take;
    n -= take;
  }
}

void DramImage::write(uint64_t addr, const void* src, uint64_t n) {
  check(addr, n);
  const auto* in = static_cast<const uint8_t*>(src);
  while (n > 0) {
    const uint64_t page = addr >> kPageBits;
    const uint64_t off = addr & (kPageBytes - 1);
    const uint64_t take = std::min(n, kPageBytes - off);
    auto& p = pages_[page];
    if (!p) p.reset(new uint8_t[kPageBytes]());  // value-initialised: zeros
    std::memcpy(p.get() + off, in, take);
    in += take;
    addr += take;
    n -= take;
  }
}

void DramImage::fill(uint64_t addr, uint8_t value, uint64_t n) {
  check(addr, n);
  std::vector<uint8_t> chunk(std::min<uint64_t>(n, kPageBytes), value);
  while (n > 0) {
    const uint64_t take = std::min<uint64_t>(n, chunk.size());
    write(addr, chunk.data(), take);
    addr += take;
    n -= take;
  }
}

Scratchpad::Scratchpad(uint64_t bytes) : size_(bytes) {
  if (bytes == 0) return;
  // MAP_NORESERVE: nothing is committed (or counted against overcommit) until a page is written.
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    const int err = errno;
    size_ = 0;
    throw DatapathError(fmt::format("cannot map a scratchpad of {} bytes: {}", bytes, std::strerror(err)));
  }
  data_ = static_cast<uint8_t*>(p);
}

Scratchpad::~Scratchpad() {
  if (data_ != nullptr) munmap(data_, size_);
}

Scratchpad::Scratchpad(Scratchpad&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

Scratchpad& Scratchpad::operator=(Scratchpad&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) munmap(data_, size_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

MachineState::MachineState(const isa::NpuConfig& config) : MachineState(config, isa::Program{}) {}

MachineState::MachineState(const isa::NpuConfig& config, const isa::Program& program)
    : host_ops_(program.host_ops), tensors_(program.tensors) {
  for (int b = 0; b < isa::kNumBuffers; ++b) {
    storage_[static_cast<size_t>(b)] = config.sram.storage(static_cast<isa::Buffer>(b));
    if (storage_[static_cast<size_t>(b)] != static_cast<isa::Buffer>(b)) continue;
    sram_[b] =
        Scratchpad(static_cast<uint64_t>(config.sram.buffer(static_cast<isa::Buffer>(b)).size_bytes()));
  }
  for (const isa::DataSegment& seg : program.data) {
    if (seg.elided_bytes > 0) {
      throw DatapathError(
          fmt::format("the {} bytes of data at DRAM {:#x} were compiled for timing only (shape-only "
                      "weights): a functional run needs the model compiled with its values",
                      seg.elided_bytes, seg.dram_addr));
    }
    dram_.write(seg.dram_addr, seg.bytes.data(), seg.bytes.size());
  }
}

uint8_t* MachineState::sram_span(isa::Buffer b, uint64_t addr, uint64_t n, const std::string& what) {
  if (static_cast<int>(b) >= isa::kNumBuffers) {
    throw DatapathError(fmt::format("{}: buffer id {} does not exist", what, static_cast<int>(b)));
  }
  Scratchpad& s = sram(b);
  if (addr > s.size() || n > s.size() - addr) {
    throw DatapathError(
        fmt::format("{}: bytes [{:#x}, {:#x}) of the {} buffer exceed its capacity of {} bytes", what, addr,
                    addr + n, isa::kBufferNames[static_cast<size_t>(b)], s.size()));
  }
  return s.data() + addr;
}

const isa::TensorBinding& MachineState::tensor(const std::string& name) const {
  for (const isa::TensorBinding& t : tensors_) {
    if (t.name == name) return t;
  }
  std::string known;
  for (const isa::TensorBinding& t : tensors_) known += (known.empty() ? "" : ", ") + t.name;
  throw DatapathError(
      fmt::format("the program has no tensor '{}' (it has: {})", name, known.empty() ? "none" : known));
}

uint64_t MachineState::tensor_bytes(const isa::TensorBinding& t) {
  uint64_t n = static_cast<uint64_t>(isa::dtype_bytes(t.dtype));
  for (uint64_t d : t.dims) n *= d;
  return n;
}

std::vector<uint8_t> MachineState::read_tensor(const std::string& name) const {
  const isa::TensorBinding& t = tensor(name);
  std::vector<uint8_t> out(tensor_bytes(t));
  dram_.read(t.dram_addr, out.data(), out.size());
  return out;
}

void MachineState::write_tensor(const std::string& name, const std::vector<uint8_t>& bytes) {
  const isa::TensorBinding& t = tensor(name);
  const uint64_t want = tensor_bytes(t);
  if (bytes.size() != want) {
    throw DatapathError(fmt::format("tensor '{}' holds {} bytes ({} x {}), got {}", name, want,
                                    isa::kDTypeNames[static_cast<size_t>(t.dtype)],
                                    want / static_cast<uint64_t>(isa::dtype_bytes(t.dtype)), bytes.size()));
  }
  dram_.write(t.dram_addr, bytes.data(), bytes.size());
}

}  // namespace npusim::arch::datapath
