// Per-layer precision: the conversions between a plan's formats and the plan's scope around each node
// (see int8.h; the int8 matrix strategy is int8_matrix.cpp).
#include "compiler/backend/int8/int8.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <optional>
#include <set>

#include "compiler/backend/memory/movement.h"
#include "compiler/backend/vector/rowwise.h"
#include "compiler/passes/lowered.h"
#include "compiler/quant/precision.h"
#include "compiler/quant/quantize.h"

namespace npusim::compiler::backend {

using isa::Buffer;
using isa::DType;
using isa::VecOp;
using quant::Precision;
using quant::QParams;

namespace {

// Quantized codes: int8/uint8, and int16 (the activations of int16 layers, quant/precision.h).
bool is_int_code(DType t) { return t == DType::kInt8 || t == DType::kUint8 || t == DType::kInt16; }

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

std::vector<uint8_t> int32_bytes(const std::vector<int32_t>& v) {
  std::vector<uint8_t> b(v.size() * 4);
  if (!v.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}

int ConstWords::add_f(float f) {
  int32_t v;
  std::memcpy(&v, &f, 4);
  return add_i(v);
}

// ---------------------------------------------------------------------------------------------------
// Conversions

uint64_t conversion_constants(Context& c, const QParams* from, const QParams* to) {
  ConstWords k;
  k.add_i(from ? from->zero_point : 0);
  k.add_f(from ? from->scale : 1.0f);
  k.add_f(to ? to->scale : 1.0f);
  k.add_i(to ? to->zero_point : 0);
  return c.add_data(int32_bytes(k.w));
}

void load_conversion_constants(Context& c, uint64_t acc_slot, const QParams* from, const QParams* to) {
  const uint64_t addr = conversion_constants(c, from, to);
  c.load(Buffer::kAccumulator, acc_slot, Range{kDram, addr, addr + 16}, addr, DType::kInt32, {4, 1, 1, 1},
         {0, 0, 0});
}

namespace {

Context::VecArgs tile_op(VecOp o, DType in, DType out, Buffer buf, uint64_t slot, int64_t d0, int64_t d1,
                         uint64_t src2, isa::Bcast b) {
  Context::VecArgs v;
  v.op = o, v.in = in, v.out = out;
  v.src1_buf = v.dst_buf = buf;
  v.src2_buf = Buffer::kAccumulator;
  v.src1 = v.dst = slot, v.src2 = src2;
  v.d0 = d0, v.d1 = d1, v.bcast = b;
  return v;
}

}  // namespace

void dequantize_tile(Context& c, Buffer buf, uint64_t slot, int64_t d0, int64_t d1, DType codes,
                     uint64_t kslot, DType out) {
  dequantize_tile_into(c, buf, slot, buf, slot, d0, d1, codes, kslot, out);
}

void dequantize_tile_into(Context& c, Buffer buf, uint64_t slot, Buffer dst_buf, uint64_t dst, int64_t d0,
                          int64_t d1, DType codes, uint64_t kslot, DType out) {
  subtract_zero_point(c, buf, slot, dst_buf, dst, d0, d1, codes, kslot);
  c.vec(tile_op(VecOp::kMul, DType::kFp32, out, dst_buf, dst, d0, d1, kslot + 4, isa::Bcast::kScalar));
}

void subtract_zero_point(Context& c, Buffer buf, uint64_t slot, Buffer dst_buf, uint64_t dst, int64_t d0,
                         int64_t d1, DType codes, uint64_t kslot, DType out) {
  Context::VecArgs v = tile_op(VecOp::kSub, codes, out, buf, slot, d0, d1, kslot + 0, isa::Bcast::kScalar);
  v.dst_buf = dst_buf, v.dst = dst;
  c.vec(v);
}

bool ChannelScaleMul::applies(DType a_dt, const QParams& a, DType b_dt, const QParams& b) {
  const bool codes = a_dt == DType::kUint8 || a_dt == DType::kInt8;
  return codes && a_dt == b_dt && a.dtype == a_dt && b.dtype == b_dt && b.zero_point == 0;
}

ChannelScaleMul::ChannelScaleMul(Context& c, const isa::numerics::QuantizedMultiplier& m, const QParams& a,
                                 const QParams& y, DType a_dt, DType y_dt, int64_t max_d0, Buffer buf)
    : c_(c), a_dt_(a_dt), y_dt_(y_dt), y_zp_(y.zero_point), max_d0_(max_d0), buf_(buf) {
  std::vector<int32_t> k(static_cast<size_t>(2 * max_d0 + 1));
  std::fill(k.begin(), k.begin() + max_d0, m.multiplier);
  std::fill(k.begin() + max_d0, k.end() - 1, m.shift);
  k.back() = -a.zero_point;
  segment_ = c.add_data(int32_bytes(k));
}

int64_t ChannelScaleMul::bytes_after(int64_t d0) { return 2 * round64(3 * d0 * 4) + 64; }

void ChannelScaleMul::prepare(uint64_t codes, int64_t d0) {
  codes_ = codes;
  d0_ = d0;
  const uint64_t rows = codes + static_cast<uint64_t>(round64(d0));  // [3][d0]: bias, M, shift
  const uint64_t zp = rows + static_cast<uint64_t>(round64(3 * d0 * 4));
  const uint64_t triples = zp + 64;  // [d0][3]
  const uint64_t n = static_cast<uint64_t>(2 * max_d0_ + 1) * 4;
  const Range seg{kDram, segment_, segment_ + n};
  c_.load(buf_, rows + static_cast<uint64_t>(d0 * 4), seg, segment_, DType::kInt32, {d0, 2, 1, 1},
          {max_d0_, 0, 0});
  c_.load(buf_, zp, seg, segment_ + static_cast<uint64_t>(2 * max_d0_ * 4), DType::kInt32, {1, 1, 1, 1},
          {0, 0, 0});
  Context::VecArgs v = tile_op(VecOp::kCopy, a_dt_, DType::kInt32, buf_, codes, d0, 1, 0, isa::Bcast::kNone);
  v.dst = rows;
  c_.vec(v);
  Context::VecArgs b =
      tile_op(VecOp::kMul, DType::kInt32, DType::kInt32, buf_, rows, d0, 1, zp, isa::Bcast::kScalar);
  b.src2_buf = buf_;
  c_.vec(b);
  Context::VecArgs t =
      tile_op(VecOp::kTranspose, DType::kInt32, DType::kInt32, buf_, rows, d0, 3, 0, isa::Bcast::kNone);
  t.dst = triples;
  c_.vec(t);
}

void ChannelScaleMul::apply(Buffer a_buf, uint64_t a_slot, uint64_t sums, Buffer dst_buf, uint64_t dst,
                            int64_t d0, int64_t d1, int64_t ch) const {
  Context::VecArgs v = tile_op(VecOp::kMul, a_dt_, DType::kInt32, a_buf, a_slot, d0, d1, 0, isa::Bcast::kRow);
  v.src2_buf = buf_, v.src2 = codes_ + static_cast<uint64_t>(ch);
  v.dst_buf = Buffer::kAccumulator, v.dst = sums;
  c_.vec(v);
  const uint64_t triples =
      codes_ + static_cast<uint64_t>(round64(d0_) + round64(3 * d0_ * 4) + 64 + ch * 3 * 4);
  Context::VecArgs o =
      tile_op(VecOp::kOutput, DType::kInt32, y_dt_, Buffer::kAccumulator, sums, d0, d1, 0, isa::Bcast::kRow);
  o.src2_buf = buf_, o.src2 = triples;
  o.dst_buf = dst_buf, o.dst = dst;
  o.imm0 = f32_imm(-INFINITY), o.imm1 = f32_imm(INFINITY), o.imm2 = y_zp_;
  c_.vec(o);
}

void quantize_tile(Context& c, Buffer buf, uint64_t slot, int64_t d0, int64_t d1, DType codes,
                   uint64_t kslot) {
  quantize_tile_into(c, buf, slot, buf, slot, d0, d1, codes, kslot);
}

void quantize_tile_into(Context& c, Buffer buf, uint64_t slot, Buffer dst_buf, uint64_t dst, int64_t d0,
                        int64_t d1, DType codes, uint64_t kslot) {
  c.vec(tile_op(VecOp::kDiv, DType::kFp32, DType::kInt32, buf, slot, d0, d1, kslot + 8, isa::Bcast::kScalar));
  Context::VecArgs v =
      tile_op(VecOp::kAdd, DType::kInt32, codes, buf, slot, d0, d1, kslot + 12, isa::Bcast::kScalar);
  v.dst_buf = dst_buf, v.dst = dst;
  c.vec(v);
}

void convert_tensor(Context& c, const DramTensor& src, const QParams* src_q, const DramTensor& dst,
                    const QParams* dst_q) {
  if (src.strided() ||
      dst.strided()) {  // a Concat's slice (backend/memory/concat_in_place.h): through a dense copy
    const DramTensor s = src.strided() ? dense_scratch(c, src) : src;
    if (src.strided()) copy_tensor(c, src, s);
    const DramTensor d = dst.strided() ? dense_scratch(c, dst) : dst;
    convert_tensor(c, s, src_q, d, dst_q);
    if (dst.strided()) copy_tensor(c, d, dst);
    return;
  }
  const DType from = src.dtype, to = dst.dtype;
  const int64_t total = std::max<int64_t>(1, num_elements(src.shape));
  const Buffer A = Buffer::kAccumulator;
  const uint64_t kslot = 0;  // 16 bytes of constants, then two slots
  load_conversion_constants(c, kslot, src_q, dst_q);
  const int64_t cap = (c.capacity(A) - 64) / 2 / 4 / 64 * 64;
  const int64_t chunk = std::max<int64_t>(64, std::min<int64_t>({total, cap, kMaxDim}));
  const uint64_t slot[2] = {64, 64 + static_cast<uint64_t>(round64(chunk * 4))};
  int next = 0;
  for (int64_t off = 0; off < total; off += chunk) {
    const int64_t n = std::min(chunk, total - off);
    const uint64_t s = slot[next];
    next ^= 1;
    c.load(A, s, src.range(), src.addr + static_cast<uint64_t>(off * isa::dtype_bytes(from)), from,
           {n, 1, 1, 1}, {0, 0, 0});
    DType cur = from;
    if (is_int_code(from)) {  // dequantize (straight into a float destination format)
      cur = is_int_code(to) ? DType::kFp32 : to;
      dequantize_tile(c, A, s, n, 1, from, kslot, cur);
    }
    if (is_int_code(to)) {  // quantize
      if (cur != DType::kFp32) {
        c.vec(tile_op(VecOp::kCopy, cur, DType::kFp32, A, s, n, 1, 0, isa::Bcast::kNone));
        cur = DType::kFp32;
      }
      quantize_tile(c, A, s, n, 1, to, kslot);
      cur = to;
    } else if (cur != to) {
      c.vec(tile_op(VecOp::kCopy, cur, to, A, s, n, 1, 0, isa::Bcast::kNone));
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

namespace {

// Element-wise ops (lower_binary, lower_unary, lower_batchnorm), pooling and Concat convert inside their
// tile loop under an int8 plan.
bool converts_in_tiles(const Node& n) {
  static const std::set<std::string> binary = {"Add", "Sub", "Mul", "Div", "Max", "Min", "Sum"};
  static const std::set<std::string> pool = {"AveragePool", "GlobalAveragePool", "MaxPool", "GlobalMaxPool"};
  if (n.domain.empty() && pool.count(n.op_type)) return n.outputs.size() == 1 || n.outputs[1].empty();
  if (n.domain.empty() && n.op_type == "Concat") return true;  // constant operands quantized on their way
  if (is_rowwise(n)) return true;                              // lower_rowwise
  if (n.domain.empty() && n.op_type == "BatchNormalization") return true;
  static const std::set<std::string> unary = {"Relu",       "Sigmoid",   "Tanh",       "Exp", "Sqrt",
                                              "Reciprocal", "Abs",       "Neg",        "Erf", "Clip",
                                              "HardSwish",  "LeakyRelu", "HardSigmoid"};
  if (n.op_type == "Transpose" && (n.domain.empty() || n.domain == kNpuDomain))
    return true;  // lower_transpose
  if (n.domain == kNpuDomain) return n.op_type == "Gelu";
  if (!n.domain.empty()) return false;
  return (binary.count(n.op_type) && n.num_given_inputs() == 2) || unary.count(n.op_type);
}

// An op that only selects or moves values (max pooling, Concat, Split, Slice, Transpose, Pad, Relu, the
// copies quant::shares_input_qparams lists: nearest Resize, DepthToSpace, ...) whose runtime inputs and
// outputs are all stored as codes of one QParams: it runs on the codes themselves, exactly. Returns the
// codes' dtype, or nullopt.
std::optional<DType> moves_codes(const Context& c, const quant::PrecisionPlan& plan, const Node& n) {
  static const std::set<std::string> ops = {"MaxPool",      "GlobalMaxPool", "Concat", "Split",  "Slice",
                                            "Transpose",    "Pad",           "Relu",   "Resize", "Upsample",
                                            "DepthToSpace", "SpaceToDepth",  "Expand", "Tile"};
  if (!(n.domain.empty() || (n.domain == kNpuDomain && n.op_type == "Transpose")) || !ops.count(n.op_type))
    return std::nullopt;
  if ((n.op_type == "Resize" || n.op_type == "Upsample") && !quant::shares_input_qparams(n))
    return std::nullopt;
  if (n.op_type == "MaxPool" && n.outputs.size() > 1 && !n.outputs[1].empty()) return std::nullopt;
  const QParams* first = nullptr;
  DType dt = DType::kFp32;
  auto same = [&](const std::string& v) {
    if (v.empty() || c.g.value(v).is_constant()) return true;
    auto t = c.tensors.find(v);
    auto q = plan.values.find(v);
    if (t == c.tensors.end() || q == plan.values.end() || !is_int_code(t->second.dtype)) return false;
    if (!first) {
      first = &q->second;
      dt = t->second.dtype;
      return true;
    }
    return t->second.dtype == dt && q->second.scale == first->scale &&
           q->second.zero_point == first->zero_point && q->second.dtype == first->dtype;
  };
  // Slice/Split take their extents from constant inputs; only input 0 (and Concat's all) carry data.
  const size_t data_inputs = n.op_type == "Concat" ? n.inputs.size() : 1;
  for (size_t k = 0; k < data_inputs && k < n.inputs.size(); ++k)
    if (!same(n.inputs[k])) return std::nullopt;
  for (const auto& o : n.outputs)
    if (!same(o)) return std::nullopt;
  // A constant data input (ViT's class token into its Concat) would be written as floats: not on codes.
  for (size_t k = 0; k < data_inputs && k < n.inputs.size(); ++k)
    if (!n.inputs[k].empty() && c.g.value(n.inputs[k]).is_constant()) return std::nullopt;
  if (!first) return std::nullopt;
  return dt;
}

}  // namespace

PlanScope::PlanScope(Context& c, const Node& n, Placement placement) : c_(c), n_(n) {
  if (!c.options.plan) return;
  const quant::PrecisionPlan& plan = *c.options.plan;
  active_ = true;
  saved_act_ = c.act;
  saved_esize_ = c.esize;
  const Precision p = plan.precision_of(n.name);
  int8_matrix_ = placement == Placement::kNpuMatrix && int8_matrix_mappable(plan, n);
  const DType compute = float_dtype(p);
  if (placement == Placement::kNpuMatrix && !int8_matrix_ && c.config.systolic_array.rate(compute) <= 0) {
    throw CompileError(
        fmt::format("layer '{}' runs in {} but the systolic array has no {} MACs "
                    "(systolic_array.{}_rate is 0); run it in int8 or another format",
                    n.name, quant::to_string(p), isa::kDTypeNames[static_cast<size_t>(compute)],
                    isa::kDTypeNames[static_cast<size_t>(compute)]));
  }
  c.act = compute;
  c.esize = isa::dtype_bytes(compute);
  if (placement == Placement::kNpuVector && p == Precision::kInt8) {
    if (const std::optional<DType> codes = moves_codes(c, plan, n)) {
      // Selecting or moving values is exact on codes of one QParams: the node runs on the codes.
      deferred_ = on_codes_ = true;
      c.act = *codes;
      c.esize = isa::dtype_bytes(*codes);
      return;
    }
  }
  deferred_ = placement == Placement::kNpuVector && p == Precision::kInt8 && converts_in_tiles(n);
  convert_io(deferred_);
}

void PlanScope::convert_io(bool defer_codes) {
  Context& c = c_;
  const Node& n = n_;
  const quant::PrecisionPlan& plan = *c.options.plan;
  const DType compute = c.act;
  auto layer = plan.layers.find(n.name);
  // The format node n needs for value v.
  auto wanted = [&](const std::string& v, DType stored) {
    if (stored == DType::kInt32) return stored;  // integer values stay int32
    if (int8_matrix_) {
      const quant::LayerQuant& L = layer->second;
      if (v == L.input || v == L.residual || v == L.output) return plan.values.at(v).dtype;
      if (!L.weight_is_constant && v == L.weight) return plan.values.at(v).dtype;
    }
    return compute;
  };
  auto qp = [&](const std::string& v, DType t) -> const QParams* {
    if (!is_int_code(t)) return nullptr;
    return &plan.values.at(v);
  };
  // Codes the node converts itself (deferred): listed, not copied.
  auto deferred = [&](const std::string& v, DType stored) {
    if (!defer_codes || !is_int_code(stored) || !plan.values.count(v)) return false;
    c.codes[v] = &plan.values.at(v);
    return true;
  };
  for (const auto& s : n.inputs) {
    if (s.empty() || saved_.count(s) || !c.tensors.count(s)) continue;
    const DramTensor t = c.tensors.at(s);
    const DType want = wanted(s, t.dtype);
    if (want == t.dtype || deferred(s, t.dtype)) continue;
    DramTensor conv = scratch_like(c, t, want);
    convert_tensor(c, t, qp(s, t.dtype), conv, qp(s, want));
    saved_[s] = t;
    c.tensors[s] = conv;
  }
  for (const auto& o : n.outputs) {
    if (o.empty() || !c.tensors.count(o) || saved_.count(o)) continue;
    const DramTensor t = c.tensors.at(o);
    const DType want = wanted(o, t.dtype);
    if (want == t.dtype || deferred(o, t.dtype)) continue;
    DramTensor scratch = scratch_like(c, t, want);
    saved_[o] = t;
    c.tensors[o] = scratch;
    pending_out_.push_back({scratch, o});
  }
}

void PlanScope::materialize() {
  if (!active_ || !deferred_) return;
  deferred_ = false;
  c_.codes.clear();
  c_.act = float_dtype(c_.options.plan->precision_of(n_.name));
  c_.esize = isa::dtype_bytes(c_.act);
  convert_io(false);
}

void PlanScope::finish() {
  if (!active_ || finished_) return;
  finished_ = true;
  c_.codes.clear();
  const quant::PrecisionPlan& plan = *c_.options.plan;
  // The report's int8 scheme (LayerPlan::int8_scheme), unless the lowering named its own (lut).
  if (c_.plan && c_.plan->int8_scheme.empty() && c_.plan->placement != Placement::kHost &&
      plan.precision_of(n_.name) == Precision::kInt8) {
    c_.plan->int8_scheme = int8_matrix_ ? (plan.layers.at(n_.name).float_epilogue ? "integer+float-epilogue"
                                           : plan.layers.at(n_.name).lut_epilogue ? "integer+lut-epilogue"
                                                                                  : "integer")
                           : on_codes_  ? "codes"
                                        : "float";
  }
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
  c_.codes.clear();
  // Unwinding (or a lowering that gave up and fell back to the host): restore without emitting.
  for (const auto& [name, t] : saved_) c_.tensors[name] = t;
  c_.act = saved_act_;
  c_.esize = saved_esize_;
}

}  // namespace npusim::compiler::backend
