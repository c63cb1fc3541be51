// Indexing and selection kernels: scatters, GatherND, OneHot, Compress, NonZero, TopK, Unique,
// ReverseSequence, EyeLike; and the losses (NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss), Det, the
// window functions and MeanVarianceNormalization.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <numeric>

#include "compiler/interp/kernels.h"

namespace npusim::compiler::interp {
namespace {

double get(const Tensor& t, int64_t k) { return t.floating() ? t.f[k] : static_cast<double>(t.i[k]); }
void set(Tensor& t, int64_t k, double v) {
  if (t.floating())
    t.f[k] = static_cast<float>(v);
  else
    t.i[k] = static_cast<int64_t>(v);
}
void copy(const Tensor& s, int64_t from, Tensor& d, int64_t to) {
  if (s.floating())
    d.f[to] = s.f[from];
  else
    d.i[to] = s.i[from];
}

std::vector<int64_t> strides_of(const Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (int64_t d = static_cast<int64_t>(s.size()) - 2; d >= 0; --d) st[d] = st[d + 1] * s[d + 1];
  return st;
}

int64_t wrap_index(const KernelContext& c, int64_t i, int64_t dim) {
  if (i < 0) i += dim;
  if (i < 0 || i >= dim)
    c.fail("index " + std::to_string(i) + " is out of range for size " + std::to_string(dim));
  return i;
}

// none / add / mul / max / min (ScatterElements and ScatterND since opset 16/18).
void combine(const KernelContext& c, Tensor& out, int64_t k, const Tensor& upd, int64_t u) {
  const std::string r = c.node.attr_string("reduction", "none");
  if (r == "none") return copy(upd, u, out, k);
  const double a = get(out, k), b = get(upd, u);
  if (r == "add") return set(out, k, a + b);
  if (r == "mul") return set(out, k, a * b);
  if (r == "max") return set(out, k, std::max(a, b));
  if (r == "min") return set(out, k, std::min(a, b));
  c.fail("reduction '" + r + "' is not none, add, mul, max or min");
}

void k_scatter_elements(KernelContext& c) {
  const Tensor& x = c.input(0);
  const Tensor& ind = c.input(1);
  const Tensor& upd = c.input(2);
  const int64_t axis = norm_axis(c, c.node.attr_int("axis", 0), x.rank());
  if (ind.shape != upd.shape || ind.rank() != x.rank())
    c.fail("indices and updates must have one shape of the data's rank");
  Tensor y = x;
  const auto xs = strides_of(x.shape), is = strides_of(ind.shape);
  for (int64_t o = 0; o < ind.size(); ++o) {
    int64_t off = 0, rem = o;
    for (int64_t d = 0; d < ind.rank(); ++d) {
      int64_t v = rem / is[d];
      rem %= is[d];
      if (d == axis) v = wrap_index(c, ind.as_int(o), x.shape[axis]);
      off += v * xs[d];
    }
    combine(c, y, off, upd, o);
  }
  c.out[0] = std::move(y);
}

void k_scatter_nd(KernelContext& c) {
  const Tensor& x = c.input(0);
  const Tensor& ind = c.input(1);
  const Tensor& upd = c.input(2);
  const int64_t k = ind.shape.back();
  if (k > x.rank()) c.fail("index tuples are longer than the data's rank");
  const auto xs = strides_of(x.shape);
  int64_t slice = 1;
  for (int64_t d = k; d < x.rank(); ++d) slice *= x.shape[d];
  Tensor y = x;
  const int64_t n = ind.size() / std::max<int64_t>(k, 1);
  for (int64_t t = 0; t < n; ++t) {
    int64_t off = 0;
    for (int64_t d = 0; d < k; ++d) off += wrap_index(c, ind.as_int(t * k + d), x.shape[d]) * xs[d];
    for (int64_t q = 0; q < slice; ++q) combine(c, y, off + q, upd, t * slice + q);
  }
  c.out[0] = std::move(y);
}

void k_gather_nd(KernelContext& c) {
  const Tensor& x = c.input(0);
  const Tensor& ind = c.input(1);
  const int64_t b = c.node.attr_int("batch_dims", 0), k = ind.shape.back();
  if (b + k > x.rank()) c.fail("batch_dims + index length exceeds the data's rank");
  Shape os(ind.shape.begin(), ind.shape.end() - 1);
  os.insert(os.end(), x.shape.begin() + b + k, x.shape.end());
  int64_t batch = 1, slice = 1;
  for (int64_t d = 0; d < b; ++d) batch *= x.shape[d];
  for (int64_t d = b + k; d < x.rank(); ++d) slice *= x.shape[d];
  const auto xs = strides_of(x.shape);
  const int64_t per_batch = ind.size() / std::max<int64_t>(k, 1) / batch, xbatch = b ? xs[b - 1] : x.size();
  Tensor y(x.dtype, os);
  for (int64_t bi = 0; bi < batch; ++bi)
    for (int64_t t = 0; t < per_batch; ++t) {
      const int64_t row = bi * per_batch + t;
      int64_t off = bi * xbatch;
      for (int64_t d = 0; d < k; ++d)
        off += wrap_index(c, ind.as_int(row * k + d), x.shape[b + d]) * xs[b + d];
      for (int64_t q = 0; q < slice; ++q) copy(x, off + q, y, row * slice + q);
    }
  c.out[0] = std::move(y);
}

void k_one_hot(KernelContext& c) {
  const Tensor& ind = c.input(0);
  const auto depth = static_cast<int64_t>(c.scalar(1));
  const Tensor& vals = c.input(2);
  const int64_t rank = ind.rank() + 1;
  const int64_t axis = norm_axis(c, c.node.attr_int("axis", -1), rank);
  Shape os = ind.shape;
  os.insert(os.begin() + axis, depth);
  Tensor y(vals.dtype, os);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= ind.shape[d];
  for (int64_t d = axis; d < ind.rank(); ++d) inner *= ind.shape[d];
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < depth; ++j)
      for (int64_t q = 0; q < inner; ++q) {
        int64_t v = static_cast<int64_t>(get(ind, o * inner + q));
        if (v < 0) v += depth;
        copy(vals, v == j ? 1 : 0, y, (o * depth + j) * inner + q);
      }
  c.out[0] = std::move(y);
}

void k_compress(KernelContext& c) {
  const Tensor& x = c.input(0);
  const Tensor& cond = c.input(1);
  const bool has_axis = c.node.has_attr("axis");
  const Tensor flat = [&] {
    Tensor t = x;
    if (!has_axis) t.shape = {x.size()};
    return t;
  }();
  const int64_t axis = has_axis ? norm_axis(c, c.node.attr_int("axis", 0), x.rank()) : 0;
  std::vector<int64_t> keep;
  for (int64_t j = 0; j < std::min(cond.size(), flat.shape[axis]); ++j)
    if (get(cond, j) != 0) keep.push_back(j);
  Shape os = flat.shape;
  os[axis] = static_cast<int64_t>(keep.size());
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= flat.shape[d];
  for (size_t d = axis + 1; d < flat.shape.size(); ++d) inner *= flat.shape[d];
  Tensor y(x.dtype, os);
  const auto n = static_cast<int64_t>(keep.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t q = 0; q < inner; ++q)
        copy(flat, (o * flat.shape[axis] + keep[j]) * inner + q, y, (o * n + j) * inner + q);
  c.out[0] = std::move(y);
}

void k_non_zero(KernelContext& c) {
  const Tensor& x = c.input(0);
  std::vector<int64_t> hits;
  for (int64_t k = 0; k < x.size(); ++k)
    if (get(x, k) != 0) hits.push_back(k);
  const auto st = strides_of(x.shape);
  const auto n = static_cast<int64_t>(hits.size());
  Tensor y(DataType::kInt64, {x.rank(), n});
  for (int64_t j = 0; j < n; ++j)
    for (int64_t d = 0; d < x.rank(); ++d) y.i[d * n + j] = hits[j] / st[d] % x.shape[d];
  c.out[0] = std::move(y);
}

void k_top_k(KernelContext& c) {
  const Tensor& x = c.input(0);
  const int64_t k = c.has(1) && c.opset >= 10 ? c.iscalar(1) : c.node.attr_int("k", 1);
  const int64_t axis = norm_axis(c, c.node.attr_int("axis", -1), x.rank());
  const bool largest = c.node.attr_int("largest", 1) != 0;
  const int64_t dim = x.shape[axis];
  if (k < 0 || k > dim)
    c.fail("k = " + std::to_string(k) + " is out of range for size " + std::to_string(dim));
  Shape os = x.shape;
  os[axis] = k;
  Tensor vals(x.dtype, os), idx(DataType::kInt64, os);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x.shape[d];
  for (int64_t d = axis + 1; d < x.rank(); ++d) inner *= x.shape[d];
  std::vector<int64_t> order(static_cast<size_t>(dim));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t q = 0; q < inner; ++q) {
      auto at = [&](int64_t j) { return get(x, (o * dim + j) * inner + q); };
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(),
                       [&](int64_t a, int64_t b) { return largest ? at(a) > at(b) : at(a) < at(b); });
      for (int64_t j = 0; j < k; ++j) {
        copy(x, (o * dim + order[j]) * inner + q, vals, (o * k + j) * inner + q);
        idx.i[(o * k + j) * inner + q] = order[j];
      }
    }
  c.out[0] = std::move(vals);
  if (c.wants(1)) c.out[1] = std::move(idx);
}

