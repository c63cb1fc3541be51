#pragma once
// INT8 post-training calibration: run the FP32 reference interpreter over calibration inputs, collect
// per-tensor statistics (range and histograms), and choose each tensor's clipping range by min-max,
// percentile, entropy (KL divergence, TensorRT's method) or MSE (the range with the least expected squared
// error, clipping and rounding together).
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "compiler/io/preprocess.h"
#include "compiler/ir/graph.h"

namespace npusim::compiler::quant {

// Calibration data the user got wrong (missing folder, unreadable file, shape mismatch): exit code 2.
class CalibrationError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class CalibrationMethod { kMinMax, kPercentile, kEntropy, kMse };
std::string to_string(CalibrationMethod m);
// "minmax" | "percentile" | "entropy" | "mse"; throws CalibrationError.
CalibrationMethod parse_calibration_method(const std::string& text);

// Running statistics of one tensor over all calibration inputs: exact min/max and two histograms of
// magnitudes (positive values and negated negative values, exact zeros left out: they are exact in any
// range) with `bins` equal bins over [0, range).
// The range starts at the first non-zero batch's max |x| and doubles (merging bin pairs) whenever a
// later value exceeds it, so one pass over the inputs suffices and bins stay aligned.
class TensorStats {
 public:
  explicit TensorStats(int bins = 2048) : pos_(bins, 0.0), neg_(bins, 0.0) {}
  void add(const float* data, size_t n);
  // add() plus the per-channel sums behind channel_means() (a shape that changes between samples
  // drops them).
  void add(const Tensor& t);

  // Means over all samples per index of dim 1 (the channels of NCHW / NCL) and per index of the last
  // dim (the K of a MatMul / Gemm input): the E[x] of bias correction. Empty when unknown.
  std::vector<double> channel_means() const;
  std::vector<double> last_dim_means() const;
  // E[x^2] per index of dim 1 / of the last dim, as the means (WeightRange::kOutputMse).
  std::vector<double> channel_second_moments() const;
  std::vector<double> last_dim_second_moments() const;
  // max |x| per index of the last dim over all samples (SmoothQuant's activation ranges); empty when unknown.
  std::vector<double> last_dim_max_abs() const;
  // The shape of the tensors behind the means (empty when unknown).
  Shape channel_shape() const { return shape_consistent_ && channel_samples_ ? shape_ : Shape{}; }

  float min() const { return min_; }
  float max() const { return max_; }
  int64_t count() const { return count_; }
  int bins() const { return static_cast<int>(pos_.size()); }
  double bin_width() const { return width_; }
  const std::vector<double>& positive_histogram() const { return pos_; }
  const std::vector<double>& negative_histogram() const { return neg_; }
  // Histogram of |x| (positive + negative).
  std::vector<double> magnitude_histogram() const;

