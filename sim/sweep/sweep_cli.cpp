#include "sim/sweep/sweep_cli.h"

#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/program_options.hpp>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "sim/config/config_loader.h"
#include "sim/sweep/child_process.h"
#include "sim/sweep/result_store.h"
#include "sim/sweep/slurm.h"
#include "sim/sweep/sweep_runner.h"
#include "sim/sweep/sweep_spec.h"

namespace npusim::sim {
namespace {

namespace po = boost::program_options;
namespace fs = std::filesystem;

constexpr int kOk = 0;
constexpr int kFailure = 1;
constexpr int kUsage = 2;

constexpr const char* kSynopsis =
    "sweep SWEEP.yaml [-j N] [-o DIR] [--dry-run] [--slurm [--wait]] [--shard I/N] [--retry-failed]\n"
    "       npusim sweep --merge DIR";
constexpr const char* kSummary =
    "Run a design-space sweep: every point of the sweep file's axes (configuration keys, models, "
    "precisions,\n"
    "batch sizes) is one `npusim run` process. Results go to DIR/results.csv and DIR/results.jsonl as each\n"
    "point finishes; a re-run skips points already recorded. See docs/sweeps.md.";

class Usage : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// "i/N" with 0 <= i < N.
void parse_shard(const std::string& text, int& index, int& count) {
  const size_t slash = text.find('/');
  try {
    if (slash == std::string::npos) throw std::invalid_argument("no slash");
    size_t used = 0;
    index = std::stoi(text.substr(0, slash), &used);
    if (used != slash) throw std::invalid_argument("trailing");
    const std::string n = text.substr(slash + 1);
    count = std::stoi(n, &used);
    if (used != n.size()) throw std::invalid_argument("trailing");
  } catch (const std::logic_error&) {
    throw Usage("--shard '" + text + "': expected I/N, e.g. 0/4 (I counts from 0)");
  }
  if (count < 1 || index < 0 || index >= count)
    throw Usage("--shard '" + text + "': I must be in 0..N-1 and N at least 1");
}

// The run options the binary accepts, from `npusim run --help`: precision, batch and the dynamic-shape
// axes need them.
void check_run_supports(const SweepSpec& spec, const std::string& exe) {
  std::vector<std::pair<const AxisColumn*, std::string>> needs;
  for (const Axis& a : spec.axes)
    for (const AxisColumn& c : a.columns) {
      if (c.kind == AxisKind::kPrecision) needs.emplace_back(&c, "--precision");
      if (c.kind == AxisKind::kBatch) needs.emplace_back(&c, "--batch");
      if (c.kind == AxisKind::kGenerate) needs.emplace_back(&c, "--generate");
      if (c.kind == AxisKind::kDynamic) needs.emplace_back(&c, "--dynamic");
      if (c.kind == AxisKind::kRequests) needs.emplace_back(&c, "--requests");
      if (c.kind == AxisKind::kShapePolicy) needs.emplace_back(&c, "--shape-policy");
    }
  if (needs.empty()) return;
  int pipefd[2];
  if (pipe(pipefd) != 0) throw std::runtime_error("pipe failed");
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(pipefd[1], 1);
    close(pipefd[0]);
    execl(exe.c_str(), exe.c_str(), "run", "--help", static_cast<char*>(nullptr));
    _exit(127);
  }
  close(pipefd[1]);
  std::string help;
  char buf[4096];
  for (ssize_t n; (n = read(pipefd[0], buf, sizeof buf)) > 0;) help.append(buf, static_cast<size_t>(n));
  close(pipefd[0]);
  int st = 0;
  waitpid(pid, &st, 0);
  std::vector<std::string> errors;
  for (const auto& [c, flag] : needs)
    if (help.find(flag) == std::string::npos)
      errors.push_back(
          fmt::format("{}:{}:{}: {}: this npusim's 'run' has no {} option, so this axis cannot be swept "
                      "yet",
                      spec.path, c->line, c->column, c->key, flag));
  if (!errors.empty()) throw SweepError(errors);
}

int sweep_main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  std::string file, out_dir, shard, merge_dir;
  int jobs = 1;
  double interval = 10;
  bool dry_run = false, slurm = false, wait = false, retry_failed = false, fail_on_error = false,
       help = false;
  po::options_description d("Options");
  d.add_options()("sweep", po::value(&file)->value_name("SWEEP.yaml"), "the sweep file")(
      "jobs,j", po::value(&jobs)->value_name("N"), "simulations to run at once (default 1)")(
      "output,o", po::value(&out_dir)->value_name("DIR"),
      "results folder (default: sweep-NAME, NAME from the file)")(
      "dry-run", po::bool_switch(&dry_run), "list the points and their commands; run nothing")(
      "slurm", po::bool_switch(&slurm),
      "submit the sweep to Slurm as a job array plus a dependent merge job")(
      "wait", po::bool_switch(&wait), "with --slurm: wait until the merge job has finished")(
      "shard", po::value(&shard)->value_name("I/N"), "run only the points with index % N == I (I from 0)")(
      "merge", po::value(&merge_dir)->value_name("DIR"),
      "gather the shards' rows in DIR into DIR/results.csv and DIR/results.jsonl")(
      "retry-failed", po::bool_switch(&retry_failed),
      "re-run points recorded as failed (default: skip them)")(
      "fail-on-error", po::bool_switch(&fail_on_error), "exit 1 when any point failed")(
      "progress-interval", po::value(&interval)->value_name("S"),
      "seconds between progress lines when stderr is not a terminal (default 10)")(
      "help,h", po::bool_switch(&help), "show this help");
  po::positional_options_description pos;
  pos.add("sweep", 1);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(d).positional(pos).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    throw Usage(std::string(e.what()) + " (see 'npusim sweep --help')");
  }
  if (help) {
    out << "usage: npusim " << kSynopsis << "\n\n" << kSummary << "\n\n" << d << "\n";
    return kOk;
  }

  if (!merge_dir.empty()) {
    if (!file.empty() || slurm || dry_run || !shard.empty())
      throw Usage("--merge DIR takes no sweep file and no --slurm/--dry-run/--shard");
    const SweepSummary s = merge_results(merge_dir);
    out << fmt::format("merged {} of {} points ({} ok, {} failed) into {}\n", s.ok + s.failed, s.total, s.ok,
                       s.failed, (fs::path(merge_dir) / "results.csv").string());
    if (s.missing) {
      std::string idx;
      for (size_t i = 0; i < s.missing_indices.size() && i < 20; ++i)
        idx += (i ? ", " : "") + std::to_string(s.missing_indices[i]);
      err << fmt::format(
          "npusim: error: {} points have no result (indices {}{}); re-run the sweep into the same "
          "folder to complete it\n",
          s.missing, idx, s.missing > 20 ? ", ..." : "");
      return kFailure;
    }
    return (fail_on_error && s.failed_recorded) ? kFailure : kOk;
  }
  if (file.empty()) throw Usage("sweep needs a sweep file (see 'npusim sweep --help')");
  if (jobs < 1) throw Usage("-j must be at least 1");
  if (interval <= 0) throw Usage("--progress-interval must be positive");
  if (wait && !slurm) throw Usage("--wait goes with --slurm");
  int shard_index = 0, shard_count = 1;
  if (!shard.empty()) parse_shard(shard, shard_index, shard_count);
  if (slurm && (!shard.empty() || dry_run))
    throw Usage("--slurm cannot be combined with --shard or --dry-run");

  const SweepSpec spec = parse_sweep_file(file);
  const std::string exe = self_exe();
  check_run_supports(spec, exe);
  const std::vector<SweepPoint> points = expand_points(spec);
  if (out_dir.empty()) out_dir = "sweep-" + spec.name;

  if (dry_run) {
    print_points(out, spec, points);
    return kOk;
  }
  if (slurm) return submit_slurm(spec, points, out_dir, exe, wait, out, err);

  SweepRunOptions o;
  o.out_dir = out_dir;
  o.jobs = jobs;
  o.shard_index = shard_index;
  o.shard_count = shard_count;
  o.retry_failed = retry_failed;
  o.exe = exe;
  o.progress_interval_s = interval;
  o.progress_bar = isatty(STDERR_FILENO) && &err == &std::cerr;
  const SweepSummary s = run_sweep_points(spec, points, o, err);
  out << fmt::format("sweep '{}'{}: {} points, {} ok, {} failed, {} already done; results in {}\n", spec.name,
                     shard_count > 1 ? fmt::format(" shard {}/{}", shard_index, shard_count) : "", s.total,
                     s.ok, s.failed, s.skipped,
                     shard_count > 1 ? (fs::path(out_dir) / "shards").string()
                                     : (fs::path(out_dir) / "results.csv").string());
  if (s.missing) return kFailure;
  return (fail_on_error && s.failed_recorded) ? kFailure : kOk;
}

}  // namespace

int run_sweep(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  try {
    return sweep_main(args, out, err);
  } catch (const Usage& e) {
    err << "npusim: error: " << e.what() << "\n";
    return kUsage;
  } catch (const SweepError& e) {
    for (const std::string& m : e.messages()) err << "npusim: error: " << m << "\n";
    return kUsage;
  } catch (const ConfigError& e) {
    for (const std::string& m : e.messages()) err << "npusim: error: " << m << "\n";
    return kUsage;
  } catch (const std::exception& e) {
    err << "npusim: error: " << e.what() << "\n";
    return kFailure;
  }
}

}  // namespace npusim::sim
