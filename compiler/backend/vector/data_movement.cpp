// Data-movement nodes: transposes (strided DMA plus the VEC transpose), concat, slice and split as
// strided DMA copies, and any other pure copy (Pad, Gather, Resize nearest, ...) as a DMA gather from an
// index map evaluated at compile time. The copy helpers they share are in movement.h.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <numeric>
#include <optional>

#include "compiler/backend/core/context.h"
#include "compiler/backend/fusion/upsample_add.h"
#include "compiler/backend/int8/int8.h"
#include "compiler/backend/matrix/matrix_walk.h"
#include "compiler/backend/memory/movement.h"
#include "compiler/backend/vector/vector_lowerings.h"
#include "compiler/interp/interpreter.h"
#include "compiler/passes/lowered.h"
#include "compiler/quant/emulate.h"
#include "isa/numerics.h"
#include "isa/strides.h"

namespace npusim::compiler::backend {

using isa::Buffer;
using isa::DType;

namespace {

// # int8: the in-tile conversion of a copy whose source or destination holds codes PlanScope deferred
// to the node (its constants loaded at `kslot` of the accumulator buffer): dequantize the source codes,
// quantize into the destination's, on the fp32 tile.
std::function<void(uint64_t, int64_t, int64_t)> conversion_hook(Context& c, const quant::QParams* qx,
                                                                const quant::QParams* qy, DType from,
                                                                DType to, uint64_t kslot) {
  load_conversion_constants(c, kslot, qx, qy);
  return [&c, qx, qy, from, to, kslot](uint64_t slot, int64_t d0, int64_t d1) {
    if (qx) dequantize_tile(c, Buffer::kInput, slot, d0, d1, from, kslot);
    if (qy) quantize_tile(c, Buffer::kInput, slot, d0, d1, to, kslot);
  };
}

// # int8, integer scheme (quant::integer_concat): codes of another QParams requantized into the output's on
// the tile in SRAM: VEC sub of the zero point (-> int32), one requantize (-> the output's codes).
std::function<void(uint64_t, int64_t, int64_t)> requantize_hook(Context& c, const quant::QParams& qx,
                                                                const quant::QParams& qy, DType from,
                                                                DType to,
                                                                const isa::numerics::QuantizedMultiplier& m,
                                                                uint64_t kslot) {
  load_conversion_constants(c, kslot, &qx, nullptr);
  return [&c, &qy, from, to, m, kslot](uint64_t slot, int64_t d0, int64_t d1) {
    subtract_zero_point(c, Buffer::kInput, slot, Buffer::kInput, slot, d0, d1, from, kslot, DType::kInt32);
    Context::VecArgs v;
    v.op = isa::VecOp::kRequantize, v.in = DType::kInt32, v.out = to, v.src1_buf = v.dst_buf = Buffer::kInput;
    v.src1 = v.dst = slot, v.d0 = d0, v.d1 = d1, v.imm0 = m.multiplier, v.imm1 = m.shift,
    v.imm2 = qy.zero_point;
    c.vec(v);
  };
}

// # int8: the requantize into a Concat's codes of value v, which its producer writes into the Concat's slice
// (ConcatFolding::requantized), as the Concat's integer scheme would do it; empty for any other value.
std::function<void(uint64_t, int64_t, int64_t)> concat_requantize(Context& c, const std::string& v,
                                                                  DType from, DType to) {
  const auto rq = c.folding.requantized.find(v);
  if (rq == c.folding.requantized.end() || !c.options.plan) return {};
  const auto concat = std::find_if(c.g.nodes.begin(), c.g.nodes.end(),
                                   [&](const Node& m) { return m.name == rq->second.first; });
  const std::optional<quant::IntegerConcat> ic =
      concat == c.g.nodes.end() ? std::nullopt : quant::integer_concat(c.g, *c.options.plan, *concat);
  if (!ic || rq->second.second >= ic->size() || !(*ic)[rq->second.second])
    throw std::logic_error("backend: a value planned to be requantized into its Concat's codes cannot be");
  return requantize_hook(c, c.options.plan->values.at(v), c.options.plan->values.at(concat->outputs[0]), from,
                         to, *(*ic)[rq->second.second], 0);
}

}  // namespace

bool lower_transpose(Context& c, const Node& n, std::string* why) {
  const DramTensor& x = c.tensor(n.inputs[0]);
  const DramTensor& y = c.tensor(n.outputs[0]);
  const size_t r = y.shape.size();
  std::vector<int64_t> perm(r);
  std::iota(perm.begin(), perm.end(), 0);
  if (!n.has_attr(kLayoutChange)) {
    perm = n.attr_ints("perm", {});
    if (perm.empty()) {
      perm.resize(r);
      for (size_t i = 0; i < r; ++i) perm[i] = static_cast<int64_t>(r - 1 - i);
    }
  }
  if (perm.size() != r || x.shape.size() != r) {
    *why = "transpose rank mismatch";
    return false;
  }
  // # int8: a layout change between a float graph input and the codes its consumer reads (or back)
  // converts in its tile loop instead of a separate pass over the tensor.
  const quant::QParams* qx = c.codes_of(n.inputs[0]);
  const quant::QParams* qy = c.codes_of(n.outputs[0]);
  if (qx || qy) {
    c.plan->mapping = permute_copy(c, x, y, perm, conversion_hook(c, qx, qy, x.dtype, y.dtype, 0)) +
                      ", int8 codes converted in the tile loop";
  } else {
    c.plan->mapping = permute_copy(c, x, y, perm);
  }
  return true;
}

// Concat: each input copied into its slice of the output, but those its producer already wrote there
// (backend/memory/concat_in_place.h). Inputs and output may be views (their own strides).
bool lower_concat(Context& c, const Node& n, std::string* why) {
  const DramTensor& y = c.tensor(n.outputs[0]);
  const size_t r = y.shape.size();
  int64_t axis = n.attr_int("axis", 0);
  if (axis < 0) axis += static_cast<int64_t>(r);
  const auto ypos = positions(y);
  const auto yst = y.strides();
  int64_t offset = 0;
  // # int8: codes deferred to this node (PlanScope): an input whose QParams differ from the output's is
  // requantized tile by tile on its way (dequantize, quantize), the others are copied as they are.
  const quant::QParams* qy = c.codes_of(n.outputs[0]);
  // A constant operand (ViT's class token) is a data segment in the output's layout: in the output's
  // storage type, or fp32 quantized on its way when the output is codes.
  std::map<std::string, DramTensor> constants;
  for (const auto& in : n.inputs) {
    if (in.empty()) continue;
    const Value& v = c.g.value(in);
    if (v.is_constant()) {
      if (!is_float(c.g.value(n.outputs[0]).dtype) || v.shape.size() != r) {
        *why = "constant Concat operand";
        return false;
      }
      if (!constants.count(in))
        constants[in] = constant_tensor(c, *v.constant, y.layout, qy ? DType::kFp32 : y.dtype);
      continue;
    }
    const DramTensor& x = c.tensor(in);
    if (x.layout != y.layout && !(x.layout.empty() && y.layout.empty())) {
      *why = "Concat operands in different layouts";
      return false;
    }
  }
  const std::optional<quant::IntegerConcat> integer =
      qy && c.options.plan ? quant::integer_concat(c.g, *c.options.plan, n) : std::nullopt;
  int requantized = 0;
  uint64_t kslot = 0;
  for (size_t k = 0; k < n.inputs.size(); ++k) {
    const std::string& in = n.inputs[k];
    if (in.empty()) continue;
    const DramTensor& x = constants.count(in) ? constants.at(in) : c.tensor(in);
    if (c.folding.in_place_input(n.name, k)) {
      offset += x.shape[static_cast<size_t>(axis)];
      continue;
    }
    const auto xst = x.strides();
    std::vector<CopyDim> dims;
    for (size_t i = 0; i < r; ++i) dims.push_back({x.phys[i], xst[i], yst[i]});
    const uint64_t dst_off = static_cast<uint64_t>(
        offset * yst[static_cast<size_t>(ypos[static_cast<size_t>(axis)])] * isa::dtype_bytes(y.dtype));
    const quant::QParams* qx = c.codes_of(in);
    const bool same =
        (!qx && !qy && x.dtype == y.dtype) ||
        (qx && qy && qx->scale == qy->scale && qx->zero_point == qy->zero_point && x.dtype == y.dtype);
    if (same) {
      copy_box(c, x, 0, y, dst_off, dims);
    } else {
      const uint64_t ks = kslot;
      kslot = (kslot + 16) % 1024;  // conversion constants of this input (accumulator buffer)
      const std::optional<isa::numerics::QuantizedMultiplier> m = integer ? integer->at(k) : std::nullopt;
      copy_box(c, x, 0, y, dst_off, dims,
               m ? requantize_hook(c, *qx, *qy, x.dtype, y.dtype, *m, ks)
                 : conversion_hook(c, qx, qy, x.dtype, y.dtype, ks));
      requantized += constants.count(in) ? 0 : 1;
    }
    offset += x.shape[static_cast<size_t>(axis)];
  }
  if (!constants.empty()) {
    c.plan->mapping =
        fmt::format("strided DMA copies{}, {} constant input(s) from data segments{}",
                    requantized ? fmt::format(", {} input(s) requantized in the tile loop", requantized) : "",
                    constants.size(), qy ? " quantized on their way" : "");
    return true;
  }
  if (integer && requantized) c.plan->int8_scheme = "integer";
  c.plan->mapping =
      requantized ? fmt::format("strided DMA copies, {} input(s) requantized in the tile loop{}", requantized,
                                integer ? " (int8 integer: centred codes, one requantize)" : "")
                  : "strided DMA copies";
  return true;
}

namespace {

// Slice with unit steps, and Split (each output a slice).
bool slice_copy(Context& c, const DramTensor& x, const DramTensor& y, const std::vector<int64_t>& starts) {
  const size_t r = y.shape.size();
  const auto xst = dense_strides(x.phys);
  const auto yst = dense_strides(y.phys);
  const auto xpos = positions(x);
  int64_t off = 0;
  for (size_t d = 0; d < r; ++d) off += starts[d] * xst[static_cast<size_t>(xpos[d])];
  std::vector<CopyDim> dims;
  for (size_t i = 0; i < r; ++i) dims.push_back({y.phys[i], xst[i], yst[i]});
  copy_box(c, x, static_cast<uint64_t>(off * isa::dtype_bytes(y.dtype)), y, 0, dims);
  return true;
}

std::vector<int64_t> const_ints(const Context& c, const Node& n, size_t k, const char* attr) {
  if (n.has_input(k)) {
    const Value& v = c.g.value(n.inputs[k]);
    if (!v.is_constant()) return {INT64_MIN};
    return v.constant->to_int_vector();
  }
  return n.attr_ints(attr, {});
}

// The value a constant-mode Pad fills with, as stored in `dt`: # int8: on codes (the node moves codes,
// PlanScope) the code of the value under the output's QParams, as the quantized reference pads.
double pad_fill(const Context& c, const Node& n, DType dt) {
  double fill = 0;
  if (c.g.opset < 11) {
    fill = n.attr_float("value", 0.0f);
  } else if (n.has_input(2)) {
    const Tensor& pv = *c.g.value(n.inputs[2]).constant;
    if (pv.size() > 0) fill = pv.as_double(0);
  }
  const bool codes = dt == DType::kInt8 || dt == DType::kUint8;
  if (codes && c.options.plan && c.options.plan->values.count(n.outputs[0]))
    fill = c.options.plan->values.at(n.outputs[0]).quantize(static_cast<float>(fill));
  return fill;
}

}  // namespace

bool lower_pad(Context& c, const Node& n, std::string* why) {
  if (n.attr_string("mode", "constant") != "constant" || n.has_input(3)) {
    *why = "Pad other than constant mode over all axes";
    return false;
  }
  const DramTensor& x = c.tensor(n.inputs[0]);
  const DramTensor& y = c.tensor(n.outputs[0]);
  const size_t r = x.shape.size();
  const std::vector<int64_t> pads = const_ints(c, n, 1, "pads");
  if (pads.size() != 2 * r || positions(x) != positions(y) || x.dtype != y.dtype ||
      (n.has_input(2) && !c.g.value(n.inputs[2]).is_constant())) {
    *why = "runtime pads or value, or a layout change";
    return false;
  }
  // Pads per physical dim; the padded dims must be the two adjacent ones just outside a contiguous
  // inner block (NHWC's H and W): LOAD's halo pads size2 (rows) and size1 (columns).
  const auto pos = positions(x);
  std::vector<int64_t> before(r, 0), after(r, 0);
  std::vector<size_t> padded;
  for (size_t d = 0; d < r; ++d) {
    const size_t p = static_cast<size_t>(pos[d]);
    before[p] = pads[d], after[p] = pads[d + r];
    if (pads[d] < 0 || pads[d + r] < 0) {
      *why = "negative pads (a crop)";
      return false;
    }
  }
  for (size_t p = 0; p < r; ++p) {
    if (before[p] || after[p]) padded.push_back(p);
  }
  if (padded.empty() || padded.size() > 2 || padded.back() + 1 == r ||
      (padded.size() == 2 && padded[0] + 1 != padded[1])) {
    *why = "padded dims are not two adjacent outer dims of the layout";
    return false;
  }
  const size_t j = padded.back();  // columns (size1); rows (size2) are the dim outside it
  int64_t inner = 1, outer = 1;
  for (size_t p = j + 1; p < r; ++p) inner *= x.phys[p];
  for (size_t p = 0; p + 1 < j; ++p) outer *= x.phys[p];
  const int64_t cols = x.phys[j], rows_in = j > 0 ? x.phys[j - 1] : 1;
  const int64_t pt = j > 0 ? before[j - 1] : 0, pb = j > 0 ? after[j - 1] : 0, pl = before[j], pr = after[j];
  const int64_t out_cols = cols + pl + pr, out_rows = rows_in + pt + pb;
  // The halo's value: a signed integer for integer types, bf16 bits for floats (exact values only).
  const double fill = pad_fill(c, n, y.dtype);
  int64_t pad_value = 0;
  if (isa::numerics::is_integer(y.dtype)) {
    if (fill != std::floor(fill)) {
      *why = "fractional pad value on integers";
      return false;
    }
    pad_value = static_cast<int64_t>(fill);
  } else {
    pad_value = bf16_pad(static_cast<float>(fill));
    if (isa::numerics::round_to_precision(static_cast<float>(fill), DType::kBf16) !=
        static_cast<float>(fill)) {
      *why = "pad value not exact in bf16 (LOAD's pad field)";
      return false;
    }
  }
  const int64_t ey = isa::dtype_bytes(y.dtype);
  Slots s = make_slots(c, Buffer::kInput);
  const int64_t cap = s.elems * c.esize / ey;  // slot capacity in elements of the copied type
  int64_t ti = std::min<int64_t>(inner, kMaxDim);
  while (ti > 1 && (1 + pt + pb) * out_cols * ti > cap) ti = ceil_div(ti, 2);
  if (std::max({pt, pb, pl, pr}) > 255 || out_cols > kMaxDim || (1 + pt + pb) * out_cols * ti > cap) {
    *why = "padding beyond LOAD's halo fields or a padded row larger than a slot";
    return false;
  }
  const int64_t k =
      std::max<int64_t>(1, std::min<int64_t>({rows_in, kMaxDim, cap / (out_cols * ti) - pt - pb}));
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t r0 = 0; r0 < rows_in; r0 += k) {
      const int64_t nr = std::min(k, rows_in - r0);
      const int64_t ptop = r0 == 0 ? pt : 0, pbot = r0 + nr == rows_in ? pb : 0;
      const int64_t orow = r0 == 0 ? 0 : r0 + pt;
      for (int64_t i0 = 0; i0 < inner; i0 += ti) {
        const int64_t ni = std::min(ti, inner - i0);
        const uint64_t sl = s.take();
        c.load(Buffer::kInput, sl, x.range(),
               x.addr + static_cast<uint64_t>(((o * rows_in + r0) * cols * inner + i0) * ey), y.dtype,
               {ni, cols, nr, 1}, {inner, cols * inner, 0}, {ptop, pbot, pl, pr}, pad_value);
        c.store(Buffer::kInput, sl, y.range(),
                y.addr + static_cast<uint64_t>(((o * out_rows + orow) * out_cols * inner + i0) * ey), y.dtype,
                {ni, out_cols, nr + ptop + pbot, 1}, {inner, out_cols * inner, 0});
      }
    }
  }
  c.plan->mapping =
      fmt::format("DMA copy whose LOAD halo writes the padding ({} rows x {} x {} tiles)", k, out_cols, ti);
  return true;
}

