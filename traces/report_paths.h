#pragma once
// The report's fields by their dotted paths in the declaration (traces/report_visitor.h): the figures
// `npusim diff` and the sweep columns take, and the list of every path the docs check holds
// docs/report.md to.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "traces/report.h"

namespace npusim::traces {

// One figure of a report as its JSON writes it.
struct ReportFigure {
  enum class Kind { kInteger, kReal, kText, kBoolean };
  Kind kind = Kind::kText;
  std::string text;             // the JSON text of a number or boolean; a string's value
  std::optional<double> value;  // numbers
};

// Every figure of `r` outside lists, derived ones included, by path ("total_cycles", "precision.plan",
// "breakdown.compute", "units.matrix.busy"); a figure the report does not have (an absent optional, a
// section the run did not write) is not there.
std::map<std::string, ReportFigure> report_figures(const Report& r);

// Every field path the declaration walks for `r`, each once in declaration order: list elements as
// `[]` (`layers[].cycles`), a map whose keys are data by its placeholder (`units.<name>.busy`) or, with
// none, by the keys `r` has.
std::vector<std::string> field_paths(const Report& r);

}  // namespace npusim::traces
