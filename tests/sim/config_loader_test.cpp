// Loading, validating and overriding configurations: every error names the key, the position and
// what is allowed; all errors are reported at once.
#include "sim/config/config_loader.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "isa/timing/dma.h"
#include "isa/timing/dram.h"
#include "tests/sim/config_test_util.h"

namespace npusim::sim {
namespace {

namespace fs = std::filesystem;
using testing::raw_values;

// The messages load_config_text reports for `yaml` (as file "bad.yaml") and `sets`; empty when it loads.
std::vector<std::string> errors_of(const std::string& yaml, const std::vector<std::string>& sets = {}) {
  try {
    load_config_text(yaml, "bad.yaml", sets);
  } catch (const ConfigError& e) {
    EXPECT_FALSE(e.messages().empty());
    return e.messages();
  }
  return {};
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& m : v) s += m + "\n";
  return s;
}

bool contains(const std::string& hay, const std::string& needle) {
  return hay.find(needle) != std::string::npos;
}

std::string configs_path() { return std::string(NPUSIM_SOURCE_DIR) + "/configs"; }

// A file in a fresh temporary directory, removed with the fixture object.
class TempFile {
 public:
  TempFile(const std::string& name, const std::string& text) {
    dir_ = fs::temp_directory_path() /
           ("npusim_config_test_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
            std::to_string(reinterpret_cast<uintptr_t>(this)));
    fs::create_directories(dir_);
    path_ = (dir_ / name).string();
    std::ofstream(path_, std::ios::binary) << text;
  }
  ~TempFile() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  fs::path dir_;
  std::string path_;
};

// ---------------------------------------------------------------------------------------------------
// Unknown keys

TEST(ConfigLoader, UnknownKeyNamesFullPathLineColumnAndClosestKey) {
  EXPECT_EQ(
      errors_of("systolic_array:\n  rowz: 8\n"),
      std::vector<std::string>{"bad.yaml:2:3: systolic_array.rowz: unknown key (did you mean 'rows'?)"});
}

TEST(ConfigLoader, NestedUnknownKeyNamesEveryLevel) {
  EXPECT_EQ(
      errors_of("# a comment\nsram:\n  input:\n    size_kib: 64\n    sise_kib: 64\n"),
      std::vector<std::string>{"bad.yaml:5:5: sram.input.sise_kib: unknown key (did you mean 'size_kib'?)"});
}

TEST(ConfigLoader, UnknownTopLevelKeySuggestsTopLevelKey) {
  EXPECT_EQ(
      errors_of("frequncy_mhz: 500\n"),
      std::vector<std::string>{"bad.yaml:1:1: frequncy_mhz: unknown key (did you mean 'frequency_mhz'?)"});
}

TEST(ConfigLoader, KeyAtTheWrongLevelSuggestsItsFullPath) {
  EXPECT_EQ(
      errors_of("rows: 64\n"),
      std::vector<std::string>{"bad.yaml:1:1: rows: unknown key (did you mean 'systolic_array.rows'?)"});
}

TEST(ConfigLoader, UnknownKeyWithoutCloseMatchListsTheValidKeys) {
  auto e = errors_of("dma:\n  zzzzzzzz: 1\n");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0],
            "bad.yaml:2:3: dma.zzzzzzzz: unknown key (valid keys here: engines, queue_depth, burst_bytes, "
            "max_outstanding, alignment_bytes, setup_cycles)");
}

TEST(ConfigLoader, UnknownVectorOpIsReportedUnderOps) {
  auto e = errors_of("vector:\n  ops:\n    relux:\n      latency_cycles: 3\n");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0], "bad.yaml:3:5: vector.ops.relux: unknown key (did you mean 'relu'?)");
}

TEST(ConfigLoader, DuplicateKeyIsAnErrorNamingTheFirstLine) {
  auto e = errors_of("systolic_array:\n  rows: 8\n  cols: 8\n  rows: 16\n");
  EXPECT_EQ(e, std::vector<std::string>{
                   "bad.yaml:4:3: systolic_array.rows: duplicate key (first given on line 2)"});
}

