#include "compiler/ir/value_index.h"

namespace npusim::compiler {

ValueIndex::ValueIndex(const Graph& g) {
  for (const Node& n : g.nodes) {
    for (const auto& s : n.inputs)
      if (!s.empty()) readers_[s].push_back(&n);
    for (const auto& s : n.outputs)
      if (!s.empty()) producer_[s] = &n;
  }
  io_.insert(g.inputs.begin(), g.inputs.end());
  io_.insert(g.outputs.begin(), g.outputs.end());
}

const std::vector<const Node*>& ValueIndex::readers(const std::string& v) const {
  static const std::vector<const Node*> kNone;
  auto it = readers_.find(v);
  return it == readers_.end() ? kNone : it->second;
}

const Node* ValueIndex::producer(const std::string& v) const {
  auto it = producer_.find(v);
  return it == producer_.end() ? nullptr : it->second;
}

}  // namespace npusim::compiler
