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

// The int64 vectors the graph holds as constants: initializers and Constant nodes' values.
std::unordered_map<std::string, std::vector<int64_t>> int64_constants(const onnx::GraphProto& g) {
  std::unordered_map<std::string, std::vector<int64_t>> values;
  for (const auto& t : g.initializer())
    if (t.data_type() == onnx::TensorProto::INT64 && t.dims_size() == 1)
      values[t.name()] = onnx::ParseData<int64_t>(&t);
  for (const auto& n : g.node()) {
    if (n.op_type() != "Constant" || n.output_size() != 1 || n.attribute_size() != 1) continue;
    const auto& a = n.attribute(0);
    if (a.name() == "value" && a.t().data_type() == onnx::TensorProto::INT64 && a.t().dims_size() == 1)
      values[n.output(0)] = onnx::ParseData<int64_t>(&a.t());
    else if (a.name() == "value_ints")
      values[n.output(0)] = std::vector<int64_t>(a.ints().begin(), a.ints().end());
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

// One pass over the Reshapes: rewrites those whose exported batch provably follows `batch` and returns
// how many; throws for a constant shape that fits neither way.
int rebatch_reshapes(onnx::GraphProto& g, int64_t batch, int64_t exported, const std::string& model_name) {
  const auto shapes = static_shapes(g);
  const auto constants = int64_constants(g);
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
    const std::vector<int64_t>& t = target->second;
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

}  // namespace

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
  for (int pass = 0; pass <= g.node_size() && rebatch_reshapes(g, batch, exported.batch, model_name) > 0;
       ++pass) {
    g.clear_value_info();
    for (auto& out : *g.mutable_output())
      if (out.type().has_tensor_type()) out.mutable_type()->mutable_tensor_type()->clear_shape();
    infer();
  }
  if (exported.batch <= 0 || exported.batch == batch) return;
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
