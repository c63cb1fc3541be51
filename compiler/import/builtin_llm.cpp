// The llm: micro-model: a Llama-shaped decoder (RMSNorm, rotary embeddings, grouped-query attention over
// a KV cache, SwiGLU FFN, LM head) built as ONNX, one graph per (seq, past) shape: a prefill is seq=P,
// past=0; a decode step is seq=1 over past=L cached positions.
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "compiler/import/import.h"
#include "compiler/import/onnx_internal.h"

namespace npusim::compiler::detail {
namespace {

// Names nodes and their outputs "<prefix>/<op>_<n>" so each is unique and readable in the report.
class Emitter {
 public:
  Emitter(ModelBuilder& b, std::string prefix) : b_(b), prefix_(std::move(prefix)) {}
  std::string op(const std::string& type, const std::vector<std::string>& inputs,
                 onnx::NodeProto** node = nullptr) {
    const std::string name = prefix_ + "/" + type + "_" + std::to_string(count_++);
    onnx::NodeProto& n = b_.add_node(type, name, inputs, {name});
    if (node) *node = &n;
    return name;
  }
  std::string ints(const std::vector<int64_t>& v) {
    const std::string name = prefix_ + "/const_" + std::to_string(count_++);
    b_.add_int64_initializer(name, {static_cast<int64_t>(v.size())}, v);
    return name;
  }
  std::string floats(const Shape& shape, const std::vector<float>& v) {
    const std::string name = prefix_ + "/const_" + std::to_string(count_++);
    b_.add_initializer(name, shape, v);
    return name;
  }
  // A MatMul weight: shape-only when the builder leaves weight values out.
  std::string weight(const Shape& shape, const std::function<std::vector<float>()>& values) {
    const std::string name = prefix_ + "/const_" + std::to_string(count_++);
    b_.add_weight(name, shape, values);
    return name;
  }
  ModelBuilder& builder() { return b_; }

