#pragma once
// Runs a sweep's points, one `npusim run` process per point, and keeps the results table: each finished
// point is appended at once to the results (JSON lines and CSV) in the output folder, a re-run skips
// points already recorded, a failing point is recorded with its error. Shards (`--shard i/N`) append
// to their own files and `merge_results` gathers them; `submit_slurm` runs the shards as a Slurm job
// array. Output folder layout (docs/sweeps.md):
//   plan.json              the points (index, id, swept values), written before anything runs
//   results.jsonl/.csv     one row per point, sorted by index once the run or merge ends
//   shards/shard-I-of-N.jsonl   rows of one shard
//   points/ID/report.json  the point's full report (and log.txt, trace.csv)
//   attempts.log           one line per point started (audit trail for resuming)
#include <cstdint>
#include <iosfwd>
#include <map>
#include <string>
#include <vector>

#include "sim/sweep/sweep_spec.h"

namespace npusim::sim {

// How to run a sweep.
struct SweepRunOptions {
  std::string out_dir;  // results folder (created)
  int jobs = 1;         // simulations at once
  int shard_index = 0;  // this process runs points with index % shard_count == shard_index
  int shard_count = 1;
  bool retry_failed = false;        // re-run points recorded as failed
  std::string exe;                  // the npusim binary to run per point ("" = this process's binary)
  double progress_interval_s = 10;  // plain progress lines when stderr is not a terminal
  bool progress_bar = false;        // draw a bar with carriage returns (stderr is a terminal)
};

// What a run or merge ended with.
struct SweepSummary {
  size_t total = 0;  // points in the plan (or in this shard)
  size_t ok = 0;
  size_t failed = 0;
  size_t skipped = 0;          // already recorded before this run
  size_t missing = 0;          // points with no row (after a local run or a merge)
  size_t failed_recorded = 0;  // failed rows in the results, this run's and earlier ones
  std::vector<size_t> missing_indices;
};

// The headline columns taken from each point's report: column name and dotted path in the report JSON.
struct MetricColumn {
  const char* column;
  const char* path;
};
const std::vector<MetricColumn>& metric_columns();

// One row of the results table.
struct ResultRow {
  size_t index = 0;
  std::string id;
  std::vector<std::pair<std::string, std::string>> values;  // swept columns
  std::string status;                                       // "ok" or "failed"
  int exit_code = 0;
  std::string error;
  int64_t array_pes = 0;
  int64_t sram_kib = 0;
  std::map<std::string, std::string> metrics;  // column -> the report's literal text; absent = null
  std::string report;                          // relative to the output folder
};

std::string row_json(const ResultRow& r, const std::vector<std::string>& columns);
std::string row_csv(const ResultRow& r, const std::vector<std::string>& columns);
std::string csv_header(const std::vector<std::string>& columns);

// Writes plan.json for `points` into `out_dir` (atomically).
void write_plan(const std::string& out_dir, const SweepSpec& spec, const std::vector<SweepPoint>& points);

// Prints the points, one per line with their swept values and command line (--dry-run).
void print_points(std::ostream& out, const SweepSpec& spec, const std::vector<SweepPoint>& points);

// Runs the points of this shard that have no row yet. Throws std::runtime_error when the output
// folder cannot be written; a failing point is a row, not an exception.
SweepSummary run_sweep_points(const SweepSpec& spec, const std::vector<SweepPoint>& points,
                              const SweepRunOptions& options, std::ostream& log);

// Gathers the rows of every shard and earlier run in `out_dir` (by plan.json) into results.jsonl and
// results.csv sorted by index. Points without a row are counted as missing.
SweepSummary merge_results(const std::string& out_dir);

// Slurm submission: writes out_dir/slurm/{array,merge}.sbatch and submits them with sbatch (the merge
// job depends on the array). With `wait`, blocks until the merge job ends. Returns the exit status.
int submit_slurm(const SweepSpec& spec, const std::vector<SweepPoint>& points, const std::string& out_dir,
                 const std::string& exe, bool wait, std::ostream& out, std::ostream& err);

// Path of the running executable (/proc/self/exe resolved).
std::string self_exe();

}  // namespace npusim::sim
