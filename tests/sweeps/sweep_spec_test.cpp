// The sweep file format and its expansion into points (sim/sweep/sweep_spec.h), and the row format of
// the results (sim/sweep/result_store.h). Nothing here runs a simulation.
#include "sim/sweep/sweep_spec.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "sim/sweep/result_store.h"

namespace npusim::sim {
namespace {

SweepSpec parse(const std::string& text) { return parse_sweep_text(text, "my.yaml", NPUSIM_SOURCE_DIR); }

std::string value(const SweepPoint& p, const std::string& key) {
  for (const auto& [k, v] : p.values)
    if (k == key) return v;
  return "<none>";
}

// The first error of a sweep text that must not parse.
std::string first_error(const std::string& text) {
  try {
    parse(text);
  } catch (const SweepError& e) {
    return e.messages().front();
  }
  return "";
}

TEST(SweepSpec, ProductVariesTheLastAxisFastest) {
  const SweepSpec s = parse(
      "axes:\n"
      "  - systolic_array.rows: [8, 16]\n"
      "  - dram.model: [ideal, simple, hbm2]\n");
  const std::vector<SweepPoint> p = expand_points(s);
  ASSERT_EQ(p.size(), 6u);
  const char* rows[] = {"8", "8", "8", "16", "16", "16"};
  const char* dram[] = {"ideal", "simple", "hbm2", "ideal", "simple", "hbm2"};
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(p[i].index, i);
    EXPECT_EQ(value(p[i], "systolic_array.rows"), rows[i]);
    EXPECT_EQ(value(p[i], "dram.model"), dram[i]);
  }
  EXPECT_EQ(s.column_keys(), (std::vector<std::string>{"systolic_array.rows", "dram.model"}));
}

TEST(SweepSpec, KeysInOneAxisEntryAreZipped) {
  const std::vector<SweepPoint> p =
      expand_points(parse("axes:\n"
                          "  - systolic_array.rows: [8, 16, 32]\n"
                          "    systolic_array.cols: [4, 8, 16]\n"));
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(value(p[2], "systolic_array.rows"), "32");
  EXPECT_EQ(value(p[2], "systolic_array.cols"), "16");
  EXPECT_EQ(p[2].array_pes, 32 * 16);
}

TEST(SweepSpec, CombineZipPairsTheAxes) {
  const std::vector<SweepPoint> p =
      expand_points(parse("combine: zip\n"
                          "axes:\n"
                          "  - systolic_array.rows: [8, 16]\n"
                          "  - dram.model: [ideal, hbm2]\n"));
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(value(p[1], "systolic_array.rows"), "16");
  EXPECT_EQ(value(p[1], "dram.model"), "hbm2");
}

TEST(SweepSpec, CombineZipWithUnequalAxesNamesBoth) {
  const SweepSpec s = parse(
      "combine: zip\n"
      "axes:\n"
      "  - systolic_array.rows: [8, 16]\n"
      "  - dram.model: [ideal, simple, hbm2]\n");
  try {
    expand_points(s);
    FAIL() << "expected a SweepError";
  } catch (const SweepError& e) {
    EXPECT_NE(std::string(e.what()).find("my.yaml:4:5"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("dram.model"), std::string::npos) << e.what();
  }
}

TEST(SweepSpec, ZippedListsOfDifferentLengthsAreAnError) {
  const std::string e = first_error(
      "axes:\n"
      "  - systolic_array.rows: [8, 16]\n"
      "    systolic_array.cols: [8]\n");
  EXPECT_EQ(e.rfind("my.yaml:3:5: systolic_array.cols: 1 values", 0), 0u) << e;
}

TEST(SweepSpec, UnknownConfigKeyOnAnAxisNamesKeyFileAndLine) {
  const std::string e = first_error(
      "name: t\n"
      "axes:\n"
      "  - dram.model: [ideal]\n"
      "  - systolic_array.rowz: [8, 16]\n");
  EXPECT_EQ(e.rfind("my.yaml:4:5: ", 0), 0u) << e;
  EXPECT_NE(e.find("systolic_array.rowz"), std::string::npos) << e;
  EXPECT_NE(e.find("unknown key"), std::string::npos) << e;
  EXPECT_NE(e.find("systolic_array.rows"), std::string::npos) << "no suggestion: " << e;
}

TEST(SweepSpec, UnknownKeyInFixedSetIsAnError) {
  const std::string e = first_error(
      "set:\n"
      "  dram.modle: ideal\n"
      "axes:\n"
      "  - systolic_array.rows: [8]\n");
  EXPECT_EQ(e.rfind("my.yaml:2:3: set: ", 0), 0u) << e;
  EXPECT_NE(e.find("dram.modle"), std::string::npos) << e;
}

TEST(SweepSpec, InvalidValueOnAnAxisNamesKeyAndValue) {
  const std::string e = first_error(
      "axes:\n"
      "  - systolic_array.dataflow: [ws, diagonal]\n");
  EXPECT_EQ(e.rfind("my.yaml:2:5: ", 0), 0u) << e;
  EXPECT_NE(e.find("systolic_array.dataflow"), std::string::npos) << e;
  EXPECT_NE(e.find("diagonal"), std::string::npos) << e;
}

TEST(SweepSpec, UnknownTopLevelKeySuggestsTheClosest) {
  const std::string e = first_error("axis:\n  - systolic_array.rows: [8]\n");
  EXPECT_NE(e.find("my.yaml:1:1: axis: unknown key (did you mean 'axes'?)"), std::string::npos) << e;
}

TEST(SweepSpec, SweepingAKeyTwiceIsAnError) {
  const std::string e = first_error(
      "axes:\n"
      "  - systolic_array.rows: [8]\n"
      "  - systolic_array.rows: [16]\n");
  EXPECT_NE(e.find("my.yaml:3:5: systolic_array.rows: swept twice"), std::string::npos) << e;
}

// A configuration file on the config axis (or as the base) that fails by itself (an unknown key, a
// value out of range) fails the sweep up front, each problem at the sweep file's line and the file's own,
// like `precision: [int9]`, not as a failed point at run time.
TEST(SweepSpec, AConfigFileWithErrorsOnTheConfigAxisFailsUpFront) {
  const std::string bad = testing::TempDir() + "sweep_spec_bad_config.yaml";  // TempDir() ends in '/'
  {
    std::ofstream out(bad);
    out << "systolic_array:\n  rowz: 3\ndram:\n  model: ddr9\n";
  }
  for (const std::string& text : {"axes:\n  - config: [edge, " + bad + "]\n",
                                  "base: " + bad + "\naxes:\n  - systolic_array.rows: [8]\n"}) {
    try {
      parse(text);
      ADD_FAILURE() << "expected an error: " << text;
    } catch (const SweepError& e) {
      ASSERT_EQ(e.messages().size(), 2u) << text;
      EXPECT_NE(e.messages()[0].find(bad + ":2:3: systolic_array.rowz: unknown key"), std::string::npos)
          << e.messages()[0];
      EXPECT_EQ(e.messages()[0].rfind("my.yaml:", 0), 0u) << e.messages()[0];
      EXPECT_NE(e.messages()[1].find(bad + ":4:10: dram.model = ddr9"), std::string::npos) << e.messages()[1];
    }
  }
}

TEST(SweepSpec, AMissingModelFileIsAnErrorAtItsLine) {
  const std::string e = first_error("axes:\n  - model: [default, no/such/model.onnx]\n");
  EXPECT_EQ(e.rfind("my.yaml:2:22: model: 'no/such/model.onnx' does not exist", 0), 0u) << e;
}

TEST(SweepSpec, ModelsPrecisionsAndBatchesBecomeRunArguments) {
  const std::vector<SweepPoint> p =
      expand_points(parse("axes:\n"
                          "  - model: [default, 'gemm:M=64,N=64,K=64']\n"
                          "  - precision: [int8]\n"
                          "  - batch: [4]\n"));
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0].run_command(""), (std::vector<std::string>{"run", "--precision", "int8", "--batch", "4"}));
  EXPECT_EQ(p[1].run_command("edge"),
            (std::vector<std::string>{"run", "gemm:M=64,N=64,K=64", "--config", "edge", "--precision", "int8",
                                      "--batch", "4"}));
  EXPECT_EQ(value(p[1], "model"), "gemm:M=64,N=64,K=64");
}

