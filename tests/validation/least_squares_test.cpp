// The bounded Levenberg-Marquardt fit `npusim calibrate` runs (sim/calibrate/least_squares.h), on
// residuals whose minimum is known in closed form.
#include "sim/calibrate/least_squares.h"

#include <gtest/gtest.h>

#include <cmath>

namespace npusim::sim::calibrate {
namespace {

// Relative errors of a*x^2 + b/x against a curve made with a = 3, b = 40, the way calibrate's residuals
// are relative errors of predictions against measurements.
std::vector<double> curve_residuals(const std::vector<double>& p) {
  std::vector<double> r;
  for (double x = 1; x <= 8; x += 1) {
    const double truth = 3 * x * x + 40 / x;
    r.push_back((p[0] * x * x + p[1] / x) / truth - 1);
  }
  return r;
}

TEST(LeastSquares, RecoversTheParametersOfANonlinearCurveFromFarAway) {
  const FitResult r = least_squares({{1, 0, 100, false}, {400, 0, 1000, false}}, curve_residuals);
  EXPECT_NEAR(r.values[0], 3, 1e-6);
  EXPECT_NEAR(r.values[1], 40, 1e-4);
  EXPECT_LT(r.cost_after, 1e-12);
  EXPECT_GT(r.cost_before, 1);
}

TEST(LeastSquares, StopsAtTheBoundWhenTheOptimumLiesBeyondIt) {
  const FitResult r = least_squares({{1, 0, 2, false}, {400, 0, 1000, false}}, curve_residuals);
  EXPECT_DOUBLE_EQ(r.values[0], 2);
}

TEST(LeastSquares, KeepsIntegerUnknownsIntegralAndFindsTheIntegerOptimum) {
  const FitResult r = least_squares({{1, 0, 100, true}, {400, 0, 1000, true}}, curve_residuals);
  EXPECT_EQ(r.values[0], 3);
  EXPECT_EQ(r.values[1], 40);
}

TEST(LeastSquares, LeavesAnUnknownNoResidualDependsOnWhereItWas) {
  const FitResult r = least_squares({{1, 0, 100, false}, {400, 0, 1000, false}, {7, 0, 10, false}},
                                    [](const std::vector<double>& p) {
                                      return curve_residuals({p[0], p[1]});
                                    });
  EXPECT_DOUBLE_EQ(r.values[2], 7);
  EXPECT_FALSE(r.moves[2]);
  EXPECT_TRUE(r.moves[0]);
  EXPECT_NEAR(r.values[0], 3, 1e-6);
}

TEST(LeastSquares, SolvesALinearSystemAndLeavesASingularDirectionAtZero) {
  const std::vector<double> x = solve({4, 1, 0, 1, 3, 0, 0, 0, 0}, {9, 7, 0});
  EXPECT_NEAR(x[0], 20.0 / 11, 1e-12);
  EXPECT_NEAR(x[1], 19.0 / 11, 1e-12);
  EXPECT_EQ(x[2], 0);
}

}  // namespace
}  // namespace npusim::sim::calibrate