void k_unique(KernelContext& c) {
  const Tensor& x = c.input(0);
  const bool has_axis = c.node.has_attr("axis"), sorted = c.node.attr_int("sorted", 1) != 0;
  const int64_t axis = has_axis ? norm_axis(c, c.node.attr_int("axis", 0), x.rank()) : 0;
  const Shape shape = has_axis ? x.shape : Shape{x.size()};
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= shape[d];
  for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
  const int64_t n = shape[axis];
  auto slice = [&](int64_t j) {
    std::vector<double> v;
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t q = 0; q < inner; ++q) v.push_back(get(x, (o * n + j) * inner + q));
    return v;
  };
  std::vector<std::vector<double>> uniq;
  std::vector<int64_t> first, inverse(static_cast<size_t>(n)), counts;
  for (int64_t j = 0; j < n; ++j) {
    auto s = slice(j);
    auto it = std::find(uniq.begin(), uniq.end(), s);
    if (it == uniq.end()) {
      uniq.push_back(s), first.push_back(j), counts.push_back(0);
      it = uniq.end() - 1;
    }
    inverse[j] = it - uniq.begin();
    ++counts[it - uniq.begin()];
  }
  std::vector<int64_t> order(uniq.size());
  std::iota(order.begin(), order.end(), 0);
  if (sorted) std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return uniq[a] < uniq[b]; });
  std::vector<int64_t> rank_of(order.size());
  for (size_t r = 0; r < order.size(); ++r) rank_of[order[r]] = static_cast<int64_t>(r);
  const auto u = static_cast<int64_t>(uniq.size());
  Shape ys = shape;
  ys[axis] = u;
  Tensor y(x.dtype, ys), ind(DataType::kInt64, {u}), inv(DataType::kInt64, {n}), cnt(DataType::kInt64, {u});
  for (int64_t r = 0; r < u; ++r) {
    const auto& s = uniq[order[r]];
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t q = 0; q < inner; ++q) set(y, (o * u + r) * inner + q, s[o * inner + q]);
    ind.i[r] = first[order[r]];
    cnt.i[r] = counts[order[r]];
  }
  for (int64_t j = 0; j < n; ++j) inv.i[j] = rank_of[inverse[j]];
  c.out[0] = std::move(y);
  if (c.wants(1)) c.out[1] = std::move(ind);
  if (c.wants(2)) c.out[2] = std::move(inv);
  if (c.wants(3)) c.out[3] = std::move(cnt);
}

