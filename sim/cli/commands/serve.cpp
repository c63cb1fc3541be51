// npusim serve: several models sharing one NPU (sim/serve, docs/scenarios.md).
#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "arch/simulate.h"
#include "isa/timing/units.h"
#include "sim/cli/commands/commands.h"
#include "sim/cli/compile_model.h"
#include "sim/cli/files.h"
#include "sim/config/config_loader.h"
#include "sim/e2e/pipeline.h"
#include "sim/model/model.h"
#include "sim/serve/scenario.h"
#include "sim/serve/scheduler.h"

namespace npusim::sim::cli {

namespace po = boost::program_options;

namespace {

// Every occurrence of `from` in `s` replaced by `to`.
void replace_all(std::string& s, std::string_view from, std::string_view to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
}

// What a binding's value reads as in a scenario file, and how many characters of the message it took
// (0: not a binding's value).
struct ScenarioValue {
  std::string text;
  size_t length = 0;
};

// Every "OPTION NAME=VALUE" in `s` rewritten as "KEY {NAME: TEXT}", where read(the message after '=')
// says which VALUE it is and its TEXT; NAME runs up to the '=' and holds no blank.
template <typename Read>
void rewrite_binding(std::string& s, std::string_view option, std::string_view key, Read read) {
  const std::string head = std::string(option) + " ";
  for (size_t at = s.find(head); at != std::string::npos; at = s.find(head, at + 1)) {
    const size_t name = at + head.size();
    const size_t eq = s.find_first_of("= \t\n", name);
    if (eq == std::string::npos || s[eq] != '=' || eq == name) continue;
    const ScenarioValue v = read(std::string_view(s).substr(eq + 1));
    if (v.length == 0) continue;
    s.replace(at, eq + 1 + v.length - at,
              fmt::format("{} {{{}: {}}}", key, s.substr(name, eq - name), v.text));
  }
}

// A shape as the CLI's messages write it: "..." for any, or dimensions and N placeholders ("1x3x48xN").
ScenarioValue shape_value(std::string_view after) {
  if (after.substr(0, 3) == "...") return {"D0xD1x...", 3};
  const size_t n = std::min(after.find_first_not_of("0123456789xN"), after.size());
  return {std::string(after.substr(0, n)), n};
}

// A dynamic dimension's values as the CLI's messages write them ("V1,V2,...").
ScenarioValue dynamic_value(std::string_view after) {
  constexpr std::string_view kExample = "V1,V2,...";
  return after.substr(0, kExample.size()) == kExample ? ScenarioValue{"V", kExample.size()} : ScenarioValue{};
}

// A compile error that says how to bind a dimension on the command line (--input-shape, --dynamic,
// --batch), told in the scenario file's words: the keys of the model's entry.
std::string in_scenario_words(std::string message) {
  rewrite_binding(message, "--input-shape", "input_shape:", shape_value);
  rewrite_binding(message, "--dynamic", "dynamic:", dynamic_value);
  for (const auto& [option, key] : {std::pair{"--input-shape", "input_shape:"},
                                    std::pair{"--dynamic", "dynamic:"}, std::pair{"--batch", "batch:"}})
    replace_all(message, option, key);
  return message;
}

}  // namespace

// npusim serve: every model of the scenario compiled and simulated alone as `npusim run` would, then
// their requests scheduled on one NPU at layer boundaries (sim/serve, docs/scenarios.md).
int cmd_serve(Context& ctx, const Command& cmd) {
  std::string scenario_file, report_file, trace_file;
  bool quiet = false;
  po::options_description d("Serving");
  d.add_options()("scenario", po::value(&scenario_file)->value_name("SCENARIO.yaml"),
                  "models, arrivals, priorities, policy, duration (docs/scenarios.md)")(
      "report", po::value(&report_file)->value_name("FILE.json"), "write the per-model and per-unit figures")(
      "trace", po::value(&trace_file)->value_name("FILE.json"),
      "write a Chrome/Perfetto trace, a lane per model")("quiet,q", po::bool_switch(&quiet),
                                                         "print nothing but errors");
  std::string config_arg;
  std::vector<std::string> sets;
  d.add_options()("config,c", po::value(&config_arg)->value_name("FILE.yaml"),
                  "the configuration instead of the scenario's")(
      "set", po::value(&sets)->composing()->value_name("KEY=VALUE"),
      "override a parameter after the scenario's set (repeatable)");
  po::positional_options_description pos;
  pos.add("scenario", 1);
  if (!parse(ctx, cmd, d, pos)) return kExitOk;
  if (scenario_file.empty()) throw UsageError("serve needs a scenario file (npusim serve SCENARIO.yaml)");
  check_input_file("--scenario", scenario_file);
  serve::Scenario scenario = serve::parse_scenario_file(scenario_file);
  if (!config_arg.empty()) scenario.config = config_arg;
  scenario.sets.insert(scenario.sets.end(), sets.begin(), sets.end());
  const isa::NpuConfig whole = load_config(scenario.config, scenario.sets);
  const std::vector<size_t> sharing = serve::models_per_core(scenario, whole.cores);
  std::vector<serve::ModelProfile> profiles;
  std::vector<isa::NpuConfig> configs;  // per model, for the co-runs below
  std::vector<isa::Program> programs;
  std::vector<traces::Report> alone;
  for (size_t i = 0; i < scenario.models.size(); ++i) {
    const serve::ScenarioModel& sm = scenario.models[i];
    isa::NpuConfig config = whole;
    if (!sm.sets.empty()) {  // its own overrides, after the scenario's
      std::vector<std::string> sets = scenario.sets;
      sets.insert(sets.end(), sm.sets.begin(), sm.sets.end());
      try {
        config = load_config(scenario.config, sets);
      } catch (const ConfigError& e) {
        std::vector<std::string> problems = e.messages();
        for (std::string& p : problems)
          p = fmt::format("{}:{}:{}: models[{}].set: {}", scenario_file, sm.set_line, sm.set_column, i, p);
        throw ConfigError(problems);
      }
    }
    if (scenario.sram_partitioned) {  // among the models of its core: each core has its own SRAM
      config = serve::partitioned_sram(config, sharing[i]);
      std::vector<std::string> problems = check_constraints(config);
      for (std::string& p : problems) p = fmt::format("{}: sram: partitioned: {}", scenario_file, p);
      if (!problems.empty()) throw ConfigError(problems);
    }
    ModelCliOptions m;
    if (!sm.precision.empty()) m.precision = sm.precision;
    if (sm.batch > 0) {
      m.batch = sm.batch;
      m.batch_given = true;
    }
    m.input_shapes = sm.input_shapes;
    m.calibration_samples = 1;  // timing only, as `npusim run` without --calibration
    m.timing_only = true;
    CompiledModel compiled;
    const std::string where =
        fmt::format("{}:{}:{}: models[{}] ({})", scenario_file, sm.line, sm.column, i, sm.name);
    try {
      compiled = compile_or_throw(sm.model, config, m, sm.dynamic);
    } catch (const InputError& e) {
      throw InputError(fmt::format("{}: {}", where, in_scenario_words(e.what())));
    } catch (const UsageError& e) {
      throw UsageError(fmt::format("{}: {}", where, in_scenario_words(e.what())));
    }
    traces::Report report;
    try {
      report = arch::simulate(compiled.result.program, config, arch::RunOptions{});
    } catch (const arch::SimError& e) {
      throw RunError(fmt::format("{}: {}", sm.name, e.what()));
    }
    serve::ModelProfile p = serve::profile_of(sm.name, report);
    const compiler::MemoryPlan& mem = compiled.result.memory;
    p.weight_bytes = static_cast<int64_t>(mem.weight_bytes);
    p.activation_bytes = static_cast<int64_t>(dram_footprint_bytes(mem) - mem.weight_bytes);
    p.reload_cycles =
        isa::timing::host_cycles(p.weight_bytes, 0, 0, config.host, config.frequency_mhz).link_in;
    if (sm.pipeline_spec) {
      e2e::E2eResult pipeline = e2e::plan_pipeline(*sm.pipeline_spec, compiled.result.program, config,
                                                   std::max<int64_t>(1, sm.batch));
      e2e::add_npu_run(pipeline, p.total_cycles, static_cast<int64_t>(report.breakdown.host));
      serve::add_pipeline(p, pipeline);
    }
    profiles.push_back(std::move(p));
    configs.push_back(config);
    programs.push_back(std::move(compiled.result.program));
    alone.push_back(std::move(report));
  }
  // Models on different cores slow each other down through the DRAM and the host link they share: each
  // pair's slowdowns come from one simulation of their programs on two cores (docs/scenarios.md).
  serve::Slowdowns slowdown;
  for (size_t i = 0; i < scenario.models.size(); ++i) {
    for (size_t j = i + 1; j < scenario.models.size(); ++j) {
      if (scenario.models[i].core == scenario.models[j].core) continue;
      if (slowdown.empty())
        slowdown.assign(scenario.models.size(), std::vector<double>(scenario.models.size(), 1.0));
      std::vector<traces::Report> both;
      try {
        both = arch::simulate_cores({&programs[i], &programs[j]}, {&configs[i], &configs[j]});
      } catch (const arch::SimError& e) {
        throw RunError(fmt::format("{} with {} on two cores: {}", scenario.models[i].name,
                                   scenario.models[j].name, e.what()));
      }
      std::tie(slowdown[i][j], slowdown[j][i]) =
          serve::co_run_slowdowns(alone[i], both[0], alone[j], both[1]);
    }
  }
  const serve::ServeResult result =
      serve::run_scenario(scenario, profiles, whole.frequency_mhz, whole.dram.capacity_mib << 20, slowdown);
  if (!report_file.empty()) write_output(report_file, serve::serve_json(result, scenario));
  if (!trace_file.empty()) {
    auto f = open_output(trace_file);
    serve::write_serve_trace(result, *f);
    if (!f->flush()) throw InputError(fmt::format("cannot write '{}'", trace_file));
  }
  if (!quiet) ctx.out << serve::serve_text(result);
  return kExitOk;
}

}  // namespace npusim::sim::cli
