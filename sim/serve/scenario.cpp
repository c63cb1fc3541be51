#include "sim/serve/scenario.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

#include "isa/machine/spec_text.h"
#include "sim/config/yaml_errors.h"

namespace npusim::sim::serve {
namespace {

namespace fs = std::filesystem;

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i];
  return s;
}

// A built-in model spec of `npusim run` (not a file).
bool builtin_model(const std::string& m) {
  return m == "demo" || m.rfind("gemm:", 0) == 0 || m.rfind("conv:", 0) == 0;
}

class Parser : public YamlErrors {
 public:
  Parser(std::string source, std::string dir) : YamlErrors(std::move(source)), dir_(std::move(dir)) {}

  void read(const YAML::Node& root, Scenario& s) {
    if (!root.IsMap()) {
      error(root, "a scenario file is a mapping with at least 'models:' (docs/scenarios.md)");
      return;
    }
    for (const auto& kv : root) {
      const std::string k = kv.first.Scalar();
      const YAML::Node& v = kv.second;
      if (k == "config") {
        std::string c;
        if (scalar(v, k, c)) {
          const std::string local = relative(c);
          std::error_code ec;
          s.config = fs::is_regular_file(local, ec) ? local : c;
        }
      } else if (k == "set") {
        if (!v.IsSequence()) {
          error(v, "set: expected a list of KEY=VALUE");
          continue;
        }
        for (const YAML::Node& e : v) {
          std::string t;
          if (scalar(e, "set[]", t)) s.sets.push_back(t);
        }
      } else if (k == "policy") {
        std::string p;
        if (!scalar(v, k, p)) continue;
        if (p == "priority")
          s.policy = Policy::kPriority;
        else if (p == "fifo")
          s.policy = Policy::kFifo;
        else if (p == "round_robin")
          s.policy = Policy::kRoundRobin;
        else
          error(v, "policy: '" + p + "' is not one of priority, fifo, round_robin");
      } else if (k == "sram") {
        std::string m;
        if (!scalar(v, k, m)) continue;
        if (m == "partitioned")
          s.sram_partitioned = true;
        else if (m != "shared")
          error(v, "sram: '" + m + "' is neither 'shared' nor 'partitioned'");
      } else if (k == "duration_ms") {
        real(v, k, s.duration_ms, 1e-6, 1e9);
      } else if (k == "seed") {
        int64_t seed = s.seed;
        integer(v, k, seed, 0, 0xffffffffLL);
        s.seed = static_cast<uint32_t>(seed);
      } else if (k == "models") {
        read_models(v, s);
      } else {
        unknown(kv.first, "", k, {"config", "set", "policy", "sram", "duration_ms", "seed", "models"});
      }
    }
    if (!root["models"]) error(root, "models: missing (a list of models, docs/scenarios.md)");
    // Poisson seeds default to the scenario's seed plus the model's index (independent streams).
    for (size_t i = 0; i < s.models.size(); ++i) {
      if (!seed_given_[i]) s.models[i].arrivals.seed = s.seed + static_cast<uint32_t>(i);
      if (!fanout_seed_given_[i]) s.models[i].fanout_seed = s.seed + static_cast<uint32_t>(i);
    }
  }

