#include "sim/sweep/sweep_runner.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "isa/json_text.h"

namespace npusim::sim {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr const char* kResultsJsonl = "results.jsonl";
constexpr const char* kResultsCsv = "results.csv";
constexpr const char* kPlanJson = "plan.json";

// ---- JSON and CSV text -------------------------------------------------------------------------


// A value as JSON: a number or boolean when its text is one, a string otherwise. Swept values and
// report figures keep the exact text they were written with, so reruns and merges are byte-identical.
std::string json_value(const std::string& s) {
  if (s == "true" || s == "false") return s;
  if (!s.empty() && (std::isdigit(static_cast<unsigned char>(s[0])) || s[0] == '-')) {
    char* end = nullptr;
    errno = 0;
    const double d = std::strtod(s.c_str(), &end);
    const bool hex = s.find_first_of("xX") != std::string::npos;
    if (end && *end == '\0' && errno == 0 && std::isfinite(d) && !hex) return s;
  }
  return json_string(s);
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string o = "\"";
  for (char c : s) o += c == '"' ? std::string("\"\"") : std::string(1, c);
  return o + "\"";
}

// Writes `text` to `path` through a temporary file and a rename, so readers never see half a file.
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

// Appends one line with a single write(2) on an O_APPEND descriptor: a kill never leaves half a row
// in the middle of the file (at worst a torn last line, which readers skip).
class AppendFile {
 public:
  explicit AppendFile(const std::string& path) : path_(path) {
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd_ < 0) throw std::runtime_error("cannot write '" + path + "': " + std::strerror(errno));
    // A torn last line (a kill in the middle of a write) must not swallow the next row.
    char last = '\n';
    const off_t size = ::lseek(fd_, 0, SEEK_END);
    if (size > 0 && ::pread(fd_, &last, 1, size - 1) == 1 && last != '\n') append("");
  }
  ~AppendFile() {
    if (fd_ >= 0) ::close(fd_);
  }
  AppendFile(const AppendFile&) = delete;
  AppendFile& operator=(const AppendFile&) = delete;
  void append(const std::string& line) {
    const std::string text = line + "\n";
    if (::write(fd_, text.data(), text.size()) != static_cast<ssize_t>(text.size()))
      throw std::runtime_error("cannot append to '" + path_ + "': " + std::strerror(errno));
  }

 private:
  std::string path_;
  int fd_ = -1;
};

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

// The last few non-empty lines of a log, as one line: what a failed point's `error` column shows.
std::string tail_message(const std::string& log_path) {
  std::vector<std::string> lines;
  for (std::string& l : lines_of(read_text(log_path))) {
    while (!l.empty() && (l.back() == '\r' || l.back() == ' ')) l.pop_back();
    const size_t cr = l.rfind('\r');  // progress bars redraw with carriage returns
    if (cr != std::string::npos) l = l.substr(cr + 1);
    if (!l.empty()) lines.push_back(l);
  }
  std::string m;
  const size_t from = lines.size() > 3 ? lines.size() - 3 : 0;
  for (size_t i = from; i < lines.size(); ++i) m += (m.empty() ? "" : " | ") + lines[i];
  if (m.size() > 600) m = m.substr(0, 597) + "...";
  return m;
}

std::string format_duration(double s) {
  if (!std::isfinite(s) || s < 0) return "--";
  const int64_t t = static_cast<int64_t>(s + 0.5);
  if (t >= 3600) return fmt::format("{}h{:02}m{:02}s", t / 3600, t / 60 % 60, t % 60);
  if (t >= 60) return fmt::format("{}m{:02}s", t / 60, t % 60);
  return fmt::format("{}s", t);
}

// ---- reading rows back -------------------------------------------------------------------------

struct StoredRow {
  std::string status;
  int exit_code = 0;
  std::string error;
  std::map<std::string, std::string> metrics;
  std::string report;
};

// Reads every row in `files` by id. A later row replaces an earlier one, except that a failed row
// never replaces an ok one. Torn or foreign lines are skipped.
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

// Every file that may hold rows: the main results and each shard's.
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

