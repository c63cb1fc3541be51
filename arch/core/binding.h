#pragma once
// The units are connected through plain pointers (bounded queues and peer units) that the top level
// (arch/npu.cpp) binds in one place. Each unit checks its own connections when elaboration ends, so a
// top level that forgets one fails before the first cycle with a sentence naming the unit and the
// connection, instead of dereferencing a null pointer mid-simulation.
#include <systemc>

#include <string>

#include "arch/sim_error.h"

namespace npusim::arch {

// Throws SimError "<unit>: <connection> is not bound ..." when `target` is null.
inline void require_bound(const sc_core::sc_object& unit, const void* target, const std::string& connection) {
  if (target) return;
  throw SimError(std::string(unit.name()) + ": " + connection +
                 " is not bound (the top level must connect it before the simulation starts)");
}

}  // namespace npusim::arch