void k_reverse_sequence(KernelContext& c) {
  const Tensor& x = c.input(0);
  const Tensor& lens = c.input(1);
  const int64_t ba = c.node.attr_int("batch_axis", 1), ta = c.node.attr_int("time_axis", 0);
  const auto st = strides_of(x.shape);
  Tensor y = x;
  for (int64_t k = 0; k < x.size(); ++k) {
    const int64_t b = k / st[ba] % x.shape[ba], t = k / st[ta] % x.shape[ta];
    const int64_t len = lens.as_int(b);
    if (t < len) copy(x, k + (len - 1 - 2 * t) * st[ta], y, k);
  }
  c.out[0] = std::move(y);
}

void k_eye_like(KernelContext& c) {
  const Tensor& x = c.input(0);
  if (x.rank() != 2) c.fail("input must be 2-D");
  const auto dt = static_cast<DataType>(c.node.attr_int("dtype", static_cast<int64_t>(x.dtype)));
  if (!interpretable(dt)) c.fail("dtype " + std::string(to_string(dt)) + " is not computed with");
  const int64_t k = c.node.attr_int("k", 0);
  Tensor y(dt, x.shape);
  for (int64_t r = 0; r < x.shape[0]; ++r)
    if (r + k >= 0 && r + k < x.shape[1]) set(y, r * x.shape[1] + r + k, 1);
  c.out[0] = std::move(y);
}

