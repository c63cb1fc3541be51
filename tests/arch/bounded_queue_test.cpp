// arch/core/bounded_queue.h keeps sc_fifo's semantics to the delta cycle, and notifies its events only
// when a process waits on them: two producers and two consumers of different speeds, blocking on full and
// empty queues and one consumer waiting on either of two queues, log every read and write with its time
// and delta cycle; the log must be the one the same processes write over sc_fifo. The same processes
// written as method processes (state machines that arm next_trigger where the threads wait, as the units
// of arch/ are) must write that log too, over either channel: a method arming the waits a thread makes
// runs when the thread would.
#include <gtest/gtest.h>

#include <string>
#include <systemc>
#include <vector>

#include "arch/core/bounded_queue.h"
#include "arch/core/timer.h"
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

// The waits of a method process on either channel: arm_*() where a thread would wait, *_over() first
// thing when it runs again.
struct MethodsOverBounded : OverBounded {
  BoundedQueue<int>& q(int i) { return i ? b : a; }
  bool try_write(int i, int v) {
    if (q(i).num_free() == 0) return false;
    q(i).push(v);
    return true;
  }
  bool try_read(int i, int& v) {
    if (q(i).num_available() == 0) return false;
    q(i).pop(v);
    return true;
  }
  void arm_room(int i) { q(i).next_trigger_on_room(); }
  void room_over(int i) { q(i).room_wait_over(); }
  void arm_data(int i) { q(i).next_trigger_on_data(); }
  void data_over(int i) { q(i).data_wait_over(); }
  void arm_either() { either.next_trigger(); }
  void either_over() { either.over(); }
};
struct MethodsOverFifo : OverFifo {
  sc_core::sc_fifo<int>& q(int i) { return i ? b : a; }
  bool try_write(int i, int v) { return q(i).nb_write(v); }
  bool try_read(int i, int& v) { return q(i).nb_read(v); }
  void arm_room(int i) { sc_core::next_trigger(q(i).data_read_event()); }
  void room_over(int) {}
  void arm_data(int i) { sc_core::next_trigger(q(i).data_written_event()); }
  void data_over(int) {}
  void arm_either() { sc_core::next_trigger(either); }
  void either_over() {}
};

// Harness's four threads as method processes, step for step.
template <class Channels>
SC_MODULE(MethodHarness) {
  Channels ch;
  Log log;
  SC_CTOR(MethodHarness) {
    SC_METHOD(fast_producer);
    SC_METHOD(slow_producer);
    SC_METHOD(reader_of_a);
    SC_METHOD(reader_of_either);
  }
  enum Step { kStart, kRoomWaited, kSlept, kDataWaited, kEitherWaited };
  Step fast_step = kStart, slow_step = kStart, a_step = kStart, either_step = kStart;
  int fast_i = 0, slow_i = 100, either_n = 0;

  void fast_producer() {
    produce(0, fast_i, 12, fast_step, "wrote a", [](int i) { return i % 4 == 3 ? 3 : 0; });
  }
  void slow_producer() {
    produce(1, slow_i, 108, slow_step, "wrote b", [](int i) { return i % 3 != 0 ? 5 : 0; });
  }
  // Writes values i..end-1 into queue q, sleeping sleep_ns(value) ns after a value when it is not 0.
  template <class SleepNs>
  void produce(int q, int& i, int end, Step& step, const char* what, SleepNs sleep_ns) {
    if (step == kRoomWaited) ch.room_over(q);
    for (; i < end; ++i) {
      if (step != kSlept) {
        if (!ch.try_write(q, i)) {
          ch.arm_room(q);
          step = kRoomWaited;
          return;
        }
        note(log, what, i);
        if (const int ns = sleep_ns(i)) {
          sc_core::next_trigger(ns, sc_core::SC_NS);
          step = kSlept;
          return;
        }
      }
      step = kStart;
    }
  }
  void reader_of_a() {
    if (a_step == kStart) {
      sc_core::next_trigger(1, sc_core::SC_NS);
      a_step = kSlept;
      return;
    }
    if (a_step == kDataWaited) ch.data_over(0);
    int v = 0;
    if (!ch.try_read(0, v)) {
      ch.arm_data(0);
      a_step = kDataWaited;
      return;
    }
    note(log, "read a", v);
    sc_core::next_trigger(2, sc_core::SC_NS);
    a_step = kSlept;
  }
  void reader_of_either() {
    if (either_step == kEitherWaited) ch.either_over();
    for (;;) {
      int v = 0;
      if (!ch.try_read(1, v) && !ch.try_read(0, v)) {
        ch.arm_either();
        either_step = kEitherWaited;
        return;
      }
      either_step = kStart;
      note(log, v >= 100 ? "read b" : "read a by either", v);
      if (either_n++ % 2) {
        sc_core::next_trigger(1, sc_core::SC_NS);
        return;
      }
    }
  }
};

