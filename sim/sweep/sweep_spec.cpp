#include "sim/sweep/sweep_spec.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "isa/machine/spec_text.h"
#include "sim/config/config_loader.h"
#include "sim/config/yaml_errors.h"
#include "sim/dynamic/generate_request.h"
#include "sim/dynamic/profiles.h"

namespace npusim::sim {
namespace {

namespace fs = std::filesystem;

std::string join(const std::vector<std::string>& v, const std::string& sep) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? sep : "") + v[i];
  return s;
}

// Collects problems with their file positions while the sweep file is read.
class Parser : public YamlErrors {
 public:
  Parser(std::string source, std::string dir) : YamlErrors(std::move(source)), dir_(std::move(dir)) {}

  // A path from the sweep file: relative paths are relative to the sweep file's folder.
  std::string relative_to_file(const std::string& p) const {
    if (p.empty() || fs::path(p).is_absolute()) return p;
    return (fs::path(dir_) / p).lexically_normal().string();
  }

  void read(const YAML::Node& root, SweepSpec& s) {
    if (!root.IsMap()) {
      error(root, "a sweep file is a mapping with at least 'axes:' (see docs/sweeps.md)");
      return;
    }
    static const std::vector<std::string> kKeys = {"name",      "base",      "set",      "axes",  "combine",
                                                   "timeout_s", "trace_csv", "run_args", "slurm", "scenario"};
    for (const auto& kv : root) {
      const std::string k = kv.first.Scalar();
      const YAML::Node& v = kv.second;
      if (k == "name") {
        scalar(v, "name", s.name);
      } else if (k == "base") {
        read_base(v, s);
      } else if (k == "set") {
        read_sets(v, s);
      } else if (k == "axes") {
        read_axes(v, s);
      } else if (k == "combine") {
        std::string c;
        if (scalar(v, "combine", c)) {
          if (c == "zip")
            s.zip = true;
          else if (c != "product")
            error(v, "combine: '" + c + "' is neither 'product' nor 'zip'");
        }
      } else if (k == "timeout_s") {
        std::string t;
        if (scalar(v, "timeout_s", t)) {
          try {
            s.timeout_s = v.as<double>();
          } catch (const YAML::Exception&) {
            error(v, "timeout_s: '" + t + "' is not a number of seconds");
          }
          if (s.timeout_s < 0) error(v, "timeout_s: must be >= 0");
        }
      } else if (k == "trace_csv") {
        try {
          s.trace_csv = v.as<bool>();
        } catch (const YAML::Exception&) {
          error(v, "trace_csv: expected true or false");
        }
      } else if (k == "run_args") {
        read_string_list(v, "run_args", s.run_args);
      } else if (k == "slurm") {
        read_slurm(v, s.slurm);
      } else if (k == "scenario") {
        std::string f;
        if (!scalar(v, "scenario", f)) continue;
        const std::string local = relative_to_file(f);
        std::error_code ec;
        if (!fs::is_regular_file(local, ec)) {
          error(v, "scenario: '" + f + "' does not exist");
          continue;
        }
        s.scenario = fs::absolute(local).lexically_normal().string();
      } else {
        std::string guess = isa::closest_name(k, kKeys);
        error(kv.first, k + ": unknown key" +
                            (guess.empty() ? " (valid: " + join(kKeys, ", ") + ")"
                                           : " (did you mean '" + guess + "'?)"));
      }
    }
    if (!root["axes"]) error(root, "the sweep has no 'axes:' list");
    if (!s.scenario.empty()) {
      // The scenario names its models, precisions and batches; a point varies the configuration.
      for (const Axis& a : s.axes) {
        for (const AxisColumn& c : a.columns) {
          if (c.kind == AxisKind::kModel || c.kind == AxisKind::kPrecision || c.kind == AxisKind::kBatch)
            error_at(c.line, c.column,
                     c.key +
                         ": a scenario sweep takes its models, precisions and batches from the scenario; "
                         "sweep configuration keys or config");
        }
      }
      if (root["trace_csv"] && s.trace_csv)
        error(root["trace_csv"], "trace_csv: a scenario run writes no trace CSV");
    }
    check_dynamic_axes(root, s);
    for (const Axis& a : s.axes) {
      for (const AxisColumn& c : a.columns) {
        if (c.kind == AxisKind::kPreset && !s.base.empty()) {
          error_at(c.line, c.column,
                   fmt::format("config: swept on an axis and also set by 'base: {}'; keep one", s.base));
        }
      }
    }
  }

