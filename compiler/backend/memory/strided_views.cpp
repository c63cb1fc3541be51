#include "compiler/backend/memory/strided_views.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <optional>

#include "compiler/ir/value_index.h"
#include "compiler/passes/lowered.h"
#include "compiler/quant/precision.h"
#include "isa/strides.h"

namespace npusim::compiler::backend {

namespace {

bool onnx_order(const Value& v) {
  for (size_t k = 0; k < v.layout.size(); ++k)
    if (v.layout[k] != static_cast<int>(k)) return false;
  return true;
}

bool is_binary(const Node& n) {
  static const char* const kOps[] = {"Add", "Sub", "Mul", "Div", "Max", "Min", "Pow"};
  return n.domain.empty() && n.num_given_inputs() == 2 &&
         std::any_of(std::begin(kOps), std::end(kOps), [&](const char* o) { return n.op_type == o; });
}

bool reshape_like(const Node& n) {
  return n.domain.empty() && (n.op_type == "Reshape" || n.op_type == "Flatten" || n.op_type == "Squeeze" ||
                              n.op_type == "Unsqueeze");
}

// A Slice's constant parameter (input k from opset 10, attribute `attr` before); nullopt when runtime.
std::optional<std::vector<int64_t>> slice_param(const Graph& g, const Node& n, size_t k, const char* attr) {
  if (g.opset < 10) return n.attr_ints(attr, {});
  if (!n.has_input(k)) return std::vector<int64_t>{};
  const Value& v = g.value(n.inputs[k]);
  if (!v.is_constant() || !v.constant->has_values()) return std::nullopt;
  return v.constant->to_int_vector();
}

class ViewDecider {
 public:
  ViewDecider(const Graph& g, const CompileOptions& o, const std::map<std::string, isa::DType>& storage,
              const std::map<std::string, Placement>& placement, const ConcatFolding& concats)
      : g_(g), o_(o), storage_(storage), placement_(placement), index_(g) {
    for (const auto& [v, slice] : concats.views) {
      concat_values_.insert(v);
      concat_values_.insert(slice.root);
    }
  }

  StridedViews run() {
    for (;;) {
      StridedViews s;
      for (const Node& n : g_.nodes) {
        if (rejected_.count(n.name)) continue;
        if (std::optional<StridedViews::View> v = candidate(n, s)) {
          s.views[n.outputs[0]] = *v;
          s.folded.insert(n.name);
        }
      }
      for (const Node& n : g_.nodes) {
        if (s.folds(n)) continue;  // (a read view rejected for its readers may still be written in place)
        if (std::optional<StridedViews::View> v = written_by_producer(n, s)) {
          s.views[n.inputs[0]] = *v;
          s.folded.insert(n.name);
          s.written.insert(n.name);
        }
      }
      bool again = false;
      for (const Node& n : g_.nodes) {
        if (!s.folds(n) || s.written.count(n.name)) continue;
        const std::string& y = n.outputs[0];
        for (const Node* r : index_.readers(y)) {
          if (s.folds(*r)) continue;
          const StridedViews::View& view = s.views.at(y);
          std::set<size_t> split;
          for (const auto& [d, levels] : view.split) split.insert(d);
          if (!StridedViews::reads_view(g_, *r, placement_of(*r), y, g_.value(y).shape, view.strides,
                                        split)) {
            again |= rejected_.insert(n.name).second;
            break;
          }
        }
      }
      if (!again) return s;
    }
  }

 private:
  Placement placement_of(const Node& n) const {
    auto it = placement_.find(n.name);
    return it == placement_.end() ? Placement::kHost : it->second;
  }

  bool runtime(const std::string& v) const {
    return !v.empty() && g_.has_value(v) && !g_.value(v).is_constant() && g_.value(v).fully_known() &&
           storage_.count(v) && onnx_order(g_.value(v));
  }

  // y holds the bytes of `root` unchanged: the same storage type, and for codes the same QParams.
  bool same_format(const std::string& y, const std::string& root) const {
    if (storage_.at(y) != storage_.at(root)) return false;
    if (!o_.plan) return true;
    const auto qy = o_.plan->values.find(y), qr = o_.plan->values.find(root);
    if (qy == o_.plan->values.end() || qr == o_.plan->values.end()) return qy == qr;
    return qy->second.scale == qr->second.scale && qy->second.zero_point == qr->second.zero_point &&
           qy->second.dtype == qr->second.dtype;
  }

