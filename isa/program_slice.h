#pragma once
// A run of a program's instructions as a program of its own, so that one layer (or one candidate
// mapping of it) can be timed alone on an idle machine: the compiler's cost model simulates the code
// it is about to choose instead of approximating the simulator (docs/backend.md, "Estimates").
//
// Tokens: on every channel (producer queue -> consumer queue) signals and waits pair up in order, the
// k-th wait consuming the k-th signal. A wait in the slice whose signal lies before it, and a signal
// in the slice whose wait lies after it, are dropped; every other token is kept, so the slice keeps
// exactly the ordering its own instructions impose on each other.
#include <array>
#include <cstddef>
#include <cstdint>

#include "isa/program.h"

namespace npusim::isa {

// Tokens outstanding (signalled, not yet waited for) per channel, indexed [from * kNumQueues + to].
using TokenBalance = std::array<int64_t, kNumQueues * kNumQueues>;

// The balance after instructions [0, upto) of `p` (a scan; the compiler keeps its own running count).
TokenBalance token_balance(const Program& p, size_t upto);

// Instructions [first, last) of `p` (HALT and BARRIER left out) as a program of its own. Layer tags are
// renumbered from the layer of instruction `first` (tag 0) and the slice's `layers` are those layers
// of `p`, so a simulation reports each of them. `balance_at_last` is token_balance(p, last). Host ops are
// kept (HOSTCALLs index them); data segments, tensors and the machine spec are not (a timing run needs none
// of them).
Program slice_program(const Program& p, size_t first, size_t last, const TokenBalance& balance_at_last);

}  // namespace npusim::isa
