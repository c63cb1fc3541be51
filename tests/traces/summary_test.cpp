// The terminal summary's model-limit lines (traces::summary_text, docs/report.md "Model limit").
#include <gtest/gtest.h>

#include <string>

#include "tests/sim/rich_report.h"
#include "traces/report.h"

namespace npusim::traces {
namespace {

// The `array folds` line appears, with the share of the limit the matrix layers reach one at a time in whole
// array folds, exactly when that share is under 95 %.
TEST(Summary, TheArrayFoldsLineShowsTheWholeFoldShareOnlyWhenItIsUnder95Percent) {
  Report r = test::rich_report();
  ASSERT_EQ(*r.model_limit_cycles, 2500u);
  r.model_limit->array_fold_cycles = 5000;  // 2 500 / 5 000: half the limit reachable
  EXPECT_EQ(whole_fold_share(r), 0.5);
  const std::string text = summary_text(r);
  EXPECT_NE(text.find("array folds       the matrix layers one at a time in whole"), std::string::npos)
      << text;
  EXPECT_NE(text.find("cycles, 50.0% of the limit"), std::string::npos) << text;

  r.model_limit->array_fold_cycles = 2600;  // under the DRAM term's 2 499.25 * 1.05: not what holds it back
  EXPECT_GT(*whole_fold_share(r), kWholeFoldShareShown);
  EXPECT_EQ(summary_text(r).find("array folds"), std::string::npos);

  r.model_limit->array_fold_cycles = 0;  // not computed: no share
  EXPECT_FALSE(whole_fold_share(r).has_value());
  EXPECT_EQ(summary_text(r).find("array folds"), std::string::npos);
}

}  // namespace
}  // namespace npusim::traces
