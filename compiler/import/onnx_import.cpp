// ONNX -> graph IR. Only this file (and the other import/ sources) sees ONNX and protobuf.
#include <onnx/checker.h>
#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>
#include <onnx/version_converter/convert.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <optional>
#include <set>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "compiler/import/batch_shapes.h"
#include "compiler/import/import.h"
#include "compiler/import/onnx_internal.h"
#include "compiler/import/onnx_wire.h"
#include "isa/machine/spec_text.h"

namespace npusim::compiler {
namespace {

constexpr int64_t kMinOpset = 7;
// Refuse tensors above 2^34 elements: no real model has one, and a corrupt dims field must not make
// us allocate terabytes.
constexpr int64_t kMaxElements = int64_t{1} << 34;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw ModelError("cannot open '" + path + "': " + std::strerror(errno));
  const std::streamoff size = in.tellg();
  if (size < 0) throw ModelError("cannot read '" + path + "'");
  std::string bytes(static_cast<size_t>(size), '\0');  // one read, no stream-buffer copies
  in.seekg(0);
  in.read(bytes.data(), size);
  if (!in) throw ModelError("cannot read '" + path + "'");
  return bytes;
}

std::string dir_of(const std::string& path) {
  auto p = path.find_last_of('/');
  if (p == std::string::npos) return ".";
  if (p == 0) return "/";
  return path.substr(0, p);
}

float half_to_float(uint16_t h) {
  uint32_t sign = (h >> 15) & 1, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  float v;
  if (exp == 0)
    v = std::ldexp(static_cast<float>(mant), -24);
  else if (exp == 31)
    v = mant ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
  else
    v = std::ldexp(static_cast<float>(mant | 0x400), static_cast<int>(exp) - 25);
  return sign ? -v : v;
}

float bf16_to_float(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float v;
  std::memcpy(&v, &bits, 4);
  return v;
}

template <typename T>
T load_le(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));  // the host is little-endian (x86-64/aarch64), as ONNX's raw_data
  return v;
}

// Converts a TensorProto whose data is inline (raw_data or typed fields). `what` names it in errors.
// `lifted`, when its data() is not null, is the tensor's raw_data read from the file in place
// (lift_raw_data, compiler/import/onnx_wire.h); the proto's own raw_data is then a placeholder.
// Little-endian fp32 values read from unaligned bytes, as a random-access iterator for vector::assign.
struct UnalignedFloats {
  using iterator_category = std::random_access_iterator_tag;
  using value_type = float;
  using difference_type = std::ptrdiff_t;
  using pointer = const float*;
  using reference = float;
  const char* p;
  float operator*() const { return load_le<float>(p); }
  UnalignedFloats& operator++() {
    p += sizeof(float);
    return *this;
  }
  UnalignedFloats operator++(int) {
    UnalignedFloats o = *this;
    p += sizeof(float);
    return o;
  }
  UnalignedFloats& operator--() {
    p -= sizeof(float);
    return *this;
  }
  UnalignedFloats& operator-=(difference_type d) { return *this += -d; }
  UnalignedFloats& operator+=(difference_type d) {
    p += d * static_cast<difference_type>(sizeof(float));
    return *this;
  }
  UnalignedFloats operator+(difference_type d) const {
    UnalignedFloats o = *this;
    return o += d;
  }
  difference_type operator-(const UnalignedFloats& o) const {
    return (p - o.p) / static_cast<difference_type>(sizeof(float));
  }
  float operator[](difference_type d) const { return *(*this + d); }
  bool operator==(const UnalignedFloats& o) const { return p == o.p; }
  bool operator!=(const UnalignedFloats& o) const { return p != o.p; }
  bool operator<(const UnalignedFloats& o) const { return p < o.p; }
};

// Floating initializers of at least this many bytes are weights: a timing-only import (ImportOptions::
// weight_values false) keeps their type and shape only. Smaller ones (shapes, scales, clip bounds, the
// per-channel vectors passes fold) keep their values, since the program's structure may depend on them.
constexpr int64_t kElidedWeightBytes = 64 * 1024;

