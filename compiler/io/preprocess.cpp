#include "compiler/io/preprocess.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace npusim::compiler {

void Preprocess::visit(isa::Visitor& v) {
  v.choice({"exif_orientation", "",
            "a JPEG's EXIF orientation: ignore (the pixels as stored, as PIL's Image.open) or apply (turned "
            "upright first, as OpenCV's imread)"},
           exif_orientation, kExifOrientationNames);
  v.choice({"resize", "",
            "how the image reaches the input's height x width: stretch, letterbox (keep the aspect "
            "ratio, pad the rest), none (the image must have that size) or crop (scale the shorter side "
            "to resize_short, take the centre)"},
           resize, kResizeNames);
  v.integer({"resize_short", "px",
             "crop: the shorter side's length after scaling, as torchvision's Resize(N) before "
             "CenterCrop (0: the image just covers the input)"},
            resize_short, 0, 65536);
  v.choice(
      {"interpolation", "", "resampling: bilinear (half-pixel centres, as OpenCV's INTER_LINEAR) or nearest"},
      interpolation, kInterpolationNames);
  v.choice(
      {"anchor", "", "letterbox: where the scaled image sits, center or top_left (padding right and bottom)"},
      anchor, kAnchorNames);
  v.real({"pad_value", "", "letterbox: the padding's pixel value, before scale, mean and std"}, pad_value,
         0.0, 255.0);
  v.choice({"channel_order", "", "order of the colour channels in the input tensor: rgb or bgr"},
           channel_order, kChannelOrderNames);
  v.real({"scale", "",
          "pixel (0..255) multiplier applied before mean and std: value = (pixel * scale - mean) / std"},
         scale, 1e-9, 1e6);
  auto per_channel = [&](std::string_view key, std::string_view description, PerChannel& c, double min) {
    v.group(key, description, [&] {
      v.real({"r", "", "red channel"}, c.r, min, 1e6);
      v.real({"g", "", "green channel"}, c.g, min, 1e6);
      v.real({"b", "", "blue channel"}, c.b, min, 1e6);
    });
  };
  per_channel("mean", "per-channel mean subtracted after scaling (named by colour, whatever channel_order)",
              mean, -1e6);
  per_channel("std", "per-channel standard deviation divided by after the mean", std, 1e-9);
  v.choice({"layout", "", "input tensor layout: nchw or nhwc"}, layout, kLayoutNames);
  v.choice({"dtype", "", "element type: float32, or uint8 / int8 (rounded to nearest, saturated)"}, dtype,
           kDtypeNames);
}

ImageRegion image_region(const Preprocess& p, int64_t img_w, int64_t img_h, int64_t W, int64_t H) {
  ImageRegion r{W, H, 0, 0};
  if (p.resize == Preprocess::Resize::kLetterbox) {
    const double s = std::min(static_cast<double>(W) / static_cast<double>(img_w),
                              static_cast<double>(H) / static_cast<double>(img_h));
    r.rw = std::clamp<int64_t>(std::llround(static_cast<double>(img_w) * s), 1, W);
    r.rh = std::clamp<int64_t>(std::llround(static_cast<double>(img_h) * s), 1, H);
    if (p.anchor == Preprocess::Anchor::kCenter) {
      r.ox = (W - r.rw) / 2;
      r.oy = (H - r.rh) / 2;
    }
  } else if (p.resize == Preprocess::Resize::kCrop) {
    // torchvision: the shorter side becomes N and the longer int(N * long / short); CenterCrop's offsets are
    // int(round((size - crop) / 2)), Python's round: half to even (std::nearbyint's default mode).
    const bool wide = img_w >= img_h;
    const int64_t shorter = wide ? img_h : img_w, longer = wide ? img_w : img_h;
    const int64_t need_short = wide ? H : W, need_long = wide ? W : H;
    auto scaled = [&](int64_t n) {
      return static_cast<int64_t>(static_cast<double>(n) * static_cast<double>(longer) /
                                  static_cast<double>(shorter));
    };
    int64_t n = p.resize_short;
    if (n == 0)  // the smallest scale that covers the input
      for (n = need_short; scaled(n) < need_long;) ++n;
    const int64_t scaled_long = scaled(n);
    r.rw = wide ? scaled_long : n;
    r.rh = wide ? n : scaled_long;
    if (r.rw < W || r.rh < H)
      throw PreprocessError("resize_short: " + std::to_string(p.resize_short) + " scales a " +
                            std::to_string(img_w) + "x" + std::to_string(img_h) + " image to " +
                            std::to_string(r.rw) + "x" + std::to_string(r.rh) +
                            ", smaller than the input's " + std::to_string(W) + "x" + std::to_string(H) +
                            " crop (give at least the crop's larger side)");
    r.ox = -static_cast<int64_t>(std::nearbyint(static_cast<double>(r.rw - W) / 2.0));
    r.oy = -static_cast<int64_t>(std::nearbyint(static_cast<double>(r.rh - H) / 2.0));
  }
  return r;
}

