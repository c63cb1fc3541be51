#include "compiler/quant/calibration.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>

#include "compiler/import/import.h"
#include "compiler/interp/interpreter.h"
#include "compiler/io/image.h"
#include "compiler/io/npy.h"
#include "compiler/ir/memory_budget.h"
#include "compiler/quant/emulate.h"
#include "isa/numerics.h"

namespace npusim::compiler::quant {

namespace fs = std::filesystem;

std::string to_string(CalibrationMethod m) {
  switch (m) {
    case CalibrationMethod::kMinMax:
      return "minmax";
    case CalibrationMethod::kPercentile:
      return "percentile";
    case CalibrationMethod::kEntropy:
      return "entropy";
    case CalibrationMethod::kMse:
      return "mse";
  }
  return "minmax";
}

CalibrationMethod parse_calibration_method(const std::string& text) {
  if (text == "minmax" || text == "min-max") return CalibrationMethod::kMinMax;
  if (text == "percentile") return CalibrationMethod::kPercentile;
  if (text == "entropy" || text == "kl") return CalibrationMethod::kEntropy;
  if (text == "mse") return CalibrationMethod::kMse;
  throw CalibrationError("unknown calibration method '" + text +
                         "' (expected minmax, percentile, entropy or mse)");
}

// ---- statistics --------------------------------------------------------------------------------

void TensorStats::grow_to(double amax) {
  const int n = bins();
  if (width_ == 0) {
    width_ = amax / n;
    // The bin that holds amax must exist: amax / width = n exactly, so widen by one ulp-ish margin.
    width_ = std::nextafter(width_, std::numeric_limits<double>::infinity());
    return;
  }
  while (amax >= width_ * n) {
    for (auto* h : {&pos_, &neg_}) {
      std::vector<double> merged(n, 0.0);
      for (int k = 0; k < n; ++k) merged[k / 2] += (*h)[k];
      *h = std::move(merged);
    }
    width_ *= 2;
  }
}

void TensorStats::add(const float* data, size_t n) {
  if (n == 0) return;
  float lo = std::numeric_limits<float>::infinity(), hi = -lo;
  double amax = 0;
  for (size_t k = 0; k < n; ++k) {
    const float v = data[k];
    if (std::isnan(v)) continue;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
    amax = std::max(amax, static_cast<double>(std::fabs(v)));
  }
  if (lo > hi) return;  // all NaN
  if (count_ == 0) {
    min_ = lo;
    max_ = hi;
  } else {
    min_ = std::min(min_, lo);
    max_ = std::max(max_, hi);
  }
  count_ += static_cast<int64_t>(n);
  if (amax == 0) return;         // all zeros: exact in every range (see below)
  if (std::isinf(amax)) return;  // an infinite activation cannot be calibrated; min/max keep it
  if (width_ == 0 || amax >= width_ * bins()) grow_to(amax);
  const double inv = 1.0 / width_;
  const int last = bins() - 1;
  for (size_t k = 0; k < n; ++k) {
    const float v = data[k];
    if (std::isnan(v)) continue;
    // Exact zeros (ReLU outputs are often half zeros) stay out of the histograms: zero is exactly
    // representable whatever the range, and a zero spike in bin 0 would make entropy calibration
    // favour tiny ranges (merging the spike with its neighbours costs more KL the wider the range).
    if (v == 0.0f) continue;
    const double a = std::fabs(static_cast<double>(v));
    const int b = std::min(last, static_cast<int>(a * inv));
    (v < 0 ? neg_ : pos_)[b] += 1.0;
  }
}

void TensorStats::add(const Tensor& t) {
  add(t.f.data(), t.f.size());
  if (!shape_consistent_ || t.rank() < 2 || t.f.empty()) return;
  if (channel_samples_ == 0) {
    shape_ = t.shape;
    dim1_sum_.assign(static_cast<size_t>(t.shape[1]), 0.0);
    last_sum_.assign(static_cast<size_t>(t.shape.back()), 0.0);
    dim1_sq_ = dim1_sum_;
    last_sq_ = last_sum_;
    last_max_ = last_sum_;
  } else if (t.shape != shape_) {
    shape_consistent_ = false;
    return;
  }
  const int64_t d1 = t.shape[1], last = t.shape.back();
  int64_t inner1 = 1;
  for (int64_t d = 2; d < t.rank(); ++d) inner1 *= t.shape[d];
  for (size_t k = 0; k < t.f.size(); ++k) {
    const double v = t.f[k];
    if (std::isnan(v) || std::isinf(v)) continue;
    const auto c1 = static_cast<size_t>((static_cast<int64_t>(k) / inner1) % d1);
    const auto cl = static_cast<size_t>(static_cast<int64_t>(k) % last);
    dim1_sum_[c1] += v;
    last_sum_[cl] += v;
    dim1_sq_[c1] += v * v;
    last_sq_[cl] += v * v;
    last_max_[cl] = std::max(last_max_[cl], std::fabs(v));
  }
  ++channel_samples_;
}

std::vector<double> TensorStats::means_of(const std::vector<double>& sums, bool last_dim) const {
  if (!shape_consistent_ || channel_samples_ == 0) return {};
  const double per_index =
      static_cast<double>(num_elements(shape_) / (last_dim ? shape_.back() : shape_[1]) * channel_samples_);
  std::vector<double> m(sums.size());
  for (size_t c = 0; c < sums.size(); ++c) m[c] = sums[c] / per_index;
  return m;
}

std::vector<double> TensorStats::last_dim_max_abs() const {
  return shape_consistent_ && channel_samples_ ? last_max_ : std::vector<double>{};
}

std::vector<double> TensorStats::channel_means() const { return means_of(dim1_sum_, false); }
std::vector<double> TensorStats::last_dim_means() const { return means_of(last_sum_, true); }
std::vector<double> TensorStats::channel_second_moments() const { return means_of(dim1_sq_, false); }
std::vector<double> TensorStats::last_dim_second_moments() const { return means_of(last_sq_, true); }

std::vector<double> TensorStats::magnitude_histogram() const {
  std::vector<double> h(pos_.size());
  for (size_t k = 0; k < h.size(); ++k) h[k] = pos_[k] + neg_[k];
  return h;
}

// ---- thresholds --------------------------------------------------------------------------------

double percentile_threshold(const std::vector<double>& hist, double bin_width, double percentile) {
  double total = 0;
  for (double c : hist) total += c;
  if (total == 0) return 0;
  const double target = total * std::clamp(percentile, 0.0, 100.0) / 100.0;
  double acc = 0;
  for (size_t k = 0; k < hist.size(); ++k) {
    acc += hist[k];
    if (acc >= target) return static_cast<double>(k + 1) * bin_width;
  }
  return static_cast<double>(hist.size()) * bin_width;
}

double entropy_threshold(const std::vector<double>& hist, double bin_width, int quant_bins,
                         double max_clipped) {
  const int n = static_cast<int>(hist.size());
  double total = 0;
  int last_nonzero = -1;
  for (int k = 0; k < n; ++k) {
    total += hist[k];
    if (hist[k] > 0) last_nonzero = k;
  }
  if (total == 0 || last_nonzero < 0) return 0;
  // Thresholds beyond the last non-empty bin clip nothing and only coarsen the grid: stop there.
  if (last_nonzero + 1 <= quant_bins) return static_cast<double>(last_nonzero + 1) * bin_width;
  std::vector<double> p, q;
  double best_kl = std::numeric_limits<double>::infinity();
  int best_i = last_nonzero + 1;
  double tail = 0;
  for (int k = quant_bins; k < n; ++k) tail += hist[k];
  for (int i = quant_bins; i <= last_nonzero + 1; ++i) {
    if (i > quant_bins) tail -= hist[i - 1];
    if (tail > max_clipped * total) continue;
    p.assign(hist.begin(), hist.begin() + i);
    p[i - 1] += tail;  // the clipped outliers saturate into the last level
    // Q: merge hist[0, i) (without the tail) into quant_bins levels, spread each level evenly over the
    // bins of its group that were non-empty in P.
    q.assign(i, 0.0);
    const double step = static_cast<double>(i) / quant_bins;
    for (int j = 0; j < quant_bins; ++j) {
      const int start = static_cast<int>(std::floor(j * step));
      const int stop = j == quant_bins - 1 ? i : static_cast<int>(std::floor((j + 1) * step));
      double sum = 0;
      int nonzero = 0;
      for (int k = start; k < stop; ++k) {
        sum += hist[k];
        if (p[k] != 0) ++nonzero;
      }
      if (nonzero == 0) continue;
      const double v = sum / nonzero;
      for (int k = start; k < stop; ++k)
        if (p[k] != 0) q[k] = v;
    }
    double psum = 0, qsum = 0;
    for (int k = 0; k < i; ++k) {
      psum += p[k];
      qsum += q[k];
    }
    if (qsum == 0) continue;
    // KL(P||Q) over P's support; a bin where P > 0 and Q = 0 (can only happen for the tail bin) gets
    // Q smoothed to a small epsilon, as TensorRT-style implementations do.
    double kl = 0;
    for (int k = 0; k < i; ++k) {
      if (p[k] == 0) continue;
      const double pk = p[k] / psum;
      const double qk = q[k] > 0 ? q[k] / qsum : 1e-12;
      kl += pk * std::log(pk / qk);
    }
    if (kl < best_kl) {
      best_kl = kl;
      best_i = i;
    }
  }
  return static_cast<double>(best_i) * bin_width;
}

double mse_threshold(const std::vector<double>& hist, double bin_width, int steps, double other,
                     double other_count) {
  const int n = static_cast<int>(hist.size());
  int last_nonzero = -1;
  for (int k = 0; k < n; ++k)
    if (hist[k] > 0) last_nonzero = k;
  if (last_nonzero < 0 || bin_width <= 0) return 0;
  // Prefix sums of c, c x and c x^2 over the bin centres x_k = (k + 1/2) w.
  std::vector<double> s0(n + 1, 0.0), s1(n + 1, 0.0), s2(n + 1, 0.0);
  for (int k = 0; k < n; ++k) {
    const double x = (k + 0.5) * bin_width;
    s0[k + 1] = s0[k] + hist[k];
    s1[k + 1] = s1[k] + hist[k] * x;
    s2[k + 1] = s2[k] + hist[k] * x * x;
  }
  double best_err = std::numeric_limits<double>::infinity();
  int best_i = last_nonzero + 1;
  for (int i = 1; i <= last_nonzero + 1; ++i) {
    const double t = i * bin_width;
    const double step = (t + other) / steps;
    const double clipped = (s2[n] - s2[i]) - 2 * t * (s1[n] - s1[i]) + t * t * (s0[n] - s0[i]);
    // Bins whose centre lies below half a step round to zero: k < step / (2 w) - 1/2.
    const int j = std::clamp(static_cast<int>(std::ceil(step / (2 * bin_width) - 0.5)), 0, i);
    const double inside = s2[j] + (s0[i] - s0[j] + other_count) * step * step / 12.0;
    const double err = clipped + inside;
    if (err < best_err) {
      best_err = err;
      best_i = i;
    }
  }
  return static_cast<double>(best_i) * bin_width;
}

ClipRange choose_range(const TensorStats& s, const CalibrationOptions& o, bool symmetric) {
  ClipRange r;
  if (s.count() == 0) return r;
  const double amax = std::max(std::fabs(s.min()), std::fabs(s.max()));
  if (o.method == CalibrationMethod::kMinMax || s.bin_width() == 0) {
    if (symmetric) {
      r.lo = static_cast<float>(-amax);
      r.hi = static_cast<float>(amax);
    } else {
      r.lo = s.min();
      r.hi = s.max();
    }
    return r;
  }
  const double w = s.bin_width();
  if (o.method == CalibrationMethod::kPercentile) {
    if (symmetric) {
      const double t = std::min(amax, percentile_threshold(s.magnitude_histogram(), w, o.percentile));
      r.lo = static_cast<float>(-t);
      r.hi = static_cast<float>(t);
    } else {
      double tp = std::min<double>(std::max(0.0f, s.max()),
                                   percentile_threshold(s.positive_histogram(), w, o.percentile));
      // A one-sided tensor (after ReLU) spends all 255 steps on [0, tp]: half the step, a quarter of the
      // rounding noise of the same side in a two-sided range, which the percentile does not see. Clip no
      // more than the least expected squared error on that grid says (mse_threshold), never more than
      // the percentile: see choose_range in calibration.h.
      if (s.min() >= 0)
        tp = std::max(tp, std::min<double>(s.max(), mse_threshold(s.positive_histogram(), w, 255)));
      const double tn = std::min<double>(std::max(0.0f, -s.min()),
                                         percentile_threshold(s.negative_histogram(), w, o.percentile));
      r.lo = static_cast<float>(-tn);
      r.hi = static_cast<float>(tp);
    }
    return r;
  }
  if (o.method == CalibrationMethod::kMse) {
    if (symmetric) {
      const double t = std::min(amax, mse_threshold(s.magnitude_histogram(), w, 127));
      r.lo = static_cast<float>(-t);
      r.hi = static_cast<float>(t);
      return r;
    }
    // Asymmetric: 255 steps over [-tn, tp]; each side's threshold depends on the other's through the
    // step, so alternate (from min-max) until they settle; two rounds suffice in practice.
    const auto& ph = s.positive_histogram();
    const auto& nh = s.negative_histogram();
    double pc = 0, nc = 0;
    for (double c : ph) pc += c;
    for (double c : nh) nc += c;
    const double pmax = std::max(0.0f, s.max()), nmax = std::max(0.0f, -s.min());
    double tp = pmax, tn = nmax;
    for (int round = 0; round < 3; ++round) {
      if (pc > 0) tp = std::min(pmax, mse_threshold(ph, w, 255, tn, nc));
      if (nc > 0) tn = std::min(nmax, mse_threshold(nh, w, 255, tp, pc));
    }
    r.lo = static_cast<float>(-tn);
    r.hi = static_cast<float>(tp);
    return r;
  }
  // Entropy. A one-sided tensor (after ReLU) quantized asymmetrically spends all 255 levels on one side.
  const bool one_sided = !symmetric && s.min() >= 0;
  const double t = std::min(
      amax, entropy_threshold(s.magnitude_histogram(), w, one_sided ? 255 : 128, o.entropy_max_clipped));
  if (symmetric) {
    r.lo = static_cast<float>(-t);
    r.hi = static_cast<float>(t);
  } else {
    r.lo = static_cast<float>(std::max<double>(s.min(), -t));
    r.hi = static_cast<float>(std::min<double>(s.max(), t));
  }
  return r;
}

std::map<std::string, TensorStats> collect_statistics(const Graph& g, const std::vector<Sample>& samples,
                                                      int bins) {
  std::map<std::string, TensorStats> stats;
  auto record = [&](const std::string& name, const Tensor& t) {
    if (name.empty() || !t.floating() || t.f.empty()) return;
    auto it = stats.find(name);
    if (it == stats.end()) it = stats.emplace(name, TensorStats(bins)).first;
    it->second.add(t);
  };
  PrecisionPlan fp32;
  for (const auto& sample : samples) {
    for (const auto& [name, t] : sample) record(name, t);
    // The emulator in fp32 is the reference interpreter's kernels plus the lowered graph's fused
    // epilogues and npu-domain ops, so statistics can be collected on a lowered graph too.
    emulate(
        g, fp32, sample,
        [&](const Node& n, const std::vector<const Tensor*>& outs) {
          for (size_t k = 0; k < outs.size() && k < n.outputs.size(); ++k)
            if (outs[k]) record(n.outputs[k], *outs[k]);
        },
        [&](const Node& n, const Tensor& pre) { record(pre_activation_key(n.outputs.at(0)), pre); });
  }
  return stats;
}

std::string pre_activation_key(const std::string& value) { return value + "#pre-activation"; }

// ---- inputs ------------------------------------------------------------------------------------

Tensor read_npy_tensor(const std::string& path) {
  NpyArray a;
  try {
    a = read_npy(path);  // compiler/io/npy.h: the one reader (header, dtype and size checks)
  } catch (const NpyError& e) {
    throw CalibrationError(e.what());
  }
  const Shape shape(a.shape.begin(), a.shape.end());
  const int64_t n = num_elements(shape);
  const char kind = a.descr[1];
  const int size = npy_item_size(a.descr);
  const uint8_t* d = a.data.data();
  auto unsupported = [&] { return CalibrationError(path + ": unsupported .npy dtype '" + a.descr + "'"); };
  if (kind == 'f') {
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t k = 0; k < n; ++k) {
      if (size == 4) {
        std::memcpy(&v[k], d + 4 * k, 4);
      } else if (size == 8) {
        double x;
        std::memcpy(&x, d + 8 * k, 8);
        v[k] = static_cast<float>(x);
      } else if (size == 2) {
        uint16_t x;
        std::memcpy(&x, d + 2 * k, 2);
        v[k] = isa::numerics::fp16_to_fp32(x);
      } else {
        throw unsupported();
      }
    }
    return Tensor::from_floats(shape, std::move(v));
  }
  if (kind != 'i' && kind != 'u') throw unsupported();
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) {
    const uint8_t* p = d + size * k;
    if (kind == 'i' && size == 1) {
      v[k] = static_cast<int8_t>(p[0]);
    } else if (kind == 'u' && size == 1) {
      v[k] = p[0];
    } else if (kind == 'i' && size == 4) {
      int32_t x;
      std::memcpy(&x, p, 4);
      v[k] = x;
    } else if (kind == 'i' && size == 8) {
      int64_t x;
      std::memcpy(&x, p, 8);
      v[k] = x;
    } else {
      throw unsupported();
    }
  }
  const DataType t = kind == 'u' ? DataType::kUInt8
                     : size == 1 ? DataType::kInt8
                     : size == 4 ? DataType::kInt32
                                 : DataType::kInt64;
  return Tensor::from_ints(t, shape, std::move(v));
}