// ---------------------------------------------------------------------------------------------------
// Types

TEST(ConfigLoader, StringForIntegerNamesKeyValueAndAllowedRange) {
  EXPECT_EQ(errors_of("systolic_array:\n  rows: abc\n"),
            std::vector<std::string>{
                "bad.yaml:2:9: systolic_array.rows = abc is not an integer (allowed 1..4096)"});
}

TEST(ConfigLoader, FractionForIntegerIsATypeError) {
  EXPECT_EQ(errors_of("systolic_array:\n  rows: 1.5\n"),
            std::vector<std::string>{
                "bad.yaml:2:9: systolic_array.rows = 1.5 is not an integer (allowed 1..4096)"});
}

TEST(ConfigLoader, QuotedNumberIsAString) {
  auto e = errors_of("systolic_array:\n  rows: \"8\"\n");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_TRUE(contains(e[0], "bad.yaml:2:9: systolic_array.rows = \"8\" is a quoted string")) << e[0];
  EXPECT_TRUE(contains(e[0], "an integer in 1..4096")) << e[0];
}

TEST(ConfigLoader, MappingWhereAScalarIsExpected) {
  EXPECT_EQ(errors_of("systolic_array:\n  rows:\n    a: 1\n"),
            std::vector<std::string>{
                "bad.yaml:3:5: systolic_array.rows: expected an integer in 1..4096, got a mapping"});
}

TEST(ConfigLoader, ListWhereAScalarIsExpected) {
  EXPECT_EQ(errors_of("frequency_mhz: [1, 2]\n"),
            std::vector<std::string>{
                "bad.yaml:1:16: frequency_mhz: expected a number in 1.0..100000.0, got a list"});
}

TEST(ConfigLoader, EmptyValueIsMissing) {
  auto e = errors_of("dma:\n  engines:\n");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_TRUE(contains(e[0], "bad.yaml:2:")) << e[0];
  EXPECT_TRUE(contains(e[0], "dma.engines: missing value (expected an integer in 1..64)")) << e[0];
}

TEST(ConfigLoader, MaybeIsNotABoolean) {
  EXPECT_EQ(
      errors_of("systolic_array:\n  double_buffered: maybe\n"),
      std::vector<std::string>{
          "bad.yaml:2:20: systolic_array.double_buffered = maybe is not a boolean (allowed true, false)"});
}

TEST(ConfigLoader, YesIsNotABooleanEither) {
  // No silent synonyms: YAML 1.1's yes/no/on/off are not booleans here.
  auto e = errors_of("systolic_array:\n  double_buffered: yes\n");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_TRUE(contains(e[0], "is not a boolean")) << e[0];
}

TEST(ConfigLoader, TextForRealIsATypeError) {
  EXPECT_EQ(errors_of("frequency_mhz: fast\n"),
            std::vector<std::string>{
                "bad.yaml:1:16: frequency_mhz = fast is not a number (allowed 1.0..100000.0)"});
}

TEST(ConfigLoader, InfinityIsNotANumberHere) {
  auto e = errors_of("frequency_mhz: -inf\nhost:\n  cpu_gops: .nan\n");
  ASSERT_EQ(e.size(), 2u);
  EXPECT_TRUE(contains(e[0], "frequency_mhz = -inf is not a finite number")) << e[0];
  EXPECT_TRUE(contains(e[1], "host.cpu_gops = .nan is not a number")) << e[1];
}

TEST(ConfigLoader, GroupGivenAScalarIsATypeError) {
  EXPECT_EQ(errors_of("sram: 512\n"),
            std::vector<std::string>{
                "bad.yaml:1:7: sram: expected a mapping of keys under 'sram:', got a single value"});
}

TEST(ConfigLoader, EmptyGroupKeepsDefaults) {
  isa::NpuConfig c = load_config_text("sram:\nsystolic_array:\n  rows: 16\n", "x.yaml");
  EXPECT_EQ(c.sram.input.size_kib, isa::NpuConfig{}.sram.input.size_kib);
  EXPECT_EQ(c.systolic_array.rows, 16);
}

