#pragma once
// The bulk of an ONNX file is its initializers' raw_data. lift_raw_data rewrites a serialized ModelProto
// with the large raw_data fields of its graph's initializers cut to one byte, so that protobuf parses (and
// copies) only the model's structure, and says where each one's bytes lie in the file: the importer
// converts them from there, one copy from the file into the graph's tensors (ResNet-50: 100 MB fewer
// bytes copied and faulted in, docs/performance.md).
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace npusim::compiler::detail {

struct LiftedModel {
  std::string proto;  // the ModelProto, each lifted raw_data field one placeholder byte
  // Per graph initializer, in order: its raw_data bytes within the file when lifted, else a view whose
  // data() is null (small tensors, typed data fields, external data keep their own).
  std::vector<std::string_view> raw;
};

// nullopt when `file` is not well-formed protobuf wire data of the shape expected (the caller parses it
// the usual way then, which gives the usual error). Lifts raw_data fields of at least `min_bytes`.
std::optional<LiftedModel> lift_raw_data(std::string_view file, size_t min_bytes);

}  // namespace npusim::compiler::detail
