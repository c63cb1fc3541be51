#include "sim/sweep/result_store.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "isa/json_text.h"
#include "sim/sweep/report_figures.h"
#include "traces/sink.h"

namespace npusim::sim {
namespace {

namespace fs = std::filesystem;

// A value as JSON: a number or boolean when its text is one, a string otherwise. Swept values and
// report figures keep the exact text they were written with, so reruns and merges are byte-identical.
void json_value(JsonWriter& w, const std::string& s) {
  if (s == "true" || s == "false") {
    w.raw(s);
    return;
  }
  if (!s.empty() && (std::isdigit(static_cast<unsigned char>(s[0])) || s[0] == '-')) {
    char* end = nullptr;
    errno = 0;
    const double d = std::strtod(s.c_str(), &end);
    const bool hex = s.find_first_of("xX") != std::string::npos;
    if (end && *end == '\0' && errno == 0 && std::isfinite(d) && !hex) {
      w.raw(s);
      return;
    }
  }
  w.value(s);
}

// A CSV field as the trace and layer tables write them (traces/sink.h).
std::string csv_field(const std::string& s) {
  std::string o;
  traces::append_csv_field(o, s);
  return o;
}

}  // namespace

namespace sweep_detail {

void write_atomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp." + std::to_string(getpid());
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f || !(f << text) || !f.flush()) throw std::runtime_error("cannot write '" + tmp + "'");
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) throw std::runtime_error("cannot write '" + path + "': " + ec.message());
}

AppendFile::AppendFile(const std::string& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) throw std::runtime_error("cannot write '" + path + "': " + std::strerror(errno));
  // A torn last line (a kill in the middle of a write) must not swallow the next row.
  char last = '\n';
  const off_t size = ::lseek(fd_, 0, SEEK_END);
  if (size > 0 && ::pread(fd_, &last, 1, size - 1) == 1 && last != '\n') append("");
}

AppendFile::~AppendFile() {
  if (fd_ >= 0) ::close(fd_);
}

void AppendFile::append(const std::string& line) {
  const std::string text = line + "\n";
  if (::write(fd_, text.data(), text.size()) != static_cast<ssize_t>(text.size()))
    throw std::runtime_error("cannot append to '" + path_ + "': " + std::strerror(errno));
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

std::map<std::string, StoredRow> read_rows(const std::vector<std::string>& files) {
  std::map<std::string, StoredRow> rows;
  for (const std::string& f : files) {
    for (const std::string& line : lines_of(read_text(f))) {
      if (line.empty() || line.front() != '{' || line.back() != '}') continue;
      try {
        const YAML::Node n = YAML::Load(line);
        if (!n.IsMap() || !n["id"] || !n["status"]) continue;
        StoredRow r;
        r.status = n["status"].Scalar();
        if (r.status != "ok" && r.status != "failed") continue;
        if (n["exit_code"] && n["exit_code"].IsScalar()) r.exit_code = n["exit_code"].as<int>();
        if (n["error"] && n["error"].IsScalar()) r.error = n["error"].Scalar();
        if (n["report"] && n["report"].IsScalar()) r.report = n["report"].Scalar();
        for (const MetricColumn& m : metric_columns()) {
          const YAML::Node v = n[m.column];
          if (v && v.IsScalar() && !(v.Tag() == "?" && (v.Scalar() == "null" || v.Scalar() == "~")))
            r.metrics[m.column] = v.Scalar();
        }
        const std::string id = n["id"].Scalar();
        auto it = rows.find(id);
        if (it != rows.end() && it->second.status == "ok" && r.status != "ok") continue;
        rows[id] = std::move(r);
      } catch (const YAML::Exception&) {
        continue;
      }
    }
  }
  return rows;
}

std::vector<std::string> row_files(const std::string& out_dir) {
  std::vector<std::string> files;
  const fs::path main = fs::path(out_dir) / kResultsJsonl;
  if (fs::exists(main)) files.push_back(main.string());
  std::error_code ec;
  std::vector<std::string> shards;
  for (fs::directory_iterator it(fs::path(out_dir) / "shards", ec), end; !ec && it != end; it.increment(ec))
    if (it->path().extension() == ".jsonl") shards.push_back(it->path().string());
  std::sort(shards.begin(), shards.end());
  files.insert(files.end(), shards.begin(), shards.end());
  return files;
}

Plan plan_of(const SweepSpec& spec, const std::vector<SweepPoint>& points) {
  Plan p;
  p.columns = spec.column_keys();
  for (const SweepPoint& s : points) {
    ResultRow r;
    r.index = s.index;
    r.id = s.id;
    r.values = s.values;
    r.array_pes = s.array_pes;
    r.sram_kib = s.sram_kib;
    p.points.push_back(std::move(r));
  }
  return p;
}

Plan read_plan(const std::string& out_dir) {
  const std::string path = (fs::path(out_dir) / kPlanJson).string();
  if (!fs::exists(path))
    throw std::runtime_error(path + ": no such file; is '" + out_dir + "' a sweep's output folder?");
  Plan p;
  try {
    const YAML::Node n = YAML::LoadFile(path);
    for (const auto& c : n["columns"]) p.columns.push_back(c.Scalar());
    for (const auto& e : n["points"]) {
      ResultRow r;
      r.index = e["index"].as<size_t>();
      r.id = e["id"].Scalar();
      r.array_pes = e["array_pes"].as<int64_t>();
      r.sram_kib = e["sram_kib"].as<int64_t>();
      const YAML::Node v = e["values"];
      for (size_t i = 0; i < p.columns.size(); ++i) r.values.emplace_back(p.columns[i], v[i].Scalar());
      p.points.push_back(std::move(r));
    }
  } catch (const YAML::Exception& e) {
    throw std::runtime_error(path + ": not a sweep plan (" + e.msg + ")");
  }
  return p;
}

SweepSummary write_final(const std::string& out_dir, const Plan& plan) {
  const std::map<std::string, StoredRow> rows = read_rows(row_files(out_dir));
  std::string jsonl, csv = csv_header(plan.columns) + "\n";
  SweepSummary s;
  s.total = plan.points.size();
  for (const ResultRow& p : plan.points) {
    auto it = rows.find(p.id);
    if (it == rows.end()) {
      ++s.missing;
      s.missing_indices.push_back(p.index);
      continue;
    }
    ResultRow r = p;
    r.status = it->second.status;
    r.exit_code = it->second.exit_code;
    r.error = it->second.error;
    r.metrics = it->second.metrics;
    r.report = it->second.report;
    (r.status == "ok" ? s.ok : s.failed)++;
    jsonl += row_json(r, plan.columns) + "\n";
    csv += row_csv(r, plan.columns) + "\n";
  }
  write_atomically((fs::path(out_dir) / kResultsJsonl).string(), jsonl);
  write_atomically((fs::path(out_dir) / kResultsCsv).string(), csv);
  return s;
}

DirLock::DirLock(const std::string& out_dir) {
  const std::string path = (fs::path(out_dir) / ".lock").string();
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) throw std::runtime_error("cannot create '" + path + "': " + std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0)
    throw std::runtime_error("another sweep or merge is writing '" + out_dir + "' (lock " + path + ")");
}