// `keep_values` false: a floating tensor of kElidedWeightBytes or more is checked (its value count) and
// returned shape-only (Tensor::shape_only), its values never read.
Tensor convert_tensor(const onnx::TensorProto& tp, const std::string& what, std::string_view lifted = {},
                      bool keep_values = true) {
  const int et = tp.data_type();
  const DataType dt = static_cast<DataType>(et);
  switch (dt) {
    case DataType::kFloat32:
    case DataType::kUInt8:
    case DataType::kInt8:
    case DataType::kUInt16:
    case DataType::kInt16:
    case DataType::kInt32:
    case DataType::kInt64:
    case DataType::kBool:
    case DataType::kFloat16:
    case DataType::kFloat64:
    case DataType::kUInt32:
    case DataType::kUInt64:
    case DataType::kBFloat16:
      break;
    case DataType::kString:
      throw ModelError(what + " is a string tensor, which npusim does not support");
    default:
      throw ModelError(what + " has unknown element type " + std::to_string(et));
  }
  if (tp.data_location() == onnx::TensorProto::EXTERNAL)
    throw ModelError(what + " stores its data externally, which is not allowed here");
  Shape shape;
  int64_t n = 1;
  for (int64_t d : tp.dims()) {
    if (d < 0) throw ModelError(what + " has a negative dimension " + std::to_string(d));
    shape.push_back(d);
    if (d != 0 && n > kMaxElements / d) throw ModelError(what + " is implausibly large (corrupt dims?)");
    n *= d;
  }
  Tensor t;
  t.dtype = dt;
  t.shape = shape;
  const int64_t es = element_size(dt);
  auto mismatch = [&](int64_t have) {
    return ModelError(what + " has " + std::to_string(have) + " values for shape " + shape_to_string(shape) +
                      " (" + std::to_string(n) + " expected)");
  };
  const bool has_raw = lifted.data() != nullptr || tp.has_raw_data();
  const std::string_view raw = lifted.data() != nullptr ? lifted : std::string_view(tp.raw_data());
  if (!keep_values && is_float(dt) && n * es >= kElidedWeightBytes) {
    const int64_t have = has_raw                    ? static_cast<int64_t>(raw.size()) / es
                         : dt == DataType::kFloat32 ? tp.float_data_size()
                         : dt == DataType::kFloat64 ? tp.double_data_size()
                                                    : tp.int32_data_size();
    if (have != n || (has_raw && static_cast<int64_t>(raw.size()) != n * es)) throw mismatch(have);
    return Tensor::shape_only(dt, shape);
  }
  if (has_raw && dt == DataType::kFloat32) {
    // The bulk of every model: one pass over the bytes, straight into the vector (resizing first would
    // zero every page once more: 8% of a ResNet-50 run).
    if (static_cast<int64_t>(raw.size()) != n * es) throw mismatch(static_cast<int64_t>(raw.size()) / es);
    t.f.assign(UnalignedFloats{raw.data()}, UnalignedFloats{raw.data() + n * es});
    return t;
  }
  const bool fl = is_float(dt);
  if (fl)
    t.f.resize(static_cast<size_t>(n));
  else
    t.i.resize(static_cast<size_t>(n));
  if (has_raw) {
    if (static_cast<int64_t>(raw.size()) != n * es) throw mismatch(static_cast<int64_t>(raw.size()) / es);
    const char* p = raw.data();
    for (int64_t k = 0; k < n; ++k, p += es) {
      switch (dt) {
        case DataType::kFloat32:
          t.f[k] = load_le<float>(p);
          break;
        case DataType::kFloat64:
          t.f[k] = static_cast<float>(load_le<double>(p));
          break;
        case DataType::kFloat16:
          t.f[k] = half_to_float(load_le<uint16_t>(p));
          break;
        case DataType::kBFloat16:
          t.f[k] = bf16_to_float(load_le<uint16_t>(p));
          break;
        case DataType::kUInt8:
          t.i[k] = load_le<uint8_t>(p);
          break;
        case DataType::kInt8:
          t.i[k] = load_le<int8_t>(p);
          break;
        case DataType::kBool:
          t.i[k] = load_le<uint8_t>(p) != 0;
          break;
        case DataType::kUInt16:
          t.i[k] = load_le<uint16_t>(p);
          break;
        case DataType::kInt16:
          t.i[k] = load_le<int16_t>(p);
          break;
        case DataType::kInt32:
          t.i[k] = load_le<int32_t>(p);
          break;
        case DataType::kUInt32:
          t.i[k] = load_le<uint32_t>(p);
          break;
        case DataType::kInt64:
          t.i[k] = load_le<int64_t>(p);
          break;
        case DataType::kUInt64:
          t.i[k] = static_cast<int64_t>(load_le<uint64_t>(p));
          break;
        default:
          break;
      }
    }
    return t;
  }
  switch (dt) {
    case DataType::kFloat32:
      if (tp.float_data_size() != n) throw mismatch(tp.float_data_size());
      for (int64_t k = 0; k < n; ++k) t.f[k] = tp.float_data(static_cast<int>(k));
      break;
    case DataType::kFloat64:
      if (tp.double_data_size() != n) throw mismatch(tp.double_data_size());
      for (int64_t k = 0; k < n; ++k) t.f[k] = static_cast<float>(tp.double_data(static_cast<int>(k)));
      break;
    case DataType::kInt64:
      if (tp.int64_data_size() != n) throw mismatch(tp.int64_data_size());
      for (int64_t k = 0; k < n; ++k) t.i[k] = tp.int64_data(static_cast<int>(k));
      break;
    case DataType::kUInt32:
    case DataType::kUInt64:
      if (tp.uint64_data_size() != n) throw mismatch(tp.uint64_data_size());
      for (int64_t k = 0; k < n; ++k) t.i[k] = static_cast<int64_t>(tp.uint64_data(static_cast<int>(k)));
      break;
    default:  // int32_data carries int32, int16, int8, uint16, uint8, bool, float16 and bfloat16 bits
      if (tp.int32_data_size() != n) throw mismatch(tp.int32_data_size());
      for (int64_t k = 0; k < n; ++k) {
        int32_t v = tp.int32_data(static_cast<int>(k));
        if (dt == DataType::kFloat16)
          t.f[k] = half_to_float(static_cast<uint16_t>(v));
        else if (dt == DataType::kBFloat16)
          t.f[k] = bf16_to_float(static_cast<uint16_t>(v));
        else
          t.i[k] = wrap_integer(dt, v);
      }
      break;
  }
  return t;
}

