// Reductions and arg-reductions.
#include <cmath>
#include <limits>

#include "compiler/interp/kernels.h"

namespace npusim::compiler::interp {
namespace {

enum class Red { kSum, kMean, kMax, kMin, kProd, kL1, kL2, kSumSquare, kLogSum, kLogSumExp };

template <Red R>
void reduce(KernelContext& c) {
  const Tensor& x = c.input(0);
  const int64_t r = x.rank();
  std::vector<int64_t> axes;
  bool given = false;
  if (c.has(1)) {
    axes = c.input(1).to_int_vector();
    given = true;
  } else if (c.node.has_attr("axes")) {
    axes = c.node.attr_ints("axes");
    given = true;
  }
  const bool keepdims = c.node.attr_int("keepdims", 1) != 0;
  if ((!given || axes.empty()) && c.node.attr_int("noop_with_empty_axes", 0) != 0) {
    c.out[0] = x;
    return;
  }
  std::vector<bool> red(r, axes.empty());
  for (int64_t a : axes) red[norm_axis(c, a, r)] = true;
  Shape os, ks;
  for (int64_t d = 0; d < r; ++d) {
    ks.push_back(red[d] ? 1 : x.shape[d]);
    if (!red[d] || keepdims) os.push_back(red[d] ? 1 : x.shape[d]);
  }
  const int64_t on = num_elements(ks);
  std::vector<double> acc(on);
  double init = 0;
  if (R == Red::kMax) init = -std::numeric_limits<double>::infinity();
  if (R == Red::kMin) init = std::numeric_limits<double>::infinity();
  if (R == Red::kProd) init = 1;
  std::fill(acc.begin(), acc.end(), init);
  // For LogSumExp, subtract the max for stability.
  std::vector<double> mx;
  auto ost = dense_strides(ks);
  std::vector<int64_t> st(r);
  for (int64_t d = 0; d < r; ++d) st[d] = red[d] ? 0 : ost[d];
  auto walk = [&](auto&& f) {
    std::vector<int64_t> idx(r, 0);
    int64_t off = 0;
    for (int64_t k = 0; k < x.size(); ++k) {
      f(k, off);
      for (int64_t d = r - 1; d >= 0; --d) {
        ++idx[d];
        off += st[d];
        if (idx[d] < x.shape[d]) break;
        off -= st[d] * x.shape[d];
        idx[d] = 0;
      }
    }
  };
  if (R == Red::kLogSumExp) {
    mx.assign(on, -std::numeric_limits<double>::infinity());
    walk([&](int64_t k, int64_t o) { mx[o] = std::max(mx[o], x.as_double(k)); });
  }
  walk([&](int64_t k, int64_t o) {
    const double v = x.as_double(k);
    switch (R) {
      case Red::kSum:
      case Red::kMean:
      case Red::kLogSum:
        acc[o] += v;
        break;
      case Red::kMax:
        acc[o] = std::max(acc[o], v);
        break;
      case Red::kMin:
        acc[o] = std::min(acc[o], v);
        break;
      case Red::kProd:
        acc[o] *= v;
        break;
      case Red::kL1:
        acc[o] += std::fabs(v);
        break;
      case Red::kL2:
      case Red::kSumSquare:
        acc[o] += v * v;
        break;
      case Red::kLogSumExp:
        acc[o] += std::exp(v - mx[o]);
        break;
    }
  });
  const double count = on ? static_cast<double>(x.size()) / on : 0;
  Tensor y(x.dtype, os);
  for (int64_t o = 0; o < on; ++o) {
    double v = acc[o];
    if (R == Red::kMean) v /= count;
    if (R == Red::kL2) v = std::sqrt(v);
    if (R == Red::kLogSum) v = std::log(v);
    if (R == Red::kLogSumExp) v = std::log(v) + mx[o];
    if (y.floating())
      y.f[o] = static_cast<float>(v);
    else
      y.i[o] = wrap_integer(y.dtype, static_cast<int64_t>(v));
  }
  c.out[0] = std::move(y);
}

template <bool kMax>
void arg_reduce(KernelContext& c) {
  const Tensor& x = c.input(0);
  const int64_t axis = norm_axis(c, c.node.attr_int("axis", 0), x.rank());
  const bool keepdims = c.node.attr_int("keepdims", 1) != 0;
  const bool last = c.node.attr_int("select_last_index", 0) != 0;
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x.shape[d];
  for (int64_t d = axis + 1; d < x.rank(); ++d) inner *= x.shape[d];
  const int64_t dim = x.shape[axis];
  Shape os;
  for (int64_t d = 0; d < x.rank(); ++d)
    if (d != axis || keepdims) os.push_back(d == axis ? 1 : x.shape[d]);
  Tensor y(DataType::kInt64, os);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t q = 0; q < inner; ++q) {
      int64_t best = 0;
      double bv = x.as_double(o * dim * inner + q);
      for (int64_t k = 1; k < dim; ++k) {
        const double v = x.as_double((o * dim + k) * inner + q);
        const bool better = kMax ? (last ? v >= bv : v > bv) : (last ? v <= bv : v < bv);
        if (better) {
          bv = v;
          best = k;
        }
      }
      y.i[o * inner + q] = best;
    }
  c.out[0] = std::move(y);
}

}  // namespace

void register_reduce(KernelTable& t) {
  t["ReduceSum"] = reduce<Red::kSum>;
  t["ReduceMean"] = reduce<Red::kMean>;
  t["ReduceMax"] = reduce<Red::kMax>;
  t["ReduceMin"] = reduce<Red::kMin>;
  t["ReduceProd"] = reduce<Red::kProd>;
  t["ReduceL1"] = reduce<Red::kL1>;
  t["ReduceL2"] = reduce<Red::kL2>;
  t["ReduceSumSquare"] = reduce<Red::kSumSquare>;
  t["ReduceLogSum"] = reduce<Red::kLogSum>;
  t["ReduceLogSumExp"] = reduce<Red::kLogSumExp>;
  t["ArgMax"] = arg_reduce<true>;
  t["ArgMin"] = arg_reduce<false>;
}

}  // namespace npusim::compiler::interp
