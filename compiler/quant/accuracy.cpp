#include "compiler/quant/accuracy.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <map>
#include <set>
#include <sstream>

#include "compiler/ir/memory_budget.h"
#include "compiler/passes/lowered.h"
#include "compiler/quant/emulate.h"
#include "isa/json_text.h"

namespace npusim::compiler::quant {

namespace {

// What a layer's number format can hold: fp16/bf16 largest finite value and smallest normal; int8 the
// real range of the output's codes, widened by half a step each side (values inside round, not saturate).
struct FormatLimits {
  double max_finite = INFINITY, min_normal = 0;
  double lo = -INFINITY, hi = INFINITY;
};

FormatLimits limits_of(const PrecisionPlan& plan, const Node& n) {
  FormatLimits f;
  switch (plan.precision_of(n.name)) {
    case Precision::kFp16:
      f.max_finite = 65504.0, f.min_normal = 6.103515625e-05;
      break;
    case Precision::kBf16:
      f.max_finite = 3.3895313892515355e38, f.min_normal = 1.1754943508222875e-38;
      break;
    case Precision::kInt8: {
      auto q = n.outputs.empty() ? plan.values.end() : plan.values.find(n.outputs[0]);
      if (q != plan.values.end()) {
        // A value clipped by at most half a step loses no more than rounding does (HardSwish's flat
        // minimum at -0.375 puts many values just below a range whose zero point was rounded): it does
        // not count as saturated.
        const double half_step = 0.5 * static_cast<double>(q->second.scale);
        f.lo = q->second.dequantize(q->second.qmin()) - half_step;
        f.hi = q->second.dequantize(q->second.qmax()) + half_step;
      }
      break;
    }
    default:
      break;
  }
  return f;
}

// Running sums for SQNR and cosine over several inputs, and the format's range problems.
struct ErrorSums {
  double ref2 = 0, out2 = 0, dot = 0, err2 = 0, max_abs = 0, ref_max_abs = 0;
  int64_t elements = 0, count = 0, nonzero = 0;
  int64_t nonfinite = 0, overflow = 0, underflow = 0, saturated = 0;
  FormatLimits limits;  // of the last add (a layer's format is the same for every input)
  void add(const Tensor& ref, const Tensor& out, const FormatLimits& f = {}) {
    limits = f;
    const size_t n = std::min(ref.f.size(), out.f.size());
    for (size_t k = 0; k < n; ++k) {
      const double r = ref.f[k], o = out.f[k];
      if (!std::isfinite(r)) continue;  // the fp32 reference overflowed itself: nothing to compare
      ++count;
      const double a = std::fabs(r);
      ref_max_abs = std::max(ref_max_abs, a);
      if (a != 0) ++nonzero;
      if (a > f.max_finite) ++overflow;
      if (a != 0 && a < f.min_normal) ++underflow;
      if (r < f.lo || r > f.hi) ++saturated;
      if (!std::isfinite(o)) {
        ++nonfinite;
        continue;
      }
      const double e = o - r;
      ref2 += r * r;
      out2 += o * o;
      dot += r * o;
      err2 += e * e;
      max_abs = std::max(max_abs, std::fabs(e));
    }
    elements = static_cast<int64_t>(n);
  }
  double sqnr_db() const {
    if (nonfinite > 0) return -kExactSqnrDb;
    if (err2 == 0) return kExactSqnrDb;
    if (ref2 == 0) return -kExactSqnrDb;
    return std::min(kExactSqnrDb, 10.0 * std::log10(ref2 / err2));
  }
  double cosine() const {
    if (nonfinite > 0) return 0.0;
    if (ref2 == 0 && out2 == 0) return 1.0;
    if (ref2 == 0 || out2 == 0) return 0.0;
    return dot / std::sqrt(ref2 * out2);
  }
};

bool reported_layer(const Node& n) {
  if (n.domain == kNpuDomain && n.op_type == "Transpose") return false;
  return assigned_placement(n) != Placement::kFree;
}

PrecisionPlan all_fp32(const PrecisionPlan& plan) {
  PrecisionPlan p;
  p.model = Precision::kFp32;
  for (const auto& [name, np] : plan.nodes) p.nodes[name] = NodePrecision{};
  return p;
}

// Output error sums of `plan` against the reference outputs `refs` (one map per sample).
ErrorSums output_error(const Graph& g, const PrecisionPlan& plan, const std::vector<Sample>& samples,
                       const std::vector<std::map<std::string, Tensor>>& refs) {
  ErrorSums s;
  for (size_t k = 0; k < samples.size(); ++k) {
    auto out = emulate(g, plan, samples[k]);
    for (const auto& o : g.outputs)
      if (out.at(o).floating()) s.add(refs[k].at(o), out.at(o));
  }
  return s;
}

std::string num(double v) {
  if (!std::isfinite(v)) return v > 0 ? "300" : (v < 0 ? "-300" : "null");
  std::ostringstream os;
  os << std::setprecision(8) << v;
  return os.str();
}

std::string pct(int64_t part, int64_t whole) {
  std::ostringstream os;
  os << std::setprecision(3) << (whole ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0)
     << "%";
  return os.str();
}

// The sentences a layer's range problems deserve: overflow to inf (fp16), outputs lost downstream of
// one, values saturating outside the int8 range calibration chose (> 1 %), fp16 underflow (> 1 %).
void range_warnings(const LayerAccuracy& l, const ErrorSums& s,
                    std::map<std::string, std::vector<std::string>>& out) {
  const std::string who = "layer '" + l.name + "' (" + std::string(to_string(l.precision)) + "): ";
  if (l.overflow > 0) {
    out["overflow"].push_back(who + std::to_string(l.overflow) + " of " + std::to_string(s.count) +
                              " values exceed the format's largest finite value (" +
                              num(s.limits.max_finite) + "; largest |x| " + num(l.ref_max_abs) +
                              ") and become infinite. Keep it in fp32 or bf16, "
                              "or rescale its weights.");
  } else if (l.nonfinite > 0) {
    out["nonfinite"].push_back(who + std::to_string(l.nonfinite) +
                               " values are inf/NaN (propagated from an "
                               "overflow upstream)");
  }
  if (l.saturated * 100 > s.count) {
    out["saturated"].push_back(who + pct(l.saturated, s.count) +
                               " of the reference values fall outside its int8 "
                               "output range (set by calibration, or by a pre-quantized model's scales) and "
                               "saturate: are the calibration inputs representative of these inputs?");
  }
  if (l.underflow * 100 > s.nonzero) {
    out["underflow"].push_back(who + pct(l.underflow, s.nonzero) +
                               " of the nonzero values lie below the format's "
                               "smallest normal number and lose precision (subnormal or flushed to zero)");
  }
}

}  // namespace

std::vector<WeightOutlier> find_weight_outliers(const Graph& g, double factor) {
  std::vector<WeightOutlier> out;
  for (const Node& n : g.nodes) {
    if (!is_matrix_op(n) || n.inputs.size() < 2 || !g.has_value(n.inputs[1])) continue;
    const Value& wv = g.value(n.inputs[1]);
    if (!wv.is_constant() || !wv.constant->floating() || wv.constant->rank() < 1) continue;
    const Tensor& w = *wv.constant;
    const int axis = weight_channel_axis(n, static_cast<int>(w.rank()));
    const int64_t channels = w.shape[axis];
    if (channels < 2) continue;
    int64_t inner = 1;
    for (int64_t d = axis + 1; d < w.rank(); ++d) inner *= w.shape[d];
    std::vector<float> cmax(channels, 0.0f);
    for (int64_t k = 0; k < w.size(); ++k) {
      float& m = cmax[(k / inner) % channels];
      m = std::max(m, std::fabs(w.f[k]));
    }
    std::vector<float> sorted = cmax;
    std::nth_element(sorted.begin(), sorted.begin() + channels / 2, sorted.end());
    const float median = sorted[channels / 2];
    if (median <= 0) continue;
    for (int64_t c = 0; c < channels; ++c) {
      const double f = cmax[c] / median;
      if (f > factor) out.push_back({n.name, c, cmax[c], median, f});
    }
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const WeightOutlier& a, const WeightOutlier& b) { return a.factor > b.factor; });
  return out;
}