// ---------------------------------------------------------------------------------------------------
// Ranges and choices

TEST(ConfigLoader, OutOfRangeNamesKeyValueAndRange) {
  EXPECT_EQ(
      errors_of("systolic_array:\n  rows: 0\n"),
      std::vector<std::string>{"bad.yaml:2:9: systolic_array.rows = 0 is out of range (allowed 1..4096)"});
}

TEST(ConfigLoader, RealOutOfRange) {
  EXPECT_EQ(errors_of("systolic_array:\n  fp16_rate: 1.5\n"),
            std::vector<std::string>{
                "bad.yaml:2:14: systolic_array.fp16_rate = 1.5 is out of range (allowed 0.0..1.0)"});
}

TEST(ConfigLoader, IntegerBeyondInt64IsOutOfRangeNotACrash) {
  auto e = errors_of("dma:\n  setup_cycles: 99999999999999999999999\n");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0],
            "bad.yaml:2:17: dma.setup_cycles = 99999999999999999999999 is out of range (allowed 0..100000)");
}

TEST(ConfigLoader, ChoiceErrorListsTheAllowedNames) {
  EXPECT_EQ(errors_of("systolic_array:\n  dataflow: wz\n"),
            std::vector<std::string>{
                "bad.yaml:2:13: systolic_array.dataflow = wz is not one of ws, os, is (did you mean 'ws'?)"});
  EXPECT_EQ(
      errors_of("dram:\n  model: gddr6\n"),
      std::vector<std::string>{
          "bad.yaml:2:10: dram.model = gddr6 is not one of ideal, simple, ddr4_3200, lpddr4_4266, hbm2"});
}

// ---------------------------------------------------------------------------------------------------
// Documents that are not configurations

TEST(ConfigLoader, EmptyFileIsAnError) {
  for (const char* text : {"", "\n\n", "# only a comment\n", "---\n"}) {
    auto e = errors_of(text);
    ASSERT_EQ(e.size(), 1u) << text;
    EXPECT_TRUE(contains(e[0], "bad.yaml: the configuration is empty")) << e[0];
  }
}

TEST(ConfigLoader, NonMappingDocumentIsAnErrorWithPosition) {
  auto e = errors_of("\n- rows\n- cols\n");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0],
            "bad.yaml:2:1: expected a mapping of configuration keys (e.g. 'systolic_array:'), got a list");
  e = errors_of("just some words\n");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_TRUE(contains(e[0], "bad.yaml:1:1: expected a mapping")) << e[0];
}

TEST(ConfigLoader, SyntaxErrorCarriesThePosition) {
  auto e = errors_of("systolic_array:\n  rows: [1, 2\n");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_TRUE(contains(e[0], "bad.yaml:3:1: invalid YAML: ")) << e[0];
  e = errors_of("a: b: c\n");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_TRUE(contains(e[0], "bad.yaml:1:5: invalid YAML: ")) << e[0];
}

TEST(ConfigLoader, SecondDocumentIsAnError) {
  auto e = errors_of("systolic_array:\n  rows: 8\n---\nsystolic_array:\n  rows: 16\n");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_TRUE(contains(e[0], "bad.yaml:3:1: a second YAML document")) << e[0];  // the "---" line
}

TEST(ConfigLoader, NonScalarKeyIsAnError) {
  auto e = errors_of("? [a, b]\n: 1\n");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_TRUE(contains(e[0], "bad.yaml:1:3: top level: a key must be a plain name, got a list")) << e[0];
}

// ---------------------------------------------------------------------------------------------------
// Values that load

