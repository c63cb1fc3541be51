#pragma once
// The pre-processing description: how an image becomes a model's input tensor (resize or letterbox
// to the input's size, channel order, scale, per-channel mean and standard deviation, layout, element
// type). Declared once through visit() -- the CLI's `--preprocess FILE.yaml` reader walks it, and an
// end-to-end pipeline's pre-processing stage is costed from the same struct -- and applied by
// preprocess_image(). docs/quantization.md ("Images as inputs") documents every key.
#include <array>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

#include "compiler/io/image.h"
#include "compiler/ir/tensor.h"
#include "isa/machine/visitor.h"

namespace npusim::compiler {

// An image that cannot become the model's input under the description (wrong size with resize none,
// a model input that is not an image): the message names the file and what was expected.
class PreprocessError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Preprocess {
  // stretch: scale each axis to the input's height and width (aspect ratio not kept);
  // letterbox: scale by the smaller ratio so the whole image fits, pad the rest with pad_value;
  // none: the image must already have the input's height and width;
  // crop: scale so the shorter side is resize_short (0: so the image just covers the input), then take
  // the centre (torchvision's Resize(resize_short) + CenterCrop, the ImageNet evaluation transform).
  enum class Resize { kStretch, kLetterbox, kNone, kCrop };
  static constexpr std::array<std::string_view, 4> kResizeNames = {"stretch", "letterbox", "none", "crop"};
  // bilinear: half-pixel centres (OpenCV's INTER_LINEAR, PIL's BILINEAR when shrinking by < 2x);
  // nearest: the source pixel whose centre is nearest.
  enum class Interpolation { kBilinear, kNearest };
  static constexpr std::array<std::string_view, 2> kInterpolationNames = {"bilinear", "nearest"};
  // letterbox: where the scaled image sits (center: YOLO's letterbox; top_left: PaddleOCR's recogniser,
  // which pads on the right and bottom).
  enum class Anchor { kCenter, kTopLeft };
  static constexpr std::array<std::string_view, 2> kAnchorNames = {"center", "top_left"};
  // A JPEG's EXIF orientation: ignore (the pixels as stored, as PIL's Image.open) or apply (turned
  // upright first, as OpenCV's imread).
  enum class ExifOrientation { kIgnore, kApply };
  static constexpr std::array<std::string_view, 2> kExifOrientationNames = {"ignore", "apply"};
  enum class ChannelOrder { kRgb, kBgr };
  static constexpr std::array<std::string_view, 2> kChannelOrderNames = {"rgb", "bgr"};
  enum class Layout { kNchw, kNhwc };
  static constexpr std::array<std::string_view, 2> kLayoutNames = {"nchw", "nhwc"};
  // float32: the normalised values as they are; uint8 / int8: rounded to nearest and saturated.
  enum class Dtype { kFloat32, kUint8, kInt8 };
  static constexpr std::array<std::string_view, 3> kDtypeNames = {"float32", "uint8", "int8"};

  struct PerChannel {
    double r = 0, g = 0, b = 0;
  };

  ExifOrientation exif_orientation = ExifOrientation::kIgnore;
  Resize resize = Resize::kStretch;
  Interpolation interpolation = Interpolation::kBilinear;
  Anchor anchor = Anchor::kCenter;
  double pad_value = 0;      // letterbox padding, in pixel units (0..255) before scale/mean/std
  int64_t resize_short = 0;  // crop: the shorter side's length after scaling (0: cover the input)
  ChannelOrder channel_order = ChannelOrder::kRgb;
  double scale = 1.0 / 255.0;  // value = (pixel * scale - mean) / std, per channel
  PerChannel mean{0, 0, 0};
  PerChannel std{1, 1, 1};
  Layout layout = Layout::kNchw;
  Dtype dtype = Dtype::kFloat32;

  void visit(isa::Visitor& v);
};

// The model input's geometry under `p`'s layout: rank 4, batch 1, 1 or 3 channels, known sizes.
struct ImageGeometry {
  int64_t height = 0, width = 0, channels = 0;
};
// Throws PreprocessError("<what> ...") when `input_shape` cannot take one image; `what` names the input.
ImageGeometry image_geometry(const Preprocess& p, const Shape& input_shape, const std::string& what);

// Where an image of img_w x img_h lands on the input's W x H canvas: the region its resampled pixels cover
// (rw x rh at ox, oy). stretch: the whole canvas; letterbox: the largest region of the image's aspect ratio,
// at the anchor; none: the image as it is; crop: the scaled image, larger than the canvas, centred (ox, oy
// <= 0, torchvision's offsets). Throws PreprocessError when resize_short leaves the canvas uncovered.
struct ImageRegion {
  int64_t rw = 0, rh = 0, ox = 0, oy = 0;
};
ImageRegion image_region(const Preprocess& p, int64_t img_w, int64_t img_h, int64_t W, int64_t H);

// Throws PreprocessError when `p.dtype` is not the element type of the model input it feeds (`what` names
// it): float32 for a floating-point input, uint8 or int8 for one of those. Cast on the way in, a float32
// image in [0, 1] would reach a uint8 input as 0s and 1s, and uint8 codes a float input unnormalised.
void check_image_dtype(const Preprocess& p, DataType input, const std::string& what);

// The model input for one image: resized/letterboxed to the input's height x width, channels
// reordered (a 1-channel input takes the ITU-R BT.601 grey level, normalised with mean.r and std.r),
// normalised, laid out and typed as `p` says. `file` names the image in errors.
Tensor preprocess_image(const Image& img, const Preprocess& p, const Shape& input_shape,
                        const std::string& file);

}  // namespace npusim::compiler
