#include "sim/e2e/preprocess_stages.h"

namespace npusim::sim::e2e {

std::vector<StageSpec> preprocess_stages(const compiler::Preprocess& p, const compiler::Shape& input_shape,
                                         Placement elementwise_on) {
  using compiler::Preprocess;
  compiler::Shape one = input_shape;
  if (one.size() == 4) one[0] = 1;  // one frame: a batch is the pipeline's stream.batch
  const compiler::ImageGeometry geo = compiler::image_geometry(p, one, "the model's input");
  std::vector<StageSpec> out;
  auto add = [&out, elementwise_on](Kernel k) {
    StageSpec s;
    s.kernel = k;
    s.name = std::string(kernel_name(k));
    if (k != Kernel::kResize) s.on = elementwise_on;
    out.push_back(s);
    return &out.back();
  };
  if (p.resize != Preprocess::Resize::kNone) {
    // Letterbox is costed as a resize to the whole input: the padding's stores count as output elements.
    StageSpec* s = add(Kernel::kResize);
    s->width = geo.width;
    s->height = geo.height;
    s->nearest = p.interpolation == Preprocess::Interpolation::kNearest;
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
