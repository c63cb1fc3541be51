// The lowering stage (lower_layers.h).
#include "compiler/backend/stages/lower_layers.h"

#include <fmt/format.h>

#include <algorithm>
#include <exception>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "compiler/backend/estimate/roofline.h"
#include "compiler/backend/fusion/groups.h"
#include "compiler/backend/host/host_call.h"
#include "compiler/backend/int8/int8.h"
#include "compiler/backend/mapping/imposed.h"
#include "compiler/backend/memory/movement.h"
#include "compiler/backend/memory/view_scope.h"
#include "compiler/backend/schedule/interleave.h"
#include "compiler/backend/stages/plan_memory.h"
#include "compiler/backend/vector/vector_tiling.h"
#include "compiler/ir/memory_budget.h"
#include "compiler/passes/lowered.h"
#include "compiler/quant/precision.h"
#include "isa/program_slice.h"
#include "isa/timing/dma.h"
#include "isa/timing/units.h"

namespace npusim::compiler::backend {

namespace {

// What runs before a layer when its code is timed: the whole layer before it, and the code before
// that up to kContextInstructions instructions in all, from at most kContextLayers layers back, so that
// the DMA queues and DRAM are as busy as in the whole program when it starts (docs/backend.md,
// "Estimates": with the layer before only, BERT's short layers are 10-20% off; more context costs
// compile time for no accuracy on the models measured). The run that times a layer also re-times the
// layer before it (its successor's loads compete with it), so it reaches kContextLayers back from that
// layer: with one layer less, an SE block's Mul, whose window opens at its first fc's end and closes after
// its second fc's, lost the DMA traffic of the pool before them (EfficientNet-B0 on tpu-v1 int8:
// features.7.0's Mul re-timed at 2246 cycles against 3641 in its own run and in the whole program).
constexpr size_t kContextLayers = 3;
constexpr int64_t kContextInstructions = 500;

// Why the array cannot run matrix node `n` in the precision the plan gives it ("" when it can). The
// int8 path takes Conv/Gemm/MatMul with constant weights; any other matrix node computes in the
// plan's float format (fp32 for int8 plans), which an int8-only array (tpu-v1, gemmini) does not have.
// Mirrors PlanScope's choice, which raises the same condition as an error.
std::string unsupported_on_array(const Context& c, const Node& n, Placement placement) {
  if (placement != Placement::kNpuMatrix || !c.options.plan) return "";
  const quant::PrecisionPlan& plan = *c.options.plan;
  const quant::Precision p = plan.precision_of(n.name);
  if (int8_matrix_mappable(plan, n)) return "";
  const isa::DType compute = p == quant::Precision::kFp16   ? isa::DType::kFp16
                             : p == quant::Precision::kBf16 ? isa::DType::kBf16
                                                            : isa::DType::kFp32;
  if (c.config.systolic_array.rate(compute) > 0) return "";
  const std::string_view dt = isa::kDTypeNames[static_cast<size_t>(compute)];
  return fmt::format(
      "the array has no {} MACs (systolic_array.{}_rate is 0) and the int8 path does not take "
      "this node (it needs constant weights, or two runtime operands with zero points 0)",
      dt, dt);
}

// Why a node reading or writing a runtime tensor without elements goes to the host ("" when it does not;
// an empty constant, such as a Resize's unused roi, is no tensor the node moves): the lowerings tile their
// tensors and assume at least one element (a window size or Range limits bound to
// values that leave a dimension 0).
std::string empty_tensor(const Context& c, const Node& n) {
  for (const auto* names : {&n.inputs, &n.outputs}) {
    for (const std::string& s : *names) {
      if (s.empty() || !c.g.has_value(s)) continue;
      const Value& v = c.g.value(s);
      if (!v.is_constant() && v.fully_known() && num_elements(v.shape) == 0) {
        return fmt::format("'{}' has no elements (shape {}): nothing for the NPU to tile", s,
                           shape_to_string(v.shape));
      }
    }
  }
  return "";
}

// Why node n goes to the host before any lowering is tried ("" when it does not).
std::string declined_before_lowering(const Context& c, const Node& n, Placement placement) {
  if (std::string why = unsupported_on_array(c, n, placement); !why.empty()) return why;
  return empty_tensor(c, n);
}

// Everything a layer's NPU lowering may change before it fails, taken before it starts: when the lowering
// throws, undo() puts it all back, so that the layer goes to the host exactly as if the lowering had
// declined (docs/backend.md, "Host fallback": a model the NPU cannot fully map still runs).
class LoweringUndo {
 public:
  explicit LoweringUndo(Context& c)
      : c_(c),
        mark_(c.mark()),
        act_(c.act),
        esize_(c.esize),
        tile_limit_(c.tile_limit),
        slot_elems_(c.slot_elems),
        codes_(c.codes),
        fusion_(c) {}
  void keep() { c_.keep(mark_); }
  void undo() {
    c_.end_trial(mark_);  // the code, data segments, DRAM scratch and the layer's plan
    c_.act = act_, c_.esize = esize_;
    c_.tile_limit = tile_limit_, c_.slot_elems = slot_elems_;
    c_.codes = codes_;
    fusion_.restore();
    c_.timed = {};
  }