TEST(ConfigLoader, ValuesOfEveryKindLoad) {
  isa::NpuConfig c = load_config_text(
      "frequency_mhz: 1.25e3\n"
      "systolic_array: {rows: 64, cols: +48, dataflow: os, double_buffered: false, fp16_rate: .25}\n"
      "dram:\n  model: hbm2\n  channels: 8\n"
      "vector:\n  ops:\n    exp:\n      latency_cycles: 9\n      ii_cycles: 3\n",
      "ok.yaml");
  EXPECT_EQ(c.frequency_mhz, 1250.0);
  EXPECT_EQ(c.systolic_array.rows, 64);
  EXPECT_EQ(c.systolic_array.cols, 48);
  EXPECT_EQ(c.systolic_array.dataflow, isa::Dataflow::kOs);
  EXPECT_FALSE(c.systolic_array.double_buffered);
  EXPECT_EQ(c.systolic_array.fp16_rate, 0.25);
  EXPECT_EQ(c.dram.model, isa::DramModel::kHbm2);
  EXPECT_EQ(c.dram.channels, 8);
  EXPECT_EQ(c.vector.ops[static_cast<int>(isa::VecOp::kExp)].latency_cycles, 9);
  EXPECT_EQ(c.vector.ops[static_cast<int>(isa::VecOp::kExp)].ii_cycles, 3);
  // Untouched keys keep their defaults.
  EXPECT_EQ(c.sram.input.size_kib, 256);
  EXPECT_EQ(c.vector.ops[static_cast<int>(isa::VecOp::kAdd)].latency_cycles, 4);
}

TEST(ConfigLoader, EmptyMappingIsTheDefaults) {
  EXPECT_EQ(raw_values(load_config_text("{}\n", "x.yaml")), raw_values(isa::NpuConfig{}));
}

TEST(ConfigLoader, NoConfigMeansTheDefaults) {
  EXPECT_EQ(raw_values(load_config("")), raw_values(isa::NpuConfig{}));
}

// ---------------------------------------------------------------------------------------------------
// --set

TEST(ConfigSet, OverridesApplyAfterTheFile) {
  isa::NpuConfig c = load_config_text("systolic_array:\n  rows: 8\n  cols: 8\n", "x.yaml",
                                      {"systolic_array.rows=16", "dram.model=ideal", "systolic_array.rows=24",
                                       "host.cpu_gops=2.5", "systolic_array.double_buffered=false"});
  EXPECT_EQ(c.systolic_array.rows, 24);  // the last --set wins
  EXPECT_EQ(c.systolic_array.cols, 8);   // from the file
  EXPECT_EQ(c.dram.model, isa::DramModel::kIdeal);
  EXPECT_EQ(c.host.cpu_gops, 2.5);
  EXPECT_FALSE(c.systolic_array.double_buffered);
}

TEST(ConfigSet, SpacesAroundTheEqualsSignAreIgnored) {
  EXPECT_EQ(load_config("", {" systolic_array.rows = 16 "}).systolic_array.rows, 16);
}

TEST(ConfigSet, OverridesApplyToTheDefaults) {
  isa::NpuConfig c = load_config("", {"vector.ops.gelu.latency_cycles=20"});
  EXPECT_EQ(c.vector.ops[static_cast<int>(isa::VecOp::kGelu)].latency_cycles, 20);
}

TEST(ConfigSet, RangeErrorIsPrefixedWithSet) {
  EXPECT_EQ(errors_of("{}", {"systolic_array.rows=0"}),
            std::vector<std::string>{"--set: systolic_array.rows = 0 is out of range (allowed 1..4096)"});
}

TEST(ConfigSet, TypeAndChoiceErrors) {
  EXPECT_EQ(errors_of("{}", {"systolic_array.rows=many", "systolic_array.dataflow=xs", "dma.engines="}),
            (std::vector<std::string>{
                "--set: systolic_array.rows = many is not an integer (allowed 1..4096)",
                "--set: systolic_array.dataflow = xs is not one of ws, os, is (did you mean 'ws'?)",
                "--set: dma.engines = \"\" is not an integer (allowed 1..64)"}));
}