bool lower_slice(Context& c, const Node& n, std::string* why) {
  const DramTensor& x = c.tensor(n.inputs[0]);
  const DramTensor& y = c.tensor(n.outputs[0]);
  if (x.layout != y.layout) {
    *why = "Slice changes layout";
    return false;
  }
  const size_t r = x.shape.size();
  const auto starts = const_ints(c, n, 1, "starts"), ends = const_ints(c, n, 2, "ends");
  auto axes = const_ints(c, n, 3, "axes");
  const auto steps = const_ints(c, n, 4, "steps");
  if ((!starts.empty() && starts[0] == INT64_MIN) || (!axes.empty() && axes[0] == INT64_MIN) ||
      (!steps.empty() && steps[0] == INT64_MIN) || (!ends.empty() && ends[0] == INT64_MIN)) {
    *why = "runtime slice bounds";
    return false;
  }
  if (axes.empty()) {
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  }
  std::vector<int64_t> st(r, 0);
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t ax = axes[i] < 0 ? axes[i] + static_cast<int64_t>(r) : axes[i];
    if (!steps.empty() && steps[i] != 1) {
      *why = "Slice with a step other than 1";
      return false;
    }
    const int64_t dim = x.shape[static_cast<size_t>(ax)];
    int64_t s = starts[i] < 0 ? starts[i] + dim : starts[i];
    st[static_cast<size_t>(ax)] = std::clamp<int64_t>(s, 0, dim);
  }
  slice_copy(c, x, y, st);
  c.plan->mapping = "strided DMA copy";
  return true;
}

