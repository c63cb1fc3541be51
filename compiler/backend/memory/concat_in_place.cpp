#include "compiler/backend/memory/concat_in_place.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <set>
#include <tuple>

#include "compiler/backend/core/context.h"
#include "compiler/ir/value_index.h"
#include "compiler/passes/lowered.h"
#include "compiler/quant/emulate.h"
#include "compiler/quant/precision.h"
#include "isa/strides.h"

namespace npusim::compiler::backend {

namespace {

bool is_concat(const Node& n) { return n.domain.empty() && n.op_type == "Concat"; }

// The physical position of logical dim `axis` of a value stored in `layout`.
size_t phys_pos(const std::vector<int>& layout, int64_t axis) {
  if (layout.empty()) return static_cast<size_t>(axis);
  for (size_t p = 0; p < layout.size(); ++p)
    if (layout[p] == axis) return p;
  return static_cast<size_t>(axis);
}

class ConcatDecider {
 public:
  // `unfolded`: Concats that must keep instructions of their own (see fold_concats).
  ConcatDecider(const Graph& g, const CompileOptions& o, const std::map<std::string, isa::DType>& storage,
                const std::map<std::string, Placement>& placement, const std::set<std::string>& unfolded)
      : g_(g), o_(o), storage_(storage), placement_(placement), unfolded_(unfolded), values_(g) {
    for (size_t i = 0; i < g.nodes.size(); ++i) index_[g.nodes[i].name] = i;
  }

  ConcatFolding run() {
    for (auto it = g_.nodes.rbegin(); it != g_.nodes.rend(); ++it) {
      if (is_concat(*it) && eligible(*it)) fold(*it);
    }
    // A slot several Concats fill with the same input in the same format (DenseNet's block input when its
    // QParams differ from the block's: each Concat of the block requantizes it into the same channels):
    // the first of them in program order writes it, the others find it there.
    for (auto& [slot, users] : copies_) {
      std::sort(users.begin(), users.end());
      for (size_t u = 1; u < users.size(); ++u)
        f_.in_place[g_.nodes[users[u].first].name].insert(users[u].second);
    }
    return std::move(f_);
  }

 private:
  std::optional<Placement> placement_of(const Node& n) const {
    auto it = placement_.find(n.name);
    return it == placement_.end() ? std::nullopt : std::optional<Placement>(it->second);
  }
  bool runtime(const std::string& v) const {
    return !v.empty() && g_.has_value(v) && !g_.value(v).is_constant() && storage_.count(v) &&
           is_float(g_.value(v).dtype);
  }
  // A constant operand (ViT's class token): the Concat writes it itself, from a data segment.
  bool constant(const std::string& v) const {
    return !v.empty() && g_.has_value(v) && g_.value(v).is_constant();
  }
  Shape phys(const std::string& v) const { return physical(g_.value(v).shape, g_.value(v).layout); }

  // y's storage format: its type and, for codes, its QParams.
  std::string format_of(const std::string& y) const {
    std::string f = std::to_string(static_cast<int>(storage_.at(y)));
    if (o_.plan)
      if (auto q = o_.plan->values.find(y); q != o_.plan->values.end())
        f += fmt::format(" {} {} {}", q->second.scale, q->second.zero_point,
                         static_cast<int>(q->second.dtype));
    return f + " " + fmt::format("{}", fmt::join(g_.value(y).layout, ","));
  }

  // The Concat would copy `x` into `y` unchanged: the same storage format (and QParams for codes).
  bool same_format(const std::string& x, const std::string& y) const {
    if (storage_.at(x) != storage_.at(y) || g_.value(x).layout != g_.value(y).layout) return false;
    const isa::DType dt = storage_.at(y);
    if (dt != isa::DType::kInt8 && dt != isa::DType::kUint8) return true;
    if (!o_.plan) return false;
    const auto qx = o_.plan->values.find(x), qy = o_.plan->values.find(y);
    if (qx == o_.plan->values.end() || qy == o_.plan->values.end()) return false;
    return qx->second.scale == qy->second.scale && qx->second.zero_point == qy->second.zero_point &&
           qx->second.dtype == qy->second.dtype;
  }

