#pragma once
// A serving scenario (`npusim serve SCENARIO.yaml`, docs/scenarios.md): several models sharing one NPU,
// each with its arrival process, priority and deadline, a scheduling policy and a duration. This file
// parses and validates the YAML; scheduler.h runs it.
#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "isa/machine/config.h"
#include "sim/config/yaml_errors.h"
#include "sim/e2e/pipeline_spec.h"

namespace npusim::sim::serve {

// A scenario file the user got wrong (exit 2): one line per problem, each naming file:line:column and
// the key.
class ScenarioError : public YamlFileError {
 public:
  using YamlFileError::YamlFileError;
};

// Which request the NPU runs next, decided at every layer boundary.
enum class Policy {
  kPriority,    // the highest priority waiting request (earliest arrival on ties); a running request is
                // preempted at its next layer boundary by a higher-priority arrival
  kFifo,        // the earliest arrival runs to completion
  kRoundRobin,  // one layer per model in turn among the models with waiting requests
};

struct Arrivals {
  enum class Kind { kPeriodic, kPoisson, kTrace };
  Kind kind = Kind::kPeriodic;
  double period_ms = 0;  // periodic
  double phase_ms = 0;   // periodic: the first arrival
  double rate_hz = 0;    // poisson
  uint32_t seed = 1;     // poisson (default: the scenario's seed + the model's index)
  std::string trace;     // trace: a CSV file of arrival times in ms (one per line; a header line allowed)
  std::vector<double> trace_ms;  // trace: the times read from it, sorted
};

struct ScenarioModel {
  std::string name;
  std::string model;  // the MODEL argument of `npusim run` (a relative file resolved against the scenario)
  std::string precision;  // "" = auto, as `npusim run`
  int64_t batch = 0;      // 0 = the model's own
  // `input_shape: {NAME: 1x3x48x320}`: inputs' shapes as `npusim run --input-shape NAME=...` binds them
  // ("NAME=1x3x48x320"); `dynamic: {PARAM: V}`: a named dynamic dimension bound to one value.
  std::vector<std::string> input_shapes;
  std::map<std::string, int64_t> dynamic;
  int64_t priority = 0;  // higher runs first under `policy: priority`
  // Its own KEY=VALUE overrides on top of the scenario's (never of what the models share: the clock, the
  // cores, DRAM, the host link, energy and area); where `set` was given.
  std::vector<std::string> sets;
  int set_line = 0, set_column = 0;
  int64_t core = 0;  // the core it is pinned to (config `cores`); each core schedules its own models
  int core_line = 0, core_column = 0;  // where `core` was given (0: not given), for the check against `cores`
  double deadline_ms = 0;              // 0 = none
  Arrivals arrivals;
  // A dependent stage (`after: NAME`): no arrivals of its own; each request of the model NAME makes, when
  // it completes (its post-processing included), `fanout` requests of this one: a camera frame's text
  // crops for a recogniser after a detector. "" = arrivals of its own.
  std::string after;
  size_t upstream = 0;  // the index of the model `after` names (resolved by the parser)
  // Requests made per upstream request: one count for all (`fanout: 3`), or a list the upstream's
  // requests take in turn (`fanout: [3, 0, 5]`: request k makes fanout[k % 3]), the crop counts of
  // successive frames.
  std::vector<int64_t> fanout = {1};
  // `fanout: {poisson_mean: M, seed: S}`: each upstream request k makes a Poisson(M) count instead (drawn
  // from its own seeded stream, so the same request makes the same count whatever the schedule; at most
  // 1000); 0 = the counts above. The seed defaults to the scenario's seed + the model's index.
  double fanout_mean = 0;
  uint32_t fanout_seed = 0;
  std::string
      pipeline;  // an end-to-end pipeline file (docs/e2e.md), resolved against the scenario; "" = none
  std::optional<e2e::PipelineSpec> pipeline_spec;  // that file, parsed (it has no stream: the arrivals are)
  int line = 0, column = 0;
};

struct Scenario {
  std::string path;
  std::string config;             // --config of every model ("" = built-in edge); relative to the scenario
  std::vector<std::string> sets;  // --set overrides
  Policy policy = Policy::kPriority;
  double duration_ms = 1000;  // arrivals in [0, duration); the run continues until they are all done
  // `sram: partitioned`: each model is compiled and simulated with 1/N of every scratchpad (N models),
  // its own slice; `shared` (default): each model has all of it.
  bool sram_partitioned = false;
  uint32_t seed = 1;
  std::vector<ScenarioModel> models;
};

std::string_view policy_name(Policy p);

// `config` with every scratchpad's size_kib divided among `models` (the models sharing one core) (rounded
// down, at least 1 KiB): the slice one model has under `sram: partitioned`.
isa::NpuConfig partitioned_sram(const isa::NpuConfig& config, size_t models);

// Checks every model's `core` against the configuration's `cores` and returns, per model, how many models
// share its core. Throws ScenarioError naming file:line:column and the key of each model pinned past the last
// core.
std::vector<size_t> models_per_core(const Scenario& s, int64_t cores);

// Parses `path`. Throws ScenarioError listing every problem: unknown keys (with a suggestion), wrong
// types, negative or zero rates and periods, priorities that are not integers, model files or trace
// files that do not exist, unreadable trace lines, duplicate model names.
Scenario parse_scenario_file(const std::string& path);
// As parse_scenario_file for text in memory; relative paths resolve against `dir`.
Scenario parse_scenario_text(const std::string& text, const std::string& source_name, const std::string& dir);

}  // namespace npusim::sim::serve