 private:
  ModelBuilder& b_;
  std::string prefix_;
  int count_ = 0;
};

// x * gamma / sqrt(mean(x^2) + eps) over the last axis.
std::string rms_norm(Emitter& e, const std::string& x, int64_t hidden, uint32_t seed) {
  const std::string sq = e.op("Mul", {x, x});
  onnx::NodeProto* mean = nullptr;
  const std::string ms = e.op("ReduceMean", {sq}, &mean);
  ModelBuilder::set_attr(*mean, "axes", std::vector<int64_t>{-1});
  ModelBuilder::set_attr(*mean, "keepdims", int64_t{1});
  const std::string eps = e.floats({}, {1e-5f});
  const std::string rms = e.op("Sqrt", {e.op("Add", {ms, eps})});
  std::vector<float> gamma = pseudo_random(hidden, 0.1f, seed);
  for (float& g : gamma) g += 1.0f;
  return e.op("Mul", {e.op("Div", {x, rms}), e.floats({hidden}, gamma)});
}

std::string linear(Emitter& e, const std::string& x, int64_t in, int64_t out, uint32_t seed) {
  const std::string w = e.weight(
      {in, out}, [=] { return pseudo_random(in * out, 1.0f / std::sqrt(static_cast<float>(in)), seed); });
  return e.op("MatMul", {x, w});
}

// Rotary embedding of x [seq, heads, hd] at positions past..past+seq-1: x*cos + rotate_half(x)*sin.
std::string rotary(Emitter& e, const std::string& x, int64_t seq, int64_t past, int64_t hd) {
  std::vector<float> cos(static_cast<size_t>(seq * hd)), sin(cos.size());
  for (int64_t p = 0; p < seq; ++p)
    for (int64_t i = 0; i < hd; ++i) {
      const double freq =
          std::pow(10000.0, -2.0 * static_cast<double>(i % (hd / 2)) / static_cast<double>(hd));
      const double a = static_cast<double>(past + p) * freq;
      cos[static_cast<size_t>(p * hd + i)] = static_cast<float>(std::cos(a));
      sin[static_cast<size_t>(p * hd + i)] = static_cast<float>(std::sin(a));
    }
  const int64_t half = hd / 2;
  const std::string lo = e.op("Slice", {x, e.ints({0}), e.ints({half}), e.ints({2})});
  const std::string hi = e.op("Slice", {x, e.ints({half}), e.ints({hd}), e.ints({2})});
  onnx::NodeProto* cat = nullptr;
  const std::string rot = e.op("Concat", {e.op("Neg", {hi}), lo}, &cat);
  ModelBuilder::set_attr(*cat, "axis", int64_t{2});
  return e.op("Add", {e.op("Mul", {x, e.floats({seq, 1, hd}, cos)}),
                      e.op("Mul", {rot, e.floats({seq, 1, hd}, sin)})});
}

std::string transpose(Emitter& e, const std::string& x, const std::vector<int64_t>& perm) {
  onnx::NodeProto* t = nullptr;
  const std::string out = e.op("Transpose", {x}, &t);
  ModelBuilder::set_attr(*t, "perm", perm);
  return out;
}

}  // namespace

void llm_model(const LlmSpec& s, ModelBuilder& b) {
  const int64_t hd = s.hidden / s.heads, total = s.past + s.seq, group = s.heads / s.kv_heads;
  b.add_input("llm.x", {s.seq, s.hidden});  // token embeddings (the lookup is a Gather on the host)
  std::string x = "llm.x";
  uint32_t seed = 1000;
  // Causal mask over [seq, past + seq]: position p sees cached positions and itself and those before it.
  std::vector<float> mask(static_cast<size_t>(s.seq * total), 0.0f);
  for (int64_t p = 0; p < s.seq; ++p)
    for (int64_t t = s.past + p + 1; t < total; ++t) mask[static_cast<size_t>(p * total + t)] = -1e4f;
  for (int64_t l = 0; l < s.layers; ++l) {
    const std::string L = "layer" + std::to_string(l);
    Emitter e(b, L);
    const std::string xn = rms_norm(e, x, s.hidden, seed++);
    const std::string q = linear(e, xn, s.hidden, s.heads * hd, seed++);
    const std::string k = linear(e, xn, s.hidden, s.kv_heads * hd, seed++);
    const std::string v = linear(e, xn, s.hidden, s.kv_heads * hd, seed++);
    const std::string q3 = rotary(e, e.op("Reshape", {q, e.ints({s.seq, s.heads, hd})}), s.seq, s.past, hd);
    const std::string k3 =
        rotary(e, e.op("Reshape", {k, e.ints({s.seq, s.kv_heads, hd})}), s.seq, s.past, hd);
    const std::string v3 = e.op("Reshape", {v, e.ints({s.seq, s.kv_heads, hd})});
    std::string kh = transpose(e, k3, {1, 0, 2}), vh = transpose(e, v3, {1, 0, 2});  // [kv_heads, seq, hd]
    if (s.past > 0) {
      const std::string pk = "llm.past_k" + std::to_string(l), pv = "llm.past_v" + std::to_string(l);
      b.add_input(pk, {s.kv_heads, s.past, hd});
      b.add_input(pv, {s.kv_heads, s.past, hd});
      onnx::NodeProto* ck = nullptr;
      onnx::NodeProto* cv = nullptr;
      kh = e.op("Concat", {pk, kh}, &ck);
      vh = e.op("Concat", {pv, vh}, &cv);
      ModelBuilder::set_attr(*ck, "axis", int64_t{1});
      ModelBuilder::set_attr(*cv, "axis", int64_t{1});
    }
    // The cache after this step: a graph output (written back to DRAM for the next step).
    const std::string present_k = "llm.present_k" + std::to_string(l),
                      present_v = "llm.present_v" + std::to_string(l);
    b.add_node("Identity", L + "/present_k", {kh}, {present_k});
    b.add_node("Identity", L + "/present_v", {vh}, {present_v});
    b.add_output(present_k);
    b.add_output(present_v);
    // Grouped-query attention: each KV head serves `group` query heads (a broadcast copy).
    auto widen = [&](const std::string& kv) {
      if (group == 1) return kv;
      const std::string r4 = e.op("Reshape", {kv, e.ints({s.kv_heads, 1, total, hd})});
      const std::string ex = e.op("Expand", {r4, e.ints({s.kv_heads, group, total, hd})});
      return e.op("Reshape", {ex, e.ints({s.heads, total, hd})});
    };
    const std::string kq = widen(kh), vq = widen(vh);
    const std::string qh = transpose(e, q3, {1, 0, 2});  // [heads, seq, hd]
    const std::string scores = e.op("MatMul", {qh, transpose(e, kq, {0, 2, 1})});
    const std::string scaled =
        e.op("Mul", {scores, e.floats({}, {1.0f / std::sqrt(static_cast<float>(hd))})});
    const std::string masked = e.op("Add", {scaled, e.floats({s.seq, total}, mask)});
    onnx::NodeProto* sm = nullptr;
    const std::string probs = e.op("Softmax", {masked}, &sm);
    ModelBuilder::set_attr(*sm, "axis", int64_t{-1});
    const std::string ctx = e.op("MatMul", {probs, vq});  // [heads, seq, hd]
    const std::string merged = e.op("Reshape", {transpose(e, ctx, {1, 0, 2}), e.ints({s.seq, s.hidden})});
    const std::string h = e.op("Add", {x, linear(e, merged, s.hidden, s.hidden, seed++)});
    // SwiGLU FFN: down(silu(gate(x)) * up(x)).
    const std::string hn = rms_norm(e, h, s.hidden, seed++);
    const std::string gate = linear(e, hn, s.hidden, s.ffn, seed++);
    const std::string up = linear(e, hn, s.hidden, s.ffn, seed++);
    const std::string silu = e.op("Mul", {gate, e.op("Sigmoid", {gate})});
    x = e.op("Add", {h, linear(e, e.op("Mul", {silu, up}), s.ffn, s.hidden, seed++)});
  }
  Emitter e(b, "head");
  const std::string last =
      s.seq > 1 ? e.op("Slice", {x, e.ints({s.seq - 1}), e.ints({s.seq}), e.ints({0})}) : x;
  const std::string normed = rms_norm(e, last, s.hidden, seed++);
  const std::string logits = linear(e, normed, s.hidden, s.vocab, seed++);
  b.add_node("Identity", "head/logits", {logits}, {"llm.logits"});
  b.add_output("llm.logits");
}

}  // namespace npusim::compiler::detail
