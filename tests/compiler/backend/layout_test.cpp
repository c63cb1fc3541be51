// The back end's layout (docs/backend.md, "Layout and stages"): fusion state is fusion/'s own, and no
// lowering includes the driver. Read from the sources, so a change that reaches into a fusion group's
// state from a matrix or vector lowering (instead of asking fusion/'s functions) fails here.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

const fs::path kBackend = fs::path(NPUSIM_SOURCE_DIR) / "compiler" / "backend";

// Every .h/.cpp file below compiler/backend/<folder>.
std::vector<fs::path> sources(const std::string& folder) {
  std::vector<fs::path> out;
  for (const auto& e : fs::recursive_directory_iterator(kBackend / folder)) {
    const std::string ext = e.path().extension().string();
    if (e.is_regular_file() && (ext == ".h" || ext == ".cpp")) out.push_back(e.path());
  }
  return out;
}

std::string text(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// The folders whose lowerings must see fusion groups only through fusion/'s functions.
const std::vector<std::string> kLowerings = {"matrix", "vector",  "memory",   "host",
                                             "int8",   "mapping", "estimate", "stages"};

TEST(BackendLayout, LoweringsOutsideFusionNeverTouchFusionState) {
  const std::regex state(R"(\.fusion\b|\bFusionState\b|\bOnChipValue\b|\bHeldValue\b)");
  int files = 0;
  for (const std::string& folder : kLowerings) {
    for (const fs::path& p : sources(folder)) {
      ++files;
      const std::string s = text(p);
      std::smatch m;
      EXPECT_FALSE(std::regex_search(s, m, state)) << p << " reads fusion state: '" << m.str() << "'";
    }
  }
  EXPECT_GT(files, 20);  // the folders exist and hold the lowerings
}

TEST(BackendLayout, NoFileBelowTheDriverIncludesIt) {
  int files = 0;
  for (const auto& e : fs::directory_iterator(kBackend)) {
    if (!e.is_directory()) continue;
    for (const fs::path& p : sources(e.path().filename().string())) {
      ++files;
      EXPECT_EQ(text(p).find("#include \"compiler/backend/compile.h\""), std::string::npos) << p;
    }
  }
  EXPECT_GT(files, 30);
}

}  // namespace
