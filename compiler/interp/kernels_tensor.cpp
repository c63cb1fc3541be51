// Data-movement and shape kernels.
#include <algorithm>
#include <cmath>

#include "compiler/interp/kernels.h"
#include "isa/ceil_div.h"

namespace npusim::compiler::interp {
namespace {

// Copies element `from` of `src` to element `to` of `dst` (same dtype family).
inline void copy_elem(const Tensor& src, int64_t from, Tensor& dst, int64_t to) {
  if (src.floating())
    dst.f[to] = src.f[from];
  else
    dst.i[to] = src.i[from];
}

Tensor with_shape(const Tensor& x, Shape s) {
  Tensor t = x;
  t.shape = std::move(s);
  return t;
}

void k_identity(KernelContext& c) { c.out[0] = c.input(0); }

void k_dropout(KernelContext& c) {
  const Tensor& x = c.input(0);
  const bool training = c.opset >= 12 && c.has(2) && c.iscalar(2) != 0;
  const double ratio =
      c.opset >= 12 ? (c.has(1) ? c.input(1).as_double(0) : 0.5) : c.node.attr_float("ratio", 0.5f);
  if (training && ratio != 0.0)
    c.fail("training-mode dropout is random; the interpreter runs inference only");
  c.out[0] = x;
  if (c.wants(1)) {
    Tensor m(DataType::kBool, x.shape);
    std::fill(m.i.begin(), m.i.end(), 1);
    c.out[1] = std::move(m);
  }
}

void k_reshape(KernelContext& c) {
  const Tensor& x = c.input(0);
  Shape s;
  if (c.opset < 5)
    s = c.node.attr_ints("shape", {});
  else
    s = c.input(1).to_int_vector();
  const bool allowzero = c.node.attr_int("allowzero", 0) != 0;
  int64_t infer = -1, known = 1;
  for (size_t d = 0; d < s.size(); ++d) {
    if (s[d] == 0 && !allowzero) {
      if (d >= x.shape.size())
        c.fail("shape copies dimension " + std::to_string(d) + " the input does not have");
      s[d] = x.shape[d];
    }
    if (s[d] == -1) {
      if (infer >= 0) c.fail("shape has more than one -1");
      infer = static_cast<int64_t>(d);
    } else if (s[d] < 0) {
      c.fail("shape has a negative dimension");
    } else {
      known *= s[d];
    }
  }
  if (infer >= 0) {
    if (known == 0 || x.size() % known != 0)
      c.fail("cannot infer the -1 dimension for " + shape_to_string(x.shape));
    s[infer] = x.size() / known;
  }
  if (num_elements(s) != x.size())
    c.fail("cannot reshape " + shape_to_string(x.shape) + " to " + shape_to_string(s));
  c.out[0] = with_shape(x, s);
}

void k_flatten(KernelContext& c) {
  const Tensor& x = c.input(0);
  int64_t axis = c.node.attr_int("axis", 1);
  if (axis < 0) axis += x.rank();
  if (axis < 0 || axis > x.rank()) c.fail("axis out of range");
  int64_t a = 1;
  for (int64_t d = 0; d < axis; ++d) a *= x.shape[d];
  c.out[0] = with_shape(x, {a, a == 0 ? 0 : x.size() / std::max<int64_t>(a, 1)});
  if (a == 0) {
    int64_t b = 1;
    for (int64_t d = axis; d < x.rank(); ++d) b *= x.shape[d];
    c.out[0].shape = {0, b};
  }
}

std::vector<int64_t> axes_arg(KernelContext& c, size_t input_index, bool& given) {
  given = false;
  if (c.opset >= 13) {
    if (c.has(input_index)) {
      given = true;
      return c.input(input_index).to_int_vector();
    }
    return {};
  }
  if (c.node.has_attr("axes")) {
    given = true;
    return c.node.attr_ints("axes");
  }
  return {};
}

void k_squeeze(KernelContext& c) {
  const Tensor& x = c.input(0);
  bool given;
  auto axes = axes_arg(c, 1, given);
  std::vector<bool> drop(x.rank(), false);
  if (!given || axes.empty()) {
    for (int64_t d = 0; d < x.rank(); ++d) drop[d] = x.shape[d] == 1;
  } else {
    for (int64_t a : axes) {
      a = norm_axis(c, a, x.rank());
      if (x.shape[a] != 1)
        c.fail("cannot squeeze dimension " + std::to_string(a) + " of size " + std::to_string(x.shape[a]));
      drop[a] = true;
    }
  }
  Shape s;
  for (int64_t d = 0; d < x.rank(); ++d)
    if (!drop[d]) s.push_back(x.shape[d]);
  c.out[0] = with_shape(x, s);
}

void k_unsqueeze(KernelContext& c) {
  const Tensor& x = c.input(0);
  bool given;
  auto axes = axes_arg(c, 1, given);
  const int64_t r = x.rank() + static_cast<int64_t>(axes.size());
  std::vector<bool> ins(r, false);
  for (int64_t a : axes) {
    a = norm_axis(c, a, r);
    if (ins[a]) c.fail("axis repeated");
    ins[a] = true;
  }
  Shape s;
  size_t k = 0;
  for (int64_t d = 0; d < r; ++d) s.push_back(ins[d] ? 1 : x.shape[k++]);
  c.out[0] = with_shape(x, s);
}

void k_transpose(KernelContext& c) {
  const Tensor& x = c.input(0);
  const int64_t r = x.rank();
  std::vector<int64_t> perm = c.node.attr_ints("perm", {});
  if (perm.empty())
    for (int64_t d = r - 1; d >= 0; --d) perm.push_back(d);
  if (static_cast<int64_t>(perm.size()) != r) c.fail("perm has the wrong length");
  Shape os(r);
  for (int64_t d = 0; d < r; ++d) os[d] = x.shape[norm_axis(c, perm[d], r)];
  Tensor y(x.dtype, os);
  auto xs = dense_strides(x.shape);
  std::vector<int64_t> st(r);  // input stride for each output dim
  for (int64_t d = 0; d < r; ++d) st[d] = xs[norm_axis(c, perm[d], r)];
  std::vector<int64_t> idx(r, 0);
  int64_t off = 0;
  for (int64_t o = 0; o < y.size(); ++o) {
    copy_elem(x, off, y, o);
    for (int64_t d = r - 1; d >= 0; --d) {
      ++idx[d];
      off += st[d];
      if (idx[d] < os[d]) break;
      off -= st[d] * os[d];
      idx[d] = 0;
    }
  }
  c.out[0] = std::move(y);
}

void k_shape(KernelContext& c) {
  const Tensor& x = c.input(0);
  int64_t r = x.rank();
  int64_t start = c.node.attr_int("start", 0), end = c.node.attr_int("end", r);
  if (start < 0) start += r;
  if (end < 0) end += r;
  start = std::clamp<int64_t>(start, 0, r);
  end = std::clamp<int64_t>(end, start, r);
  std::vector<int64_t> v(x.shape.begin() + start, x.shape.begin() + end);
  c.out[0] = Tensor::from_ints(DataType::kInt64, {static_cast<int64_t>(v.size())}, v);
}

void k_size(KernelContext& c) { c.out[0] = Tensor::scalar_int(DataType::kInt64, c.input(0).size()); }

void k_constant(KernelContext& c) {
  const Node& n = c.node;
  if (n.has_attr("value")) {
    c.out[0] = n.attrs.at("value").t();
  } else if (n.has_attr("value_float")) {
    c.out[0] = Tensor::scalar_float(n.attr_float("value_float", 0));
  } else if (n.has_attr("value_floats")) {
    auto v = n.attr_floats("value_floats");
    c.out[0] = Tensor::from_floats({static_cast<int64_t>(v.size())}, v);
  } else if (n.has_attr("value_int")) {
    c.out[0] = Tensor::scalar_int(DataType::kInt64, n.attr_int("value_int", 0));
  } else if (n.has_attr("value_ints")) {
    auto v = n.attr_ints("value_ints");
    c.out[0] = Tensor::from_ints(DataType::kInt64, {static_cast<int64_t>(v.size())}, v);
  } else {
    c.fail("has no supported value attribute (sparse and string constants are not supported)");
  }
  if (!interpretable(c.out[0].dtype))
    c.fail("constant of type " + std::string(to_string(c.out[0].dtype)) + " is not supported");
}

void k_constant_of_shape(KernelContext& c) {
  Shape s = c.input(0).to_int_vector();
  Tensor v = c.node.has_attr("value") ? c.node.attrs.at("value").t() : Tensor::scalar_float(0.0f);
  if (!interpretable(v.dtype))
    c.fail("value of type " + std::string(to_string(v.dtype)) + " is not supported");
  Tensor y(v.dtype, s);
  if (v.floating())
    std::fill(y.f.begin(), y.f.end(), v.f.at(0));
  else
    std::fill(y.i.begin(), y.i.end(), v.i.at(0));
  c.out[0] = std::move(y);
}

void k_concat(KernelContext& c) {
  const Tensor& first = c.input(0);
  const int64_t axis = norm_axis(c, c.node.attr_int("axis", 0), first.rank());
  Shape os = first.shape;
  os[axis] = 0;
  for (size_t k = 0; k < c.in.size(); ++k) {
    const Tensor& t = c.input(k);
    if (t.rank() != first.rank() || t.dtype != first.dtype) c.fail("inputs differ in rank or type");
    for (int64_t d = 0; d < t.rank(); ++d)
      if (d != axis && t.shape[d] != first.shape[d]) c.fail("input shapes differ outside the concat axis");
    os[axis] += t.shape[axis];
  }
  Tensor y(first.dtype, os);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= os[d];
  for (int64_t d = axis + 1; d < first.rank(); ++d) inner *= os[d];
  int64_t at = 0;
  for (size_t k = 0; k < c.in.size(); ++k) {
    const Tensor& t = c.input(k);
    const int64_t chunk = t.shape[axis] * inner;
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t q = 0; q < chunk; ++q) copy_elem(t, o * chunk + q, y, o * os[axis] * inner + at + q);
    at += chunk;
  }
  c.out[0] = std::move(y);
}

void k_split(KernelContext& c) {
  const Tensor& x = c.input(0);
  const int64_t axis = norm_axis(c, c.node.attr_int("axis", 0), x.rank());
  const int64_t nout = static_cast<int64_t>(c.node.outputs.size());
  std::vector<int64_t> sizes;
  if (c.opset >= 13 && c.has(1))
    sizes = c.input(1).to_int_vector();
  else if (c.opset < 13)
    sizes = c.node.attr_ints("split", {});
  if (sizes.empty()) {
    const int64_t each = ceil_div(x.shape[axis], nout);  // last part smaller when uneven
    for (int64_t k = 0; k < nout; ++k) sizes.push_back(std::min(each, x.shape[axis] - k * each));
  }
  if (static_cast<int64_t>(sizes.size()) != nout) c.fail("split sizes do not match the number of outputs");
  int64_t total = 0;
  for (int64_t s : sizes) total += s;
  if (total != x.shape[axis]) c.fail("split sizes do not add up to the axis length");
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x.shape[d];
  for (int64_t d = axis + 1; d < x.rank(); ++d) inner *= x.shape[d];
  int64_t at = 0;
  for (int64_t k = 0; k < nout; ++k) {
    Shape s = x.shape;
    s[axis] = sizes[k];
    Tensor y(x.dtype, s);
    const int64_t chunk = sizes[k] * inner;
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t q = 0; q < chunk; ++q) copy_elem(x, o * x.shape[axis] * inner + at + q, y, o * chunk + q);
    at += chunk;
    c.out[k] = std::move(y);
  }
}

