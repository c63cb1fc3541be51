#include "compiler/interp/interpreter.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <unordered_map>

#include "compiler/interp/kernels.h"

namespace npusim::compiler {
namespace interp {

const Tensor& KernelContext::input(size_t k) const {
  if (!has(k)) fail("input " + std::to_string(k) + " is required but not given");
  return *in[k];
}

const Tensor& KernelContext::finput(size_t k) const {
  const Tensor& t = input(k);
  if (!t.floating())
    fail("input " + std::to_string(k) + " must be floating, got " + std::string(to_string(t.dtype)));
  return t;
}

double KernelContext::scalar(size_t k) const {
  const Tensor& t = input(k);
  if (t.size() < 1) fail("input " + std::to_string(k) + " must hold a value");
  return t.as_double(0);
}

int64_t KernelContext::iscalar(size_t k) const {
  const Tensor& t = input(k);
  if (t.size() < 1) fail("input " + std::to_string(k) + " must hold a value");
  return t.as_int(0);
}

void KernelContext::fail(const std::string& what) const {
  throw InterpretError("node '" + node.name + "' (" + node.op_type + "): " + what);
}

Shape broadcast_shapes(const KernelContext& ctx, const Shape& a, const Shape& b) {
  const size_t r = std::max(a.size(), b.size());
  Shape out(r);
  for (size_t d = 0; d < r; ++d) {
    int64_t da = d < r - a.size() ? 1 : a[d - (r - a.size())];
    int64_t db = d < r - b.size() ? 1 : b[d - (r - b.size())];
    if (da != db && da != 1 && db != 1)
      ctx.fail("shapes " + shape_to_string(a) + " and " + shape_to_string(b) + " do not broadcast");
    out[d] = da == 1 ? db : da;
  }
  return out;
}

int64_t norm_axis(const KernelContext& ctx, int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= std::max<int64_t>(rank, 1))
    ctx.fail("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  return axis < 0 ? axis + rank : axis;
}

const KernelTable& kernel_table() {
  static const KernelTable table = [] {
    KernelTable t;
    register_elementwise(t);
    register_nn(t);
    register_tensor(t);
    register_reduce(t);
    register_control_flow(t);
    register_recurrent(t);
    register_index(t);
    register_spatial(t);
    register_signal(t);
    return t;
  }();
  return table;
}

}  // namespace interp

bool interpreter_supports(const std::string& op_type) { return interp::kernel_table().count(op_type) != 0; }

namespace {

// float16 and bfloat16 results are computed in float32 and rounded (to nearest, ties to even) to the
// type's precision once per node, as an fp16/bf16 kernel storing its result does.
float round_to_half(float v) {
  if (std::isnan(v) || std::isinf(v)) return v;
  const float a = std::fabs(v);
  if (a >= 65520.0f) return std::copysign(std::numeric_limits<float>::infinity(), v);
  int e = 0;
  std::frexp(a, &e);                      // a = m * 2^e, m in [0.5, 1)
  const int exp = std::max(e - 11, -24);  // 11 significant bits; subnormals below 2^-14
  return std::copysign(std::ldexp(std::nearbyint(std::ldexp(a, -exp)), exp), v);
}
float round_to_bfloat16(float v) {
  if (std::isnan(v)) return v;
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  bits += 0x7fff + ((bits >> 16) & 1);
  bits &= 0xffff0000u;
  std::memcpy(&v, &bits, 4);
  return v;
}
void round_to_type(Tensor& t) {
  if (t.dtype == DataType::kFloat16)
    for (float& v : t.f) v = round_to_half(v);
  else if (t.dtype == DataType::kBFloat16)
    for (float& v : t.f) v = round_to_bfloat16(v);
}

// `scope`: values of enclosing graphs a subgraph reads (its captures), by the subgraph's names.
std::map<std::string, Tensor> run(const Graph& g, std::map<std::string, Tensor> inputs, bool keep_all,
                                  const NodeObserver& observer, const interp::Scope& scope = {}) {
  using interp::KernelContext;
  std::unordered_map<std::string, Tensor> env;
  std::unordered_map<std::string, const Tensor*> view(scope.begin(), scope.end());
  for (const auto& name : g.inputs) {
    auto it = inputs.find(name);
    if (it == inputs.end()) throw InterpretError("graph input '" + name + "' was not given a value");
    if (!interpretable(it->second.dtype))
      throw InterpretError("graph input '" + name + "' has type " + std::string(to_string(it->second.dtype)) +
                           ", which the interpreter does not compute with");
    env[name] = std::move(it->second);
    view[name] = &env[name];
  }
  for (const auto& [name, v] : g.values) {
    if (!v.is_constant() || view.count(name)) continue;
    if (!v.constant->has_values())
      throw InterpretError("constant '" + name +
                           "' carries its shape only (a timing-only compile): there is "
                           "nothing to compute with");
    view[name] = v.constant.get();
  }

  // Last reader of every value, so intermediates are freed as soon as possible.
  std::unordered_map<std::string, size_t> last_use;
  if (!keep_all)
    for (size_t k = 0; k < g.nodes.size(); ++k)
      for (const auto& in : g.nodes[k].inputs) last_use[in] = k;
  std::unordered_map<std::string, bool> is_output;
  for (const auto& o : g.outputs) is_output[o] = true;

  const auto& table = interp::kernel_table();
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    const Node& node = g.nodes[k];
    auto kit = table.find(node.op_type);
    if (!node.domain.empty() || kit == table.end())
      throw InterpretError("node '" + node.name + "' (" + (node.domain.empty() ? "" : node.domain + ".") +
                           node.op_type + "): the interpreter does not support this op");
    KernelContext ctx{node, g.opset, {}, {}};
    ctx.in.resize(node.inputs.size(), nullptr);
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      const std::string& name = node.inputs[i];
      if (name.empty()) continue;
      auto vit = view.find(name);
      if (vit == view.end())
        ctx.fail("input '" + name + "' has no value (not computed, not an input or constant)");
      if (!interpretable(vit->second->dtype))
        ctx.fail("input '" + name + "' has type " + std::string(to_string(vit->second->dtype)) +
                 ", which the interpreter does not compute with");
      ctx.in[i] = vit->second;
    }
    ctx.out.resize(node.outputs.size());
    try {
      kit->second(ctx);
    } catch (const InterpretError&) {
      throw;
    } catch (const std::exception& e) {
      ctx.fail(e.what());
    }
    std::vector<const Tensor*> outs;
    for (size_t o = 0; o < node.outputs.size(); ++o) {
      const std::string& name = node.outputs[o];
      if (name.empty()) {
        outs.push_back(nullptr);
        continue;
      }
      Tensor& t = env[name];
      t = std::move(ctx.out[o]);
      round_to_type(t);
      view[name] = &t;
      outs.push_back(&t);
    }
    if (observer) {
      static const Tensor kEmpty;
      for (auto& p : outs)
        if (!p) p = &kEmpty;
      observer(node, outs);
    }
    if (!keep_all)
      for (const auto& in : node.inputs) {
        auto lu = last_use.find(in);
        if (lu != last_use.end() && lu->second == k && !is_output.count(in)) {
          auto e = env.find(in);
          if (e != env.end()) {
            env.erase(e);
            view.erase(in);
            if (const Value* v = g.values.count(in) ? &g.values.at(in) : nullptr; v && v->is_constant())
              view[in] = v->constant.get();
          }
        }
      }
  }
  std::map<std::string, Tensor> result;
  if (keep_all) {
    for (auto& [n, t] : env) result[n] = std::move(t);
    return result;
  }
  for (const auto& o : g.outputs) {
    auto it = env.find(o);
    if (it != env.end())
      result[o] = it->second;
    else if (view.count(o))
      result[o] = *view[o];  // an output that is a constant or an input passed straight through
    else
      throw InterpretError("graph output '" + o + "' was never computed");
  }
  return result;
}

}  // namespace

namespace interp {

std::vector<Tensor> run_subgraph(const Graph& sub, std::map<std::string, Tensor> inputs, const Scope& scope) {
  std::map<std::string, Tensor> out = run(sub, std::move(inputs), false, nullptr, scope);
  std::vector<Tensor> result;
  for (const auto& o : sub.outputs) result.push_back(std::move(out.at(o)));
  return result;
}

}  // namespace interp

std::map<std::string, Tensor> interpret(const Graph& g, std::map<std::string, Tensor> inputs,
                                        const NodeObserver& observer) {
  return run(g, std::move(inputs), false, observer);
}

std::map<std::string, Tensor> interpret_all(const Graph& g, std::map<std::string, Tensor> inputs) {
  return run(g, std::move(inputs), true, nullptr);
}

}  // namespace npusim::compiler
