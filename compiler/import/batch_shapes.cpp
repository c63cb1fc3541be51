#include "compiler/import/batch_shapes.h"

#include <onnx/defs/tensor_proto_util.h>

#include <algorithm>
#include <optional>
#include <unordered_map>
#include <vector>

#include "compiler/import/import.h"
#include "compiler/ir/tensor.h"

namespace npusim::compiler::detail {
namespace {

// A fully static shape, or nullopt.
std::optional<Shape> static_shape(const onnx::TypeProto& t) {
  if (!t.has_tensor_type() || !t.tensor_type().has_shape()) return std::nullopt;
  Shape s;
  for (const auto& d : t.tensor_type().shape().dim()) {
    if (!d.has_dim_value() || d.dim_value() < 0) return std::nullopt;
    s.push_back(d.dim_value());
  }
  return s;
}

std::unordered_map<std::string, Shape> static_shapes(const onnx::GraphProto& g) {
  std::unordered_map<std::string, Shape> shapes;
  auto add = [&](const onnx::ValueInfoProto& vi) {
    if (auto s = static_shape(vi.type())) shapes[vi.name()] = *s;
  };
  for (const auto& vi : g.input()) add(vi);
  for (const auto& vi : g.value_info()) add(vi);
  for (const auto& vi : g.output()) add(vi);
  return shapes;
}

// An int64 value of rank 0 or 1 the import can compute before run time.
struct IntValue {
  std::vector<int64_t> v;
  bool scalar = false;
};

int64_t attribute_int(const onnx::NodeProto& n, const std::string& name, int64_t otherwise) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return a.i();
  return otherwise;
}

std::optional<IntValue> tensor_value(const onnx::TensorProto& t) {
  if (t.data_type() != onnx::TensorProto::INT64 || t.dims_size() > 1) return std::nullopt;
  return IntValue{onnx::ParseData<int64_t>(&t), t.dims_size() == 0};
}

// `index` counted from the back when negative, or nullopt outside [0, size).
std::optional<size_t> wrap(int64_t index, size_t size) {
  const int64_t n = static_cast<int64_t>(size);
  if (index < 0) index += n;
  if (index < 0 || index >= n) return std::nullopt;
  return static_cast<size_t>(index);
}

// ONNX Slice (opset 10+) on a tensor of shape `data`, its starts, ends, axes and steps among `in`: the
// output shape, or nullopt where an operand is unknown. With `step_one_range` (a 1-D int64 Slice):
// {from, to} of its single axis, nullopt unless the step is 1.
std::optional<Shape> slice(const onnx::NodeProto& n, const std::vector<std::optional<IntValue>>& in,
                           const Shape& data, bool step_one_range) {
  auto operand = [&](size_t k) -> const std::optional<IntValue>* {
    static const std::optional<IntValue> kAbsent;
    if (k >= static_cast<size_t>(n.input_size()) || n.input(static_cast<int>(k)).empty()) return &kAbsent;
    return k < in.size() && in[k] ? &in[k] : nullptr;
  };
  const auto *starts = operand(1), *ends = operand(2), *axes_in = operand(3), *steps_in = operand(4);
  if (!starts || !ends || !axes_in || !steps_in || !*starts || !*ends) return std::nullopt;
  const size_t count = (*starts)->v.size();
  if ((*ends)->v.size() != count) return std::nullopt;
  std::vector<int64_t> axes(count), steps(count, 1);
  for (size_t k = 0; k < count; ++k) axes[k] = static_cast<int64_t>(k);
  if (*axes_in) axes = (**axes_in).v;
  if (*steps_in) steps = (**steps_in).v;
  if (axes.size() != count || steps.size() != count) return std::nullopt;
  Shape out = data;
  int64_t from = 0, to = 0;
  for (size_t k = 0; k < count; ++k) {
    const auto axis = wrap(axes[k], data.size());
    const int64_t step = steps[k];
    if (!axis || step == 0 || (step_one_range && step != 1)) return std::nullopt;
    const int64_t dim = data[*axis];
    auto clamp = [&](int64_t v, int64_t lo, int64_t hi) { return std::clamp(v < 0 ? v + dim : v, lo, hi); };
    const int64_t b = step > 0 ? clamp((*starts)->v[k], 0, dim) : clamp((*starts)->v[k], -1, dim - 1);
    const int64_t e = step > 0 ? clamp((*ends)->v[k], 0, dim) : clamp((*ends)->v[k], -1, dim - 1);
    out[*axis] = step > 0 ? std::max<int64_t>(0, (e - b + step - 1) / step)
                          : std::max<int64_t>(0, (b - e - step - 1) / -step);
    from = b;
    to = e;
  }
  if (step_one_range) return count == 1 ? std::optional<Shape>(Shape{from, to}) : std::nullopt;
  return out;
}

// One node's int64 output from its inputs' values (`in` has nullopt where unknown), for the shape
// arithmetic exporters write: Shape of a sized tensor, Gather, Unsqueeze, Squeeze, Concat, Cast, Slice and
// the four integer operations. Anything else, or anything outside rank 1: nullopt.
std::optional<IntValue> evaluate(const onnx::NodeProto& n, const std::vector<std::optional<IntValue>>& in,
                                 const std::unordered_map<std::string, Shape>& shapes) {
  const std::string& op = n.op_type();
  auto known = [&](size_t k) { return k < in.size() && in[k].has_value(); };
  if (op == "Constant") {
    for (const auto& a : n.attribute()) {
      if (a.name() == "value") return tensor_value(a.t());
      if (a.name() == "value_ints") return IntValue{{a.ints().begin(), a.ints().end()}, false};
      if (a.name() == "value_int") return IntValue{{a.i()}, true};
    }
    return std::nullopt;
  }
  if (op == "Shape") {
    const auto s = shapes.find(n.input(0));
    if (s == shapes.end()) return std::nullopt;
    const auto rank = static_cast<int64_t>(s->second.size());
    auto clamp = [rank](int64_t k) { return std::clamp(k < 0 ? k + rank : k, int64_t{0}, rank); };
    const int64_t from = clamp(attribute_int(n, "start", 0)), to = clamp(attribute_int(n, "end", rank));
    if (from >= to) return IntValue{};
    return IntValue{{s->second.begin() + from, s->second.begin() + to}, false};
  }
  if (op == "Cast" && known(0) && attribute_int(n, "to", 0) == onnx::TensorProto::INT64) return in[0];
  if (op == "Gather" && known(0) && known(1) && !in[0]->scalar && attribute_int(n, "axis", 0) == 0) {
    IntValue out{{}, in[1]->scalar};
    for (int64_t k : in[1]->v) {
      const auto at = wrap(k, in[0]->v.size());
      if (!at) return std::nullopt;
      out.v.push_back(in[0]->v[*at]);
    }
    return out;
  }
  if (op == "Unsqueeze" && known(0) && in[0]->scalar) return IntValue{in[0]->v, false};
  if (op == "Squeeze" && known(0) && in[0]->v.size() == 1) return IntValue{in[0]->v, true};
  if (op == "Concat" && attribute_int(n, "axis", 0) == 0) {
    IntValue out;
    for (size_t k = 0; k < in.size(); ++k) {
      if (!known(k) || in[k]->scalar) return std::nullopt;
      out.v.insert(out.v.end(), in[k]->v.begin(), in[k]->v.end());
    }
    return out;
  }
  if (op == "Slice" && known(0) && !in[0]->scalar) {
    const Shape size = {static_cast<int64_t>(in[0]->v.size())};
    const std::optional<Shape> bounds = slice(n, in, size, true);  // {from, to} on the one axis, step 1
    if (!bounds) return std::nullopt;
    return IntValue{
        {in[0]->v.begin() + (*bounds)[0], in[0]->v.begin() + std::max((*bounds)[0], (*bounds)[1])}, false};
  }
  // What PyTorch writes for x.expand(...) and view(...) with a dynamic batch: the shape passed through a
  // Reshape to one dimension, and the -1 entries replaced by Where(Equal(shape, -1), ones, shape).
  if (op == "Reshape" && known(0) && known(1) && in[1]->v.size() == 1) return IntValue{in[0]->v, false};
  if (op == "ConstantOfShape" && known(0) && in[0]->v.size() == 1 && in[0]->v[0] >= 0) {
    std::optional<IntValue> fill = IntValue{{0}, true};
    for (const auto& a : n.attribute())
      if (a.name() == "value") fill = tensor_value(a.t());
    if (!fill || fill->v.size() != 1) return std::nullopt;
    return IntValue{std::vector<int64_t>(static_cast<size_t>(in[0]->v[0]), fill->v[0]), false};
  }
  if (op == "Where" && known(0) && known(1) && known(2)) {
    size_t size = 1;
    for (size_t k = 0; k < 3; ++k) {
      if (in[k]->v.size() != 1 && size != 1 && in[k]->v.size() != size) return std::nullopt;
      size = std::max(size, in[k]->v.size());
    }
    IntValue out{{}, in[0]->scalar && in[1]->scalar && in[2]->scalar};
    auto at = [&](size_t k, size_t i) { return in[k]->v[in[k]->v.size() == 1 ? 0 : i]; };
    for (size_t i = 0; i < size; ++i) out.v.push_back(at(0, i) != 0 ? at(1, i) : at(2, i));
    return out;
  }
  if ((op == "Add" || op == "Sub" || op == "Mul" || op == "Div" || op == "Equal") && known(0) && known(1)) {
    const IntValue &a = *in[0], &b = *in[1];
    if (a.v.size() != b.v.size() && a.v.size() != 1 && b.v.size() != 1) return std::nullopt;
    IntValue out{{}, a.scalar && b.scalar};
    for (size_t k = 0; k < std::max(a.v.size(), b.v.size()); ++k) {
      const int64_t x = a.v[a.v.size() == 1 ? 0 : k], y = b.v[b.v.size() == 1 ? 0 : k];
      if (op == "Div" && y == 0) return std::nullopt;
      out.v.push_back(op == "Add"   ? x + y
                      : op == "Sub" ? x - y
                      : op == "Mul" ? x * y
                      : op == "Div" ? x / y
                                    : int64_t{x == y});
    }
    return out;
  }
  return std::nullopt;
}

// The int64 values of rank 0 or 1 known before run time: initializers, and what `evaluate` computes from
// them and from the shapes inference has sized, in graph order. A Slice whose bounds only these values
// give (BERT's attention takes q, k and v apart at offsets computed from a Shape) is sized into `shapes`,
// which inference leaves open.
std::unordered_map<std::string, IntValue> int64_values(const onnx::GraphProto& g,
                                                       std::unordered_map<std::string, Shape>& shapes) {
  std::unordered_map<std::string, IntValue> values;
  for (const auto& t : g.initializer())
    if (auto v = tensor_value(t)) values[t.name()] = std::move(*v);
  for (const auto& n : g.node()) {
    if (n.output_size() != 1) continue;
    std::vector<std::optional<IntValue>> in;
    for (const std::string& name : n.input()) {
      const auto it = values.find(name);
      in.push_back(it == values.end() ? std::nullopt : std::optional<IntValue>(it->second));
    }
    if (auto v = evaluate(n, in, shapes)) {
      values[n.output(0)] = std::move(*v);
    } else if (n.op_type() == "Slice" && !shapes.count(n.output(0))) {
      const auto data = shapes.find(n.input(0));
      if (data == shapes.end()) continue;
      if (auto out = slice(n, in, data->second, false)) shapes[n.output(0)] = *out;
    }
  }
  return values;
}

int64_t elements(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

// Reshape's output for `input` and the shape operand `target` (ONNX semantics: 0 copies the input's
// dimension unless allowzero, one -1 takes the rest), or nullopt when the two do not fit.
std::optional<Shape> reshaped(const Shape& input, const std::vector<int64_t>& target, bool allowzero) {
  Shape out(target.begin(), target.end());
  int64_t known = 1;
  int free = -1;
  for (size_t k = 0; k < out.size(); ++k) {
    if (out[k] == 0 && !allowzero) {
      if (k >= input.size()) return std::nullopt;
      out[k] = input[k];
    }
    if (out[k] == -1) {
      if (free >= 0) return std::nullopt;
      free = static_cast<int>(k);
    } else if (out[k] < 0) {
      return std::nullopt;
    } else {
      known *= out[k];
    }
  }
  const int64_t total = elements(input);
  if (free < 0) return known == total ? std::optional<Shape>(out) : std::nullopt;
  if (known == 0 || total % known != 0) return std::nullopt;
  out[static_cast<size_t>(free)] = total / known;
  return out;
}

std::string node_text(const onnx::NodeProto& n, int k) {
  return "node '" + (n.name().empty() ? "#" + std::to_string(k) : n.name()) + "' (" + n.op_type() + ")";
}

std::string export_advice(int64_t exported) {
  return "export the model with a dynamic batch dimension, or run it at its exported batch" +
         (exported > 0 ? " (--batch " + std::to_string(exported) + ")" : std::string());
}

// The operands that size another node's output: a shape, a Slice's bounds, Expand's and Tile's sizes.
bool sizes_output(const std::string& op, int input) {
  if (op == "Reshape" || op == "Expand" || op == "Tile") return input == 1;
  if (op == "Slice") return input >= 1;
  return op == "ConstantOfShape" && input == 0;
}

// One pass over the nodes whose output size an operand computed from constants and sized tensors sets
// (PyTorch's exports with a dynamic batch compute a view's shape from Shape(x) with a Div, which ONNX's
// data propagation does not follow): each such operand becomes an initializer holding its value at this
// batch, so that inference sizes what follows. Returns how many.
int fold_size_operands(onnx::GraphProto& g) {
  auto shapes = static_shapes(g);
  const auto values = int64_values(g, shapes);
  std::unordered_set<std::string> names;
  for (const auto& t : g.initializer()) names.insert(t.name());
  std::unordered_map<std::string, std::string> folded;  // operand -> its initializer
  int rewritten = 0;
  for (auto& n : *g.mutable_node()) {
    for (int k = 0; k < n.input_size(); ++k) {
      const std::string operand = n.input(k);
      if (operand.empty() || names.count(operand) || !sizes_output(n.op_type(), k)) continue;
      const auto value = values.find(operand);
      if (value == values.end()) continue;
      auto [it, fresh] = folded.try_emplace(operand, operand + "_value");
      if (fresh) {
        for (int s = 1; names.count(it->second); ++s) it->second = operand + "_value_" + std::to_string(s);
        names.insert(it->second);
        onnx::TensorProto* init = g.add_initializer();
        init->set_name(it->second);
        init->set_data_type(onnx::TensorProto::INT64);
        if (!value->second.scalar) init->add_dims(static_cast<int64_t>(value->second.v.size()));
        for (int64_t v : value->second.v) init->add_int64_data(v);
      }
      n.set_input(k, it->second);
      ++rewritten;
    }
  }
  return rewritten;
}

// One pass over the Reshapes: rewrites those whose exported batch provably follows `batch` and returns
// how many; throws for a constant shape that fits neither way.
int rebatch_reshapes(onnx::GraphProto& g, int64_t batch, int64_t exported, const std::string& model_name) {
  auto shapes = static_shapes(g);
  const auto constants = int64_values(g, shapes);
  std::unordered_set<std::string> names;
  for (const auto& t : g.initializer()) names.insert(t.name());
  int rewritten = 0;
  for (int k = 0; k < g.node_size(); ++k) {
    onnx::NodeProto& n = *g.mutable_node(k);
    if (n.op_type() != "Reshape" || n.input_size() < 2) continue;
    const auto in = shapes.find(n.input(0));
    const auto target = constants.find(n.input(1));
    if (in == shapes.end() || target == constants.end()) continue;  // inference resolved or left it
    bool allowzero = false;
    for (const auto& a : n.attribute())
      if (a.name() == "allowzero") allowzero = a.i() != 0;
    const std::vector<int64_t>& t = target->second.v;
    const std::optional<Shape> as_is = reshaped(in->second, t, allowzero);
    const bool batch_in_front =
        exported > 0 && !t.empty() && t[0] == exported && !in->second.empty() && in->second[0] == batch;
    if (batch_in_front) {
      std::vector<int64_t> moved = t;
      moved[0] = batch;
      // A -1 would let the unchanged shape fit by moving the batch into another dimension.
      const bool has_free = std::find(t.begin(), t.end(), int64_t{-1}) != t.end();
      if (reshaped(in->second, moved, allowzero) && (!as_is || has_free)) {
        std::string name = n.input(1) + "_batch" + std::to_string(batch);
        for (int s = 1; names.count(name); ++s)
          name = n.input(1) + "_batch" + std::to_string(batch) + "_" + std::to_string(s);
        names.insert(name);
        onnx::TensorProto* init = g.add_initializer();
        init->set_name(name);
        init->set_data_type(onnx::TensorProto::INT64);
        init->add_dims(static_cast<int64_t>(moved.size()));
        for (int64_t v : moved) init->add_int64_data(v);
        n.set_input(1, name);
        ++rewritten;
        continue;
      }
    }
    if (!as_is)
      throw ModelError(model_name + ": --batch " + std::to_string(batch) + " makes " + node_text(n, k) +
                       " reshape a " + shape_to_string(in->second) + " input to the constant shape " +
                       shape_to_string(Shape(t.begin(), t.end())) +
                       ", which was fixed at export and does not hold the batch in front; " +
                       export_advice(exported));
  }
  return rewritten;
}

// A Concat whose inputs disagree outside its axis under --batch: one of them kept the exported batch (ViT's
// class token, expanded to a batch fixed at export, joined to the rebatched patches). Inference leaves its
// output unsized; said here with the cause instead of as a shape known only at run time.
void check_concats(const onnx::GraphProto& g, int64_t batch, int64_t exported,
                   const std::string& model_name) {
  auto shapes = static_shapes(g);
  int64_values(g, shapes);
  for (int k = 0; k < g.node_size(); ++k) {
    const onnx::NodeProto& n = g.node(k);
    if (n.op_type() != "Concat" || n.input_size() < 2) continue;
    std::vector<Shape> in;
    for (const std::string& name : n.input()) {
      const auto s = shapes.find(name);
      if (s == shapes.end()) break;
      in.push_back(s->second);
    }
    if (in.size() != static_cast<size_t>(n.input_size())) continue;
    const auto axis = wrap(attribute_int(n, "axis", 0), in[0].size());
    for (size_t i = 1; i < in.size() && axis; ++i) {
      if (in[i].size() != in[0].size()) break;
      for (size_t d = 0; d < in[0].size(); ++d) {
        if (d == *axis || in[i][d] == in[0][d]) continue;
        throw ModelError(model_name + ": --batch " + std::to_string(batch) + " makes " + node_text(n, k) +
                         " join a " + shape_to_string(in[0]) + " input to a " + shape_to_string(in[i]) +
                         " one: a shape fixed at export (batch " + std::to_string(exported) +
                         ") does not follow --batch; " + export_advice(exported));
      }
    }
  }
}

}  // namespace

void forget_inferred_shapes(onnx::GraphProto& g) {
  g.clear_value_info();
  for (auto& out : *g.mutable_output())
    if (out.type().has_tensor_type()) out.mutable_type()->mutable_tensor_type()->clear_shape();
}

ExportedBatch exported_batch(const onnx::GraphProto& g, const std::unordered_set<std::string>& initializers) {
  ExportedBatch e;
  bool agree = true;
  for (const auto& in : g.input()) {
    if (initializers.count(in.name()) || !in.type().has_tensor_type() ||
        !in.type().tensor_type().has_shape() || in.type().tensor_type().shape().dim_size() == 0)
      continue;
    const auto& d = in.type().tensor_type().shape().dim(0);
    if (!d.has_dim_value()) continue;
    if (e.batch > 0 && e.batch != d.dim_value()) agree = false;
    e.batch = d.dim_value();
  }
  if (!agree) e.batch = 0;
  for (const auto& out : g.output()) {
    if (!out.type().has_tensor_type() || !out.type().tensor_type().has_shape() ||
        out.type().tensor_type().shape().dim_size() == 0)
      continue;
    const auto& d = out.type().tensor_type().shape().dim(0);
    if (d.has_dim_value()) e.outputs[out.name()] = d.dim_value();
  }
  return e;
}

void follow_batch(onnx::ModelProto& model, int64_t batch, const ExportedBatch& exported,
                  const std::string& model_name, const std::function<void()>& infer) {
  onnx::GraphProto& g = *model.mutable_graph();
  // Each pass fixes the Reshapes whose inputs inference has sized; a rewrite resizes what follows it.
  // Folding the operands computed from sized tensors sizes the dynamic-batch exports' views the same way.
  for (int pass = 0; pass <= g.node_size(); ++pass) {
    const int rebatched = rebatch_reshapes(g, batch, exported.batch, model_name);
    if (rebatched + fold_size_operands(g) == 0) break;
    forget_inferred_shapes(g);
    infer();
  }
  if (exported.batch <= 0 || exported.batch == batch) return;
  check_concats(g, batch, exported.batch, model_name);
  for (const auto& out : g.output()) {
    const auto was = exported.outputs.find(out.name());
    if (was == exported.outputs.end() || was->second != exported.batch) continue;
    const std::optional<Shape> now = static_shape(out.type());
    if (!now || now->empty() || (*now)[0] == batch) continue;
    throw ModelError(model_name + ": with --batch " + std::to_string(batch) + " output '" + out.name() +
                     "' has shape " + shape_to_string(*now) + ", not batch " + std::to_string(batch) +
                     " in front as it had the exported batch " + std::to_string(exported.batch) +
                     " (a shape fixed at export keeps it); " + export_advice(exported.batch));
  }
}

}  // namespace npusim::compiler::detail