void k_slice(KernelContext& c) {
  const Tensor& x = c.input(0);
  const int64_t r = x.rank();
  std::vector<int64_t> starts, ends, axes, steps;
  if (c.opset < 10) {
    starts = c.node.attr_ints("starts");
    ends = c.node.attr_ints("ends");
    axes = c.node.attr_ints("axes", {});
  } else {
    starts = c.input(1).to_int_vector();
    ends = c.input(2).to_int_vector();
    if (c.has(3)) axes = c.input(3).to_int_vector();
    if (c.has(4)) steps = c.input(4).to_int_vector();
  }
  if (axes.empty())
    for (size_t k = 0; k < starts.size(); ++k) axes.push_back(static_cast<int64_t>(k));
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    c.fail("starts, ends, axes and steps differ in length");
  std::vector<int64_t> st(r, 0), step(r, 1), len(r);
  for (int64_t d = 0; d < r; ++d) len[d] = x.shape[d];
  for (size_t k = 0; k < starts.size(); ++k) {
    const int64_t a = norm_axis(c, axes[k], r), dim = x.shape[a];
    const int64_t s = steps[k];
    if (s == 0) c.fail("step is zero");
    int64_t b = starts[k], e = ends[k];
    if (b < 0) b += dim;
    if (e < 0) e += dim;
    if (s > 0) {
      b = std::clamp<int64_t>(b, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
      len[a] = e > b ? ceil_div(e - b, s) : 0;
    } else {
      b = std::clamp<int64_t>(b, 0, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
      len[a] = b > e ? ceil_div(b - e, -s) : 0;
    }
    st[a] = b;
    step[a] = s;
  }
  Tensor y(x.dtype, len);
  auto xs = dense_strides(x.shape);
  std::vector<int64_t> idx(r, 0);
  for (int64_t o = 0; o < y.size(); ++o) {
    int64_t off = 0;
    for (int64_t d = 0; d < r; ++d) off += (st[d] + idx[d] * step[d]) * xs[d];
    copy_elem(x, off, y, o);
    for (int64_t d = r - 1; d >= 0; --d) {
      if (++idx[d] < len[d]) break;
      idx[d] = 0;
    }
  }
  c.out[0] = std::move(y);
}

void k_gather(KernelContext& c) {
  const Tensor& x = c.input(0);
  const Tensor& ind = c.input(1);
  const int64_t axis = norm_axis(c, c.node.attr_int("axis", 0), x.rank());
  Shape os(x.shape.begin(), x.shape.begin() + axis);
  os.insert(os.end(), ind.shape.begin(), ind.shape.end());
  os.insert(os.end(), x.shape.begin() + axis + 1, x.shape.end());
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x.shape[d];
  for (int64_t d = axis + 1; d < x.rank(); ++d) inner *= x.shape[d];
  const int64_t dim = x.shape[axis], ni = ind.size();
  Tensor y(x.dtype, os);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < ni; ++j) {
      int64_t i = ind.as_int(j);
      if (i < 0) i += dim;
      if (i < 0 || i >= dim)
        c.fail("index " + std::to_string(ind.as_int(j)) + " is out of range for size " + std::to_string(dim));
      for (int64_t q = 0; q < inner; ++q)
        copy_elem(x, (o * dim + i) * inner + q, y, (o * ni + j) * inner + q);
    }
  c.out[0] = std::move(y);
}

void k_gather_elements(KernelContext& c) {
  const Tensor& x = c.input(0);
  const Tensor& ind = c.input(1);
  const int64_t axis = norm_axis(c, c.node.attr_int("axis", 0), x.rank());
  if (ind.rank() != x.rank()) c.fail("indices must have the data's rank");
  Tensor y(x.dtype, ind.shape);
  auto xs = dense_strides(x.shape);
  std::vector<int64_t> idx(ind.rank(), 0);
  for (int64_t o = 0; o < y.size(); ++o) {
    int64_t off = 0;
    for (int64_t d = 0; d < ind.rank(); ++d) {
      int64_t v = idx[d];
      if (d == axis) {
        v = ind.as_int(o);
        if (v < 0) v += x.shape[axis];
        if (v < 0 || v >= x.shape[axis]) c.fail("index out of range");
      }
      off += v * xs[d];
    }
    copy_elem(x, off, y, o);
    for (int64_t d = ind.rank() - 1; d >= 0; --d) {
      if (++idx[d] < ind.shape[d]) break;
      idx[d] = 0;
    }
  }
  c.out[0] = std::move(y);
}

void k_pad(KernelContext& c) {
  const Tensor& x = c.input(0);
  const int64_t r = x.rank();
  std::vector<int64_t> pads;
  double value = 0;
  if (c.opset < 11) {
    pads = c.node.attr_ints("pads", {});
    value = c.node.attr_float("value", 0.0f);
  } else {
    pads = c.input(1).to_int_vector();
    if (c.has(2) && c.input(2).size() > 0) value = c.input(2).as_double(0);
  }
  if (static_cast<int64_t>(pads.size()) != 2 * r) c.fail("pads must have 2 x rank values");
  const std::string mode = c.node.attr_string("mode", "constant");
  if (mode != "constant" && mode != "reflect" && mode != "edge") c.fail("unsupported mode '" + mode + "'");
  Shape os(r);
  for (int64_t d = 0; d < r; ++d) {
    os[d] = x.shape[d] + pads[d] + pads[r + d];
    if (os[d] < 0) c.fail("negative output size");
    if (mode == "reflect" && x.shape[d] < 2 && (pads[d] > 0 || pads[r + d] > 0))
      c.fail("reflect needs size >= 2");
  }
  Tensor y(x.dtype, os);
  auto xs = dense_strides(x.shape);
  std::vector<int64_t> idx(r, 0);
  for (int64_t o = 0; o < y.size(); ++o) {
    int64_t off = 0;
    bool outside = false;
    for (int64_t d = 0; d < r; ++d) {
      int64_t i = idx[d] - pads[d];
      const int64_t n = x.shape[d];
      if (i < 0 || i >= n) {
        if (mode == "constant") {
          outside = true;
          break;
        }
        if (mode == "edge") {
          i = std::clamp<int64_t>(i, 0, n - 1);
        } else {  // reflect without repeating the edge
          const int64_t period = 2 * (n - 1);
          i = ((i % period) + period) % period;
          if (i >= n) i = period - i;
        }
      }
      off += i * xs[d];
    }
    if (outside) {
      if (y.floating())
        y.f[o] = static_cast<float>(value);
      else
        y.i[o] = static_cast<int64_t>(value);
    } else {
      copy_elem(x, off, y, o);
    }
    for (int64_t d = r - 1; d >= 0; --d) {
      if (++idx[d] < os[d]) break;
      idx[d] = 0;
    }
  }
  c.out[0] = std::move(y);
}

void k_expand(KernelContext& c) {
  const Tensor& x = c.input(0);
  Shape target = c.input(1).to_int_vector();
  Shape os = broadcast_shapes(c, x.shape, target);
  Tensor y(x.dtype, os);
  std::array<const Shape*, 1> sh{&x.shape};
  broadcast_loop<1>(os, sh, [&](int64_t o, const std::array<int64_t, 1>& p) { copy_elem(x, p[0], y, o); });
  c.out[0] = std::move(y);
}

void k_tile(KernelContext& c) {
  const Tensor& x = c.input(0);
  auto reps = c.input(1).to_int_vector();
  const int64_t r = x.rank();
  if (static_cast<int64_t>(reps.size()) != r) c.fail("repeats must have one value per dimension");
  Shape os(r);
  for (int64_t d = 0; d < r; ++d) os[d] = x.shape[d] * reps[d];
  Tensor y(x.dtype, os);
  auto xs = dense_strides(x.shape);
  std::vector<int64_t> idx(r, 0);
  for (int64_t o = 0; o < y.size(); ++o) {
    int64_t off = 0;
    for (int64_t d = 0; d < r; ++d) off += (idx[d] % x.shape[d]) * xs[d];
    copy_elem(x, off, y, o);
    for (int64_t d = r - 1; d >= 0; --d) {
      if (++idx[d] < os[d]) break;
      idx[d] = 0;
    }
  }
  c.out[0] = std::move(y);
}

void k_range(KernelContext& c) {
  const Tensor& s = c.input(0);
  if (s.floating()) {
    const double start = c.scalar(0), limit = c.scalar(1), delta = c.scalar(2);
    if (delta == 0) c.fail("delta is zero");
    const int64_t n = std::max<int64_t>(0, static_cast<int64_t>(std::ceil((limit - start) / delta)));
    Tensor y(s.dtype, {n});
    for (int64_t k = 0; k < n; ++k) y.f[k] = static_cast<float>(start + k * delta);
    c.out[0] = std::move(y);
  } else {
    const int64_t start = c.iscalar(0), limit = c.iscalar(1), delta = c.iscalar(2);
    if (delta == 0) c.fail("delta is zero");
    const int64_t n =
        std::max<int64_t>(0, static_cast<int64_t>(std::ceil(static_cast<double>(limit - start) / delta)));
    Tensor y(s.dtype, {n});
    for (int64_t k = 0; k < n; ++k) y.i[k] = start + k * delta;
    c.out[0] = std::move(y);
  }
}

void k_trilu(KernelContext& c) {
  const Tensor& x = c.input(0);
  if (x.rank() < 2) c.fail("input must have rank >= 2");
  const int64_t k = c.has(1) ? c.input(1).as_int(0) : 0;
  const bool upper = c.node.attr_int("upper", 1) != 0;
  const int64_t rows = x.shape[x.rank() - 2], cols = x.shape[x.rank() - 1];
  Tensor y = x;
  for (int64_t b = 0; b < x.size() / std::max<int64_t>(1, rows * cols); ++b)
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) {
        const bool keep = upper ? j - i >= k : j - i <= k;
        if (keep) continue;
        const int64_t at = (b * rows + i) * cols + j;
        if (y.floating())
          y.f[at] = 0;
        else
          y.i[at] = 0;
      }
  c.out[0] = std::move(y);
}

