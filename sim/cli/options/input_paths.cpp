// The option groups' input files and folders, checked once after parsing: a missing, unreadable or
// wrong-kind path is one sentence naming its option (the readers behind them named only the path, or
// took a directory for an empty file).
#include <string>
#include <string_view>

#include "sim/cli/files.h"
#include "sim/cli/options/groups.h"

namespace npusim::sim::cli {

void check_input_paths(const Options& o) {
  struct Path {
    std::string_view option;
    const std::string& path;
  };
  for (const Path& f : {Path{"--preprocess", o.model.preprocess_file},
                        Path{"--precision-file", o.model.precision_file}, Path{"--mapping", o.model.mapping},
                        Path{"--pipeline", o.e2e.pipeline_file}, Path{"--requests", o.dynamic.requests},
                        Path{"--labels", o.accuracy.labels}, Path{"--keys", o.accuracy.keys}})
    if (!f.path.empty()) check_input_file(f.option, f.path);
  struct Folder {
    std::string_view option;
    const std::string& path;
    std::string_view holds;
  };
  constexpr std::string_view kSamples = "inputs: images, .npy or .pb files";
  for (const Folder& d :
       {Folder{"--calibration", o.model.calibration_dir, kSamples},
        Folder{"--accuracy-inputs", o.accuracy.inputs_dir, kSamples},
        Folder{"--advise-inputs", o.accuracy.advise_inputs, kSamples},
        Folder{"--inputs", o.io.inputs_dir, "the model's inputs: NAME.npy, .pb or an image"}})
    if (!d.path.empty()) check_input_folder(d.option, d.path, d.holds);
}

}  // namespace npusim::sim::cli