void check_image_dtype(const Preprocess& p, DataType input, const std::string& what) {
  const std::string_view name = Preprocess::kDtypeNames[static_cast<size_t>(p.dtype)];
  const std::string_view want = is_float(input)             ? "float32"
                                : input == DataType::kUInt8 ? "uint8"
                                : input == DataType::kInt8  ? "int8"
                                                            : "";
  if (!want.empty() && want == name) return;
  if (want.empty())
    throw PreprocessError(what + " is " + std::string(to_string(input)) +
                          ": an image becomes a float32, uint8 or int8 input only");
  throw PreprocessError(what + " is " + std::string(to_string(input)) +
                        " but the pre-processing gives dtype " + std::string(name) + " (set dtype: " +
                        std::string(want) + ", with the scale, mean and std that input expects)");
}

ImageGeometry image_geometry(const Preprocess& p, const Shape& s, const std::string& what) {
  const std::string layout(Preprocess::kLayoutNames[static_cast<size_t>(p.layout)]);
  if (s.size() != 4)
    throw PreprocessError(what + " has shape " + shape_to_string(s) + ": an image needs a rank-4 " + layout +
                          " input");
  for (int64_t d : s)
    if (d < 1)
      throw PreprocessError(what + " has shape " + shape_to_string(s) +
                            ": bind its dynamic dimensions with --input-shape before feeding images");
  if (s[0] != 1)
    throw PreprocessError(what + " has batch " + std::to_string(s[0]) +
                          ": one image is one sample of batch 1");
  ImageGeometry g;
  const bool nchw = p.layout == Preprocess::Layout::kNchw;
  g.channels = nchw ? s[1] : s[3];
  g.height = nchw ? s[2] : s[1];
  g.width = nchw ? s[3] : s[2];
  if (g.channels != 1 && g.channels != 3)
    throw PreprocessError(what + " has shape " + shape_to_string(s) + ": under layout " + layout +
                          " that is " + std::to_string(g.channels) + " channels; an image gives 1 or 3");
  return g;
}

namespace {

// The image resampled to w x h (3 channels, float pixel values).
std::vector<float> resample(const Image& img, int64_t w, int64_t h, Preprocess::Interpolation mode) {
  std::vector<float> out(static_cast<size_t>(w * h * 3));
  const double sx = static_cast<double>(img.width) / static_cast<double>(w);
  const double sy = static_cast<double>(img.height) / static_cast<double>(h);
  auto px = [&](int64_t x, int64_t y, int c) {
    return static_cast<float>(img.rgb[static_cast<size_t>((y * img.width + x) * 3 + c)]);
  };
  for (int64_t y = 0; y < h; ++y) {
    const double fy = std::max(0.0, (static_cast<double>(y) + 0.5) * sy - 0.5);
    const int64_t y0 = std::min<int64_t>(static_cast<int64_t>(fy), img.height - 1);
    const int64_t y1 = std::min<int64_t>(y0 + 1, img.height - 1);
    const float wy = static_cast<float>(fy - static_cast<double>(y0));
    const int64_t ny =
        std::min<int64_t>(static_cast<int64_t>((static_cast<double>(y) + 0.5) * sy), img.height - 1);
    for (int64_t x = 0; x < w; ++x) {
      float* o = &out[static_cast<size_t>((y * w + x) * 3)];
      if (mode == Preprocess::Interpolation::kNearest) {
        const int64_t nx =
            std::min<int64_t>(static_cast<int64_t>((static_cast<double>(x) + 0.5) * sx), img.width - 1);
        for (int c = 0; c < 3; ++c) o[c] = px(nx, ny, c);
        continue;
      }
      const double fx = std::max(0.0, (static_cast<double>(x) + 0.5) * sx - 0.5);
      const int64_t x0 = std::min<int64_t>(static_cast<int64_t>(fx), img.width - 1);
      const int64_t x1 = std::min<int64_t>(x0 + 1, img.width - 1);
      const float wx = static_cast<float>(fx - static_cast<double>(x0));
      for (int c = 0; c < 3; ++c) {
        const float top = px(x0, y0, c) * (1 - wx) + px(x1, y0, c) * wx;
        const float bottom = px(x0, y1, c) * (1 - wx) + px(x1, y1, c) * wx;
        o[c] = top * (1 - wy) + bottom * wy;
      }
    }
  }
  return out;
}

}  // namespace

