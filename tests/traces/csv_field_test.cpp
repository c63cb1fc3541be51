// The one CSV field writer (traces/sink.h) the trace, the layer tables and the sweep results use.
#include <gtest/gtest.h>

#include <string>

#include "traces/sink.h"

namespace npusim::traces {
namespace {

std::string field(const std::string& s) {
  std::string o;
  append_csv_field(o, s);
  return o;
}

TEST(CsvField, QuotesFieldsWithCommasQuotesAndLineBreaksAndDoublesQuotes) {
  EXPECT_EQ(field("/conv1/Conv"), "/conv1/Conv");
  EXPECT_EQ(field("a,b"), "\"a,b\"");
  EXPECT_EQ(field("say \"hi\""), "\"say \"\"hi\"\"\"");
  EXPECT_EQ(field("two\nlines"), "\"two\nlines\"");
  EXPECT_EQ(field("cr\r"), "\"cr\r\"");  // RFC 4180: a bare CR would end the row for many readers
  EXPECT_EQ(field(""), "");
}

}  // namespace
}  // namespace npusim::traces
