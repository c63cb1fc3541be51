// LSTM, GRU and RNN with ONNX's semantics: forward, reverse and bidirectional, initial states,
// sequence_lens, peepholes, clip, the activations ONNX allows, layout 0 and 1. Products accumulate in
// double.
#include <algorithm>

#include "compiler/interp/kernels.h"
#include "compiler/ops/recurrent.h"

namespace npusim::compiler::interp {
namespace {

using Kind = RecurrentSpec::Kind;

void recurrent_kernel(KernelContext& ctx) {
  std::string error;
  const std::optional<RecurrentSpec> spec = recurrent_spec(ctx.node, &error);
  if (!spec) ctx.fail(error);
  const RecurrentSpec& s = *spec;
  const Tensor& x = ctx.finput(0);
  const Tensor& w = ctx.finput(1);
  const Tensor& r = ctx.finput(2);
  if (x.rank() != 3 || w.rank() != 3 || r.rank() != 3) ctx.fail("X, W and R must have rank 3");
  const bool bl = s.layout == 1;
  const int64_t seq = x.shape[bl ? 1 : 0], batch = x.shape[bl ? 0 : 1], in = x.shape[2];
  const int64_t hs = s.hidden, g = s.gates, dirs = s.directions;
  if (w.shape != Shape{dirs, g * hs, in} || r.shape != Shape{dirs, g * hs, hs})
    ctx.fail("W " + shape_to_string(w.shape) + " or R " + shape_to_string(r.shape) + " does not fit " +
             std::to_string(dirs) + " direction(s), hidden_size " + std::to_string(hs) + " and input size " +
             std::to_string(in));
  const Tensor* bias = ctx.has(3) ? &ctx.finput(3) : nullptr;
  if (bias && bias->shape != Shape{dirs, 2 * g * hs}) ctx.fail("B has shape " + shape_to_string(bias->shape));
  std::vector<int64_t> lens(static_cast<size_t>(batch), seq);
  if (ctx.has(4)) {
    const Tensor& sl = ctx.input(4);
    if (sl.size() != batch) ctx.fail("sequence_lens must hold one length per batch entry");
    for (int64_t b = 0; b < batch; ++b) {
      lens[b] = sl.as_int(b);
      if (lens[b] < 0 || lens[b] > seq) ctx.fail("sequence_lens holds " + std::to_string(lens[b]));
    }
  }
  const bool lstm = s.kind == Kind::kLstm;
  const Tensor* h0 = ctx.has(5) ? &ctx.finput(5) : nullptr;
  const Tensor* c0 = lstm && ctx.has(6) ? &ctx.finput(6) : nullptr;
  const Tensor* peep = lstm && ctx.has(7) ? &ctx.finput(7) : nullptr;
  const Shape state_shape = bl ? Shape{batch, dirs, hs} : Shape{dirs, batch, hs};
  for (const Tensor* t : {h0, c0})
    if (t && t->shape != state_shape) ctx.fail("an initial state has shape " + shape_to_string(t->shape));
  if (peep && peep->shape != Shape{dirs, 3 * hs}) ctx.fail("P has shape " + shape_to_string(peep->shape));

  Tensor y(DataType::kFloat32, bl ? Shape{batch, seq, dirs, hs} : Shape{seq, dirs, batch, hs});
  Tensor yh(DataType::kFloat32, state_shape), yc(DataType::kFloat32, state_shape);
  auto state_at = [&](int64_t d, int64_t b) { return bl ? (b * dirs + d) * hs : (d * batch + b) * hs; };
  auto y_at = [&](int64_t t, int64_t d, int64_t b) {
    return bl ? ((b * seq + t) * dirs + d) * hs : ((t * dirs + d) * batch + b) * hs;
  };
  auto clip = [&](double v) { return s.clip ? std::clamp(v, -double(*s.clip), double(*s.clip)) : v; };
  std::vector<double> xw(static_cast<size_t>(g * hs)), hr(static_cast<size_t>(g * hs));
  std::vector<float> h(static_cast<size_t>(hs)), c(static_cast<size_t>(hs)), rh(static_cast<size_t>(hs));
  for (int64_t d = 0; d < dirs; ++d) {
    const float* wd = w.f.data() + d * g * hs * in;
    const float* rd = r.f.data() + d * g * hs * hs;
    const float* wb = bias ? bias->f.data() + d * 2 * g * hs : nullptr;
    const float* rb = bias ? wb + g * hs : nullptr;
    const auto& act = s.activations[static_cast<size_t>(d)];
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t k = 0; k < hs; ++k) {
        h[k] = h0 ? h0->f[state_at(d, b) + k] : 0.0f;
        c[k] = c0 ? c0->f[state_at(d, b) + k] : 0.0f;
      }
      for (int64_t step = 0; step < lens[b]; ++step) {
        const int64_t t = s.backwards(static_cast<int>(d)) ? lens[b] - 1 - step : step;
        const float* xt = x.f.data() + (bl ? (b * seq + t) * in : (t * batch + b) * in);
        // xw = W x_t + Wb; hr = R h + Rb (GRU's h gate with linear_before_reset == 0 uses r * h instead).
        for (int64_t j = 0; j < g * hs; ++j) {
          double a = wb ? wb[j] : 0.0;
          for (int64_t k = 0; k < in; ++k) a += double(wd[j * in + k]) * xt[k];
          xw[j] = a;
          double e = rb ? rb[j] : 0.0;
          for (int64_t k = 0; k < hs; ++k) e += double(rd[j * hs + k]) * h[k];
          hr[j] = e;
        }
        float* yt = y.f.data() + y_at(t, d, b);
        if (s.kind == Kind::kRnn) {
          for (int64_t k = 0; k < hs; ++k) h[k] = act[0].apply(static_cast<float>(clip(xw[k] + hr[k])));
        } else if (s.kind == Kind::kGru) {
          std::vector<float> z(static_cast<size_t>(hs)), rr(static_cast<size_t>(hs));
          for (int64_t k = 0; k < hs; ++k) {
            z[k] = act[0].apply(static_cast<float>(clip(xw[k] + hr[k])));
            rr[k] = act[0].apply(static_cast<float>(clip(xw[hs + k] + hr[hs + k])));
            rh[k] = rr[k] * h[k];
          }
          for (int64_t k = 0; k < hs; ++k) {
            double pre;
            if (s.linear_before_reset) {
              pre = xw[2 * hs + k] + rr[k] * hr[2 * hs + k];
            } else {
              double e = rb ? rb[2 * hs + k] : 0.0;
              for (int64_t q = 0; q < hs; ++q) e += double(rd[(2 * hs + k) * hs + q]) * rh[q];
              pre = xw[2 * hs + k] + e;
            }
            const float hh = act[1].apply(static_cast<float>(clip(pre)));
            yt[k] = (1.0f - z[k]) * hh + z[k] * h[k];
          }
          std::copy(yt, yt + hs, h.begin());
        } else {
          const float* p = peep ? peep->f.data() + d * 3 * hs : nullptr;
          for (int64_t k = 0; k < hs; ++k) {
            const float i = act[0].apply(static_cast<float>(clip(xw[k] + hr[k] + (p ? p[k] * c[k] : 0.0))));
            float f = act[0].apply(
                static_cast<float>(clip(xw[2 * hs + k] + hr[2 * hs + k] + (p ? p[2 * hs + k] * c[k] : 0.0))));
            if (s.input_forget) f = 1.0f - i;
            const float cc = act[1].apply(static_cast<float>(clip(xw[3 * hs + k] + hr[3 * hs + k])));
            c[k] = f * c[k] + i * cc;
            const float o = act[0].apply(
                static_cast<float>(clip(xw[hs + k] + hr[hs + k] + (p ? p[hs + k] * c[k] : 0.0))));
            h[k] = o * act[2].apply(c[k]);
          }
        }
        std::copy(h.begin(), h.end(), yt);
      }
      std::copy(h.begin(), h.end(), yh.f.begin() + state_at(d, b));
      std::copy(c.begin(), c.end(), yc.f.begin() + state_at(d, b));
    }
  }
  if (ctx.wants(0)) ctx.out[0] = std::move(y);
  if (ctx.wants(1)) ctx.out[1] = std::move(yh);
  if (lstm && ctx.wants(2)) ctx.out[2] = std::move(yc);
}

}  // namespace

void register_recurrent(KernelTable& t) {
  t["LSTM"] = recurrent_kernel;
  t["GRU"] = recurrent_kernel;
  t["RNN"] = recurrent_kernel;
}

}  // namespace npusim::compiler::interp