bool lower_split(Context& c, const Node& n, std::string* why) {
  const DramTensor& x = c.tensor(n.inputs[0]);
  const size_t r = x.shape.size();
  int64_t axis = n.attr_int("axis", 0);
  if (axis < 0) axis += static_cast<int64_t>(r);
  int64_t off = 0;
  for (const auto& o : n.outputs) {
    if (o.empty() || !c.tensors.count(o)) continue;
    if (c.tensor(o).layout != x.layout) {
      *why = "Split changes layout";
      return false;
    }
  }
  for (const auto& o : n.outputs) {
    if (o.empty() || !c.tensors.count(o)) continue;
    const DramTensor& y = c.tensor(o);
    std::vector<int64_t> st(r, 0);
    st[static_cast<size_t>(axis)] = off;
    slice_copy(c, x, y, st);
    off += y.shape[static_cast<size_t>(axis)];
  }
  c.plan->mapping = "strided DMA copies";
  return true;
}

// ---- data movement with a compile-time index map ----

// Which inputs of a data-movement op carry data that is copied (the others are parameters and must be
// constants); empty when the op is not a pure copy in this form.
std::vector<size_t> data_inputs(const Context& c, const Node& n) {
  const std::string& t = n.op_type;
  if (t == "Pad" || t == "Slice" || t == "Expand" || t == "Tile" || t == "DepthToSpace" ||
      t == "SpaceToDepth" || t == "Transpose" || t == "Split" || t == "Trilu" || t == "Gather" ||
      t == "GatherElements") {
    return {0};
  }
  if (t == "Resize" || t == "Upsample") {
    const std::string mode = n.attr_string("mode", "nearest");
    if (mode != "nearest") return {};
    return {0};
  }
  if (t == "Concat") {
    std::vector<size_t> v;
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      if (!n.inputs[k].empty()) v.push_back(k);
    }
    return v;
  }
  if (t == "Where") return {1, 2};
  (void)c;
  return {};
}

