#pragma once
// A request stream (`--requests FILE.csv`): one row per request, a value for each dynamic dimension and
// optionally the arrival time in milliseconds.
//
//   seq,arrival_ms
//   127,0
//   128,1.5
//
// The header names the columns: every dimension of the profiles (`--dynamic`) once, and `arrival_ms`
// optionally; without it every request arrives at 0 (a backlog served in file order). Blank lines and
// lines starting with '#' are skipped.
#include <string>
#include <vector>

#include "sim/dynamic/profiles.h"

namespace npusim::sim::dynamic {

struct Request {
  size_t line = 0;  // 1-based line of the file (error messages, the overflow error)
  DimBinding shape;
  double arrival_ms = 0;
};

// Parses a request file's text; `dims` are the names each row must give. Any malformed header or row is
// a DynamicUsageError "FILE:LINE: ..." naming the column.
std::vector<Request> parse_requests(const std::string& text, const std::string& display_name,
                                    const std::vector<std::string>& dims);
std::vector<Request> read_requests(const std::string& path, const std::vector<std::string>& dims);

}  // namespace npusim::sim::dynamic
