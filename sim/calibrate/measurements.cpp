#include "sim/calibrate/measurements.h"

#include <fmt/format.h>

#include <array>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

namespace npusim::sim::calibrate {
namespace {

namespace fs = std::filesystem;

constexpr std::array<const char*, 7> kColumns = {"model",     "layer", "cycles",     "ms",
                                                 "precision", "batch", "input_shape"};

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

// One line's fields: comma-separated, each optionally in double quotes ("" inside for a quote).
std::vector<std::string> fields_of(const std::string& line) {
  std::vector<std::string> out(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        out.back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        out.back() += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      out.emplace_back();
    } else {
      out.back() += c;
    }
  }
  for (std::string& f : out) f = trim(f);
  return out;
}

// A model spec naming a file relative to the CSV's folder is resolved against it; anything else (an
// absolute path, a built-in or micro-model, a path the CSV's folder does not hold) is kept as written.
std::string resolve_model(const std::string& spec, const fs::path& dir) {
  const fs::path p(spec);
  if (p.is_absolute() || dir.empty()) return spec;
  std::error_code ec;
  if (fs::exists(dir / p, ec)) return (dir / p).string();
  return spec;
}

}  // namespace

std::vector<Measurement> read_measurements(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw MeasurementError(fmt::format("{}: cannot read the measurements file", path));
  const fs::path dir = fs::path(path).parent_path();
  std::string line;
  int number = 0;
  std::map<std::string, size_t> column;  // name -> position
  std::vector<Measurement> rows;
  while (std::getline(in, line)) {
    ++number;
    if (trim(line).empty() || trim(line)[0] == '#') continue;
    const std::vector<std::string> f = fields_of(line);
    const std::string where = fmt::format("{}:{}", path, number);
    if (column.empty()) {
      for (size_t i = 0; i < f.size(); ++i) {
        bool known = false;
        for (const char* c : kColumns) known = known || f[i] == c;
        if (!known)
          throw MeasurementError(
              fmt::format("{}: unknown column '{}' (expected model, layer, cycles or ms, and "
                          "optionally precision, batch, input_shape)",
                          where, f[i]));
        if (!column.emplace(f[i], i).second)
          throw MeasurementError(fmt::format("{}: column '{}' appears twice", where, f[i]));
      }
      if (!column.count("model")) throw MeasurementError(fmt::format("{}: no 'model' column", where));
      if (!column.count("cycles") && !column.count("ms"))
        throw MeasurementError(fmt::format("{}: no 'cycles' or 'ms' column", where));
      continue;
    }
    if (f.size() != column.size())
      throw MeasurementError(
          fmt::format("{}: {} fields where the header has {} columns", where, f.size(), column.size()));
    auto get = [&](const char* name) { return column.count(name) ? f[column.at(name)] : std::string(); };
    Measurement m;
    m.where = where;
    if (get("model").empty()) throw MeasurementError(fmt::format("{}: missing value of 'model'", where));
    m.model = resolve_model(get("model"), dir);
    m.layer = get("layer");
    const std::string cycles = get("cycles"), ms = get("ms");
    if (cycles.empty() == ms.empty())
      throw MeasurementError(fmt::format(
          "{}: {}", where,
          cycles.empty() ? "missing value: give 'cycles' or 'ms'" : "give 'cycles' or 'ms', not both"));
    const std::string& text = cycles.empty() ? ms : cycles;
    m.ms = cycles.empty();
    char* end = nullptr;
    errno = 0;
    m.value = std::strtod(text.c_str(), &end);
    if (end == text.c_str() || *end != '\0' || errno != 0 || !(m.value > 0))
      throw MeasurementError(
          fmt::format("{}: {} '{}' is not a positive number", where, m.ms ? "ms" : "cycles", text));
    if (!get("precision").empty()) m.precision = get("precision");
    const std::string batch = get("batch");
    if (!batch.empty()) {
      errno = 0;
      const long long b = std::strtoll(batch.c_str(), &end, 10);
      if (end == batch.c_str() || *end != '\0' || errno != 0 || b < 1)
        throw MeasurementError(fmt::format("{}: batch '{}' is not a positive integer", where, batch));
      m.batch = b;
    }
    std::string shapes = get("input_shape");
    for (size_t start = 0; !shapes.empty() && start <= shapes.size();) {
      const size_t semi = shapes.find(';', start);
      const std::string one =
          trim(shapes.substr(start, semi == std::string::npos ? std::string::npos : semi - start));
      if (!one.empty()) m.input_shapes.push_back(one);
      if (semi == std::string::npos) break;
      start = semi + 1;
    }
    rows.push_back(std::move(m));
  }
  if (column.empty()) throw MeasurementError(fmt::format("{}: empty file: expected a header line", path));
  if (rows.empty())
    throw MeasurementError(fmt::format("{}:{}: no measurements after the header", path, number));
  return rows;
}

}  // namespace npusim::sim::calibrate
