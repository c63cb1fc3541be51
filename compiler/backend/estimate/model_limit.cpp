#include "compiler/backend/estimate/model_limit.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>

#include "compiler/backend/estimate/roofline.h"

namespace npusim::compiler::backend {

int64_t ModelLimit::cycles() const {
  return static_cast<int64_t>(std::ceil(std::max({array_cycles, vector_cycles, dram_cycles})));
}

namespace {

// The shape of value `s`: from `imported`, or where import left it unknown, from `lowered`.
std::optional<Shape> shape_of(const Graph& imported, const Graph& lowered, const std::string& s) {
  for (const Graph* g : {&imported, &lowered}) {
    if (g->has_value(s) && g->value(s).fully_known()) return g->value(s).shape;
  }
  return std::nullopt;
}

int64_t elements_from(const Shape& s, size_t first) {
  int64_t n = 1;
  for (size_t i = first; i < s.size(); ++i) n *= s[i];
  return n;
}

bool is_matrix_op(const std::string& op) {
  return op == "Conv" || op == "ConvTranspose" || op == "MatMul" || op == "Gemm";
}

// One matrix shape run `instances` times (each with its own stationary operand: a batched MatMul's runtime
// B, a conv's groups), `m` x `k` x `n` MACs each, in whole folds of the array (model_limit.h).
double fold_cycles(const isa::SystolicArrayConfig& a, double rate, int64_t instances, int64_t m, int64_t k,
                   int64_t n) {
  const auto folds = [](int64_t extent, int64_t size) { return (extent + size - 1) / size; };
  int64_t passes = 0;  // stationary folds x the streamed extent
  switch (a.dataflow) {
    case isa::Dataflow::kWs:
      passes = folds(k, a.rows) * folds(n, a.cols) * m;
      break;
    case isa::Dataflow::kOs:
      passes = folds(m, a.rows) * folds(n, a.cols) * k;
      break;
    case isa::Dataflow::kIs:
      passes = folds(k, a.rows) * folds(m, a.cols) * n;
      break;
  }
  return static_cast<double>(instances) * static_cast<double>(passes) / rate;
}

}  // namespace

ModelLimit model_limit(const Graph& imported, const Graph& lowered,
                       const std::function<isa::DType(const Node&)>& precision_of, isa::DType io_precision,
                       const isa::NpuConfig& config) {
  ModelLimit limit;
  const isa::SystolicArrayConfig& a = config.systolic_array;
  std::map<std::string, isa::DType> weight_precision;  // each weight in its first reader's precision
  for (const Node& n : imported.nodes) {
    const isa::DType precision = precision_of(n);
    for (const std::string& in : n.inputs) {
      if (!in.empty() && imported.has_value(in) && imported.value(in).is_constant())
        weight_precision.emplace(in, precision);
    }
    if (!is_matrix_op(n.op_type) || n.inputs.size() < 2 || n.outputs.empty()) continue;
    const std::optional<Shape> x = shape_of(imported, lowered, n.inputs[0]);
    const std::optional<Shape> w = shape_of(imported, lowered, n.inputs[1]);
    const std::optional<Shape> y = shape_of(imported, lowered, n.outputs[0]);
    if (!x || !w || !y || x->empty() || w->empty()) continue;
    const double rate = a.rate(precision);
    if (rate <= 0) continue;  // an array without MACs of the precision runs none of its work
    double macs = 0, per_cycle = array_peak_macs_per_cycle(config, precision);
    bool on_lanes = false;
    double folded = 0;
    if (n.op_type == "Conv") {
      macs = static_cast<double>(num_elements(*y)) * static_cast<double>(elements_from(*w, 1));
      const int64_t group = n.attr_int("group", 1);
      // Each group a GEMM of the output pixels (the batch's too) by C/g * kh * kw by K/g.
      folded = fold_cycles(a, rate, group, num_elements(*y) / std::max<int64_t>(1, (*w)[0]),
                           elements_from(*w, 1), (*w)[0] / group);
      if (group > 1) {
        // One group at a time on the array: its reduction on the rows, its output channels on the columns.
        const double on_array = static_cast<double>(std::min(a.rows, elements_from(*w, 1))) *
                                static_cast<double>(std::min(a.cols, (*w)[0] / group)) * rate;
        const double lanes = lane_peak_macs_per_cycle(config, precision);
        on_lanes = on_array <= lanes;
        per_cycle = on_lanes ? lanes : on_array;
      }
    } else if (n.op_type == "ConvTranspose") {
      macs = static_cast<double>(num_elements(*x)) * static_cast<double>(elements_from(*w, 1));
      // Each group a GEMM of the input pixels by C/g by K/g * kh * kw (every input pixel scattered).
      const int64_t group = n.attr_int("group", 1);
      if (x->size() >= 2 && (*x)[1] > 0) {
        folded =
            fold_cycles(a, rate, group, num_elements(*x) / (*x)[1], (*x)[1] / group, elements_from(*w, 1));
      }
    } else if (n.op_type == "MatMul") {
      macs = static_cast<double>(num_elements(*y)) * static_cast<double>(x->back());
      // A constant B is one matrix the batch's rows stream through; a runtime B is one per batch matrix.
      const int64_t k = x->back(), cols = y->back(), rows = y->size() >= 2 ? (*y)[y->size() - 2] : 1;
      const int64_t batch = cols * rows > 0 ? num_elements(*y) / (cols * rows) : 0;
      const bool shared = imported.has_value(n.inputs[1]) && imported.value(n.inputs[1]).is_constant();
      folded = shared ? fold_cycles(a, rate, 1, batch * rows, k, cols)
                      : fold_cycles(a, rate, batch, rows, k, cols);
    } else {  // Gemm
      const int64_t k = n.attr_int("transA", 0) ? x->front() : x->back();
      macs = static_cast<double>(num_elements(*y)) * static_cast<double>(k);
      if (y->size() == 2) folded = fold_cycles(a, rate, 1, (*y)[0], k, (*y)[1]);
    }
    const double cycles = macs / per_cycle;
    (on_lanes ? limit.vector_cycles : limit.array_cycles) += cycles;
    if (!on_lanes) limit.array_fold_cycles += std::max(folded, cycles);
    limit.node_cycles[n.name] += cycles;
  }
  const double peak = dram_peak_per_cycle(config);
  if (peak > 0) {
    double bytes = 0;
    for (const auto& [name, precision] : weight_precision) {
      const int64_t n = num_elements(imported.value(name).shape);
      if (n >= kMinWeightElements) bytes += static_cast<double>(n * isa::dtype_bytes(precision));
    }
    std::set<std::string> io(imported.inputs.begin(), imported.inputs.end());
    io.insert(imported.outputs.begin(), imported.outputs.end());
    for (const std::string& v : io) {
      if (const std::optional<Shape> s = shape_of(imported, lowered, v))
        bytes += static_cast<double>(num_elements(*s) * isa::dtype_bytes(io_precision));
    }
    limit.dram_cycles = bytes / peak;
  }
  return limit;
}

}  // namespace npusim::compiler::backend
