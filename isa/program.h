#pragma once
// A compiled or assembled NPU program and its binary file format.
//
// File layout (all integers little-endian):
//   magic "NPUSIMPG" (8 bytes), format version (u32), section count (u32)
//   then sections, each: kind (u32), byte length (u64), payload:
//     kind 1 machine:      the machine spec the program was compiled for, as "key=value\n" lines
//                          (every parameter of NpuConfig, dotted keys as in YAML)
//     kind 2 layers:       u32 count, then per layer: name (u32 length + bytes), op type (same)
//     kind 3 data:         u32 count, then per segment: DRAM byte address (u64), byte length (u64), bytes
//     kind 4 instructions: u64 word count, then the 64-bit halves of the encoded 128-bit words
//     kind 5 host_ops:     u32 count, then per op: a name, an ONNX op type, cpu ops (u64)
//     kind 6 tensors:      u32 count, then per tensor: name, role (u8: 0 input, 1 output), dtype (u8),
//                          DRAM byte address (u64), rank (u32) and dims (u64 each)
//     kind 7 layer_info:   u32 count (that of the layers section), then per layer: useful MACs (u64,
//                          0 = not recorded) and precision (u8: a DType, 255 = not recorded); a file
//                          without it (written before it existed) records neither
//   Unknown section kinds are an error. Every length is checked against the file size before use.
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "isa/isa.h"

namespace npusim::isa {

inline constexpr uint32_t kProgramFormatVersion = 1;

// An ONNX node (or a SCALE-Sim layer) the instructions are tagged with.
struct Layer {
  std::string name;
  std::string op;
  // The compiler's view of the layer, carried so that a program run without it (`npusim exec`) reports
  // what `npusim run` reports: the useful MACs from the layer's shapes (0 = not recorded: the report
  // counts the MACs the array executes) and the number format it runs in (none = not recorded).
  uint64_t macs = 0;
  std::optional<DType> precision = std::nullopt;
  bool operator==(const Layer& o) const {
    return name == o.name && op == o.op && macs == o.macs && precision == o.precision;
  }
};

// Bytes placed in DRAM before the program starts (weights, constants).
struct DataSegment {
  uint64_t dram_addr = 0;
  std::vector<uint8_t> bytes;
  // A segment of a timing-only compile whose values were never generated (compiler::Tensor::shape_only
  // weights): its size, with `bytes` empty. A program holding one simulates in timing mode only: it
  // cannot be written (serialize, disassemble) nor run functionally.
  uint64_t elided_bytes = 0;
  uint64_t size() const { return bytes.size() + elided_bytes; }
  bool operator==(const DataSegment& o) const {
    return dram_addr == o.dram_addr && bytes == o.bytes && elided_bytes == o.elided_bytes;
  }
};

// An operation the host CPU runs for a HOSTCALL.
struct HostOp {
  std::string name;
  std::string op_type;
  uint64_t cpu_ops = 0;
  bool operator==(const HostOp& o) const {
    return name == o.name && op_type == o.op_type && cpu_ops == o.cpu_ops;
  }
};

// A model input or output living in DRAM.
struct TensorBinding {
  enum class Role : uint8_t { kInput = 0, kOutput = 1 };
  std::string name;
  Role role = Role::kInput;
  DType dtype = DType::kFp32;
  uint64_t dram_addr = 0;
  std::vector<uint64_t> dims;
  bool operator==(const TensorBinding& o) const {
    return name == o.name && role == o.role && dtype == o.dtype && dram_addr == o.dram_addr && dims == o.dims;
  }
};

struct Program {
  std::string machine;  // "key=value\n" lines; empty when not compiled for a specific machine
  std::vector<Layer> layers;
  std::vector<DataSegment> data;
  std::vector<Instruction> instructions;
  std::vector<HostOp> host_ops;
  std::vector<TensorBinding> tensors;
  bool operator==(const Program& o) const {
    return machine == o.machine && layers == o.layers && data == o.data && instructions == o.instructions &&
           host_ops == o.host_ops && tensors == o.tensors;
  }
};

// A program file or assembly text that cannot be read; the message says where and why.
class ProgramError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Throws ProgramError when a data segment's bytes were left out (DataSegment::elided_bytes): `what`
// (writing the program, a functional run) needs them.
void require_data_bytes(const Program& p, const std::string& what);

// Throws ProgramError for a program with elided data (require_data_bytes).
std::vector<uint8_t> serialize(const Program& p);
// Throws ProgramError on any malformed input (never reads out of bounds, never aborts).
Program deserialize(const std::vector<uint8_t>& bytes);

void write_program_file(const std::string& path, const Program& p);
Program read_program_file(const std::string& path);

}  // namespace npusim::isa
