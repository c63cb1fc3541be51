// isa::slice_program: a run of instructions as a program of its own, tokens paired in order per channel.
#include "isa/program_slice.h"

#include <gtest/gtest.h>

namespace npusim::isa {
namespace {

constexpr int kLoadBit = 1 << static_cast<int>(Queue::kLoad);
constexpr int kMatrixBit = 1 << static_cast<int>(Queue::kMatrix);

Instruction ins(Opcode op, uint32_t layer, int wait, int signal) {
  Instruction i;
  i.opcode = op;
  i.set(Field::kLayer, layer).set(Field::kWait, wait).set(Field::kSignal, signal);
  return i;
}

// Two layers, each: LOAD signals the matrix queue, NOP (matrix queue) waits for it. Layer 1's LOAD
// also signals a NOP of layer 2, which is not in the program yet (outstanding at its end).
Program two_layers() {
  Program p;
  p.layers = {{"a", "Conv"}, {"b", "Conv"}};
  p.instructions = {ins(Opcode::kLoad, 0, 0, kMatrixBit), ins(Opcode::kNop, 0, kLoadBit, 0),
                    ins(Opcode::kLoad, 1, 0, kMatrixBit), ins(Opcode::kLoad, 1, 0, kMatrixBit),
                    ins(Opcode::kNop, 1, kLoadBit, 0)};
  return p;
}

TEST(ProgramSlice, TokenBalanceCountsSignalsMinusWaitsPerChannel) {
  const Program p = two_layers();
  const size_t load_to_matrix =
      static_cast<size_t>(Queue::kLoad) * kNumQueues + static_cast<size_t>(Queue::kMatrix);
  EXPECT_EQ(token_balance(p, 1)[load_to_matrix], 1);
  EXPECT_EQ(token_balance(p, 2)[load_to_matrix], 0);
  EXPECT_EQ(token_balance(p, 5)[load_to_matrix], 1);  // the last LOAD's token is still outstanding
  for (size_t c = 0; c < kNumQueues * kNumQueues; ++c) {
    if (c != load_to_matrix) {
      EXPECT_EQ(token_balance(p, 5)[c], 0);
    }
  }
}

TEST(ProgramSlice, KeepsTokensInsideAndDropsThosePairedOutside) {
  const Program p = two_layers();
  const Program s = slice_program(p, 2, 5, token_balance(p, 5));
  ASSERT_EQ(s.instructions.size(), 3u);
  ASSERT_EQ(s.layers.size(), 1u);
  EXPECT_EQ(s.layers[0].name, "b");
  // The first LOAD's token is waited for by the NOP in the slice; the second's partner lies after it.
  EXPECT_EQ(s.instructions[0].get(Field::kSignal), kMatrixBit);
  EXPECT_EQ(s.instructions[1].get(Field::kSignal), 0);
  EXPECT_EQ(s.instructions[2].get(Field::kWait), kLoadBit);
  for (const Instruction& i : s.instructions) EXPECT_EQ(i.layer(), 0u);
  EXPECT_EQ(token_balance(s, s.instructions.size())[static_cast<size_t>(Queue::kLoad) * kNumQueues + 1], 0);
}

TEST(ProgramSlice, AWaitForATokenSignalledBeforeTheSliceIsDropped) {
  const Program p = two_layers();
  const Program s = slice_program(p, 1, 3, token_balance(p, 3));  // NOP of layer 0, first LOAD of layer 1
  ASSERT_EQ(s.instructions.size(), 2u);
  EXPECT_EQ(s.instructions[0].get(Field::kWait), 0);    // its LOAD lies before the slice
  EXPECT_EQ(s.instructions[1].get(Field::kSignal), 0);  // its NOP lies after it
  ASSERT_EQ(s.layers.size(), 2u);                       // layers renumbered from the first one's
  EXPECT_EQ(s.instructions[1].layer(), 1u);
}

TEST(ProgramSlice, HaltAndBarrierAreLeftOut) {
  Program p = two_layers();
  p.instructions.push_back(ins(Opcode::kHalt, 1, 0, 0));
  EXPECT_EQ(
      slice_program(p, 0, p.instructions.size(), token_balance(p, p.instructions.size())).instructions.size(),
      5u);
}

}  // namespace
}  // namespace npusim::isa
