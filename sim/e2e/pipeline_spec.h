#pragma once
// An end-to-end pipeline description (`npusim run MODEL --pipeline PIPE.yaml`, docs/e2e.md): the frame a
// camera or decoder hands over, host or NPU pre-processing stages, how the input and output cross the
// host link, post-processing stages from a costed kernel library (sim/e2e/kernels.h), and optionally a
// stream of frames. This file parses and validates the YAML; sim/e2e/pipeline.h costs it.
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "compiler/io/preprocess.h"
#include "sim/config/yaml_errors.h"
#include "sim/e2e/kernels.h"

namespace npusim::sim::e2e {

// A pipeline file the user got wrong (exit 2): one line per problem, each naming the file, line and
// column and the key involved.
class PipelineError : public YamlFileError {
 public:
  using YamlFileError::YamlFileError;
};

// Where a stage runs: the host CPU (host.cpu_gops) or the NPU's vector unit (an inserted op, like
// vendors' AIPP; element-wise pre-processing only).
enum class Placement { kHost, kNpu };

// One pre- or post-processing stage.
struct StageSpec {
  std::string name;  // `name:`, default: the op's name (numbered when repeated)
  Kernel kernel = Kernel::kFixed;
  Placement on = Placement::kHost;
  // Kernel parameters (unused ones stay 0; which apply: kernels.h).
  int64_t width = 0, height = 0;       // resize: the output size; pad: the canvas
  bool nearest = false;                // resize: `mode: nearest` (default bilinear)
  int64_t elements = 0;                // argmax/topk: the scores per frame (0: the model's outputs)
  int64_t k = 0;                       // topk
  int64_t boxes = 0;                   // nms: candidate boxes
  int64_t timesteps = 0, classes = 0;  // ctc_greedy
  double time_us = 0;                  // fixed
  int line = 0, column = 0;            // 1-based position of the stage in the file
};

// How a tensor crosses the host link. `copy`: the host copies it into (out of) the driver's buffer and
// the NPU's DMA moves it; `zero_copy`: the DMA reads (writes) the application's buffer where it is, which
// works only when that buffer meets dma.alignment_bytes; otherwise the driver copies through an aligned
// bounce buffer (the extra copy the report shows).
struct TransferSpec {
  bool zero_copy = false;
  int64_t host_alignment_bytes = 64;  // the application buffer's address is a multiple of this
};

// Frames through the pipeline (docs/e2e.md "Streams").
struct StreamSpec {
  bool enabled = false;
  int64_t frames = 100;
  double rate_fps = 0;  // 0: back to back (the next frame is captured as soon as the first stage can take it)
  int64_t buffers = 2;  // input/output buffers per direction: 1 single, 2 double buffering
  int64_t batch = 1;    // frames per inference (the model is compiled with --batch this)
  int batch_line = 0, batch_column = 0;
};

struct PipelineSpec {
  std::string path;
  // The frame handed to the first stage: width x height x channels elements of bytes_per_element.
  // Zero width: no frame given (the pre-processing stages start from the model's input).
  int64_t frame_width = 0, frame_height = 0, frame_channels = 3, frame_bytes_per_element = 1;
  std::vector<StageSpec> pre;
  // Set from --preprocess when the file has no `pre:` (sim/e2e/preprocess_stages.h): plan_pipeline then
  // runs that description's steps, sized for the model's input, instead of `pre`.
  std::optional<compiler::Preprocess> preprocess;
  std::string preprocess_source;               // the description's file, for the report's notes
  Placement preprocess_on = Placement::kHost;  // --preprocess-on: where its element-wise steps run
  TransferSpec input;
  TransferSpec output;
  std::vector<StageSpec> post;
  StreamSpec stream;
};

// Parses `path`. Throws PipelineError listing every problem (unknown keys with a suggestion, wrong
// types, out-of-range values, parameters a kernel does not take, NPU placement of a kernel the vector
// unit cannot run, a host stage after an NPU stage).
PipelineSpec parse_pipeline_file(const std::string& path);
// As parse_pipeline_file() for text already in memory; `source_name` prefixes the positions.
PipelineSpec parse_pipeline_text(const std::string& text, const std::string& source_name);

}  // namespace npusim::sim::e2e
