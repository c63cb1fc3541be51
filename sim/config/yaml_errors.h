#pragma once
// Reading a user's YAML file (sweeps, pipelines): the problems found, each prefixed with the file, line
// and column, collected so that all of them are reported at once.
#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

namespace npusim::sim {

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

 protected:
  std::string source_;
  std::vector<std::string> errors_;
};

}  // namespace npusim::sim
