#include "compiler/quant/qdq.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>

#include "compiler/import/import.h"
#include "compiler/interp/kernels.h"
#include "compiler/passes/lowered.h"
#include "compiler/passes/passes.h"
#include "compiler/quant/quantize.h"

namespace npusim::compiler::quant {

bool is_prequantized(const Graph& g) {
  for (const auto& n : g.nodes)
    if (n.domain.empty() && (n.op_type == "QuantizeLinear" || n.op_type == "DequantizeLinear" ||
                             n.op_type == "QLinearConv" || n.op_type == "QLinearMatMul"))
      return true;
  return false;
}

namespace {

class QdqPass {
 public:
  explicit QdqPass(const Graph& g) { r_.graph = g; }

  QdqImport run() {
    rewrite_qlinear();
    fold_constant_dequantize();
    remove_qdq_pairs();
    passes::eliminate_dead_nodes(g());
    fuse_activations();
    passes::eliminate_dead_nodes(g());
    g().verify();
    make_plan();
    return std::move(r_);
  }

 private:
  Graph& g() { return r_.graph; }

  // The value of `name` when it is a constant or computable from constants only (Constant, Cast,
  // ConstantOfShape, ... nodes), else nullopt.
  std::optional<Tensor> const_value(const std::string& name, int depth = 0) {
    if (name.empty() || depth > 16) return std::nullopt;
    auto c = cache_.find(name);
    if (c != cache_.end()) return c->second;
    const Value& v = g().value(name);
    if (v.is_constant()) return *v.constant;
    const int p = g().producer(name);
    if (p < 0) return std::nullopt;
    const Node n = g().nodes[p];
    if (!n.domain.empty()) return std::nullopt;
    std::vector<Tensor> held(n.inputs.size());
    std::vector<const Tensor*> ins(n.inputs.size(), nullptr);
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      if (n.inputs[k].empty()) continue;
      auto t = const_value(n.inputs[k], depth + 1);
      if (!t) return std::nullopt;
      held[k] = std::move(*t);
      ins[k] = &held[k];
    }
    const auto& table = interp::kernel_table();
    auto it = table.find(n.op_type);
    if (it == table.end()) return std::nullopt;
    interp::KernelContext ctx{n, g().opset, ins, std::vector<Tensor>(n.outputs.size())};
    it->second(ctx);
    for (size_t k = 0; k < n.outputs.size(); ++k)
      if (!n.outputs[k].empty()) cache_[n.outputs[k]] = ctx.out[k];
    return cache_.at(name);
  }

  Tensor require_const(const Node& n, size_t k, const char* what) {
    auto t = n.has_input(k) ? const_value(n.inputs[k]) : std::nullopt;
    if (!t) throw ModelError("node '" + n.name + "' (" + n.op_type + "): the " + what + " is not a constant");
    return *t;
  }

  // A scale input: every value must be a positive finite number (ONNX requires it; a zero or NaN scale
  // would turn into infinities and undefined integer conversions downstream).
  Tensor require_scale(const Node& n, size_t k) {
    Tensor t = require_const(n, k, "scale");
    for (int64_t i = 0; i < t.size(); ++i) {
      const double v = t.as_double(i);
      if (!(std::isfinite(v) && v > 0.0))
        throw ModelError("node '" + n.name + "' (" + n.op_type + "): scale " + std::to_string(v) +
                         " is not a positive finite number");
    }
    return t;
  }

  // True when every present input among `ks` of `n` is a constant (or computable from constants).
  bool all_const(const Node& n, std::initializer_list<size_t> ks) {
    for (size_t k : ks)
      if (n.has_input(k) && !const_value(n.inputs[k])) return false;
    return true;
  }

  Node make(const std::string& op, const std::string& base, std::vector<std::string> ins,
            std::vector<std::string> outs) {
    Node n;
    n.op_type = op;
    n.name = g().unique_node_name(base);
    n.inputs = std::move(ins);
    n.outputs = std::move(outs);
    return n;
  }