  // n's output as a view, given the views decided so far (nullopt: n is lowered as before).
  std::optional<StridedViews::View> candidate(const Node& n, const StridedViews& s) const {
    if (!n.domain.empty() || n.outputs.size() != 1 || !n.has_input(0)) return std::nullopt;
    const std::string &x = n.inputs[0], &y = n.outputs[0];
    if (!runtime(x) || !runtime(y) || index_.is_graph_io(y) || concat_values_.count(x) ||
        concat_values_.count(y))
      return std::nullopt;
    const Placement p = placement_of(n);
    if (p != Placement::kNpuVector && p != Placement::kFree) return std::nullopt;
    if (o_.mapping) {
      const LayerMapping* m = o_.mapping->find(n.name);
      if (m && m->placement && *m->placement != Placement::kFree) return std::nullopt;
    }
    StridedViews::View base;
    const Shape& xs = g_.value(x).shape;
    if (auto it = s.views.find(x); it != s.views.end()) {
      base = it->second;
    } else if (p == Placement::kNpuVector) {
      base = {x, 0, dense_strides(xs), {}};
    } else {
      return std::nullopt;  // an alias of a dense value is one already
    }
    if (!same_format(y, base.root)) return std::nullopt;
    const Shape& ys = g_.value(y).shape;
    StridedViews::View v{base.root, base.offset, {}, {}};
    if (n.op_type == "Slice" && p == Placement::kNpuVector) {
      const auto starts = slice_param(g_, n, 1, "starts"), axes = slice_param(g_, n, 3, "axes"),
                 steps = slice_param(g_, n, 4, "steps");
      if (!starts || !axes || !steps) return std::nullopt;
      for (int64_t st : *steps)
        if (st != 1) return std::nullopt;
      std::vector<int64_t> ax = *axes;
      if (ax.empty())
        for (size_t i = 0; i < starts->size(); ++i) ax.push_back(static_cast<int64_t>(i));
      if (ax.size() != starts->size()) return std::nullopt;
      const int64_t r = static_cast<int64_t>(xs.size());
      for (size_t i = 0; i < ax.size(); ++i) {
        const int64_t a = ax[i] < 0 ? ax[i] + r : ax[i];
        if (a < 0 || a >= r) return std::nullopt;
        if (base.split.count(static_cast<size_t>(a))) return std::nullopt;
        const int64_t dim = xs[static_cast<size_t>(a)];
        const int64_t start =
            std::clamp<int64_t>((*starts)[i] < 0 ? (*starts)[i] + dim : (*starts)[i], 0, dim);
        v.offset += start * base.strides[static_cast<size_t>(a)];
      }
      v.strides = base.strides;
      v.split = base.split;
    } else if (n.op_type == "Transpose" && !n.has_attr(kLayoutChange)) {
      std::vector<int64_t> perm = n.attr_ints("perm", {});
      const size_t r = xs.size();
      if (perm.empty())
        for (size_t i = 0; i < r; ++i) perm.push_back(static_cast<int64_t>(r - 1 - i));
      if (perm.size() != r) return std::nullopt;
      for (int64_t d : perm) {
        if (d < 0 || d >= static_cast<int64_t>(r)) return std::nullopt;
        if (auto it = base.split.find(static_cast<size_t>(d)); it != base.split.end())
          v.split[v.strides.size()] = it->second;
        v.strides.push_back(base.strides[static_cast<size_t>(d)]);
      }
    } else if (reshape_like(n) && p == Placement::kFree) {
      if (base.split.empty()) v.strides = reshaped_strides(xs, base.strides, ys);
      if (v.strides.empty()) {
        // Dims merged at two strides (torchvision's view(seq, batch * heads, dh) at batch > 1): levels.
        std::optional<ReshapedView> rv = reshaped_levels(xs, base.strides, base.split, ys);
        if (!rv) return std::nullopt;
        v.strides = rv->strides;
        v.split = rv->split;
      }
    } else {
      return std::nullopt;
    }
    if (v.strides.size() != ys.size()) return std::nullopt;
    return v;
  }