// NLL over log-probabilities `p` [N, C, d...] at `target` [N, d...]; writes output 0.
void nll(KernelContext& c, const Tensor& p, const Tensor& target, const Tensor* weight) {
  const int64_t n = p.shape[0], cls = p.shape[1];
  const int64_t inner = p.size() / std::max<int64_t>(n * cls, 1);
  const bool ignore = c.node.has_attr("ignore_index");
  const int64_t ignore_index = c.node.attr_int("ignore_index", 0);
  const std::string red = c.node.attr_string("reduction", "mean");
  Tensor loss(p.dtype, target.shape);
  double sum = 0, wsum = 0;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t q = 0; q < inner; ++q) {
      const int64_t t = target.as_int(b * inner + q);
      if (ignore && t == ignore_index) continue;
      if (t < 0 || t >= cls)
        c.fail("target " + std::to_string(t) + " is out of range for " + std::to_string(cls) + " classes");
      const double w = weight ? weight->f[t] : 1.0;
      const double l = -double(p.f[(b * cls + t) * inner + q]) * w;
      loss.f[b * inner + q] = static_cast<float>(l);
      sum += l, wsum += w;
    }
  if (red == "none") {
    c.out[0] = std::move(loss);
  } else if (red == "sum") {
    c.out[0] = Tensor(p.dtype, {}), c.out[0].f[0] = static_cast<float>(sum);
  } else if (red == "mean") {
    c.out[0] = Tensor(p.dtype, {}), c.out[0].f[0] = static_cast<float>(wsum != 0 ? sum / wsum : 0.0);
  } else {
    c.fail("reduction '" + red + "' is not none, sum or mean");
  }
}

void k_nll_loss(KernelContext& c) { nll(c, c.finput(0), c.input(1), c.has(2) ? &c.finput(2) : nullptr); }

void k_softmax_cross_entropy(KernelContext& c) {
  const Tensor& s = c.finput(0);
  const int64_t n = s.shape[0], cls = s.shape[1];
  const int64_t inner = s.size() / std::max<int64_t>(n * cls, 1);
  Tensor lp(s.dtype, s.shape);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t q = 0; q < inner; ++q) {
      double mx = -INFINITY, sum = 0;
      for (int64_t j = 0; j < cls; ++j) mx = std::max(mx, double(s.f[(b * cls + j) * inner + q]));
      for (int64_t j = 0; j < cls; ++j) sum += std::exp(double(s.f[(b * cls + j) * inner + q]) - mx);
      for (int64_t j = 0; j < cls; ++j)
        lp.f[(b * cls + j) * inner + q] =
            static_cast<float>(double(s.f[(b * cls + j) * inner + q]) - mx - std::log(sum));
    }
  nll(c, lp, c.input(1), c.has(2) ? &c.finput(2) : nullptr);
  if (c.wants(1)) c.out[1] = std::move(lp);
}

void k_det(KernelContext& c) {
  const Tensor& x = c.finput(0);
  const int64_t m = x.shape.back();
  if (x.rank() < 2 || x.shape[x.rank() - 2] != m) c.fail("input must be [..., M, M]");
  Shape os(x.shape.begin(), x.shape.end() - 2);
  Tensor y(x.dtype, os);
  for (int64_t b = 0; b < y.size(); ++b) {
    std::vector<double> a(x.f.begin() + b * m * m, x.f.begin() + (b + 1) * m * m);
    double det = 1;
    for (int64_t col = 0; col < m; ++col) {
      int64_t piv = col;
      for (int64_t r = col + 1; r < m; ++r)
        if (std::fabs(a[r * m + col]) > std::fabs(a[piv * m + col])) piv = r;
      if (a[piv * m + col] == 0) {
        det = 0;
        break;
      }
      if (piv != col) {
        for (int64_t j = 0; j < m; ++j) std::swap(a[piv * m + j], a[col * m + j]);
        det = -det;
      }
      det *= a[col * m + col];
      for (int64_t r = col + 1; r < m; ++r) {
        const double f = a[r * m + col] / a[col * m + col];
        for (int64_t j = col; j < m; ++j) a[r * m + j] -= f * a[col * m + j];
      }
    }
    y.f[b] = static_cast<float>(det);
  }
  c.out[0] = std::move(y);
}

