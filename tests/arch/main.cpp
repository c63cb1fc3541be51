// The arch test binary: SystemC owns main() and calls sc_main, which runs the GoogleTest suite.
#include <gtest/gtest.h>

#include <cstdlib>
#include <systemc>

// Before SystemC prints its banner (gtest_discover_tests parses this binary's output).
static const int kQuiet = setenv("SYSTEMC_DISABLE_COPYRIGHT_MESSAGE", "1", 1);

int sc_main(int argc, char* argv[]) {
  (void)kQuiet;
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
