#pragma once
// Data movement folded into its readers' loads (internal to the back end): the one place that decides
// which Slices, Transposes and the Reshapes between them become strided views instead of copies.
//
// A transformer's fused QKV projection writes [S, 3*H*dh]; three Slices cut Q, K and V out of it, Reshapes
// split the heads ([S, H, dh]) and Transposes bring the heads outside ([H, S, dh]) for the attention's
// batched MatMuls. Each Slice and each Transpose is a DRAM -> DRAM copy. Every one of those values is
// also an affine view of the projection's buffer -- head h of Q starts at element h*dh, its rows are
// 3*H*dh elements apart -- so a reader that loads boxes with strides can read it where the projection
// wrote it, and the copies disappear (a vendor compiler's "strided views through Reshape").
//
// The rules, made once here:
// - a value is a view when its node is a Slice with unit steps, a Transpose (ONNX's, not a layout
//   conversion), or a free Reshape / Flatten / Squeeze / Unsqueeze of a view whose strides the new shape
//   can keep (as torch's view(): dims split or merged only where the elements are evenly spaced), all in
//   ONNX order; its root is the first value of the chain that is not a view (the projection's output);
// - exact: the view holds the bytes the copy would have written -- the same storage format, and under an
//   int8 plan the same QParams (Slices and Transposes keep their input's, so the codes pass through);
// - the other way round, a Transpose that merges the heads back ([H, S, dh] -> [S, H, dh]) and is its
//   input's only reader is folded into that input's producer: a MatMul (the attention's value MatMul, or
//   the fused block) stores its output straight into the Transpose's output, rows D elements apart
//   (writes_view), as a Concat's producers write into its slices;
// - who may see one: every reader of a view is either a node that is itself a view, or a lowering that
//   loads boxes of it with its strides itself (reads_view): a MatMul's A operand and its runtime B operand
//   (rows contiguous, any row pitch, any offset per batch matrix; the fused attention block too), the
//   full-shape operand of an element-wise binary op, and a Transpose that stays a copy (the K transpose of
//   attention, [H, S, dh] -> [H, dh, S], reads its view). A view whose reader cannot take it is not made
//   (its node copies as before), and the decision is repeated until no such reader is left;
// - never a graph input or output, a value a Concat folds (backend/memory/concat_in_place.h), a node a
// mapping
//   file places (`placement: vector` or `host`); off with CompileOptions::fold_concats (`--no-fusion`).
// compile() gives each view the root's buffer (whose lifetime then covers the view's readers), reports
// each folded node as free (no instructions), and hands a dense copy (ViewScope) to any reader not listed.
#include <array>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "compiler/backend/memory/concat_in_place.h"
#include "compiler/backend/options.h"
#include "compiler/ir/graph.h"

namespace npusim::compiler::backend {

struct StridedViews {
  struct View {
    std::string root;              // the value whose buffer holds it
    int64_t offset = 0;            // elements from the root's first element
    std::vector<int64_t> strides;  // elements per index of each dim (ONNX order)
    // Dims merged by a Reshape at strides that are not evenly spaced (DramTensor::view_split): dim ->
    // its (extent, stride) levels, outermost first; strides[dim] is then the innermost level's.
    std::map<size_t, std::vector<std::array<int64_t, 2>>> split;
  };
  std::map<std::string, View> views;  // by value
  std::set<std::string> folded;       // nodes whose output is a view, or whose input is written as one
  std::set<std::string> written;      // of those, the Transposes whose producer writes their output

  bool folds(const Node& n) const { return folded.count(n.name) > 0; }
  // The one-line mapping of a folded node ("" for others).
  std::string describe(const Graph& g, const Node& n) const;

  // Whether node n's lowering loads input `v` itself as a view of `shape` with `strides` (see above);
  // `split_dims` its dims with levels (View::split), which only a runtime MatMul operand (among its batch
  // dims: each batch matrix anywhere) and a Transpose that copies read.
  static bool reads_view(const Graph& g, const Node& n, Placement placement, const std::string& v,
                         const Shape& shape, const std::vector<int64_t>& strides,
                         const std::set<size_t>& split_dims = {});
  // Whether node n's lowering stores its output `v` itself as a view of `shape` with `strides`: a MatMul's
  // or Gemm's output tiles (rows contiguous, any row pitch; batch matrices evenly spaced), the fused
  // attention block's too.
  static bool writes_view(const Graph& g, const Node& n, Placement placement, const std::string& v,
                          const Shape& shape, const std::vector<int64_t>& strides);
};

// Strides of a view of `shape` / `strides` reshaped to `to` without moving an element (torch's view()
// rule), or an empty vector when the reshape needs a copy.
std::vector<int64_t> reshaped_strides(const Shape& shape, const std::vector<int64_t>& strides,
                                      const Shape& to);

// The same for a reshape that merges dims which are not evenly spaced: each dim of `to` takes a run of
// the view's dims (split where an extent divides), and a run that is not evenly spaced becomes a split
// dim (View::split). nullopt when a dim of `to` would need part of a dim that does not divide.
struct ReshapedView {
  std::vector<int64_t> strides;
  std::map<size_t, std::vector<std::array<int64_t, 2>>> split;
};
std::optional<ReshapedView> reshaped_levels(
    const Shape& shape, const std::vector<int64_t>& strides,
    const std::map<size_t, std::vector<std::array<int64_t, 2>>>& split, const Shape& to);

// Decides the views for lowered graph g: `storage` and `placement` as for fold_concats, `concats` the
// Concat folding already decided (its values are left alone).
StridedViews fold_views(const Graph& g, const CompileOptions& options,
                        const std::map<std::string, isa::DType>& storage,
                        const std::map<std::string, Placement>& placement, const ConcatFolding& concats);

}  // namespace npusim::compiler::backend