  // # int8: input k of Concat n is a nearest Resize's codes the Concat would requantize under its integer
  // scheme, and the Resize may do that in its own tile loop (ConcatFolding::requantized): the same storage
  // type and layout, the Concat its only reader.
  bool requantizing_producer(const Node& n, size_t k) const {
    const std::string &x = n.inputs[k], &y = n.outputs[0];
    if (!o_.plan || storage_.at(x) != storage_.at(y) || g_.value(x).layout != g_.value(y).layout)
      return false;
    const isa::DType dt = storage_.at(y);
    if ((dt != isa::DType::kInt8 && dt != isa::DType::kUint8) || values_.readers(x).size() != 1) return false;
    const Node* p = values_.producer(x);
    if (!p || (p->op_type != "Resize" && p->op_type != "Upsample") || !p->domain.empty() ||
        !o_.plan->values.count(x) || !o_.plan->values.count(y) || !o_.plan->values.count(p->inputs[0]))
      return false;
    // The Resize copies its input's codes: their QParams are its output's.
    const quant::QParams &qi = o_.plan->values.at(p->inputs[0]), &qx = o_.plan->values.at(x);
    if (qi.scale != qx.scale || qi.zero_point != qx.zero_point || qi.dtype != qx.dtype) return false;
    const std::optional<quant::IntegerConcat> ic = quant::integer_concat(g_, *o_.plan, n);
    return ic && k < ic->size() && (*ic)[k].has_value();
  }

  bool eligible(const Node& n) const {
    if (placement_of(n) != Placement::kNpuVector || n.outputs.empty() || !runtime(n.outputs[0])) return false;
    if (unfolded_.count(n.name)) return false;
    // An imposed `placement: vector` still takes part: a Concat that copies (requantizes) some inputs into
    // its slices is a vector layer, and later Concats find those slices (copies_).
    if (o_.mapping) {
      const LayerMapping* m = o_.mapping->find(n.name);
      if (m && m->placement && *m->placement != Placement::kFree && *m->placement != Placement::kNpuVector)
        return false;
    }
    const size_t r = g_.value(n.outputs[0]).shape.size();
    for (const auto& in : n.inputs)
      if (!(runtime(in) || constant(in)) || g_.value(in).shape.size() != r) return false;
    return true;
  }

  int64_t axis_of(const Node& n) const {
    int64_t axis = n.attr_int("axis", 0);
    if (axis < 0) axis += static_cast<int64_t>(g_.value(n.outputs[0]).shape.size());
    return axis;
  }

  // A slice with the dense strides of the value it holds (ignoring unit dims): an ordinary tensor at an
  // offset, which every lowering takes.
  bool contiguous(const std::string& v, const ConcatFolding::Slice& s) const {
    const Shape p = phys(v);
    const std::vector<int64_t> d = dense_strides(p);
    for (size_t i = 0; i < p.size(); ++i)
      if (p[i] != 1 && d[i] != s.strides[i]) return false;
    return true;
  }

  // Rows of the value's innermost dim, `pitch` elements apart (the lowerings' one strided form): dense
  // but for the stride of the second innermost physical dim. A channel Concat's slices in NHWC.
  bool pitch_form(const std::string& v, const ConcatFolding::Slice& s) const {
    const Shape p = phys(v);
    const size_t r = p.size();
    if (r < 2 || s.strides[r - 1] != 1) return false;
    for (size_t i = 0; i + 2 < r; ++i)
      if (s.strides[i] != s.strides[i + 1] * p[i + 1]) return false;
    return true;
  }

  // Every reader of v takes it as this slice (no free op aliases it: an alias would lose the offset).
  bool readers_take(const std::string& v, const ConcatFolding::Slice& s) const {
    const bool dense = contiguous(v, s);
    if (!dense && !pitch_form(v, s)) return false;
    for (const Node* r : values_.readers(v)) {
      if (placement_of(*r) == Placement::kFree) return false;
      if (!dense && !ConcatFolding::takes_view(g_, *r, *placement_of(*r), v, false)) return false;
    }
    return true;
  }

  bool is_root(const std::string& v) const {
    for (const auto& [name, s] : f_.views)
      if (s.root == v) return true;
    return false;
  }

  std::string root_of(const std::string& v) const {
    auto it = f_.views.find(v);
    return it == f_.views.end() ? v : it->second.root;
  }

