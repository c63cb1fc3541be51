#pragma once
// Bounded nonlinear least squares by Levenberg-Marquardt with forward-difference Jacobians, for
// residuals that come from simulations (no derivatives, some parameters integers). Plain arithmetic.
#include <functional>
#include <string>
#include <vector>

namespace npusim::sim::calibrate {

struct Unknown {
  double value = 0;  // the starting point; within [min, max]
  double min = 0, max = 0;
  bool integer = false;  // every point tried is rounded to an integer
};

struct FitOptions {
  int max_iterations = 20;  // per descent
  double tolerance = 1e-6;  // stop when an accepted step lowers the cost by less than this fraction
  // Residuals from simulations are piecewise (integer cycles, a transfer's bandwidth or its outstanding
  // requests binding), and a descent can stall on a kink short of the minimum. After it stalls, descents
  // restart from the best point with one unknown at 1.25x and then 0.8x its value, each unknown in turn;
  // a pass that improves the cost is followed by another, at most this many (0: no restarts).
  int restart_passes = 3;
};

struct FitResult {
  std::vector<double> values;
  double cost_before = 0, cost_after = 0;  // sum of squared residuals
  int iterations = 0;
  int evaluations = 0;
  std::vector<bool> moves;  // per unknown: whether its Jacobian column was ever nonzero
};

// The residuals at a point (one per measurement).
using Residuals = std::function<std::vector<double>(const std::vector<double>& x)>;

// Minimizes the sum of squared residuals over the box of `unknowns`. Damping scales with diag(J'J)
// (Marquardt), so the units of the unknowns do not matter; an unknown no residual depends on stays put.
// `iterations` and `evaluations` count every descent, restarts included.
FitResult least_squares(const std::vector<Unknown>& unknowns, const Residuals& residuals,
                        const FitOptions& options = {});

// Solves the symmetric positive semi-definite system A x = b (n x n, row-major) by Gaussian elimination
// with partial pivoting; a pivot below 1e-300 leaves its unknown 0.
std::vector<double> solve(std::vector<double> a, std::vector<double> b);

}  // namespace npusim::sim::calibrate
