#include "sim/config/config_loader.h"

#include <fmt/format.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/exceptions.h>
#include <yaml-cpp/parser.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <tuple>
#include <unordered_map>

#include "isa/machine/spec_text.h"

#ifndef NPUSIM_CONFIGS_DIR
#error "NPUSIM_CONFIGS_DIR must be defined by the build (the source tree's configs/ directory)"
#endif

namespace npusim::sim {
namespace {

using isa::ParamInfo;

std::string join(const std::vector<std::string>& v, std::string_view sep) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) s += sep;
    s += v[i];
  }
  return s;
}

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

std::string dotted(const std::string& parent, std::string_view key) {
  return parent.empty() ? std::string(key) : parent + "." + std::string(key);
}

// A user-supplied text as it appears in a message: bounded length, control characters escaped, quoted
// when it would otherwise be invisible or ambiguous.
std::string show(std::string_view text) {
  constexpr size_t kMax = 60;
  std::string s;
  bool quote = text.empty() || text.front() == ' ' || text.back() == ' ';
  for (size_t i = 0; i < text.size() && i < kMax; ++i) {
    const unsigned char ch = static_cast<unsigned char>(text[i]);
    if (ch == '\n') {
      s += "\\n";
      quote = true;
    } else if (ch < 0x20 || ch == 0x7f) {
      s += fmt::format("\\x{:02x}", ch);
      quote = true;
    } else {
      s += static_cast<char>(ch);
    }
  }
  if (text.size() > kMax) s += "...";
  return quote ? "\"" + s + "\"" : s;
}

// "file:line:column" (1-based) of a YAML position, or just the file when the position is unknown.
std::string position(const std::string& source, const YAML::Mark& m) {
  if (m.is_null() || m.line < 0) return source;
  return fmt::format("{}:{}:{}", source, m.line + 1, m.column + 1);
}

// Every parameter's full path and leaf key, for suggestions across levels.
const std::vector<ParamInfo>& declared_params() {
  static const std::vector<ParamInfo> params = isa::list_params(isa::NpuConfig{});
  return params;
}

// A suggestion for an unknown key `name` at a level whose valid keys are `level_keys`: the closest key
// at that level, else a parameter elsewhere with (nearly) that name, else the list of valid keys.
// `params`: the whole declaration (default: the NPU configuration's).
std::string suggestion(std::string_view name, const std::vector<std::string>& level_keys,
                       const std::vector<ParamInfo>& params = declared_params()) {
  std::string guess = isa::closest_name(name, level_keys);
  if (!guess.empty()) return " (did you mean '" + guess + "'?)";
  std::vector<std::string> leaves, paths;
  for (const ParamInfo& p : params) {
    leaves.push_back(p.key);
    paths.push_back(p.path);
  }
  guess = isa::closest_name(name, leaves);
  if (!guess.empty()) {
    // Several groups may share the leaf (every scratchpad has size_kib): name them all.
    std::vector<std::string> where;
    for (size_t i = 0; i < leaves.size(); ++i)
      if (leaves[i] == guess) where.push_back("'" + paths[i] + "'");
    if (where.size() <= 3) return " (did you mean " + join(where, " or ") + "?)";
  }
  if (level_keys.empty()) return "";
  return " (valid keys here: " + join(level_keys, ", ") + ")";
}

// What a parameter expects, for "missing value" and wrong-shape messages.
std::string expectation(ParamInfo::Kind kind, const std::string& allowed) {
  switch (kind) {
    case ParamInfo::Kind::kInteger:
      return "an integer in " + allowed;
    case ParamInfo::Kind::kReal:
      return "a number in " + allowed;
    case ParamInfo::Kind::kBoolean:
      return "true or false";
    case ParamInfo::Kind::kChoice:
      return "one of " + allowed;
    case ParamInfo::Kind::kGroup:
      return "a mapping of keys";
  }
  return "";
}

