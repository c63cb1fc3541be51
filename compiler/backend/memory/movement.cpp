// Data movement helpers shared by the back end's lowerings.
#include "compiler/backend/memory/movement.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <stdexcept>

#include "isa/strides.h"

namespace npusim::compiler::backend {

using isa::Buffer;
using isa::VecOp;

Slots make_slots(Context& c, Buffer b, uint64_t base, int64_t max_elems) {
  Slots s;
  s.buf = b;
  const int64_t avail = (c.capacity(b) - static_cast<int64_t>(base)) / 2 / 64 * 64;
  base += c.sram_base(b);
  s.elems = std::min<int64_t>({avail / c.esize, max_elems, c.tile_limit > 0 ? c.tile_limit : INT64_MAX});
  c.slot_elems = std::max(c.slot_elems, s.elems);
  s.addr[0] = base;
  s.addr[1] = base + static_cast<uint64_t>(round64(s.elems * c.esize));
  return s;
}

bool Slots::ring(int64_t tile_bytes) {
  const auto step = static_cast<uint64_t>(round64(tile_bytes));
  const uint64_t region = 2 * (addr[1] - addr[0]);
  if (next != 0 || count != 2 || step == 0 || kMaxSlots * step > region) return false;
  for (int i = 1; i < kMaxSlots; ++i) addr[i] = addr[0] + static_cast<uint64_t>(i) * step;
  count = kMaxSlots;
  return true;
}

// ---- strided copies (DMA through SRAM) ----

// Merges dims that are contiguous in both source and destination; drops extent-1 dims.
std::vector<CopyDim> merge_copy(std::vector<CopyDim> d) {
  std::vector<CopyDim> r;
  for (const auto& x : d) {
    if (x.extent == 1) continue;
    if (!r.empty() && r.back().src_stride == x.src_stride * x.extent &&
        r.back().dst_stride == x.dst_stride * x.extent) {
      r.back().extent *= x.extent;
      r.back().src_stride = x.src_stride;
      r.back().dst_stride = x.dst_stride;
    } else {
      r.push_back(x);
    }
  }
  if (r.empty()) r.push_back({1, 1, 1});
  return r;
}

// Iterates an odometer over `ext` calling fn(index vector).
void odometer(const std::vector<int64_t>& ext, const std::function<void(const std::vector<int64_t>&)>& fn) {
  std::vector<int64_t> idx(ext.size(), 0);
  for (int64_t e : ext) {
    if (e == 0) return;
  }
  while (true) {
    fn(idx);
    size_t k = ext.size();
    while (k > 0) {
      --k;
      if (++idx[k] < ext[k]) break;
      idx[k] = 0;
      if (k == 0) return;
    }
    if (ext.empty()) return;
  }
}

// Copies a box: dims outermost first, innermost must have src_stride == dst_stride == 1.
void copy_box(Context& c, const DramTensor& src, uint64_t src_off, const DramTensor& dst, uint64_t dst_off,
              const std::vector<CopyDim>& dims_in,
              const std::function<void(uint64_t, int64_t, int64_t)>& on_tile) {
  std::vector<CopyDim> d = merge_copy(dims_in);
  if (d.back().src_stride != 1 || d.back().dst_stride != 1) d.push_back({1, 1, 1});  // element rows
  Slots s = make_slots(c, Buffer::kInput);
  const size_t k = d.size();
  // Box: up to 3 innermost dims, chunked to fit a slot; the rest loop.
  const size_t nb = std::min<size_t>(3, k);
  std::vector<int64_t> tile(nb);
  int64_t budget = s.elems;
  for (size_t j = 0; j < nb; ++j) {
    const CopyDim& x = d[k - 1 - j];
    tile[j] = std::max<int64_t>(1, std::min({x.extent, budget, kMaxDim}));
    budget = std::max<int64_t>(1, budget / tile[j]);
    if (tile[j] < x.extent) {
      for (size_t q = j + 1; q < nb; ++q) tile[q] = 1;
      break;
    }
  }
  for (size_t j = 0; j < nb; ++j) tile[j] = std::max<int64_t>(1, tile[j]);
  std::vector<int64_t> ext;  // loop extents: outer dims, then chunk counts of the box dims
  for (size_t j = 0; j + nb < k; ++j) ext.push_back(d[j].extent);
  for (size_t j = nb; j-- > 0;) ext.push_back(ceil_div(d[k - 1 - j].extent, tile[j]));
  const uint64_t es = static_cast<uint64_t>(isa::dtype_bytes(dst.dtype));
  const uint64_t ess = static_cast<uint64_t>(isa::dtype_bytes(on_tile ? src.dtype : dst.dtype));
  odometer(ext, [&](const std::vector<int64_t>& idx) {
    int64_t so = 0, dof = 0;
    for (size_t j = 0; j + nb < k; ++j) {
      so += idx[j] * d[j].src_stride;
      dof += idx[j] * d[j].dst_stride;
    }
    std::array<int64_t, 4> sz = {1, 1, 1, 1};
    std::array<int64_t, 3> sst = {0, 0, 0}, dst_st = {0, 0, 0};
    for (size_t j = 0; j < nb; ++j) {
      const CopyDim& x = d[k - 1 - j];
      const int64_t ci = idx[k - nb + (nb - 1 - j)];
      const int64_t start = ci * tile[j];
      so += start * x.src_stride;
      dof += start * x.dst_stride;
      sz[j] = std::min(tile[j], x.extent - start);
      if (j > 0) {
        sst[j - 1] = x.src_stride;
        dst_st[j - 1] = x.dst_stride;
      }
    }
    const uint64_t slot = s.take();
    c.load(Buffer::kInput, slot, src.range(), src.addr + src_off + static_cast<uint64_t>(so) * ess,
           on_tile ? src.dtype : dst.dtype, sz, sst);
    if (on_tile) on_tile(slot, sz[0], sz[1] * sz[2]);
    c.store(Buffer::kInput, slot, dst.range(), dst.addr + dst_off + static_cast<uint64_t>(dof) * es,
            dst.dtype, sz, dst_st);
  });
}

std::vector<int> positions(const DramTensor& t) {
  std::vector<int> pos(t.shape.size());
  for (size_t i = 0; i < pos.size(); ++i) pos[i] = static_cast<int>(i);
  if (!t.layout.empty()) {
    for (size_t p = 0; p < t.layout.size(); ++p) pos[static_cast<size_t>(t.layout[p])] = static_cast<int>(p);
  }
  return pos;
}

std::string permute_copy(Context& c, const DramTensor& x, const DramTensor& y,
                         const std::vector<int64_t>& perm,
                         const std::function<void(uint64_t slot, int64_t d0, int64_t d1)>& on_tile) {
  if (!x.view_split.empty()) {
    // A split view (strided_views.h's levels, both in ONNX order): the same permutation of its levels,
    // the output's dims split alike.
    const DramTensor fx = x.expanded();
    std::vector<std::vector<int64_t>> fine(x.shape.size());
    for (size_t d = 0, f = 0; d < x.shape.size(); ++d) {
      const auto it = x.view_split.find(d);
      const size_t count = it == x.view_split.end() ? 1 : it->second.size();
      for (size_t k = 0; k < count; ++k) fine[d].push_back(static_cast<int64_t>(f++));
    }
    DramTensor fy = y;
    fy.shape.clear(), fy.phys.clear(), fy.layout.clear();
    std::vector<int64_t> fperm;
    for (int64_t d : perm)
      for (int64_t f : fine[static_cast<size_t>(d)]) {
        fperm.push_back(f);
        fy.shape.push_back(fx.phys[static_cast<size_t>(f)]);
      }
    fy.phys = fy.shape;
    if (y.strided() || !y.view_split.empty())
      throw std::logic_error("permute_copy: a split view copied into a strided one");
    return permute_copy(c, fx, fy, fperm, on_tile);
  }
  const size_t r = y.shape.size();
  const auto xpos = positions(x);
  // Either side may be a view with strides of its own (backend/memory/strided_views.h: the K transpose of
  // attention reads its head-split view of the QKV projection's output).
  const auto xst = x.strides();
  const auto yst = y.strides();
  std::vector<int> ylay = y.layout;
  if (ylay.empty()) {
    ylay.resize(r);
    std::iota(ylay.begin(), ylay.end(), 0);
  }
  // Output physical dim i reads input physical dim q.
  std::vector<CopyDim> dims;
  for (size_t i = 0; i < r; ++i) {
    const int logical_out = ylay[i];
    const int logical_in = static_cast<int>(perm[static_cast<size_t>(logical_out)]);
    const int q = xpos[static_cast<size_t>(logical_in)];
    dims.push_back({y.phys[i], xst[static_cast<size_t>(q)], yst[i]});
  }
  std::vector<CopyDim> d = merge_copy(dims);
  size_t a = d.size();  // the dim contiguous in the input
  for (size_t i = 0; i < d.size(); ++i) {
    if (d[i].src_stride == 1) a = i;
  }
  const size_t b = d.size() - 1;
  if (a == d.size() || a == b) {
    copy_box(c, x, 0, y, 0, d, on_tile);
    return "strided DMA copy";
  }
  // Swap the input-contiguous dim `a` and the output-contiguous dim `b` with VEC transpose; one more
  // dim `e` rides along as d2; the rest loop.
  std::vector<size_t> rest;
  for (size_t i = 0; i < d.size(); ++i) {
    if (i != a && i != b) rest.push_back(i);
  }
  CopyDim E{1, 0, 0};
  if (!rest.empty()) {
    E = d[rest.back()];
    rest.pop_back();
  }
  Slots s = make_slots(c, Buffer::kInput);
  const CopyDim A = d[a], B = d[b];
  // With a conversion the transposed tile is one VEC row of ta * tb elements: at most kMaxDim.
  const int64_t elems = on_tile ? std::min<int64_t>(s.elems, kMaxDim) : s.elems;
  int64_t tb =
      std::min<int64_t>({B.extent, kMaxDim, std::max<int64_t>(1, static_cast<int64_t>(std::sqrt(elems)))});
  const int64_t ta = std::min<int64_t>({A.extent, kMaxDim, std::max<int64_t>(1, elems / tb)});
  tb = std::min<int64_t>({B.extent, kMaxDim, std::max<int64_t>(1, elems / ta)});
  const int64_t te = std::min<int64_t>({E.extent, kMaxDim, std::max<int64_t>(1, s.elems / (ta * tb))});
  const uint64_t es = static_cast<uint64_t>(isa::dtype_bytes(y.dtype)),
                 ex = static_cast<uint64_t>(isa::dtype_bytes(x.dtype));
  // A tile smaller than its slot goes to the slot's beginning or its end, whichever the instructions
  // before it last touched earlier (Emitter::last_access): the layer before streams its tiles from its
  // slots' beginnings, so an independent neighbour (attention's K transpose after the Q scale) takes the
  // end and overlaps that layer's last stores instead of waiting for them to free their SRAM
  // (docs/backend.md, "Estimates"). With a conversion the slot's use is on_tile's, left where it is.
  if (!on_tile) {
    const uint64_t used = round64(ta * tb * te * std::max<int64_t>(static_cast<int64_t>(ex), c.esize));
    const uint64_t slot = s.addr[1] - s.addr[0];
    int64_t tiles = ceil_div(E.extent, te) * ceil_div(A.extent, ta) * ceil_div(B.extent, tb);
    for (size_t i : rest) tiles *= d[i].extent;
    const bool two = tiles > 1;
    auto last = [&](uint64_t off) {
      int l = c.em.last_access({static_cast<int>(Buffer::kInput), s.addr[0] + off, s.addr[0] + off + used});
      if (two)
        l = std::max(
            l, c.em.last_access({static_cast<int>(Buffer::kInput), s.addr[1] + off, s.addr[1] + off + used}));
      return l;
    };
    if (used < slot && last(slot - used) < last(0)) {
      s.addr[0] += slot - used;
      s.addr[1] += slot - used;
    }
  }
  std::vector<int64_t> ext;
  for (size_t i : rest) ext.push_back(d[i].extent);
  ext.push_back(ceil_div(E.extent, te));
  ext.push_back(ceil_div(A.extent, ta));
  ext.push_back(ceil_div(B.extent, tb));
  if (!on_tile && ex != es)
    throw std::logic_error("permute_copy: x and y differ in dtype without a conversion");
  odometer(ext, [&](const std::vector<int64_t>& idx) {
    int64_t so = 0, dof = 0;
    for (size_t j = 0; j < rest.size(); ++j) {
      so += idx[j] * d[rest[j]].src_stride;
      dof += idx[j] * d[rest[j]].dst_stride;
    }
    const size_t m = rest.size();
    const int64_t e0 = idx[m] * te, a0 = idx[m + 1] * ta, b0 = idx[m + 2] * tb;
    const int64_t ne = std::min(te, E.extent - e0), na = std::min(ta, A.extent - a0),
                  nb = std::min(tb, B.extent - b0);
    so += e0 * E.src_stride + a0 * A.src_stride + b0 * B.src_stride;
    dof += e0 * E.dst_stride + a0 * A.dst_stride + b0 * B.dst_stride;
    const uint64_t sl = s.take();
    c.load(Buffer::kInput, sl, x.range(), x.addr + static_cast<uint64_t>(so) * ex, x.dtype, {na, nb, ne, 1},
           {B.src_stride, E.src_stride, 0});
    Context::VecArgs v;
    v.op = VecOp::kTranspose, v.in = v.out = x.dtype, v.src1_buf = v.dst_buf = Buffer::kInput,
    v.src1 = v.dst = sl;
    v.d0 = na, v.d1 = nb, v.d2 = ne;
    c.vec(v);
    if (on_tile) on_tile(sl, na * nb, ne);
    c.store(Buffer::kInput, sl, y.range(), y.addr + static_cast<uint64_t>(dof) * es, y.dtype, {nb, na, ne, 1},
            {A.dst_stride, E.dst_stride, 0});
  });
  return fmt::format("strided DMA + VEC transpose, {}x{}x{} tiles", te, ta, tb);
}

void zero_fill(Context& c, const DramTensor& t) {
  const int64_t es = isa::dtype_bytes(t.dtype);
  const int64_t total = static_cast<int64_t>(t.bytes) / es;
  Slots s = make_slots(c, Buffer::kInput);
  const int64_t row = std::min<int64_t>({total, 1024, s.elems});
  const int64_t rows = std::max<int64_t>(1, std::min<int64_t>({total / row, s.elems / row, kMaxDim}));
  // One row of zeros, replicated into the slot by a zero row stride.
  static_assert(sizeof(float) == 4);
  const uint64_t zeros = c.add_data(std::vector<uint8_t>(static_cast<size_t>(row * es), 0));
  const uint64_t slot = s.addr[0];
  c.load(Buffer::kInput, slot, Range{kDram, zeros, zeros + static_cast<uint64_t>(row * es)}, zeros, t.dtype,
         {row, rows, 1, 1}, {0, 0, 0});
  for (int64_t off = 0; off < total;) {
    const int64_t rem = total - off;
    const int64_t n1 = rem >= row ? std::min(rows, rem / row) : 1, n0 = rem >= row ? row : rem;
    c.store(Buffer::kInput, slot, t.range(), t.addr + static_cast<uint64_t>(off * es), t.dtype,
            {n0, n1, 1, 1}, {n0, 0, 0});
    off += n0 * n1;
  }
}

namespace {

std::vector<uint8_t> encode(const std::vector<double>& v, isa::DType t) {
  const int64_t es = isa::dtype_bytes(t);
  std::vector<uint8_t> b(v.size() * static_cast<size_t>(es));
  for (size_t i = 0; i < v.size(); ++i) {
    if (t == isa::DType::kInt32) {
      const int32_t x = static_cast<int32_t>(v[i]);
      std::memcpy(&b[i * 4], &x, 4);
    } else if (t == isa::DType::kFp32) {
      const float x = static_cast<float>(v[i]);
      std::memcpy(&b[i * 4], &x, 4);
    } else if (t == isa::DType::kInt8 || t == isa::DType::kUint8) {  // codes (an int8 zero point fill)
      const double lo = t == isa::DType::kInt8 ? -128.0 : 0.0, hi = t == isa::DType::kInt8 ? 127.0 : 255.0;
      const auto x = static_cast<int32_t>(std::clamp(std::nearbyint(v[i]), lo, hi));
      b[i] = static_cast<uint8_t>(x & 0xff);
    } else {
      throw std::logic_error("encode: 16-bit types go through Context::add_floats");
    }
  }
  return b;
}

uint64_t add_values(Context& c, const std::vector<double>& v, isa::DType t) {
  if (t == isa::DType::kFp16 || t == isa::DType::kBf16) {
    return c.add_floats(std::vector<float>(v.begin(), v.end()), t);
  }
  return c.add_data(encode(v, t));
}

}  // namespace

DramTensor constant_tensor(Context& c, const Tensor& value, const std::vector<int>& layout, isa::DType t) {
  DramTensor d;
  d.shape = value.shape;
  d.layout = layout;
  d.phys = physical(value.shape, layout);
  d.dtype = t;
  const int64_t n = num_elements(value.shape);
  std::vector<double> v(static_cast<size_t>(n));
  const auto ls = dense_strides(value.shape);
  const auto pst = dense_strides(d.phys);
  std::vector<int> lay = layout;
  if (lay.empty()) {
    lay.resize(value.shape.size());
    std::iota(lay.begin(), lay.end(), 0);
  }
  for (int64_t i = 0; i < n; ++i) {  // i: physical index
    int64_t rem = i, li = 0;
    for (size_t k = 0; k < d.phys.size(); ++k) {
      const int64_t coord = rem / pst[k];
      rem %= pst[k];
      li += coord * ls[static_cast<size_t>(lay[k])];
    }
    v[static_cast<size_t>(i)] = value.as_double(li);
  }
  if (v.empty()) v.push_back(0);
  d.addr = add_values(c, v, t);
  d.bytes = static_cast<uint64_t>(static_cast<int64_t>(v.size()) * isa::dtype_bytes(t));
  return d;
}

int64_t copy_index_map(Context& c, const DramTensor& y, const std::vector<const DramTensor*>& sources,
                       const std::vector<int64_t>& map, double fill) {
  const int64_t es = isa::dtype_bytes(y.dtype);
  const int64_t total = static_cast<int64_t>(map.size());
  Slots s = make_slots(c, Buffer::kInput);
  // Fill rows: one segment of up to 1024 fill values, read as often as needed.
  bool any_fill = false;
  for (int64_t v : map) any_fill |= v < 0;
  const int64_t fill_len = std::min<int64_t>(1024, std::max<int64_t>(1, total));
  uint64_t fill_addr = 0;
  if (any_fill) fill_addr = add_values(c, std::vector<double>(static_cast<size_t>(fill_len), fill), y.dtype);
  const uint64_t mask = (uint64_t{1} << kMapShift) - 1;
  int64_t rows = 0;
  const int64_t chunk = std::min(s.elems, kMaxDim);  // one STORE row per chunk
  for (int64_t c0 = 0; c0 < total; c0 += chunk) {
    const int64_t c1 = std::min(total, c0 + chunk);
    const uint64_t slot = s.take();
    // Runs: (src kind, src start, length) over [c0, c1).
    struct Run {
      int64_t src;  // -1 fill, else source index
      int64_t start, len, at;
    };
    std::vector<Run> runs;
    for (int64_t o = c0; o < c1;) {
      const int64_t v = map[static_cast<size_t>(o)];
      int64_t len = 1;
      if (v < 0) {
        while (o + len < c1 && map[static_cast<size_t>(o + len)] < 0 && len < fill_len) ++len;
        runs.push_back({-1, 0, len, o - c0});
      } else {
        while (o + len < c1 && len < kMaxDim && map[static_cast<size_t>(o + len)] == v + len) ++len;
        runs.push_back({static_cast<int64_t>(static_cast<uint64_t>(v) >> kMapShift),
                        static_cast<int64_t>(static_cast<uint64_t>(v) & mask), len, o - c0});
      }
      o += len;
    }
    // Group equal-length runs of one source with a constant non-negative source step into 2-D boxes.
    for (size_t i = 0; i < runs.size();) {
      size_t j = i + 1;
      int64_t step = 0;
      if (j < runs.size() && runs[j].src == runs[i].src && runs[j].len == runs[i].len) {
        step = runs[i].src < 0 ? 0 : runs[j].start - runs[i].start;
        if (step >= 0 && step < (int64_t{1} << 31)) {
          while (j < runs.size() && j - i < static_cast<size_t>(kMaxDim) && runs[j].src == runs[i].src &&
                 runs[j].len == runs[i].len &&
                 (runs[i].src < 0 || runs[j].start - runs[j - 1].start == step)) {
            ++j;
          }
        } else {
          j = i + 1;
        }
      }
      const int64_t count = static_cast<int64_t>(j - i);
      if (count == 1) step = 0;
      const Run& r = runs[i];
      const uint64_t sram = slot + static_cast<uint64_t>(r.at * es);
      if (r.src < 0) {
        c.load(Buffer::kInput, sram,
               Range{kDram, fill_addr, fill_addr + static_cast<uint64_t>(fill_len * es)}, fill_addr, y.dtype,
               {r.len, count, 1, 1}, {0, 0, 0});
      } else {
        const DramTensor& src = *sources[static_cast<size_t>(r.src)];
        c.load(Buffer::kInput, sram, src.range(), src.addr + static_cast<uint64_t>(r.start * es), y.dtype,
               {r.len, count, 1, 1}, {step, 0, 0});
      }
      ++rows;
      i = j;
    }
    c.store(Buffer::kInput, slot, y.range(), y.addr + static_cast<uint64_t>(c0 * es), y.dtype,
            {c1 - c0, 1, 1, 1}, {0, 0, 0});
  }
  return rows;
}

void copy_tensor(Context& c, const DramTensor& from, const DramTensor& to) {
  if (!from.view_split.empty() || !to.view_split.empty()) {
    // A split view (strided_views.h's levels) copied as its levels, the dense side reshaped to them: the
    // same elements in the same row-major order.
    DramTensor f = from.expanded(), t = to.expanded();
    DramTensor& dense = from.view_split.empty() ? f : t;
    const DramTensor& fine = from.view_split.empty() ? t : f;
    if (dense.strided() || !dense.view_split.empty())
      throw std::logic_error("copy_tensor: two split views, or a split view and a strided one");
    dense.shape = dense.phys = fine.phys;
    dense.layout.clear();
    return copy_tensor(c, f, t);
  }
  // copy_box sizes its slots by c.esize: the tensors' own storage type for the copy.
  const isa::DType act = c.act;
  const int64_t esize = c.esize;
  c.act = to.dtype;
  c.esize = isa::dtype_bytes(to.dtype);
  std::vector<CopyDim> dims;
  const std::vector<int64_t> fs = from.strides(), ts = to.strides();
  for (size_t i = 0; i < from.phys.size(); ++i) dims.push_back({from.phys[i], fs[i], ts[i]});
  copy_box(c, from, 0, to, 0, dims);
  c.act = act;
  c.esize = esize;
}

DramTensor dense_scratch(Context& c, const DramTensor& t) {
  DramTensor d = t;
  d.view_strides.clear();
  d.view_split.clear();
  d.addr = c.add_scratch(d.bytes);
  return d;
}

DramTensor scratch_tensor(Context& c, const Shape& logical, const std::vector<int>& layout) {
  DramTensor t;
  t.shape = logical;
  t.layout = layout;
  t.phys = physical(logical, layout);
  t.dtype = c.act;
  t.bytes = static_cast<uint64_t>(std::max<int64_t>(1, num_elements(logical)) * c.esize);
  t.addr = c.add_scratch(t.bytes);
  return t;
}

}  // namespace npusim::compiler::backend