// The plan as merge needs it: columns and, per point, the values and derived sizes.
struct Plan {
  std::vector<std::string> columns;
  std::vector<ResultRow> points;  // status empty
};

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

// Rewrites results.jsonl and results.csv from every stored row, sorted by index. Returns the summary.
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

// An exclusive lock on the output folder for the lifetime of the object (one local run or merge at a
// time; shards each write their own file and do not take it).
class DirLock {
 public:
  explicit DirLock(const std::string& out_dir) {
    const std::string path = (fs::path(out_dir) / ".lock").string();
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) throw std::runtime_error("cannot create '" + path + "': " + std::strerror(errno));
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0)
      throw std::runtime_error("another sweep or merge is writing '" + out_dir + "' (lock " + path + ")");
  }
  ~DirLock() { ::close(fd_); }
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;

 private:
  int fd_ = -1;
};

// ---- processes ---------------------------------------------------------------------------------

// Starts `argv` with stdout and stderr into `log_path`. The child dies with the sweep process, so a
// killed sweep leaves no simulations behind.
pid_t spawn(const std::vector<std::string>& argv, const std::string& log_path, const std::string& cwd = "") {
  std::vector<char*> cargv;
  for (const std::string& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error(std::string("fork failed: ") + std::strerror(errno));
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);  // the sweep died before prctl took effect
    const int fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int null_in = ::open("/dev/null", O_RDONLY);
    if (fd < 0 || null_in < 0) _exit(126);
    dup2(null_in, 0);
    dup2(fd, 1);
    dup2(fd, 2);
    if (!cwd.empty() && chdir(cwd.c_str()) != 0) _exit(126);
    setenv("SYSTEMC_DISABLE_COPYRIGHT_MESSAGE", "1", 1);
    execv(cargv[0], cargv.data());
    const std::string m = std::string("cannot execute ") + cargv[0] + ": " + std::strerror(errno) + "\n";
    if (::write(2, m.data(), m.size()) < 0) _exit(127);
    _exit(127);
  }
  return pid;
}