AccuracyReport evaluate_accuracy(const Graph& g, const PrecisionPlan& plan,
                                 const std::vector<Sample>& samples, const AccuracyOptions& options) {
  AccuracyReport r;
  // The model-wide precision, or "mixed" when the nodes run in several (a pre-quantized model's int8
  // nodes next to float ones; "int8" when every node is int8).
  std::set<Precision> used;
  for (const auto& [name, np] : plan.nodes) used.insert(np.effective);
  r.precision = std::string(to_string(plan.model));
  if (plan.model != Precision::kInt8 && used.count(Precision::kInt8))
    r.precision = used.size() == 1 ? "int8" : "mixed";
  r.bad_layer_sqnr_db = options.bad_layer_sqnr_db;
  r.calibration = plan.calibration;
  r.evaluation_inputs = static_cast<int>(samples.size());
  const PrecisionPlan ref_plan = all_fp32(plan);
  std::map<std::string, ErrorSums> per_value, own_error;  // by a node's first output
  ErrorSums output;
  std::set<std::string> graph_outputs(g.outputs.begin(), g.outputs.end());
  std::optional<TaskEvaluator> task;
  if (options.task) task.emplace(*options.task);
  for (const auto& sample : samples) {
    // The reference keeps every node's outputs; the quantized run compares as it goes. Each quantized layer
    // is also run alone on the reference's inputs as they come (its own error).
    std::map<std::string, Tensor> ref;
    auto ref_value = [&](const std::string& name) -> const Tensor& {
      auto it = ref.find(name);
      return it != ref.end() ? it->second : sample.at(name);
    };
    emulate(g, ref_plan, sample, [&](const Node& n, const std::vector<const Tensor*>& outs) {
      if (options.own_error && !outs.empty() && outs[0] && outs[0]->floating() &&
          plan.precision_of(n.name) != Precision::kFp32 && reported_layer(n)) {
        const std::vector<Tensor> alone = emulate_node(g, plan, n, ref_value);
        own_error[n.outputs[0]].add(*outs[0], alone.at(0));
      }
      for (size_t k = 0; k < outs.size(); ++k)
        if (outs[k]) ref[n.outputs[k]] = *outs[k];
    });
    auto q_out = emulate(g, plan, sample, [&](const Node& n, const std::vector<const Tensor*>& outs) {
      if (outs.empty() || !outs[0] || !outs[0]->floating()) return;
      auto it = ref.find(n.outputs[0]);
      if (it == ref.end()) return;
      per_value[n.outputs[0]].add(it->second, *outs[0], limits_of(plan, n));
      if (!graph_outputs.count(n.outputs[0])) ref.erase(it);  // seen: free it
    });
    for (const auto& o : g.outputs)
      if (q_out.at(o).floating() && ref.count(o)) output.add(ref.at(o), q_out.at(o));
    if (task) {
      const std::string& first = g.outputs.at(0);
      if (!ref.count(first))
        throw TaskError("--task: the model's first output '" + first +
                        "' is not a float tensor computed by a layer");
      task->add(ref.at(first), q_out.at(first));
    }
  }
  if (task) r.task = task->metrics();
  r.output_sqnr_db = output.sqnr_db();
  r.output_cosine = output.cosine();
  r.output_max_abs_error = output.max_abs;
  r.output_nonfinite = output.nonfinite;
  // The first output computed by a final Softmax (or LogSoftmax) of a float value a layer computes.
  for (const Node& n : g.nodes) {
    if ((n.op_type != "Softmax" && n.op_type != "LogSoftmax") || n.outputs.empty() || n.inputs.empty() ||
        g.outputs.empty() || n.outputs[0] != g.outputs[0] || !per_value.count(n.inputs[0]))
      continue;
    const ErrorSums& s = per_value.at(n.inputs[0]);
    BeforeSoftmax b;
    b.value = n.inputs[0];
    for (const Node& p : g.nodes)
      if (!p.outputs.empty() && p.outputs[0] == b.value) b.layer = p.name;
    b.sqnr_db = s.sqnr_db();
    b.cosine = s.cosine();
    r.before_softmax = b;
  }
  std::map<std::string, std::vector<std::string>> range_notes;  // kind -> sentences, graph order
  for (const Node& n : g.nodes) {
    if (n.outputs.empty() || !per_value.count(n.outputs[0]) || !reported_layer(n)) continue;
    const ErrorSums& s = per_value.at(n.outputs[0]);
    LayerAccuracy l;
    l.name = n.name;
    l.op = n.domain.empty() ? n.op_type : n.domain + "." + n.op_type;
    l.precision = plan.reported_precision(n.name);
    l.sqnr_db = s.sqnr_db();
    l.cosine = s.cosine();
    l.max_abs_error = s.max_abs;
    l.elements = s.elements;
    l.nonfinite = s.nonfinite;
    l.overflow = s.overflow;
    l.underflow = s.underflow;
    l.saturated = s.saturated;
    l.ref_max_abs = s.ref_max_abs;
    if (auto own = own_error.find(n.outputs[0]); own != own_error.end()) {
      l.own_sqnr_db = own->second.sqnr_db();
      l.own_cosine = own->second.cosine();
    }
    if (r.first_bad_layer.empty() && l.sqnr_db < options.bad_layer_sqnr_db) r.first_bad_layer = l.name;
    range_warnings(l, s, range_notes);
    r.layers.push_back(std::move(l));
  }
  if (plan.calibration.synthetic)
    r.warnings.push_back("CALIBRATION USED SYNTHETIC DATA (" + plan.calibration.source +
                         "): int8 scales come from random N(0,1) inputs, not from real data; the accuracy "
                         "figures say how the model behaves on those inputs only. Pass a folder of real "
                         "inputs to calibrate on: --calibration DIR.");
  if (output.count > 0 && output.ref_max_abs == 0)
    r.warnings.push_back(
        "the fp32 reference's outputs are all zeros on these inputs, so the output figures say "
        "nothing (an untrained, zero-initialised classifier head?); judge by the layers");
  // At most a few sentences of each kind, most upstream first (the rest follow from them).
  for (const auto& [kind, cap] : std::vector<std::pair<std::string, size_t>>{
           {"overflow", 3}, {"nonfinite", 1}, {"saturated", 3}, {"underflow", 3}}) {
    const auto& v = range_notes[kind];
    for (size_t k = 0; k < v.size() && k < cap; ++k) r.warnings.push_back(v[k]);
    if (v.size() > cap)
      r.warnings.push_back("... and " + std::to_string(v.size() - cap) + " more layers with " + kind +
                           " values (see the report's accuracy.layers[]." + kind + ")");
  }
  r.weight_outliers = find_weight_outliers(g, options.outlier_factor);
  for (const auto& [name, np] : plan.nodes)
    if (np.fell_back())
      r.warnings.push_back("node '" + name + "' runs in " + std::string(to_string(np.effective)) + ": " +
                           np.reason);
  return r;
}