// Waiting statically (bounded_queue.h's static_wait_for_*, arch/core/timer.h), as the units of arch/ do, is
// exact where each event has one process sensitive to it (a queue has one reader and one writer): three
// producers of different speeds, a reader of queue a and a reader of either b or c, as threads over
// sc_fifo and as methods made sensitive once to every event they ever wait on. A method may be woken by an
// event it does not wait for at the time (as a unit by its token channel's): the methods' reader of a is
// also sensitive to an event the producer of c notifies at each write, and must then do nothing -- return
// at once while its timer is pending, find no new value while it waits for one.
SC_MODULE(OneReaderThreads) {
  sc_core::sc_fifo<int> a{"a", 2}, b{"b", 1}, c{"c", 2};
  sc_core::sc_event_or_list b_or_c;
  Log log;
  SC_CTOR(OneReaderThreads) {
    b_or_c |= b.data_written_event();
    b_or_c |= c.data_written_event();
    SC_THREAD(produce_a);
    SC_THREAD(produce_b);
    SC_THREAD(produce_c);
    SC_THREAD(reader_of_a);
    SC_THREAD(reader_of_b_or_c);
  }
  void produce(sc_core::sc_fifo<int> & q, int first, int end, const char* what, int (*sleep_ns)(int)) {
    for (int i = first; i < end; ++i) {
      q.write(i);
      note(log, what, i);
      if (const int ns = sleep_ns(i)) sc_core::wait(ns, sc_core::SC_NS);
    }
  }
  void produce_a() {
    produce(a, 0, 12, "wrote a", [](int i) { return i % 4 == 3 ? 3 : 0; });
  }
  void produce_b() {
    produce(b, 100, 108, "wrote b", [](int i) { return i % 3 != 0 ? 5 : 0; });
  }
  void produce_c() {
    produce(c, 200, 210, "wrote c", [](int i) { return i % 2 ? 2 : 1; });
  }
  void reader_of_a() {
    sc_core::wait(1, sc_core::SC_NS);
    for (;;) {
      int v = 0;
      a.read(v);
      note(log, "read a", v);
      sc_core::wait(2, sc_core::SC_NS);
    }
  }
  void reader_of_b_or_c() {
    for (int n = 0;; ++n) {
      while (b.num_available() == 0 && c.num_available() == 0) sc_core::wait(b_or_c);
      int v = 0;
      if (!b.nb_read(v)) c.nb_read(v);
      note(log, v < 200 ? "read b" : "read c", v);
      if (n % 3 == 2) sc_core::wait(4, sc_core::SC_NS);
    }
  }
};

SC_MODULE(OneReaderStaticMethods) {
  BoundedQueue<int> a{"a", 2}, b{"b", 1}, c{"c", 2};
  Timer a_timer, b_timer, c_timer, read_a_timer, read_bc_timer;
  sc_core::sc_event poke;  // notified at each write to c
  Log log;
  SC_CTOR(OneReaderStaticMethods) {
    SC_METHOD(produce_a);
    sensitive << a.data_read_event() << a_timer.event();
    SC_METHOD(produce_b);
    sensitive << b.data_read_event() << b_timer.event();
    SC_METHOD(produce_c);
    sensitive << c.data_read_event() << c_timer.event();
    SC_METHOD(reader_of_a);
    sensitive << a.data_written_event() << read_a_timer.event() << poke;
    SC_METHOD(reader_of_b_or_c);
    sensitive << b.data_written_event() << c.data_written_event() << read_bc_timer.event();
  }
  struct Producer {
    int i;
    bool room_waited = false, slept = false;
  };
  Producer pa{0}, pb{100}, pc{200};
  bool a_started = false, a_waited = false, bc_waited = false;
  int n = 0;

  static uint64_t now_ps() { return sc_core::sc_time_stamp().value(); }
  static void sleep(Timer & t, int ns) {
    const sc_core::sc_time d(ns, sc_core::SC_NS);
    t.arm(d, now_ps() + d.value());
  }
  void produce(BoundedQueue<int> & q, Producer & p, Timer & timer, int end, const char* what,
               int (*sleep_ns)(int)) {
    if (timer.pending(now_ps())) return;
    if (p.room_waited) q.room_wait_over();
    p.room_waited = false;
    for (; p.i < end; ++p.i) {
      if (p.slept) {
        p.slept = false;
        continue;
      }
      if (q.num_free() == 0) {
        q.static_wait_for_room();
        p.room_waited = true;
        return;
      }
      q.push(p.i);
      note(log, what, p.i);
      if (&q == &c) poke.notify(sc_core::SC_ZERO_TIME);
      if (const int ns = sleep_ns(p.i)) {
        sleep(timer, ns);
        p.slept = true;
        return;
      }
    }
  }
  void produce_a() {
    produce(a, pa, a_timer, 12, "wrote a", [](int i) { return i % 4 == 3 ? 3 : 0; });
  }
  void produce_b() {
    produce(b, pb, b_timer, 108, "wrote b", [](int i) { return i % 3 != 0 ? 5 : 0; });
  }
  void produce_c() {
    produce(c, pc, c_timer, 210, "wrote c", [](int i) { return i % 2 ? 2 : 1; });
  }
  void reader_of_a() {
    if (read_a_timer.pending(now_ps())) return;
    if (!a_started) {
      a_started = true;
      sleep(read_a_timer, 1);
      return;
    }
    if (a_waited) a.data_wait_over();
    a_waited = false;
    if (a.num_available() == 0) {
      a.static_wait_for_data();
      a_waited = true;
      return;
    }
    int v = 0;
    a.pop(v);
    note(log, "read a", v);
    sleep(read_a_timer, 2);
  }
  void reader_of_b_or_c() {
    if (read_bc_timer.pending(now_ps())) return;
    if (bc_waited) {
      b.data_wait_over();
      c.data_wait_over();
    }
    bc_waited = false;
    for (;;) {
      int v = 0;
      if (b.num_available() > 0) {
        b.pop(v);
      } else if (c.num_available() > 0) {
        c.pop(v);
      } else {
        b.static_wait_for_data();
        c.static_wait_for_data();
        bc_waited = true;
        return;
      }
      note(log, v < 200 ? "read b" : "read c", v);
      if (n++ % 3 == 2) {
        sleep(read_bc_timer, 4);
        return;
      }
    }
  }
};

