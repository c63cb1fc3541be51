#pragma once
// Concats folded into their producers' stores (internal to the back end): the one place that decides
// which values live inside another value's DRAM buffer.
//
// A Concat copies each input into its slice of the output. A vendor compiler instead lets each
// producer write its output straight into that slice (a strided store: for an NHWC channel Concat the
// row pitch is the Concat's channels), and the Concat disappears. Here such an input becomes a *view*:
// the slice of the Concat's buffer at its offset, with that buffer's strides (DramTensor::view_strides).
// A Concat whose inputs are all views has nothing left to do: it is free (an alias, no instructions);
// one with some inputs left copies only those.
//
// The rules, made once here and nowhere else:
// - exact: an input is folded only when the Concat would copy it unchanged -- the same storage format,
//   and under an int8 plan the same QParams (where they differ the Concat must requantize, and the
//   producer's own rounding to its QParams is part of the result: folding would change bits);
// - one place per value: a value used by several Concats (DenseNet concatenates every earlier feature
//   map of a block again and again) is placed by the last of them, processed first (graph order
//   reversed); an earlier Concat takes it in place only where its slice lands at the same address with
//   the same strides, and an earlier Concat whose inputs all lie consecutively in one buffer becomes a
//   view of it itself (DenseNet's denselayerK/Concat is a prefix of the block's channels);
// - who may see a view: a strided view goes only where some lowering reads or writes views itself
//   (takes_views); values read by other lowerings stay dense. A contiguous slice (a Concat along the
//   outermost non-unit dim, ViT's class token) is an ordinary tensor at an offset that any lowering takes;
// - never a graph input or output, a constant, a free op's operand, a value placed on the host, or a
//   producer that reads the buffer it would write into;
// - a Concat a mapping file places (`placement: vector` or `host`) is left as it is.
// compile() places the views in the memory plan, hands a dense copy (ViewScope) to any lowering that
// does not take views (a host fallback, say), and reports each folded Concat and each producer that
// writes in place.
#include <map>
#include <set>
#include <string>
#include <vector>

#include "compiler/backend/options.h"
#include "compiler/ir/graph.h"

namespace npusim::compiler::backend {

struct ConcatFolding {
  // Where a value lives inside another value's buffer.
  struct Slice {
    std::string root;              // the value whose buffer holds it (a Concat's output)
    int64_t offset = 0;            // elements from the root's first element
    std::vector<int64_t> strides;  // elements per index of each physical dim (the root's dense strides)
    bool operator==(const Slice& o) const {
      return root == o.root && offset == o.offset && strides == o.strides;
    }
  };
  std::map<std::string, Slice> views;
  // Per Concat node: the positions of the inputs that are already in their slice when it runs (written
  // there by their producers, or placed there for a later Concat), which it does not copy.
  std::map<std::string, std::set<size_t>> in_place;
  // # int8: values whose producer (a nearest Resize: its tile loop copies codes) writes them into their slice
  // already requantized to the Concat's QParams, as the Concat's integer scheme would (quant::integer_concat;
  // exact: the requantize is element-wise, the upsampling a copy): the value -> (Concat node, input
  // position). The value's only reader is that Concat.
  std::map<std::string, std::pair<std::string, size_t>> requantized;

  bool in_place_input(const std::string& concat, size_t input) const;
  // A Concat with every input in place: an alias of its slices.
  bool folded(const Node& n) const;
  // The one-line mapping of a folded Concat; the note a partly folded one, or a producer writing in
  // place, appends to its mapping ("" for others).
  std::string describe(const Node& n) const;

  // Whether node n's lowering reads input `v` (or writes output `v`) as a strided view itself: CONV's
  // output tiles (their STOREs take the row pitch), the per-channel affine map of a BatchNormalization
  // (its LOAD boxes), Concat's own copies, a Resize's output (an upsampling's STOREs take the pitch; any
  // other index map gathers into scratch and copies), an element-wise binary op's output tiles. Others get
  // dense copies from compile().
  static bool takes_view(const Graph& g, const Node& n, Placement placement, const std::string& v,
                         bool output);
};

// Decides the folding for lowered graph g: `storage` gives each runtime value's DRAM storage type (the
// precision plan's, alias groups of free ops included), `placement` each node's placement as compile()
// will use it.
ConcatFolding fold_concats(const Graph& g, const CompileOptions& options,
                           const std::map<std::string, isa::DType>& storage,
                           const std::map<std::string, Placement>& placement);

}  // namespace npusim::compiler::backend