PrecisionPlan requantize_plan(const Graph& g, const PrecisionPlan& plan,
                              const std::map<std::string, TensorStats>& stats, const QuantOptions& options) {
  PrecisionPlan r;
  r.model = plan.model;
  r.calibration = plan.calibration;
  r.nodes = plan.nodes;
  for (auto& [name, np] : r.nodes) {
    np.int16 = np.requested == Precision::kInt16 && np.effective == Precision::kInt8;
    if (np.int16 || np.effective == np.requested) np.reason.clear();
  }
  quantize_plan(g, r, stats, options);
  return r;
}

MixedPrecisionAdvice advise_mixed_precision(const Graph& g, const PrecisionPlan& plan,
                                            const std::vector<Sample>& samples, double target_sqnr_db,
                                            const PlanCost& cost, const PlanRequantizer& int16,
                                            PrecisionPlan* advised) {
  MixedPrecisionAdvice a;
  a.target_sqnr_db = target_sqnr_db;
  a.fitted_inputs = static_cast<int>(samples.size());
  if (advised) *advised = plan;
  const PrecisionPlan ref_plan = all_fp32(plan);
  std::vector<std::map<std::string, Tensor>> refs;
  for (const auto& s : samples) refs.push_back(emulate(g, ref_plan, s));
  a.achieved_sqnr_db = output_error(g, plan, samples, refs).sqnr_db();
  if (cost) a.cost_int8 = a.cost = cost(plan);
  if (a.achieved_sqnr_db >= target_sqnr_db) {
    a.met = true;
    return a;
  }
  // Sensitivity: output noise power when the node alone is int8. Every int8 node is a candidate: the matrix
  // layers, and the vector nodes (element-wise, pooling, resize, concat, affine) whose 8-bit codes can cost
  // as much as a layer's rounded weights.
  struct Candidate {
    std::string name;
    double priority;
    bool matrix;  // int16 activations are a matrix layer's step only
  };
  std::vector<Candidate> cands;
  for (const Node& n : g.nodes) {
    if (plan.precision_of(n.name) != Precision::kInt8 || !reported_layer(n)) continue;
    PrecisionPlan only = plan;
    for (auto& [name, np] : only.nodes)
      if (name != n.name) np.effective = Precision::kFp32;
    const ErrorSums alone = output_error(g, only, samples, refs);
    const double sqnr = alone.sqnr_db();
    a.sensitivity.push_back({n.name, n.op_type, sqnr, alone.cosine()});
    double priority = std::pow(10.0, -sqnr / 10.0);  // relative noise power
    if (cost) {
      PrecisionPlan moved = plan;
      moved.nodes[n.name].effective = Precision::kFp16;
      priority /= std::max(1e-9, cost(moved) - a.cost_int8);
    }
    cands.push_back({n.name, priority, plan.layers.count(n.name) > 0});
  }
  std::stable_sort(a.sensitivity.begin(), a.sensitivity.end(),
                   [](const NodeSensitivity& x, const NodeSensitivity& y) { return x.sqnr_db < y.sqnr_db; });
  std::stable_sort(cands.begin(), cands.end(),
                   [](const Candidate& x, const Candidate& y) { return x.priority > y.priority; });
  PrecisionPlan cur = plan;
  std::map<std::string, Precision> moved;  // node -> the precision it was moved to
  auto try_step = [&](const std::string& name, Precision to) {
    PrecisionPlan next = cur;
    NodePrecision& np = next.nodes[name];
    np.requested = to;
    np.effective = to == Precision::kInt16 ? Precision::kInt8 : to;
    np.int16 = to == Precision::kInt16;
    if (int16) next = int16(next);
    if (to == Precision::kInt16 && !next.nodes.at(name).int16) return false;  // its input cannot be int16
    cur = std::move(next);
    moved[name] = to;
    a.achieved_sqnr_db = output_error(g, cur, samples, refs).sqnr_db();
    a.met = a.achieved_sqnr_db >= target_sqnr_db;
    return true;
  };
  if (int16) {
    for (const auto& c : cands) {
      // A vector node has no int16 step; a layer already int16 reads another int16 layer's input.
      if (!c.matrix || cur.nodes.at(c.name).int16) continue;
      if (try_step(c.name, Precision::kInt16) && a.met) break;
    }
  }
  if (!a.met) {
    for (const auto& c : cands)
      if (try_step(c.name, Precision::kFp16) && a.met) break;
  }
  if (cost) a.cost = cost(cur);
  // int16 moves were taken on SQNR alone: between an int16 layer and an fp16 one every activation is
  // converted, so a mix can cost more than the same layers all in fp16 (which is at least as accurate as
  // int16 activations over int8 weights). The twin replaces the mix when it meets the target too and
  // costs less.
  const bool mixed =
      std::any_of(moved.begin(), moved.end(), [](const auto& m) { return m.second == Precision::kInt16; });
  if (cost && mixed && a.met) {
    PrecisionPlan twin = cur;
    for (const auto& [name, to] : moved) {
      NodePrecision& np = twin.nodes[name];
      np.requested = np.effective = Precision::kFp16;
      np.int16 = false;
    }
    if (int16) twin = int16(twin);
    const double twin_sqnr = output_error(g, twin, samples, refs).sqnr_db();
    const double twin_cost = cost(twin);
    a.fp16_twin_sqnr_db = twin_sqnr;
    a.fp16_twin_cost = twin_cost;
    a.mix_sqnr_db = a.achieved_sqnr_db;
    a.mix_cost = a.cost;
    if (twin_sqnr >= target_sqnr_db && twin_cost < a.cost) {
      for (auto& [name, to] : moved) to = Precision::kFp16;
      a.achieved_sqnr_db = twin_sqnr;
      a.cost = twin_cost;
      a.took_fp16_twin = true;
      cur = std::move(twin);
    }
  }
  if (advised) *advised = cur;
  std::vector<PrecisionOverride> ov;
  for (const auto& c : cands) {
    auto it = moved.find(c.name);
    if (it == moved.end()) continue;
    ov.push_back({c.name, it->second});
    (it->second == Precision::kInt16 ? a.int16_layers : a.layers).push_back(c.name);
  }
  a.overrides = format_overrides(ov);
  return a;
}

