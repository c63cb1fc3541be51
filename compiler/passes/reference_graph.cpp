// Back from the lowered form to plain ONNX, so the FP32 interpreter (which implements exactly the op
// table's ONNX ops) can check every pass numerically and run a lowered graph.
#include "compiler/interp/interpreter.h"
#include "compiler/passes/expand.h"
#include "compiler/passes/pass_util.h"
#include "compiler/passes/passes.h"

namespace npusim::compiler {
namespace {

using passes::detail::add_constant;
using passes::detail::add_value;
using passes::detail::make_node;

// The nodes computing matrix node n with its epilogue split off: mm -> + bias -> + residual -> act.
// The activation node (last) carries no parameters yet; the caller sets them.
std::vector<Node> split_epilogue(Graph& g, Node n) {
  const std::string y = n.outputs[0];
  const Value yv = g.value(y);
  const std::string act = n.attr_string(kActivation, "");
  std::string residual, bias;
  if (n.has_attr(kResidualInput)) residual = n.inputs.at(static_cast<size_t>(n.attr_int(kResidualInput, 3)));
  if (n.op_type == "MatMul" && n.has_input(2)) bias = n.inputs[2];
  // Matrix nodes: the core's own inputs (MatMul's bias and residual are epilogue inputs); an
  // element-wise node or a BatchNormalization keeps all of its inputs.
  const bool matrix = n.op_type == "Conv" || n.op_type == "ConvTranspose" || n.op_type == "Gemm";
  if (n.op_type == "MatMul")
    n.inputs.resize(2);
  else if (matrix)
    n.inputs.resize(std::min<size_t>(n.inputs.size(), 3));
  while (!n.inputs.empty() && n.inputs.back().empty()) n.inputs.pop_back();
  for (auto it = n.attrs.begin(); it != n.attrs.end();)
    it = it->first.rfind("npu.", 0) == 0 && it->first != kCaptures ? n.attrs.erase(it) : std::next(it);
  struct Step {
    std::string op, operand;
  };
  std::vector<Step> steps;
  if (!bias.empty()) steps.push_back({"Add", bias});
  if (!residual.empty()) steps.push_back({"Add", residual});
  if (!act.empty()) steps.push_back({act, ""});
  auto fresh = [&](const std::string& what) {
    return add_value(g, y + "_" + what, yv.dtype, yv.shape, yv.shape_known);
  };
  std::string v = steps.empty() ? y : fresh("mm");
  n.outputs[0] = v;
  std::vector<Node> out = {n};
  for (size_t k = 0; k < steps.size(); ++k) {
    const std::string dst = k + 1 == steps.size() ? y : fresh(steps[k].op);
    std::vector<std::string> ins = {v};
    if (!steps[k].operand.empty()) ins.push_back(steps[k].operand);
    out.push_back(make_node(g, steps[k].op, n.name + "_epilogue" + std::to_string(k), ins, {dst}));
    v = dst;
  }
  return out;
}

}  // namespace

Graph reference_graph(const Graph& lowered) {
  Graph g = lowered;
  for (auto& [name, v] : g.values) v.layout.clear();
  std::vector<Node> out;
  for (const Node& orig : lowered.nodes) {
    Node n = orig;
    std::vector<Node> parts;
    const bool epilogue = n.has_attr(kActivation) || n.has_attr(kResidualInput) ||
                          (n.domain.empty() && n.op_type == "MatMul" && n.has_input(2));
    if (epilogue) {
      // Keep the epilogue parameters before split_epilogue strips npu.* attributes.
      const std::string act = n.attr_string(kActivation, "");
      parts = split_epilogue(g, n);
      Node& last = parts.back();
      if (act == "Clip") {
        const float lo = orig.attr_float(kActMin, 0), hi = orig.attr_float(kActMax, 0);
        if (g.opset < 11) {
          last.attrs["min"].value = lo;
          last.attrs["max"].value = hi;
        } else {
          last.inputs.push_back(add_constant(g, n.name + "_min", Tensor::scalar_float(lo)));
          last.inputs.push_back(add_constant(g, n.name + "_max", Tensor::scalar_float(hi)));
        }
      } else if (act == "LeakyRelu") {
        last.attrs["alpha"].value = orig.attr_float(kAlpha, 0.01f);
      } else if (act == "HardSigmoid") {
        last.attrs["alpha"].value = orig.attr_float(kAlpha, 0.2f);
        last.attrs["beta"].value = orig.attr_float(kBeta, 0.5f);
      } else if (act == "Gelu" || act == "Silu" ||
                 (act == "HardSwish" && !interpreter_supports("HardSwish"))) {
        Node a = last;
        parts.pop_back();
        auto e = act == "Gelu"   ? passes::detail::expand_gelu(g, a)
                 : act == "Silu" ? passes::detail::expand_silu(g, a)
                                 : passes::detail::expand_hardswish(g, a);
        for (auto& p : *e) parts.push_back(std::move(p));
      }
    } else if (n.domain == kNpuDomain) {
      std::optional<std::vector<Node>> e;
      if (n.op_type == "Gelu") e = passes::detail::expand_gelu(g, n);
      if (n.op_type == "Silu") e = passes::detail::expand_silu(g, n);
      if (is_rmsnorm(n)) e = passes::detail::expand_rmsnorm(g, n);
      if (n.op_type == "Transpose" && n.attr_int(kLayoutChange, 0) == 1) {
        Node id = n;
        id.domain.clear();
        id.op_type = "Identity";
        id.attrs.clear();
        e = std::vector<Node>{id};
      }
      if (!e)
        throw std::runtime_error("reference_graph: no ONNX form for node '" + n.name + "' (npu." + n.op_type +
                                 ")");
      parts = std::move(*e);
    } else if (n.domain.empty() && n.op_type == "LayerNormalization" &&
               !interpreter_supports("LayerNormalization")) {
      auto e = passes::detail::expand_layernorm(g, n);
      if (!e) throw std::runtime_error("reference_graph: cannot expand LayerNormalization '" + n.name + "'");
      parts = std::move(*e);
    } else if (n.domain.empty() && n.op_type == "HardSwish" && !interpreter_supports("HardSwish")) {
      parts = *passes::detail::expand_hardswish(g, n);
    } else {
      parts.push_back(n);
    }
    for (auto& p : parts) {
      for (auto it = p.attrs.begin(); it != p.attrs.end();)
        it = it->first.rfind("npu.", 0) == 0 && it->first != kCaptures ? p.attrs.erase(it) : std::next(it);
      out.push_back(std::move(p));
    }
  }
  g.nodes = std::move(out);
  std::map<std::string, int> seen;
  for (auto& n : g.nodes)
    if (seen[n.name]++) n.name = g.unique_node_name(n.name + "_r" + std::to_string(seen[n.name]));
  return g;
}

}  // namespace npusim::compiler
