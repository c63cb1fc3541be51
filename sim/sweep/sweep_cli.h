#pragma once
// `npusim sweep`: the command-line front of sim/sweep (docs/sweeps.md).
#include <iosfwd>
#include <string>
#include <vector>

namespace npusim::sim {

// Runs `npusim sweep` with the arguments after the command name. Returns the exit status: 0 done,
// 1 a point failed with --fail-on-error, points are missing after a merge, or Slurm/IO failed,
// 2 a usage or sweep-file error.
int run_sweep(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace npusim::sim
