// The npusim binary. Debian's libsystemc provides main() and calls sc_main, so that is the entry point.
#include <cstdlib>
#include <iostream>
#include <systemc>

#include "sim/cli/cli.h"

#ifdef NPUSIM_JEMALLOC
// jemalloc's compiled-in options (its MALLOC_CONF environment variable still overrides them): transparent
// huge pages for every arena. A model's weights pass through a few fresh buffers of tens of MB (the
// parsed protobuf, the graph's tensors, the laid-out weights, the program's data segments); with 2 MiB
// pages they fault 40x less often (ResNet-50: 87 700 -> 3 200 minor faults, docs/performance.md).
extern "C" {
const char* malloc_conf = "thp:always,metadata_thp:auto";
}
#endif

// Before SystemC prints its banner (it reads this when the first simulation context starts).
static const int kQuietSystemC = setenv("SYSTEMC_DISABLE_COPYRIGHT_MESSAGE", "1", 1);

int sc_main(int argc, char** argv) { return npusim::sim::run_cli(argc, argv, std::cout, std::cerr); }
