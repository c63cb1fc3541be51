// The back end's driver: memory planning, per-node dispatch (matrix / vector / free / host), host
// fallbacks, tensor bindings and the compile report.
#include "compiler/backend/compile.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstring>
#include <numeric>

#include "compiler/backend/core/context.h"
#include "compiler/backend/estimate/roofline.h"
#include "compiler/backend/fusion/attention_fusion.h"
#include "compiler/backend/fusion/layer_fusion.h"
#include "compiler/backend/fusion/residency.h"
#include "compiler/backend/fusion/se_fusion.h"
#include "compiler/backend/int8/int8.h"
#include "compiler/backend/mapping/imposed.h"
#include "compiler/backend/memory/concat_in_place.h"
#include "compiler/backend/memory/movement.h"
#include "compiler/backend/memory/strided_views.h"
#include "compiler/backend/vector/rowwise.h"
#include "compiler/backend/vector/vector_tiling.h"
#include "compiler/passes/lowered.h"
#include "compiler/quant/precision.h"
#include "isa/layer_names.h"
#include "isa/machine/spec_text.h"
#include "isa/text_wrap.h"
#include "isa/timing/dma.h"
#include "isa/timing/units.h"

namespace npusim::compiler {

using backend::Context;
using backend::DramTensor;
using backend::Range;

namespace {

// What runs before a layer when its code is timed: the whole layer before it, and the code before
// that up to kContextInstructions instructions in all, from at most kContextLayers layers back, so that
// the DMA queues and DRAM are as busy as in the whole program when it starts (docs/backend.md,
// "Estimates": with the layer before only, BERT's short layers are 10-20% off; more context costs
// compile time for no accuracy on the models measured).
constexpr size_t kContextLayers = 3;
constexpr int64_t kContextInstructions = 500;

bool is_free(const Node& n) { return assigned_placement(n) == Placement::kFree; }

isa::DType storage_dtype(const Value& v, isa::DType act) {
  return is_float(v.dtype) || v.dtype == DataType::kUndefined ? act : isa::DType::kInt32;
}

struct Buf {
  std::string root;
  uint64_t bytes = 0;
  int first = INT_MAX, last = INT_MIN;
  uint64_t offset = 0;
};

// Lifetime-based first-fit placement of activation buffers; returns the peak.
uint64_t place(std::vector<Buf>& bufs, uint64_t align) {
  std::vector<size_t> order(bufs.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return bufs[a].bytes != bufs[b].bytes ? bufs[a].bytes > bufs[b].bytes : a < b;
  });
  std::vector<size_t> placed;
  uint64_t peak = 0;
  for (size_t i : order) {
    Buf& b = bufs[i];
    std::vector<std::pair<uint64_t, uint64_t>> busy;
    for (size_t j : placed) {
      const Buf& o = bufs[j];
      if (o.first <= b.last && b.first <= o.last) busy.push_back({o.offset, o.offset + o.bytes});
    }
    std::sort(busy.begin(), busy.end());
    uint64_t at = 0;
    for (auto [s, e] : busy) {
      if (at + b.bytes <= s) break;
      at = std::max(at, (e + align - 1) / align * align);
    }
    b.offset = at;
    peak = std::max(peak, at + b.bytes);
    placed.push_back(i);
  }
  return peak;
}

Placement placement_of(const Node& n) {
  if (const std::optional<Placement> p = assigned_placement(n)) return *p;
  if (n.op_type == "Conv" || n.op_type == "Gemm" || n.op_type == "MatMul") return Placement::kNpuMatrix;
  return Placement::kNpuVector;
}

int64_t host_cpu_ops(const Graph& g, const Node& n) {
  int64_t in = 0, out = 0;
  for (const auto& s : n.inputs) {
    if (!s.empty() && g.has_value(s) && g.value(s).fully_known()) in += num_elements(g.value(s).shape);
  }
  for (const auto& s : n.outputs) {
    if (!s.empty() && g.has_value(s) && g.value(s).fully_known()) out += num_elements(g.value(s).shape);
  }
  if ((n.op_type == "Conv" || n.op_type == "ConvTranspose" || n.op_type == "Gemm" || n.op_type == "MatMul") &&
      n.inputs.size() >= 2 && g.value(n.inputs[1]).fully_known()) {
    // 2 ops per MAC: output elements x reduction length.
    const Shape& w = g.value(n.inputs[1]).shape;
    int64_t red = 1;
    if (n.op_type == "Conv" || n.op_type == "ConvTranspose") {
      for (size_t d = 1; d < w.size(); ++d) red *= w[d];
    } else if (w.size() >= 2) {
      red = w[w.size() - 2];
    }
    return 2 * out * red;
  }
  return std::max<int64_t>(1, in + 4 * out);
}

void lower_host(Context& c, const Node& n, const std::string& reason) {
  c.spill_on_chip();  // the host reads DRAM
  CompileResult& r = c.result;
  HostCallInfo info;
  info.host_op = static_cast<uint32_t>(c.program.host_ops.size());
  info.node = n;
  std::vector<Range> reads, writes;
  int64_t in_bytes = 0, out_bytes = 0;
  for (const auto& s : n.inputs) {
    if (s.empty()) continue;
    const Value& v = c.g.value(s);
    if (v.is_constant()) {
      info.constants.push_back({s, *v.constant});
      in_bytes += num_elements(v.shape) * std::max<int64_t>(1, element_size(v.dtype));
      continue;
    }
    const DramTensor& t = c.tensor(s);
    info.inputs.push_back({s, t.addr, t.shape, t.layout, t.dtype, v.dtype, t.view_strides});
    reads.push_back(t.range());
    in_bytes += static_cast<int64_t>(t.bytes);
  }
  for (const auto& s : n.outputs) {
    if (s.empty() || !c.tensors.count(s)) continue;
    const DramTensor& t = c.tensor(s);
    info.outputs.push_back({s, t.addr, t.shape, t.layout, t.dtype, c.g.value(s).dtype, t.view_strides});
    writes.push_back(t.range());
    out_bytes += static_cast<int64_t>(t.bytes);
  }
  const int64_t ops = host_cpu_ops(c.g, n);
  constexpr int64_t kMaxCpuOps = (int64_t{1} << 48) - 1;  // HOSTCALL's cpu_ops field (isa/isa.h)
  if (ops > kMaxCpuOps) {
    throw CompileError(fmt::format("layer '{}' ({}) would run on the host ({}) and needs {:.3g} CPU operations, more "
                                   "than one host call can carry ({:.3g}): the model is too large to simulate",
                                   n.name, n.op_type, reason, static_cast<double>(ops),
                                   static_cast<double>(kMaxCpuOps)));
  }
  isa::Instruction h;
  h.opcode = isa::Opcode::kHostCall;
  h.set(isa::Field::kLayer, c.layer).set(isa::Field::kHostOp, info.host_op);
  h.set(isa::Field::kInBytes, in_bytes).set(isa::Field::kOutBytes, out_bytes).set(isa::Field::kCpuOps, ops);
  c.em.emit(h, reads, writes);
  c.program.host_ops.push_back({n.name, n.op_type, static_cast<uint64_t>(ops)});
  Fallback f;
  f.node = n.name;
  f.op = n.op_type;
  f.reason = reason;
  f.est_cycles = isa::timing::host_cycles(in_bytes, out_bytes, ops, c.config.host, c.config.frequency_mhz).total();
  c.plan->est_cycles = f.est_cycles;
  c.plan->mapping = "HOSTCALL: " + reason;
  c.plan->instructions = 1;
  r.fallbacks.push_back(f);
  r.host_calls.push_back(std::move(info));
}

// Why the array cannot run matrix node `n` in the precision the plan gives it ("" when it can). The
// int8 path takes Conv/Gemm/MatMul with constant weights; any other matrix node computes in the
// plan's float format (fp32 for int8 plans), which an int8-only array (tpu-v1, gemmini) does not have.
// Mirrors backend::PlanScope's choice, which raises the same condition as an error.
std::string unsupported_on_array(const Context& c, const Node& n, Placement placement) {
  if (placement != Placement::kNpuMatrix || !c.options.plan) return "";
  const quant::PrecisionPlan& plan = *c.options.plan;
  const quant::Precision p = plan.precision_of(n.name);
  if (backend::int8_matrix_mappable(plan, n)) return "";
  const isa::DType compute = p == quant::Precision::kFp16   ? isa::DType::kFp16
                             : p == quant::Precision::kBf16 ? isa::DType::kBf16
                                                            : isa::DType::kFp32;
  if (c.config.systolic_array.rate(compute) > 0) return "";
  const std::string_view dt = isa::kDTypeNames[static_cast<size_t>(compute)];
  return fmt::format("the array has no {} MACs (systolic_array.{}_rate is 0) and the int8 path does not take "
                     "this node (it needs constant weights, or two runtime operands with zero points 0)",
                     dt, dt);
}

// Hands node n's lowering a dense copy of every strided view (backend/memory/concat_in_place.h) it does not
// take itself (ConcatFolding::takes_view): an input is copied out of its slice before the node, an
// output written to DRAM scratch and copied into its slice after it. Correct for any lowering; the
// folding decides so that the layers it folds for need none of it.
class ViewScope {
 public:
  ViewScope(Context& c, const Node& n, Placement placement) : c_(c), n_(n) { swap(placement); }
  ViewScope(const ViewScope&) = delete;
  ViewScope& operator=(const ViewScope&) = delete;
  ~ViewScope() {
    for (const auto& [name, t] : saved_) c_.tensors[name] = t;
  }
  // Every view dense (before a host fallback).
  void materialize() { swap(Placement::kHost); }
  void finish() {
    for (const auto& name : outputs_) backend::copy_tensor(c_, c_.tensors.at(name), saved_.at(name));
    for (const auto& [name, t] : saved_) c_.tensors[name] = t;
    saved_.clear();
  }
  std::string describe() const {
    return copied_.empty() ? ""
                           : fmt::format("{} value(s) copied between a Concat's slice and a dense DRAM scratch",
                                         copied_.size());
  }