 private:
  // The dynamic-shape axes between themselves and run_args: what `npusim run` would refuse at every point
  // (--requests without --dynamic, a policy without --requests) fails the file instead, and a request
  // stream needs one shape policy per point, so that each row holds one policy's latencies.
  void check_dynamic_axes(const YAML::Node& root, const SweepSpec& s) {
    const AxisColumn* col[4] = {nullptr, nullptr, nullptr, nullptr};  // generate, dynamic, requests, policy
    for (const Axis& a : s.axes)
      for (const AxisColumn& c : a.columns) {
        if (c.kind == AxisKind::kGenerate) col[0] = &c;
        if (c.kind == AxisKind::kDynamic) col[1] = &c;
        if (c.kind == AxisKind::kRequests) col[2] = &c;
        if (c.kind == AxisKind::kShapePolicy) col[3] = &c;
      }
    // A run argument's value (`--flag V` or `--flag=V`), if run_args has the flag.
    auto run_arg = [&](const std::string& flag) -> std::optional<std::string> {
      for (size_t i = 0; i < s.run_args.size(); ++i) {
        if (s.run_args[i] == flag) return i + 1 < s.run_args.size() ? s.run_args[i + 1] : std::string();
        if (s.run_args[i].rfind(flag + "=", 0) == 0) return s.run_args[i].substr(flag.size() + 1);
      }
      return std::nullopt;
    };
    auto at = [&](const AxisColumn* c, const std::string& m) { error_at(c->line, c->column, m); };
    const bool dynamic = col[1] || run_arg("--dynamic"), requests = col[2] || run_arg("--requests");
    if (!s.scenario.empty()) {
      for (const AxisColumn* c : col)
        if (c)
          at(c, c->key + ": a scenario sweep runs npusim serve, which has no dynamic shapes or generation");
      return;
    }
    if (col[0] && (dynamic || requests))
      at(col[0],
         "generate: runs the llm: decoder's prefill and decode steps; it does not combine with dynamic "
         "or requests");
    if (col[2] && !dynamic)
      at(col[2], "requests: needs the profiles to serve them on: a dynamic axis or --dynamic in run_args");
    const std::optional<std::string> policy = run_arg("--shape-policy");
    if (col[3] && policy) at(col[3], "shape_policy: swept on an axis and also given in run_args; keep one");
    if (col[3] && !requests)
      at(col[3],
         "shape_policy: a policy serves a request stream: add a requests axis or --requests in run_args");
    if (requests && !col[3] && (!policy || *policy == "all")) {
      const std::string m =
          "a request stream needs one shape policy per point (each row holds one policy's "
          "latencies): add '- shape_policy: [pad, recompile, dynamic]' to the axes";
      if (col[2])
        at(col[2], "requests: " + m);
      else
        error(root["run_args"], "run_args: --requests: " + m);
    }
  }

  void read_base(const YAML::Node& v, SweepSpec& s) {
    std::string b;
    if (!scalar(v, "base", b)) return;
    if (!b.empty()) b = config_argument(v, b, "base");
    s.base = b;
  }

  // The --config argument for a configuration named in the sweep file (`base:` or a `config` axis
  // value): a file next to the sweep file wins; otherwise the name goes to --config as is (a preset
  // or a path relative to where npusim runs). "" (after reporting at `at`) when it names nothing.
  std::string config_argument(const YAML::Node& at, const std::string& name,
                              const std::string& key = "config") {
    std::string b = name;
    const std::string local = relative_to_file(b);
    std::error_code ec;
    if (fs::is_regular_file(local, ec)) b = fs::absolute(local).lexically_normal().string();
    try {
      // The file by itself, as `npusim config -c FILE` reads it: a YAML error, an unknown key or a value
      // out of range fails every point, so the sweep, up front. Checks between keys wait for the point's
      // --set values (an invalid combination is a failed point).
      isa::NpuConfig c;
      load_declared_file(resolve_config_path(b), [&c](isa::Visitor& v) { c.visit(v); });
    } catch (const ConfigError& e) {
      for (const std::string& m : e.messages()) error(at, key + ": " + m);
      return "";
    }
    return b;
  }

