#include "compiler/quant/task_metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iomanip>
#include <numeric>
#include <sstream>

#include "isa/edit_distance.h"
#include "isa/json_text.h"

namespace npusim::compiler::quant {

namespace {

constexpr size_t kMaxMismatches = 5;

double ratio(int64_t part, int64_t whole) {
  return whole ? static_cast<double>(part) / static_cast<double>(whole) : 0.0;
}

// Four significant digits (0.9877, 1.234e-05): enough to compare runs, not the six that read as noise.
std::string num4(double v) {
  std::ostringstream os;
  os << std::setprecision(4) << v;
  return os.str();
}

// A share as a percentage with one decimal ("95.0%", "9.1%"), "100%" and "0%" when whole.
std::string percent(double share) {
  if (share >= 1.0) return "100%";
  if (share <= 0.0) return "0%";
  return fmt::format("{:.1f}%", 100 * share);
}

// Rows of a [.., C] output: (rows, C). Classification and recognition read the last axis as classes.
std::pair<int64_t, int64_t> rows_and_classes(const Tensor& t, const char* task) {
  if (t.rank() < 1 || t.shape.back() < 1)
    throw TaskError(std::string("--task ") + task + ": the model's output has shape " +
                    shape_to_string(t.shape) + ", which has no class axis");
  const int64_t c = t.shape.back();
  return {t.size() / c, c};
}

// (rows, classes) of a classifier's output: [classes], [N, classes] or [N, classes, 1, 1] (the layout of
// the last is [N, classes]'s).
std::pair<int64_t, int64_t> classify_rows(const Shape& s) {
  if (s.size() == 4) return {s[0], s[1]};
  if (s.size() == 2) return {s[0], s[1]};
  return {1, s.empty() ? 0 : s[0]};
}

// Class indices of row `r`, best first (the first `k`).
std::vector<int64_t> top_k(const Tensor& t, int64_t row, int64_t classes, int64_t k) {
  std::vector<int64_t> idx(static_cast<size_t>(classes));
  std::iota(idx.begin(), idx.end(), 0);
  const float* p = t.f.data() + row * classes;
  k = std::min(k, classes);
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(),
                    [p](int64_t a, int64_t b) { return p[a] > p[b] || (p[a] == p[b] && a < b); });
  idx.resize(static_cast<size_t>(k));
  return idx;
}

// Indices without leading and trailing spaces (the index one past the keys); unchanged without keys.
std::vector<int64_t> trim_spaces(const std::vector<int64_t>& v, const std::vector<std::string>& keys) {
  if (keys.empty()) return v;
  const int64_t space = static_cast<int64_t>(keys.size()) + 1;
  auto is_space = [&](int64_t i) { return i == space || keys[static_cast<size_t>(i - 1)] == " "; };
  size_t lo = 0, hi = v.size();
  while (lo < hi && v[lo] >= 1 && v[lo] <= space && is_space(v[lo])) ++lo;
  while (hi > lo && v[hi - 1] >= 1 && v[hi - 1] <= space && is_space(v[hi - 1])) --hi;
  return std::vector<int64_t>(v.begin() + static_cast<std::ptrdiff_t>(lo),
                              v.begin() + static_cast<std::ptrdiff_t>(hi));
}

}  // namespace

std::string to_string(Task t) {
  switch (t) {
    case Task::kClassify:
      return "classify";
    case Task::kOcrRec:
      return "ocr-rec";
    case Task::kOcrDet:
      return "ocr-det";
    case Task::kRegress:
      return "regress";
  }
  return "regress";
}

Task parse_task(const std::string& text) {
  for (Task t : {Task::kClassify, Task::kOcrRec, Task::kOcrDet, Task::kRegress})
    if (text == to_string(t)) return t;
  throw TaskError("--task '" + text + "' is not one of classify, ocr-rec, ocr-det, regress");
}

std::vector<std::string> read_keys_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw TaskError("cannot open the keys file '" + path + "'");
  std::vector<std::string> keys;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (keys.empty() && line.rfind("\xEF\xBB\xBF", 0) == 0) line.erase(0, 3);  // a UTF-8 byte-order mark
    keys.push_back(line);
  }
  if (keys.empty()) throw TaskError(path + ": the keys file is empty (expected one character per line)");
  return keys;
}