std::string describe_status(int status) {
  if (WIFEXITED(status)) return fmt::format("exit {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status))
    return fmt::format("killed by signal {} ({})", WTERMSIG(status), strsignal(WTERMSIG(status)));
  return "stopped";
}

// Runs a shell command to completion (model preparation); returns its wait status.
int run_shell(const std::string& command, const std::string& cwd, const std::string& log_path) {
  const pid_t pid = spawn({"/bin/sh", "-c", command}, log_path, cwd);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

// ---- headline figures from a report --------------------------------------------------------------

YAML::Node at_path(const YAML::Node& root, const std::string& path) {
  YAML::Node n = root;
  size_t from = 0;
  while (from <= path.size()) {
    const size_t dot = path.find('.', from);
    const std::string part = path.substr(from, dot == std::string::npos ? std::string::npos : dot - from);
    if (!n.IsMap()) return YAML::Node();
    const YAML::Node child = n[part];
    if (!child) return YAML::Node();
    n.reset(child);
    if (dot == std::string::npos) break;
    from = dot + 1;
  }
  return n;
}

// A figure as the results table shows it: integers as they are, other numbers to 10 significant digits
// (82.708653, not the 82.70865300000001 of the report's shortest round-trip form); text unchanged.
std::string tidy_number(const std::string& s) {
  if (s.find_first_of(".eE") == std::string::npos) return s;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size()) return s;
  return fmt::format("{:.10g}", v);
}

// Reads the headline figures; throws std::runtime_error when the report is not a report.
std::map<std::string, std::string> read_metrics(const std::string& report_path) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(report_path);
  } catch (const YAML::Exception& e) {
    throw std::runtime_error("the report " + report_path + " is unreadable: " + e.msg);
  }
  if (!root.IsMap() || !root["total_cycles"])
    throw std::runtime_error("the report " + report_path + " has no total_cycles");
  std::map<std::string, std::string> m;
  for (const MetricColumn& c : metric_columns()) {
    if (std::string(c.path) == "#layers") {
      // The program's layers: the model's nodes fused into them (placement "fused") are not layers.
      const YAML::Node l = root["layers"];
      if (!l || !l.IsSequence()) continue;
      size_t n = 0;
      for (const auto& layer : l) n += !(layer["placement"] && layer["placement"].Scalar() == "fused");
      m[c.column] = std::to_string(n);
      continue;
    }
    if (std::string(c.path) == "#sum:layers.compute_cycles") {
      // The matrix unit's own cycles (fill and drain included), summed over the layers.
      const YAML::Node l = root["layers"];
      if (!l || !l.IsSequence()) continue;
      uint64_t sum = 0;
      for (const auto& layer : l)
        if (layer["compute_cycles"]) sum += layer["compute_cycles"].as<uint64_t>();
      m[c.column] = std::to_string(sum);
      continue;
    }
    if (std::string(c.path) == "#peak_sram") {
      // The largest scratchpad footprint the compiler gave any layer (layers[].mapping.sram_bytes, its
      // slots in the input, weight and accumulator scratchpads together): the SRAM the program needs at
      // its peak.
      const YAML::Node l = root["layers"];
      if (!l || !l.IsSequence()) continue;
      uint64_t peak = 0;
      bool any = false;
      for (const auto& layer : l) {
        const YAML::Node b = at_path(layer, "mapping.sram_bytes");
        if (!b || !b.IsMap()) continue;
        uint64_t sum = 0;
        for (const auto& kv : b) sum += kv.second.as<uint64_t>();
        peak = std::max(peak, sum);
        any = true;
      }
      if (any) m[c.column] = std::to_string(peak);
      continue;
    }
    if (std::string(c.path) == "#energy_delay") {
      // Energy-delay product: energy per inference x latency, in mJ x ms.
      const YAML::Node e = at_path(root, "energy.total_mj"), t = root["latency_ms"];
      if (e && e.IsScalar() && t && t.IsScalar())
        m[c.column] = tidy_number(fmt::format("{}", e.as<double>() * t.as<double>()));
      continue;
    }
    const YAML::Node n = at_path(root, c.path);
    if (n && n.IsScalar()) m[c.column] = tidy_number(n.Scalar());
  }
  return m;
}

// ---- progress ----------------------------------------------------------------------------------

class Progress {
 public:
  Progress(std::ostream& log, const SweepRunOptions& o, size_t total, size_t skipped)
      : log_(log),
        bar_(o.progress_bar),
        interval_(o.progress_interval_s),
        total_(total),
        skipped_(skipped),
        start_(Clock::now()),
        points_start_(start_),
        last_(start_) {}

  void finished(bool ok) { (ok ? ok_ : failed_)++; }
  // The points start now: model preparation (an export can take a minute) is over and must not count
  // in the per-point rate the ETA is estimated from.
  void points_started() { points_start_ = Clock::now(); }
  void set_running(size_t n) { running_ = n; }

  // A message that must not be overdrawn by the bar (a failed point).
  void note(const std::string& line) {
    if (bar_) log_ << "\r" << std::string(width_, ' ') << "\r";
    log_ << line << "\n";
    drawn_ = false;
    tick(true);
  }

  void tick(bool force = false) {
    const auto now = Clock::now();
    const double since = std::chrono::duration<double>(now - last_).count();
    if (bar_) {
      if (!force && drawn_ && since < 0.25) return;
    } else if (!force && since < interval_) {
      return;
    }
    last_ = now;
    const std::string text = line();
    if (bar_) {
      log_ << "\r" << text << std::string(width_ > text.size() ? width_ - text.size() : 0, ' ') << std::flush;
      width_ = text.size();
      drawn_ = true;
    } else {
      log_ << text << "\n" << std::flush;
    }
  }

  void end() {
    if (bar_ && drawn_) log_ << "\r" << line() << "\n" << std::flush;
    if (!bar_) tick(true);
  }

