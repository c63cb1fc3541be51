#pragma once
// A bounded FIFO channel between two processes with sc_fifo's exact semantics -- a value written in
// one delta cycle is readable from the next, room freed by a read shows from the next, and the
// read/written events are notified in the update phase in the same order -- so that replacing
// sc_fifo changes no simulated cycle. It is called directly (no port, no virtual interface) and
// moves its ring indices without a divide: the queues carry every instruction, twice for DMA.
//
// Thread processes block in read()/write() (or wait through wait_for_data()/wait_for_room(), or
// WaitingForData for a wait on several queues); method processes, which cannot block, pop()/push() and
// arm the same waits with next_trigger_on_data()/next_trigger_on_room(), calling data_wait_over()/
// room_wait_over() first when they run again. Either way the queue counts its waiters, and update()
// notifies an event only when a process waits on it. That is exact: a delta notification made in the
// update phase triggers right after it, with no process running in between, so the processes it would
// wake are those waiting when update() runs; an event nobody waits on wakes no one. Most reads and
// writes happen with nobody waiting.
#include <systemc>

#include <array>
#include <initializer_list>
#include <stdexcept>
#include <vector>

namespace npusim::arch {

template <class T>
class BoundedQueue : public sc_core::sc_prim_channel {
 public:
  BoundedQueue(const char* name, int size)
      : sc_core::sc_prim_channel(name),
        buf_(static_cast<size_t>(size > 0 ? size : 1)),
        size_(size > 0 ? size : 1),
        free_(size_) {}

  // Blocking read and write (wait on the other side's event while empty or full): thread processes.
  void read(T& out) {
    while (num_available() == 0) wait_for_data();
    pop(out);
  }
  void write(const T& v) {
    while (num_free() == 0) wait_for_room();
    push(v);
  }
  // Non-blocking read and write. Preconditions: num_available() > 0 / num_free() > 0.
  void pop(T& out) {
    out = buf_[static_cast<size_t>(ri_)];
    if (++ri_ == size_) ri_ = 0;
    ++free_;
    ++num_read_;
    request_update();
  }
  void push(const T& v) {
    buf_[static_cast<size_t>(wi_)] = v;
    if (++wi_ == size_) wi_ = 0;
    --free_;
    ++num_written_;
    request_update();
  }
  // push() of a value written in place by fill(T&) (the slot holds an old value): no temporary to copy.
  template <class Fill>
  void push_with(Fill&& fill) {
    fill(buf_[static_cast<size_t>(wi_)]);
    if (++wi_ == size_) wi_ = 0;
    --free_;
    ++num_written_;
    request_update();
  }
  int num_available() const { return num_readable_ - num_read_; }
  int num_free() const { return size_ - num_readable_ - num_written_; }
  // Waits until a value was written (readable from the next delta) / a value was read.
  void wait_for_data() {
    ++data_waiters_;
    sc_core::wait(written_);
    --data_waiters_;
  }
  void wait_for_room() {
    ++room_waiters_;
    sc_core::wait(read_);
    --room_waiters_;
  }
  // The same waits for a method process: it runs again when the event fires, and then calls the matching
  // *_wait_over() before anything else.
  void next_trigger_on_data() {
    ++data_waiters_;
    sc_core::next_trigger(written_);
  }
  void data_wait_over() { --data_waiters_; }
  void next_trigger_on_room() {
    ++room_waiters_;
    sc_core::next_trigger(read_);
  }
  void room_wait_over() { --room_waiters_; }
  // The same waits for a method process that is statically sensitive to the queue's event (made so once,
  // at the end of elaboration): it counts itself a waiter and returns without a next_trigger, saving the
  // kernel's per-wait arming and disarming. It runs again when the event fires and then calls the matching
  // *_wait_over() first, as above. A process with several static events may also be woken by another one
  // while it waits here: it must then find nothing new and wait again (a read or write of this delta
  // cycle shows only from the next, so a wake-up in the delta of the write finds nothing either).
  void static_wait_for_data() { ++data_waiters_; }
  void static_wait_for_room() { ++room_waiters_; }
  const sc_core::sc_event& data_written_event() const { return written_; }
  const sc_core::sc_event& data_read_event() const { return read_; }

  // Waits until a value was written to any of several queues (`any` is their written events' or-list,
  // built once by the caller: building it per wait would allocate). The queues are held in a fixed
  // array, not a vector: a SystemC thread's stack is never unwound, so a heap block owned by one of its
  // locals would outlive the simulation.
  class WaitingForData {
   public:
    static constexpr size_t kMaxQueues = 4;
    explicit WaitingForData(std::initializer_list<BoundedQueue*> queues) {
      if (queues.size() > kMaxQueues) throw std::logic_error("WaitingForData: at most kMaxQueues queues");
      for (BoundedQueue* q : queues) {
        queues_[count_++] = q;
        any_ |= q->written_;
      }
    }
    void wait() {
      for (size_t i = 0; i < count_; ++i) ++queues_[i]->data_waiters_;
      sc_core::wait(any_);
      over();
    }
    // For a method process: next_trigger on the queues, then over() first when it runs again.
    void next_trigger() {
      for (size_t i = 0; i < count_; ++i) ++queues_[i]->data_waiters_;
      sc_core::next_trigger(any_);
    }
    void over() {
      for (size_t i = 0; i < count_; ++i) --queues_[i]->data_waiters_;
    }

   private:
    std::array<BoundedQueue*, kMaxQueues> queues_{};
    size_t count_ = 0;
    sc_core::sc_event_or_list any_;
  };

 protected:
  void update() override {
    if (num_read_ > 0 && room_waiters_ > 0) read_.notify(sc_core::SC_ZERO_TIME);
    if (num_written_ > 0 && data_waiters_ > 0) written_.notify(sc_core::SC_ZERO_TIME);
    num_readable_ = size_ - free_;
    num_read_ = 0;
    num_written_ = 0;
  }

 private:
  std::vector<T> buf_;
  int size_;
  int free_;
  int ri_ = 0, wi_ = 0;
  int num_readable_ = 0;                     // values readable in this delta cycle
  int num_read_ = 0;                         // read in this delta cycle
  int num_written_ = 0;                      // written in this delta cycle
  int data_waiters_ = 0, room_waiters_ = 0;  // processes waiting on written_ / read_
  sc_core::sc_event read_, written_;
};

}  // namespace npusim::arch
