#pragma once
// One core of the NPU for one run: the fabric its units share, the sequencer, the five queue units, the
// DMA engines and the bounded queues between them, bound by name here and nowhere else. The DRAM model
// and the host link are the uncore's, shared with the other cores of a multi-core run.
#include <systemc>

#include <functional>
#include <string>
#include <vector>

#include "arch/core/fabric.h"
#include "arch/dma/dma.h"
#include "arch/host/host_link.h"
#include "arch/sequencer/sequencer.h"
#include "arch/systolic/systolic_array.h"
#include "arch/vector/vector_unit.h"
#include "traces/report.h"

namespace npusim::arch {

class Npu : public sc_core::sc_module {
 public:
  Npu(const sc_core::sc_module_name& name, const isa::NpuConfig& config, const isa::Program& program,
      traces::Sink* sink, datapath::MachineState* state, std::function<void(double)> progress, Uncore& uncore,
      int core = 0);

  bool finished() const { return sequencer_.finished(); }
  const std::string& error() const { return fab_.error; }
  // Which queues wait on which tokens, for a run that stopped without finishing.
  std::string deadlock_message() const;
  // The report of a finished run (sim.wall_seconds left for the caller).
  traces::Report report() const;
  // Track names, in track order (the sink's TraceInfo).
  const std::vector<std::string>& unit_names() const { return unit_names_; }

  static std::vector<std::string> track_names(const isa::NpuConfig& config);

 private:
  std::vector<std::string> unit_names_;
  Fabric fab_;
  sc_core::sc_vector<BoundedQueue<Dispatch>> queues_;
  sc_core::sc_vector<BoundedQueue<Descriptor>> load_descriptors_;
  sc_core::sc_vector<BoundedQueue<Descriptor>> store_descriptors_;
  Sequencer sequencer_;
  DmaQueue load_;
  SystolicArray matrix_;
  VectorUnit vector_;
  DmaQueue store_;
  HostLink host_;
  sc_core::sc_vector<DmaEngine> engines_;
};

}  // namespace npusim::arch