 private:
  std::string line() const {
    const double elapsed = std::chrono::duration<double>(Clock::now() - start_).count();
    const size_t done_now = ok_ + failed_;
    const size_t done = skipped_ + done_now;
    const size_t remaining = total_ > done ? total_ - done : 0;
    const double points_elapsed = std::chrono::duration<double>(Clock::now() - points_start_).count();
    const double eta = done_now ? points_elapsed / done_now * remaining : NAN;
    const std::string counts =
        fmt::format("{}/{} done, {} failed, {} running", done, total_, failed_, running_);
    const std::string times = fmt::format("elapsed {}, ETA {}", format_duration(elapsed),
                                          remaining ? format_duration(eta) : std::string("0s"));
    if (!bar_) return "sweep: " + counts + ", " + times;
    constexpr size_t kWidth = 24;
    const size_t fill = total_ ? done * kWidth / total_ : kWidth;
    return "[" + std::string(fill, '#') + std::string(kWidth - fill, '.') + "] " + counts + " | " + times;
  }

  std::ostream& log_;
  bool bar_;
  double interval_;
  size_t total_, skipped_;
  size_t ok_ = 0, failed_ = 0, running_ = 0;
  Clock::time_point start_, points_start_, last_;
  size_t width_ = 0;
  bool drawn_ = false;
};

// The signal that asked the sweep to stop (SIGINT/SIGTERM), 0 while running.
volatile sig_atomic_t g_stop_signal = 0;
void on_stop(int sig) { g_stop_signal = sig; }

}  // namespace

// ---- public ------------------------------------------------------------------------------------

const std::vector<MetricColumn>& metric_columns() {
  static const std::vector<MetricColumn> kColumns = {
      {"total_cycles", "total_cycles"},
      {"latency_ms", "latency_ms"},
      {"frequency_mhz", "frequency_mhz"},
      {"macs", "macs"},
      {"array_utilization", "array_utilization"},
      {"precision_plan", "precision.plan"},
      {"plan_utilization", "precision.utilization"},
      {"bound_cycles", "bound_cycles"},
      {"efficiency", "efficiency"},
      {"compute_cycles", "breakdown.compute"},
      {"memory_cycles", "breakdown.memory"},
      {"scheduling_cycles", "breakdown.scheduling"},
      {"host_cycles", "breakdown.host"},
      {"matrix_cycles", "#sum:layers.compute_cycles"},
      {"dram_bytes_read", "dram.bytes_read"},
      {"dram_bytes_written", "dram.bytes_written"},
      {"dram_bandwidth_gbps", "dram.avg_bandwidth_gbps"},
      {"sram_peak_bytes", "#peak_sram"},
      {"energy_mj", "energy.total_mj"},
      {"average_power_w", "energy.average_power_w"},
      {"peak_power_w", "energy.peak_power_w"},
      {"tops_per_w", "energy.tops_per_w"},
      {"energy_delay_mj_ms", "#energy_delay"},
      {"area_mm2", "area.total_mm2"},
      {"instructions", "sim.instructions"},
      {"layers", "#layers"},
      // With `run_args: [--pipeline, PIPE.yaml]` (docs/e2e.md); empty otherwise.
      {"e2e_latency_ms", "e2e.latency_ms"},
      {"e2e_npu_share", "e2e.npu_share"},
      {"stream_throughput_fps", "e2e.stream.throughput_fps"},
      {"stream_latency_p99_ms", "e2e.stream.latency_p99_ms"},
  };
  return kColumns;
}

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
  std::string s = fmt::format("{{\"index\": {}, \"id\": {}", r.index, json_string(r.id));
  for (size_t i = 0; i < columns.size(); ++i)
    s += ", " + json_string(columns[i]) + ": " + json_value(i < r.values.size() ? r.values[i].second : "");
  s += fmt::format(", \"status\": {}, \"exit_code\": {}, \"error\": {}, \"array_pes\": {}, \"sram_kib\": {}",
                   json_string(r.status), r.exit_code, json_string(r.error), r.array_pes, r.sram_kib);
  for (const MetricColumn& m : metric_columns()) {
    auto it = r.metrics.find(m.column);
    s += fmt::format(", \"{}\": {}", m.column, it == r.metrics.end() ? "null" : json_value(it->second));
  }
  return s + ", \"report\": " + (r.report.empty() ? "null" : json_string(r.report)) + "}";
}

