#pragma once
// Short display names for layers: one scheme shared by the run summary, the compile table, the layer
// CSV and (through the report's `display_name`) the plots. The report's JSON always keeps the full name.
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace npusim::isa {

inline constexpr size_t kDisplayNameWidth = 28;

// The names of `names`, in order, each at most `width` characters (width >= 8) and all distinct
// where the full names are:
// - an ONNX path loses its empty parts, the scopes that only repeat the next one, and its last part
//   (the op type, shown separately) unless that part tells two layers apart:
//   "/features/features.2/conv/conv.1/conv.1.0/Conv" -> "features.2/conv.1.0";
// - a name longer than `width` keeps its first scope (up to half the width) and its end (the most
//   specific part), ".." between;
// - names still equal get "#2", "#3", ... in program order.
std::vector<std::string> display_names(const std::vector<std::string>& names,
                                       size_t width = kDisplayNameWidth);

}  // namespace npusim::isa
