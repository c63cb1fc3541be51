// Neighbouring layers' instructions interleaved (backend/schedule/interleave.h): the merge keeps every
// pair of instructions that touch the same bytes, one of them writing, in its order, keeps each layer's
// own order and the array's queue whole, and leaves code with a HOSTCALL alone.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "compiler/backend/schedule/interleave.h"
#include "isa/machine/config.h"

namespace npusim::compiler::backend {
namespace {

constexpr int kIn = static_cast<int>(isa::Buffer::kInput);
constexpr int kAcc = static_cast<int>(isa::Buffer::kAccumulator);

isa::Instruction op(isa::Opcode o, int64_t elems = 64) {
  isa::Instruction i;
  i.opcode = o;
  if (o == isa::Opcode::kVec) {
    i.set(isa::Field::kD0, elems);
    i.set(isa::Field::kD1, 1);
    i.set(isa::Field::kD2, 1);
  }
  if (o == isa::Opcode::kLoad || o == isa::Opcode::kStore) {
    i.set(isa::Field::kSize0, elems);
    i.set(isa::Field::kSize1, 1);
    i.set(isa::Field::kSize2, 1);
    i.set(isa::Field::kSize3, 1);
  }
  return i;
}

struct Code {
  std::vector<isa::Instruction> ins;
  std::vector<Access> acc;
  void add(isa::Instruction i, std::vector<Range> r, std::vector<Range> w) {
    ins.push_back(i);
    acc.push_back(Access{std::move(r), std::move(w)});
  }
};

size_t position(const std::vector<int64_t>& order, int64_t k) {
  return static_cast<size_t>(std::find(order.begin(), order.end(), k) - order.begin());
}

// Layer A: a long vector pass over its own tiles, then one VEC that writes acc[0, 256) at its very end
// (the planted dependency) and a VEC that reads input[4096, 4160). Layer B: independent loads and VECs,
// then a VEC reading acc[0, 256) (RAW), one writing input[4096, 4160) (WAR) and one writing acc[0, 256)
// (WAW) -- B's independent head moves up among A's tiles, the three never before what they depend on.
Code planted() {
  Code c;
  for (uint64_t t = 0; t < 8; ++t) {
    c.add(op(isa::Opcode::kLoad), {{kDram, t * 64, t * 64 + 64}}, {{kIn, t * 64, t * 64 + 64}});
    c.add(op(isa::Opcode::kVec, 4096), {{kIn, t * 64, t * 64 + 64}}, {{kIn, t * 64, t * 64 + 64}});
  }
  c.add(op(isa::Opcode::kVec), {{kIn, 0, 64}}, {{kAcc, 0, 256}});  // 16: the planted write
  c.add(op(isa::Opcode::kVec), {{kIn, 4096, 4160}}, {});           // 17: reads what B overwrites
  // B from 18
  c.add(op(isa::Opcode::kLoad), {{kDram, 100000, 100064}}, {{kIn, 8192, 8256}});  // 18
  c.add(op(isa::Opcode::kVec), {{kIn, 8192, 8256}}, {{kIn, 8192, 8256}});         // 19
  c.add(op(isa::Opcode::kVec), {{kAcc, 0, 256}}, {{kIn, 9000, 9064}});            // 20: RAW on 16
  c.add(op(isa::Opcode::kVec), {{kIn, 9000, 9064}}, {{kIn, 4096, 4160}});         // 21: WAR on 17
  c.add(op(isa::Opcode::kVec), {{kIn, 9000, 9064}}, {{kAcc, 0, 64}});             // 22: WAW on 16
  return c;
}

TEST(Interleave, APlantedReadAfterWriteWriteAfterReadAndWriteAfterWriteStayOrdered) {
  const Code c = planted();
  const std::vector<int64_t> limit = merge_limits(c.ins, c.acc, 18);
  ASSERT_EQ(limit.size(), 5u);
  EXPECT_EQ(limit[0], -1);  // nothing to wait for
  EXPECT_EQ(limit[1], -1);
  EXPECT_EQ(limit[2], 16);  // the planted write
  EXPECT_EQ(limit[3], 17);  // the read of the bytes it overwrites
  EXPECT_EQ(limit[4], 17);  // its own layer's order (the prefix) and the WAW on 16
  const std::vector<int64_t> order = interleave_order(c.ins, c.acc, 18, isa::NpuConfig{});
  ASSERT_EQ(order.size(), c.ins.size());
  std::vector<int64_t> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  for (size_t k = 0; k < sorted.size(); ++k) EXPECT_EQ(sorted[k], static_cast<int64_t>(k));
  // Each layer keeps its order.
  for (int64_t k = 1; k < 23; ++k) {
    if (k == 18) continue;
    EXPECT_LT(position(order, k - 1), position(order, k)) << k;
  }
  // The dependences.
  EXPECT_GT(position(order, 20), position(order, 16));
  EXPECT_GT(position(order, 21), position(order, 17));
  EXPECT_GT(position(order, 22), position(order, 16));
  // And B's independent load moved up among A's tiles (the point of the merge).
  EXPECT_LT(position(order, 18), position(order, 15));
}

TEST(Interleave, TheArraysQueueKeepsItsOrderAcrossLayers) {
  Code c;
  c.add(op(isa::Opcode::kPreload), {{kIn, 0, 64}}, {});
  c.add(op(isa::Opcode::kVec, 100000), {{kIn, 1000, 1064}}, {{kIn, 1000, 1064}});
  c.add(op(isa::Opcode::kMatmul), {{kIn, 0, 64}}, {{kAcc, 0, 64}});  // takes the preloaded operand
  c.add(op(isa::Opcode::kPreload), {{kIn, 2000, 2064}}, {});         // B: independent bytes
  c.add(op(isa::Opcode::kMatmul), {{kIn, 2000, 2064}}, {{kAcc, 4000, 4064}});
  const std::vector<int64_t> limit = merge_limits(c.ins, c.acc, 3);
  EXPECT_EQ(limit[0], 2);
  const std::vector<int64_t> order = interleave_order(c.ins, c.acc, 3, isa::NpuConfig{});
  EXPECT_GT(position(order, 3), position(order, 2));
}

TEST(Interleave, CodeWithAHostCallIsNotMerged) {
  Code c = planted();
  c.ins[5] = op(isa::Opcode::kHostCall);
  const std::vector<int64_t> order = interleave_order(c.ins, c.acc, 18, isa::NpuConfig{});
  for (size_t k = 0; k < order.size(); ++k) EXPECT_EQ(order[k], static_cast<int64_t>(k));
}

}  // namespace
}  // namespace npusim::compiler::backend
