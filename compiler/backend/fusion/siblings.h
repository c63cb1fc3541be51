#pragma once
// Sibling matrix layers as one GEMM (internal to the back end): convolutions with constant weights that
// read the same input with the same input-side geometry (an inception block's 1x1 convs) lowered as one
// matrix job whose output channels are the layers' side by side (TensorRT's and TVM's horizontal fusion).
// The input is loaded once and streamed once per fold of all their columns, instead of once per layer.
//
// The job (MatrixJob::segments) gives each layer a segment of its channels padded with zero weights to a
// multiple of the array's columns; the search takes only output-channel chunks that divide that multiple,
// and a tile ends where its layer's real channels end, so every output tile belongs to one layer and its
// epilogue -- the layer's bias, its activation, its output tensor (a Concat's slice included) -- is that
// layer's own. Each output channel adds the same products in the same order as the layer alone (MATMUL
// and CONV add in k order whatever the tiling, docs/isa.md): --functional outputs are bit-identical.
//
// Taken: Conv nodes of one group with the same input (not a view), kernel, strides, pads, dilations and
// fused activation, each with or each without a constant bias, no residual, none of them in another fusion
// group, float precision (no int8 plan), with keep_on_chip (off with --no-fusion). All are lowered at the
// first of them in graph order; the memory plan starts the others' outputs there (sibling_candidates).
// Whether merged or separate is decided by simulating both (the merged code against the layers' own
// codes one after the other); a mapping file's `merge_siblings` on the first layer forces either.
#include <array>
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "compiler/backend/core/context.h"
#include "compiler/backend/matrix/matrix_walk.h"

namespace npusim::compiler::backend {

// The later siblings of node i when node i is the first, by the graph alone (empty: none); the memory plan
// starts their outputs at node i.
std::vector<size_t> sibling_candidates(const Graph& g, size_t i);

// The sibling layers lowered last as one job: the first and the others.
struct SiblingGroup {
  size_t first = 0;
  std::vector<size_t> others;
  std::vector<int64_t> macs;  // each other's own MACs, in the order of `others`
  bool covers(size_t i) const;
};

// Before matrix node i is lowered: when node i is the first of sibling layers that merge and the merged
// code simulates faster (or a mapping file asks for it), emits that code as node i's layer and returns the
// group; otherwise emits nothing and returns an empty group.
SiblingGroup lower_siblings(Context& c, size_t i);

// The mapping description of a sibling lowered with the first.
std::string describe_sibling(const Context& c, const SiblingGroup& s, size_t i);

// Emits nodes (the first first) as one matrix job, float (matrix/matrix.cpp) or under an int8 plan
// (matrix/int8_matrix.cpp); false, with nothing emitted, when the job cannot be formed. Fills c.plan as the
// first node's layer.
bool lower_conv_siblings(Context& c, const std::vector<const Node*>& nodes);
bool lower_conv_siblings_int8(Context& c, const std::vector<const Node*>& nodes);

// The strategy of a merged job: a precision's own strategy (Inner) for everything, but before each output
// tile's epilogue `select(k)` points the job's output fields at layer k's tensor, k the segment holding the
// tile's channels (MatrixJob::segments).
template <typename Inner>
class SegmentStrategy : public MatrixStrategy {
 public:
  template <typename Job>
  SegmentStrategy(Context& c, Job& j, std::function<void(size_t)> select)
      : inner_(c, j), segments_(j.segments), select_(std::move(select)) {
    ops = inner_.ops;
    select_(0);
  }
  int64_t acc_bytes(int64_t p, int64_t tn, int sides) const override {
    return inner_.acc_bytes(p, tn, sides);
  }
  int epilogue_ops() const override { return inner_.epilogue_ops(); }
  std::vector<int64_t> param_loads(int64_t tn) const override { return inner_.param_loads(tn); }
  int64_t side_bytes(int64_t p, int64_t tn, int sides) const override {
    return inner_.side_bytes(p, tn, sides);
  }
  void allocate(SramAlloc& acc, SramAlloc& side, int64_t p_max, int64_t tn, int sides) override {
    inner_.allocate(acc, side, p_max, tn, sides);
  }
  uint64_t acc_slot(int side) const override { return inner_.acc_slot(side); }
  uint64_t weight_tile(int64_t b, int64_t gb, int64_t k0, int64_t k1, int64_t n0, int64_t n1) override {
    return inner_.weight_tile(b, gb, k0, k1, n0, n1);
  }
  uint64_t depthwise_weights() override { return inner_.depthwise_weights(); }
  void epilogue(const OutTile& t, int side) override {
    size_t k = 0;
    while (k + 1 < segments_.size() && segments_[k + 1][0] <= t.n0) ++k;
    select_(k);
    inner_.epilogue(t, side);
  }
  bool ends_with_vec() const override { return inner_.ends_with_vec(); }

 private:
  Inner inner_;
  std::vector<std::array<int64_t, 2>> segments_;
  std::function<void(size_t)> select_;
};

// Where layer k of a merged job writes: its output's first element, the elements between its images and
// between its pixels (a Concat's slice: that Concat's), its DRAM range, and its channels' first column in
// the job (the base the epilogue's offsets start from is `addr` moved back by that many elements).
struct SegmentOutput {
  int64_t begin = 0;
  uint64_t addr = 0;
  int64_t image = 0, pitch = 0;
  Range range;
  uint64_t base(int64_t es) const { return addr - static_cast<uint64_t>(begin * es); }
};
// A merged job's MatrixJob::n_align: the widest chunk that divides every layer's padded channels (their
// greatest common divisor); and its real channels, the segments' sum.
int64_t merged_alignment(const MatrixJob& j);
int64_t merged_channels(const MatrixJob& j);
// Layer `y`'s SegmentOutput for channels from `begin` on.
SegmentOutput segment_output(const DramTensor& y, int64_t begin);

}  // namespace npusim::compiler::backend
