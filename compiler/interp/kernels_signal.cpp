// Signal-processing kernels of audio front ends (opset 17): DFT, STFT and MelWeightMatrix. Sums in double
// precision, directly (O(n^2) per transform: a reference, not an FFT).
#include <cmath>
#include <complex>
#include <vector>

#include "compiler/interp/kernels.h"

namespace npusim::compiler::interp {
namespace {

using Complex = std::complex<double>;

constexpr double kPi = 3.14159265358979323846;

// The first `bins` coefficients of the length-n DFT of x (zero-padded or truncated to n); the inverse
// transform divides by n.
std::vector<Complex> dft(const std::vector<Complex>& x, int64_t n, int64_t bins, bool inverse) {
  std::vector<Complex> y(static_cast<size_t>(bins));
  const double sign = inverse ? 1.0 : -1.0;
  const auto len = std::min<int64_t>(n, static_cast<int64_t>(x.size()));
  for (int64_t k = 0; k < bins; ++k) {
    Complex s = 0;
    for (int64_t t = 0; t < len; ++t) {
      // k * t reduced mod n keeps the angle small, and exact for the multiples of n.
      const double angle = sign * 2 * kPi * static_cast<double>((k * t) % n) / static_cast<double>(n);
      s += x[static_cast<size_t>(t)] * Complex(std::cos(angle), std::sin(angle));
    }
    y[static_cast<size_t>(k)] = inverse ? s / static_cast<double>(n) : s;
  }
  return y;
}

// ONNX DFT: along `axis` of x ([batch, ..., 1 or 2]: real, or real and imaginary parts), of length
// dft_length (input 1; default the axis' size), inverse or forward, the first n / 2 + 1 bins when
// onesided; y has the last dim 2.
void k_dft(KernelContext& c) {
  const Tensor& x = c.finput(0);
  const int64_t r = x.rank();
  if (r < 3 || (x.shape.back() != 1 && x.shape.back() != 2))
    c.fail("input must be [batch, signal dims..., 1 or 2]");
  int64_t axis = c.node.attr_int("axis", 1);
  if (axis < 0) axis += r;
  if (axis < 1 || axis >= r - 1) c.fail("axis must name a signal dim");
  const bool inverse = c.node.attr_int("inverse", 0) != 0;
  const bool onesided = c.node.attr_int("onesided", 0) != 0;
  const int64_t n = c.has(1) && c.input(1).size() > 0 ? c.iscalar(1) : x.shape[axis];
  if (n < 1) c.fail("dft_length must be positive");
  const int64_t bins = onesided ? n / 2 + 1 : n;
  const int64_t parts = x.shape.back();
  Shape ys = x.shape;
  ys[axis] = bins;
  ys.back() = 2;
  Tensor y(x.dtype, ys);
  // Strides of x and y in elements; the signal runs along `axis`, the other dims (but the last) index it.
  const auto xs = dense_strides(x.shape), yst = dense_strides(ys);
  int64_t outer = 1;
  for (int64_t d = 0; d < r - 1; ++d)
    if (d != axis) outer *= x.shape[d];
  for (int64_t o = 0; o < outer; ++o) {
    // The multi-index of signal o over the dims other than axis and the last.
    int64_t rest = o, xbase = 0, ybase = 0;
    for (int64_t d = r - 2; d >= 0; --d) {
      if (d == axis) continue;
      const int64_t i = rest % x.shape[d];
      rest /= x.shape[d];
      xbase += i * xs[d];
      ybase += i * yst[d];
    }
    std::vector<Complex> sig(static_cast<size_t>(x.shape[axis]));
    for (int64_t t = 0; t < x.shape[axis]; ++t) {
      const size_t at = static_cast<size_t>(xbase + t * xs[axis]);
      sig[static_cast<size_t>(t)] = Complex(x.f[at], parts == 2 ? x.f[at + 1] : 0.0);
    }
    const std::vector<Complex> f = dft(sig, n, bins, inverse);
    for (int64_t k = 0; k < bins; ++k) {
      const size_t at = static_cast<size_t>(ybase + k * yst[axis]);
      y.f[at] = static_cast<float>(f[static_cast<size_t>(k)].real());
      y.f[at + 1] = static_cast<float>(f[static_cast<size_t>(k)].imag());
    }
  }
  c.out[0] = std::move(y);
}

// ONNX STFT: signal [batch, length, 1 or 2], frames of frame_length (input 3, else the window's length)
// every frame_step (input 1) samples, each times the window (input 2, else ones) and transformed;
// output [batch, frames, bins, 2] with bins = frame_length / 2 + 1 when onesided (the default).
void k_stft(KernelContext& c) {
  const Tensor& x = c.finput(0);
  if (x.rank() != 3 || (x.shape[2] != 1 && x.shape[2] != 2)) c.fail("signal must be [batch, length, 1 or 2]");
  const int64_t step = c.iscalar(1);
  const bool windowed = c.has(2) && c.input(2).size() > 0;
  int64_t length = c.has(3) && c.input(3).size() > 0 ? c.iscalar(3) : windowed ? c.input(2).size() : 0;
  if (length < 1) c.fail("needs frame_length or a window");
  if (windowed && c.input(2).size() != length) c.fail("the window's length differs from frame_length");
  if (step < 1) c.fail("frame_step must be positive");
  const bool onesided = c.node.attr_int("onesided", 1) != 0;
  const int64_t batch = x.shape[0], samples = x.shape[1], parts = x.shape[2];
  if (samples < length) c.fail("the signal is shorter than one frame");
  const int64_t frames = (samples - length) / step + 1;
  const int64_t bins = onesided ? length / 2 + 1 : length;
  Tensor y(x.dtype, {batch, frames, bins, 2});
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t f = 0; f < frames; ++f) {
      std::vector<Complex> frame(static_cast<size_t>(length));
      for (int64_t t = 0; t < length; ++t) {
        const size_t at = static_cast<size_t>((b * samples + f * step + t) * parts);
        const double w = windowed ? c.input(2).as_double(t) : 1.0;
        frame[static_cast<size_t>(t)] = w * Complex(x.f[at], parts == 2 ? x.f[at + 1] : 0.0);
      }
      const std::vector<Complex> s = dft(frame, length, bins, false);
      for (int64_t k = 0; k < bins; ++k) {
        const size_t at = static_cast<size_t>(((b * frames + f) * bins + k) * 2);
        y.f[at] = static_cast<float>(s[static_cast<size_t>(k)].real());
        y.f[at + 1] = static_cast<float>(s[static_cast<size_t>(k)].imag());
      }
    }
  }
  c.out[0] = std::move(y);
}