// A figure in the accuracy section: 8 significant digits; an infinite SQNR (an exact match) as +-300 dB,
// NaN as null.
JsonWriter& figure(JsonWriter& w, double v) {
  if (!std::isfinite(v)) return w.raw(v > 0 ? "300" : (v < 0 ? "-300" : "null"));
  return w.significant(v, 8);
}

void write_accuracy_json(const AccuracyReport& r, std::ostream& o) {
  using Layout = JsonWriter::Layout;
  std::string s;
  JsonWriter w(s, 1);  // a section of the report, one level in
  w.object(Layout::kLines).member("precision", r.precision);
  figure(w.key("output_sqnr_db"), r.output_sqnr_db);
  figure(w.key("output_cosine"), r.output_cosine);
  figure(w.key("output_max_abs_error"), r.output_max_abs_error);
  w.member("output_nonfinite", r.output_nonfinite);
  if (r.before_softmax) {
    w.key("before_softmax").object().member("value", r.before_softmax->value);
    w.member("layer", r.before_softmax->layer);
    figure(w.key("sqnr_db"), r.before_softmax->sqnr_db);
    figure(w.key("cosine"), r.before_softmax->cosine);
    w.end();
  } else {
    w.key("before_softmax").null();
  }
  if (r.first_bad_layer.empty()) {
    w.key("first_bad_layer").null();
  } else {
    w.member("first_bad_layer", r.first_bad_layer);
  }
  figure(w.key("bad_layer_sqnr_db"), r.bad_layer_sqnr_db);
  w.key("calibration").object().member("method", r.calibration.method).member("inputs", r.calibration.inputs);
  if (r.calibration.percentile > 0) figure(w.key("percentile"), r.calibration.percentile);
  w.member("synthetic", r.calibration.synthetic).member("source", r.calibration.source);
  w.member("bias_correction", r.calibration.bias_correction);
  if (r.calibration.equalization.applied)
    w.key("cross_layer_equalization").raw(equalization_json(r.calibration.equalization));
  if (r.calibration.smoothing.applied) w.key("smoothquant").raw(smoothing_json(r.calibration.smoothing));
  if (r.calibration.recipe.chosen) w.key("recipe").raw(recipe_json(r.calibration.recipe));
  if (r.calibration.range_search.applied) {
    const RangeSearchInfo& rs = r.calibration.range_search;
    w.key("range_search").object().member("samples", rs.samples).member("values", rs.values);
    w.member("candidates", rs.candidates).member("changed", rs.changed);
    w.key("changed_values").array();
    for (const std::string& v : rs.changed_values) w.value(v);
    w.end();
    figure(w.key("graph_runs"), rs.graph_runs);
    figure(w.key("default_error"), rs.default_error);
    figure(w.key("chosen_error"), rs.chosen_error);
    figure(w.key("seconds"), rs.seconds);
    w.end();
  }
  w.end().member("evaluation_inputs", r.evaluation_inputs);
  if (r.evaluation_source.empty()) {
    w.key("evaluation_source").null();
  } else {
    w.member("evaluation_source", r.evaluation_source);
  }
  w.key("warnings").array();
  for (const std::string& warning : r.warnings) w.value(warning);
  w.end().key("layers").array(Layout::kLines);
  for (const auto& l : r.layers) {
    w.object().member("name", l.name).member("op", l.op).member("precision", to_string(l.precision));
    figure(w.key("sqnr_db"), l.sqnr_db);
    figure(w.key("cosine"), l.cosine);
    figure(w.key("max_abs_error"), l.max_abs_error);
    if (l.own_sqnr_db) figure(w.key("own_sqnr_db"), *l.own_sqnr_db);
    if (l.own_cosine) figure(w.key("own_cosine"), *l.own_cosine);
    w.member("nonfinite", l.nonfinite).member("overflow", l.overflow).member("underflow", l.underflow);
    w.member("saturated", l.saturated).end();
  }
  w.end().key("weight_outliers").array(Layout::kLines);
  for (const auto& x : r.weight_outliers) {
    w.object().member("layer", x.layer).member("channel", x.channel);
    figure(w.key("channel_max_abs"), x.channel_max_abs);
    figure(w.key("median_max_abs"), x.median_max_abs);
    figure(w.key("factor"), x.factor);
    w.end();
  }
  w.end();
  if (r.task) w.key("task").raw(task_json(*r.task));
  if (r.advice) {
    const auto& a = *r.advice;
    figure(w.key("mixed_precision_advice").object().key("target_sqnr_db"), a.target_sqnr_db);
    w.member("met", a.met);
    figure(w.key("achieved_sqnr_db"), a.achieved_sqnr_db);
    w.member("overrides", a.overrides);
    figure(w.key("cost"), a.cost);
    figure(w.key("cost_as_planned"), a.cost_int8);
    if (a.fp16_twin_cost) {
      w.key("fp16_twin").object().member("taken", a.took_fp16_twin);
      figure(w.key("sqnr_db"), *a.fp16_twin_sqnr_db);
      figure(w.key("cost"), *a.fp16_twin_cost);
      figure(w.key("mix_sqnr_db"), a.mix_sqnr_db);
      figure(w.key("mix_cost"), a.mix_cost);
      w.end();
    }
    w.key("fitted_on").object().member("inputs", a.fitted_inputs);
    if (a.fitted_source.empty())
      w.key("source").null();
    else
      w.member("source", a.fitted_source);
    w.end();
    if (a.held_out) {
      const auto& h = *a.held_out;
      w.key("held_out").object().member("inputs", h.inputs);
      if (h.source.empty())
        w.key("source").null();
      else
        w.member("source", h.source);
      figure(w.key("sqnr_db"), h.sqnr_db);
      figure(w.key("cosine"), h.cosine);
      if (h.task) w.key("task").raw(task_json(*h.task));
      w.end();
    }
    w.key("sensitivity").array(Layout::kLines);
    for (const auto& x : a.sensitivity) {
      w.object().member("name", x.name).member("op", x.op);
      figure(w.key("sqnr_db"), x.sqnr_db);
      figure(w.key("cosine"), x.cosine);
      w.end();
    }
    w.end().end();
  }
  w.end();
  o << s;
}

