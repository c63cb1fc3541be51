#pragma once
// Reading a user's YAML file (sweeps, pipelines): the problems found, each prefixed with the file, line
// and column, collected so that all of them are reported at once.
#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace npusim::sim {

// A YAML file the user got wrong (exit 2): messages() holds one line per problem, each naming the file,
// line and column and the key; what() joins them with newlines.
class YamlFileError : public std::runtime_error {
 public:
  explicit YamlFileError(std::vector<std::string> messages);
  const std::vector<std::string>& messages() const { return messages_; }

 private:
  std::vector<std::string> messages_;
};

// The YAML text of `path`; throws YamlFileError("cannot read WHAT file 'path'").
std::string read_yaml_text(const std::string& path, const std::string& what);

class YamlErrors {
 public:
  explicit YamlErrors(std::string source) : source_(std::move(source)) {}

  // "SOURCE:LINE:COLUMN: msg" (just "SOURCE: msg" for a node without a position).
  void error(const YAML::Node& n, const std::string& msg) { error(n.Mark(), msg); }
  void error(const YAML::Mark& m, const std::string& msg);
  // The same at a 1-based position kept from an earlier node.
  void error_at(int line, int column, const std::string& msg);
  const std::vector<std::string>& errors() const { return errors_; }

  // A scalar's text, or an error naming `what`.
  bool scalar(const YAML::Node& n, const std::string& what, std::string& out);
  // An integer (a number) in [lo, hi] into `out`, or an error naming `key`; `out` is left as it was.
  void integer(const YAML::Node& n, const std::string& key, int64_t& out, int64_t lo, int64_t hi);
  void real(const YAML::Node& n, const std::string& key, double& out, double lo, double hi);
  // "PREFIXk: unknown key (did you mean '...'?)", or the valid keys when none is close.
  void unknown(const YAML::Node& key_node, const std::string& prefix, const std::string& k,
               const std::vector<std::string>& valid);

 protected:
  std::string source_;
  std::vector<std::string> errors_;
};

}  // namespace npusim::sim
