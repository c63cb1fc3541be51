#pragma once
// A design-space sweep: a base NPU configuration, fixed overrides, and axes over configuration keys,
// models, precisions and batch sizes, combined as a cartesian product or as zipped lists. This file
// parses the sweep YAML and expands it into the list of points, each a complete `npusim run` command
// line; sweep_runner.h executes them. Format and examples: docs/sweeps.md.
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace npusim::sim {

// A sweep file the user got wrong (exit 2). messages() holds one line per problem, each naming the
// sweep file, line and column and the key involved.
class SweepError : public std::runtime_error {
 public:
  explicit SweepError(std::vector<std::string> messages);
  const std::vector<std::string>& messages() const { return messages_; }

 private:
  std::vector<std::string> messages_;
};

// What an axis column varies: a configuration key (--set key=value) or one of the run's own inputs.
// kPreset is the `config` axis: a preset name or a configuration file per value (--config). The dynamic
// shape axes (docs/dynamic.md): kGenerate `generate` (--generate P:N), kDynamic `dynamic` (--dynamic
// NAME=V1,V2,...), kRequests `requests` (--requests FILE.csv) and kShapePolicy `shape_policy`
// (--shape-policy pad|recompile|dynamic: one policy per point, one row per policy).
enum class AxisKind {
  kConfig,
  kModel,
  kPrecision,
  kBatch,
  kPreset,
  kGenerate,
  kDynamic,
  kRequests,
  kShapePolicy
};

// A model on the model axis: how it is labelled in the results and what `npusim run` is given.
struct ModelValue {
  std::string name;     // the label in the results ("default" for the built-in model)
  std::string arg;      // the MODEL argument of `npusim run` ("" = none: the built-in default)
  std::string prepare;  // shell command that creates `arg` when it does not exist ("" = none)
};

// One column of an axis: a key and its list of values (as written in the sweep file).
struct AxisColumn {
  std::string key;  // "systolic_array.rows", "model", "precision", "batch"
  AxisKind kind = AxisKind::kConfig;
  std::vector<std::string> values;   // display values; for models, the names
  std::vector<ModelValue> models;    // kModel only, parallel to `values`
  std::vector<std::string> configs;  // kPreset only, parallel to `values`: the --config argument
  std::vector<std::string> files;    // kRequests only, parallel to `values`: the file (absolute)
  int line = 0;                      // 1-based position of the key in the sweep file
  int column = 0;
};

// One axis: one or more columns of equal length that advance together (zipped).
struct Axis {
  std::vector<AxisColumn> columns;
  size_t size() const { return columns.empty() ? 0 : columns.front().values.size(); }
};

// Options for submitting the sweep to Slurm (the sweep file's `slurm:` section).
struct SlurmSpec {
  int64_t tasks = 0;  // array tasks (shards); 0 = min(points, 16)
  std::string partition;
  std::string time;  // sbatch --time, e.g. "01:00:00"
  int64_t cpus_per_task = 1;
  std::string mem;                 // sbatch --mem, e.g. "2G"
  std::vector<std::string> extra;  // further sbatch flags, verbatim
};

// The parsed sweep file.
struct SweepSpec {
  std::string path;  // the sweep file as given
  std::string name;  // `name:`, default: the file's stem
  std::string base;  // --config of every point: a path (absolute) or a preset name; "" = built-in
  std::vector<std::string> sets;      // fixed "key=value" overrides applied before the axes
  std::vector<std::string> run_args;  // fixed extra arguments of every `npusim run`
  // `scenario: FILE` (absolute): every point runs `npusim serve FILE` with the point's --config and --set
  // instead of `npusim run` (docs/scenarios.md); "" = none.
  std::string scenario;
  std::vector<Axis> axes;
  bool zip = false;        // `combine: zip`: all axes advance together instead of the product
  double timeout_s = 0;    // per point; 0 = none
  bool trace_csv = false;  // also write each point's trace CSV next to its report
  SlurmSpec slurm;

  // The axis columns in order: the swept columns of the results table.
  std::vector<std::string> column_keys() const;
};

// One point of the sweep.
struct SweepPoint {
  size_t index = 0;
  std::string id;  // stable hash of the command line: the point's identity for resuming and merging
  std::vector<std::pair<std::string, std::string>> values;  // column key -> value, in column order
  std::string model;                                        // MODEL argument ("" = built-in default)
  std::string prepare;                                      // the model's prepare command, if any
  std::string config;             // the `config` axis's --config for this point ("" = the sweep's base)
  std::vector<std::string> sets;  // base overrides then axis overrides
  std::vector<std::string> args;  // --precision/--batch and the fixed run_args
  std::string scenario;           // SweepSpec::scenario: the point is `npusim serve SCENARIO`
  std::string requests;           // the `requests` axis's file (absolute), "" = none
  std::string config_error;       // non-empty: this combination is not a valid configuration
  int64_t array_pes = 0;          // rows x cols of the resolved configuration
  int64_t sram_kib = 0;           // input + weight + accumulator scratchpads

  // The arguments after `npusim`: run [MODEL] [--config CONFIG] --set ... (without output options);
  // CONFIG is the point's `config` axis value, else `base`. With a scenario: serve SCENARIO [--config
  // CONFIG] --set ...
  std::vector<std::string> run_command(const std::string& base) const;
};

// Parses `path`. Throws SweepError listing every problem (unknown keys, wrong types, unknown
// configuration keys or invalid values on an axis, lists of different lengths in a zipped axis).
SweepSpec parse_sweep_file(const std::string& path);

// As parse_sweep_file() for text already in memory; relative paths resolve against `dir`.
SweepSpec parse_sweep_text(const std::string& text, const std::string& source_name, const std::string& dir);

// The points of `spec` in order (the first axis varies slowest). Each point's configuration is
// resolved; one that violates a constraint between keys keeps the message in `config_error`.
std::vector<SweepPoint> expand_points(const SweepSpec& spec);

// 16 hex digits of FNV-1a over `text`.
std::string stable_hash(const std::string& text);

}  // namespace npusim::sim