std::string equalization_json(const passes::Equalization& e) {
  std::string s;
  JsonWriter w(s);
  w.object().member("rounds", e.rounds).key("pairs").array();
  for (const passes::EqualizedPair& p : e.pairs) {
    w.object().member("first", p.first).member("second", p.second).member("between", p.between);
    figure(w.key("min_scale"), p.min_scale);
    figure(w.key("max_scale"), p.max_scale);
    w.end();
  }
  w.end().key("skipped").array();
  for (const passes::SkippedPair& p : e.skipped)
    w.object().member("first", p.first).member("second", p.second).member("reason", p.reason).end();
  w.end().end();
  return s;
}

std::string smoothing_json(const passes::Smoothing& sm) {
  std::string s;
  JsonWriter w(s);
  figure(w.object().key("alpha"), sm.alpha);
  w.key("layers").array();
  for (const passes::SmoothedNorm& l : sm.layers) {
    w.object().member("norm", l.norm).key("linears").array();
    for (const std::string& m : l.linears) w.value(m);
    w.end();
    figure(w.key("min_scale"), l.min_scale);
    figure(w.key("max_scale"), l.max_scale);
    w.end();
  }
  w.end().key("skipped").array();
  for (const passes::SkippedNorm& k : sm.skipped)
    w.object().member("norm", k.norm).member("reason", k.reason).end();
  w.end().end();
  return s;
}

