// The accuracy option group of `run`: the quantized reference against the fp32 reference (--accuracy,
// --task, --advise-sqnr, ...).
#include <fmt/format.h>

#include "sim/cli/options/groups.h"

namespace npusim::sim::cli {

namespace po = boost::program_options;

GroupOptions accuracy_options(Options& o) {
  AccuracyCliOptions& a = o.accuracy;
  po::options_description d;
  d.add_options()("accuracy", po::bool_switch(&a.accuracy), "add the per-layer accuracy report")(
      "accuracy-threshold", po::value(&a.threshold_db)->value_name("DB"),
      fmt::format("first bad layer: SQNR below DB (default {})", AccuracyCliOptions{}.threshold_db).c_str())(
      "accuracy-samples", po::value<int>()->value_name("N")->notifier([&a](int v) { a.samples = v; }),
      fmt::format("evaluation inputs (default: all files, else {} synthetic)",
                  AccuracyCliOptions::kSyntheticSamples)
          .c_str())("accuracy-inputs", po::value(&a.inputs_dir)->value_name("DIR"),
                    "held-out evaluation inputs")("task", po::value(&a.task)->value_name("T"),
                                                  "task metrics: classify, ocr-rec, ocr-det or regress")(
      "keys", po::value(&a.keys)->value_name("FILE"), "ocr-rec: the recogniser's characters, one a line")(
      "labels", po::value(&a.labels)->value_name("FILE"),
      "classify: 'NAME CLASS' per --accuracy-inputs file: top-1/top-5 against the ground truth")(
      "advise-sqnr", po::value<double>()->value_name("DB")->notifier([&a](double v) { a.advise_sqnr = v; }),
      "advise the fp16 layers that reach DB output SQNR fastest")(
      "advise-inputs", po::value(&a.advise_inputs)->value_name("DIR"),
      "fit the advice on these inputs instead")(
      "advise-samples", po::value<int>()->value_name("N")->notifier([&a](int v) { a.advise_samples = v; }),
      "fit on the first N files of --advise-inputs (default: all)")(
      "advise-out", po::value(&a.advise_out)->value_name("FILE.yaml"),
      "write the advice as a --precision-file");
  return {"Accuracy of int8 against fp32 (docs/quantization.md)", d};
}

}  // namespace npusim::sim::cli
