// The memory-planning stage (plan_memory.h).
#include "compiler/backend/stages/plan_memory.h"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <numeric>
#include <vector>

#include "compiler/backend/fusion/attention_fusion.h"
#include "compiler/backend/fusion/deferred_residual.h"
#include "compiler/backend/fusion/layer_fusion.h"
#include "compiler/backend/fusion/post_affine.h"
#include "compiler/backend/fusion/pre_affine.h"
#include "compiler/backend/fusion/pre_norm.h"
#include "compiler/backend/fusion/pre_pool.h"
#include "compiler/backend/fusion/pre_scale.h"
#include "compiler/backend/fusion/pre_transpose.h"
#include "compiler/backend/fusion/project_tail.h"
#include "compiler/backend/fusion/scaled_residual.h"
#include "compiler/backend/fusion/siblings.h"
#include "compiler/backend/fusion/upsample_add.h"
#include "compiler/backend/int8/int8.h"
#include "compiler/backend/result.h"
#include "compiler/passes/lowered.h"

namespace npusim::compiler::backend {

namespace {

bool is_free(const Node& n) { return assigned_placement(n) == Placement::kFree; }

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

}  // namespace

isa::DType storage_dtype(const Value& v, isa::DType act) {
  return is_float(v.dtype) || v.dtype == DataType::kUndefined ? act : isa::DType::kInt32;
}

Placement placement_of(const Node& n) {
  if (const std::optional<Placement> p = assigned_placement(n)) return *p;
  if (n.op_type == "Conv" || n.op_type == "Gemm" || n.op_type == "MatMul") return Placement::kNpuMatrix;
  return Placement::kNpuVector;
}

MemoryLayout plan_memory(const Graph& g, const isa::NpuConfig& config, const CompileOptions& options) {
  MemoryLayout m;
  const auto align = [&](uint64_t x) {
    const uint64_t a = static_cast<uint64_t>(std::max<int64_t>(1, config.dma.alignment_bytes));
    return (x + a - 1) / a * a;
  };
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
    planned = planned_storage(g, *options.plan, roots);
  }
  auto value_dtype = [&](const std::string& name) {
    auto it = planned.find(name);
    return it != planned.end() ? it->second : storage_dtype(g.value(name), options.precision);
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
    m.folding = fold_concats(g, options, storage, placements);
    for (const auto& [v, slice] : m.folding.views) root[v] = slice.root;
    // Slices, Transposes and the Reshapes between them read in place (backend/memory/strided_views.h).
    m.views = fold_views(g, options, storage, placements, m.folding);
    for (const auto& [v, view] : m.views.views) root[v] = view.root;
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
  // A pool or depthwise conv the conv before it may fuse (backend/fusion/layer_fusion.h) writes its output
  // while the conv reads.
  // So does the project conv after a depthwise reader, run in the same band loop.
  for (int i = 0; options.keep_on_chip && i < kEnd; ++i) {
    const int64_t r = conv_pool_reader(g, static_cast<size_t>(i));
    if (r < 0) continue;
    for (const auto& s : g.nodes[static_cast<size_t>(r)].outputs)
      if (!s.empty()) touch(s, i);
    if (const int64_t q = project_of(g, static_cast<size_t>(i)); q >= 0)
      touch(g.nodes[static_cast<size_t>(q)].outputs[0], i);
  }
  // A MatMul whose epilogue runs the layer scale and residual after it writes the Add's output
  // (fusion/project_tail.h).
  for (int i = 0; options.keep_on_chip && i < kEnd; ++i) {
    if (const int64_t a = project_tail_of(g, static_cast<size_t>(i)); a >= 0)
      touch(g.nodes[static_cast<size_t>(a)].outputs[0], i);
  }
  // A fused attention block writes its value MatMul's output at its first node, while it still reads Q, K^T
  // and V (attention_fusion.h).
  for (int i = 0; options.keep_on_chip && i < kEnd; ++i) {
    const size_t span = attention_candidate(g, static_cast<size_t>(i));
    if (span > 0) touch(g.nodes[static_cast<size_t>(i) + span - 1].outputs[0], i);
  }
  // An affine map its producer applies writes the map's output while the producer reads (post_affine.h).
  for (int i = 0; options.keep_on_chip && i < kEnd; ++i) {
    if (const int64_t k = post_affine_candidate(g, static_cast<size_t>(i)); k >= 0)
      touch(g.nodes[static_cast<size_t>(k)].outputs[0], i);
    // A map applied in its reader's loads: its input lives until the reader (pre_affine.h).
    if (const int64_t j = pre_affine_reader(g, static_cast<size_t>(i)); j >= 0)
      touch(g.nodes[static_cast<size_t>(i)].inputs[0], static_cast<int>(j));
    if (const int64_t j = pre_norm_reader(g, static_cast<size_t>(i)); j >= 0)
      touch(g.nodes[static_cast<size_t>(i)].inputs[0], static_cast<int>(j));
    if (const int64_t j = pre_pool_reader(g, static_cast<size_t>(i)); j >= 0)
      touch(g.nodes[static_cast<size_t>(i)].inputs[0], static_cast<int>(j));
    if (const int64_t j = pre_transpose_reader(g, static_cast<size_t>(i)); j >= 0)
      touch(g.nodes[static_cast<size_t>(i)].inputs[0], static_cast<int>(j));
    // An SE block's scale applied in its project conv's loads: X and s live until the conv (pre_scale.h).
    if (const std::string x = pre_scale_input(g, static_cast<size_t>(i)); !x.empty()) {
      const int64_t bytes = num_elements(g.value(x).shape) * isa::dtype_bytes(value_dtype(x));
      const int64_t j = pre_scale_reader(g, static_cast<size_t>(i), bytes,
                                         scratchpad_capacity(config, isa::Buffer::kInput));
      if (j >= 0)
        for (const std::string& v : g.nodes[static_cast<size_t>(i)].inputs) touch(v, static_cast<int>(j));
    }
    // So does a Mul that adds its input back (scaled_residual.h).
    if (const int64_t k = scaled_residual_candidate(g, static_cast<size_t>(i)); k >= 0)
      touch(g.nodes[static_cast<size_t>(k)].outputs[0], i);
    // ... or waits for the top-down Add after it, which reads x, s and (lowered apart) the product
    // (deferred_residual.h; float programs only).
    if (const int64_t j = options.plan ? -1 : deferred_residual_reader(g, static_cast<size_t>(i)); j >= 0) {
      const Node& mul = g.nodes[static_cast<size_t>(i)];
      for (const std::string& v : {mul.inputs[0], mul.inputs[1], mul.outputs[0]})
        touch(v, static_cast<int>(j));
    }
    // An Add that reads a Resize's input in place of its output reads it after the Resize (upsample_add.h).
    if (const int64_t k = upsample_add_candidate(g, static_cast<size_t>(i));
        k >= 0 && !g.value(g.nodes[static_cast<size_t>(i)].inputs[0]).is_constant())
      touch(g.nodes[static_cast<size_t>(i)].inputs[0], static_cast<int>(k));
  }
  // Sibling layers run as one GEMM write every output at the first of them (siblings.h).
  for (int i = 0; options.keep_on_chip && i < kEnd; ++i) {
    for (size_t k : sibling_candidates(g, static_cast<size_t>(i))) touch(g.nodes[k].outputs[0], i);
  }
  uint64_t no_reuse = 0;
  for (auto& [name, b] : bufs) {
    const Value& v = g.value(name);
    if (!v.fully_known()) {
      throw CompileError(
          fmt::format("value '{}' has no static shape; bind dynamic dimensions with --input-shape", name));
    }
    b.bytes = static_cast<uint64_t>(std::max<int64_t>(1, num_elements(v.shape))) *
              static_cast<uint64_t>(isa::dtype_bytes(value_dtype(name)));
    no_reuse += align(b.bytes);
  }
  std::vector<Buf> list;
  for (auto& [name, b] : bufs) list.push_back(b);
  const uint64_t peak = place(list, align(1) == 1 ? 1 : align(1));
  for (const Buf& b : list) bufs[b.root] = b;
  auto make_tensor = [&](const std::string& name) {
    const Value& v = g.value(name);
    const Buf& b = bufs.at(find_root(name));
    DramTensor t;
    t.addr = b.offset;
    t.shape = v.shape;
    t.layout = v.layout;
    t.phys = physical(v.shape, v.layout);
    t.dtype = value_dtype(name);
    t.bytes = static_cast<uint64_t>(std::max<int64_t>(1, num_elements(v.shape))) *
              static_cast<uint64_t>(isa::dtype_bytes(t.dtype));
    const auto as_view = [&](int64_t offset, const std::vector<int64_t>& strides) {
      t.addr += static_cast<uint64_t>(offset * isa::dtype_bytes(t.dtype));
      const std::vector<int64_t> dense = t.strides();
      for (size_t i = 0; i < t.phys.size(); ++i)
        if (t.phys[i] != 1 && dense[i] != strides[i]) t.view_strides = strides;
    };
    if (auto view = m.folding.views.find(name); view != m.folding.views.end())
      as_view(view->second.offset, view->second.strides);
    if (auto view = m.views.views.find(name); view != m.views.views.end()) {
      as_view(view->second.offset, view->second.strides);
      if (!view->second.split.empty())
        t.view_strides = view->second.strides, t.view_split = view->second.split;
    }
    return t;
  };
  for (const auto& in : g.inputs) {
    if (!g.value(in).is_constant()) m.tensors[in] = make_tensor(in);
  }
  for (const Node& n : g.nodes) {
    for (const auto& s : n.outputs) {
      if (!s.empty() && g.has_value(s)) m.tensors[s] = make_tensor(s);
    }
  }
  m.activation_bytes = peak;
  m.activation_bytes_no_reuse = no_reuse;
  return m;
}

}  // namespace npusim::compiler::backend
