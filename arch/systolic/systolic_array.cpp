#include "arch/systolic/systolic_array.h"

#include <algorithm>

#include "arch/datapath/footprint.h"
#include "isa/timing/units.h"

namespace npusim::arch {

using isa::Field;
using isa::Opcode;
namespace timing = isa::timing;

SystolicArray::SystolicArray(const sc_core::sc_module_name& name, const isa::SystolicArrayConfig& config,
                             Fabric& fabric)
    : QueueUnit(name, fabric, isa::Queue::kMatrix), config_(config) {
  if (config_.model == isa::ArrayModel::kPe) {
    pe_ = std::make_unique<datapath::PeArray>(config_.rows, config_.cols, config_.dataflow);
  }
}

timing::ArrayCycles SystolicArray::tile_cycles(const isa::Instruction& ins) const {
  timing::ArrayCycles c = timing::matrix_cycles(ins, config_);
  if (pe_) {
    // Step every PE; the datapath's PE model takes the same double-buffering, preload and precision
    // options as the closed form, so only the total is replaced.
    const timing::GemmShape g = timing::gemm_shape(ins);
    datapath::PeTimingOptions opt;
    opt.double_buffered = config_.double_buffered;
    opt.pipelined_folds = config_.folds_pipelined();
    opt.first_fold_preloaded = ins.get(Field::kPreloaded) != 0;
    opt.rate = config_.rate(static_cast<isa::DType>(ins.get(Field::kDtype)));
    c.total = pe_->run(g.m, g.k, g.n, nullptr, opt).cycles;
  }
  return c;
}

int64_t SystolicArray::conflict_factor(const isa::Instruction& ins) const {
  if (ins.opcode != Opcode::kMatmul) return 1;  // CONV's implicit im2col reads are not modelled
  const auto dt = static_cast<isa::DType>(ins.get(Field::kDtype));
  switch (config_.dataflow) {
    case isa::Dataflow::kOs: {
      // Each cycle the array reads one A element per row: rows a_stride elements apart.
      const int64_t count = std::min<int64_t>(config_.rows, ins.get(Field::kM));
      const int64_t a_stride = ins.get(Field::kAStride) ? ins.get(Field::kAStride) : ins.get(Field::kK);
      return timing::bank_conflict_factor(static_cast<uint64_t>(ins.get(Field::kAAddr)),
                                          a_stride * isa::dtype_bytes(dt), count,
                                          fab_.sram.buffer(isa::Buffer::kInput));
    }
    case isa::Dataflow::kIs: {
      // Each cycle one B element per row: rows n elements apart.
      const int64_t count = std::min<int64_t>(config_.rows, ins.get(Field::kK));
      return timing::bank_conflict_factor(static_cast<uint64_t>(ins.get(Field::kBAddr)),
                                          ins.get(Field::kN) * isa::dtype_bytes(datapath::weight_dtype(dt)),
                                          count, fab_.sram.buffer(isa::Buffer::kWeight));
    }
    case isa::Dataflow::kWs:
      return 1;  // one contiguous row of A per cycle
  }
  return 1;
}

void SystolicArray::decode(const isa::Instruction& ins, Dispatch& d) const {
  if (ins.opcode != Opcode::kMatmul && ins.opcode != Opcode::kConv) return;
  const timing::ArrayCycles c = tile_cycles(ins);
  d.work.matrix = Dispatch::MatrixWork{c.total, c.stream, c.chained, c.macs, conflict_factor(ins)};
}

bool SystolicArray::advance(const Dispatch& d, uint64_t token_cycle) {
  switch (step_) {
    case Step::kStart:
      break;
    case Step::kConflictOver:
      return compute(d, token_cycle);
    case Step::kDone:
      return finish(d);
  }
  const uint64_t now = fab_.now();
  switch (d.opcode) {
    case Opcode::kPreload: {
      fab_.execute(d.index);
      int64_t cycles = timing::preload_cycles(config_);
      if (config_.double_buffered) {
        // The shift-in could start once the instruction was ready and the shadow registers were free
        // (the previous MATMUL took their contents when it started): only the rest is exposed.
        const uint64_t could_start = std::max(token_cycle, last_compute_start_);
        cycles = std::max<int64_t>(0, static_cast<int64_t>(could_start + cycles) - static_cast<int64_t>(now));
      }
      fab_.rec.busy(unit_, d, now, now + cycles, traces::Category::kCompute);
      if (auto* l = fab_.rec.layer(d.layer)) l->compute_cycles += cycles;
      step_ = Step::kDone;
      if (cycles > 0) {
        resume_after(static_cast<uint64_t>(cycles));
        return false;
      }
      return finish(d);
    }
    case Opcode::kMatmul:
    case Opcode::kConv: {
      fab_.execute(d.index);
      last_compute_start_ = now;
      const Dispatch::MatrixWork& c = d.work.matrix;
      macs_ += static_cast<uint64_t>(c.macs);
      step_ = Step::kConflictOver;
      if (c.factor > 1) {
        // The stream phase runs `factor` times slower: charged as a bank-conflict stall up front.
        const uint64_t extra = static_cast<uint64_t>(c.stream * (c.factor - 1));
        auto* layer = fab_.rec.layer(d.layer);
        fab_.sram.count_conflict(extra, layer ? &layer->bank_conflict_cycles : nullptr);
        fab_.rec.stall(unit_, d, traces::Reason::kBankConflict, now, now + extra, true);
        if (extra > 0) {
          resume_after(extra);
          return false;
        }
      }
      return compute(d, token_cycle);
    }
    default:  // NOP: a pure synchronisation point
      fab_.complete(queue_, d.signal);
      return true;
  }
}

bool SystolicArray::compute(const Dispatch& d, uint64_t token_cycle) {
  const uint64_t t = fab_.now();
  const Dispatch::MatrixWork& c = d.work.matrix;
  uint64_t end = t + static_cast<uint64_t>(c.total);
  if (config_.instructions_chained() && chain_open_ && c.factor == 1) {
    // It could enter right behind the previous instruction's last row, or start afresh once it was
    // ready, whichever ends later; never later than starting afresh now.
    const uint64_t behind = last_row_in_ + static_cast<uint64_t>(c.chained + timing::skew_cycles(config_));
    end = std::min(end, std::max({behind, token_cycle + static_cast<uint64_t>(c.total), t}));
  }
  const int64_t cycles = static_cast<int64_t>(end - t);
  fab_.rec.busy(unit_, d, t, end, traces::Category::kCompute);
  if (auto* l = fab_.rec.layer(d.layer)) {
    l->compute_cycles += cycles;
    l->macs += c.macs;
  }
  end_ = end;
  step_ = Step::kDone;
  if (cycles > 0) {
    resume_after(static_cast<uint64_t>(cycles));
    return false;
  }
  return finish(d);
}

bool SystolicArray::finish(const Dispatch& d) {
  if (d.opcode == Opcode::kPreload) {
    chain_open_ = false;
  } else {
    chain_open_ = true;
    last_row_in_ = end_ - std::min<uint64_t>(end_, static_cast<uint64_t>(timing::skew_cycles(config_)));
  }
  step_ = Step::kStart;
  fab_.complete(queue_, d.signal);
  return true;
}

}  // namespace npusim::arch