 private:
  void swap(Placement placement) {
    for (int output = 0; output < 2; ++output) {
      for (const auto& s : output ? n_.outputs : n_.inputs) {
        if (s.empty() || saved_.count(s) || !c_.tensors.count(s)) continue;
        const DramTensor t = c_.tensors.at(s);
        if (!t.strided() || backend::ConcatFolding::takes_view(c_.g, n_, placement, s, output) ||
            (!output && backend::StridedViews::reads_view(c_.g, n_, placement, s, t.shape, t.view_strides)) ||
            (output && backend::StridedViews::writes_view(c_.g, n_, placement, s, t.shape, t.view_strides)))
          continue;
        const DramTensor d = backend::dense_scratch(c_, t);
        if (!output) backend::copy_tensor(c_, t, d);
        if (output) outputs_.push_back(s);
        saved_[s] = t;
        c_.tensors[s] = d;
        copied_.push_back(s);
      }
    }
  }

  Context& c_;
  const Node& n_;
  std::map<std::string, DramTensor> saved_;
  std::vector<std::string> outputs_, copied_;
};

}  // namespace

CompileResult compile(const Graph& g, const isa::NpuConfig& config, const CompileOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  if (options.precision != isa::DType::kFp32 && options.precision != isa::DType::kFp16 &&
      options.precision != isa::DType::kBf16) {
    throw std::invalid_argument(fmt::format("compile: precision {} is not supported (fp32, fp16, bf16)",
                                            isa::kDTypeNames[static_cast<size_t>(options.precision)]));
  }
  if (!options.plan && config.systolic_array.rate(options.precision) <= 0) {
    throw CompileError(fmt::format("the systolic array has no {} MACs (systolic_array.{}_rate is 0)",
                                   isa::kDTypeNames[static_cast<size_t>(options.precision)],
                                   isa::kDTypeNames[static_cast<size_t>(options.precision)]));
  }
  if (options.mapping) backend::check_mapping_names(g, *options.mapping);
  CompileResult result;
  Context c(g, config, options, result);
  isa::Program& prog = result.program;
  prog.machine = isa::to_spec_text(config);
  for (const Node& n : g.nodes) prog.layers.push_back({n.name, n.op_type});

  // ---- memory plan: one DRAM buffer per alias group of runtime values ----
  std::map<std::string, std::string> root;  // value -> alias root
  auto find_root = [&](const std::string& v) {
    std::string r = v;
    while (root.count(r) && root[r] != r) r = root[r];
    return r;
  };
  for (const Node& n : g.nodes) {
    if (is_free(n) && n.has_input(0) && !g.value(n.inputs[0]).is_constant() && !n.outputs.empty()) {
      root[n.outputs[0]] = find_root(n.inputs[0]);
    }
  }
  // # int8: per-value storage formats of a precision plan (backend/int8/int8.h).
  std::map<std::string, isa::DType> planned;
  if (options.plan) {
    std::map<std::string, std::string> roots;
    for (const auto& [v, r] : root) roots[v] = find_root(v);
    planned = backend::planned_storage(g, *options.plan, roots);
  }
  auto value_dtype = [&](const std::string& name) {
    auto it = planned.find(name);
    return it != planned.end() ? it->second : storage_dtype(g.value(name), c.act);
  };
  // Concats folded into their producers' stores (backend/memory/concat_in_place.h): a value written in place
  // lives in its Concat's buffer, whose lifetime covers it.
  {
    std::map<std::string, isa::DType> storage;
    std::map<std::string, Placement> placements;
    for (const auto& in : g.inputs)
      if (!g.value(in).is_constant()) storage[in] = value_dtype(in);
    for (const Node& n : g.nodes) {
      placements[n.name] = placement_of(n);
      for (const auto& s : n.outputs)
        if (!s.empty() && g.has_value(s)) storage[s] = value_dtype(s);
    }
    c.folding = backend::fold_concats(g, options, storage, placements);
    for (const auto& [v, slice] : c.folding.views) root[v] = slice.root;
    // Slices, Transposes and the Reshapes between them read in place (backend/memory/strided_views.h).
    c.views = backend::fold_views(g, options, storage, placements, c.folding);
    for (const auto& [v, view] : c.views.views) root[v] = view.root;
  }
  std::map<std::string, Buf> bufs;
  const int kEnd = static_cast<int>(g.nodes.size());
  auto touch = [&](const std::string& v, int at) {
    const std::string r = find_root(v);
    Buf& b = bufs[r];
    b.root = r;
    b.first = std::min(b.first, at);
    b.last = std::max(b.last, at);
  };
  for (const auto& in : g.inputs) {
    if (!g.value(in).is_constant()) touch(in, -1);
  }
  for (int i = 0; i < kEnd; ++i) {
    const Node& n = g.nodes[static_cast<size_t>(i)];
    for (const auto& s : n.inputs) {
      if (!s.empty() && !g.value(s).is_constant()) touch(s, i);
    }
    for (const auto& s : n.outputs) {
      if (!s.empty()) touch(s, i);
    }
  }
  for (const auto& out : g.outputs) {
    if (!g.value(out).is_constant()) touch(out, kEnd);
  }
  // A pool or depthwise conv the conv before it may fuse (backend/fusion/layer_fusion.h) writes its output while
  // the conv reads.
  for (int i = 0; options.keep_on_chip && i < kEnd; ++i) {
    if (!backend::conv_pool_pair(g, static_cast<size_t>(i))) continue;
    for (const auto& s : g.nodes[static_cast<size_t>(i) + 1].outputs)
      if (!s.empty()) touch(s, i);
  }
  // A fused attention block writes its value MatMul's output at its first node, while it still reads Q, K^T
  // and V (attention_fusion.h).
  for (int i = 0; options.keep_on_chip && i < kEnd; ++i) {
    const size_t span = backend::attention_candidate(g, static_cast<size_t>(i));
    if (span > 0) touch(g.nodes[static_cast<size_t>(i) + span - 1].outputs[0], i);
  }
  uint64_t no_reuse = 0;
  for (auto& [name, b] : bufs) {
    const Value& v = g.value(name);
    if (!v.fully_known()) {
      throw CompileError(fmt::format("value '{}' has no static shape; bind dynamic dimensions with --input-shape", name));
    }
    b.bytes = static_cast<uint64_t>(std::max<int64_t>(1, num_elements(v.shape))) *
              static_cast<uint64_t>(isa::dtype_bytes(value_dtype(name)));
    no_reuse += c.align(b.bytes);
  }
  std::vector<Buf> list;
  for (auto& [name, b] : bufs) list.push_back(b);
  const uint64_t peak = place(list, c.align(1) == 1 ? 1 : c.align(1));
  for (const Buf& b : list) bufs[b.root] = b;
  auto make_tensor = [&](const std::string& name) {
    const Value& v = g.value(name);
    const Buf& b = bufs.at(find_root(name));
    DramTensor t;
    t.addr = b.offset;
    t.shape = v.shape;
    t.layout = v.layout;
    t.phys = backend::physical(v.shape, v.layout);
    t.dtype = value_dtype(name);
    t.bytes = static_cast<uint64_t>(std::max<int64_t>(1, num_elements(v.shape))) *
              static_cast<uint64_t>(isa::dtype_bytes(t.dtype));
    const auto as_view = [&](int64_t offset, const std::vector<int64_t>& strides) {
      t.addr += static_cast<uint64_t>(offset * isa::dtype_bytes(t.dtype));
      const std::vector<int64_t> dense = t.strides();
      for (size_t i = 0; i < t.phys.size(); ++i)
        if (t.phys[i] != 1 && dense[i] != strides[i]) t.view_strides = strides;
    };
    if (auto view = c.folding.views.find(name); view != c.folding.views.end())
      as_view(view->second.offset, view->second.strides);
    if (auto view = c.views.views.find(name); view != c.views.views.end())
      as_view(view->second.offset, view->second.strides);
    return t;
  };
  for (const auto& in : g.inputs) {
    if (!g.value(in).is_constant()) c.tensors[in] = make_tensor(in);
  }
  for (const Node& n : g.nodes) {
    for (const auto& s : n.outputs) {
      if (!s.empty() && g.has_value(s)) c.tensors[s] = make_tensor(s);
    }
  }
  result.memory.activation_base = 0;
  result.memory.activation_bytes = peak;
  result.memory.activation_bytes_no_reuse = no_reuse;
  c.data_base_ = c.data_end_ = c.align(peak);
  result.memory.weight_base = c.data_end_;
  c.scratch_base_ = c.scratch_end_ = uint64_t{1} << 38;

  // ---- code generation, node by node ----
  // Layers whose code was timed, in order: (first instruction, layer index).
  std::vector<std::pair<int64_t, size_t>> timed_layers;
  backend::AttentionBlock attention;  // the attention block lowered as one layer, if any (attention_fusion.h)
  backend::ConvPool conv_pool;        // the conv -> pool / depthwise pair fused last, if any (layer_fusion.h)
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    c.layer = static_cast<uint32_t>(i);
    LayerPlan plan;
    plan.name = n.name;
    plan.op = n.op_type;
    plan.placement = placement_of(n);
    const bool folded = c.folding.folded(n) || c.views.folds(n);
    if (folded) plan.placement = Placement::kFree;
    c.plan = &plan;
    const LayerMapping* imposed = options.mapping ? options.mapping->find(n.name) : nullptr;
    const bool forced_host = imposed && backend::imposed_host(*imposed, n, plan.placement);
    const int64_t before = c.em.size();
    std::optional<bool> kept_output;  // Conv layers: whether the output stayed on chip (LayerMapping::on_chip)
    // A reader fused into the conv before it (layer_fusion.h) was lowered with it: nothing to plan.
    const bool fused_reader = conv_pool.fused && conv_pool.pool == i;
    if (!forced_host && !folded && !fused_reader && plan.placement == Placement::kNpuMatrix)
      backend::plan_on_chip(c, i);
    if (!forced_host && !folded && plan.placement == Placement::kNpuVector) backend::plan_se_hold(c, i);
    backend::ConvPool pair;
    if (!forced_host && !folded && plan.placement == Placement::kNpuMatrix && backend::plan_conv_pool(c, i, &pair))
      c.conv_pool = &pair;
    if (n.domain == kNpuDomain && n.op_type == "Transpose" && n.has_attr(kLayoutChange)) {
      const Value& in = g.value(n.inputs[0]);
      const Value& out = g.value(n.outputs[0]);
      result.transposes.push_back({n.name, n.inputs[0], n.outputs[0], in.shape, in.layout, out.layout,
                                   n.attr_string(kLayoutReason, "")});
    }
    if (folded) {
      plan.mapping = c.views.folds(n) ? c.views.describe(g, n) : c.folding.describe(n);
    } else if (attention.covers(i)) {
      plan.mapping = backend::describe_fused(c, attention, i);
      plan.fused_into = g.nodes[attention.first].name;
      plan.macs = attention.macs[i - attention.first];
      plan.on_chip_input = n.inputs[0];
      plan.on_chip_bytes_saved = attention.value_bytes_saved;
    } else if (fused_reader) {
      plan.mapping = backend::describe_fused_pool(c, conv_pool);
      plan.macs = conv_pool.reader_macs;
      plan.fused_into = g.nodes[conv_pool.conv].name;
      plan.on_chip_input = n.inputs[0];
      plan.on_chip_bytes_saved = conv_pool.bytes_saved;
      plan.fusion_group = backend::fusion_group(c, conv_pool);
    } else if (!forced_host && plan.placement == Placement::kNpuMatrix &&
               (attention = backend::lower_attention(c, i)).fused()) {
      plan.instructions = c.em.size() - before;
    } else if (plan.placement == Placement::kFree) {
      plan.mapping = "alias (no instructions)";
      if (n.op_type == "Dropout" && n.outputs.size() > 1 && !n.outputs[1].empty() && c.tensors.count(n.outputs[1])) {
        // Inference: the mask is all true, written as a fill.
        const DramTensor& mask = c.tensor(n.outputs[1]);
        backend::copy_index_map(c, mask, {}, std::vector<int64_t>(static_cast<size_t>(num_elements(mask.shape)), -1), 1.0);
        plan.mapping = "alias; mask written as a fill of ones";
        plan.instructions = c.em.size() - before;
      }
    } else if (plan.placement == Placement::kHost && !options.plan) {
      ViewScope views(c, n, plan.placement);
      lower_host(c, n, "placed on the host by the op table");
      views.finish();
    } else if (plan.placement == Placement::kHost) {
      ViewScope views(c, n, plan.placement);
      backend::PlanScope scope(c, n, plan.placement);  // # int8: conversions around the node
      lower_host(c, n, "placed on the host by the op table");
      scope.finish();
      views.finish();
    } else if (std::string unsupported = unsupported_on_array(c, n, plan.placement); !unsupported.empty()) {
      // The array has no MACs in the precision this node would need (an int8-only part and a MatMul of
      // two runtime operands, say): the CPU runs it, and the report shows what that costs.
      plan.placement = Placement::kHost;
      ViewScope views(c, n, plan.placement);
      backend::PlanScope scope(c, n, plan.placement);
      lower_host(c, n, unsupported);
      scope.finish();
      views.finish();
    } else {
      ViewScope views(c, n, plan.placement);          // dense copies of the views it does not take
      backend::PlanScope scope(c, n, plan.placement);  // # int8: conversions around the node, no-op without a plan
      const int64_t lowering_from = c.em.size();
      std::string why;
      bool ok = false;
      if (forced_host) {
        why = "placed on the host by the mapping file";  // as if the lowering declined: the same path
      } else if (plan.placement == Placement::kNpuMatrix) {
        ok = scope.int8_matrix() ? backend::lower_matrix_int8(c, n) : backend::lower_matrix(c, n);
        if (!ok) why = "matrix op form not mapped by the back end";
      } else {
        ok = backend::lower_vector_tiled(c, n, &why);
      }
      if (!ok) {
        if (c.em.size() != lowering_from) throw std::logic_error("backend: a lowering emitted code and then gave up");
        plan.placement = Placement::kHost;
        scope.materialize();  // # int8: the host reads floats
        views.materialize();  // ... and dense tensors
        lower_host(c, n, why.empty() ? "not mapped by the back end" : why);
      } else {
        plan.instructions = c.em.size() - before;
        if (n.has_attr(kDecomposedWhy)) plan.mapping += "; " + n.attr_string(kDecomposedWhy, "");
        if (plan.placement != Placement::kNpuMatrix) {
          // Vector layers: the busier of the vector unit and the DMA engines, from the emitted code.
          double vec = 0, dma = 0;
          for (int64_t k = before; k < c.em.size(); ++k) {
            const isa::Instruction& ins = prog.instructions[static_cast<size_t>(k)];
            if (ins.opcode == isa::Opcode::kVec) vec += static_cast<double>(isa::timing::vec_cycles(ins, config.vector));
            if (ins.opcode == isa::Opcode::kLoad || ins.opcode == isa::Opcode::kStore) {
              dma += isa::timing::estimate_dma_cycles(ins, config);
            }
          }
          dma /= static_cast<double>(std::max<int64_t>(1, config.dma.engines));
          plan.est_compute_cycles = static_cast<int64_t>(vec);
          plan.est_dma_cycles = static_cast<int64_t>(dma);
          plan.est_cycles = static_cast<int64_t>(std::max(vec, dma));
        }
      }
      scope.finish();
      views.finish();
      if (const std::string note = views.describe(); !note.empty()) plan.mapping += "; " + note;
      if (const std::string note = c.folding.describe(n); !note.empty()) plan.mapping += "; " + note;
    }
    c.conv_pool = nullptr;
    if (pair.fused) conv_pool = pair;
    if (n.op_type == "Conv" && !pair.fused && !fused_reader &&
        (plan.placement == Placement::kNpuMatrix || plan.placement == Placement::kNpuVector)) {
      kept_output = c.on_chip.pending && c.on_chip.producer == i;
    }
    // A node of a fused block holds no SRAM of its own (its input lies in the block's slots).
    if (!attention.covers(i) && !(conv_pool.fused && conv_pool.pool == i)) backend::finish_on_chip(c, i, plan);
    backend::finish_se_hold(c, i, plan);
    if (plan.model_cycles == 0) plan.model_cycles = plan.est_cycles;
    if (c.can_time() && c.em.size() > before) {
      // Between its neighbours, as in the whole program: the layers before it run first (their tails
      // overlap this layer's first loads), and the layer before it takes its figure from this run, where
      // its successor's loads compete with it for DRAM.
      const bool known = c.timed.first == before && c.timed.last == c.em.size() && !c.timed.cycles.empty();
      const std::vector<int64_t> cycles = known ? c.timed.cycles : c.time_code(before);
      plan.est_cycles = cycles.back();
      if (!timed_layers.empty()) {
        const int64_t from = c.context_first >= 0 && c.context_first < before ? c.context_first : before;
        const size_t base = prog.instructions[static_cast<size_t>(from)].layer();
        const size_t previous = timed_layers.back().second;
        if (previous >= base && previous - base < cycles.size() - 1 && cycles[previous - base] > 0) {
          result.layers[previous].est_cycles = cycles[previous - base];
        }
      }
      timed_layers.emplace_back(before, i);
      const size_t k = timed_layers.size() - std::min(timed_layers.size(), kContextLayers);
      c.context_first = std::max(timed_layers[k].first, std::min(before, c.em.size() - kContextInstructions));
    }
    c.timed = {};
    const isa::DType precision =
        options.plan ? quant::to_dtype(options.plan->reported_precision(n.name)) : options.precision;
    if (plan.placement == Placement::kFree && plan.instructions == 0) {
      plan.bound_cycles = 0;
    } else if (plan.placement != Placement::kHost) {
      plan.bound_cycles = backend::roofline(g, n, plan.macs, precision, config).bound_cycles();
    }
    // What the program carries of the layer, so a run of the program file reports what this run does.
    prog.layers[i].precision = precision;
    if (plan.placement == Placement::kNpuMatrix || plan.placement == Placement::kNpuVector)
      prog.layers[i].macs = static_cast<uint64_t>(plan.macs);
    // A SCALE-Sim topology's rows are independent layers that SCALE-Sim runs one at a time: each starts
    // after the one before it (its SRAM history merged whole), so every row's cycles are its own and
    // they add up to the run. A model's layers keep the exact history of the layer just emitted.
    c.em.collapse_sram(g.nhwc_io ? c.em.size() : before);
    if (imposed) backend::check_applied(*imposed, plan, forced_host);
    plan.chosen.name = plan.name;
    plan.chosen.on_chip = kept_output;
    // A depthwise conv fused into the conv before it has no placement of its own to write (lowered layer
    // by layer, the back end chooses between the array and the vector unit).
    if (!(fused_reader && conv_pool.depthwise)) plan.chosen.placement = plan.placement;
    result.layers.push_back(plan);
  }
  c.em.halt(static_cast<uint32_t>(g.nodes.empty() ? 0 : g.nodes.size() - 1));

  // ---- bindings (ONNX order) ----
  auto bind = [&](const std::string& name, isa::TensorBinding::Role role) {
    const Value& v = g.value(name);
    isa::TensorBinding b;
    b.name = name;
    b.role = role;
    b.dtype = v.is_constant() ? storage_dtype(v, c.act) : c.tensor(name).dtype;
    if (v.is_constant()) {
      if (b.dtype == isa::DType::kInt32) {
        // Integer and bool constants are bound as int32: write them as such.
        const std::vector<int64_t> iv = v.constant->to_int_vector();
        std::vector<uint8_t> bytes(iv.size() * 4);
        for (size_t k = 0; k < iv.size(); ++k) {
          const int32_t x = static_cast<int32_t>(iv[k]);
          std::memcpy(&bytes[k * 4], &x, 4);
        }
        b.dram_addr = c.add_data(std::move(bytes));
      } else {
        b.dram_addr = c.add_constant(*v.constant, b.dtype);
      }
    } else {
      const DramTensor& t = c.tensor(name);
      if (!t.layout.empty()) {
        bool identity = true;
        for (size_t k = 0; k < t.layout.size(); ++k) identity &= t.layout[k] == static_cast<int>(k);
        if (!identity && !g.nhwc_io) {
          throw CompileError(fmt::format("graph {} '{}' is not in ONNX order after lowering",
                                         role == isa::TensorBinding::Role::kInput ? "input" : "output", name));
        }
      }
      b.dram_addr = t.addr;
    }
    // Dimensions in memory order (Graph::nhwc_io binds NHWC; everything else is in ONNX order).
    const std::vector<int> phys = v.is_constant() ? std::vector<int>{} : c.tensor(name).layout;
    for (size_t k = 0; k < v.shape.size(); ++k)
      b.dims.push_back(static_cast<uint64_t>(v.shape[phys.empty() ? k : static_cast<size_t>(phys[k])]));
    prog.tensors.push_back(b);
  };
  for (const auto& in : g.inputs) {
    if (!g.value(in).is_constant()) bind(in, isa::TensorBinding::Role::kInput);
  }
  for (const auto& out : g.outputs) bind(out, isa::TensorBinding::Role::kOutput);

  for (const auto& [name, t] : c.tensors) {
    auto kept = c.kept_on_chip.find(name);  // never in DRAM (backend/fusion/residency.h)
    (kept == c.kept_on_chip.end() ? result.values : result.on_chip)
        .push_back({name, kept == c.kept_on_chip.end() ? t.addr : kept->second, t.shape, t.layout, t.dtype,
                    g.value(name).dtype, t.view_strides});
  }
  uint64_t wbytes = 0;
  for (const auto& d : prog.data) wbytes += d.size();
  result.memory.weight_bytes = wbytes;
  result.memory.scratch_bytes = c.scratch_end_ - (uint64_t{1} << 38);
  result.compile_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return result;
}