  // A Transpose keeping the innermost dim whose input only it reads and a MatMul / Gemm writes: that input
  // as a view of the Transpose's output (nullopt: the Transpose copies).
  std::optional<StridedViews::View> written_by_producer(const Node& n, const StridedViews& s) const {
    if (!n.domain.empty() || n.op_type != "Transpose" || n.has_attr(kLayoutChange) || n.outputs.size() != 1 ||
        !n.has_input(0) || placement_of(n) != Placement::kNpuVector)
      return std::nullopt;
    const std::string &x = n.inputs[0], &y = n.outputs[0];
    if (!runtime(x) || !runtime(y) || index_.is_graph_io(x) || index_.is_graph_io(y) ||
        concat_values_.count(x) || concat_values_.count(y) || s.views.count(x) || s.views.count(y) ||
        !same_format(x, y))
      return std::nullopt;
    for (const auto& [v, view] : s.views)
      if (view.root == x) return std::nullopt;
    if (o_.mapping) {
      const LayerMapping* m = o_.mapping->find(n.name);
      if (m && m->placement && *m->placement != Placement::kFree) return std::nullopt;
    }
    const Node* producer = index_.producer(x);
    if (index_.readers(x).size() != 1 || !producer) return std::nullopt;
    const Shape& xs = g_.value(x).shape;
    std::vector<int64_t> perm = n.attr_ints("perm", {});
    const size_t r = xs.size();
    if (perm.empty())
      for (size_t i = 0; i < r; ++i) perm.push_back(static_cast<int64_t>(r - 1 - i));
    if (perm.size() != r) return std::nullopt;
    // y[j] = x[i] with j_k = i_perm[k]: x's dim perm[k] steps as y's dim k.
    const std::vector<int64_t> ys = dense_strides(g_.value(y).shape);
    std::vector<int64_t> st(r, -1);
    for (size_t k = 0; k < r; ++k) {
      if (perm[k] < 0 || perm[k] >= static_cast<int64_t>(r)) return std::nullopt;
      st[static_cast<size_t>(perm[k])] = ys[k];
    }
    const Node& p = *producer;
    if (!StridedViews::writes_view(g_, p, placement_of(p), x, xs, st)) return std::nullopt;
    return StridedViews::View{y, 0, st, {}};
  }

