#pragma once
// `npusim diff A.json B.json`: what differs between two run reports — model, configuration (every
// parameter the reports record), precision plan, the run's figures, and the layers matched by name,
// those that changed most first (docs/report.md, "Comparing two runs").
#include <cstddef>
#include <stdexcept>
#include <string>

namespace npusim::sim {

// A file that is not a readable npusim report; the message is one sentence naming it.
class ReportReadError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The comparison as text; `top` layers that changed most (SIZE_MAX: every matched layer).
std::string diff_reports(const std::string& a_path, const std::string& b_path, size_t top);

}  // namespace npusim::sim