 private:
  std::string relative(const std::string& p) const {
    if (p.empty() || fs::path(p).is_absolute()) return p;
    return (fs::path(dir_) / p).lexically_normal().string();
  }
  void read_models(const YAML::Node& n, Scenario& s) {
    if (!n.IsSequence() || n.size() == 0) {
      error(n, "models: expected a non-empty list of models (- name: ..., model: ...)");
      return;
    }
    std::set<std::string> names;
    for (size_t i = 0; i < n.size(); ++i) {
      const YAML::Node& m = n[i];
      const std::string where = fmt::format("models[{}]", i);
      if (!m.IsMap()) {
        error(m, where + ": expected a mapping (name, model, arrival, ...)");
        continue;
      }
      ScenarioModel sm;
      sm.line = m.Mark().line + 1;
      sm.column = m.Mark().column + 1;
      bool seed_given = false, fanout_seed_given = false;
      for (const auto& kv : m) {
        const std::string k = kv.first.Scalar();
        const std::string key = where + "." + k;
        const YAML::Node& v = kv.second;
        if (k == "name") {
          if (scalar(v, key, sm.name) && !names.insert(sm.name).second)
            error(v, key + ": '" + sm.name + "' names two models");
        } else if (k == "model") {
          std::string spec;
          if (!scalar(v, key, spec)) continue;
          if (builtin_model(spec)) {
            sm.model = spec;
          } else {
            sm.model = relative(spec);
            std::error_code ec;
            if (!fs::is_regular_file(sm.model, ec)) error(v, key + ": '" + spec + "' does not exist");
          }
        } else if (k == "precision") {
          if (scalar(v, key, sm.precision)) {
            static const std::vector<std::string> kPrecisions = {"auto", "fp32", "fp16", "bf16", "int8"};
            if (std::find(kPrecisions.begin(), kPrecisions.end(), sm.precision) == kPrecisions.end())
              error(v, key + ": '" + sm.precision + "' is not one of " + join(kPrecisions));
          }
        } else if (k == "batch") {
          integer(v, key, sm.batch, 1, 65536);
        } else if (k == "input_shape") {
          read_input_shapes(v, key, sm);
        } else if (k == "dynamic") {
          read_dynamic(v, key, sm);
        } else if (k == "priority") {
          integer(v, key, sm.priority, -1000000, 1000000);
        } else if (k == "set") {
          read_model_sets(v, key, sm);
        } else if (k == "core") {
          integer(v, key, sm.core, 0, 63);
          sm.core_line = v.Mark().line + 1;
          sm.core_column = v.Mark().column + 1;
        } else if (k == "deadline_ms") {
          real(v, key, sm.deadline_ms, 1e-9, 1e9);
        } else if (k == "pipeline") {
          std::string f;
          if (!scalar(v, key, f)) continue;
          sm.pipeline = relative(f);
          std::error_code ec;
          if (!fs::is_regular_file(sm.pipeline, ec)) {
            error(v, key + ": '" + f + "' does not exist");
            continue;
          }
          try {
            sm.pipeline_spec = e2e::parse_pipeline_file(sm.pipeline);
          } catch (const e2e::PipelineError& e) {
            errors_.insert(errors_.end(), e.messages().begin(), e.messages().end());
            continue;
          }
          if (sm.pipeline_spec->stream.enabled) {
            error(v, key + ": '" + f +
                         "' has a stream: section; in a scenario the model's arrivals are its stream");
          }
        } else if (k == "arrival") {
          seed_given = read_arrivals(v, key, sm.arrivals);
        } else if (k == "after") {
          scalar(v, key, sm.after);
        } else if (k == "fanout") {
          fanout_seed_given = read_fanout(v, key, sm);
        } else {
          unknown(kv.first, where + ".", k,
                  {"name", "model", "precision", "batch", "input_shape", "dynamic", "priority", "core", "set",
                   "deadline_ms", "pipeline", "arrival", "after", "fanout"});
        }
      }
      if (m["after"] && m["arrival"])
        error(m["arrival"], where +
                                ".arrival: a model that runs after another has no arrivals of its own "
                                "(its requests are made by '" +
                                sm.after + "')");
      if (m["fanout"] && !m["after"])
        error(m["fanout"],
              where + ".fanout: only a model that runs after another (after: MODEL) has a fanout");
      // `batch` sets every input's first dimension: an input_shape that says otherwise contradicts it.
      if (sm.batch > 0 && m["input_shape"] && m["input_shape"].IsMap()) {
        for (const auto& in : m["input_shape"]) {
          const std::string name = in.first.Scalar();
          for (const std::string& bound : sm.input_shapes) {
            if (bound.rfind(name + "=", 0) != 0) continue;
            const int64_t first = std::stoll(bound.substr(name.size() + 1));
            if (first != sm.batch)
              error(in.second,
                    fmt::format("{}.input_shape.{}: first dimension {} but batch: {}; give the batch once",
                                where, name, first, sm.batch));
          }
        }
      }
      if (!m["model"]) error(m, where + ".model: missing (an ONNX file, demo, gemm:..., conv:...)");
      if (!m["arrival"] && !m["after"])
        error(m, where +
                     ".arrival: missing (periodic, poisson or trace; or after: MODEL for a dependent stage)");
      if (sm.name.empty()) sm.name = fmt::format("model{}", i);
      seed_given_.push_back(seed_given);
      fanout_seed_given_.push_back(fanout_seed_given);
      s.models.push_back(sm);
    }
    resolve_after(n, s);
  }