  // Whether x's producer may write it into slice s.
  bool can_place(const std::string& x, const ConcatFolding::Slice& s) const {
    if (values_.is_graph_io(x) || f_.views.count(x) || is_root(x)) return false;
    const Node* p = values_.producer(x);
    if (!p) return false;
    const Node& prod = *p;
    const std::optional<Placement> pl = placement_of(prod);
    if (pl != Placement::kNpuMatrix && pl != Placement::kNpuVector) return false;
    if (o_.mapping) {
      const LayerMapping* m = o_.mapping->find(prod.name);
      if (m && m->placement && *m->placement == Placement::kHost) return false;
    }
    for (const auto& in : prod.inputs)
      if (runtime(in) && root_of(in) == s.root) return false;  // it would read the buffer it writes
    return readers_take(x, s);
  }

  // y as a view of the buffer its inputs already lie in, consecutively along the axis.
  void view_of_inputs(const Node& n) {
    const std::string& y = n.outputs[0];
    if (values_.is_graph_io(y) || f_.views.count(y) || is_root(y)) return;
    const int64_t axis = axis_of(n);
    const ConcatFolding::Slice* first = nullptr;
    int64_t next = 0;
    for (const auto& in : n.inputs) {
      if (constant(in)) return;
      // In place: written there by its producer, or converted there by another Concat (copies_).
      const ConcatFolding::Slice* found = nullptr;
      if (auto it = f_.views.find(in); it != f_.views.end()) {
        if (same_format(in, y)) found = &it->second;
      } else {
        for (const auto& [slot, users] : copies_) {
          if (slot.source != in || slot.format != format_of(y)) continue;
          if (first && (slot.at.root != first->root || slot.at.offset != next)) continue;
          found = &slot.at;
          break;
        }
      }
      if (!found) return;
      const ConcatFolding::Slice& s = *found;
      if (first && (s.root != first->root || s.strides != first->strides || s.offset != next)) return;
      if (!first) first = &s;
      const size_t pos = phys_pos(g_.value(in).layout, axis);
      next = s.offset + g_.value(in).shape[static_cast<size_t>(axis)] * s.strides[pos];
    }
    if (!first || !readers_take(y, *first)) return;
    f_.views[y] = *first;
  }

  void fold(const Node& n) {
    const std::string& y = n.outputs[0];
    view_of_inputs(n);
    auto yv = f_.views.find(y);
    const ConcatFolding::Slice py =
        yv != f_.views.end() ? yv->second : ConcatFolding::Slice{y, 0, dense_strides(phys(y))};
    const int64_t axis = axis_of(n);
    const int64_t step = py.strides[phys_pos(g_.value(y).layout, axis)];
    int64_t off = 0;
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      const std::string& x = n.inputs[k];
      const ConcatFolding::Slice want{py.root, py.offset + off * step, py.strides};
      off += g_.value(x).shape[static_cast<size_t>(axis)];
      if (constant(x)) continue;  // the Concat writes it
      if (same_format(x, y)) {
        auto xv = f_.views.find(x);
        if (xv != f_.views.end() ? xv->second == want : can_place(x, want)) {
          f_.views[x] = want;
          f_.in_place[n.name].insert(k);
          continue;
        }
      } else if (requantizing_producer(n, k) && !f_.views.count(x) && can_place(x, want)) {
        f_.views[x] = want;
        f_.in_place[n.name].insert(k);
        f_.requantized[x] = {n.name, k};
        continue;
      }
      copies_[Slot{x, format_of(y), want}].emplace_back(index_.at(n.name), k);
    }
  }

  // A slice a Concat copies (and converts) one of its inputs into.
  struct Slot {
    std::string source, format;
    ConcatFolding::Slice at;
    bool operator<(const Slot& o) const {
      return std::tie(source, format, at.root, at.offset, at.strides) <
             std::tie(o.source, o.format, o.at.root, o.at.offset, o.at.strides);
    }
  };
  // The Concats (node index, input position) that copy into each slot.
  std::map<Slot, std::vector<std::pair<size_t, size_t>>> copies_;
  std::map<std::string, size_t> index_;

  const Graph& g_;
  const CompileOptions& o_;
  const std::map<std::string, isa::DType>& storage_;
  const std::map<std::string, Placement>& placement_;
  const std::set<std::string>& unfolded_;
  const ValueIndex values_;
  ConcatFolding f_;
};

}  // namespace

