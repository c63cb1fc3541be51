// docs/isa.md must keep up with isa/isa.h: every mnemonic, every field of every format and every
// enumerated value name appears in it as `code`.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "isa/isa.h"

namespace npusim::isa {
namespace {

std::string read_doc() {
  std::ifstream f(std::string(NPUSIM_SOURCE_DIR) + "/docs/isa.md");
  EXPECT_TRUE(f) << "docs/isa.md is missing";
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

bool mentions(const std::string& doc, std::string_view name) {
  return doc.find("`" + std::string(name) + "`") != std::string::npos;
}

TEST(Docs, IsaDocMentionsEveryMnemonicAndEveryFieldOfEveryFormat) {
  const std::string doc = read_doc();
  for (const Format& fmt : kFormats) {
    EXPECT_TRUE(mentions(doc, fmt.mnemonic)) << "docs/isa.md does not mention `" << fmt.mnemonic << "`";
    EXPECT_NE(doc.find("### " + std::string(fmt.mnemonic)), std::string::npos)
        << "docs/isa.md has no section for " << fmt.mnemonic;
    for (int i = 0; i < fmt.num_fields; ++i) {
      EXPECT_TRUE(mentions(doc, fmt.fields[i].name))
          << "docs/isa.md does not mention " << fmt.mnemonic << " field `" << fmt.fields[i].name << "`";
      // The bit table row of the field: "| `name` | lo..hi | width |".
      const std::string row = "| `" + std::string(fmt.fields[i].name) + "` | " +
                              std::to_string(fmt.fields[i].lo) + ".." +
                              std::to_string(fmt.fields[i].lo + fmt.fields[i].width - 1) + " | " +
                              std::to_string(fmt.fields[i].width) + " |";
      EXPECT_NE(doc.find(row), std::string::npos) << "docs/isa.md lacks the bit table row " << row;
    }
  }
  for (const FieldSpec& s : layout::kHeader) EXPECT_TRUE(mentions(doc, s.name)) << s.name;
}

TEST(Docs, IsaDocMentionsEveryEnumeratedValueName) {
  const std::string doc = read_doc();
  for (auto n : kQueueNames) EXPECT_TRUE(mentions(doc, n)) << "queue " << n;
  for (auto n : kDTypeNames) EXPECT_TRUE(mentions(doc, n)) << "dtype " << n;
  for (auto n : kBufferNames) EXPECT_TRUE(mentions(doc, n)) << "buffer " << n;
  for (auto n : kVecOpNames) EXPECT_TRUE(mentions(doc, n)) << "vector op " << n;
  for (auto n : kBcastNames) EXPECT_TRUE(mentions(doc, n)) << "bcast " << n;
}

}  // namespace
}  // namespace npusim::isa
