// The shared low-level helpers (isa/edit_distance.h, isa/strides.h): the one edit distance and the one
// dense strides function, with values worked by hand.
#include "isa/edit_distance.h"

#include <gtest/gtest.h>

#include <cctype>
#include <string_view>
#include <vector>

#include "isa/strides.h"

namespace npusim {
namespace {

TEST(EditDistance, LevenshteinCountsInsertionsDeletionsAndSubstitutions) {
  EXPECT_EQ(edit_distance_between(std::string_view("kitten"), std::string_view("sitting")), 3);
  EXPECT_EQ(edit_distance_between(std::string_view(""), std::string_view("abc")), 3);
  EXPECT_EQ(edit_distance_between(std::vector<int64_t>{1, 2, 3, 4}, std::vector<int64_t>{2, 1, 3, 5}), 3);
}

TEST(EditDistance, TranspositionsMakeAnAdjacentSwapOneEdit) {
  EXPECT_EQ(edit_distance_between(std::string_view("rwos"), std::string_view("rows")), 2);
  EXPECT_EQ(edit_distance_between(std::string_view("rwos"), std::string_view("rows"), true), 1);
}

TEST(EditDistance, TheComparisonDecidesWhatIsEqual) {
  auto same_letter = [](char a, char b) { return std::tolower(a) == std::tolower(b); };
  const std::string_view a = "MatMul", b = "matmul";
  EXPECT_EQ(edit_distance_between(a, b, false, same_letter), 0);
  EXPECT_EQ(edit_distance_between(a, b), 2);
}

TEST(DenseStrides, LastDimensionIsContiguous) {
  EXPECT_EQ(dense_strides({2, 3, 4}), (std::vector<int64_t>{12, 4, 1}));
  EXPECT_EQ(dense_strides({5}), (std::vector<int64_t>{1}));
  EXPECT_TRUE(dense_strides({}).empty());
}

}  // namespace
}  // namespace npusim
