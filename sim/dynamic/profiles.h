#pragma once
// Shape profiles (`--dynamic NAME=V1,V2,...`): the values each named dynamic dimension of a model is
// compiled for, and the profiles they make (one program per combination), as vendors' "gears" (Ascend
// ATC --dynamic_dims), TensorRT optimization profiles or Core ML enumerated shapes do.
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace npusim::sim::dynamic {

// A mistake in how shapes, profiles or requests were given (the CLI exits 2).
class DynamicUsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// `text` as a positive integer, or a DynamicUsageError "WHAT 'TEXT' is not a positive integer".
int64_t positive_integer(const std::string& text, const std::string& what);

// Values of named dynamic dimensions (dim_param -> value): one profile, or one request's shape.
using DimBinding = std::map<std::string, int64_t>;

// One `--dynamic` option: a dimension and the values it is compiled for (ascending, distinct).
struct DimValues {
  std::string name;
  std::vector<int64_t> values;
};

// Parses the `--dynamic` options ("seq=64,128,256"); a name given twice, a value that is not a positive
// integer or a value listed twice is a DynamicUsageError naming the option.
std::vector<DimValues> parse_dynamic_specs(const std::vector<std::string>& specs);

// Every combination of the dimensions' values, smallest first (lexicographic over the names' order).
std::vector<DimBinding> profile_bindings(const std::vector<DimValues>& dims);

// "seq=128" / "batch=4,seq=128" (names in order).
std::string binding_text(const DimBinding& b);
// The profiles as "seq=64, seq=128, seq=256".
std::string bindings_list(const std::vector<DimBinding>& bs);

// Whether every dimension of `shape` is at most the profile's.
bool holds(const DimBinding& profile, const DimBinding& shape);

}  // namespace npusim::sim::dynamic
