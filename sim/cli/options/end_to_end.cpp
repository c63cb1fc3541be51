// The end-to-end option group of `run`: the pipeline around the model (--pipeline, --preprocess-on).
#include <fmt/format.h>

#include "sim/cli/options/groups.h"
#include "sim/e2e/pipeline_spec.h"

namespace npusim::sim::cli {

namespace po = boost::program_options;

GroupOptions end_to_end_options(Options& opts) {
  EndToEndCliOptions& e = opts.e2e;
  const bool npu_default = e2e::PipelineSpec{}.preprocess_on == e2e::Placement::kNpu;
  po::options_description d;
  d.add_options()("pipeline", po::value(&e.pipeline_file)->value_name("PIPE.yaml"),
                  "pre-processing, transfers, model, post-processing, a frame stream")(
      "preprocess-on", po::value(&e.preprocess_on)->value_name("host|npu"),
      fmt::format("where --preprocess's steps run in the pipeline (default {})", npu_default ? "npu" : "host")
          .c_str());
  return {"End to end (docs/e2e.md)", d};
}

}  // namespace npusim::sim::cli
