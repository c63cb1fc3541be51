// Spatial kernels of vision models' heads and decoders: NonMaxSuppression and RoiAlign (detection),
// MaxUnpool (the inverse of a MaxPool's indices) and GridSample (spatial transformers, optical flow).
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "compiler/interp/kernels.h"

namespace npusim::compiler::interp {
namespace {

// Corners (y1, x1, y2, x2), ordered, of box b of `boxes` ([..., 4]); center_point_box = 1 boxes are
// (x_center, y_center, width, height).
std::array<double, 4> corners(const Tensor& boxes, int64_t b, bool center) {
  const auto v = [&](int64_t k) { return static_cast<double>(boxes.f[static_cast<size_t>(b * 4 + k)]); };
  if (center) {
    const double xc = v(0), yc = v(1), w = v(2), h = v(3);
    return {yc - h / 2, xc - w / 2, yc + h / 2, xc + w / 2};
  }
  return {std::min(v(0), v(2)), std::min(v(1), v(3)), std::max(v(0), v(2)), std::max(v(1), v(3))};
}

double iou(const std::array<double, 4>& a, const std::array<double, 4>& b) {
  const double area_a = (a[2] - a[0]) * (a[3] - a[1]), area_b = (b[2] - b[0]) * (b[3] - b[1]);
  if (area_a <= 0 || area_b <= 0) return 0;
  const double ih = std::min(a[2], b[2]) - std::max(a[0], b[0]);
  const double iw = std::min(a[3], b[3]) - std::max(a[1], b[1]);
  if (ih <= 0 || iw <= 0) return 0;
  const double inter = ih * iw;
  return inter / (area_a + area_b - inter);
}

// ONNX NonMaxSuppression: per batch and class, the boxes by descending score (ties: the lower index
// first) whose score passes score_threshold, each kept unless its IoU with a kept box exceeds
// iou_threshold, at most max_output_boxes_per_class of them; rows (batch, class, box) in that order.
void k_non_max_suppression(KernelContext& c) {
  const Tensor& boxes = c.finput(0);
  const Tensor& scores = c.finput(1);
  if (boxes.rank() != 3 || boxes.shape[2] != 4) c.fail("boxes must be [batches, boxes, 4]");
  if (scores.rank() != 3 || scores.shape[0] != boxes.shape[0] || scores.shape[2] != boxes.shape[1])
    c.fail("scores must be [batches, classes, boxes] for boxes [batches, boxes, 4]");
  const int64_t max_out = c.has(2) && c.input(2).size() > 0 ? c.iscalar(2) : 0;
  const double iou_max = c.has(3) && c.input(3).size() > 0 ? c.scalar(3) : 0.0;
  const bool thresholded = c.has(4) && c.input(4).size() > 0;
  const double score_min = thresholded ? c.scalar(4) : 0.0;
  const bool center = c.node.attr_int("center_point_box", 0) != 0;
  const int64_t batches = scores.shape[0], classes = scores.shape[1], n = scores.shape[2];
  std::vector<int64_t> rows;
  for (int64_t b = 0; b < batches; ++b) {
    for (int64_t k = 0; k < classes; ++k) {
      const float* s = &scores.f[static_cast<size_t>((b * classes + k) * n)];
      std::vector<int64_t> order;
      for (int64_t j = 0; j < n; ++j)
        if (!thresholded || s[j] > score_min) order.push_back(j);
      std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return s[x] > s[y]; });
      std::vector<std::array<double, 4>> kept;
      for (int64_t j : order) {
        if (static_cast<int64_t>(kept.size()) >= max_out) break;
        const auto box = corners(boxes, b * n + j, center);
        if (std::any_of(kept.begin(), kept.end(), [&](const auto& q) { return iou(q, box) > iou_max; }))
          continue;
        kept.push_back(box);
        rows.insert(rows.end(), {b, k, j});
      }
    }
  }
  const auto selected = static_cast<int64_t>(rows.size() / 3);
  c.out[0] = Tensor::from_ints(DataType::kInt64, {selected, 3}, std::move(rows));
}

