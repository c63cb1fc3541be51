#include "compiler/backend/core/emitter.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "compiler/ir/memory_budget.h"

namespace npusim::compiler::backend {

namespace {
bool covers(const Range& outer, const Range& inner) {
  return outer.begin <= inner.begin && inner.end <= outer.end;
}
constexpr std::array<int, isa::kNumQueues> kNone = {-1, -1, -1, -1, -1};
}  // namespace

void Emitter::reserve_more() {
  const size_t n = std::max<size_t>(1024, program_.instructions.capacity() * 2);
  // Per instruction: the instruction, its queue position and its clock, kept while compiling.
  const uint64_t bytes = n * (sizeof(isa::Instruction) + sizeof(int) + sizeof(Clock));
  check_allocation("the compiled program (" + std::to_string(n) + " instructions)", bytes,
                   "use a smaller model or a larger array (systolic_array.rows/cols, fewer tiles), or "
                   "--memory-limit-gb to set the limit");
  program_.instructions.reserve(n);
  pos_.reserve(n);
  clock_.reserve(n);
}

std::array<Emitter::Clock, isa::kNumQueues> Emitter::make_clocks() {
  std::array<Clock, isa::kNumQueues> c;
  c.fill(kNone);
  return c;
}

int Emitter::emit(isa::Instruction ins, std::vector<Range> reads, std::vector<Range> writes) {
  for (Range& r : reads) r.space = storage_[static_cast<size_t>(r.space)];
  for (Range& w : writes) w.space = storage_[static_cast<size_t>(w.space)];
  const int idx = static_cast<int>(program_.instructions.size());
  const int q = static_cast<int>(ins.queue());
  std::array<int, isa::kNumQueues> dep = kNone;
  auto add = [&](const std::array<int, isa::kNumQueues>& a) {
    for (int p = 0; p < isa::kNumQueues; ++p) dep[p] = std::max(dep[p], a[p]);
  };
  for (const Range& r : reads) {
    for (const Record& rec : records_[r.space]) {
      if (overlaps(rec.r, r)) add(rec.writer);
    }
  }
  for (const Range& w : writes) {
    for (const Record& rec : records_[w.space]) {
      if (overlaps(rec.r, w)) {
        add(rec.writer);
        add(rec.reader);
      }
    }
  }
  Clock cur = queue_clock_[q];
  int wait = 0;
  for (int p = 0; p < isa::kNumQueues; ++p) {
    if (p == q || dep[p] < 0) continue;
    const int x = dep[p];
    if (pos_[x] <= cur[p]) continue;  // already known complete
    isa::Instruction& producer = program_.instructions[x];
    if (producer.signals(static_cast<isa::Queue>(q))) {
      throw std::logic_error("backend emitter: token channel reused out of order");
    }
    if (trial_from_ >= 0 && x < trial_from_) signal_log_.push_back({x, producer.get(isa::Field::kSignal)});
    for (Window& w : windows_) {
      if (x < w.from) w.signals.emplace(x, producer.get(isa::Field::kSignal));
    }
    producer.set(isa::Field::kSignal, producer.get(isa::Field::kSignal) | (1 << q));
    wait |= 1 << p;
    ++tokens_;
    for (int k = 0; k < isa::kNumQueues; ++k) cur[k] = std::max(cur[k], clock_[x][k]);
  }
  ins.set(isa::Field::kWait, wait);
  ins.set(isa::Field::kSignal, 0);
  if (program_.instructions.size() == program_.instructions.capacity()) reserve_more();
  program_.instructions.push_back(ins);
  const int position = queue_len_[q]++;
  pos_.push_back(position);
  cur[q] = position;
  clock_.push_back(cur);
  queue_clock_[q] = cur;

  for (const Range& r : reads) {
    auto& recs = records_[r.space];
    auto it = std::find_if(recs.begin(), recs.end(),
                           [&](const Record& x) { return x.r.begin == r.begin && x.r.end == r.end; });
    if (it != recs.end()) {
      it->reader[q] = idx;
    } else {
      Record rec{r, kNone, kNone};
      // A new read record inherits the writers of what it overlaps so a later write still sees them
      // through this record even if the older one is pruned.
      for (const Record& o : recs) {
        if (overlaps(o.r, r)) {
          for (int p = 0; p < isa::kNumQueues; ++p) rec.writer[p] = std::max(rec.writer[p], o.writer[p]);
        }
      }
      rec.reader[q] = idx;
      recs.push_back(rec);
    }
  }
  for (const Range& w : writes) {
    auto& recs = records_[w.space];
    recs.erase(std::remove_if(recs.begin(), recs.end(), [&](const Record& x) { return covers(w, x.r); }),
               recs.end());
    Record rec{w, kNone, kNone};
    rec.writer[q] = idx;
    recs.push_back(rec);
  }
  if (!windows_.empty()) accesses_.push_back(Access{std::move(reads), std::move(writes)});
  return idx;
}

int Emitter::last_access(Range r) const {
  r.space = storage_[static_cast<size_t>(r.space)];
  int last = -1;
  for (const Record& rec : records_[r.space]) {
    if (!overlaps(rec.r, r)) continue;
    for (int p = 0; p < isa::kNumQueues; ++p) last = std::max({last, rec.writer[p], rec.reader[p]});
  }
  return last;
}

Emitter::Checkpoint Emitter::checkpoint() {
  Checkpoint cp;
  cp.outer_from = trial_from_;
  cp.log_size = signal_log_.size();
  cp.instructions = program_.instructions.size();
  for (int s = 0; s < kNumSpaces; ++s) cp.records[static_cast<size_t>(s)] = records_[s];
  cp.queue_len = queue_len_;
  cp.queue_clock = queue_clock_;
  cp.tokens = tokens_;
  trial_from_ = static_cast<int64_t>(cp.instructions);
  return cp;
}

void Emitter::rollback(const Checkpoint& cp) {
  for (auto it = signal_log_.rbegin(); it != signal_log_.rend() - static_cast<std::ptrdiff_t>(cp.log_size);
       ++it) {
    program_.instructions[static_cast<size_t>(it->first)].set(isa::Field::kSignal, it->second);
  }
  signal_log_.resize(cp.log_size);
  trial_from_ = cp.outer_from;
  program_.instructions.resize(cp.instructions);
  pos_.resize(cp.instructions);
  clock_.resize(cp.instructions);
  for (int s = 0; s < kNumSpaces; ++s) records_[s] = cp.records[static_cast<size_t>(s)];
  queue_len_ = cp.queue_len;
  queue_clock_ = cp.queue_clock;
  tokens_ = cp.tokens;
  const auto n = static_cast<int64_t>(cp.instructions);
  while (!windows_.empty() && windows_.back().from > n) windows_.pop_back();
  if (windows_.empty()) {
    accesses_.clear();
    log_base_ = n;
  } else {
    accesses_.resize(static_cast<size_t>(n - log_base_));
  }
}

void Emitter::open_window() {
  if (trial_from_ >= 0) throw std::logic_error("backend emitter: a window opened inside a checkpoint");
  if (!windows_.empty() && windows_.back().from == size()) windows_.pop_back();  // taken again, as it is now
  if (windows_.empty()) {
    accesses_.clear();
    log_base_ = size();
  }
  Window w;
  w.from = size();
  for (int s = 0; s < kNumSpaces; ++s) w.records[static_cast<size_t>(s)] = records_[s];
  w.queue_len = queue_len_;
  w.queue_clock = queue_clock_;
  w.tokens = tokens_;
  windows_.push_back(std::move(w));
  if (windows_.size() > 2) {
    windows_.pop_front();
    const int64_t from = windows_.front().from;
    accesses_.erase(accesses_.begin(), accesses_.begin() + static_cast<std::ptrdiff_t>(from - log_base_));
    log_base_ = from;
  }
}

void Emitter::reemit(const std::vector<int64_t>& order, int64_t collapse_before, int64_t keep_from,
                     int64_t window_at) {
  if (trial_from_ >= 0 || windows_.empty())
    throw std::logic_error("backend emitter: reemit without a window");
  while (windows_.size() > 1) windows_.pop_back();
  Window& w = windows_.front();
  const int64_t from = w.from;
  if (static_cast<int64_t>(order.size()) != size() - from || log_base_ != from)
    throw std::logic_error("backend emitter: reemit of other instructions than the window's");
  std::vector<isa::Instruction> code(program_.instructions.begin() + from, program_.instructions.end());
  std::vector<Access> accesses = std::move(accesses_);
  accesses_.clear();
  for (const auto& [x, signal] : w.signals)
    program_.instructions[static_cast<size_t>(x)].set(isa::Field::kSignal, signal);
  w.signals.clear();
  program_.instructions.resize(static_cast<size_t>(from));
  pos_.resize(static_cast<size_t>(from));
  clock_.resize(static_cast<size_t>(from));
  for (int s = 0; s < kNumSpaces; ++s) records_[s] = w.records[static_cast<size_t>(s)];
  queue_len_ = w.queue_len;
  queue_clock_ = w.queue_clock;
  tokens_ = w.tokens;
  for (int64_t k : order) {
    if (k == collapse_before) collapse_sram(keep_from);
    if (k == window_at) open_window();
    const Access& a = accesses[static_cast<size_t>(k - from)];
    emit(code[static_cast<size_t>(k - from)], a.reads, a.writes);
  }
}

void Emitter::commit(const Checkpoint& cp) {
  // The signal changes logged since cp matter only to an enclosing checkpoint, for the instructions
  // before it.
  auto stale = [&](const std::pair<int, int64_t>& e) {
    return cp.outer_from < 0 || e.first >= cp.outer_from;
  };
  signal_log_.erase(std::remove_if(signal_log_.begin() + static_cast<std::ptrdiff_t>(cp.log_size),
                                   signal_log_.end(), stale),
                    signal_log_.end());
  trial_from_ = cp.outer_from;
}

void Emitter::collapse_sram(int64_t keep_from) {
  for (int s = 0; s < isa::kNumBuffers; ++s) {
    auto& recs = records_[s];
    // Records the instructions from keep_from on touched stay as they are; the older ones merge into one
    // record over their extent, with the latest writer and reader of each queue.
    std::vector<Record> kept;
    Record old{Range{s, UINT64_MAX, 0}, kNone, kNone};
    for (const Record& r : recs) {
      const int last = std::max(*std::max_element(r.writer.begin(), r.writer.end()),
                                *std::max_element(r.reader.begin(), r.reader.end()));
      if (last >= keep_from) {
        kept.push_back(r);
        continue;
      }
      old.r.begin = std::min(old.r.begin, r.r.begin);
      old.r.end = std::max(old.r.end, r.r.end);
      for (int p = 0; p < isa::kNumQueues; ++p) {
        old.writer[p] = std::max(old.writer[p], r.writer[p]);
        old.reader[p] = std::max(old.reader[p], r.reader[p]);
      }
    }
    if (old.r.begin < old.r.end) kept.insert(kept.begin(), old);
    recs = std::move(kept);
  }
}

void Emitter::halt(uint32_t layer) {
  isa::Instruction h;
  h.opcode = isa::Opcode::kHalt;
  h.set(isa::Field::kLayer, layer);
  if (program_.instructions.size() == program_.instructions.capacity()) reserve_more();
  program_.instructions.push_back(h);
  pos_.push_back(queue_len_[static_cast<int>(isa::Queue::kMatrix)]++);
  clock_.push_back(kNone);
  if (!windows_.empty()) accesses_.push_back(Access{});
}

}  // namespace npusim::compiler::backend