// Replace external data references by the bytes they point to, so the checker, shape inference and
// conversion see ordinary tensors.
void load_external_data(onnx::TensorProto& tp, const std::string& base_dir, const std::string& model_name) {
  if (tp.data_location() != onnx::TensorProto::EXTERNAL) return;
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto& kv : tp.external_data()) {
    try {
      if (kv.key() == "location")
        location = kv.value();
      else if (kv.key() == "offset")
        offset = std::stoll(kv.value());
      else if (kv.key() == "length")
        length = std::stoll(kv.value());
    } catch (const std::exception&) {
      throw ModelError(model_name + ": initializer '" + tp.name() + "' has a malformed external_data " +
                       kv.key());
    }
  }
  if (location.empty())
    throw ModelError(model_name + ": initializer '" + tp.name() + "' has external data without a location");
  if (location[0] == '/')
    throw ModelError(model_name + ": initializer '" + tp.name() + "' external data location '" + location +
                     "' must be relative to the model file");
  const std::string path = base_dir + "/" + location;
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw ModelError(model_name + ": cannot open external data file '" + path + "' of initializer '" +
                     tp.name() + "'");
  in.seekg(0, std::ios::end);
  const int64_t file_size = static_cast<int64_t>(in.tellg());
  if (length < 0) length = file_size - offset;
  if (offset < 0 || offset + length > file_size)
    throw ModelError(model_name + ": initializer '" + tp.name() + "' reads bytes " + std::to_string(offset) +
                     ".." + std::to_string(offset + length) + " of '" + path + "', which has only " +
                     std::to_string(file_size));
  std::string bytes(static_cast<size_t>(length), '\0');
  in.seekg(offset);
  in.read(bytes.data(), length);
  if (!in) throw ModelError(model_name + ": cannot read external data file '" + path + "'");
  tp.set_raw_data(std::move(bytes));
  tp.clear_external_data();
  tp.set_data_location(onnx::TensorProto::DEFAULT);
}

Attribute convert_attribute(const onnx::AttributeProto& a, const std::string& node_desc) {
  Attribute out;
  const std::string what = node_desc + " attribute '" + a.name() + "'";
  switch (a.type()) {
    case onnx::AttributeProto::INT:
      out.value = static_cast<int64_t>(a.i());
      break;
    case onnx::AttributeProto::FLOAT:
      out.value = a.f();
      break;
    case onnx::AttributeProto::STRING:
      out.value = a.s();
      break;
    case onnx::AttributeProto::INTS:
      out.value = std::vector<int64_t>(a.ints().begin(), a.ints().end());
      break;
    case onnx::AttributeProto::FLOATS:
      out.value = std::vector<float>(a.floats().begin(), a.floats().end());
      break;
    case onnx::AttributeProto::STRINGS:
      out.value = std::vector<std::string>(a.strings().begin(), a.strings().end());
      break;
    case onnx::AttributeProto::TENSOR:
      out.value = convert_tensor(a.t(), what);
      break;
    case onnx::AttributeProto::GRAPHS:
      throw ModelError(what + " is a list of subgraphs, which no ONNX operator npusim supports takes");
    default:
      throw ModelError(what + " has a type npusim does not support (" + std::to_string(a.type()) + ")");
  }
  return out;
}

void set_value_type(Value& v, const onnx::TypeProto& type) {
  if (!type.has_tensor_type()) return;  // sequences, maps, optionals: left undefined
  const auto& tt = type.tensor_type();
  v.dtype = static_cast<DataType>(tt.elem_type());
  if (tt.has_shape()) {
    v.shape_known = true;
    v.shape.clear();
    for (const auto& d : tt.shape().dim()) v.shape.push_back(d.has_dim_value() ? d.dim_value() : -1);
  }
}

void convert_node(const onnx::NodeProto& n, Node& node, int64_t opset, const std::string& nd);