 private:
  void grow_to(double amax);
  // sums / the number of values behind each (per index of dim 1, or of the last dim); empty when unknown.
  std::vector<double> means_of(const std::vector<double>& sums, bool last_dim) const;
  std::vector<double> pos_, neg_;
  double width_ = 0;  // 0 until the first non-zero value
  float min_ = 0, max_ = 0;
  int64_t count_ = 0;
  Shape shape_;  // of the tensors add(const Tensor&) saw
  bool shape_consistent_ = true;
  std::vector<double> dim1_sum_, last_sum_;  // per index of dim 1 / of the last dim
  std::vector<double> dim1_sq_, last_sq_;    // the same sums of squares
  std::vector<double> last_max_;             // max |x| per index of the last dim
  int64_t channel_samples_ = 0;
};

struct CalibrationOptions {
  // Percentile by default: measured against entropy (int8, per-channel, edge, commit d7045e1) on trained
  // PP-OCR models with 32 rendered calibration images -- the direction classifier agrees with fp32 on
  // 50/50 held-out lines (entropy 48/50), PP-OCRv4 rec reads fp32's string on 34/40 (entropy 23/40) --
  // and on the random-weight exports with 32 synthetic inputs: MobileNetV2 14.15 dB (13.71), ResNet-18
  // 29.20 dB (29.28).
  CalibrationMethod method = CalibrationMethod::kPercentile;
  double percentile = 99.99;  // kPercentile: keep this percentage of the magnitudes inside the range
  // kEntropy: never clip more than this fraction of the values (see entropy_threshold). Measured on
  // random-weight ResNet-18 (int8, 32 synthetic inputs): output SQNR 4.0 dB without it (the global
  // average pool's output was folded into one level), 29.3 dB with 1e-2, 1e-3 or 1e-4.
  double entropy_max_clipped = 1e-3;
  int bins = 2048;
};

// The clipping range [lo, hi] chosen for a tensor (lo <= 0 <= hi is not implied; quantize_plan widens).
struct ClipRange {
  float lo = 0, hi = 0;
};

// TensorRT's entropy calibration on a magnitude histogram: for every candidate threshold bin i in
// [quant_bins, bins], P = hist[0..i) with the clipped tail added to its last bin, Q = P's bins merged
// into `quant_bins` levels and expanded back over P's non-empty bins; returns the threshold
// (i * bin_width) minimising KL(P || Q). An empty histogram returns 0.
// Candidates that clip more than `max_clipped` of the mass are not considered: KL compares shapes
// after folding the tail into the last bin, so it cannot see the clipping error itself, and on a
// distribution with no mass near zero (a global average pool's output) it happily folds almost
// everything into one level (KL ~ 0) -- that would crush the tensor.
double entropy_threshold(const std::vector<double>& hist, double bin_width, int quant_bins = 128,
                         double max_clipped = 1e-3);
// The magnitude below which `percentile` % of the histogram's mass lies (upper edge of that bin).
double percentile_threshold(const std::vector<double>& hist, double bin_width, double percentile);
// The clipping threshold t (a bin edge) minimising the expected squared error of the histogram's values
// when the range [0, t] (plus `other` on the other side of zero, kept fixed) is cut into `steps` equal
// steps of size (t + other) / steps: a value x > t costs (x - t)^2 (clipped), a value inside costs the
// rounding noise step^2 / 12, or x^2 when it is below half a step (it rounds to zero, which is exact on
// the grid); the `other_count` values on the other side add their rounding noise. Values are taken at
// their bin centres. An empty histogram returns 0.
double mse_threshold(const std::vector<double>& hist, double bin_width, int steps, double other = 0,
                     double other_count = 0);

// The range for one tensor. symmetric: [-t, t] from the magnitude histogram; asymmetric: each side
// from its own histogram (entropy: one threshold from the magnitudes, then intersected with [min, max]).
// Percentile, asymmetric, a tensor that is never negative (after ReLU): the upper end is the larger of the
// percentile's and mse_threshold's on 255 steps -- its grid is twice as fine as a side of a two-sided
// range, so the clipping the percentile accepts costs more than the rounding it saves. Measured
// (docs/quantization.md, "One-sided tensors"): MobileNetV3-Small 18.27 -> 19.11 dB output SQNR on
// scripts/ptq_compare.py's 32 evaluation inputs; PP-OCR cls on 400 held-out lines 98.5 -> 99.5 % top-1.
ClipRange choose_range(const TensorStats& s, const CalibrationOptions& o, bool symmetric);

// One calibration (or evaluation) sample: a tensor per graph input, by name.
using Sample = std::map<std::string, Tensor>;

// Runs the graph in FP32 (emulate.h with an all-fp32 plan: the interpreter's kernels) on every sample and
// returns statistics of every non-constant floating value (graph inputs and node outputs), and of each
// matrix node's output before its fused activation under pre_activation_key(output) (the codes a
// lookup-table epilogue reads, precision.h).
std::map<std::string, TensorStats> collect_statistics(const Graph& g, const std::vector<Sample>& samples,
                                                      int bins = 2048);

// The statistics key of a matrix node's output `value` before its fused activation (no value has this name:
// '#' does not occur in the graph's value names the importer writes).
std::string pre_activation_key(const std::string& value);

// Calibration inputs from a folder: either one file per sample (models with one input) or one
// sub-folder per sample holding one file per input (matched by the TensorProto's name, else the file
// stem, else the order input_0, input_1, ... as in ONNX test data sets). Files are .npy (float32/64,
// float16, int8/uint8/int32/int64), serialized ONNX TensorProto (.pb) or PNG/JPEG images, which
// `preprocess` turns into the input (required for images). Files are recognised by their content
// (.pb by name); hidden files are skipped and any other file is an error. Samples are sorted by path;
// at most `limit` are read (0 = all). Throws CalibrationError naming the file and what was expected.
// `names`, when given, receives each sample's file (or sub-folder) name, in the samples' order.
std::vector<Sample> load_samples(const Graph& g, const std::string& folder, int limit = 0,
                                 const Preprocess* preprocess = nullptr,
                                 std::vector<std::string>* names = nullptr);
// One tensor from a .npy file (float32 result for float data, exact ints otherwise).
Tensor read_npy_tensor(const std::string& path);

// N seeded synthetic samples: every float input filled with N(0, 1) values (std::mt19937 seeded
// with seed + sample index). Calibrating on them says nothing about real inputs: callers must flag it
// (CalibrationInfo::synthetic).
std::vector<Sample> synthetic_samples(const Graph& g, int n, uint32_t seed);

}  // namespace npusim::compiler::quant