  // `after: NAME` names another model of the file, and following `after` from any model ends at a model
  // with arrivals of its own (no cycle).
  void resolve_after(const YAML::Node& n, Scenario& s) {
    std::vector<std::string> names;
    for (const ScenarioModel& m : s.models) names.push_back(m.name);
    for (size_t i = 0; i < s.models.size() && i < n.size(); ++i) {
      ScenarioModel& m = s.models[i];
      if (m.after.empty()) continue;
      const YAML::Node& at = n[i]["after"];
      const std::string key = fmt::format("models[{}].after", i);
      const auto it = std::find(names.begin(), names.end(), m.after);
      if (it == names.end()) {
        error(at, key + ": '" + m.after + "' is not a model of the scenario (" + join(names) + ")");
        continue;
      }
      m.upstream = static_cast<size_t>(it - names.begin());
    }
    if (!errors_.empty()) return;
    for (size_t i = 0; i < s.models.size() && i < n.size(); ++i) {
      size_t at = i;
      for (size_t steps = 0; !s.models[at].after.empty() && steps <= s.models.size(); ++steps)
        at = s.models[at].upstream;
      if (!s.models[at].after.empty())
        error(n[i]["after"],
              fmt::format("models[{}].after: '{}' leads back to '{}' (a cycle): the first stage "
                          "needs arrivals of its own",
                          i, s.models[i].after, s.models[i].name));
    }
  }

  // `fanout: N`, `fanout: [N0, N1, ...]` (requests per upstream request, each from 0 to 1000) or
  // `fanout: {poisson_mean: M, seed: S}`. Returns whether a seed was given.
  bool read_fanout(const YAML::Node& v, const std::string& key, ScenarioModel& sm) {
    if (v.IsMap()) {
      bool seed = false;
      for (const auto& kv : v) {
        const std::string k = kv.first.Scalar();
        if (k == "poisson_mean") {
          real(kv.second, key + "." + k, sm.fanout_mean, 1e-6, 1000);
        } else if (k == "seed") {
          int64_t sd = 0;
          integer(kv.second, key + "." + k, sd, 0, 0xffffffffLL);
          sm.fanout_seed = static_cast<uint32_t>(sd);
          seed = true;
        } else {
          unknown(kv.first, key + ".", k, {"poisson_mean", "seed"});
        }
      }
      if (!v["poisson_mean"])
        error(v, key + ".poisson_mean: missing (the mean crop count per upstream request)");
      return seed;
    }
    sm.fanout.clear();
    if (v.IsSequence()) {
      if (v.size() == 0) error(v, key + ": expected a count or a non-empty list of counts");
      for (size_t k = 0; k < v.size(); ++k) {
        int64_t c = -1;
        integer(v[k], fmt::format("{}[{}]", key, k), c, 0, 1000);
        sm.fanout.push_back(std::max<int64_t>(c, 0));
      }
      return false;
    }
    int64_t c = 1;
    integer(v, key, c, 0, 1000);
    sm.fanout.push_back(c);
    return false;
  }

  // `input_shape: {NAME: 1x3x48x320}`: each input's shape, every dimension a positive integer.
  void read_input_shapes(const YAML::Node& v, const std::string& key, ScenarioModel& sm) {
    if (!v.IsMap() || v.size() == 0) {
      error(v, key + ": expected a mapping of input names to shapes, e.g. {x: 1x3x48x320}");
      return;
    }
    for (const auto& kv : v) {
      const std::string name = kv.first.Scalar(), at = key + "." + name;
      std::string text;
      if (!scalar(kv.second, at, text)) continue;
      bool ok = !text.empty();
      for (size_t b = 0; ok && b <= text.size();) {
        const size_t e = std::min(text.find('x', b), text.size());
        const std::string d = text.substr(b, e - b);
        ok = !d.empty() && d.size() <= 12 && d.find_first_not_of("0123456789") == std::string::npos &&
             std::stoll(d) > 0;
        b = e + 1;
      }
      if (!ok) {
        error(kv.second,
              at + ": '" + text + "' is not a shape D0xD1x... of positive integers (e.g. 1x3x48x320)");
        continue;
      }
      sm.input_shapes.push_back(name + "=" + text);
    }
  }

