// Dense copies of the views a lowering does not take (view_scope.h).
#include "compiler/backend/memory/view_scope.h"

#include <fmt/format.h>

#include "compiler/backend/memory/movement.h"

namespace npusim::compiler::backend {

namespace {

std::set<size_t> split_dims(const DramTensor& t) {
  std::set<size_t> d;
  for (const auto& [i, levels] : t.view_split) d.insert(i);
  return d;
}

}  // namespace

ViewScope::ViewScope(Context& c, const Node& n, Placement placement) : c_(c), n_(n) { swap(placement); }

ViewScope::~ViewScope() {
  for (const auto& [name, t] : saved_) c_.tensors[name] = t;
}

void ViewScope::materialize() { swap(Placement::kHost); }

void ViewScope::finish() {
  for (const auto& name : outputs_) copy_tensor(c_, c_.tensors.at(name), saved_.at(name));
  for (const auto& [name, t] : saved_) c_.tensors[name] = t;
  saved_.clear();
}

std::string ViewScope::describe() const {
  return copied_.empty() ? ""
                         : fmt::format("{} value(s) copied between a Concat's slice and a dense DRAM scratch",
                                       copied_.size());
}

void ViewScope::swap(Placement placement) {
  for (int output = 0; output < 2; ++output) {
    for (const auto& s : output ? n_.outputs : n_.inputs) {
      if (s.empty() || saved_.count(s) || !c_.tensors.count(s)) continue;
      const DramTensor t = c_.tensors.at(s);
      if (!t.strided() || ConcatFolding::takes_view(c_.g, n_, placement, s, output) ||
          (!output &&
           StridedViews::reads_view(c_.g, n_, placement, s, t.shape, t.view_strides, split_dims(t))) ||
          (output && t.view_split.empty() &&
           StridedViews::writes_view(c_.g, n_, placement, s, t.shape, t.view_strides)))
        continue;
      const DramTensor d = dense_scratch(c_, t);
      if (!output) copy_tensor(c_, t, d);
      if (output) outputs_.push_back(s);
      saved_[s] = t;
      c_.tensors[s] = d;
      copied_.push_back(s);
    }
  }
}

}  // namespace npusim::compiler::backend