// Everything the index maps of `n` depend on: the node (op type, attributes, which inputs repeat), its
// parameters' values, and the logical shapes and memory orders of its data inputs and of its outputs --
// not their addresses, so the repeated layers of a model (a decoder's GQA Expand in every layer) compute
// their maps once. Empty (no reuse) when a parameter has no values.
std::string index_map_key(const Context& c, const Node& n, const std::vector<size_t>& data,
                          const std::vector<const DramTensor*>& sources) {
  std::string key = n.op_type + "|" + n.domain;
  for (const auto& [name, a] : n.attrs) {
    if (name.rfind("npu.", 0) == 0) continue;
    key += "|" + name + ":" + std::to_string(static_cast<int>(a.kind())) + ":";
    switch (a.kind()) {
      case Attribute::Kind::kInt:
        key += std::to_string(a.i());
        break;
      case Attribute::Kind::kFloat:
        key += fmt::format("{}", a.f());
        break;
      case Attribute::Kind::kString:
        key += a.s();
        break;
      case Attribute::Kind::kInts:
        key += fmt::format("{}", fmt::join(a.ints(), ","));
        break;
      case Attribute::Kind::kFloats:
        key += fmt::format("{}", fmt::join(a.floats(), ","));
        break;
      case Attribute::Kind::kStrings:
        key += fmt::format("{}", fmt::join(a.strings(), "\x1f"));
        break;
      case Attribute::Kind::kTensor:
        return "";
    }
  }
  size_t source = 0;
  for (size_t k = 0; k < n.inputs.size(); ++k) {
    const std::string& name = n.inputs[k];
    key += "|in" + std::to_string(k) + ":";
    if (name.empty()) continue;
    const size_t first =
        static_cast<size_t>(std::find(n.inputs.begin(), n.inputs.end(), name) - n.inputs.begin());
    if (first < k) {
      key += "=" + std::to_string(first);
      continue;
    }
    const Value& v = c.g.value(name);
    key += fmt::format("{}", fmt::join(v.shape, "x"));
    if (std::find(data.begin(), data.end(), k) != data.end()) {
      const DramTensor& src = *sources[source++];
      key += fmt::format(" order {} phys {}", fmt::join(positions(src), ","), fmt::join(src.phys, "x"));
      continue;
    }
    const Tensor& t = *v.constant;
    if (!t.has_values()) return "";
    key += fmt::format(" t{} ", static_cast<int>(t.dtype));
    key += t.floating() ? fmt::format("{}", fmt::join(t.f, ",")) : fmt::format("{}", fmt::join(t.i, ","));
  }
  for (const auto& o : n.outputs) {
    if (o.empty() || !c.tensors.count(o)) continue;
    const DramTensor& y = c.tensor(o);
    key += fmt::format("|out {} order {} phys {}", fmt::join(y.shape, "x"), fmt::join(positions(y), ","),
                       fmt::join(y.phys, "x"));
  }
  return key;
}

