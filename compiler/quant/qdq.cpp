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

  Node make(const std::string& op, const std::string& base, std::vector<std::string> ins,
            std::vector<std::string> outs) {
    Node n;
    n.op_type = op;
    n.name = g().unique_node_name(base);
    n.inputs = std::move(ins);
    n.outputs = std::move(outs);
    return n;
  }

  std::string new_value(const std::string& base, DataType t) {
    const std::string name = g().unique_value_name(base);
    g().ensure_value(name).dtype = t;
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
      changed = true;
      const std::string xf = new_value(n.inputs[0] + "_dq", DataType::kFloat32);
      const std::string wf = new_value(n.inputs[3] + "_dq", DataType::kFloat32);
      const std::string yf = new_value(n.outputs[0] + "_f", DataType::kFloat32);
      out.push_back(make("DequantizeLinear", n.name + "_dq_x", {n.inputs[0], n.inputs[1], n.inputs[2]}, {xf}));
      Node dw = make("DequantizeLinear", n.name + "_dq_w", {n.inputs[3], n.inputs[4], n.inputs[5]}, {wf});
      const Tensor ws = require_const(n, 4, "weight scale");
      if (ws.size() > 1) dw.attrs["axis"].value = int64_t{conv ? 0 : 1};
      out.push_back(dw);
      Node op = make(conv ? "Conv" : "MatMul", n.name, {xf, wf}, {yf});
      if (conv) {
        op.attrs = n.attrs;
        if (n.has_input(8)) {
          // Bias: int32 with scale x_scale * w_scale[c], zero point 0 (ONNX QLinearConv).
          const Tensor xs = require_const(n, 1, "input scale");
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
      out.push_back(make("QuantizeLinear", n.name + "_q", {yf, n.inputs[conv ? 6 : 6], n.inputs[conv ? 7 : 7]},
                         {n.outputs[0]}));
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
      if (!x) {
        out.push_back(n);
        continue;
      }
      const Tensor s = require_const(n, 1, "scale");
      const std::optional<Tensor> z = n.has_input(2) ? const_value(n.inputs[2]) : std::optional<Tensor>(Tensor());
      if (!z) throw ModelError("node '" + n.name + "': the zero point is not a constant");
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
        const int64_t zp = z->size() ? z->i[z->size() > 1 ? c : 0] : 0;
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
        r_.notes.push_back("weights '" + n.inputs[0] + "' have a non-zero zero point: re-quantized symmetrically");
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
      std::string v = dq.inputs[0];
      int p = g().producer(v);
      while (p >= 0 && g().nodes[p].op_type == "Cast" && g().nodes[p].domain.empty()) {
        const DataType from = g().value(g().nodes[p].inputs[0]).dtype;
        if (from != g().value(g().nodes[p].outputs[0]).dtype) break;  // a converting Cast changes codes
        v = g().nodes[p].inputs[0];
        p = g().producer(v);
      }
      if (p < 0 || g().nodes[p].op_type != "QuantizeLinear") continue;
      const Node q = g().nodes[p];
      const Tensor qs = require_const(q, 1, "scale"), ds = require_const(dq, 1, "scale");
      const Tensor qz = q.has_input(2) ? require_const(q, 2, "zero point") : Tensor::scalar_int(DataType::kUInt8, 0);
      const Tensor dz = dq.has_input(2) ? require_const(dq, 2, "zero point") : Tensor::scalar_int(DataType::kUInt8, 0);
      if (qs.size() != 1 || ds.size() != 1)
        throw ModelError("node '" + q.name + "': per-axis quantization of activations is not supported");
      if (qs.f[0] != ds.f[0] || qz.i[0] != dz.i[0])
        throw ModelError("nodes '" + q.name + "' and '" + dq.name + "' quantize and dequantize with different "
                         "parameters");
      QParams qp;
      qp.scale = qs.f[0];
      qp.zero_point = static_cast<int32_t>(qz.i[0]);
      qp.dtype = qz.dtype == DataType::kInt8 ? isa::DType::kInt8 : isa::DType::kUint8;
      const std::string x = q.inputs[0];
      const std::string y = dq.outputs[0];
      if (values_.count(x) && (values_[x].scale != qp.scale || values_[x].zero_point != qp.zero_point))
        throw ModelError("value '" + x + "' is quantized with two different scales");
      if (outputs.count(y) && g().producer(x) >= 0 && !outputs.count(x) &&
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

  bool runtime_float(const std::string& v) {
    return !v.empty() && g().has_value(v) && !g().value(v).is_constant() && is_float(g().value(v).dtype);
  }

  void make_plan() {
    PrecisionPlan& plan = r_.plan;
    plan.model = Precision::kInt8;
    plan.values = values_;
    plan.calibration.method = "model";
    plan.calibration.source = "the model's own QuantizeLinear/DequantizeLinear scales";
    QuantOptions options;
    for (const Node& n : g().nodes) {
      NodePrecision np;
      bool any = false, all = true;
      auto check = [&](const std::string& v) {
        if (!runtime_float(v)) return;
        if (values_.count(v)) any = true;
        else all = false;
      };
      for (const auto& v : n.inputs) check(v);
      for (const auto& v : n.outputs) check(v);
      const bool int8 = any && all;
      np.requested = np.effective = int8 ? Precision::kInt8 : Precision::kFp32;
      if (int8 && is_matrix_op(n)) {
        const QuantizedWeights* gw = nullptr;
        auto it = given_.find(n.inputs.at(1));
        const int axis = n.op_type == "Conv" || (n.op_type == "Gemm" && n.attr_int("transB", 0)) ? 0
                         : g().value(n.inputs[1]).is_constant() ? static_cast<int>(g().value(n.inputs[1]).constant->rank()) - 1
                                                                : -1;
        if (it != given_.end() && (it->second.axis == -1 || it->second.axis == axis)) gw = &it->second.w;
        else if (it != given_.end()) r_.notes.push_back("node '" + n.name + "': weight scales along another axis; re-quantized");
        if (!gw && g().value(n.inputs[1]).is_constant())
          r_.notes.push_back("node '" + n.name + "': weights were not int8 in the model; quantized per channel here");
        std::string reason;
        if (!build_layer(g(), n, plan, options, gw, reason)) {
          np.effective = Precision::kFp32;
          np.reason = reason;
        } else {
          ++r_.int8_layers;
        }
      }
      plan.nodes[n.name] = np;
    }
  }

  struct Given {
    int axis = -1;
    QuantizedWeights w;
  };
  QdqImport r_;
  std::map<std::string, Tensor> cache_;
  std::map<std::string, QParams> values_;
  std::map<std::string, Given> given_;
};

}  // namespace

QdqImport import_qdq(const Graph& g) { return QdqPass(g).run(); }

}  // namespace npusim::compiler::quant