// What a file in a calibration folder holds, by its content (a .pb has no signature: by its name).
enum class FileKind { kNpy, kTensorProto, kImage, kOther };
static FileKind file_kind(const fs::path& p) {
  if (p.extension() == ".pb") return FileKind::kTensorProto;
  if (sniff_image(p.string()) != ImageFormat::kNone) return FileKind::kImage;
  return is_npy_file(p.string()) ? FileKind::kNpy : FileKind::kOther;
}

// Files of a folder that are samples: everything but hidden files and sub-folders, sorted.
static std::vector<fs::path> sample_files(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (!e.is_directory() && e.path().filename().string().rfind('.', 0) != 0) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

// What a sample file for `input` must be, for the error about a file that is neither.
static std::string expected_input(const Graph& g, const std::string& input) {
  const Value& v = g.value(input);
  return "a PNG/JPEG image or a tensor (.npy, .pb) for input '" + input + "'" +
         (v.shape_known ? " of shape " + shape_to_string(v.shape) : "");
}

// The tensor a sample file gives `input`.
static Tensor read_sample_file(const Graph& g, const std::string& input, const fs::path& p,
                               const Preprocess* preprocess) {
  std::error_code ec;
  if (!fs::exists(p, ec))
    throw CalibrationError(p.string() + ": cannot be read: a link to a file that does not exist");
  if (!std::ifstream(p, std::ios::binary))
    throw CalibrationError(p.string() + ": cannot be read (permissions)");
  if (fs::file_size(p, ec) == 0 && !ec)
    throw CalibrationError(p.string() + ": the file is empty; expected " + expected_input(g, input));
  switch (file_kind(p)) {
    case FileKind::kNpy:
      return read_npy_tensor(p.string());
    case FileKind::kTensorProto:
      try {
        return read_tensor_file(p.string());
      } catch (const std::exception& e) {
        throw CalibrationError(p.string() + ": " + e.what());
      }
    case FileKind::kImage: {
      if (!preprocess)
        throw CalibrationError(p.string() +
                               ": an image needs --preprocess FILE.yaml to say how it becomes input '" +
                               input + "' (resize, scale, mean/std, layout)");
      const Value& v = g.value(input);
      try {
        check_image_dtype(*preprocess, v.dtype, p.string() + ": model input '" + input + "'");
        return preprocess_image(read_image(p.string()), *preprocess, v.shape, p.string());
      } catch (const ImageError& e) {
        throw CalibrationError(e.what());
      } catch (const PreprocessError& e) {
        throw CalibrationError(e.what());
      }
    }
    case FileKind::kOther:
      break;
  }
  throw CalibrationError(p.string() + ": neither an image nor a tensor; expected " +
                         expected_input(g, input));
}

static void check_against(const Graph& g, const std::string& input, const Tensor& t,
                          const std::string& file) {
  const Value& v = g.value(input);
  if (v.shape_known && v.shape.size() == t.shape.size()) {
    for (size_t d = 0; d < t.shape.size(); ++d)
      if (v.shape[d] >= 0 && v.shape[d] != t.shape[d])
        throw CalibrationError(file + ": shape " + shape_to_string(t.shape) + " does not match input '" +
                               input + "' of shape " + shape_to_string(v.shape));
  } else if (v.shape_known) {
    throw CalibrationError(file + ": rank " + std::to_string(t.shape.size()) + " does not match input '" +
                           input + "' of shape " + shape_to_string(v.shape));
  }
  // A NaN or infinity would make every range, and every comparison with fp32, meaningless (an all-NaN
  // input "matched" fp32 at 300 dB).
  if (t.floating()) {
    const auto bad = std::count_if(t.f.begin(), t.f.end(), [](float x) { return !std::isfinite(x); });
    if (bad > 0)
      throw CalibrationError(file + ": " + std::to_string(bad) + " of " + std::to_string(t.f.size()) +
                             " values are NaN or infinite; calibration and evaluation inputs must be finite");
  }
}

static Tensor as_input_type(const Graph& g, const std::string& input, Tensor t) {
  const Value& v = g.value(input);
  if (is_float(v.dtype) && !t.floating()) {
    std::vector<float> f(t.i.begin(), t.i.end());
    return Tensor::from_floats(t.shape, std::move(f));
  }
  return t;
}

// Samples are held at once (calibration, evaluation): past the available memory, a sentence before the
// allocation rather than the OOM killer after it.
static void check_samples_fit(const Graph& g, size_t n, const std::string& what) {
  uint64_t sample_bytes = 0;
  for (const auto& in : g.inputs)
    if (g.value(in).fully_known()) sample_bytes += static_cast<uint64_t>(num_elements(g.value(in).shape)) * 4;
  check_allocation(
      "holding " + std::to_string(n) + " " + what + " of " + format_bytes(sample_bytes) + " each",
      sample_bytes * n, "use fewer samples");
}

std::vector<Sample> load_samples(const Graph& g, const std::string& folder, int limit,
                                 const Preprocess* preprocess, std::vector<std::string>* names) {
  std::error_code ec;
  if (!fs::is_directory(folder, ec))
    throw CalibrationError(folder + ": not a folder of inputs (images, .npy or .pb files)");
  std::vector<fs::path> dirs;
  for (const auto& e : fs::directory_iterator(folder))
    if (e.is_directory()) dirs.push_back(e.path());
  const std::vector<fs::path> files = sample_files(folder);
  std::sort(dirs.begin(), dirs.end());
  std::vector<Sample> out;
  const size_t available = files.empty() ? dirs.size() : files.size();
  check_samples_fit(g, limit > 0 ? std::min(available, static_cast<size_t>(limit)) : available,
                    "inputs from " + folder);
  if (!files.empty()) {
    if (g.inputs.size() != 1)
      throw CalibrationError(folder + ": loose sample files need a model with one input; this one has " +
                             std::to_string(g.inputs.size()) + " (use one sub-folder per sample)");
    for (const auto& f : files) {
      if (limit > 0 && static_cast<int>(out.size()) >= limit) break;
      Tensor t = read_sample_file(g, g.inputs[0], f, preprocess);
      check_against(g, g.inputs[0], t, f.string());
      out.push_back({{g.inputs[0], as_input_type(g, g.inputs[0], std::move(t))}});
      if (names) names->push_back(f.filename().string());
    }
    return out;
  }
  for (const auto& d : dirs) {
    if (limit > 0 && static_cast<int>(out.size()) >= limit) break;
    const std::vector<fs::path> fl = sample_files(d);
    if (fl.empty()) continue;
    Sample s;
    for (size_t k = 0; k < fl.size(); ++k) {
      // The input a file is for: the name a TensorProto carries, else the file stem, else its position.
      std::string name = fl[k].stem().string();
      if (file_kind(fl[k]) == FileKind::kTensorProto) {
        try {
          name = read_tensor_name(fl[k].string());
        } catch (const std::exception& e) {
          throw CalibrationError(fl[k].string() + ": " + e.what());
        }
        if (name.empty()) name = fl[k].stem().string();
      }
      std::string input;
      if (std::find(g.inputs.begin(), g.inputs.end(), name) != g.inputs.end())
        input = name;
      else if (name == "input_" + std::to_string(k) && k < g.inputs.size())
        input = g.inputs[k];
      else if (g.inputs.size() == 1 && fl.size() == 1)
        input = g.inputs[0];
      else
        throw CalibrationError(fl[k].string() + ": names no input of the model ('" + name + "')");
      Tensor t = read_sample_file(g, input, fl[k], preprocess);
      check_against(g, input, t, fl[k].string());
      s[input] = as_input_type(g, input, std::move(t));
    }
    for (const auto& in : g.inputs)
      if (!s.count(in)) throw CalibrationError(d.string() + ": no tensor for model input '" + in + "'");
    out.push_back(std::move(s));
    if (names) names->push_back(d.filename().string());
  }
  if (out.empty())
    throw CalibrationError(folder +
                           ": no inputs found (images, .npy or .pb files, or one sub-folder per sample)");
  return out;
}

std::vector<Sample> synthetic_samples(const Graph& g, int n, uint32_t seed) {
  check_samples_fit(g, static_cast<size_t>(std::max(n, 0)), "synthetic inputs");
  std::vector<Sample> out;
  for (int k = 0; k < n; ++k) {
    std::mt19937 rng(seed + static_cast<uint32_t>(k));
    std::normal_distribution<float> dist(0.0f, 1.0f);
    Sample s;
    for (const auto& in : g.inputs) {
      const Value& v = g.value(in);
      if (!v.fully_known())
        throw CalibrationError("input '" + in + "' has no fully known shape: bind it with --input-shape");
      if (!is_float(v.dtype))
        throw CalibrationError("input '" + in + "' is " + std::string(to_string(v.dtype)) +
                               ": synthetic calibration inputs exist only for float inputs");
      Tensor t(DataType::kFloat32, v.shape);
      for (auto& x : t.f) x = dist(rng);
      s[in] = std::move(t);
    }
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace npusim::compiler::quant