// Lowers a pure data-movement node by evaluating it at compile time on tensors of element ids with the
// reference interpreter (ids are exact in int64, or in float32 below 2^24 for ops that only take
// floats): the output then names, for every element, the source element it copies (or none: a fill
// value), which copy_index_map turns into DMA rows. Parameters (pads, starts, indices, scales, a Where
// condition) must be constants: the ISA has no data-dependent addressing. The maps are kept by
// index_map_key (Context::index_maps) for the nodes that repeat.
namespace {

// The physical element of a tensor's logical element j: `pos` gives each logical dim's position in memory,
// `pst` the physical strides, `lst` the logical ones.
int64_t physical_element(int64_t j, const std::vector<int>& pos, const std::vector<int64_t>& pst,
                         const std::vector<int64_t>& lst) {
  int64_t p = 0;
  for (size_t d = 0; d < lst.size(); ++d) {
    p += j / lst[d] * pst[static_cast<size_t>(pos[d])];
    j %= lst[d];
  }
  return p;
}

// A nearest upsampling by integer factors in channel-last memory, read off its index map: output element
// (b, oy, ox, ch) of the physical [N, OH, OW, C] copies source element (b, oy / sh, ox / sw, ch) of the
// physical [N, H, W, C]. {sh, sw}, or nullopt for any other map (a plain copy included). y may be a view
// whose channels are contiguous (a Concat's slice, backend/memory/concat_in_place.h): the map is over its
// elements in dense order.
std::optional<std::pair<int64_t, int64_t>> upsampling_factors(const DramTensor& x, const DramTensor& y,
                                                              const std::vector<int64_t>& map) {
  if (x.phys.size() != 4 || y.phys.size() != 4 || x.strided() || x.dtype != y.dtype) return std::nullopt;
  if (y.strided() && y.view_strides.back() != 1) return std::nullopt;
  const int64_t N = x.phys[0], H = x.phys[1], W = x.phys[2], C = x.phys[3], OH = y.phys[1], OW = y.phys[2];
  if (y.phys[0] != N || y.phys[3] != C || H <= 0 || W <= 0 || OH % H || OW % W) return std::nullopt;
  const int64_t sh = OH / H, sw = OW / W;
  if (sh * sw <= 1 || static_cast<int64_t>(map.size()) != N * OH * OW * C) return std::nullopt;
  size_t p = 0;
  for (int64_t b = 0; b < N; ++b)
    for (int64_t oy = 0; oy < OH; ++oy)
      for (int64_t ox = 0; ox < OW; ++ox)
        for (int64_t ch = 0; ch < C; ++ch)
          if (map[p++] != ((b * H + oy / sh) * W + ox / sw) * C + ch) return std::nullopt;
  return std::make_pair(sh, sw);
}

// Emits an upsampling (upsampling_factors) that moves its input once and its output once: each tile of
// input rows is loaded once and stored sh x sw times, each STORE writing every sw-th pixel of every sh-th
// output row. y may be a view (upsampling_factors): the STOREs then take its pixel and row pitch, so a
// Concat's slice is written in place. False (nothing emitted) when one pixel's channels do not fit a slot.
// `on_tile` (# int8: the Concat's requantize, ConcatFolding::requantized) runs on each loaded tile, whose
// codes it may widen to int32 in place.
bool replicate_tiles(Context& c, const DramTensor& x, const DramTensor& y, int64_t sh, int64_t sw,
                     const std::function<void(uint64_t, int64_t, int64_t)>& on_tile = {}) {
  Slots s = make_slots(c, Buffer::kInput);
  const int64_t N = x.phys[0], H = x.phys[1], W = x.phys[2], C = x.phys[3];
  const std::vector<int64_t> ys = y.strides();                    // [image, row, pixel, channel]
  const int64_t cap = on_tile ? s.elems * c.esize / 4 : s.elems;  // elements a slot holds (int32 widened)
  if (C > cap || C > kMaxDim) return false;
  const int64_t wt = std::min({W, cap / C, on_tile ? kMaxDim / C : kMaxDim});
  const int64_t rt = std::min({H, std::max<int64_t>(1, cap / (wt * C)), kMaxDim});
  const auto es = static_cast<uint64_t>(isa::dtype_bytes(y.dtype));
  for (int64_t b = 0; b < N; ++b) {
    for (int64_t y0 = 0; y0 < H; y0 += rt) {
      for (int64_t x0 = 0; x0 < W; x0 += wt) {
        const int64_t nr = std::min(rt, H - y0), nw = std::min(wt, W - x0);
        const uint64_t slot = s.take();
        c.load(Buffer::kInput, slot, x.range(),
               x.addr + static_cast<uint64_t>(((b * H + y0) * W + x0) * C) * es, x.dtype, {C, nw, nr, 1},
               {C, W * C, 0});
        if (on_tile) on_tile(slot, C * nw, nr);
        for (int64_t i = 0; i < sh; ++i) {
          for (int64_t j = 0; j < sw; ++j) {
            const int64_t at = b * ys[0] + (y0 * sh + i) * ys[1] + (x0 * sw + j) * ys[2];
            c.store(Buffer::kInput, slot, y.range(), y.addr + static_cast<uint64_t>(at) * es, y.dtype,
                    {C, nw, nr, 1}, {sw * ys[2], sh * ys[1], 0});
          }
        }
      }
    }
  }
  return true;
}

}  // namespace