// Hann / Hamming / Blackman windows: a0 - a1 cos(2 pi n / N') + a2 cos(4 pi n / N').
template <int kKind>
void k_window(KernelContext& c) {
  const int64_t size = c.iscalar(0);
  const bool periodic = c.node.attr_int("periodic", 1) != 0;
  const auto dt = static_cast<DataType>(c.node.attr_int("output_datatype", 1));
  if (!interpretable(dt)) c.fail("output_datatype " + std::string(to_string(dt)) + " is not computed with");
  const double a0 = kKind == 0   ? 0.5
                    : kKind == 1 ? 25.0 / 46.0
                                 : 0.42,
               a1 = kKind == 0   ? 0.5
                    : kKind == 1 ? 21.0 / 46.0
                                 : 0.5,
               a2 = kKind == 2 ? 0.08 : 0.0;
  const double denom = static_cast<double>(periodic ? size : size - 1);
  Tensor y(dt, {size});
  for (int64_t k = 0; k < size; ++k) {
    const double ph = 2.0 * M_PI * static_cast<double>(k) / denom;
    set(y, k, a0 - a1 * std::cos(ph) + a2 * std::cos(2 * ph));
  }
  c.out[0] = std::move(y);
}

void k_mvn(KernelContext& c) {
  const Tensor& x = c.finput(0);
  std::vector<int64_t> axes = c.node.attr_ints("axes", {0, 2, 3});
  for (auto& a : axes) a = norm_axis(c, a, x.rank());
  const auto st = strides_of(x.shape);
  auto key = [&](int64_t k) {
    int64_t r = 0;
    for (int64_t d = 0; d < x.rank(); ++d)
      if (std::find(axes.begin(), axes.end(), d) == axes.end()) r = r * x.shape[d] + k / st[d] % x.shape[d];
    return r;
  };
  int64_t groups = 1, per = 1;
  for (int64_t d = 0; d < x.rank(); ++d)
    (std::find(axes.begin(), axes.end(), d) == axes.end() ? groups : per) *= x.shape[d];
  std::vector<double> mean(static_cast<size_t>(groups)), sq(static_cast<size_t>(groups));
  for (int64_t k = 0; k < x.size(); ++k) mean[key(k)] += x.f[k], sq[key(k)] += double(x.f[k]) * x.f[k];
  Tensor y(x.dtype, x.shape);
  for (int64_t k = 0; k < x.size(); ++k) {
    const double m = mean[key(k)] / per, var = sq[key(k)] / per - m * m;
    y.f[k] = static_cast<float>((x.f[k] - m) / (std::sqrt(std::max(var, 0.0)) + 1e-9));
  }
  c.out[0] = std::move(y);
}