  // A new float value with the shape of `like` (a dequantized copy of it, or its float result).
  std::string new_value(const std::string& base, DataType t, const std::string& like) {
    const std::string name = g().unique_value_name(base);
    const Value src = g().value(like);
    Value& v = g().ensure_value(name);
    v.dtype = t;
    v.shape = src.shape;
    v.shape_known = src.shape_known;
    return name;
  }

  // QLinearConv / QLinearMatMul -> DequantizeLinear, float op, QuantizeLinear.
  void rewrite_qlinear() {
    std::vector<Node> out;
    bool changed = false;
    for (const Node& n : g().nodes) {
      const bool conv = n.domain.empty() && n.op_type == "QLinearConv";
      const bool mm = n.domain.empty() && n.op_type == "QLinearMatMul";
      if (!conv && !mm) {
        out.push_back(n);
        continue;
      }
      if (!all_const(n, {1, 2, 4, 5, 6, 7, 8})) {
        // Runtime scales: no static int8 plan can carry them; the node runs as it is (on the host).
        r_.notes.push_back("node '" + n.name + "' (" + n.op_type +
                           "): its scales or zero points are not "
                           "constants; it runs as it is");
        out.push_back(n);
        continue;
      }
      changed = true;
      const std::string xf = new_value(n.inputs[0] + "_dq", DataType::kFloat32, n.inputs[0]);
      const std::string wf = new_value(n.inputs[3] + "_dq", DataType::kFloat32, n.inputs[3]);
      const std::string yf = new_value(n.outputs[0] + "_f", DataType::kFloat32, n.outputs[0]);
      out.push_back(
          make("DequantizeLinear", n.name + "_dq_x", {n.inputs[0], n.inputs[1], n.inputs[2]}, {xf}));
      Node dw = make("DequantizeLinear", n.name + "_dq_w", {n.inputs[3], n.inputs[4], n.inputs[5]}, {wf});
      const Tensor ws = require_scale(n, 4);
      require_scale(n, 1);
      require_scale(n, 6);
      if (ws.size() > 1) dw.attrs["axis"].value = int64_t{conv ? 0 : 1};
      out.push_back(dw);
      Node op = make(conv ? "Conv" : "MatMul", n.name, {xf, wf}, {yf});
      op.name = n.name;  // the QLinear node it replaces goes away: the float op keeps its name
      if (conv) {
        op.attrs = n.attrs;
        if (n.has_input(8)) {
          // Bias: int32 with scale x_scale * w_scale[c], zero point 0 (ONNX QLinearConv).
          const Tensor xs = require_scale(n, 1);
          const Tensor b = require_const(n, 8, "bias");
          Tensor bf(DataType::kFloat32, b.shape);
          for (int64_t c = 0; c < b.size(); ++c)
            bf.f[c] = static_cast<float>(b.i[c]) * (xs.f[0] * ws.f[ws.size() > 1 ? c : 0]);
          const std::string bname = g().unique_value_name(n.name + "_bias");
          g().add_constant(bname, bf);
          op.inputs.push_back(bname);
        }
      }
      out.push_back(op);
      out.push_back(make("QuantizeLinear", n.name + "_q",
                         {yf, n.inputs[conv ? 6 : 6], n.inputs[conv ? 7 : 7]}, {n.outputs[0]}));
    }
    if (changed) g().nodes = std::move(out);
  }