// A subgraph (If branch, Loop or Scan body) as typed by ONNX's shape inference. Its initializers
// become constants; the names it reads without defining them (from enclosing scopes) are added to
// `free_names` in first-read order.
std::shared_ptr<const Graph> convert_subgraph(const onnx::GraphProto& sg, int64_t opset,
                                              const std::string& what, std::vector<std::string>& free_names) {
  auto g = std::make_shared<Graph>();
  g->name = sg.name();
  g->opset = opset;
  std::unordered_set<std::string> defined;
  for (const auto& vi : sg.input()) {
    set_value_type(g->ensure_value(vi.name()), vi.type());
    g->inputs.push_back(vi.name());
    defined.insert(vi.name());
  }
  for (const auto& vi : sg.value_info()) set_value_type(g->ensure_value(vi.name()), vi.type());
  for (const auto& vi : sg.output()) set_value_type(g->ensure_value(vi.name()), vi.type());
  for (const auto& init : sg.initializer()) {
    g->add_constant(init.name(), convert_tensor(init, what + " initializer '" + init.name() + "'"));
    defined.insert(init.name());
  }
  if (sg.sparse_initializer_size() > 0)
    throw ModelError(what + " has sparse initializers, which npusim does not support");
  std::unordered_set<std::string> seen_free;
  auto read = [&](const std::string& name) {
    if (name.empty() || defined.count(name) || seen_free.count(name)) return;
    seen_free.insert(name);
    free_names.push_back(name);
    g->ensure_value(name);
  };
  std::unordered_set<std::string> names;
  for (int k = 0; k < sg.node_size(); ++k) {
    const auto& n = sg.node(k);
    Node node;
    node.op_type = n.op_type();
    node.domain = n.domain() == "ai.onnx" ? "" : n.domain();
    node.name = n.name();
    for (int s = 1; node.name.empty() || names.count(node.name); ++s)
      node.name = n.op_type() + "_" + std::to_string(k) + (s > 1 ? "_" + std::to_string(s) : "");
    names.insert(node.name);
    node.inputs.assign(n.input().begin(), n.input().end());
    node.outputs.assign(n.output().begin(), n.output().end());
    convert_node(n, node, opset, what + " node '" + node.name + "' (" + node.op_type + ")");
    for (const auto& in : node.inputs) read(in);
    for (const auto& o : node.outputs)
      if (!o.empty()) {
        g->ensure_value(o);
        defined.insert(o);
      }
    g->nodes.push_back(std::move(node));
  }
  for (const auto& vi : sg.output()) {
    read(vi.name());
    g->outputs.push_back(vi.name());
  }
  return g;
}

// Attributes and subgraphs of `n` into `node` (whose inputs are n's); a subgraph's captures are appended
// to node.inputs and listed in kCaptures (compiler/ir/graph.h).
void convert_node(const onnx::NodeProto& n, Node& node, int64_t opset, const std::string& nd) {
  std::vector<std::string> captures;
  for (const auto& a : n.attribute()) {
    if (!a.ref_attr_name().empty())
      throw ModelError(nd + " attribute '" + a.name() +
                       "' refers to a function attribute outside a function");
    if (a.type() == onnx::AttributeProto::GRAPH) {
      std::vector<std::string> free_names;
      node.subgraphs[a.name()] =
          convert_subgraph(a.g(), opset, nd + " subgraph '" + a.name() + "'", free_names);
      for (const auto& f : free_names)
        if (std::find(captures.begin(), captures.end(), f) == captures.end()) captures.push_back(f);
      continue;
    }
    node.attrs[a.name()] = convert_attribute(a, nd);
  }
  if (captures.empty()) return;
  node.inputs.insert(node.inputs.end(), captures.begin(), captures.end());
  node.attrs[kCaptures].value = std::move(captures);
}

// The runtime inputs of `g` (initializers are not), in order.
std::vector<std::string> runtime_inputs(const onnx::GraphProto& g,
                                        const std::unordered_set<std::string>& initializers) {
  std::vector<std::string> names;
  for (const auto& in : g.input())
    if (!initializers.count(in.name())) names.push_back(in.name());
  return names;
}

// "--input-shape names 'x', which is not an input of m.onnx (did you mean 'X'?)", the inputs listed
// when none is close.
ModelError not_an_input(const std::string& option, const std::string& name,
                        const std::vector<std::string>& inputs, const std::string& model_name) {
  std::string hint = isa::closest_name(name, inputs);
  if (!hint.empty()) {
    hint = " (did you mean '" + hint + "'?)";
  } else {
    for (const auto& n : inputs) hint += (hint.empty() ? " (inputs: " : ", ") + n;
    hint += hint.empty() ? " (it has no runtime input)" : ")";
  }
  return ModelError(option + " names '" + name + "', which is not an input of " + model_name + hint);
}

