// Text forms of a configuration: the machine spec text, the resolved YAML, the reference tables and the
// docs table, checked for exact round trips and for covering every declared parameter.
#include "sim/config/config_dump.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "isa/machine/spec_text.h"
#include "sim/config/config_loader.h"
#include "tests/sim/config_test_util.h"

namespace npusim::sim {
namespace {

namespace fs = std::filesystem;
using testing::random_config;
using testing::raw_values;

bool contains(const std::string& hay, const std::string& needle) {
  return hay.find(needle) != std::string::npos;
}

// Dotted paths of every parameter, collected with a bare Visitor (independent of list_params()).
class PathCollector final : public isa::Visitor {
 public:
  std::vector<std::string> paths;
  void group(std::string_view key, std::string_view, const std::function<void()>& body) override {
    prefix_.push_back(std::string(key));
    body();
    prefix_.pop_back();
  }
  void integer(const isa::Param& p, int64_t&, int64_t, int64_t) override { add(p.key); }
  void real(const isa::Param& p, double&, double, double) override { add(p.key); }
  void boolean(const isa::Param& p, bool&) override { add(p.key); }
  void choice(const isa::Param& p, int&, const std::vector<std::string_view>&) override { add(p.key); }
  using isa::Visitor::choice;

 private:
  void add(std::string_view key) {
    std::string s;
    for (const auto& g : prefix_) s += g + ".";
    paths.push_back(s + std::string(key));
  }
  std::vector<std::string> prefix_;
};

std::vector<std::string> all_paths() {
  isa::NpuConfig c;
  PathCollector p;
  c.visit(p);
  return p.paths;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

std::vector<isa::NpuConfig> sample_configs() {
  std::vector<isa::NpuConfig> v = {isa::NpuConfig{}};
  for (const std::string& p : preset_names()) v.push_back(load_config(p));
  for (uint32_t seed = 1; seed <= 200; ++seed) v.push_back(random_config(seed));
  return v;
}

// ---------------------------------------------------------------------------------------------------
// Canonical value text

TEST(ValueText, RealsPrintShortestAndReadBackExactly) {
  EXPECT_EQ(isa::format_real(1000.0), "1000.0");
  EXPECT_EQ(isa::format_real(0.1), "0.1");
  EXPECT_EQ(isa::format_real(1e6), "1000000.0");
  EXPECT_EQ(isa::format_real(100000.0), "100000.0");
  EXPECT_EQ(isa::format_real(0.001), "0.001");
  EXPECT_EQ(isa::format_real(1e-5), "1.0e-05");
  EXPECT_EQ(isa::format_real(2.5e20), "2.5e+20");
  EXPECT_EQ(isa::format_real(1.0 / 3.0), "0.3333333333333333");
  for (double v : {0.1, 1.0 / 3.0, 2.0 / 3.0, 1e-300, 5e-324, 1.7976931348623157e308, 123456789.125, 1e6, 0.0,
                   1e-4, 9.999999999999999e14, 1e15, 0.000123456789}) {
    const std::string s = isa::format_real(v);
    double back = -1;
    EXPECT_EQ(isa::parse_real(s, 0, std::numeric_limits<double>::max(), back), "") << s;
    EXPECT_EQ(back, v) << s;
  }
}

TEST(ValueText, IntegerParsingIsStrict) {
  int64_t v = 0;
  EXPECT_EQ(isa::parse_integer("+42", 0, 100, v), "");
  EXPECT_EQ(v, 42);
  EXPECT_EQ(isa::parse_integer("-3", -10, 10, v), "");
  EXPECT_EQ(v, -3);
  for (const char* bad : {"", "+", "-", "4 2", " 42", "0x10", "1e2", "4.0", "+-3", "--3", "42a"})
    EXPECT_NE(isa::parse_integer(bad, -100, 100, v), "") << bad;
  EXPECT_EQ(isa::parse_integer("101", 0, 100, v), "is out of range (allowed 0..100)");
  EXPECT_EQ(isa::parse_integer("-9223372036854775809", 0, 100, v), "is out of range (allowed 0..100)");
}

TEST(ValueText, EditDistanceCountsAdjacentSwapsAsOne) {
  EXPECT_EQ(isa::edit_distance("rows", "rows"), 0);
  EXPECT_EQ(isa::edit_distance("rowz", "rows"), 1);
  EXPECT_EQ(isa::edit_distance("rwos", "rows"), 1);
  EXPECT_EQ(isa::edit_distance("", "abc"), 3);
  EXPECT_EQ(isa::edit_distance("kitten", "sitting"), 3);
  EXPECT_EQ(isa::closest_name("colz", {"rows", "cols"}), "cols");
  EXPECT_EQ(isa::closest_name("xyz", {"rows", "cols"}), "");
}

// ---------------------------------------------------------------------------------------------------
// Machine spec text

TEST(SpecText, OneLinePerParameterInDeclarationOrder) {
  const std::vector<std::string> lines = lines_of(isa::to_spec_text(isa::NpuConfig{}));
  const std::vector<std::string> paths = all_paths();
  ASSERT_EQ(lines.size(), paths.size());
  for (size_t i = 0; i < lines.size(); ++i) EXPECT_EQ(lines[i].substr(0, lines[i].find('=')), paths[i]);
  EXPECT_EQ(lines[0], "frequency_mhz=1000.0");
  EXPECT_TRUE(contains(isa::to_spec_text(isa::NpuConfig{}), "\nsystolic_array.rows=32\n"));
  EXPECT_TRUE(contains(isa::to_spec_text(isa::NpuConfig{}), "\nsystolic_array.dataflow=ws\n"));
  EXPECT_TRUE(contains(isa::to_spec_text(isa::NpuConfig{}), "\nvector.ops.sigmoid.latency_cycles=8\n"));
}

TEST(SpecText, RoundTripIsExact) {
  for (const isa::NpuConfig& c : sample_configs()) {
    const std::string text = isa::to_spec_text(c);
    EXPECT_EQ(raw_values(isa::from_spec_text(text)), raw_values(c)) << text;
  }
}

TEST(SpecText, BadLinesAreNamed) {
  std::string text = isa::to_spec_text(isa::NpuConfig{});
  // Line 4 is sequencer.dispatch_cycles; give it a bad value and add two bad lines.
  std::vector<std::string> lines = lines_of(text);
  ASSERT_EQ(lines[3], "sequencer.dispatch_cycles=1");
  lines[3] = "sequencer.dispatch_cycles=lots";
  lines.push_back("no_such.key=1");
  lines.push_back("garbage");
  std::string bad;
  for (const auto& l : lines) bad += l + "\n";
  try {
    isa::from_spec_text(bad);
    FAIL() << "expected SpecTextError";
  } catch (const isa::SpecTextError& e) {
    const std::string m = e.what();
    EXPECT_TRUE(contains(m, "machine spec line 4: sequencer.dispatch_cycles = lots is not an integer")) << m;
    EXPECT_TRUE(contains(m, "no_such.key: unknown key")) << m;
    EXPECT_TRUE(contains(m, "'garbage': expected key=value")) << m;
  }
}

TEST(SpecText, MissingAndDuplicateKeysAreErrors) {
  std::vector<std::string> lines = lines_of(isa::to_spec_text(isa::NpuConfig{}));
  const std::string first = lines[0];
  lines.erase(lines.begin());
  std::string missing;
  for (const auto& l : lines) missing += l + "\n";
  try {
    isa::from_spec_text(missing);
    FAIL() << "expected SpecTextError";
  } catch (const isa::SpecTextError& e) {
    EXPECT_TRUE(contains(e.what(), "frequency_mhz: missing")) << e.what();
  }
  EXPECT_THROW(isa::from_spec_text(missing + first + "\n" + first + "\n"), isa::SpecTextError);
  EXPECT_NO_THROW(isa::from_spec_text("# machine\n\n" + missing + first + "\n"));
}

// A program compiled before the energy model has no technology/energy/area lines: it still loads, with
// their defaults; every other key stays required.
TEST(SpecText, ProgramsWithoutEnergyKeysLoadWithTheirDefaults) {
  isa::NpuConfig c;
  c.systolic_array.rows = 8;
  c.energy.mac_pj[0] = 7;
  std::string old;
  for (const std::string& l : lines_of(isa::to_spec_text(c)))
    if (l.rfind("technology.", 0) != 0 && l.rfind("energy.", 0) != 0 && l.rfind("area.", 0) != 0)
      old += l + "\n";
  const isa::NpuConfig back = isa::from_spec_text(old);
  EXPECT_EQ(back.systolic_array.rows, 8);
  EXPECT_EQ(back.energy.mac_pj[0], isa::NpuConfig{}.energy.mac_pj[0]);
  EXPECT_EQ(isa::from_spec_text(isa::to_spec_text(c)).energy.mac_pj[0], 7.0);
}

// A program compiled before multi-core NPUs and DRAM capacities has no cores or dram.capacity_mib line: it
// still loads (neither shapes a program), with their defaults.
TEST(SpecText, ProgramsWithoutCoresOrDramCapacityLoadWithTheirDefaults) {
  isa::NpuConfig c;
  c.cores = 4;
  c.dram.capacity_mib = 512;
  c.systolic_array.rows = 8;
  std::string old;
  for (const std::string& l : lines_of(isa::to_spec_text(c)))
    if (l.rfind("cores=", 0) != 0 && l.rfind("dram.capacity_mib=", 0) != 0) old += l + "\n";
  const isa::NpuConfig back = isa::from_spec_text(old);
  EXPECT_EQ(back.systolic_array.rows, 8);
  EXPECT_EQ(back.cores, 1);
  EXPECT_EQ(back.dram.capacity_mib, 0);
  const isa::NpuConfig full = isa::from_spec_text(isa::to_spec_text(c));
  EXPECT_EQ(full.cores, 4);
  EXPECT_EQ(full.dram.capacity_mib, 512);
}

// ---------------------------------------------------------------------------------------------------
// Resolved YAML

TEST(ConfigYaml, RoundTripsThroughTheLoaderExactly) {
  for (const isa::NpuConfig& c : sample_configs()) {
    const std::string yaml = config_yaml(c);
    // Random configs may violate cross-field constraints; the round trip is about values.
    isa::NpuConfig back;
    try {
      back = load_config_text(yaml, "dump.yaml");
    } catch (const ConfigError& e) {
      bool only_constraints = true;
      for (const auto& m : e.messages()) only_constraints &= m.rfind("dump.yaml: ", 0) == 0;
      ASSERT_TRUE(only_constraints) << e.what() << "\n" << yaml;
      continue;
    }
    EXPECT_EQ(raw_values(back), raw_values(c)) << yaml;
  }
}

TEST(ConfigYaml, ListsEveryParameterWithUnitComments) {
  const std::string yaml = config_yaml(isa::NpuConfig{});
  EXPECT_TRUE(contains(yaml, "\nsystolic_array:  # the matrix unit\n  rows: 32  # PEs\n")) << yaml;
  EXPECT_TRUE(contains(yaml, "\nsram:  # on-chip scratchpads\n  input:  #")) << yaml;
  EXPECT_TRUE(contains(yaml, "\n    size_kib: 256  # KiB\n")) << yaml;
  EXPECT_TRUE(contains(yaml, "\n  model: lpddr4_4266\n")) << yaml;
  size_t values = 0;
  for (const std::string& l : lines_of(yaml)) {
    const size_t colon = l.find(':');
    if (l.empty() || l[0] == '#' || colon == std::string::npos) continue;
    const size_t after = l.find_first_not_of(' ', colon + 1);
    if (after != std::string::npos && l[after] != '#') ++values;
  }
  EXPECT_EQ(values, all_paths().size());
}

TEST(ConfigYaml, DumpOfAPresetLoadsBackFromAFile) {
  // The dump of a preset loads back from a file too (what `npusim config > x.yaml` does).
  const isa::NpuConfig c = load_config("datacenter");
  const fs::path p = fs::temp_directory_path() / ("npusim_dump_test_" + std::to_string(::getpid()) + ".yaml");
  std::ofstream(p) << config_yaml(c);
  const isa::NpuConfig back = load_config(p.string());
  fs::remove(p);
  EXPECT_EQ(raw_values(back), raw_values(c));
}

// ---------------------------------------------------------------------------------------------------
// Reference tables

TEST(ConfigReference, EveryParameterHasOneLineWithTypeUnitDefaultAndRange) {
  const std::string ref = config_reference();
  const std::vector<std::string> lines = lines_of(ref);
  for (const std::string& path : all_paths()) {
    int hits = 0;
    for (const std::string& l : lines)
      if (l.rfind(path + " ", 0) == 0) ++hits;
    EXPECT_EQ(hits, 1) << path;
  }
  bool rows_ok = false;
  for (const std::string& l : lines) {
    if (l.rfind("systolic_array.rows ", 0) != 0) continue;
    std::istringstream in(l);
    std::string key, type, unit, def, range;
    in >> key >> type >> unit >> def >> range;
    rows_ok = type == "integer" && unit == "PEs" && def == "32" && range == "1..4096" &&
              contains(l, "rows of the MAC array");
  }
  EXPECT_TRUE(rows_ok) << ref;
  EXPECT_TRUE(contains(ref, "systolic_array.dataflow")) << ref;
  EXPECT_TRUE(contains(ref, "ws, os, is")) << ref;
  EXPECT_TRUE(contains(ref, "\nsram.accumulator: partial sums and outputs (int32 or fp32)\n")) << ref;
}

TEST(ConfigReference, MarkdownHasARowPerParameterAndDescribedGroup) {
  const std::vector<std::string> lines = lines_of(config_reference_markdown());
  ASSERT_GE(lines.size(), 2u);
  EXPECT_EQ(lines[0], "| key | type | unit | default | allowed | description |");
  size_t param_rows = 0;
  for (size_t i = 2; i < lines.size(); ++i) {
    EXPECT_EQ(lines[i].front(), '|');
    EXPECT_EQ(lines[i].back(), '|');
    if (!contains(lines[i], "| group |")) ++param_rows;
  }
  EXPECT_EQ(param_rows, all_paths().size());
  EXPECT_TRUE(contains(config_reference_markdown(),
                       "| `systolic_array.rows` | integer | PEs | 32 | 1..4096 | rows of the MAC array"));
}

// docs/config.md embeds config_reference_markdown() between two markers; they must not drift apart.
// NPUSIM_UPDATE_DOCS=1 rewrites the table in place instead of failing.
TEST(ConfigReference, DocsTableEqualsTheGeneratedTable) {
  const std::string path = std::string(NPUSIM_SOURCE_DIR) + "/docs/config.md";
  std::ifstream in(path);
  ASSERT_TRUE(in) << "cannot read " << path;
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string doc = ss.str();
  const std::string begin = "<!-- BEGIN PARAMETER REFERENCE -->\n", end = "<!-- END PARAMETER REFERENCE -->";
  const size_t b = doc.find(begin), e = doc.find(end);
  ASSERT_NE(b, std::string::npos) << "marker missing in " << path;
  ASSERT_NE(e, std::string::npos) << "marker missing in " << path;
  ASSERT_LT(b, e);
  const std::string table = doc.substr(b + begin.size(), e - b - begin.size());
  const std::string expected = config_reference_markdown();
  if (table != expected && std::getenv("NPUSIM_UPDATE_DOCS") != nullptr) {
    std::ofstream(path) << doc.substr(0, b + begin.size()) + expected + doc.substr(e);
    GTEST_SKIP() << "rewrote the table in " << path;
  }
  EXPECT_EQ(table, expected) << "docs/config.md is out of date: run `NPUSIM_UPDATE_DOCS=1 sim_test "
                                "--gtest_filter=ConfigReference.DocsTableEqualsTheGeneratedTable` or paste "
                                "`npusim config --dump --markdown` between the markers";
}

}  // namespace
}  // namespace npusim::sim
