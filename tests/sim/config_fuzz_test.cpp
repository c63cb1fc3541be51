// Robustness: random and mutated YAML documents (mutations of the presets) and random --set strings
// must either load or fail with a ConfigError; never crash, hang or throw anything else.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "sim/config/config_loader.h"

namespace npusim::sim {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> preset_texts() {
  std::vector<std::string> out;
  for (const auto& entry : fs::directory_iterator(std::string(NPUSIM_SOURCE_DIR) + "/configs")) {
    if (entry.path().extension() != ".yaml") continue;
    std::ifstream in(entry.path(), std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    out.push_back(ss.str());
  }
  return out;
}

std::vector<std::string> split_lines(const std::string& s) {
  std::vector<std::string> lines;
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t end = s.find('\n', pos);
    if (end == std::string::npos) end = s.size();
    lines.push_back(s.substr(pos, end - pos));
    pos = end + 1;
  }
  return lines;
}

std::string join_lines(const std::vector<std::string>& lines) {
  std::string s;
  for (size_t i = 0; i < lines.size(); ++i) s += (i ? "\n" : "") + lines[i];
  return s;
}

// Characters that mean something to YAML, plus plain ones.
constexpr std::string_view kYamlChars = "{}[]:,-?&*!|>'\"%@`# \t\n.0123456789abcxyz_~=+e";

class Mutator {
 public:
  explicit Mutator(uint32_t seed) : rng_(seed) {}

  size_t below(size_t n) { return n == 0 ? 0 : rng_() % n; }

  char random_char() {
    if (rng_() % 3 == 0) return static_cast<char>(rng_() % 256);  // any byte, NUL and UTF-8 fragments too
    return kYamlChars[below(kYamlChars.size())];
  }

  void mutate(std::string& s) {
    switch (rng_() % 9) {
      case 0:  // delete a character
        if (!s.empty()) s.erase(below(s.size()), 1);
        break;
      case 1:  // duplicate a character
        if (!s.empty()) {
          const size_t i = below(s.size());
          s.insert(i, 1, s[i]);
        }
        break;
      case 2:  // insert a random byte
        s.insert(below(s.size() + 1), 1, random_char());
        break;
      case 3:  // replace a byte
        if (!s.empty()) s[below(s.size())] = random_char();
        break;
      case 4: {  // swap two lines
        auto lines = split_lines(s);
        std::swap(lines[below(lines.size())], lines[below(lines.size())]);
        s = join_lines(lines);
        break;
      }
      case 5: {  // duplicate a line
        auto lines = split_lines(s);
        const size_t i = below(lines.size());
        lines.insert(lines.begin() + static_cast<long>(i), lines[i]);
        s = join_lines(lines);
        break;
      }
      case 6: {  // re-indent a line
        auto lines = split_lines(s);
        std::string& l = lines[below(lines.size())];
        if (rng_() % 2 && l.size() >= 2)
          l.erase(0, 2);
        else
          l.insert(0, rng_() % 2 ? "  " : "\t");
        s = join_lines(lines);
        break;
      }
      case 7:  // truncate
        s.resize(below(s.size() + 1));
        break;
      case 8: {  // replace a value with a random token
        auto lines = split_lines(s);
        std::string& l = lines[below(lines.size())];
        const size_t colon = l.find(':');
        if (colon != std::string::npos) l = l.substr(0, colon + 1) + " " + random_token();
        s = join_lines(lines);
        break;
      }
    }
  }

  std::string random_token() {
    static const char* kTokens[] = {"0",
                                    "-1",
                                    "1.5",
                                    "1e400",
                                    "nan",
                                    ".inf",
                                    "true",
                                    "maybe",
                                    "~",
                                    "null",
                                    "{}",
                                    "[]",
                                    "\"8\"",
                                    "'ws'",
                                    "&a 3",
                                    "*a",
                                    "!!int 4",
                                    "!!str x",
                                    "99999999999999999999",
                                    "0x10",
                                    "ws",
                                    "hbm2",
                                    "{a: 1}",
                                    "[1, [2]]",
                                    "|\n  block",
                                    ">-",
                                    "? x"};
    return kTokens[below(std::size(kTokens))];
  }

  std::string random_document() {
    std::string s;
    const size_t n = below(200);
    for (size_t i = 0; i < n; ++i) s += rng_() % 8 == 0 ? random_token() : std::string(1, random_char());
    return s;
  }