  // DequantizeLinear of a constant -> a float constant; int8 codes remembered for the weight's consumer.
  void fold_constant_dequantize() {
    std::vector<Node> out;
    for (const Node& n : g().nodes) {
      if (!(n.domain.empty() && n.op_type == "DequantizeLinear")) {
        out.push_back(n);
        continue;
      }
      auto x = const_value(n.inputs[0]);
      if (!x || !all_const(n, {1, 2})) {
        out.push_back(n);
        continue;
      }
      const Tensor s = require_scale(n, 1);
      const Tensor z = n.has_input(2) ? require_const(n, 2, "zero point") : Tensor();
      const int64_t rank = x->rank();
      int64_t axis = n.attr_int("axis", 1);
      if (axis < 0) axis += rank;
      int64_t inner = 1;
      for (int64_t d = axis + 1; d < rank; ++d) inner *= x->shape[d];
      const int64_t channels = s.size() > 1 ? x->shape[axis] : 1;
      Tensor f(DataType::kFloat32, x->shape);
      bool zero_zp = true;
      for (int64_t k = 0; k < x->size(); ++k) {
        const int64_t c = s.size() > 1 ? (k / inner) % channels : 0;
        const int64_t zp = z.size() ? z.i[z.size() > 1 ? c : 0] : 0;
        if (zp != 0) zero_zp = false;
        f.f[k] = static_cast<float>(x->i[k] - zp) * s.f[s.size() > 1 ? c : 0];
      }
      g().add_constant(n.outputs[0], f);
      if (x->dtype == DataType::kInt8 && zero_zp) {
        Given gw;
        gw.axis = s.size() > 1 ? static_cast<int>(axis) : -1;
        gw.w.q.assign(x->i.begin(), x->i.end());
        gw.w.scale.assign(s.f.begin(), s.f.end());
        given_[n.outputs[0]] = std::move(gw);
      } else if (x->dtype == DataType::kInt8 || x->dtype == DataType::kUInt8) {
        r_.notes.push_back("weights '" + n.inputs[0] +
                           "' have a non-zero zero point: re-quantized symmetrically");
      }
    }
    g().nodes = std::move(out);
  }

  void replace_uses(const std::string& from, const std::string& to) {
    for (auto& n : g().nodes)
      for (auto& in : n.inputs)
        if (in == from) in = to;
  }

  // Q(x) -> [Cast] -> DQ: DQ's output becomes x, and x gets the pair's QParams.
  void remove_qdq_pairs() {
    std::set<std::string> outputs(g().outputs.begin(), g().outputs.end());
    for (size_t i = 0; i < g().nodes.size(); ++i) {
      const Node dq = g().nodes[i];
      if (!(dq.domain.empty() && dq.op_type == "DequantizeLinear")) continue;
      // Back from the DQ to its Q through ops that keep the codes: same-type Casts (bypassed) and data
      // movement on the codes (QOperator-style models reshape uint8 tensors), which then move the float
      // value instead. Each moved value must feed only the next op of the chain.
      static const std::set<std::string> kMovement = {"Reshape",   "Flatten",   "Squeeze",
                                                      "Unsqueeze", "Transpose", "Identity"};
      std::string v = dq.inputs[0];
      int p = g().producer(v);
      std::vector<int> moves;  // DQ side first
      while (p >= 0 && g().nodes[p].domain.empty()) {
        const Node& pn = g().nodes[p];
        if (pn.op_type == "Cast") {
          if (g().value(pn.inputs[0]).dtype != g().value(pn.outputs[0]).dtype) break;  // a converting Cast
        } else if (!kMovement.count(pn.op_type) || g().consumers(pn.outputs[0]).size() != 1 ||
                   outputs.count(pn.outputs[0])) {
          break;
        } else {
          moves.push_back(p);
        }
        v = pn.inputs[0];
        p = g().producer(v);
      }
      if (p < 0 || g().nodes[p].op_type != "QuantizeLinear") continue;
      if (!moves.empty() && outputs.count(dq.outputs[0])) continue;
      const Node q = g().nodes[p];
      if (!all_const(q, {1, 2}) || !all_const(dq, {1, 2})) continue;  // runtime scales: Q and DQ stay ops
      const Tensor qs = require_scale(q, 1), ds = require_scale(dq, 1);
      const Tensor qz =
          q.has_input(2) ? require_const(q, 2, "zero point") : Tensor::scalar_int(DataType::kUInt8, 0);
      const Tensor dz =
          dq.has_input(2) ? require_const(dq, 2, "zero point") : Tensor::scalar_int(DataType::kUInt8, 0);
      // What one QParams per value cannot express stays as ops (exact, on the vector unit or the host).
      if (qs.size() != 1 || ds.size() != 1) {
        r_.notes.push_back("node '" + q.name + "': per-axis quantization of an activation; Q/DQ run as ops");
        continue;
      }
      if (qs.f[0] != ds.f[0] || qz.i[0] != dz.i[0]) {
        r_.notes.push_back("nodes '" + q.name + "' and '" + dq.name +
                           "' quantize and dequantize with different "
                           "parameters; they run as ops");
        continue;
      }
      QParams qp;
      qp.scale = qs.f[0];
      qp.zero_point = static_cast<int32_t>(qz.i[0]);
      qp.dtype = qz.dtype == DataType::kInt8 ? isa::DType::kInt8 : isa::DType::kUint8;
      const std::string x = q.inputs[0];
      const std::string y = dq.outputs[0];
      if (values_.count(x) && (values_[x].scale != qp.scale || values_[x].zero_point != qp.zero_point)) {
        r_.notes.push_back("value '" + x +
                           "' is quantized with two different scales; the second pair runs as ops");
        continue;
      }
      if (!moves.empty()) {
        // x -> moves (now on floats, same QParams) -> the DQ's consumers.
        std::string cur = x;
        for (auto it = moves.rbegin(); it != moves.rend(); ++it) {
          Node& m = g().nodes[static_cast<size_t>(*it)];
          m.inputs[0] = cur;
          cur = m.outputs[0];
          g().values.at(cur).dtype = g().value(x).dtype;
          values_[cur] = qp;
        }
        replace_uses(y, cur);
        values_[x] = qp;
      } else if (outputs.count(y) && g().producer(x) >= 0 && !outputs.count(x) &&
                 std::find(g().inputs.begin(), g().inputs.end(), x) == g().inputs.end()) {
        // y is a graph output: x's producer writes y directly, so the output keeps its name.
        Node& prod = g().nodes[g().producer(x)];
        for (auto& o : prod.outputs)
          if (o == x) o = y;
        replace_uses(x, y);
        g().nodes[i].outputs[0] = g().unique_value_name(y + "_unused");
        g().ensure_value(g().nodes[i].outputs[0]).dtype = DataType::kFloat32;
        values_[y] = qp;
      } else if (!outputs.count(y)) {
        replace_uses(y, x);
        values_[x] = qp;
      }
      ++r_.quantized_values;
    }
  }