  void read_sets(const YAML::Node& v, SweepSpec& s) {
    if (!v.IsMap()) {
      error(v, "set: expected a mapping of configuration keys to values");
      return;
    }
    for (const auto& kv : v) {
      const std::string key = kv.first.Scalar();
      std::string value;
      if (!scalar(kv.second, "set: " + key, value)) continue;
      if (check_config_value(kv.first, "set: ", key, value)) s.sets.push_back(key + "=" + value);
    }
  }

  void read_string_list(const YAML::Node& v, const std::string& what, std::vector<std::string>& out) {
    if (!v.IsSequence()) {
      error(v, what + ": expected a list of strings");
      return;
    }
    for (const auto& e : v) {
      std::string t;
      if (scalar(e, what, t)) out.push_back(t);
    }
  }

  void read_slurm(const YAML::Node& v, SlurmSpec& s) {
    if (!v.IsMap()) {
      error(v, "slurm: expected a mapping (tasks, partition, time, cpus_per_task, mem, extra)");
      return;
    }
    static const std::vector<std::string> kKeys = {"tasks",         "partition", "time",
                                                   "cpus_per_task", "mem",       "extra"};
    for (const auto& kv : v) {
      const std::string k = kv.first.Scalar();
      const YAML::Node& n = kv.second;
      auto positive = [&](int64_t& out) {
        std::string t;
        if (!scalar(n, "slurm." + k, t)) return;
        try {
          out = n.as<int64_t>();
        } catch (const YAML::Exception&) {
          out = -1;
        }
        if (out < 1) error(n, "slurm." + k + ": '" + t + "' is not a positive integer");
      };
      if (k == "tasks") {
        positive(s.tasks);
      } else if (k == "cpus_per_task") {
        positive(s.cpus_per_task);
      } else if (k == "partition") {
        scalar(n, "slurm.partition", s.partition);
      } else if (k == "time") {
        scalar(n, "slurm.time", s.time);
      } else if (k == "mem") {
        scalar(n, "slurm.mem", s.mem);
      } else if (k == "extra") {
        read_string_list(n, "slurm.extra", s.extra);
      } else {
        std::string guess = isa::closest_name(k, kKeys);
        error(kv.first, "slurm." + k + ": unknown key" +
                            (guess.empty() ? " (valid: " + join(kKeys, ", ") + ")"
                                           : " (did you mean '" + guess + "'?)"));
      }
    }
  }

  // Checks one "key=value" against the configuration's declaration; reports it at `at`.
  // Sets *unknown_key when the key itself is not a configuration key (the caller reports that once, not
  // once per value).
  bool check_config_value(const YAML::Node& at, const std::string& prefix, const std::string& key,
                          const std::string& value, bool* unknown_key = nullptr) {
    isa::NpuConfig c;
    std::vector<std::string> errs;
    apply_sets(c, {key + "=" + value}, errs);
    for (std::string m : errs) {
      if (unknown_key && m.find(": unknown key") != std::string::npos) *unknown_key = true;
      // apply_sets speaks of --set; here the value comes from the sweep file.
      for (const char* p : {"--set: ", "--set "})
        if (m.rfind(p, 0) == 0) m = m.substr(std::string(p).size());
      error(at, prefix + m);
    }
    return errs.empty();
  }