// --input-value: each named runtime input gets an initializer of its type and bound shape. A name close to
// an input is a typo, an error (it would leave the input free and its control flow unfolded); a name far
// from every input is a warning and fixes nothing (one set of options serves every variant of a model).
void fix_input_values(onnx::GraphProto& g, std::unordered_set<std::string>& initializers,
                      const ImportOptions& options, const std::string& model_name) {
  const std::vector<std::string> inputs = runtime_inputs(g, initializers);
  for (const auto& [name, values] : options.input_values) {
    const onnx::ValueInfoProto* input = nullptr;
    for (const auto& in : g.input())
      if (!initializers.count(in.name()) && in.name() == name) input = &in;
    if (!input) {
      const ModelError e = not_an_input("--input-value", name, inputs, model_name);
      if (!isa::closest_name(name, inputs).empty()) throw e;
      if (options.warn) options.warn(std::string(e.what()) + "; ignored");
      continue;
    }
    const auto& tt = input->type().tensor_type();
    Shape shape;
    for (const auto& d : tt.shape().dim()) shape.push_back(d.has_dim_value() ? d.dim_value() : -1);
    const int64_t n = num_elements(shape);
    if (!tt.has_shape() || std::any_of(shape.begin(), shape.end(), [](int64_t d) { return d < 0; }))
      throw ModelError("--input-value " + name +
                       ": the input's shape is not fixed; give it with --input-shape " + name + "=...");
    if (static_cast<int64_t>(values.size()) != n && values.size() != 1)
      throw ModelError("--input-value " + name + " gives " + std::to_string(values.size()) +
                       " values but input '" + name + "' has shape " + shape_to_string(shape) + " (" +
                       std::to_string(n) + " elements)");
    onnx::TensorProto* t = g.add_initializer();
    t->set_name(name);
    t->set_data_type(tt.elem_type());
    for (int64_t d : shape) t->add_dims(d);
    const auto dt = static_cast<DataType>(tt.elem_type());
    for (int64_t k = 0; k < n; ++k) {
      const double v = values[values.size() == 1 ? 0 : static_cast<size_t>(k)];
      switch (dt) {
        case DataType::kFloat32:
          t->add_float_data(static_cast<float>(v));
          break;
        case DataType::kFloat64:
          t->add_double_data(v);
          break;
        case DataType::kInt64:
          t->add_int64_data(static_cast<int64_t>(v));
          break;
        case DataType::kUInt32:
        case DataType::kUInt64:
          t->add_uint64_data(static_cast<uint64_t>(v));
          break;
        case DataType::kInt32:
        case DataType::kInt16:
        case DataType::kInt8:
        case DataType::kUInt16:
        case DataType::kUInt8:
        case DataType::kBool:
          t->add_int32_data(static_cast<int32_t>(v));
          break;
        default:
          throw ModelError("--input-value " + name + ": input '" + name + "' has type " +
                           std::string(to_string(dt)) + ", which --input-value cannot fix");
      }
      if (!is_float(dt) && v != std::floor(v))
        throw ModelError("--input-value " + name + ": " + std::to_string(v) +
                         " is not an integer, but input '" + name + "' has type " +
                         std::string(to_string(dt)));
    }
    initializers.insert(name);
  }
}

std::string dim_text(const onnx::TensorShapeProto::Dimension& d) {
  if (d.has_dim_value()) return std::to_string(d.dim_value());
  if (d.has_dim_param() && !d.dim_param().empty()) return "'" + d.dim_param() + "'";
  return "?";
}

void bind_inputs(onnx::GraphProto& g, const std::unordered_set<std::string>& initializers,
                 const ImportOptions& options, const std::string& model_name) {
  const std::vector<std::string> names = runtime_inputs(g, initializers);
  for (const auto& [name, shape] : options.input_shapes)
    if (std::find(names.begin(), names.end(), name) == names.end())
      throw not_an_input("--input-shape", name, names, model_name);
  if (!options.dim_params.empty()) {
    std::set<std::string> params;
    for (const auto& in : g.input()) {
      if (initializers.count(in.name()) || !in.type().has_tensor_type() ||
          !in.type().tensor_type().has_shape())
        continue;
      for (const auto& d : in.type().tensor_type().shape().dim())
        if (!d.has_dim_value() && d.has_dim_param() && !d.dim_param().empty()) params.insert(d.dim_param());
    }
    for (const auto& [param, value] : options.dim_params) {
      if (params.count(param)) continue;
      std::string list;
      for (const auto& p : params) list += (list.empty() ? "" : ", ") + p;
      throw ModelError("--dynamic names '" + param + "', which is not a dynamic dimension of " + model_name +
                       (list.empty() ? " (it has none)" : " (its dynamic dimensions: " + list + ")"));
    }
    for (auto& in : *g.mutable_input()) {
      if (initializers.count(in.name()) || !in.type().has_tensor_type()) continue;
      auto* tt = in.mutable_type()->mutable_tensor_type();
      if (!tt->has_shape()) continue;
      for (auto& d : *tt->mutable_shape()->mutable_dim()) {
        if (d.has_dim_value() || !d.has_dim_param()) continue;
        auto it = options.dim_params.find(d.dim_param());
        if (it == options.dim_params.end()) continue;
        if (options.input_shapes.count(in.name()))
          throw ModelError("--input-shape " + in.name() + "=... and --dynamic " + it->first +
                           " both bind input '" + in.name() + "'; give one of them");
        d.set_dim_value(it->second);
      }
    }
    // Recorded intermediate and output shapes still carry the symbolic dimension; inference recomputes
    // them from the bound inputs.
    detail::forget_inferred_shapes(g);
  }
  if (options.batch > 0) {
    // The exporter's recorded shapes carry its own batch; drop them so shape inference recomputes
    // every shape from the rebound inputs instead of reporting a conflict.
    detail::forget_inferred_shapes(g);
  }
  for (auto& in : *g.mutable_input()) {
    if (initializers.count(in.name())) continue;
    if (!in.type().has_tensor_type())
      throw ModelError(model_name + ": input '" + in.name() +
                       "' is not a tensor; npusim supports tensor inputs only");
    auto* tt = in.mutable_type()->mutable_tensor_type();
    auto bound = options.input_shapes.find(in.name());
    if (bound != options.input_shapes.end()) {
      const Shape& s = bound->second;
      if (tt->has_shape() && tt->shape().dim_size() != static_cast<int>(s.size()))
        throw ModelError("--input-shape " + in.name() + "=" + shape_to_string(s) + " has rank " +
                         std::to_string(s.size()) + " but the input has rank " +
                         std::to_string(tt->shape().dim_size()));
      if (tt->has_shape())
        for (int k = 0; k < tt->shape().dim_size(); ++k) {
          const auto& d = tt->shape().dim(k);
          if (d.has_dim_value() && d.dim_value() != s[k])
            throw ModelError("--input-shape " + in.name() + "=" + shape_to_string(s) + " sets dimension " +
                             std::to_string(k) + " to " + std::to_string(s[k]) +
                             " but the model fixes it to " + std::to_string(d.dim_value()));
        }
      auto* shp = tt->mutable_shape();
      shp->clear_dim();
      for (int64_t d : s) shp->add_dim()->set_dim_value(d);
    }
    if (options.batch > 0) {
      if (!tt->has_shape() || tt->shape().dim_size() == 0)
        throw ModelError("--batch " + std::to_string(options.batch) + ": input '" + in.name() +
                         "' has no batch dimension (it is a scalar or has no shape)");
      tt->mutable_shape()->mutable_dim(0)->set_dim_value(options.batch);
    }
    if (bound != options.input_shapes.end()) continue;
    if (!tt->has_shape())
      throw ModelError(model_name + ": input '" + in.name() + "' has no shape; give one with --input-shape " +
                       in.name() + "=...");
    // The whole shape, each open dimension a '?' (and an 'N' in the option to type), says what to bind.
    std::string shape, option;
    for (int k = 0; k < tt->shape().dim_size(); ++k) {
      const auto& d = tt->shape().dim(k);
      const bool open = !d.has_dim_value() || d.dim_value() < 0;
      shape += (k ? "x" : "") + (open ? std::string("?") : std::to_string(d.dim_value()));
      option += (k ? "x" : "") + (open ? std::string("N") : std::to_string(d.dim_value()));
    }
    for (int k = 0; k < tt->shape().dim_size(); ++k) {
      const auto& d = tt->shape().dim(k);
      if (!d.has_dim_value() || d.dim_value() < 0)
        throw ModelError(
            model_name + ": input '" + in.name() + "' dimension " + std::to_string(k) + " (" + dim_text(d) +
            ") is dynamic and unbound (its shape is " + shape + "); bind it with --input-shape " + in.name() +
            "=" + option + ", a size for each N," +
            (d.has_dim_param() && !d.dim_param().empty() ? " or --dynamic " + d.dim_param() + "=V1,V2,..."
                                                         : ""));
    }
  }
}

}  // namespace

