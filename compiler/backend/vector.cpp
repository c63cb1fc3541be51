// Vector and data-movement nodes: element-wise ops with broadcasting, activations, pooling,
// reductions over the innermost axes, transposes (strided DMA plus the VEC transpose), concat, slice
// and split. Every lowering streams SRAM tiles: LOAD into a ping-pong slot, VEC in place, STORE.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>

#include "compiler/backend/context.h"
#include "compiler/backend/int8.h"
#include "compiler/backend/matrix_walk.h"
#include "compiler/backend/movement.h"
#include "compiler/backend/rowwise.h"
#include "compiler/interp/interpreter.h"
#include "compiler/passes/lowered.h"
#include "isa/numerics.h"

namespace npusim::compiler::backend {

using isa::Buffer;
using isa::Bcast;
using isa::DType;
using isa::VecOp;

namespace {

// ---- element-wise ----

bool unary_op(const Node& n, const Context& c, Context::VecArgs& v) {
  const std::string& op = n.op_type;
  if (op == "Relu") v.op = VecOp::kRelu;
  else if (op == "Sigmoid") v.op = VecOp::kSigmoid;
  else if (op == "Tanh") v.op = VecOp::kTanh;
  else if (op == "Exp") v.op = VecOp::kExp;
  else if (op == "Sqrt") v.op = VecOp::kSqrt;
  else if (op == "Reciprocal") v.op = VecOp::kRecip;
  else if (op == "Abs") v.op = VecOp::kAbs;
  else if (op == "Neg") v.op = VecOp::kNeg;
  else if (op == "Erf") v.op = VecOp::kErf;
  else if (op == "Gelu" && n.attr_string("approximate", "none") == "none") v.op = VecOp::kGelu;
  else if (op == "HardSwish") v.op = VecOp::kHardSwish;
  else if (op == "Identity" || op == "Dropout") v.op = VecOp::kCopy;
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
  Slots s = make_slots(c, Buffer::kInput);
  const int64_t total = num_elements(y.shape);
  const int64_t d0max = std::min<int64_t>(4096, s.elems);
  const uint64_t ex = static_cast<uint64_t>(isa::dtype_bytes(x.dtype)), ey = static_cast<uint64_t>(isa::dtype_bytes(y.dtype));
  // # int8: codes converted in SRAM, tile by tile (PlanScope); constants at the accumulator's start.
  const quant::QParams* qx = c.codes_of(n.inputs[0]);
  const quant::QParams* qy = c.codes_of(n.outputs[0]);
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
    a.in = a.out = c.act;
    a.src1_buf = a.dst_buf = Buffer::kInput;
    a.src1 = a.dst = slot;
    a.d0 = d0, a.d1 = d1, a.d2 = 1;
    c.vec(a);
    if (qy) quantize_tile(c, Buffer::kInput, slot, d0, d1, y.dtype, 16);
    c.store(Buffer::kInput, slot, y.range(), y.addr + static_cast<uint64_t>(off) * ey, y.dtype, {d0, d1, 1, 1},
            {d0, 0, 0});
    off += d0 * d1;
  }
  c.plan->mapping = fmt::format("VEC {} streamed in {}-element tiles{}", isa::kVecOpNames[static_cast<size_t>(v.op)],
                                s.elems, qx || qy ? ", int8 codes converted in the tile loop" : "");
  return true;
}

// An operand of a broadcasting element-wise op, in the output's physical dim order.
struct Operand {
  bool constant = false;
  const DramTensor* t = nullptr;
  uint64_t addr = 0;  // DRAM address of its data (constant: a data segment written in this order)
  Range range;
  Shape pshape;  // extents in output physical order (1 = broadcast)
  isa::DType dt = isa::DType::kFp32;     // element type in DRAM
  const quant::QParams* q = nullptr;      // # int8: codes converted in the tile loop (Context::codes)
};

// Returns false when the operand's DRAM layout is not the output's order (non-1 dims permuted).
bool make_operand(Context& c, const std::string& name, const DramTensor& y, Operand& o) {
  const Value& v = c.g.value(name);
  const size_t r = y.shape.size();
  if (v.shape.size() > r) return false;
  Shape padded(r - v.shape.size(), 1);
  padded.insert(padded.end(), v.shape.begin(), v.shape.end());
  std::vector<int> ylay = y.layout;
  if (ylay.empty()) {
    ylay.resize(r);
    std::iota(ylay.begin(), ylay.end(), 0);
  }
  o.pshape.clear();
  for (int d : ylay) o.pshape.push_back(padded[static_cast<size_t>(d)]);
  if (v.is_constant()) {
    // Write the constant's data in the output's physical order.
    const std::vector<float> src = v.constant->to_float_vector();
    const auto lst = strides_of(padded);
    std::vector<float> dst(static_cast<size_t>(num_elements(o.pshape)));
    const auto pst = strides_of(o.pshape);
    for (int64_t i = 0; i < static_cast<int64_t>(dst.size()); ++i) {
      int64_t rem = i, li = 0;
      for (size_t k = 0; k < r; ++k) {
        const int64_t coord = rem / pst[k];
        rem %= pst[k];
        li += coord * lst[static_cast<size_t>(ylay[k])];
      }
      dst[static_cast<size_t>(i)] = src[static_cast<size_t>(li)];
    }
    o.constant = true;
    o.dt = c.act;
    o.addr = c.add_floats(dst, c.act);
    o.range = Range{kDram, o.addr, o.addr + dst.size() * static_cast<uint64_t>(c.esize)};
    return true;
  }
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

bool lower_binary(Context& c, const Node& n, std::string* why) {
  VecOp op;
  const std::string& t = n.op_type;
  if (t == "Add" || t == "Sum") op = VecOp::kAdd;
  else if (t == "Sub") op = VecOp::kSub;
  else if (t == "Mul") op = VecOp::kMul;
  else if (t == "Div") op = VecOp::kDiv;
  else if (t == "Max") op = VecOp::kMax;
  else if (t == "Min") op = VecOp::kMin;
  else if (t == "Pow") op = VecOp::kPow;
  else return false;
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
  bool negate = false, recip_a = false;
  if (!full(A)) {
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
  // Merged dims with B's broadcast flag.
  struct Dim {
    int64_t ext;
    bool b_full;
    int64_t a_stride = 0, b_stride = 0;
  };
  std::vector<Dim> dims;
  for (size_t i = 0; i < P.size(); ++i) {
    if (P[i] == 1) continue;
    const bool bf = B.pshape[i] == P[i];
    if (!dims.empty() && dims.back().b_full == bf) {
      dims.back().ext *= P[i];
    } else {
      dims.push_back({P[i], bf});
    }
  }
  if (dims.empty()) dims.push_back({1, true});
  {
    int64_t as = 1, bs = 1;
    for (size_t i = dims.size(); i-- > 0;) {
      dims[i].a_stride = as;
      as *= dims[i].ext;
      dims[i].b_stride = dims[i].b_full ? bs : 0;
      if (dims[i].b_full) bs *= dims[i].ext;
    }
  }
  const size_t k = dims.size();
  // The VEC box: (d1 = second innermost, d0 = innermost) with the bcast mode they imply.
  Bcast mode;
  size_t box_dims;
  if (k == 1) {
    mode = dims[0].b_full ? Bcast::kNone : Bcast::kScalar;
    box_dims = 1;
  } else {
    mode = dims[k - 1].b_full ? Bcast::kRow : Bcast::kCol;
    box_dims = 2;
  }
  Slots sa = make_slots(c, Buffer::kInput);
  Slots sb = make_slots(c, Buffer::kWeight);
  const uint64_t ea = static_cast<uint64_t>(isa::dtype_bytes(A.dt)), eb = static_cast<uint64_t>(isa::dtype_bytes(B.dt));
  // # int8: operands and output stored as codes are converted in SRAM, tile by tile (PlanScope);
  // their conversion constants sit at the start of the accumulator buffer.
  const quant::QParams* qy = c.codes_of(n.outputs[0]);
  const uint64_t ey = static_cast<uint64_t>(isa::dtype_bytes(y.dtype));
  const uint64_t ka = 0, kb = 16, ky = 32;
  if (A.q) load_conversion_constants(c, ka, A.q, nullptr);
  if (B.q) load_conversion_constants(c, kb, B.q, nullptr);
  if (qy) load_conversion_constants(c, ky, nullptr, qy);
  const int64_t inner = dims[k - 1].ext;
  int64_t t0, t1 = 1;
  if (box_dims == 1) {
    t0 = std::min<int64_t>({inner, 4096, sa.elems, sb.elems});
    t1 = std::min<int64_t>({cdiv(inner, t0), kMaxDim, sa.elems / t0, mode == Bcast::kNone ? sb.elems / t0 : kMaxDim});
    t1 = std::max<int64_t>(1, t1);
  } else {
    const int64_t outer = dims[k - 2].ext;
    t0 = std::min<int64_t>({inner, kMaxDim, sa.elems, sb.elems});
    t1 = std::max<int64_t>(1, std::min<int64_t>({outer, kMaxDim, sa.elems / t0, mode == Bcast::kCol ? sb.elems : kMaxDim}));
  }
  // Pieces of the box dims: (row start, col start, d1, d0).
  struct Piece {
    int64_t r0, c0, d1, d0;
  };
  std::vector<Piece> pieces;
  if (box_dims == 1) {
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
  for (size_t i = 0; i + box_dims < k; ++i) ext.push_back(dims[i].ext);
  ext.push_back(static_cast<int64_t>(pieces.size()));
  int64_t last_b_off = -1, last_b_n = -1;
  uint64_t b_cur = 0;
  int64_t count = 0;
  odometer(ext, [&](const std::vector<int64_t>& idx) {
    int64_t ao = 0, bo = 0;
    for (size_t i = 0; i + box_dims < k; ++i) {
      ao += idx[i] * dims[i].a_stride;
      bo += idx[i] * dims[i].b_stride;
    }
    const Piece& p = pieces[static_cast<size_t>(idx.back())];
    const int64_t d0 = p.d0, d1 = p.d1;
    int64_t b_n;
    std::array<int64_t, 4> bsz = {1, 1, 1, 1};
    std::array<int64_t, 3> bst = {d0, 0, 0};
    std::array<int64_t, 3> ast = {d0, 0, 0};
    if (box_dims == 1) {
      ao += p.c0;
      if (mode == Bcast::kNone) {
        bo += p.c0;
        bsz = {d0, d1, 1, 1};
        b_n = d0 * d1;
      } else {
        b_n = 1;
      }
    } else {
      ao += p.r0 * dims[k - 2].a_stride + p.c0;
      ast = {dims[k - 2].a_stride, 0, 0};
      if (mode == Bcast::kRow) {
        bo += p.c0 * dims[k - 1].b_stride;
        b_n = d0;
        bsz = {d0, 1, 1, 1};
      } else {
        bo += p.r0 * dims[k - 2].b_stride;
        b_n = d1;
        bsz = {d1, 1, 1, 1};
      }
    }
    const uint64_t sl = sa.take();
    c.load(Buffer::kInput, sl, A.range, A.addr + static_cast<uint64_t>(ao) * ea, A.dt, {d0, d1, 1, 1}, ast);
    if (A.q) dequantize_tile(c, Buffer::kInput, sl, d0, d1, A.dt, ka);
    if (!(bo == last_b_off && b_n == last_b_n)) {
      b_cur = sb.take();
      c.load(Buffer::kWeight, b_cur, B.range, B.addr + static_cast<uint64_t>(bo) * eb, B.dt, bsz, bst);
      if (B.q) dequantize_tile(c, Buffer::kWeight, b_cur, bsz[0], bsz[1], B.dt, kb);
      last_b_off = bo, last_b_n = b_n;
    }
    if (recip_a) {
      Context::VecArgs r;
      r.op = VecOp::kRecip, r.in = r.out = c.act, r.src1_buf = r.dst_buf = Buffer::kInput;
      r.src1 = r.dst = sl, r.d0 = d0, r.d1 = d1;
      c.vec(r);
    }
    Context::VecArgs v;
    v.op = op, v.in = v.out = c.act, v.src1_buf = v.dst_buf = Buffer::kInput, v.src1 = v.dst = sl;
    v.src2_buf = Buffer::kWeight, v.src2 = b_cur, v.d0 = d0, v.d1 = d1, v.bcast = mode;
    c.vec(v);
    if (negate) {
      Context::VecArgs ng;
      ng.op = VecOp::kNeg, ng.in = ng.out = c.act, ng.src1_buf = ng.dst_buf = Buffer::kInput;
      ng.src1 = ng.dst = sl, ng.d0 = d0, ng.d1 = d1;
      c.vec(ng);
    }
    if (!act.empty()) {
      Context::VecArgs av;
      av.op = act_op, av.in = av.out = c.act, av.src1_buf = av.dst_buf = Buffer::kInput, av.src1 = av.dst = sl;
      av.d0 = d0, av.d1 = d1, av.imm0 = act_imm0, av.imm1 = act_imm1;
      c.vec(av);
    }
    if (qy) quantize_tile(c, Buffer::kInput, sl, d0, d1, y.dtype, ky);
    c.store(Buffer::kInput, sl, y.range(), y.addr + static_cast<uint64_t>(ao) * ey, y.dtype, {d0, d1, 1, 1}, ast);
    ++count;
  });
  (void)count;
  c.plan->mapping = fmt::format("VEC {} bcast {}{}{}{}", isa::kVecOpNames[static_cast<size_t>(op)],
                                isa::kBcastNames[static_cast<size_t>(mode)], negate ? " + neg" : recip_a ? " of recip" : "",
                                act.empty() ? "" : " + " + act,
                                A.q || B.q || qy ? ", int8 codes converted in the tile loop" : "");
  return true;
}

// ---- data movement ----


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
  c.plan->mapping = permute_copy(c, x, y, perm);
  return true;
}

// Concat: each input copied into its slice of the output.
bool lower_concat(Context& c, const Node& n, std::string* why) {
  const DramTensor& y = c.tensor(n.outputs[0]);
  const size_t r = y.shape.size();
  int64_t axis = n.attr_int("axis", 0);
  if (axis < 0) axis += static_cast<int64_t>(r);
  const auto ypos = positions(y);
  const auto yst = strides_of(y.phys);
  int64_t offset = 0;
  for (const auto& in : n.inputs) {
    if (in.empty()) continue;
    const Value& v = c.g.value(in);
    if (v.is_constant()) {
      *why = "constant Concat operand";
      return false;
    }
    const DramTensor& x = c.tensor(in);
    if (x.layout != y.layout && !(x.layout.empty() && y.layout.empty())) {
      *why = "Concat operands in different layouts";
      return false;
    }
  }
  // # int8: codes deferred to this node (PlanScope): an input whose QParams differ from the output's is
  // requantized tile by tile on its way (dequantize, quantize), the others are copied as they are.
  const quant::QParams* qy = c.codes_of(n.outputs[0]);
  int requantized = 0;
  uint64_t kslot = 0;
  for (const auto& in : n.inputs) {
    if (in.empty()) continue;
    const DramTensor& x = c.tensor(in);
    const auto xst = strides_of(x.phys);
    std::vector<CopyDim> dims;
    for (size_t i = 0; i < r; ++i) dims.push_back({x.phys[i], xst[i], yst[i]});
    const uint64_t dst_off = static_cast<uint64_t>(offset * yst[static_cast<size_t>(ypos[static_cast<size_t>(axis)])] *
                                                   isa::dtype_bytes(y.dtype));
    const quant::QParams* qx = c.codes_of(in);
    const bool same = (!qx && !qy && x.dtype == y.dtype) ||
                      (qx && qy && qx->scale == qy->scale && qx->zero_point == qy->zero_point && x.dtype == y.dtype);
    if (same) {
      copy_box(c, x, 0, y, dst_off, dims);
    } else {
      const uint64_t k = kslot;
      kslot = (kslot + 16) % 1024;  // conversion constants of this input (accumulator buffer)
      load_conversion_constants(c, k, qx, qy);
      const isa::DType from = x.dtype, to = y.dtype;
      copy_box(c, x, 0, y, dst_off, dims, [&c, qx, qy, from, to, k](uint64_t slot, int64_t d0, int64_t d1) {
        if (qx) dequantize_tile(c, Buffer::kInput, slot, d0, d1, from, k);
        if (qy) quantize_tile(c, Buffer::kInput, slot, d0, d1, to, k);
      });
      ++requantized;
    }
    offset += x.shape[static_cast<size_t>(axis)];
  }
  c.plan->mapping = requantized ? fmt::format("strided DMA copies, {} input(s) requantized in the tile loop", requantized)
                                : "strided DMA copies";
  return true;
}

// Slice with unit steps, and Split (each output a slice).
bool slice_copy(Context& c, const DramTensor& x, const DramTensor& y, const std::vector<int64_t>& starts) {
  const size_t r = y.shape.size();
  const auto xst = strides_of(x.phys);
  const auto yst = strides_of(y.phys);
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
  if (t == "Pad" || t == "Slice" || t == "Expand" || t == "Tile" || t == "DepthToSpace" || t == "SpaceToDepth" ||
      t == "Transpose" || t == "Split" || t == "Trilu" || t == "Gather" || t == "GatherElements") {
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

// Lowers a pure data-movement node by evaluating it at compile time on tensors of element ids with the
// reference interpreter (ids are exact in int64, or in float32 below 2^24 for ops that only take
// floats): the output then names, for every element, the source element it copies (or none: a fill
// value), which copy_index_map turns into DMA rows. Parameters (pads, starts, indices, scales, a Where
// condition) must be constants: the ISA has no data-dependent addressing.
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
      *why = fmt::format("runtime {} parameter (input {}): no data-dependent addressing on the NPU", n.op_type, k);
      return false;
    }
  }
  const DramTensor& y0 = c.tensor(n.outputs[0]);
  const isa::DType dt = y0.dtype;
  Graph mini;
  mini.opset = c.g.opset;
  Node m = n;
  for (auto it = m.attrs.begin(); it != m.attrs.end();) {
    it = it->first.rfind("npu.", 0) == 0 ? m.attrs.erase(it) : std::next(it);
  }
  std::vector<const DramTensor*> sources;
  std::vector<DramTensor> constants;
  constants.reserve(data.size());
  std::map<std::string, Tensor> inputs;
  constexpr int64_t kBase = int64_t{1} << 52;
  for (size_t k = 0; k < n.inputs.size(); ++k) {
    const std::string& name = n.inputs[k];
    if (name.empty() || mini.has_value(name)) continue;
    const Value& v = c.g.value(name);
    const bool is_data = std::find(data.begin(), data.end(), k) != data.end();
    if (!is_data) {
      mini.add_constant(name, *v.constant);
      continue;
    }
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
    const int64_t id = static_cast<int64_t>(sources.size());
    sources.push_back(src);
    const int64_t count = num_elements(v.shape);
    if (float_ids && count >= (int64_t{1} << 24) - 1) {
      *why = "tensor too large for the compile-time index map";
      return false;
    }
    // Element j (logical) of this source -> its physical element.
    std::vector<int64_t> phys(static_cast<size_t>(count));
    {
      const auto pos = positions(*src);
      const auto pst = strides_of(src->phys);
      const auto lst = strides_of(v.shape);
      for (int64_t j = 0; j < count; ++j) {
        int64_t rem = j, p = 0;
        for (size_t d = 0; d < v.shape.size(); ++d) {
          const int64_t co = rem / lst[d];
          rem %= lst[d];
          p += co * pst[static_cast<size_t>(pos[d])];
        }
        phys[static_cast<size_t>(j)] = p;
      }
    }
    Value& mv = mini.ensure_value(name);
    mv.name = name;
    mv.shape = v.shape;
    mv.shape_known = true;
    mini.inputs.push_back(name);
    if (float_ids) {
      if (sources.size() > 1) return false;
      std::vector<float> f(static_cast<size_t>(count));
      for (int64_t j = 0; j < count; ++j) f[static_cast<size_t>(j)] = static_cast<float>(phys[static_cast<size_t>(j)] + 1);
      mv.dtype = DataType::kFloat32;
      inputs[name] = Tensor::from_floats(v.shape, f);
    } else {
      std::vector<int64_t> ids(static_cast<size_t>(count));
      for (int64_t j = 0; j < count; ++j) ids[static_cast<size_t>(j)] = kBase + (id << kMapShift) + phys[static_cast<size_t>(j)];
      mv.dtype = DataType::kInt64;
      inputs[name] = Tensor::from_ints(DataType::kInt64, v.shape, ids);
    }
  }
  for (const auto& o : m.outputs) {
    if (!o.empty()) mini.ensure_value(o).name = o;
  }
  for (const auto& o : m.outputs) {
    if (!o.empty() && c.tensors.count(o)) mini.outputs.push_back(o);
  }
  mini.nodes.push_back(m);
  std::map<std::string, Tensor> out;
  try {
    out = interpret(mini, inputs);
  } catch (const std::exception& e) {
    *why = fmt::format("index map: {}", e.what());
    return false;
  }
  double fill = 0;
  if (n.op_type == "Pad") {
    if (c.g.opset < 11) {
      fill = n.attr_float("value", 0.0f);
    } else if (n.has_input(2)) {
      const Tensor& pv = *c.g.value(n.inputs[2]).constant;
      if (pv.size() > 0) fill = pv.as_double(0);
    }
  } else if (n.op_type == "Resize") {
    fill = n.attr_float("extrapolation_value", 0.0f);
  }
  int64_t rows = 0;
  for (const auto& oname : mini.outputs) {
    const DramTensor& y = c.tensor(oname);
    if (y.dtype != dt) {
      *why = "outputs of different storage types";
      return false;
    }
    const Tensor& r = out.at(oname);
    const int64_t count = r.size();
    std::vector<int64_t> map(static_cast<size_t>(count), -1);
    const auto pos = positions(y);
    const auto pst = strides_of(y.phys);
    const auto lst = strides_of(y.shape);
    for (int64_t j = 0; j < count; ++j) {
      int64_t rem = j, p = 0;
      for (size_t d = 0; d < y.shape.size(); ++d) {
        const int64_t co = rem / lst[d];
        rem %= lst[d];
        p += co * pst[static_cast<size_t>(pos[d])];
      }
      int64_t src = -1;
      if (float_ids) {
        const float f = r.f[static_cast<size_t>(j)];
        if (f >= 1.0f && f == std::floor(f)) src = static_cast<int64_t>(f) - 1;
      } else if (r.i[static_cast<size_t>(j)] >= kBase) {
        src = r.i[static_cast<size_t>(j)] - kBase;
      }
      map[static_cast<size_t>(p)] = src;
    }
    rows += copy_index_map(c, y, sources, map, fill);
  }
  c.plan->mapping = fmt::format("DMA gather from a compile-time index map ({} rows)", rows);
  return true;
}

// True when the tensor's bytes are in NHWC order: its layout is NHWC, or differs from it only in where
// dims of extent 1 sit (a layout conversion that moves only such dims is not inserted).
bool nhwc_order(const DramTensor& t) {
  if (t.shape.size() != 4) return false;
  std::vector<int> lay = t.layout;
  if (lay.empty()) lay = {0, 1, 2, 3};
  std::vector<int> a, b;
  for (int d : lay) {
    if (t.shape[static_cast<size_t>(d)] != 1) a.push_back(d);
  }
  for (int d : kNhwc) {
    if (t.shape[static_cast<size_t>(d)] != 1) b.push_back(d);
  }
  return a == b;
}

// MaxPool / AveragePool / GlobalAveragePool / GlobalMaxPool on NHWC (or global pools on NCHW).
bool lower_pool(Context& c, const Node& n, std::string* why) {
  const DramTensor& x = c.tensor(n.inputs[0]);
  const DramTensor& y = c.tensor(n.outputs[0]);
  const bool global = n.op_type == "GlobalAveragePool" || n.op_type == "GlobalMaxPool";
  const bool is_max = n.op_type == "MaxPool" || n.op_type == "GlobalMaxPool";
  if (x.shape.size() != 4) {
    *why = "pooling other than 2-D";
    return false;
  }
  if (n.outputs.size() > 1 && !n.outputs[1].empty()) {
    *why = "MaxPool Indices output";
    return false;
  }
  const int64_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3];
  const int64_t OH = y.shape[2], OW = y.shape[3];
  const uint64_t es = static_cast<uint64_t>(c.esize);
  // # int8: codes converted in SRAM, tile by tile (PlanScope); constants at the accumulator's start.
  const uint64_t ex = static_cast<uint64_t>(isa::dtype_bytes(x.dtype)), ey = static_cast<uint64_t>(isa::dtype_bytes(y.dtype));
  const quant::QParams* qx = c.codes_of(n.inputs[0]);
  const quant::QParams* qy = c.codes_of(n.outputs[0]);
  if (qx) load_conversion_constants(c, 0, qx, nullptr);
  if (qy) load_conversion_constants(c, 16, nullptr, qy);
  const uint64_t acc_base = qx || qy ? 64 : 0;
  const char* in_codes = qx || qy ? ", int8 codes converted in the tile loop" : "";
  if (global && x.layout.empty()) {
    // NCHW: reduce the contiguous H*W of every channel.
    const int64_t hw = H * W;
    Slots s = make_slots(c, Buffer::kInput);
    Slots o = make_slots(c, Buffer::kWeight);
    if (hw > kMaxDim || hw > s.elems) {
      *why = "global pool window larger than a tile";
      return false;
    }
    const int64_t rows_max = std::min<int64_t>({N * C, kMaxDim, s.elems / hw, o.elems});
    for (int64_t r0 = 0; r0 < N * C; r0 += rows_max) {
      const int64_t rows = std::min(rows_max, N * C - r0);
      const uint64_t sl = s.take(), ol = o.take();
      c.load(Buffer::kInput, sl, x.range(), x.addr + static_cast<uint64_t>(r0 * hw) * ex, x.dtype, {hw, rows, 1, 1},
             {hw, 0, 0});
      if (qx) dequantize_tile(c, Buffer::kInput, sl, hw, rows, x.dtype, 0);
      Context::VecArgs v;
      v.op = is_max ? VecOp::kReduceMax : VecOp::kReduceMean;
      v.in = v.out = c.act, v.src1_buf = Buffer::kInput, v.src1 = sl, v.dst_buf = Buffer::kWeight, v.dst = ol;
      v.d0 = hw, v.d1 = rows;
      c.vec(v);
      if (qy) quantize_tile(c, Buffer::kWeight, ol, rows, 1, y.dtype, 16);
      c.store(Buffer::kWeight, ol, y.range(), y.addr + static_cast<uint64_t>(r0) * ey, y.dtype, {rows, 1, 1, 1},
              {0, 0, 0});
    }
    c.plan->mapping = fmt::format("VEC {} over H*W{}{}", is_max ? "reduce_max" : "reduce_mean",
                                  isa::numerics::is_integer(c.act) ? " on int8 codes" : "", in_codes);
    return true;
  }
  if (global && nhwc_order(x)) {
    // Bands of r whole image rows: r x W pixels of a channel chunk (all channels when a row fits: one
    // contiguous DMA row per band), each pooled to one pixel by VEC max/avg_pool; the T = H / r partial
    // results of an image collect in SRAM and are pooled once more. Bands are equal (r divides H), so the
    // mean of the band means is the mean. Streams the input once at DRAM rate instead of loading every
    // channel's whole H x W window as its own strided tile.
    Slots s = make_slots(c, Buffer::kInput);
    Slots p = make_slots(c, Buffer::kWeight);
    Slots f = make_slots(c, Buffer::kAccumulator, acc_base);
    int64_t tc = std::min<int64_t>(C, kMaxDim);
    while (tc > 1 && W * tc > s.elems) tc = cdiv(tc, 2);
    int64_t r = 0;
    for (int64_t d = std::min<int64_t>(H, 255); d >= 1 && r == 0; --d) {
      if (H % d == 0 && d * W * tc <= s.elems) r = d;
    }
    const int64_t T = r > 0 ? H / r : 0;
    if (r > 0 && W <= 255 && T <= 255 && T * tc <= p.elems && tc <= f.elems) {
      for (int64_t img = 0; img < N; ++img) {
        for (int64_t c0 = 0; c0 < C; c0 += tc) {
          const int64_t nc = std::min(tc, C - c0);
          const uint64_t pl = p.take();
          for (int64_t b = 0; b < T; ++b) {
            const uint64_t sl = s.take();
            const uint64_t xa = x.addr + static_cast<uint64_t>(((img * H + b * r) * W * C + c0)) * ex;
            c.load(Buffer::kInput, sl, x.range(), xa, x.dtype, {nc, W, r, 1}, {C, W * C, 0});
            if (qx) dequantize_tile(c, Buffer::kInput, sl, nc, W * r, x.dtype, 0);
            Context::VecArgs v;
            v.op = is_max ? VecOp::kMaxPool : VecOp::kAvgPool;
            v.in = v.out = c.act, v.src1_buf = Buffer::kInput, v.src1 = sl, v.dst_buf = Buffer::kWeight;
            v.dst = pl + static_cast<uint64_t>(b * nc) * es;
            v.d0 = nc, v.d1 = W, v.d2 = r, v.win_h = r, v.win_w = W, v.str_h = 1, v.str_w = 1;
            c.vec(v);
          }
          const uint64_t fl = f.take();
          Context::VecArgs v;
          v.op = is_max ? VecOp::kMaxPool : VecOp::kAvgPool;
          v.in = v.out = c.act, v.src1_buf = Buffer::kWeight, v.src1 = pl, v.dst_buf = Buffer::kAccumulator, v.dst = fl;
          v.d0 = nc, v.d1 = 1, v.d2 = T, v.win_h = T, v.win_w = 1, v.str_h = 1, v.str_w = 1;
          c.vec(v);
          if (qy) quantize_tile(c, Buffer::kAccumulator, fl, nc, 1, y.dtype, 16);
          c.store(Buffer::kAccumulator, fl, y.range(), y.addr + static_cast<uint64_t>(img * C + c0) * ey, y.dtype,
                  {nc, 1, 1, 1}, {0, 0, 0});
        }
      }
      c.plan->mapping = fmt::format("VEC {} over {} bands of {}x{} pixels x {} channels, then over the bands{}{}",
                                    is_max ? "max_pool" : "avg_pool", T, r, W, tc,
                                    isa::numerics::is_integer(c.act) ? " on int8 codes" : "", in_codes);
      return true;
    }
  }
  if (!nhwc_order(x) || (!global && !nhwc_order(y))) {
    *why = "pooling input not in NHWC";
    return false;
  }
  int64_t kh = H, kw = W, sh = 1, sw = 1, pt = 0, pl = 0, pb = 0, pr = 0;
  std::string ap = "NOTSET";
  if (!global) {
    const auto k = n.attr_ints("kernel_shape", {});
    if (k.size() != 2) {
      *why = "pooling kernel not 2-D";
      return false;
    }
    kh = k[0], kw = k[1];
    const auto st = n.attr_ints("strides", {1, 1});
    sh = st[0], sw = st[1];
    const auto dl = n.attr_ints("dilations", {1, 1});
    if (dl[0] != 1 || dl[1] != 1) {
      *why = "dilated pooling";
      return false;
    }
    ap = n.attr_string("auto_pad", "NOTSET");
    if (ap == "SAME_UPPER" || ap == "SAME_LOWER") {
      const int64_t ph = std::max<int64_t>(0, (OH - 1) * sh + kh - H), pw = std::max<int64_t>(0, (OW - 1) * sw + kw - W);
      pt = ap == "SAME_UPPER" ? ph / 2 : ph - ph / 2;
      pl = ap == "SAME_UPPER" ? pw / 2 : pw - pw / 2;
    } else {
      const auto p = n.attr_ints("pads", {0, 0, 0, 0});
      pt = p[0], pl = p[1], pb = p[2], pr = p[3];
    }
    if (ap == "SAME_UPPER" || ap == "SAME_LOWER") {
      pb = std::max<int64_t>(0, (OH - 1) * sh + kh - H) - pt;
      pr = std::max<int64_t>(0, (OW - 1) * sw + kw - W) - pl;
    }
  }
  // AveragePool divides by the window's elements inside the input (count_include_pad=0) or inside the
  // padded input (=1); ceil_mode windows may hang past both. VEC avg_pool divides by kh*kw over a
  // zero-padded tile, so a per-pixel factor kh*kw/count corrects the divisor where it differs.
  std::vector<float> factor;
  if (!is_max && !global) {
    const bool include_pad = n.attr_int("count_include_pad", 0) != 0;
    const int64_t lo_h = include_pad ? -pt : 0, hi_h = include_pad ? H + pb : H;
    const int64_t lo_w = include_pad ? -pl : 0, hi_w = include_pad ? W + pr : W;
    bool needed = false;
    factor.resize(static_cast<size_t>(OH * OW));
    for (int64_t oy = 0; oy < OH; ++oy) {
      const int64_t y0 = oy * sh - pt;
      const int64_t ch = std::max<int64_t>(0, std::min(y0 + kh, hi_h) - std::max(y0, lo_h));
      for (int64_t ox = 0; ox < OW; ++ox) {
        const int64_t x0 = ox * sw - pl;
        const int64_t cw = std::max<int64_t>(0, std::min(x0 + kw, hi_w) - std::max(x0, lo_w));
        const int64_t cnt = ch * cw;
        needed |= cnt != kh * kw;
        factor[static_cast<size_t>(oy * OW + ox)] = cnt > 0 ? static_cast<float>(kh * kw) / static_cast<float>(cnt) : 0.0f;
      }
    }
    if (!needed) factor.clear();
  }
  if (kh > 255 || kw > 255 || sh > 255 || sw > 255 || pt > 255 || pl > 255) {
    *why = "pooling window or padding beyond the VEC/LOAD field widths";
    return false;
  }
  // Padding: max pooling the lowest value (-inf, or the lowest code on codes), average pooling 0 (the
  // zero point's code when codes are converted in the tile loop).
  int64_t pad_value = 0;
  if (is_max) {
    pad_value = isa::numerics::is_integer(x.dtype) ? static_cast<int64_t>(isa::numerics::dtype_min(x.dtype))
                                                   : bf16_pad(-INFINITY);
  } else if (qx) {
    pad_value = qx->zero_point;
  }
  Slots s = make_slots(c, Buffer::kInput);
  Slots o = make_slots(c, Buffer::kWeight);
  Slots f = make_slots(c, Buffer::kAccumulator, acc_base);
  const uint64_t factor_addr = factor.empty() ? 0 : c.add_floats(factor, c.act);
  // Tile: output rows x all columns x a channel chunk; fall back to column tiles when a row is too big.
  auto in_rows = [&](int64_t t) { return (t - 1) * sh + kh; };
  auto in_cols = [&](int64_t t) { return (t - 1) * sw + kw; };
  int64_t tc = std::min<int64_t>(C, kMaxDim), tow = OW, toh = OH;
  while (tc > 1 && in_rows(1) * in_cols(tow) * tc > s.elems) tc = cdiv(tc, 2);
  while (tow > 1 && in_rows(1) * in_cols(tow) * tc > s.elems) tow = cdiv(tow, 2);
  while (toh > 1 && (in_rows(toh) * in_cols(tow) * tc > s.elems || toh * tow * tc > o.elems || toh * tow > f.elems)) {
    toh = cdiv(toh, 2);
  }
  if (in_rows(toh) * in_cols(tow) * tc > s.elems || toh * tow * tc > o.elems) {
    *why = "pooling window does not fit the input scratchpad";
    return false;
  }
  for (int64_t img = 0; img < N; ++img) {
    for (int64_t oy = 0; oy < OH; oy += toh) {
      for (int64_t ox = 0; ox < OW; ox += tow) {
        for (int64_t c0 = 0; c0 < C; c0 += tc) {
          const int64_t oh = std::min(toh, OH - oy), ow = std::min(tow, OW - ox), nc = std::min(tc, C - c0);
          const int64_t iy0 = oy * sh - pt, iy1 = iy0 + in_rows(oh) - 1, ix0 = ox * sw - pl, ix1 = ix0 + in_cols(ow) - 1;
          const int64_t ptop = std::max<int64_t>(0, -iy0), pbot = std::max<int64_t>(0, iy1 - (H - 1));
          const int64_t pleft = std::max<int64_t>(0, -ix0), pright = std::max<int64_t>(0, ix1 - (W - 1));
          const int64_t rows = in_rows(oh) - ptop - pbot, cols = in_cols(ow) - pleft - pright;
          if (rows <= 0 || cols <= 0 || ptop > 255 || pbot > 255 || pleft > 255 || pright > 255) {
            throw CompileError(fmt::format("layer '{}': a pooling tile lies entirely in the padding", n.name));
          }
          const uint64_t sl = s.take(), ol = o.take();
          const uint64_t xa = x.addr + static_cast<uint64_t>((((img * H + std::max<int64_t>(0, iy0)) * W +
                                                               std::max<int64_t>(0, ix0)) * C + c0)) * ex;
          c.load(Buffer::kInput, sl, x.range(), xa, x.dtype, {nc, cols, rows, 1}, {C, W * C, 0},
                 {ptop, pbot, pleft, pright}, pad_value);
          if (qx) dequantize_tile(c, Buffer::kInput, sl, nc, in_cols(ow) * in_rows(oh), x.dtype, 0);
          Context::VecArgs v;
          v.op = is_max ? VecOp::kMaxPool : VecOp::kAvgPool;
          v.in = v.out = c.act, v.src1_buf = Buffer::kInput, v.src1 = sl, v.dst_buf = Buffer::kWeight, v.dst = ol;
          v.d0 = nc, v.d1 = in_cols(ow), v.d2 = in_rows(oh);
          v.win_h = kh, v.win_w = kw, v.str_h = sh, v.str_w = sw;
          c.vec(v);
          if (!factor.empty()) {
            const uint64_t fl = f.take();
            c.load(Buffer::kAccumulator, fl, Range{kDram, factor_addr, factor_addr + factor.size() * es},
                   factor_addr + static_cast<uint64_t>(oy * OW + ox) * es, c.act, {ow, oh, 1, 1}, {OW, 0, 0});
            Context::VecArgs m;
            m.op = VecOp::kMul, m.in = m.out = c.act, m.src1_buf = m.dst_buf = Buffer::kWeight, m.src1 = m.dst = ol;
            m.src2_buf = Buffer::kAccumulator, m.src2 = fl, m.d0 = nc, m.d1 = oh * ow, m.bcast = isa::Bcast::kCol;
            c.vec(m);
          }
          if (qy) quantize_tile(c, Buffer::kWeight, ol, nc, oh * ow, y.dtype, 16);
          const uint64_t ya = y.addr + static_cast<uint64_t>(((img * OH + oy) * OW + ox) * C + c0) * ey;
          c.store(Buffer::kWeight, ol, y.range(), ya, y.dtype, {nc, ow, oh, 1}, {C, OW * C, 0});
        }
      }
    }
  }
  c.plan->mapping = fmt::format("VEC {} {}x{} s{} on {}x{}x{} tiles{}{}", is_max ? "max_pool" : "avg_pool", kh, kw,
                                sh, toh, tow, tc, isa::numerics::is_integer(c.act) ? " on int8 codes" : "", in_codes);
  return true;
}

// ReduceMean / ReduceSum / ReduceMax over the innermost physical dims.
bool lower_reduce(Context& c, const Node& n, std::string* why) {
  const DramTensor& x = c.tensor(n.inputs[0]);
  const DramTensor& y = c.tensor(n.outputs[0]);
  VecOp op = n.op_type == "ReduceMean" ? VecOp::kReduceMean : n.op_type == "ReduceSum" ? VecOp::kReduceSum : VecOp::kReduceMax;
  const size_t r = x.shape.size();
  std::vector<int64_t> axes;
  if (n.has_input(1)) {
    const Value& a = c.g.value(n.inputs[1]);
    if (!a.is_constant()) {
      *why = "runtime reduction axes";
      return false;
    }
    axes = a.constant->to_int_vector();
  } else {
    axes = n.attr_ints("axes", {});
  }
  if (axes.empty()) {
    if (n.attr_int("noop_with_empty_axes", 0)) {
      *why = "noop reduction";
      return false;
    }
    for (size_t i = 0; i < r; ++i) axes.push_back(static_cast<int64_t>(i));
  }
  std::vector<bool> red(r, false);
  for (int64_t a : axes) red[static_cast<size_t>(a < 0 ? a + static_cast<int64_t>(r) : a)] = true;
  const auto pos = positions(x);
  std::vector<bool> pred(r, false);
  for (size_t d = 0; d < r; ++d) pred[static_cast<size_t>(pos[d])] = red[d];
  // Reduced physical dims (ignoring extent 1) must be the innermost ones.
  int64_t inner = 1, outer = 1;
  bool seen_kept = false;
  for (size_t i = r; i-- > 0;) {
    if (x.phys[i] == 1) continue;
    if (pred[i]) {
      if (seen_kept) {
        *why = "reduction over non-innermost axes";
        return false;
      }
      inner *= x.phys[i];
    } else {
      seen_kept = true;
      outer *= x.phys[i];
    }
  }
  Slots s = make_slots(c, Buffer::kInput);
  Slots o = make_slots(c, Buffer::kWeight);
  if (inner > kMaxDim || inner > s.elems) {
    *why = "reduced extent larger than a tile";
    return false;
  }
  const uint64_t es = static_cast<uint64_t>(c.esize);
  const int64_t rows_max = std::max<int64_t>(1, std::min<int64_t>({outer, kMaxDim, s.elems / inner, o.elems}));
  for (int64_t r0 = 0; r0 < outer; r0 += rows_max) {
    const int64_t rows = std::min(rows_max, outer - r0);
    const uint64_t sl = s.take(), ol = o.take();
    c.load(Buffer::kInput, sl, x.range(), x.addr + static_cast<uint64_t>(r0 * inner) * es, c.act, {inner, rows, 1, 1},
           {inner, 0, 0});
    Context::VecArgs v;
    v.op = op, v.in = v.out = c.act, v.src1_buf = Buffer::kInput, v.src1 = sl, v.dst_buf = Buffer::kWeight, v.dst = ol;
    v.d0 = inner, v.d1 = rows;
    c.vec(v);
    c.store(Buffer::kWeight, ol, y.range(), y.addr + static_cast<uint64_t>(r0) * es, c.act, {rows, 1, 1, 1}, {0, 0, 0});
  }
  c.plan->mapping = fmt::format("VEC {} over {} innermost elements", isa::kVecOpNames[static_cast<size_t>(op)], inner);
  return true;
}

}  // namespace