// ONNX MaxUnpool: each input element written where its MaxPool found it (input 1: flat indices into the
// pool's input, whose shape follows from kernel, strides and pads: (in - 1) * stride + kernel - pad_begin -
// pad_end per spatial dim), zeros elsewhere. With output_shape (input 2) the output has that shape and each
// element keeps its coordinates (the reference's and onnxruntime's reading).
void k_max_unpool(KernelContext& c) {
  const Tensor& x = c.finput(0);
  const Tensor& idx = c.input(1);
  if (idx.shape != x.shape) c.fail("indices must have the input's shape");
  const auto kernel = c.node.attr_ints("kernel_shape");
  const size_t spatial = kernel.size();
  if (x.rank() != static_cast<int64_t>(spatial) + 2) c.fail("kernel_shape must name every spatial dim");
  const auto strides = c.node.attr_ints("strides", std::vector<int64_t>(spatial, 1));
  const auto pads = c.node.attr_ints("pads", std::vector<int64_t>(2 * spatial, 0));
  if (strides.size() != spatial || pads.size() != 2 * spatial)
    c.fail("strides or pads do not match kernel_shape");
  Shape pooled = {x.shape[0], x.shape[1]};
  for (size_t d = 0; d < spatial; ++d)
    pooled.push_back((x.shape[d + 2] - 1) * strides[d] + kernel[d] - pads[d] - pads[d + spatial]);
  Shape out = pooled;
  if (c.has(2)) {
    out = c.input(2).to_int_vector();
    if (out.size() != pooled.size()) c.fail("output_shape must have the input's rank");
  }
  Tensor y(x.dtype, out);
  const int64_t total = num_elements(pooled);
  for (int64_t k = 0; k < x.size(); ++k) {
    int64_t at = idx.i[static_cast<size_t>(k)];
    if (at < 0 || at >= total) c.fail("index " + std::to_string(at) + " is outside the pool's input");
    int64_t flat = 0, stride = 1;
    for (size_t d = pooled.size(); d-- > 0;) {
      const int64_t coord = at % pooled[d];
      at /= pooled[d];
      if (coord >= out[d]) c.fail("an index lies outside output_shape");
      flat += coord * stride;
      stride *= out[d];
    }
    y.f[static_cast<size_t>(flat)] = x.f[static_cast<size_t>(k)];
  }
  c.out[0] = std::move(y);
}

// A source coordinate of GridSample after its padding mode, as PyTorch's grid_sample computes it (ONNX's
// GridSample follows it; the node tests' data came from it): border clamps to [0, size - 1]; reflection
// reflects about the edges (align_corners: the outer pixels' centres; else their outer borders) and
// clamps; zeros leaves it.
double padded_coordinate(double x, int64_t size, const std::string& padding, bool align_corners) {
  const auto clip = [&](double v) { return std::min(static_cast<double>(size - 1), std::max(0.0, v)); };
  if (padding == "border") return clip(x);
  if (padding != "reflection") return x;
  const double twice_low = align_corners ? 0 : -1;
  const double twice_high = align_corners ? 2.0 * (size - 1) : 2.0 * size - 1;
  if (twice_low == twice_high) return 0;
  const double low = twice_low / 2, span = (twice_high - twice_low) / 2;
  const double d = std::fabs(x - low);
  const double extra = std::fmod(d, span);
  const auto flips = static_cast<int64_t>(std::floor(d / span));
  return clip(flips % 2 == 0 ? extra + low : span - extra + low);
}

// The cubic convolution weights (A = -0.75) of the four taps around fraction t.
std::array<double, 4> cubic_weights(double t) {
  constexpr double A = -0.75;
  const auto near = [&](double x) { return ((A + 2) * x - (A + 3)) * x * x + 1; };
  const auto far = [&](double x) { return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A; };
  return {far(t + 1), near(t), near(1 - t), far(2 - t)};
}