Tensor tensor_from_bytes(const std::string& bytes, const std::string& display_name) {
  onnx::TensorProto tp;
  if (!tp.ParseFromString(bytes))
    throw ModelError("'" + display_name + "' is not a readable ONNX TensorProto");
  return convert_tensor(tp, "tensor '" + display_name + "'");
}

Tensor read_tensor_file(const std::string& path) { return tensor_from_bytes(read_file(path), path); }

std::string read_tensor_name(const std::string& path) {
  onnx::TensorProto tp;
  if (!tp.ParseFromString(read_file(path)))
    throw ModelError("'" + path + "' is not a readable ONNX TensorProto");
  return tp.name();
}

namespace {

ModelError too_large(const std::string& mname) {
  return ModelError(mname + " is larger than protobuf's 2 GB limit; store its weights as external data");
}

ModelError unreadable(const std::string& mname) {
  return ModelError(mname +
                    " is not a readable ONNX model (protobuf parsing failed: the file is truncated, "
                    "corrupt or not an ONNX file)");
}

}  // namespace

// A read-only mapping of a whole file, unmapped when it goes.
class MappedFile {
 public:
  explicit MappedFile(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    struct stat st {};
    if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
      // Populated up front: one call maps the page cache instead of a fault per 4 KiB page.
      void* p =
          ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
      if (p != MAP_FAILED) data_ = static_cast<const char*>(p), size_ = static_cast<size_t>(st.st_size);
    }
    ::close(fd);
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile() {
    if (data_ != nullptr) ::munmap(const_cast<char*>(data_), size_);
  }
  bool ok() const { return data_ != nullptr; }
  std::string_view bytes() const { return {data_, size_}; }

 private:
  const char* data_ = nullptr;
  size_t size_ = 0;
};

// Initializers' raw_data of at least this size is converted from the mapped file in place; smaller ones
// (shapes, scales, the values shape inference propagates) are parsed with the rest of the model.
constexpr size_t kLiftRawBytes = 64 * 1024;

Graph import_onnx_file(const std::string& path, const ImportOptions& options) {
  const std::string mname = "'" + path + "'";
  // The file mapped, protobuf given its structure only (the large raw_data fields lifted out,
  // compiler/import/onnx_wire.h), and the weights converted from the mapping: one copy of them is made,
  // into the graph, where parsing the whole file made two.
  if (const MappedFile file(path);
      file.ok() && file.bytes().size() < static_cast<size_t>(std::numeric_limits<int>::max())) {
    if (std::optional<detail::LiftedModel> lifted = detail::lift_raw_data(file.bytes(), kLiftRawBytes)) {
      onnx::ModelProto model;
      if (!model.ParseFromString(lifted->proto)) throw unreadable(mname);
      lifted->proto = std::string();
      return detail::import_model_proto(model, options, dir_of(path), path, &lifted->raw);
    }
  }
  // Otherwise (not mappable, or not wire data, whose error protobuf gives) parsed straight from the
  // stream: holding the file's bytes as well as the parsed model would add a third copy of the weights
  // to the peak (ViT-B/16: 346 MB).
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw ModelError("cannot open '" + path + "': " + std::strerror(errno));
  const std::streamoff size = in.tellg();
  if (size < 0) throw ModelError("cannot read '" + path + "'");
  if (size >= std::numeric_limits<int>::max()) throw too_large(mname);
  in.seekg(0);
  onnx::ModelProto model;
  if (!model.ParseFromIstream(&in)) throw unreadable(mname);
  return detail::import_model_proto(model, options, dir_of(path), path);
}

