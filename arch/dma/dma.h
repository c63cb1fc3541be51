#pragma once
// DMA: the load and store queues hand LOAD/STORE descriptors to a pool of engines (dma.engines,
// shared by both queues). An engine takes one descriptor at a time: setup_cycles, then its bursts
// against the DRAM model under the max_outstanding limit (isa/timing/dma.h), overlapped with the
// SRAM side of the transfer; several engines run concurrently. Completions are retired in program
// order per queue, so the k-th token a queue pushes always belongs to its k-th signalling
// instruction even when engines finish out of order; in functional mode a transfer's values move when
// its queue hands it on, in program order (DmaQueue::hand_on says why).
#include <memory>
#include <vector>

#include "arch/core/queue_unit.h"
#include "arch/core/ring.h"
#include "arch/core/timer.h"
#include "isa/timing/dma.h"

namespace npusim::arch {

class DmaQueue;

// One descriptor handed to an engine.
struct Descriptor {
  Dispatch d;        // the LOAD/STORE, decoded
  uint64_t seq = 0;  // position in its queue, for in-order retirement
};
inline std::ostream& operator<<(std::ostream& os, const Descriptor& d) { return os << d.d.index; }

class DmaEngine : public sc_core::sc_module {
 public:
  // Descriptor queues from the load and the store queue (a queue has one writer).
  BoundedQueue<Descriptor>* from_load = nullptr;
  BoundedQueue<Descriptor>* from_store = nullptr;

  SC_HAS_PROCESS(DmaEngine);
  DmaEngine(const sc_core::sc_module_name& name, const isa::DmaConfig& config, Fabric& fabric, int id);
  void attach(DmaQueue* load, DmaQueue* store) {
    load_ = load;
    store_ = store;
  }
  // Descriptors queued or running: the load balancer's measure.
  int64_t pending() const {
    return from_load->num_available() + from_store->num_available() + (busy_ ? 1 : 0);
  }

  struct Stats {
    uint64_t transfers = 0;
    uint64_t bursts = 0;
    uint64_t misaligned_bursts = 0;
    uint64_t bytes_read = 0;  // from DRAM
    uint64_t bytes_written = 0;
  };
  const Stats& stats() const { return stats_; }

 protected:
  // Fails elaboration when a descriptor queue or a queue front end was never bound.
  void end_of_elaboration() override;

 private:
  void resume();  // the method process (arch/core/queue_unit.h says why a method)
  // Starts descriptor d's transfer now; returns the cycle it ends.
  uint64_t transfer(const Descriptor& d);

  isa::DmaConfig config_;
  Fabric& fab_;
  const uint16_t unit_;
  isa::timing::DmaBurstEngine bursts_;
  DmaQueue* load_ = nullptr;
  DmaQueue* store_ = nullptr;
  sc_core::sc_process_handle process_;  // resume(), for its static sensitivity
  Timer timer_;                         // its timed waits
  enum class Phase : uint8_t { kIdle, kDataWaited, kTransfer, kStopped };
  Phase phase_ = Phase::kIdle;
  Descriptor current_;         // the transfer in progress
  DmaQueue* owner_ = nullptr;  // its queue
  bool busy_ = false;
  bool prefer_store_ = false;
  Stats stats_;
  // Per DRAM channel activity of the current transfer (traces only).
  struct ChannelSpan {
    uint64_t first_ps, last_ps, bytes;
  };
  std::vector<ChannelSpan> spans_;
};

// The load or the store queue's front end.
class DmaQueue : public QueueUnit {
 public:
  std::vector<BoundedQueue<Descriptor>*> to_engine;  // one per engine

  SC_HAS_PROCESS(DmaQueue);
  DmaQueue(const sc_core::sc_module_name& name, const isa::DmaConfig& config, Fabric& fabric,
           isa::Queue queue);
  void attach(std::vector<DmaEngine*> engines) { engines_ = std::move(engines); }

  // An engine finished descriptor `d`: retire it and every later one already finished, in order.
  void finished(const Descriptor& d);
  void decode(const isa::Instruction& ins, Dispatch& d) const override;

 protected:
  // Fails elaboration when `in`, an engine's descriptor queue or the engines were never bound.
  void end_of_elaboration() override;

 private:
  bool advance(const Dispatch& d, uint64_t token_cycle) override;
  void hand_on(const Dispatch& d);  // to engine best_, which has room

  std::vector<DmaEngine*> engines_;
  size_t best_ = 0;           // the engine chosen for the instruction in progress
  bool room_waited_ = false;  // it waits for room in that engine's descriptor queue
  uint64_t room_wait_start_ = 0;
  uint64_t next_seq_ = 0;
  uint64_t retired_ = 0;  // sequence number of the oldest unretired descriptor
  Ring<int16_t> done_;    // per unretired descriptor: its signal mask once finished, else -1
};

}  // namespace npusim::arch
