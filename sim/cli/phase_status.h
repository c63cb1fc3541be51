#pragma once
// A terminal's line saying which long phase of a command runs and for how long ("calibration 12 s"),
// redrawn from a second thread, so that a calibration, an accuracy evaluation or the advice's search is
// not a silent wait. The phases report no fraction (the compiler's calibration runs the interpreter
// sample by sample without a callback): the line shows the phase and its elapsed time.
#include <chrono>
#include <condition_variable>
#include <iosfwd>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

namespace npusim::sim::cli {

class PhaseStatus {
 public:
  // Draws on `out` only when `enabled` (stderr is a terminal and the command is not quiet); a phase
  // shorter than `delay` draws nothing.
  PhaseStatus(std::ostream& out, bool enabled,
              std::chrono::milliseconds delay = std::chrono::milliseconds(500));
  PhaseStatus(const PhaseStatus&) = delete;
  PhaseStatus& operator=(const PhaseStatus&) = delete;
  ~PhaseStatus();

  // The phase now running; its clock starts now.
  void phase(std::string_view name);
  // No phase runs: the line is cleared (before the command prints, or another bar draws).
  void idle();

 private:
  void run();
  void clear();  // with mutex_ held

  std::ostream& out_;
  const std::chrono::milliseconds delay_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::string name_;  // empty: idle
  std::chrono::steady_clock::time_point start_;
  size_t drawn_ = 0;  // characters on the line now
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace npusim::sim::cli