TEST(ConfigSet, UnknownKeySuggestsTheClosestFullKey) {
  EXPECT_EQ(errors_of("{}", {"systolic_array.rowz=4"}),
            std::vector<std::string>{
                "--set: systolic_array.rowz: unknown key (did you mean 'systolic_array.rows'?)"});
  EXPECT_EQ(errors_of("{}", {"rows=4"}),
            std::vector<std::string>{"--set: rows: unknown key (did you mean 'systolic_array.rows'?)"});
  EXPECT_EQ(errors_of("{}", {"sram.inptu.size_kib=4"}),
            std::vector<std::string>{
                "--set: sram.inptu.size_kib: unknown key (did you mean 'sram.input.size_kib'?)"});
}

TEST(ConfigSet, GroupOrMissingEqualsIsAnError) {
  EXPECT_EQ(errors_of("{}", {"sram.input=5", "systolic_array.rows"}),
            (std::vector<std::string>{
                "--set: sram.input is a group, not a parameter (its keys: size_kib, banks, bank_width_bytes, "
                "ports, "
                "read_latency_cycles, write_latency_cycles)",
                "--set systolic_array.rows: expected key.path=value (e.g. systolic_array.rows=64)"}));
}

// ---------------------------------------------------------------------------------------------------
// All errors at once

TEST(ConfigLoader, EveryErrorIsReportedInOneException) {
  auto e = errors_of(
      "systolic_array:\n"
      "  rowz: 8\n"             // unknown key
      "  cols: 0\n"             // out of range
      "  dataflow: diagonal\n"  // bad choice
      "sram:\n"
      "  input:\n"
      "    sise_kib: 4\n"  // nested unknown key
      "dram:\n"
      "  latency_ns: soon\n",  // type error
      {"dma.engines=100", "nope=1"});
  ASSERT_EQ(e.size(), 7u) << joined(e);
  // File errors in file order, then --set errors in command-line order.
  EXPECT_TRUE(contains(e[0], "bad.yaml:2:3: systolic_array.rowz: unknown key")) << joined(e);
  EXPECT_TRUE(contains(e[1], "bad.yaml:3:9: systolic_array.cols = 0 is out of range")) << joined(e);
  EXPECT_TRUE(contains(e[2], "bad.yaml:4:13: systolic_array.dataflow = diagonal is not one of")) << joined(e);
  EXPECT_TRUE(contains(e[3], "bad.yaml:7:5: sram.input.sise_kib: unknown key")) << joined(e);
  EXPECT_TRUE(contains(e[4], "bad.yaml:9:15: dram.latency_ns = soon is not a number")) << joined(e);
  EXPECT_EQ(e[5], "--set: dma.engines = 100 is out of range (allowed 1..64)");
  EXPECT_TRUE(contains(e[6], "--set: nope: unknown key")) << joined(e);
}

TEST(ConfigLoader, WhatJoinsAllMessages) {
  try {
    load_config_text("a: 1\nb: 2\n", "two.yaml");
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    ASSERT_EQ(e.messages().size(), 2u);
    EXPECT_EQ(std::string(e.what()), e.messages()[0] + "\n" + e.messages()[1]);
  }
}

// ---------------------------------------------------------------------------------------------------
// Cross-field constraints

TEST(ConfigConstraints, AccumulatorMustHoldOneInt32Tile) {
  // 64 x 64 int32 = 16384 bytes = 16 KiB; 8 KiB is too small, 16 KiB is enough.
  auto e = errors_of("systolic_array: {rows: 64, cols: 64}\nsram:\n  accumulator: {size_kib: 8}\n");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0],
            "bad.yaml: sram.accumulator.size_kib = 8 (8192 bytes) cannot hold one systolic_array.rows x "
            "systolic_array.cols = 64 x 64 tile of int32 partial sums (16384 bytes)");
  EXPECT_TRUE(
      errors_of("systolic_array: {rows: 64, cols: 64}\nsram:\n  accumulator: {size_kib: 16}\n").empty());
}