// Einsum: every output element sums the product of the operands over the labels the output lacks.
// "..." stands for the leading dims an operand has beyond its labels (the same for every operand).
void k_einsum(KernelContext& c) {
  std::string eq;
  for (char ch : c.node.attr_string("equation", ""))
    if (ch != ' ') eq += ch;
  const size_t arrow = eq.find("->");
  std::vector<std::string> terms;
  std::string lhs = eq.substr(0, arrow);
  for (size_t p = 0;;) {
    const size_t q = lhs.find(',', p);
    terms.push_back(lhs.substr(p, q == std::string::npos ? std::string::npos : q - p));
    if (q == std::string::npos) break;
    p = q + 1;
  }
  if (terms.size() != c.in.size()) c.fail("the equation names " + std::to_string(terms.size()) + " operands");
  // "..." becomes upper-case labels (the equation's own labels are letters; ONNX's tests use lower case).
  int ell = -1;
  for (size_t k = 0; k < terms.size(); ++k) {
    const size_t e = terms[k].find("...");
    if (e == std::string::npos) continue;
    const int n = static_cast<int>(c.input(k).rank()) - static_cast<int>(terms[k].size() - 3);
    ell = std::max(ell, n);
    std::string dots;
    for (int j = 0; j < n; ++j) dots += static_cast<char>('Z' - (n - 1 - j));
    terms[k] = terms[k].substr(0, e) + dots + terms[k].substr(e + 3);
  }
  std::string out;
  if (arrow != std::string::npos) {
    out = eq.substr(arrow + 2);
    if (const size_t e = out.find("..."); e != std::string::npos) {
      std::string dots;
      for (int j = 0; j < ell; ++j) dots += static_cast<char>('Z' - (ell - 1 - j));
      out = out.substr(0, e) + dots + out.substr(e + 3);
    }
  } else {
    std::map<char, int> seen;
    for (const auto& t : terms)
      for (char ch : t) ++seen[ch];
    for (int j = 0; j < ell; ++j) out += static_cast<char>('Z' - (ell - 1 - j));
    for (const auto& [ch, n] : seen)
      if (n == 1 && std::islower(static_cast<unsigned char>(ch))) out += ch;
  }
  std::map<char, int64_t> size;
  for (size_t k = 0; k < terms.size(); ++k) {
    if (static_cast<int64_t>(terms[k].size()) != c.input(k).rank())
      c.fail("operand " + std::to_string(k) + " does not have the equation's rank");
    for (size_t d = 0; d < terms[k].size(); ++d) size[terms[k][d]] = c.input(k).shape[d];
  }
  std::string labels = out;
  for (const auto& [ch, n] : size)
    if (out.find(ch) == std::string::npos) labels += ch;
  Shape os;
  for (char ch : out) os.push_back(size[ch]);
  Tensor y(c.input(0).dtype, os);
  std::vector<int64_t> idx(labels.size(), 0);
  std::map<char, size_t> pos;
  for (size_t j = 0; j < labels.size(); ++j) pos[labels[j]] = j;
  int64_t total = 1;
  for (char ch : labels) total *= size[ch];
  const int64_t per_out = std::max<int64_t>(1, total / std::max<int64_t>(1, y.size()));
  for (int64_t it = 0; it < total; ++it) {
    int64_t rem = it;
    for (int64_t j = static_cast<int64_t>(labels.size()) - 1; j >= 0; --j)
      idx[j] = rem % size[labels[j]], rem /= size[labels[j]];
    double prod = 1;
    for (size_t k = 0; k < terms.size(); ++k) {
      int64_t off = 0;
      for (char ch : terms[k]) off = off * size[ch] + idx[pos[ch]];
      prod *= get(c.input(k), off);
    }
    const int64_t o = it / per_out;
    set(y, o, get(y, o) + prod);
  }
  c.out[0] = std::move(y);
}

}  // namespace