  std::string random_set() {
    static const char* kKeys[] = {
        "systolic_array.rows",      "sram.input",          "dram.model", "frequency_mhz", "x", "",
        "vector.ops.exp.ii_cycles", "sram.input.size_kib", "dma"};
    std::string s = kKeys[below(std::size(kKeys))];
    if (rng_() % 8) s += "=";
    s += rng_() % 2 ? random_token() : std::string(1, random_char());
    return s;
  }

 private:
  std::mt19937 rng_;
};

// Returns "" when the loader loaded or threw ConfigError, else a description of what went wrong.
std::string try_load(const std::string& doc, const std::vector<std::string>& sets, bool* loaded = nullptr) {
  try {
    load_config_text(doc, "fuzz.yaml", sets);
    if (loaded) *loaded = true;
  } catch (const ConfigError& e) {
    if (e.messages().empty()) return "ConfigError without messages";
    for (const auto& m : e.messages())
      if (m.empty()) return "empty message";
  } catch (const std::exception& e) {
    return std::string("unexpected exception: ") + e.what();
  } catch (...) {
    return "unexpected non-std exception";
  }
  return "";
}

TEST(ConfigFuzz, RandomAndMutatedDocumentsFailCleanly) {
  const std::vector<std::string> presets = preset_texts();
  ASSERT_FALSE(presets.empty());
  // Deterministic by default; NPUSIM_FUZZ_SEED / NPUSIM_FUZZ_DOCUMENTS run longer campaigns by hand.
  const char* seed = std::getenv("NPUSIM_FUZZ_SEED");
  const char* count = std::getenv("NPUSIM_FUZZ_DOCUMENTS");
  Mutator m(seed ? static_cast<uint32_t>(std::strtoul(seed, nullptr, 10)) : 12345u);
  const auto start = std::chrono::steady_clock::now();
  const int kDocuments = count ? std::atoi(count) : 12000;
  int loaded = 0;
  for (int i = 0; i < kDocuments; ++i) {
    std::string doc;
    std::vector<std::string> sets;
    if (i % 6 == 0) {
      doc = m.random_document();
    } else {
      doc = presets[m.below(presets.size())];
      const size_t mutations = 1 + m.below(i % 5 == 0 ? 20 : 4);
      for (size_t k = 0; k < mutations; ++k) m.mutate(doc);
    }
    if (i % 10 == 0) sets.push_back(m.random_set());
    if (std::getenv("NPUSIM_FUZZ_TRACE")) std::fprintf(stderr, "doc %d\n", i);
    bool ok = false;
    const std::string problem = try_load(doc, sets, &ok);
    ASSERT_EQ(problem, "") << "document " << i << ":\n" << doc;
    loaded += ok;
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  RecordProperty("documents", kDocuments);
  RecordProperty("seconds", std::to_string(seconds));
  std::printf("fuzzed %d documents in %.2f s: %d loaded, %d rejected with a ConfigError\n", kDocuments,
              seconds, loaded, kDocuments - loaded);
}

TEST(ConfigFuzz, PathologicalDocumentsFailCleanly) {
  std::vector<std::string> docs = {
      std::string(5000, '['),  // deep nesting
      std::string(5000, '{'),
      "a: &x [*x]\n",                               // self-referencing alias
      "a: *undefined\n",                            // unknown alias
      "systolic_array: &s {rows: 8}\nsram: *s\n",   // an alias of the wrong shape
      "%YAML 9.9\n---\na: 1\n",                     // bad directive
      std::string("rows: 8\0\n", 9),                // NUL byte
      "\xef\xbb\xbfsystolic_array: {rows: 8}\n",    // UTF-8 BOM
      "\xff\xfe\x00s\x00",                          // UTF-16 fragments
      "systolic_array:\n\trows: 8\n",               // tab indentation
      "? |\n  multi\n  line\n: 1\n",                // block scalar key
      "systolic_array: !!map {rows: !!float 8}\n",  // explicit tags
      "<<: {rows: 8}\n",                            // merge key (unsupported: an unknown key)
  };
  for (const std::string& d : docs) EXPECT_EQ(try_load(d, {}), "") << d;
}

}  // namespace
}  // namespace npusim::sim
