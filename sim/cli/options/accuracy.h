#pragma once
// The accuracy option group of `run`: the quantized reference against the fp32 reference (--accuracy,
// --task, --advise-sqnr, ...).
#include <boost/program_options.hpp>
#include <optional>
#include <string>

namespace npusim::sim::cli {

// --accuracy and --advise-sqnr.
struct AccuracyCliOptions {
  bool accuracy = false;
  double threshold_db = 20.0;
  std::optional<int> samples;  // default: 4, or every file of --accuracy-inputs
  std::string inputs_dir;      // --accuracy-inputs
  std::string task;            // --task
  std::string keys;            // --keys FILE (ocr-rec)
  std::optional<double> advise_sqnr;
  std::string advise_inputs;  // --advise-inputs: fit the advice here, judge it on the evaluation inputs
  std::optional<int> advise_samples;  // --advise-samples (default: every file of --advise-inputs)
};

boost::program_options::options_description accuracy_options(AccuracyCliOptions& a);

}  // namespace npusim::sim::cli
