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
#include <cstddef>
#include <string>
#include <vector>

#include "compiler/backend/core/context.h"

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

// Emits nodes (the first first) as one float matrix job (matrix/matrix.cpp); false, with nothing emitted,
// when the job cannot be formed. Fills c.plan as the first node's layer.
bool lower_conv_siblings(Context& c, const std::vector<const Node*>& nodes);

}  // namespace npusim::compiler::backend