Tensor preprocess_image(const Image& stored, const Preprocess& p, const Shape& input_shape,
                        const std::string& file) {
  const bool turn = p.exif_orientation == Preprocess::ExifOrientation::kApply && stored.orientation != 1;
  const Image turned = turn ? upright(stored) : Image{};
  const Image& img = turn ? turned : stored;
  const ImageGeometry g = image_geometry(p, input_shape, file + ": the model input");
  const int64_t H = g.height, W = g.width;
  // The region of the H x W canvas the image covers, and its pixels (3 channels) resampled to it.
  if (p.resize == Preprocess::Resize::kNone && (img.width != W || img.height != H)) {
    throw PreprocessError(file + ": image of " + std::to_string(img.width) + "x" +
                          std::to_string(img.height) + " (width x height) but the model input takes " +
                          std::to_string(W) + "x" + std::to_string(H) +
                          " and the pre-processing says resize: none");
  }
  ImageRegion where;
  try {
    where = image_region(p, img.width, img.height, W, H);
  } catch (const PreprocessError& e) {
    throw PreprocessError(file + ": " + e.what());
  }
  const auto [rw, rh, ox, oy] = where;
  const std::vector<float> region = rw == img.width && rh == img.height
                                        ? std::vector<float>(img.rgb.begin(), img.rgb.end())
                                        : resample(img, rw, rh, p.interpolation);
  const double mean[3] = {p.mean.r, p.mean.g, p.mean.b};
  const double stdv[3] = {p.std.r, p.std.g, p.std.b};
  const bool bgr = p.channel_order == Preprocess::ChannelOrder::kBgr;
  const bool nchw = p.layout == Preprocess::Layout::kNchw;
  const int64_t C = g.channels;
  std::vector<float> values(static_cast<size_t>(C * H * W));
  for (int64_t y = 0; y < H; ++y) {
    for (int64_t x = 0; x < W; ++x) {
      const bool inside = x >= ox && x < ox + rw && y >= oy && y < oy + rh;
      float rgb[3];
      for (int c = 0; c < 3; ++c) {
        rgb[c] = inside ? region[static_cast<size_t>(((y - oy) * rw + (x - ox)) * 3 + c)]
                        : static_cast<float>(p.pad_value);
      }
      for (int64_t c = 0; c < C; ++c) {
        // The colour this tensor channel holds (0 = r, 1 = g, 2 = b).
        const int colour = C == 1 ? 0 : static_cast<int>(bgr ? 2 - c : c);
        const double pixel = C == 1 ? 0.299 * rgb[0] + 0.587 * rgb[1] + 0.114 * rgb[2] : rgb[colour];
        const double v = (pixel * p.scale - mean[colour]) / stdv[colour];
        const int64_t at = nchw ? (c * H + y) * W + x : (y * W + x) * C + c;
        values[static_cast<size_t>(at)] = static_cast<float>(v);
      }
    }
  }
  if (p.dtype == Preprocess::Dtype::kFloat32) return Tensor::from_floats(input_shape, std::move(values));
  const bool u8 = p.dtype == Preprocess::Dtype::kUint8;
  std::vector<int64_t> ints(values.size());
  for (size_t i = 0; i < values.size(); ++i)
    ints[i] = std::clamp<int64_t>(std::llround(values[i]), u8 ? 0 : -128, u8 ? 255 : 127);
  return Tensor::from_ints(u8 ? DataType::kUInt8 : DataType::kInt8, input_shape, std::move(ints));
}

}  // namespace npusim::compiler
