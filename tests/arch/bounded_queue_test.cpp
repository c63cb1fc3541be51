// arch/core/bounded_queue.h keeps sc_fifo's semantics to the delta cycle, and notifies its events only
// when a process waits on them: two producers and two consumers of different speeds, blocking on full and
// empty queues and one consumer waiting on either of two queues, log every read and write with its time
// and delta cycle; the log must be the one the same processes write over sc_fifo.
#include <gtest/gtest.h>

#include <string>
#include <systemc>
#include <vector>

#include "arch/core/bounded_queue.h"
#include "arch/simulate.h"

namespace npusim::arch {
namespace {

using Log = std::vector<std::string>;

void note(Log& log, const std::string& what, int v) {
  log.push_back(what + " " + std::to_string(v) + " @" + sc_core::sc_time_stamp().to_string() + " d" +
                std::to_string(sc_core::sc_delta_count()));
}

// The two channels behind one interface, so that the processes below are written once.
struct OverBounded {
  BoundedQueue<int> a{"a", 2}, b{"b", 1};
  BoundedQueue<int>::WaitingForData either{{&a, &b}};
  void write(int q, int v) { (q ? b : a).write(v); }
  void read(int q, int& v) { (q ? b : a).read(v); }
  int available(int q) const { return (q ? b : a).num_available(); }
  void wait_either() { either.wait(); }
};
struct OverFifo {
  sc_core::sc_fifo<int> a{"a", 2}, b{"b", 1};
  // Built once, as WaitingForData does: `a.data_written_event() | b.data_written_event()` in the wait would
  // allocate an or-list that a thread still waiting when the simulation ends never frees.
  sc_core::sc_event_or_list either;
  OverFifo() {
    either |= a.data_written_event();
    either |= b.data_written_event();
  }
  void write(int q, int v) { (q ? b : a).write(v); }
  void read(int q, int& v) { (q ? b : a).read(v); }
  int available(int q) const { return (q ? b : a).num_available(); }
  void wait_either() { sc_core::wait(either); }
};

template <class Channels>
SC_MODULE(Harness) {
  Channels ch;
  Log log;
  SC_CTOR(Harness) {
    SC_THREAD(fast_producer);
    SC_THREAD(slow_producer);
    SC_THREAD(reader_of_a);
    SC_THREAD(reader_of_either);
  }
  void fast_producer() {  // fills queue a faster than it drains: blocks on a full queue
    for (int i = 0; i < 12; ++i) {
      ch.write(0, i);
      note(log, "wrote a", i);
      if (i % 4 == 3) sc_core::wait(3, sc_core::SC_NS);
    }
  }
  void slow_producer() {  // queue b: one value every 5 ns, some in bursts
    for (int i = 100; i < 108; ++i) {
      ch.write(1, i);
      note(log, "wrote b", i);
      if (i % 3 != 0) sc_core::wait(5, sc_core::SC_NS);
    }
  }
  void reader_of_a() {  // slower than the fast producer: an empty queue only at the start
    sc_core::wait(1, sc_core::SC_NS);
    for (;;) {
      int v = 0;
      ch.read(0, v);
      note(log, "read a", v);
      sc_core::wait(2, sc_core::SC_NS);
    }
  }
  void reader_of_either() {  // waits on either queue, drains b first
    for (int n = 0;; ++n) {
      while (ch.available(0) == 0 && ch.available(1) == 0) ch.wait_either();
      int v = 0;
      const int q = ch.available(1) > 0 ? 1 : 0;
      ch.read(q, v);
      note(log, q ? "read b" : "read a by either", v);
      if (n % 2) sc_core::wait(1, sc_core::SC_NS);
    }
  }
};

template <class Channels>
Log run() {
  fresh_simcontext();
  Harness<Channels> h("h");
  sc_core::sc_start(100, sc_core::SC_NS);
  return h.log;
}

TEST(BoundedQueue, ReadsWritesAndWakeUpsFallInTheDeltaCyclesOfScFifo) {
  const Log fifo = run<OverFifo>();
  const Log ours = run<OverBounded>();
  ASSERT_EQ(fifo.size(), 2u * (12 + 8));  // every value written and read within the run
  EXPECT_EQ(ours, fifo);
}

}  // namespace
}  // namespace npusim::arch
