// The one JSON string escaping (isa/json_text.h) every JSON writer uses.
#include "isa/json_text.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace npusim