DirLock::~DirLock() { ::close(fd_); }

}  // namespace sweep_detail

using namespace sweep_detail;

std::string csv_header(const std::vector<std::string>& columns) {
  std::string h = "index,id";
  for (const std::string& c : columns) h += "," + csv_field(c);
  h += ",status,exit_code,error,array_pes,sram_kib";
  for (const MetricColumn& m : metric_columns()) h += std::string(",") + m.column;
  return h + ",report";
}

std::string row_csv(const ResultRow& r, const std::vector<std::string>& columns) {
  std::string s = fmt::format("{},{}", r.index, r.id);
  for (size_t i = 0; i < columns.size(); ++i)
    s += "," + csv_field(i < r.values.size() ? r.values[i].second : "");
  s += fmt::format(",{},{},{},{},{}", r.status, r.exit_code, csv_field(r.error), r.array_pes, r.sram_kib);
  for (const MetricColumn& m : metric_columns()) {
    auto it = r.metrics.find(m.column);
    s += "," + (it == r.metrics.end() ? std::string() : csv_field(it->second));
  }
  return s + "," + csv_field(r.report);
}

std::string row_json(const ResultRow& r, const std::vector<std::string>& columns) {
  std::string s;
  JsonWriter w(s);
  w.object().member("index", r.index).member("id", r.id);
  for (size_t i = 0; i < columns.size(); ++i)
    json_value(w.key(columns[i]), i < r.values.size() ? r.values[i].second : "");
  w.member("status", r.status).member("exit_code", r.exit_code).member("error", r.error);
  w.member("array_pes", r.array_pes).member("sram_kib", r.sram_kib);
  for (const MetricColumn& m : metric_columns()) {
    auto it = r.metrics.find(m.column);
    if (it == r.metrics.end()) {
      w.key(m.column).null();
    } else {
      json_value(w.key(m.column), it->second);
    }
  }
  if (r.report.empty()) {
    w.key("report").null();
  } else {
    w.member("report", r.report);
  }
  w.end();
  return s;
}

void write_plan(const std::string& out_dir, const SweepSpec& spec, const std::vector<SweepPoint>& points) {
  using Layout = JsonWriter::Layout;
  std::string s;
  JsonWriter w(s);
  w.object(Layout::kLines).member("sweep", fs::absolute(spec.path).lexically_normal().string());
  w.member("name", spec.name).member("base", spec.base).key("columns").array();
  for (const std::string& c : spec.column_keys()) w.value(c);
  w.end().key("points").array(Layout::kLines);
  for (const SweepPoint& p : points) {
    w.object().member("index", p.index).member("id", p.id).key("values").array();
    for (const auto& v : p.values) w.value(v.second);
    w.end().member("array_pes", p.array_pes).member("sram_kib", p.sram_kib).key("command").array();
    for (const std::string& arg : p.run_command(spec.base)) w.value(arg);
    w.end().end();
  }
  w.end().end();
  s += '\n';
  fs::create_directories(out_dir);
  write_atomically((fs::path(out_dir) / kPlanJson).string(), s);
}

SweepSummary merge_results(const std::string& out_dir) {
  const Plan plan = read_plan(out_dir);
  DirLock lock(out_dir);
  SweepSummary s = write_final(out_dir, plan);
  s.failed_recorded = s.failed;
  return s;
}

}  // namespace npusim::sim
