#include "arch/simulate.h"
#include "sim/model/model.h"

namespace npusim::sim {

CodeTimer simulation_timer(const isa::NpuConfig& config) {
  return [config](const isa::Program& p) {
    const traces::Report r = arch::simulate(p, config, arch::RunOptions{});
    return static_cast<int64_t>(r.layers.empty() ? r.total_cycles : r.layers.back().cycles);
  };
}

}  // namespace npusim::sim
