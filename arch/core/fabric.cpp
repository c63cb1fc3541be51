#include "arch/core/fabric.h"

#include <fmt/format.h>

#include "arch/datapath/error.h"
#include "arch/datapath/executor.h"
#include "arch/sim_error.h"

namespace npusim::arch {

void Fabric::execute_values(int64_t index) {
  try {
    datapath::execute(program.instructions[index], config, *state);
  } catch (const std::exception& e) {
    throw SimError(fmt::format("instruction {}: {}", index, e.what()));
  }
}

}  // namespace npusim::arch