// ONNX GridSample (opset 16, 4-D): output pixel (n, c, h, w) samples X[n, c] at grid[n, h, w] = (x, y) in
// [-1, 1] (-1 the left/top edge), by mode bilinear, nearest or bicubic, outside the image by
// padding_mode zeros, border or reflection.
void k_grid_sample(KernelContext& c) {
  const Tensor& x = c.finput(0);
  const Tensor& grid = c.finput(1);
  if (x.rank() != 4 || grid.rank() != 4 || grid.shape[3] != 2 || grid.shape[0] != x.shape[0])
    c.fail("GridSample takes X [N, C, H, W] and grid [N, H_out, W_out, 2]");
  const std::string mode = c.node.attr_string("mode", "bilinear");
  const std::string padding = c.node.attr_string("padding_mode", "zeros");
  const bool align = c.node.attr_int("align_corners", 0) != 0;
  if (mode != "bilinear" && mode != "nearest" && mode != "bicubic")
    c.fail("mode '" + mode + "' is not defined");
  if (padding != "zeros" && padding != "border" && padding != "reflection")
    c.fail("padding_mode '" + padding + "' is not defined");
  const int64_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3];
  const int64_t OH = grid.shape[1], OW = grid.shape[2];
  Tensor y(x.dtype, {N, C, OH, OW});
  const auto unnormalize = [&](double g, int64_t size) {
    return align ? (g + 1) / 2 * static_cast<double>(size - 1)
                 : ((g + 1) * static_cast<double>(size) - 1) / 2;
  };
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t oh = 0; oh < OH; ++oh) {
      for (int64_t ow = 0; ow < OW; ++ow) {
        const size_t gi = static_cast<size_t>(((n * OH + oh) * OW + ow) * 2);
        const double ux = unnormalize(grid.f[gi], W), uy = unnormalize(grid.f[gi + 1], H);
        for (int64_t ch = 0; ch < C; ++ch) {
          const float* img = &x.f[static_cast<size_t>((n * C + ch) * H * W)];
          // Pixel (r, q), zero outside the image.
          const auto at = [&](int64_t r, int64_t q) {
            return r < 0 || r >= H || q < 0 || q >= W ? 0.0 : static_cast<double>(img[r * W + q]);
          };
          double v = 0;
          if (mode == "bicubic") {
            // The taps are padded one by one (PyTorch's get_value_bounded), around the unpadded point.
            const double fx = std::floor(ux), fy = std::floor(uy);
            const auto wx = cubic_weights(ux - fx), wy = cubic_weights(uy - fy);
            for (int j = 0; j < 4; ++j) {
              for (int i = 0; i < 4; ++i) {
                const double px = padded_coordinate(fx - 1 + i, W, padding, align);
                const double py = padded_coordinate(fy - 1 + j, H, padding, align);
                v += wy[j] * wx[i] * at(static_cast<int64_t>(py), static_cast<int64_t>(px));
              }
            }
          } else {
            const double px = padded_coordinate(ux, W, padding, align);
            const double py = padded_coordinate(uy, H, padding, align);
            if (mode == "nearest") {
              v = at(static_cast<int64_t>(std::nearbyint(py)), static_cast<int64_t>(std::nearbyint(px)));
            } else {
              const double x0 = std::floor(px), y0 = std::floor(py), tx = px - x0, ty = py - y0;
              const auto q0 = static_cast<int64_t>(x0), r0 = static_cast<int64_t>(y0);
              v = (1 - ty) * ((1 - tx) * at(r0, q0) + tx * at(r0, q0 + 1)) +
                  ty * ((1 - tx) * at(r0 + 1, q0) + tx * at(r0 + 1, q0 + 1));
            }
          }
          y.f[static_cast<size_t>(((n * C + ch) * OH + oh) * OW + ow)] = static_cast<float>(v);
        }
      }
    }
  }
  c.out[0] = std::move(y);
}

