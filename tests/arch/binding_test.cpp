// The units check their connections when elaboration ends (arch/core/binding.h): a unit left unbound
// fails sc_start with a sentence naming the unit and the connection, before any instruction runs.
#include <gtest/gtest.h>

#include <string>
#include <systemc>

#include "arch/dma/dma.h"
#include "arch/sequencer/sequencer.h"
#include "arch/simulate.h"
#include "arch/vector/vector_unit.h"

namespace npusim::arch {
namespace {

// What sc_start says about the netlist built so far ("" when it elaborates).
std::string elaboration_error() {
  try {
    sc_core::sc_start(sc_core::SC_ZERO_TIME);
  } catch (const SimError& e) {
    return e.what();
  }
  return "";
}

// A fresh simulation context first (the fabric's events belong to it), then what the units share.
struct Netlist {
  const bool fresh = (fresh_simcontext(), true);
  isa::Program program;
  isa::NpuConfig config;
  Uncore uncore{config.dram, isa::timing::Refresh::kScheduled};
  Fabric fabric{program, config, nullptr, 16, nullptr, uncore, 0};
};

TEST(Binding, QueueUnitWithoutItsInstructionQueueFailsAtElaboration) {
  Netlist n;
  VectorUnit vector("vector", n.config.vector, n.fabric);
  EXPECT_EQ(elaboration_error(),
            "vector: its instruction queue (in) is not bound (the top level must connect it before the "
            "simulation starts)");
}

TEST(Binding, BoundQueueUnitElaborates) {
  Netlist n;
  BoundedQueue<Dispatch> queue("queue", 2);
  VectorUnit vector("vector", n.config.vector, n.fabric);
  vector.in = &queue;
  EXPECT_EQ(elaboration_error(), "");
}

TEST(Binding, SequencerNamesTheFirstUnboundQueue) {
  Netlist n;
  Sequencer sequencer("sequencer", n.config.sequencer, n.fabric, nullptr);
  EXPECT_NE(elaboration_error().find("sequencer: the load queue (to_queue[0]) is not bound"),
            std::string::npos);
}

TEST(Binding, DmaEngineWithoutDescriptorQueuesFailsAtElaboration) {
  Netlist n;
  DmaEngine engine("dma0", n.config.dma, n.fabric, 0);
  EXPECT_NE(
      elaboration_error().find("dma0: its descriptor queue from the load queue (from_load) is not bound"),
      std::string::npos);
}

TEST(Binding, DmaQueueWithoutItsEnginesFailsAtElaboration) {
  Netlist n;
  BoundedQueue<Dispatch> queue("queue", 2);
  DmaQueue load("load", n.config.dma, n.fabric, isa::Queue::kLoad);
  load.in = &queue;
  EXPECT_NE(elaboration_error().find("load: its descriptor queue to engine 0 (to_engine[0]) is not bound"),
            std::string::npos);
}

}  // namespace
}  // namespace npusim::arch
