#pragma once
// A sweep's results table in its output folder: the plan, the rows (JSON lines and CSV) appended as
// points finish, the shards' rows and the merge that sorts them into results.jsonl/.csv. Layout in
// sweep_runner.h and docs/sweeps.md.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "sim/sweep/sweep_spec.h"

namespace npusim::sim {

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

// Gathers the rows of every shard and earlier run in `out_dir` (by plan.json) into results.jsonl and
// results.csv sorted by index. Points without a row are counted as missing.
SweepSummary merge_results(const std::string& out_dir);

// The pieces the runner and the Slurm submission share; not for use outside sim/sweep.
namespace sweep_detail {

constexpr const char* kResultsJsonl = "results.jsonl";
constexpr const char* kResultsCsv = "results.csv";
constexpr const char* kPlanJson = "plan.json";

// Writes `text` to `path` through a temporary file and a rename, so readers never see half a file.
void write_atomically(const std::string& path, const std::string& text);

// Appends one line with a single write(2) on an O_APPEND descriptor: a kill never leaves half a row
// in the middle of the file (at worst a torn last line, which readers skip).
class AppendFile {
 public:
  explicit AppendFile(const std::string& path);
  ~AppendFile();
  AppendFile(const AppendFile&) = delete;
  AppendFile& operator=(const AppendFile&) = delete;
  void append(const std::string& line);

 private:
  std::string path_;
  int fd_ = -1;
};

std::string read_text(const std::string& path);
std::vector<std::string> lines_of(const std::string& text);

// A row as read back from a results file.
struct StoredRow {
  std::string status;
  int exit_code = 0;
  std::string error;
  std::map<std::string, std::string> metrics;
  std::string report;
};

// Reads every row in `files` by id. A later row replaces an earlier one, except that a failed row
// never replaces an ok one. Torn or foreign lines are skipped.
std::map<std::string, StoredRow> read_rows(const std::vector<std::string>& files);

// Every file that may hold rows: the main results and each shard's.
std::vector<std::string> row_files(const std::string& out_dir);

// The plan as merge needs it: columns and, per point, the values and derived sizes.
struct Plan {
  std::vector<std::string> columns;
  std::vector<ResultRow> points;  // status empty
};
Plan plan_of(const SweepSpec& spec, const std::vector<SweepPoint>& points);
Plan read_plan(const std::string& out_dir);

// Rewrites results.jsonl and results.csv from every stored row, sorted by index. Returns the summary.
SweepSummary write_final(const std::string& out_dir, const Plan& plan);

// An exclusive lock on the output folder for the lifetime of the object (one local run or merge at a
// time; shards each write their own file and do not take it).
class DirLock {
 public:
  explicit DirLock(const std::string& out_dir);
  ~DirLock();
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace sweep_detail
}  // namespace npusim::sim
