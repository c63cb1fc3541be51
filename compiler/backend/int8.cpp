// Per-layer precision and INT8 code generation (see int8.h).
#include "compiler/backend/int8.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <set>

#include "compiler/backend/movement.h"
#include "compiler/passes/lowered.h"
#include "compiler/quant/precision.h"
#include "compiler/quant/quantize.h"
#include "isa/timing/dma.h"
#include "isa/timing/systolic.h"
#include "isa/timing/units.h"

namespace npusim::compiler::backend {

using isa::Buffer;
using isa::DType;
using isa::VecOp;
using quant::Precision;
using quant::QParams;

namespace {

bool is_int_code(DType t) { return t == DType::kInt8 || t == DType::kUint8; }

DType float_dtype(Precision p) {
  switch (p) {
    case Precision::kFp16:
      return DType::kFp16;
    case Precision::kBf16:
      return DType::kBf16;
    default:
      return DType::kFp32;
  }
}

// The graph's I/O format under a plan: fp32 (the user's inputs and outputs).
constexpr DType kIoDtype = DType::kFp32;

// VEC with any op (Context::vec leaves src2 out of requantize): requantize with bcast reads int32
// (multiplier, shift) pairs from src2.
int vec(Context& c, const Context::VecArgs& a) {
  if (a.op != VecOp::kRequantize || a.bcast == isa::Bcast::kNone) return c.vec(a);
  isa::Instruction i;
  i.opcode = isa::Opcode::kVec;
  i.set(isa::Field::kLayer, c.layer);
  i.set(isa::Field::kVop, static_cast<int64_t>(a.op)).set(isa::Field::kDtype, static_cast<int64_t>(a.in));
  i.set(isa::Field::kDtypeOut, static_cast<int64_t>(a.out));
  i.set(isa::Field::kSrc1Buf, static_cast<int64_t>(a.src1_buf)).set(isa::Field::kSrc1Addr, static_cast<int64_t>(a.src1));
  i.set(isa::Field::kSrc2Buf, static_cast<int64_t>(a.src2_buf)).set(isa::Field::kSrc2Addr, static_cast<int64_t>(a.src2));
  i.set(isa::Field::kBcast, static_cast<int64_t>(a.bcast));
  i.set(isa::Field::kDstBuf, static_cast<int64_t>(a.dst_buf)).set(isa::Field::kDstAddr, static_cast<int64_t>(a.dst));
  i.set(isa::Field::kD0, a.d0).set(isa::Field::kD1, a.d1).set(isa::Field::kD2, a.d2);
  i.set(isa::Field::kImm0, 0).set(isa::Field::kImm1, 0).set(isa::Field::kImm2, a.imm2);
  const int64_t n = a.d0 * a.d1 * a.d2;
  int64_t pairs = n;
  if (a.bcast == isa::Bcast::kRow) pairs = a.d0;
  if (a.bcast == isa::Bcast::kCol) pairs = a.d1 * a.d2;
  if (a.bcast == isa::Bcast::kScalar) pairs = 1;
  const std::vector<Range> reads = {
      Range{static_cast<int>(a.src1_buf), a.src1, a.src1 + static_cast<uint64_t>(n * isa::dtype_bytes(a.in))},
      Range{static_cast<int>(a.src2_buf), a.src2, a.src2 + static_cast<uint64_t>(pairs * 8)}};
  return c.em.emit(i, reads,
                   {Range{static_cast<int>(a.dst_buf), a.dst, a.dst + static_cast<uint64_t>(n * isa::dtype_bytes(a.out))}});
}

std::vector<uint8_t> int32_bytes(const std::vector<int32_t>& v) {
  std::vector<uint8_t> b(v.size() * 4);
  if (!v.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// Constants of a conversion or an epilogue, as one small data segment: int32 words and fp32 words.
struct ConstWords {
  std::vector<int32_t> w;
  int add_i(int32_t v) {
    w.push_back(v);
    return static_cast<int>(w.size() - 1);
  }
  int add_f(float f) {
    int32_t v;
    std::memcpy(&v, &f, 4);
    return add_i(v);
  }
};

DramTensor scratch_like(Context& c, const DramTensor& t, DType dt) {
  DramTensor s;
  s.shape = t.shape;
  s.layout = t.layout;
  s.phys = t.phys;
  s.dtype = dt;
  s.bytes = static_cast<uint64_t>(std::max<int64_t>(1, num_elements(t.shape)) * isa::dtype_bytes(dt));
  s.addr = c.add_scratch(s.bytes);
  return s;
}

}  // namespace

// ---------------------------------------------------------------------------------------------------
// Conversions

void convert_tensor(Context& c, const DramTensor& src, const QParams* src_q, const DramTensor& dst,
                    const QParams* dst_q) {
  const DType from = src.dtype, to = dst.dtype;
  const int64_t total = std::max<int64_t>(1, num_elements(src.shape));
  // Constants: [0] source zero point (int32; read as int8/uint8 its low byte is the code), [1] source
  // scale, [2] destination scale, [3] destination zero point.
  ConstWords k;
  k.add_i(src_q ? src_q->zero_point : 0);
  k.add_f(src_q ? src_q->scale : 1.0f);
  k.add_f(dst_q ? dst_q->scale : 1.0f);
  k.add_i(dst_q ? dst_q->zero_point : 0);
  const uint64_t kaddr = c.add_data(int32_bytes(k.w));
  const Buffer A = Buffer::kAccumulator;
  const uint64_t kslot = 0;  // 16 bytes of constants, then two slots
  c.load(A, kslot, Range{kDram, kaddr, kaddr + 16}, kaddr, DType::kInt32, {4, 1, 1, 1}, {0, 0, 0});
  const int64_t cap = (c.capacity(A) - 64) / 2 / 4 / 64 * 64;
  const int64_t chunk = std::max<int64_t>(64, std::min<int64_t>({total, cap, kMaxDim}));
  const uint64_t slot[2] = {64, 64 + static_cast<uint64_t>(chunk * 4 + 63) / 64 * 64};
  int next = 0;
  for (int64_t off = 0; off < total; off += chunk) {
    const int64_t n = std::min(chunk, total - off);
    const uint64_t s = slot[next];
    next ^= 1;
    c.load(A, s, src.range(), src.addr + static_cast<uint64_t>(off * isa::dtype_bytes(from)), from, {n, 1, 1, 1},
           {0, 0, 0});
    auto op = [&](VecOp o, DType in, DType out, uint64_t src2, isa::Bcast b) {
      Context::VecArgs v;
      v.op = o, v.in = in, v.out = out;
      v.src1_buf = v.dst_buf = v.src2_buf = A;
      v.src1 = v.dst = s, v.src2 = src2;
      v.d0 = n, v.bcast = b;
      c.vec(v);
    };
    DType cur = from;
    if (is_int_code(from)) {  // dequantize: (q - zp) -> fp32, * scale -> fp32
      op(VecOp::kSub, from, DType::kFp32, kslot + 0, isa::Bcast::kScalar);
      op(VecOp::kMul, DType::kFp32, is_int_code(to) ? DType::kFp32 : to, kslot + 4, isa::Bcast::kScalar);
      cur = is_int_code(to) ? DType::kFp32 : to;
    }
    if (is_int_code(to)) {  // quantize: fp32 / scale -> int32 (nearest even), + zp -> codes
      if (cur != DType::kFp32) {
        op(VecOp::kCopy, cur, DType::kFp32, 0, isa::Bcast::kNone);
        cur = DType::kFp32;
      }
      op(VecOp::kDiv, DType::kFp32, DType::kInt32, kslot + 8, isa::Bcast::kScalar);
      op(VecOp::kAdd, DType::kInt32, to, kslot + 12, isa::Bcast::kScalar);
      cur = to;
    } else if (cur != to) {
      op(VecOp::kCopy, cur, to, 0, isa::Bcast::kNone);
    }
    c.store(A, s, dst.range(), dst.addr + static_cast<uint64_t>(off * isa::dtype_bytes(to)), to, {n, 1, 1, 1},
            {0, 0, 0});
  }
}

// ---------------------------------------------------------------------------------------------------
// Storage and scopes

std::map<std::string, isa::DType> planned_storage(const Graph& g, const quant::PrecisionPlan& plan,
                                                  const std::map<std::string, std::string>& root_of) {
  auto root = [&](const std::string& v) {
    auto it = root_of.find(v);
    return it == root_of.end() ? v : it->second;
  };
  std::map<std::string, DType> by_root;
  std::set<std::string> io_roots;
  for (const auto& in : g.inputs) io_roots.insert(root(in));
  for (const auto& out : g.outputs) io_roots.insert(root(out));
  std::map<std::string, std::string> producer;
  for (const Node& n : g.nodes) {
    for (const auto& o : n.outputs) {
      if (!o.empty()) producer[o] = n.name;
    }
  }
  std::map<std::string, DType> out;
  auto storage = [&](const std::string& v) {
    const Value& val = g.value(v);
    if (!(is_float(val.dtype) || val.dtype == DataType::kUndefined)) return DType::kInt32;
    const std::string r = root(v);
    if (io_roots.count(r)) return kIoDtype;
    auto p = producer.find(r);
    if (p == producer.end()) return kIoDtype;
    const Precision prec = plan.precision_of(p->second);
    if (prec == Precision::kInt8) {
      auto q = plan.values.find(r);
      return q == plan.values.end() ? DType::kFp32 : q->second.dtype;
    }
    return float_dtype(prec);
  };
  for (const auto& in : g.inputs) {
    if (!g.value(in).is_constant()) out[in] = storage(in);
  }
  for (const Node& n : g.nodes) {
    for (const auto& o : n.outputs) {
      if (!o.empty() && g.has_value(o)) out[o] = storage(o);
    }
  }
  return out;
}

PlanScope::PlanScope(Context& c, const Node& n, const std::string& placement) : c_(c) {
  if (!c.options.plan) return;
  const quant::PrecisionPlan& plan = *c.options.plan;
  active_ = true;
  saved_act_ = c.act;
  saved_esize_ = c.esize;
  const Precision p = plan.precision_of(n.name);
  auto layer = plan.layers.find(n.name);
  int8_matrix_ = p == Precision::kInt8 && placement == "matrix" && layer != plan.layers.end() &&
                 layer->second.weight_is_constant && (n.op_type == "Conv" || n.op_type == "Gemm" || n.op_type == "MatMul");
  const DType compute = float_dtype(p);
  if (placement == "matrix" && !int8_matrix_ && c.config.systolic_array.rate(compute) <= 0) {
    throw CompileError(fmt::format("layer '{}' runs in {} but the systolic array has no {} MACs "
                                   "(systolic_array.{}_rate is 0); run it in int8 or another format",
                                   n.name, quant::to_string(p), isa::kDTypeNames[static_cast<size_t>(compute)],
                                   isa::kDTypeNames[static_cast<size_t>(compute)]));
  }
  c.act = compute;
  c.esize = isa::dtype_bytes(compute);
  // The format node n needs for value v.
  auto wanted = [&](const std::string& v, DType stored) {
    if (stored == DType::kInt32) return stored;  // integer values stay int32
    if (int8_matrix_) {
      const quant::LayerQuant& L = layer->second;
      if (v == L.input || v == L.residual || v == L.output) return plan.values.at(v).dtype;
    }
    return compute;
  };
  auto qp = [&](const std::string& v, DType t) -> const QParams* {
    if (!is_int_code(t)) return nullptr;
    return &plan.values.at(v);
  };
  for (const auto& s : n.inputs) {
    if (s.empty() || saved_.count(s) || !c.tensors.count(s)) continue;
    const DramTensor t = c.tensors.at(s);
    const DType want = wanted(s, t.dtype);
    if (want == t.dtype) continue;
    DramTensor conv = scratch_like(c, t, want);
    convert_tensor(c, t, qp(s, t.dtype), conv, qp(s, want));
    saved_[s] = t;
    c.tensors[s] = conv;
  }
  for (const auto& o : n.outputs) {
    if (o.empty() || !c.tensors.count(o) || saved_.count(o)) continue;
    const DramTensor t = c.tensors.at(o);
    const DType want = wanted(o, t.dtype);
    if (want == t.dtype) continue;
    DramTensor scratch = scratch_like(c, t, want);
    saved_[o] = t;
    c.tensors[o] = scratch;
    pending_out_.push_back({scratch, o});
  }
}

void PlanScope::finish() {
  if (!active_ || finished_) return;
  finished_ = true;
  const quant::PrecisionPlan& plan = *c_.options.plan;
  for (const auto& [scratch, name] : pending_out_) {
    const DramTensor& real = saved_.at(name);
    auto qp = [&](DType t) -> const QParams* { return is_int_code(t) ? &plan.values.at(name) : nullptr; };
    convert_tensor(c_, scratch, qp(scratch.dtype), real, qp(real.dtype));
  }
  for (const auto& [name, t] : saved_) c_.tensors[name] = t;
  c_.act = saved_act_;
  c_.esize = saved_esize_;
}

PlanScope::~PlanScope() {
  if (!active_ || finished_) return;
  // Unwinding (or a lowering that gave up and fell back to the host): restore without emitting.
  for (const auto& [name, t] : saved_) c_.tensors[name] = t;
  c_.act = saved_act_;
  c_.esize = saved_esize_;
}

// ---------------------------------------------------------------------------------------------------
// INT8 matrix nodes

namespace {

int64_t cdiv8(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t round64(int64_t b) { return (b + 63) / 64 * 64; }

struct Int8Job {
  std::string what;
  bool gemm = false;
  int64_t images = 1;
  int64_t H = 1, W = 1, C = 1, OH = 1, OW = 1, M = 1;
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, dh = 1, dw = 1, pt = 0, pl = 0;
  int64_t groups = 1, cg = 1, mg = 1;
  DType a_dt = DType::kUint8, y_dt = DType::kUint8, r_dt = DType::kUint8;
  int32_t a_zp = 0;
  uint64_t a_addr = 0, y_addr = 0, r_addr = 0;
  int64_t a_img = 0, y_img = 0;  // elements per image
  Range a_range, y_range, r_range;
  std::vector<int8_t> w;       // [g][kh][kw][cg][mg]
  uint64_t bias_addr = 0;      // int32 [M] (bias_folded)
  uint64_t rq_addr = 0;        // int32 pairs [M][2]
  bool residual = false;
  uint64_t rr_addr = 0;        // residual rescale pairs [M][2]
  bool float_epi = false;
  uint64_t accscale_addr = 0;  // fp32 [M]
  VecOp act = VecOp::kCopy;
  int64_t act_imm0 = 0, act_imm1 = 0;
  bool clamp = false;
  int32_t clamp_min = 0, clamp_max = 0;
  uint64_t k_addr = 0;  // constants: [0] residual zp, [1] y scale (fp32), [2] y zp
};

struct Tile8 {
  int64_t gb = 1, toh = 1, tow = 1, tc = 1, tn = 1;
  bool spatial_outer = true;
  double est = 1e300, compute = 0, dma = 0;
  int64_t in_bytes = 0, w_bytes = 0, acc_bytes = 0;
};

std::vector<int64_t> tile_candidates(int64_t extent, int64_t granule, size_t max_count) {
  std::set<int64_t> s;
  for (int64_t d = 1; d <= extent; d *= 2) s.insert(cdiv8(extent, d));
  for (int64_t g = std::max<int64_t>(1, granule); g < extent; g *= 2) s.insert(g);
  s.insert(1);
  std::vector<int64_t> v(s.rbegin(), s.rend());
  if (v.size() > max_count) {
    std::vector<int64_t> k;
    for (size_t i = 0; i < max_count; ++i) {
      const size_t at = i * (v.size() - 1) / (max_count - 1);
      if (k.empty() || k.back() != v[at]) k.push_back(v[at]);
    }
    v = k;
  }
  return v;
}

std::vector<std::pair<int64_t, int64_t>> split(int64_t extent, int64_t tile) {
  std::vector<std::pair<int64_t, int64_t>> r;
  if (extent / tile > 0) r.push_back({tile, extent / tile});
  if (extent % tile) r.push_back({extent % tile, 1});
  return r;
}

class Int8Mapper {
 public:
  Int8Mapper(Context& c, const Int8Job& j) : c_(c), j_(j) {}

  int64_t in_rows(int64_t toh) const { return (toh - 1) * j_.sh + (j_.kh - 1) * j_.dh + 1; }
  int64_t in_cols(int64_t tow) const { return (tow - 1) * j_.sw + (j_.kw - 1) * j_.dw + 1; }

  // Accumulator slot layout of one ping-pong side: C (int32), bias, requant pairs, residual (int32),
  // residual pairs, acc_scale.
  int64_t acc_side(int64_t p, int64_t tn) const {
    int64_t b = round64(p * tn * 4) + round64(tn * 4) + round64(tn * 8);
    if (j_.residual) b += round64(p * tn * 4) + round64(tn * 8);
    if (j_.float_epi) b += round64(tn * 4);
    return b;
  }
  void slot_bytes(Tile8& t) const {
    t.in_bytes = 2 * round64(in_rows(t.toh) * in_cols(t.tow) * t.tc);
    t.w_bytes = 2 * round64(j_.kh * j_.kw * t.tc * t.tn);
    t.acc_bytes = 64 + 2 * acc_side(t.toh * t.tow, t.tn);
  }
  bool fits(const Tile8& t) const {
    return t.in_bytes <= c_.capacity(Buffer::kInput) && t.w_bytes <= c_.capacity(Buffer::kWeight) &&
           t.acc_bytes <= c_.capacity(Buffer::kAccumulator);
  }
  double dma_cycles(int64_t s0, int64_t s1, int64_t s2, int64_t st1, int64_t st2, DType t) const {
    const std::array<int64_t, 6> key = {s0, s1, s2, st1, st2, static_cast<int64_t>(t)};
    auto it = memo_.find(key);
    if (it != memo_.end()) return it->second;
    isa::Instruction i;
    i.opcode = isa::Opcode::kLoad;
    i.set(isa::Field::kDtype, static_cast<int64_t>(t)).set(isa::Field::kDramAddr, 0);
    i.set(isa::Field::kSize0, s0).set(isa::Field::kSize1, s1).set(isa::Field::kSize2, s2).set(isa::Field::kSize3, 1);
    i.set(isa::Field::kStride1, st1).set(isa::Field::kStride2, st2);
    const double v = isa::timing::estimate_dma_cycles(i, c_.config);
    memo_.emplace(key, v);
    return v;
  }
  double vec_cost(int64_t elems) const {
    isa::Instruction i;
    i.opcode = isa::Opcode::kVec;
    i.set(isa::Field::kVop, static_cast<int64_t>(VecOp::kAdd)).set(isa::Field::kD0, elems).set(isa::Field::kD1, 1);
    i.set(isa::Field::kD2, 1);
    return static_cast<double>(isa::timing::vec_cycles(i, c_.config.vector));
  }
  int epilogue_ops() const {
    int ops = 2;  // bias, requantize
    if (j_.residual) ops += 3;
    if (j_.clamp) ops += 1;
    if (j_.float_epi) ops += 4;
    return ops;
  }

  void estimate(Tile8& t) const {
    const int64_t cin_b = t.gb * j_.cg, cout_b = t.gb * j_.mg, blocks = j_.groups / t.gb;
    const auto oh = split(j_.OH, t.toh), ow = split(j_.OW, t.tow), kc = split(cin_b, t.tc), nc = split(cout_b, t.tn);
    const int64_t ns = j_.images * cdiv8(j_.OH, t.toh) * cdiv8(j_.OW, t.tow), nn = cdiv8(cout_b, t.tn),
                  nk = cdiv8(cin_b, t.tc);
    const bool reuse_a = t.spatial_outer && nk == 1, reuse_b = !t.spatial_outer && nk == 1;
    double compute = 0, vec = 0, store = 0, load_a = 0, load_b = 0, load_r = 0;
    const double engines = static_cast<double>(std::max<int64_t>(1, c_.config.dma.engines));
    for (auto [h, hc] : oh) {
      for (auto [w, wc] : ow) {
        const int64_t p = h * w;
        const double sp = static_cast<double>(hc * wc * j_.images);
        for (auto [k, kcnt] : kc) {
          load_a += dma_cycles(k, in_cols(w), in_rows(h), j_.C, j_.W * j_.C, j_.a_dt) * sp * static_cast<double>(kcnt) *
                    (reuse_a ? 1.0 : static_cast<double>(nn));
          for (auto [n, ncnt] : nc) {
            const auto cyc = isa::timing::gemm_cycles(c_.config.systolic_array, {p, j_.kh * j_.kw * k, n}, j_.a_dt, false);
            compute += static_cast<double>(cyc.total) * sp * static_cast<double>(kcnt * ncnt);
          }
        }
        for (auto [n, ncnt] : nc) {
          const double tiles = sp * static_cast<double>(ncnt);
          const double st = dma_cycles(n, w, h, j_.M, j_.OW * j_.M, j_.y_dt);
          store += st * tiles;
          vec += tiles * epilogue_ops() * vec_cost(p * n);
          if (j_.residual) load_r += dma_cycles(n, w, h, j_.M, j_.OW * j_.M, j_.r_dt) * tiles;
        }
      }
    }
    for (auto [k, kcnt] : kc) {
      for (auto [n, ncnt] : nc) {
        load_b += dma_cycles(n, k, j_.kh * j_.kw, n, k * n, DType::kInt8) * static_cast<double>(kcnt * ncnt) *
                  (reuse_b ? 1.0 : static_cast<double>(ns));
      }
    }
    compute *= static_cast<double>(blocks);
    const double dma = (load_a + load_b + load_r + store) * static_cast<double>(blocks) / engines;
    vec *= static_cast<double>(blocks);
    const double first = dma_cycles(t.tc, in_cols(t.tow), in_rows(t.toh), j_.C, j_.W * j_.C, j_.a_dt) +
                         dma_cycles(t.tn, t.tc, j_.kh * j_.kw, t.tn, t.tc * t.tn, DType::kInt8);
    const double last = dma_cycles(t.tn, t.tow, t.toh, j_.M, j_.OW * j_.M, j_.y_dt);
    t.compute = compute;
    t.dma = dma;
    t.est = std::max({compute, dma, vec}) + first + last;
  }

  Tile8 search(int64_t* evaluated) const {
    Tile8 best;
    std::vector<int64_t> gbs;
    for (int64_t d = 1; d <= j_.groups; ++d) {
      if (j_.groups % d == 0 && (d == 1 || d * j_.cg <= 4 * c_.config.systolic_array.rows)) gbs.push_back(d);
    }
    if (gbs.size() > 8) {
      std::vector<int64_t> k = {1};
      k.insert(k.end(), gbs.end() - 7, gbs.end());
      gbs = k;
    }
    const int64_t rows = c_.config.systolic_array.rows, cols = c_.config.systolic_array.cols;
    int64_t n_eval = 0;
    for (int64_t gb : gbs) {
      const int64_t cin_b = gb * j_.cg, cout_b = gb * j_.mg;
      const auto tcs = gb > 1 ? std::vector<int64_t>{cin_b}
                              : tile_candidates(cin_b, std::max<int64_t>(1, rows / (j_.kh * j_.kw)), 8);
      const auto tns = gb > 1 ? std::vector<int64_t>{cout_b} : tile_candidates(cout_b, cols, 8);
      for (int64_t tc : tcs) {
        for (int64_t tn : tns) {
          for (int64_t toh : tile_candidates(j_.OH, 1, 8)) {
            for (int64_t tow : tile_candidates(j_.OW, 1, 4)) {
              if (toh * tow > 65535 || in_rows(toh) > 65535 || in_cols(tow) > 65535) continue;
              for (int order = 0; order < 2; ++order) {
                Tile8 t;
                t.gb = gb, t.tc = tc, t.tn = tn, t.toh = toh, t.tow = tow, t.spatial_outer = order == 0;
                slot_bytes(t);
                if (!fits(t)) continue;
                estimate(t);
                ++n_eval;
                if (t.est < best.est) best = t;
              }
            }
          }
        }
      }
    }
    *evaluated = n_eval;
    return best;
  }

  void generate(const Tile8& t) {
    const int64_t cin_b = t.gb * j_.cg, cout_b = t.gb * j_.mg, blocks = j_.groups / t.gb;
    const int64_t nk = cdiv8(cin_b, t.tc), nn = cdiv8(cout_b, t.tn);
    SramAlloc in{Buffer::kInput}, wt{Buffer::kWeight}, acc{Buffer::kAccumulator};
    const int64_t p_max = t.toh * t.tow;
    uint64_t a_slot[2], b_slot[2];
    struct Side {
      uint64_t c = 0, bias = 0, rq = 0, r = 0, rr = 0, sc = 0;
    } side[2];
    for (int s = 0; s < 2; ++s) a_slot[s] = in.take(static_cast<uint64_t>(in_rows(t.toh) * in_cols(t.tow) * t.tc));
    for (int s = 0; s < 2; ++s) b_slot[s] = wt.take(static_cast<uint64_t>(j_.kh * j_.kw * t.tc * t.tn));
    const uint64_t kslot = acc.take(64);
    for (int s = 0; s < 2; ++s) {
      side[s].c = acc.take(static_cast<uint64_t>(p_max * t.tn * 4));
      side[s].bias = acc.take(static_cast<uint64_t>(t.tn * 4));
      side[s].rq = acc.take(static_cast<uint64_t>(t.tn * 8));
      if (j_.residual) {
        side[s].r = acc.take(static_cast<uint64_t>(p_max * t.tn * 4));
        side[s].rr = acc.take(static_cast<uint64_t>(t.tn * 8));
      }
      if (j_.float_epi) side[s].sc = acc.take(static_cast<uint64_t>(t.tn * 4));
    }
    c_.load(Buffer::kAccumulator, kslot, Range{kDram, j_.k_addr, j_.k_addr + 12}, j_.k_addr, DType::kInt32,
            {3, 1, 1, 1}, {0, 0, 0});
    // Weight tiles [kh][kw][tc][tn] as int8 data segments.
    std::vector<uint64_t> w_addr(static_cast<size_t>(blocks * nn * nk));
    for (int64_t b = 0; b < blocks; ++b) {
      for (int64_t jn = 0; jn < nn; ++jn) {
        for (int64_t ik = 0; ik < nk; ++ik) {
          const int64_t n0 = jn * t.tn, n1 = std::min(cout_b, n0 + t.tn), k0 = ik * t.tc, k1 = std::min(cin_b, k0 + t.tc);
          std::vector<uint8_t> tile(static_cast<size_t>(j_.kh * j_.kw * (k1 - k0) * (n1 - n0)), 0);
          size_t q = 0;
          for (int64_t i = 0; i < j_.kh; ++i) {
            for (int64_t jj = 0; jj < j_.kw; ++jj) {
              for (int64_t k = k0; k < k1; ++k) {
                for (int64_t n = n0; n < n1; ++n, ++q) {
                  const int64_t gk = b * t.gb + k / j_.cg, gn = b * t.gb + n / j_.mg;
                  if (gk != gn) continue;
                  const int64_t ci = k % j_.cg, m = n % j_.mg;
                  tile[q] = static_cast<uint8_t>(
                      j_.w[static_cast<size_t>(((gk * j_.kh + i) * j_.kw + jj) * j_.cg * j_.mg + ci * j_.mg + m)]);
                }
              }
            }
          }
          w_addr[static_cast<size_t>((b * nn + jn) * nk + ik)] = c_.add_data(std::move(tile));
        }
      }
    }
    struct Spatial {
      int64_t img, oy0, oh, ox0, ow;
    };
    std::vector<Spatial> sp;
    for (int64_t img = 0; img < j_.images; ++img) {
      for (int64_t oy = 0; oy < j_.OH; oy += t.toh) {
        for (int64_t ox = 0; ox < j_.OW; ox += t.tow) {
          sp.push_back({img, oy, std::min(t.toh, j_.OH - oy), ox, std::min(t.tow, j_.OW - ox)});
        }
      }
    }
    int a_next = 0, b_next = 0, c_next = 0;
    int64_t a_key = -1, b_key = -1;
    uint64_t a_cur = 0, b_cur = 0;
    const bool reuse_a = t.spatial_outer && nk == 1, reuse_b = !t.spatial_outer && nk == 1;
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t cin0 = b * cin_b, cout0 = b * cout_b;
      auto tile = [&](int64_t si, int64_t jn) {
        const Spatial& s = sp[static_cast<size_t>(si)];
        const int64_t n0 = jn * t.tn, tn = std::min(t.tn, cout_b - n0);
        const int cs = c_next;
        c_next ^= 1;
        for (int64_t ik = 0; ik < nk; ++ik) {
          const int64_t k0 = ik * t.tc, tc = std::min(t.tc, cin_b - k0);
          const int64_t akey = (b * static_cast<int64_t>(sp.size()) + si) * nk + ik;
          if (!(reuse_a && a_key == akey)) {
            a_cur = a_slot[a_next];
            a_next ^= 1;
            a_key = akey;
            load_input(s.img, s.oy0, s.oh, s.ox0, s.ow, cin0 + k0, tc, a_cur);
          }
          const int64_t wkey = (b * nn + jn) * nk + ik;
          if (!(reuse_b && b_key == wkey)) {
            b_cur = b_slot[b_next];
            b_next ^= 1;
            b_key = wkey;
            const uint64_t addr = w_addr[static_cast<size_t>(wkey)];
            const Range r{kDram, addr, addr + static_cast<uint64_t>(j_.kh * j_.kw * tc * tn)};
            c_.load(Buffer::kWeight, b_cur, r, addr, DType::kInt8, {tn, tc, j_.kh * j_.kw, 1}, {tn, tc * tn, 0});
          }
          if (j_.gemm) {
            c_.matmul(a_cur, tc, b_cur, side[cs].c, s.oh * s.ow, tc, tn, ik > 0);
          } else {
            c_.conv(a_cur, b_cur, side[cs].c, in_rows(s.oh), in_cols(s.ow), tc, s.oh, s.ow, tn, j_.kh, j_.kw, j_.sh,
                    j_.sw, j_.dh, j_.dw, ik > 0);
          }
        }
        const Side& sd = side[cs];
        epilogue(s.img, s.oy0, s.oh, s.ox0, s.ow, cout0 + n0, tn, sd.c, sd.bias, sd.rq, sd.r, sd.rr, sd.sc, kslot);
      };
      const int64_t nsp = static_cast<int64_t>(sp.size());
      if (t.spatial_outer) {
        for (int64_t si = 0; si < nsp; ++si) {
          for (int64_t jn = 0; jn < nn; ++jn) tile(si, jn);
        }
      } else {
        for (int64_t jn = 0; jn < nn; ++jn) {
          for (int64_t si = 0; si < nsp; ++si) tile(si, jn);
        }
      }
    }
    c_.plan->sram_input_bytes = static_cast<int64_t>(in.next);
    c_.plan->sram_weight_bytes = static_cast<int64_t>(wt.next);
    c_.plan->sram_acc_bytes = static_cast<int64_t>(acc.next);
  }

  void load_input(int64_t img, int64_t oy0, int64_t oh, int64_t ox0, int64_t ow, int64_t c0, int64_t tc, uint64_t slot) {
    const int64_t iy0 = oy0 * j_.sh - j_.pt, iy1 = iy0 + in_rows(oh) - 1;
    const int64_t ix0 = ox0 * j_.sw - j_.pl, ix1 = ix0 + in_cols(ow) - 1;
    const int64_t ptop = std::max<int64_t>(0, -iy0), pbot = std::max<int64_t>(0, iy1 - (j_.H - 1));
    const int64_t pleft = std::max<int64_t>(0, -ix0), pright = std::max<int64_t>(0, ix1 - (j_.W - 1));
    const int64_t ry0 = std::max<int64_t>(0, iy0), rx0 = std::max<int64_t>(0, ix0);
    const int64_t rows = in_rows(oh) - ptop - pbot, cols = in_cols(ow) - pleft - pright;
    const uint64_t addr = j_.a_addr + static_cast<uint64_t>(img * j_.a_img + (ry0 * j_.W + rx0) * j_.C + c0);
    // Padding is the input's zero point: (pad - zp) * w = 0, as the quantized reference assumes.
    c_.load(Buffer::kInput, slot, j_.a_range, addr, j_.a_dt, {tc, cols, rows, 1}, {j_.C, j_.W * j_.C, 0},
            {ptop, pbot, pleft, pright}, j_.a_zp);
  }

  void epilogue(int64_t img, int64_t oy0, int64_t oh, int64_t ox0, int64_t ow, int64_t n0, int64_t tn, uint64_t cs,
                uint64_t bias_s, uint64_t rq_s, uint64_t r_s, uint64_t rr_s, uint64_t sc_s, uint64_t kslot) {
    const int64_t p = oh * ow;
    const Buffer A = Buffer::kAccumulator;
    const int64_t yoff = img * j_.y_img + (oy0 * j_.OW + ox0) * j_.M + n0;
    const std::array<int64_t, 4> box = {tn, ow, oh, 1};
    const std::array<int64_t, 3> strides = {j_.M, j_.OW * j_.M, 0};
    auto v = [&](VecOp op, DType in, DType out, uint64_t src1, uint64_t dst) {
      Context::VecArgs a;
      a.op = op, a.in = in, a.out = out;
      a.src1_buf = a.src2_buf = a.dst_buf = A;
      a.src1 = src1, a.dst = dst;
      a.d0 = tn, a.d1 = p, a.d2 = 1;
      return a;
    };
    const Range seg{kDram, j_.bias_addr, j_.bias_addr + 1};
    // acc += bias_folded (per output channel).
    c_.load(A, bias_s, seg, j_.bias_addr + static_cast<uint64_t>(n0 * 4), DType::kInt32, {tn, 1, 1, 1}, {0, 0, 0});
    Context::VecArgs add = v(VecOp::kAdd, DType::kInt32, DType::kInt32, cs, cs);
    add.src2 = bias_s, add.bcast = isa::Bcast::kRow;
    vec(c_, add);
    if (j_.residual) {
      // acc = sat32(acc + requantize(r - r.zp, residual_rescale, 0)).
      c_.load(A, r_s, j_.r_range, j_.r_addr + static_cast<uint64_t>(yoff), j_.r_dt, box, strides);
      c_.load(A, rr_s, seg, j_.rr_addr + static_cast<uint64_t>(n0 * 8), DType::kInt32, {2 * tn, 1, 1, 1}, {0, 0, 0});
      Context::VecArgs sub = v(VecOp::kSub, j_.r_dt, DType::kInt32, r_s, r_s);
      sub.src2 = kslot, sub.bcast = isa::Bcast::kScalar;
      vec(c_, sub);
      Context::VecArgs rq = v(VecOp::kRequantize, DType::kInt32, DType::kInt32, r_s, r_s);
      rq.src2 = rr_s, rq.bcast = isa::Bcast::kRow, rq.imm2 = 0;
      vec(c_, rq);
      Context::VecArgs radd = v(VecOp::kAdd, DType::kInt32, DType::kInt32, cs, cs);
      radd.src2 = r_s;
      vec(c_, radd);
    }
    if (!j_.float_epi) {
      c_.load(A, rq_s, seg, j_.rq_addr + static_cast<uint64_t>(n0 * 8), DType::kInt32, {2 * tn, 1, 1, 1}, {0, 0, 0});
      Context::VecArgs rq = v(VecOp::kRequantize, DType::kInt32, j_.y_dt, cs, cs);
      rq.src2 = rq_s, rq.bcast = isa::Bcast::kRow, rq.imm2 = y_zp_;
      vec(c_, rq);
      if (j_.clamp) {
        Context::VecArgs cl = v(VecOp::kClip, j_.y_dt, j_.y_dt, cs, cs);
        cl.imm0 = f32_imm(static_cast<float>(j_.clamp_min));
        cl.imm1 = f32_imm(static_cast<float>(j_.clamp_max));
        vec(c_, cl);
      }
    } else {
      // y = quantize(act(float(acc) * acc_scale)).
      vec(c_, v(VecOp::kCopy, DType::kInt32, DType::kFp32, cs, cs));
      c_.load(A, sc_s, seg, j_.accscale_addr + static_cast<uint64_t>(n0 * 4), DType::kFp32, {tn, 1, 1, 1}, {0, 0, 0});
      Context::VecArgs mul = v(VecOp::kMul, DType::kFp32, DType::kFp32, cs, cs);
      mul.src2 = sc_s, mul.bcast = isa::Bcast::kRow;
      vec(c_, mul);
      Context::VecArgs act = v(j_.act, DType::kFp32, DType::kFp32, cs, cs);
      act.imm0 = j_.act_imm0, act.imm1 = j_.act_imm1;
      vec(c_, act);
      Context::VecArgs div = v(VecOp::kDiv, DType::kFp32, DType::kInt32, cs, cs);
      div.src2 = kslot + 4, div.bcast = isa::Bcast::kScalar;
      vec(c_, div);
      Context::VecArgs zp = v(VecOp::kAdd, DType::kInt32, j_.y_dt, cs, cs);
      zp.src2 = kslot + 8, zp.bcast = isa::Bcast::kScalar;
      vec(c_, zp);
    }
    c_.store(A, cs, j_.y_range, j_.y_addr + static_cast<uint64_t>(yoff), j_.y_dt, box, strides);
  }

  int32_t y_zp_ = 0;

 private:
  Context& c_;
  const Int8Job& j_;
  mutable std::map<std::array<int64_t, 6>, double> memo_;
};

bool set_float_activation(const Node& n, Int8Job& j) {
  const std::string act = n.attr_string(kActivation, "");
  if (act == "Sigmoid") {
    j.act = VecOp::kSigmoid;
  } else if (act == "Tanh") {
    j.act = VecOp::kTanh;
  } else if (act == "LeakyRelu") {
    j.act = VecOp::kLeakyRelu;
    j.act_imm0 = f32_imm(n.attr_float(kAlpha, 0.01f));
  } else if (act == "HardSigmoid") {
    j.act = VecOp::kHardSigmoid;
    j.act_imm0 = f32_imm(n.attr_float(kAlpha, 0.2f));
    j.act_imm1 = f32_imm(n.attr_float(kBeta, 0.5f));
  } else if (act == "HardSwish") {
    j.act = VecOp::kHardSwish;
  } else if (act == "Gelu") {
    j.act = VecOp::kGelu;
  } else {
    return false;
  }
  return true;
}

std::vector<int32_t> pairs_of(const std::vector<isa::numerics::QuantizedMultiplier>& q) {
  std::vector<int32_t> v;
  for (const auto& m : q) {
    v.push_back(m.multiplier);
    v.push_back(m.shift);
  }
  return v;
}

}  // namespace

bool lower_matrix_int8(Context& c, const Node& n) {
  const quant::PrecisionPlan& plan = *c.options.plan;
  const quant::LayerQuant& L = plan.layers.at(n.name);
  if (!L.weight_is_constant) return false;
  const DramTensor& x = c.tensor(L.input);
  const DramTensor& y = c.tensor(L.output);
  const QParams& xq = plan.values.at(L.input);
  const QParams& yq = plan.values.at(L.output);
  if (x.dtype != xq.dtype || y.dtype != yq.dtype) throw std::logic_error("backend: int8 operands not in codes");
  Int8Job j;
  j.a_dt = xq.dtype, j.y_dt = yq.dtype, j.a_zp = xq.zero_point;
  j.a_addr = x.addr, j.y_addr = y.addr, j.a_range = x.range(), j.y_range = y.range();
  const int64_t M_out = static_cast<int64_t>(L.bias_folded.size());
  if (n.op_type == "Conv") {
    if (x.shape.size() != 4 || x.layout != kNhwc || y.layout != kNhwc) return false;
    j.images = x.shape[0];
    j.C = x.shape[1], j.H = x.shape[2], j.W = x.shape[3];
    j.M = y.shape[1], j.OH = y.shape[2], j.OW = y.shape[3];
    j.groups = n.attr_int("group", 1);
    j.cg = j.C / j.groups, j.mg = j.M / j.groups;
    j.kh = L.weight_shape[2], j.kw = L.weight_shape[3];
    const auto st = n.attr_ints("strides", {1, 1}), dl = n.attr_ints("dilations", {1, 1});
    j.sh = st[0], j.sw = st[1], j.dh = dl[0], j.dw = dl[1];
    const std::string auto_pad = n.attr_string("auto_pad", "NOTSET");
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      const int64_t ph = std::max<int64_t>(0, (j.OH - 1) * j.sh + (j.kh - 1) * j.dh + 1 - j.H);
      const int64_t pw = std::max<int64_t>(0, (j.OW - 1) * j.sw + (j.kw - 1) * j.dw + 1 - j.W);
      j.pt = auto_pad == "SAME_UPPER" ? ph / 2 : ph - ph / 2;
      j.pl = auto_pad == "SAME_UPPER" ? pw / 2 : pw - pw / 2;
    } else {
      const auto pads = n.attr_ints("pads", {0, 0, 0, 0});
      j.pt = pads[0], j.pl = pads[1];
    }
    if (j.pt > (j.kh - 1) * j.dh || j.pl > (j.kw - 1) * j.dw) return false;
    if ((j.OH - 1) * j.sh + (j.kh - 1) * j.dh - j.pt - (j.H - 1) > (j.kh - 1) * j.dh) return false;
    if ((j.OW - 1) * j.sw + (j.kw - 1) * j.dw - j.pl - (j.W - 1) > (j.kw - 1) * j.dw) return false;
    if (j.pt > 255 || j.pl > 255 || j.kh > 255 || j.kw > 255 || j.sh > 255 || j.dh > 255) return false;
    // weight_q [M][cg][kh][kw] -> [g][kh][kw][cg][mg].
    j.w.assign(L.weight_q.size(), 0);
    for (int64_t m = 0; m < j.M; ++m) {
      const int64_t g = m / j.mg, mm = m % j.mg;
      for (int64_t ci = 0; ci < j.cg; ++ci) {
        for (int64_t i = 0; i < j.kh; ++i) {
          for (int64_t jj = 0; jj < j.kw; ++jj) {
            j.w[static_cast<size_t>(((g * j.kh + i) * j.kw + jj) * j.cg * j.mg + ci * j.mg + mm)] =
                L.weight_q[static_cast<size_t>(((m * j.cg + ci) * j.kh + i) * j.kw + jj)];
          }
        }
      }
    }
    j.a_img = j.H * j.W * j.C, j.y_img = j.OH * j.OW * j.M;
    c.plan->mapping = fmt::format("int8 CONV {}x{} stride {}x{}{}", j.kh, j.kw, j.sh, j.sw,
                                  j.groups > 1 ? fmt::format(", {} groups", j.groups) : "");
  } else {
    // Gemm/MatMul with a shared constant 2-D weight [K][N]: every batch dim of A folds into M.
    if (!x.layout.empty() || !y.layout.empty() || L.weight_shape.size() != 2 || x.shape.empty()) return false;
    if (n.op_type == "Gemm" && (n.attr_int("transA", 0) || n.attr_int("transB", 0))) return false;
    const int64_t K = L.weight_shape[0], N = L.weight_shape[1];
    if (x.shape.back() != K || K > 65535 || N > 65535) return false;
    j.gemm = true;
    j.C = K, j.W = 1, j.OW = 1, j.M = N, j.cg = K, j.mg = N;
    j.H = j.OH = num_elements(x.shape) / K;
    j.w = L.weight_q;
    j.a_img = j.y_img = 0;
    c.plan->mapping = fmt::format("int8 MATMUL M={} K={} N={}", j.OH, K, N);
  }
  if (M_out != j.M) return false;
  j.bias_addr = c.add_data(int32_bytes(L.bias_folded));
  j.rq_addr = c.add_data(int32_bytes(pairs_of(L.requant)));
  ConstWords k;
  if (!L.residual.empty()) {
    const DramTensor& r = c.tensor(L.residual);
    if (r.phys != y.phys) return false;
    const QParams& rq = plan.values.at(L.residual);
    j.residual = true;
    j.r_dt = rq.dtype;
    j.r_addr = r.addr;
    j.r_range = r.range();
    j.rr_addr = c.add_data(int32_bytes(pairs_of(L.residual_rescale)));
    k.add_i(rq.zero_point);
  } else {
    k.add_i(0);
  }
  k.add_f(yq.scale);
  k.add_i(yq.zero_point);
  j.k_addr = c.add_data(int32_bytes(k.w));
  j.float_epi = L.float_epilogue;
  if (j.float_epi) {
    if (!set_float_activation(n, j)) return false;
    j.accscale_addr = c.add_floats(L.acc_scale, DType::kFp32);
  } else {
    j.clamp = L.clamp_min > yq.qmin() || L.clamp_max < yq.qmax();
    j.clamp_min = L.clamp_min, j.clamp_max = L.clamp_max;
  }
  j.what = fmt::format("int8 {} {}", n.op_type, n.name);
  // The array's operand dtype is A's: uint8 A with int8 B, or int8 x int8.
  const DType saved_act = c.act;
  const int64_t saved_es = c.esize;
  c.act = j.a_dt;
  c.esize = 1;
  Int8Mapper mm(c, j);
  mm.y_zp_ = yq.zero_point;
  int64_t evaluated = 0;
  const Tile8 t = mm.search(&evaluated);
  if (evaluated == 0) {
    c.act = saved_act, c.esize = saved_es;
    throw CompileError(fmt::format("layer '{}' ({}): even the smallest int8 tile does not fit the scratchpads",
                                   n.name, j.what));
  }
  LayerPlan& p = *c.plan;
  p.group_block = t.gb;
  p.tile_oh = t.toh, p.tile_ow = t.tow, p.tile_m = t.toh * t.tow, p.tile_k = j.kh * j.kw * t.tc, p.tile_n = t.tn;
  p.loop_order = t.spatial_outer ? "spatial-outer (input tile resident)" : "channel-outer (weight tile resident)";
  p.est_cycles = static_cast<int64_t>(t.est);
  p.est_compute_cycles = static_cast<int64_t>(t.compute);
  p.est_dma_cycles = static_cast<int64_t>(t.dma);
  p.candidates = evaluated;
  p.macs = j.images * j.OH * j.OW * j.M * j.kh * j.kw * j.cg;
  mm.generate(t);
  if (j.groups > 1) p.mapping += fmt::format(" as {} block-diagonal blocks of {} groups", j.groups / t.gb, t.gb);
  c.act = saved_act;
  c.esize = saved_es;
  return true;
}

}  // namespace npusim::compiler::backend