bool ConcatFolding::in_place_input(const std::string& concat, size_t input) const {
  auto it = in_place.find(concat);
  return it != in_place.end() && it->second.count(input);
}

bool ConcatFolding::folded(const Node& n) const {
  if (!is_concat(n)) return false;
  for (size_t k = 0; k < n.inputs.size(); ++k)
    if (!in_place_input(n.name, k)) return false;
  return true;
}

std::string ConcatFolding::describe(const Node& n) const {
  if (!is_concat(n)) {
    for (const auto& o : n.outputs) {
      auto v = views.find(o);
      if (v == views.end()) continue;
      return fmt::format(
          "output written in place{} into its slice of Concat output '{}' (offset {} elements{})",
          requantized.count(o) ? ", requantized to the Concat's codes in the tile loop," : "", v->second.root,
          v->second.offset,
          v->second.strides.size() >= 2
              ? fmt::format(", row pitch {}", v->second.strides[v->second.strides.size() - 2])
              : "");
    }
    return "";
  }
  auto it = in_place.find(n.name);
  const size_t k = it == in_place.end() ? 0 : it->second.size();
  if (folded(n)) {
    auto v = views.find(n.outputs[0]);
    return fmt::format(
        "folded into its producers' stores: each of its {} input(s) is written in place in its "
        "slice{}; no instructions",
        n.inputs.size(), v == views.end() ? "" : fmt::format(" of '{}'", v->second.root));
  }
  return k ? fmt::format("{} of {} input(s) written in place by their producers, the rest copied", k,
                         n.inputs.size())
           : "";
}

bool ConcatFolding::takes_view(const Graph& g, const Node& n, Placement placement, const std::string& v,
                               bool output) {
  if (!n.domain.empty()) return false;
  if (n.op_type ==
      "Concat") {  // lower_concat (but with a constant operand of an integer Concat: the index map)
    for (const auto& in : n.inputs)
      if (in.empty() || (g.value(in).is_constant() && !is_float(g.value(n.outputs.at(0)).dtype)))
        return false;
    return placement == Placement::kNpuVector;
  }
  if (n.op_type == "Conv")
    return output && placement == Placement::kNpuMatrix && !n.outputs.empty() && n.outputs[0] == v;
  if (n.op_type == "BatchNormalization")
    return !output && placement == Placement::kNpuVector && n.inputs.at(0) == v;
  if (n.op_type == "MaxPool" || n.op_type == "AveragePool")  // lower_pool's output tiles
    return output && placement == Placement::kNpuVector && n.outputs.size() == 1 && n.outputs[0] == v;
  if (n.op_type == "Resize" || n.op_type == "Upsample")  // lower_index_map: an upsampling's STOREs
    return output && placement == Placement::kNpuVector && n.outputs.size() == 1 && n.outputs[0] == v;
  if (n.op_type == "Add" || n.op_type == "Sub" || n.op_type == "Mul" || n.op_type == "Div" ||
      n.op_type == "Max" || n.op_type == "Min" || n.op_type == "Pow")  // lower_binary's STOREs, any pitch
    return output && placement == Placement::kNpuVector && n.outputs.size() == 1 && n.outputs[0] == v;
  return false;
}

ConcatFolding fold_concats(const Graph& g, const CompileOptions& options,
                           const std::map<std::string, isa::DType>& storage,
                           const std::map<std::string, Placement>& placement) {
  if (!options.fold_concats) return {};
  // A Concat a mapping file places on the vector unit must not end up free (no instructions): such
  // Concats are taken out and the folding decided again, until none is left. The set only grows.
  std::set<std::string> unfolded;
  for (;;) {
    ConcatFolding f = ConcatDecider(g, options, storage, placement, unfolded).run();
    bool again = false;
    for (const Node& n : g.nodes) {
      if (!options.mapping || !f.folded(n) || unfolded.count(n.name)) continue;
      const LayerMapping* m = options.mapping->find(n.name);
      if (m && m->placement == Placement::kNpuVector) again |= unfolded.insert(n.name).second;
    }
    if (!again) return f;
  }
}

}  // namespace npusim::compiler::backend
