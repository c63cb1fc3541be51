#pragma once
// Text forms of the machine spec, all derived from NpuConfig::visit():
//  - the program file's machine section: every parameter as a "dotted.key=value" line;
//  - the canonical text of one parameter value (shared with the YAML loader and dump, so every text
//    form of a config round-trips exactly);
//  - a flat, ordered list of the parameters with their paths (for dumps, docs and suggestions).
// No YAML here: isa must not depend on yaml-cpp.
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "isa/machine/config.h"
#include "isa/machine/visitor.h"

namespace npusim::isa {

// A machine spec text that cannot be read; the message names the line and the key.
class SpecTextError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Every parameter of `c` as "dotted.key=value\n", in declaration order.
std::string to_spec_text(const NpuConfig& c);

// Reads to_spec_text() output back. Every parameter must appear exactly once (the technology, energy and
// area keys, which do not shape a program, may be missing: programs compiled before they existed); blank
// lines and lines starting with '#' are ignored. Throws SpecTextError listing every bad line ("machine spec
// line 3: ...").
NpuConfig from_spec_text(const std::string& text);

// A Visitor that knows the dotted path of what it visits ("sram.input.size_kib"); subclasses override
// the on_* hooks. Group hooks default to doing nothing.
class PathVisitor : public Visitor {
 public:
  void group(std::string_view key, std::string_view description, const std::function<void()>& body) final;
  void integer(const Param& p, int64_t& value, int64_t min, int64_t max) final;
  void real(const Param& p, double& value, double min, double max) final;
  void boolean(const Param& p, bool& value) final;
  void choice(const Param& p, int& index, const std::vector<std::string_view>& names) final;
  using Visitor::choice;

 protected:
  virtual void on_group_begin(const std::string& path, std::string_view key, std::string_view description);
  virtual void on_group_end(const std::string& path);
  virtual void on_integer(const std::string& path, const Param& p, int64_t& value, int64_t min,
                          int64_t max) = 0;
  virtual void on_real(const std::string& path, const Param& p, double& value, double min, double max) = 0;
  virtual void on_boolean(const std::string& path, const Param& p, bool& value) = 0;
  virtual void on_choice(const std::string& path, const Param& p, int& index,
                         const std::vector<std::string_view>& names) = 0;
  // Nesting depth of the current position: 0 at the top level.
  int depth() const { return static_cast<int>(stack_.size()); }

 private:
  std::string path_of(std::string_view key) const;
  std::vector<std::string> stack_;  // paths of the open groups
};

// One entry of the flattened declaration: a group or a parameter.
struct ParamInfo {
  enum class Kind { kGroup, kInteger, kReal, kBoolean, kChoice };
  Kind kind = Kind::kGroup;
  std::string path;  // "sram.input.size_kib"
  std::string key;   // "size_kib"
  int depth = 0;     // 0 for top-level entries
  std::string unit;
  std::string description;
  int64_t int_min = 0, int_max = 0;
  double real_min = 0, real_max = 0;
  std::vector<std::string> names;  // choices
  std::string value;               // canonical text of the value (parameters only)
  bool affects_timing = true;      // isa::Param::affects_timing
  CalibrationRange calibrate;      // isa::Param::calibrate (integers and reals only)
};

// Groups and parameters of `c` in declaration order (a group precedes its members).
std::vector<ParamInfo> list_params(const NpuConfig& c);
// The same for any struct declared through visit() (e.g. the pre-processing description).
std::vector<ParamInfo> list_params(const std::function<void(Visitor&)>& visit);

// The type name and the allowed values of a parameter as users read them: "integer", "1..4096";
// "real", "0.0..1.0"; "boolean", "true, false"; "choice", "ws, os, is".
std::string kind_name(ParamInfo::Kind k);
std::string allowed_text(const ParamInfo& p);

// Canonical value text. Reals print as the shortest text that reads back to the same double, always
// with a '.' so that every YAML reader sees a float ("17.0", "1.0e+06", "0.001").
std::string format_integer(int64_t v);
std::string format_real(double v);
std::string_view format_boolean(bool v);

// Value parsers shared by every reader. Each returns "" on success, otherwise the reason the text is
// not acceptable, worded to follow "key = value": "is not an integer (allowed 1..4096)",
// "is out of range (allowed 1..4096)", "is not one of ws, os, is (did you mean 'ws'?)".
// Integers are decimal with an optional sign; reals are decimal or exponent notation, finite;
// booleans are true/false (also True/TRUE/False/FALSE, as in the YAML 1.2 core schema).
std::string parse_integer(std::string_view text, int64_t min, int64_t max, int64_t& out);
std::string parse_real(std::string_view text, double min, double max, double& out);
std::string parse_boolean(std::string_view text, bool& out);
std::string parse_choice(std::string_view text, const std::vector<std::string_view>& names, int& out);

// Optimal-string-alignment edit distance (insertions, deletions, substitutions, adjacent swaps).
int edit_distance(std::string_view a, std::string_view b);
// The candidate closest to `word` if it is close enough to be a plausible typo, else "".
// Ties go to the earliest candidate.
std::string closest_name(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace npusim::isa
