#include "sim/e2e/pipeline_spec.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <map>

#include "isa/machine/spec_text.h"
#include "sim/config/yaml_errors.h"

namespace npusim::sim::e2e {
namespace {

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i];
  return s;
}

// The parameters each kernel takes besides name, op and on; `required` ones must be given.
struct KernelKeys {
  std::vector<std::string> optional;
  std::vector<std::string> required;
};
KernelKeys kernel_keys(Kernel k) {
  switch (k) {
    case Kernel::kResize:
      return {{"mode"}, {"width", "height"}};
    case Kernel::kPad:
      return {{}, {"width", "height"}};
    case Kernel::kArgmax:
      return {{"elements"}, {}};
    case Kernel::kTopk:
      return {{"elements"}, {"k"}};
    case Kernel::kNms:
      return {{}, {"boxes"}};
    case Kernel::kCtcGreedy:
      return {{}, {"timesteps", "classes"}};
    case Kernel::kFixed:
      return {{}, {"time_us"}};
    default:
      return {};
  }
}

// Collects problems with their file positions while the pipeline file is read.
class Parser : public YamlErrors {
 public:
  explicit Parser(std::string source) : YamlErrors(std::move(source)) {}

  void read(const YAML::Node& root, PipelineSpec& p) {
    if (!root.IsMap()) {
      error(root, "a pipeline file is a mapping of frame, pre, input, output, post and stream (docs/e2e.md)");
      return;
    }
    for (const auto& kv : root) {
      const std::string k = kv.first.Scalar();
      const YAML::Node& v = kv.second;
      if (k == "frame") {
        read_frame(v, p);
      } else if (k == "pre") {
        read_stages(v, "pre", p.pre);
      } else if (k == "post") {
        read_stages(v, "post", p.post);
      } else if (k == "input") {
        read_transfer(v, "input", p.input);
      } else if (k == "output") {
        read_transfer(v, "output", p.output);
      } else if (k == "stream") {
        read_stream(v, p.stream);
      } else {
        unknown(kv.first, "", k, {"frame", "pre", "input", "output", "post", "stream"});
      }
    }
    for (size_t i = 0; i < p.post.size(); ++i) {
      const StageSpec& s = p.post[i];
      if (s.on == Placement::kNpu) {
        error_at(
            s.line, s.column,
            fmt::format("post[{}].on: npu: post-processing runs on the host (only pre-processing stages can "
                        "be inserted on the NPU)",
                        i));
      }
    }
    bool npu_seen = false;
    for (size_t i = 0; i < p.pre.size(); ++i) {
      const StageSpec& s = p.pre[i];
      if (s.on == Placement::kNpu) npu_seen = true;
      if (s.on == Placement::kHost && npu_seen) {
        error_at(
            s.line, s.column,
            fmt::format("pre[{}].on: a host stage after an NPU stage; the NPU stages run after the input "
                        "transfer, so they come last",
                        i));
      }
    }
  }

 private:
  bool map(const YAML::Node& n, const std::string& key) {
    if (n.IsMap()) return true;
    error(n, key + ": expected a mapping of keys");
    return false;
  }

  void read_frame(const YAML::Node& n, PipelineSpec& p) {
    if (!map(n, "frame")) return;
    for (const auto& kv : n) {
      const std::string k = kv.first.Scalar();
      const std::string key = "frame." + k;
      if (k == "width") {
        integer(kv.second, key, p.frame_width, 1, 1 << 16);
      } else if (k == "height") {
        integer(kv.second, key, p.frame_height, 1, 1 << 16);
      } else if (k == "channels") {
        integer(kv.second, key, p.frame_channels, 1, 64);
      } else if (k == "bytes_per_element") {
        integer(kv.second, key, p.frame_bytes_per_element, 1, 8);
      } else {
        unknown(kv.first, "frame.", k, {"width", "height", "channels", "bytes_per_element"});
      }
    }
    if (!n["width"] || !n["height"]) error(n, "frame: needs width and height");
  }

  void read_transfer(const YAML::Node& n, const std::string& what, TransferSpec& t) {
    if (!map(n, what)) return;
    for (const auto& kv : n) {
      const std::string k = kv.first.Scalar();
      const std::string key = what + "." + k;
      if (k == "transfer") {
        std::string v;
        if (!scalar(kv.second, key, v)) continue;
        if (v == "zero_copy")
          t.zero_copy = true;
        else if (v == "copy")
          t.zero_copy = false;
        else
          error(kv.second, key + ": '" + v + "' is neither 'copy' nor 'zero_copy'");
      } else if (k == "host_alignment_bytes") {
        integer(kv.second, key, t.host_alignment_bytes, 1, int64_t{1} << 30);
      } else {
        unknown(kv.first, what + ".", k, {"transfer", "host_alignment_bytes"});
      }
    }
  }

  void read_stream(const YAML::Node& n, StreamSpec& s) {
    s.enabled = true;
    if (!map(n, "stream")) return;
    for (const auto& kv : n) {
      const std::string k = kv.first.Scalar();
      const std::string key = "stream." + k;
      if (k == "frames") {
        integer(kv.second, key, s.frames, 1, 1000000);
      } else if (k == "rate_fps") {
        real(kv.second, key, s.rate_fps, 0, 1e6);
      } else if (k == "buffers") {
        integer(kv.second, key, s.buffers, 1, 64);
      } else if (k == "batch") {
        integer(kv.second, key, s.batch, 1, 65536);
        s.batch_line = kv.first.Mark().line + 1;
        s.batch_column = kv.first.Mark().column + 1;
      } else {
        unknown(kv.first, "stream.", k, {"frames", "rate_fps", "buffers", "batch"});
      }
    }
  }