std::string self_exe() {
  std::error_code ec;
  const fs::path p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("/proc/self/exe") : p.string();
}

void write_plan(const std::string& out_dir, const SweepSpec& spec, const std::vector<SweepPoint>& points) {
  std::string s = "{\n  \"sweep\": " + json_string(fs::absolute(spec.path).lexically_normal().string()) +
                  ",\n  \"name\": " + json_string(spec.name) + ",\n  \"base\": " + json_string(spec.base) +
                  ",\n  \"columns\": [";
  const std::vector<std::string> cols = spec.column_keys();
  for (size_t i = 0; i < cols.size(); ++i) s += (i ? ", " : "") + json_string(cols[i]);
  s += "],\n  \"points\": [";
  for (size_t i = 0; i < points.size(); ++i) {
    const SweepPoint& p = points[i];
    s += fmt::format("{}\n    {{\"index\": {}, \"id\": {}, \"values\": [", i ? "," : "", p.index,
                     json_string(p.id));
    for (size_t k = 0; k < p.values.size(); ++k) s += (k ? ", " : "") + json_string(p.values[k].second);
    s += fmt::format("], \"array_pes\": {}, \"sram_kib\": {}, \"command\": [", p.array_pes, p.sram_kib);
    const std::vector<std::string> cmd = p.run_command(spec.base);
    for (size_t k = 0; k < cmd.size(); ++k) s += (k ? ", " : "") + json_string(cmd[k]);
    s += "]}";
  }
  s += "\n  ]\n}\n";
  fs::create_directories(out_dir);
  write_atomically((fs::path(out_dir) / kPlanJson).string(), s);
}

void print_points(std::ostream& out, const SweepSpec& spec, const std::vector<SweepPoint>& points) {
  const std::vector<std::string> keys = spec.column_keys();
  const bool swept_config = std::find(keys.begin(), keys.end(), "config") != keys.end();
  out << fmt::format("# sweep '{}': {} points ({}), base config: {}\n", spec.name, points.size(),
                     spec.zip ? "zipped axes" : "cartesian product",
                     swept_config ? "the config axis"
                         : spec.base.empty() ? "built-in" : spec.base);
  for (const SweepPoint& p : points) {
    std::string v;
    for (const auto& [k, val] : p.values) v += (v.empty() ? "" : " ") + k + "=" + val;
    out << fmt::format("{:4} {} {}\n", p.index, p.id, v);
    std::string cmd = "       npusim";
    for (const std::string& a : p.run_command(spec.base)) cmd += " " + a;
    out << cmd << "\n";
    if (!p.config_error.empty()) out << "       (will fail: " << p.config_error << ")\n";
  }
}

