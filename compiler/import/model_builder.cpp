#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include <algorithm>
#include <memory>
#include <stdexcept>

#include "compiler/import/onnx_internal.h"

namespace npusim::compiler::detail {

ModelBuilder::ModelBuilder(const std::string& graph_name, bool weight_values)
    : weight_values_(weight_values) {
  model_.set_ir_version(8);
  model_.set_producer_name("npusim");
  auto* os = model_.add_opset_import();
  os->set_domain("");
  os->set_version(17);
  model_.mutable_graph()->set_name(graph_name);
}

void ModelBuilder::add_input(const std::string& name, const Shape& shape) {
  auto* vi = model_.mutable_graph()->add_input();
  vi->set_name(name);
  auto* tt = vi->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnx::TensorProto::FLOAT);
  auto* s = tt->mutable_shape();
  for (int64_t d : shape) s->add_dim()->set_dim_value(d);
}

void ModelBuilder::add_output(const std::string& name) {
  model_.mutable_graph()->add_output()->set_name(name);
}

onnx::ModelProto& ModelBuilder::model() {
  // ONNX's checker requires typed, shaped graph outputs: let shape inference write them (it fills
  // the untyped outputs in place), so the builder never computes a shape itself.
  onnx::shape_inference::InferShapes(model_);
  return model_;
}

void ModelBuilder::add_initializer(const std::string& name, const Shape& shape,
                                   const std::vector<float>& values) {
  if (static_cast<int64_t>(values.size()) != num_elements(shape))
    throw std::invalid_argument("initializer '" + name + "' size does not match its shape");
  auto* t = model_.mutable_graph()->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : shape) t->add_dims(d);
  t->set_raw_data(std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float)));
}

void ModelBuilder::add_weight(const std::string& name, const Shape& shape,
                              const std::function<std::vector<float>()>& values) {
  if (weight_values_) {
    add_initializer(name, shape, values());
    return;
  }
  add_input(name, shape);
  shape_only_.push_back(name);
}

Graph import_built(ModelBuilder& b, const std::string& display_name) {
  Graph g = import_model_proto(b.model(), {}, ".", display_name);
  for (const std::string& name : b.shape_only_weights()) {
    Value& v = g.value(name);
    v.constant = std::make_shared<const Tensor>(Tensor::shape_only(v.dtype, v.shape));
    g.inputs.erase(std::find(g.inputs.begin(), g.inputs.end(), name));
  }
  return g;
}

void ModelBuilder::add_int64_initializer(const std::string& name, const Shape& shape,
                                         const std::vector<int64_t>& values) {
  auto* t = model_.mutable_graph()->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::INT64);
  for (int64_t d : shape) t->add_dims(d);
  for (int64_t v : values) t->add_int64_data(v);
}

onnx::NodeProto& ModelBuilder::add_node(const std::string& op_type, const std::string& name,
                                        const std::vector<std::string>& inputs,
                                        const std::vector<std::string>& outputs) {
  auto* n = model_.mutable_graph()->add_node();
  n->set_op_type(op_type);
  n->set_name(name);
  for (const auto& i : inputs) n->add_input(i);
  for (const auto& o : outputs) n->add_output(o);
  return *n;
}

void ModelBuilder::set_attr(onnx::NodeProto& n, const std::string& key, int64_t v) {
  auto* a = n.add_attribute();
  a->set_name(key);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}
void ModelBuilder::set_attr(onnx::NodeProto& n, const std::string& key, float v) {
  auto* a = n.add_attribute();
  a->set_name(key);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(v);
}
void ModelBuilder::set_attr(onnx::NodeProto& n, const std::string& key, const std::vector<int64_t>& v) {
  auto* a = n.add_attribute();
  a->set_name(key);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}

std::vector<float> pseudo_random(int64_t n, float scale, uint32_t seed) {
  std::vector<float> out(static_cast<size_t>(n));
  uint32_t s = seed * 2654435761u + 12345u;
  for (auto& v : out) {
    s = s * 1664525u + 1013904223u;
    v = scale * (static_cast<float>(s >> 8) / static_cast<float>(1u << 24) * 2.0f - 1.0f);
  }
  return out;
}

}  // namespace npusim::compiler::detail
