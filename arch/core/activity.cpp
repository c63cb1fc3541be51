#include "arch/core/activity.h"

#include "arch/datapath/footprint.h"
#include "isa/timing/dma.h"
#include "isa/timing/systolic.h"
#include "isa/timing/units.h"

namespace npusim::arch {
namespace {

using isa::Buffer;
using isa::DType;
using isa::Field;

size_t mac_index(DType t) {
  for (size_t i = 0; i < isa::kMacPrecisions.size(); ++i)
    if (isa::kMacPrecisions[i] == t) return i;
  return 0;  // uint8 on the int8 datapath
}

}  // namespace

ActivityCounter::ActivityCounter(const isa::NpuConfig& config) : config_(config) {
  for (int i = 0; i < isa::kNumBuffers; ++i) {
    const auto b = static_cast<Buffer>(i);
    const auto width = static_cast<uint64_t>(config.sram.buffer(b).bank_width_bytes);
    // Bank widths are powers of two in every preset: a shift, not a divide per counted access.
    const int shift = width != 0 && (width & (width - 1)) == 0 ? __builtin_ctzll(width) : -1;
    banks_[static_cast<size_t>(i)] = Banks{width, shift, static_cast<size_t>(config.sram.storage(b))};
  }
}

void ActivityCounter::access(traces::Activity& a, Buffer b, int64_t bytes, int64_t times, bool write) const {
  if (bytes <= 0 || times <= 0) return;
  const Banks& k = banks_[static_cast<size_t>(b)];
  const uint64_t n = static_cast<uint64_t>(bytes) + k.width - 1;
  const uint64_t per_time = k.shift >= 0 ? n >> k.shift : n / k.width;
  (write ? a.sram_writes : a.sram_reads)[k.storage] += per_time * static_cast<uint64_t>(times);
}

void ActivityCounter::count_matrix(const isa::Instruction& ins, traces::Activity& a) const {
  const isa::NpuConfig& c = config_;
  const auto dt = static_cast<DType>(ins.get(Field::kDtype));
  const isa::timing::GemmShape g = isa::timing::gemm_shape(ins);
  const isa::timing::FoldMap f = isa::timing::fold_map(c.systolic_array, g);
  a.macs[mac_index(dt)] += static_cast<uint64_t>(g.m * g.k * g.n);
  const int64_t a_bytes = g.m * g.k * isa::dtype_bytes(dt);
  const int64_t b_bytes = g.k * g.n * isa::dtype_bytes(datapath::weight_dtype(dt));
  const int64_t c_bytes = g.m * g.n * isa::dtype_bytes(datapath::accumulator_dtype(dt));
  const bool preloaded = ins.get(Field::kPreloaded) != 0;
  const int64_t accumulate = ins.get(Field::kAccumulate) != 0 ? 1 : 0;
  int64_t a_reads = 1, b_reads = 1, c_writes = 1;
  switch (c.systolic_array.dataflow) {
    case isa::Dataflow::kWs:  // B stationary, A streamed per column fold, C per row fold
      a_reads = f.col_folds;
      b_reads = preloaded ? 0 : 1;
      c_writes = f.row_folds;
      break;
    case isa::Dataflow::kOs:  // C stays in the PEs; A streamed per column fold, B per row fold
      a_reads = f.col_folds;
      b_reads = f.row_folds;
      break;
    case isa::Dataflow::kIs:  // A stationary, B streamed per column fold, C per row fold
      a_reads = preloaded ? 0 : 1;
      b_reads = f.col_folds;
      c_writes = f.row_folds;
      break;
  }
  access(a, Buffer::kInput, a_bytes, a_reads, false);
  access(a, Buffer::kWeight, b_bytes, b_reads, false);
  access(a, Buffer::kAccumulator, c_bytes, c_writes, true);
  access(a, Buffer::kAccumulator, c_bytes, c_writes - 1 + accumulate, false);
}

void count_activity(const isa::Instruction& ins, const Dispatch& d, const isa::NpuConfig& c,
                    traces::Activity& a) {
  ActivityCounter(c).count(ins, d, a);
}

void ActivityCounter::count(const isa::Instruction& ins, const Dispatch& d, traces::Activity& a) const {
  const isa::NpuConfig& c = config_;
  switch (ins.opcode) {
    case isa::Opcode::kLoad:
    case isa::Opcode::kStore: {
      const bool store = ins.opcode == isa::Opcode::kStore;
      const Dispatch::DmaWork& w = d.work.dma;
      a.dma_bytes += static_cast<uint64_t>(w.row_bytes * w.count[0] * w.count[1] * w.count[2]);
      access(a, w.buf, static_cast<int64_t>(w.sram_bytes), 1, !store);
      break;
    }
    case isa::Opcode::kPreload:
      access(a, static_cast<Buffer>(ins.get(Field::kBuf)),
             ins.get(Field::kRows) * ins.get(Field::kCols) *
                 isa::dtype_bytes(static_cast<DType>(ins.get(Field::kDtype))),
             1, false);
      break;
    case isa::Opcode::kMatmul:
    case isa::Opcode::kConv:
      count_matrix(ins, a);
      break;
    case isa::Opcode::kVec: {
      const Dispatch::VectorWork& w = d.work.vector;
      access(a, static_cast<Buffer>(ins.get(Field::kSrc1Buf)), w.src1, 1, false);
      access(a, static_cast<Buffer>(ins.get(Field::kSrc2Buf)), w.src2, 1, false);
      access(a, static_cast<Buffer>(ins.get(Field::kDstBuf)), w.dst, 1, true);
      const auto op = static_cast<size_t>(ins.get(Field::kVop));
      a.vector_elements +=
          static_cast<uint64_t>(isa::timing::vec_work_elements(ins) * c.vector.ops[op].ii_cycles);
      break;
    }
    case isa::Opcode::kHostCall:
      a.host_link_bytes += static_cast<uint64_t>(ins.get(Field::kInBytes) + ins.get(Field::kOutBytes));
      break;
    default:
      break;
  }
}

}  // namespace npusim::arch