SweepSummary run_sweep_points(const SweepSpec& spec, const std::vector<SweepPoint>& points,
                              const SweepRunOptions& o, std::ostream& log) {
  const fs::path dir = o.out_dir;
  fs::create_directories(dir / "points");
  const bool sharded = o.shard_count > 1;
  std::unique_ptr<DirLock> lock;
  if (!sharded) lock = std::make_unique<DirLock>(dir.string());
  write_plan(dir.string(), spec, points);
  const Plan plan = plan_of(spec, points);
  const std::vector<std::string> columns = spec.column_keys();

  // Points already recorded (by any earlier run or shard) are skipped.
  const std::map<std::string, StoredRow> done = read_rows(row_files(dir.string()));
  std::vector<const SweepPoint*> todo;
  SweepSummary summary;
  for (const SweepPoint& p : points) {
    if (static_cast<int>(p.index % o.shard_count) != o.shard_index) continue;
    ++summary.total;
    auto it = done.find(p.id);
    if (it != done.end() && (it->second.status == "ok" || !o.retry_failed)) {
      ++summary.skipped;
      continue;
    }
    todo.push_back(&p);
  }

  std::string rows_path = (dir / kResultsJsonl).string();
  if (sharded) {
    fs::create_directories(dir / "shards");
    rows_path = (dir / "shards" / fmt::format("shard-{}-of-{}.jsonl", o.shard_index, o.shard_count)).string();
  } else {
    write_final(dir.string(), plan);  // a consistent CSV header and sorted rows before appending
  }
  AppendFile rows_out(rows_path);
  std::unique_ptr<AppendFile> csv_out;
  if (!sharded) csv_out = std::make_unique<AppendFile>((dir / kResultsCsv).string());
  AppendFile attempts((dir / "attempts.log").string());

  const std::string exe = o.exe.empty() ? self_exe() : o.exe;
  Progress progress(log, o, summary.total, summary.skipped);
  progress.tick(true);

  auto record = [&](const SweepPoint& p, const std::string& status, int exit_code, const std::string& error,
                    std::map<std::string, std::string> metrics, const std::string& report) {
    ResultRow r;
    r.index = p.index;
    r.id = p.id;
    r.values = p.values;
    r.status = status;
    r.exit_code = exit_code;
    r.error = error;
    r.array_pes = p.array_pes;
    r.sram_kib = p.sram_kib;
    r.metrics = std::move(metrics);
    r.report = report;
    rows_out.append(row_json(r, columns));
    if (csv_out) csv_out->append(row_csv(r, columns));
    const bool ok = status == "ok";
    (ok ? summary.ok : summary.failed)++;
    progress.finished(ok);
    if (!ok) {
      std::string v;
      for (const auto& [k, val] : p.values) v += (v.empty() ? "" : " ") + k + "=" + val;
      progress.note(fmt::format("point {} ({}) failed: {}", p.index, v, error));
    }
  };

  // Models that have to be prepared first (once per command, in the sweep file's folder).
  std::map<std::string, std::string> prepare_error;  // prepare command -> error ("" = ok)
  const std::string spec_dir = fs::absolute(spec.path).parent_path().string();
  for (const SweepPoint* p : todo) {
    if (p->prepare.empty() || prepare_error.count(p->prepare) || fs::exists(p->model)) continue;
    const std::string plog = (dir / ("prepare-" + stable_hash(p->prepare) + ".log")).string();
    progress.note("preparing " + p->model + ": " + p->prepare);
    const int st = run_shell(p->prepare, spec_dir, plog);
    std::string err;
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
      err = "prepare command failed (" + describe_status(st) + "): " + tail_message(plog);
    else if (!fs::exists(p->model))
      err = "prepare command did not create " + p->model;
    prepare_error[p->prepare] = err;
  }
  progress.points_started();

  struct Running {
    const SweepPoint* point;
    Clock::time_point start;
    bool timed_out = false;
  };
  std::map<pid_t, Running> running;
  g_stop_signal = 0;
  struct sigaction sa {
  }, old_int{}, old_term{};
  sa.sa_handler = on_stop;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);

  size_t next = 0;
  const int jobs = std::max(1, o.jobs);
  bool stopping = false;
  while ((!g_stop_signal && next < todo.size()) || !running.empty()) {
    if (g_stop_signal && !stopping) {
      stopping = true;  // the running points are lost, not recorded: they run again on the next run
      for (auto& [pid, r] : running) kill(pid, SIGTERM);
    }
    while (!g_stop_signal && next < todo.size() && static_cast<int>(running.size()) < jobs) {
      const SweepPoint& p = *todo[next++];
      const fs::path pdir = dir / "points" / p.id;
      const std::string rel_report = "points/" + p.id + "/report.json";
      if (!p.config_error.empty()) {
        record(p, "failed", 2, p.config_error, {}, "");
        continue;
      }
      if (!p.prepare.empty() && !prepare_error[p.prepare].empty()) {
        record(p, "failed", 1, prepare_error[p.prepare], {}, "");
        continue;
      }
      fs::create_directories(pdir);
      fs::remove(pdir / "report.json");
      std::vector<std::string> argv = {exe};
      for (const std::string& a : p.run_command(spec.base)) argv.push_back(a);
      argv.insert(argv.end(), {"--report", (pdir / "report.json").string(), "-q"});
      if (spec.trace_csv) argv.insert(argv.end(), {"--trace-csv", (pdir / "trace.csv").string()});
      attempts.append(fmt::format("start {} {}", p.index, p.id));
      const pid_t pid = spawn(argv, (pdir / "log.txt").string());
      running[pid] = Running{&p, Clock::now()};
    }
    progress.set_running(running.size());
    if (running.empty()) continue;

    int status = 0;
    const pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid <= 0 || !running.count(pid)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      if (spec.timeout_s > 0) {
        for (auto& [rpid, r] : running) {
          if (!r.timed_out &&
              std::chrono::duration<double>(Clock::now() - r.start).count() > spec.timeout_s) {
            r.timed_out = true;
            kill(rpid, SIGKILL);
          }
        }
      }
      progress.tick();
      continue;
    }
    const Running r = running[pid];
    running.erase(pid);
    progress.set_running(running.size());
    const SweepPoint& p = *r.point;
    const fs::path pdir = dir / "points" / p.id;
    if (g_stop_signal) continue;  // interrupted: the point is not recorded and runs again next time
    const std::string rel_report = "points/" + p.id + "/report.json";
    if (r.timed_out) {
      record(p, "failed", -1, fmt::format("timed out after {} s (timeout_s)", spec.timeout_s), {}, "");
    } else if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
      try {
        record(p, "ok", 0, "", read_metrics((pdir / "report.json").string()), rel_report);
      } catch (const std::runtime_error& e) {
        record(p, "failed", 0, e.what(), {}, "");
      }
    } else {
      const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      std::string msg = tail_message((pdir / "log.txt").string());
      if (msg.empty()) msg = describe_status(status);
      record(p, "failed", code, msg, {}, "");
    }
    attempts.append(fmt::format("end {} {} {}", p.index, p.id, describe_status(status)));
  }
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  progress.end();
  if (g_stop_signal) {
    const int sig = g_stop_signal;
    if (!sharded) write_final(dir.string(), plan);
    throw std::runtime_error(fmt::format("interrupted by signal {}; {} points recorded, re-run to resume",
                                         sig, summary.ok + summary.failed + summary.skipped));
  }
  if (!sharded) {
    const SweepSummary all = write_final(dir.string(), plan);
    summary.missing = all.missing;
    summary.missing_indices = all.missing_indices;
    summary.failed_recorded = all.failed;
  } else {
    const std::map<std::string, StoredRow> rows = read_rows(row_files(dir.string()));
    for (const SweepPoint& p : points) {
      if (static_cast<int>(p.index % o.shard_count) != o.shard_index) continue;
      auto it = rows.find(p.id);
      if (it != rows.end() && it->second.status != "ok") ++summary.failed_recorded;
    }
  }
  return summary;
}