  // `dynamic: {PARAM: V}`: a named dynamic dimension (an ONNX dim_param) bound to V.
  void read_dynamic(const YAML::Node& v, const std::string& key, ScenarioModel& sm) {
    if (!v.IsMap() || v.size() == 0) {
      error(v, key + ": expected a mapping of dynamic dimensions to values, e.g. {seq: 128}");
      return;
    }
    for (const auto& kv : v) {
      int64_t value = 0;
      integer(kv.second, key + "." + kv.first.Scalar(), value, 1, 1 << 24);
      if (value > 0) sm.dynamic[kv.first.Scalar()] = value;
    }
  }

  // A model's own `set`: KEY=VALUE overrides of what is the model's own (its core's array, SRAM, vector
  // unit, DMA engines, lowering...). What every model shares (the clock, the cores, DRAM, the host) is the
  // scenario's.
  void read_model_sets(const YAML::Node& v, const std::string& key, ScenarioModel& sm) {
    if (!v.IsSequence()) {
      error(v, key + ": expected a list of KEY=VALUE");
      return;
    }
    sm.set_line = v.Mark().line + 1;
    sm.set_column = v.Mark().column + 1;
    for (const YAML::Node& e : v) {
      std::string t;
      if (!scalar(e, key + "[]", t)) continue;
      const std::string k = t.substr(0, t.find('='));
      bool shared = false;
      for (const char* prefix :
           {"frequency_mhz", "cores", "dram.", "host.", "technology.", "energy.", "area."})
        shared = shared || k.rfind(prefix, 0) == 0;
      if (shared) {
        error(e, key + ": '" + k +
                     "' is shared by every model of the NPU (or describes the whole chip); set it in the "
                     "scenario's set");
        continue;
      }
      sm.sets.push_back(t);
    }
  }

  // Returns whether a seed was given.
  bool read_arrivals(const YAML::Node& n, const std::string& where, Arrivals& a) {
    if (!n.IsMap()) {
      error(n, where + ": expected a mapping (type: periodic|poisson|trace, ...)");
      return false;
    }
    std::string type;
    if (!n["type"] || !scalar(n["type"], where + ".type", type)) {
      if (!n["type"]) error(n, where + ".type: missing (periodic, poisson or trace)");
      return false;
    }
    std::vector<std::string> valid = {"type"};
    if (type == "periodic") {
      a.kind = Arrivals::Kind::kPeriodic;
      valid.insert(valid.end(), {"period_ms", "phase_ms"});
      if (!n["period_ms"]) error(n, where + ".period_ms: missing (periodic arrivals need a period)");
    } else if (type == "poisson") {
      a.kind = Arrivals::Kind::kPoisson;
      valid.insert(valid.end(), {"rate_hz", "seed"});
      if (!n["rate_hz"]) error(n, where + ".rate_hz: missing (Poisson arrivals need a rate)");
    } else if (type == "trace") {
      a.kind = Arrivals::Kind::kTrace;
      valid.push_back("file");
      if (!n["file"]) error(n, where + ".file: missing (a CSV of arrival times in ms)");
    } else {
      error(n["type"], where + ".type: '" + type + "' is not one of periodic, poisson, trace");
      return false;
    }
    bool seed = false;
    for (const auto& kv : n) {
      const std::string k = kv.first.Scalar();
      const std::string key = where + "." + k;
      if (std::find(valid.begin(), valid.end(), k) == valid.end()) {
        unknown(kv.first, where + ".", k, valid);
        continue;
      }
      if (k == "period_ms") {
        real(kv.second, key, a.period_ms, 1e-9, 1e9);
      } else if (k == "phase_ms") {
        real(kv.second, key, a.phase_ms, 0, 1e9);
      } else if (k == "rate_hz") {
        real(kv.second, key, a.rate_hz, 1e-9, 1e9);
      } else if (k == "seed") {
        int64_t sd = 0;
        integer(kv.second, key, sd, 0, 0xffffffffLL);
        a.seed = static_cast<uint32_t>(sd);
        seed = true;
      } else if (k == "file") {
        std::string f;
        if (scalar(kv.second, key, f)) read_trace(kv.second, key, relative(f), a);
      }
    }
    return seed;
  }

