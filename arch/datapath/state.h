#pragma once
// The architectural state the functional datapath computes on: a sparse DRAM image, the three SRAM
// scratchpads, the systolic array's stationary register, and the program's host ops and tensor
// bindings. The SystemC units own timing; they all share one MachineState for the values.
#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "isa/machine/config.h"
#include "isa/program.h"

namespace npusim::arch::datapath {

// DRAM as a sparse byte image: 64 KiB pages allocated on first write, so a program that places data at
// 0x40_0000_0000 costs one page, not 256 GiB. Untouched bytes read as zero without allocating.
class DramImage {
 public:
  static constexpr uint64_t kPageBits = 16;
  static constexpr uint64_t kPageBytes = uint64_t{1} << kPageBits;
  // The byte address space: the LOAD/STORE dram field is 40 bits wide.
  static constexpr uint64_t kAddressBytes = uint64_t{1} << 40;

  // Both throw DatapathError when [addr, addr + n) leaves the 40-bit address space.
  void read(uint64_t addr, void* dst, uint64_t n) const;
  void write(uint64_t addr, const void* src, uint64_t n);
  void fill(uint64_t addr, uint8_t value, uint64_t n);

  size_t pages_allocated() const { return pages_.size(); }
  uint64_t bytes_allocated() const { return pages_.size() * kPageBytes; }

 private:
  static void check(uint64_t addr, uint64_t n);
  std::unordered_map<uint64_t, std::unique_ptr<uint8_t[]>> pages_;
};

// A scratchpad's bytes, zero at the start: anonymous memory that the OS maps to its zero page and commits
// a page at a time on first write, so a run costs the RAM of the pages its program touches, not the
// configured size (the scalesim preset's three 4 GiB scratchpads would have been 12 GiB zero-filled).
class Scratchpad {
 public:
  Scratchpad() = default;
  // Throws DatapathError when `bytes` of address space cannot be mapped.
  explicit Scratchpad(uint64_t bytes);
  ~Scratchpad();
  Scratchpad(Scratchpad&& other) noexcept;
  Scratchpad& operator=(Scratchpad&& other) noexcept;
  Scratchpad(const Scratchpad&) = delete;
  Scratchpad& operator=(const Scratchpad&) = delete;

  uint8_t* data() { return data_; }
  const uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }

 private:
  uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
};

// The operand held in the array's stationary registers by the last PRELOAD: rows x cols elements of
// `dtype`, row-major and dense (the row_stride of the PRELOAD is already applied).
struct StationaryOperand {
  bool valid = false;
  isa::DType dtype = isa::DType::kInt8;
  int64_t rows = 0;
  int64_t cols = 0;
  std::vector<uint8_t> bytes;
};

class MachineState;
// Runs a HOSTCALL's op on the machine state (the compiler installs one that evaluates the ONNX node on
// DRAM tensors). Without one, HOSTCALL has no effect on values.
using HostOpHandler = std::function<void(const isa::HostOp&, MachineState&)>;

// Everything an instruction can read or write.
class MachineState {
 public:
  // Sizes the scratchpads from config.sram and places every data segment of `program` in DRAM.
  MachineState(const isa::NpuConfig& config, const isa::Program& program);
  explicit MachineState(const isa::NpuConfig& config);

  DramImage& dram() { return dram_; }
  const DramImage& dram() const { return dram_; }

  // A scratchpad's bytes (size = config.sram.<buf>.size_kib * 1024).
  // With sram.shared_scratchpad the weight buffer is the input scratchpad's bytes.
  Scratchpad& sram(isa::Buffer b) { return sram_[static_cast<size_t>(storage_[static_cast<size_t>(b)])]; }
  const Scratchpad& sram(isa::Buffer b) const {
    return sram_[static_cast<size_t>(storage_[static_cast<size_t>(b)])];
  }
  // Pointer to [addr, addr + n) of a scratchpad; throws DatapathError naming `what` if it does not fit.
  uint8_t* sram_span(isa::Buffer b, uint64_t addr, uint64_t n, const std::string& what);

  StationaryOperand& stationary() { return stationary_; }
  const StationaryOperand& stationary() const { return stationary_; }

  const std::vector<isa::HostOp>& host_ops() const { return host_ops_; }
  void set_host_op_handler(HostOpHandler h) { host_op_handler_ = std::move(h); }
  const HostOpHandler& host_op_handler() const { return host_op_handler_; }

  // The program's model inputs and outputs, as raw little-endian bytes of their dtype in DRAM.
  const std::vector<isa::TensorBinding>& tensors() const { return tensors_; }
  // Throws DatapathError for an unknown name, listing the known ones.
  const isa::TensorBinding& tensor(const std::string& name) const;
  static uint64_t tensor_bytes(const isa::TensorBinding& t);
  std::vector<uint8_t> read_tensor(const std::string& name) const;
  // `bytes` must be exactly tensor_bytes() long.
  void write_tensor(const std::string& name, const std::vector<uint8_t>& bytes);

 private:
  DramImage dram_;
  Scratchpad sram_[isa::kNumBuffers];
  std::array<isa::Buffer, isa::kNumBuffers> storage_ = {isa::Buffer::kInput, isa::Buffer::kWeight,
                                                        isa::Buffer::kAccumulator};
  StationaryOperand stationary_;
  std::vector<isa::HostOp> host_ops_;
  std::vector<isa::TensorBinding> tensors_;
  HostOpHandler host_op_handler_;
};

}  // namespace npusim::arch::datapath
