#pragma once
// Task metrics: what a user judges a quantized model by, measured between the quantized reference
// and the fp32 reference on the same inputs (no labels needed): the same class (top-1 / top-5
// agreement), the same text (CTC greedy-decoded strings, character error rate), the same text regions
// (DB detection: F1 and IoU of the thresholded probability maps), or for plain regression the error
// in the outputs' units. Fed the model's first output per evaluation input.
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "compiler/ir/tensor.h"

namespace npusim::compiler::quant {

class TaskError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class Task { kClassify, kOcrRec, kOcrDet, kRegress };
std::string to_string(Task t);
// "classify" | "ocr-rec" | "ocr-det" | "regress"; throws TaskError.
Task parse_task(const std::string& text);

struct TaskOptions {
  Task task = Task::kRegress;
  // ocr-rec: the character of each class index from 1 (0 is the CTC blank), as PaddleOCR's
  // ppocr_keys_v1.txt lists them one per line; an index one past the keys is the space (PaddleOCR's
  // use_space_char). Empty: strings show class indices ("#12 #5").
  std::vector<std::string> keys;
  double det_threshold =
      0.3;  // ocr-det: a pixel is text when its probability exceeds this (PaddleOCR's det_db_thresh)
  // classify: the true class of each evaluation input, in the order they are added (--labels); empty:
  // no ground truth, agreement with fp32 only.
  std::vector<int64_t> labels;
};

// Whether an output of `shape` is what `task` reads; throws TaskError saying what it needs otherwise.
// classify: [classes], [N, classes] or [N, classes, 1, 1]; ocr-rec: one line's scores, [1, T, classes];
// ocr-det: a one-channel map, [N, 1, H, W] or [N, H, W]; regress: any. A dimension of -1 (not known before
// the run) passes.
void check_task_output(Task task, const Shape& shape);

// The keys file: one entry per line (UTF-8, the line ending removed). Throws TaskError naming the file.
std::vector<std::string> read_keys_file(const std::string& path);

// Throws TaskError unless a recogniser with `classes` output classes reads `keys` (from `path`): the CTC
// blank first, one class per key, and PaddleOCR's optional space last, so classes = keys + 1 or + 2. A
// wrong keys file would turn every decoded string into other characters.
void check_keys(const std::vector<std::string>& keys, int64_t classes, const std::string& path);

// CTC greedy decoding of a [1, T, C] (or [T, C]) score tensor: the argmax per step, repeats merged,
// blanks (class 0) dropped. Returns class indices.
std::vector<int64_t> ctc_greedy_decode(const Tensor& scores);
// Indices as text through `keys` (see TaskOptions::keys).
std::string decode_text(const std::vector<int64_t>& indices, const std::vector<std::string>& keys);
// Levenshtein distance between two index sequences.
int64_t edit_distance(const std::vector<int64_t>& a, const std::vector<int64_t>& b);

struct TaskMetrics {
  Task task = Task::kRegress;
  int64_t inputs = 0;
  // classify: over inputs (each row of a [N, classes] output counts as one)
  int64_t top1_agree = 0;  // the quantized top-1 class is the fp32 top-1 class
  int64_t top5_agree = 0;  // the fp32 top-1 class is among the quantized top-5
  // classify with labels (TaskOptions::labels): how often each run's top-1 is the label, and the label is
  // among its top-5, over the `labelled` inputs.
  struct LabelHits {
    int64_t top1 = 0, top5 = 0;
  };
  int64_t labelled = 0;
  LabelHits fp32_vs_labels, quantized_vs_labels;
  // ocr-rec
  int64_t strings_equal = 0;
  int64_t strings_equal_trimmed = 0;  // equal once leading/trailing spaces are dropped (needs keys)
  int64_t reference_chars = 0;        // characters fp32 decoded, over all inputs
  int64_t char_edits = 0;             // edit distance quantized vs fp32, summed
  struct Mismatch {
    std::string reference, quantized;
    // Over the steps whose argmax differs: how many, and the smallest and largest fp32 margin there
    // (fp32's score of its own choice minus its score of the quantized run's choice, in the output's
    // units). A small minimum: at least one flip was a near-tie in fp32 itself; a large maximum is
    // often a character emitted one step earlier or later, which leaves the string as it is.
    int64_t steps_differing = 0;
    double fp32_margin_min = 0, fp32_margin_max = 0;
  };
  std::vector<Mismatch> mismatches;  // the first few differing strings
  // ocr-det: pixels above the threshold, over all inputs
  int64_t det_reference_pixels = 0, det_quantized_pixels = 0, det_both_pixels = 0;
  // regress
  double sum_abs_error = 0, sum_sq_error = 0, sum_sq_reference = 0;
  int64_t values = 0;

  double top1_rate() const;
  double top5_rate() const;
  double string_rate() const;
  double trimmed_string_rate() const;
  double char_error_rate() const;  // char_edits / reference_chars
  double det_f1() const;           // 2|A∩B| / (|A| + |B|); 1 when both maps are empty
  double det_iou() const;          // |A∩B| / |A∪B|; 1 when both are empty
  double mean_abs_error() const;
  double relative_rms_error() const;  // sqrt(sum err^2 / sum ref^2)
};

// Accumulates TaskMetrics one evaluation input at a time.
class TaskEvaluator {
 public:
  explicit TaskEvaluator(TaskOptions o) : o_(std::move(o)) { m_.task = o_.task; }
  // The model's first output for one input: fp32 reference and quantized. Throws TaskError when the
  // output's shape does not fit the task (check_task_output), or, for ocr-det, when fp32's map is not a
  // probability map (values outside [0, 1]).
  void add(const Tensor& reference, const Tensor& quantized);
  const TaskMetrics& metrics() const { return m_; }

 private:
  TaskOptions o_;
  TaskMetrics m_;
  size_t added_ = 0;  // calls of add(): the index of the input's label
};

// The `task` object of the accuracy section (docs/quantization.md) and its summary lines.
std::string task_json(const TaskMetrics& m);
std::string task_summary(const TaskMetrics& m);

}  // namespace npusim::compiler::quant
