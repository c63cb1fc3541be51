#include "sim/demo/demo_program.h"

#include <fmt/format.h>

#include <random>
#include <stdexcept>

namespace npusim::sim {
namespace {

using isa::Field;
using isa::Instruction;
using isa::Opcode;
using isa::Queue;

constexpr int64_t bit(Queue q) { return int64_t{1} << static_cast<int>(q); }

// Demo layer shape: a 3x3 convolution over a 32x32x32 map with 128 filters, as a GEMM.
constexpr int64_t kM = 32 * 32;
constexpr int64_t kK = 3 * 3 * 32;
constexpr int64_t kN = 128;
constexpr uint64_t kWeightsAddr = 0x000000;
constexpr uint64_t kInputAddr = 0x100000;
constexpr uint64_t kOutputAddr = 0x200000;

Instruction dma(Opcode op, uint64_t dram, isa::Buffer buf, int64_t sram, int64_t row, int64_t rows,
                int64_t stride) {
  Instruction i;
  i.opcode = op;
  i.set(Field::kDtype, static_cast<int64_t>(isa::DType::kInt8))
      .set(Field::kBuf, static_cast<int64_t>(buf))
      .set(Field::kDramAddr, static_cast<int64_t>(dram))
      .set(Field::kSramAddr, sram)
      .set(Field::kSize0, row)
      .set(Field::kSize1, rows)
      .set(Field::kSize2, 1)
      .set(Field::kSize3, 1)
      .set(Field::kStride1, stride);
  return i;
}

Instruction vec(isa::VecOp op, isa::DType in, isa::DType out, int64_t src, int64_t dst, int64_t rows,
                int64_t cols) {
  Instruction i;
  i.opcode = Opcode::kVec;
  const bool from_acc = in == isa::DType::kInt32;
  i.set(Field::kVop, static_cast<int64_t>(op))
      .set(Field::kDtype, static_cast<int64_t>(in))
      .set(Field::kDtypeOut, static_cast<int64_t>(out))
      .set(Field::kSrc1Buf, static_cast<int64_t>(from_acc ? isa::Buffer::kAccumulator : isa::Buffer::kInput))
      .set(Field::kSrc1Addr, src)
      .set(Field::kDstBuf, static_cast<int64_t>(isa::Buffer::kInput))
      .set(Field::kDstAddr, dst)
      .set(Field::kD0, cols)
      .set(Field::kD1, rows)
      .set(Field::kD2, 1);
  return i;
}

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(-64, 63);
  std::vector<uint8_t> b(n);
  for (auto& x : b) x = static_cast<uint8_t>(d(rng));
  return b;
}

}  // namespace

