#include "sim/sweep/progress.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <ostream>
#include <string>

namespace npusim::sim::sweep_detail {

std::string format_duration(double s) {
  if (!std::isfinite(s) || s < 0) return "--";
  const int64_t t = static_cast<int64_t>(s + 0.5);
  if (t >= 3600) return fmt::format("{}h{:02}m{:02}s", t / 3600, t / 60 % 60, t % 60);
  if (t >= 60) return fmt::format("{}m{:02}s", t / 60, t % 60);
  return fmt::format("{}s", t);
}

Progress::Progress(std::ostream& log, bool bar, double interval_s, size_t total, size_t skipped)
    : log_(log),
      bar_(bar),
      interval_(interval_s),
      total_(total),
      skipped_(skipped),
      start_(Clock::now()),
      points_start_(start_),
      last_(start_) {}

void Progress::note(const std::string& line) {
  if (bar_) log_ << "\r" << std::string(width_, ' ') << "\r";
  log_ << line << "\n";
  drawn_ = false;
  tick(true);
}

void Progress::tick(bool force) {
  const auto now = Clock::now();
  const double since = std::chrono::duration<double>(now - last_).count();
  if (bar_) {
    if (!force && drawn_ && since < 0.25) return;
  } else if (!force && since < interval_) {
    return;
  }
  last_ = now;
  const std::string text = line();
  if (bar_) {
    log_ << "\r" << text << std::string(width_ > text.size() ? width_ - text.size() : 0, ' ') << std::flush;
    width_ = text.size();
    drawn_ = true;
  } else {
    log_ << text << "\n" << std::flush;
  }
}

void Progress::end() {
  if (bar_ && drawn_) log_ << "\r" << line() << "\n" << std::flush;
  if (!bar_) tick(true);
}

std::string Progress::line() const {
  const double elapsed = std::chrono::duration<double>(Clock::now() - start_).count();
  const size_t done_now = ok_ + failed_;
  const size_t done = skipped_ + done_now;
  const size_t remaining = total_ > done ? total_ - done : 0;
  const double points_elapsed = std::chrono::duration<double>(Clock::now() - points_start_).count();
  const double eta = done_now ? points_elapsed / done_now * remaining : NAN;
  const std::string counts =
      fmt::format("{}/{} done, {} failed, {} running", done, total_, failed_, running_);
  const std::string times = fmt::format("elapsed {}, ETA {}", format_duration(elapsed),
                                        remaining ? format_duration(eta) : std::string("0s"));
  if (!bar_) return "sweep: " + counts + ", " + times;
  constexpr size_t kWidth = 24;
  const size_t fill = total_ ? done * kWidth / total_ : kWidth;
  return "[" + std::string(fill, '#') + std::string(kWidth - fill, '.') + "] " + counts + " | " + times;
}

}  // namespace npusim::sim::sweep_detail