// ONNX RoiAlign (opset 16): for each region of interest (rois [R, 4]: x1, y1, x2, y2 in input pixels
// times spatial_scale, of image batch_indices[r]), an output_height x output_width grid of bins, each
// the average (mode avg) or maximum (mode max) of sampling_ratio^2 bilinear samples (adaptive:
// ceil(bin size) per axis when sampling_ratio is 0) spread evenly over the bin. half_pixel shifts the
// region by -0.5 pixel; output_half_pixel (the opset-10 behaviour) does not, and widens regions smaller
// than a pixel to one. Samples outside [-1, size] count as zero; nearer ones are clamped to the edge
// (onnxruntime's and the reference's bilinear rule).
void k_roi_align(KernelContext& c) {
  const Tensor& x = c.finput(0);
  const Tensor& rois = c.finput(1);
  const Tensor& batch = c.input(2);
  if (x.rank() != 4 || rois.rank() != 2 || rois.shape[1] != 4 || batch.size() != rois.shape[0])
    c.fail("RoiAlign takes X [N, C, H, W], rois [R, 4] and batch_indices [R]");
  const std::string mode = c.node.attr_string("mode", "avg");
  if (mode != "avg" && mode != "max") c.fail("mode '" + mode + "' is not defined");
  const int64_t OH = c.node.attr_int("output_height", 1), OW = c.node.attr_int("output_width", 1);
  const int64_t ratio = c.node.attr_int("sampling_ratio", 0);
  const double scale = c.node.attr_float("spatial_scale", 1.0f);
  const bool half_pixel = c.node.attr_string("coordinate_transformation_mode", "half_pixel") == "half_pixel";
  const int64_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3], R = rois.shape[0];
  Tensor y(x.dtype, {R, C, OH, OW});
  for (int64_t r = 0; r < R; ++r) {
    const int64_t b = batch.as_int(r);
    if (b < 0 || b >= N) c.fail("batch index " + std::to_string(b) + " is out of range");
    const auto roi = [&](int64_t k) { return rois.as_double(r * 4 + k) * scale - (half_pixel ? 0.5 : 0.0); };
    const double x0 = roi(0), y0 = roi(1);
    double rw = roi(2) - x0, rh = roi(3) - y0;
    if (!half_pixel) rw = std::max(rw, 1.0), rh = std::max(rh, 1.0);
    const double bh = rh / static_cast<double>(OH), bw = rw / static_cast<double>(OW);
    const int64_t gh = ratio > 0 ? ratio : static_cast<int64_t>(std::ceil(rh / static_cast<double>(OH)));
    const int64_t gw = ratio > 0 ? ratio : static_cast<int64_t>(std::ceil(rw / static_cast<double>(OW)));
    const double count = static_cast<double>(std::max<int64_t>(gh * gw, 1));
    for (int64_t ch = 0; ch < C; ++ch) {
      const float* img = &x.f[static_cast<size_t>((b * C + ch) * H * W)];
      const auto px = [&](int64_t i, int64_t j) { return static_cast<double>(img[i * W + j]); };
      for (int64_t oh = 0; oh < OH; ++oh) {
        for (int64_t ow = 0; ow < OW; ++ow) {
          double acc = mode == "max" ? -std::numeric_limits<double>::infinity() : 0.0;
          for (int64_t iy = 0; iy < gh; ++iy) {
            for (int64_t ix = 0; ix < gw; ++ix) {
              double sy = y0 + oh * bh + (iy + 0.5) * bh / static_cast<double>(gh);
              double sx = x0 + ow * bw + (ix + 0.5) * bw / static_cast<double>(gw);
              std::array<double, 4> term{};  // the four corners' weighted values
              if (!(sy < -1.0 || sy > H || sx < -1.0 || sx > W)) {
                sy = std::max(sy, 0.0), sx = std::max(sx, 0.0);
                int64_t yl = static_cast<int64_t>(sy), xl = static_cast<int64_t>(sx), yh = yl + 1,
                        xh = xl + 1;
                if (yl >= H - 1) yl = yh = H - 1, sy = static_cast<double>(yl);
                if (xl >= W - 1) xl = xh = W - 1, sx = static_cast<double>(xl);
                const double ly = sy - yl, lx = sx - xl;
                term = {(1 - ly) * (1 - lx) * px(yl, xl), (1 - ly) * lx * px(yl, xh),
                        ly * (1 - lx) * px(yh, xl), ly * lx * px(yh, xh)};
              }
              if (mode == "max") {
                acc = std::max(acc, *std::max_element(term.begin(), term.end()));
              } else {
                acc += term[0] + term[1] + term[2] + term[3];
              }
            }
          }
          y.f[static_cast<size_t>(((r * C + ch) * OH + oh) * OW + ow)] =
              static_cast<float>(mode == "max" ? acc : acc / count);
        }
      }
    }
  }
  c.out[0] = std::move(y);
}

}  // namespace

void register_spatial(KernelTable& t) {
  t["NonMaxSuppression"] = k_non_max_suppression;
  t["MaxUnpool"] = k_max_unpool;
  t["GridSample"] = k_grid_sample;
  t["RoiAlign"] = k_roi_align;
}

}  // namespace npusim::compiler::interp
