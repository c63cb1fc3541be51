#pragma once
// Attention's score -> softmax -> value as one layer (internal to the back end), flash-attention style
// over blocks of query rows. Layer by layer, MatMul(Q, K^T) stores the scores (heads x Sq x Sk) to DRAM,
// the row-wise Softmax loads them and stores the probabilities, and MatMul(P, V) loads those again: the
// seq x seq tensors cross the DRAM bus four times. Fused, for each head K^T and V are loaded once into
// the weight scratchpad, and for each block of query rows the scores MATMUL writes the accumulator, one
// VEC rounds them into the input scratchpad (where the layer-by-layer MatMul's epilogue rounds them
// before its STORE), the Softmax steps run on them in place (backend/vector/rowwise.h softmax_to_factor, then
// the per-row factor), and the value MATMUL reads the probabilities there as its A operand. Only Q, K^T,
// V and the output touch DRAM.
//
// The arithmetic is the layer-by-layer program's: every rounding to the activation format happens
// where it happened there (fp32 sums in the accumulator, the same VEC steps in the same format), so
// --functional outputs are bit for bit those of --no-fusion. The block's rows, how many sets of K^T/V
// it keeps across heads and whether it is software-pipelined (the next block's scores MATMUL emitted
// before this block's value MATMUL, so that the array runs it while the vector unit computes the softmax,
// and the value MATMUL then follows on the array without a wait: on an array that chains instructions it
// pays no skew fill and drain; the loads of K^T, V and Q a block or two ahead, in sets of their own) are
// searched by simulation (Context::time_code); the block is taken only
// when its best candidate is faster than the same code with the scores and probabilities stored to
// DRAM and loaded back (the round trip the fusion removes).
//
// Taken: MatMul -> [Div or Mul by a scalar constant] -> [Add of a mask, one row of keys per head] ->
// Softmax (last axis, whole rows) -> MatMul, consecutive nodes, each intermediate read only by the next,
// equal batch dims, dense tensors in ONNX order, float precision (no int8 plan), with separate input and
// weight scratchpads. The scale and the mask are one VEC each on the block's scores in the activation
// format, as their element-wise layers compute them. Anything else, --no-fusion, or a mapping file with
// tiling keys or another placement on one of the block's layers, lowers layer by layer.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "compiler/backend/core/context.h"

namespace npusim::compiler::backend {

// A fused attention block: graph nodes [first, last], lowered as node `first`'s layer.
struct AttentionBlock {
  size_t first = 0, last = 0;  // last == 0: none
  // The intermediates (scores, [scaled, masked,] probabilities), never in DRAM.
  std::vector<std::string> on_chip;
  std::vector<int64_t> macs;      // each node's own MACs (0 but for the MatMuls), by node - first
  int64_t value_bytes_saved = 0;  // DRAM bytes the layer-by-layer program moved for each of them
  bool fused() const { return last > first; }
  // Whether node i is one of the block's nodes after the first (its work runs in the first's layer).
  bool covers(size_t i) const { return fused() && i > first && i <= last; }
};

// The number of nodes of the attention block starting at node i by the nodes' shape alone (0: none), which
// fusion may take: the memory plan keeps the block's output from the first node on, since the fused
// block writes it there (while still reading Q, K^T and V).
size_t attention_candidate(const Graph& g, size_t i);

// Before matrix node i is lowered: when it starts an attention block that fusion takes and its fused
// code is faster, emits that code as node i's layer (its plan: mapping, tiles, SRAM, MACs, on-chip
// input) and returns the block; otherwise emits nothing and returns an empty block.
AttentionBlock lower_attention(Context& c, size_t i);

// The mapping description of a node the block covers.
std::string describe_fused(const Context& c, const AttentionBlock& b, size_t i);

}  // namespace npusim::compiler::backend