  void read_stages(const YAML::Node& n, const std::string& list, std::vector<StageSpec>& out) {
    if (!n.IsSequence()) {
      error(n, list + ": expected a list of stages (- op: ...)");
      return;
    }
    std::map<std::string, int> uses;
    for (size_t i = 0; i < n.size(); ++i) {
      const YAML::Node& s = n[i];
      const std::string where = fmt::format("{}[{}]", list, i);
      if (!map(s, where)) continue;
      StageSpec st;
      st.line = s.Mark().line + 1;
      st.column = s.Mark().column + 1;
      if (!s["op"]) {
        error(s, where + ".op: missing (one of " + join(kernel_names()) + ")");
        continue;
      }
      std::string op;
      if (!scalar(s["op"], where + ".op", op)) continue;
      const std::optional<Kernel> kernel = kernel_from_name(op);
      if (!kernel) {
        const std::string guess = isa::closest_name(op, kernel_names());
        error(s["op"], where + ".op: '" + op + "' is not a kernel" +
                           (guess.empty() ? " (one of " + join(kernel_names()) + ")"
                                          : " (did you mean '" + guess + "'?)"));
        continue;
      }
      st.kernel = *kernel;
      const KernelKeys keys = kernel_keys(st.kernel);
      std::vector<std::string> valid = {"name", "op", "on"};
      valid.insert(valid.end(), keys.optional.begin(), keys.optional.end());
      valid.insert(valid.end(), keys.required.begin(), keys.required.end());
      for (const std::string& r : keys.required) {
        if (!s[r]) error(s, fmt::format("{}.{}: missing ({} needs {})", where, r, op, join(keys.required)));
      }
      for (const auto& kv : s) {
        const std::string k = kv.first.Scalar();
        const std::string key = where + "." + k;
        const YAML::Node& v = kv.second;
        if (std::find(valid.begin(), valid.end(), k) == valid.end()) {
          static const std::vector<std::string> kAll = {"name",   "op",        "on",       "width",
                                                        "height", "mode",      "elements", "k",
                                                        "boxes",  "timesteps", "classes",  "time_us"};
          if (std::find(kAll.begin(), kAll.end(), k) != kAll.end()) {
            error(kv.first, fmt::format("{}: {} takes no '{}' (its keys: {})", key, op, k, join(valid)));
          } else {
            unknown(kv.first, where + ".", k, valid);
          }
          continue;
        }
        if (k == "op") continue;
        if (k == "name") {
          scalar(v, key, st.name);
        } else if (k == "on") {
          std::string on;
          if (!scalar(v, key, on)) continue;
          if (on == "host") {
            st.on = Placement::kHost;
          } else if (on == "npu") {
            st.on = Placement::kNpu;
            if (!runs_on_npu(st.kernel))
              error(v, key + ": " + op +
                           " cannot run on the NPU's vector unit (normalize, convert_color, layout "
                           "and cast can)");
          } else {
            error(v, key + ": '" + on + "' is neither 'host' nor 'npu'");
          }
        } else if (k == "mode") {
          std::string m;
          if (!scalar(v, key, m)) continue;
          if (m == "nearest")
            st.nearest = true;
          else if (m != "bilinear")
            error(v, key + ": '" + m + "' is neither 'bilinear' nor 'nearest'");
        } else if (k == "width") {
          integer(v, key, st.width, 1, 1 << 16);
        } else if (k == "height") {
          integer(v, key, st.height, 1, 1 << 16);
        } else if (k == "elements") {
          integer(v, key, st.elements, 1, int64_t{1} << 40);
        } else if (k == "k") {
          integer(v, key, st.k, 1, int64_t{1} << 30);
        } else if (k == "boxes") {
          integer(v, key, st.boxes, 1, 1000000);
        } else if (k == "timesteps") {
          integer(v, key, st.timesteps, 1, int64_t{1} << 30);
        } else if (k == "classes") {
          integer(v, key, st.classes, 1, int64_t{1} << 30);
        } else if (k == "time_us") {
          real(v, key, st.time_us, 0, 1e9);
        }
      }
      const int n_use = ++uses[op];
      if (st.name.empty()) st.name = n_use == 1 ? op : fmt::format("{}{}", op, n_use);
      out.push_back(st);
    }
  }
};

}  // namespace

PipelineSpec parse_pipeline_text(const std::string& text, const std::string& source_name) {
  PipelineSpec p;
  p.path = source_name;
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    throw PipelineError({fmt::format("{}:{}:{}: not valid YAML: {}", source_name, e.mark.line + 1,
                                     e.mark.column + 1, e.msg)});
  }
  Parser parser(source_name);
  parser.read(root, p);
  if (!parser.errors().empty()) throw PipelineError(parser.errors());
  return p;
}

PipelineSpec parse_pipeline_file(const std::string& path) {
  std::string text;
  try {
    text = read_yaml_text(path, "pipeline");
  } catch (const YamlFileError& e) {
    throw PipelineError(e.messages());
  }
  return parse_pipeline_text(text, path);
}

}  // namespace npusim::sim::e2e
