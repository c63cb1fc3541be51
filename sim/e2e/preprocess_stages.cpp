#include "sim/e2e/preprocess_stages.h"

namespace npusim::sim::e2e {

std::vector<StageSpec> preprocess_stages(const compiler::Preprocess& p, const compiler::Shape& input_shape,
                                         Placement elementwise_on, int64_t frame_width,
                                         int64_t frame_height) {
  using compiler::Preprocess;
  compiler::Shape one = input_shape;
  if (one.size() == 4) one[0] = 1;  // one frame: a batch is the pipeline's stream.batch
  const compiler::ImageGeometry geo = compiler::image_geometry(p, one, "the model's input");
  std::vector<StageSpec> out;
  auto add = [&out, elementwise_on](Kernel k) {
    StageSpec s;
    s.kernel = k;
    s.name = std::string(kernel_name(k));
    if (k != Kernel::kResize && k != Kernel::kPad) s.on = elementwise_on;
    out.push_back(s);
    return &out.back();
  };
  if (p.resize != Preprocess::Resize::kNone) {
    // The region the frame covers (compiler::image_region, as calibration computes it), then the padding.
    // A centre crop resamples only the pixels it keeps: the whole input, no padding.
    const compiler::ImageRegion r =
        frame_width > 0 && frame_height > 0 && p.resize != Preprocess::Resize::kCrop
            ? compiler::image_region(p, frame_width, frame_height, geo.width, geo.height)
            : compiler::ImageRegion{geo.width, geo.height, 0, 0};
    StageSpec* s = add(Kernel::kResize);
    s->width = r.rw;
    s->height = r.rh;
    s->nearest = p.interpolation == Preprocess::Interpolation::kNearest;
    if (r.rw * r.rh < geo.width * geo.height) {
      StageSpec* pad = add(Kernel::kPad);
      pad->width = geo.width;
      pad->height = geo.height;
    }
  }
  if (p.channel_order == Preprocess::ChannelOrder::kBgr || geo.channels == 1) add(Kernel::kConvertColor);
  const bool identity = p.scale == 1.0 && p.mean.r == 0 && p.mean.g == 0 && p.mean.b == 0 && p.std.r == 1 &&
                        p.std.g == 1 && p.std.b == 1;
  if (!identity)
    add(Kernel::kNormalize);
  else if (p.dtype != Preprocess::Dtype::kUint8)
    add(Kernel::kCast);
  if (p.layout == Preprocess::Layout::kNchw) add(Kernel::kLayout);
  return out;
}

}  // namespace npusim::sim::e2e
