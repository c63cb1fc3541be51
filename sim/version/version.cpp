#include "sim/version/version.h"

#include "npusim_git_describe.h"

namespace npusim::sim {

std::string npusim_version() { return std::string(NPUSIM_VERSION) + " (" + NPUSIM_GIT_DESCRIBE + ")"; }

}  // namespace npusim::sim