  void read_axes(const YAML::Node& v, SweepSpec& s) {
    if (!v.IsSequence() || v.size() == 0) {
      error(v,
            "axes: expected a non-empty list; each entry maps one key (or several zipped keys) to a list of "
            "values, e.g. '- systolic_array.rows: [8, 16, 32]'");
      return;
    }
    for (const auto& entry : v) {
      if (!entry.IsMap() || entry.size() == 0) {
        error(entry, "axes: each entry maps one or more keys to lists of values");
        continue;
      }
      Axis axis;
      for (const auto& kv : entry) {
        AxisColumn col;
        col.key = kv.first.Scalar();
        col.line = kv.first.Mark().line + 1;
        col.column = kv.first.Mark().column + 1;
        if (!kv.second.IsSequence() || kv.second.size() == 0) {
          error(kv.second, col.key + ": expected a non-empty list of values");
          continue;
        }
        if (col.key == "model")
          col.kind = AxisKind::kModel;
        else if (col.key == "precision")
          col.kind = AxisKind::kPrecision;
        else if (col.key == "batch")
          col.kind = AxisKind::kBatch;
        else if (col.key == "config")
          col.kind = AxisKind::kPreset;
        else if (col.key == "generate")
          col.kind = AxisKind::kGenerate;
        else if (col.key == "dynamic")
          col.kind = AxisKind::kDynamic;
        else if (col.key == "requests")
          col.kind = AxisKind::kRequests;
        else if (col.key == "shape_policy")
          col.kind = AxisKind::kShapePolicy;
        bool ok = true;
        bool unknown_key = false;
        for (const auto& e : kv.second) {
          if (col.kind == AxisKind::kModel) {
            ModelValue m;
            ok = read_model(e, m) && ok;
            col.values.push_back(m.name);
            col.models.push_back(m);
            continue;
          }
          std::string value;
          if (!scalar(e, col.key, value)) {
            ok = false;
            continue;
          }
          if (col.kind == AxisKind::kPreset) {
            const std::string arg = config_argument(e, value);
            ok = !arg.empty() && ok;
            col.configs.push_back(arg);
          } else if (col.kind == AxisKind::kConfig) {
            if (!unknown_key) ok = check_config_value(kv.first, "", col.key, value, &unknown_key) && ok;
            ok = ok && !unknown_key;
          } else if (col.kind == AxisKind::kPrecision) {
            // The values `npusim run --precision` accepts (sim/cli/cli.cpp): a typo fails the sweep up
            // front, not each of its points.
            static const std::vector<std::string> kPrecisions = {"fp32", "fp16", "bf16", "int8", "auto"};
            if (std::find(kPrecisions.begin(), kPrecisions.end(), value) == kPrecisions.end()) {
              const std::string guess = isa::closest_name(value, kPrecisions);
              error(e, "precision: '" + value + "' is not one of " + join(kPrecisions, ", ") +
                           (guess.empty() ? "" : " (did you mean '" + guess + "'?)"));
              ok = false;
            }
          } else if (col.kind == AxisKind::kGenerate || col.kind == AxisKind::kDynamic) {
            // The run's own parsers (sim/dynamic): a value `npusim run` would refuse fails the sweep here.
            try {
              if (col.kind == AxisKind::kGenerate)
                dynamic::parse_generate(value, "growing", 128);
              else
                dynamic::parse_dynamic_specs({value});
            } catch (const dynamic::DynamicUsageError& x) {
              error(e, col.key + ": " + x.what());
              ok = false;
            }
          } else if (col.kind == AxisKind::kRequests) {
            const std::string local = relative_to_file(value);
            std::error_code ec;
            if (!fs::is_regular_file(local, ec)) {
              error(e, "requests: '" + value + "' does not exist (looked for " + local + ")");
              ok = false;
            }
            col.files.push_back(fs::absolute(local).lexically_normal().string());
          } else if (col.kind == AxisKind::kShapePolicy) {
            // One policy per point (`all` would put three policies' figures in one row).
            static const std::vector<std::string> kPolicies = {"pad", "recompile", "dynamic"};
            if (std::find(kPolicies.begin(), kPolicies.end(), value) == kPolicies.end()) {
              error(e, "shape_policy: '" + value + "' is not one of " + join(kPolicies, ", ") +
                           " (one policy per point: each row of the results is one policy)");
              ok = false;
            }
          } else if (col.kind == AxisKind::kBatch) {
            int64_t b = 0;
            try {
              b = e.as<int64_t>();
            } catch (const YAML::Exception&) {
            }
            if (b < 1) {
              error(e, "batch: '" + value + "' is not a positive integer");
              ok = false;
            }
          }
          col.values.push_back(value);
        }
        for (const Axis& a : s.axes)
          for (const AxisColumn& c : a.columns)
            if (c.key == col.key)
              error(kv.first, col.key + ": swept twice (first at line " + std::to_string(c.line) + ")");
        for (const AxisColumn& c : axis.columns)
          if (c.key == col.key) error(kv.first, col.key + ": swept twice");
        if (ok && !axis.columns.empty() && col.values.size() != axis.size()) {
          error(kv.first,
                fmt::format("{}: {} values, but {} in this zipped axis has {}; zipped lists must be "
                            "equally long",
                            col.key, col.values.size(), axis.columns.front().key, axis.size()));
          continue;
        }
        if (ok) axis.columns.push_back(std::move(col));
      }
      if (!axis.columns.empty()) s.axes.push_back(std::move(axis));
    }
  }