// A YAML document as the loader needs it: nodes with positions, tags and map entries in order.
// Built directly from yaml-cpp's parser events (one pass, no YAML::Node), which also lets the loader
// stop on the documents yaml-cpp 0.7's LoadAll() would loop on forever (see read_document()).
struct Tree {
  enum class Kind { kNull, kScalar, kSequence, kMap };
  struct Node {
    Kind kind = Kind::kNull;
    YAML::Mark mark;
    std::string tag;  // "?" plain scalar, "!" quoted scalar, or an explicit tag
    std::string scalar;
    std::vector<size_t> items;  // sequence: elements; map: key, value, key, value, ...
  };
  std::vector<Node> nodes;
  std::vector<size_t> roots;  // one per document
  std::vector<YAML::Mark> document_starts;
};

class TreeBuilder final : public YAML::EventHandler {
 public:
  explicit TreeBuilder(Tree& t) : t_(t) {}
  void OnDocumentStart(const YAML::Mark& m) override {
    t_.document_starts.push_back(m);
    open_.clear();
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& m, YAML::anchor_t anchor) override {
    add(Tree::Kind::kNull, m, "", "", anchor);
  }
  void OnAlias(const YAML::Mark& m, YAML::anchor_t anchor) override {
    // The parser has checked that the anchor exists; an alias shares the anchored node (a DAG, maybe
    // a cycle: `&a [*a]`; the reader only descends along declared groups, so that is harmless).
    auto it = anchors_.find(anchor);
    if (it == anchors_.end()) {
      add(Tree::Kind::kNull, m, "", "", 0);
    } else {
      attach(it->second);
    }
  }
  void OnScalar(const YAML::Mark& m, const std::string& tag, YAML::anchor_t anchor,
                const std::string& value) override {
    add(Tree::Kind::kScalar, m, tag, value, anchor);
  }
  void OnSequenceStart(const YAML::Mark& m, const std::string& tag, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value) override {
    open_.push_back(add(Tree::Kind::kSequence, m, tag, "", anchor));
  }
  void OnSequenceEnd() override { close(); }
  void OnMapStart(const YAML::Mark& m, const std::string& tag, YAML::anchor_t anchor,
                  YAML::EmitterStyle::value) override {
    open_.push_back(add(Tree::Kind::kMap, m, tag, "", anchor));
  }
  void OnMapEnd() override { close(); }

 private:
  size_t add(Tree::Kind kind, const YAML::Mark& m, const std::string& tag, const std::string& value,
             YAML::anchor_t anchor) {
    const size_t i = t_.nodes.size();
    t_.nodes.push_back({kind, m, tag, value, {}});
    if (anchor != 0) anchors_[anchor] = i;
    attach(i);
    return i;
  }
  void attach(size_t i) {
    if (open_.empty())
      t_.roots.push_back(i);
    else
      t_.nodes[open_.back()].items.push_back(i);
  }
  void close() {
    if (!open_.empty()) open_.pop_back();
  }
  Tree& t_;
  std::vector<size_t> open_;
  std::unordered_map<YAML::anchor_t, size_t> anchors_;
};

// Parses `text`, which must hold exactly one YAML document, into `tree`; returns its root, or nullopt
// after reporting why not. Syntax errors propagate as YAML::Exception.
std::optional<size_t> read_document(const std::string& text, const std::string& source, Tree& tree,
                                    std::vector<std::string>& errors) {
  std::istringstream in(text);
  YAML::Parser parser(in);
  TreeBuilder builder(tree);
  // yaml-cpp 0.7 reports an empty document for a token it cannot place (a stray ',' at the top
  // level) without consuming it, so LoadAll() never returns (upstream issue #1040, fixed after 0.7 by
  // PR #1319). Stopping at the second document bounds the work.
  while (tree.document_starts.size() < 2 && parser.HandleNextDocument(builder)) {
  }
  if (tree.document_starts.size() >= 2) {
    const YAML::Mark m = tree.document_starts[1];
    const size_t at = m.pos < 0 ? text.size() : static_cast<size_t>(m.pos);
    if (at + 3 <= text.size() && text.compare(at, 3, "---") == 0) {
      errors.push_back(position(source, m) + ": a second YAML document; a configuration is one document");
    } else {
      const std::string what = at < text.size() ? "'" + show(text.substr(at, 1)) + "'" : "end of input";
      errors.push_back(position(source, m) + ": invalid YAML: unexpected " + what);
    }
    return std::nullopt;
  }
  if (tree.roots.empty() || tree.nodes[tree.roots[0]].kind == Tree::Kind::kNull) {
    errors.push_back(source +
                     ": the configuration is empty (give at least one key, or '{}' for the defaults)");
    return std::nullopt;
  }
  return tree.roots[0];
}

