#pragma once
// Support shared by the sweep tests: running `npusim sweep`, and reading its results.csv back as rows
// of column -> text.
#include <map>
#include <string>
#include <vector>

#include "tests/e2e/run_command.h"

namespace npusim::test {

struct Table {
  std::vector<std::string> header;
  std::vector<std::map<std::string, std::string>> rows;
};

// One CSV line split into fields (RFC 4180 quoting).
std::vector<std::string> split_csv_line(const std::string& line);

// The whole file; a row whose field count differs from the header's fails the current test.
Table read_csv(const std::string& path);

// Writes `text` to DIR/sweep.yaml and returns its path.
std::string write_sweep(const std::string& dir, const std::string& text);

// Runs `npusim sweep ARGS...` (the binary under test, NPUSIM_BIN).
CommandResult sweep(const std::vector<std::string>& args);

}  // namespace npusim::test
