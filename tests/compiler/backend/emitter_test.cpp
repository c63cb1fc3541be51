// The emitter's trial checkpoints: they nest (a layer lowered whole under an undo point runs trials of its
// own, backend/fusion/layer_fusion.h), each rollback undoing what came after its own checkpoint, the signal
// bits later instructions added to earlier producers included.
#include <gtest/gtest.h>

#include "compiler/backend/core/emitter.h"

namespace npusim::compiler::backend {
namespace {

isa::Instruction op(isa::Opcode o) {
  isa::Instruction i;
  i.opcode = o;
  return i;
}

TEST(Emitter, NestedCheckpointsRollBackInnermostFirstWithTheSignalsTheyAdded) {
  isa::Program prog;
  Emitter em(prog);
  const Range sram{static_cast<int>(isa::Buffer::kInput), 0, 64};
  const Range dram{kDram, 0, 64};
  auto signal = [&](size_t i) { return prog.instructions[i].get(isa::Field::kSignal); };
  em.emit(op(isa::Opcode::kLoad), {dram}, {sram});  // 0: writes the SRAM bytes
  const int64_t alone = signal(0);
  const Emitter::Checkpoint outer = em.checkpoint();
  em.emit(op(isa::Opcode::kVec), {sram}, {});  // 1: reads them: the load signals the vector queue
  const int64_t with_vec = signal(0);
  EXPECT_NE(with_vec, alone);
  const Emitter::Checkpoint inner = em.checkpoint();
  em.emit(op(isa::Opcode::kStore), {sram}, {dram});  // 2: reads them too: the load signals the store queue
  EXPECT_NE(signal(0), with_vec);
  em.rollback(inner);
  ASSERT_EQ(prog.instructions.size(), 2u);
  EXPECT_EQ(signal(0), with_vec);
  em.rollback(outer);
  ASSERT_EQ(prog.instructions.size(), 1u);
  EXPECT_EQ(signal(0), alone);
}

}  // namespace
}  // namespace npusim::compiler::backend