std::string recipe_json(const RecipeChoice& c) {
  std::string s;
  JsonWriter w(s);
  w.object()
      .member("chosen", c.recipe)
      .member("scoring_inputs", c.scoring_inputs)
      .member("held_out", c.held_out);
  figure(w.key("seconds"), c.seconds);
  w.key("candidates").array();
  for (const RecipeCandidate& k : c.candidates) {
    w.object().member("name", k.name);
    figure(w.key("calibration_sqnr_db"), k.calibration_sqnr_db);
    w.key("per_input_sqnr_db").array();
    for (double v : k.per_input_sqnr_db) figure(w, v);
    w.end().end();
  }
  w.end().end();
  return s;
}

std::string recipe_summary(const RecipeChoice& c) {
  std::ostringstream o;
  o << std::fixed << std::setprecision(2) << "PTQ recipe: " << c.recipe << ", chosen by output SQNR on "
    << c.scoring_inputs << (c.held_out ? " held-out" : "") << " calibration inputs (";
  for (size_t k = 0; k < c.candidates.size(); ++k)
    o << (k ? ", " : "") << c.candidates[k].name << " " << c.candidates[k].calibration_sqnr_db << " dB";
  o << std::setprecision(1) << "; " << c.seconds << " s)\n";
  return o.str();
}

std::string accuracy_json(const AccuracyReport& r) {
  std::ostringstream os;
  write_accuracy_json(r, os);
  return os.str();
}

namespace {

// 99.99, 99.999, 100: as many digits as the value has (up to 6 significant), not the summary's fixed 2.
std::string shortest(double v) {
  std::ostringstream o;
  o << std::setprecision(6) << v;
  return o.str();
}

}  // namespace

std::string accuracy_summary(const AccuracyReport& r, size_t worst_layers) {
  std::ostringstream o;
  o << std::fixed << std::setprecision(2);
  o << "accuracy (" << r.precision << " vs fp32 reference, " << r.evaluation_inputs << " inputs): ";
  if (r.before_softmax)  // the logits' figure first: the probabilities' hides their error
    o << "SQNR " << r.before_softmax->sqnr_db << " dB, cosine " << std::setprecision(5)
      << r.before_softmax->cosine << std::setprecision(2) << " before the final Softmax ("
      << r.before_softmax->layer << "); after it: ";
  o << "output SQNR " << r.output_sqnr_db << " dB, cosine " << std::setprecision(5) << r.output_cosine
    << std::setprecision(2) << ", max |error| " << r.output_max_abs_error
    << (r.output_nonfinite ? ", " + std::to_string(r.output_nonfinite) + " OUTPUT VALUES ARE INF/NaN"
                           : std::string())
    << "\n";
  if (!r.calibration.method.empty())
    o << "calibration: " << r.calibration.method
      << (r.calibration.percentile > 0 ? " " + shortest(r.calibration.percentile) : std::string()) << " on "
      << r.calibration.inputs << " inputs (" << r.calibration.source << ")"
      << (r.calibration.bias_correction.empty() ? "" : ", bias correction " + r.calibration.bias_correction)
      << "\n";
  if (r.calibration.equalization.applied)
    o << "cross-layer equalisation: " << r.calibration.equalization.pairs.size() << " conv pairs equalised, "
      << r.calibration.equalization.skipped.size()
      << " skipped (the report's calibration.cross_layer_equalization says why)\n";
  if (r.calibration.smoothing.applied)
    o << "SmoothQuant (alpha " << r.calibration.smoothing.alpha
      << "): " << r.calibration.smoothing.layers.size()
      << " LayerNormalization(s) smoothed into their linear layers, "
      << r.calibration.smoothing.skipped.size()
      << " skipped (the report's calibration.smoothquant says why)\n";
  if (r.calibration.recipe.chosen) o << recipe_summary(r.calibration.recipe);
  if (r.task) o << task_summary(*r.task);
  for (const auto& w : r.warnings) o << "WARNING: " << w << "\n";
  o << "first layer below " << r.bad_layer_sqnr_db
    << " dB: " << (r.first_bad_layer.empty() ? std::string("none") : r.first_bad_layer) << "\n";
  std::vector<const LayerAccuracy*> worst;
  for (const auto& l : r.layers) worst.push_back(&l);
  std::stable_sort(worst.begin(), worst.end(),
                   [](const LayerAccuracy* a, const LayerAccuracy* b) { return a->sqnr_db < b->sqnr_db; });
  if (worst.size() > worst_layers) worst.resize(worst_layers);
  auto line = [&o](const LayerAccuracy& l) {
    o << "  " << std::left << std::setw(40) << l.name << std::right << " " << std::setw(5)
      << to_string(l.precision) << "  sqnr " << std::setw(7) << l.sqnr_db << " dB  cosine "
      << std::setprecision(5) << l.cosine << std::setprecision(2);
    if (l.own_sqnr_db) o << "  own " << std::setw(7) << *l.own_sqnr_db << " dB";
    o << "\n";
  };
  if (!worst.empty()) o << "lowest-SQNR layers (own: the layer's own error, alone on the fp32 inputs):\n";
  for (const auto* l : worst) line(*l);
  // Where the error comes from: a layer low in the list above may only inherit it.
  std::vector<const LayerAccuracy*> adders;
  for (const auto& l : r.layers)
    if (l.own_sqnr_db) adders.push_back(&l);
  std::stable_sort(adders.begin(), adders.end(), [](const LayerAccuracy* a, const LayerAccuracy* b) {
    return *a->own_sqnr_db < *b->own_sqnr_db;
  });
  if (adders.size() > worst_layers) adders.resize(worst_layers);
  if (!adders.empty()) o << "layers adding the most error (lowest own SQNR):\n";
  for (const auto* l : adders) line(*l);
  if (!r.weight_outliers.empty()) {
    o << "weight outliers (channel max |w| / layer median):\n";
    for (size_t k = 0; k < r.weight_outliers.size() && k < 10; ++k) {
      const auto& w = r.weight_outliers[k];
      o << "  " << w.layer << " channel " << w.channel << ": " << w.factor << "x\n";
    }
  }
  // The mixed-precision advice (r.advice) is the caller's to print: it answers its own question.
  return o.str();
}

