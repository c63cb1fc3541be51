// Element-wise vector nodes: activations (one VecOp streamed over contiguous tiles), binary ops with
// broadcasting (the broadcast operand row-, column- or scalar-broadcast by the VEC box) and the
// per-channel affine map of a BatchNormalization, with a fused activation on the result tile. Every lowering
// streams SRAM tiles: LOAD into a ping-pong slot, VEC in place, STORE.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <optional>
#include <stdexcept>

#include "compiler/backend/core/context.h"
#include "compiler/backend/fusion/deferred_residual.h"
#include "compiler/backend/fusion/residency.h"
#include "compiler/backend/fusion/scaled_residual.h"
#include "compiler/backend/fusion/se_fusion.h"
#include "compiler/backend/fusion/upsample_add.h"
#include "compiler/backend/fusion/vector_residency.h"
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

using isa::Bcast;
using isa::Buffer;
using isa::DType;
using isa::VecOp;

bool unary_op(const Node& n, const Context& c, Context::VecArgs& v) {
  const std::string& op = n.op_type;
  if (op == "Relu")
    v.op = VecOp::kRelu;
  else if (op == "Sigmoid")
    v.op = VecOp::kSigmoid;
  else if (op == "Tanh")
    v.op = VecOp::kTanh;
  else if (op == "Exp")
    v.op = VecOp::kExp;
  else if (op == "Sqrt")
    v.op = VecOp::kSqrt;
  else if (op == "Reciprocal")
    v.op = VecOp::kRecip;
  else if (op == "Abs")
    v.op = VecOp::kAbs;
  else if (op == "Neg")
    v.op = VecOp::kNeg;
  else if (op == "Erf")
    v.op = VecOp::kErf;
  else if (op == "Gelu" && n.attr_string("approximate", "none") == "none")
    v.op = VecOp::kGelu;
  else if (op == "HardSwish")
    v.op = VecOp::kHardSwish;
  else if (op == "Identity" || op == "Dropout")
    v.op = VecOp::kCopy;
  else if (op == "LeakyRelu") {
    v.op = VecOp::kLeakyRelu;
    v.imm0 = f32_imm(n.attr_float("alpha", 0.01f));
  } else if (op == "HardSigmoid") {
    v.op = VecOp::kHardSigmoid;
    v.imm0 = f32_imm(n.attr_float("alpha", 0.2f));
    v.imm1 = f32_imm(n.attr_float("beta", 0.5f));
  } else if (op == "Clip") {
    v.op = VecOp::kClip;
    float lo = n.attr_float("min", -INFINITY), hi = n.attr_float("max", INFINITY);
    for (size_t k = 1; k <= 2; ++k) {
      if (!n.has_input(k)) continue;
      const Value& b = c.g.value(n.inputs[k]);
      if (!b.is_constant()) return false;
      (k == 1 ? lo : hi) = static_cast<float>(b.constant->as_double(0));
    }
    v.imm0 = f32_imm(lo);
    v.imm1 = f32_imm(hi);
  } else {
    return false;
  }
  return true;
}

bool lower_unary(Context& c, const Node& n, std::string* why) {
  Context::VecArgs v;
  if (!unary_op(n, c, v)) {
    *why = fmt::format("{} is not lowered to the vector unit by the back end", n.op_type);
    return false;
  }
  const DramTensor& x = c.tensor(n.inputs[0]);
  const DramTensor& y = c.tensor(n.outputs[0]);
  if (x.phys != y.phys) {
    *why = "input and output layouts differ";
    return false;
  }
  // # int8: a Relu whose output shares its input's QParams runs on the codes (PlanScope: c.act is the
  // codes' type): relu(real) quantized is max(code, zero point), one clamp per element, exactly.
  // # int8, integer scheme: the function is a table on the codes, one VEC lut per tile (int8.h); it
  // supersedes the clamp on codes and is decided first: a function with a table never needs the clamp's
  // check (a decoder's rotary Neg in int8 on tpu-v1 reached that check with the context on codes and
  // stopped the compile).
  const bool lut = lut_applies(c, n);
  const bool on_codes = !lut && isa::numerics::is_integer(c.act);
  if (on_codes) {
    if (v.op != VecOp::kRelu || !c.options.plan || !c.options.plan->values.count(n.outputs[0]))
      throw std::logic_error("backend: " + n.op_type + " on int8 codes");
    v.op = VecOp::kClip;
    v.imm0 = f32_imm(static_cast<float>(c.options.plan->values.at(n.outputs[0]).zero_point));
    v.imm1 = f32_imm(INFINITY);
  }
  if (lut) v = begin_lut(c, n);
  Slots s = make_slots(c, Buffer::kInput);
  const int64_t total = num_elements(y.shape);
  const int64_t d0max = std::min<int64_t>(4096, s.elems);
  const uint64_t ex = static_cast<uint64_t>(isa::dtype_bytes(x.dtype)),
                 ey = static_cast<uint64_t>(isa::dtype_bytes(y.dtype));
  // # int8: codes converted in SRAM, tile by tile (PlanScope); constants at the accumulator's start.
  const quant::QParams* qx = lut ? nullptr : c.codes_of(n.inputs[0]);
  const quant::QParams* qy = lut ? nullptr : c.codes_of(n.outputs[0]);
  if (qx) load_conversion_constants(c, 0, qx, nullptr);
  if (qy) load_conversion_constants(c, 16, nullptr, qy);
  for (int64_t off = 0; off < total;) {
    const int64_t rem = total - off;
    int64_t d0, d1;
    if (rem >= d0max) {
      d0 = d0max;
      d1 = std::min<int64_t>(rem / d0max, std::min<int64_t>(kMaxDim, s.elems / d0max));
    } else {
      d0 = rem, d1 = 1;
    }
    const uint64_t slot = s.take();
    c.load(Buffer::kInput, slot, x.range(), x.addr + static_cast<uint64_t>(off) * ex, x.dtype, {d0, d1, 1, 1},
           {d0, 0, 0});
    if (qx) dequantize_tile(c, Buffer::kInput, slot, d0, d1, x.dtype, 0);
    Context::VecArgs a = v;
    if (!lut) a.in = a.out = c.act;
    a.src1_buf = a.dst_buf = Buffer::kInput;
    a.src1 = a.dst = slot;
    a.d0 = d0, a.d1 = d1, a.d2 = 1;
    c.vec(a);
    if (qy) quantize_tile(c, Buffer::kInput, slot, d0, d1, y.dtype, 16);
    c.store(Buffer::kInput, slot, y.range(), y.addr + static_cast<uint64_t>(off) * ey, y.dtype,
            {d0, d1, 1, 1}, {d0, 0, 0});
    off += d0 * d1;
  }
  c.plan->mapping = fmt::format("VEC {} streamed in {}-element tiles{}",
                                isa::kVecOpNames[static_cast<size_t>(v.op)], s.elems,
                                on_codes   ? " on int8 codes (relu = clamp at the zero point)"
                                : lut      ? " on int8 codes: a 256-entry table of " + n.op_type
                                : qx || qy ? ", int8 codes converted in the tile loop"
                                           : "");
  return true;
}

