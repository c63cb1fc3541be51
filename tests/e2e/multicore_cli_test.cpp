// Multi-core NPUs as a user runs them (issue 13 item 4, docs/multicore.md): `npusim run --split` over
// `cores: N`, a scenario's models pinned to cores, and the mistakes that exit 2.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "tests/e2e/run_command.h"

namespace npusim::test {

namespace {

// A MobileNetV2 block and head exported at batch 1 whose shapes all follow --batch (no Reshape fixed at
// export; the built-in models' shapes are fixed), with enough work a core that a second one pays.
const std::string kCnn = std::string(NPUSIM_SOURCE_DIR) + "/tests/quant_e2e/data/mbv2_block.onnx";

TEST(MulticoreCli, SplitByBatchRunsEachShareOnItsCoreAndBeatsOneCore) {
  const std::string dir = temp_dir("multicore_batch");
  const CommandResult one = npusim({"run", kCnn, "-q", "--batch", "1", "--report", dir + "/one.json"});
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const CommandResult r = npusim(
      {"run", kCnn, "--set", "cores=2", "--batch", "2", "--split", "batch", "--report", dir + "/two.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("multi-core: 2 cores, split by batch (batch 2)"), std::string::npos) << r.out;
  const std::string f = dir + "/two.json";
  EXPECT_EQ(json_eval(f, "[c['batch'] for c in r['multicore']['per_core']]"), "[1, 1]");
  // Each core's share alone is `npusim run --batch 1`, exactly.
  const std::string alone = json_eval(dir + "/one.json", "r['total_cycles']");
  EXPECT_EQ(json_eval(f, "[c['alone_cycles'] for c in r['multicore']['per_core']]"),
            "[" + alone + ", " + alone + "]");
  // Sharing the DRAM makes no core faster than alone; the batch is no slower than on one core.
  EXPECT_EQ(json_eval(f, "all(c['cycles'] >= c['alone_cycles'] for c in r['multicore']['per_core'])"),
            "True");
  EXPECT_EQ(json_eval(f, "r['multicore']['latency_cycles'] <= r['multicore']['one_core_cycles']"), "True");
  EXPECT_EQ(json_eval(f, "r['multicore']['speedup'] >= 1"), "True");
  // What was asked for is on top: the report's body is the slowest core's run with the other core running
  // (its total_cycles the batch's latency, its breakdown adding up to it), on its share of the batch.
  EXPECT_EQ(json_eval(f, "r['total_cycles'] == r['multicore']['latency_cycles']"), "True");
  EXPECT_EQ(json_eval(f, "sum(r['breakdown'].values()) == r['total_cycles']"), "True");
  EXPECT_EQ(json_eval(f, "r['macs']"), json_eval(dir + "/one.json", "r['macs']"));  // batch 1 a core
  const std::string latency = json_eval(f, "r['multicore']['latency_cycles']");
  EXPECT_NE(r.out.find("total cycles      " + latency + " "), std::string::npos) << r.out;
}

TEST(MulticoreCli, SplitByLayersCutsTheProgramIntoOneStagePerCore) {
  const std::string dir = temp_dir("multicore_layers");
  const CommandResult r =
      npusim({"run", "demo", "-q", "--set", "cores=2", "--split", "layers", "--report", dir + "/r.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string f = dir + "/r.json";
  EXPECT_EQ(json_eval(f, "len(r['multicore']['per_core'])"), "2");
  // The stages partition the program's layers (the report's layers less the nodes fused into them), in
  // order, and each is shorter than the whole model.
  EXPECT_EQ(json_eval(f,
                      "sum(c['layers'] for c in r['multicore']['per_core']) == "
                      "sum(l['placement'] != 'fused' for l in r['layers'])"),
            "True");
  EXPECT_EQ(json_eval(f, "r['multicore']['per_core'][0]['first_layer'] == r['layers'][0]['name']"), "True");
  EXPECT_EQ(json_eval(f, "r['multicore']['per_core'][1]['last_layer'] == r['layers'][-1]['name']"), "True");
  EXPECT_EQ(
      json_eval(f, "all(0 < c['alone_cycles'] < r['total_cycles'] for c in r['multicore']['per_core'])"),
      "True");
  EXPECT_EQ(json_eval(f, "all(c['cycles'] >= c['alone_cycles'] for c in r['multicore']['per_core'])"),
            "True");
  // The latency is the sum of the stages, the throughput one frame per slowest stage.
  EXPECT_EQ(
      json_eval(f,
                "r['multicore']['latency_cycles'] == sum(c['cycles'] for c in r['multicore']['per_core'])"),
      "True");
  EXPECT_EQ(
      json_eval(
          f,
          "abs(r['multicore']['throughput_per_s'] - r['frequency_mhz'] * 1e6 / max(c['cycles'] for c in "
          "r['multicore']['per_core'])) < 1"),
      "True");
}

TEST(MulticoreCli, TheDatacenterChipPresetHasTwoCores) {
  // --split refuses a single-core configuration, so the run itself shows the preset's two cores.
  const std::string dir = temp_dir("multicore_preset");
  const CommandResult run = npusim({"run", kCnn, "-q", "-c", "datacenter-2core", "--batch", "2", "--split",
                                    "batch", "--report", dir + "/r.json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(json_eval(dir + "/r.json", "r['multicore']['cores']"), "2");
  EXPECT_EQ(json_eval(dir + "/r.json", "r['multicore']['per_core'][1]['batch']"), "1");
}

TEST(MulticoreCli, SplitMistakesExit2WithOneSentence) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"run", kCnn, "--split", "batch", "--batch", "2"},
       "--split batch needs a multi-core NPU; the configuration has cores = 1 (give --set cores=N, or -c "
       "datacenter-2core)"},
      {{"run", kCnn, "--set", "cores=2", "--split", "batch"},
       "--split batch needs --batch N (N >= cores = 2)"},
      {{"run", kCnn, "--set", "cores=4", "--split", "batch", "--batch", "2"},
       "--split batch: batch 2 is smaller than cores 4"},
      {{"run", "demo", "--set", "cores=2", "--split", "rows"},
       "--split 'rows': expected none, batch or layers"},
      {{"run", "demo", "--set", "cores=2", "--split", "layers", "--functional"},
       "--split does not combine with --functional: the cores' runs are timing only"},
      {{"run", "demo", "--set", "cores=2", "--split", "layers", "--pipeline",
        std::string(NPUSIM_SOURCE_DIR) + "/configs/pipelines/classifier.yaml"},
       "--split layers does not combine with --pipeline: the pipeline's model stage is one inference"},
      {{"run", "demo", "--set", "cores=0"}, "cores"},
  };
  for (const Case& c : cases) {
    const CommandResult r = npusim(c.args);
    EXPECT_EQ(r.exit_code, 2) << c.message << "\n" << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << c.message << "\n" << r.err;
  }
}

TEST(MulticoreCli, SplitWritesATraceWithATrackPerUnitOfEachCore) {
  const std::string dir = temp_dir("multicore_trace");
  const CommandResult r =
      npusim({"run", "demo", "-q", "--set", "cores=2", "--split", "layers", "--report", dir + "/r.json",
              "--trace", dir + "/t.json", "--trace-csv", dir + "/t.csv"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string t = dir + "/t.json";
  // Every unit of each core has its track, named after its core.
  const std::string tracks =
      "[e['args']['name'] for e in r['traceEvents'] if e['ph'] == 'M' and e['name'] == 'thread_name']";
  EXPECT_EQ(json_eval(t, "'core0 matrix' in " + tracks + " and 'core1 matrix' in " + tracks), "True");
  EXPECT_EQ(json_eval(t, "sum(n.startswith('core0 ') for n in " + tracks +
                             ") == sum(n.startswith('core1 ') for n in " + tracks + ")"),
            "True");
  // Each core's slices end with its run: the last one at the core's cycles in the report's multicore section.
  const std::string cycles = json_eval(dir + "/r.json", "[c['cycles'] for c in r['multicore']['per_core']]");
  const std::string f = json_eval(dir + "/r.json", "r['frequency_mhz']");
  for (int core = 0; core < 2; ++core) {
    const std::string tids =
        "{e['tid'] for e in r['traceEvents'] if e['ph'] == 'M' and e['name'] == 'thread_name' "
        "and e['args']['name'].startswith('core" +
        std::to_string(core) + " ')}";
    const std::string end =
        "round(max(e['ts'] + e['dur'] for e in r['traceEvents'] if e['ph'] == 'X' and e['tid'] in " + tids +
        ") * " + f + ")";
    EXPECT_EQ(json_eval(t, end + " == " + cycles + "[" + std::to_string(core) + "]"), "True") << core;
  }
  EXPECT_NE(read_file(dir + "/t.csv").find("\ncore1 matrix,"), std::string::npos);
}

TEST(MulticoreCli, ABatchSplitsPipelineTakesTheCoresLatencyAsItsModelStage) {
  const std::string dir = temp_dir("multicore_pipeline");
  write_file(dir + "/p.yaml",
             "input: {transfer: copy}\noutput: {transfer: copy}\npost:\n  - {op: fixed, time_us: 40}\n"
             "stream: {frames: 20}\n");
  const std::vector<std::string> run = {"run",     kCnn, "-q",         "--set",         "cores=2",
                                        "--batch", "2",  "--pipeline", dir + "/p.yaml", "--report"};
  std::vector<std::string> one = run, two = run;
  one.push_back(dir + "/one.json");
  two.push_back(dir + "/two.json");
  two.insert(two.end(), {"--split", "batch"});
  ASSERT_EQ(npusim(one).exit_code, 0);
  const CommandResult r = npusim(two);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string model_stage = "[s['cycles'] for s in r['e2e']['stages'] if s['kind'] == 'model']";
  // On one core the model stage is the run's cycles; split, it is the slowest core's, and the host stages
  // stay as they were.
  EXPECT_EQ(json_eval(dir + "/one.json", model_stage + " == [r['total_cycles']]"), "True");
  EXPECT_EQ(json_eval(dir + "/two.json", model_stage + " == [r['multicore']['latency_cycles']]"), "True");
  const std::string host = "[s['cycles'] for s in r['e2e']['stages'] if s['kind'] != 'model']";
  EXPECT_EQ(json_eval(dir + "/one.json", host), json_eval(dir + "/two.json", host));
  EXPECT_EQ(json_eval(dir + "/two.json",
                      "sum(s['cycles'] for s in r['e2e']['stages']) == r['e2e']['latency_cycles']"),
            "True");
}

TEST(MulticoreCli, ModelsPinnedToTwoCoresShareTheDramButDoNotWaitForEachOther) {
  const std::string dir = temp_dir("multicore_serve");
  // Both arrive together every 2 ms: on one core one waits for the other; on two cores neither waits, but
  // their transfers share the DRAM, so each is slower than alone; `apart` has b arrive 1 ms after a, when
  // a is long done: each then takes exactly its time alone.
  const std::string models = R"(models:
  - {name: a, model: demo, priority: 1, CORE_A arrival: {type: periodic, period_ms: 2}}
  - {name: b, model: demo, priority: 1, CORE_B arrival: {type: periodic, period_ms: 2, phase_ms: PHASE}}
)";
  auto scenario = [&](const std::string& a, const std::string& b, const std::string& phase) {
    std::string s = models;
    s.replace(s.find("CORE_A"), 6, a);
    s.replace(s.find("CORE_B"), 6, b);
    s.replace(s.find("PHASE"), 5, phase);
    return "config: edge\nset: [cores=2]\nduration_ms: 10\n" + s;
  };
  write_file(dir + "/one.yaml", scenario("", "", "0"));
  write_file(dir + "/two.yaml", scenario("core: 0,", "core: 1,", "0"));
  write_file(dir + "/apart.yaml", scenario("core: 0,", "core: 1,", "1"));
  ASSERT_EQ(npusim({"serve", dir + "/one.yaml", "-q", "--report", dir + "/one.json"}).exit_code, 0);
  ASSERT_EQ(npusim({"serve", dir + "/apart.yaml", "-q", "--report", dir + "/apart.json"}).exit_code, 0);
  const CommandResult r = npusim({"serve", dir + "/two.yaml", "--report", dir + "/two.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("(over 2 cores)"), std::string::npos) << r.out;
  EXPECT_EQ(json_eval(dir + "/two.json", "[m['core'] for m in r['models']]"), "[0, 1]");
  EXPECT_EQ(json_eval(dir + "/two.json", "all(m['latency_p50_ms'] > m['alone_ms'] for m in r['models'])"),
            "True");
  EXPECT_EQ(json_eval(dir + "/apart.json", "all(m['latency_max_ms'] == m['alone_ms'] for m in r['models'])"),
            "True");
  // Two cores beat one: the later of the two finishes sooner than back to back.
  EXPECT_EQ(json_eval(dir + "/one.json", "r['models'][1]['latency_max_ms'] > r['models'][1]['alone_ms']"),
            "True");
  EXPECT_LT(std::stod(json_eval(dir + "/two.json", "max(m['latency_max_ms'] for m in r['models'])")),
            std::stod(json_eval(dir + "/one.json", "r['models'][1]['latency_max_ms']")));
}

TEST(MulticoreCli, AModelPinnedPastTheLastCoreExits2NamingFileLineColumnAndKey) {
  const std::string dir = temp_dir("multicore_serve_bad");
  write_file(dir + "/bad.yaml", R"(set: [cores=2]
models:
  - {name: a, model: demo, core: 2, arrival: {type: periodic, period_ms: 2}}
  - {name: b, model: demo, core: -1, arrival: {type: periodic, period_ms: 2}}
)");
  const CommandResult r = npusim({"serve", dir + "/bad.yaml"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find(dir + "/bad.yaml:4:34: models[1].core: -1 is out of range"), std::string::npos)
      << r.err;
  write_file(dir + "/past.yaml", R"(set: [cores=2]
models:
  - {name: a, model: demo, core: 2, arrival: {type: periodic, period_ms: 2}}
)");
  const CommandResult past = npusim({"serve", dir + "/past.yaml"});
  EXPECT_EQ(past.exit_code, 2);
  EXPECT_NE(
      past.err.find(dir + "/past.yaml:3:34: models[0].core: 2 but the configuration has 2 cores (0..1)"),
      std::string::npos)
      << past.err;
}

}  // namespace
}  // namespace npusim::test