bool lower_index_map(Context& c, const Node& n, std::string* why) {
  const std::vector<size_t> data = data_inputs(c, n);
  if (data.empty()) {
    *why = fmt::format("{} in this form is not a copy", n.op_type);
    return false;
  }
  const bool float_ids = n.op_type == "Resize" || n.op_type == "Upsample";
  for (size_t k = 0; k < n.inputs.size(); ++k) {
    if (n.inputs[k].empty() || std::find(data.begin(), data.end(), k) != data.end()) continue;
    if (!c.g.value(n.inputs[k]).is_constant()) {
      *why = fmt::format("runtime {} parameter (input {}): no data-dependent addressing on the NPU",
                         n.op_type, k);
      return false;
    }
  }
  const DramTensor& y0 = c.tensor(n.outputs[0]);
  const isa::DType dt = y0.dtype;
  std::vector<const DramTensor*> sources;
  std::vector<DramTensor> constants;
  constants.reserve(data.size());
  std::vector<std::string> source_names;
  for (size_t k = 0; k < n.inputs.size(); ++k) {
    const std::string& name = n.inputs[k];
    if (name.empty() || std::find(n.inputs.begin(), n.inputs.begin() + static_cast<long>(k), name) !=
                            n.inputs.begin() + static_cast<long>(k)) {
      continue;
    }
    if (std::find(data.begin(), data.end(), k) == data.end()) continue;
    const Value& v = c.g.value(name);
    const DramTensor* src;
    if (v.is_constant()) {
      constants.push_back(constant_tensor(c, *v.constant, {}, dt));
      src = &constants.back();
    } else {
      src = &c.tensor(name);
      if (src->dtype != dt) {
        *why = "operands of different storage types";
        return false;
      }
    }
    sources.push_back(src);
    source_names.push_back(name);
    if (float_ids && num_elements(v.shape) >= (int64_t{1} << 24) - 1) {
      *why = "tensor too large for the compile-time index map";
      return false;
    }
    if (float_ids && sources.size() > 1) return false;
  }
  std::vector<std::string> outputs;
  for (const auto& o : n.outputs) {
    if (!o.empty() && c.tensors.count(o)) outputs.push_back(o);
  }
  const std::string key = index_map_key(c, n, data, sources);
  auto cached = key.empty() ? c.index_maps.end() : c.index_maps.find(key);
  std::vector<std::vector<int64_t>> maps;
  if (cached == c.index_maps.end()) {
    Graph mini;
    mini.opset = c.g.opset;
    Node m = n;
    for (auto it = m.attrs.begin(); it != m.attrs.end();) {
      it = it->first.rfind("npu.", 0) == 0 ? m.attrs.erase(it) : std::next(it);
    }
    std::map<std::string, Tensor> inputs;
    constexpr int64_t kBase = int64_t{1} << 52;
    for (const auto& name : n.inputs) {
      if (name.empty() || mini.has_value(name)) continue;
      const Value& v = c.g.value(name);
      const auto at = std::find(source_names.begin(), source_names.end(), name);
      if (at == source_names.end()) {
        mini.add_constant(name, *v.constant);
        continue;
      }
      const int64_t id = at - source_names.begin();
      const DramTensor& src = *sources[static_cast<size_t>(id)];
      const int64_t count = num_elements(v.shape);
      // Element j (logical) of this source -> its physical element.
      std::vector<int64_t> phys(static_cast<size_t>(count));
      {
        const auto pos = positions(src);
        const auto pst = dense_strides(src.phys);
        const auto lst = dense_strides(v.shape);
        for (int64_t j = 0; j < count; ++j) phys[static_cast<size_t>(j)] = physical_element(j, pos, pst, lst);
      }
      Value& mv = mini.ensure_value(name);
      mv.name = name;
      mv.shape = v.shape;
      mv.shape_known = true;
      mini.inputs.push_back(name);
      if (float_ids) {
        std::vector<float> f(static_cast<size_t>(count));
        for (int64_t j = 0; j < count; ++j)
          f[static_cast<size_t>(j)] = static_cast<float>(phys[static_cast<size_t>(j)] + 1);
        mv.dtype = DataType::kFloat32;
        inputs[name] = Tensor::from_floats(v.shape, f);
      } else {
        std::vector<int64_t> ids(static_cast<size_t>(count));
        for (int64_t j = 0; j < count; ++j)
          ids[static_cast<size_t>(j)] = kBase + (id << kMapShift) + phys[static_cast<size_t>(j)];
        mv.dtype = DataType::kInt64;
        inputs[name] = Tensor::from_ints(DataType::kInt64, v.shape, ids);
      }
    }
    for (const auto& o : m.outputs) {
      if (!o.empty()) mini.ensure_value(o).name = o;
    }
    mini.outputs = outputs;
    mini.nodes.push_back(m);
    std::map<std::string, Tensor> out;
    try {
      out = interpret(mini, inputs);
    } catch (const std::exception& e) {
      *why = fmt::format("index map: {}", e.what());
      return false;
    }
    for (const auto& oname : outputs) {
      const DramTensor& y = c.tensor(oname);
      const Tensor& r = out.at(oname);
      const int64_t count = r.size();
      std::vector<int64_t>& map = maps.emplace_back(static_cast<size_t>(count), -1);
      const auto pos = positions(y);
      const auto pst = dense_strides(y.phys);
      const auto lst = dense_strides(y.shape);
      for (int64_t j = 0; j < count; ++j) {
        const int64_t p = physical_element(j, pos, pst, lst);
        int64_t src = -1;
        if (float_ids) {
          const float f = r.f[static_cast<size_t>(j)];
          if (f >= 1.0f && f == std::floor(f)) src = static_cast<int64_t>(f) - 1;
        } else if (r.i[static_cast<size_t>(j)] >= kBase) {
          src = r.i[static_cast<size_t>(j)] - kBase;
        }
        map[static_cast<size_t>(p)] = src;
      }
    }
    if (!key.empty()) cached = c.index_maps.emplace(key, std::move(maps)).first;
  }
  const std::vector<std::vector<int64_t>>& use = cached == c.index_maps.end() ? maps : cached->second;
  double fill = 0;
  if (n.op_type == "Pad") {
    fill = pad_fill(c, n, dt);
  } else if (n.op_type == "Resize") {
    fill = n.attr_float("extrapolation_value", 0.0f);
  }
  if (outputs.size() == 1 && sources.size() == 1) {
    const DramTensor& y = c.tensor(outputs[0]);
    const auto f = upsampling_factors(*sources[0], y, use[0]);
    if (f && upsample_add_take(c, n, *sources[0], y, f->first, f->second)) {
      c.plan->mapping = fmt::format(
          "nearest upsampling {}x{} read by the Add '{}' from this layer's input as its operand: nothing "
          "emitted, the upsampled map never written",
          f->first, f->second, upsample_add_reader(c).name);
      return true;
    }
    // # int8: written into a Concat's slice in the Concat's codes (ConcatFolding::requantized).
    const auto hook = concat_requantize(c, outputs[0], sources[0]->dtype, y.dtype);
    if (f && replicate_tiles(c, *sources[0], y, f->first, f->second, hook)) {
      c.plan->mapping = fmt::format(
          "nearest upsampling {}x{}: each input tile loaded once, stored {} times (strided STOREs)", f->first,
          f->second, f->first * f->second);
      return true;
    }
  }
  int64_t rows = 0;
  bool copied = false;
  for (size_t k = 0; k < outputs.size(); ++k) {
    const DramTensor& y = c.tensor(outputs[k]);
    if (y.dtype != dt) {
      *why = "outputs of different storage types";
      return false;
    }
    if (!y.strided()) {
      rows += copy_index_map(c, y, sources, use[k], fill);
      continue;
    }
    // A view written in place (ConcatFolding::takes_view) that is not an upsampling: gathered into dense
    // scratch, then copied into its slice.
    const DramTensor d = dense_scratch(c, y);
    rows += copy_index_map(c, d, sources, use[k], fill);
    if (const auto hook = concat_requantize(c, outputs[k], d.dtype, y.dtype)) {
      const auto ds = d.strides(), ys = y.strides();
      std::vector<CopyDim> dims;
      for (size_t i = 0; i < y.phys.size(); ++i) dims.push_back({y.phys[i], ds[i], ys[i]});
      copy_box(c, d, 0, y, 0, dims, hook);
    } else {
      copy_tensor(c, d, y);
    }
    copied = true;
  }
  c.plan->mapping = fmt::format("DMA gather from a compile-time index map ({} rows){}", rows,
                                copied ? ", then copied into its Concat slice" : "");
  return true;
}

}  // namespace npusim::compiler::backend
