#include "tests/sweeps/results_table.h"

#include <gtest/gtest.h>

#include <sstream>

#include "tests/e2e/run_command.h"

namespace npusim::test {

std::vector<std::string> split_csv_line(const std::string& line) {
  std::vector<std::string> f(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        f.back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        f.back() += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      f.emplace_back();
    } else {
      f.back() += c;
    }
  }
  return f;
}

Table read_csv(const std::string& path) {
  Table t;
  std::istringstream in(read_file(path));
  std::string line;
  if (!std::getline(in, line)) return t;
  t.header = split_csv_line(line);
  while (std::getline(in, line)) {
    const std::vector<std::string> f = split_csv_line(line);
    EXPECT_EQ(f.size(), t.header.size()) << line;
    std::map<std::string, std::string> row;
    for (size_t i = 0; i < f.size() && i < t.header.size(); ++i) row[t.header[i]] = f[i];
    t.rows.push_back(row);
  }
  return t;
}

std::string write_sweep(const std::string& dir, const std::string& text) {
  const std::string path = dir + "/sweep.yaml";
  write_file(path, text);
  return path;
}

CommandResult sweep(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {NPUSIM_BIN, "sweep"};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_command(argv);
}

}  // namespace npusim::test