  // Matrix node -> Relu/Clip whose output is quantized: the activation joins the node's epilogue, as
  // an int8 layer clamps instead of running a separate op.
  void fuse_activations() {
    std::set<size_t> fused;
    for (size_t i = 0; i < g().nodes.size(); ++i) {
      Node& m = g().nodes[i];
      if (!is_matrix_op(m) || m.has_attr(kActivation)) continue;
      const std::string v = m.outputs[0];
      const auto cons = g().consumers(v);
      if (cons.size() != 1 || values_.count(v)) continue;
      if (std::find(g().outputs.begin(), g().outputs.end(), v) != g().outputs.end()) continue;
      Node& a = g().nodes[cons[0]];
      if (!a.domain.empty() || !values_.count(a.outputs[0])) continue;
      if (a.op_type == "Relu") {
        m.attrs[kActivation].value = std::string("Relu");
      } else if (a.op_type == "Clip") {
        float lo = -INFINITY, hi = INFINITY;
        if (g().opset < 11) {
          lo = a.attr_float("min", lo);
          hi = a.attr_float("max", hi);
        } else {
          auto l = a.has_input(1) ? const_value(a.inputs[1]) : std::nullopt;
          auto h = a.has_input(2) ? const_value(a.inputs[2]) : std::nullopt;
          if ((a.has_input(1) && !l) || (a.has_input(2) && !h)) continue;
          if (l) lo = static_cast<float>(l->as_double(0));
          if (h) hi = static_cast<float>(h->as_double(0));
        }
        m.attrs[kActivation].value = std::string("Clip");
        m.attrs[kActMin].value = lo;
        m.attrs[kActMax].value = hi;
      } else {
        continue;
      }
      m.outputs[0] = a.outputs[0];
      fused.insert(static_cast<size_t>(cons[0]));
    }
    std::vector<Node> kept;
    for (size_t i = 0; i < g().nodes.size(); ++i)
      if (!fused.count(i)) kept.push_back(std::move(g().nodes[i]));
    g().nodes = std::move(kept);
  }

