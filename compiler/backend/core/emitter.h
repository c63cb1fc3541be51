#pragma once
// Instruction emission with automatic dependency tokens (internal to the back end).
//
// Every instruction is emitted with the memory it reads and writes: byte ranges of the three SRAM
// buffers and of DRAM (kDram). The emitter keeps, per range, the latest writer and readers in every
// queue, derives RAW/WAR/WAW dependencies, and turns each dependency on another queue into one token:
// the producer gets a `signal` bit for the consumer's queue, the consumer a `wait` bit for the
// producer's. Each queue carries a vector clock (the last position of every other queue it knows to be
// complete) so a dependency already implied by an earlier token costs nothing. Tokens on one channel
// are therefore pushed and popped in the same order, every signal has exactly one wait, and every wait
// refers to an earlier instruction in program order (no deadlock). The scheme assumes, as the units do,
// that each queue completes its instructions in program order.
#include <array>
#include <cstdint>
#include <deque>
#include <map>
#include <vector>

#include "isa/isa.h"
#include "isa/program.h"

namespace npusim::compiler::backend {

inline constexpr int kDram = isa::kNumBuffers;  // pseudo-buffer index for DRAM ranges
inline constexpr int kNumSpaces = isa::kNumBuffers + 1;

struct Range {
  int space = 0;  // isa::Buffer value or kDram
  uint64_t begin = 0;
  uint64_t end = 0;
};
// Whether two ranges share a byte (of one space: the caller matches the spaces).
inline bool overlaps(const Range& a, const Range& b) { return a.begin < b.end && b.begin < a.end; }

// The memory an instruction reads and writes, as emitted (spaces after Emitter::share).
struct Access {
  std::vector<Range> reads, writes;
};

class Emitter {
 private:
  struct Record {
    Range r;
    std::array<int, isa::kNumQueues> writer;  // latest writing instruction per queue, -1 = none
    std::array<int, isa::kNumQueues> reader;  // latest reading instruction per queue
  };
  using Clock = std::array<int, isa::kNumQueues>;  // queue positions known complete, -1 = none

 public:
  explicit Emitter(isa::Program& program) : program_(program) {}

  // Appends `ins` (its wait/signal fields are managed here) after the accesses it depends on.
  // Returns its index in program.instructions.
  int emit(isa::Instruction ins, std::vector<Range> reads, std::vector<Range> writes);
  // Ranges of space `from` are bytes of space `to` (a weight buffer sharing the input scratchpad).
  void share(int from, int to) { storage_[static_cast<size_t>(from)] = to; }

  // Forget fine-grained SRAM ranges of instructions before keep_from: in each scratchpad they merge into
  // one record over their extent (conservative; called between layers so the history stays small, with
  // keep_from the first instruction of the layer just emitted, whose ranges stay exact so that the next
  // layer's first loads wait only for what they overwrite).
  void collapse_sram(int64_t keep_from);
  // The latest instruction (program index) that reads or writes bytes of `r`: what an instruction writing
  // `r` would wait for; -1 = none.
  int last_access(Range r) const;
  // Emits HALT (after which nothing may be emitted).
  void halt(uint32_t layer);

  int64_t size() const { return static_cast<int64_t>(program_.instructions.size()); }
  int64_t tokens() const { return tokens_; }
  // Every token is created with its wait (the instruction being emitted waits, the producer gets the
  // signal), so no token is outstanding after the last emitted instruction: a slice of the program up
  // to its end takes an all-zero isa::TokenBalance.

  // Trial emission (the mapper times candidate mappings by emitting them): everything emitted after
  // checkpoint() -- instructions, and the signal bits they added to earlier producers -- is undone by
  // rollback(). Checkpoints nest (a layer lowered whole inside an undo point runs trials of its own):
  // each rollback undoes what came after its checkpoint, innermost first.
  struct Checkpoint {
    size_t instructions = 0;
    int64_t outer_from = -1;  // the enclosing checkpoint's first instruction (-1: none)
    size_t log_size = 0;      // the signal changes logged before it
    std::array<std::vector<Record>, kNumSpaces> records;
    std::array<int, isa::kNumQueues> queue_len{};
    std::array<Clock, isa::kNumQueues> queue_clock{};
    int64_t tokens = 0;
  };
  Checkpoint checkpoint();
  void rollback(const Checkpoint& cp);
  // Keeps what came after cp (the innermost open checkpoint): closes it without undoing anything.
  void commit(const Checkpoint& cp);

  // Windows: points the code after which can be emitted again in another order (schedule/interleave.h).
  // open_window() remembers the emitter's state before the next instruction, and from the oldest open
  // window on every instruction's accesses; at most two windows stay open (a layer's start and its
  // successor's). reemit() puts the state of the oldest window back and emits the instructions after it
  // again in `order` (their indices, a permutation of [from, size())), their tokens derived anew;
  // `collapse_before`, if not -1, is the index (of the old program) before whose re-emission
  // collapse_sram(keep_from) runs (keep_from: an index of the program as re-emitted), as it ran before
  // that instruction the first time. A new window opens where the
  // instruction of old index `window_at` is emitted again. A rollback to before a window closes it; a
  // window opened where the newest one starts replaces it (the state there may have changed since:
  // collapse_sram).
  void open_window();
  int64_t window_from(size_t k) const { return windows_[k].from; }
  size_t windows() const { return windows_.size(); }
  const Access& access(int64_t idx) const { return accesses_[static_cast<size_t>(idx - log_base_)]; }
  void reemit(const std::vector<int64_t>& order, int64_t collapse_before, int64_t keep_from,
              int64_t window_at);

 private:
  isa::Program& program_;
  std::vector<Record> records_[kNumSpaces];
  std::vector<int> pos_;      // per instruction: its position in its queue
  std::vector<Clock> clock_;  // per instruction: what is known complete once it completes
  std::array<int, isa::kNumQueues> queue_len_{};
  std::array<Clock, isa::kNumQueues> queue_clock_ = make_clocks();
  int64_t tokens_ = 0;
  std::array<int, kNumSpaces> storage_ = {0, 1, 2, 3};
  // While a checkpoint is open: instructions before it whose signal field was changed, with the old value.
  int64_t trial_from_ = -1;
  std::vector<std::pair<int, int64_t>> signal_log_;
  struct Window {
    int64_t from = 0;
    std::array<std::vector<Record>, kNumSpaces> records;
    std::array<int, isa::kNumQueues> queue_len{};
    std::array<Clock, isa::kNumQueues> queue_clock{};
    int64_t tokens = 0;
    std::map<int, int64_t> signals;  // instructions before `from` whose signal changed since: the value then
  };
  std::deque<Window> windows_;
  int64_t log_base_ = 0;          // index of accesses_[0]
  std::vector<Access> accesses_;  // from the oldest window on

  static std::array<Clock, isa::kNumQueues> make_clocks();
  // Doubles the instruction storage after checking the bytes against the memory budget
  // (compiler/ir/memory_budget.h): a model that needs billions of instructions fails with a sentence.
  void reserve_more();
};

}  // namespace npusim::compiler::backend
