// The end-to-end option group of `run`: the pipeline around the model (--pipeline, --preprocess-on).
#include <fmt/format.h>

#include "sim/cli/options/groups.h"
#include "sim/e2e/pipeline_spec.h"

namespace npusim::sim::cli {

namespace po = boost::program_options;

po::options_description end_to_end_options(Options& opts) {
  EndToEndCliOptions& e = opts.e2e;
  const bool npu_default = e2e::PipelineSpec{}.preprocess_on == e2e::Placement::kNpu;
  po::options_description d("End to end (docs/e2e.md)");
  d.add_options()("pipeline", po::value(&e.pipeline_file)->value_name("PIPE.yaml"),
                  "end to end: pre-processing, transfers, the model, post-processing and a stream of frames; "
                  "the report's e2e section (docs/e2e.md)")(
      "preprocess-on", po::value(&e.preprocess_on)->value_name("host|npu"),
      fmt::format("--pipeline with --preprocess: where the description's colour, normalisation and layout "
                  "steps run (default {}; npu: on the NPU's vector unit after the input transfer, like "
                  "vendors' AIPP; the resize stays on the host)",
                  npu_default ? "npu" : "host")
          .c_str());
  return d;
}

}  // namespace npusim::sim::cli