namespace {

// An operand of a broadcasting element-wise op, in the output's physical dim order.
struct Operand {
  bool constant = false;
  const DramTensor* t = nullptr;
  uint64_t addr = 0;  // DRAM address of its data (constant: a data segment written in this order)
  Range range;
  Shape pshape;                       // extents in output physical order (1 = broadcast)
  isa::DType dt = isa::DType::kFp32;  // element type in DRAM
  const quant::QParams* q = nullptr;  // # int8: codes converted in the tile loop (Context::codes)
  bool centred = false;  // # int8 integer scheme: its codes become code - zero point in int32, not reals
  // # int8 integer scheme (quant::integer_add): the centred codes then rescaled to the common grid in int32.
  std::optional<isa::numerics::QuantizedMultiplier> rescale;
  int64_t sram = -1;  // where the input scratchpad already holds it (an SE block's input), -1 = in DRAM only
};

// The output's memory order of logical dims (ONNX order when its layout is empty).
std::vector<int> output_order(const DramTensor& y) {
  std::vector<int> ylay = y.layout;
  if (ylay.empty()) {
    ylay.resize(y.shape.size());
    std::iota(ylay.begin(), ylay.end(), 0);
  }
  return ylay;
}

// A constant operand of logical shape `padded` (y's rank, 1 = broadcast) with data `*src`, written as a
// data segment in the output's physical order; `src` null: a shape-only constant (a timing-only
// compile), whose segment is placed without bytes.
Operand constant_operand(Context& c, const std::vector<float>* src, const Shape& padded,
                         const DramTensor& y) {
  const std::vector<int> ylay = output_order(y);
  Operand o;
  for (int d : ylay) o.pshape.push_back(padded[static_cast<size_t>(d)]);
  o.constant = true;
  o.dt = c.act;
  if (src == nullptr) {
    const auto bytes = static_cast<uint64_t>(num_elements(o.pshape)) * static_cast<uint64_t>(c.esize);
    o.addr = c.add_elided_data(bytes);
    o.range = Range{kDram, o.addr, o.addr + bytes};
    return o;
  }
  const size_t r = padded.size();
  const auto lst = dense_strides(padded);
  std::vector<float> dst(static_cast<size_t>(num_elements(o.pshape)));
  const auto pst = dense_strides(o.pshape);
  for (int64_t i = 0; i < static_cast<int64_t>(dst.size()); ++i) {
    int64_t rem = i, li = 0;
    for (size_t k = 0; k < r; ++k) {
      const int64_t coord = rem / pst[k];
      rem %= pst[k];
      li += coord * lst[static_cast<size_t>(ylay[k])];
    }
    dst[static_cast<size_t>(i)] = (*src)[static_cast<size_t>(li)];
  }
  o.addr = c.add_floats(dst, c.act);
  o.range = Range{kDram, o.addr, o.addr + dst.size() * static_cast<uint64_t>(c.esize)};
  return o;
}

// Returns false when the operand's DRAM layout is not the output's order (non-1 dims permuted).
bool make_operand(Context& c, const std::string& name, const DramTensor& y, Operand& o) {
  const Value& v = c.g.value(name);
  const size_t r = y.shape.size();
  if (v.shape.size() > r) return false;
  Shape padded(r - v.shape.size(), 1);
  padded.insert(padded.end(), v.shape.begin(), v.shape.end());
  if (v.is_constant()) {
    const Tensor& t = *v.constant;
    const std::vector<float> converted =
        t.has_values() && !t.floating() ? t.to_float_vector() : std::vector<float>();
    o = constant_operand(c, !t.has_values() ? nullptr : t.floating() ? &t.f : &converted, padded, y);
    return true;
  }
  const std::vector<int> ylay = output_order(y);
  o.pshape.clear();
  for (int d : ylay) o.pshape.push_back(padded[static_cast<size_t>(d)]);
  const DramTensor& t = c.tensor(name);
  // The non-1 logical dims must appear in the same relative order in its memory and in the output's.
  std::vector<int> own = t.layout;
  if (own.empty()) {
    own.resize(v.shape.size());
    std::iota(own.begin(), own.end(), 0);
  }
  std::vector<int> a, b;
  const int shift = static_cast<int>(r - v.shape.size());
  for (int d : own) {
    if (v.shape[static_cast<size_t>(d)] != 1) a.push_back(d + shift);
  }
  for (int d : ylay) {
    if (padded[static_cast<size_t>(d)] != 1) b.push_back(d);
  }
  if (a != b) return false;
  o.t = &t;
  o.addr = t.addr;
  o.range = t.range();
  o.dt = t.dtype;
  o.q = c.codes_of(name);
  return true;
}

// A dim of stream_broadcast's walk: dims of the output merged where A, y and the B operands' broadcast
// flag allow, with each one's stride (b_stride set by the walk).
struct StreamDim {
  int64_t ext;
  bool b_full;
  int64_t a_stride = 0, b_stride = 0, y_stride = 0;
};

// The output's non-unit dims merged where both A and y are contiguous across them and the B operands
// (which share one shape: Bs[0]'s) are full or broadcast in both. A and y may have strides of their own
// (A a view of a Concat's buffer, backend/memory/concat_in_place.h).
std::vector<StreamDim> stream_dims(const Operand& A, const std::vector<Operand>& Bs, const DramTensor& y) {
  const Shape& P = y.phys;
  const Operand& Bp = Bs[0];
  const std::vector<int64_t> yst = y.strides();
  const std::vector<int64_t> ast = A.t ? A.t->strides() : yst;
  std::vector<StreamDim> dims;
  for (size_t i = 0; i < P.size(); ++i) {
    if (P[i] == 1) continue;
    const bool bf = Bp.pshape[i] == P[i];
    StreamDim& b = dims.empty() ? dims.emplace_back(StreamDim{0, bf}) : dims.back();
    if (b.ext > 0 && b.b_full == bf && b.a_stride == ast[i] * P[i] && b.y_stride == yst[i] * P[i]) {
      b.ext *= P[i];
      b.a_stride = ast[i], b.y_stride = yst[i];
    } else if (b.ext == 0) {
      b = StreamDim{P[i], bf, ast[i], 0, yst[i]};
    } else {
      dims.push_back({P[i], bf, ast[i], 0, yst[i]});
    }
  }
  if (dims.empty()) dims.push_back({1, true, 1, 0, 1});
  return dims;
}

// Whether stream_broadcast can walk A and y: the VEC box's rows are contiguous in both (a Slice of a
// value's innermost dim down to one element, read in place, is not).
bool streamable(const Operand& A, const std::vector<Operand>& Bs, const DramTensor& y) {
  const std::vector<StreamDim> dims = stream_dims(A, Bs, y);
  return dims.back().a_stride == 1 && dims.back().y_stride == 1;
}

// Why a node whose operands are not streamable runs on the host, in the user's words.
constexpr const char* kNotStreamable =
    "its input or output is strided in memory along the innermost dimension (every element of that "
    "dimension sits apart from the next), which the vector unit cannot stream";

// In place on a d1 x d0 int32 tile: requantize by `m` to int32 (no zero point), the integer Add's rescale of
// centred codes to its common grid (quant::integer_add).
void rescale_int32(Context& c, Buffer buf, uint64_t slot, int64_t d0, int64_t d1,
                   const isa::numerics::QuantizedMultiplier& m) {
  Context::VecArgs v;
  v.op = VecOp::kRequantize, v.in = v.out = DType::kInt32, v.src1_buf = v.dst_buf = buf;
  v.src1 = v.dst = slot, v.d0 = d0, v.d1 = d1, v.imm0 = m.multiplier, v.imm1 = m.shift;
  c.vec(v);
}

// Where a tile's result lies for its STORE.
struct TileResult {
  Buffer buf;
  uint64_t addr;
};
using TileFn = std::function<TileResult(uint64_t a_slot, const std::vector<uint64_t>& b_slots, int64_t d0,
                                        int64_t d1, Bcast mode)>;
// Where the conversion constants of int8 codes sit in the accumulator buffer (load_conversion_constants).
constexpr uint64_t kConvA = 0, kConvB = 16, kConvY = 32;
// The output stage (bias, multiplier, shift) of an SE residual's product (lower_binary), after them.
constexpr uint64_t kProductStage = 48;

// The integer Mul's products (quant::integer_mul): the d1 x d0 tile of A's codes at a_slot of the input
// scratchpad centred into int32 at `sums` of the accumulator, then multiplied there by B's centred codes at
// b_slot of the weight scratchpad (broadcast `bc`).
void centred_products(Context& c, uint64_t a_slot, DType a_dt, uint64_t sums, uint64_t b_slot, int64_t d0,
                      int64_t d1, Bcast bc) {
  subtract_zero_point(c, Buffer::kInput, a_slot, Buffer::kAccumulator, sums, d0, d1, a_dt, kConvA,
                      DType::kInt32);
  Context::VecArgs v;
  v.op = VecOp::kMul, v.in = v.out = DType::kInt32, v.src1_buf = v.dst_buf = Buffer::kAccumulator;
  v.src1 = v.dst = sums, v.src2_buf = Buffer::kWeight, v.src2 = b_slot, v.d0 = d0, v.d1 = d1, v.bcast = bc;
  c.vec(v);
}

// One walk of stream_broadcast (below): in two-dim boxes, or (slab > 0) in boxes of three dims, whole rows of
// the two innermost and a run of the third in at least `slab` pieces, the two outer ones swapped first
// (swap); nullopt when the slab does not apply (the box is not whole rows).
std::optional<Bcast> stream_walk(Context& c, const Operand& A, const std::vector<Operand>& Bs,
                                 const DramTensor& y, const quant::QParams* qy, const TileFn& on_tile,
                                 int64_t max_tile, bool* kept, int slab, bool swap,
                                 std::optional<uint64_t> y_chip = std::nullopt) {
  // The B operands share one shape and storage type (each is loaded with the same box).
  const Operand& Bp = Bs[0];
  std::vector<StreamDim> dims = stream_dims(A, Bs, y);
  if (dims.back().a_stride != 1 || dims.back().y_stride != 1)  // the lowerings check streamable() first
    throw std::logic_error("backend: element-wise operand without a contiguous innermost dim");
  {
    int64_t bs = 1;
    for (size_t i = dims.size(); i-- > 0;) {
      dims[i].b_stride = dims[i].b_full ? bs : 0;
      if (dims[i].b_full) bs *= dims[i].ext;
    }
  }
  const size_t k = dims.size();
  if (swap && k >= 3) std::swap(dims[k - 2], dims[k - 3]);
  // The VEC box: (d1 = second innermost, d0 = innermost) with the bcast mode they imply.
  Bcast mode;
  size_t box_dims;
  if (k == 1) {
    mode = dims[0].b_full ? Bcast::kNone : Bcast::kScalar;
    box_dims = 1;
  } else {
    // Two innermost dims both broadcast stay apart only when A's strides keep them apart (A a strided
    // view, backend/memory/strided_views.h): B is then one value for the whole box.
    // Both full: dims that stay apart only because y (or A) is a view with a pitch of its own (a Concat's
    // slice): B's box then has the tile's shape.
    mode = dims[k - 1].b_full   ? (dims[k - 2].b_full ? Bcast::kNone : Bcast::kRow)
           : dims[k - 2].b_full ? Bcast::kCol
                                : Bcast::kScalar;
    box_dims = 2;
  }
  Slots sa = make_slots(c, Buffer::kInput, 0, max_tile);
  Slots sb = make_slots(c, Buffer::kWeight);
  // Several broadcast operands share the weight slots: one region each.
  sb.elems /= static_cast<int64_t>(Bs.size());
  const uint64_t b_region = static_cast<uint64_t>(round64(sb.elems * c.esize));
  const uint64_t ea = static_cast<uint64_t>(isa::dtype_bytes(A.dt)),
                 eb = static_cast<uint64_t>(isa::dtype_bytes(Bp.dt));
  const uint64_t ey = static_cast<uint64_t>(isa::dtype_bytes(y.dtype));
  const int64_t inner = dims[k - 1].ext;
  int64_t t0, t1 = 1;
  if (box_dims == 1) {
    t0 = std::min<int64_t>({inner, 4096, sa.elems, sb.elems});
    t1 = std::min<int64_t>(
        {ceil_div(inner, t0), kMaxDim, sa.elems / t0, mode == Bcast::kNone ? sb.elems / t0 : kMaxDim});
    t1 = std::max<int64_t>(1, t1);
  } else {
    const int64_t outer = dims[k - 2].ext;
    t0 = std::min<int64_t>({inner, kMaxDim, sa.elems, sb.elems});
    t1 = std::max<int64_t>(1, std::min<int64_t>({outer, kMaxDim, sa.elems / t0,
                                                 mode == Bcast::kCol    ? sb.elems
                                                 : mode == Bcast::kNone ? sb.elems / t0
                                                                        : kMaxDim}));
  }
  // A slab: whole rows of the box, t2 of the third innermost dim (which the walk then leaves out).
  int64_t t2 = 1;
  if (slab) {
    if (box_dims != 2 || t0 != inner || t1 != dims[k - 2].ext) {
      return std::optional<Bcast>();
    }
    const int64_t per = t0 * t1;
    t2 = std::min<int64_t>({ceil_div(dims[k - 3].ext, slab), kMaxDim, sa.elems / per,
                            mode == Bcast::kNone ? sb.elems / per : kMaxDim, kMaxDim / t1});
    if (t2 < 2) return std::optional<Bcast>();
  }
  const size_t walked = box_dims + (slab ? 1 : 0);  // the box's dims, the slab's third included
  // y's rows written on chip for the LayerNorm after this layer (backend/fusion/vector_residency.h), each
  // result tile where it lies in y, dense: only when every tile is one contiguous run of y.
  if (y_chip && box_dims == 2 && t1 > 1 && !(t0 == inner && dims[k - 2].y_stride == inner)) y_chip.reset();
  if (y_chip && slab && dims[k - 3].y_stride != inner * dims[k - 2].ext) y_chip.reset();
  bool y_stored = false;
  if (y_chip) vector_rows_written(c, y, &y_stored);
  // Pieces of the box dims: (row start, col start, d1, d0), and the slab's (start, extent).
  struct Piece {
    int64_t r0, c0, d1, d0, s0 = 0, d2 = 1;
  };
  std::vector<Piece> pieces;
  if (slab) {
    for (int64_t s0 = 0; s0 < dims[k - 3].ext; s0 += t2)
      pieces.push_back({0, 0, t1, t0, s0, std::min(t2, dims[k - 3].ext - s0)});
  } else if (box_dims == 1) {
    for (int64_t start = 0; start < inner;) {
      const int64_t rem = inner - start;
      const int64_t d0 = std::min(rem, t0), d1 = rem >= t0 ? std::min(t1, rem / t0) : 1;
      pieces.push_back({0, start, d1, d0});
      start += d0 * d1;
    }
  } else {
    for (int64_t r0 = 0; r0 < dims[k - 2].ext; r0 += t1) {
      for (int64_t c0 = 0; c0 < inner; c0 += t0) {
        pieces.push_back({r0, c0, std::min(t1, dims[k - 2].ext - r0), std::min(t0, inner - c0)});
      }
    }
  }
  std::vector<int64_t> ext;
  for (size_t i = 0; i + walked < k; ++i) ext.push_back(dims[i].ext);
  ext.push_back(static_cast<int64_t>(pieces.size()));
  int64_t last_b_off = -1, last_b_n = -1;
  uint64_t b_cur = 0;
  // A held in the scratchpad (backend/fusion/se_fusion.h): every tile is a dense piece of it (whole rows,
  // or a contiguous run), so the tile is worked on where it lies and not loaded.
  const bool a_held = A.sram >= 0 && A.t && !A.t->strided() && (box_dims == 1 || t0 == inner);
  if (a_held) se_mul_read_held(c);
  // Three slots of the tile where the two hold three, when the tile search asks (vector_tiling.h): a
  // tile's LOAD then waits for the STORE three tiles back, not two.
  if (c.slot_ring && !a_held && sa.ring(t0 * t1 * t2 * c.esize)) c.rang = true;
  const bool in_place = kept && a_held && isa::dtype_bytes(y.dtype) == isa::dtype_bytes(A.dt);
  if (kept) *kept = in_place;
  odometer(ext, [&](const std::vector<int64_t>& idx) {
    int64_t ao = 0, bo = 0, yo = 0;
    for (size_t i = 0; i + walked < k; ++i) {
      ao += idx[i] * dims[i].a_stride;
      bo += idx[i] * dims[i].b_stride;
      yo += idx[i] * dims[i].y_stride;
    }
    const Piece& p = pieces[static_cast<size_t>(idx.back())];
    const int64_t d0 = p.d0, d1 = p.d1;
    int64_t b_n;
    std::array<int64_t, 4> bsz = {1, 1, 1, 1};
    std::array<int64_t, 3> bst = {d0, 0, 0};
    std::array<int64_t, 3> ast = {d0, 0, 0}, yst_box = {d0, 0, 0};
    if (box_dims == 1) {
      ao += p.c0;
      yo += p.c0;
      if (mode == Bcast::kNone) {
        bo += p.c0;
        bsz = {d0, d1, 1, 1};
        b_n = d0 * d1;
      } else {
        b_n = 1;
      }
    } else {
      ao += p.r0 * dims[k - 2].a_stride + p.c0;
      yo += p.r0 * dims[k - 2].y_stride + p.c0;
      ast = {dims[k - 2].a_stride, 0, 0};
      yst_box = {dims[k - 2].y_stride, 0, 0};
      if (mode == Bcast::kScalar) {
        b_n = 1;
      } else if (mode == Bcast::kNone) {
        bo += p.r0 * dims[k - 2].b_stride + p.c0;
        b_n = d0 * d1;
        bsz = {d0, d1, 1, 1};
        bst = {dims[k - 2].b_stride, 0, 0};
      } else if (mode == Bcast::kRow) {
        bo += p.c0 * dims[k - 1].b_stride;
        b_n = d0;
        bsz = {d0, 1, 1, 1};
      } else {
        bo += p.r0 * dims[k - 2].b_stride;
        b_n = d1;
        bsz = {d1, 1, 1, 1};
      }
    }
    std::array<int64_t, 4> box = {d0, d1, 1, 1};
    if (slab) {  // the third dim's run: its strides after each operand's row pitch
      const StreamDim& sd = dims[k - 3];
      ao += p.s0 * sd.a_stride, bo += p.s0 * sd.b_stride, yo += p.s0 * sd.y_stride;
      box[2] = p.d2;
      ast[1] = sd.a_stride, yst_box[1] = sd.y_stride;
      if (mode == Bcast::kNone) bsz[2] = p.d2, bst[1] = sd.b_stride;
      b_n *= mode == Bcast::kNone ? p.d2 : 1;
    }
    const uint64_t sl = a_held ? static_cast<uint64_t>(A.sram) + static_cast<uint64_t>(ao) * ea : sa.take();
    if (!a_held) c.load(Buffer::kInput, sl, A.range, A.addr + static_cast<uint64_t>(ao) * ea, A.dt, box, ast);
    // The tile in SRAM is dense: a slab's rows are the VEC's rows.
    const int64_t rows = d1 * box[2];
    if (A.q) dequantize_tile(c, Buffer::kInput, sl, d0, rows, A.dt, kConvA);
    if (!(bo == last_b_off && b_n == last_b_n)) {
      b_cur = sb.take();
      for (size_t i = 0; i < Bs.size(); ++i) {
        const uint64_t at = b_cur + i * b_region;
        c.load(Buffer::kWeight, at, Bs[i].range, Bs[i].addr + static_cast<uint64_t>(bo) * eb, Bs[i].dt, bsz,
               bst);
        if (Bs[i].q && Bs[i].centred) {
          subtract_zero_point(c, Buffer::kWeight, at, Buffer::kWeight, at, bsz[0], bsz[1] * bsz[2], Bs[i].dt,
                              kConvB, DType::kInt32);
          if (Bs[i].rescale) rescale_int32(c, Buffer::kWeight, at, bsz[0], bsz[1] * bsz[2], *Bs[i].rescale);
        } else if (Bs[i].q)
          dequantize_tile(c, Buffer::kWeight, at, bsz[0], bsz[1] * bsz[2], Bs[i].dt, kConvB);
      }
      last_b_off = bo, last_b_n = b_n;
    }
    std::vector<uint64_t> b_slots;
    for (size_t i = 0; i < Bs.size(); ++i) b_slots.push_back(b_cur + i * b_region);
    const TileResult res = on_tile(sl, b_slots, d0, rows, mode);
    if (in_place) {  // the result where the A tile lies: the codes written there, or the float tile already
                     // is
      if (qy) quantize_tile_into(c, res.buf, res.addr, Buffer::kInput, sl, d0, d1, y.dtype, kConvY);
      if (!qy && !(res.buf == Buffer::kInput && res.addr == sl))
        throw std::logic_error("backend: an in-place result tile computed elsewhere");
      return;
    }
    if (y_chip) {  // the codes (or the float tile) where the tile lies in y's rows on chip; stored too for
                   // y's other readers
      const uint64_t dst = *y_chip + static_cast<uint64_t>(yo) * ey;
      if (qy) {
        quantize_tile_into(c, res.buf, res.addr, Buffer::kInput, dst, d0, rows, y.dtype, kConvY);
      } else {
        Context::VecArgs cp;
        cp.in = cp.out = y.dtype;
        cp.src1_buf = res.buf, cp.src1 = res.addr, cp.dst_buf = Buffer::kInput, cp.dst = dst;
        cp.d0 = d0, cp.d1 = rows;
        c.vec(cp);
      }
      if (y_stored)
        c.store(Buffer::kInput, dst, y.range(), y.addr + static_cast<uint64_t>(yo) * ey, y.dtype, box,
                yst_box);
      return;
    }
    if (qy) quantize_tile(c, res.buf, res.addr, d0, rows, y.dtype, kConvY);
    c.store(res.buf, res.addr, y.range(), y.addr + static_cast<uint64_t>(yo) * ey, y.dtype, box, yst_box);
  });
  return std::optional<Bcast>(mode);
}

// Streams y = f(A, B...) over SRAM tiles: A has the output's full shape and layout, every B operand the
// same broadcast shape (pshape, 1 = broadcast). Each tile of A is loaded (codes dequantized when A.q),
// each B's matching piece loaded when it changes (one weight-slot region per B; codes dequantized),
// `on_tile(a_slot, b_slots, d0, d1, mode)` emits the VEC work on the d1 x d0 tile (at a_slot of the input
// buffer) and says where the result is, which is quantized when `qy` (conversion constants at kConvA /
// kConvB / kConvY of the accumulator buffer, loaded by the caller) and stored. A tile holds at most
// `max_tile` elements. Returns the broadcast mode of the VEC box.
// With `kept` (A held in the scratchpad, backend/fusion/se_fusion.h), each result tile is written where its A
// tile lies (codes of y's size in place of A's) and not stored, when A's tiles are read in place and y's
// elements are A's size: *kept says whether it was (y then lies dense at A.sram).
Bcast stream_broadcast(Context& c, const Operand& A, const std::vector<Operand>& Bs, const DramTensor& y,
                       const quant::QParams* qy, const TileFn& on_tile, int64_t max_tile = INT64_MAX,
                       bool* kept = nullptr) {
  std::vector<StreamDim> dims = stream_dims(A, Bs, y);
  const size_t k = dims.size();
  // A strided A (a view, backend/memory/strided_views.h) whose rows are short or far apart may stream
  // faster in slabs: boxes of three dims (whole rows of the two innermost, a run of the third), every
  // operand's LOAD / STORE with its own strides, the VEC over the slab as one dense tile. Chosen by
  // simulating both walks; only where every B is full or one scalar (their boxes are the tile's or none).
  bool b_whole = true;
  for (const StreamDim& d : dims) b_whole &= d.b_full == dims[0].b_full;
  const bool slab_candidate =
      k >= 3 && b_whole && A.t && A.t->strided() && !kept && c.can_time() && !c.in_trial() && A.sram < 0;
  // y's rows on chip for the LayerNorm after this layer (backend/fusion/vector_residency.h), when planned
  // and, where code can be timed, the walk writing them there is no slower than the walk storing them with
  // the reader's load of them (their bytes at the DRAM's sustained rate) added.
  std::optional<uint64_t> chip = kept ? std::nullopt : vector_rows_planned(c, y);
  const auto walk = [&](int slab, bool swap) {
    return stream_walk(c, A, Bs, y, qy, on_tile, max_tile, kept, slab, swap, chip);
  };
  // A walk's simulated cycles (-1: it does not apply), and whether it wrote y on chip.
  struct Timed {
    int64_t cycles = -1;
    bool on_chip = false;
  };
  const auto timed = [&](int slab, bool swap) {
    const Context::Trial t = c.begin_trial();
    const int64_t first = c.em.size();
    Timed r;
    if (walk(slab, swap).has_value()) r.cycles = c.time_layer(first);
    r.on_chip = vector_rows_pending(c);
    c.end_trial(t);
    return r;
  };
  // The walks: in two-dim boxes; where A is strided, slabs over the third innermost dim in one run or at
  // least 4 or 16 pieces, or with the two outer box dims swapped (A's rows then follow each other where the
  // view's layout has them so).
  std::vector<std::pair<int, bool>> walks = {{0, false}};
  if (slab_candidate) {
    for (const int pieces : {1, 4, 16}) {
      for (const bool sw : {false, true}) walks.emplace_back(pieces, sw);
    }
  }
  const std::optional<uint64_t> planned = chip;
  const bool chip_timed = planned && c.can_time() && !c.in_trial();
  if (!slab_candidate && !chip_timed) return *walk(0, false);
  // The fastest walk storing y, timed with the scratchpad the plan reserved for y free again; with y planned
  // on chip, the fastest writing it there, taken when its own simulation is no slower: the reader's load
  // saved is not counted, since it may hide under the reader's own vector work (a LayerNorm's; BERT-base
  // int8 on edge: its residual Add 3.1 k cycles slower a block writing on chip in smaller tiles, the
  // LayerNorm after it 2.2 k faster, its 98 KB at the DRAM's rate 5.8 k).
  chip.reset();
  const int64_t reserved = chip_timed ? free_planned_rows(c, y) : 0;
  Timed best = timed(0, false);
  std::pair<int, bool> pick = walks[0];
  for (size_t w = 1; w < walks.size(); ++w) {
    const Timed t = timed(walks[w].first, walks[w].second);
    if (t.cycles >= 0 && t.cycles < best.cycles) best = t, pick = walks[w];
  }
  if (chip_timed) {
    restore_planned_rows(c, reserved);
    chip = planned;
    Timed best_chip;
    std::pair<int, bool> pick_chip = walks[0];
    for (const auto& w : walks) {
      const Timed t = timed(w.first, w.second);
      if (t.cycles >= 0 && t.on_chip && (best_chip.cycles < 0 || t.cycles < best_chip.cycles))
        best_chip = t, pick_chip = w;
    }
    if (best_chip.cycles >= 0 && best_chip.cycles <= best.cycles) {
      pick = pick_chip;
    } else {
      chip.reset();  // y stored: the bytes the plan reserved are free for this layer's tiles
      free_planned_rows(c, y);
    }
  }
  return *walk(pick.first, pick.second);
}

// Streams y = f(A, up(z)) as stream_broadcast does with B the nearest upsampling by (sh, sw) of the dense
// NHWC map z (backend/fusion/upsample_add.h; A and y dense, of y's shape): per tile of sh output rows of nx
// input pixels' sw pixels each, A's tile loaded, z's nx pixels loaded sw times each (a zero stride) as one
// row (its codes centred and rescaled as B's would be), `on_tile` on the sh x row tile with that row
// broadcast (bcast row), the result quantized when `qy`, stored.
// With `S` (one value per channel, float: backend/fusion/deferred_residual.h), S is loaded once at the start
// of the weight scratchpad, replicated along a tile's row by a zero-stride LOAD, and `on_tile` gets its
// address after z's row.
Bcast stream_upsampled(Context& c, const Operand& A, const Operand& B, const DramTensor& z, int64_t sh,
                       int64_t sw, const DramTensor& y, const quant::QParams* qy, const TileFn& on_tile,
                       int64_t max_tile, const Operand* S = nullptr) {
  const int64_t N = y.phys[0], OW = y.phys[2], C = y.phys[3], H = z.phys[1], W = z.phys[2];
  const int64_t OH = y.phys[1], px = sw * C;
  Slots sa = make_slots(c, Buffer::kInput, 0, max_tile);
  Slots sb = make_slots(c, Buffer::kWeight);
  int64_t nx = std::min({W, kMaxDim / px, sa.elems / (sh * px), sb.elems / px});
  uint64_t s_row = 0;
  if (S) {  // S's row takes a third of the weight scratchpad, z's two slots the rest
    nx = std::min(nx, 2 * sb.elems / (3 * px));
    const auto s_bytes = static_cast<uint64_t>(round64(nx * px * c.esize));
    sb = make_slots(c, Buffer::kWeight, s_bytes);
    nx = std::min(nx, sb.elems / px);
    s_row = c.sram_base(Buffer::kWeight);
    if (nx >= 1) c.load(Buffer::kWeight, s_row, S->range, S->addr, S->dt, {C, nx * sw, 1, 1}, {0, 0, 0});
  }
  if (nx < 1) throw std::logic_error("backend: an upsampled operand's tile does not fit its slots");
  const uint64_t ea = static_cast<uint64_t>(isa::dtype_bytes(A.dt)),
                 ez = static_cast<uint64_t>(isa::dtype_bytes(z.dtype)),
                 ey = static_cast<uint64_t>(isa::dtype_bytes(y.dtype));
  for (int64_t b = 0; b < N; ++b) {
    for (int64_t r = 0; r < H; ++r) {
      for (int64_t x0 = 0; x0 < W; x0 += nx) {
        const int64_t n = std::min(nx, W - x0), d0 = n * px;
        const auto at = static_cast<uint64_t>(((b * OH + r * sh) * OW + x0 * sw) * C);
        const uint64_t sl = sa.take(), bs = sb.take();
        c.load(Buffer::kInput, sl, A.range, A.addr + at * ea, A.dt, {d0, sh, 1, 1}, {OW * C, 0, 0});
        if (A.q) dequantize_tile(c, Buffer::kInput, sl, d0, sh, A.dt, kConvA);
        c.load(Buffer::kWeight, bs, z.range(),
               z.addr + static_cast<uint64_t>(((b * H + r) * W + x0) * C) * ez, z.dtype, {C, sw, n, 1},
               {0, C, 0});
        if (B.q && B.centred) {
          subtract_zero_point(c, Buffer::kWeight, bs, Buffer::kWeight, bs, d0, 1, B.dt, kConvB,
                              DType::kInt32);
          if (B.rescale) rescale_int32(c, Buffer::kWeight, bs, d0, 1, *B.rescale);
        } else if (B.q) {
          dequantize_tile(c, Buffer::kWeight, bs, d0, 1, B.dt, kConvB);
        }
        const TileResult res = on_tile(sl, S ? std::vector<uint64_t>{bs, s_row} : std::vector<uint64_t>{bs},
                                       d0, sh, Bcast::kRow);
        if (qy) quantize_tile(c, res.buf, res.addr, d0, sh, y.dtype, kConvY);
        c.store(res.buf, res.addr, y.range(), y.addr + at * ey, y.dtype, {d0, sh, 1, 1}, {OW * C, 0, 0});
      }
    }
  }
  return Bcast::kRow;
}

}  // namespace

