#pragma once
// Mapping files (docs/backend.md, "Mapping files"): YAML that imposes per-layer mappings on a compile
// (`--mapping FILE.yaml`) and records the mapping of every layer of one (`--mapping-out FILE.yaml`).
// Reading and writing walk the same list of keys, so a written file reads back as the same values:
//
//   # npusim mapping ... (a header naming the model, configuration and precision)
//   layers:
//     - {name: /conv1/Conv, placement: matrix, tile_oh: 8, tile_ow: 112, tile_c: 3, tile_n: 64, ...}
//     - {name: /relu/Relu, placement: vector}
//
// The reader checks the file's shape (known keys, with a suggestion for a misspelt one; integers; one
// entry per name) and records where each value came from; the back end checks that each value applies
// to its layer (compiler/backend/mapping/mapping.h). The compiler never sees YAML.
#include <stdexcept>
#include <string>
#include <vector>

#include "compiler/backend/compile.h"

namespace npusim::sim {

// A mapping file the user got wrong: one self-contained message per problem ("m.yaml:7:5: layer
// '/conv1/Conv': unknown key 'tile_q' (did you mean 'tile_c'?)"); what() joins them with newlines.
class MappingFileError : public std::runtime_error {
 public:
  explicit MappingFileError(std::vector<std::string> messages);
  const std::vector<std::string>& messages() const { return messages_; }

 private:
  std::vector<std::string> messages_;
};

// Reads a mapping file; `source` names it in messages. Throws MappingFileError listing every problem.
compiler::MappingOverrides read_mapping_file(const std::string& path);
compiler::MappingOverrides read_mapping_text(const std::string& yaml, const std::string& source);

// Every layer's chosen mapping (LayerPlan::chosen) as a mapping file, after `header` as comment lines.
std::string mapping_text(const std::vector<compiler::LayerPlan>& layers,
                         const std::vector<std::string>& header);
// The same written to `path`; throws std::runtime_error when it cannot be written.
void write_mapping_file(const std::string& path, const std::vector<compiler::LayerPlan>& layers,
                        const std::vector<std::string>& header);

}  // namespace npusim::sim