TEST(ConfigConstraints, ConstraintsAlsoCheckSetOverrides) {
  auto e = errors_of("{}", {"systolic_array.rows=4096", "systolic_array.cols=4096"});
  ASSERT_EQ(e.size(), 1u);
  EXPECT_TRUE(contains(e[0], "sram.accumulator.size_kib = 128")) << e[0];
}

TEST(ConfigConstraints, BanksMustDivideTheCapacityInWholeRows) {
  // 256 KiB over 3 banks of 16 bytes: 262144 / 48 is not whole.
  auto e = errors_of("sram:\n  input: {banks: 3}\n");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(
      e[0],
      "bad.yaml: sram.input.size_kib = 256 (262144 bytes) is not a multiple of sram.input.banks x "
      "sram.input.bank_width_bytes = 3 x 16 = 48 bytes (every bank must hold the same number of full rows)");
}

TEST(ConfigConstraints, BurstAndAlignmentArePowersOfTwo) {
  auto e = errors_of("dma: {burst_bytes: 96, alignment_bytes: 48}\n");
  EXPECT_EQ(e, (std::vector<std::string>{"bad.yaml: dma.burst_bytes = 96 is not a power of two",
                                         "bad.yaml: dma.alignment_bytes = 48 is not a power of two"}));
}

TEST(ConfigConstraints, DefaultsSatisfyEveryConstraint) {
  EXPECT_TRUE(check_constraints(isa::NpuConfig{}).empty());
}

// ---------------------------------------------------------------------------------------------------
// Files and presets

TEST(ConfigFiles, ErrorsNameTheFileAsGiven) {
  TempFile f("mine.yaml", "systolic_array:\n  rowz: 8\n");
  try {
    load_config(f.path());
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.messages(), std::vector<std::string>{
                                f.path() + ":2:3: systolic_array.rowz: unknown key (did you mean 'rows'?)"});
  }
}

TEST(ConfigFiles, EmptyFileIsAConfigError) {
  TempFile f("empty.yaml", "");
  try {
    load_config(f.path());
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    ASSERT_EQ(e.messages().size(), 1u);
    EXPECT_TRUE(contains(e.messages()[0], "the configuration is empty")) << e.messages()[0];
  }
}

TEST(ConfigFiles, MissingFileThatIsNoPresetListsThePresets) {
  try {
    load_config("tpu-v2");
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    ASSERT_EQ(e.messages().size(), 1u);
    const std::string& m = e.messages()[0];
    EXPECT_TRUE(contains(m, "--config tpu-v2: no such file, and not a preset (presets: ")) << m;
    EXPECT_TRUE(contains(m, "edge")) << m;
    EXPECT_TRUE(contains(m, "did you mean 'tpu-v1'?")) << m;
  }
}

TEST(ConfigFiles, DirectoryIsNotAConfig) { EXPECT_THROW(load_config(configs_path()), ConfigError); }

TEST(ConfigPresets, PresetNameLoadsTheFileInConfigs) {
  const isa::NpuConfig by_name = load_config("tpu-v1");
  const isa::NpuConfig by_file = load_config(configs_path() + "/tpu-v1.yaml");
  const isa::NpuConfig by_file_name = load_config("tpu-v1.yaml");
  EXPECT_EQ(raw_values(by_name), raw_values(by_file));
  EXPECT_EQ(raw_values(by_name), raw_values(by_file_name));
  EXPECT_EQ(fs::canonical(configs_dir()), fs::canonical(configs_path()));
}

TEST(ConfigPresets, EveryPresetInConfigsLoadsCleanly) {
  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(configs_path()))
    if (entry.path().extension() == ".yaml") files.push_back(entry.path().string());
  ASSERT_GE(files.size(), 4u);
  for (const std::string& f : files) {
    try {
      load_config(f);
    } catch (const ConfigError& e) {
      ADD_FAILURE() << f << ":\n" << e.what();
    }
  }
  std::vector<std::string> names = preset_names();
  for (const char* p : {"edge", "tpu-v1", "gemmini", "datacenter", "datacenter-2core"})
    EXPECT_NE(std::find(names.begin(), names.end(), p), names.end()) << p;
}