bool lower_binary(Context& c, const Node& n, std::string* why) {
  VecOp op;
  const std::string& t = n.op_type;
  if (t == "Add" || t == "Sum")
    op = VecOp::kAdd;
  else if (t == "Sub")
    op = VecOp::kSub;
  else if (t == "Mul")
    op = VecOp::kMul;
  else if (t == "Div")
    op = VecOp::kDiv;
  else if (t == "Max")
    op = VecOp::kMax;
  else if (t == "Min")
    op = VecOp::kMin;
  else if (t == "Pow")
    op = VecOp::kPow;
  else
    return false;
  if (n.num_given_inputs() != 2) {
    *why = "variadic form with other than two inputs";
    return false;
  }
  if (!is_float(c.g.value(n.outputs[0]).dtype)) {
    *why = "integer element-wise arithmetic";
    return false;
  }
  const DramTensor& y = c.tensor(n.outputs[0]);
  for (size_t k = 0; k < 2; ++k) {
    const Value& v = c.g.value(n.inputs[k]);
    if (!is_float(v.dtype) && v.dtype != DataType::kUndefined) {
      *why = "integer operand of a float element-wise op";
      return false;
    }
  }
  // A fused activation (the passes' npu.activation on an element-wise node) runs on the result tile.
  VecOp act_op = VecOp::kCopy;
  int64_t act_imm0 = 0, act_imm1 = 0;
  const std::string act = n.attr_string(kActivation, "");
  if (!act.empty() && !fused_activation(n, act, &act_op, &act_imm0, &act_imm1)) {
    *why = "fused activation " + act + " has no VecOp";
    return false;
  }
  Operand A, B;
  if (!make_operand(c, n.inputs[0], y, A) || !make_operand(c, n.inputs[1], y, B)) {
    *why = "operand layout differs from the output's";
    return false;
  }
  const Shape& P = y.phys;
  auto full = [&](const Operand& o) {
    for (size_t i = 0; i < P.size(); ++i) {
      if (o.pshape[i] != P[i]) return false;
    }
    return true;
  };
  bool negate = false, recip_a = false, swapped = false;
  if (!full(A)) {
    swapped = true;
    if (!full(B)) {
      *why = "both operands broadcast";
      return false;
    }
    if (op == VecOp::kAdd || op == VecOp::kMul || op == VecOp::kMax || op == VecOp::kMin) {
      std::swap(A, B);
    } else if (op == VecOp::kSub) {
      std::swap(A, B);
      negate = true;  // a - b = -(b - a)
    } else if (op == VecOp::kDiv) {
      std::swap(A, B);  // a / b = recip(b) * a, b now in the full slot
      recip_a = true;
      op = VecOp::kMul;
    } else {
      *why = "broadcast first operand of a non-commutative op";
      return false;
    }
  }
  // Both full, the second a strided view (StridedViews::reads_view: a residual Add reading the output
  // projection through a Transpose): it streams as A, whose boxes keep its strides. Exact: a + b and a * b
  // are b + a and b * a bit for bit, and the int8 integer schemes rescale each operand by its own factor.
  if (!swapped && (op == VecOp::kAdd || op == VecOp::kMul) && A.t && !A.t->strided() && B.t &&
      B.t->strided()) {
    std::swap(A, B);
    swapped = true;
  }
  // The Resize before it emitted nothing: its input read here as B (backend/fusion/upsample_add.h).
  const UpsampledOperand* up = upsampled_operand(c, n);
  if (up) {
    const std::string& u = c.g.nodes[static_cast<size_t>(up->resize)].outputs[0];
    if (op != VecOp::kAdd || swapped || !full(B)) throw std::logic_error("backend: an upsampled Add operand");
    if (n.inputs[0] == u) {
      std::swap(A, B);  // x + u: exact either way round, each operand's own conversion kept
      swapped = true;
    }
  }
  // The SE residual its first operand is (backend/fusion/deferred_residual.h): x and s read in its place.
  const DeferredResidual* dr = up ? deferred_residual_of(c, n) : nullptr;
  Operand S;
  if (dr && (!make_operand(c, dr->x, y, A) || !make_operand(c, dr->s, y, S) || A.q || B.q || S.q ||
             c.codes_of(n.outputs[0])))
    throw std::logic_error("backend: a deferred SE residual's operands");
  if (!up && !streamable(A, {B}, y)) {
    *why = kNotStreamable;
    return false;
  }
  const quant::QParams* qy = c.codes_of(n.outputs[0]);
  // # int8, integer scheme (quant::integer_mul): both operands' codes centred in int32, multiplied, one
  // requantize to the output's codes; no float step.
  const std::optional<isa::numerics::QuantizedMultiplier> imul =
      A.q && B.q && qy && c.options.plan ? quant::integer_mul(c.g, *c.options.plan, n) : std::nullopt;
  // # int8, integer scheme (quant::integer_add): each operand's centred codes rescaled to a common grid in
  // int32, added (or subtracted), one requantize to the output's codes.
  const std::optional<quant::IntegerAdd> iadd =
      A.q && B.q && qy && c.options.plan ? quant::integer_add(c.g, *c.options.plan, n) : std::nullopt;
  if (iadd) B.rescale = swapped ? iadd->a : iadd->b;
  // # int8, integer scheme by one code per channel of zero point 0 (an SE block's scale): two passes, the
  // codes multiplied as they are and the output stage's per-channel bias (int8.h, ChannelScaleMul).
  // (Not where the Add after it runs in the same tile loop: that scheme multiplies centred codes.)
  const bool with_residual =
      op == VecOp::kMul && !negate && !recip_a && act.empty() && scaled_residual_output(c, n) != nullptr;
  std::optional<ChannelScaleMul> scale;
  if (imul && !with_residual && ChannelScaleMul::applies(A.dt, *A.q, B.dt, *B.q)) {
    const std::vector<StreamDim> dims = stream_dims(A, {B}, y);
    const int64_t d0 = std::min(dims.back().ext, kMaxDim);
    if (dims.size() >= 2 && dims.back().b_full &&
        round64(d0) + ChannelScaleMul::bytes_after(d0) <=
            round64(make_slots(c, Buffer::kWeight).elems * c.esize)) {
      scale.emplace(c, *imul, *A.q, *qy, A.dt, y.dtype, d0);
      B.q = nullptr;  // its codes as they are
    }
  }
  B.centred = (imul.has_value() && !scale) || iadd.has_value();
  // # int8: operands and output stored as codes are converted in SRAM, tile by tile (PlanScope);
  // their conversion constants sit at the start of the accumulator buffer.
  if (A.q) load_conversion_constants(c, kConvA, A.q, nullptr);
  if (B.q) load_conversion_constants(c, kConvB, B.q, nullptr);
  if (qy && !imul && !iadd) load_conversion_constants(c, kConvY, nullptr, qy);
  // # int8: with codes in, the fp32 work runs in the accumulator buffer, as lower_batchnorm's does: the
  // codes come in through the input buffer (1 byte per element on its port, which the DMA shares)
  // instead of every step's 4-byte operands (an SE block's Mul was 3x its roofline on that port).
  const quant::QParams* qa = A.q;
  A.q = nullptr;
  se_mul_begin(c);
  bool kept = false;
  if (A.t && !up) A.sram = se_mul_input(c, A.range, A.dt);  // an SE block's input, where its pool left it
  // The Add after an SE Mul in the same tile loop (backend/fusion/scaled_residual.h): x * s into a scratch
  // tile in the accumulator, x (A) added to it there, stored as the Add's output.
  // # int8: the Mul's integer scheme into m's codes, then the Add's (each operand's centred codes rescaled to
  // the common grid, added, one requantize) on x's and m's codes, as the two lowered apart compute them.
  const DramTensor* res =
      op == VecOp::kMul && !negate && !recip_a && act.empty() ? scaled_residual_output(c, n) : nullptr;
  std::optional<quant::IntegerAdd> radd;
  const quant::QParams* qz = nullptr;
  bool x_first = true;  // x is the Add's first operand
  if (res) {
    const Node& add = scaled_residual_add(c);
    x_first = add.inputs[1] == n.outputs[0];
    if (qa || B.q || qy) {
      if (imul && c.options.plan) {  // imul: A, B and the product all codes, under the integer scheme
        const auto z = c.options.plan->values.find(add.outputs[0]);
        if (z != c.options.plan->values.end() && z->second.dtype == res->dtype) {
          radd = quant::integer_add(c.g, *c.options.plan, add);
          qz = &z->second;
        }
      }
      if (!radd) res = nullptr;
    }
  }
  if (radd) {  // the output stage making m's centred codes: bias 0, the Mul's multiplier and shift
    const uint64_t a = c.add_data(int32_bytes({0, imul->multiplier, imul->shift}));
    c.load(Buffer::kAccumulator, kProductStage, Range{kDram, a, a + 12}, a, DType::kInt32, {3, 1, 1, 1},
           {0, 0, 0});
  }
  Slots acc = qa || res || dr ? make_slots(c, Buffer::kAccumulator, 64) : Slots{};
  uint64_t prepared = UINT64_MAX;  // the weight slot whose codes scale prepared
  // # int8: two int32 tiles a tile (m's and x's), each ping-ponged: four slots of half the size.
  Slots acc2;
  if (radd) {
    acc = make_slots(c, Buffer::kAccumulator, 64, acc.elems / 2);
    acc2 = make_slots(c, Buffer::kAccumulator, 64 + 2 * static_cast<uint64_t>(round64(acc.elems * c.esize)),
                      acc.elems);
  }
  const TileFn tile_fn = [&](uint64_t a_slot, const std::vector<uint64_t>& b, int64_t d0, int64_t d1,
                             Bcast bc) {
    const uint64_t b_cur = b[0];
    if (dr) {  // m = x * s, then x + m, as the Mul and its Add compute them, then + up(z) as this Add does
      const uint64_t t = acc.take();
      Context::VecArgs v;
      v.op = VecOp::kMul, v.in = v.out = c.act, v.src1_buf = Buffer::kInput, v.src1 = a_slot;
      v.src2_buf = Buffer::kWeight, v.src2 = b[1], v.dst_buf = Buffer::kAccumulator, v.dst = t;
      v.d0 = d0, v.d1 = d1, v.bcast = Bcast::kRow;
      c.vec(v);
      v.op = VecOp::kAdd, v.src2_buf = Buffer::kAccumulator, v.src2 = t, v.bcast = Bcast::kNone;
      c.vec(v);
      v.src1_buf = Buffer::kAccumulator, v.src1 = t, v.src2_buf = Buffer::kWeight, v.src2 = b_cur;
      v.bcast = bc;
      c.vec(v);
      return TileResult{Buffer::kAccumulator, t};
    }
    if (imul && radd) {  // m = x * s in m's codes, then x + m in the output's codes
      // x's centred codes at t1 (kept for the Add), their products at t2 turned into m's centred codes by
      // one output stage (m's codes minus its zero point: clamp(requantize, min - zp, max - zp)), each
      // rescaled to the common grid, added: seven passes where the two lowerings apart make nine.
      const uint64_t t1 = acc.take(), t2 = acc2.take();
      subtract_zero_point(c, Buffer::kInput, a_slot, Buffer::kAccumulator, t1, d0, d1, A.dt, kConvA,
                          DType::kInt32);
      Context::VecArgs mu;
      mu.op = VecOp::kMul, mu.in = mu.out = DType::kInt32, mu.src1_buf = mu.dst_buf = Buffer::kAccumulator;
      mu.src1 = t1, mu.dst = t2, mu.src2_buf = Buffer::kWeight, mu.src2 = b_cur, mu.d0 = d0, mu.d1 = d1;
      mu.bcast = bc;
      c.vec(mu);
      Context::VecArgs os;
      os.op = VecOp::kOutput, os.in = os.out = DType::kInt32, os.bcast = Bcast::kScalar;
      os.src1_buf = os.dst_buf = Buffer::kAccumulator, os.src1 = os.dst = t2;
      os.src2_buf = Buffer::kAccumulator, os.src2 = kProductStage, os.d0 = d0, os.d1 = d1;
      os.imm0 = f32_imm(static_cast<float>(isa::numerics::dtype_min(y.dtype) - qy->zero_point));
      os.imm1 = f32_imm(static_cast<float>(isa::numerics::dtype_max(y.dtype) - qy->zero_point));
      c.vec(os);
      rescale_int32(c, Buffer::kAccumulator, t2, d0, d1, x_first ? radd->b : radd->a);
      rescale_int32(c, Buffer::kAccumulator, t1, d0, d1, x_first ? radd->a : radd->b);
      Context::VecArgs rq;
      rq.in = DType::kInt32, rq.src1_buf = rq.dst_buf = Buffer::kAccumulator, rq.src1 = rq.dst = t1;
      rq.op = VecOp::kRequantize, rq.d0 = d0, rq.d1 = d1;
      Context::VecArgs ad;
      ad.op = VecOp::kAdd, ad.in = ad.out = DType::kInt32;
      ad.src1_buf = ad.dst_buf = ad.src2_buf = Buffer::kAccumulator, ad.src1 = ad.dst = t1, ad.src2 = t2;
      ad.d0 = d0, ad.d1 = d1;
      c.vec(ad);
      rq.out = res->dtype, rq.imm0 = radd->out.multiplier, rq.imm1 = radd->out.shift;
      rq.imm2 = qz->zero_point;
      c.vec(rq);
      if (radd->lo > qz->qmin() || radd->hi < qz->qmax()) {  // a fused Relu / Clip on the codes
        Context::VecArgs cl;
        cl.op = VecOp::kClip, cl.in = cl.out = res->dtype, cl.src1_buf = cl.dst_buf = Buffer::kAccumulator;
        cl.src1 = cl.dst = t1, cl.d0 = d0, cl.d1 = d1;
        cl.imm0 = f32_imm(static_cast<float>(radd->lo)), cl.imm1 = f32_imm(static_cast<float>(radd->hi));
        c.vec(cl);
      }
      return TileResult{Buffer::kAccumulator, t1};
    }
    if (scale) {
      if (b_cur != prepared) scale->prepare(b_cur, d0), prepared = b_cur;  // a vector of codes loaded
      const uint64_t sl = acc.take();
      const TileResult out = kept ? TileResult{Buffer::kInput, a_slot} : TileResult{Buffer::kAccumulator, sl};
      scale->apply(Buffer::kInput, a_slot, sl, out.buf, out.addr, d0, d1);
      return out;
    }
    if (imul) {
      const uint64_t sl = acc.take();
      centred_products(c, a_slot, A.dt, sl, b_cur, d0, d1, bc);
      // The codes where the A tile lay when the product stays there (kept), else in the int32 tile.
      const TileResult out = kept ? TileResult{Buffer::kInput, a_slot} : TileResult{Buffer::kAccumulator, sl};
      Context::VecArgs rq;
      rq.op = VecOp::kRequantize, rq.in = DType::kInt32, rq.out = y.dtype;
      rq.src1_buf = Buffer::kAccumulator, rq.src1 = sl, rq.dst_buf = out.buf, rq.dst = out.addr;
      rq.d0 = d0, rq.d1 = d1, rq.imm0 = imul->multiplier, rq.imm1 = imul->shift, rq.imm2 = qy->zero_point;
      c.vec(rq);
      return out;
    }
    if (iadd) {
      const uint64_t sl = acc.take();
      subtract_zero_point(c, Buffer::kInput, a_slot, Buffer::kAccumulator, sl, d0, d1, A.dt, kConvA,
                          DType::kInt32);
      rescale_int32(c, Buffer::kAccumulator, sl, d0, d1, swapped ? iadd->b : iadd->a);
      Context::VecArgs v;
      v.op = op, v.in = v.out = DType::kInt32, v.src1_buf = v.dst_buf = Buffer::kAccumulator;
      v.src1 = v.dst = sl, v.src2_buf = Buffer::kWeight, v.src2 = b_cur, v.d0 = d0, v.d1 = d1, v.bcast = bc;
      c.vec(v);
      if (negate) {  // b - a computed as a - b: exact in int32
        Context::VecArgs ng;
        ng.op = VecOp::kNeg, ng.in = ng.out = DType::kInt32, ng.src1_buf = ng.dst_buf = Buffer::kAccumulator;
        ng.src1 = ng.dst = sl, ng.d0 = d0, ng.d1 = d1;
        c.vec(ng);
      }
      Context::VecArgs rq;
      rq.op = VecOp::kRequantize, rq.in = DType::kInt32, rq.out = y.dtype;
      rq.src1_buf = rq.dst_buf = Buffer::kAccumulator, rq.src1 = rq.dst = sl, rq.d0 = d0, rq.d1 = d1;
      rq.imm0 = iadd->out.multiplier, rq.imm1 = iadd->out.shift, rq.imm2 = qy->zero_point;
      c.vec(rq);
      if (iadd->lo > qy->qmin() || iadd->hi < qy->qmax()) {  // a fused Relu / Clip on the codes
        Context::VecArgs cl;
        cl.op = VecOp::kClip, cl.in = cl.out = y.dtype, cl.src1_buf = cl.dst_buf = Buffer::kAccumulator;
        cl.src1 = cl.dst = sl, cl.d0 = d0, cl.d1 = d1;
        cl.imm0 = f32_imm(static_cast<float>(iadd->lo)), cl.imm1 = f32_imm(static_cast<float>(iadd->hi));
        c.vec(cl);
      }
      return TileResult{Buffer::kAccumulator, sl};
    }
    Buffer work = Buffer::kInput;
    uint64_t sl = a_slot;
    if (qa) {
      work = Buffer::kAccumulator;
      sl = acc.take();
      dequantize_tile_into(c, Buffer::kInput, a_slot, work, sl, d0, d1, A.dt, kConvA);
    }
    if (recip_a) {
      Context::VecArgs r;
      r.op = VecOp::kRecip, r.in = r.out = c.act, r.src1_buf = r.dst_buf = work;
      r.src1 = r.dst = sl, r.d0 = d0, r.d1 = d1;
      c.vec(r);
    }
    Context::VecArgs v;
    v.op = op, v.in = v.out = c.act, v.src1_buf = v.dst_buf = work, v.src1 = v.dst = sl;
    v.src2_buf = Buffer::kWeight, v.src2 = b_cur, v.d0 = d0, v.d1 = d1, v.bcast = bc;
    if (res) {  // the product as the Mul would store it, then x + it as the Add computes it
      const uint64_t t = acc.take();
      v.dst_buf = Buffer::kAccumulator, v.dst = t;
      c.vec(v);
      Context::VecArgs ad;
      ad.op = VecOp::kAdd, ad.in = ad.out = c.act, ad.src1_buf = work, ad.src1 = sl;
      ad.src2_buf = ad.dst_buf = Buffer::kAccumulator, ad.src2 = ad.dst = t, ad.d0 = d0, ad.d1 = d1;
      c.vec(ad);
      return TileResult{Buffer::kAccumulator, t};
    }
    c.vec(v);
    if (negate) {
      Context::VecArgs ng;
      ng.op = VecOp::kNeg, ng.in = ng.out = c.act, ng.src1_buf = ng.dst_buf = work;
      ng.src1 = ng.dst = sl, ng.d0 = d0, ng.d1 = d1;
      c.vec(ng);
    }
    if (!act.empty()) {
      Context::VecArgs av;
      av.op = act_op, av.in = av.out = c.act, av.src1_buf = av.dst_buf = work, av.src1 = av.dst = sl;
      av.d0 = d0, av.d1 = d1, av.imm0 = act_imm0, av.imm1 = act_imm1;
      c.vec(av);
    }
    return TileResult{work, sl};
  };
  const quant::QParams* q_store = imul || iadd ? nullptr : qy;
  const int64_t max_tile = qa || res || dr ? acc.elems : INT64_MAX;
  const Bcast mode =
      up ? stream_upsampled(c, A, B, c.tensor(up->z), up->sh, up->sw, y, q_store, tile_fn, max_tile,
                            dr ? &S : nullptr)
         : stream_broadcast(c, A, {B}, res ? *res : y, q_store, tile_fn, max_tile,
                            !res && !y.strided() && se_mul_may_keep_product(c) ? &kept : nullptr);
  if (res) scaled_residual_done(c);
  if (dr) deferred_residual_done(c);
  // The product stays in the scratchpad for the pointwise conv after the Mul (backend/fusion/residency.h; the
  // first LOAD of it by any other reader spills it).
  if (kept) se_mul_kept_product(c, n.outputs[0], y, static_cast<uint64_t>(A.sram));
  if (imul || iadd) c.plan->int8_scheme = "integer";
  c.plan->mapping =
      fmt::format("VEC {} bcast {}{}{}{}{}{}", isa::kVecOpNames[static_cast<size_t>(op)],
                  isa::kBcastNames[static_cast<size_t>(mode)],
                  negate    ? " + neg"
                  : recip_a ? " of recip"
                            : "",
                  act.empty() ? "" : " + " + act,
                  scale  ? ", int8 integer: codes multiplied in int32, the output stage's per-channel bias "
                           "-zero point x scale and one requantize"
                  : imul ? ", int8 integer: centred codes multiplied in int32, one requantize"
                  : iadd ? ", int8 integer: centred codes rescaled to a common grid in int32, one requantize"
                  : qa   ? ", int8 codes converted in the tile loop, fp32 work in the accumulator buffer"
                  : B.q || qy ? ", int8 codes converted in the tile loop"
                              : "",
                  A.sram >= 0 && se_mul_read(c) ? ", input read where its SE block's pool left it" : "",
                  kept ? ", output left there for the next layer" : "");
  if (up)
    c.plan->mapping += fmt::format(
        "; '{}' read from the Resize's input '{}' (nearest {}x{}: each pixel loaded {} times by one "
        "zero-stride "
        "LOAD, that row used for {} output rows): the upsampled map never written",
        c.g.nodes[static_cast<size_t>(up->resize)].outputs[0], up->z, up->sh, up->sw, up->sw, up->sh);
  if (dr)
    c.plan->mapping += fmt::format(
        "; its operand '{}' made in the same tile loop from '{}' and the scale '{}' (VEC mul bcast row, the "
        "scale loaded once along the row, and VEC add, as its SE Mul and residual Add compute it): never "
        "written",
        n.inputs[0] == c.g.nodes[static_cast<size_t>(up->resize)].outputs[0] ? n.inputs[1] : n.inputs[0],
        dr->x, dr->s);
  if (res)
    c.plan->mapping += fmt::format(
        ", then the Add '{}' in the same tile loop (x added to each product tile in the "
        "accumulator; the product never goes to DRAM)",
        scaled_residual_add(c).name);
  return true;
}

