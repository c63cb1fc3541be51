// Control flow: If, Loop and Scan run their subgraphs (Node::subgraphs) with the enclosing values they
// capture in scope, with ONNX's semantics.
#include <algorithm>

#include "compiler/interp/kernels.h"

namespace npusim::compiler::interp {
namespace {

// The node's captured values (the inputs after its formal ones) under the names its subgraphs use.
Scope captures(const KernelContext& ctx) {
  Scope scope;
  auto it = ctx.node.attrs.find(kCaptures);
  if (it == ctx.node.attrs.end()) return scope;
  const auto& names = it->second.strings();
  const size_t first = num_formal_inputs(ctx.node);
  for (size_t k = 0; k < names.size(); ++k) scope[names[k]] = ctx.in[first + k];
  return scope;
}

const Graph& subgraph(const KernelContext& ctx, const std::string& name) {
  auto it = ctx.node.subgraphs.find(name);
  if (it == ctx.node.subgraphs.end()) ctx.fail("has no '" + name + "' subgraph");
  return *it->second;
}

bool truth(const KernelContext& ctx, const Tensor& t, const std::string& what) {
  if (t.size() != 1) ctx.fail(what + " must hold one value, it has " + std::to_string(t.size()));
  return t.as_double(0) != 0.0;
}

// Element block [index] of `t` along `axis`, that axis removed.
Tensor take(const Tensor& t, int64_t axis, int64_t index) {
  Shape s = t.shape;
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= s[d];
  for (size_t d = axis + 1; d < s.size(); ++d) inner *= s[d];
  const int64_t n = s[axis];
  s.erase(s.begin() + axis);
  Tensor r(t.dtype, s);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t k = 0; k < inner; ++k) {
      const int64_t src = (o * n + index) * inner + k, dst = o * inner + k;
      if (t.floating())
        r.f[dst] = t.f[src];
      else
        r.i[dst] = t.i[src];
    }
  return r;
}

// `parts` (equal shapes) stacked along a new `axis`.
Tensor stack(const std::vector<Tensor>& parts, int64_t axis, DataType dtype, const Shape& empty_part) {
  const Shape& ps = parts.empty() ? empty_part : parts[0].shape;
  Shape s = ps;
  s.insert(s.begin() + axis, static_cast<int64_t>(parts.size()));
  Tensor r(parts.empty() ? dtype : parts[0].dtype, s);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= ps[d];
  for (size_t d = axis; d < ps.size(); ++d) inner *= ps[d];
  const auto n = static_cast<int64_t>(parts.size());
  for (int64_t p = 0; p < n; ++p)
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t k = 0; k < inner; ++k) {
        const int64_t src = o * inner + k, dst = (o * n + p) * inner + k;
        if (r.floating())
          r.f[dst] = parts[p].f[src];
        else
          r.i[dst] = parts[p].i[src];
      }
  return r;
}

void if_kernel(KernelContext& ctx) {
  const bool c = truth(ctx, ctx.input(0), "the condition");
  std::vector<Tensor> outs =
      run_subgraph(subgraph(ctx, c ? "then_branch" : "else_branch"), {}, captures(ctx));
  if (outs.size() != ctx.out.size())
    ctx.fail("the branch taken has " + std::to_string(outs.size()) + " outputs, the node " +
             std::to_string(ctx.out.size()));
  for (size_t k = 0; k < outs.size(); ++k) ctx.out[k] = std::move(outs[k]);
}

// A Loop that neither a trip count nor a condition ends would run forever: refuse past this many.
constexpr int64_t kMaxLoopIterations = int64_t{1} << 24;

void loop_kernel(KernelContext& ctx) {
  const Graph& body = subgraph(ctx, "body");
  const size_t formal = num_formal_inputs(ctx.node);
  const size_t carried = formal - 2;
  if (formal < 2 || body.inputs.size() != carried + 2 || body.outputs.size() < carried + 1)
    ctx.fail("the body's inputs and outputs do not match the loop-carried values");
  const size_t scans = body.outputs.size() - 1 - carried;
  const int64_t trips = ctx.has(0) ? ctx.iscalar(0) : kMaxLoopIterations;
  bool cond = ctx.has(1) ? truth(ctx, ctx.input(1), "the initial condition") : true;
  std::vector<Tensor> state;
  for (size_t k = 0; k < carried; ++k) state.push_back(ctx.input(2 + k));
  std::vector<std::vector<Tensor>> scanned(scans);
  const Scope scope = captures(ctx);
  int64_t it = 0;
  for (; it < trips && cond; ++it) {
    if (it == kMaxLoopIterations) ctx.fail("ran " + std::to_string(it) + " iterations without ending");
    std::map<std::string, Tensor> feeds;
    feeds[body.inputs[0]] = Tensor::scalar_int(DataType::kInt64, it);
    feeds[body.inputs[1]] = Tensor::from_ints(DataType::kBool, {}, {cond ? 1 : 0});
    for (size_t k = 0; k < carried; ++k) feeds[body.inputs[2 + k]] = state[k];
    std::vector<Tensor> outs = run_subgraph(body, std::move(feeds), scope);
    cond = truth(ctx, outs[0], "the body's condition output");
    for (size_t k = 0; k < carried; ++k) state[k] = std::move(outs[1 + k]);
    for (size_t k = 0; k < scans; ++k) scanned[k].push_back(std::move(outs[1 + carried + k]));
  }
  for (size_t k = 0; k < carried; ++k) ctx.out[k] = std::move(state[k]);
  for (size_t k = 0; k < scans; ++k) {
    const Value* v =
        body.has_value(body.outputs[1 + carried + k]) ? &body.value(body.outputs[1 + carried + k]) : nullptr;
    const Shape empty = v && v->fully_known() ? v->shape : Shape{};
    ctx.out[carried + k] = stack(scanned[k], 0, v ? v->dtype : DataType::kFloat32, empty);
  }
}

