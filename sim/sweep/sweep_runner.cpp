#include "sim/sweep/sweep_runner.h"

#include <fmt/format.h>
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <thread>

#include "sim/sweep/child_process.h"
#include "sim/sweep/progress.h"
#include "sim/sweep/report_figures.h"
#include "sim/sweep/result_store.h"

namespace npusim::sim {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// The signal that asked the sweep to stop (SIGINT/SIGTERM), 0 while running.
volatile sig_atomic_t g_stop_signal = 0;
void on_stop(int sig) { g_stop_signal = sig; }

}  // namespace

using namespace sweep_detail;

void print_points(std::ostream& out, const SweepSpec& spec, const std::vector<SweepPoint>& points) {
  const std::vector<std::string> keys = spec.column_keys();
  const bool swept_config = std::find(keys.begin(), keys.end(), "config") != keys.end();
  out << fmt::format("# sweep '{}': {} points ({}), base config: {}\n", spec.name, points.size(),
                     spec.zip ? "zipped axes" : "cartesian product",
                     swept_config        ? "the config axis"
                     : spec.base.empty() ? "built-in"
                                         : spec.base);
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
  Progress progress(log, o.progress_bar, o.progress_interval_s, summary.total, summary.skipped);
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

}  // namespace npusim::sim