  void read_trace(const YAML::Node& at, const std::string& key, const std::string& path, Arrivals& a) {
    a.trace = path;
    std::ifstream f(path);
    if (!f) {
      error(at, key + ": '" + path + "' cannot be read");
      return;
    }
    std::string line;
    int n = 0;
    while (std::getline(f, line)) {
      ++n;
      const std::string cell = line.substr(0, line.find(','));
      if (cell.find_first_not_of(" \t\r") == std::string::npos) continue;
      try {
        size_t used = 0;
        const double t = std::stod(cell, &used);
        if (t < 0) throw std::invalid_argument("negative");
        a.trace_ms.push_back(t);
      } catch (const std::exception&) {
        if (n == 1) continue;  // a header line
        errors_.push_back(fmt::format("{}:{}: {} (from {}): '{}' is not an arrival time in ms (>= 0)", path,
                                      n, key, source_, cell));
        return;
      }
    }
    std::sort(a.trace_ms.begin(), a.trace_ms.end());
  }

  std::string dir_;
  std::vector<bool> seed_given_, fanout_seed_given_;
};

}  // namespace

std::string_view policy_name(Policy p) {
  switch (p) {
    case Policy::kPriority:
      return "priority";
    case Policy::kFifo:
      return "fifo";
    default:
      return "round_robin";
  }
}

isa::NpuConfig partitioned_sram(const isa::NpuConfig& config, size_t models) {
  isa::NpuConfig c = config;
  const int64_t n = static_cast<int64_t>(std::max<size_t>(1, models));
  for (isa::ScratchpadConfig* pad : {&c.sram.input, &c.sram.weight, &c.sram.accumulator})
    pad->size_kib = std::max<int64_t>(1, pad->size_kib / n);
  return c;
}

std::vector<size_t> models_per_core(const Scenario& s, int64_t cores) {
  std::vector<std::string> errors;
  std::vector<size_t> on_core(static_cast<size_t>(std::max<int64_t>(cores, 1)), 0);
  for (size_t i = 0; i < s.models.size(); ++i) {
    const ScenarioModel& m = s.models[i];
    if (m.core >= cores) {
      errors.push_back(
          fmt::format("{}:{}:{}: models[{}].core: {} but the configuration has {} core{} (0..{})", s.path,
                      m.core_line, m.core_column, i, m.core, cores, cores == 1 ? "" : "s", cores - 1));
    } else {
      ++on_core[static_cast<size_t>(m.core)];
    }
  }
  if (!errors.empty()) throw ScenarioError(errors);
  std::vector<size_t> shared;
  for (const ScenarioModel& m : s.models) shared.push_back(on_core[static_cast<size_t>(m.core)]);
  return shared;
}

Scenario parse_scenario_text(const std::string& text, const std::string& source_name,
                             const std::string& dir) {
  Scenario s;
  s.path = source_name;
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    throw ScenarioError({fmt::format("{}:{}:{}: not valid YAML: {}", source_name, e.mark.line + 1,
                                     e.mark.column + 1, e.msg)});
  }
  Parser p(source_name, dir);
  p.read(root, s);
  if (!p.errors().empty()) throw ScenarioError(p.errors());
  return s;
}

Scenario parse_scenario_file(const std::string& path) {
  std::string text;
  try {
    text = read_yaml_text(path, "scenario");
  } catch (const YamlFileError& e) {
    throw ScenarioError(e.messages());
  }
  return parse_scenario_text(text, path, fs::path(path).parent_path().string());
}

}  // namespace npusim::sim::serve
