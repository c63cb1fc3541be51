#pragma once
// The `npusim` command line: the commands of the command table (sim/cli/commands/table.cpp), one file
// each under sim/cli/commands/.
// Exit codes: 0 success, 1 compile or simulation error, 2 usage or configuration error.
#include <iosfwd>

namespace npusim::sim {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

int run_cli(int argc, const char* const* argv, std::ostream& out, std::ostream& err);

}  // namespace npusim::sim