// The fp32 bytes of a value the emulator holds (0 for a constant or an unknown shape).
static uint64_t held_bytes(const Graph& g, const std::string& name) {
  if (name.empty()) return 0;
  const Value& v = g.value(name);
  if (v.is_constant() || !v.fully_known()) return 0;
  return static_cast<uint64_t>(num_elements(v.shape)) * 4;
}

// A Conv's im2col rows in the reference kernel (interp/kernels_nn.cpp k_conv): (C / group) x kernel
// window x output pixels floats, unless it is a 1x1 stride-1 unpadded conv that reads its input directly.
static uint64_t conv_scratch_bytes(const Graph& g, const Node& n) {
  if (n.op_type != "Conv" || n.inputs.size() < 2 || n.outputs.empty()) return 0;
  const Value& w = g.value(n.inputs[1]);
  const Value& y = g.value(n.outputs[0]);
  if (!w.fully_known() || !y.fully_known() || w.shape.size() < 3 || y.shape.size() != w.shape.size())
    return 0;
  const Shape window(w.shape.begin() + 2, w.shape.end()), pixels(y.shape.begin() + 2, y.shape.end());
  const auto ones = [](const std::vector<int64_t>& v) {
    return std::all_of(v.begin(), v.end(), [](int64_t x) { return x == 1; });
  };
  const auto zeros = [](const std::vector<int64_t>& v) {
    return std::all_of(v.begin(), v.end(), [](int64_t x) { return x == 0; });
  };
  if (num_elements(window) == 1 && ones(n.attr_ints("strides")) && zeros(n.attr_ints("pads"))) return 0;
  return static_cast<uint64_t>(w.shape[1] * num_elements(window) * num_elements(pixels)) * 4;
}

// Throws MemoryError (memory_budget.h) when collect_statistics on `samples` samples would not fit: the
// samples held at once plus one fp32 run of the model (each value from its producer to its last reader,
// graph outputs to the end and then copied once more, and a convolution's im2col scratch). SCALE-Sim's
// 4k-image UNet topology needs about 35 GB for one synthetic sample; without the check it met the OOM
// killer (exit 137).
static void check_statistics_fit(const Graph& g, size_t samples) {
  std::map<std::string, int> uses;
  for (const Node& n : g.nodes)
    for (const auto& in : n.inputs) ++uses[in];
  const std::set<std::string> outputs(g.outputs.begin(), g.outputs.end());
  uint64_t sample_bytes = 0;
  for (const auto& in : g.inputs) sample_bytes += held_bytes(g, in);
  // The emulator copies the sample's inputs and drops each value after its last reader.
  uint64_t live = sample_bytes, peak = live;
  for (const Node& n : g.nodes) {
    uint64_t made = 0;
    for (const auto& out : n.outputs) made += held_bytes(g, out);
    peak = std::max(peak, live + made + conv_scratch_bytes(g, n));
    live += made;
    for (const auto& in : n.inputs)
      if (!in.empty() && --uses[in] == 0 && !outputs.count(in)) live -= std::min(live, held_bytes(g, in));
  }
  // emulate() returns copies of the graph outputs while the emulator still holds them.
  uint64_t returned = 0;
  for (const auto& out : outputs) returned += held_bytes(g, out);
  peak = std::max(peak, live + returned);
  // The advice follows what takes the memory: the samples themselves, or one run of the model.
  const uint64_t all_samples = samples * sample_bytes;
  check_allocation(
      "calibrating on " + std::to_string(samples) + (samples == 1 ? " sample of " : " samples of ") +
          format_bytes(sample_bytes) + " (the model run in fp32 holds up to " + format_bytes(peak) + " more)",
      all_samples + peak,
      all_samples > peak
          ? "use fewer samples (--calibration-samples)"
          : "calibrate a smaller input shape, or run without int8 (--precision fp16 needs no calibration)");
}

CalibrationSet calibration_inputs(const Graph& g, const PlanRequest& request) {
  CalibrationSet c;
  c.info.method = to_string(request.quant.calibration.method);
  if (request.quant.calibration.method == CalibrationMethod::kPercentile)
    c.info.percentile = request.quant.calibration.percentile;
  // Before the samples exist: one 4k-image sample alone can be gigabytes.
  check_statistics_fit(g, static_cast<size_t>(std::max(1, request.calibration_count)));
  if (!request.calibration_dir.empty()) {
    c.samples = load_samples(g, request.calibration_dir, request.calibration_count,
                             request.preprocess ? &*request.preprocess : nullptr);
    c.info.source = request.calibration_dir;
  } else {
    c.samples = synthetic_samples(g, std::max(1, request.calibration_count), request.seed);
    c.info.synthetic = true;
    c.info.source = "synthetic N(0,1), seed " + std::to_string(request.seed);
  }
  c.info.inputs = static_cast<int>(c.samples.size());
  return c;
}