TEST(ConfigPresets, DatacenterChipIsTwoDatacenterCoresOnTwiceTheChannels) {
  isa::NpuConfig chip = load_config("datacenter-2core");
  const isa::NpuConfig core = load_config("datacenter");
  EXPECT_EQ(chip.cores, 2);
  EXPECT_EQ(chip.dram.channels, 2 * core.dram.channels);
  // Everything else is one core's.
  chip.cores = core.cores;
  chip.dram.channels = core.dram.channels;
  EXPECT_EQ(raw_values(chip), raw_values(core));
}

TEST(ConfigPresets, EdgeIsExactlyTheBuiltInDefaults) {
  EXPECT_EQ(raw_values(load_config("edge")), raw_values(isa::NpuConfig{}));
}

TEST(ConfigPresets, TpuV1MatchesThePaper) {
  // Jouppi et al., ISCA 2017: 256 x 256 MACs at 700 MHz, 24 MiB unified buffer, 4 MiB accumulators,
  // a weight FIFO of four 64 KiB tiles, 34 GB/s of DDR3, integer only.
  const isa::NpuConfig c = load_config("tpu-v1");
  EXPECT_EQ(c.systolic_array.rows, 256);
  EXPECT_EQ(c.systolic_array.cols, 256);
  EXPECT_EQ(c.frequency_mhz, 700.0);
  EXPECT_EQ(c.sram.input.size_bytes(), 24 * 1024 * 1024);
  EXPECT_EQ(c.sram.accumulator.size_bytes(), 4096 * 256 * 4);
  EXPECT_EQ(c.sram.weight.size_bytes(), 4 * 256 * 256);
  EXPECT_EQ(c.dram.model, isa::DramModel::kSimple);
  EXPECT_EQ(c.dram.bandwidth_gbps, 34.0);
  EXPECT_EQ(c.systolic_array.dataflow, isa::Dataflow::kWs);
  EXPECT_EQ(c.systolic_array.rate(isa::DType::kFp32), 0.0);
  // "The weights are preloaded, and take effect with the advancing wave alongside the first data of a
  // new block": a MatrixMultiply enters right behind the one before it (the key in effect, not just set).
  EXPECT_TRUE(c.systolic_array.instructions_chained());
  // Peak: 65536 MACs x 2 ops x 700 MHz = 91.75 TOPS ("92 TOPS").
  EXPECT_NEAR(c.systolic_array.rows * c.systolic_array.cols * 2 * c.frequency_mhz * 1e6 / 1e12, 91.75, 0.01);
}

TEST(ConfigPresets, TpuV1DmaStreamsAtThePapersDramBandwidth) {
  // The paper's roofline draws the weight stream at the full 34 GB/s (48.6 bytes a cycle at 700 MHz). With
  // 32 bursts in flight an engine covered 2 KiB of the 3.5 KB Little's law asks for (34 GB/s x 104 ns),
  // and the engines' windows do not add up on the DRAM model: 34.7 bytes a cycle sustained.
  const isa::NpuConfig c = load_config("tpu-v1");
  const double peak = isa::timing::dram_peak_bytes_per_cycle(c);
  EXPECT_NEAR(peak, 34.0 * 1000.0 / 700.0, 1e-9);
  EXPECT_GE(isa::timing::sustained_dram_bytes_per_cycle(c), 0.95 * peak);
}

TEST(ConfigPresets, GemminiMatchesItsDefaultConfig) {
  const isa::NpuConfig c = load_config("gemmini");
  EXPECT_EQ(c.systolic_array.rows, 16);
  EXPECT_EQ(c.systolic_array.cols, 16);
  EXPECT_TRUE(c.sram.shared_scratchpad);
  EXPECT_EQ(c.sram.input.size_kib, 256);  // the one 256 KiB scratchpad
  EXPECT_EQ(c.sram.buffer(isa::Buffer::kWeight).size_kib, 256);
  EXPECT_EQ(c.sram.input.banks, 4);
  EXPECT_EQ(c.lowering.mapping_policy, isa::MappingPolicy::kGemmini);
  EXPECT_EQ(c.lowering.conv_reduction, isa::ConvReduction::kPerPosition);
  EXPECT_EQ(c.sram.accumulator.size_kib, 64);
  EXPECT_EQ(c.sram.accumulator.banks, 2);
  EXPECT_EQ(c.dma.burst_bytes, 64);
  EXPECT_EQ(c.dma.max_outstanding, 16);
}