bool lower_batchnorm(Context& c, const Node& n, std::string* why) {
  const std::optional<ChannelAffine> bn = batchnorm_affine(c.g, n);
  if (!bn) {
    *why = "BatchNormalization with runtime parameters, in training mode or with Mean/Var outputs in use";
    return false;
  }
  const DramTensor& y = c.tensor(n.outputs[0]);
  VecOp act_op = VecOp::kCopy;
  int64_t act_imm0 = 0, act_imm1 = 0;
  const std::string act = n.attr_string(kActivation, "");
  if (!act.empty() && !fused_activation(n, act, &act_op, &act_imm0, &act_imm1)) {
    *why = "fused activation " + act + " has no VecOp";
    return false;
  }
  Operand A;
  if (!make_operand(c, n.inputs[0], y, A) || A.pshape != y.phys) {
    *why = "input layout differs from the output's";
    return false;
  }
  // # int8: codes in and out (PlanScope deferred them here); quant::affine_arith folds the conversions
  // into the per-channel constants where it can.
  Shape per_channel(y.shape.size(), 1);
  per_channel[1] = y.shape[1];
  Operand per_channel_shape;  // the constants' shape, for the check before anything is emitted
  for (int d : output_order(y)) per_channel_shape.pshape.push_back(per_channel[static_cast<size_t>(d)]);
  if (!streamable(A, {per_channel_shape}, y)) {
    *why = kNotStreamable;
    return false;
  }
  const quant::QParams* qx = A.q;
  const quant::QParams* qy = c.codes_of(n.outputs[0]);
  A.q = nullptr;
  const quant::AffineArith ar = quant::affine_arith(
      bn->scale, bn->shift, qx, qy, act, n.attr_float(kActMin, -INFINITY), n.attr_float(kActMax, INFINITY));
  const bool quantize = qy && !ar.codes_out;  // a float activation between the affine map and the codes
  if (qx || quantize) load_conversion_constants(c, kConvA, qx, quantize ? qy : nullptr);
  const std::vector<Operand> Bs = {constant_operand(c, &ar.mul, per_channel, y),
                                   constant_operand(c, &ar.add, per_channel, y)};
  const DType codes_out = ar.codes_out ? y.dtype : c.act;
  const bool clamp = ar.codes_out && !act.empty();
  // # int8: the fp32 work runs in the accumulator buffer (its conversion constants first): the codes
  // come in and go out through the input buffer, whose port then carries 1 byte per element each way
  // instead of the 4-byte operands of every VEC step (the scratchpad port, not the lanes, bounded it).
  const bool in_acc = qx != nullptr;
  Slots acc = make_slots(c, Buffer::kAccumulator, 64);
  const Bcast mode = stream_broadcast(
      c, A, Bs, y, nullptr,
      [&](uint64_t sl, const std::vector<uint64_t>& b, int64_t d0, int64_t d1, Bcast bc) {
        TileResult work{Buffer::kInput, sl};
        if (in_acc) {
          work = TileResult{Buffer::kAccumulator, acc.take()};
          subtract_zero_point(c, Buffer::kInput, sl, work.buf, work.addr, d0, d1, A.dt, kConvA);
        }
        // The last step writes codes back to the input slot (a clamp, or the add without activation).
        const TileResult out = in_acc && ar.codes_out ? TileResult{Buffer::kInput, sl} : work;
        Context::VecArgs v;
        v.in = v.out = c.act, v.src1_buf = v.dst_buf = work.buf, v.src1 = v.dst = work.addr;
        v.src2_buf = Buffer::kWeight, v.d0 = d0, v.d1 = d1, v.bcast = bc;
        v.op = VecOp::kMul, v.src2 = b[0];
        c.vec(v);
        v.op = VecOp::kAdd, v.src2 = b[1];
        if (!clamp)
          v.out = codes_out, v.dst_buf = ar.codes_out ? out.buf : work.buf,
          v.dst = ar.codes_out ? out.addr : work.addr;
        c.vec(v);
        if (!act.empty()) {
          Context::VecArgs av;
          av.in = av.out = c.act, av.src1_buf = av.dst_buf = work.buf, av.src1 = av.dst = work.addr;
          av.d0 = d0, av.d1 = d1;
          if (clamp) {  // Relu / Clip in code space, rounded to codes
            av.op = VecOp::kClip, av.out = codes_out, av.imm0 = f32_imm(ar.lo), av.imm1 = f32_imm(ar.hi);
            av.dst_buf = out.buf, av.dst = out.addr;
          } else {
            av.op = act_op, av.imm0 = act_imm0, av.imm1 = act_imm1;
          }
          c.vec(av);
        }
        if (quantize) quantize_tile(c, work.buf, work.addr, d0, d1, y.dtype, kConvA);
        return ar.codes_out ? out : work;
      },
      in_acc ? acc.elems : INT64_MAX);
  c.plan->mapping =
      fmt::format("VEC mul + add bcast {} (per-channel affine){}{}",
                  isa::kBcastNames[static_cast<size_t>(mode)], act.empty() ? "" : " + " + act,
                  ar.codes_out ? ", int8 codes in and out (conversions folded into the constants)"
                  : qx || qy   ? ", int8 codes converted in the tile loop"
                               : "");
  return true;
}

}  // namespace npusim::compiler::backend
