// Attention's score -> softmax -> value as one layer (see attention_fusion.h).
#include "compiler/backend/fusion/attention_fusion.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "compiler/backend/int8/int8.h"
#include "compiler/backend/matrix/matrix_walk.h"
#include "compiler/backend/memory/movement.h"
#include "compiler/backend/vector/rowwise.h"
#include "compiler/passes/lowered.h"
#include "compiler/quant/precision.h"

namespace npusim::compiler::backend {

using isa::Bcast;
using isa::Buffer;
using isa::DType;
using isa::VecOp;

namespace {

// The block's tensors and shapes: G heads (the batch dims), Sq query rows, Sk keys, dk, dv.
struct Chain {
  const DramTensor *q = nullptr, *kt = nullptr, *v = nullptr, *y = nullptr;
  // Where each head's Q, K^T and V start and their row pitches: any of them may be a strided view of the
  // QKV projection's output (backend/memory/strided_views.h).
  MatrixRows qr, ktr, vr, yr;  // ... and the output's (a head-merging Transpose's output, likewise)
  std::string scores, probs;
  std::vector<std::string> values;  // the intermediates in order: the scores, [scaled, masked,] probabilities
  int64_t G = 1, Sq = 0, Sk = 0, dk = 0, dv = 0;
  // A scale between the score MatMul and the Softmax: VEC div or mul by a scalar constant.
  VecOp scale_op = VecOp::kCopy;  // kCopy: none
  float scale = 1.0f;
  // A mask added to the scores: [..., 1, Sk] broadcast over the query rows (and over heads where its
  // batch dims are 1); a constant (its values) or a runtime value (its tensor). mask_row[h]: the
  // element where head h's row starts.
  bool mask = false;
  const DramTensor* mask_t = nullptr;
  const Tensor* mask_values = nullptr;
  std::vector<int64_t> mask_row;
  // # int8: the layer-by-layer int8 program's quantization points: the MatMuls' output stages (score
  // and value requantization), the scores' and the probabilities' codes (the Softmax dequantizes the
  // one and quantizes the other). Q, K^T, V, the scores, the probabilities and the output are codes.
  bool int8 = false;
  const quant::LayerQuant *score_q = nullptr, *value_q = nullptr;
  const quant::QParams *s_q = nullptr, *p_q = nullptr, *y_q = nullptr;
  // Bytes of an element of the operands and of everything stored (1 in int8, else the activation's).
  int64_t eo = 0;
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

// Node k of the graph as `op` reading `in` as its first input, with no fused activation.
bool next_is(const Graph& g, size_t k, const char* op, const std::string& in) {
  if (k >= g.nodes.size()) return false;
  const Node& n = g.nodes[k];
  return n.domain.empty() && n.op_type == op && n.num_given_inputs() == 2 && n.inputs[0] == in &&
         n.outputs.size() == 1 && !n.has_attr(kActivation);
}

// The mask's row per head: its shape right-aligned to the scores' [batch..., Sq, Sk], with 1 for the query
// rows and each batch dim 1 or the scores'. False when it does not broadcast so.
bool mask_rows(const Shape& m, const Shape& scores, std::vector<int64_t>* rows) {
  const size_t r = scores.size();
  if (m.size() > r || m.empty() || m.back() != scores[r - 1] || (m.size() >= 2 && m[m.size() - 2] != 1))
    return false;
  Shape full(r, 1);
  std::copy(m.begin(), m.end(), full.begin() + static_cast<std::ptrdiff_t>(r - m.size()));
  std::vector<int64_t> stride(r, 0);
  int64_t st = full[r - 1];
  for (size_t d = r - 1; d-- > 0;) {
    if (full[d] != 1 && full[d] != scores[d]) return false;
    stride[d] = full[d] == 1 ? 0 : st;
    st *= full[d];
  }
  int64_t heads = 1;
  for (size_t d = 0; d + 2 < r; ++d) heads *= scores[d];
  for (int64_t h = 0; h < heads; ++h) {
    int64_t rest = h, at = 0;
    for (size_t d = r - 2; d-- > 0;) {
      at += rest % scores[d] * stride[d];
      rest /= scores[d];
    }
    rows->push_back(at);
  }
  return true;
}

// Why the nodes from i on are not an attention block fusion takes ("" = they are), and the chain (its
// nodes are [i, i + *count)).
// The nodes' shape alone: MatMul -> [scale] -> [mask] -> Softmax -> MatMul, each intermediate read only by
// the next ("" = they are; *add the mask's Add, if any).
std::string chain(const Graph& g, size_t i, Chain* ch, size_t* count, const Node** add_node) {
  const Node& a = g.nodes[i];
  if (!plain_matmul(g, a)) return "not a plain MatMul";
  size_t k = i + 1;
  std::string cur = a.outputs[0];
  ch->values = {cur};
  const auto scalar_constant = [&](const std::string& v) {
    return g.value(v).is_constant() && g.value(v).fully_known() && num_elements(g.value(v).shape) == 1;
  };
  if ((next_is(g, k, "Div", cur) || next_is(g, k, "Mul", cur)) && scalar_constant(g.nodes[k].inputs[1])) {
    ch->scale_op = g.nodes[k].op_type == "Div" ? VecOp::kDiv : VecOp::kMul;
    ch->scale = g.value(g.nodes[k].inputs[1]).constant->to_float_vector().at(0);
    cur = g.nodes[k++].outputs[0];
    ch->values.push_back(cur);
  }
  const Node* add = next_is(g, k, "Add", cur) ? &g.nodes[k] : nullptr;
  if (add) {
    ch->mask = true;
    cur = g.nodes[k++].outputs[0];
    ch->values.push_back(cur);
  }
  if (k + 1 >= g.nodes.size()) return "no room for a block";
  const Node &s = g.nodes[k], &b = g.nodes[k + 1];
  if (!s.domain.empty() || s.op_type != "Softmax" || s.inputs[0] != cur || !plain_matmul(g, b) ||
      b.inputs[0] != s.outputs[0])
    return "not MatMul -> [scale] -> [mask] -> Softmax -> MatMul";
  ch->values.push_back(s.outputs[0]);
  *count = k + 2 - i;
  for (size_t v = 0; v < ch->values.size(); ++v)
    if (!only_read_by(g, ch->values[v], i + 1 + v)) return "intermediates read elsewhere";
  *add_node = add;
  return "";
}

std::string match(const Context& c, size_t i, Chain* ch, size_t* count) {
  if (!c.options.keep_on_chip) return "fusion is off";
  if (c.g.nhwc_io || c.shared_capacity() > 0) return "one scratchpad for inputs and weights";
  if (c.fusion.on_chip.pending) return "a value is held on chip";
  const Graph& g = c.g;
  const Node* add = nullptr;
  if (std::string why = chain(g, i, ch, count, &add); !why.empty()) return why;
  const Node& a = g.nodes[i];
  const Node& s = g.nodes[i + *count - 2];
  const Node& b = g.nodes[i + *count - 1];
  if (c.options.mapping) {
    for (size_t n = i; n < i + *count; ++n) {
      const LayerMapping* m = c.options.mapping->find(g.nodes[n].name);
      const Placement natural =
          g.nodes[n].op_type == "MatMul" ? Placement::kNpuMatrix : Placement::kNpuVector;
      if (m && (m->has_tiling() || m->has_vector_tiling() || (m->placement && *m->placement != natural)))
        return "a mapping file imposes the layer-by-layer program";
    }
  }
  // Q, K^T and V are read by rows (strided views included); the rest must be dense.
  const std::vector<std::string> operands = {a.inputs[0], a.inputs[1], b.inputs[1], b.outputs[0]};
  std::vector<std::string> dense;
  dense.insert(dense.end(), ch->values.begin(), ch->values.end());
  if (add && !g.value(add->inputs[1]).is_constant()) dense.push_back(add->inputs[1]);
  if (c.options.plan) {
    // # int8: every node of the block int8, both MatMuls on the integer path with an output stage, and
    // every tensor stored as the codes the layer-by-layer program reads and writes (no conversion).
    const quant::PrecisionPlan& plan = *c.options.plan;
    if (ch->values.size() != 2) return "int8: a scale or a mask between the score MatMul and the Softmax";
    for (size_t n = i; n < i + *count; ++n)
      if (plan.precision_of(g.nodes[n].name) != quant::Precision::kInt8)
        return "a node of the block is not int8";
    for (const Node* mm : {&a, &b}) {
      auto L = plan.layers.find(mm->name);
      if (!int8_matrix_mappable(plan, *mm) || L == plan.layers.end() || !has_output_stage(L->second) ||
          L->second.input != mm->inputs[0] || L->second.weight != mm->inputs[1] ||
          L->second.output != mm->outputs[0])
        return "int8: a MatMul is not on the integer path with an output stage";
    }
    for (const std::string& v : dense) {
      auto q = plan.values.find(v);
      auto t = c.tensors.find(v);
      if (q == plan.values.end() || t == c.tensors.end() || t->second.dtype != q->second.dtype ||
          !dense_onnx_order(t->second))
        return "int8: a tensor is not dense codes";
    }
    for (const std::string& v : operands) {
      auto q = plan.values.find(v);
      auto t = c.tensors.find(v);
      if (q == plan.values.end() || t == c.tensors.end() || t->second.dtype != q->second.dtype ||
          !matrix_rows(t->second))
        return "int8: an operand is not codes in rows";
    }
    ch->int8 = true;
    ch->score_q = &plan.layers.at(a.name), ch->value_q = &plan.layers.at(b.name);
    ch->s_q = &plan.values.at(a.outputs[0]), ch->p_q = &plan.values.at(s.outputs[0]);
    ch->y_q = &plan.values.at(b.outputs[0]);
    ch->eo = 1;
  } else {
    for (const std::string& v : dense) {
      auto t = c.tensors.find(v);
      if (t == c.tensors.end() || !dense_onnx_order(t->second) || t->second.dtype != c.act)
        return "a tensor is not dense";
    }
    for (const std::string& v : operands) {
      auto t = c.tensors.find(v);
      if (t == c.tensors.end() || !matrix_rows(t->second) || t->second.dtype != c.act)
        return "an operand's rows are not contiguous";
    }
    ch->eo = c.esize;
  }
  ch->q = &c.tensor(a.inputs[0]), ch->kt = &c.tensor(a.inputs[1]), ch->v = &c.tensor(b.inputs[1]);
  ch->qr = *matrix_rows(*ch->q), ch->ktr = *matrix_rows(*ch->kt), ch->vr = *matrix_rows(*ch->v);
  ch->y = &c.tensor(b.outputs[0]);
  ch->yr = *matrix_rows(*ch->y);
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
  if (add) {
    const Value& m = g.value(add->inputs[1]);
    if (!m.fully_known() || !mask_rows(m.shape, g.value(ch->scores).shape, &ch->mask_row))
      return "the Add is not a mask of one row per head";
    if (m.is_constant())
      ch->mask_values = m.constant.get();
    else
      ch->mask_t = &c.tensor(add->inputs[1]);
  }
  const std::optional<RowwiseForm> f = rowwise_form(g, s);
  if (!f || f->row != ch->Sk || f->rows != ch->G * ch->Sq) return "the Softmax is not over the keys";
  if (std::max({ch->Sk, ch->dk, ch->dv, ch->Sq}) > kMaxDim) return "too long";
  return "";
}

// One candidate: query rows per block, the sets of K^T and V across heads, and the emission order.
struct Blocking {
  int64_t rows = 0;
  int sets = 1;
  bool pipelined = false;  // the next block's scores before this block's values (emit)
  int prefetch = 0;        // pipelined: blocks whose loads run ahead of the next block's scores
};

// The most sets of K^T and V (and of Q) a blocking takes.
constexpr int kMaxSets = 5;

// Q's buffers: one more than the blocks whose loads run ahead (emit).
int q_sides(const Blocking& b) { return std::max(2, b.prefetch + 1); }

// SRAM bytes of each scratchpad a blocking takes (0 when it does not fit).
struct Footprint {
  int64_t input = 0, weight = 0, acc = 0;
};

// es: bytes of the softmax's compute format (fp32 in int8), eo: of the operands.
Footprint footprint(const Context& c, const Chain& ch, const Blocking& b) {
  const int64_t es = c.esize, eo = ch.eo, r = b.rows;
  Footprint f;
  f.weight = b.sets * (round64(ch.dk * ch.Sk * eo) + round64(ch.Sk * ch.dv * eo)) + round64(r * ch.Sk * es);
  f.input = q_sides(b) * round64(r * ch.dk * eo) + 2 * round64(r * ch.Sk * es);
  f.acc = 2 * (round64(r * ch.Sk * 4) + round64(r * ch.dv * 4) + round64(r * es));
  if (ch.scale_op != VecOp::kCopy) f.acc += 64;
  if (ch.mask) f.acc += b.sets * round64(ch.Sk * es);
  if (ch.int8) f.acc += 64 + round64(ch.Sk * 12) + round64(ch.dv * 12);  // conversion constants, triples
  return f;
}

bool fits(const Context& c, const Footprint& f) {
  return f.input <= c.capacity(Buffer::kInput) && f.weight <= c.capacity(Buffer::kWeight) &&
         f.acc <= c.capacity(Buffer::kAccumulator);
}

// Emits the block. `round_trip`: the scores and probabilities go to their DRAM tensors and come back
// (the layer-by-layer program's traffic, for the costing). c.act is the softmax's compute format.
void emit(Context& c, const Chain& ch, const Blocking& b, bool round_trip) {
  const int64_t es = c.esize, r = b.rows;
  const Footprint f = footprint(c, ch, b);
  SramAlloc in = c.slots(Buffer::kInput, f.input), w = c.slots(Buffer::kWeight, f.weight),
            acc = c.slots(Buffer::kAccumulator, f.acc);
  const auto bytes = [&](int64_t elems) { return static_cast<uint64_t>(elems * ch.eo); };
  uint64_t kt_at[kMaxSets] = {}, v_at[kMaxSets] = {}, q_at[kMaxSets], p_at[2], s_at[2], o_at[2], m_at[2];
  for (int k = 0; k < b.sets; ++k) {
    kt_at[k] = w.take(bytes(ch.dk * ch.Sk));
    v_at[k] = w.take(bytes(ch.Sk * ch.dv));
  }
  const uint64_t scratch_at = w.take(static_cast<uint64_t>(r * ch.Sk * es));
  uint64_t scale_at = 0, mask_at[kMaxSets] = {};
  if (ch.scale_op != VecOp::kCopy) {
    scale_at = acc.take(64);
    const uint64_t at = c.add_floats({ch.scale}, c.act);
    c.load(Buffer::kAccumulator, scale_at, Range{kDram, at, at + static_cast<uint64_t>(es)}, at, c.act,
           {1, 1, 1, 1}, {0, 0, 0});
  }
  // # int8: the Softmax's conversion constants (scores' codes in, probabilities' codes out) as
  // lower_rowwise loads them, and each MatMul's output-stage triples, loaded once.
  uint64_t k_at = 0, s_triples = 0, v_triples = 0;
  if (ch.int8) {
    k_at = acc.take(64);
    load_conversion_constants(c, k_at, ch.s_q, nullptr);
    load_conversion_constants(c, k_at + 16, nullptr, ch.p_q);
    const auto triples = [&](const quant::LayerQuant& L, int64_t n) {
      const uint64_t at = acc.take(static_cast<uint64_t>(n * 12));
      const uint64_t addr = c.add_data(int32_bytes(output_stage_triples(L)));
      c.load(Buffer::kAccumulator, at, Range{kDram, addr, addr + static_cast<uint64_t>(n * 12)}, addr,
             DType::kInt32, {3 * n, 1, 1, 1}, {0, 0, 0});
      return at;
    };
    s_triples = triples(*ch.score_q, ch.Sk);
    v_triples = triples(*ch.value_q, ch.dv);
  }
  Range mask_range{};
  uint64_t mask_addr = 0;
  if (ch.mask) {
    for (int k = 0; k < b.sets; ++k) mask_at[k] = acc.take(static_cast<uint64_t>(ch.Sk * es));
    if (ch.mask_t) {
      mask_range = ch.mask_t->range(), mask_addr = ch.mask_t->addr;
    } else {
      mask_addr = c.add_constant(*ch.mask_values, c.act);
      mask_range = Range{kDram, mask_addr, mask_addr + static_cast<uint64_t>(ch.mask_values->size()) * es};
    }
  }
  for (int k = 0; k < q_sides(b); ++k) q_at[k] = in.take(bytes(r * ch.dk));
  for (int k = 0; k < 2; ++k) {
    p_at[k] = in.take(static_cast<uint64_t>(r * ch.Sk * es));
    s_at[k] = acc.take(static_cast<uint64_t>(r * ch.Sk * 4));
    o_at[k] = acc.take(static_cast<uint64_t>(r * ch.dv * 4));
    m_at[k] = acc.take(static_cast<uint64_t>(r * es));
  }
  const DramTensor &S = c.tensor(ch.scores), &P = c.tensor(ch.probs);
  // What the scores and the probabilities are stored as (codes in int8).
  const DType s_dt = ch.int8 ? S.dtype : c.act, p_dt = ch.int8 ? P.dtype : c.act;
  // A VEC over a rows x d0 tile.
  const auto vec = [&](VecOp op, DType in_t, DType out_t, At dst, At src, int64_t d0, int64_t rows) {
    Context::VecArgs v;
    v.op = op, v.in = in_t, v.out = out_t;
    v.src1_buf = src.buf, v.src1 = src.addr, v.dst_buf = dst.buf, v.dst = dst.addr, v.d0 = d0, v.d1 = rows;
    c.vec(v);
  };
  // # int8: a MatMul's output stage on its int32 sums (as the int8 matrix walk's epilogue).
  const auto output_stage = [&](const quant::LayerQuant& L, const quant::QParams& y, uint64_t triples, At dst,
                                At src, int64_t d0, int64_t rows) {
    Context::VecArgs o = output_stage_vec(L, y);
    o.src1_buf = src.buf, o.src1 = src.addr, o.src2_buf = Buffer::kAccumulator, o.src2 = triples;
    o.dst_buf = dst.buf, o.dst = dst.addr, o.d0 = d0, o.d1 = rows;
    c.vec(o);
  };
  // A MATMUL whose operands are `dt` (codes in int8: the array's operand format is A's).
  const auto matmul = [&](DType dt, uint64_t a, uint64_t bw, uint64_t out, int64_t m, int64_t k, int64_t n) {
    const DType act = c.act;
    const int64_t esize = c.esize;
    c.act = dt, c.esize = isa::dtype_bytes(dt);
    c.matmul(a, 0, bw, out, m, k, n, false);
    c.act = act, c.esize = esize;
  };
  // The blocks in order: head, first query row, and the side (of the two sets of Q, score, probability
  // and output buffers) each uses.
  struct Block {
    int64_t h = 0, r0 = 0, rows = 0;
    int side = 0, q_side = 0;
    bool first_of_head = false;
  };
  std::vector<Block> blocks;
  for (int64_t h = 0, tile = 0; h < ch.G; ++h)
    for (int64_t r0 = 0; r0 < ch.Sq; r0 += r, ++tile)
      blocks.push_back({h, r0, std::min(r, ch.Sq - r0), static_cast<int>(tile % 2),
                        static_cast<int>(tile % q_sides(b)), r0 == 0});
  const auto head = [&](const MatrixRows& m, int64_t h) {
    return static_cast<int64_t>(m.start.at(static_cast<size_t>(h)));
  };
  // A block's first half: its head's K^T and V (on the head's first block), its Q, the scores MATMUL and
  // the vector steps up to the probabilities.
  // A block's loads: its head's K^T, V and mask (on the head's first block) and its Q.
  const auto loads = [&](const Block& bl) {
    const int64_t h = bl.h;
    const int set = static_cast<int>(h % b.sets);
    if (bl.first_of_head) {
      c.load(Buffer::kWeight, kt_at[set], ch.kt->range(), ch.kt->addr + bytes(head(ch.ktr, h)), ch.kt->dtype,
             {ch.Sk, ch.dk, 1, 1}, {ch.ktr.pitch, 0, 0});
      c.load(Buffer::kWeight, v_at[set], ch.v->range(), ch.v->addr + bytes(head(ch.vr, h)), ch.v->dtype,
             {ch.dv, ch.Sk, 1, 1}, {ch.vr.pitch, 0, 0});
      if (ch.mask) {
        c.load(Buffer::kAccumulator, mask_at[set], mask_range,
               mask_addr + static_cast<uint64_t>(ch.mask_row[static_cast<size_t>(h)] * es), c.act,
               {ch.Sk, 1, 1, 1}, {0, 0, 0});
      }
    }
    c.load(Buffer::kInput, q_at[bl.q_side], ch.q->range(),
           ch.q->addr + bytes(head(ch.qr, h) + bl.r0 * ch.qr.pitch), ch.q->dtype, {ch.dk, bl.rows, 1, 1},
           {ch.qr.pitch, 0, 0});
  };
  // Its scores half: the scores MATMUL and the vector steps up to the probabilities.
  const auto scores_half = [&](const Block& bl) {
    const int64_t h = bl.h, r0 = bl.r0, rows = bl.rows, row0 = h * ch.Sq + r0;
    const int set = static_cast<int>(h % b.sets);
    const At p{Buffer::kInput, p_at[bl.side]}, s{Buffer::kAccumulator, s_at[bl.side]};
    const At m{Buffer::kAccumulator, m_at[bl.side]};
    matmul(ch.q->dtype, q_at[bl.q_side], kt_at[set], s.addr, rows, ch.dk, ch.Sk);
    // The scores as the score MatMul's epilogue writes them for its STORE: rounded to the activation
    // format, or (int8) requantized to their codes.
    if (ch.int8)
      output_stage(*ch.score_q, *ch.s_q, s_triples, p, s, ch.Sk, rows);
    else
      vec(VecOp::kCopy, DType::kFp32, c.act, p, s, ch.Sk, rows);
    if (round_trip) {
      c.store(p.buf, p.addr, S.range(), S.addr + bytes(row0 * ch.Sk), s_dt, {ch.Sk, rows, 1, 1},
              {ch.Sk, 0, 0});
      c.load(p.buf, p.addr, S.range(), S.addr + bytes(row0 * ch.Sk), s_dt, {ch.Sk, rows, 1, 1},
             {ch.Sk, 0, 0});
    }
    // The scale and the mask, each one VEC in the activation format as their element-wise layers.
    const auto with = [&](VecOp op, uint64_t at, Bcast bc) {
      Context::VecArgs e;
      e.op = op, e.in = e.out = c.act, e.bcast = bc;
      e.src1_buf = e.dst_buf = p.buf, e.src1 = e.dst = p.addr, e.src2_buf = Buffer::kAccumulator, e.src2 = at;
      e.d0 = ch.Sk, e.d1 = rows;
      c.vec(e);
    };
    if (ch.scale_op != VecOp::kCopy) with(ch.scale_op, scale_at, Bcast::kScalar);
    if (ch.mask) with(VecOp::kAdd, mask_at[set], Bcast::kRow);
    // The Softmax layer's steps (int8: from the scores' codes to the probabilities' codes).
    softmax_rows(c, p, At{Buffer::kWeight, scratch_at}, m, At{Buffer::kAccumulator, k_at}, ch.Sk, rows,
                 ch.int8 ? std::optional<DType>(s_dt) : std::nullopt,
                 ch.int8 ? std::optional<DType>(p_dt) : std::nullopt);
    if (round_trip) {
      c.store(p.buf, p.addr, P.range(), P.addr + bytes(row0 * ch.Sk), p_dt, {ch.Sk, rows, 1, 1},
              {ch.Sk, 0, 0});
      c.load(p.buf, p.addr, P.range(), P.addr + bytes(row0 * ch.Sk), p_dt, {ch.Sk, rows, 1, 1},
             {ch.Sk, 0, 0});
    }
  };
  // Its second half: the value MATMUL on the probabilities, its epilogue and the output's STORE.
  const auto value_half = [&](const Block& bl) {
    const int set = static_cast<int>(bl.h % b.sets);
    const At p{Buffer::kInput, p_at[bl.side]}, o{Buffer::kAccumulator, o_at[bl.side]};
    matmul(p_dt, p.addr, v_at[set], o.addr, bl.rows, ch.Sk, ch.dv);
    // The value MatMul's epilogue: narrowed in place below fp32 (int8: requantized to the output's
    // codes), then stored.
    if (ch.int8)
      output_stage(*ch.value_q, *ch.y_q, v_triples, o, o, ch.dv, bl.rows);
    else if (c.act != DType::kFp32)
      vec(VecOp::kCopy, DType::kFp32, c.act, o, o, ch.dv, bl.rows);
    c.store(o.buf, o.addr, ch.y->range(), ch.y->addr + bytes(head(ch.yr, bl.h) + bl.r0 * ch.yr.pitch),
            ch.y->dtype, {ch.dv, bl.rows, 1, 1}, {ch.yr.pitch, 0, 0});
  };
  // Software-pipelined (b.pipelined): block i+1's scores half is emitted before block i's value half, so
  // the array runs the next scores MATMUL while the vector unit computes block i's softmax, and the value
  // MATMUL follows it on the array without waiting (chained where the array chains instructions); the loads
  // run b.prefetch blocks ahead of the scores. Program order still orders every access (the emitter's
  // tokens): a load never overtakes a reader of the buffer it fills, which is why a pipelined blocking
  // takes more than `prefetch` sets of K^T and V (candidates).
  size_t loaded = 0;  // blocks whose loads are emitted
  const auto load_until = [&](size_t end) {
    for (end = std::min(end, blocks.size()); loaded < end; ++loaded) loads(blocks[loaded]);
  };
  for (size_t i = 0; i < blocks.size(); ++i) {
    if (i == 0) {
      load_until(1 + static_cast<size_t>(b.prefetch));
      scores_half(blocks[0]);
    }
    if (b.pipelined && i + 1 < blocks.size()) {
      scores_half(blocks[i + 1]);
      value_half(blocks[i]);
      load_until(i + 3 + static_cast<size_t>(b.prefetch) - 1);
    } else {
      value_half(blocks[i]);
      load_until(i + 2);
      if (i + 1 < blocks.size()) scores_half(blocks[i + 1]);
    }
  }
}

// Candidates: whole-head blocks down to 8 rows by halving, K^T/V double-buffered where that fits, each also
// software-pipelined with its loads 1 to kMaxSets - 2 blocks ahead (emit).
std::vector<Blocking> candidates(const Context& c, const Chain& ch) {
  std::vector<Blocking> out;
  for (int64_t r = ch.Sq;; r = ceil_div(r, 2)) {
    for (int sets = 2; sets >= 1; --sets) {
      const Blocking b{r, sets, false};
      if (fits(c, footprint(c, ch, b))) {
        out.push_back(b);
        break;
      }
    }
    // Software-pipelined: a head's K^T and V load while the array still reads the heads before it; the
    // loads of block j come after block j - 1 - prefetch's value MATMUL in program order, so its set must
    // not be one a later block's value MATMUL reads (sets > prefetch), and one more set lets them start
    // before the array reaches block j - 1.
    for (int prefetch = 1; prefetch + 2 <= kMaxSets; ++prefetch) {
      for (int sets = prefetch + 2; sets > prefetch; --sets) {
        const Blocking b{r, sets, true, prefetch};
        if (fits(c, footprint(c, ch, b))) {
          out.push_back(b);
          break;
        }
      }
    }
    if (r <= 8 || out.size() >= 16) break;
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

// # int8: the softmax's compute format (fp32) as the block's c.act while it is costed and emitted, as
// PlanScope sets it for the int8 Softmax layer; restored on every way out.
class ComputeFormat {
 public:
  ComputeFormat(Context& c, bool int8) : c_(c), act_(c.act), esize_(c.esize) {
    if (int8) c.act = DType::kFp32, c.esize = 4;
  }
  ~ComputeFormat() { c_.act = act_, c_.esize = esize_; }
  ComputeFormat(const ComputeFormat&) = delete;
  ComputeFormat& operator=(const ComputeFormat&) = delete;

 private:
  Context& c_;
  DType act_;
  int64_t esize_;
};

}  // namespace

size_t attention_candidate(const Graph& g, size_t i) {
  if (i >= g.nodes.size()) return 0;
  Chain ch;
  size_t count = 0;
  const Node* add = nullptr;
  return chain(g, i, &ch, &count, &add).empty() ? count : 0;
}

AttentionBlock lower_attention(Context& c, size_t i) {
  Chain ch;
  size_t count = 0;
  if (!match(c, i, &ch, &count).empty() || !c.can_time()) return {};
  const ComputeFormat format(c, ch.int8);
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
  blk.first = i, blk.last = i + count - 1;
  blk.on_chip = ch.values;
  const int64_t seq2 = ch.G * ch.Sq * ch.Sk;
  // Each written once and read once by its one reader (int8: as codes).
  blk.value_bytes_saved = 2 * seq2 * ch.eo;
  blk.macs.assign(count, 0);
  blk.macs.front() = seq2 * ch.dk, blk.macs.back() = seq2 * ch.dv;
  const Footprint f = footprint(c, ch, best);
  LayerPlan& p = *c.plan;
  p.tile_m = best.rows, p.tile_k = ch.dk, p.tile_n = ch.Sk;
  p.loop_order = best.pipelined
                     ? "heads outer (K^T, V resident per head), query-row blocks inner, software-pipelined "
                       "(the next block's scores before this block's values)"
                     : "heads outer (K^T, V resident per head), query-row blocks inner";
  p.tile_limit =
      best.rows == ch.Sq ? fmt::format("a block holds all {} query rows of a head", ch.Sq)
      : best.rows == cands.front().rows
          ? fmt::format("a block of more query rows does not fit the scratchpads")
          : fmt::format(
                "a smaller block pipelines better: {} cycles simulated against {} with blocks of {} rows",
                best_cycles, first_cycles, cands.front().rows);
  p.sram_input_bytes = f.input, p.sram_weight_bytes = f.weight, p.sram_acc_bytes = f.acc;
  p.macs = blk.macs[0];
  p.candidates = static_cast<int64_t>(cands.size()) + 1;
  p.mapping = fmt::format(
      "fused attention (score MatMul -> {}{}{} -> value MatMul) over {} head(s): per head K^T [{}x{}] and V "
      "[{}x{}] "
      "loaded once ({}), blocks of {} query rows: scores MATMUL into the accumulator, {} into the input "
      "scratchpad, softmax in place{}, value MATMUL reading them there; the {} {}x{} intermediates never "
      "touch DRAM ({} bytes saved; {} cycles simulated against {} with them stored and loaded back)",
      ch.scale_op == VecOp::kCopy ? "" : "scale -> ", ch.mask ? "mask -> " : "", c.g.nodes[blk.last - 1].name,
      ch.G, ch.dk, ch.Sk, ch.Sk, ch.dv,
      best.sets > 1 ? fmt::format("{} sets across heads", best.sets) : std::string("one head at a time"),
      best.rows, ch.int8 ? "requantized to int8 codes (the score MatMul's output stage)" : "rounded",
      ch.int8 ? " (dequantized, fp32, quantized to the probabilities' codes as the int8 Softmax layer)" : "",
      ch.values.size(), ch.Sq, ch.Sk, blk.value_bytes_saved * static_cast<int64_t>(ch.values.size()),
      best_cycles, round_trip);
  return blk;
}

std::string describe_fused(const Context& c, const AttentionBlock& b, size_t i) {
  return fmt::format(
      "fused into the attention layer '{}' (no instructions of its own; its input '{}' stays on chip)",
      c.g.nodes[b.first].name, c.g.nodes[i].inputs[0]);
}

}  // namespace npusim::compiler::backend
