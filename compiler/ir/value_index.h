#pragma once
// Who writes and who reads each value of a graph, indexed once: the back end's deciders (Concats in
// place, strided views) ask it per value instead of scanning the node list. It points into the graph,
// which must outlive it and not change while it is used.
#include <map>
#include <set>
#include <string>
#include <vector>

#include "compiler/ir/graph.h"

namespace npusim::compiler {

class ValueIndex {
 public:
  explicit ValueIndex(const Graph& g);

  // The nodes reading `v`, in graph order (a node reading it twice is listed twice); empty if none.
  const std::vector<const Node*>& readers(const std::string& v) const;
  // The node writing `v`; nullptr for a graph input, a constant or an unknown name.
  const Node* producer(const std::string& v) const;
  // Whether `v` is a graph input or output.
  bool is_graph_io(const std::string& v) const { return io_.count(v) > 0; }

 private:
  std::map<std::string, std::vector<const Node*>> readers_;
  std::map<std::string, const Node*> producer_;
  std::set<std::string> io_;
};

}  // namespace npusim::compiler