  // The model's scales by name (ModelQuant), then the plan they imply on this graph.
  void make_plan() {
    r_.quant.values = values_;
    for (const auto& [v, qp] : values_)
      if (g().has_value(v)) g().values.at(v).materialized = true;
    for (const Node& n : g().nodes) {
      if (!is_matrix_op(n) || n.inputs.size() < 2) continue;
      const Value& w = g().value(n.inputs[1]);
      auto it = given_.find(n.inputs[1]);
      if (it == given_.end()) {
        if (w.is_constant())
          r_.notes.push_back("node '" + n.name +
                             "': weights were not int8 in the model; quantized per channel here");
        continue;
      }
      const int axis = weight_channel_axis(n, static_cast<int>(w.constant->rank()));
      if (it->second.axis != -1 && it->second.axis != axis) {
        r_.notes.push_back("node '" + n.name +
                           "': weight scales along another axis than the output channels; "
                           "re-quantized per channel");
        continue;
      }
      r_.quant.weight_scales[n.name] = it->second.w.scale;
    }
    r_.plan = resolve_plan(g(), PrecisionSpec{});
    const auto given = apply_model_quant(g(), r_.quant, r_.plan, true, &r_.notes);
    quantize_plan(g(), r_.plan, {}, QuantOptions{}, given);
    r_.plan.calibration = model_calibration();
    for (const auto& [name, L] : r_.plan.layers) r_.int8_layers += given.count(name) ? 1 : 0;
  }

  struct Given {
    int axis = -1;  // -1: one scale for the whole tensor
    QuantizedWeights w;
  };
  QdqImport r_;
  std::map<std::string, Tensor> cache_;
  std::map<std::string, QParams> values_;
  std::map<std::string, Given> given_;
};

}  // namespace

CalibrationInfo model_calibration() {
  CalibrationInfo info;
  info.method = "model";
  info.source = "the model's own QuantizeLinear/DequantizeLinear scales";
  return info;
}

QdqImport import_qdq(const Graph& g) { return QdqPass(g).run(); }

namespace {

bool runtime_float(const Graph& g, const std::string& v) {
  return !v.empty() && g.has_value(v) && !g.value(v).is_constant() && is_float(g.value(v).dtype);
}

// The model's codes of a matrix node's constant weights: w / scale[channel] must be an integer in the
// int8 range (the weights are the model's dequantized codes); nullopt when they are not (a pass changed
// them) or the scales do not fit the weight.
std::optional<QuantizedWeights> recover_codes(const Node& n, const Tensor& w,
                                              const std::vector<float>& scales) {
  if (!w.floating() || w.rank() < 1) return std::nullopt;
  const int axis = weight_channel_axis(n, static_cast<int>(w.rank()));
  const int64_t channels = w.shape[static_cast<size_t>(axis)];
  if (scales.empty() || (scales.size() != 1 && static_cast<int64_t>(scales.size()) != channels))
    return std::nullopt;
  int64_t inner = 1;
  for (size_t d = static_cast<size_t>(axis) + 1; d < w.shape.size(); ++d) inner *= w.shape[d];
  QuantizedWeights qw;
  qw.scale.resize(static_cast<size_t>(channels));
  for (int64_t c = 0; c < channels; ++c) qw.scale[c] = scales[scales.size() == 1 ? 0 : c];
  qw.q.resize(static_cast<size_t>(w.size()));
  for (int64_t k = 0; k < w.size(); ++k) {
    const float s = qw.scale[static_cast<size_t>((k / inner) % channels)];
    if (!(s > 0.0f)) return std::nullopt;
    const float r = w.f[k] / s;
    const float q = std::nearbyint(r);
    if (std::fabs(r - q) > 1e-3f || q < -128.0f || q > 127.0f) return std::nullopt;
    qw.q[static_cast<size_t>(k)] = static_cast<int8_t>(q);
  }
  return qw;
}

}  // namespace

