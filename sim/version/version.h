#pragma once
// npusim's version as runs record it: the project version and `git describe` of the tree it was built
// from, taken at build time ("0.1.0 (b0436a4-dirty)"; "0.1.0 (not a git checkout)" without git).
#include <string>

namespace npusim::sim {

std::string npusim_version();

}  // namespace npusim::sim
