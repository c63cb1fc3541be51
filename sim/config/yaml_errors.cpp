#include "sim/config/yaml_errors.h"

#include <fmt/format.h>

namespace npusim::sim {

void YamlErrors::error(const YAML::Mark& m, const std::string& msg) {
  if (m.is_null() || m.line < 0)
    errors_.push_back(source_ + ": " + msg);
  else
    error_at(m.line + 1, m.column + 1, msg);
}

void YamlErrors::error_at(int line, int column, const std::string& msg) {
  errors_.push_back(fmt::format("{}:{}:{}: {}", source_, line, column, msg));
}

bool YamlErrors::scalar(const YAML::Node& n, const std::string& what, std::string& out) {
  if (!n.IsScalar()) {
    error(n, what + ": expected a single value, not " +
                 (n.IsSequence() ? "a list"
                  : n.IsMap()    ? "a mapping"
                                 : "null"));
    return false;
  }
  out = n.Scalar();
  return true;
}

}  // namespace npusim::sim
