#pragma once
#include <map>
#include <string>
#include <vector>

#include "compiler/backend/core/context.h"
#include "compiler/ir/graph.h"

namespace npusim::compiler::backend {

// Hands node n's lowering a dense copy of every strided view (memory/concat_in_place.h,
// memory/strided_views.h) it does not take itself (ConcatFolding::takes_view, StridedViews::reads_view
// and writes_view): an input is copied out of its slice before the node, an output written to DRAM
// scratch and copied into its slice after it. Correct for any lowering; the folding decides so that the
// layers it folds for need none of it.
class ViewScope {
 public:
  ViewScope(Context& c, const Node& n, Placement placement);
  ViewScope(const ViewScope&) = delete;
  ViewScope& operator=(const ViewScope&) = delete;
  ~ViewScope();
  // Every view dense (before a host fallback).
  void materialize();
  // Copies the outputs into their slices and gives the node's values their views back.
  void finish();
  // The mapping line's note on the copies ("" = none).
  std::string describe() const;

 private:
  void swap(Placement placement);

  Context& c_;
  const Node& n_;
  std::map<std::string, DramTensor> saved_;
  std::vector<std::string> outputs_, copied_;
};

}  // namespace npusim::compiler::backend
