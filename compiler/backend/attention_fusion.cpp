// Attention's score -> softmax -> value as one layer (see attention_fusion.h).
#include "compiler/backend/attention_fusion.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "compiler/backend/movement.h"
#include "compiler/backend/rowwise.h"
#include "compiler/passes/lowered.h"

namespace npusim::compiler::backend {

using isa::Bcast;
using isa::Buffer;
using isa::DType;
using isa::VecOp;

namespace {

// The block's tensors and shapes: G heads (the batch dims), Sq query rows, Sk keys, dk, dv.
struct Chain {
  const DramTensor *q = nullptr, *kt = nullptr, *v = nullptr, *y = nullptr;
  std::string scores, probs;
  int64_t G = 1, Sq = 0, Sk = 0, dk = 0, dv = 0;
};

bool dense_onnx_order(const DramTensor& t) {
  if (t.strided()) return false;
  for (size_t k = 0; k < t.layout.size(); ++k)
    if (t.layout[k] != static_cast<int>(k)) return false;
  return true;
}

bool plain_matmul(const Graph& g, const Node& n) {
  return n.domain.empty() && n.op_type == "MatMul" && n.num_given_inputs() == 2 && n.outputs.size() == 1 &&
         !n.has_attr(kActivation) && !n.has_attr(kResidualInput) && !g.value(n.inputs[0]).is_constant() &&
         !g.value(n.inputs[1]).is_constant();
}

// A value read only by node `reader` and not a graph output.
bool only_read_by(const Graph& g, const std::string& v, size_t reader) {
  for (const std::string& o : g.outputs)
    if (o == v) return false;
  const std::vector<int> r = g.consumers(v);
  return r.size() == 1 && r[0] == static_cast<int>(reader);
}

// Why nodes i, i+1, i+2 are not an attention block fusion takes ("" = they are), and the chain.
std::string match(const Context& c, size_t i, Chain* ch) {
  if (!c.options.keep_on_chip) return "fusion is off";
  if (c.options.plan) return "a precision plan (int8) is in force";
  if (c.g.nhwc_io || c.shared_capacity() > 0) return "one scratchpad for inputs and weights";
  if (c.on_chip.pending) return "a value is held on chip";
  const Graph& g = c.g;
  if (i + 2 >= g.nodes.size()) return "no room for a block";
  const Node &a = g.nodes[i], &s = g.nodes[i + 1], &b = g.nodes[i + 2];
  if (!plain_matmul(g, a) || !plain_matmul(g, b)) return "not two plain MatMuls";
  if (!s.domain.empty() || s.op_type != "Softmax" || s.inputs[0] != a.outputs[0] || b.inputs[0] != s.outputs[0])
    return "not MatMul -> Softmax -> MatMul";
  if (!only_read_by(g, a.outputs[0], i + 1) || !only_read_by(g, s.outputs[0], i + 2)) return "intermediates read elsewhere";
  if (c.options.mapping) {
    for (size_t k = i; k <= i + 2; ++k) {
      const LayerMapping* m = c.options.mapping->find(g.nodes[k].name);
      if (m && (m->has_tiling() || m->has_vector_tiling() ||
                (m->placement && *m->placement != (k == i + 1 ? Placement::kNpuVector : Placement::kNpuMatrix))))
        return "a mapping file imposes the layer-by-layer program";
    }
  }
  for (const std::string& v : {a.inputs[0], a.inputs[1], b.inputs[1], b.outputs[0], a.outputs[0], s.outputs[0]}) {
    auto t = c.tensors.find(v);
    if (t == c.tensors.end() || !dense_onnx_order(t->second) || t->second.dtype != c.act) return "a tensor is not dense";
  }
  ch->q = &c.tensor(a.inputs[0]), ch->kt = &c.tensor(a.inputs[1]), ch->v = &c.tensor(b.inputs[1]);
  ch->y = &c.tensor(b.outputs[0]);
  ch->scores = a.outputs[0], ch->probs = s.outputs[0];
  const Shape &q = ch->q->shape, &kt = ch->kt->shape, &v = ch->v->shape, &y = ch->y->shape;
  const size_t r = q.size();
  if (r < 2 || kt.size() != r || v.size() != r || y.size() != r) return "ranks differ";
  for (size_t d = 0; d + 2 < r; ++d) {
    if (kt[d] != q[d] || v[d] != q[d]) return "broadcast batch dims";
    ch->G *= q[d];
  }
  ch->Sq = q[r - 2], ch->dk = q[r - 1], ch->Sk = kt[r - 1], ch->dv = v[r - 1];
  if (kt[r - 2] != ch->dk || v[r - 2] != ch->Sk) return "shapes do not chain";
  const std::optional<RowwiseForm> f = rowwise_form(g, s);
  if (!f || f->row != ch->Sk || f->rows != ch->G * ch->Sq) return "the Softmax is not over the keys";
  if (std::max({ch->Sk, ch->dk, ch->dv, ch->Sq}) > kMaxDim) return "too long";
  return "";
}

// One candidate: query rows per block and whether K^T and V are double-buffered across heads.
struct Blocking {
  int64_t rows = 0;
  int sets = 1;
};

// SRAM bytes of each scratchpad a blocking takes (0 when it does not fit).
struct Footprint {
  int64_t input = 0, weight = 0, acc = 0;
};

Footprint footprint(const Context& c, const Chain& ch, const Blocking& b) {
  const int64_t es = c.esize, r = b.rows;
  Footprint f;
  f.weight = b.sets * (round64(ch.dk * ch.Sk * es) + round64(ch.Sk * ch.dv * es)) + round64(r * ch.Sk * es);
  f.input = 2 * (round64(r * ch.dk * es) + round64(r * ch.Sk * es));
  f.acc = 2 * (round64(r * ch.Sk * 4) + round64(r * ch.dv * 4) + round64(r * es));
  return f;
}

bool fits(const Context& c, const Footprint& f) {
  return f.input <= c.capacity(Buffer::kInput) && f.weight <= c.capacity(Buffer::kWeight) &&
         f.acc <= c.capacity(Buffer::kAccumulator);
}

// Emits the block. `round_trip`: the scores and probabilities go to their DRAM tensors and come back
// (the layer-by-layer program's traffic, for the costing).
void emit(Context& c, const Chain& ch, const Blocking& b, bool round_trip) {
  const int64_t es = c.esize, r = b.rows;
  const Footprint f = footprint(c, ch, b);
  SramAlloc in = c.slots(Buffer::kInput, f.input), w = c.slots(Buffer::kWeight, f.weight),
            acc = c.slots(Buffer::kAccumulator, f.acc);
  uint64_t kt_at[2] = {0, 0}, v_at[2] = {0, 0}, q_at[2], p_at[2], s_at[2], o_at[2], m_at[2];
  for (int k = 0; k < b.sets; ++k) {
    kt_at[k] = w.take(static_cast<uint64_t>(ch.dk * ch.Sk * es));
    v_at[k] = w.take(static_cast<uint64_t>(ch.Sk * ch.dv * es));
  }
  const uint64_t scratch_at = w.take(static_cast<uint64_t>(r * ch.Sk * es));
  for (int k = 0; k < 2; ++k) {
    q_at[k] = in.take(static_cast<uint64_t>(r * ch.dk * es));
    p_at[k] = in.take(static_cast<uint64_t>(r * ch.Sk * es));
    s_at[k] = acc.take(static_cast<uint64_t>(r * ch.Sk * 4));
    o_at[k] = acc.take(static_cast<uint64_t>(r * ch.dv * 4));
    m_at[k] = acc.take(static_cast<uint64_t>(r * es));
  }
  const DramTensor &S = c.tensor(ch.scores), &P = c.tensor(ch.probs);
  const auto bytes = [&](int64_t elems) { return static_cast<uint64_t>(elems * es); };
  // A VEC over a rows x d0 tile.
  const auto vec = [&](VecOp op, DType in_t, DType out_t, At dst, At src, int64_t d0, int64_t rows) {
    Context::VecArgs v;
    v.op = op, v.in = in_t, v.out = out_t;
    v.src1_buf = src.buf, v.src1 = src.addr, v.dst_buf = dst.buf, v.dst = dst.addr, v.d0 = d0, v.d1 = rows;
    c.vec(v);
  };
  int64_t tile = 0;
  for (int64_t h = 0; h < ch.G; ++h) {
    const int set = static_cast<int>(h % b.sets);
    c.load(Buffer::kWeight, kt_at[set], ch.kt->range(), ch.kt->addr + bytes(h * ch.dk * ch.Sk), c.act,
           {ch.Sk, ch.dk, 1, 1}, {ch.Sk, 0, 0});
    c.load(Buffer::kWeight, v_at[set], ch.v->range(), ch.v->addr + bytes(h * ch.Sk * ch.dv), c.act,
           {ch.dv, ch.Sk, 1, 1}, {ch.dv, 0, 0});
    for (int64_t r0 = 0; r0 < ch.Sq; r0 += r, ++tile) {
      const int side = static_cast<int>(tile % 2);
      const int64_t rows = std::min(r, ch.Sq - r0), row0 = h * ch.Sq + r0;
      const At p{Buffer::kInput, p_at[side]}, s{Buffer::kAccumulator, s_at[side]};
      const At o{Buffer::kAccumulator, o_at[side]}, m{Buffer::kAccumulator, m_at[side]};
      c.load(Buffer::kInput, q_at[side], ch.q->range(), ch.q->addr + bytes(row0 * ch.dk), c.act,
             {ch.dk, rows, 1, 1}, {ch.dk, 0, 0});
      c.matmul(q_at[side], 0, kt_at[set], s.addr, rows, ch.dk, ch.Sk, false);
      // The scores in the activation format, as the score MatMul's epilogue rounds them for its STORE.
      vec(VecOp::kCopy, DType::kFp32, c.act, p, s, ch.Sk, rows);
      if (round_trip) {
        c.store(p.buf, p.addr, S.range(), S.addr + bytes(row0 * ch.Sk), c.act, {ch.Sk, rows, 1, 1}, {ch.Sk, 0, 0});
        c.load(p.buf, p.addr, S.range(), S.addr + bytes(row0 * ch.Sk), c.act, {ch.Sk, rows, 1, 1}, {ch.Sk, 0, 0});
      }
      softmax_to_factor(c, p, At{Buffer::kWeight, scratch_at}, m, ch.Sk, rows);
      Context::VecArgs mul;
      mul.op = VecOp::kMul, mul.in = mul.out = c.act, mul.bcast = Bcast::kCol;
      mul.src1_buf = mul.dst_buf = p.buf, mul.src1 = mul.dst = p.addr, mul.src2_buf = m.buf, mul.src2 = m.addr;
      mul.d0 = ch.Sk, mul.d1 = rows;
      c.vec(mul);
      if (round_trip) {
        c.store(p.buf, p.addr, P.range(), P.addr + bytes(row0 * ch.Sk), c.act, {ch.Sk, rows, 1, 1}, {ch.Sk, 0, 0});
        c.load(p.buf, p.addr, P.range(), P.addr + bytes(row0 * ch.Sk), c.act, {ch.Sk, rows, 1, 1}, {ch.Sk, 0, 0});
      }
      c.matmul(p.addr, 0, v_at[set], o.addr, rows, ch.Sk, ch.dv, false);
      // The value MatMul's epilogue: narrowed in place below fp32, then stored.
      if (c.act != DType::kFp32) vec(VecOp::kCopy, DType::kFp32, c.act, o, o, ch.dv, rows);
      c.store(o.buf, o.addr, ch.y->range(), ch.y->addr + bytes(row0 * ch.dv), c.act, {ch.dv, rows, 1, 1},
              {ch.dv, 0, 0});
    }
  }
}

// Candidates: whole-head blocks down to 8 rows by halving, K^T/V double-buffered where that fits.
std::vector<Blocking> candidates(const Context& c, const Chain& ch) {
  std::vector<Blocking> out;
  for (int64_t r = ch.Sq;; r = ceil_div(r, 2)) {
    for (int sets = 2; sets >= 1; --sets) {
      const Blocking b{r, sets};
      if (fits(c, footprint(c, ch, b))) {
        out.push_back(b);
        break;
      }
    }
    if (r <= 8 || out.size() >= 4) break;
  }
  return out;
}

// Simulated cycles of one emission (trial).
int64_t time_trial(Context& c, const Chain& ch, const Blocking& b, bool round_trip) {
  const Context::Trial t = c.begin_trial();
  const int64_t first = c.em.size();
  emit(c, ch, b, round_trip);
  const int64_t cycles = c.time_layer(first);
  c.end_trial(t);
  return cycles;
}

}  // namespace

AttentionBlock lower_attention(Context& c, size_t i) {
  Chain ch;
  if (!match(c, i, &ch).empty() || !c.can_time()) return {};
  const std::vector<Blocking> cands = candidates(c, ch);
  if (cands.empty()) return {};
  Blocking best;
  int64_t best_cycles = -1, first_cycles = -1;
  for (const Blocking& b : cands) {
    const int64_t t = time_trial(c, ch, b, false);
    if (first_cycles < 0) first_cycles = t;
    if (best_cycles < 0 || t < best_cycles) best = b, best_cycles = t;
  }
  const int64_t round_trip = time_trial(c, ch, best, true);
  if (best_cycles >= round_trip) return {};
  emit(c, ch, best, false);
  AttentionBlock blk;
  blk.first = i, blk.last = i + 2;
  blk.on_chip = {ch.scores, ch.probs};
  const int64_t seq2 = ch.G * ch.Sq * ch.Sk;
  // Each written once and read once by its one reader.
  blk.bytes_saved = 2 * 2 * seq2 * c.esize;
  blk.macs = {seq2 * ch.dk, 0, seq2 * ch.dv};
  const Footprint f = footprint(c, ch, best);
  LayerPlan& p = *c.plan;
  p.tile_m = best.rows, p.tile_k = ch.dk, p.tile_n = ch.Sk;
  p.loop_order = "heads outer (K^T, V resident per head), query-row blocks inner";
  p.tile_limit = best.rows == ch.Sq ? fmt::format("a block holds all {} query rows of a head", ch.Sq)
                 : best.rows == cands.front().rows
                     ? fmt::format("a block of more query rows does not fit the scratchpads")
                     : fmt::format("a smaller block pipelines better: {} cycles simulated against {} with blocks of {} rows",
                                   best_cycles, first_cycles, cands.front().rows);
  p.sram_input_bytes = f.input, p.sram_weight_bytes = f.weight, p.sram_acc_bytes = f.acc;
  p.macs = blk.macs[0];
  p.candidates = static_cast<int64_t>(cands.size()) + 1;
  p.mapping = fmt::format(
      "fused attention (score MatMul -> {} -> value MatMul) over {} head(s): per head K^T [{}x{}] and V [{}x{}] "
      "loaded once ({}), blocks of {} query rows: scores MATMUL into the accumulator, rounded into the input "
      "scratchpad, softmax in place, value MATMUL reading them there; the {}x{} scores and probabilities never "
      "touch DRAM ({} bytes saved; {} cycles simulated against {} with them stored and loaded back)",
      c.g.nodes[i + 1].name, ch.G, ch.dk, ch.Sk, ch.Sk, ch.dv,
      best.sets == 2 ? "double-buffered across heads" : "one head at a time", best.rows, ch.Sq, ch.Sk,
      blk.bytes_saved, best_cycles, round_trip);
  return blk;
}

std::string describe_fused(const Context& c, const AttentionBlock& b, size_t i) {
  return fmt::format("fused into the attention layer '{}' (no instructions of its own; its {} stays on chip)",
                     c.g.nodes[b.first].name, i == b.first + 1 ? "input, the scores," : "input, the probabilities,");
}

}  // namespace npusim::compiler::backend
