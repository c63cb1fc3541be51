// Dynamic shapes on a real model (label models; needs tests/models' bert_small_dyn, the 2-layer BERT-shaped
// encoder with a symbolic sequence length): profiles, the 127/128/129 cliff under the three shape
// policies, and the errors a deployment engineer can make.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/e2e/run_command.h"

namespace npusim::test {
namespace {

const std::string kModel = std::string(NPUSIM_MODELS_DIR) + "/bert_small_dyn.onnx";

TEST(DynamicModels, TheCliffAt129UnderPadRecompileAndDynamic) {
  const std::string dir = temp_dir("dynamic-cliff");
  // Far apart: no request waits for another, each latency is its own service (plus its compile).
  write_file(dir + "/req.csv", "seq,arrival_ms\n127,0\n128,1000\n129,2000\n");
  CommandResult r =
      run_command({NPUSIM_BIN, "run", kModel, "-q", "--dynamic", "seq=64,128,256", "--requests",
                   dir + "/req.csv", "--compile-ms-per-layer", "2", "--report", dir + "/r.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string f = dir + "/r.json";
  // A profile is the model compiled with seq bound, as --input-shape binds it, its layers apart (the dynamic
  // policy adds the layers' own cycles: docs/dynamic.md).
  r = run_command({NPUSIM_BIN, "run", kModel, "-q", "--input-shape", "input=1x128x768", "--no-interleave",
                   "--report", dir + "/s.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(
      json_eval(f, "[p['total_cycles'] for p in r['profiles']['profiles'] if p['name'] == 'seq=128'][0]"),
      json_eval(dir + "/s.json", "r['total_cycles']"));
  // The rest of the report is the largest profile's run.
  EXPECT_EQ(json_eval(f, "r['profiles']['profiles'][-1]['total_cycles'] == r['total_cycles']"), "True");
  EXPECT_EQ(json_eval(f, "[p['name'] for p in r['profiles']['profiles']]"),
            "['seq=64', 'seq=128', 'seq=256']");
  EXPECT_EQ(
      json_eval(
          f, "all(p['program_bytes'] > 0 and p['workspace_bytes'] > 0 for p in r['profiles']['profiles'])"),
      "True");
  const std::string lat = "{p['name']: p['latency_ms'] for p in r['profiles']['profiles']}";
  const std::string pol = "{x['policy']: x for x in r['requests']['policies']}";
  // pad: 127 and 128 run on seq=128; 129 on seq=256, about twice as long: the cliff.
  EXPECT_EQ(json_eval(f, "[q['ran_as'] for q in (" + pol + ")['pad']['per_request']]"),
            "['seq=128', 'seq=128', 'seq=256']");
  EXPECT_EQ(json_eval(f, "[abs(q['latency_ms'] - (" + lat + ")[q['ran_as']]) < 1e-6 for q in (" + pol +
                             ")['pad']['per_request']]"),
            "[True, True, True]");
  EXPECT_EQ(json_eval(f, "(" + pol + ")['pad']['per_request'][2]['latency_ms'] > 1.8 * (" + pol +
                             ")['pad']['per_request'][1]['latency_ms']"),
            "True");
  EXPECT_EQ(json_eval(f, "(" + pol + ")['pad']['padding_macs'] > 0"), "True");
  // recompile: 128 is a profile; 127 and 129 each pay one compile (2 ms per layer) before they run.
  EXPECT_EQ(json_eval(f, "[q['compile_ms'] > 0 for q in (" + pol + ")['recompile']['per_request']]"),
            "[True, False, True]");
  EXPECT_EQ(json_eval(f, "(" + pol + ")['recompile']['compile_events']"), "2");
  EXPECT_EQ(json_eval(f, "all(q['latency_ms'] > q['compile_ms'] for q in (" + pol +
                             ")['recompile']['per_request'])"),
            "True");
  // dynamic: no cliff, 127..129 cost within 5 % of each other, and no padding.
  EXPECT_EQ(json_eval(f, "(lambda v: max(v) < 1.05 * min(v))([q['latency_ms'] for q in (" + pol +
                             ")['dynamic']['per_request']])"),
            "True");
  EXPECT_EQ(json_eval(f, "(" + pol + ")['dynamic']['padding_macs']"), "0");
  EXPECT_EQ(json_eval(f, "r['requests']['shapes_simulated']"), "5");  // 3 profiles, 127, 129
}

// --no-interleave keeps each layer's code in one run: the encoder's default program merges some layer's code
// into the one before it (a layer tag comes back after another), the switched-off one never does.
TEST(DynamicModels, NoInterleaveKeepsEachLayersCodeInOneRun) {
  const std::string dir = temp_dir("no-interleave");
  for (const std::string& name : {std::string("merged"), std::string("apart")}) {
    const std::string out = dir + "/" + name;
    std::vector<std::string> args = {NPUSIM_BIN, "compile", kModel, "-q", "--input-shape", "input=1x128x768"};
    args.insert(args.end(), {"-o", out + ".npu", "--asm", out + ".s"});
    if (name == "apart") args.push_back("--no-interleave");
    const CommandResult r = run_command(args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  // Runs of one layer tag in program order, against the distinct tags.
  auto runs = [&](const std::string& name) {
    const CommandResult r =
        run_command({"/usr/bin/python3", "-c",
                     "import re, sys\n"
                     "t = [m.group(1) for l in open(sys.argv[1]) if not l.startswith('.')\n"
                     "     for m in [re.search(r' layer=(\\S+)', l)] if m]\n"
                     "print(sum(i == 0 or t[i - 1] != x for i, x in enumerate(t)) - len(set(t)))\n",
                     dir + "/" + name + ".s"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return std::stoll(r.out);
  };
  EXPECT_GT(runs("merged"), 0);
  EXPECT_EQ(runs("apart"), 0);
}

TEST(DynamicModels, ARequestOutsideEveryProfileWithOnOverflowErrorExits1NamingRowAndProfiles) {
  const std::string dir = temp_dir("dynamic-overflow");
  write_file(dir + "/req.csv", "seq\n32\n300\n");
  const CommandResult r =
      run_command({NPUSIM_BIN, "run", kModel, "-q", "--dynamic", "seq=32,64", "--requests", dir + "/req.csv",
                   "--shape-policy", "pad", "--on-overflow", "error"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("req.csv:3: request seq=300 fits no profile (profiles: seq=32, seq=64)"),
            std::string::npos)
      << r.err;
}

TEST(DynamicModels, BadUsageExits2WithOneClearSentence) {
  const std::string dir = temp_dir("dynamic-usage");
  write_file(dir + "/bad.csv", "seq\n64\n6four\n");
  CommandResult r =
      run_command({NPUSIM_BIN, "run", kModel, "-q", "--dynamic", "seq=64", "--requests", dir + "/bad.csv"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("bad.csv:3: seq '6four' is not a positive integer"), std::string::npos) << r.err;
  // Unbound: today's error, now also naming --dynamic.
  r = run_command({NPUSIM_BIN, "run", kModel, "-q"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("dimension 1 ('seq') is dynamic and unbound"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--dynamic seq=V1,V2,..."), std::string::npos) << r.err;
  r = run_command({NPUSIM_BIN, "run", kModel, "-q", "--dynamic", "len=64"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--dynamic names 'len', which is not a dynamic dimension"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("(its dynamic dimensions: seq)"), std::string::npos) << r.err;
  r = run_command({NPUSIM_BIN, "run", kModel, "-q", "--dynamic", "seq=64", "--requests", dir + "/bad.csv",
                   "--shape-policy", "fastest"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--shape-policy 'fastest' is not one of pad, recompile, dynamic, all"),
            std::string::npos);
  r = run_command({NPUSIM_BIN, "run", kModel, "-q", "--dynamic", "seq=64", "--input-shape", "input=1x8x768"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--input-shape input=... and --dynamic seq both bind input 'input'"),
            std::string::npos)
      << r.err;
  r = run_command({NPUSIM_BIN, "run", kModel, "-q", "--requests", dir + "/bad.csv"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--requests needs profiles"), std::string::npos) << r.err;
  // A policy option that would change nothing is rejected, not ignored.
  write_file(dir + "/ok.csv", "seq\n64\n");
  r = run_command({NPUSIM_BIN, "run", kModel, "-q", "--dynamic", "seq=64", "--program-cache", "2"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--program-cache applies to a request stream"), std::string::npos) << r.err;
  r = run_command({NPUSIM_BIN, "run", kModel, "-q", "--dynamic", "seq=64", "--requests", dir + "/ok.csv",
                   "--shape-policy", "pad", "--host-us-per-layer", "50"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--host-us-per-layer applies to --shape-policy dynamic (or all), not pad"),
            std::string::npos)
      << r.err;
  r = run_command({NPUSIM_BIN, "run", "gemm:M=8,N=8,K=8", "-q", "--dynamic", "seq=64"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--dynamic does not apply to built-in model"), std::string::npos) << r.err;
}

TEST(DynamicModels, CompileWritesOneProgramPerProfile) {
  const std::string dir = temp_dir("dynamic-compile");
  const CommandResult r =
      run_command({NPUSIM_BIN, "compile", kModel, "--dynamic", "seq=16,32", "-o", dir + "/bert.npu"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("profile seq=16: wrote " + dir + "/bert.seq16.npu"), std::string::npos) << r.out;
  // Each runs as compiled.
  for (const char* p : {"/bert.seq16.npu", "/bert.seq32.npu"}) {
    const CommandResult e = run_command({NPUSIM_BIN, "exec", dir + p, "-q"});
    EXPECT_EQ(e.exit_code, 0) << e.err;
  }
}

}  // namespace
}  // namespace npusim::test
