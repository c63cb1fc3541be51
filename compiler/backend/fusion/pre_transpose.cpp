// A graph input's layout change done in its conv's loads (pre_transpose.h).
#include "compiler/backend/fusion/pre_transpose.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "compiler/backend/fusion/pre_affine.h"
#include "compiler/backend/int8/int8.h"
#include "compiler/backend/memory/movement.h"
#include "compiler/backend/vector/vector_lowerings.h"
#include "compiler/passes/lowered.h"
#include "compiler/quant/precision.h"
#include "isa/numerics.h"

namespace npusim::compiler::backend {

using isa::Buffer;
using isa::DType;
using isa::VecOp;

namespace {

// # int8: fp32 elements of each work half: enough for the conv's padding rows and one image row between them
// (the fewest rows a chunk takes), at least 2048, two halves at most a quarter of the accumulator.
constexpr int64_t kMinWorkElems = 2048;

// Whether t is a dense NCHW (ONNX order) 4-D tensor.
bool dense_nchw(const DramTensor& t) {
  if (t.shape.size() != 4 || t.strided() || !t.view_split.empty()) return false;
  return t.layout.empty() || t.layout == std::vector<int>{0, 1, 2, 3};
}

// The chunk of one image's padded tile rows [first padded row, + rows) the source fills: source rows
// [r0 + u, r0 + v) with `top` and `bottom` padding rows, `cols` source columns from c0 with `left` and
// `right` padding columns, into `dst` of `buf` ([rows][cols + left + right][C] once transposed).
struct Chunk {
  int64_t u = 0, v = 0, top = 0, bottom = 0;
};

// The chunks of a box of `rows` source rows padded by pt / pb, at most `limit` padded rows each, every chunk
// holding at least one source row (limit > pt + pb).
std::vector<Chunk> chunks(int64_t rows, int64_t pt, int64_t pb, int64_t limit) {
  std::vector<Chunk> out;
  for (int64_t u = 0; u < rows;) {
    Chunk k;
    k.u = u, k.top = u == 0 ? pt : 0;
    int64_t n = std::min(rows - u, limit - k.top);
    if (u + n == rows && k.top + n + pb > limit) n = limit - k.top - pb;
    k.v = u + n, k.bottom = k.v == rows ? pb : 0;
    out.push_back(k);
    u = k.v;
  }
  return out;
}

}  // namespace

int64_t pre_transpose_reader(const Graph& g, size_t i) {
  const Node& n = g.nodes[i];
  if (n.op_type != "Transpose" || !n.has_attr(kLayoutChange) || n.inputs.empty() || n.outputs.size() != 1)
    return -1;
  if (n.attr_string(kPlacement, "") != "vector") return -1;
  const std::string& xv = n.outputs[0];
  if (std::find(g.outputs.begin(), g.outputs.end(), xv) != g.outputs.end()) return -1;
  const std::vector<int> readers = g.consumers(xv);
  if (readers.size() != 1 || readers[0] <= static_cast<int>(i)) return -1;
  const Node& conv = g.nodes[static_cast<size_t>(readers[0])];
  if (conv.op_type != "Conv" || conv.attr_string(kPlacement, "") != "matrix" || conv.inputs.size() < 2 ||
      conv.inputs[0] != xv || !g.value(conv.inputs[1]).is_constant())
    return -1;
  for (size_t k = 1; k < conv.inputs.size(); ++k)
    if (conv.inputs[k] == xv) return -1;
  // Windows that do not overlap (stride at least the kernel, a patchify stem): the conv's loads read each
  // input pixel once, so the transposes do the Transpose's own vector work and x's DRAM round trip is saved.
  // Overlapping windows (a 3x3 stride-2 stem) load their halo rows again, each load transposing them again:
  // on edge MobileNetV2's stem line buffer took 187 k -> 198 k cycles fp16, 122 k -> 145 k int8, ResNet-50's
  // conv1 at batch 8 on tpu-v1 230 k -> 265 k (docs/models.md, "The input transpose in its conv's loads").
  const std::vector<int64_t> w = g.value(conv.inputs[1]).shape;
  const std::vector<int64_t> strides = conv.attr_ints("strides", {1, 1});
  const std::vector<int64_t> dil = conv.attr_ints("dilations", {1, 1});
  // A 1x1 conv's loads of x take other forms (the micro-model conv:...,R=1,S=1 did not load it through this
  // hook): windows of at least two pixels each way only.
  if (w.size() != 4 || w[2] < 2 || w[3] < 2 || strides.size() != 2 || dil.size() != 2 || strides[0] < w[2] ||
      strides[1] < w[3] || dil[0] != 1 || dil[1] != 1 || conv.attr_ints("pads", {0, 0, 0, 0}).size() != 4 ||
      conv.attr_string("auto_pad", "NOTSET") != "NOTSET")
    return -1;
  return readers[0];
}

void plan_pre_transpose(Context& c, size_t i) {
  if (c.fusion.pre_transpose.node >= 0) return;  // planned earlier, its reader still ahead
  const Graph& g = c.g;
  const Node& n = g.nodes[i];
  if (!c.options.keep_on_chip || g.nhwc_io || c.shared_capacity() > 0) return;
  const int64_t j = pre_transpose_reader(g, i);
  if (j < 0) return;
  const Node& conv = g.nodes[static_cast<size_t>(j)];
  if (!reader_map_free(c, n, conv)) return;
  const std::string &xv = n.outputs[0], &yv = n.inputs[0];
  if (!c.tensors.count(xv) || !c.tensors.count(yv)) return;
  const DramTensor& y = c.tensor(yv);
  const DramTensor& x = c.tensor(xv);
  if (!dense_nchw(y) || x.shape != y.shape || x.strided() || !x.view_split.empty() || x.layout != kNhwc)
    return;
  PreTranspose p;
  p.H = y.shape[2], p.W = y.shape[3], p.C = y.shape[1];
  // # int8: fp32 in, the conv's codes out (the Transpose's own tile loop quantizes alike).
  const quant::PrecisionPlan* plan = c.options.plan;
  const quant::QParams* qx = plan ? plan->qparams(xv) : nullptr;
  if (isa::numerics::is_integer(y.dtype)) return;
  const std::vector<int64_t> pads = conv.attr_ints("pads", {0, 0, 0, 0});
  if (isa::numerics::is_integer(x.dtype)) {
    if (!qx || !plan || plan->precision_of(conv.name) != quant::Precision::kInt8 ||
        !int8_matrix_mappable(*plan, conv) || y.dtype != DType::kFp32 || x.dtype != qx->dtype ||
        isa::dtype_bytes(x.dtype) != 1)
      return;
    // The most a chunk needs: the padding rows and one row of padded columns.
    const int64_t need = (pads[0] + pads[2] + 1) * (p.W + pads[1] + pads[3]) * p.C;
    const int64_t acc = scratchpad_capacity(c.config, Buffer::kAccumulator) - c.fusion.acc_reserved;
    p.work_elems = std::max(kMinWorkElems, need);
    if (64 + 2 * p.work_elems * 4 > acc / 4) return;
    p.qx = qx;
    p.reserved = 64 + 2 * p.work_elems * 4;
  } else if (x.dtype != y.dtype || isa::numerics::is_integer(x.dtype)) {
    return;
  }
  p.y_dtype = y.dtype, p.x_dtype = x.dtype;
  p.node = static_cast<int64_t>(i);
  p.reader = j;
  p.x = x.range(), p.y = y.range(), p.y_addr = y.addr;
  p.bytes = static_cast<int64_t>(x.bytes);
  c.fusion.pre_transpose = p;
}

bool pre_transpose_member(Context& c, size_t i, LayerPlan& plan) {
  const PreTranspose& p = c.fusion.pre_transpose;
  if (p.node != static_cast<int64_t>(i)) return false;
  const Node& n = c.g.nodes[i];
  const std::string& reader = c.g.nodes[static_cast<size_t>(p.reader)].name;
  plan.mapping = fmt::format(
      "VEC transpose{} in the loads of '{}' (each of its input tiles loaded from this layer's NCHW input a "
      "channel plane at a time and transposed into pixels: this layer's output never goes to DRAM)",
      p.qx ? " + quantize (fp32 work rows of the accumulator)" : "", reader);
  reader_map_plan(plan, n, reader, p.bytes, "pre_transpose");
  return true;
}

void begin_pre_transpose(Context& c, size_t i) {
  PreTranspose& p = c.fusion.pre_transpose;
  if (!p.carried_by(static_cast<int64_t>(i)) || !p.qx) return;
  const int64_t cap = c.capacity(Buffer::kAccumulator);
  if (p.reserved * 4 > cap) throw std::logic_error("pre_transpose: no accumulator room for the work rows");
  p.conv_at = static_cast<uint64_t>(cap - p.reserved) / 64 * 64;
  p.work_at = p.conv_at + 64;
  load_conversion_constants(c, p.conv_at, nullptr, p.qx);
  c.fusion.acc_reserved += p.reserved;
}

bool load_pre_transpose(Context& c, Buffer buf, uint64_t sram, const Range& dram_range, uint64_t dram_addr,
                        DType t, const std::array<int64_t, 4>& s, const std::array<int64_t, 3>& st,
                        const std::array<int64_t, 4>& pads, int64_t pad_value) {
  PreTranspose& p = c.fusion.pre_transpose;
  if (!p.serves(static_cast<int64_t>(c.layer), dram_range)) return false;
  const int64_t xes = isa::dtype_bytes(t), yes = isa::dtype_bytes(p.y_dtype), C = p.C, HW = p.H * p.W;
  const int64_t e0 = static_cast<int64_t>(dram_addr - p.x.begin) / xes;
  const int64_t px0 = e0 / C, img0 = px0 / HW, r0 = px0 % HW / p.W, c0 = px0 % p.W;
  // Boxes of whole pixels: a rectangle of rows and columns (a conv's tile, padded), or whole image rows (a
  // GEMM's run of pixels); images a whole image apart.
  int64_t cols = s[1], rows = s[2];
  const bool pixels = t == p.x_dtype && e0 % C == 0 && s[0] == C && (s[1] == 1 || st[0] == C) &&
                      (s[3] == 1 || st[2] == HW * C);
  const bool rect = c0 + s[1] <= p.W && (s[2] == 1 || st[1] == p.W * C);
  const bool run = c0 == 0 && s[2] == 1 && s[1] % p.W == 0 && pads == std::array<int64_t, 4>{0, 0, 0, 0};
  if (!pixels || !(rect || run) ||
      (p.qx && pads != std::array<int64_t, 4>{0, 0, 0, 0} && pad_value != p.qx->zero_point) ||
      (!p.qx && pad_value != 0))
    throw std::logic_error("pre_transpose: a load box of the Transpose's output that is not whole pixels");
  if (!rect) cols = p.W, rows = s[1] / p.W;
  if (r0 + rows > p.H) throw std::logic_error("pre_transpose: a load box past the image");
  const int64_t pt = pads[0], pb = pads[1], pl = pads[2], pr = pads[3];
  const int64_t wp = cols + pl + pr, tile_rows = rows + pt + pb;
  // The padded rows a chunk may take: one VEC transpose's d0 (kMaxDim), # int8 a work half.
  const int64_t limit = std::min(kMaxDim, p.qx ? p.work_elems / C : kMaxDim) / wp;
  if (limit <= pt + pb) throw std::logic_error("pre_transpose: a padded row exceeds the work rows");
  for (int64_t img = 0; img < s[3]; ++img) {
    const uint64_t tile = sram + static_cast<uint64_t>(img * tile_rows * wp * C * xes);
    for (const Chunk& k : chunks(rows, pt, pb, limit)) {
      const int64_t first = k.u == 0 ? 0 : pt + k.u;  // the chunk's first padded row in the tile
      const int64_t n = k.v - k.u + k.top + k.bottom, elems = n * wp * C;
      const uint64_t dst = tile + static_cast<uint64_t>(first * wp * C * xes);
      const uint64_t src =
          p.y_addr + static_cast<uint64_t>((((img0 + img) * C * p.H) + r0 + k.u) * p.W + c0) * yes;
      Buffer at_buf = buf;
      uint64_t at = dst;
      if (p.qx) {
        at_buf = Buffer::kAccumulator;
        at = p.work_at + static_cast<uint64_t>(p.next * p.work_elems * 4);
        p.next ^= 1;
      }
      // Channel planes [C][n][wp], padded with zeros (0.0, or the codes' zero point once quantized).
      c.load(at_buf, at, p.y, src, p.y_dtype, {1, cols, k.v - k.u, C}, {1, p.W, HW},
             {k.top, k.bottom, pl, pr}, 0);
      Context::VecArgs v;
      v.op = VecOp::kTranspose, v.in = v.out = p.y_dtype, v.src1_buf = v.dst_buf = at_buf;
      v.src1 = v.dst = at, v.d0 = n * wp, v.d1 = C, v.d2 = 1;
      c.vec(v);
      if (p.qx) quantize_tile_into(c, at_buf, at, buf, dst, elems, 1, t, p.conv_at);
    }
  }
  ++p.loads;
  return true;
}

int64_t pre_transpose_declined(Context& c, size_t i) {
  const int64_t k = reader_map_declined(c.fusion.pre_transpose, c.fusion.acc_reserved, i);
  if (k < 0) return -1;
  // Its own lowering now, before the reader's host call (which reads x): tagged with its own layer, under its
  // own precision scope (# int8: the codes converted in its tile loop), as the layer loop would lower it.
  const Node& n = c.g.nodes[static_cast<size_t>(k)];
  LayerPlan own;
  own.name = n.name;
  {
    const Context::OtherLayer other(c, &own, static_cast<uint32_t>(k));
    PlanScope scope(c, n, Placement::kNpuVector);
    std::string why;
    if (!lower_transpose(c, n, &why))
      throw std::logic_error(
          fmt::format("pre_transpose: '{}' declined after its reader did: {}", n.name, why));
    scope.finish();
  }
  return -1;
}

void finish_pre_transpose(Context& c, size_t i, const LayerPlan& plan) {
  finish_reader_map(c, c.fusion.pre_transpose, c.fusion.acc_reserved, i, plan, "pre_transpose",
                    "the transpose");
}

}  // namespace npusim::compiler::backend