  const Graph& g_;
  const CompileOptions& o_;
  const std::map<std::string, isa::DType>& storage_;
  const std::map<std::string, Placement>& placement_;
  const ValueIndex index_;
  std::set<std::string> concat_values_, rejected_;
};

}  // namespace

std::vector<int64_t> reshaped_strides(const Shape& shape, const std::vector<int64_t>& strides,
                                      const Shape& to) {
  if (num_elements(shape) != num_elements(to) || to.empty() || shape.empty()) return {};
  if (num_elements(to) == 0) return {};
  // Dims of extent 1 carry no stride: drop them, then match runs of evenly spaced dims (torch's rule).
  std::vector<int64_t> ext, st;
  for (size_t i = 0; i < shape.size(); ++i)
    if (shape[i] != 1) ext.push_back(shape[i]), st.push_back(strides[i]);
  std::vector<int64_t> out(to.size(), 0);
  int64_t view_d = static_cast<int64_t>(to.size()) - 1;
  if (ext.empty()) {
    for (size_t i = 0; i < to.size(); ++i) out[i] = 1;
    return out;
  }
  int64_t chunk_base = st.back(), tensor_numel = 1, view_numel = 1;
  for (int64_t d = static_cast<int64_t>(ext.size()) - 1; d >= 0; --d) {
    tensor_numel *= ext[static_cast<size_t>(d)];
    if (d == 0 || st[static_cast<size_t>(d - 1)] != tensor_numel * chunk_base) {
      while (view_d >= 0 && (view_numel < tensor_numel || to[static_cast<size_t>(view_d)] == 1)) {
        out[static_cast<size_t>(view_d)] = view_numel * chunk_base;
        view_numel *= to[static_cast<size_t>(view_d)];
        --view_d;
      }
      if (view_numel != tensor_numel) return {};
      if (d > 0) {
        chunk_base = st[static_cast<size_t>(d - 1)];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  while (view_d >= 0 && to[static_cast<size_t>(view_d)] == 1) out[static_cast<size_t>(view_d--)] = 1;
  if (view_d != -1) return {};
  return out;
}

std::optional<ReshapedView> reshaped_levels(
    const Shape& shape, const std::vector<int64_t>& strides,
    const std::map<size_t, std::vector<std::array<int64_t, 2>>>& split, const Shape& to) {
  if (shape.empty() || to.empty() || num_elements(shape) != num_elements(to) || num_elements(to) == 0)
    return std::nullopt;
  // The view's elements as (extent, stride) dims, outermost first, extents of 1 dropped.
  std::vector<std::array<int64_t, 2>> fine;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (auto it = split.find(i); it != split.end()) {
      for (const auto& l : it->second)
        if (l[0] != 1) fine.push_back(l);
    } else if (shape[i] != 1) {
      fine.push_back({shape[i], strides[i]});
    }
  }
  ReshapedView out;
  out.strides.assign(to.size(), 1);
  size_t f = 0;
  for (size_t i = 0; i < to.size(); ++i) {
    if (to[i] == 1) continue;
    std::vector<std::array<int64_t, 2>> levels;
    int64_t got = 1;
    while (got < to[i]) {
      if (f >= fine.size()) return std::nullopt;
      const int64_t want = to[i] / got;
      if (to[i] % got != 0) return std::nullopt;
      auto& [e, st] = fine[f];
      if (e <= want) {
        if (want % e != 0) return std::nullopt;
        levels.push_back({e, st}), got *= e, ++f;
      } else {
        if (e % want != 0) return std::nullopt;  // part of a dim: the outer `want` of its indices
        levels.push_back({want, st * (e / want)}), got *= want;
        e /= want;
      }
    }
    // Merge the evenly spaced levels (an outer one exactly spanning the inner): one stride where possible.
    std::vector<std::array<int64_t, 2>> merged;
    for (const auto& l : levels) {
      if (!merged.empty() && merged.back()[1] == l[0] * l[1])
        merged.back() = {merged.back()[0] * l[0], l[1]};
      else
        merged.push_back(l);
    }
    out.strides[i] = merged.back()[1];
    if (merged.size() > 1) out.split[i] = merged;
  }
  if (f != fine.size()) return std::nullopt;
  return out;
}

bool StridedViews::reads_view(const Graph& g, const Node& n, Placement placement, const std::string& v,
                              const Shape& shape, const std::vector<int64_t>& strides,
                              const std::set<size_t>& split_dims) {
  if (!n.domain.empty() || strides.empty() || strides.size() != shape.size() || strides.back() != 1)
    return false;
  const size_t r = shape.size();
  if (!split_dims.empty()) {
    // Levels: each batch matrix of a runtime MatMul operand anywhere (matrix_rows), or a copying Transpose.
    if (n.op_type == "Transpose" && placement == Placement::kNpuVector && n.inputs[0] == v &&
        !n.has_attr(kLayoutChange))
      return onnx_order(g.value(n.outputs[0]));
    if (n.op_type != "MatMul" || placement != Placement::kNpuMatrix || r < 2 ||
        *split_dims.rbegin() + 2 >= r || !n.has_input(1) || g.value(n.inputs[1]).is_constant())
      return false;
    return n.inputs[0] == v || n.inputs[1] == v;
  }
  if ((n.op_type == "MatMul" || n.op_type == "Gemm") && placement == Placement::kNpuMatrix && r >= 2) {
    if (n.has_input(2) && n.inputs[2] == v) return false;
    if (n.has_input(3) && n.inputs[3] == v) return false;
    const bool b_runtime = n.op_type == "MatMul" && n.has_input(1) && !g.value(n.inputs[1]).is_constant();
    if (n.inputs[1] == v) return b_runtime;  // rows of B with their pitch, any offset per batch matrix
    if (n.inputs[0] != v) return false;
    if (b_runtime) return true;  // A per batch matrix, likewise
    // Shared weights fold every batch dim of A into its rows: they must be evenly spaced.
    for (size_t i = 0; i + 2 < r; ++i)
      if (shape[i] != 1 && strides[i] != strides[i + 1] * shape[i + 1]) return false;
    return true;
  }
  if (is_binary(n) && placement == Placement::kNpuVector) {
    // The full-shape operand the stream loads tile by tile (elementwise.cpp, stream_broadcast's A) against
    // one scalar (attention's 1/sqrt(dk) on Q): B's own boxes assume A's dims merge as dense ones do.
    if (!n.has_input(0) || !n.has_input(1) || n.inputs[0] == n.inputs[1]) return false;
    if (shape != g.value(n.outputs[0]).shape) return false;
    const Value& other = g.value(n.inputs[0] == v ? n.inputs[1] : n.inputs[0]);
    if (other.fully_known() && num_elements(other.shape) == 1) return true;
    // Against a second full-shape operand (a transformer's residual Add reading the output projection
    // through the Transpose back to [batch, seq, D]): the view streams as A (elementwise.cpp: the first
    // operand, or the second of an Add or Mul, swapped) and the other is dense, whose boxes then follow the
    // output's dense dims. The second operand only where the first can be no view (its node none that
    // makes one), so that of two views the second is refused here and not made.
    if (other.is_constant() || !other.fully_known() || other.shape != shape || !onnx_order(other))
      return false;
    if (n.inputs[0] == v) return true;
    if (n.op_type != "Add" && n.op_type != "Mul") return false;
    const int p = g.producer(n.inputs[0]);
    if (p < 0) return true;
    const Node& first = g.nodes[static_cast<size_t>(p)];
    return !(first.domain.empty() &&
             (first.op_type == "Slice" || first.op_type == "Transpose" || reshape_like(first)));
  }
  if (n.op_type == "Transpose" && placement == Placement::kNpuVector && n.inputs[0] == v) return true;
  return false;
}

bool StridedViews::writes_view(const Graph& g, const Node& n, Placement placement, const std::string& v,
                               const Shape& shape, const std::vector<int64_t>& strides) {
  if (!n.domain.empty() || (n.op_type != "MatMul" && n.op_type != "Gemm") ||
      placement != Placement::kNpuMatrix || n.outputs.size() != 1 || n.outputs[0] != v ||
      strides.size() != shape.size() || shape.size() < 2 || strides.back() != 1)
    return false;
  // The batch matrices evenly spaced (one image stride); with shared weights the rows of every batch too.
  const bool b_runtime = n.op_type == "MatMul" && n.has_input(1) && !g.value(n.inputs[1]).is_constant();
  const size_t r = shape.size();
  for (size_t i = 0; i + (b_runtime ? 3 : 2) < r; ++i)
    if (shape[i] != 1 && strides[i] != strides[i + 1] * shape[i + 1]) return false;
  return true;
}

std::string StridedViews::describe(const Graph& g, const Node& n) const {
  if (!folds(n)) return "";
  if (written.count(n.name)) {
    const View& v = views.at(n.inputs[0]);
    const int p = g.producer(n.inputs[0]);
    return fmt::format(
        "folded into its producer's stores: '{}' writes its output in place into '{}' (strides [{}]); "
        "no instructions",
        p < 0 ? n.inputs[0] : g.nodes[static_cast<size_t>(p)].name, v.root, fmt::join(v.strides, ", "));
  }
  const View& v = views.at(n.outputs[0]);
  std::vector<std::string> readers;
  for (int k : g.consumers(n.outputs[0])) readers.push_back("'" + g.nodes[static_cast<size_t>(k)].name + "'");
  std::string split;
  for (const auto& [d, levels] : v.split) {
    std::vector<std::string> l;
    for (const auto& [e, st] : levels) l.push_back(fmt::format("{} x {}", e, st));
    split += fmt::format(", dim {} split into [{}]", d, fmt::join(l, ", "));
  }
  return fmt::format(
      "folded into its readers' loads ({}): a strided view of '{}' (offset {} elements, strides "
      "[{}]{}); no instructions",
      fmt::join(readers, ", "), v.root, v.offset, fmt::join(v.strides, ", "), split);
}

StridedViews fold_views(const Graph& g, const CompileOptions& options,
                        const std::map<std::string, isa::DType>& storage,
                        const std::map<std::string, Placement>& placement, const ConcatFolding& concats) {
  if (!options.fold_concats) return {};
  return ViewDecider(g, options, storage, placement, concats).run();
}

}  // namespace npusim::compiler::backend