void check_keys(const std::vector<std::string>& keys, int64_t classes, const std::string& path) {
  const auto n = static_cast<int64_t>(keys.size());
  if (classes < 0 || classes == n + 1 || classes == n + 2) return;
  throw TaskError(path + " has " + std::to_string(n) + " keys, but the model's output has " +
                  std::to_string(classes) + " classes, which takes " + std::to_string(classes - 2) + " or " +
                  std::to_string(classes - 1) + " (the CTC blank first, one class per key, a space last)");
}

std::vector<int64_t> ctc_greedy_decode(const Tensor& scores) {
  const auto [steps, classes] = rows_and_classes(scores, "ocr-rec");
  std::vector<int64_t> out;
  int64_t prev = -1;
  for (int64_t t = 0; t < steps; ++t) {
    const int64_t best = top_k(scores, t, classes, 1)[0];
    if (best != 0 && best != prev) out.push_back(best);
    prev = best;
  }
  return out;
}

std::string decode_text(const std::vector<int64_t>& indices, const std::vector<std::string>& keys) {
  std::string s;
  for (int64_t i : indices) {
    if (keys.empty()) {
      s += (s.empty() ? "#" : " #") + std::to_string(i);
    } else if (i >= 1 && i <= static_cast<int64_t>(keys.size())) {
      s += keys[static_cast<size_t>(i - 1)];
    } else if (i == static_cast<int64_t>(keys.size()) + 1) {
      s += " ";
    } else {
      s += "<" + std::to_string(i) + ">";
    }
  }
  return s;
}

int64_t edit_distance(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  return edit_distance_between(a, b);
}

void check_task_output(Task task, const Shape& s) {
  auto known = [&](size_t d, int64_t want) { return s[d] < 0 || s[d] == want; };
  auto at_least = [&](size_t d, int64_t want) { return s[d] < 0 || s[d] >= want; };
  bool fits = true;
  std::string needs;
  switch (task) {
    case Task::kClassify:
      fits = (s.size() == 1 && at_least(0, 2)) || (s.size() == 2 && at_least(1, 2)) ||
             (s.size() == 4 && at_least(1, 2) && known(2, 1) && known(3, 1));
      needs = "class scores, [N, classes] (or [classes], [N, classes, 1, 1])";
      break;
    case Task::kOcrRec:
      fits = s.size() == 3 && known(0, 1) && at_least(2, 2);
      needs = "one text line's CTC scores, [1, steps, classes]";
      break;
    case Task::kOcrDet:
      fits = (s.size() == 4 && known(1, 1)) || s.size() == 3;
      needs = "a one-channel text probability map, [N, 1, H, W] (or [N, H, W])";
      break;
    case Task::kRegress:
      break;
  }
  if (!fits)
    throw TaskError("--task " + to_string(task) + " reads " + needs + "; the model's first output is " +
                    shape_to_string(s));
}