void k_depth_to_space(KernelContext& c) {
  const Tensor& x = c.input(0);
  if (x.rank() != 4) c.fail("input must be 4-D");
  const int64_t bs = c.node.attr_int("blocksize", 0);
  const bool crd = c.node.attr_string("mode", "DCR") == "CRD";
  const int64_t n = x.shape[0], ch = x.shape[1], h = x.shape[2], w = x.shape[3];
  if (bs <= 0 || ch % (bs * bs)) c.fail("channels must be a multiple of blocksize^2");
  const int64_t oc = ch / (bs * bs);
  Tensor y(x.dtype, {n, oc, h * bs, w * bs});
  int64_t o = 0;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t cc = 0; cc < oc; ++cc)
      for (int64_t yy = 0; yy < h * bs; ++yy)
        for (int64_t xx = 0; xx < w * bs; ++xx, ++o) {
          const int64_t by = yy % bs, bx = xx % bs;
          const int64_t ic = crd ? cc * bs * bs + by * bs + bx : (by * bs + bx) * oc + cc;
          copy_elem(x, ((b * ch + ic) * h + yy / bs) * w + xx / bs, y, o);
        }
  c.out[0] = std::move(y);
}

void k_space_to_depth(KernelContext& c) {
  const Tensor& x = c.input(0);
  if (x.rank() != 4) c.fail("input must be 4-D");
  const int64_t bs = c.node.attr_int("blocksize", 0);
  const int64_t n = x.shape[0], ch = x.shape[1], h = x.shape[2], w = x.shape[3];
  if (bs <= 0 || h % bs || w % bs) c.fail("height and width must be multiples of blocksize");
  Tensor y(x.dtype, {n, ch * bs * bs, h / bs, w / bs});
  for (int64_t b = 0; b < n; ++b)
    for (int64_t cc = 0; cc < ch; ++cc)
      for (int64_t yy = 0; yy < h; ++yy)
        for (int64_t xx = 0; xx < w; ++xx) {
          const int64_t oc = ((yy % bs) * bs + xx % bs) * ch + cc;
          copy_elem(x, ((b * ch + cc) * h + yy) * w + xx, y,
                    ((b * ch * bs * bs + oc) * (h / bs) + yy / bs) * (w / bs) + xx / bs);
        }
  c.out[0] = std::move(y);
}

