#pragma once
// A running sweep's progress on stderr: a bar redrawn with carriage returns on a terminal, plain lines
// every few seconds otherwise, with the counts and an ETA from the points finished so far.
#include <chrono>
#include <cstddef>
#include <iosfwd>
#include <string>

namespace npusim::sim::sweep_detail {

// Seconds as "1h02m03s", "2m05s" or "7s" ("--" when unknown).
std::string format_duration(double s);

class Progress {
 public:
  // `total` points of which `skipped` were recorded before; lines every `interval_s` without a bar.
  Progress(std::ostream& log, bool bar, double interval_s, size_t total, size_t skipped);

  void finished(bool ok) { (ok ? ok_ : failed_)++; }
  // The points start now: model preparation (an export can take a minute) is over and must not count
  // in the per-point rate the ETA is estimated from.
  void points_started() { points_start_ = Clock::now(); }
  void set_running(size_t n) { running_ = n; }

  // A message that must not be overdrawn by the bar (a failed point).
  void note(const std::string& line);
  // Redraws the bar or prints a line when due (always with `force`).
  void tick(bool force = false);
  void end();

 private:
  using Clock = std::chrono::steady_clock;
  std::string line() const;

  std::ostream& log_;
  bool bar_;
  double interval_;
  size_t total_, skipped_;
  size_t ok_ = 0, failed_ = 0, running_ = 0;
  Clock::time_point start_, points_start_, last_;
  size_t width_ = 0;
  bool drawn_ = false;
};

}  // namespace npusim::sim::sweep_detail