void TaskEvaluator::add(const Tensor& ref, const Tensor& q) {
  if (!ref.floating() || !q.floating() || ref.shape != q.shape)
    throw TaskError("--task " + to_string(o_.task) + ": the model's first output is not a float tensor");
  check_task_output(o_.task, ref.shape);
  ++m_.inputs;
  const size_t index = added_++;  // this input's place among the added ones (its label's)
  switch (o_.task) {
    case Task::kClassify: {
      const auto [rows, classes] = classify_rows(ref.shape);
      if (!o_.labels.empty()) {  // against the ground truth: one label per input
        if (rows != 1)
          throw TaskError("--labels gives one class per input; the model's first output has " +
                          std::to_string(rows) + " rows per input");
        if (index >= o_.labels.size())
          throw TaskError("--labels: more evaluation inputs than labels (" +
                          std::to_string(o_.labels.size()) + ")");
        const int64_t label = o_.labels[index];
        if (label < 0 || label >= classes)
          throw TaskError("--labels: label " + std::to_string(label) + " of input " +
                          std::to_string(index + 1) + " is not one of the output's classes (0.." +
                          std::to_string(classes - 1) + ")");
        for (auto [scores, hits] :
             {std::pair{&ref, &m_.fp32_vs_labels}, std::pair{&q, &m_.quantized_vs_labels}}) {
          const std::vector<int64_t> top = top_k(*scores, 0, classes, 5);
          hits->top1 += top[0] == label;
          hits->top5 += std::find(top.begin(), top.end(), label) != top.end();
        }
        ++m_.labelled;
      }
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t want = top_k(ref, r, classes, 1)[0];
        const std::vector<int64_t> got = top_k(q, r, classes, 5);
        m_.top1_agree += got[0] == want;
        m_.top5_agree += std::find(got.begin(), got.end(), want) != got.end();
      }
      // One input may hold several rows (a batch): count rows as inputs.
      m_.inputs += rows - 1;
      break;
    }
    case Task::kOcrRec: {
      const std::vector<int64_t> a = ctc_greedy_decode(ref), b = ctc_greedy_decode(q);
      m_.strings_equal += a == b;
      m_.strings_equal_trimmed += trim_spaces(a, o_.keys) == trim_spaces(b, o_.keys);
      m_.reference_chars += static_cast<int64_t>(a.size());
      m_.char_edits += edit_distance(a, b);
      if (a != b && m_.mismatches.size() < kMaxMismatches) {
        TaskMetrics::Mismatch mm{decode_text(a, o_.keys), decode_text(b, o_.keys)};
        const auto [steps, classes] = rows_and_classes(ref, "ocr-rec");
        for (int64_t t = 0; t < steps; ++t) {
          const int64_t want = top_k(ref, t, classes, 1)[0], got = top_k(q, t, classes, 1)[0];
          if (want == got) continue;
          ++mm.steps_differing;
          const float* r = ref.f.data() + t * classes;
          const double margin = static_cast<double>(r[want]) - r[got];
          mm.fp32_margin_min = mm.steps_differing == 1 ? margin : std::min(mm.fp32_margin_min, margin);
          mm.fp32_margin_max = std::max(mm.fp32_margin_max, margin);
        }
        m_.mismatches.push_back(std::move(mm));
      }
      break;
    }
    case Task::kOcrDet: {
      const auto [lo, hi] = std::minmax_element(ref.f.begin(), ref.f.end());
      if (lo != ref.f.end() && (*lo < 0.0f || *hi > 1.0f))
        throw TaskError(
            "--task ocr-det reads a text probability map in [0, 1] (DB's output after its sigmoid); "
            "the model's first output reaches " +
            num4(*lo) + " .. " + num4(*hi) + " in fp32");
      for (size_t k = 0; k < ref.f.size(); ++k) {
        const bool a = ref.f[k] > o_.det_threshold, b = q.f[k] > o_.det_threshold;
        m_.det_reference_pixels += a;
        m_.det_quantized_pixels += b;
        m_.det_both_pixels += a && b;
      }
      break;
    }
    case Task::kRegress:
      for (size_t k = 0; k < ref.f.size(); ++k) {
        const double e = static_cast<double>(q.f[k]) - ref.f[k];
        m_.sum_abs_error += std::fabs(e);
        m_.sum_sq_error += e * e;
        m_.sum_sq_reference += static_cast<double>(ref.f[k]) * ref.f[k];
      }
      m_.values += static_cast<int64_t>(ref.f.size());
      break;
  }
}

double TaskMetrics::top1_rate() const { return ratio(top1_agree, inputs); }
double TaskMetrics::top5_rate() const { return ratio(top5_agree, inputs); }
double TaskMetrics::string_rate() const { return ratio(strings_equal, inputs); }
double TaskMetrics::trimmed_string_rate() const { return ratio(strings_equal_trimmed, inputs); }
double TaskMetrics::char_error_rate() const { return ratio(char_edits, reference_chars); }
double TaskMetrics::det_f1() const {
  const int64_t sum = det_reference_pixels + det_quantized_pixels;
  return sum ? 2.0 * static_cast<double>(det_both_pixels) / static_cast<double>(sum) : 1.0;
}
double TaskMetrics::det_iou() const {
  const int64_t uni = det_reference_pixels + det_quantized_pixels - det_both_pixels;
  return uni ? ratio(det_both_pixels, uni) : 1.0;
}
double TaskMetrics::mean_abs_error() const {
  return values ? sum_abs_error / static_cast<double>(values) : 0.0;
}
double TaskMetrics::relative_rms_error() const {
  return sum_sq_reference > 0 ? std::sqrt(sum_sq_error / sum_sq_reference) : 0.0;
}

