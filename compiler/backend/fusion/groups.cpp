// The lowering stage's fusion groups (groups.h).
#include "compiler/backend/fusion/groups.h"

#include <algorithm>

#include "compiler/backend/fusion/deferred_residual.h"
#include "compiler/backend/fusion/post_affine.h"
#include "compiler/backend/fusion/pre_affine.h"
#include "compiler/backend/fusion/pre_norm.h"
#include "compiler/backend/fusion/pre_pool.h"
#include "compiler/backend/fusion/pre_scale.h"
#include "compiler/backend/fusion/pre_transpose.h"
#include "compiler/backend/fusion/project_tail.h"
#include "compiler/backend/fusion/residency.h"
#include "compiler/backend/fusion/scaled_residual.h"
#include "compiler/backend/fusion/se_fusion.h"
#include "compiler/backend/fusion/se_pool_fusion.h"
#include "compiler/backend/fusion/store_pool.h"
#include "compiler/backend/fusion/vector_residency.h"

namespace npusim::compiler::backend {

namespace {

// Whether node i's output should go to DRAM so that the conv after it can start a line buffer with the
// depthwise conv after that (a value left on chip for that conv keeps it from one: plan_conv_pool): the
// line buffer saves its conv's output, written and read back, which is more than the value (an inverted
// residual block's expansion against the block input it reads, six times as many channels).
bool yield_to_line_buffer(const Context& c, size_t i) {
  ConvPool next;
  if (i + 1 >= c.g.nodes.size() || !conv_pool_shape(c, i + 1, &next) || !next.depthwise || !next.pair_alone)
    return false;
  const auto x = c.tensors.find(c.g.nodes[i].outputs[0]);
  const auto y = c.tensors.find(c.g.nodes[i + 1].outputs[0]);
  return x != c.tensors.end() && y != c.tensors.end() && y->second.bytes > x->second.bytes;
}

}  // namespace

void Groups::begin(size_t i, Placement placement, bool plannable) {
  kept_output_.reset();
  tail_member_ = false;
  norm_member_ = false;
  if (siblings_.covers(i)) return;  // lowered with the first of its siblings: nothing to plan
  // A BatchNormalization (and activation) its pointwise conv applies in its loads (pre_affine.h); the
  // conv's constants take the accumulator's top before any other reservation is planned.
  if (plannable && placement == Placement::kNpuVector) plan_pre_affine(c_, i);
  if (placement == Placement::kNpuMatrix) begin_pre_affine(c_, i);
  // A LayerNorm whose rows the residency planner leaves on chip for its GEMM (residency.h) keeps that; else
  // the GEMM may apply it in its loads (pre_norm.h): its rows never stored.
  const bool layernorm = c_.g.nodes[i].op_type == "LayerNormalization";
  if (plannable && placement == Placement::kNpuVector && layernorm) {
    plan_on_chip(c_, i);
    if (!keeps_on_chip(c_, c_.g.nodes[i].outputs[0])) plan_pre_norm(c_, i);
  }
  if (placement == Placement::kNpuMatrix) begin_pre_norm(c_, i);
  // A max pool its pointwise conv does on its tiles (pre_pool.h): the window rows at the input's top.
  if (plannable && placement == Placement::kNpuVector) plan_pre_pool(c_, i);
  if (placement == Placement::kNpuMatrix) begin_pre_pool(c_, i);
  // An SE block's channel scale its project conv applies in its loads (pre_scale.h).
  if (plannable && placement == Placement::kNpuVector) plan_pre_scale(c_, i);
  if (placement == Placement::kNpuMatrix) begin_pre_scale(c_, i);
  // A graph input's layout change its conv does in its loads (pre_transpose.h).
  if (plannable && placement == Placement::kNpuVector) plan_pre_transpose(c_, i);
  if (placement == Placement::kNpuMatrix) begin_pre_transpose(c_, i);
  // A reader fused into the conv before it was lowered with it: nothing to plan.
  fused_reader_ = conv_pool_.fused && (conv_pool_.pool == i || fused_project(i));
  if (plannable && !fused_reader_ && placement == Placement::kNpuMatrix && !yield_to_line_buffer(c_, i))
    plan_on_chip(c_, i);
  if (plannable && placement == Placement::kNpuVector) plan_se_hold(c_, i);
  // A MatMul's layer scale and residual in its epilogue (project_tail.h).
  if (plannable && placement == Placement::kNpuMatrix) plan_project_tail(c_, i);
  // An SE residual the top-down Add after it does (deferred_residual.h), else in its Mul's loop.
  if (plannable && placement == Placement::kNpuVector && !plan_deferred_residual(c_, i))
    plan_scaled_residual(c_, i);
  begin_deferred_residual(c_, i, plannable ? placement : Placement::kHost);
  // An element-wise layer's rows on chip for the LayerNorm after it (vector_residency.h).
  if (plannable && placement == Placement::kNpuVector && !layernorm) plan_vector_rows(c_, i);
  pair_ = ConvPool{};
  // A conv applying a map in its loads keeps its output out of a line buffer (whose tiling takes the whole
  // accumulator): the map's DRAM round trip is the larger of the two.
  if (plannable && placement == Placement::kNpuMatrix &&
      c_.fusion.pre_affine.reader != static_cast<int64_t>(i) &&
      c_.fusion.pre_norm.reader != static_cast<int64_t>(i) &&
      c_.fusion.pre_pool.reader != static_cast<int64_t>(i) &&
      c_.fusion.pre_scale.reader != static_cast<int64_t>(i) && plan_conv_pool(c_, i, &pair_))
    c_.fusion.conv_pool = &pair_;
  if (plannable && placement == Placement::kNpuMatrix) plan_post_affine(c_, i);
  // A depthwise reader behind an affine map reads the map's output: the pair only with the map in the
  // conv's line-buffer writes (post_affine.h).
  if (c_.fusion.conv_pool == &pair_ && pair_.pool > i + 1 &&
      !(c_.fusion.post_affine.line_buffer && c_.fusion.post_affine.producer == i)) {
    c_.fusion.conv_pool = nullptr;
    pair_ = ConvPool{};
  }
  if (plannable && placement == Placement::kNpuMatrix) plan_store_pool(c_, i);
}

bool Groups::member(size_t i, LayerPlan& plan) const {
  const Node& n = c_.g.nodes[i];
  if (se_pool_member(c_, i, plan)) return true;
  if (store_pool_member(c_, i, plan)) return true;
  if (pre_affine_member(c_, i, plan)) return true;
  if (pre_norm_member(c_, i, plan)) return norm_member_ = true;
  if (pre_pool_member(c_, i, plan)) return true;
  if (pre_scale_member(c_, i, plan)) return true;
  if (pre_transpose_member(c_, i, plan)) return true;
  if (project_tail_member(c_, i, plan)) return tail_member_ = true;
  if (post_affine_member(c_, i, plan)) return true;
  if (deferred_residual_member(c_, i, plan)) return true;
  if (scaled_residual_member(c_, i, plan)) return true;
  if (siblings_.covers(i)) {
    plan.mapping = describe_sibling(c_, siblings_, i);
    plan.fused_into = c_.g.nodes[siblings_.first].name;
    const auto at = std::find(siblings_.others.begin(), siblings_.others.end(), i) - siblings_.others.begin();
    plan.macs = siblings_.macs[static_cast<size_t>(at)];
    return true;
  }
  if (attention_.covers(i)) {
    plan.mapping = describe_fused(c_, attention_, i);
    plan.fused_into = c_.g.nodes[attention_.first].name;
    plan.macs = attention_.macs[i - attention_.first];
    plan.on_chip_input = n.inputs[0];
    plan.on_chip_bytes_saved = attention_.value_bytes_saved;
    return true;
  }
  if (fused_reader_) {
    // The line buffer's reader, or the project conv run in the same band loop.
    const bool project = fused_project(i);
    plan.mapping = project ? describe_fused_project(c_, conv_pool_) : describe_fused_pool(c_, conv_pool_);
    plan.macs = project ? conv_pool_.project_macs : conv_pool_.reader_macs;
    plan.fused_into = c_.g.nodes[conv_pool_.conv].name;
    plan.on_chip_input = n.inputs[0];
    plan.on_chip_bytes_saved = project ? conv_pool_.project_bytes_saved : conv_pool_.bytes_saved;
    plan.fusion_group = fusion_group(c_, conv_pool_);
    return true;
  }
  return false;
}

bool Groups::fused_project(size_t i) const {
  return conv_pool_.project_fused && conv_pool_.project == static_cast<int64_t>(i);
}

int64_t Groups::declined(size_t i) {
  deferred_residual_declined(c_, i);
  if (const int64_t k = pre_affine_declined(c_, i); k >= 0) return k;
  if (const int64_t k = pre_norm_declined(c_, i); k >= 0) return k;
  if (const int64_t k = pre_pool_declined(c_, i); k >= 0) return k;
  if (const int64_t k = pre_transpose_declined(c_, i); k >= 0) return k;
  return pre_scale_declined(c_, i);
}

bool Groups::lower_attention(size_t i) { return (attention_ = backend::lower_attention(c_, i)).fused(); }

bool Groups::lower_siblings(size_t i) {
  SiblingGroup s = backend::lower_siblings(c_, i);
  if (s.others.empty()) return false;
  siblings_ = std::move(s);
  return true;
}

FusionSnapshot::FusionSnapshot(Context& c) : c_(c), state_(c.fusion) {
  if (c.fusion.conv_pool) conv_pool_ = *c.fusion.conv_pool;
}

void FusionSnapshot::restore() const {
  c_.fusion = state_;
  if (conv_pool_) *c_.fusion.conv_pool = *conv_pool_;
}

void Groups::finish(size_t i, LayerPlan& plan) {
  const Node& n = c_.g.nodes[i];
  // First: their reservations end before residency recounts the scratchpad's live regions.
  finish_store_pool(c_, i, plan);
  finish_pre_affine(c_, i, plan);
  finish_pre_norm(c_, i, plan);
  finish_pre_pool(c_, i, plan);
  finish_pre_scale(c_, i, plan);
  finish_pre_transpose(c_, i, plan);
  c_.fusion.conv_pool = nullptr;
  if (pair_.fused) conv_pool_ = pair_;
  if (n.op_type == "Conv" && !pair_.fused && !fused_reader_ &&
      (plan.placement == Placement::kNpuMatrix || plan.placement == Placement::kNpuVector)) {
    kept_output_ = c_.fusion.on_chip.pending && c_.fusion.on_chip.producer == i;
  }
  // A project conv run in its block's band loop stores its output.
  if (fused_reader_ && fused_project(i)) kept_output_ = false;
  // A node of a fused block holds no SRAM of its own (its input lies in the block's slots).
  if (!attention_.covers(i) && !siblings_.covers(i) &&
      !(conv_pool_.fused && (conv_pool_.pool == i || fused_project(i))))
    finish_on_chip(c_, i, plan);
  finish_se_hold(c_, i, plan);
  finish_project_tail(c_, i);
  finish_post_affine(c_, i, plan);
  finish_scaled_residual(c_, i, plan);
  finish_deferred_residual(c_, i, plan);
}

void Groups::record_choice(LayerPlan& plan) const {
  plan.chosen.on_chip = kept_output_;
  // A depthwise conv fused into the conv before it has no placement of its own to write (lowered layer
  // by layer, the back end chooses between the array and the vector unit).
  // Nor does a project GEMM's layer scale or residual (project_tail.h): placed, they run layer by layer.
  // Nor does a LayerNorm in its GEMM's loads: placed, it runs as a layer of its own (pre_norm.h).
  if (!(fused_reader_ && conv_pool_.depthwise && conv_pool_.pool == c_.layer) && !tail_member_ &&
      !norm_member_)
    plan.chosen.placement = plan.placement;
}

}  // namespace npusim::compiler::backend