const char* describe(const Tree::Node& n) {
  switch (n.kind) {
    case Tree::Kind::kMap:
      return "a mapping";
    case Tree::Kind::kSequence:
      return "a list";
    case Tree::Kind::kScalar:
      return "a single value";
    case Tree::Kind::kNull:
      return "nothing";
  }
  return "something else";
}

// A parameter the user gave: where (file:line:column or "--set") and in which layer of the
// configuration (0 = the file, i = the i-th --set), for the checks that depend on the final values.
struct Given {
  std::string path;
  std::string where;
  int layer;
};

// Reads a YAML document into a declared struct (an NpuConfig, a pre-processing description), walking
// its visit(); keys the walk never asks for are unknown. Values the document does not give keep their
// defaults. `params` is the struct's whole declaration, for suggestions across levels.
class YamlReader final : public isa::PathVisitor {
 public:
  YamlReader(const Tree& tree, std::string source, std::vector<std::string>& errors,
             std::vector<Given>& given, const std::vector<ParamInfo>& params = declared_params())
      : tree_(tree), source_(std::move(source)), errors_(errors), given_(given), params_(params) {}

  void read(size_t root, isa::NpuConfig& c) {
    read(
        root, [&c](isa::Visitor& v) { c.visit(v); }, "(e.g. 'systolic_array:'), ");
  }
  void read(size_t root, const std::function<void(isa::Visitor&)>& visit, const std::string& example = "") {
    frames_.push_back({std::nullopt, "", {}});
    if (node(root).kind == Tree::Kind::kMap) {
      frames_.back().map = root;
    } else {
      error(node(root).mark,
            "expected a mapping of configuration keys " + example + "got " + describe(node(root)));
    }
    visit(*this);
    check_keys(frames_.back());
    frames_.pop_back();
    // Report in file order, as a reader goes through the file (the walk follows the declaration).
    std::stable_sort(found_.begin(), found_.end(), [](const Found& a, const Found& b) {
      return std::tie(a.line, a.column) < std::tie(b.line, b.column);
    });
    for (Found& f : found_) errors_.push_back(std::move(f.message));
  }

 protected:
  void on_group_begin(const std::string& path, std::string_view key, std::string_view) override {
    frames_.back().declared.emplace_back(key);
    std::optional<size_t> child;
    if (auto e = lookup(frames_.back(), key)) {
      const Tree::Node& v = node(e->value);
      if (v.kind == Tree::Kind::kMap) {
        child = e->value;
      } else if (v.kind != Tree::Kind::kNull) {  // "group:" with nothing under it keeps the defaults
        error(mark_of(*e),
              path + ": expected a mapping of keys under '" + std::string(key) + ":', got " + describe(v));
      }
    }
    frames_.push_back({child, path, {}});
  }
  void on_group_end(const std::string&) override {
    check_keys(frames_.back());
    frames_.pop_back();
  }