// ONNX MelWeightMatrix: [dft_length / 2 + 1, num_mel_bins] triangular filters, num_mel_bins + 2 points
// evenly spaced on the mel scale (2595 log10(1 + f / 700)) from lower_edge_hertz to upper_edge_hertz
// (the step divides the range by num_mel_bins + 2, as ONNX's definition does), each mapped to the
// spectrogram bin floor((dft_length + 1) f / sample_rate); filter i rises from point i to point i + 1
// and falls to point i + 2.
void k_mel_weight_matrix(KernelContext& c) {
  const int64_t mels = c.iscalar(0), n = c.iscalar(1), rate = c.iscalar(2);
  const double lo = c.scalar(3), hi = c.scalar(4);
  if (mels < 1 || n < 1 || rate < 1) c.fail("num_mel_bins, dft_length and sample_rate must be positive");
  const int64_t spectrum = n / 2 + 1;
  const auto dtype = static_cast<DataType>(c.node.attr_int("output_datatype", 1));
  const auto mel = [](double f) { return 2595 * std::log10(1 + f / 700); };
  const double lo_mel = mel(lo), step = (mel(hi) - lo_mel) / static_cast<double>(mels + 2);
  std::vector<int64_t> bin(static_cast<size_t>(mels + 2));
  for (int64_t p = 0; p < mels + 2; ++p) {
    const double hz = 700 * (std::pow(10.0, (static_cast<double>(p) * step + lo_mel) / 2595) - 1);
    bin[static_cast<size_t>(p)] = static_cast<int64_t>(std::floor(static_cast<double>(n + 1) * hz / rate));
    if (bin[static_cast<size_t>(p)] < 0 || bin[static_cast<size_t>(p)] >= spectrum)
      c.fail("the mel range reaches beyond the spectrum's bins");
  }
  std::vector<double> w(static_cast<size_t>(spectrum * mels), 0.0);
  const auto at = [&](int64_t j, int64_t i) -> double& { return w[static_cast<size_t>(j * mels + i)]; };
  for (int64_t i = 0; i < mels; ++i) {
    const int64_t left = bin[static_cast<size_t>(i)], center = bin[static_cast<size_t>(i + 1)],
                  right = bin[static_cast<size_t>(i + 2)];
    if (center == left) {
      at(center, i) = 1;
    } else {
      for (int64_t j = left; j <= center; ++j) at(j, i) = static_cast<double>(j - left) / (center - left);
    }
    for (int64_t j = center; j < right; ++j) at(j, i) = static_cast<double>(right - j) / (right - center);
  }
  Tensor y(dtype, {spectrum, mels});
  for (size_t k = 0; k < w.size(); ++k) {
    if (y.floating()) {
      y.f[k] = static_cast<float>(w[k]);
    } else {
      y.i[k] = static_cast<int64_t>(w[k]);
    }
  }
  c.out[0] = std::move(y);
}

}  // namespace

void register_signal(KernelTable& t) {
  t["DFT"] = k_dft;
  t["STFT"] = k_stft;
  t["MelWeightMatrix"] = k_mel_weight_matrix;
}

}  // namespace npusim::compiler::interp