int64_t rowwise_row_limit(const isa::NpuConfig& config) { return backend::longest_row(config); }

std::string compile_summary(const CompileResult& r) {
  std::string s;
  s += fmt::format("{} layers, {} instructions, {} data segments ({:.1f} KiB), compile {:.3f} s\n", r.layers.size(),
                   r.program.instructions.size(), r.program.data.size(),
                   static_cast<double>(r.memory.weight_bytes) / 1024.0, r.compile_seconds);
  const std::string header =
      fmt::format("{:<28} {:<18} {:<7} {:>6} {:>6} {:>6} {:>6} {:>9} {:>9} {:>9} {:>7} {:>12}  {}", "layer",
                  "op", "place", "tile_m", "tile_k", "tile_n", "groups", "in_KiB", "w_KiB", "acc_KiB",
                  "instr", "est_cycles", "mapping");
  s += header + "\n";
  // A long mapping description wraps in its own column (the report's layers[].mapping.description has it
  // on one line).
  const size_t mapping_column = header.find("mapping");
  int64_t total = 0;
  std::vector<std::string> names;
  for (const LayerPlan& p : r.layers) names.push_back(p.name);
  names = isa::display_names(names);
  for (size_t i = 0; i < r.layers.size(); ++i) {
    const LayerPlan& p = r.layers[i];
    const std::string_view where = placement_name(p.placement);
    total += p.est_cycles;
    s += isa::wrap_lines(
             fmt::format(
                 "{:<28} {:<18} {:<7} {:>6} {:>6} {:>6} {:>6} {:>9.1f} {:>9.1f} {:>9.1f} {:>7} {:>12}  {}{}",
                 names[i], p.op.substr(0, 18), where, p.tile_m, p.tile_k, p.tile_n, p.group_block,
                 p.sram_input_bytes / 1024.0, p.sram_weight_bytes / 1024.0, p.sram_acc_bytes / 1024.0,
                 p.instructions, p.est_cycles, p.mapping, p.loop_order.empty() ? "" : "; " + p.loop_order),
             kCompileTableWidth, mapping_column) +
         "\n";
  }
  s += fmt::format("estimated total (layers back to back): {} cycles\n", total);
  s += fmt::format("memory: activations {:.1f} KiB with lifetime reuse ({:.1f} KiB without, saving {:.1f}%), "
                   "weights {:.1f} KiB\n",
                   r.memory.activation_bytes / 1024.0, r.memory.activation_bytes_no_reuse / 1024.0,
                   r.memory.activation_bytes_no_reuse
                       ? 100.0 * (1.0 - static_cast<double>(r.memory.activation_bytes) /
                                            static_cast<double>(r.memory.activation_bytes_no_reuse))
                       : 0.0,
                   r.memory.weight_bytes / 1024.0);
  if (r.fallbacks.empty()) {
    s += "fallbacks: none\n";
  } else {
    s += fmt::format("fallbacks: {}\n", r.fallbacks.size());
    for (const Fallback& f : r.fallbacks) {
      s += isa::wrap_lines(
               fmt::format("  {} ({}): {} cycles on the host; {}", f.node, f.op, f.est_cycles, f.reason),
               kCompileTableWidth, 4) +
           "\n";
    }
  }
  if (!r.transposes.empty()) {
    s += fmt::format("inserted layout conversions: {}\n", r.transposes.size());
    for (const auto& t : r.transposes) {
      s += isa::wrap_lines(fmt::format("  {}: {} -> {} ({}){}", t.node, t.input, t.output,
                                       shape_to_string(t.shape), t.reason.empty() ? "" : ": " + t.reason),
                           kCompileTableWidth, 4) +
           "\n";
    }
  }
  return s;
}

}  // namespace npusim::compiler