TEST(ConfigPresets, DatacenterHasHbm2AndTensOfMiB) {
  const isa::NpuConfig c = load_config("datacenter");
  EXPECT_EQ(c.dram.model, isa::DramModel::kHbm2);
  EXPECT_GT(c.dram.channels, 1);
  const int64_t sram_mib =
      (c.sram.input.size_bytes() + c.sram.weight.size_bytes() + c.sram.accumulator.size_bytes()) >> 20;
  EXPECT_GE(sram_mib, 10);
  EXPECT_GE(c.systolic_array.rows * c.systolic_array.cols, 128 * 128);
  // One TPU v3 core: 128 x 256 MACs x 2 flops x 940 MHz = 61.6 TFLOPS bf16, half the chip's 123.
  EXPECT_NEAR(c.systolic_array.rows * c.systolic_array.cols * 2 * c.frequency_mhz * 1e6 / 1e12, 61.6, 0.1);
  EXPECT_EQ(c.systolic_array.rate(isa::DType::kBf16), 1.0);
  // The MXU's LHS streams in and its results out by the VLIW bundle's push and pop slots: consecutive
  // matmuls enter back to back (the key in effect, not just set; datacenter-2core follows, test above).
  EXPECT_TRUE(c.systolic_array.instructions_chained());
}

TEST(ConfigPresets, GemminiAt8x8IsOneSharedScratchpadOfTheSetSize) {
  const isa::NpuConfig c = load_config("gemmini", {"systolic_array.rows=8", "systolic_array.cols=8",
                                                   "sram.input.size_kib=64", "sram.accumulator.size_kib=16"});
  EXPECT_EQ(c.sram.buffer(isa::Buffer::kInput).size_bytes(), 64 * 1024);
  EXPECT_EQ(c.sram.buffer(isa::Buffer::kWeight).size_bytes(), 64 * 1024);  // the same scratchpad
  EXPECT_EQ(c.sram.storage(isa::Buffer::kWeight), isa::Buffer::kInput);
  EXPECT_EQ(c.sram.accumulator.size_kib, 16);
}

TEST(ConfigConstraints, SharedScratchpadRejectsWeightKeysAndGemminiNeedsASquareArray) {
  auto error_of = [](const std::vector<std::string>& sets) -> std::string {
    try {
      load_config("gemmini", sets);
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "(loaded)";
  };
  const std::string weight = error_of({"sram.weight.size_kib=64"});
  EXPECT_NE(weight.find("sram.weight.size_kib: inputs and weights share one scratchpad"), std::string::npos)
      << weight;
  const std::string square = error_of({"systolic_array.rows=8"});
  EXPECT_NE(square.find("lowering.mapping_policy = gemmini needs a square array"), std::string::npos)
      << square;
  const isa::NpuConfig c = load_config("edge", {"lowering.conv_reduction=per_position"});
  EXPECT_EQ(c.lowering.conv_reduction, isa::ConvReduction::kPerPosition);
  EXPECT_FALSE(c.sram.shared_scratchpad);
  EXPECT_EQ(c.sram.storage(isa::Buffer::kWeight), isa::Buffer::kWeight);
}

TEST(ConfigPresets, PresetsAcceptSetOverrides) {
  const isa::NpuConfig c = load_config("gemmini", {"systolic_array.dataflow=os"});
  EXPECT_EQ(c.systolic_array.dataflow, isa::Dataflow::kOs);
  EXPECT_EQ(c.systolic_array.rows, 16);
}

}  // namespace
}  // namespace npusim::sim
