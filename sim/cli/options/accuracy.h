#pragma once
// What the accuracy option group of `run` (accuracy.cpp) reads: the quantized reference against the fp32
// reference (--accuracy, --task, --advise-sqnr, ...).
#include <optional>
#include <string>

#include "compiler/quant/accuracy.h"

namespace npusim::sim::cli {

// --accuracy and --advise-sqnr.
struct AccuracyCliOptions {
  bool accuracy = false;
  // Synthetic evaluation inputs (and calibration files evaluated) when --accuracy-samples is not given.
  static constexpr int kSyntheticSamples = 4;
  double threshold_db = compiler::quant::AccuracyOptions{}.bad_layer_sqnr_db;
  std::optional<int> samples;  // default: kSyntheticSamples, or every file of --accuracy-inputs
  std::string inputs_dir;      // --accuracy-inputs
  std::string task;            // --task
  std::string keys;            // --keys FILE (ocr-rec)
  std::string labels;          // --labels FILE (classify): the true class of each --accuracy-inputs file
  std::optional<double> advise_sqnr;
  std::string advise_inputs;  // --advise-inputs: fit the advice here, judge it on the evaluation inputs
  std::optional<int> advise_samples;  // --advise-samples (default: every file of --advise-inputs)
  std::string advise_out;             // --advise-out FILE.yaml: the advice as a --precision-file
};

}  // namespace npusim::sim::cli
