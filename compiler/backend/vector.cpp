// Vector and data-movement nodes: element-wise ops with broadcasting, activations, pooling,
// reductions over the innermost axes, transposes (strided DMA plus the VEC transpose), concat, slice
// and split. Every lowering streams SRAM tiles: LOAD into a ping-pong slot, VEC in place, STORE.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>

#include "compiler/backend/context.h"
#include "compiler/passes/lowered.h"

namespace npusim::compiler::backend {

using isa::Buffer;
using isa::Bcast;
using isa::DType;
using isa::VecOp;

namespace {

int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
constexpr int64_t kMaxDim = 65535;

std::vector<int64_t> strides_of(const Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (size_t i = s.size(); i-- > 1;) st[i - 1] = st[i] * s[i];
  return st;
}

// Ping-pong slots in one scratchpad, each `elems` activation elements.
struct Slots {
  Buffer buf;
  uint64_t addr[2] = {0, 0};
  int64_t elems = 0;
  int next = 0;
  uint64_t take() {
    const uint64_t a = addr[next];
    next ^= 1;
    return a;
  }
};
Slots make_slots(Context& c, Buffer b, uint64_t base = 0, int64_t max_elems = INT64_MAX) {
  Slots s;
  s.buf = b;
  const int64_t avail = (c.capacity(b) - static_cast<int64_t>(base)) / 2 / 64 * 64;
  s.elems = std::min<int64_t>(avail / c.esize, max_elems);
  s.addr[0] = base;
  s.addr[1] = base + static_cast<uint64_t>((s.elems * c.esize + 63) / 64 * 64);
  return s;
}

// ---- strided copies (DMA through SRAM) ----

struct CopyDim {
  int64_t extent, src_stride, dst_stride;
};

// Merges dims that are contiguous in both source and destination; drops extent-1 dims.
std::vector<CopyDim> merge_copy(std::vector<CopyDim> d) {
  std::vector<CopyDim> r;
  for (const auto& x : d) {
    if (x.extent == 1) continue;
    if (!r.empty() && r.back().src_stride == x.src_stride * x.extent && r.back().dst_stride == x.dst_stride * x.extent) {
      r.back().extent *= x.extent;
      r.back().src_stride = x.src_stride;
      r.back().dst_stride = x.dst_stride;
    } else {
      r.push_back(x);
    }
  }
  if (r.empty()) r.push_back({1, 1, 1});
  return r;
}

// Iterates an odometer over `ext` calling fn(index vector).
void odometer(const std::vector<int64_t>& ext, const std::function<void(const std::vector<int64_t>&)>& fn) {
  std::vector<int64_t> idx(ext.size(), 0);
  for (int64_t e : ext) {
    if (e == 0) return;
  }
  while (true) {
    fn(idx);
    size_t k = ext.size();
    while (k > 0) {
      --k;
      if (++idx[k] < ext[k]) break;
      idx[k] = 0;
      if (k == 0) return;
    }
    if (ext.empty()) return;
  }
}

// Copies a box: dims outermost first, innermost must have src_stride == dst_stride == 1.
void copy_box(Context& c, const DramTensor& src, uint64_t src_off, const DramTensor& dst, uint64_t dst_off,
              const std::vector<CopyDim>& dims_in) {
  std::vector<CopyDim> d = merge_copy(dims_in);
  Slots s = make_slots(c, Buffer::kInput);
  const size_t k = d.size();
  // Box: up to 3 innermost dims, chunked to fit a slot; the rest loop.
  const size_t nb = std::min<size_t>(3, k);
  std::vector<int64_t> tile(nb);
  int64_t budget = s.elems;
  for (size_t j = 0; j < nb; ++j) {
    const CopyDim& x = d[k - 1 - j];
    tile[j] = std::max<int64_t>(1, std::min({x.extent, budget, kMaxDim}));
    budget = std::max<int64_t>(1, budget / tile[j]);
    if (tile[j] < x.extent) {
      for (size_t q = j + 1; q < nb; ++q) tile[q] = 1;
      break;
    }
  }
  for (size_t j = 0; j < nb; ++j) tile[j] = std::max<int64_t>(1, tile[j]);
  std::vector<int64_t> ext;  // loop extents: outer dims, then chunk counts of the box dims
  for (size_t j = 0; j + nb < k; ++j) ext.push_back(d[j].extent);
  for (size_t j = nb; j-- > 0;) ext.push_back(cdiv(d[k - 1 - j].extent, tile[j]));
  const uint64_t es = static_cast<uint64_t>(c.esize);
  odometer(ext, [&](const std::vector<int64_t>& idx) {
    int64_t so = 0, dof = 0;
    for (size_t j = 0; j + nb < k; ++j) {
      so += idx[j] * d[j].src_stride;
      dof += idx[j] * d[j].dst_stride;
    }
    std::array<int64_t, 4> sz = {1, 1, 1, 1};
    std::array<int64_t, 3> sst = {0, 0, 0}, dst_st = {0, 0, 0};
    for (size_t j = 0; j < nb; ++j) {
      const CopyDim& x = d[k - 1 - j];
      const int64_t ci = idx[k - nb + (nb - 1 - j)];
      const int64_t start = ci * tile[j];
      so += start * x.src_stride;
      dof += start * x.dst_stride;
      sz[j] = std::min(tile[j], x.extent - start);
      if (j > 0) {
        sst[j - 1] = x.src_stride;
        dst_st[j - 1] = x.dst_stride;
      }
    }
    const uint64_t slot = s.take();
    c.load(Buffer::kInput, slot, src.range(), src.addr + src_off + static_cast<uint64_t>(so) * es, c.act, sz, sst);
    c.store(Buffer::kInput, slot, dst.range(), dst.addr + dst_off + static_cast<uint64_t>(dof) * es, c.act, sz, dst_st);
  });
}

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
  const uint64_t es = static_cast<uint64_t>(c.esize);
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
    c.load(Buffer::kInput, slot, x.range(), x.addr + static_cast<uint64_t>(off) * es, c.act, {d0, d1, 1, 1}, {d0, 0, 0});
    Context::VecArgs a = v;
    a.in = a.out = c.act;
    a.src1_buf = a.dst_buf = Buffer::kInput;
    a.src1 = a.dst = slot;
    a.d0 = d0, a.d1 = d1, a.d2 = 1;
    c.vec(a);
    c.store(Buffer::kInput, slot, y.range(), y.addr + static_cast<uint64_t>(off) * es, c.act, {d0, d1, 1, 1}, {d0, 0, 0});
    off += d0 * d1;
  }
  c.plan->mapping = fmt::format("VEC {} streamed in {}-element tiles", isa::kVecOpNames[static_cast<size_t>(v.op)],
                                s.elems);
  return true;
}