std::string task_json(const TaskMetrics& m) {
  std::string s;
  JsonWriter w(s);
  // Rates and errors: 6 significant digits.
  auto figure = [&](std::string_view key, double v) { w.key(key).significant(v, 6); };
  w.object().member("task", to_string(m.task)).member("inputs", m.inputs);
  switch (m.task) {
    case Task::kClassify:
      figure("top1_agreement", m.top1_rate());
      figure("top5_agreement", m.top5_rate());
      if (m.labelled > 0) {
        w.key("labels").object().member("inputs", m.labelled);
        figure("fp32_top1", ratio(m.fp32_vs_labels.top1, m.labelled));
        figure("fp32_top5", ratio(m.fp32_vs_labels.top5, m.labelled));
        figure("quantized_top1", ratio(m.quantized_vs_labels.top1, m.labelled));
        figure("quantized_top5", ratio(m.quantized_vs_labels.top5, m.labelled));
        w.end();
      }
      break;
    case Task::kOcrRec:
      w.member("strings_equal", m.strings_equal);
      figure("string_agreement", m.string_rate());
      figure("string_agreement_trimmed", m.trimmed_string_rate());
      w.member("reference_chars", m.reference_chars).member("char_edits", m.char_edits);
      figure("char_error_rate", m.char_error_rate());
      w.key("mismatches").array();
      for (const auto& mm : m.mismatches)
        w.object()
            .member("fp32", mm.reference)
            .member("quantized", mm.quantized)
            .member("steps_differing", mm.steps_differing)
            .key("fp32_margin_min")
            .significant(mm.fp32_margin_min, 6)
            .key("fp32_margin_max")
            .significant(mm.fp32_margin_max, 6)
            .end();
      w.end();
      break;
    case Task::kOcrDet:
      figure("f1", m.det_f1());
      figure("iou", m.det_iou());
      w.member("reference_pixels", m.det_reference_pixels).member("quantized_pixels", m.det_quantized_pixels);
      w.member("both_pixels", m.det_both_pixels);
      break;
    case Task::kRegress:
      figure("mean_abs_error", m.mean_abs_error());
      figure("relative_rms_error", m.relative_rms_error());
      break;
  }
  w.end();
  return s;
}

std::string task_summary(const TaskMetrics& m) {
  std::ostringstream o;
  o << "task " << to_string(m.task) << " (" << m.inputs << " inputs, quantized vs fp32): ";
  switch (m.task) {
    case Task::kClassify:
      o << "top-1 agreement " << percent(m.top1_rate()) << ", top-5 agreement " << percent(m.top5_rate())
        << "\n";
      if (m.labelled > 0)
        o << "labels (" << m.labelled << " inputs): top-1 quantized "
          << percent(ratio(m.quantized_vs_labels.top1, m.labelled)) << ", fp32 "
          << percent(ratio(m.fp32_vs_labels.top1, m.labelled)) << "; top-5 quantized "
          << percent(ratio(m.quantized_vs_labels.top5, m.labelled)) << ", fp32 "
          << percent(ratio(m.fp32_vs_labels.top5, m.labelled)) << "\n";
      break;
    case Task::kOcrRec:
      o << "same string on " << m.strings_equal << " of " << m.inputs << " (" << percent(m.string_rate())
        << "; " << percent(m.trimmed_string_rate())
        << " ignoring leading/trailing spaces), character error rate "
        << fmt::format("{:.2f}%", 100 * m.char_error_rate()) << "\n";
      for (const auto& mm : m.mismatches)
        o << "  fp32 \"" << mm.reference << "\"  quantized \"" << mm.quantized << "\"  ("
          << mm.steps_differing << " step(s) differ; fp32 margin there " << num4(mm.fp32_margin_min) << " to "
          << num4(mm.fp32_margin_max) << ")\n";
      break;
    case Task::kOcrDet:
      o << "text-map F1 " << num4(m.det_f1()) << ", IoU " << num4(m.det_iou())
        << " (pixels above the threshold)\n";
      break;
    case Task::kRegress:
      o << "mean |error| " << num4(m.mean_abs_error()) << ", relative RMS error "
        << num4(m.relative_rms_error()) << "\n";
      break;
  }
  return o.str();
}

}  // namespace npusim::compiler::quant
