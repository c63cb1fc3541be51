// A LayerNormalization applied in the loads of the GEMM after it (pre_norm.h).
#include "compiler/backend/fusion/pre_norm.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "compiler/backend/fusion/pre_affine.h"
#include "compiler/backend/int8/int8.h"
#include "compiler/backend/memory/movement.h"
#include "compiler/backend/vector/rowwise.h"
#include "compiler/backend/vector/vector_tiling.h"
#include "compiler/passes/lowered.h"
#include "compiler/quant/precision.h"
#include "isa/numerics.h"

namespace npusim::compiler::backend {

using isa::Buffer;
using isa::DType;

namespace {

// The accumulator's top while the GEMM is lowered: conversion constants and epsilon (64 bytes), gamma and
// beta, then per chunk of rows the two statistics and the work tiles.
constexpr int64_t kConstBytes = 64;
// The most rows a chunk of the steps takes (more only lengthen the reservation: each VEC's latency is paid
// once a chunk, a few cycles against a chunk's hundreds).
constexpr int64_t kMaxChunkRows = 256;

bool rows_in_onnx_order(const DramTensor& t) {
  for (size_t k = 0; k < t.layout.size(); ++k)
    if (t.layout[k] != static_cast<int>(k)) return false;
  return true;
}

// The steps on `rows` rows at `at` of `buf` (the tile's values, y's codes or the compute format), chunk by
// chunk, the result written back in place.
void apply_rows(Context& c, const PreNorm& p, Buffer buf, uint64_t at, int64_t rows) {
  const int64_t ey = isa::dtype_bytes(p.y_dtype), ex = isa::dtype_bytes(p.x_dtype);
  const At acc{Buffer::kAccumulator, 0};
  for (int64_t r0 = 0; r0 < rows; r0 += p.chunk) {
    const int64_t n = std::min(p.chunk, rows - r0);
    NormRows r;
    r.D = p.D, r.rms = false, r.gamma = p.gamma, r.beta = p.beta, r.a = p.work;
    r.m = {Buffer::kAccumulator, p.m_at}, r.v = {Buffer::kAccumulator, p.v_at};
    r.k = {acc.buf, p.base}, r.gamma_at = {acc.buf, p.gamma_at}, r.beta_at = {acc.buf, p.beta_at};
    if (p.codes) r.x_codes = p.y_dtype, r.y_codes = p.x_dtype;
    const At in{buf, at + static_cast<uint64_t>(r0 * p.D * ey)};
    const At out{buf, at + static_cast<uint64_t>(r0 * p.D * ex)};
    // Float: the tile is a place of the compute format; codes: both work tiles are fp32 rows beside it.
    const At slot = p.codes ? At{Buffer::kAccumulator, p.work2_at} : in;
    norm_rows(c, r, in, slot, At{Buffer::kAccumulator, p.work_at}, out, n);
  }
}

// The LayerNorm's constants where its steps read them, as its own lowering writes them (vector/rowwise.cpp),
// before the GEMM's code that applies it.
void load_constants(Context& c, PreNorm& p) {
  const Node& ln = c.g.nodes[static_cast<size_t>(p.node)];
  const int64_t we = isa::dtype_bytes(p.work);
  // The constants as the LayerNorm's own lowering writes them (vector/rowwise.cpp): epsilon and the rows in
  // the compute format, beta divided by the output scale for codes.
  if (p.codes) {
    load_conversion_constants(c, p.base, p.qx, nullptr);
    load_conversion_constants(c, p.base + 16, nullptr, p.qy);
  }
  const uint64_t eps = c.add_floats({p.epsilon}, p.work);
  c.load(Buffer::kAccumulator, p.base + 32, Range{kDram, eps, eps + static_cast<uint64_t>(we)}, eps, p.work,
         {1, 1, 1, 1}, {0, 0, 0});
  const auto load_row = [&](size_t input, uint64_t at) {
    std::vector<float> v = c.g.value(ln.inputs[input]).constant->to_float_vector();
    if (v.size() == 1) v.assign(static_cast<size_t>(p.D), v[0]);
    if (p.codes && input == 2)
      for (float& b : v) b /= p.qy->scale;
    const uint64_t addr = c.add_floats(v, p.work);
    c.load(Buffer::kAccumulator, at, Range{kDram, addr, addr + static_cast<uint64_t>(p.D * we)}, addr, p.work,
           {p.D, 1, 1, 1}, {0, 0, 0});
  };
  if (p.gamma) load_row(1, p.gamma_at);
  if (p.beta) load_row(2, p.beta_at);
  p.ready = true;
}

// The LayerNorm's layer lowered apart while its GEMM is being lowered: its code tagged with its own layer,
// under its own precision scope, its reservation in the accumulator given back first.
void lower_norm_apart(Context& c, PreNorm& p) {
  if (!p.apart) c.fusion.acc_reserved -= p.reserved;
  p.apart = true;
  const Node& ln = c.g.nodes[static_cast<size_t>(p.node)];
  LayerPlan own;
  own.name = ln.name;
  const Context::OtherLayer other(c, &own, static_cast<uint32_t>(p.node));
  PlanScope scope(c, ln, Placement::kNpuVector);
  lower_vector_apart(c, ln, "lowered apart from its GEMM");
  scope.finish();
}

}  // namespace

void pre_norm_choose(Context& c, const std::function<void()>& emit) {
  if (!c.fusion.pre_norm.carried_by(static_cast<int64_t>(c.layer)) || !c.fusion.pre_norm.begun) return;
  // A mapping file's `in_loads` (--mapping-out writes the trial's outcome) takes that side untried.
  const Node& ln = c.g.nodes[static_cast<size_t>(c.fusion.pre_norm.node)];
  const LayerMapping* imposed = c.options.mapping ? c.options.mapping->find(ln.name) : nullptr;
  const std::optional<bool> in_loads = imposed ? imposed->in_loads : std::nullopt;
  if (in_loads == true || (!in_loads && !c.can_time())) return load_constants(c, c.fusion.pre_norm);
  const auto timed = [&](bool apart, int64_t* ln_cycles) {
    const Context::Trial undo = c.mark();
    const FusionState state = c.fusion;
    const int64_t first = c.em.size();
    if (apart) {
      lower_norm_apart(c, c.fusion.pre_norm);
    } else {
      load_constants(c, c.fusion.pre_norm);
    }
    emit();
    const int64_t end = c.time_end(first);
    if (ln_cycles) {
      const std::vector<int64_t> cycles = c.time_code(first);
      const auto back = static_cast<size_t>(c.layer) - static_cast<size_t>(c.fusion.pre_norm.node);
      *ln_cycles = cycles.size() > back ? cycles[cycles.size() - 1 - back] : 0;
    }
    c.fusion = state;
    c.end_trial(undo);
    c.timed = {};
    return end;
  };
  int64_t ln_cycles = 0;
  if (in_loads == false) {
    if (c.can_time()) timed(true, &ln_cycles);  // the LayerNorm's figure, as the trial found it
  } else {
    const int64_t with = timed(false, nullptr);
    const int64_t without = timed(true, &ln_cycles);
    if (with <= without) return load_constants(c, c.fusion.pre_norm);
  }
  lower_norm_apart(c, c.fusion.pre_norm);
  c.fusion.pre_norm.apart_cycles = ln_cycles;
}

int64_t pre_norm_reader(const Graph& g, size_t i) {
  const Node& n = g.nodes[i];
  if (!n.domain.empty() || n.op_type != "LayerNormalization" || !rowwise_form(g, n)) return -1;
  if (n.attr_string(kPlacement, "") != "vector" || n.outputs.empty() || n.outputs[0].empty()) return -1;
  const std::string& xv = n.outputs[0];
  if (std::find(g.outputs.begin(), g.outputs.end(), xv) != g.outputs.end()) return -1;
  const std::vector<int> readers = g.consumers(xv);
  if (readers.size() != 1 || readers[0] <= static_cast<int>(i)) return -1;
  const Node& m = g.nodes[static_cast<size_t>(readers[0])];
  if ((m.op_type != "MatMul" && m.op_type != "Gemm") || !m.domain.empty() ||
      m.attr_string(kPlacement, "") != "matrix" || m.inputs.size() < 2 || m.inputs[0] != xv ||
      m.inputs[1] == xv || !g.value(m.inputs[1]).is_constant())
    return -1;
  if (m.op_type == "Gemm" && (m.attr_int("transA", 0) || m.attr_int("transB", 0))) return -1;
  for (size_t k = 2; k < m.inputs.size(); ++k)
    if (m.inputs[k] == xv) return -1;
  return readers[0];
}

void plan_pre_norm(Context& c, size_t i) {
  if (c.fusion.pre_norm.node >= 0) return;  // one planned earlier, its reader still ahead
  const Graph& g = c.g;
  const Node& ln = g.nodes[i];
  if (!c.options.keep_on_chip || g.nhwc_io || c.shared_capacity() > 0) return;
  const int64_t j = pre_norm_reader(g, i);
  if (j < 0) return;
  const Node& gemm = g.nodes[static_cast<size_t>(j)];
  if (!reader_map_free(c, ln, gemm)) return;
  // A mapping file placing the LayerNorm runs it as a layer of its own (--mapping-out writes no placement for
  // one taken).
  const LayerMapping* imposed = c.options.mapping ? c.options.mapping->find(ln.name) : nullptr;
  if (imposed && imposed->placement) return;
  // A mapping file tiling the GEMM with a reduction chunk other than the row (--mapping-out writes the row),
  // unless it lowers the LayerNorm apart before that GEMM (`in_loads: false`, the GEMM's tiles its own).
  const RowwiseForm f = *rowwise_form(g, ln);
  if (const LayerMapping* m = c.options.mapping ? c.options.mapping->find(gemm.name) : nullptr;
      m && m->tile_k && *m->tile_k != f.row && !(imposed && imposed->in_loads == false))
    return;
  // Another map its loads carry already (one input, one map).
  const auto reader = static_cast<int64_t>(j);
  if (c.fusion.pre_affine.reader == reader || c.fusion.pre_pool.reader == reader ||
      c.fusion.pre_scale.reader == reader)
    return;
  const std::string &xv = ln.outputs[0], &yv = ln.inputs[0];
  if (!c.tensors.count(xv) || !c.tensors.count(yv)) return;
  const DramTensor& y = c.tensor(yv);
  const DramTensor& x = c.tensor(xv);
  if (x.strided() || y.strided() || !rows_in_onnx_order(x) || !rows_in_onnx_order(y) || x.shape != y.shape)
    return;
  // y must be in DRAM when the GEMM loads it: not a value kept on chip in its place.
  if (c.fusion.kept_on_chip.count(yv) || (c.fusion.on_chip.value == yv && c.fusion.on_chip.pending)) return;
  const quant::PrecisionPlan* plan = c.options.plan;
  const quant::QParams* qy = plan ? plan->qparams(yv) : nullptr;
  const quant::QParams* qx = plan ? plan->qparams(xv) : nullptr;
  const bool codes = qy || qx;
  if (codes) {
    // # int8: codes in and out, as the LayerNorm's own lowering converts them (PlanScope defers them to it),
    // read by an int8 GEMM as they lie.
    if (!qy || !qx || plan->precision_of(ln.name) != quant::Precision::kInt8 ||
        plan->precision_of(gemm.name) != quant::Precision::kInt8 || !int8_matrix_mappable(*plan, gemm) ||
        y.dtype != qy->dtype || x.dtype != qx->dtype || isa::dtype_bytes(y.dtype) != 1 ||
        isa::dtype_bytes(x.dtype) != 1)
      return;
  } else if (x.dtype != c.act || y.dtype != c.act || isa::numerics::is_integer(c.act) ||
             (plan && (plan->precision_of(ln.name) == quant::Precision::kInt8 ||
                       plan->precision_of(ln.name) != plan->precision_of(gemm.name)))) {
    return;
  }
  PreNorm p;
  p.node = static_cast<int64_t>(i);
  p.reader = j;
  p.x = x.range();
  p.y = y.range();
  p.x_addr = x.addr;
  p.y_addr = y.addr;
  p.x_dtype = x.dtype;
  p.y_dtype = y.dtype;
  p.D = f.row;
  p.codes = codes;
  p.qx = qy, p.qy = qx;  // the LayerNorm's input codes (the GEMM loads them), its output's
  p.work = codes ? DType::kFp32 : c.act;
  p.gamma = ln.has_input(1), p.beta = ln.has_input(2);
  p.epsilon = ln.attr_float("epsilon", 1e-5f);
  p.bytes = static_cast<int64_t>(x.bytes);
  // The reservation: at most a quarter of the accumulator, a chunk of at least one row.
  const int64_t we = isa::dtype_bytes(p.work);
  const int64_t fixed = kConstBytes + 2 * round64(p.D * we);
  const int64_t acc = scratchpad_capacity(c.config, Buffer::kAccumulator) - c.fusion.acc_reserved;
  const int64_t per_row = (codes ? 2 : 1) * p.D * we + 2 * we;
  const int64_t room = acc / 4 - fixed - 4 * 64;  // the rounding of four regions
  if (room < per_row || p.D > kMaxDim) return;
  p.chunk = std::min({room / per_row, kMaxChunkRows, kMaxDim});
  p.reserved = fixed + 2 * round64(p.chunk * we) + (codes ? 2 : 1) * round64(p.chunk * p.D * we);
  c.fusion.pre_norm = p;
}

bool pre_norm_member(Context& c, size_t i, LayerPlan& plan) {
  const PreNorm& p = c.fusion.pre_norm;
  if (p.node != static_cast<int64_t>(i)) return false;
  const Node& n = c.g.nodes[i];
  const std::string& reader = c.g.nodes[static_cast<size_t>(p.reader)].name;
  plan.mapping = fmt::format(
      "layernorm (reduce_mean, sub, mul, reduce_mean, add eps, rsqrt, mul{}{}) in the loads of '{}' (each of "
      "its input tiles of whole rows loaded from this layer's input and normalised in place: this layer's "
      "output never goes to DRAM)",
      p.gamma ? ", mul gamma" : "", p.beta ? ", add beta" : "", reader);
  reader_map_plan(plan, n, reader, p.bytes, "pre_norm");
  return true;
}

void begin_pre_norm(Context& c, size_t i) {
  PreNorm& p = c.fusion.pre_norm;
  if (!p.carried_by(static_cast<int64_t>(i))) return;
  const int64_t cap = c.capacity(Buffer::kAccumulator);
  if (p.reserved * 4 > cap) throw std::logic_error("pre_norm: no accumulator room for the LayerNorm");
  const int64_t we = isa::dtype_bytes(p.work);
  p.base = static_cast<uint64_t>(cap - p.reserved) / 64 * 64;
  p.gamma_at = p.base + kConstBytes;
  p.beta_at = p.gamma_at + static_cast<uint64_t>(round64(p.D * we));
  p.m_at = p.beta_at + static_cast<uint64_t>(round64(p.D * we));
  p.v_at = p.m_at + static_cast<uint64_t>(round64(p.chunk * we));
  p.work_at = p.v_at + static_cast<uint64_t>(round64(p.chunk * we));
  p.work2_at = p.work_at + static_cast<uint64_t>(round64(p.chunk * p.D * we));
  c.fusion.acc_reserved += p.reserved;
  p.begun = true;
}

bool carries_pre_norm(const Context& c) {
  const PreNorm& p = c.fusion.pre_norm;
  return p.carried_by(static_cast<int64_t>(c.layer)) && p.begun && !p.apart;
}

namespace {
// Whether the loads of the layer being lowered apply the LayerNorm now (its constants loaded).
bool applies_now(const Context& c) { return carries_pre_norm(c) && c.fusion.pre_norm.ready; }
}  // namespace

int64_t pre_norm_steps(const Context& c) {
  if (!carries_pre_norm(c)) return 0;
  const PreNorm& p = c.fusion.pre_norm;
  // reduce_mean, sub, square, reduce_mean, the factor, gamma, beta (norm_rows); codes: two to dequantize,
  // one to add the zero point.
  return 5 + (p.gamma && p.beta ? 2 : 0) + (p.codes ? 3 : 0);
}

bool load_pre_norm(Context& c, Buffer buf, uint64_t sram, const Range& dram_range, uint64_t dram_addr,
                   DType t, const std::array<int64_t, 4>& s, const std::array<int64_t, 3>& st,
                   const std::array<int64_t, 4>& pads) {
  PreNorm& p = c.fusion.pre_norm;
  if (!applies_now(c) || !p.serves(static_cast<int64_t>(c.layer), dram_range)) return false;
  const int64_t es = isa::dtype_bytes(t);
  if (es != isa::dtype_bytes(p.x_dtype) || pads != std::array<int64_t, 4>{0, 0, 0, 0})
    throw std::logic_error("pre_norm: a padded or converting load of the LayerNorm's output");
  const int64_t e0 = static_cast<int64_t>(dram_addr - p.x_addr) / es;
  // Whole rows: the box's runs are rows of D, its outer strides step whole rows.
  const bool rows = s[0] == p.D && e0 % p.D == 0 && (s[1] == 1 || st[0] % p.D == 0) &&
                    (s[2] == 1 || st[1] % p.D == 0) && (s[3] == 1 || st[2] % p.D == 0);
  if (!rows) throw std::logic_error("pre_norm: a load box of parts of the LayerNorm's rows");
  const int64_t ey = isa::dtype_bytes(p.y_dtype);
  c.load(buf, sram, p.y, p.y_addr + static_cast<uint64_t>(e0 * ey), p.y_dtype, s, st);
  const int64_t rows_in = s[1] * s[2] * s[3];
  if (p.hold) {
    // One box a chunk of rows: the walk may emit them one at a time between its array instructions.
    for (int64_t r0 = 0; r0 < rows_in; r0 += p.chunk)
      p.held.push_back(
          {buf, sram + static_cast<uint64_t>(r0 * p.D * ey), p.D, std::min(p.chunk, rows_in - r0), 1, 0, t});
  } else {
    apply_rows(c, p, buf, sram, rows_in);
  }
  ++p.loads;
  return true;
}

void hold_pre_norm(Context& c) {
  PreNorm& p = c.fusion.pre_norm;
  if (p.hold || !p.held.empty()) throw std::logic_error("pre_norm: a hold while another is held");
  p.hold = true;
}

std::vector<PreAffine::Box> release_pre_norm(Context& c) {
  PreNorm& p = c.fusion.pre_norm;
  p.hold = false;
  std::vector<PreAffine::Box> boxes;
  boxes.swap(p.held);
  return boxes;
}

void emit_pre_norm(Context& c, const std::vector<PreAffine::Box>& boxes) {
  for (const PreAffine::Box& b : boxes) apply_rows(c, c.fusion.pre_norm, b.buf, b.at, b.d1);
}

int64_t pre_norm_declined(Context& c, size_t i) {
  PreNorm& p = c.fusion.pre_norm;
  if (!p.carried_by(static_cast<int64_t>(i))) return -1;
  // Lowered apart already (pre_norm_choose): its code stays before the layer's host call.
  const int64_t node = p.apart ? -1 : p.node;
  if (p.begun && !p.apart) c.fusion.acc_reserved -= p.reserved;
  p = PreNorm{};
  return node;
}

void finish_pre_norm(Context& c, size_t i, const LayerPlan& plan) {
  PreNorm& p = c.fusion.pre_norm;
  if (!p.carried_by(static_cast<int64_t>(i))) return;
  if (p.apart) {
    // Its layer's plan (recorded as a member) says what ran instead.
    LayerPlan& ln = c.result.layers[static_cast<size_t>(p.node)];
    ln.chosen.in_loads = false;
    ln.mapping = fmt::format(
        "row-wise layernorm lowered apart, before '{}' (simulated faster than in that GEMM's loads), stored "
        "once",
        c.g.nodes[i].name);
    ln.fused_into.clear();
    ln.fusion_group.clear();
    ln.on_chip_input.clear();
    ln.on_chip_bytes_saved = 0;
    ln.est_cycles = ln.model_cycles = p.apart_cycles;
    p = PreNorm{};
    return;
  }
  if (p.begun) c.fusion.acc_reserved -= p.reserved;
  if (p.loads == 0 || plan.placement != Placement::kNpuMatrix)
    throw std::logic_error(
        fmt::format("pre_norm: '{}' did not load its input through the LayerNorm", c.g.nodes[i].name));
  c.fusion.unwritten.insert(c.g.nodes[static_cast<size_t>(p.node)].outputs[0]);
  c.result.layers[static_cast<size_t>(p.node)].chosen.in_loads = true;
  p = PreNorm{};
}

}  // namespace npusim::compiler::backend
