#pragma once
// A model's pre-processing description (--preprocess FILE.yaml, compiler/io/preprocess.h) as end-to-end
// pipeline stages: the steps compiler::preprocess_image computes for calibration and evaluation, costed by
// the pipeline's kernel library (docs/e2e.md, "Pre-processing from --preprocess"), so the accuracy figures
// and the end-to-end latency come from one description and cannot disagree.
#include <stdexcept>
#include <string>
#include <vector>

#include "compiler/io/preprocess.h"
#include "compiler/ir/tensor.h"
#include "sim/e2e/pipeline_spec.h"

namespace npusim::sim::e2e {

// The stages of `p` for a model input of `input_shape` (logical, batch first; the batch may exceed 1):
// resize (stretch: to the input's height x width; letterbox: to the region a frame_width x frame_height
// frame covers in it, then pad to the whole input -- the whole input when the frame is not given (0);
// none: no stage), convert_color (bgr, or a
// one-channel input's grey level), normalize (unless scale, mean and std leave the pixels as they are:
// then cast, for a float32 or int8 input), layout (nchw). The resize runs on the host; the element-wise
// steps after it run where `elementwise_on` says (kNpu: inserted on the NPU's vector unit after the input
// transfer, as vendors' AIPP does). Throws compiler::PreprocessError when the input cannot take an image
// (image_geometry).
std::vector<StageSpec> preprocess_stages(const compiler::Preprocess& p, const compiler::Shape& input_shape,
                                         Placement elementwise_on = Placement::kHost, int64_t frame_width = 0,
                                         int64_t frame_height = 0);

}  // namespace npusim::sim::e2e
