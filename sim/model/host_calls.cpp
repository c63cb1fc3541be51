#include "sim/model/host_calls.h"

#include <fmt/format.h>

#include <map>
#include <stdexcept>

#include "arch/datapath/numerics.h"
#include "compiler/interp/interpreter.h"
#include "compiler/passes/lowered.h"
#include "isa/strides.h"

namespace npusim::sim {

namespace dp = arch::datapath;
using compiler::Graph;
using compiler::HostCallInfo;
using compiler::HostTensor;
using compiler::Node;
using compiler::num_elements;
using compiler::Shape;
using compiler::Tensor;
using compiler::Value;

namespace {

// Element offset of each logical element: through the layout into memory order, then the physical
// strides (HostTensor::strides, dense when empty).
std::vector<int64_t> phys_index(const Shape& shape, const std::vector<int>& layout_in,
                                const std::vector<int64_t>& view_strides) {
  const int64_t n = num_elements(shape);
  std::vector<int64_t> idx(static_cast<size_t>(n));
  std::vector<int> layout = layout_in;
  if (layout.empty()) {
    if (view_strides.empty()) {
      for (int64_t i = 0; i < n; ++i) idx[static_cast<size_t>(i)] = i;
      return idx;
    }
    for (size_t d = 0; d < shape.size(); ++d) layout.push_back(static_cast<int>(d));
  }
  Shape phys;
  for (int d : layout) phys.push_back(shape[static_cast<size_t>(d)]);
  const auto ps = view_strides.empty() ? dense_strides(phys) : view_strides;
  std::vector<int64_t> pstride_of_logical(shape.size());
  for (size_t p = 0; p < layout.size(); ++p) pstride_of_logical[static_cast<size_t>(layout[p])] = ps[p];
  const auto ls = dense_strides(shape);
  for (int64_t i = 0; i < n; ++i) {
    int64_t rem = i, pi = 0;
    for (size_t d = 0; d < shape.size(); ++d) {
      const int64_t c = rem / ls[d];
      rem %= ls[d];
      pi += c * pstride_of_logical[d];
    }
    idx[static_cast<size_t>(i)] = pi;
  }
  return idx;
}

// Elements from the first to the last one the tensor occupies.
int64_t span(const std::vector<int64_t>& pi) {
  int64_t last = 0;
  for (int64_t p : pi) last = std::max(last, p);
  return pi.empty() ? 0 : last + 1;
}

}  // namespace

Tensor read_host_tensor(const dp::MachineState& st, const HostTensor& h) {
  const int64_t n = num_elements(h.shape);
  const int64_t es = isa::dtype_bytes(h.dtype);
  const auto pi = phys_index(h.shape, h.layout, h.strides);
  std::vector<uint8_t> bytes(static_cast<size_t>(std::max(n, span(pi)) * es));
  st.dram().read(h.dram_addr, bytes.data(), bytes.size());
  const bool int_storage =
      h.dtype == isa::DType::kInt32 || h.dtype == isa::DType::kInt8 || h.dtype == isa::DType::kUint8;
  if (int_storage && !is_float(h.value_dtype)) {
    // Integer and bool values are stored as integers: read them back exactly.
    std::vector<int64_t> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      v[static_cast<size_t>(i)] =
          dp::load_int(&bytes[static_cast<size_t>(pi[static_cast<size_t>(i)] * es)], h.dtype);
    }
    return Tensor::from_ints(h.value_dtype, h.shape, v);
  }
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[static_cast<size_t>(i)] =
        dp::load_float(&bytes[static_cast<size_t>(pi[static_cast<size_t>(i)] * es)], h.dtype);
  Tensor t = Tensor::from_floats(h.shape, v);
  if (is_float(h.value_dtype)) t.dtype = h.value_dtype;  // a CastLike reads its target type off it
  return t;
}

