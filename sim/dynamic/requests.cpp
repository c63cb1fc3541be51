#include "sim/dynamic/requests.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

namespace npusim::sim::dynamic {
namespace {

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

std::vector<std::string> split_row(const std::string& line) {
  std::vector<std::string> cells;
  std::stringstream ss(line);
  std::string cell;
  while (std::getline(ss, cell, ',')) cells.push_back(trim(cell));
  if (!line.empty() && line.back() == ',') cells.push_back("");
  return cells;
}

constexpr const char* kArrival = "arrival_ms";

}  // namespace

std::vector<Request> parse_requests(const std::string& text, const std::string& display_name,
                                    const std::vector<std::string>& dims) {
  auto error = [&](size_t line, const std::string& what) {
    return DynamicUsageError(fmt::format("{}:{}: {}", display_name, line, what));
  };
  std::vector<std::string> columns;
  std::vector<Request> out;
  std::stringstream in(text);
  std::string raw;
  size_t line = 0;
  while (std::getline(in, raw)) {
    ++line;
    const std::string t = trim(raw);
    if (t.empty() || t[0] == '#') continue;
    const std::vector<std::string> cells = split_row(t);
    if (columns.empty()) {
      for (const std::string& c : cells) {
        if (c != kArrival && std::find(dims.begin(), dims.end(), c) == dims.end()) {
          std::string names;
          for (const std::string& d : dims) names += d + ", ";
          throw error(line,
                      fmt::format("column '{}' is neither a dynamic dimension nor arrival_ms (columns: {}{})",
                                  c, names, kArrival));
        }
        if (std::find(columns.begin(), columns.end(), c) != columns.end())
          throw error(line, fmt::format("column '{}' appears twice", c));
        columns.push_back(c);
      }
      for (const std::string& d : dims) {
        if (std::find(columns.begin(), columns.end(), d) == columns.end())
          throw error(line, fmt::format("the header has no column for the dynamic dimension '{}'", d));
      }
      continue;
    }
    if (cells.size() != columns.size()) {
      throw error(line, fmt::format("{} values for {} columns ({})", cells.size(), columns.size(), t));
    }
    Request r;
    r.line = line;
    for (size_t k = 0; k < cells.size(); ++k) {
      const std::string& c = cells[k];
      size_t used = 0;
      if (columns[k] == kArrival) {
        double v = -1;
        try {
          v = std::stod(c, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (c.empty() || used != c.size() || !std::isfinite(v) || v < 0)
          throw error(line, fmt::format("arrival_ms '{}' is not a non-negative number", c));
        r.arrival_ms = v;
      } else {
        try {
          r.shape[columns[k]] = positive_integer(c, columns[k]);
        } catch (const DynamicUsageError& e) {
          throw error(line, e.what());
        }
      }
    }
    out.push_back(std::move(r));
  }
  if (columns.empty())
    throw error(line, "no header row (the dynamic dimensions' names, optionally arrival_ms)");
  if (out.empty()) throw error(line, "no requests after the header");
  return out;
}

std::vector<Request> read_requests(const std::string& path, const std::vector<std::string>& dims) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DynamicUsageError(fmt::format("cannot open request file '{}'", path));
  std::ostringstream s;
  s << in.rdbuf();
  return parse_requests(s.str(), path, dims);
}

}  // namespace npusim::sim::dynamic
