// SRAM tiles of vector layers (see vector_tiling.h).
#include "compiler/backend/vector/vector_tiling.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <vector>

#include "compiler/backend/estimate/roofline.h"
#include "compiler/backend/fusion/deferred_residual.h"
#include "compiler/backend/fusion/scaled_residual.h"
#include "compiler/backend/fusion/upsample_add.h"
#include "compiler/backend/mapping/mapping.h"
#include "compiler/backend/memory/view_scope.h"
#include "compiler/backend/stages/plan_memory.h"
#include "compiler/quant/precision.h"
#include "isa/ceil_div.h"
#include "isa/program_slice.h"

namespace npusim::compiler::backend {

namespace {

// A tensor that takes this many whole-SRAM tiles or more already keeps the DMA engines and the vector
// unit overlapped: its tile is not searched.
constexpr int64_t kDeepPipeline = 8;
// Halvings of the whole-SRAM tile tried, and the fewest elements a tried tile keeps.
constexpr int kHalvings = 3;
constexpr int64_t kMinTileElems = 1024;
// A tile other than the one of the shortest span is taken for its readers (figure) only when their end
// comes at least this share earlier: the readers' roofline bound is a floor, not how they read (a pool or a
// conv whose first tile needs more than the first tile stored starts no earlier), so small gains are noise.
constexpr double kReaderMargin = 0.02;

// The most elements of any runtime value the node reads or writes.
int64_t largest_value(const Context& c, const Node& n) {
  int64_t most = 1;
  for (const auto* list : {&n.inputs, &n.outputs}) {
    for (const std::string& v : *list) {
      auto t = c.tensors.find(v);
      if (!v.empty() && t != c.tensors.end()) most = std::max(most, num_elements(t->second.shape));
    }
  }
  return most;
}

// A reduction whose partial sums follow the tiles (a global average pool's bands, a ReduceMean's chunks):
// another tile would round differently, so the search keeps the scratchpad's tile and the --functional
// results stay those of every other mapping decision (an imposed tile_elems is the user's choice).
bool tile_dependent_sums(const Node& n) {
  const std::string& t = n.op_type;
  return t == "GlobalAveragePool" || t == "ReduceMean" || t == "ReduceSum" || t == "ReduceL1" ||
         t == "ReduceL2" || t == "ReduceSumSquare" || t == "ReduceLogSumExp" || t == "ReduceProd";
}

// Everything the candidates' code depends on: the node's kind, attributes and values (shapes, types,
// layouts, views) and the int8 codes it converts itself.
std::string decision_key(const Context& c, const Node& n) {
  std::string k = fmt::format("vector-tile {} {}|", n.domain, n.op_type);
  for (const auto& [name, a] : n.attrs) {
    k += name + "=";
    switch (a.kind()) {
      case Attribute::Kind::kInt:
        k += fmt::format("{}", a.i());
        break;
      case Attribute::Kind::kFloat:
        k += fmt::format("{}", a.f());
        break;
      case Attribute::Kind::kString:
        k += a.s();
        break;
      case Attribute::Kind::kInts:
        k += fmt::format("{}", fmt::join(a.ints(), ","));
        break;
      case Attribute::Kind::kFloats:
        k += fmt::format("{}", fmt::join(a.floats(), ","));
        break;
      default:
        k += "?";  // strings and tensors: never the same decision by accident
        k += n.name;
    }
    k += ";";
  }
  for (const auto* list : {&n.inputs, &n.outputs}) {
    for (const std::string& v : *list) {
      k += "|";
      if (v.empty()) continue;
      if (auto t = c.tensors.find(v); t != c.tensors.end()) {
        const DramTensor& d = t->second;
        k += fmt::format("{} {} {} {} {}", fmt::join(d.shape, "x"), static_cast<int>(d.dtype),
                         fmt::join(d.layout, ","), fmt::join(d.view_strides, ","), c.codes.count(v));
      } else {
        k += "const " + v;  // constants: their values are the node's own
      }
    }
  }
  return k;
}

// The fewest cycles the NPU layers reading node n's output need: the longest of their roofline bounds
// (their MACs at the array's peak, else their tensors over the lanes or DRAM), 0 when none reads it.
int64_t reader_cycles(const Context& c, const Node& n) {
  int64_t most = 0;
  for (const std::string& v : n.outputs) {
    if (v.empty() || !c.g.has_value(v)) continue;
    for (int k : c.g.consumers(v)) {
      const Node& r = c.g.nodes[static_cast<size_t>(k)];
      if (placement_of(r) != Placement::kNpuMatrix && placement_of(r) != Placement::kNpuVector) continue;
      int64_t macs = 0;
      if (placement_of(r) == Placement::kNpuMatrix && r.inputs.size() >= 2 && !r.outputs.empty() &&
          c.g.has_value(r.inputs[0]) && c.g.has_value(r.inputs[1]) && c.g.has_value(r.outputs[0])) {
        const Shape& a = c.g.value(r.inputs[0]).shape;
        const Shape& w = c.g.value(r.inputs[1]).shape;
        const Value& out = c.g.value(r.outputs[0]);
        if (!out.fully_known() || a.empty() || w.empty()) continue;
        int64_t per_output = 1;  // the products each output element sums
        if (r.op_type == "Conv") {
          for (size_t d = 1; d < w.size(); ++d) per_output *= w[d];
        } else if (r.op_type == "Gemm") {
          per_output = r.attr_int("transA", 0) != 0 ? a.front() : a.back();
        } else {
          per_output = a.back();
        }
        macs = num_elements(out.shape) * per_output;
      }
      const isa::DType precision =
          c.options.plan ? quant::to_dtype(c.options.plan->reported_precision(r.name)) : c.options.precision;
      most = std::max(most, roofline(c.g, r, macs, precision, c.config).bound_cycles());
    }
  }
  return most;
}

// One emission of the lowering under `limit` elements per slot (0 = the scratchpad's), its two slots laid
// out as three where they hold three tiles when `ring` (Slots::ring): whether it lowered, the largest slot
// it used and whether it used three.
struct Emitted {
  bool ok = false;
  int64_t slot_elems = 0;
  bool rang = false;
};
Emitted emit(Context& c, const Node& n, int64_t limit, std::string* why, bool ring = false) {
  c.tile_limit = limit;
  c.slot_elems = 0;
  c.slot_ring = ring;
  c.rang = false;
  Emitted e;
  e.ok = lower_vector(c, n, why);
  e.slot_elems = c.slot_elems;
  e.rang = c.rang;
  c.tile_limit = 0;
  c.slot_elems = 0;
  c.slot_ring = c.rang = false;
  return e;
}

// A trial emission under `limit`: its simulated cycles (or -1 when it does not lower), rolled back.
struct Trialled {
  int64_t cycles = -1;
  // When the first tile's STORE ends, timed alone from the layer's first instruction, and the STOREs
  // emitted (the tiles): set when the trial was asked for them.
  int64_t first_stored = -1, stores = 0;
  int64_t slot_elems = 0;
  bool rang = false;    // its slots laid out as three (Slots::ring)
  std::string mapping;  // the lowering's description
  Context::Timed timed;
};
Trialled trial_once(Context& c, const Node& n, int64_t limit, bool first_store, bool ring) {
  const int64_t first = c.em.size();
  const Context::Trial t = c.begin_trial();
  std::string why;
  const Emitted e = emit(c, n, limit, &why, ring);
  Trialled r;
  r.slot_elems = e.slot_elems;
  r.rang = e.rang;
  r.mapping = c.plan->mapping;
  if (e.ok && c.can_time()) {
    std::vector<int64_t> cycles = c.time_code(first);
    r.cycles = cycles.empty() ? 0 : cycles.back();
    r.timed = {first, c.em.size(), std::move(cycles)};
    for (int64_t k = first; first_store && k < c.em.size(); ++k) {
      if (c.program.instructions[static_cast<size_t>(k)].opcode != isa::Opcode::kStore) continue;
      if (r.stores++ > 0) continue;
      const auto end = static_cast<size_t>(k + 1);
      r.first_stored = c.options
                           .timer(isa::slice_program(c.program, static_cast<size_t>(first), end,
                                                     isa::token_balance(c.program, end)))
                           .total;
    }
  } else if (e.ok) {
    r.cycles = 0;
  }
  c.end_trial(t);
  return r;
}

// A trial under `limit` with the slots the simulation prefers: three where the two hold three tiles
// (Slots::ring: a tile's LOAD waits for the STORE three tiles back, so which of two DMA transfers the
// DRAM serves first, e.g. where a refresh falls, no longer delays the loads after them) when that is
// strictly faster, else the two.
Trialled trial(Context& c, const Node& n, int64_t limit, bool first_store = false) {
  Trialled three = trial_once(c, n, limit, first_store, true);
  if (!three.rang) return three;  // the same code as with two slots
  Trialled two = trial_once(c, n, limit, first_store, false);
  return three.cycles >= 0 && three.cycles < two.cycles ? three : two;
}

// What a candidate tile is judged by: its simulated span when no NPU layer reads its output; else when
// its readers could end (`reader` cycles: reader_cycles), a reader starting on the first tile once its
// STORE ends and needing its share of one tile after the last: a smaller tile that lengthens the layer
// may still let a long reader start (and end) earlier.
int64_t figure(const Trialled& t, int64_t reader) {
  if (reader <= 0 || t.first_stored < 0 || t.stores == 0) return t.cycles;
  return std::max(t.first_stored + reader, t.cycles + reader / t.stores);
}

// The layer's tile in its plan. A slot larger than the whole tensor holds it in one tile: the plan
// shows the tensor's elements, and the mapping records nothing to impose (a larger value is an error).
void record(Context& c, const Node& n, int64_t slot_elems) {
  const int64_t total = largest_value(c, n);
  c.plan->tile_elems = std::min(slot_elems, total);
  if (slot_elems > 0 && slot_elems <= total) c.plan->chosen.tile_elems = slot_elems;
}

[[noreturn]] void fail(const LayerMapping& m, const std::string& what) {
  throw MappingError(fmt::format("{}: layer '{}': {}", m.at("tile_elems"), m.name, what));
}

// The imposed tile: checked against the layer (the whole-SRAM tile found by a trial) and emitted.
bool lower_imposed(Context& c, const Node& n, const LayerMapping& m, std::string* why) {
  const int64_t want = *m.tile_elems;
  if (want < 1) fail(m, fmt::format("tile_elems={} must be at least 1", want));
  const Trialled whole = trial(c, n, 0);
  if (whole.cycles < 0) return emit(c, n, 0, why).ok;  // the vector unit cannot run it: the caller falls back
  if (whole.slot_elems == 0) {
    fail(m, fmt::format("tile_elems={}: this {} streams no SRAM tiles ({}), so it has no tile to choose",
                        want, n.op_type, whole.mapping));
  }
  const int64_t total = largest_value(c, n);
  if (want > total) {
    fail(m,
         fmt::format("tile_elems={} is larger than the layer's largest tensor ({} elements)", want, total));
  }
  if (want > whole.slot_elems) {
    fail(m, fmt::format(
                "tile_elems={} overflows the scratchpad: a ping-pong slot of this layer holds at most {} "
                "elements",
                want, whole.slot_elems));
  }
  const Emitted e = emit(c, n, want, why, trial(c, n, want).rang);
  if (!e.ok) {
    throw std::logic_error(
        "backend: a vector lowering that lowered with its whole-SRAM tile gave up on a smaller one");
  }
  record(c, n, e.slot_elems);
  c.plan->tile_limit = "imposed by the mapping file";
  return true;
}

}  // namespace

void lower_vector_apart(Context& c, const Node& n, const char* context) {
  LayerPlan* own = c.plan;
  LayerPlan plan;
  c.plan = &plan;
  ViewScope views(c, n, Placement::kNpuVector);
  std::string why;
  if (!lower_vector_tiled(c, n, &why))
    throw std::logic_error(fmt::format("backend: '{}' {}: {}", n.name, context, why));
  views.finish();
  c.plan = own;
}

bool lower_vector_tiled(Context& c, const Node& n, std::string* why) {
  const LayerMapping* imposed = c.options.mapping ? c.options.mapping->find(n.name) : nullptr;
  if (imposed && imposed->tile_elems) return lower_imposed(c, n, *imposed, why);
  if (!c.can_time()) {  // the compiler's own tests: the whole-SRAM tile, as the closed form assumes
    const Emitted e = emit(c, n, 0, why);
    if (e.ok) record(c, n, e.slot_elems);
    return e.ok;
  }
  // An SE Mul that may add its input back (fusion/scaled_residual.h): with and without, both simulated.
  scaled_residual_choose(c, n, [&] { return trial(c, n, 0).cycles; });
  const int64_t reader = reader_cycles(c, n);
  const std::string key = decision_key(c, n) + fmt::format("|reader {}", reader) +
                          (scaled_residual_output(c, n) ? "+residual add" : "") +
                          (upsampled_operand(c, n) ? "+upsampled operand" : "") +
                          (deferred_residual_of(c, n) ? "+deferred residual" : "");
  int64_t limit = 0;
  bool ring = false;
  std::string reason;
  Context::Timed timed;
  if (auto it = c.decided.find(key); it != c.decided.end()) {
    limit = static_cast<int64_t>(it->second / 2);
    ring = it->second % 2 != 0;
    if (limit > 0) reason = "a smaller tile pipelines better (the choice made for an identical layer before)";
  } else {
    Trialled best = trial(c, n, 0, reader > 0);
    if (best.cycles < 0) return emit(c, n, 0, why).ok;  // not on the vector unit: `why` says so
    const int64_t whole = best.slot_elems, total = largest_value(c, n);
    timed = best.timed;
    if (whole > 0 && ceil_div(total, whole) < kDeepPipeline && !tile_dependent_sums(n)) {
      // The shortest span and the readers' earliest end (figure), each with its tile (0: the whole-SRAM one).
      const Trialled whole_trial = best;
      Trialled for_readers = best;
      int64_t readers_limit = 0;
      for (int h = 1; h <= kHalvings; ++h) {
        const int64_t cand = (whole >> h) / 64 * 64;
        if (cand < kMinTileElems) break;
        if (cand >= total) continue;  // the same tiles
        const Trialled t = trial(c, n, cand, reader > 0);
        if (t.cycles < 0) continue;
        if (t.cycles < best.cycles) best = t, limit = cand;
        if (figure(t, reader) < figure(for_readers, reader)) for_readers = t, readers_limit = cand;
      }
      const int64_t span_best = best.cycles;
      // Its readers' gain must also exceed the span it adds: the layer's own units and DMA stay busy that
      // much longer, which the readers' loads compete with.
      const int64_t lost = std::max<int64_t>(0, for_readers.cycles - span_best);
      if (readers_limit != limit && static_cast<double>(figure(for_readers, reader) + lost) <
                                        (1.0 - kReaderMargin) * static_cast<double>(figure(best, reader))) {
        reason = fmt::format(
            "a smaller tile lets its readers ({} cycles at least) start earlier: its first tile stored "
            "at {} cycles against {} with the whole-SRAM tile of {} elements, the layer's span {} against "
            "{} at the shortest",
            reader, for_readers.first_stored, whole_trial.first_stored, whole, for_readers.cycles, span_best);
        best = for_readers, limit = readers_limit;
      } else if (limit > 0) {
        reason = fmt::format(
            "a smaller tile pipelines better: {} cycles simulated against {} with the "
            "whole-SRAM tile of {} elements",
            best.cycles, whole_trial.cycles, whole);
      }
      timed = best.timed;
    }
    ring = best.rang;
    c.decided.emplace(key, static_cast<size_t>(limit) * 2 + (ring ? 1 : 0));
  }
  const int64_t first = c.em.size();
  const Emitted e = emit(c, n, limit, why, ring);
  if (!e.ok) throw std::logic_error("backend: a vector lowering gave up on the tile its trial lowered");
  // The winning trial's code, emitted again unchanged: its time is known.
  c.timed = timed.first == first && timed.last == c.em.size() ? timed : Context::Timed{};
  record(c, n, e.slot_elems);
  if (e.rang)
    reason +=
        (reason.empty() ? "" : "; ") + std::string("three slots of the tile, simulated faster than two");
  c.plan->tile_limit = reason;
  return true;
}

}  // namespace npusim::compiler::backend