// Scan since opset 9 over `states` and `inputs` (no batch axis); appends the final states and the
// scan outputs to `out`.
void scan9(const KernelContext& ctx, const std::vector<Tensor>& states_in, const std::vector<Tensor>& inputs,
           const std::vector<int64_t>& in_axes, const std::vector<int64_t>& in_dirs,
           const std::vector<int64_t>& out_axes, const std::vector<int64_t>& out_dirs,
           std::vector<Tensor>& out) {
  const Graph& body = subgraph(ctx, "body");
  const size_t n = states_in.size(), m = inputs.size();
  if (body.inputs.size() != n + m || body.outputs.size() < n)
    ctx.fail("the body's inputs do not match the node's");
  const size_t k_out = body.outputs.size() - n;
  int64_t len = -1;
  for (size_t j = 0; j < m; ++j) {
    const int64_t axis = norm_axis(ctx, in_axes.empty() ? 0 : in_axes[j], inputs[j].rank());
    const int64_t l = inputs[j].shape[axis];
    if (len >= 0 && l != len) ctx.fail("scan inputs have different sequence lengths");
    len = l;
  }
  if (len < 0) ctx.fail("has no scan input");
  std::vector<Tensor> states = states_in;
  std::vector<std::vector<Tensor>> scanned(k_out);
  const Scope scope = captures(ctx);
  for (int64_t t = 0; t < len; ++t) {
    std::map<std::string, Tensor> feeds;
    for (size_t k = 0; k < n; ++k) feeds[body.inputs[k]] = states[k];
    for (size_t j = 0; j < m; ++j) {
      const int64_t axis = norm_axis(ctx, in_axes.empty() ? 0 : in_axes[j], inputs[j].rank());
      const bool reverse = !in_dirs.empty() && in_dirs[j] == 1;
      feeds[body.inputs[n + j]] = take(inputs[j], axis, reverse ? len - 1 - t : t);
    }
    std::vector<Tensor> outs = run_subgraph(body, std::move(feeds), scope);
    for (size_t k = 0; k < n; ++k) states[k] = std::move(outs[k]);
    for (size_t k = 0; k < k_out; ++k) scanned[k].push_back(std::move(outs[n + k]));
  }
  for (auto& s : states) out.push_back(std::move(s));
  for (size_t k = 0; k < k_out; ++k) {
    if (!out_dirs.empty() && out_dirs[k] == 1) std::reverse(scanned[k].begin(), scanned[k].end());
    const Value& v = body.value(body.outputs[n + k]);
    const int64_t rank = (v.shape_known ? static_cast<int64_t>(v.shape.size()) : 0) + 1;
    const int64_t axis = norm_axis(ctx, out_axes.empty() ? 0 : out_axes[k],
                                   scanned[k].empty() ? rank : scanned[k][0].rank() + 1);
    out.push_back(stack(scanned[k], axis, v.dtype, v.fully_known() ? v.shape : Shape{}));
  }
}

void scan_kernel(KernelContext& ctx) {
  const size_t formal = num_formal_inputs(ctx.node);
  const auto m = static_cast<size_t>(ctx.node.attr_int("num_scan_inputs", 0));
  if (ctx.opset >= 9) {
    if (m == 0 || m > formal) ctx.fail("num_scan_inputs must be between 1 and the number of inputs");
    std::vector<Tensor> states, inputs;
    for (size_t k = 0; k < formal; ++k) (k < formal - m ? states : inputs).push_back(ctx.input(k));
    std::vector<Tensor> out;
    scan9(ctx, states, inputs, ctx.node.attr_ints("scan_input_axes"),
          ctx.node.attr_ints("scan_input_directions"), ctx.node.attr_ints("scan_output_axes"),
          ctx.node.attr_ints("scan_output_directions"), out);
    for (size_t k = 0; k < out.size() && k < ctx.out.size(); ++k) ctx.out[k] = std::move(out[k]);
    return;
  }
  // Opset 8: input 0 is sequence_lens, every other input has a leading batch axis; the scan axis is 1.
  if (m == 0 || m + 1 > formal) ctx.fail("num_scan_inputs must be between 1 and the number of inputs - 1");
  const size_t n = formal - 1 - m;
  const int64_t batch = ctx.input(1).shape.empty() ? 0 : ctx.input(1).shape[0];
  if (ctx.has(0))
    for (int64_t b = 0; b < ctx.input(0).size(); ++b)
      if (ctx.input(0).as_int(b) != ctx.input(1 + n).shape[1])
        ctx.fail("sequence_lens shorter than the sequence are not supported");
  std::vector<std::vector<Tensor>> per_batch;
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<Tensor> states, inputs, out;
    for (size_t k = 0; k < n + m; ++k) (k < n ? states : inputs).push_back(take(ctx.input(1 + k), 0, b));
    scan9(ctx, states, inputs, {}, ctx.node.attr_ints("directions"), {}, {}, out);
    per_batch.push_back(std::move(out));
  }
  for (size_t k = 0; k < ctx.out.size(); ++k) {
    std::vector<Tensor> parts;
    for (auto& pb : per_batch) parts.push_back(std::move(pb.at(k)));
    ctx.out[k] = stack(parts, 0, DataType::kFloat32, {});
  }
}

}  // namespace

void register_control_flow(KernelTable& t) {
  t["If"] = if_kernel;
  t["Loop"] = loop_kernel;
  t["Scan"] = scan_kernel;
}

}  // namespace npusim::compiler::interp
