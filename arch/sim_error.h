#pragma once
// The one error a simulation reports: deadlock, capacity violation, invalid instruction. The CLI
// turns it into exit code 1.
#include <stdexcept>

namespace npusim::arch {

class SimError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace npusim::arch