std::map<std::string, QuantizedWeights> apply_model_quant(const Graph& g, const ModelQuant& mq,
                                                          PrecisionPlan& plan, bool follow_model,
                                                          std::vector<std::string>* notes) {
  for (const auto& [v, qp] : mq.values)
    if (runtime_float(g, v)) plan.values.emplace(v, qp);
  // Forward through value-preserving ops (the passes' layout transposes, reshapes); nodes are in
  // topological order, so one sweep reaches the end of every chain.
  for (const Node& n : g.nodes) {
    if (!shares_input_qparams(n) || !n.has_input(0)) continue;
    auto in = plan.values.find(n.inputs[0]);
    if (in == plan.values.end()) continue;
    for (const auto& out : n.outputs)
      if (runtime_float(g, out)) plan.values.emplace(out, in->second);
  }
  // Backward through the layout changes the passes insert (a logical identity): a Conv whose quantized
  // output is a graph output writes it in NHWC and a layout change produces the named value.
  for (auto it = g.nodes.rbegin(); it != g.nodes.rend(); ++it) {
    const Node& n = *it;
    if (!(n.domain == kNpuDomain && n.op_type == "Transpose" && n.attr_int(kLayoutChange, 0)) ||
        !n.has_input(0))
      continue;
    auto out = plan.values.find(n.outputs[0]);
    if (out != plan.values.end() && runtime_float(g, n.inputs[0]))
      plan.values.emplace(n.inputs[0], out->second);
  }
  // Backward through a Relu whose output the model quantizes with its zero point at the bottom of the
  // range (the real range starts at 0): quantizing the Relu's input with the same parameters saturates
  // the negatives to 0, which is the Relu, so the op feeding it (torch exports its quantized add_relu
  // as Add -> Relu -> Q) runs in int8 too, bit for bit the model's result.
  for (auto it = g.nodes.rbegin(); it != g.nodes.rend(); ++it) {
    const Node& n = *it;
    if (!n.domain.empty() || n.op_type != "Relu" || !n.has_input(0)) continue;
    auto out = plan.values.find(n.outputs[0]);
    const std::string& in = n.inputs[0];
    if (out == plan.values.end() || plan.values.count(in) || !runtime_float(g, in)) continue;
    if (out->second.zero_point != out->second.qmin() || g.producer(in) < 0 || g.consumers(in).size() != 1)
      continue;
    plan.values.emplace(in, out->second);
  }
  if (follow_model) {
    for (const Node& n : g.nodes) {
      NodePrecision& np = plan.nodes[n.name];
      if (np.overridden) continue;
      bool any = false, all = true;
      auto check = [&](const std::string& v) {
        if (!runtime_float(g, v)) return;
        if (plan.values.count(v))
          any = true;
        else
          all = false;
      };
      for (const auto& v : n.inputs) check(v);
      for (const auto& v : n.outputs) check(v);
      if (any && all) np.requested = np.effective = Precision::kInt8;
    }
  }
  std::map<std::string, QuantizedWeights> given;
  for (const Node& n : g.nodes) {
    auto s = mq.weight_scales.find(n.name);
    if (s == mq.weight_scales.end() || plan.precision_of(n.name) != Precision::kInt8 || !is_matrix_op(n))
      continue;
    const Value& w = g.value(n.inputs.at(1));
    auto q = w.is_constant() ? recover_codes(n, *w.constant, s->second) : std::nullopt;
    if (q) {
      given.emplace(n.name, std::move(*q));
    } else if (notes) {
      notes->push_back("node '" + n.name +
                       "': the passes changed the model's int8 weights (e.g. folded a "
                       "BatchNormalization into them); re-quantized per channel");
    }
  }
  return given;
}

}  // namespace npusim::compiler::quant