TEST(SweepSpec, GenerateDynamicRequestsAndShapePolicyBecomeRunArguments) {
  const std::vector<SweepPoint> g = expand_points(
      parse("axes:\n  - model: ['llm:layers=1,hidden=64,heads=2,kv_heads=1,ffn=128,vocab=100']\n"
            "  - generate: ['4:2', '16:8']\n"));
  ASSERT_EQ(g.size(), 2u);
  EXPECT_EQ(g[1].run_command(""),
            (std::vector<std::string>{"run",
                                      "llm:layers=1,hidden=64,heads=2,kv_heads=1,ffn=128,"
                                      "vocab=100",
                                      "--generate", "16:8"}));
  const std::vector<SweepPoint> r =
      expand_points(parse("axes:\n  - dynamic: ['seq=64,128,256', 'seq=128']\n"
                          "  - requests: [docs/dynamic/requests_mixed.csv]\n"
                          "  - shape_policy: [pad, dynamic]\n"));
  ASSERT_EQ(r.size(), 4u);
  const std::string csv = std::string(NPUSIM_SOURCE_DIR) + "/docs/dynamic/requests_mixed.csv";
  EXPECT_EQ(r[1].run_command(""), (std::vector<std::string>{"run", "--dynamic", "seq=64,128,256",
                                                            "--requests", csv, "--shape-policy", "dynamic"}));
  EXPECT_EQ(value(r[2], "dynamic"), "seq=128");
  EXPECT_EQ(value(r[2], "requests"), "docs/dynamic/requests_mixed.csv");  // as written in the sweep file
  std::set<std::string> ids;
  for (const SweepPoint& p : r) ids.insert(p.id);
  EXPECT_EQ(ids.size(), 4u);
}

