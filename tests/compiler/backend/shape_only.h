// The check that a timing-only compile (shape-only weights, compiler::ImportOptions::weight_values false)
// gives the program the weights' values give: instruction for instruction, segment for segment (same
// addresses and sizes), only without the bytes, and the same estimates and placements.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "compiler/backend/compile.h"
#include "isa/program.h"

namespace npusim::compiler::testing {

// Everything but the data bytes, and the data segments' places and sizes.
inline void expect_same_program_without_bytes(const CompileResult& with, const CompileResult& without,
                                              const std::string& what) {
  const isa::Program& a = with.program;
  const isa::Program& b = without.program;
  EXPECT_TRUE(a.instructions == b.instructions) << what;
  EXPECT_TRUE(a.layers == b.layers) << what;
  EXPECT_TRUE(a.tensors == b.tensors) << what;
  EXPECT_TRUE(a.host_ops == b.host_ops) << what;
  EXPECT_EQ(a.machine, b.machine) << what;
  ASSERT_EQ(a.data.size(), b.data.size()) << what;
  uint64_t elided = 0;
  for (size_t k = 0; k < a.data.size(); ++k) {
    EXPECT_EQ(a.data[k].dram_addr, b.data[k].dram_addr) << what << " segment " << k;
    EXPECT_EQ(a.data[k].size(), b.data[k].size()) << what << " segment " << k;
    EXPECT_EQ(a.data[k].elided_bytes, 0u) << what << " segment " << k;
    elided += b.data[k].elided_bytes;
  }
  EXPECT_GT(elided, 0u) << what << ": no weight was left out";
  EXPECT_EQ(with.memory.weight_bytes, without.memory.weight_bytes) << what;
  EXPECT_EQ(with.memory.activation_bytes, without.memory.activation_bytes) << what;
  ASSERT_EQ(with.layers.size(), without.layers.size()) << what;
  for (size_t k = 0; k < with.layers.size(); ++k) {
    EXPECT_EQ(with.layers[k].est_cycles, without.layers[k].est_cycles) << what << " " << with.layers[k].name;
    EXPECT_EQ(with.layers[k].placement, without.layers[k].placement) << what << " " << with.layers[k].name;
  }
}

}  // namespace npusim::compiler::testing