// An operand of a broadcasting element-wise op, in the output's physical dim order.
struct Operand {
  bool constant = false;
  const DramTensor* t = nullptr;
  uint64_t addr = 0;  // DRAM address of its data (constant: a data segment written in this order)
  Range range;
  Shape pshape;  // extents in output physical order (1 = broadcast)
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
  const uint64_t es = static_cast<uint64_t>(c.esize);
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
    c.load(Buffer::kInput, sl, A.range, A.addr + static_cast<uint64_t>(ao) * es, c.act, {d0, d1, 1, 1}, ast);
    if (!(bo == last_b_off && b_n == last_b_n)) {
      b_cur = sb.take();
      c.load(Buffer::kWeight, b_cur, B.range, B.addr + static_cast<uint64_t>(bo) * es, c.act, bsz, bst);
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
    c.store(Buffer::kInput, sl, y.range(), y.addr + static_cast<uint64_t>(ao) * es, c.act, {d0, d1, 1, 1}, ast);
    ++count;
  });
  (void)count;
  c.plan->mapping = fmt::format("VEC {} bcast {}{}", isa::kVecOpNames[static_cast<size_t>(op)],
                                isa::kBcastNames[static_cast<size_t>(mode)], negate ? " + neg" : recip_a ? " of recip" : "");
  return true;
}

// ---- data movement ----

