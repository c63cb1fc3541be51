#pragma once
// A sweep's results.csv read back as rows of column -> text, for the sweep tests.
#include <map>
#include <string>
#include <vector>

namespace npusim::test {

struct Table {
  std::vector<std::string> header;
  std::vector<std::map<std::string, std::string>> rows;
};

// One CSV line split into fields (RFC 4180 quoting).
std::vector<std::string> split_csv_line(const std::string& line);

// The whole file; a row whose field count differs from the header's fails the current test.
Table read_csv(const std::string& path);

}  // namespace npusim::test
