#include "sim/config/yaml_errors.h"

#include <fmt/format.h>

#include <fstream>
#include <sstream>

#include "isa/machine/spec_text.h"

namespace npusim::sim {

YamlFileError::YamlFileError(std::vector<std::string> messages)
    : std::runtime_error([&] {
        std::string s;
        for (size_t i = 0; i < messages.size(); ++i) s += (i ? "\n" : "") + messages[i];
        return s;
      }()),
      messages_(std::move(messages)) {}

std::string read_yaml_text(const std::string& path, const std::string& what) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw YamlFileError({fmt::format("cannot read {} file '{}'", what, path)});
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

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

void YamlErrors::integer(const YAML::Node& n, const std::string& key, int64_t& out, int64_t lo, int64_t hi) {
  std::string text;
  if (!scalar(n, key, text)) return;
  int64_t v = 0;
  try {
    v = n.as<int64_t>();
  } catch (const YAML::Exception&) {
    error(n, fmt::format("{}: '{}' is not an integer", key, text));
    return;
  }
  if (v < lo || v > hi) {
    error(n, fmt::format("{}: {} is out of range ({}..{})", key, v, lo, hi));
    return;
  }
  out = v;
}

void YamlErrors::real(const YAML::Node& n, const std::string& key, double& out, double lo, double hi) {
  std::string text;
  if (!scalar(n, key, text)) return;
  double v = 0;
  try {
    v = n.as<double>();
  } catch (const YAML::Exception&) {
    error(n, fmt::format("{}: '{}' is not a number", key, text));
    return;
  }
  if (!(v >= lo && v <= hi)) {
    error(n, fmt::format("{}: {} is out of range ({:g}..{:g})", key, text, lo, hi));
    return;
  }
  out = v;
}

void YamlErrors::unknown(const YAML::Node& key_node, const std::string& prefix, const std::string& k,
                         const std::vector<std::string>& valid) {
  const std::string guess = isa::closest_name(k, valid);
  std::string list;
  for (size_t i = 0; i < valid.size(); ++i) list += (i ? ", " : "") + valid[i];
  error(key_node, prefix + k + ": unknown key" +
                      (guess.empty() ? " (valid: " + list + ")" : " (did you mean '" + guess + "'?)"));
}

}  // namespace npusim::sim