  void on_integer(const std::string& path, const isa::Param& p, int64_t& value, int64_t min,
                  int64_t max) override {
    const std::string allowed = fmt::format("{}..{}", min, max);
    if (auto s = scalar(path, p.key, ParamInfo::Kind::kInteger, allowed, true))
      report(*s, path, isa::parse_integer(s->text, min, max, value));
  }
  void on_real(const std::string& path, const isa::Param& p, double& value, double min, double max) override {
    const std::string allowed = isa::format_real(min) + ".." + isa::format_real(max);
    if (auto s = scalar(path, p.key, ParamInfo::Kind::kReal, allowed, true))
      report(*s, path, isa::parse_real(s->text, min, max, value));
  }
  void on_boolean(const std::string& path, const isa::Param& p, bool& value) override {
    if (auto s = scalar(path, p.key, ParamInfo::Kind::kBoolean, "true, false", true))
      report(*s, path, isa::parse_boolean(s->text, value));
  }
  void on_choice(const std::string& path, const isa::Param& p, int& index,
                 const std::vector<std::string_view>& names) override {
    std::vector<std::string> n(names.begin(), names.end());
    if (auto s = scalar(path, p.key, ParamInfo::Kind::kChoice, join(n, ", "), false))
      report(*s, path, isa::parse_choice(s->text, names, index));
  }

 private:
  struct Frame {
    std::optional<size_t> map;  // the mapping given for this group, if any
    std::string path;
    std::vector<std::string> declared;  // keys the declaration has at this level, in order
  };
  struct Entry {
    size_t key, value;
  };
  struct Scalar {
    std::string text;
    YAML::Mark mark;
  };

  const Tree::Node& node(size_t i) const { return tree_.nodes[i]; }

  // The first entry of the frame's mapping whose key is the plain name `key`.
  std::optional<Entry> lookup(const Frame& f, std::string_view key) const {
    if (!f.map) return std::nullopt;
    const std::vector<size_t>& items = node(*f.map).items;
    for (size_t i = 0; i + 1 < items.size(); i += 2) {
      const Tree::Node& k = node(items[i]);
      if (k.kind == Tree::Kind::kScalar && k.scalar == key) return Entry{items[i], items[i + 1]};
    }
    return std::nullopt;
  }

  // A value's own position, or its key's when the value is empty (yaml-cpp places an empty value at
  // the next token, often on a later line).
  YAML::Mark mark_of(const Entry& e) const {
    const Tree::Node& v = node(e.value);
    return v.kind == Tree::Kind::kNull || v.mark.is_null() ? node(e.key).mark : v.mark;
  }

  // The scalar text given for parameter `key` at the current level, or nullopt (after reporting why)
  // when it is absent or not a single value of the right form.
  std::optional<Scalar> scalar(const std::string& path, std::string_view key, ParamInfo::Kind kind,
                               const std::string& allowed, bool plain_only) {
    Frame& f = frames_.back();
    f.declared.emplace_back(key);
    std::optional<Entry> e = lookup(f, key);
    if (!e) return std::nullopt;
    const Tree::Node& v = node(e->value);
    const YAML::Mark m = mark_of(*e);
    if (v.kind == Tree::Kind::kNull) {
      error(m, path + ": missing value (expected " + expectation(kind, allowed) + ")");
      return std::nullopt;
    }
    if (v.kind != Tree::Kind::kScalar) {
      error(m, path + ": expected " + expectation(kind, allowed) + ", got " + describe(v));
      return std::nullopt;
    }
    // A quoted or !!str-tagged value is a string in YAML; numbers and booleans are written bare.
    if (plain_only && (v.tag == "!" || v.tag == "tag:yaml.org,2002:str")) {
      error(m, path + " = \"" + show(v.scalar) + "\" is a quoted string; write " +
                   expectation(kind, allowed) + " without quotes");
      return std::nullopt;
    }
    return Scalar{v.scalar, m};
  }

  void report(const Scalar& s, const std::string& path, const std::string& reason) {
    if (!reason.empty())
      error(s.mark, path + " = " + show(s.text) + " " + reason);
    else
      given_.push_back({path, position(source_, s.mark), 0});
  }

