#include "sim/cli/phase_status.h"

#include <fmt/format.h>

#include <algorithm>
#include <ostream>

namespace npusim::sim::cli {

PhaseStatus::PhaseStatus(std::ostream& out, bool enabled, std::chrono::milliseconds delay)
    : out_(out), delay_(delay) {
  if (enabled) thread_ = std::thread([this] { run(); });
}

PhaseStatus::~PhaseStatus() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void PhaseStatus::phase(std::string_view name) {
  std::lock_guard<std::mutex> lock(mutex_);
  clear();
  name_ = name;
  start_ = std::chrono::steady_clock::now();
}

void PhaseStatus::idle() {
  std::lock_guard<std::mutex> lock(mutex_);
  name_.clear();
  clear();
}

void PhaseStatus::clear() {
  if (drawn_ == 0) return;
  out_ << '\r' << std::string(drawn_, ' ') << '\r' << std::flush;
  drawn_ = 0;
}

void PhaseStatus::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    wake_.wait_for(lock, std::chrono::milliseconds(250));
    if (stopping_ || name_.empty()) continue;
    const auto elapsed = std::chrono::steady_clock::now() - start_;
    if (elapsed < delay_) continue;
    const std::string line =
        fmt::format("{} {:.0f} s", name_, std::chrono::duration<double>(elapsed).count());
    out_ << '\r' << line << std::string(drawn_ > line.size() ? drawn_ - line.size() : 0, ' ') << std::flush;
    drawn_ = std::max(drawn_, line.size());
  }
  clear();
}

}  // namespace npusim::sim::cli