TEST(SweepSpec, DynamicShapeAxesTheRunWouldRefuseAreErrorsOfTheFile) {
  EXPECT_EQ(first_error("axes:\n  - generate: ['4:2', 'x:2']\n"),
            "my.yaml:2:23: generate: --generate prompt length 'x' is not a positive integer");
  EXPECT_EQ(first_error("axes:\n  - dynamic: ['seq=8,8']\n").rfind("my.yaml:2:15: dynamic: ", 0), 0u);
  EXPECT_EQ(first_error("axes:\n  - requests: [no/such.csv]\n")
                .rfind("my.yaml:2:16: requests: 'no/such.csv' does not exist", 0),
            0u);
  // One policy per point: each row of the results holds one policy's latencies.
  EXPECT_EQ(first_error("axes:\n  - dynamic: ['seq=8']\n  - requests: [docs/dynamic/requests_mixed.csv]\n")
                .rfind("my.yaml:3:5: requests: a request stream needs one shape policy per point", 0),
            0u);
  EXPECT_EQ(first_error("axes:\n  - dynamic: ['seq=8']\n  - shape_policy: [pad, all]\n")
                .rfind("my.yaml:3:25: shape_policy: 'all' is not one of pad, recompile, dynamic", 0),
            0u);
  EXPECT_EQ(
      first_error("axes:\n  - dynamic: ['seq=8']\n  - shape_policy: [pad]\n"),
      "my.yaml:3:5: shape_policy: a policy serves a request stream: add a requests axis or --requests in "
      "run_args");
  EXPECT_EQ(
      first_error("axes:\n  - requests: [docs/dynamic/requests_mixed.csv]\n  - shape_policy: [pad]\n"),
      "my.yaml:2:5: requests: needs the profiles to serve them on: a dynamic axis or --dynamic in run_args");
  EXPECT_EQ(first_error("axes:\n  - generate: ['4:2']\nrun_args: [--dynamic, seq=8]\n")
                .rfind("my.yaml:2:5: generate: runs the llm: decoder's prefill and decode steps", 0),
            0u);
  EXPECT_EQ(
      first_error("axes:\n  - dynamic: ['seq=8']\nrun_args: [--requests, r.csv]\n")
          .rfind("my.yaml:3:11: run_args: --requests: a request stream needs one shape policy per point", 0),
      0u);
  // Given once in run_args, one policy is fine.
  EXPECT_EQ(
      first_error("axes:\n  - dynamic: ['seq=8']\nrun_args: [--requests, r.csv, --shape-policy, pad]\n"), "");
}

