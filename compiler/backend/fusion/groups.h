#pragma once
// The fusion groups of the lowering stage (internal to the back end; stages/lower_layers.cpp): the one
// place that decides, for each layer, whether it starts a group -- its output left in the input
// scratchpad for the pointwise conv after it (residency.h), a squeeze-and-excitation block's input held
// from its pool to its Mul (se_fusion.h), a conv and the pool or depthwise conv after it tiled through a
// line buffer (layer_fusion.h), an attention block lowered as one layer (attention_fusion.h) -- whether
// it belongs to a group lowered already (its code is the group's), or is lowered alone.
//
// Groups are planned layer by layer as the layers are lowered, not ahead: whether a group fits depends on
// what the layers before it hold in SRAM, and whether it forms on its first layer's lowering (a fusion
// is kept only when its code is faster, and a pool that could not load into the held region lets it go).
// The matrix and vector lowerings see the group only through the functions fusion/ declares for them.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "compiler/backend/core/context.h"
#include "compiler/backend/fusion/attention_fusion.h"
#include "compiler/backend/fusion/layer_fusion.h"
#include "compiler/backend/fusion/siblings.h"

namespace npusim::compiler::backend {

// The fusion groups' state before a layer's lowering: restore() puts it back when that lowering fails
// (stages/lower_layers.cpp then sends the layer to the host as if the lowering had declined).
class FusionSnapshot {
 public:
  explicit FusionSnapshot(Context& c);
  void restore() const;

 private:
  Context& c_;
  FusionState state_;
  std::optional<ConvPool> conv_pool_;  // the pair the layer's lowering may have marked fused
};

class Groups {
 public:
  explicit Groups(Context& c) : c_(c) {}
  Groups(const Groups&) = delete;
  Groups& operator=(const Groups&) = delete;

  // Before layer i is lowered on `placement`: plans the groups it may start. `plannable` is false for a
  // layer that is folded into a view or placed on the host by the mapping file.
  void begin(size_t i, Placement placement, bool plannable);
  // Whether layer i's work is done by a group lowered already; then fills its plan (mapping, MACs, the
  // layer whose code does it, the value it reads on chip).
  bool member(size_t i, LayerPlan& plan) const;
  // Lowers matrix layer i as the first of an attention block when fusion takes the block; true if it did.
  bool lower_attention(size_t i);
  // Lowers matrix layer i with its sibling layers as one GEMM when that is faster (siblings.h); true if it
  // did.
  bool lower_siblings(size_t i);
  // Layer i's NPU lowering declined (it runs on the host): the layer whose work layer i's code was to do
  // (a map applied in its loads: pre_affine.h), for the caller to lower first, or -1.
  int64_t declined(size_t i);
  // After layer i is lowered: what it leaves in SRAM for the next layer (or spills), the group it
  // closes, the pair its conv fused.
  void finish(size_t i, LayerPlan& plan);
  // What --mapping-out records of the layer just finished (LayerPlan::chosen): whether its output stayed on
  // chip and, but for a depthwise conv fused into the conv before it, its placement.
  void record_choice(LayerPlan& plan) const;

 private:
  // Whether layer i is the project conv of the line buffer fused last (ConvPool::project_fused).
  bool fused_project(size_t i) const;

  Context& c_;
  AttentionBlock attention_;          // the attention block lowered as one layer last, if any
  SiblingGroup siblings_;             // the sibling layers lowered as one GEMM last, if any
  ConvPool conv_pool_;                // the conv -> pool / depthwise pair fused last, if any
  ConvPool pair_;                     // the pair the current layer may start
  bool fused_reader_ = false;         // the current layer is the reader of conv_pool_ or its project conv
  std::optional<bool> kept_output_;   // Conv layers: whether the output stayed on chip
  mutable bool tail_member_ = false;  // the current layer is a Mul or Add run by its MatMul's epilogue
  mutable bool norm_member_ = false;  // ... or a LayerNorm run in its GEMM's loads (pre_norm.h)
};

}  // namespace npusim::compiler::backend