 private:
  Context& c_;
  Context::Trial mark_;
  isa::DType act_;
  int64_t esize_, tile_limit_, slot_elems_;
  std::map<std::string, const quant::QParams*> codes_;
  FusionSnapshot fusion_;
};

// Why a layer whose NPU lowering threw runs on the host. A CompileError is written for the user (a tile
// that does not fit the scratchpads, say); any other exception is a broken invariant of the back end,
// whose text names code, not the model: the user reads which layer, and that the gap is the back end's.
std::string failed_lowering_reason(const Node& n, Placement placement, const std::exception& e) {
  if (dynamic_cast<const CompileError*>(&e)) return fmt::format("the NPU cannot map it: {}", e.what());
  return fmt::format(
      "this form of {} is not mapped by the back end's {} lowering (a gap of npusim's back end, not of the "
      "model)",
      n.op_type, placement == Placement::kNpuMatrix ? "array" : "vector-unit");
}

// Layer i runs on the host although an earlier layer's work was left to its NPU code (Groups::declined: a
// map it was to apply in its loads): that layer is lowered now, before it, on the vector unit.
void lower_declined(Context& c, Groups& groups, size_t i) {
  const int64_t k = groups.declined(i);
  if (k >= 0) lower_vector_apart(c, c.g.nodes[static_cast<size_t>(k)], "declined after its reader did");
}

// Cycles of instructions [from, end of program) simulated as one span on an idle machine (the same slice
// as Context::time_code's from the same instruction: the timer simulates it once for both).
int64_t span_cycles(const Context& c, int64_t from) {
  return c.options
      .timer(isa::slice_program(c.program, static_cast<size_t>(from), c.program.instructions.size(), {}))
      .total;
}

// The layer just lowered, whose code starts at `first`, merged into the code of the layer before it
// (schedule/interleave.h) when the merged order simulates faster than the two one after the other.
// `kept_from` is the argument of the last collapse_sram before the layer. Returns where the layer's code
// starts now.
int64_t interleave_with_previous(Context& c, int64_t first, int64_t kept_from) {
  Emitter& em = c.em;
  if (em.windows() < 2 || em.window_from(1) != first || em.window_from(0) >= first || em.size() <= first)
    return first;
  const int64_t from = em.window_from(0);
  std::vector<isa::Instruction> code(c.program.instructions.begin() + from, c.program.instructions.end());
  std::vector<Access> access;
  access.reserve(code.size());
  for (int64_t k = from; k < em.size(); ++k) access.push_back(em.access(k));
  const std::vector<int64_t> local =
      interleave_order(code, access, static_cast<size_t>(first - from), c.config);
  bool same = true;
  for (size_t k = 0; k < local.size() && same; ++k) same = local[k] == static_cast<int64_t>(k);
  if (same) return first;
  // Timed with the layers before as context (their tails overlap the merged code's head), as the layers are.
  const int64_t timed_from = c.context_first >= 0 && c.context_first < from ? c.context_first : from;
  const int64_t before = span_cycles(c, timed_from);
  std::vector<int64_t> order(local.size());
  for (size_t k = 0; k < local.size(); ++k) order[k] = from + local[k];
  em.reemit(order, -1, -1, first);
  const int64_t merged_first = em.window_from(1);
  const int64_t after = span_cycles(c, timed_from);
  if (after < before) return merged_first;
  // Slower: the code as it was, emitted again in its first order (the emitter gives the same tokens).
  std::vector<int64_t> back(order.size());
  for (size_t k = 0; k < order.size(); ++k)
    back[static_cast<size_t>(order[k] - from)] = from + static_cast<int64_t>(k);
  em.reemit(back, merged_first, kept_from, merged_first);
  return first;
}

}  // namespace

void lower_layers(Context& c) {
  const Graph& g = c.g;
  const CompileOptions& options = c.options;
  const isa::NpuConfig& config = c.config;
  CompileResult& result = c.result;
  isa::Program& prog = c.program;
  // Layers whose code was timed, in order: (first instruction, layer index).
  std::vector<std::pair<int64_t, size_t>> timed_layers;
  Groups groups(c);       // fusion/groups.h
  int64_t kept_from = 0;  // the last collapse_sram's argument
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    c.layer = static_cast<uint32_t>(i);
    LayerPlan plan;
    plan.name = n.name;
    plan.op = n.op_type;
    plan.placement = placement_of(n);
    const bool folded = c.folding.folded(n) || c.views.folds(n);
    if (folded) plan.placement = Placement::kFree;
    c.plan = &plan;
    const LayerMapping* imposed = options.mapping ? options.mapping->find(n.name) : nullptr;
    const bool forced_host = imposed && imposed_host(*imposed, n, plan.placement);
    // Neighbouring layers interleaved where that simulates faster (schedule/interleave.h): not for a
    // SCALE-Sim topology, whose rows run one at a time, nor under an energy objective (cycles decide).
    const bool interleave = options.interleave_layers && c.can_time() && !g.nhwc_io &&
                            (options.objective == MappingObjective::kCycles || !options.energy);
    if (interleave && (c.em.windows() == 0 || c.em.window_from(c.em.windows() - 1) < c.em.size()))
      c.em.open_window();
    int64_t before = c.em.size();
    groups.begin(i, plan.placement, !forced_host && !folded);
    if (n.domain == kNpuDomain && n.op_type == "Transpose" && n.has_attr(kLayoutChange)) {
      const Value& in = g.value(n.inputs[0]);
      const Value& out = g.value(n.outputs[0]);
      result.transposes.push_back({n.name, n.inputs[0], n.outputs[0], in.shape, in.layout, out.layout,
                                   n.attr_string(kLayoutReason, "")});
    }
    if (folded) {
      plan.mapping = c.views.folds(n) ? c.views.describe(g, n) : c.folding.describe(n);
    } else if (groups.member(i, plan)) {
      // Its work is done by the group lowered with an earlier layer.
    } else if (!forced_host && plan.placement == Placement::kNpuMatrix && groups.lower_attention(i)) {
      plan.instructions = c.em.size() - before;
    } else if (!forced_host && plan.placement == Placement::kNpuMatrix && groups.lower_siblings(i)) {
      plan.instructions = c.em.size() - before;
    } else if (plan.placement == Placement::kFree) {
      plan.mapping = "alias (no instructions)";
      if (n.op_type == "Dropout" && n.outputs.size() > 1 && !n.outputs[1].empty() &&
          c.tensors.count(n.outputs[1])) {
        // Inference: the mask is all true, written as a fill.
        const DramTensor& mask = c.tensor(n.outputs[1]);
        copy_index_map(c, mask, {}, std::vector<int64_t>(static_cast<size_t>(num_elements(mask.shape)), -1),
                       1.0);
        plan.mapping = "alias; mask written as a fill of ones";
        plan.instructions = c.em.size() - before;
      }
    } else if (plan.placement == Placement::kHost && !options.plan) {
      ViewScope views(c, n, plan.placement);
      lower_host(c, n, "placed on the host by the op table");
      views.finish();
    } else if (plan.placement == Placement::kHost) {
      ViewScope views(c, n, plan.placement);
      PlanScope scope(c, n, plan.placement);  // # int8: conversions around the node
      lower_host(c, n, "placed on the host by the op table");
      scope.finish();
      views.finish();
    } else if (std::string unsupported = declined_before_lowering(c, n, plan.placement);
               !unsupported.empty()) {
      // The array has no MACs in the precision this node would need (an int8-only part and a MatMul of
      // two runtime operands, say), or the node has no elements to work on: the CPU runs it, and the
      // report shows what that costs.
      plan.placement = Placement::kHost;
      lower_declined(c, groups, i);
      ViewScope views(c, n, plan.placement);
      PlanScope scope(c, n, plan.placement);
      lower_host(c, n, unsupported);
      scope.finish();
      views.finish();
    } else {
      ViewScope views(c, n, plan.placement);  // dense copies of the views it does not take
      PlanScope scope(c, n, plan.placement);  // # int8: conversions around the node, no-op without a plan
      std::string why;
      bool ok = false;
      if (forced_host) {
        why = "placed on the host by the mapping file";  // as if the lowering declined: the same path
      } else {
        LoweringUndo undo(c);
        try {
          if (plan.placement == Placement::kNpuMatrix) {
            ok = scope.int8_matrix() ? lower_matrix_int8(c, n) : lower_matrix(c, n);
            if (!ok) why = matrix_decline_reason(c, n);
            if (!ok && why.empty()) why = "matrix op form not mapped by the back end";
          } else {
            ok = lower_vector_tiled(c, n, &why);
          }
          if (ok) {
            undo.keep();
          } else {
            undo.undo();  // what a lowering emitted before it declined
          }
        } catch (const MappingError&) {
          throw;  // the user's mapping file asks for what cannot be: exit 2 naming its line
        } catch (const MemoryError&) {
          throw;  // the whole model is beyond the memory budget, whichever unit runs this layer
        } catch (const std::exception& e) {
          undo.undo();
          ok = false;
          why = failed_lowering_reason(n, plan.placement, e);
        }
      }
      if (!ok) {
        plan.placement = Placement::kHost;
        lower_declined(c, groups, i);
        scope.materialize();  // # int8: the host reads floats
        views.materialize();  // ... and dense tensors
        lower_host(c, n, why.empty() ? "not mapped by the back end" : why);
      } else {
        plan.instructions = c.em.size() - before;
        if (n.has_attr(kDecomposedWhy)) plan.mapping += "; " + n.attr_string(kDecomposedWhy, "");
        if (plan.placement != Placement::kNpuMatrix) {
          // Vector layers: the busier of the vector unit and the DMA engines, from the emitted code.
          // (A VEC output on the accumulator's output stage runs beside the lanes.)
          double vec = 0, stage = 0, dma = 0;
          for (int64_t k = before; k < c.em.size(); ++k) {
            const isa::Instruction& ins = prog.instructions[static_cast<size_t>(k)];
            if (ins.opcode == isa::Opcode::kVec && isa::timing::on_output_stage(ins, config))
              stage += static_cast<double>(isa::timing::output_stage_cycles(ins, config));
            else if (ins.opcode == isa::Opcode::kVec)
              vec += static_cast<double>(isa::timing::vec_cycles(ins, config.vector));
            if (ins.opcode == isa::Opcode::kLoad || ins.opcode == isa::Opcode::kStore) {
              dma += isa::timing::estimate_dma_cycles(ins, config);
            }
          }
          dma /= static_cast<double>(std::max<int64_t>(1, config.dma.engines));
          plan.est_compute_cycles = static_cast<int64_t>(std::max(vec, stage));
          plan.est_dma_cycles = static_cast<int64_t>(dma);
          plan.est_cycles = static_cast<int64_t>(std::max({vec, stage, dma}));
        }
      }
      scope.finish();
      views.finish();
      if (const std::string note = views.describe(); !note.empty()) plan.mapping += "; " + note;
      if (const std::string note = c.folding.describe(n); !note.empty()) plan.mapping += "; " + note;
    }
    groups.finish(i, plan);
    if (interleave) before = interleave_with_previous(c, before, kept_from);
    if (plan.model_cycles == 0) plan.model_cycles = plan.est_cycles;
    if (c.can_time() && c.em.size() > before) {
      // Between its neighbours, as in the whole program: the layers before it run first (their tails
      // overlap this layer's first loads), and the layer before it takes its figure from this run, where
      // its successor's loads compete with it for DRAM.
      const bool known = c.timed.first == before && c.timed.last == c.em.size() && !c.timed.cycles.empty();
      const std::vector<int64_t> cycles = known ? c.timed.cycles : c.time_code(before);
      plan.est_cycles = cycles.back();
      if (!timed_layers.empty()) {
        const int64_t from = c.context_first >= 0 && c.context_first < before ? c.context_first : before;
        size_t base = prog.instructions[static_cast<size_t>(from)].layer();  // the slice's first layer
        for (int64_t k = from; k < c.em.size(); ++k)
          base = std::min<size_t>(base, prog.instructions[static_cast<size_t>(k)].layer());
        const size_t previous = timed_layers.back().second;
        if (previous >= base && previous - base < cycles.size() - 1 && cycles[previous - base] > 0) {
          result.layers[previous].est_cycles = cycles[previous - base];
        }
      }
      timed_layers.emplace_back(before, i);
      const size_t k = timed_layers.size() - std::min(timed_layers.size(), kContextLayers + 1);
      c.context_first = std::max(timed_layers[k].first, std::min(before, c.em.size() - kContextInstructions));
    }
    c.timed = {};
    const isa::DType precision =
        options.plan ? quant::to_dtype(options.plan->reported_precision(n.name)) : options.precision;
    if (plan.placement == Placement::kFree && plan.instructions == 0) {
      plan.bound_cycles = 0;
    } else if (plan.placement != Placement::kHost) {
      plan.bound_cycles = roofline(g, n, plan.macs, precision, config).bound_cycles();
    }
    // What the program carries of the layer, so a run of the program file reports what this run does.
    prog.layers[i].precision = precision;
    if (plan.placement == Placement::kNpuMatrix || plan.placement == Placement::kNpuVector)
      prog.layers[i].macs = static_cast<uint64_t>(plan.macs);
    // A SCALE-Sim topology's rows are independent layers that SCALE-Sim runs one at a time: each starts
    // after the one before it (its SRAM history merged whole), so every row's cycles are its own and
    // they add up to the run. A model's layers keep the exact history of the layer just emitted.
    kept_from = g.nhwc_io ? c.em.size() : before;
    c.em.collapse_sram(kept_from);
    if (imposed) check_applied(*imposed, plan, forced_host);
    plan.chosen.name = plan.name;
    groups.record_choice(plan);
    result.layers.push_back(plan);
  }
  c.em.halt(static_cast<uint32_t>(g.nodes.empty() ? 0 : g.nodes.size() - 1));
}

}  // namespace npusim::compiler::backend
