// 1-D convolutions as 2-D ones of height 1: the back end's convolution lowerings are 2-D (the array's
// conv mapping, its tiling and layouts), so an audio model's Conv1d runs on the array instead of the host.
#include "compiler/passes/pass_util.h"
#include "compiler/passes/passes.h"

namespace npusim::compiler::passes {

void conv1d_as_2d(Graph& g) {
  std::vector<Node> out;
  out.reserve(g.nodes.size());
  bool changed = false;
  for (const Node& n : g.nodes) {
    if (n.op_type != "Conv" || !n.domain.empty() || n.outputs.empty() || n.outputs[0].empty()) {
      out.push_back(n);
      continue;
    }
    const Value* x = n.has_input(0) ? &g.value(n.inputs[0]) : nullptr;
    const Tensor* w = n.has_input(1) ? detail::constant_of(g, n.inputs[1]) : nullptr;
    const Value* y = &g.value(n.outputs[0]);
    if (!x || !w || !x->fully_known() || x->shape.size() != 3 || w->rank() != 3 || !y->fully_known() ||
        y->shape.size() != 3 || !is_float(x->dtype)) {
      out.push_back(n);
      continue;
    }
    const Shape xs = x->shape, ys = y->shape, ws = w->shape;
    const std::string base = n.name + "/2d";
    const std::string x4 = detail::add_value(g, base + "/x", x->dtype, {xs[0], xs[1], 1, xs[2]});
    const std::string shape_in =
        detail::add_constant(g, base + "/shape_in", detail::int64_vector({xs[0], xs[1], 1, xs[2]}));
    Node rx = detail::make_node(g, "Reshape", n.name + "/reshape_in", {n.inputs[0], shape_in}, {x4});
    Tensor w4 = *w;
    w4.shape = {ws[0], ws[1], 1, ws[2]};
    Node conv = n;  // keeps its name: reports and mapping files name the layer as the model does
    conv.inputs[0] = x4;
    conv.inputs[1] = detail::add_constant(g, base + "/w", std::move(w4));
    const std::string y4 = detail::add_value(g, base + "/y", y->dtype, {ys[0], ys[1], 1, ys[2]});
    conv.outputs = {y4};
    auto widen = [&](const char* key, int64_t one) {
      if (!n.has_attr(key)) return;
      std::vector<int64_t> v = n.attr_ints(key);
      if (std::string(key) == "pads")
        v = {0, v.at(0), 0, v.at(1)};
      else
        v.insert(v.begin(), one);
      conv.attrs[key].value = v;
    };
    widen("kernel_shape", 1);
    widen("strides", 1);
    widen("dilations", 1);
    widen("pads", 0);
    const std::string shape_out = detail::add_constant(g, base + "/shape_out", detail::int64_vector(ys));
    Node ry = detail::make_node(g, "Reshape", n.name + "/reshape_out", {y4, shape_out}, {n.outputs[0]});
    out.push_back(std::move(rx));
    out.push_back(std::move(conv));
    out.push_back(std::move(ry));
    changed = true;
  }
  if (!changed) return;
  g.nodes = std::move(out);
  detail::drop_unreferenced_values(g);
}

}  // namespace npusim::compiler::passes