TEST(SweepSpec, FixedSetsComeBeforeTheAxesOnTheCommandLine) {
  const std::vector<SweepPoint> p =
      expand_points(parse("base: edge\n"
                          "set: {dram.model: hbm2}\n"
                          "axes:\n"
                          "  - systolic_array.rows: [16]\n"));
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].run_command(parse("base: edge\naxes: [{systolic_array.rows: [16]}]\n").base),
            (std::vector<std::string>{"run", "--config", "edge", "--set", "dram.model=hbm2", "--set",
                                      "systolic_array.rows=16"}));
}

TEST(SweepSpec, PointIdsAreStableAcrossParsesAndDistinct) {
  const std::string text =
      "axes:\n"
      "  - systolic_array.rows: [8, 16, 32]\n"
      "  - dram.model: [ideal, simple]\n";
  const std::vector<SweepPoint> a = expand_points(parse(text)), b = expand_points(parse(text));
  std::set<std::string> ids;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].id, b[i].id);
    EXPECT_EQ(a[i].id.size(), 16u);
    ids.insert(a[i].id);
  }
  EXPECT_EQ(ids.size(), a.size());
}

TEST(SweepSpec, AnInvalidCombinationBecomesAFailedPointNotAnError) {
  // A 128 x 128 array drains 128*128*4 = 64 KiB of int32 partial sums; a 32 KiB accumulator cannot
  // take it, an 8 x 8 array's 256 bytes fit.
  const std::vector<SweepPoint> p =
      expand_points(parse("set: {sram.accumulator.size_kib: 32}\n"
                          "axes:\n"
                          "  - systolic_array.rows: [8, 128]\n"
                          "    systolic_array.cols: [8, 128]\n"));
  ASSERT_EQ(p.size(), 2u);
  EXPECT_TRUE(p[0].config_error.empty()) << p[0].config_error;
  EXPECT_NE(p[1].config_error.find("sram.accumulator.size_kib"), std::string::npos) << p[1].config_error;
}

TEST(SweepSpec, SramTotalAddsTheThreeScratchpads) {
  const std::vector<SweepPoint> p =
      expand_points(parse("axes:\n"
                          "  - sram.input.size_kib: [1024]\n"
                          "    sram.weight.size_kib: [512]\n"
                          "    sram.accumulator.size_kib: [256]\n"));
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].sram_kib, 1024 + 512 + 256);
}

TEST(SweepRows, JsonKeepsNumbersAsNumbersAndTextAsStrings) {
  ResultRow r;
  r.index = 3;
  r.id = "00ff";
  r.values = {{"systolic_array.rows", "16"}, {"dram.model", "hbm2"}};
  r.status = "failed";
  r.exit_code = 1;
  r.error = "npusim: error: \"x\", y";
  r.metrics = {{"total_cycles", "1234"}};
  const std::vector<std::string> cols = {"systolic_array.rows", "dram.model"};
  const std::string j = row_json(r, cols);
  EXPECT_NE(j.find("\"systolic_array.rows\": 16,"), std::string::npos) << j;
  EXPECT_NE(j.find("\"dram.model\": \"hbm2\""), std::string::npos) << j;
  EXPECT_NE(j.find("\"error\": \"npusim: error: \\\"x\\\", y\""), std::string::npos) << j;
  EXPECT_NE(j.find("\"total_cycles\": 1234"), std::string::npos) << j;
  EXPECT_NE(j.find("\"latency_ms\": null"), std::string::npos) << j;
  EXPECT_NE(j.find("\"report\": null"), std::string::npos) << j;
  const std::string c = row_csv(r, cols);
  EXPECT_EQ(c.rfind("3,00ff,16,hbm2,failed,1,\"npusim: error: \"\"x\"\", y\",", 0), 0u) << c;
  // Same number of fields as the header (the quoted error has one comma inside).
  const std::string h = csv_header(cols);
  EXPECT_EQ(std::count(h.begin(), h.end(), ','), std::count(c.begin(), c.end(), ',') - 1);
}

}  // namespace
}  // namespace npusim::sim
