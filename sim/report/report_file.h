#pragma once
// Reading a saved run report (`npusim run --report FILE.json`) back: `npusim diff` and `npusim report` share
// it, so a file that is not a report gets the same one-sentence answer from both.
#include <yaml-cpp/yaml.h>

#include <stdexcept>
#include <string>

namespace npusim::sim {

// A file that is not a readable npusim report; the message is one sentence naming it.
class ReportReadError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The report in `text` (named `name` in messages) parsed: yaml-cpp reads JSON, YAML's flow style. Throws
// ReportReadError when it is not JSON, breaks off (a truncated file) or is JSON without total_cycles and
// layers[].
YAML::Node parse_report(const std::string& text, const std::string& name);

// The file's bytes; ReportReadError when it cannot be read.
std::string read_report_text(const std::string& path);

// read_report_text + parse_report.
YAML::Node load_report(const std::string& path);

}  // namespace npusim::sim