namespace {

void correct_bias_if_asked(const Graph& g, PrecisionPlan& plan, const QuantOptions& quant,
                           std::vector<Sample> samples) {
  if (!quant.empirical_bias_correction || samples.empty()) return;
  if (static_cast<int>(samples.size()) > quant.empirical_bias_samples)
    samples.resize(static_cast<size_t>(std::max(1, quant.empirical_bias_samples)));
  correct_output_bias(g, plan, samples);
}

}  // namespace

PrecisionPlan plan_from_statistics(const Graph& g, const PlanRequest& request,
                                   const CalibrationSet& calibration,
                                   const std::map<std::string, TensorStats>& stats, const Graph* original) {
  PrecisionPlan plan = resolve_plan(g, request.spec, original);
  plan.int8_vector = request.quant.int8_vector;
  if (!plan.has_int8()) return plan;
  quantize_plan(g, plan, stats, request.quant);
  correct_bias_if_asked(g, plan, request.quant, calibration.samples);
  plan.calibration = calibration.info;
  plan.calibration.bias_correction = bias_correction_name(request.quant);
  return plan;
}

std::vector<std::map<std::string, Tensor>> fp32_outputs(const Graph& g, const std::vector<Sample>& samples) {
  const PrecisionPlan fp32;  // every node the model's fp32
  std::vector<std::map<std::string, Tensor>> refs;
  refs.reserve(samples.size());
  for (const Sample& s : samples) refs.push_back(emulate(g, fp32, s));
  return refs;
}

OutputSqnr output_sqnr(const Graph& g, const PrecisionPlan& plan, const std::vector<Sample>& samples,
                       const std::vector<std::map<std::string, Tensor>>& refs) {
  OutputSqnr r;
  ErrorSums all;
  for (size_t k = 0; k < samples.size(); ++k) {
    ErrorSums one;
    auto out = emulate(g, plan, samples[k]);
    for (const auto& o : g.outputs) {
      if (!out.at(o).floating()) continue;
      one.add(refs[k].at(o), out.at(o));
      all.add(refs[k].at(o), out.at(o));
    }
    r.per_input.push_back(one.sqnr_db());
  }
  r.overall = all.sqnr_db();
  return r;
}

PrecisionPlan build_plan(const Graph& g, const PlanRequest& request, const Graph* original,
                         const ModelQuant* model, std::vector<std::string>* notes,
                         std::map<std::string, TensorStats>* stats_out) {
  PrecisionPlan plan = resolve_plan(g, request.spec, original);
  plan.int8_vector = request.quant.int8_vector;
  std::map<std::string, QuantizedWeights> given;
  if (model) given = apply_model_quant(g, *model, plan, request.follow_model, notes);
  if (!plan.has_int8()) return plan;
  const std::vector<std::string> missing = values_to_calibrate(g, plan);
  std::map<std::string, TensorStats> stats;
  CalibrationInfo info;
  std::vector<Sample> samples;
  if (!missing.empty()) {
    CalibrationSet c = calibration_inputs(g, request);
    samples = std::move(c.samples);
    info = std::move(c.info);
    stats = collect_statistics(g, samples, request.quant.calibration.bins);
  }
  if (model) {
    // The model's own scales, and calibration only for the values it leaves in float.
    const CalibrationInfo own = model_calibration();
    if (!missing.empty()) {
      info.source = own.source + " (" + std::to_string(missing.size()) +
                    " values the model leaves in float: " + info.method + " on " + info.source + ")";
      info.method = own.method + "+" + info.method;
    } else {
      info = own;
    }
  }
  QuantOptions quant = request.quant;
  RangeSearchInfo searched;
  if (quant.range_search && !missing.empty()) {
    // Scored on the first range_search_samples calibration inputs (all of them run in step).
    const size_t n = std::min(samples.size(), static_cast<size_t>(std::max(1, quant.range_search_samples)));
    const std::vector<Sample> scoring(samples.begin(), samples.begin() + static_cast<std::ptrdiff_t>(n));
    const RangeSearch rs = search_ranges(g, plan, stats, quant, given, scoring);
    quant.range_overrides = rs.ranges;
    searched.applied = true;
    searched.samples = static_cast<int>(n);
    searched.values = rs.values;
    searched.candidates = rs.candidates;
    searched.changed = static_cast<int>(rs.ranges.size());
    for (const auto& v : g.inputs)
      if (rs.ranges.count(v)) searched.changed_values.push_back(v);
    for (const Node& node : g.nodes)
      for (const auto& v : node.outputs)
        if (rs.ranges.count(v)) searched.changed_values.push_back(v);
    searched.graph_runs = rs.graph_runs;
    searched.default_error = rs.default_error;
    searched.chosen_error = rs.chosen_error;
    searched.seconds = rs.seconds;
  }
  quantize_plan(g, plan, stats, quant, given);
  if (stats_out) *stats_out = stats;
  correct_bias_if_asked(g, plan, request.quant, std::move(samples));
  plan.calibration = info;
  plan.calibration.range_search = searched;
  if (!missing.empty()) plan.calibration.bias_correction = bias_correction_name(request.quant);
  return plan;
}

}  // namespace npusim::compiler::quant