// A context whose threads are still waiting is deleted before the test ends: their stacks are heap
// blocks with a protected guard page, and LeakSanitizer, scanning the heap at exit, faults on that page
// (in about one run in three of the sanitizer job).
void drop_threads() { fresh_simcontext(); }

template <template <class> class H, class Channels>
Log run() {
  fresh_simcontext();
  Log log;
  {
    H<Channels> h("h");
    sc_core::sc_start(100, sc_core::SC_NS);
    log = h.log;
  }
  drop_threads();
  return log;
}

template <class H>
Log run_one() {
  fresh_simcontext();
  Log log;
  {
    H h("h");
    sc_core::sc_start(100, sc_core::SC_NS);
    log = h.log;
  }
  drop_threads();
  return log;
}

// push_with (a value written in place) against push: the same values, read in the same delta cycles.
template <bool kInPlace>
SC_MODULE(PushHarness) {
  struct Pair {
    int value = 0, square = 0;
  };
  BoundedQueue<Pair> q{"q", 2};
  Log log;
  SC_CTOR(PushHarness) {
    SC_THREAD(producer);
    SC_THREAD(consumer);
  }
  void producer() {
    for (int v = 1; v <= 7; ++v) {
      while (q.num_free() == 0) q.wait_for_room();
      if constexpr (kInPlace) {
        q.push_with([&](Pair& p) { p.value = v, p.square = v * v; });
      } else {
        q.push(Pair{v, v * v});
      }
      note(log, "write", v);
      if (v % 3 == 0) wait(2, sc_core::SC_NS);
    }
  }
  void consumer() {
    for (;;) {
      Pair p;
      q.read(p);
      note(log, "read", p.value * 100 + p.square);
      wait(1, sc_core::SC_NS);
    }
  }
};

TEST(BoundedQueue, PushWithWritesInPlaceWhatPushWrites) {
  const Log pushed = run_one<PushHarness<false>>();
  ASSERT_EQ(pushed.size(), 14u);  // every value written and read within the run
  EXPECT_EQ(run_one<PushHarness<true>>(), pushed);
}

TEST(BoundedQueue, ReadsWritesAndWakeUpsFallInTheDeltaCyclesOfScFifo) {
  const Log fifo = run<Harness, OverFifo>();
  const Log ours = run<Harness, OverBounded>();
  ASSERT_EQ(fifo.size(), 2u * (12 + 8));  // every value written and read within the run
  EXPECT_EQ(ours, fifo);
}

TEST(BoundedQueue, MethodProcessesArmingTheThreadsWaitsRunInTheThreadsDeltaCycles) {
  const Log threads = run<Harness, OverFifo>();
  ASSERT_EQ(threads.size(), 2u * (12 + 8));
  EXPECT_EQ((run<MethodHarness, MethodsOverFifo>()), threads);
  EXPECT_EQ((run<MethodHarness, MethodsOverBounded>()), threads);
}

// The log with each delta cycle's number replaced by whether it is the previous entry's: a delta cycle in
// which only a needless wake-up ran is counted by the kernel but holds nothing, and the numbers after it
// move.
Log delta_groups(const Log& log) {
  Log out;
  std::string last;
  for (const std::string& e : log) {
    const size_t d = e.rfind(" d");
    const std::string delta = e.substr(d + 2);
    out.push_back(e.substr(0, d) + (delta == last ? " same delta" : " new delta"));
    last = delta;
  }
  return out;
}

TEST(BoundedQueue, MethodProcessesWaitingStaticallyRunInTheThreadsDeltaCycles) {
  fresh_simcontext();
  Log threads;
  {
    OneReaderThreads h("h");
    sc_core::sc_start(100, sc_core::SC_NS);
    threads = h.log;
  }
  drop_threads();                                 // and the methods below run in a fresh context
  ASSERT_EQ(threads.size(), 2u * (12 + 8 + 10));  // every value written and read within the run
  OneReaderStaticMethods h("h");
  sc_core::sc_start(100, sc_core::SC_NS);
  EXPECT_EQ(delta_groups(h.log), delta_groups(threads));
}

}  // namespace
}  // namespace npusim::arch
