#include "compiler/backend/fusion/residency.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "compiler/backend/fusion/layer_fusion.h"
#include "compiler/backend/fusion/pre_norm.h"
#include "compiler/backend/fusion/se_fusion.h"
#include "compiler/backend/matrix/depthwise.h"
#include "compiler/backend/matrix/pixel_packing.h"
#include "compiler/passes/lowered.h"
#include "compiler/quant/precision.h"

namespace npusim::compiler::backend {

namespace {

// A Conv the walk can run as a GEMM over its input's pixels: 1x1, stride 1, no padding, one group,
// constant weights.
bool pointwise_conv(const Graph& g, const Node& n) {
  if (n.op_type != "Conv" || n.inputs.size() < 2 || n.attr_int("group", 1) != 1) return false;
  const Value& w = g.value(n.inputs[1]);
  if (!w.is_constant() || w.shape.size() != 4 || w.shape[2] != 1 || w.shape[3] != 1) return false;
  for (int64_t s : n.attr_ints("strides", {1, 1})) {
    if (s != 1) return false;
  }
  for (int64_t p : n.attr_ints("pads", {0, 0, 0, 0})) {
    if (p != 0) return false;
  }
  const std::string pad = n.attr_string("auto_pad", "NOTSET");
  return pad == "NOTSET" || pad == "VALID";
}

// Graph nodes after a producer within which a residual reader is looked for: a bottleneck block's
// output is read by the block after it as its residual three layers on (conv1, conv2, conv3).
constexpr size_t kResidualReach = 4;
// A GEMM chain's column-block candidates beside the stored tiling's tile: 1 to this many whole folds of the
// array's columns (chain_block).
constexpr int64_t kChainBlockFolds = 4;

// The layer within kResidualReach after node i that reads node i's output as its residual (a Conv with
// the fused Add's operand as inputs[3]), or -1.
int64_t residual_reader(const Graph& g, size_t i) {
  const std::string& v = g.nodes[i].outputs[0];
  for (size_t k = i + 1; k < g.nodes.size() && k <= i + kResidualReach; ++k) {
    const Node& n = g.nodes[k];
    if (n.op_type == "Conv" && n.has_attr(kResidualInput) && n.has_input(3) && n.inputs[3] == v)
      return static_cast<int64_t>(k);
  }
  return -1;
}

// The scratchpad's live regions: an SE block's held input, a value held for a residual reader, a value
// left for the next layer.
std::vector<std::pair<uint64_t, uint64_t>> live_regions(const Context& c) {
  std::vector<std::pair<uint64_t, uint64_t>> r;
  if (c.fusion.input_held > 0)
    r.emplace_back(c.fusion.held.addr, c.fusion.held.addr + static_cast<uint64_t>(c.fusion.input_held));
  for (const OnChipValue* v : {&c.fusion.residual, &c.fusion.on_chip}) {
    if (v->pending || (v == &c.fusion.on_chip && v->residual_reader > static_cast<int64_t>(c.layer)))
      r.emplace_back(v->addr, v->addr + static_cast<uint64_t>(round64(v->bytes)));
  }
  return r;
}

// The highest `bytes` of the input scratchpad that overlap no live region (0 when none do: more than
// the 3/4 a plan may hold): values held for a residual reader alternate between two places instead of
// stacking up block after block.
uint64_t highest_free(const Context& c, int64_t bytes) {
  const auto cap = static_cast<uint64_t>(scratchpad_capacity(c.config, isa::Buffer::kInput));
  const auto b = static_cast<uint64_t>(bytes);
  const std::vector<std::pair<uint64_t, uint64_t>> live = live_regions(c);
  std::vector<uint64_t> tops = {cap};
  for (const auto& l : live) tops.push_back(l.first);
  std::sort(tops.rbegin(), tops.rend());
  for (uint64_t top : tops) {
    if (top < b) continue;
    const uint64_t lo = top - b;
    if (std::none_of(live.begin(), live.end(), [&](const auto& l) { return lo < l.second && l.first < top; }))
      return lo;
  }
  return 0;
}

// Moves the value left for the layer after its producer (FusionState::on_chip) to FusionState::residual
// when a later layer reads it as its residual: still current in SRAM, a copy in DRAM (stored or spilled)
// for any other reader. Otherwise, or when another value is held there, spills it if only SRAM has it.
void hold_or_spill(Context& c) {
  OnChipValue& v = c.fusion.on_chip;
  OnChipValue& r = c.fusion.residual;
  if (!v.value.empty() && v.residual_reader > static_cast<int64_t>(c.layer) && r.value.empty()) {
    if (v.spilled) c.fusion.kept_on_chip.erase(v.value);
    r = v;
    r.in_dram = v.in_dram || v.spilled;
    r.spilled = false;
    r.pending = true;
  } else {
    c.spill(v);
  }
  v = {};
}

// input_reserved down to the lowest live region (none: 0).
void reserve_live(Context& c) {
  const auto cap = static_cast<uint64_t>(scratchpad_capacity(c.config, isa::Buffer::kInput));
  uint64_t lowest = cap;
  for (const auto& l : live_regions(c)) lowest = std::min(lowest, l.first);
  c.fusion.input_reserved = static_cast<int64_t>(cap - lowest);
}

}  // namespace

std::string next_reads_on_chip(const Context& c, size_t i, bool* others) {
  const Node& p = c.g.nodes[i];
  if (i + 1 >= c.g.nodes.size() || !pointwise_conv(c.g, c.g.nodes[i + 1]))
    return "the next layer is not a pointwise Conv (1x1, stride 1, unpadded, one group, constant weights)";
  const Node& q = c.g.nodes[i + 1];
  const std::string& v = p.outputs[0];
  if (q.inputs[0] != v) return "the next layer does not read the output as its input";
  if (c.folding.folded(p) || c.folding.folded(q)) return "the output is written into a Concat's buffer";
  for (const std::string& o : c.g.outputs) {
    if (o == v) return "the output is a graph output";
  }
  const std::vector<int> readers = c.g.consumers(v);
  if (std::find(readers.begin(), readers.end(), static_cast<int>(i + 1)) == readers.end())
    return "the next layer does not read the output";
  if (readers.size() != 1 && others == nullptr) return "the output has other readers";
  if (others) *others = readers.size() != 1;
  for (size_t k = 1; k < q.inputs.size(); ++k) {
    if (q.inputs[k] == v) return "the next layer reads the output twice";
  }
  auto t = c.tensors.find(v);
  if (t == c.tensors.end() || t->second.strided() || t->second.shape.size() != 4 || t->second.layout != kNhwc)
    return "the output is not a dense NHWC feature map";
  return "";
}

std::string next_reads_padded(const Context& c, size_t i, OnChipValue::Padded* pad) {
  const Node& p = c.g.nodes[i];
  if (i + 1 >= c.g.nodes.size()) return "no layer after it";
  const Node& q = c.g.nodes[i + 1];
  const std::string& v = p.outputs[0];
  if (q.op_type != "Conv" || q.inputs.size() < 2 || q.inputs[0] != v || q.attr_int("group", 1) != 1)
    return "the next layer is not an ungrouped Conv reading the output as its input";
  const Value& w = c.g.value(q.inputs[1]);
  if (!w.is_constant() || w.shape.size() != 4) return "the next Conv's weights are not constant";
  for (size_t k = 1; k < q.inputs.size(); ++k) {
    if (q.inputs[k] == v) return "the next layer reads the output twice";
  }
  if (q.attr_string("auto_pad", "NOTSET") != "NOTSET") return "the next Conv pads itself (auto_pad)";
  if (c.config.lowering.conv_reduction == isa::ConvReduction::kPerPosition)
    return "convs reduce one kernel position at a time";
  if (c.folding.folded(p) || c.folding.folded(q)) return "the output is written into a Concat's buffer";
  for (const std::string& o : c.g.outputs) {
    if (o == v) return "the output is a graph output";
  }
  if (c.g.consumers(v).size() != 1) return "the output has other readers";
  auto t = c.tensors.find(v);
  if (t == c.tensors.end() || t->second.strided() || t->second.shape.size() != 4 || t->second.layout != kNhwc)
    return "the output is not a dense NHWC feature map";
  const isa::DType dt = t->second.dtype;
  // Integer sums are exact in any order; a float conv's depend on its input-channel chunks, which a tiling
  // of whole rows read in place may choose otherwise (--functional outputs stay those of before).
  if (!isa::numerics::is_integer(dt)) return "float sums depend on the tiling's input-channel chunks";
  if (isa::dtype_bytes(dt) != 1) return "the output's codes are wider than a byte";
  const std::vector<int64_t> st = q.attr_ints("strides", {1, 1}), dl = q.attr_ints("dilations", {1, 1}),
                             pads = q.attr_ints("pads", {0, 0, 0, 0});
  if (st.size() != 2 || dl.size() != 2 || pads.size() != 4) return "the next Conv is not 2-D";
  const int64_t H = t->second.shape[2], W = t->second.shape[3], kh = w.shape[2], kw = w.shape[3];
  const int64_t OH = (H + pads[0] + pads[2] - (kh - 1) * dl[0] - 1) / st[0] + 1;
  const int64_t OW = (W + pads[1] + pads[3] - (kw - 1) * dl[1] - 1) / st[1] + 1;
  if (kh * kw == 1 && pads[0] + pads[1] + pads[2] + pads[3] == 0)
    return "the next Conv is pointwise (read as a GEMM)";
  if (OH < 1 || OW < 1 || pads[0] > (kh - 1) * dl[0] || pads[1] > (kw - 1) * dl[1])
    return "the next Conv's padding exceeds its kernel";
  // Rows an image takes stacked with the others (MatrixMapper::image_rows), pixels a row its windows reach.
  const int64_t in_rows = (OH - 1) * st[0] + (kh - 1) * dl[0] + 1,
                in_cols = (OW - 1) * st[1] + (kw - 1) * dl[1] + 1;
  pad->t = pads[0], pad->l = pads[1];
  pad->h = std::max((in_rows + st[0] - 1) / st[0] * st[0], pads[0] + H);
  pad->w = std::max(in_cols, pads[1] + W);
  if (pad->w > 65535 || pad->h * t->second.shape[0] > 65535 * 16) return "the padded image is too large";
  pad->value = 0;
  if (isa::numerics::is_integer(dt)) {
    if (!c.options.plan) return "codes without a precision plan";
    auto qv = c.options.plan->values.find(v);
    if (qv == c.options.plan->values.end()) return "codes without quantization parameters";
    pad->value = qv->second.zero_point;
  }
  return "";
}

std::string gemm_reads_on_chip(const Context& c, size_t i, bool* others) {
  const Node& p = c.g.nodes[i];
  if (i + 1 >= c.g.nodes.size()) return "no layer after it";
  const Node& q = c.g.nodes[i + 1];
  if (q.op_type != "MatMul" && q.op_type != "Gemm") return "the next layer is not a MatMul or Gemm";
  const std::string& v = p.outputs[0];
  if (q.inputs.size() < 2 || q.inputs[0] != v || q.inputs[1] == v || !c.g.value(q.inputs[1]).is_constant())
    return "the next layer does not read the output as its A against constant weights";
  if (q.op_type == "Gemm" && q.attr_int("transA", 0) != 0) return "the next Gemm transposes its A";
  for (size_t k = 2; k < q.inputs.size(); ++k) {
    if (q.inputs[k] == v) return "the next layer reads the output twice";
  }
  if (c.folding.folded(p) || c.folding.folded(q)) return "the output is written into a Concat's buffer";
  for (const std::string& o : c.g.outputs) {
    if (o == v) return "the output is a graph output";
  }
  if (c.g.consumers(v).size() != 1 && others == nullptr) return "the output has other readers";
  if (others) *others = c.g.consumers(v).size() != 1;
  return rows_fit_on_chip(c, v);
}

std::string rows_fit_on_chip(const Context& c, const std::string& v) {
  auto t = c.tensors.find(v);
  if (t == c.tensors.end() || t->second.strided() || t->second.shape.size() < 2)
    return "the output is not dense";
  for (size_t d = 0; d < t->second.layout.size(); ++d) {
    if (t->second.layout[d] != static_cast<int>(d)) return "the output is not row-major";
  }
  // A spill stores it as one box (rows_on_chip): 16-bit sizes.
  const int64_t n = t->second.shape.back();
  if (n > 65535 || num_elements(t->second.shape) / n > 65535)
    return "the output has too many rows or columns";
  return "";
}

namespace {
// The value pending in SRAM at `addr`, its STORE box still to set.
OnChipValue pending_value(const std::string& value, const DramTensor& y, uint64_t addr, uint32_t producer) {
  OnChipValue o;
  o.value = value;
  o.dram = y.range();
  o.addr = addr;
  o.bytes = num_elements(y.shape) * isa::dtype_bytes(y.dtype);
  o.dtype = y.dtype;
  o.pending = true;
  o.producer = producer;
  return o;
}
}  // namespace

OnChipValue rows_on_chip(const std::string& value, const DramTensor& y, uint64_t addr, uint32_t producer,
                         int64_t block) {
  OnChipValue o = pending_value(value, y, addr, producer);
  const int64_t n = y.shape.back(), rows = num_elements(y.shape) / n, b = block > 0 ? block : n;
  // [N / b][rows][b] in SRAM: a block of every row, the blocks b elements apart in DRAM.
  o.box = {b, rows, n / b, 1};
  o.strides = {n, b, 0};
  o.block = block;
  return o;
}

OnChipValue nhwc_on_chip(const std::string& value, const DramTensor& y, uint64_t addr, uint32_t producer) {
  OnChipValue o = pending_value(value, y, addr, producer);
  // NHWC [N][H][W][C]: rows of W pixels.
  o.box = {y.phys[3], y.phys[2], y.phys[0] * y.phys[1], 1};
  o.strides = {y.phys[3], y.phys[2] * y.phys[3], 0};
  return o;
}

namespace {

// A convolution whose output X only a squeeze-and-excitation block reads (its pool, the next layer, and
// its Mul: se_fusion.h): the group's hold is planned now, before the conv is mapped, and the conv writes X
// where the group holds it, so the pool pools it there without loading it (se_pool_input_written). X is
// stored as well (OnChipValue::in_dram): a pool or Mul that cannot read it in place reads DRAM, so the
// program is exact whatever they lower to. A depthwise conv on the vector unit too (its epilogue's last VEC
// writes each tile there, a STORE reads it from there: MatrixJob::y_store); where X does not fit the hold,
// its own pooling epilogue (se_pool_fusion.h) takes it. Returns whether it planned so.
bool plan_se_input(Context& c, size_t i) {
  const Node& p = c.g.nodes[i];
  if (!c.options.keep_on_chip || c.g.nhwc_io || c.shared_capacity() > 0 || p.op_type != "Conv" ||
      p.outputs.size() != 1 || p.inputs.size() < 2 || i + 1 >= c.g.nodes.size())
    return false;
  const Node& q = c.g.nodes[i + 1];
  if (q.op_type != "GlobalAveragePool" || q.inputs.empty() || q.inputs[0] != p.outputs[0]) return false;
  if (c.folding.folded(p) || !c.fusion.held.value.empty() || c.fusion.residual.pending ||
      c.fusion.on_chip.pending)
    return false;
  plan_se_hold(c, i + 1);
  if (c.fusion.held.value != p.outputs[0]) return false;
  c.fusion.set_keep(p.outputs[0], false,
                    true);  // in DRAM too: the pool's and the Mul's fallbacks read it there
  c.fusion.keep_addr = c.fusion.held.addr;
  return true;
}

}  // namespace

void plan_on_chip(Context& c, size_t i) {
  c.fusion.set_keep();
  c.fusion.keep_reserved = 0;
  OnChipValue::Padded pad;
  bool others = false;
  int64_t reader = -1;
  bool reader_input = false;
  bool next_reads = true;
  const Node& p = c.g.nodes[i];
  const LayerMapping* imposed = c.options.mapping ? c.options.mapping->find(p.name) : nullptr;
  const std::optional<bool> want = imposed ? imposed->on_chip : std::nullopt;
  if (want == false) return;
  // A mapping file that tiles the conv without saying on_chip keeps the program it describes (its output
  // stored), as for the other values below.
  if (!(imposed && imposed->has_tiling() && !want) && plan_se_input(c, i)) {
    c.fusion.keep_imposed = want.has_value();
    return;
  }
  // Why the output cannot stay on chip ("" = it can).
  const std::string why = [&]() -> std::string {
    if (!c.options.keep_on_chip) return "fusion is off (--no-fusion)";
    if (c.g.nhwc_io) return "a SCALE-Sim topology's rows run one at a time";
    if (c.shared_capacity() > 0) return "inputs and weights share one scratchpad";
    const bool gemm = p.op_type == "MatMul" || p.op_type == "Gemm" ||
                      (p.op_type == "LayerNormalization" && p.domain.empty());
    if ((p.op_type != "Conv" && !gemm) || p.outputs.size() != 1)
      return "only a Conv, MatMul, Gemm or LayerNormalization leaves its output on chip";
    // A LayerNorm's rows with other readers (BERT's post-norm output, read by the next QKV projection and the
    // residual Add) are stored for them as well (rows_left_on_chip).
    std::string no = gemm ? gemm_reads_on_chip(c, i, p.op_type == "LayerNormalization" ? &others : nullptr)
                          : next_reads_on_chip(c, i, &others);
    // A mapping file that tiles the layer without saying on_chip keeps the tiling it gives (a held value
    // needs every channel of whole rows a tile), as before holds existed.
    reader =
        gemm || (imposed && imposed->has_tiling() && !want) ? -1 : hold_for_residual(c, i, &reader_input);
    // A conv with a kernel or padding after it (ResNet's 1x1 -> 3x3): the value padded as that conv reads it.
    if (!no.empty() && reader < 0 && !gemm && !(imposed && imposed->has_tiling() && !want) &&
        next_reads_padded(c, i, &pad).empty())
      no.clear();
    else
      pad = {};
    if (!no.empty() && reader < 0) return no;
    next_reads = no.empty();
    // Readers other than the next layer (in place) and the residual reader read it in DRAM.
    if (reader >= 0) {
      const std::vector<int> readers = c.g.consumers(p.outputs[0]);
      others = std::any_of(readers.begin(), readers.end(), [&](int k) {
        return k != reader && !(next_reads && k == static_cast<int>(i + 1));
      });
    }
    // A value kept on chip for the next layer stops that layer's line-buffer fusion with the pool or
    // depthwise conv after it (layer_fusion.h), which saves more than one read of the value.
    if (others && conv_pool_pair(c.g, i + 1))
      return "the next layer may fuse with the pool or depthwise conv after it (a line buffer)";
    const auto t = c.tensors.find(p.outputs[0]);
    // Below the value node i reads on chip, if any (a chain: depthwise -> pointwise -> pointwise). A value
    // for a residual reader while another one is held: in the highest bytes free of every live value, so
    // that held values take turns at the top and short-lived ones stay below them.
    const int64_t bytes = round64((pad.w > 0 ? t->second.shape[0] * pad.h * pad.w * t->second.shape[1]
                                             : num_elements(t->second.shape)) *
                                  isa::dtype_bytes(t->second.dtype));
    const int64_t cap = scratchpad_capacity(c.config, isa::Buffer::kInput);
    int64_t reserved = c.fusion.input_reserved + bytes;
    if (c.fusion.residual.pending && reader >= 0) {
      c.fusion.keep_addr = highest_free(c, bytes);
      reserved = std::max(c.fusion.input_reserved, cap - static_cast<int64_t>(c.fusion.keep_addr));
    } else {
      c.fusion.keep_addr = static_cast<uint64_t>(std::max<int64_t>(0, cap - reserved));
    }
    if (4 * reserved > 3 * cap) {
      return fmt::format("its {} bytes (with any value already held) exceed 3/4 of the input scratchpad",
                         bytes);
    }
    // A padded value must leave room for its reader's own output where that can stay on chip for the
    // pointwise conv after it (ResNet's 3x3 -> 1x1): that value saves its write and read as well, and the
    // padded one would otherwise push it to DRAM.
    if (pad.w > 0 && next_reads_on_chip(c, i + 1).empty()) {
      const auto tr = c.tensors.find(c.g.nodes[i + 1].outputs[0]);
      const int64_t out = tr == c.tensors.end()
                              ? 0
                              : round64(num_elements(tr->second.shape) * isa::dtype_bytes(tr->second.dtype));
      if (4 * (reserved + out) > 3 * cap)
        return "padded, it leaves no room for its reader's output, which can stay on chip for the next layer";
    }
    return "";
  }();
  if (!why.empty()) {
    if (want)
      throw MappingError(
          fmt::format("{}: layer '{}': on_chip=true: {}", imposed->at("on_chip"), p.name, why));
    return;
  }
  c.fusion.set_keep(p.outputs[0], want.has_value(), others, reader, reader_input, next_reads, pad);
  const int64_t before = c.fusion.input_reserved;
  c.fusion.input_reserved =
      std::max(c.fusion.input_reserved,
               scratchpad_capacity(c.config, isa::Buffer::kInput) - static_cast<int64_t>(c.fusion.keep_addr));
  c.fusion.keep_reserved = c.fusion.input_reserved - before;
}

namespace {

// The closed form's best estimate for the job as it stands: the array's tilings and, for a depthwise
// job, the vector unit's (1e300: none fits).
double best_estimate(Context& c, const MatrixJob& j, MatrixStrategy& s, const MatrixMapper& mm) {
  int64_t n = 0;
  const std::vector<Tiling> a = mm.search(&n, 1);
  double best = a.empty() ? 1e300 : a.front().est;
  if (DepthwiseMapper::applies(j) && !c.g.nhwc_io) {
    const std::vector<DepthwiseTiling> v = DepthwiseMapper(c, j, s).search(1);
    if (!v.empty()) best = std::min(best, v.front().est);
  }
  return best;
}

// An SE block's input planned on chip (plan_se_input): whether the conv writing it where the group holds
// it pays, by simulation. Against the conv as it ran before the plan (no bytes held during it, its
// output to DRAM), the on-chip tiles (whole rows of every channel, a smaller input scratchpad) are
// credited with the pool's read of X saved, at the DRAM's sustained rate. Without a timer, the closed forms
// decide alike. The decision is remembered per geometry and candidates (Context::decided), as tilings are.
bool se_input_pays(Context& c, MatrixJob& j, MatrixStrategy& s, MatrixMapper& mm, int64_t bytes) {
  const double saved = c.dram_bytes_per_cycle > 0 ? static_cast<double>(bytes) / c.dram_bytes_per_cycle : 0.0;
  const int64_t held = c.fusion.input_held;
  const int64_t y_sram = j.y_sram;
  j.y_sram = -1;
  j.y_store = false;
  c.fusion.input_reserved -= held;
  int64_t n0 = 0, n1 = 0;
  const Tiling apart = c.can_time() ? mm.choose(&n0) : Tiling{};
  const double apart_est = best_estimate(c, j, s, mm);
  c.fusion.input_reserved += held;
  j.y_sram = y_sram;
  j.y_store = true;
  const Tiling kept = c.can_time() ? mm.choose(&n1) : Tiling{};
  const double kept_est = best_estimate(c, j, s, mm);
  c.timed = {};  // the trials' figures are not the layer's
  if (!c.can_time()) return kept_est < 1e300 && kept_est <= apart_est + saved;
  if (n1 == 0) return false;
  const std::string key =
      fmt::format("se-input {} {} {} {} {} {} {} {} {} {} {} {}|{} {} {} {} {} {}|{} {} {} {} {} {}", j.H,
                  j.W, j.C, j.M, j.OH, j.OW, j.kh, j.sh, j.groups, static_cast<int>(s.ops.a),
                  s.epilogue_ops(), held, apart.gb, apart.toh, apart.tow, apart.tc, apart.tn,
                  apart.groups_inner, kept.gb, kept.toh, kept.tow, kept.tc, kept.tn, kept.groups_inner);
  if (auto it = c.decided.find(key); it != c.decided.end()) return it->second == 1;
  const bool pays = apart.simulated >= 0 && kept.simulated >= 0
                        ? static_cast<double>(kept.simulated) <= static_cast<double>(apart.simulated) + saved
                        : kept_est <= apart_est + saved;
  c.decided.emplace(key, pays ? 1 : 0);
  return pays;
}

// A GEMM chain's column block (MatrixJob::y_block, 0 = dense): the output-channel tile `stored_tn` of the
// tiling the layer takes when it stores its output, or one to kChainBlockFolds whole folds of the array's
// columns that divide the channels, when the layer's tiles writing the value in those blocks at
// FusionState::keep_addr, simulated (MatrixMapper::choose), take fewer cycles: with the output off DRAM a
// tile of more rows may pay (ViT-B/16's FFN at batch 8 on tpu-v1: every row a tile of 256 channels reads
// the 2.4 MB of weights once, where the stored tiling's two tiles of rows read them twice). Without a timer,
// imposed, or the layer tiled by a mapping file (its tile_n then the block, as --mapping-out wrote it), the
// stored tile. Remembered per geometry and candidates (Context::decided), as tilings are.
int64_t chain_block(Context& c, MatrixJob& j, const MatrixStrategy& s, MatrixMapper& mm, int64_t stored_tn) {
  const auto block_of = [&](int64_t tn) { return tn < j.M ? tn : 0; };
  const LayerMapping* own = c.options.mapping ? c.options.mapping->find(c.g.nodes[c.layer].name) : nullptr;
  if (!c.can_time() || c.fusion.keep_imposed || (own && own->has_tiling())) return block_of(stored_tn);
  std::vector<int64_t> tns = {stored_tn};
  const int64_t cols = c.config.systolic_array.cols;
  for (int64_t k = 1; k <= kChainBlockFolds && k * cols <= j.M; ++k) {
    if (j.M % (k * cols) == 0 && std::find(tns.begin(), tns.end(), k * cols) == tns.end())
      tns.push_back(k * cols);
  }
  if (tns.size() == 1) return block_of(stored_tn);
  std::string key = fmt::format("chain_block {} {} {} {} {} {} {} {} {} {} {}", j.H, j.W, j.C, j.M, j.images,
                                c.fusion.keep_in_dram, c.fusion.input_reserved, j.a_sram, j.a_block,
                                static_cast<int>(s.ops.a), s.epilogue_ops());
  for (int64_t tn : tns) key += fmt::format(" {}", tn);
  if (auto it = c.decided.find(key); it != c.decided.end()) return block_of(tns[it->second]);
  const MatrixJob plain = j;
  j.y_sram = static_cast<int64_t>(c.fusion.keep_addr);
  j.y_store = c.fusion.keep_in_dram;
  size_t win = 0;
  int64_t best = -1;
  for (size_t k = 0; k < tns.size(); ++k) {
    j.y_block = block_of(tns[k]);
    int64_t e = 0;
    const Tiling t = mm.choose(&e);
    if (e == 0 || t.simulated < 0) continue;
    if (best < 0 || t.simulated < best) best = t.simulated, win = k;
  }
  c.timed = {};  // the trials' figures are not the layer's
  j = plain;
  c.decided.emplace(key, win);
  return block_of(tns[win]);
}

// Lets go of an SE block's hold planned at its input's producer (plan_se_input): the pool plans it again.
void release_se_input(Context& c) {
  c.fusion.input_reserved -= c.fusion.input_held;
  c.fusion.input_held = 0;
  c.fusion.held = {};
}

// The GEMM over every pixel that reads the input where the layer before left it, or false.
bool as_sram_gemm(const MatrixJob& j, const OnChipValue& v, MatrixJob* g) {
  if (!v.pending || j.a_range.begin != v.dram.begin || j.a_range.end != v.dram.end || !j.b_const ||
      j.groups != 1 || j.a_base(0) != v.dram.begin)
    return false;
  const bool pointwise = !j.gemm && j.kh == 1 && j.kw == 1 && j.sh == 1 && j.sw == 1 && j.pt == 0 &&
                         j.pl == 0 && j.OH == j.H && j.OW == j.W && j.step_h == 1 && j.step_w == 1 &&
                         j.src_w == 0 && j.y_pitch == 0 && j.y_row == 0;
  if ((!pointwise && !(j.gemm && j.images == 1)) || j.a_pitch != 0) return false;
  *g = j;
  if (pointwise) {
    g->H = g->OH = j.images * j.OH * j.OW;
    g->W = g->OW = 1;
    g->images = 1;
    g->gemm = true;
  }
  g->a_sram = static_cast<int64_t>(v.addr);
  g->a_block = v.block;
  if (v.block > 0 && (!j.gemm || j.C % v.block != 0)) return false;
  return true;
}

// A pointwise conv over several images (`--batch N`) as one GEMM over all their pixels: NHWC images lie one
// after the other, so the batch folds into the GEMM's rows, and a weight tile the weight scratchpad cannot
// keep for the whole layer serves every image's pixels instead of being loaded again for each image's
// tiles (weights stream once per batch). Kept when the closed form does not find it slower, or when a
// mapping file's tiling of the layer is a GEMM tile (tile_m: what --mapping-out wrote for it).
void fold_batch_into_rows(Context& c, MatrixJob& j, MatrixStrategy& s, const MatrixMapper& mm) {
  if (j.images < 2 || j.gemm || j.a_sram >= 0 || j.y_sram >= 0 || !j.b_const || j.groups != 1 ||
      j.a_pitch != 0)
    return;
  // Subsampled (a stride-2 1x1 conv reading every other pixel, subsample_pointwise): one tall image of
  // images x OH rows when each image starts where its last row's step ends (an even input height), its tiles
  // free to span images. Always: the search over the tall image's tilings has the per-image ones (a tile
  // height dividing OH walks the same boxes), and a mapping file's tiling then applies to the same job.
  const int64_t ea = isa::dtype_bytes(s.ops.a);
  if ((j.step_h > 1 || j.step_w > 1) && j.kh == 1 && j.kw == 1 && j.pt == 0 && j.pl == 0 && j.sh == 1 &&
      j.sw == 1 && j.y_pitch == 0 && j.y_row == 0 &&
      j.a_base(1) - j.a_base(0) == static_cast<uint64_t>(j.OH * j.row_stride() * ea)) {
    j.H = j.OH = j.images * j.OH;
    j.images = 1;
    return;
  }
  const bool pointwise = j.kh == 1 && j.kw == 1 && j.sh == 1 && j.sw == 1 && j.pt == 0 && j.pl == 0 &&
                         j.OH == j.H && j.OW == j.W && j.step_h == 1 && j.step_w == 1 && j.src_w == 0 &&
                         j.y_pitch == 0 && j.y_row == 0;
  const uint64_t image_bytes = static_cast<uint64_t>(j.H * j.W * j.C * ea);
  if (!pointwise || j.a_base(1) - j.a_base(0) != image_bytes) return;
  const LayerMapping* own = c.options.mapping ? c.options.mapping->find(c.g.nodes[c.layer].name) : nullptr;
  const bool own_tiled = own != nullptr && own->has_tiling();
  const MatrixJob plain = j;
  const double without = own_tiled ? 0.0 : best_estimate(c, j, s, mm);
  j.H = j.OH = j.images * j.OH * j.OW;
  j.W = j.OW = 1;
  j.images = 1;
  j.gemm = true;
  if (own_tiled ? !own->tile_m.has_value() : best_estimate(c, j, s, mm) > without) j = plain;
}

// A conv reading value v where its producer left it, padded (OnChipValue::pad; a dense value is its own
// padding-free layout, read by a conv without padding): its tiles of whole rows read it in place
// (MatrixJob::a_pad_h), with the halo value its own LOADs would give. False: it loads it from DRAM.
bool as_sram_conv(const Context& c, const MatrixJob& j, const MatrixStrategy& s, const OnChipValue& v,
                  MatrixJob* g) {
  if (!v.pending || v.block > 0 || j.gemm || j.a_range.begin != v.dram.begin || j.a_range.end != v.dram.end ||
      !j.b_const || j.b_sram >= 0 || j.groups != 1 || j.a_pitch != 0 || j.step_h != 1 || j.step_w != 1 ||
      j.src_w != 0 || j.a_base(0) != v.dram.begin || c.fusion.pre_affine.node >= 0 ||
      c.fusion.pre_pool.node >= 0 || v.dtype != s.ops.a)
    return false;
  // v's geometry: dense NHWC [box[3]][box[2]][box[1]][box[0]].
  if (j.C != v.box[0] || j.W != v.box[1] || j.H * j.images != v.box[2] * (v.pad.w > 0 ? v.box[3] : 1))
    return false;
  const OnChipValue::Padded pad = v.pad.w > 0 ? v.pad : OnChipValue::Padded{j.H, j.W, 0, 0, s.ops.pad};
  if (j.pt != pad.t || j.pl != pad.l || pad.value != s.ops.pad || j.in_rows(j.OH) > pad.h ||
      j.in_cols(j.OW) > pad.w ||
      (j.images > 1 &&
       j.a_base(1) - j.a_base(0) != static_cast<uint64_t>(j.H * j.W * j.C * isa::dtype_bytes(v.dtype))))
    return false;
  *g = j;
  g->a_sram = static_cast<int64_t>(v.addr);
  g->a_pad_h = pad.h;
  g->a_pad_w = pad.w;
  return true;
}

}  // namespace

void read_in_place(Context& c, OnChipValue& v) {
  // A value its producer stored too (other readers) saves its read alone.
  if (!v.in_dram) c.fusion.kept_on_chip[v.value] = v.addr;
  if (!v.in_dram && v.block > 0) c.fusion.kept_blocks[v.value] = v.block;
  if (!v.in_dram && v.pad.w > 0) {
    const int64_t C = v.box[0];
    c.fusion.kept_on_chip[v.value] =
        v.addr + static_cast<uint64_t>((v.pad.t * v.pad.w + v.pad.l) * C * isa::dtype_bytes(v.dtype));
    c.fusion.kept_strides[v.value] = {v.pad.h * v.pad.w * C, v.pad.w * C, C, 1};
  }
  v.pending = v.residual_reader > static_cast<int64_t>(c.layer);  // still needed there
  c.plan->on_chip_input = v.value;
  c.plan->on_chip_bytes_saved = (v.in_dram ? 1 : 2) * v.bytes;
}

namespace {

// A value held for this layer to read as its input (OnChipValue::reader_reads_input: a stage's strided 1x1
// downsample conv, reading the block output where its producer left it): the conv reads it in place, dense,
// as a CONV of its own stride over whole images (subsample_pointwise undone: the strided LOADs of every
// other pixel become the CONV's window steps). Taken when that is no slower than the layer as it maps
// otherwise (its strided LOADs, the tall image of fold_batch_into_rows, after the store of the value those
// LOADs need first: Context::load spills it), by the closed form (the store's bytes at the DRAM's sustained
// rate added) and, where the context can time code, by the best tilings simulated (the store in the code); a
// mapping file that keeps the value on chip (its producer's on_chip: true) or tiles this layer decides it as
// written. Otherwise the first LOAD stores the value.
void read_held_input(Context& c, MatrixJob& j, MatrixStrategy& s, MatrixMapper& mm) {
  OnChipValue& r = c.fusion.residual;
  if (!r.pending || !r.reader_reads_input || r.residual_reader != static_cast<int64_t>(c.layer) ||
      j.images < 1 || r.box[2] % j.images != 0)
    return;
  MatrixJob u = j;
  if (u.step_h > 1 || u.step_w > 1) {
    u.sh = u.step_h, u.sw = u.step_w;
    u.H = r.box[2] / u.images, u.W = u.src_w;
    u.step_h = u.step_w = 1;
    u.src_w = 0;
  }
  MatrixJob g;
  if (!as_sram_conv(c, u, s, r, &g)) return;
  const LayerMapping* own = c.options.mapping ? c.options.mapping->find(c.g.nodes[c.layer].name) : nullptr;
  const bool own_tiled = own != nullptr && own->has_tiling();
  // A file's tiling of the tall image (no tile_images over a batch: the layer read from DRAM) keeps that.
  if (own_tiled && j.images > 1 && !own->tile_images) return;
  if (!r.imposed && !own_tiled) {
    const double spill =
        c.dram_bytes_per_cycle > 0 ? static_cast<double>(r.bytes) / c.dram_bytes_per_cycle : 0.0;
    const MatrixJob plain = j;
    fold_batch_into_rows(c, j, s, mm);
    const double without = best_estimate(c, j, s, mm);
    int64_t apart = -1, n = 0;
    if (c.can_time()) {
      const Tiling t = mm.choose(&n);
      if (n > 0) apart = t.simulated;
      c.timed = {};  // the trial's figures are not the layer's
    }
    j = g;
    bool pays = best_estimate(c, j, s, mm) <= without + spill;
    if (pays && apart >= 0) {
      const Tiling t = mm.choose(&n);
      c.timed = {};
      pays = n > 0 && t.simulated >= 0 && t.simulated <= apart;  // apart's code stores the value first
    }
    j = plain;
    if (!pays) return;
  }
  j = g;
  r.pending = false;  // read: finish_on_chip lets its bytes go
  c.plan->on_chip_input = r.value;
  c.plan->on_chip_bytes_saved = r.bytes;  // its read (its write counted where the next layer read it)
}

// A conv whose output the planner keeps padded for the conv after it (FusionState::keep_pad): a conv job
// of whole rows (not the batch folded into a GEMM's rows) whose epilogue writes each row into its padded
// place, the buffer filled with the halo value first (MatrixJob::y_fill); its input read in place too when
// the layer before left it dense. Taken when its best estimate, and where the context can time code its
// best tiling simulated, is no slower than the layer as it would map otherwise (storing its output) plus
// the reader's load saved. Returns whether it took the layer.
bool place_padded(Context& c, MatrixJob& j, MatrixStrategy& s, MatrixMapper& mm) {
  const OnChipValue::Padded pad = c.fusion.keep_pad;
  if (c.fusion.keep_output.empty() || pad.w == 0) return false;
  // Not taken: its bytes are not held for this layer either (the layer maps with the scratchpad it had).
  const auto drop = [&]() {
    c.fusion.keep_output.clear();
    c.fusion.keep_pad = {};
    reserve_live(c);
    return false;
  };
  const DramTensor& y = c.tensor(c.fusion.keep_output);
  if (!s.ends_with_vec() || j.gemm || j.y_pitch != 0 || j.y_row != 0 || j.y_sram_row != 0 ||
      j.y_range.begin != y.addr || j.y_range.end != y.range().end || j.groups * j.mg != j.M ||
      DepthwiseMapper::applies(j) || s.ops.y != y.dtype || y.shape[1] != j.M)
    return drop();
  OnChipValue& v = c.fusion.on_chip;
  const MatrixJob plain = j;
  // The layer as it maps otherwise (the padded value's bytes not held): the batch folded into a GEMM's rows,
  // its input read in place as a GEMM; its best tiling simulated where the context can time code.
  const int64_t reserved = c.fusion.input_reserved;
  reserve_live(c);
  fold_batch_into_rows(c, j, s, mm);
  // (Imposed, the figure is not needed: nor is its GEMM, which a mapping file's conv tiling would refuse.)
  if (MatrixJob g; !c.fusion.keep_imposed && as_sram_gemm(j, v, &g)) {
    const MatrixJob folded = j;
    const double from_dram = best_estimate(c, j, s, mm);
    j = g;
    if (best_estimate(c, j, s, mm) > from_dram) j = folded;
  }
  // A conv that would run packed several pixels a column (pixel_packing.h) keeps that: its packed tiles
  // cannot write a padded layout's rows, and the figures below do not see what packing gains.
  if (!c.fusion.keep_imposed && !j.gemm && !pack_candidates(c, j).empty()) {
    c.fusion.input_reserved = reserved;
    j = plain;
    return drop();
  }
  const double without = c.fusion.keep_imposed ? 1e300 : best_estimate(c, j, s, mm);
  int64_t apart = -1;
  if (c.can_time() && !c.fusion.keep_imposed) {
    int64_t n = 0;
    const Tiling t = mm.choose(&n);
    if (n > 0) apart = t.simulated;
    c.timed = {};  // the trial's figures are not the layer's
  }
  c.fusion.input_reserved = reserved;
  j = plain;
  MatrixJob g;
  const bool in_place = as_sram_conv(c, j, s, v, &g);
  if (in_place) j = g;
  const int64_t es = isa::dtype_bytes(y.dtype), N = y.shape[0], M = j.M;
  OnChipValue o = nhwc_on_chip(c.fusion.keep_output, y, c.fusion.keep_addr, c.layer);
  o.bytes = round64(N * pad.h * pad.w * M * es);
  o.pad = pad;
  o.box = {M, y.shape[3], y.shape[2], N};
  j.y_sram = static_cast<int64_t>(o.addr) + (pad.t * pad.w + pad.l) * M * es;
  j.y_sram_row = pad.w * M;
  j.y_sram_image = pad.h * pad.w * M;
  j.y_fill = {o.addr, N * pad.h, pad.w, pad.value};
  const double read = c.dram_bytes_per_cycle > 0
                          ? static_cast<double>(num_elements(y.shape) * es) / c.dram_bytes_per_cycle
                          : 0.0;
  bool pays = best_estimate(c, j, s, mm) <= without + read;
  if (pays && apart >= 0) {
    int64_t n = 0;
    const Tiling t = mm.choose(&n);
    c.timed = {};
    pays = n > 0 && t.simulated >= 0 && static_cast<double>(t.simulated) <= static_cast<double>(apart) + read;
  }
  if (!pays) {
    j = plain;
    return drop();
  }
  if (in_place) read_in_place(c, v);
  c.fusion.keep_output.clear();
  c.fusion.keep_pad = {};
  o.imposed = c.fusion.keep_imposed;
  o.residual_reader = -1;
  o.next_reads = true;
  hold_or_spill(c);  // the value this layer read, if a later layer reads it as its residual
  c.fusion.on_chip = o;
  return true;
}

}  // namespace

void place_on_chip(Context& c, MatrixJob& j, MatrixStrategy& s, MatrixMapper& mm) {
  OnChipValue& v = c.fusion.on_chip;
  if (place_padded(c, j, s, mm)) return;
  // A padded value (a conv with a kernel or padding reads it), read in place.
  if (MatrixJob g; v.pad.w > 0 && as_sram_conv(c, j, s, v, &g)) {
    j = g;
    read_in_place(c, v);
  }
  read_held_input(c, j, s, mm);
  fold_batch_into_rows(c, j, s, mm);
  // The input, where the layer before left it, when reading it there is no slower by the closed form
  // (otherwise the first LOAD of it spills it: Context::load).
  if (MatrixJob g; as_sram_gemm(j, v, &g)) {
    // A mapping file's tiling of this layer (what --mapping-out wrote) says how it read the value: a
    // GEMM tile (tile_m) in place, a convolution's tile from DRAM (the value spilled first), whatever
    // the producer's entry says.
    const LayerMapping* own = c.options.mapping ? c.options.mapping->find(c.g.nodes[c.layer].name) : nullptr;
    const bool own_tiled = own != nullptr && own->has_tiling();
    const bool decided = own_tiled || v.imposed;
    const MatrixJob plain = j;
    const double without = decided ? 0.0 : best_estimate(c, j, s, mm);
    // Loading it needs it stored first (Context::spill_on_chip), unless its producer stores it anyway: those
    // bytes at the DRAM's sustained rate.
    const double spill = v.in_dram || c.dram_bytes_per_cycle <= 0
                             ? 0.0
                             : static_cast<double>(v.bytes) / c.dram_bytes_per_cycle;
    j = g;
    const bool in_place =
        own_tiled ? own->tile_m.has_value() : v.imposed || best_estimate(c, j, s, mm) <= without + spill;
    if (in_place) {
      read_in_place(c, v);
    } else {
      j = plain;
    }
  }
  // The output, for the layer after, when the tiles that leave it on chip cost this layer no more than
  // the next one saves by not reading it (its bytes at the DRAM's sustained rate).
  // An SE block's input, planned to be written where its group holds it (plan_se_input); when the conv does
  // not write it there, the hold is let go and the pool plans it as before.
  const bool se_input = !c.fusion.keep_output.empty() && c.fusion.held.value == c.fusion.keep_output &&
                        c.fusion.held.addr == c.fusion.keep_addr && c.fusion.held.pool == c.layer + 1;
  // Not taken: the bytes plan_on_chip reserved for it are let go before this layer maps, so the layer is
  // searched in the scratchpad that --mapping-out's `on_chip: false` gives it when imposed.
  const bool planned = !c.fusion.keep_output.empty();
  const auto give_up = [&]() {
    if (se_input) {
      release_se_input(c);
    } else if (planned) {
      c.fusion.keep_output.clear();
      c.fusion.input_reserved -= c.fusion.keep_reserved;
      c.fusion.keep_reserved = 0;
    }
  };
  if (c.fusion.keep_output.empty() || !s.ends_with_vec() || j.y_pitch != 0 || j.y_row != 0) return give_up();
  // A value with other readers is stored as well, tile by tile from where the epilogue wrote it; the vector
  // unit's depthwise mapping does so only for an SE block's input (its tiles' whole rows, every channel,
  // simulated against X stored and read back: se_input_pays).
  if (c.fusion.keep_in_dram && DepthwiseMapper::applies(j) && !se_input) return give_up();
  const DramTensor& y = c.tensor(c.fusion.keep_output);
  if (j.y_range.begin != y.addr || j.y_range.end != y.range().end) return give_up();
  const std::string& op = c.g.nodes[c.layer].op_type;
  const bool rows = op == "MatMul" || op == "Gemm";  // a GEMM chain (plan_on_chip)
  if (rows && (!j.gemm || j.images != 1)) return;
  const double without = c.fusion.keep_imposed || se_input ? 0.0 : best_estimate(c, j, s, mm);
  // A GEMM chain: the value in column blocks of the output-channel tile of the tiling the layer takes when
  // it stores its output (MatrixMapper::choose: its candidates simulated), so that its tiles need not hold
  // every channel (a 3072-wide FFN hidden layer's sums do not fit the accumulator a tile of rows at a
  // time) and that tiling stays a candidate, its STORE replaced by the write in place; dense when that
  // tile is every channel. Left in DRAM when the tile does not divide the channels.
  int64_t block = 0;
  if (rows) {
    int64_t n = 0;
    const Tiling stored = mm.choose(&n);
    if (n == 0 || j.M % stored.tn != 0) return;
    block = chain_block(c, j, s, mm, stored.tn);
  }
  OnChipValue o = rows ? rows_on_chip(c.fusion.keep_output, y, c.fusion.keep_addr, c.layer, block)
                       : nhwc_on_chip(c.fusion.keep_output, y, c.fusion.keep_addr, c.layer);
  o.residual_reader = c.fusion.keep_residual_reader;
  o.reader_reads_input = c.fusion.keep_reader_input;
  o.next_reads = c.fusion.keep_next_reads;
  c.fusion.keep_output.clear();
  j.y_sram = static_cast<int64_t>(o.addr);
  j.y_block = block;
  j.y_store = o.in_dram = c.fusion.keep_in_dram;
  // The reads it saves: the next layer's and the residual reader's.
  const int reads = (o.next_reads ? 1 : 0) + (o.residual_reader >= 0 ? 1 : 0);
  const double read =
      c.dram_bytes_per_cycle > 0 ? reads * static_cast<double>(o.bytes) / c.dram_bytes_per_cycle : 0.0;
  const bool pays = c.fusion.keep_imposed ? true
                    : se_input            ? se_input_pays(c, j, s, mm, o.bytes)
                                          : best_estimate(c, j, s, mm) <= without + read;
  if (!pays) {
    j.y_sram = -1;
    j.y_block = 0;
    j.y_store = false;
    return give_up();
  }
  o.imposed = c.fusion.keep_imposed;
  hold_or_spill(c);  // the value this layer read, if a later layer reads it as its residual
  c.fusion.on_chip = o;
}

std::optional<uint64_t> rows_left_on_chip(Context& c, const std::string& value, uint64_t below,
                                          bool* stored) {
  if (c.fusion.keep_output != value || (c.fusion.keep_in_dram && stored == nullptr) ||
      c.fusion.keep_residual_reader >= 0)
    return std::nullopt;
  const DramTensor& y = c.tensor(value);
  OnChipValue o = rows_on_chip(value, y, c.fusion.keep_addr, c.layer, 0);
  if (o.addr < below) return std::nullopt;  // the layer's own tiles reach its bytes
  o.in_dram = c.fusion.keep_in_dram;
  if (stored) *stored = o.in_dram;
  // keep_output stays set until finish_on_chip: a row-wise layer may be emitted more than once (its tiles
  // timed in trials, Context::begin_trial), each emission writing the rows on chip.
  o.imposed = c.fusion.keep_imposed;
  hold_or_spill(c);
  c.fusion.on_chip = o;
  return o.addr;
}

bool map_matrix_job(Context& c, MatrixJob& j, MatrixStrategy& s, MatrixMapper& mm, Tiling* t,
                    int64_t* evaluated) {
  place_on_chip(c, j, s, mm);
  // A LayerNorm in the GEMM's loads (pre_norm.h) needs whole rows a tile: one reduction chunk.
  if (carries_pre_norm(c)) j.fixed_tc = j.C;
  *t = mm.choose(evaluated);
  if (lower_depthwise_on_vector(c, j, s, mm, *evaluated ? t : nullptr)) return true;
  if (*evaluated > 0 || j.y_sram < 0) return false;
  // No tiling leaves the output on chip: it goes to DRAM (an SE block's input planned there: plan_se_input,
  // the pool plans its hold again).
  j.y_sram = -1;
  j.y_block = 0;
  j.y_store = false;
  if (c.fusion.on_chip.value == c.fusion.held.value && c.fusion.held.pool == c.layer + 1) release_se_input(c);
  c.fusion.on_chip = {};
  *t = mm.choose(evaluated);
  return lower_depthwise_on_vector(c, j, s, mm, *evaluated ? t : nullptr);
}

void finish_on_chip(Context& c, size_t i, LayerPlan& plan) {
  c.fusion.keep_output.clear();
  // The value is input-scratchpad bytes of both layers: the producer writes it, the reader reads it.
  if (!plan.on_chip_input.empty()) {
    const bool in_dram = c.fusion.on_chip.in_dram && c.fusion.on_chip.value == plan.on_chip_input;
    plan.sram_input_bytes += in_dram ? plan.on_chip_bytes_saved : plan.on_chip_bytes_saved / 2;
  }
  // A value held for this layer's residual is read: its bytes are free (a spill stored it if a tile
  // read it in DRAM after all).
  OnChipValue& r = c.fusion.residual;
  if (!r.value.empty() && r.residual_reader <= static_cast<int64_t>(i)) {
    // Its read here saved, and its write too when nothing stored it and no in-place reader counted that.
    // (A reader of it as its input counted its read where it read it: read_held_input.)
    if (!r.spilled && !r.reader_reads_input)
      plan.on_chip_bytes_saved += (!r.in_dram && !r.next_reads ? 2 : 1) * r.bytes;
    if (r.spilled) c.fusion.kept_on_chip.erase(r.value), c.fusion.kept_blocks.erase(r.value);
    if (!r.spilled && !r.in_dram) c.fusion.kept_on_chip[r.value] = r.addr;  // never in DRAM
    r = {};
  }
  OnChipValue& v = c.fusion.on_chip;
  if (v.pending && v.producer == i) {
    plan.sram_input_bytes += v.bytes;
    if (v.next_reads) return;  // the next layer reads it
  }
  hold_or_spill(c);
  reserve_live(c);  // an SE block's input and a value held for a residual stay (se_fusion.h)
}

namespace {

// hold_for_residual's conditions on the graph alone (not on what is held now).
int64_t residual_hold_reader(const Context& c, size_t i) {
  const Node& p = c.g.nodes[i];
  const int64_t r = residual_reader(c.g, i);
  if (r < 0) return -1;
  const std::string& v = p.outputs[0];
  for (const std::string& o : c.g.outputs) {
    if (o == v) return -1;
  }
  auto t = c.tensors.find(v);
  if (c.folding.folded(p) || t == c.tensors.end() || t->second.strided() || t->second.shape.size() != 4 ||
      t->second.layout != kNhwc)
    return -1;
  // The layers in between keep their own fusions: a line buffer (conv -> pool or depthwise conv) needs the
  // scratchpad's top, an SE block holds its input there.
  const auto ru = static_cast<size_t>(r);
  for (size_t k = i + 1; k < ru; ++k) {
    if (conv_pool_pair(c.g, k) || c.g.nodes[k].op_type == "GlobalAveragePool") return -1;
  }
  // The reader's tiles read the value in place when they hold every channel of whole rows: as they do when
  // the reader leaves its own output on chip too (for the pointwise conv after it, or held in turn for the
  // next block's residual) beside this one. Otherwise its tiles are free, and the first one that is not a
  // contiguous run of the value stores it whole: no DRAM traffic saved for the scratchpad held.
  auto tw = c.tensors.find(c.g.nodes[ru].outputs[0]);
  bool others = false;
  if (tw == c.tensors.end() || c.g.nodes[ru].outputs.size() != 1 ||
      (!next_reads_on_chip(c, ru, &others).empty() && residual_hold_reader(c, ru) < 0))
    return -1;
  const int64_t both = round64(num_elements(t->second.shape) * isa::dtype_bytes(t->second.dtype)) +
                       round64(num_elements(tw->second.shape) * isa::dtype_bytes(tw->second.dtype));
  if (4 * both > 3 * scratchpad_capacity(c.config, isa::Buffer::kInput)) return -1;
  return r;
}

// The layer within kResidualReach after node i, not the next one, that reads node i's output as its input
// and can read it in place where it lies dense (as_sram_conv, read_held_input), or -1: a 1x1 unpadded
// ungrouped Conv of any stride with constant weights (a stage's first downsample conv, which reads the
// block output every other pixel), the value's two readers that one and the next layer, which reads it in
// place (a pointwise conv), the value byte codes (a float conv's sums depend on the chunks of a tiling read
// in place, which --functional must not see) whose images the strided conv's rows take whole
// (MatrixMapper::image_rows: the images stacked as they lie). Nothing in between may need the
// scratchpad's top (a line buffer, an SE block's pool), and the value with the reader's output must fit
// 3/4 of the input scratchpad.
int64_t later_input_reader(const Context& c, size_t i) {
  const Node& p = c.g.nodes[i];
  if (p.outputs.size() != 1) return -1;
  const std::string& v = p.outputs[0];
  std::vector<int> readers = c.g.consumers(v);
  std::sort(readers.begin(), readers.end());
  bool others = false;
  if (readers.size() != 2 || readers[0] != static_cast<int>(i + 1) ||
      readers[1] > static_cast<int>(i + kResidualReach) || !next_reads_on_chip(c, i, &others).empty())
    return -1;
  const auto k = static_cast<size_t>(readers[1]);
  const Node& n = c.g.nodes[k];
  if (n.op_type != "Conv" || n.inputs.size() < 2 || n.inputs[0] != v || n.attr_int("group", 1) != 1 ||
      n.outputs.size() != 1)
    return -1;
  for (size_t q = 1; q < n.inputs.size(); ++q) {
    if (n.inputs[q] == v) return -1;
  }
  const Value& w = c.g.value(n.inputs[1]);
  if (!w.is_constant() || w.shape.size() != 4 || w.shape[2] != 1 || w.shape[3] != 1) return -1;
  // A mapping file that tiles the reader as one tall image of the batch (no tile_images) reads the value
  // from DRAM (read_held_input): its producer stores it then, as the file's program did.
  const LayerMapping* own = c.options.mapping ? c.options.mapping->find(n.name) : nullptr;
  if (own != nullptr && own->has_tiling() && !own->tile_images && c.g.value(v).shape.size() == 4 &&
      c.g.value(v).shape[0] > 1)
    return -1;
  for (int64_t q : n.attr_ints("pads", {0, 0, 0, 0})) {
    if (q != 0) return -1;
  }
  const std::string ap = n.attr_string("auto_pad", "NOTSET");
  const std::vector<int64_t> st = n.attr_ints("strides", {1, 1}), dl = n.attr_ints("dilations", {1, 1});
  if ((ap != "NOTSET" && ap != "VALID") || st.size() != 2 || dl.size() != 2) return -1;
  auto t = c.tensors.find(v);
  auto tw = c.tensors.find(n.outputs[0]);
  if (t == c.tensors.end() || tw == c.tensors.end() || !isa::numerics::is_integer(t->second.dtype) ||
      isa::dtype_bytes(t->second.dtype) != 1)
    return -1;
  const int64_t H = t->second.shape[2], W = t->second.shape[3];
  const int64_t OH = (H - 1) / st[0] + 1, OW = (W - 1) / st[1] + 1;
  if ((((OH - 1) * st[0] + 1 + st[0] - 1) / st[0]) * st[0] != H || (OW - 1) * st[1] + 1 > W) return -1;
  for (size_t q = i + 1; q < k; ++q) {
    if (conv_pool_pair(c.g, q) || c.g.nodes[q].op_type == "GlobalAveragePool") return -1;
  }
  const int64_t both = round64(num_elements(t->second.shape) * isa::dtype_bytes(t->second.dtype)) +
                       round64(num_elements(tw->second.shape) * isa::dtype_bytes(tw->second.dtype));
  if (4 * both > 3 * scratchpad_capacity(c.config, isa::Buffer::kInput)) return -1;
  return static_cast<int64_t>(k);
}

}  // namespace

int64_t hold_for_residual(const Context& c, size_t i, bool* input) {
  if (input) *input = false;
  if (c.fusion.input_held > 0) return -1;
  // A value already held stays until its reader; a new one only once that is this layer.
  if (!c.fusion.residual.value.empty() && c.fusion.residual.residual_reader != static_cast<int64_t>(i))
    return -1;
  const int64_t r = residual_hold_reader(c, i);
  if (r >= 0 || input == nullptr) return r;
  const int64_t k = later_input_reader(c, i);
  *input = k >= 0;
  return k;
}

std::optional<uint64_t> residual_in_sram(const Context& c, const Range& value, uint64_t dram_addr,
                                         isa::DType t, const std::array<int64_t, 4>& box,
                                         const std::array<int64_t, 3>& strides) {
  const OnChipValue& v = c.fusion.residual;
  if (!v.pending || v.reader_reads_input || v.residual_reader != static_cast<int64_t>(c.layer) ||
      v.dram.begin != value.begin || v.dram.end != value.end || v.dtype != t)
    return std::nullopt;
  // One contiguous run of the value: each dimension spans the ones inside it exactly.
  int64_t run = box[0];
  for (size_t d = 1; d < 4; ++d) {
    if (box[d] > 1 && strides[d - 1] != run) return std::nullopt;
    run *= box[d];
  }
  const uint64_t bytes = static_cast<uint64_t>(run * isa::dtype_bytes(t));
  if (dram_addr < v.dram.begin || dram_addr + bytes > v.dram.end) return std::nullopt;
  return v.addr + (dram_addr - v.dram.begin);
}

const std::map<std::string, uint64_t>& kept_on_chip(const Context& c) { return c.fusion.kept_on_chip; }
const std::map<std::string, int64_t>& kept_blocks(const Context& c) { return c.fusion.kept_blocks; }
const std::map<std::string, std::vector<int64_t>>& kept_strides(const Context& c) {
  return c.fusion.kept_strides;
}

bool keeps_on_chip(const Context& c, const std::string& value) { return c.fusion.keep_output == value; }

}  // namespace npusim::compiler::backend
