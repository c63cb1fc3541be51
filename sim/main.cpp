// The npusim binary. Debian's libsystemc provides main() and calls sc_main, so that is the entry point.
#include <cstdlib>
#include <iostream>
#include <systemc>

#include "sim/cli/cli.h"

#ifdef NPUSIM_JEMALLOC
// jemalloc's compiled-in options (its MALLOC_CONF environment variable still overrides them):
// - transparent huge pages for every arena. A model's weights pass through a few fresh buffers of tens
//   of MB (the graph's tensors, the laid-out weights, the program's data segments); with 2 MiB pages
//   they fault 500x less often (ResNet-50: 87 700 -> 2 000 minor faults, docs/performance.md);
// - freed pages kept, not given back to the kernel on a timer: what a layer frees the next one reuses
//   instead of faulting in (and zeroing) new pages. A run is short; its peak is what it holds.
extern "C" {
const char* malloc_conf = "thp:always,metadata_thp:auto,dirty_decay_ms:-1,muzzy_decay_ms:-1";
}
#endif

// Before SystemC prints its banner (it reads this when the first simulation context starts).
static const int kQuietSystemC = setenv("SYSTEMC_DISABLE_COPYRIGHT_MESSAGE", "1", 1);

int sc_main(int argc, char** argv) { return npusim::sim::run_cli(argc, argv, std::cout, std::cerr); }