SweepSummary merge_results(const std::string& out_dir) {
  const Plan plan = read_plan(out_dir);
  DirLock lock(out_dir);
  SweepSummary s = write_final(out_dir, plan);
  s.failed_recorded = s.failed;
  return s;
}

namespace {

std::string shell_quote(const std::string& s) {
  std::string o = "'";
  for (char c : s) o += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return o + "'";
}

// Runs `argv` and returns (wait status, captured stdout+stderr).
std::pair<int, std::string> capture(const std::vector<std::string>& argv, const std::string& log_path) {
  const pid_t pid = spawn(argv, log_path);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return {status, read_text(log_path)};
}

std::string find_in_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::istringstream in(path ? path : "/usr/bin:/bin");
  for (std::string d; std::getline(in, d, ':');) {
    const fs::path p = fs::path(d.empty() ? "." : d) / name;
    if (access(p.c_str(), X_OK) == 0) return p.string();
  }
  return "";
}

}  // namespace

int submit_slurm(const SweepSpec& spec, const std::vector<SweepPoint>& points, const std::string& out_dir_arg,
                 const std::string& exe_arg, bool wait, std::ostream& out, std::ostream& err) {
  const std::string sbatch = find_in_path("sbatch");
  if (sbatch.empty()) {
    err << "npusim: error: --slurm needs sbatch, which is not on PATH (is Slurm installed and configured?)\n";
    return 1;
  }
  const fs::path dir = fs::absolute(out_dir_arg).lexically_normal();
  fs::create_directories(dir / "slurm");
  write_plan(dir.string(), spec, points);
  const std::string exe = exe_arg.empty() ? self_exe() : exe_arg;
  const SlurmSpec& s = spec.slurm;
  const int64_t tasks = std::max<int64_t>(
      1, std::min<int64_t>(static_cast<int64_t>(points.size()), s.tasks > 0 ? s.tasks : 16));
  const std::string sweep_path = fs::absolute(spec.path).lexically_normal().string();

  auto header = [&](const std::string& job, const std::string& log) {
    std::string h = "#!/bin/bash\n# Written by npusim sweep --slurm; submit again with sbatch.\n";
    h += "#SBATCH --job-name=" + job + "\n#SBATCH --output=" + log + "\n";
    if (!s.partition.empty()) h += "#SBATCH --partition=" + s.partition + "\n";
    if (!s.time.empty()) h += "#SBATCH --time=" + s.time + "\n";
    if (!s.mem.empty()) h += "#SBATCH --mem=" + s.mem + "\n";
    for (const std::string& e : s.extra) h += "#SBATCH " + e + "\n";
    return h;
  };
  const std::string job = "npusim-" + spec.name;
  std::string array = header(job, (dir / "slurm" / "task-%a.log").string());
  array += fmt::format("#SBATCH --array=0-{}\n#SBATCH --ntasks=1\n#SBATCH --cpus-per-task={}\n", tasks - 1,
                       s.cpus_per_task);
  array += "set -eu\n";
  array += fmt::format(
      "exec {} sweep {} -o {} --shard \"$SLURM_ARRAY_TASK_ID/{}\" -j {} --progress-interval 30\n",
      shell_quote(exe), shell_quote(sweep_path), shell_quote(dir.string()), tasks, s.cpus_per_task);
  std::string merge = header(job + "-merge", (dir / "slurm" / "merge.log").string());
  merge += "#SBATCH --ntasks=1\n#SBATCH --cpus-per-task=1\nset -eu\n";
  merge += fmt::format("exec {} sweep --merge {}\n", shell_quote(exe), shell_quote(dir.string()));
  const std::string array_path = (dir / "slurm" / "array.sbatch").string();
  const std::string merge_path = (dir / "slurm" / "merge.sbatch").string();
  write_atomically(array_path, array);
  write_atomically(merge_path, merge);

  auto [st, text] =
      capture({sbatch, "--parsable", array_path}, (dir / "slurm" / "sbatch-array.out").string());
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    err << "npusim: error: sbatch " << array_path << " failed (" << describe_status(st) << "): " << text;
    return 1;
  }
  const std::string array_id = text.substr(0, text.find_first_of(";\n"));
  out << fmt::format("submitted job array {} ({} tasks for {} points)\n", array_id, tasks, points.size());
  std::vector<std::string> margv = {sbatch, "--parsable", "--dependency=afterany:" + array_id};
  if (wait) margv.push_back("--wait");
  margv.push_back(merge_path);
  out << fmt::format("merge job depends on it; results will be in {}/{}\n", dir.string(), kResultsCsv)
      << std::flush;
  auto [mst, mtext] = capture(margv, (dir / "slurm" / "sbatch-merge.out").string());
  const std::string merge_id = mtext.substr(0, mtext.find_first_of(";\n"));
  if (!WIFEXITED(mst) || WEXITSTATUS(mst) != 0) {
    err << "npusim: error: the merge job " << (wait ? merge_id + " " : "") << "failed ("
        << describe_status(mst) << "): " << mtext << "see " << (dir / "slurm" / "merge.log").string() << "\n";
    return 1;
  }
  out << "merge job " << merge_id << (wait ? " finished" : " submitted") << "\n";
  return 0;
}

}  // namespace npusim::sim