Graph import_onnx_bytes(const std::string& bytes, const ImportOptions& options, const std::string& base_dir,
                        const std::string& display_name) {
  const std::string mname = "'" + display_name + "'";
  if (bytes.size() >= static_cast<size_t>(std::numeric_limits<int>::max())) throw too_large(mname);
  onnx::ModelProto model;
  if (!model.ParseFromString(bytes)) throw unreadable(mname);
  return detail::import_model_proto(model, options, base_dir, display_name);
}

namespace detail {

Graph import_model_proto(onnx::ModelProto& model, const ImportOptions& options, const std::string& base_dir,
                         const std::string& display_name, const std::vector<std::string_view>* lifted) {
  const std::string mname = "'" + display_name + "'";
  if (model.ir_version() <= 0 || !model.has_graph())
    throw ModelError(mname + " is not an ONNX model (it has no ir_version or no graph)");
  int64_t opset = -1;
  for (const auto& os : model.opset_import())
    if (os.domain().empty() || os.domain() == "ai.onnx") opset = os.version();
  if (opset < 0) {
    if (model.ir_version() >= 3 || model.opset_import_size() > 0)
      throw ModelError(mname + " imports no version of the default ONNX operator set");
    opset = 1;
  }
  if (opset < kMinOpset) {
    // Older opsets differ in attributes (consumed_inputs, is_test, broadcast) that the ops' current
    // semantics do not read: ONNX's own version converter rewrites the model to kMinOpset, as the user
    // would with onnx.version_converter.
    try {
      model = onnx::version_conversion::ConvertVersion(model, static_cast<int>(kMinOpset));
    } catch (const std::exception&) {
      throw ModelError(mname + " uses ONNX opset " + std::to_string(opset) +
                       ", which ONNX's version converter cannot bring to opset " + std::to_string(kMinOpset) +
                       ", the oldest npusim reads");
    }
    opset = kMinOpset;
  }
  onnx::GraphProto* gp = model.mutable_graph();

  std::unordered_map<std::string, int> opsets;
  for (const auto& os : model.opset_import()) opsets[os.domain()] = static_cast<int>(os.version());

  // Structure checks with our own messages, before the checker's.
  std::unordered_set<std::string> initializers;
  for (auto& init : *gp->mutable_initializer()) {
    load_external_data(init, base_dir, mname);
    initializers.insert(init.name());
  }
  if (gp->sparse_initializer_size() > 0)
    throw ModelError(mname + " has sparse initializers, which npusim does not support");
  std::unordered_set<std::string> available(initializers);
  for (const auto& in : gp->input()) available.insert(in.name());
  for (int k = 0; k < gp->node_size(); ++k) {
    const auto& n = gp->node(k);
    const std::string nd =
        "node '" + (n.name().empty() ? "#" + std::to_string(k) : n.name()) + "' (" + n.op_type() + ")";
    auto dom = opsets.find(n.domain() == "ai.onnx" ? "" : n.domain());
    if (dom == opsets.end())
      throw ModelError(mname + ": " + nd + " uses operator domain '" + n.domain() +
                       "', which the model does not import");
    const auto* schema =
        onnx::OpSchemaRegistry::Schema(n.op_type(), dom->second, n.domain() == "ai.onnx" ? "" : n.domain());
    if (schema == nullptr)
      throw ModelError(mname + ": " + nd + " has unknown op type '" + n.op_type() + "'" +
                       (n.domain().empty() ? "" : " in domain '" + n.domain() + "'") + " at opset " +
                       std::to_string(dom->second));
    // ONNX 1.12's shape inference divides by some attributes without checking them (a zero stride
    // raises SIGFPE inside libonnx): reject those before inference runs.
    for (const auto& a : n.attribute()) {
      const std::string& an = a.name();
      if (an == "strides" || an == "dilations" || an == "kernel_shape") {
        for (int64_t v : a.ints())
          if (v <= 0)
            throw ModelError(mname + ": " + nd + " attribute '" + an + "' has non-positive value " +
                             std::to_string(v));
      } else if ((an == "group" || an == "blocksize") && a.i() <= 0) {
        throw ModelError(mname + ": " + nd + " attribute '" + an + "' must be positive, got " +
                         std::to_string(a.i()));
      }
    }
    for (const auto& in : n.input())
      if (!in.empty() && !available.count(in))
        throw ModelError(
            mname + ": " + nd + " reads '" + in +
            "', which is no graph input, initializer or earlier node output (missing initializer?)");
    for (const auto& o : n.output())
      if (!o.empty()) available.insert(o);
  }
  for (const auto& o : gp->output())
    if (!available.count(o.name()))
      throw ModelError(mname + ": graph output '" + o.name() + "' is never produced");

  // A model newer than the libonnx we link (IR version > 8, opset > 17: Silero VAD's opset-18 file) uses
  // operator forms its checker rejects (Split's num_outputs, reductions' axes input); our structure
  // checks above still run, shape inference takes the newest schema it knows, and the interpreter and
  // passes follow the model's opset.
  const auto& versions = onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map();
  const bool newer = opset > versions.at("").second || model.ir_version() > onnx::IR_VERSION;
  if (model.ir_version() > onnx::IR_VERSION) model.set_ir_version(onnx::IR_VERSION);
  if (!newer) try {
      onnx::checker::check_model(model);
    } catch (const std::exception& e) {
      std::string msg = e.what();
      while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
      throw ModelError(mname + " fails ONNX's model checker: " + msg);
    }

  const ExportedBatch exported = exported_batch(*gp, initializers);
  bind_inputs(*gp, initializers, options, mname);
  fix_input_values(*gp, initializers, options, mname);

  // Under --batch, a conflict most often comes from a shape the exporter fixed at its batch: inference is
  // lenient until follow_batch has made those shapes follow the batch or named the one that cannot, then
  // strict.
  const bool rebatched = options.batch > 0 && exported.batch > 0 && exported.batch != options.batch;
  const auto infer = [&](bool strict) {
    try {
      onnx::ShapeInferenceOptions sio(/*check_type=*/true, /*error_mode=*/strict ? 1 : 0,
                                      /*data_propagation=*/true);
      onnx::shape_inference::InferShapes(model, onnx::OpSchemaRegistry::Instance(), sio);
    } catch (const std::exception& e) {
      std::string msg = e.what();
      while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
      throw ModelError(mname + ": ONNX shape inference failed" +
                       (rebatched
                            ? " with --batch " + std::to_string(options.batch) +
                                  " (the model was exported at batch " + std::to_string(exported.batch) +
                                  "; export it with a dynamic batch dimension to run other batches)"
                            : std::string()) +
                       ": " + msg);
    }
  };
  infer(!rebatched);
  if (options.batch > 0) follow_batch(model, options.batch, exported, mname, [&] { infer(!rebatched); });
  if (rebatched) {
    forget_inferred_shapes(*gp);
    infer(true);
  }

  Graph g;
  g.name = gp->name();
  g.opset = opset;
  for (const auto& vi : gp->input()) set_value_type(g.ensure_value(vi.name()), vi.type());
  for (const auto& vi : gp->value_info()) set_value_type(g.ensure_value(vi.name()), vi.type());
  for (const auto& vi : gp->output()) set_value_type(g.ensure_value(vi.name()), vi.type());
  for (int k = 0; k < gp->initializer_size(); ++k) {
    onnx::TensorProto& init = *gp->mutable_initializer(k);
    const std::string_view in_file = lifted != nullptr && k < static_cast<int>(lifted->size())
                                         ? (*lifted)[static_cast<size_t>(k)]
                                         : std::string_view();
    Tensor t =
        convert_tensor(init, mname + " initializer '" + init.name() + "'", in_file, options.weight_values);
    g.add_constant(init.name(), std::move(t));
    // Nothing reads the proto's copy again: release it as we go, so the weights are held about once,
    // not twice, at the peak. (clear_*() would keep the buffers' capacity; the swapped-out copy is freed.)
    onnx::TensorProto released;
    init.Swap(&released);
  }
  for (const auto& vi : gp->input())
    if (!initializers.count(vi.name())) g.inputs.push_back(vi.name());
  for (const auto& vi : gp->output()) g.outputs.push_back(vi.name());

  std::unordered_set<std::string> used_names;
  for (const auto& n : gp->node())
    if (!n.name().empty()) used_names.insert(n.name());
  std::unordered_set<std::string> assigned;
  g.nodes.reserve(gp->node_size());
  for (int k = 0; k < gp->node_size(); ++k) {
    const auto& n = gp->node(k);
    Node node;
    node.op_type = n.op_type();
    node.domain = n.domain() == "ai.onnx" ? "" : n.domain();
    node.name = n.name();
    if (node.name.empty() || assigned.count(node.name)) {
      // Unnamed (or duplicate-named) nodes get "<OpType>_<index>", unique among all names.
      std::string base = node.op_type + "_" + std::to_string(k);
      std::string cand = base;
      for (int s = 1; used_names.count(cand); ++s) cand = base + "_" + std::to_string(s);
      node.name = cand;
      used_names.insert(cand);
    }
    assigned.insert(node.name);
    node.inputs.assign(n.input().begin(), n.input().end());
    node.outputs.assign(n.output().begin(), n.output().end());
    convert_node(n, node, opset, mname + " node '" + node.name + "' (" + node.op_type + ")");
    for (const auto& o : node.outputs)
      if (!o.empty()) g.ensure_value(o);
    g.nodes.push_back(std::move(node));
  }
  for (const auto& node : g.nodes)
    for (const auto& in : node.inputs)
      if (!in.empty()) g.ensure_value(in);
  return g;
}

}  // namespace detail
}  // namespace npusim::compiler
