// The terminal summary's model-limit lines (traces::summary_text, docs/report.md "Model limit").
#include <gtest/gtest.h>

#include <string>

#include "tests/sim/rich_report.h"
#include "traces/report.h"

namespace npusim::traces {
namespace {

// The `array folds` line appears, with the share of the limit a layer-by-layer schedule can reach,
// exactly when the layers in whole array folds leave less than 95 % of the limit reachable.
TEST(Summary, TheArrayFoldsLineShowsTheWholeFoldCeilingOnlyWhenItIsUnder95Percent) {
  Report r = test::rich_report();
  ASSERT_EQ(*r.model_limit_cycles, 2500u);
  r.model_limit->array_fold_cycles = 5000;  // 2 500 / 5 000: half the limit reachable
  EXPECT_EQ(fold_ceiling(r), 0.5);
  const std::string text = summary_text(r);
  EXPECT_NE(text.find("array folds       the matrix layers each alone in whole"), std::string::npos) << text;
  EXPECT_NE(text.find("at most 50.0% of the limit"), std::string::npos) << text;

  r.model_limit->array_fold_cycles = 2600;  // under the DRAM term's 2 499.25 * 1.05: not what holds it back
  EXPECT_GT(*fold_ceiling(r), kFoldCeilingShown);
  EXPECT_EQ(summary_text(r).find("array folds"), std::string::npos);

  r.model_limit->array_fold_cycles = 0;  // not computed: no ceiling
  EXPECT_FALSE(fold_ceiling(r).has_value());
  EXPECT_EQ(summary_text(r).find("array folds"), std::string::npos);
}

}  // namespace
}  // namespace npusim::traces
