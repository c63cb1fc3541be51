#include <iostream>

#include "sim/cli/cli.h"

int main(int argc, char** argv) { return npusim::sim::run_cli(argc, argv, std::cout, std::cerr); }
