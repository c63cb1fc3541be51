// The accuracy option group of `run`: the quantized reference against the fp32 reference (--accuracy,
// --task, --advise-sqnr, ...).
#include <fmt/format.h>

#include "sim/cli/options/groups.h"

namespace npusim::sim::cli {

namespace po = boost::program_options;

po::options_description accuracy_options(Options& o) {
  AccuracyCliOptions& a = o.accuracy;
  po::options_description d(
      "Accuracy (the quantized reference against the FP32 reference, docs/quantization.md)");
  d.add_options()(
      "accuracy", po::bool_switch(&a.accuracy),
      "add the per-layer accuracy report (SQNR, cosine, max error, first bad layer, weight outliers) to "
      "the report's `accuracy` section and print a summary")(
      "accuracy-threshold", po::value(&a.threshold_db)->value_name("DB"),
      fmt::format("first_bad_layer: the first layer whose SQNR is below DB (default {})",
                  AccuracyCliOptions{}.threshold_db)
          .c_str())("accuracy-samples",
                    po::value<int>()->value_name("N")->notifier([&a](int v) { a.samples = v; }),
                    fmt::format("evaluation inputs: the first N of --accuracy-inputs DIR (default: all), "
                                "else of --calibration DIR, "
                                "else N "
                                "seeded synthetic inputs (other seeds than calibration) (default {})",
                                AccuracyCliOptions::kSyntheticSamples)
                        .c_str())(
      "accuracy-inputs", po::value(&a.inputs_dir)->value_name("DIR"),
      "held-out evaluation inputs, laid out as --calibration's (images with --preprocess, .npy/.pb)")(
      "task", po::value(&a.task)->value_name("T"),
      "task metrics of the quantized model against fp32 on the first output: classify (top-1/top-5 "
      "agreement), "
      "ocr-rec (CTC greedy-decoded strings, character error rate), ocr-det (F1/IoU of the thresholded text "
      "map), regress (mean and relative error)")(
      "keys", po::value(&a.keys)->value_name("FILE"),
      "ocr-rec: the recogniser's character list, one per line (e.g. PaddleOCR's ppocr_keys_v1.txt); implies "
      "--task ocr-rec")(
      "advise-sqnr", po::value<double>()->value_name("DB")->notifier([&a](double v) { a.advise_sqnr = v; }),
      "find the layers to keep in fp16 so the output SQNR reaches DB at the lowest simulated latency, and "
      "print "
      "them as a --precision-override list")(
      "advise-inputs", po::value(&a.advise_inputs)->value_name("DIR"),
      "--advise-sqnr: fit the advice on these inputs (e.g. the --calibration folder) instead of the "
      "evaluation "
      "inputs, and judge the advised plan on the evaluation inputs (--accuracy-inputs), which the advice "
      "then never saw")("advise-samples",
                        po::value<int>()->value_name("N")->notifier([&a](int v) { a.advise_samples = v; }),
                        "--advise-inputs: fit on the first N of its files (default: all)");
  return d;
}

}  // namespace npusim::sim::cli
