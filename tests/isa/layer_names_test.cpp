// isa::display_names: the one short-name scheme of summaries, tables, the layer CSV and plots.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "isa/layer_names.h"

namespace npusim::isa {
namespace {

TEST(DisplayNames, OnnxPathLosesRepeatedScopesAndTheOpType) {
  EXPECT_EQ(display_names({"/features/features.2/conv/conv.1/conv.1.0/Conv"}),
            std::vector<std::string>{"features.2/conv.1.0"});
  EXPECT_EQ(display_names({"conv1", "fc"}), (std::vector<std::string>{"conv1", "fc"}));
}

TEST(DisplayNames, TheOpTypeStaysWhereItTellsTwoLayersApart) {
  EXPECT_EQ(
      display_names({"/layer1/layer1.0/conv1/Conv", "/layer1/layer1.0/relu/Relu", "/layer1/layer1.0/Add"}),
      (std::vector<std::string>{"layer1.0/conv1", "layer1.0/relu", "layer1.0"}));
  EXPECT_EQ(display_names({"/blk/Mul", "/blk/Sigmoid"}),
            (std::vector<std::string>{"blk/Mul", "blk/Sigmoid"}));
}

TEST(DisplayNames, LongNamesKeepTheirFirstScopeAndTheirEndWithinTheWidth) {
  EXPECT_EQ(display_names({"/encoder/layer.0/attention/self/query/MatMul"}, 20),
            std::vector<std::string>{"encoder/..self/query"});
  EXPECT_EQ(display_names({"a_flat_name_without_any_scope_at_all"}, 12),
            std::vector<std::string>{"..ope_at_all"});
}

// MobileNetV2's top layers once printed as identical rows: names that differ only in their start.
TEST(DisplayNames, NamesThatDifferOnlyBeyondTheWidthAreStillDistinct) {
  std::vector<std::string> names;
  for (int i = 0; i < 12; ++i) {
    names.push_back("/features/features." + std::to_string(i) +
                    "/conv/conv.0/conv.0.0/and_a_long_common_tail/Conv");
  }
  names.push_back(names[0]);  // the same full name twice
  const std::vector<std::string> out = display_names(names);
  for (const std::string& s : out) EXPECT_LE(s.size(), kDisplayNameWidth) << s;
  EXPECT_EQ(std::set<std::string>(out.begin(), out.end()).size(), out.size());
  EXPECT_EQ(out[3].substr(0, 13), "features.3/..");
  EXPECT_EQ(out.back().substr(out.back().size() - 2), "#2");
}

}  // namespace
}  // namespace npusim::isa
