#include "arch/dma/dma.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "arch/core/binding.h"
#include "isa/timing/units.h"

namespace npusim::arch {

using isa::Field;
using isa::Opcode;

DmaEngine::DmaEngine(const sc_core::sc_module_name& name, const isa::DmaConfig& config, Fabric& fabric,
                     int id)
    : sc_core::sc_module(name),
      config_(config),
      fab_(fabric),
      unit_(static_cast<uint16_t>(kFirstDmaUnit + id)),
      bursts_(config) {
  spans_.resize(fab_.dram->channels());
  SC_METHOD(resume);
  process_ = sc_core::sc_get_last_created_process_handle();
}

void DmaEngine::resume() {
  // Its descriptor queues notify only while it waits for them, so nothing else wakes it while its timer is
  // pending; checked all the same (timer.h).
  if (timer_.pending(fab_.now_ps())) return;
  for (;;) {
    switch (phase_) {
      case Phase::kDataWaited:
        from_load->data_wait_over();
        from_store->data_wait_over();
        [[fallthrough]];
      case Phase::kIdle: {
        if (from_load->num_available() == 0 && from_store->num_available() == 0) {
          from_load->static_wait_for_data();
          from_store->static_wait_for_data();
          phase_ = Phase::kDataWaited;
          return;
        }
        // Round robin between the two descriptor queues when both have work.
        const bool take_store =
            from_store->num_available() > 0 && (prefer_store_ || from_load->num_available() == 0);
        prefer_store_ = !take_store;
        (take_store ? from_store : from_load)->pop(current_);
        owner_ = take_store ? store_ : load_;
        busy_ = true;
        uint64_t end = 0;
        try {
          end = transfer(current_);
        } catch (const std::exception& e) {
          fab_.fail(e.what());
          phase_ = Phase::kStopped;
          return;
        }
        phase_ = Phase::kTransfer;
        const uint64_t now = fab_.now();
        if (end > now) {
          const sc_core::sc_time& t = fab_.cycles_time(end - now);
          timer_.arm(t, fab_.now_ps() + t.value());
          return;
        }
        [[fallthrough]];
      }
      case Phase::kTransfer:
        owner_->finished(current_);
        busy_ = false;
        phase_ = Phase::kIdle;
        break;
      case Phase::kStopped:
        return;
    }
  }
}

uint64_t DmaEngine::transfer(const Descriptor& desc) {
  const Dispatch& d = desc.d;
  const Dispatch::DmaWork& w = d.work.dma;
  const bool store = d.opcode == Opcode::kStore;
  const uint64_t now = fab_.now();
  const uint64_t begin = now + static_cast<uint64_t>(config_.setup_cycles);
  isa::timing::DmaRows rows;
  rows.dram_addr = fab_.dram_base + w.dram_addr;
  rows.row_bytes = w.row_bytes;
  for (int i = 0; i < 3; ++i) {
    rows.count[i] = w.count[i];
    rows.stride[i] = w.stride[i];
  }
  const isa::Buffer buf = w.buf;
  const uint64_t sram_bytes = w.sram_bytes;

  // SRAM side: reserve the scratchpad's bandwidth; a collision delays it.
  auto* layer = fab_.rec.layer(d.layer);
  fab_.sram.reserve(buf, sram_bytes, begin, layer ? &layer->bank_conflict_cycles : nullptr);
  const uint64_t sram_end = fab_.sram.busy_until(buf);  // the reservation's start + its transfer cycles

  // DRAM side: every burst against the DRAM model.
  const uint64_t pps = fab_.period_ps;
  isa::timing::DmaTransfer x;
  const uint64_t row_misses_before = fab_.dram->stats().row_misses;
  if (fab_.rec.tracing()) {
    for (ChannelSpan& s : spans_) s = {UINT64_MAX, 0, 0};
    x = bursts_.run(rows, store, begin * pps, *fab_.dram,
                    [&](uint64_t addr, uint64_t issue, uint64_t done, uint32_t n) {
                      ChannelSpan& s = spans_[fab_.dram->channel_of(addr)];
                      s.first_ps = std::min(s.first_ps, issue);
                      s.last_ps = std::max(s.last_ps, done);
                      s.bytes += n;
                    });
  } else {
    x = bursts_.run(rows, store, begin * pps, *fab_.dram);
  }
  const uint64_t dram_end = (x.done_ps + pps - 1) / pps;
  const isa::ScratchpadConfig& sp = fab_.sram.buffer(buf);
  const uint64_t end = std::max(dram_end, sram_end) +
                       static_cast<uint64_t>(store ? sp.read_latency_cycles : sp.write_latency_cycles);

  const uint64_t bytes = static_cast<uint64_t>(rows.bytes());
  ++stats_.transfers;
  stats_.bursts += x.bursts.bursts;
  stats_.misaligned_bursts += x.bursts.misaligned_bursts;
  (store ? stats_.bytes_written : stats_.bytes_read) += bytes;
  if (auto* l = fab_.rec.layer(d.layer)) {
    (store ? l->dram_bytes_written : l->dram_bytes_read) += bytes;
    l->misaligned_bursts += static_cast<uint64_t>(x.bursts.misaligned_bursts);
    l->activity.dram_activates += fab_.dram->stats().row_misses - row_misses_before;
  }
  fab_.rec.busy(unit_, d, now, end, traces::Category::kMemory, bytes);
  if (fab_.rec.tracing()) {
    // This engine's track of each channel (Npu::track_names: channel-major, one per engine).
    const size_t engines = static_cast<size_t>(fab_.config.dma.engines);
    const size_t first_channel = kFirstDmaUnit + engines;
    const size_t engine = unit_ - kFirstDmaUnit;
    for (size_t c = 0; c < spans_.size(); ++c) {
      if (!spans_[c].bytes) continue;
      fab_.rec.slice(static_cast<uint16_t>(first_channel + c * engines + engine), d, spans_[c].first_ps / pps,
                     (spans_[c].last_ps + pps - 1) / pps, spans_[c].bytes);
    }
  }
  return end;
}

DmaQueue::DmaQueue(const sc_core::sc_module_name& name, const isa::DmaConfig& config, Fabric& fabric,
                   isa::Queue queue)
    : QueueUnit(name, fabric, queue), to_engine(static_cast<size_t>(config.engines), nullptr) {}

void DmaQueue::decode(const isa::Instruction& ins, Dispatch& d) const {
  const isa::timing::DmaRows rows = isa::timing::dma_rows(ins);
  Dispatch::DmaWork& w = d.work.dma;
  w.dram_addr = rows.dram_addr;
  w.row_bytes = rows.row_bytes;
  for (int i = 0; i < 3; ++i) {
    w.count[i] = rows.count[i];
    w.stride[i] = rows.stride[i];
  }
  w.sram_bytes = static_cast<uint64_t>(isa::timing::dma_sram_bytes(ins));
  w.buf = static_cast<isa::Buffer>(ins.get(Field::kBuf));
}

bool DmaQueue::advance(const Dispatch& d, uint64_t) {
  if (room_waited_) {
    BoundedQueue<Descriptor>* port = to_engine[best_];
    port->room_wait_over();
    if (port->num_free() == 0) {
      port->static_wait_for_room();
      return false;
    }
    room_waited_ = false;
    fab_.rec.stall(unit_, d, traces::Reason::kMemory, room_wait_start_, fab_.now());
    hand_on(d);
    return true;
  }
  // The engine with the least work; ties go to the lowest index (deterministic).
  best_ = 0;
  for (size_t e = 1; e < engines_.size(); ++e) {
    if (engines_[e]->pending() < engines_[best_]->pending()) best_ = e;
  }
  BoundedQueue<Descriptor>* port = to_engine[best_];
  if (port->num_free() == 0) {
    room_wait_start_ = fab_.now();
    room_waited_ = true;
    port->static_wait_for_room();
    return false;
  }
  hand_on(d);
  return true;
}

void DmaQueue::hand_on(const Dispatch& d) {
  // The values move here, in the queue's program order, not when an engine starts the transfer: engines
  // start out of order, and two transfers of one queue may write the same bytes (the compiler's tokens
  // order instructions of different queues only; compiler/backend/core/emitter.h). Every token this
  // instruction waits for has arrived, so what it reads is final, and what it writes is read only by
  // instructions that wait for its completion.
  fab_.execute(d.index);
  done_.push_back(-1);
  to_engine[best_]->push_with([&](Descriptor& x) {
    x.d = d;
    x.seq = next_seq_++;
  });
}

void DmaEngine::end_of_elaboration() {
  require_bound(*this, from_load, "its descriptor queue from the load queue (from_load)");
  require_bound(*this, from_store, "its descriptor queue from the store queue (from_store)");
  require_bound(*this, load_, "the load queue (attach)");
  require_bound(*this, store_, "the store queue (attach)");
  // Every wait is static (bounded_queue.h, timer.h): the engine is the one reader of both queues.
  sensitive << process_ << from_load->data_written_event() << from_store->data_written_event()
            << timer_.event();
}

void DmaQueue::end_of_elaboration() {
  QueueUnit::end_of_elaboration();
  for (size_t e = 0; e < to_engine.size(); ++e)
    require_bound(*this, to_engine[e],
                  fmt::format("its descriptor queue to engine {} (to_engine[{}])", e, e));
  if (engines_.size() != to_engine.size())
    throw SimError(fmt::format("{}: {} DMA engines attached for {} descriptor queues (attach)", name(),
                               engines_.size(), to_engine.size()));
  for (size_t e = 0; e < engines_.size(); ++e) require_bound(*this, engines_[e], fmt::format("engine {}", e));
  // Its wait for room is static too: it is the one writer of each engine's descriptor queue from it.
  sensitive << process_;
  for (BoundedQueue<Descriptor>* q : to_engine) sensitive << q->data_read_event();
}

void DmaQueue::finished(const Descriptor& d) {
  done_[d.seq - retired_] = d.d.signal;
  while (!done_.empty() && done_.front() >= 0) {
    fab_.complete(queue_, done_.front());
    done_.pop_front();
    ++retired_;
  }
}

}  // namespace npusim::arch
