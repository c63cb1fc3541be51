#pragma once
// Runs a sweep's points on this machine, one `npusim run` process per point (child_process.h), and
// keeps the results table (result_store.h): each finished point is appended at once to the results
// (JSON lines and CSV) in the output folder, a re-run skips points already recorded, a failing point is
// recorded with its error, progress goes to stderr (progress.h). Shards (`--shard i/N`) append to their
// own files and `merge_results` gathers them; slurm.h runs the shards as a Slurm job array.
// Output folder layout (docs/sweeps.md):
//   plan.json              the points (index, id, swept values), written before anything runs
//   results.jsonl/.csv     one row per point, sorted by index once the run or merge ends
//   shards/shard-I-of-N.jsonl   rows of one shard
//   points/ID/report.json  the point's full report (and log.txt, trace.csv)
//   attempts.log           one line per point started (audit trail for resuming)
#include <iosfwd>
#include <string>
#include <vector>

#include "sim/sweep/result_store.h"
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

// Prints the points, one per line with their swept values and command line (--dry-run).
void print_points(std::ostream& out, const SweepSpec& spec, const std::vector<SweepPoint>& points);

// Runs the points of this shard that have no row yet. Throws std::runtime_error when the output
// folder cannot be written; a failing point is a row, not an exception.
SweepSummary run_sweep_points(const SweepSpec& spec, const std::vector<SweepPoint>& points,
                              const SweepRunOptions& options, std::ostream& log);

}  // namespace npusim::sim