  // A model value: a string ("default", a path, a micro-model like gemm:M=64,N=64,K=64) or a mapping
  // {name, path, prepare}.
  bool read_model(const YAML::Node& e, ModelValue& m) {
    std::string text;
    if (e.IsMap()) {
      for (const auto& kv : e) {
        const std::string k = kv.first.Scalar();
        std::string v;
        if (!scalar(kv.second, "model." + k, v)) return false;
        if (k == "name")
          m.name = v;
        else if (k == "path")
          text = v;
        else if (k == "prepare")
          m.prepare = v;
        else {
          error(kv.first, "model." + k + ": unknown key (valid: name, path, prepare)");
          return false;
        }
      }
      if (text.empty()) {
        error(e, "model: a model given as a mapping needs 'path:' (and optionally 'name:', 'prepare:')");
        return false;
      }
    } else if (!scalar(e, "model", text)) {
      return false;
    }
    if (text == "default") {
      m.arg.clear();
      if (m.name.empty()) m.name = "default";
      return true;
    }
    // Micro-models (gemm:..., conv:...) pass as they are; anything else is a file, relative to the
    // sweep file.
    const bool micro = text.find(':') != std::string::npos && !fs::exists(text);
    if (micro) {
      m.arg = text;
      if (m.name.empty()) m.name = text;
      return true;
    }
    const std::string path = fs::absolute(relative_to_file(text)).lexically_normal().string();
    m.arg = path;
    if (m.name.empty()) m.name = fs::path(text).stem().string();
    std::error_code ec;
    if (m.prepare.empty() && !fs::exists(path, ec)) {
      error(e, "model: '" + text + "' does not exist (looked for " + path +
                   "); give an existing file, 'default', a micro-model, or a mapping with 'prepare:'");
      return false;
    }
    return true;
  }

  std::string dir_;
};

}  // namespace

SweepError::SweepError(std::vector<std::string> messages)
    : std::runtime_error(join(messages, "\n")), messages_(std::move(messages)) {}

std::vector<std::string> SweepSpec::column_keys() const {
  std::vector<std::string> keys;
  for (const Axis& a : axes)
    for (const AxisColumn& c : a.columns) keys.push_back(c.key);
  return keys;
}

std::vector<std::string> SweepPoint::run_command(const std::string& base) const {
  std::vector<std::string> argv = {scenario.empty() ? "run" : "serve"};
  if (!scenario.empty()) argv.push_back(scenario);
  if (!model.empty()) argv.push_back(model);
  if (!config.empty() || !base.empty()) {
    argv.push_back("--config");
    argv.push_back(config.empty() ? base : config);
  }
  for (const std::string& s : sets) {
    argv.push_back("--set");
    argv.push_back(s);
  }
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

std::string stable_hash(const std::string& text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return fmt::format("{:016x}", h);
}

SweepSpec parse_sweep_text(const std::string& text, const std::string& source_name, const std::string& dir) {
  SweepSpec s;
  s.path = source_name;
  s.name = fs::path(source_name).stem().string();
  Parser p(source_name, dir);
  try {
    const YAML::Node root = YAML::Load(text);
    p.read(root, s);
  } catch (const YAML::Exception& e) {
    p.error(e.mark, "invalid YAML: " + e.msg);
  }
  if (!p.errors().empty()) throw SweepError(p.errors());
  return s;
}

SweepSpec parse_sweep_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::error_code ec;
  if (!in || fs::is_directory(path, ec)) throw SweepError({path + ": cannot read the sweep file"});
  std::ostringstream text;
  text << in.rdbuf();
  return parse_sweep_text(text.str(), path, fs::absolute(path).parent_path().string());
}

