#include "isa/program_slice.h"

#include <algorithm>

namespace npusim::isa {

namespace {

constexpr int kQ = kNumQueues;

bool is_sync(const Instruction& ins) { return ins.opcode == Opcode::kHalt || ins.opcode == Opcode::kBarrier; }

// Signals minus waits per channel over instructions [first, last).
TokenBalance balance_of(const Program& p, size_t first, size_t last) {
  TokenBalance b{};
  last = std::min(last, p.instructions.size());
  for (size_t i = first; i < last; ++i) {
    const Instruction& ins = p.instructions[i];
    if (is_sync(ins)) continue;
    const int me = static_cast<int>(ins.queue());
    for (int q = 0; q < kQ; ++q) {
      if (ins.signals(static_cast<Queue>(q))) ++b[static_cast<size_t>(me * kQ + q)];
      if (ins.waits_on(static_cast<Queue>(q))) --b[static_cast<size_t>(q * kQ + me)];
    }
  }
  return b;
}

}  // namespace

TokenBalance token_balance(const Program& p, size_t upto) { return balance_of(p, 0, upto); }

Program slice_program(const Program& p, size_t first, size_t last, const TokenBalance& balance_at_last) {
  last = std::min(last, p.instructions.size());
  first = std::min(first, last);
  // Signals and waits inside the slice per channel give the balance at `first`: the tokens a wait in
  // the slice may consume from before it.
  const TokenBalance in_slice = balance_of(p, first, last);
  TokenBalance from_before{};  // waits in the slice still consuming tokens signalled before it
  TokenBalance kept_waits{};   // waits in the slice that consume a signal of the slice
  for (size_t c = 0; c < from_before.size(); ++c)
    from_before[c] = std::max<int64_t>(0, balance_at_last[c] - in_slice[c]);

  Program out;
  uint32_t base = UINT32_MAX, top = 0;
  for (size_t i = first; i < last; ++i) {
    if (is_sync(p.instructions[i])) continue;
    base = std::min(base, p.instructions[i].layer());
    top = std::max(top, p.instructions[i].layer());
  }
  if (base == UINT32_MAX) base = top = 0;
  for (uint32_t l = base; l <= top; ++l)
    out.layers.push_back(l < p.layers.size() ? p.layers[l] : Layer{"slice", ""});
  out.host_ops = p.host_ops;
  out.instructions.reserve(last - first);
  for (size_t i = first; i < last; ++i) {
    Instruction ins = p.instructions[i];
    if (is_sync(ins)) continue;
    const int me = static_cast<int>(ins.queue());
    int64_t wait = ins.get(Field::kWait);
    for (int q = 0; q < kQ; ++q) {
      if (!((wait >> q) & 1)) continue;
      int64_t& before = from_before[static_cast<size_t>(q * kQ + me)];
      if (before > 0) {
        --before;
        wait &= ~(int64_t{1} << q);
      } else {
        ++kept_waits[static_cast<size_t>(q * kQ + me)];
      }
    }
    ins.set(Field::kWait, wait);
    ins.set(Field::kLayer, ins.layer() - base);
    out.instructions.push_back(ins);
  }
  // Signals: the first kept_waits[c] signals of each channel in the slice are waited for inside it.
  TokenBalance used{};
  for (Instruction& ins : out.instructions) {
    const int me = static_cast<int>(ins.queue());
    int64_t signal = ins.get(Field::kSignal);
    for (int q = 0; q < kQ; ++q) {
      if (!((signal >> q) & 1)) continue;
      const size_t c = static_cast<size_t>(me * kQ + q);
      if (used[c] < kept_waits[c]) {
        ++used[c];
      } else {
        signal &= ~(int64_t{1} << q);
      }
    }
    ins.set(Field::kSignal, signal);
  }
  return out;
}

}  // namespace npusim::isa