void write_host_tensor(dp::MachineState& st, const HostTensor& h, const Tensor& t) {
  const int64_t n = num_elements(h.shape);
  const int64_t es = isa::dtype_bytes(h.dtype);
  const auto pi = phys_index(h.shape, h.layout, h.strides);
  std::vector<uint8_t> bytes(static_cast<size_t>(std::max(n, span(pi)) * es));
  // A view shares its span with other values: read it first so that only its own elements change.
  if (!h.strides.empty()) st.dram().read(h.dram_addr, bytes.data(), bytes.size());
  for (int64_t i = 0; i < n; ++i) {
    uint8_t* p = &bytes[static_cast<size_t>(pi[static_cast<size_t>(i)] * es)];
    if (t.floating()) {
      dp::store_float(p, h.dtype, t.f[static_cast<size_t>(i)]);
    } else {
      dp::store_int(p, h.dtype, t.i[static_cast<size_t>(i)]);
    }
  }
  st.dram().write(h.dram_addr, bytes.data(), bytes.size());
}

void run_host_call(const HostCallInfo& info, dp::MachineState& st) {
  Graph g;
  g.opset = info.opset;
  Node n = info.node;
  n.attrs.erase(compiler::kPlacement);
  g.nodes.push_back(n);
  std::map<std::string, Tensor> in;
  for (const auto& h : info.inputs) {
    if (in.count(h.name)) continue;  // a node reading one value twice (Sub(t, t)) has one graph input
    Value& v = g.ensure_value(h.name);
    v.name = h.name;
    v.dtype = h.value_dtype;
    v.shape = h.shape;
    v.shape_known = true;
    g.inputs.push_back(h.name);
    in[h.name] = read_host_tensor(st, h);
  }
  for (const auto& [name, t] : info.constants) g.add_constant(name, t);
  for (const auto& o : n.outputs) {
    if (o.empty()) continue;
    g.ensure_value(o).name = o;
  }
  // The element type each result has in the model (a CastLike's is its second input's; float16 results are
  // rounded to it).
  for (const auto& h : info.outputs) g.ensure_value(h.name).dtype = h.value_dtype;
  for (const auto& h : info.outputs) g.outputs.push_back(h.name);
  std::map<std::string, Tensor> out;
  try {
    // The node as lowered may carry a fused epilogue (npu.activation, a bias or residual input) or be an
    // npu-domain op: its plain-ONNX form is what the interpreter runs.
    out = interpret(compiler::reference_graph(g), in);
  } catch (const std::length_error&) {  // the C++ library's text names its own code, not the model
    throw std::runtime_error(
        fmt::format("host op '{}' ({}): its result is too large to hold (its inputs' "
                    "values ask for it)",
                    info.node.name, info.node.op_type));
  } catch (const std::exception& e) {
    throw std::runtime_error(
        fmt::format("host op '{}' ({}): {}", info.node.name, info.node.op_type, e.what()));
  }
  for (const auto& h : info.outputs) {
    const Tensor& t = out.at(h.name);
    // The program holds the shape it was compiled for; a result whose shape follows an input's values
    // (a window's size, a Range's limits, a OneHot's depth) can come out otherwise at run time.
    if (t.shape != h.shape) {
      throw std::runtime_error(fmt::format(
          "host op '{}' ({}) computed '{}' with shape {}, but the program was compiled for {}: the shape "
          "follows an input's values, so fix that input with --input-value",
          info.node.name, info.node.op_type, h.name, compiler::shape_to_string(t.shape),
          compiler::shape_to_string(h.shape)));
    }
    write_host_tensor(st, h, t);
  }
}

dp::HostOpHandler host_op_handler(const compiler::CompileResult& result) {
  std::map<std::string, const HostCallInfo*> calls;
  for (const HostCallInfo& c : result.host_calls) calls[result.program.host_ops.at(c.host_op).name] = &c;
  return [calls](const isa::HostOp& op, dp::MachineState& s) {
    auto it = calls.find(op.name);
    if (it == calls.end()) throw std::runtime_error(fmt::format("host op '{}' has no definition", op.name));
    run_host_call(*it->second, s);
  };
}

}  // namespace npusim::sim
