#include "arch/simulate.h"
#include "sim/model/model.h"

namespace npusim::sim {

CodeTimer simulation_timer(const isa::NpuConfig& config) {
  return [config](const isa::Program& p) {
    arch::RunOptions options;
    options.dram_refresh = isa::timing::Refresh::kAveraged;  // a slice cannot know the whole run's phase
    const traces::Report r = arch::simulate(p, config, options);
    std::vector<int64_t> cycles;
    for (const traces::LayerReport& l : r.layers) cycles.push_back(static_cast<int64_t>(l.cycles));
    if (cycles.empty()) cycles.push_back(static_cast<int64_t>(r.total_cycles));
    return cycles;
  };
}

}  // namespace npusim::sim
