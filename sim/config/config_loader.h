#pragma once
// Loading an NPU configuration: a YAML file or a preset, then --set overrides, validated against the
// one declaration in isa::NpuConfig::visit(). Every problem is collected and reported at once, each
// naming the full dotted key and, for files, file:line:column.
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "isa/machine/config.h"

namespace npusim::sim {

// A configuration the user got wrong. messages() holds one line per problem, each self-contained
// ("bad.yaml:2:3: systolic_array.rowz: unknown key (did you mean 'rows'?)"); what() joins them
// with newlines. The CLI prints them to stderr and exits 2.
class ConfigError : public std::runtime_error {
 public:
  explicit ConfigError(std::vector<std::string> messages);
  const std::vector<std::string>& messages() const { return messages_; }

 private:
  std::vector<std::string> messages_;
};

// The directory holding the YAML presets (the source tree's configs/).
std::string configs_dir();

// Names of the presets in configs_dir() (file names without ".yaml"), sorted.
std::vector<std::string> preset_names();

// Resolves a --config argument: an existing file is used as given; otherwise a preset name ("tpu-v1"
// or "tpu-v1.yaml") in configs_dir(). Throws ConfigError naming the presets when it is neither.
std::string resolve_config_path(const std::string& arg);

// The configuration from `yaml_path_or_preset` ("" = the built-in defaults, which are the edge
// preset) with `sets` ("key.path=value", applied in order after the file) on top, checked by
// check_constraints(). Throws ConfigError listing every problem found.
isa::NpuConfig load_config(const std::string& yaml_path_or_preset, const std::vector<std::string>& sets = {});

// As load_config() for YAML text already in memory; `source_name` prefixes the positions in messages.
isa::NpuConfig load_config_text(const std::string& yaml_text, const std::string& source_name,
                                const std::vector<std::string>& sets = {});

// Reads the YAML file `path` into any struct declared through visit() (the pre-processing
// description, compiler/io/preprocess.h) with the same checks as a configuration: unknown keys (with
// suggestions), values of the wrong kind or out of range, each at file:line:column with its dotted key.
// Throws ConfigError listing every problem found. Returns the parameters the file gives (dotted key ->
// "file:line:column"), for the caller's checks between keys.
std::map<std::string, std::string> load_declared_file(const std::string& path,
                                                      const std::function<void(isa::Visitor&)>& visit);

// Applies "key.path=value" overrides to `c`, appending one message per problem to `errors`.
void apply_sets(isa::NpuConfig& c, const std::vector<std::string>& sets, std::vector<std::string>& errors);

// Constraints between parameters (and the ones a range cannot express). Returns one message per
// violation, naming every key involved; empty when the configuration is consistent.
std::vector<std::string> check_constraints(const isa::NpuConfig& c);

}  // namespace npusim::sim
