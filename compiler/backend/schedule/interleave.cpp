// Neighbouring layers' instructions interleaved (interleave.h).
#include "compiler/backend/schedule/interleave.h"

#include <algorithm>
#include <array>
#include <map>
#include <utility>

#include "isa/timing/dma.h"
#include "isa/timing/systolic.h"
#include "isa/timing/units.h"

namespace npusim::compiler::backend {

namespace {

bool mergeable(const isa::Instruction& ins) {
  return ins.opcode != isa::Opcode::kBarrier && ins.opcode != isa::Opcode::kHalt &&
         ins.opcode != isa::Opcode::kHostCall;
}

// The queues whose order is kept whole: the array's (PRELOAD state) and the host's.
bool ordered_queue(const isa::Instruction& ins) {
  const isa::Queue q = ins.queue();
  return q == isa::Queue::kMatrix || q == isa::Queue::kHost;
}

// Per space, the latest A instruction writing and reading each distinct range.
struct Last {
  int64_t writer = -1, reader = -1;
};
using History = std::array<std::map<std::pair<uint64_t, uint64_t>, Last>, kNumSpaces>;

// The latest access in `h` that an instruction with accesses `a` must follow.
int64_t latest_conflict(const History& h, const Access& a) {
  int64_t need = -1;
  auto scan = [&](const Range& r, bool write) {
    for (const auto& [key, last] : h[static_cast<size_t>(r.space)]) {
      if (key.first >= r.end) break;  // keys sorted by begin: no later one overlaps
      if (!overlaps(Range{r.space, key.first, key.second}, r)) continue;
      need = std::max(need, last.writer);
      if (write) need = std::max(need, last.reader);
    }
  };
  for (const Range& r : a.reads) scan(r, false);
  for (const Range& w : a.writes) scan(w, true);
  return need;
}

// Finish-time estimates of the instructions placed so far, by the bytes they touched.
class Timeline {
 public:
  explicit Timeline(const isa::NpuConfig& config) : config_(config) {}

  double duration(const isa::Instruction& ins) const {
    switch (ins.opcode) {
      case isa::Opcode::kLoad:
      case isa::Opcode::kStore:
        return isa::timing::estimate_dma_cycles(ins, config_);
      case isa::Opcode::kMatmul:
      case isa::Opcode::kConv:
        return static_cast<double>(isa::timing::matrix_cycles(ins, config_.systolic_array).total);
      case isa::Opcode::kPreload:
        return static_cast<double>(isa::timing::preload_cycles(config_.systolic_array));
      case isa::Opcode::kVec:
        return static_cast<double>(isa::timing::vec_cycles(ins, config_.vector));
      default:
        return 0;
    }
  }
  double start(const isa::Instruction& ins, const Access& a) const {
    double t = free_[static_cast<size_t>(ins.queue())];
    for (const Range& r : a.reads) {
      for (const Span& s : spans_[static_cast<size_t>(r.space)])
        if (overlaps(s.r, r)) t = std::max(t, s.written);
    }
    for (const Range& w : a.writes) {
      for (const Span& s : spans_[static_cast<size_t>(w.space)])
        if (overlaps(s.r, w)) t = std::max({t, s.written, s.read});
    }
    return t;
  }
  void place(const isa::Instruction& ins, const Access& a) {
    const double end = start(ins, a) + duration(ins);
    free_[static_cast<size_t>(ins.queue())] = end;
    for (const Range& r : a.reads) {
      auto& v = spans_[static_cast<size_t>(r.space)];
      auto it = std::find_if(v.begin(), v.end(),
                             [&](const Span& s) { return s.r.begin == r.begin && s.r.end == r.end; });
      if (it == v.end()) {
        v.push_back(Span{r, 0, end});
        for (const Span& s : v)
          if (overlaps(s.r, r)) v.back().written = std::max(v.back().written, s.written);
      } else {
        it->read = std::max(it->read, end);
      }
    }
    for (const Range& w : a.writes) {
      auto& v = spans_[static_cast<size_t>(w.space)];
      double read = 0;
      for (const Span& s : v)
        if (s.r.begin >= w.begin && s.r.end <= w.end) read = std::max(read, s.read);
      v.erase(std::remove_if(v.begin(), v.end(),
                             [&](const Span& s) { return s.r.begin >= w.begin && s.r.end <= w.end; }),
              v.end());
      v.push_back(Span{w, end, read});
    }
  }

 private:
  struct Span {
    Range r;
    double written = 0, read = 0;  // when the latest writer / reader of these bytes finishes
  };
  const isa::NpuConfig& config_;
  std::array<double, isa::kNumQueues> free_{};
  std::array<std::vector<Span>, kNumSpaces> spans_;
};

}  // namespace

std::vector<int64_t> merge_limits(const std::vector<isa::Instruction>& code,
                                  const std::vector<Access>& access, size_t b) {
  const size_t n = code.size();
  for (const isa::Instruction& ins : code) {
    if (!mergeable(ins)) return std::vector<int64_t>(n - b, -2);
  }
  History h;
  int64_t last_ordered = -1;
  for (size_t i = 0; i < b; ++i) {
    const Access& a = access[i];
    for (const Range& r : a.reads)
      h[static_cast<size_t>(r.space)][{r.begin, r.end}].reader = static_cast<int64_t>(i);
    for (const Range& w : a.writes)
      h[static_cast<size_t>(w.space)][{w.begin, w.end}].writer = static_cast<int64_t>(i);
    if (ordered_queue(code[i])) last_ordered = static_cast<int64_t>(i);
  }
  std::vector<int64_t> limit(n - b, -1);
  int64_t need = -1;
  for (size_t j = b; j < n; ++j) {
    need = std::max(need, latest_conflict(h, access[j]));
    if (ordered_queue(code[j])) need = std::max(need, last_ordered);
    limit[j - b] = need;
  }
  return limit;
}

std::vector<int64_t> interleave_order(const std::vector<isa::Instruction>& code,
                                      const std::vector<Access>& access, size_t b,
                                      const isa::NpuConfig& config) {
  const size_t n = code.size();
  std::vector<int64_t> order;
  order.reserve(n);
  const std::vector<int64_t> limit = merge_limits(code, access, b);
  if (!limit.empty() && limit.front() == -2) {
    for (size_t i = 0; i < n; ++i) order.push_back(static_cast<int64_t>(i));
    return order;
  }
  Timeline t(config);
  size_t ia = 0, ib = b;
  while (ia < b || ib < n) {
    const bool can_b = ib < n && limit[ib - b] < static_cast<int64_t>(ia);
    bool take_b = !can_b ? false : ia >= b;
    if (can_b && ia < b) take_b = t.start(code[ib], access[ib]) < t.start(code[ia], access[ia]);
    const size_t k = take_b ? ib++ : ia++;
    t.place(code[k], access[k]);
    order.push_back(static_cast<int64_t>(k));
  }
  return order;
}

}  // namespace npusim::compiler::backend