void k_cumsum(KernelContext& c) {
  const Tensor& x = c.input(0);
  const int64_t axis = norm_axis(c, c.input(1).as_int(0), x.rank());
  const bool exclusive = c.node.attr_int("exclusive", 0) != 0, reverse = c.node.attr_int("reverse", 0) != 0;
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x.shape[d];
  for (int64_t d = axis + 1; d < x.rank(); ++d) inner *= x.shape[d];
  const int64_t dim = x.shape[axis];
  Tensor y(x.dtype, x.shape);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t q = 0; q < inner; ++q) {
      double accf = 0;
      int64_t acci = 0;
      for (int64_t s = 0; s < dim; ++s) {
        const int64_t k = reverse ? dim - 1 - s : s;
        const int64_t at = (o * dim + k) * inner + q;
        if (x.floating()) {
          if (exclusive) {
            y.f[at] = static_cast<float>(accf);
            accf += x.f[at];
          } else {
            accf += x.f[at];
            y.f[at] = static_cast<float>(accf);
          }
        } else {
          if (exclusive) {
            y.i[at] = acci;
            acci += x.i[at];
          } else {
            acci += x.i[at];
            y.i[at] = acci;
          }
        }
      }
    }
  c.out[0] = std::move(y);
}

}  // namespace

void register_tensor(KernelTable& t) {
  t["Identity"] = k_identity;
  t["Dropout"] = k_dropout;
  t["Reshape"] = k_reshape;
  t["Flatten"] = k_flatten;
  t["Squeeze"] = k_squeeze;
  t["Unsqueeze"] = k_unsqueeze;
  t["Transpose"] = k_transpose;
  t["Shape"] = k_shape;
  t["Size"] = k_size;
  t["Constant"] = k_constant;
  t["ConstantOfShape"] = k_constant_of_shape;
  t["Concat"] = k_concat;
  t["Split"] = k_split;
  t["Slice"] = k_slice;
  t["Gather"] = k_gather;
  t["GatherElements"] = k_gather_elements;
  t["Pad"] = k_pad;
  t["Expand"] = k_expand;
  t["Tile"] = k_tile;
  t["Range"] = k_range;
  t["Trilu"] = k_trilu;
  t["DepthToSpace"] = k_depth_to_space;
  t["SpaceToDepth"] = k_space_to_depth;
  t["CumSum"] = k_cumsum;
}

}  // namespace npusim::compiler::interp