// ONNX TfIdfVectorizer over integer tokens (pool_int64s; string pools are out of scope): per row of X
// ([N] or [B, N]), how often each n-gram of the pool occurs, n from min_gram_length to max_gram_length,
// its items skip_distance = 1 .. max_skip_count + 1 apart (unigrams counted once), at the output index
// ngram_indexes gives it; mode TF the counts, IDF the weight of each n-gram present, TFIDF count x weight
// (weights default to 1). The pool lists the n-grams by length: those of length n start at item
// ngram_counts[n - 1].
void k_tfidf_vectorizer(KernelContext& c) {
  const Tensor& x = c.input(0);
  if (x.floating() || x.rank() < 1 || x.rank() > 2) c.fail("X must be integer tokens, [N] or [B, N]");
  const int64_t min_n = c.node.attr_int("min_gram_length", 1), max_n = c.node.attr_int("max_gram_length", 1);
  const int64_t max_skip = c.node.attr_int("max_skip_count", 0);
  const std::string mode = c.node.attr_string("mode", "TF");
  const auto counts = c.node.attr_ints("ngram_counts"), indexes = c.node.attr_ints("ngram_indexes");
  const auto pool = c.node.attr_ints("pool_int64s");
  auto weights = c.node.attr_floats("weights");
  if (pool.empty()) c.fail("only integer pools (pool_int64s) are computed");
  if (min_n < 1 || max_n < min_n || max_skip < 0) c.fail("gram lengths or max_skip_count out of range");
  if (mode != "TF" && mode != "IDF" && mode != "TFIDF") c.fail("mode '" + mode + "' is not defined");
  if (weights.empty()) weights.assign(indexes.size(), 1.0f);
  if (weights.size() != indexes.size()) c.fail("weights must have one value per n-gram");
  // n-gram -> its output index.
  std::map<std::vector<int64_t>, int64_t> grams;
  size_t gram = 0;
  for (size_t len = 1; len <= counts.size(); ++len) {
    const auto from = static_cast<size_t>(counts[len - 1]);
    const size_t to = len < counts.size() ? static_cast<size_t>(counts[len]) : pool.size();
    if (from > to || to > pool.size() || (to - from) % len != 0) c.fail("ngram_counts do not split the pool");
    for (size_t k = from; k < to; k += len, ++gram) {
      if (gram >= indexes.size()) c.fail("ngram_indexes has fewer entries than the pool has n-grams");
      grams[std::vector<int64_t>(pool.begin() + static_cast<std::ptrdiff_t>(k),
                                 pool.begin() + static_cast<std::ptrdiff_t>(k + len))] = gram;
    }
  }
  const int64_t C = indexes.empty() ? 0 : *std::max_element(indexes.begin(), indexes.end()) + 1;
  const int64_t rows = x.rank() == 2 ? x.shape[0] : 1, len = x.shape.back();
  std::vector<int64_t> hits(static_cast<size_t>(rows * C), 0);
  std::vector<int64_t> seq;
  const auto count = [&](int64_t row) {
    auto it = grams.find(seq);
    if (it != grams.end()) ++hits[static_cast<size_t>(row * C + indexes[static_cast<size_t>(it->second)])];
  };
  for (int64_t row = 0; row < rows; ++row) {
    const auto item = [&](int64_t k) { return x.i[static_cast<size_t>(row * len + k)]; };
    for (int64_t n = min_n; n <= max_n; ++n) {
      for (int64_t d = 1; d <= (n == 1 ? 1 : max_skip + 1); ++d) {
        for (int64_t start = 0; start + (n - 1) * d < len; ++start) {
          seq.clear();
          for (int64_t k = 0; k < n; ++k) seq.push_back(item(start + k * d));
          count(row);
        }
      }
    }
  }
  Tensor y(DataType::kFloat32, x.rank() == 2 ? Shape{rows, C} : Shape{C});
  std::vector<float> weight_at(static_cast<size_t>(C), 1.0f);
  for (size_t g = 0; g < indexes.size(); ++g) weight_at[static_cast<size_t>(indexes[g])] = weights[g];
  for (size_t k = 0; k < hits.size(); ++k) {
    const float w = weight_at[k % static_cast<size_t>(C)];
    const auto h = static_cast<float>(hits[k]);
    y.f[k] = mode == "TF" ? h : mode == "IDF" ? (hits[k] > 0 ? w : 0.0f) : h * w;
  }
  c.out[0] = std::move(y);
}

void register_index(KernelTable& t) {
  t["Einsum"] = k_einsum;
  t["ScatterElements"] = k_scatter_elements;
  t["Scatter"] = k_scatter_elements;
  t["ScatterND"] = k_scatter_nd;
  t["GatherND"] = k_gather_nd;
  t["OneHot"] = k_one_hot;
  t["Compress"] = k_compress;
  t["NonZero"] = k_non_zero;
  t["TopK"] = k_top_k;
  t["Unique"] = k_unique;
  t["ReverseSequence"] = k_reverse_sequence;
  t["EyeLike"] = k_eye_like;
  t["NegativeLogLikelihoodLoss"] = k_nll_loss;
  t["SoftmaxCrossEntropyLoss"] = k_softmax_cross_entropy;
  t["Det"] = k_det;
  t["TfIdfVectorizer"] = k_tfidf_vectorizer;
  t["HannWindow"] = k_window<0>;
  t["HammingWindow"] = k_window<1>;
  t["BlackmanWindow"] = k_window<2>;
  t["MeanVarianceNormalization"] = k_mvn;
}

}  // namespace npusim::compiler::interp
