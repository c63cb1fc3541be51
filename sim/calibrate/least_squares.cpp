#include "sim/calibrate/least_squares.h"

#include <algorithm>
#include <cmath>

namespace npusim::sim::calibrate {
namespace {

double sum_squares(const std::vector<double>& r) {
  double s = 0;
  for (double v : r) s += v * v;
  return s;
}

double clamp_to(const Unknown& u, double v) {
  v = std::clamp(v, u.min, u.max);
  return u.integer ? std::round(v) : v;
}

// The forward-difference step of unknown `u` at `x`: 5% of the value, at least 0.1% of the range (an
// integer's at least 1), taken backwards at the upper bound.
double step_of(const Unknown& u, double x) {
  double h = std::max(0.05 * std::abs(x), 1e-3 * (u.max - u.min));
  if (u.integer) h = std::max(1.0, std::round(h));
  if (x + h > u.max) h = -h;
  return h;
}

}  // namespace

std::vector<double> solve(std::vector<double> a, std::vector<double> b) {
  const size_t n = b.size();
  std::vector<size_t> where(n, n);
  size_t row = 0;
  for (size_t col = 0; col < n && row < n; ++col) {
    size_t pivot = row;
    for (size_t r = row + 1; r < n; ++r)
      if (std::abs(a[r * n + col]) > std::abs(a[pivot * n + col])) pivot = r;
    if (std::abs(a[pivot * n + col]) < 1e-300) continue;
    for (size_t c = 0; c < n; ++c) std::swap(a[pivot * n + c], a[row * n + c]);
    std::swap(b[pivot], b[row]);
    for (size_t r = 0; r < n; ++r) {
      if (r == row) continue;
      const double f = a[r * n + col] / a[row * n + col];
      if (f == 0) continue;
      for (size_t c = col; c < n; ++c) a[r * n + c] -= f * a[row * n + c];
      b[r] -= f * b[row];
    }
    where[col] = row++;
  }
  std::vector<double> x(n, 0.0);
  for (size_t col = 0; col < n; ++col)
    if (where[col] < n) x[col] = b[where[col]] / a[where[col] * n + col];
  return x;
}

namespace {

// One Levenberg-Marquardt descent from the unknowns' values.
FitResult descend(const std::vector<Unknown>& unknowns, const Residuals& residuals,
                  const FitOptions& options) {
  const size_t p = unknowns.size();
  FitResult out;
  out.moves.assign(p, false);
  std::vector<double> x(p);
  for (size_t j = 0; j < p; ++j) x[j] = clamp_to(unknowns[j], unknowns[j].value);
  std::vector<double> r = residuals(x);
  ++out.evaluations;
  double cost = sum_squares(r);
  out.cost_before = cost;
  double lambda = 1e-2;
  const size_t m = r.size();
  for (int it = 0; it < options.max_iterations && cost > 1e-20; ++it) {
    // The Jacobian, one column per unknown.
    std::vector<double> jac(m * p, 0.0);
    for (size_t j = 0; j < p; ++j) {
      const double h = step_of(unknowns[j], x[j]);
      std::vector<double> xh = x;
      xh[j] = clamp_to(unknowns[j], x[j] + h);
      if (xh[j] == x[j]) continue;
      const std::vector<double> rh = residuals(xh);
      ++out.evaluations;
      for (size_t i = 0; i < m; ++i) {
        jac[i * p + j] = (rh[i] - r[i]) / (xh[j] - x[j]);
        if (jac[i * p + j] != 0) out.moves[j] = true;
      }
    }
    std::vector<double> jtj(p * p, 0.0), g(p, 0.0);
    for (size_t i = 0; i < m; ++i)
      for (size_t a = 0; a < p; ++a) {
        g[a] -= jac[i * p + a] * r[i];
        for (size_t b = 0; b < p; ++b) jtj[a * p + b] += jac[i * p + a] * jac[i * p + b];
      }
    bool accepted = false, converged = false;
    for (int tries = 0; tries < 12 && !accepted; ++tries) {
      std::vector<double> a = jtj;
      for (size_t j = 0; j < p; ++j) a[j * p + j] += lambda * (jtj[j * p + j] > 0 ? jtj[j * p + j] : 0);
      const std::vector<double> d = solve(a, g);
      std::vector<double> xn(p);
      for (size_t j = 0; j < p; ++j) xn[j] = jtj[j * p + j] > 0 ? clamp_to(unknowns[j], x[j] + d[j]) : x[j];
      if (xn == x) {
        lambda *= 4;
        continue;
      }
      const std::vector<double> rn = residuals(xn);
      ++out.evaluations;
      const double cn = sum_squares(rn);
      if (cn < cost) {
        const double gain = (cost - cn) / cost;
        x = xn;
        r = rn;
        cost = cn;
        lambda = std::max(lambda / 3, 1e-9);
        accepted = true;
        converged = gain < options.tolerance;
      } else {
        lambda *= 4;
      }
    }
    out.iterations = it + 1;
    if (!accepted || converged) break;
  }
  out.values = x;
  out.cost_after = cost;
  return out;
}

}  // namespace

FitResult least_squares(const std::vector<Unknown>& unknowns, const Residuals& residuals,
                        const FitOptions& options) {
  FitResult best = descend(unknowns, residuals, options);
  const double cost_before = best.cost_before;
  for (int pass = 0; pass < options.restart_passes && best.cost_after > 1e-20; ++pass) {
    bool improved = false;
    for (size_t j = 0; j < unknowns.size(); ++j) {
      if (!best.moves[j]) continue;  // no residual depends on it
      for (double factor : {1.25, 0.8}) {
        std::vector<Unknown> from = unknowns;
        for (size_t k = 0; k < from.size(); ++k) from[k].value = best.values[k];
        from[j].value = clamp_to(from[j], best.values[j] * factor);
        if (from[j].value == best.values[j]) continue;
        FitResult r = descend(from, residuals, options);
        r.iterations += best.iterations;
        r.evaluations += best.evaluations;
        for (size_t k = 0; k < r.moves.size(); ++k) r.moves[k] = r.moves[k] || best.moves[k];
        if (r.cost_after < best.cost_after * (1 - 1e-9)) {
          best = std::move(r);
          improved = true;
        } else {
          best.iterations = r.iterations;
          best.evaluations = r.evaluations;
          best.moves = r.moves;
        }
      }
    }
    if (!improved) break;
  }
  best.cost_before = cost_before;
  return best;
}

}  // namespace npusim::sim::calibrate
