// The option groups' input files and folders, checked once after parsing: a missing, unreadable or
// wrong-kind path is one sentence naming its option (the readers behind them named only the path, or
// took a directory for an empty file).
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/io/image.h"
#include "sim/cli/files.h"
#include "sim/cli/options/groups.h"

namespace npusim::sim::cli {
namespace {

// The first image (in name order) of a folder of samples or of its sub-folders (a folder a class), or "".
std::string first_image(const std::string& folder) {
  namespace fs = std::filesystem;
  std::vector<fs::path> files;
  std::error_code ec;
  for (const auto& e : fs::recursive_directory_iterator(folder, ec)) {
    if (e.is_regular_file(ec) && e.path().filename().string().rfind('.', 0) != 0) files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  for (const fs::path& f : files)
    if (compiler::sniff_image(f.string()) != compiler::ImageFormat::kNone) return f.string();
  return "";
}

}  // namespace

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
  // Images without --preprocess: said now, not after a calibration of minutes on other inputs.
  if (!o.model.preprocess_file.empty()) return;
  for (const Folder& d :
       {Folder{"--calibration", o.model.calibration_dir, ""},
        Folder{"--accuracy-inputs", o.accuracy.inputs_dir, ""},
        Folder{"--advise-inputs", o.accuracy.advise_inputs, ""}, Folder{"--inputs", o.io.inputs_dir, ""}}) {
    if (d.path.empty()) continue;
    const std::string image = first_image(d.path);
    if (!image.empty())
      throw UsageError(fmt::format(
          "{} {} holds images ({}): an image needs --preprocess FILE.yaml to say how it becomes the model's "
          "input (resize, scale, mean/std, layout; docs/quantization.md)",
          d.option, d.path, std::filesystem::path(image).filename().string()));
  }
}

}  // namespace npusim::sim::cli
