// The one JSON writer and string escaping (isa/json_text.h) every JSON producer uses.
#include "isa/json_text.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

namespace npusim {
namespace {

TEST(JsonText, EscapesQuotesBackslashesAndControlCharactersAndKeepsUtf8) {
  EXPECT_EQ(json_string("plain /conv1/Conv"), "\"plain /conv1/Conv\"");
  EXPECT_EQ(json_string("a \"b\" \\c"), "\"a \\\"b\\\" \\\\c\"");
  EXPECT_EQ(json_string("tab\tnew\nret\r"), "\"tab\\tnew\\nret\\r\"");
  EXPECT_EQ(json_string(std::string("nul\0bell\x07", 9)), "\"nul\\u0000bell\\u0007\"");
  EXPECT_EQ(json_string("層 µ"), "\"層 µ\"");  // bytes >= 0x80 pass through
  std::string out = "[";
  append_json_string(out, "x");
  EXPECT_EQ(out, "[\"x\"");
}

using Layout = JsonWriter::Layout;

TEST(JsonWriter, InlineObjectsSeparateMembersWithCommaSpaceAndEscapeKeysAndStrings) {
  std::string o;
  JsonWriter w(o);
  w.object().member("n", 3).member("s", "a\"b").member("t", true).member("x", 0.25).key("q\n").null();
  w.key("e").array().end().key("o").object().end().end();
  EXPECT_EQ(o,
            "{\"n\": 3, \"s\": \"a\\\"b\", \"t\": true, \"x\": 0.25, \"q\\n\": null, \"e\": [], \"o\": {}}");
}

TEST(JsonWriter, LinesIndentTwoSpacesPerLinesLevelAndCloseAtTheOpeningLevel) {
  std::string o;
  JsonWriter w(o);
  w.object(Layout::kLines).member("a", 1).key("list").array(Layout::kLines);
  w.object().member("k", 2).end().value(-4);
  w.end().key("empty").array(Layout::kLines).end().key("in").object().member("b", 5).end().end();
  EXPECT_EQ(o,
            "{\n  \"a\": 1,\n  \"list\": [\n    {\"k\": 2},\n    -4\n  ],\n  \"empty\": [],\n"
            "  \"in\": {\"b\": 5}\n}");
}

TEST(JsonWriter, SameLineContinuesALinesContainerAndBaseLevelIndentsANestedSection) {
  std::string o;
  JsonWriter w(o, 1);
  w.object(Layout::kLines).member("a", 1).same_line().member("b", 2).member("c", 3).end();
  EXPECT_EQ(o, "{\n    \"a\": 1, \"b\": 2,\n    \"c\": 3\n  }");
}

TEST(JsonWriter, CompactLayoutsHaveNoSpacesAndCompactLinesNoIndentation) {
  std::string o;
  JsonWriter w(o);
  w.object(Layout::kCompact).member("a", "x").key("ev").array(Layout::kCompactLines);
  w.object(Layout::kCompact).member("t", 1).end();
  o += "|";  // a streaming producer may flush between calls: the writer only appends
  w.object(Layout::kCompact).member("t", 2).end().end().end();
  EXPECT_EQ(o, "{\"a\":\"x\",\"ev\":[\n{\"t\":1}|,\n{\"t\":2}\n]}");
}

TEST(JsonWriter, NumbersShortestFixedOrSignificantAndNonFiniteAsZero) {
  std::string o;
  JsonWriter w(o);
  w.array().value(0.1).value(1e21).value(uint64_t{18446744073709551615u}).value(int64_t{-7});
  w.fixed(2.0 / 3.0, 6).significant(2.0 / 3.0, 8).significant(123456789.0, 6);
  w.value(std::numeric_limits<double>::infinity()).fixed(std::nan(""), 3).end();
  EXPECT_EQ(o, "[0.1, 1e+21, 18446744073709551615, -7, 0.666667, 0.66666667, 1.23457e+08, 0, 0]");
}

TEST(JsonWriter, MembersWithoutBracesAndRawTextSplice) {
  std::string extra;
  JsonWriter(extra).members().member("m", 1).key("l").array().value("v").end().end();
  EXPECT_EQ(extra, "\"m\": 1, \"l\": [\"v\"]");
  std::string o;
  JsonWriter w(o);
  w.object().member("a", 0).raw_members(extra).raw_members("").key("r").raw("{\"z\": 9}").end();
  EXPECT_EQ(o, "{\"a\": 0, \"m\": 1, \"l\": [\"v\"], \"r\": {\"z\": 9}}");
}

}  // namespace
}  // namespace npusim
