#include "isa/text_wrap.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>

namespace npusim::isa {
namespace {

size_t longest_line(const std::string& s) {
  std::istringstream in(s);
  size_t n = 0;
  for (std::string line; std::getline(in, line);) n = std::max(n, line.size());
  return n;
}

// Every character but the spaces at a break survives, in order.
std::string without_spaces_and_newlines(const std::string& s) {
  std::string r;
  for (char c : s)
    if (c != ' ' && c != '\n') r += c;
  return r;
}

TEST(TextWrap, ALineThatFitsIsLeftAsItIs) {
  EXPECT_EQ(wrap_lines("  a = Relu(x) -> y\n", 20, 6), "  a = Relu(x) -> y\n");
  EXPECT_EQ(wrap_lines("a very long line indeed", 0, 4), "a very long line indeed");
}

TEST(TextWrap, ALongLineBreaksAtTheLastSpaceThatFitsUnderAHangingIndent) {
  EXPECT_EQ(wrap_lines("  n = Conv(aaaa, bbbb, cccc) -> dddd {group=1}", 24, 6),
            "  n = Conv(aaaa, bbbb,\n"
            "      cccc) -> dddd\n"
            "      {group=1}");
}

TEST(TextWrap, AWordLongerThanTheLineIsSplitWhereTheLineEnds) {
  const std::string word(25, 'x');
  EXPECT_EQ(wrap_lines("ab " + word, 20, 2), "ab\n  " + word.substr(0, 18) + "\n  " + word.substr(18));
}

TEST(TextWrap, EveryLineIsBoundedAndNothingIsLost) {
  std::string text;
  for (int i = 0; i < 40; ++i)
    text += "/features/features." + std::to_string(i) + "/conv/Conv_output_0:float32[1x32x112x112], ";
  text = "  node = Conv(" + text + ") -> y\n  short line\n" + std::string(300, 'z') + "\n";
  for (size_t width : {40u, 80u, 120u}) {
    const std::string w = wrap_lines(text, width, 6);
    EXPECT_LE(longest_line(w), width) << w;
    EXPECT_EQ(without_spaces_and_newlines(w), without_spaces_and_newlines(text));
    EXPECT_NE(w.find("\n  short line\n"), std::string::npos);
    EXPECT_EQ(w.back(), '\n');
  }
}

TEST(TextWrap, TableColumnsBeforeTheBreakKeepTheirSpacing) {
  EXPECT_EQ(wrap_lines("conv1     Conv    12  one two three four", 34, 16),
            "conv1     Conv    12  one two\n"
            "                three four");
}

}  // namespace
}  // namespace npusim::isa
