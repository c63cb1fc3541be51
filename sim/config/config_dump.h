#pragma once
// Human- and machine-readable views of the configuration, all generated from NpuConfig::visit().
#include <string>

#include "isa/machine/config.h"

namespace npusim::sim {

// Every parameter with type, unit, default, allowed values and description, as an aligned plain-text
// table with a heading line per group (`npusim config --dump`).
std::string config_reference();

// The same reference as a Markdown table (docs/config.md embeds it verbatim; a test keeps them equal).
std::string config_reference_markdown();

// `c` as a complete YAML configuration (every key, units as comments) that load_config() reads back to
// exactly `c`; reals are printed as the shortest text that round-trips.
std::string config_yaml(const isa::NpuConfig& c);

}  // namespace npusim::sim
