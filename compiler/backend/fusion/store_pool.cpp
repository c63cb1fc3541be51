// An int8 SE pool in its producer's STOREs (see store_pool.h).
#include "compiler/backend/fusion/store_pool.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "compiler/backend/fusion/se_fusion.h"
#include "compiler/backend/int8/int8.h"
#include "compiler/quant/emulate.h"
#include "compiler/quant/precision.h"
#include "isa/numerics.h"

namespace npusim::compiler::backend {

namespace {

using isa::Buffer;
using isa::DType;
using isa::VecOp;

// The largest VEC dwconv window side (isa.h: win_h, win_w).
constexpr int64_t kMaxWindow = 255;

bool is_pool_input(const Range& a, const StorePool& p) { return a.begin == p.x.begin && a.end == p.x.end; }

// Nodes between a conv and the pool of its output (its fused activation's).
constexpr size_t kMaxPoolGap = 4;

// The global pool of conv i's output x under the integer scheme (quant::integer_global_average_pool).
struct PoolOfCodes {
  size_t pool = 0;
  const DramTensor* y = nullptr;
  int64_t y_zero_point = 0;
  int32_t stage[3] = {0, 0, 0};  // bias -H*W*x.zero_point, multiplier, shift
};

std::optional<PoolOfCodes> pool_of_codes(const Context& c, size_t i, const DramTensor& x) {
  if (!c.options.keep_on_chip || c.g.nhwc_io || c.shared_capacity() > 0) return std::nullopt;
  const std::string& xv = c.g.nodes[i].outputs[0];
  // X read by others too (an SE block's Mul, its residual): stored whatever the pool does.
  if (c.g.consumers(xv).size() < 2) return std::nullopt;
  const size_t last = std::min(c.g.nodes.size(), i + 1 + kMaxPoolGap);
  for (size_t k = i + 1; k < last; ++k) {
    const Node& n = c.g.nodes[k];
    if (n.op_type != "GlobalAveragePool" || n.inputs.empty() || n.inputs[0] != xv) continue;
    if (n.outputs.size() != 1 || !c.tensors.count(n.outputs[0]) || c.folding.folded(n)) return std::nullopt;
    // Where the SE group holds X for its Mul, the pool loads it into the held region (se_fusion.h).
    if (se_mul(c, k) >= 0 && se_holds_fit(c, c.fusion.input_reserved, x.bytes)) return std::nullopt;
    // A mapping file may place or tile the pool (what --mapping-out writes of it, placement vector, keeps
    // it).
    if (const LayerMapping* m = c.options.mapping ? c.options.mapping->find(n.name) : nullptr;
        m && (m->has_tiling() || (m->placement && *m->placement != Placement::kNpuVector)))
      return std::nullopt;
    const DramTensor& y = c.tensor(n.outputs[0]);
    const auto qx = c.options.plan->values.find(xv);
    const auto qy = c.options.plan->values.find(n.outputs[0]);
    if (num_elements(y.shape) != x.shape[1] || qx == c.options.plan->values.end() ||
        qy == c.options.plan->values.end() || qx->second.dtype != x.dtype || qy->second.dtype != y.dtype ||
        (y.dtype != DType::kInt8 && y.dtype != DType::kUint8))
      return std::nullopt;
    const std::optional<isa::numerics::QuantizedMultiplier> m =
        quant::integer_global_average_pool(c.g, *c.options.plan, n);
    // Exact int32 sums: fewer than 2^23 pixels of 8-bit codes.
    const int64_t HW = x.shape[2] * x.shape[3];
    if (!m || HW >= (int64_t{1} << 23)) return std::nullopt;
    PoolOfCodes p{k,
                  &y,
                  qy->second.zero_point,
                  {static_cast<int32_t>(-HW * qx->second.zero_point), m->multiplier, m->shift}};
    return p;
  }
  return std::nullopt;
}

}  // namespace

void plan_store_pool(Context& c, size_t i) {
  StorePool& p = c.fusion.store_pool;
  if (p.taken) return;  // a pool taken by an earlier layer, its own layer still ahead
  p = StorePool{};
  const Node& n = c.g.nodes[i];
  if (!c.options.plan || n.op_type != "Conv" || n.outputs.size() != 1 || !c.tensors.count(n.outputs[0]))
    return;
  // Its output through a line buffer, under an affine map, or kept on chip for its reader: theirs.
  if (c.fusion.conv_pool != nullptr || c.fusion.post_affine.bn >= 0 || !c.fusion.keep_output.empty()) return;
  const DramTensor& x = c.tensor(n.outputs[0]);
  // A depthwise conv may move to the vector unit, whose epilogue pools its bands (se_pool_fusion.h).
  if (n.attr_int("group", 1) > 1 && x.shape.size() == 4 && n.attr_int("group", 1) == x.shape[1]) return;
  if (x.strided() || x.shape.size() != 4 || x.shape[0] != 1 || !x.nhwc_in_memory() ||
      (x.dtype != DType::kInt8 && x.dtype != DType::kUint8))
    return;
  const std::optional<PoolOfCodes> b = pool_of_codes(c, i, x);
  if (!b) return;
  const int64_t C = x.shape[1], W = x.shape[3];
  const int64_t ones = std::max(C, std::min(W * C, int64_t{1} << 16));
  const int64_t sums = round64(C * 4), pooled = round64(C);
  const int64_t reserved = round64(ones) + 2 * sums + 64 + pooled;
  const int64_t cap = c.capacity(Buffer::kInput);
  if (reserved * 4 > cap) return;  // three quarters stay for the conv's own tiles
  p.pool = static_cast<int64_t>(b->pool);
  p.producer = static_cast<uint32_t>(i);
  p.x = x.range(), p.y = b->y->range();
  p.channels = C;
  p.dtype = x.dtype, p.y_dtype = b->y->dtype, p.y_zero_point = b->y_zero_point;
  p.x_bytes = num_elements(x.shape) * isa::dtype_bytes(x.dtype);
  p.ones_elems = ones;
  p.ones = static_cast<uint64_t>(cap - reserved);
  p.sums = p.ones + static_cast<uint64_t>(round64(ones));
  p.part = p.sums + static_cast<uint64_t>(sums);
  p.stage = p.part + static_cast<uint64_t>(sums);
  p.pooled = p.stage + 64;
  p.reserved = reserved;
  // The unit weights, the sums' zeros and the output stage, loaded once for the conv's tiles.
  const uint64_t w = c.add_data(std::vector<uint8_t>(static_cast<size_t>(ones), 1));
  c.load(Buffer::kInput, p.ones, Range{kDram, w, w + static_cast<uint64_t>(ones)}, w, DType::kInt8,
         {ones, 1, 1, 1}, {0, 0, 0});
  const uint64_t z = c.add_data(std::vector<uint8_t>(static_cast<size_t>(C * 4), 0));
  c.load(Buffer::kInput, p.sums, Range{kDram, z, z + static_cast<uint64_t>(C * 4)}, z, DType::kInt32,
         {C, 1, 1, 1}, {0, 0, 0});
  const uint64_t st = c.add_data(int32_bytes({b->stage[0], b->stage[1], b->stage[2]}));
  c.load(Buffer::kInput, p.stage, Range{kDram, st, st + 12}, st, DType::kInt32, {3, 1, 1, 1}, {0, 0, 0});
  c.fusion.input_reserved += reserved;
}

void store_pool(Context& c, Buffer buf, uint64_t sram, const Range& dram_range, uint64_t dram_addr, DType t,
                const std::array<int64_t, 4>& s, const std::array<int64_t, 3>& st) {
  StorePool& p = c.fusion.store_pool;
  if (p.pool < 0 || p.producer != c.layer || !is_pool_input(dram_range, p)) return;
  const int64_t C = p.channels;
  const int64_t e0 = static_cast<int64_t>(dram_addr - p.x.begin), n0 = e0 % C;
  // The box's pixels lie dense in SRAM, d0 channels each: a channel chunk of whole rows apart, or rows of
  // whole pixels.
  const bool rows_aligned =
      (s[1] == 1 || st[0] % C == 0) && (s[2] == 1 || st[1] % C == 0) && (s[3] == 1 || st[2] % C == 0);
  int64_t d0 = 0;
  if (rows_aligned && n0 + s[0] <= C)
    d0 = s[0];
  else if (rows_aligned && n0 == 0 && s[0] % C == 0)
    d0 = C;
  if (t != p.dtype || d0 == 0) {
    p.unsummed = true;
    return;
  }
  const int64_t pixels = s[0] / d0 * s[1] * s[2] * s[3];
  // Windows of d1 x d2 pixels: d1 the largest divisor of the pixels the window and the unit weights take.
  const int64_t w_max = std::min(kMaxWindow, p.ones_elems / d0);
  int64_t d1 = 1;
  for (int64_t k = std::min(pixels, w_max); k >= 1; --k) {
    if (pixels % k == 0) {
      d1 = k;
      break;
    }
  }
  const int64_t rows = pixels / d1, h_max = std::min(kMaxWindow, p.ones_elems / (d0 * d1));
  const auto es = static_cast<uint64_t>(isa::dtype_bytes(t));
  const uint64_t sums = p.sums + static_cast<uint64_t>(n0 * 4);
  for (int64_t r = 0; r < rows; r += h_max) {
    const int64_t h = std::min(h_max, rows - r);
    Context::VecArgs v;
    v.op = VecOp::kDwConv, v.in = t, v.out = DType::kInt32;
    v.src1_buf = buf, v.src1 = sram + static_cast<uint64_t>(r * d1 * d0) * es;
    v.src2_buf = Buffer::kInput, v.src2 = p.ones;
    v.dst_buf = Buffer::kInput, v.dst = p.part;
    v.d0 = d0, v.d1 = d1, v.d2 = h, v.win_h = h, v.win_w = d1, v.str_h = 1, v.str_w = 1;
    c.vec(v);
    Context::VecArgs a;
    a.op = VecOp::kAdd, a.in = a.out = DType::kInt32;
    a.src1_buf = a.src2_buf = a.dst_buf = Buffer::kInput;
    a.src1 = a.dst = sums, a.src2 = p.part, a.d0 = d0;
    c.vec(a);
  }
  ++p.stores;
}

void finish_store_pool(Context& c, size_t i, LayerPlan& plan) {
  StorePool& p = c.fusion.store_pool;
  if (p.pool < 0 || p.taken || p.producer != i) return;
  c.fusion.input_reserved -= p.reserved;
  p.reserved = 0;
  if (p.stores == 0 || p.unsummed || plan.placement != Placement::kNpuMatrix) {
    p = StorePool{};
    return;
  }
  // The pool's output stage on the sums, then its codes.
  const int64_t before = c.em.size();
  Context::VecArgs o;
  o.op = VecOp::kOutput, o.in = DType::kInt32, o.out = p.y_dtype, o.bcast = isa::Bcast::kScalar;
  o.src1_buf = Buffer::kInput, o.src1 = p.sums, o.src2_buf = Buffer::kInput, o.src2 = p.stage;
  o.dst_buf = Buffer::kInput, o.dst = p.pooled, o.d0 = p.channels;
  o.imm0 = f32_imm(-INFINITY), o.imm1 = f32_imm(INFINITY), o.imm2 = p.y_zero_point;
  c.vec(o);
  c.store(Buffer::kInput, p.pooled, p.y, p.y.begin, p.y_dtype, {p.channels, 1, 1, 1}, {0, 0, 0});
  plan.instructions += c.em.size() - before;
  p.taken = true;
}

bool store_pool_member(Context& c, size_t i, LayerPlan& plan) {
  const StorePool p = c.fusion.store_pool;
  if (!p.taken || p.pool != static_cast<int64_t>(i)) return false;
  c.fusion.store_pool = StorePool{};
  const Node& n = c.g.nodes[i];
  const std::string& producer = c.g.nodes[p.producer].name;
  plan.mapping = fmt::format(
      "int32 sums of the {} channels' codes by a VEC dwconv of unit weights on each output tile of the conv "
      "'{}' (where its epilogue leaves it before its STORE), added, then one output stage",
      p.channels, producer);
  plan.int8_scheme = "integer";
  plan.fused_into = producer;
  plan.on_chip_input = n.inputs[0];
  plan.on_chip_bytes_saved = p.x_bytes;
  plan.on_chip_input_in_dram = true;
  plan.fusion_group = "store_pool:" + producer;
  return true;
}

}  // namespace npusim::compiler::backend
