// The npusim binary. Debian's libsystemc provides main() and calls sc_main, so that is the entry point.
#include <cstdlib>
#include <iostream>
#include <systemc>

#include "sim/cli/cli.h"

// Before SystemC prints its banner (it reads this when the first simulation context starts).
static const int kQuietSystemC = setenv("SYSTEMC_DISABLE_COPYRIGHT_MESSAGE", "1", 1);

int sc_main(int argc, char** argv) { return npusim::sim::run_cli(argc, argv, std::cout, std::cerr); }