  // Keys of the current mapping that the declaration did not ask for, duplicates, and non-name keys.
  void check_keys(const Frame& f) {
    if (!f.map) return;
    std::unordered_map<std::string, int> first_line;
    const std::vector<size_t>& items = node(*f.map).items;
    for (size_t i = 0; i + 1 < items.size(); i += 2) {
      const Tree::Node& k = node(items[i]);
      if (k.kind != Tree::Kind::kScalar) {
        error(k.mark, (f.path.empty() ? std::string("top level") : f.path) +
                          ": a key must be a plain name, got " + describe(k));
        continue;
      }
      const std::string full = dotted(f.path, show(k.scalar));
      auto [seen, inserted] = first_line.emplace(k.scalar, k.mark.line + 1);
      if (!inserted) {
        error(k.mark, full + ": duplicate key (first given on line " + std::to_string(seen->second) + ")");
        continue;
      }
      if (std::find(f.declared.begin(), f.declared.end(), k.scalar) == f.declared.end())
        error(k.mark, full + ": unknown key" + suggestion(k.scalar, f.declared, params_));
    }
  }

  void error(const YAML::Mark& m, const std::string& msg) {
    found_.push_back(
        {m.is_null() ? -1 : m.line, m.is_null() ? -1 : m.column, position(source_, m) + ": " + msg});
  }

  struct Found {
    int line, column;
    std::string message;
  };
  const Tree& tree_;
  std::string source_;
  std::vector<std::string>& errors_;
  std::vector<Given>& given_;
  const std::vector<ParamInfo>& params_;
  std::vector<Frame> frames_;
  std::vector<Found> found_;
};

// Applies one "key.path=value" override; `key` must name a parameter exactly.
class SetApplier final : public isa::PathVisitor {
 public:
  SetApplier(std::string key, std::string value) : key_(std::move(key)), value_(std::move(value)) {}
  bool found() const { return found_; }
  bool is_group() const { return is_group_; }
  const std::string& reason() const { return reason_; }
  const std::vector<std::string>& group_keys() const { return group_keys_; }

 protected:
  void on_group_begin(const std::string& path, std::string_view key, std::string_view) override {
    if (in_group_ && depth() == group_depth_ + 1) group_keys_.emplace_back(key);
    if (path == key_) {
      is_group_ = in_group_ = true;
      group_depth_ = depth();
    }
  }
  void on_group_end(const std::string& path) override {
    if (path == key_) in_group_ = false;
  }
  void on_integer(const std::string& path, const isa::Param& p, int64_t& value, int64_t min,
                  int64_t max) override {
    member(p.key);
    if (match(path)) reason_ = isa::parse_integer(value_, min, max, value);
  }
  void on_real(const std::string& path, const isa::Param& p, double& value, double min, double max) override {
    member(p.key);
    if (match(path)) reason_ = isa::parse_real(value_, min, max, value);
  }
  void on_boolean(const std::string& path, const isa::Param& p, bool& value) override {
    member(p.key);
    if (match(path)) reason_ = isa::parse_boolean(value_, value);
  }
  void on_choice(const std::string& path, const isa::Param& p, int& index,
                 const std::vector<std::string_view>& names) override {
    member(p.key);
    if (match(path)) reason_ = isa::parse_choice(value_, names, index);
  }

 private:
  bool match(const std::string& path) {
    if (path != key_) return false;
    found_ = true;
    return true;
  }
  void member(std::string_view key) {
    if (in_group_ && depth() == group_depth_ + 1) group_keys_.emplace_back(key);
  }
  std::string key_, value_;
  bool found_ = false, is_group_ = false, in_group_ = false;
  int group_depth_ = 0;
  std::string reason_;
  std::vector<std::string> group_keys_;
};

}  // namespace

ConfigError::ConfigError(std::vector<std::string> messages)
    : std::runtime_error(join(messages, "\n")), messages_(std::move(messages)) {}

std::string configs_dir() { return NPUSIM_CONFIGS_DIR; }