isa::Program demo_program(const isa::NpuConfig& config) {
  const int64_t in_bytes = config.sram.input.size_bytes();
  const int64_t acc_bytes = config.sram.accumulator.size_bytes();
  // Rows of the output per tile: two input tiles, two int8 output tiles and two int32 accumulator
  // tiles (ping-pong) must fit.
  int64_t tm = 256;
  while (tm > 1 && (2 * tm * (kK + kN) > in_bytes || 2 * tm * kN * 4 > acc_bytes)) tm /= 2;
  if (2 * tm * (kK + kN) > in_bytes || 2 * tm * kN * 4 > acc_bytes || kK * kN > config.sram.weight.size_bytes()) {
    throw std::runtime_error(
        fmt::format("the demo layer ({}x{}x{} int8) does not fit this NPU's scratchpads (input {} KiB, weight {} "
                    "KiB, accumulator {} KiB)",
                    kM, kK, kN, config.sram.input.size_kib, config.sram.weight.size_kib,
                    config.sram.accumulator.size_kib));
  }
  const int64_t tiles = kM / tm;
  const int64_t a_tile = tm * kK;      // bytes of one int8 input tile
  const int64_t out_base = 2 * a_tile;  // int8 output tiles follow the two input tiles
  const int64_t out_tile = tm * kN;
  const int64_t c_tile = tm * kN * 4;

  isa::Program p;
  p.layers = {{"conv1", "Conv"}, {"relu1", "Relu"}, {"argmax", "ArgMax"}};
  p.host_ops = {{"argmax", "ArgMax", static_cast<uint64_t>(kM * kN)}};
  p.data = {{kWeightsAddr, random_bytes(kK * kN, 1)}, {kInputAddr, random_bytes(kM * kK, 2)}};
  p.tensors = {{"input", isa::TensorBinding::Role::kInput, isa::DType::kInt8, kInputAddr, {1, 32, 32, kK}},
               {"output", isa::TensorBinding::Role::kOutput, isa::DType::kInt8, kOutputAddr, {1, 32, 32, kN}}};
  auto& code = p.instructions;
  auto tag = [](Instruction i, int layer) { return i.set(Field::kLayer, layer); };

  // Weights once; the matrix queue consumes their token with a NOP.
  code.push_back(tag(dma(Opcode::kLoad, kWeightsAddr, isa::Buffer::kWeight, 0, kN, kK, kN), 0)
                     .set(Field::kSignal, bit(Queue::kMatrix)));
  Instruction nop;
  nop.opcode = Opcode::kNop;
  code.push_back(tag(nop, 0).set(Field::kWait, bit(Queue::kLoad)));

  for (int64_t t = 0; t < tiles; ++t) {
    const int64_t b = t % 2;
    const bool reuse = t >= 2;         // the ping-pong buffer was used two tiles ago
    const bool more = t + 2 < tiles;  // someone will reuse this buffer
    Instruction load = dma(Opcode::kLoad, kInputAddr + t * a_tile, isa::Buffer::kInput, b * a_tile, kK, tm, kK);
    code.push_back(tag(load, 0)
                       .set(Field::kWait, reuse ? bit(Queue::kMatrix) : 0)
                       .set(Field::kSignal, bit(Queue::kMatrix)));
    Instruction mm;
    mm.opcode = Opcode::kMatmul;
    mm.set(Field::kDtype, static_cast<int64_t>(isa::DType::kInt8))
        .set(Field::kAAddr, b * a_tile)
        .set(Field::kAStride, kK)
        .set(Field::kBAddr, 0)
        .set(Field::kCAddr, b * c_tile)
        .set(Field::kM, tm)
        .set(Field::kK, kK)
        .set(Field::kN, kN);
    code.push_back(tag(mm, 0)
                       .set(Field::kWait, bit(Queue::kLoad) | (reuse ? bit(Queue::kVector) : 0))
                       .set(Field::kSignal, bit(Queue::kVector) | (more ? bit(Queue::kLoad) : 0)));
    Instruction rq = vec(isa::VecOp::kRequantize, isa::DType::kInt32, isa::DType::kInt8, b * c_tile,
                         out_base + b * out_tile, tm, kN);
    rq.set(Field::kImm0, 1 << 30).set(Field::kImm1, 8).set(Field::kImm2, 0);
    code.push_back(tag(rq, 0)
                       .set(Field::kWait, bit(Queue::kMatrix) | (reuse ? bit(Queue::kStore) : 0))
                       .set(Field::kSignal, more ? bit(Queue::kMatrix) : 0));
    Instruction relu = vec(isa::VecOp::kRelu, isa::DType::kInt8, isa::DType::kInt8, out_base + b * out_tile,
                           out_base + b * out_tile, tm, kN);
    code.push_back(tag(relu, 1).set(Field::kSignal, bit(Queue::kStore)));
    Instruction st = dma(Opcode::kStore, kOutputAddr + t * out_tile, isa::Buffer::kInput, out_base + b * out_tile,
                         kN, tm, kN);
    code.push_back(tag(st, 1)
                       .set(Field::kWait, bit(Queue::kVector))
                       .set(Field::kSignal, (more ? bit(Queue::kVector) : 0) | (t + 1 == tiles ? bit(Queue::kHost) : 0)));
  }
  Instruction host;
  host.opcode = Opcode::kHostCall;
  host.set(Field::kHostOp, 0)
      .set(Field::kInBytes, kM * kN)
      .set(Field::kOutBytes, kM * 8)
      .set(Field::kCpuOps, kM * kN)
      .set(Field::kWait, bit(Queue::kStore));
  code.push_back(tag(host, 2));
  Instruction halt;
  halt.opcode = Opcode::kHalt;
  code.push_back(halt);
  return p;
}

}  // namespace npusim::sim
