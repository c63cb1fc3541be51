// Layout assignment: the matrix unit's implicit-im2col CONV reads HWC tiles (channels innermost) and
// the vector unit broadcasts per-channel vectors along rows, so 4-D activations between conv-like ops
// live in NHWC. ONNX semantics stay logical (NCHW); Value::layout records the memory order, and a
// conversion node is inserted only where a reader needs another order than the producer wrote.
#include <optional>
#include <set>

#include "compiler/passes/pass_util.h"
#include "compiler/passes/passes.h"

namespace npusim::compiler::passes {
namespace {

using Layout = std::vector<int>;

bool conv_like(const Node& n) {
  static const std::set<std::string> ops = {
      "Conv",          "ConvTranspose",      "MaxPool", "AveragePool",          "GlobalAveragePool",
      "GlobalMaxPool", "BatchNormalization", "LRN",     "InstanceNormalization"};
  return n.domain.empty() && ops.count(n.op_type);
}

// Ops whose 4-D operands may be in any (common) layout: elementwise maps, Concat/Pad/Resize (axis and
// pads are logical; the back end maps them through the layout).
bool layout_agnostic(const Node& n) {
  static const std::set<std::string> ops = {
      "Add",       "Sub",    "Mul",       "Div",      "Pow",        "Max",     "Min",  "Sum",
      "Mean",      "Relu",   "LeakyRelu", "PRelu",    "Clip",       "Sigmoid", "Tanh", "HardSigmoid",
      "HardSwish", "Erf",    "Exp",       "Sqrt",     "Reciprocal", "Neg",     "Abs",  "Elu",
      "Selu",      "Celu",   "Softplus",  "Softsign", "Log",        "Floor",   "Ceil", "Round",
      "Sign",      "Concat", "Pad",       "Resize",   "Upsample"};
  if (n.domain == kNpuDomain) return n.op_type == "Gelu" || n.op_type == "Silu";
  return n.domain.empty() && ops.count(n.op_type);
}

bool is_4d_activation(const Graph& g, const std::string& v) {
  if (v.empty()) return false;
  const Value& val = g.value(v);
  return !val.is_constant() && val.shape_known && val.shape.size() == 4;
}

// Two layouts of the same shape give the same bytes when the non-unit dims appear in the same order.
bool same_memory_order(const Shape& s, const Layout& a, const Layout& b) {
  auto order = [&](const Layout& l) {
    std::vector<int> o;
    for (size_t k = 0; k < s.size(); ++k) {
      const int d = l.empty() ? static_cast<int>(k) : l[k];
      if (s[d] != 1) o.push_back(d);
    }
    return o;
  };
  return order(a) == order(b);
}

// An ONNX Transpose of a 4-D activation whose input is in layout `from`: the output layout that keeps
// every byte where it is (ONNX order or NHWC), or nullopt when none of those does. Output dim i is input
// dim perm[i], so the output's memory order is the input's with each dim renamed by the inverse perm.
std::optional<Layout> transpose_keeping_bytes(const Graph& g, const Node& n, const Layout& from) {
  if (!n.domain.empty() || n.op_type != "Transpose" || !is_4d_activation(g, n.inputs[0]) ||
      !is_4d_activation(g, n.outputs[0]))
    return std::nullopt;
  const std::vector<int64_t> perm = n.attr_ints("perm", {3, 2, 1, 0});
  if (perm.size() != 4) return std::nullopt;
  Layout inv(4, 0), to;
  for (int i = 0; i < 4; ++i) {
    if (perm[i] < 0 || perm[i] > 3) return std::nullopt;
    inv[static_cast<size_t>(perm[i])] = i;
  }
  for (int k = 0; k < 4; ++k) to.push_back(inv[static_cast<size_t>(from.empty() ? k : from[k])]);
  const Shape& y = g.value(n.outputs[0]).shape;
  if (same_memory_order(y, to, {})) return Layout{};
  if (same_memory_order(y, to, kNhwc)) return kNhwc;
  return std::nullopt;
}

std::string layout_name(const Layout& l) { return l.empty() ? "NCHW" : l == kNhwc ? "NHWC" : "custom"; }

// The layout node n wants for its input k (nullopt: no requirement, e.g. constants / weights).
std::optional<Layout> required(const Graph& g, const Node& n, size_t k, const Layout& agnostic_choice) {
  const std::string& v = n.inputs[k];
  if (!is_4d_activation(g, v)) return std::nullopt;
  if (conv_like(n)) {
    if (k == 0 || (n.has_attr(kResidualInput) && static_cast<int64_t>(k) == n.attr_int(kResidualInput, -1)))
      return kNhwc;
    return Layout{};
  }
  if (layout_agnostic(n)) return agnostic_choice;
  // A Transpose that can leave its input's bytes where they are reads them in their layout (it is then a
  // free alias: compiler/passes/placement.cpp); ConvNeXt's NCHW <-> NHWC permutes around its LayerNorms.
  if (transpose_keeping_bytes(g, n, g.value(v).layout)) return std::nullopt;
  return Layout{};
}

}  // namespace

void assign_layouts(Graph& g) {
  for (auto& [name, v] : g.values) v.layout.clear();
  if (g.nhwc_io)
    for (const auto& in : g.inputs)
      if (is_4d_activation(g, in)) g.value(in).layout = kNhwc;
  // 1. Forward: what every node writes.
  std::map<std::string, Layout> agnostic_choice;  // node name -> layout of its 4-D operands
  for (const auto& n : g.nodes) {
    Layout out;
    if (conv_like(n) && is_4d_activation(g, n.inputs[0])) {
      out = kNhwc;
    } else if (layout_agnostic(n)) {
      for (const auto& in : n.inputs)
        if (is_4d_activation(g, in) && g.value(in).layout == kNhwc) out = kNhwc;
      agnostic_choice[n.name] = out;
    } else if (auto keep = n.has_input(0) ? transpose_keeping_bytes(g, n, g.value(n.inputs[0]).layout)
                                          : std::nullopt) {
      out = *keep;
    }
    for (const auto& o : n.outputs)
      if (is_4d_activation(g, o)) g.value(o).layout = out;
  }
  // 2. A graph output in NHWC: its producer writes a renamed NHWC copy, and a conversion produces the
  // output itself in ONNX order under its own name.
  std::vector<Node> after_producer;  // (inserted in step 3 right after the producer)
  std::map<std::string, std::string> renamed;
  for (const auto& o : g.outputs) {
    Value& v = g.value(o);
    if (g.nhwc_io && v.layout == kNhwc) continue;  // written where the graph declares it
    if (v.layout.empty() || same_memory_order(v.shape, v.layout, {}) || renamed.count(o)) {
      v.layout = same_memory_order(v.shape, v.layout, {}) ? Layout{} : v.layout;
      continue;
    }
    const std::string inner = detail::add_value(g, o + "_nhwc", v.dtype, v.shape);
    g.value(inner).layout = g.value(o).layout;
    renamed[o] = inner;
  }
  for (auto& n : g.nodes) {
    for (auto& in : n.inputs)
      if (renamed.count(in)) in = renamed[in];
    for (auto& out : n.outputs)
      if (renamed.count(out)) out = renamed[out];
  }
  // 3. Insert conversions before the first reader that needs them (one per value and target layout).
  std::map<std::pair<std::string, Layout>, std::string> converted;
  std::vector<Node> out;
  int count = 0;
  auto convert = [&](const std::string& v, const Layout& to, const std::string& reason,
                     const std::string& out_name) -> std::string {
    auto key = std::make_pair(v, to);
    if (auto it = converted.find(key); it != converted.end()) return it->second;
    const Value& src = g.value(v);
    const Layout from = src.layout;
    std::string dst = out_name.empty()
                          ? detail::add_value(g, v + (to.empty() ? "_nchw" : "_nhwc"), src.dtype, src.shape)
                          : out_name;
    g.value(dst).layout = to;
    Node t = detail::make_node(g, "Transpose", "layout_" + std::to_string(count++) + "_" + v, {v}, {dst});
    t.name = g.unique_node_name(t.name);
    t.domain = kNpuDomain;
    // perm[j] = where the j-th dim of the output's memory order sits in the input's memory order.
    std::vector<int64_t> perm;
    for (size_t j = 0; j < src.shape.size(); ++j) {
      const int d = to.empty() ? static_cast<int>(j) : to[j];
      for (size_t i = 0; i < src.shape.size(); ++i)
        if ((from.empty() ? static_cast<int>(i) : from[i]) == d) perm.push_back(static_cast<int64_t>(i));
    }
    t.attrs["perm"].value = perm;
    t.attrs[kLayoutChange].value = int64_t{1};
    t.attrs[kLayoutReason].value = reason;
    out.push_back(std::move(t));
    converted[key] = dst;
    return dst;
  };
  for (auto& n : g.nodes) {
    const Layout choice = agnostic_choice.count(n.name) ? agnostic_choice[n.name] : Layout{};
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      auto want = required(g, n, k, choice);
      if (!want) {
        // A 4-D constant operand of an NHWC elementwise node is stored in NHWC too.
        const std::string& v = n.inputs[k];
        if (!v.empty() && layout_agnostic(n) && choice == kNhwc && g.value(v).is_constant() &&
            g.value(v).shape.size() == 4 && !same_memory_order(g.value(v).shape, kNhwc, {})) {
          if (detail::use_count(g, v) == 1) {
            g.value(v).layout = kNhwc;
          } else {
            auto key = std::make_pair(v, kNhwc);
            if (!converted.count(key)) {
              std::string c = detail::add_constant(g, v + "_nhwc", *g.value(v).constant);
              g.value(c).layout = kNhwc;
              converted[key] = c;
            }
            n.inputs[k] = converted[key];
          }
        }
        continue;
      }
      const Value& v = g.value(n.inputs[k]);
      if (same_memory_order(v.shape, v.layout, *want)) continue;
      const std::string reason = n.op_type + " '" + n.name + "' reads " + layout_name(*want) + " but '" +
                                 n.inputs[k] + "' is " + layout_name(v.layout);
      n.inputs[k] = convert(n.inputs[k], *want, reason, "");
    }
    out.push_back(n);
    for (const auto& o : n.outputs)
      for (const auto& [orig, inner] : renamed)
        if (o == inner)
          convert(inner, {}, "graph output '" + orig + "' is in ONNX order but its producer writes NHWC",
                  orig);
  }
  g.nodes = std::move(out);
  detail::drop_unreferenced_values(g);
}

}  // namespace npusim::compiler::passes