std::vector<std::string> preset_names() {
  namespace fs = std::filesystem;
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(configs_dir(), ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path& p = it->path();
    if (p.extension() == ".yaml" && it->is_regular_file(ec)) names.push_back(p.stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string resolve_config_path(const std::string& arg) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(arg, ec)) {
    if (fs::is_directory(arg, ec))
      throw ConfigError({"--config " + arg + ": is a directory, not a YAML file"});
    return arg;
  }
  std::string name = arg;
  if (name.size() > 5 && name.compare(name.size() - 5, 5, ".yaml") == 0) name.resize(name.size() - 5);
  const std::vector<std::string> presets = preset_names();
  if (std::find(presets.begin(), presets.end(), name) != presets.end())
    return (fs::path(configs_dir()) / (name + ".yaml")).string();
  std::string msg =
      "--config " + show(arg) + ": no such file, and not a preset (presets: " + join(presets, ", ") + ")";
  std::string guess = isa::closest_name(name, presets);
  if (!guess.empty()) msg += "; did you mean '" + guess + "'?";
  throw ConfigError({msg});
}

namespace {

// apply_sets(), recording each parameter set as layer 1, 2, ... in `given`.
void apply_sets_given(isa::NpuConfig& c, const std::vector<std::string>& sets,
                      std::vector<std::string>& errors, std::vector<Given>* given) {
  int layer = 0;
  for (const std::string& s : sets) {
    ++layer;
    const size_t eq = s.find('=');
    if (eq == std::string::npos || eq == 0) {
      errors.push_back("--set " + show(s) + ": expected key.path=value (e.g. systolic_array.rows=64)");
      continue;
    }
    // Spaces around '=' ("--set 'a.b = 4'") are layout, not part of the key or the value.
    const std::string key = trim(s.substr(0, eq)), value = trim(s.substr(eq + 1));
    SetApplier a(key, value);
    c.visit(a);
    if (a.found()) {
      if (!a.reason().empty()) errors.push_back("--set: " + key + " = " + show(value) + " " + a.reason());
      if (given && a.reason().empty()) given->push_back({key, "--set", layer});
    } else if (a.is_group()) {
      errors.push_back("--set: " + key +
                       " is a group, not a parameter (its keys: " + join(a.group_keys(), ", ") + ")");
    } else {
      std::vector<std::string> paths;
      for (const ParamInfo& p : declared_params())
        if (p.kind != ParamInfo::Kind::kGroup) paths.push_back(p.path);
      std::string guess = isa::closest_name(key, paths);
      std::string hint =
          guess.empty() ? suggestion(key.substr(key.rfind('.') + 1), {}) : " (did you mean '" + guess + "'?)";
      errors.push_back("--set: " + show(key) + ": unknown key" + hint);
    }
  }
}

// A DRAM key given for a model that does not use it is an error, not a silent no-op. A key given in an
// earlier layer than the last choice of dram.model was written for another model (a sweep or --set
// switching the preset's DRAM model, or the dataflow under a preset that chains instructions): it is
// inert, and it reads as its default, as the dump (config_yaml) writes it commented out, so that the
// resolved configuration loads back as itself.
void check_applicable(isa::NpuConfig& c, const std::vector<Given>& given, std::vector<std::string>& errors) {
  std::vector<std::string> seen, overridden;
  for (const Given& g : given) {
    const std::string_view reason = c.unused_reason(g.path);
    if (reason.empty()) continue;
    // A later layer that changes a deciding key (dram.model, the dataflow) overrides the key's layer.
    int deciding_layer = -1;
    for (std::string_view key : isa::NpuConfig::governing_keys(g.path))
      for (const Given& d : given)
        if (d.path == key) deciding_layer = std::max(deciding_layer, d.layer);
    if (g.layer < deciding_layer) {
      overridden.push_back(g.path);
      continue;
    }
    const bool dram = g.path.rfind("dram.", 0) == 0 || g.path.rfind("energy.dram.", 0) == 0;
    std::string m =
        dram ? fmt::format("{}: {} does not apply to the {} DRAM model ({})", g.where, g.path,
                           isa::kDramModelNames[static_cast<size_t>(c.dram.model)], reason)
        : g.path.rfind("energy.", 0) == 0
            ? fmt::format("{}: {} does not apply to this array ({}); leave it unset", g.where, g.path, reason)
            : fmt::format("{}: {} does not apply to this array ({}); remove it or set it to its default",
                          g.where, g.path, reason);
    if (std::find(seen.begin(), seen.end(), m) == seen.end()) seen.push_back(m);
  }
  for (std::string& m : seen) errors.push_back(std::move(m));
  for (const std::string& path : overridden)
    for (const ParamInfo& p : declared_params())
      if (p.path == path) {
        SetApplier to_default(path, p.value);
        c.visit(to_default);
      }
}

}  // namespace

void apply_sets(isa::NpuConfig& c, const std::vector<std::string>& sets, std::vector<std::string>& errors) {
  apply_sets_given(c, sets, errors, nullptr);
}

std::vector<std::string> check_constraints(const isa::NpuConfig& c) {
  std::vector<std::string> out;
  const isa::SystolicArrayConfig& a = c.systolic_array;
  // The array drains a rows x cols block of int32 partial sums per output tile; an accumulator
  // smaller than that cannot take even one tile.
  const int64_t tile_bytes = a.rows * a.cols * 4;
  if (c.sram.accumulator.size_bytes() < tile_bytes)
    out.push_back(fmt::format(
        "sram.accumulator.size_kib = {} ({} bytes) cannot hold one systolic_array.rows x systolic_array.cols "
        "= "
        "{} x {} tile of int32 partial sums ({} bytes)",
        c.sram.accumulator.size_kib, c.sram.accumulator.size_bytes(), a.rows, a.cols, tile_bytes));
  // Addresses interleave across equal banks one bank_width_bytes row at a time, so the capacity must be
  // a whole number of rows in every bank.
  const std::pair<const char*, const isa::ScratchpadConfig*> pads[] = {
      {"input", &c.sram.input}, {"weight", &c.sram.weight}, {"accumulator", &c.sram.accumulator}};
  for (const auto& [name, s] : pads) {
    const int64_t row = s->banks * s->bank_width_bytes;
    if (s->size_bytes() % row != 0)
      out.push_back(
          fmt::format("sram.{0}.size_kib = {1} ({2} bytes) is not a multiple of sram.{0}.banks x "
                      "sram.{0}.bank_width_bytes = "
                      "{3} x {4} = {5} bytes (every bank must hold the same number of full rows)",
                      name, s->size_kib, s->size_bytes(), s->banks, s->bank_width_bytes, row));
  }
  // A shared scratchpad is described by sram.input alone: a sram.weight value would be inert.
  if (c.sram.shared_scratchpad) {
    const isa::ScratchpadConfig d = isa::SramConfig{}.weight, &w = c.sram.weight;
    const std::pair<const char*, bool> set[] = {
        {"size_kib", w.size_kib != d.size_kib},
        {"banks", w.banks != d.banks},
        {"bank_width_bytes", w.bank_width_bytes != d.bank_width_bytes},
        {"ports", w.ports != d.ports},
        {"read_latency_cycles", w.read_latency_cycles != d.read_latency_cycles},
        {"write_latency_cycles", w.write_latency_cycles != d.write_latency_cycles}};
    for (const auto& [key, differs] : set) {
      if (differs)
        out.push_back(
            fmt::format("sram.weight.{0}: inputs and weights share one scratchpad "
                        "(sram.shared_scratchpad = true), which sram.input describes: set "
                        "sram.input.{0} instead",
                        key));
    }
  }
  // Gemmini's tiling rules count scratchpad rows of DIM elements on a square DIM x DIM mesh.
  if (c.lowering.mapping_policy == isa::MappingPolicy::kGemmini && a.rows != a.cols)
    out.push_back(
        fmt::format("lowering.mapping_policy = gemmini needs a square array (Gemmini's DIM x DIM "
                    "mesh): systolic_array.rows = {} differs from systolic_array.cols = {}",
                    a.rows, a.cols));
  // A default precision the array has no MACs for would fail every compile that takes it.
  if (c.lowering.default_precision != isa::DefaultPrecision::kAuto &&
      c.lowering.default_precision != isa::DefaultPrecision::kInt8) {
    const auto p = c.lowering.default_precision;
    const isa::DType t = p == isa::DefaultPrecision::kFp32   ? isa::DType::kFp32
                         : p == isa::DefaultPrecision::kFp16 ? isa::DType::kFp16
                                                             : isa::DType::kBf16;
    const std::string_view name = isa::kDefaultPrecisionNames[static_cast<size_t>(p)];
    if (a.rate(t) <= 0)
      out.push_back(fmt::format(
          "lowering.default_precision = {0} needs {0} MACs on the array: systolic_array.{0}_rate is 0",
          name));
  }
  // DRAM bursts and alignment boundaries are powers of two in every DRAM standard; the DMA splits
  // transfers at burst boundaries with address masks.
  auto pow2 = [](int64_t v) { return v > 0 && (v & (v - 1)) == 0; };
  if (!pow2(c.dma.burst_bytes))
    out.push_back(fmt::format("dma.burst_bytes = {} is not a power of two", c.dma.burst_bytes));
  if (!pow2(c.dma.alignment_bytes))
    out.push_back(fmt::format("dma.alignment_bytes = {} is not a power of two", c.dma.alignment_bytes));
  return out;
}

isa::NpuConfig load_config_text(const std::string& yaml_text, const std::string& source_name,
                                const std::vector<std::string>& sets) {
  std::vector<std::string> errors;
  std::vector<Given> given;
  isa::NpuConfig c;
  try {
    Tree tree;
    if (std::optional<size_t> root = read_document(yaml_text, source_name, tree, errors))
      YamlReader(tree, source_name, errors, given).read(*root, c);
  } catch (const YAML::Exception& e) {
    errors.push_back(position(source_name, e.mark) + ": invalid YAML: " + e.msg);
  }
  apply_sets_given(c, sets, errors, &given);
  check_applicable(c, given, errors);
  // Values that failed to parse kept their defaults, so the constraints still judge a real config.
  for (std::string& m : check_constraints(c)) errors.push_back(source_name + ": " + m);
  if (!errors.empty()) throw ConfigError(std::move(errors));
  return c;
}

// The text of a file, or a ConfigError naming it.
static std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  if (!in || !(text << in.rdbuf()) || in.bad()) {
    // An empty file makes rdbuf() extraction "fail" without being unreadable.
    std::error_code ec;
    if (!in.is_open() || std::filesystem::file_size(path, ec) != 0 || ec)
      throw ConfigError({path + ": cannot read the file"});
  }
  return text.str();
}

