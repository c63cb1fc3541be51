// Energy, power and area (docs/energy.md) as a user sees them: the report's sections add up, react to
// precision, SRAM size and latency the way the model says, and bad energy keys are rejected.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/e2e/run_command.h"

namespace npusim::test {
namespace {

// Runs npusim with `args` (after "run") and returns the report's path.
std::string report_of(const std::string& dir, const std::string& name, std::vector<std::string> args) {
  const std::string path = dir + "/" + name + ".json";
  std::vector<std::string> argv = {NPUSIM_BIN, "run"};
  argv.insert(argv.end(), args.begin(), args.end());
  for (const char* a : {"-q", "--report"}) argv.emplace_back(a);
  argv.push_back(path);
  const CommandResult r = run_command(argv);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return path;
}

double figure(const std::string& report, const std::string& expr) {
  return std::stod(json_eval(report, expr));
}

const std::string kConv = "conv:H=56,W=56,C=64,K=128,R=3,S=3,pad=1";

// Every component of every layer, added in program order, is exactly the report's figure; so are the
// layers' totals. (Energies lie on a 2^-36 mJ grid, so no order of addition rounds.)
TEST(Energy, LayerEnergiesAddUpToTheTotalExactly) {
  const std::string dir = temp_dir("energy-sum");
  for (const char* precision : {"int8", "fp32"}) {
    const std::string r = report_of(dir, precision, {"--precision", precision});
    EXPECT_EQ(json_eval(r,
                        "all(sum(l['energy']['by_component_mj'][k] for l in r['layers']) == v "
                        "for k, v in r['energy']['by_component_mj'].items()), "
                        "sum(l['energy']['total_mj'] for l in r['layers']) == r['energy']['total_mj'], "
                        "sum(r['energy']['by_component_mj'].values()) == r['energy']['total_mj'], "
                        "sorted(r['energy']['by_component_mj']), sorted(r['area']['by_unit_mm2'])"),
              "True True True ['dma', 'dram', 'host_link', 'mac', 'sram', 'static', 'vector'] "
              "['array', 'dma', 'sram_accumulator', 'sram_input', 'sram_weight', 'vector']")
        << precision;
    // Every layer with cycles has some energy, and the model's figures are consistent with each other.
    EXPECT_EQ(
        json_eval(r,
                  "all(l['energy']['total_mj'] > 0 for l in r['layers'] if l['cycles'] > 0), "
                  "abs(r['energy']['average_power_w'] - r['energy']['total_mj'] / r['latency_ms']) < 1e-9, "
                  "r['energy']['peak_power_w'] >= r['energy']['average_power_w']"),
        "True True True");
  }
}

// The same model on edge: int8 moves fewer bytes and its MACs cost less than fp16's, fp16's less than fp32's.
TEST(Energy, Int8UsesLessEnergyThanFp16ThanFp32OnEdge) {
  const std::string dir = temp_dir("energy-precision");
  std::vector<double> mj;
  for (const char* precision : {"int8", "fp16", "fp32"})
    mj.push_back(
        figure(report_of(dir, precision, {kConv, "--precision", precision}), "r['energy']['total_mj']"));
  EXPECT_LT(mj[0], mj[1]);
  EXPECT_LT(mj[1], mj[2]);
  EXPECT_GT(mj[0], 0.0);
}

// Smaller scratchpads force the tiling to re-read operands from DRAM: more DRAM bytes, more DRAM energy.
TEST(Energy, SmallerSramRaisesDramTrafficAndDramEnergy) {
  const std::string dir = temp_dir("energy-sram");
  // 1 MiB of int8 weights and 1 MiB of inputs: neither fits even the default scratchpads. The accumulator
  // shrinks too: its tiles decide how often each operand streams (a GEMM's tile may take the whole
  // accumulator in one side, docs/backend.md "One accumulator side").
  const std::string gemm = "gemm:M=1024,N=1024,K=1024";
  const std::string big = report_of(dir, "big", {gemm, "--precision", "int8"});
  const std::string small =
      report_of(dir, "small",
                {gemm, "--precision", "int8", "--set", "sram.input.size_kib=32", "--set",
                 "sram.weight.size_kib=16", "--set", "sram.accumulator.size_kib=16"});
  const std::string bytes = "r['dram']['bytes_read'] + r['dram']['bytes_written']";
  const std::string dram = "r['energy']['by_component_mj']['dram']";
  EXPECT_GT(figure(small, bytes), 1.5 * figure(big, bytes));
  EXPECT_GT(figure(small, dram), figure(big, dram));
  // The smaller SRAM also has less area.
  EXPECT_LT(figure(small, "r['area']['total_mm2']"), figure(big, "r['area']['total_mm2']"));
}

// Static energy is static power times latency: halving the clock doubles the time and the leakage, and
// leaves the dynamic energy of the same work nearly unchanged.
TEST(Energy, LeakageGrowsWithLatency) {
  const std::string dir = temp_dir("energy-leakage");
  const std::string fast = report_of(dir, "fast", {kConv, "--precision", "int8"});
  const std::string slow =
      report_of(dir, "slow", {kConv, "--precision", "int8", "--set", "frequency_mhz=250"});
  const std::string leak = "r['energy']['by_component_mj']['static']";
  EXPECT_GT(figure(slow, "r['latency_ms']"), 1.5 * figure(fast, "r['latency_ms']"));
  EXPECT_NEAR(figure(slow, leak) / figure(fast, leak),
              figure(slow, "r['latency_ms']") / figure(fast, "r['latency_ms']"), 1e-6);
  EXPECT_NEAR(figure(slow, "r['energy']['by_component_mj']['mac']"),
              figure(fast, "r['energy']['by_component_mj']['mac']"), 1e-12);
}

// The trace's power counter integrates to the report's energy.
TEST(Energy, TracePowerCounterIntegratesToTheReportedEnergy) {
  const std::string dir = temp_dir("energy-trace");
  const CommandResult r =
      run_command({NPUSIM_BIN, "run", kConv, "-q", "--trace", dir + "/t.json", "--report", dir + "/r.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const double total = figure(dir + "/r.json", "r['energy']['total_mj']");
  const double integral = figure(dir + "/t.json",
                                 "(lambda c: sum(a['args']['W'] * (b['ts'] - a['ts']) * 1e-3 "
                                 "for a, b in zip(c, c[1:])))([e for e in r['traceEvents'] if e['ph'] == 'C' "
                                 "and e['name'] == 'power'])");
  EXPECT_NEAR(integral, total, 1e-6 * total);
}

// Bad energy keys: one sentence naming the key, exit 2.
TEST(Energy, BadEnergyKeysAreRejectedWithTheKeysName) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--set", "energy.mac_pj.int8=-1"},
       "--set: energy.mac_pj.int8 = -1 is out of range (allowed 0.0..10000.0)"},
      {{"--set", "energy.dram.hbm2.pj_per_bit=3"},
       "--set: energy.dram.hbm2.pj_per_bit does not apply to the lpddr4_4266 DRAM model"},
      {{"--config", "tpu-v1", "--set", "energy.mac_pj.fp16=2"},
       "--set: energy.mac_pj.fp16 does not apply to this array (the array does not support this precision"},
      {{"--set", "technology.node_nm=0"}, "--set: technology.node_nm = 0 is out of range"},
      {{"--set", "energy.sram_read_pj_per_bitt=1"}, "did you mean 'energy.sram_read_pj_per_bit'?"},
  };
  for (const auto& [args, message] : cases) {
    std::vector<std::string> argv = {NPUSIM_BIN, "config"};
    argv.insert(argv.end(), args.begin(), args.end());
    const CommandResult r = run_command(argv);
    EXPECT_EQ(r.exit_code, 2) << args.back();
    EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
  }
}

// The terminal summary says it in one line each.
TEST(Energy, SummaryShowsEnergyPowerEfficiencyAndArea) {
  const CommandResult r = run_command({NPUSIM_BIN, "run", kConv, "--precision", "int8"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find(" mJ/inference, "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" W average, "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" TOPS/W\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\narea              "), std::string::npos) << r.out;
}

// npusim diff compares the energy figures of two reports: int8 against fp32 of the same layer.
TEST(Energy, DiffComparesEnergyPowerEfficiencyAndArea) {
  const std::string dir = temp_dir("energy-diff");
  const std::string a = report_of(dir, "a", {kConv, "--precision", "int8"});
  const std::string b = report_of(dir, "b", {kConv, "--precision", "fp32"});
  const CommandResult r = run_command({NPUSIM_BIN, "diff", a, b});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* key : {"  energy.total_mj ", "  energy.average_power_w ", "  energy.peak_power_w ",
                          "  energy.tops_per_w ", "  area.total_mm2 "})
    EXPECT_NE(r.out.find(key), std::string::npos) << key << "\n" << r.out;
}

}  // namespace
}  // namespace npusim::test
