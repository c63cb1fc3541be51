// The terminal's phase line (sim/cli/phase_status.h): drawn for a phase that lasts, named, cleared when
// the phase ends; nothing when disabled or for a phase shorter than the delay.
#include "sim/cli/phase_status.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <thread>

namespace npusim::sim::cli {
namespace {

using std::chrono::milliseconds;

TEST(PhaseStatus, ALongPhaseIsDrawnWithItsNameAndClearedWhenItEnds) {
  std::ostringstream out;
  {
    PhaseStatus status(out, true, milliseconds(0));
    status.phase("calibration");
    std::this_thread::sleep_for(milliseconds(700));
    status.idle();
    const std::string s = out.str();
    ASSERT_EQ(s.rfind("\rcalibration ", 0), 0u) << s;
    EXPECT_NE(s.find(" s"), std::string::npos) << s;
    // Cleared: the last thing written blanks the line and returns to its start.
    const size_t drawn = s.find(" s") + 2 - 1;
    EXPECT_EQ(s.substr(s.size() - drawn - 2), "\r" + std::string(drawn, ' ') + "\r") << s;
  }
}

TEST(PhaseStatus, NothingIsDrawnWhenDisabledOrForAShortPhase) {
  std::ostringstream off, quick;
  {
    PhaseStatus status(off, false, milliseconds(0));
    status.phase("calibration");
    std::this_thread::sleep_for(milliseconds(400));
  }
  {
    PhaseStatus status(quick, true, milliseconds(10000));
    status.phase("compile");
    std::this_thread::sleep_for(milliseconds(400));
  }
  EXPECT_EQ(off.str(), "");
  EXPECT_EQ(quick.str(), "");
}

}  // namespace
}  // namespace npusim::sim::cli