// Logical-dim -> physical position of a tensor.
std::vector<int> positions(const DramTensor& t) {
  std::vector<int> pos(t.shape.size());
  for (size_t i = 0; i < pos.size(); ++i) pos[i] = static_cast<int>(i);
  if (!t.layout.empty()) {
    for (size_t p = 0; p < t.layout.size(); ++p) pos[static_cast<size_t>(t.layout[p])] = static_cast<int>(p);
  }
  return pos;
}

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
  const auto xpos = positions(x);
  const auto xst = strides_of(x.phys);
  const auto yst = strides_of(y.phys);
  std::vector<int> ylay = y.layout;
  if (ylay.empty()) {
    ylay.resize(r);
    std::iota(ylay.begin(), ylay.end(), 0);
  }
  // Output physical dim i reads input physical dim q.
  std::vector<CopyDim> dims;
  for (size_t i = 0; i < r; ++i) {
    const int logical_out = ylay[i];
    const int logical_in = static_cast<int>(perm[static_cast<size_t>(logical_out)]);
    const int q = xpos[static_cast<size_t>(logical_in)];
    dims.push_back({y.phys[i], xst[static_cast<size_t>(q)], yst[i]});
  }
  std::vector<CopyDim> d = merge_copy(dims);
  size_t a = d.size();  // the dim contiguous in the input
  for (size_t i = 0; i < d.size(); ++i) {
    if (d[i].src_stride == 1) a = i;
  }
  const size_t b = d.size() - 1;
  if (a == d.size() || a == b) {
    copy_box(c, x, 0, y, 0, d);
    c.plan->mapping = "strided DMA copy";
    return true;
  }
  // Swap the input-contiguous dim `a` and the output-contiguous dim `b` with VEC transpose; one more
  // dim `e` rides along as d2; the rest loop.
  std::vector<size_t> rest;
  for (size_t i = 0; i < d.size(); ++i) {
    if (i != a && i != b) rest.push_back(i);
  }
  CopyDim E{1, 0, 0};
  if (!rest.empty()) {
    E = d[rest.back()];
    rest.pop_back();
  }
  Slots s = make_slots(c, Buffer::kInput);
  const CopyDim A = d[a], B = d[b];
  int64_t tb = std::min<int64_t>({B.extent, kMaxDim, std::max<int64_t>(1, static_cast<int64_t>(std::sqrt(s.elems)))});
  const int64_t ta = std::min<int64_t>({A.extent, kMaxDim, std::max<int64_t>(1, s.elems / tb)});
  tb = std::min<int64_t>({B.extent, kMaxDim, std::max<int64_t>(1, s.elems / ta)});
  const int64_t te = std::min<int64_t>({E.extent, kMaxDim, std::max<int64_t>(1, s.elems / (ta * tb))});
  std::vector<int64_t> ext;
  for (size_t i : rest) ext.push_back(d[i].extent);
  ext.push_back(cdiv(E.extent, te));
  ext.push_back(cdiv(A.extent, ta));
  ext.push_back(cdiv(B.extent, tb));
  const uint64_t es = static_cast<uint64_t>(c.esize);
  odometer(ext, [&](const std::vector<int64_t>& idx) {
    int64_t so = 0, dof = 0;
    for (size_t j = 0; j < rest.size(); ++j) {
      so += idx[j] * d[rest[j]].src_stride;
      dof += idx[j] * d[rest[j]].dst_stride;
    }
    const size_t m = rest.size();
    const int64_t e0 = idx[m] * te, a0 = idx[m + 1] * ta, b0 = idx[m + 2] * tb;
    const int64_t ne = std::min(te, E.extent - e0), na = std::min(ta, A.extent - a0), nb = std::min(tb, B.extent - b0);
    so += e0 * E.src_stride + a0 * A.src_stride + b0 * B.src_stride;
    dof += e0 * E.dst_stride + a0 * A.dst_stride + b0 * B.dst_stride;
    const uint64_t sl = s.take();
    c.load(Buffer::kInput, sl, x.range(), x.addr + static_cast<uint64_t>(so) * es, c.act, {na, nb, ne, 1},
           {B.src_stride, E.src_stride, 0});
    Context::VecArgs v;
    v.op = VecOp::kTranspose, v.in = v.out = c.act, v.src1_buf = v.dst_buf = Buffer::kInput, v.src1 = v.dst = sl;
    v.d0 = na, v.d1 = nb, v.d2 = ne;
    c.vec(v);
    c.store(Buffer::kInput, sl, y.range(), y.addr + static_cast<uint64_t>(dof) * es, c.act, {nb, na, ne, 1},
            {A.dst_stride, E.dst_stride, 0});
  });
  c.plan->mapping = fmt::format("strided DMA + VEC transpose, {}x{}x{} tiles", te, ta, tb);
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
  for (const auto& in : n.inputs) {
    if (in.empty()) continue;
    const DramTensor& x = c.tensor(in);
    const auto xst = strides_of(x.phys);
    std::vector<CopyDim> dims;
    for (size_t i = 0; i < r; ++i) dims.push_back({x.phys[i], xst[i], yst[i]});
    const uint64_t dst_off = static_cast<uint64_t>(offset * yst[static_cast<size_t>(ypos[static_cast<size_t>(axis)])] * c.esize);
    copy_box(c, x, 0, y, dst_off, dims);
    offset += x.shape[static_cast<size_t>(axis)];
  }
  c.plan->mapping = "strided DMA copies";
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
  copy_box(c, x, static_cast<uint64_t>(off * c.esize), y, 0, dims);
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
      c.load(Buffer::kInput, sl, x.range(), x.addr + static_cast<uint64_t>(r0 * hw) * es, c.act, {hw, rows, 1, 1}, {hw, 0, 0});
      Context::VecArgs v;
      v.op = is_max ? VecOp::kReduceMax : VecOp::kReduceMean;
      v.in = v.out = c.act, v.src1_buf = Buffer::kInput, v.src1 = sl, v.dst_buf = Buffer::kWeight, v.dst = ol;
      v.d0 = hw, v.d1 = rows;
      c.vec(v);
      c.store(Buffer::kWeight, ol, y.range(), y.addr + static_cast<uint64_t>(r0) * es, c.act, {rows, 1, 1, 1}, {0, 0, 0});
    }
    c.plan->mapping = fmt::format("VEC {} over H*W", is_max ? "reduce_max" : "reduce_mean");
    return true;
  }
  if (x.layout != kNhwc || (!global && y.layout != kNhwc)) {
    *why = "pooling input not in NHWC";
    return false;
  }
  int64_t kh = H, kw = W, sh = 1, sw = 1, pt = 0, pl = 0;
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
    const std::string ap = n.attr_string("auto_pad", "NOTSET");
    if (ap == "SAME_UPPER" || ap == "SAME_LOWER") {
      const int64_t ph = std::max<int64_t>(0, (OH - 1) * sh + kh - H), pw = std::max<int64_t>(0, (OW - 1) * sw + kw - W);
      pt = ap == "SAME_UPPER" ? ph / 2 : ph - ph / 2;
      pl = ap == "SAME_UPPER" ? pw / 2 : pw - pw / 2;
    } else {
      const auto p = n.attr_ints("pads", {0, 0, 0, 0});
      pt = p[0], pl = p[1];
      if (!is_max) {
        const bool padded = p[0] || p[1] || p[2] || p[3];
        const bool extended = (OH - 1) * sh + kh > H + p[0] + p[2] || (OW - 1) * sw + kw > W + p[1] + p[3];
        if ((padded && n.attr_int("count_include_pad", 0) == 0) || extended) {
          *why = "AveragePool whose divisor is not the full window (count_include_pad=0 or ceil_mode)";
          return false;
        }
      }
    }
  }
  if (kh > 255 || kw > 255 || sh > 255 || sw > 255 || pt > 255 || pl > 255) {
    *why = "pooling window or padding beyond the VEC/LOAD field widths";
    return false;
  }
  const int64_t pad_value = is_max ? bf16_pad(-INFINITY) : 0;
  Slots s = make_slots(c, Buffer::kInput);
  Slots o = make_slots(c, Buffer::kWeight);
  // Tile: output rows x all columns x a channel chunk; fall back to column tiles when a row is too big.
  auto in_rows = [&](int64_t t) { return (t - 1) * sh + kh; };
  auto in_cols = [&](int64_t t) { return (t - 1) * sw + kw; };
  int64_t tc = std::min<int64_t>(C, kMaxDim), tow = OW, toh = OH;
  while (tc > 1 && in_rows(1) * in_cols(tow) * tc > s.elems) tc = cdiv(tc, 2);
  while (tow > 1 && in_rows(1) * in_cols(tow) * tc > s.elems) tow = cdiv(tow, 2);
  while (toh > 1 && (in_rows(toh) * in_cols(tow) * tc > s.elems || toh * tow * tc > o.elems)) toh = cdiv(toh, 2);
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
                                                               std::max<int64_t>(0, ix0)) * C + c0)) * es;
          c.load(Buffer::kInput, sl, x.range(), xa, c.act, {nc, cols, rows, 1}, {C, W * C, 0},
                 {ptop, pbot, pleft, pright}, pad_value);
          Context::VecArgs v;
          v.op = is_max ? VecOp::kMaxPool : VecOp::kAvgPool;
          v.in = v.out = c.act, v.src1_buf = Buffer::kInput, v.src1 = sl, v.dst_buf = Buffer::kWeight, v.dst = ol;
          v.d0 = nc, v.d1 = in_cols(ow), v.d2 = in_rows(oh);
          v.win_h = kh, v.win_w = kw, v.str_h = sh, v.str_w = sw;
          c.vec(v);
          const uint64_t ya = y.addr + static_cast<uint64_t>(((img * OH + oy) * OW + ox) * C + c0) * es;
          c.store(Buffer::kWeight, ol, y.range(), ya, c.act, {nc, ow, oh, 1}, {C, OW * C, 0});
        }
      }
    }
  }
  c.plan->mapping = fmt::format("VEC {} {}x{} s{} on {}x{}x{} tiles", is_max ? "max_pool" : "avg_pool", kh, kw, sh,
                                toh, tow, tc);
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
  if (!is_float(c.g.value(n.outputs[0]).dtype)) {
    *why = "non-float result";
    return false;
  }
  if (t == "Transpose") return lower_transpose(c, n, why);
  if (t == "Concat") return lower_concat(c, n, why);
  if (t == "Slice") return lower_slice(c, n, why);
  if (t == "Split") return lower_split(c, n, why);
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