bool lower_vector(Context& c, const Node& n, std::string* why) {
  const std::string& t = n.op_type;
  for (const auto& in : n.inputs) {
    if (!in.empty() && !c.g.value(in).is_constant() && !c.tensors.count(in)) {
      *why = "input without DRAM placement";
      return false;
    }
  }
  if (n.outputs.empty() || !c.tensors.count(n.outputs[0])) {
    *why = "output without DRAM placement";
    return false;
  }
  if (is_rowwise(n)) return lower_rowwise(c, n, why);
  // # int8: only lower_binary and lower_unary convert codes PlanScope deferred to the tile loop.
  if (!c.codes.empty()) {
    Context::VecArgs probe;
    const bool binary = t == "Add" || t == "Sub" || t == "Mul" || t == "Div" || t == "Max" || t == "Min" || t == "Sum";
    const bool pool = t == "MaxPool" || t == "AveragePool" || t == "GlobalAveragePool" || t == "GlobalMaxPool";
    if (!binary && !pool && t != "Concat" && !unary_op(n, c, probe))
      throw std::logic_error("backend: int8 codes deferred to a lowering of " + t);
  }
  // Data movement: any element type (DMA copies bytes).
  if (t == "Transpose") return lower_transpose(c, n, why);
  if (t == "Concat") return lower_concat(c, n, why) || (c.codes.empty() && (why->clear(), lower_index_map(c, n, why)));
  if (t == "Slice") return lower_slice(c, n, why) || (why->clear(), lower_index_map(c, n, why));
  if (t == "Split") return lower_split(c, n, why) || (why->clear(), lower_index_map(c, n, why));
  if (t == "Identity" || t == "Dropout") {
    std::vector<int64_t> perm(c.tensor(n.outputs[0]).shape.size());
    std::iota(perm.begin(), perm.end(), 0);
    c.plan->mapping = permute_copy(c, c.tensor(n.inputs[0]), c.tensor(n.outputs[0]), perm);
    return true;
  }
  if (!data_inputs(c, n).empty()) return lower_index_map(c, n, why);
  if (!is_float(c.g.value(n.outputs[0]).dtype)) {
    *why = "non-float result";
    return false;
  }
  if (t == "MaxPool" || t == "AveragePool" || t == "GlobalAveragePool" || t == "GlobalMaxPool") {
    return lower_pool(c, n, why);
  }
  if (t == "ReduceMean" || t == "ReduceSum" || t == "ReduceMax") return lower_reduce(c, n, why);
  if (t == "Add" || t == "Sub" || t == "Mul" || t == "Div" || t == "Max" || t == "Min" || t == "Pow" || t == "Sum") {
    return lower_binary(c, n, why);
  }
  if (lower_unary(c, n, why)) return true;
  if (why->empty()) *why = fmt::format("{} is not lowered to the vector unit by the back end", t);
  return false;
}

}  // namespace npusim::compiler::backend
