// A stand-alone pool of overlapping windows in bands of output rows (compiler/backend/vector/pooling.cpp):
// the input rows a band shares with the band before are copied from that band's slot, not loaded again, so
// each input row comes from DRAM once; the outputs are exactly the reference's.
#include <gtest/gtest.h>

#include "compiler/backend/compile.h"
#include "isa/isa.h"
#include "tests/compiler/backend/functional.h"

namespace npusim::compiler::testing {
namespace {

// A 3x3 max pool of stride 2, padded, ceil_mode (GoogLeNet's maxpool2/3 and ResNet's stem pool alike), over a
// map whose rows of every channel fit the small machine's slots only a few output rows at a time.
Graph strided_pool() {
  GraphBuilder b;
  b.input("x", {1, 8, 23, 21});
  Node& p = b.node("MaxPool", {"x"}, {"y"}, "pool");
  p.attrs["kernel_shape"].value = std::vector<int64_t>{3, 3};
  p.attrs["strides"].value = std::vector<int64_t>{2, 2};
  p.attrs["pads"].value = std::vector<int64_t>{1, 1, 1, 1};
  p.attrs["ceil_mode"].value = int64_t{1};
  b.output("y");
  return b.build();
}

TEST(Pooling, BandsOfOverlappingWindowsLoadEachInputRowOnce) {
  const Graph g = strided_pool();
  for (const bool random_order : {false, true}) {
    CompileResult r;
    RunOptions o;
    o.random_order = random_order;
    EXPECT_EQ(compile_and_compare(g, small_sram(), &r, o), 0.0);  // a maximum is exact
    EXPECT_EQ(check_tokens(r.program), "");
    int64_t loaded = 0, copies = 0;
    for (const isa::Instruction& ins : r.program.instructions) {
      if (r.layers.at(ins.layer()).name != "pool") continue;
      if (ins.opcode == isa::Opcode::kLoad &&
          static_cast<isa::Buffer>(ins.get(isa::Field::kBuf)) == isa::Buffer::kInput) {
        loaded += ins.get(isa::Field::kSize0) * ins.get(isa::Field::kSize1) * ins.get(isa::Field::kSize2);
      }
      if (ins.opcode == isa::Opcode::kVec &&
          static_cast<isa::VecOp>(ins.get(isa::Field::kVop)) == isa::VecOp::kCopy) {
        ++copies;
      }
    }
    EXPECT_GT(copies, 0);            // several bands
    EXPECT_EQ(loaded, 8 * 23 * 21);  // every input element once
  }
}

}  // namespace
}  // namespace npusim::compiler::testing