std::map<std::string, std::string> load_declared_file(const std::string& path,
                                                      const std::function<void(isa::Visitor&)>& visit) {
  const std::string text = read_text(path);
  std::vector<std::string> errors;
  std::vector<Given> given;
  const std::vector<ParamInfo> params = isa::list_params(visit);
  try {
    Tree tree;
    if (std::optional<size_t> root = read_document(text, path, tree, errors))
      YamlReader(tree, path, errors, given, params).read(*root, visit);
  } catch (const YAML::Exception& e) {
    errors.push_back(position(path, e.mark) + ": invalid YAML: " + e.msg);
  }
  if (!errors.empty()) throw ConfigError(std::move(errors));
  std::map<std::string, std::string> where;
  for (const Given& g : given) where[g.path] = g.where;
  return where;
}

isa::NpuConfig load_config(const std::string& yaml_path_or_preset, const std::vector<std::string>& sets) {
  if (yaml_path_or_preset.empty()) {
    isa::NpuConfig c;
    std::vector<std::string> errors;
    std::vector<Given> given;
    apply_sets_given(c, sets, errors, &given);
    check_applicable(c, given, errors);
    for (std::string& m : check_constraints(c)) errors.push_back(std::move(m));
    if (!errors.empty()) throw ConfigError(std::move(errors));
    return c;
  }
  const std::string path = resolve_config_path(yaml_path_or_preset);
  return load_config_text(read_text(path), path, sets);
}

}  // namespace npusim::sim