std::vector<SweepPoint> expand_points(const SweepSpec& spec) {
  // Index tuples: the product (last axis fastest) or the zip of all axes.
  std::vector<std::vector<size_t>> tuples;
  const size_t n_axes = spec.axes.size();
  if (spec.zip) {
    size_t n = n_axes ? spec.axes.front().size() : 0;
    for (const Axis& a : spec.axes) {
      if (a.size() != n)
        throw SweepError(
            {fmt::format("{}:{}:{}: combine: zip needs axes of equal length, but {} has {} values and {} "
                         "has {}",
                         spec.path, a.columns.front().line, a.columns.front().column,
                         spec.axes.front().columns.front().key, n, a.columns.front().key, a.size())});
    }
    for (size_t i = 0; i < n; ++i) tuples.push_back(std::vector<size_t>(n_axes, i));
  } else {
    std::vector<size_t> idx(n_axes, 0);
    bool empty = n_axes == 0;
    for (const Axis& a : spec.axes) empty = empty || a.size() == 0;
    while (!empty) {
      tuples.push_back(idx);
      size_t k = n_axes;
      while (k > 0) {
        --k;
        if (++idx[k] < spec.axes[k].size()) break;
        idx[k] = 0;
        if (k == 0) empty = true;
      }
      if (n_axes == 0) break;
    }
  }

  // The configuration file's contents are part of every point's identity: editing it invalidates old
  // results.
  auto config_text = [](const std::string& config) {
    if (config.empty()) return std::string();
    std::ifstream in(resolve_config_path(config), std::ios::binary);
    std::ostringstream t;
    t << in.rdbuf();
    return t.str();
  };
  std::vector<SweepPoint> points;
  for (const std::vector<size_t>& t : tuples) {
    SweepPoint p;
    p.index = points.size();
    p.scenario = spec.scenario;
    p.sets = spec.sets;
    std::vector<std::string> axis_args;
    for (size_t a = 0; a < n_axes; ++a) {
      for (const AxisColumn& c : spec.axes[a].columns) {
        const std::string& v = c.values[t[a]];
        p.values.emplace_back(c.key, v);
        switch (c.kind) {
          case AxisKind::kConfig:
            p.sets.push_back(c.key + "=" + v);
            break;
          case AxisKind::kModel:
            p.model = c.models[t[a]].arg;
            p.prepare = c.models[t[a]].prepare;
            break;
          case AxisKind::kPrecision:
            axis_args.insert(axis_args.end(), {"--precision", v});
            break;
          case AxisKind::kBatch:
            axis_args.insert(axis_args.end(), {"--batch", v});
            break;
          case AxisKind::kPreset:
            p.config = c.configs[t[a]];
            break;
          case AxisKind::kGenerate:
            axis_args.insert(axis_args.end(), {"--generate", v});
            break;
          case AxisKind::kDynamic:
            axis_args.insert(axis_args.end(), {"--dynamic", v});
            break;
          case AxisKind::kRequests:
            p.requests = c.files[t[a]];
            axis_args.insert(axis_args.end(), {"--requests", p.requests});
            break;
          case AxisKind::kShapePolicy:
            axis_args.insert(axis_args.end(), {"--shape-policy", v});
            break;
        }
      }
    }
    p.args = axis_args;
    p.args.insert(p.args.end(), spec.run_args.begin(), spec.run_args.end());
    // A scenario sweep without base or config axis runs the scenario's own config: left to the serve
    // run (array_pes and sram_kib stay 0).
    if (p.scenario.empty() || !p.config.empty() || !spec.base.empty()) {
      try {
        const isa::NpuConfig c = load_config(p.config.empty() ? spec.base : p.config, p.sets);
        p.array_pes = c.systolic_array.rows * c.systolic_array.cols;
        p.sram_kib = c.sram.input.size_kib + c.sram.weight.size_kib + c.sram.accumulator.size_kib;
      } catch (const ConfigError& e) {
        std::string m;
        for (const std::string& line : e.messages()) m += (m.empty() ? "" : "; ") + line;
        p.config_error = "invalid configuration: " + m;
      }
    }
    // The identity is the full command line (and the base config's name): a point is the same point
    // if and only if it would run the same simulation.
    const std::string config = p.config.empty() ? spec.base : p.config;
    std::string ident = config + '\x1f' + config_text(config);
    if (!p.scenario.empty()) ident += '\x1f' + config_text(p.scenario);
    if (!p.requests.empty()) ident += '\x1f' + config_text(p.requests);
    for (const std::string& s : p.run_command("")) ident += '\x1f' + s;
    p.id = stable_hash(ident);
    points.push_back(std::move(p));
  }
  return points;
}

}  // namespace npusim::sim
