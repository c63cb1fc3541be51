// --generate on the built-in llm: decoder: a prefill and one decode step per further token, decode steps
// sharing one program per KV bucket; expected figures from the spec (KV bytes) and from independent runs
// of the same shapes (time to first token).
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <string>
#include <utility>
#include <vector>

#include "tests/e2e/run_command.h"

namespace npusim::test {
namespace {

// The figures below are for fp32 (4-byte KV values): the runs say --precision fp32 (edge defaults to fp16).
const std::string kLlm = "llm:layers=2,hidden=128,heads=4,kv_heads=2,ffn=256,vocab=500";

TEST(Generation, PrefillThenDecodeStepsOnePerTokenOneProgramPerKvBucket) {
  const std::string dir = temp_dir("generation");
  CommandResult r = run_command({NPUSIM_BIN, "run", kLlm, "-q", "--precision", "fp32", "--generate", "100:40",
                                 "--kv-bucket", "64", "--report", dir + "/g.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string f = dir + "/g.json";
  // Cached positions before decode steps 2..40 run from 100 to 138: buckets 128 and 192.
  EXPECT_EQ(json_eval(f, "[(p['kind'], p['past']) for p in r['generation']['programs']]"),
            "[('prefill', 0), ('decode', 128), ('decode', 192)]");
  EXPECT_EQ(json_eval(f, "len(r['generation']['steps'])"), "39");
  EXPECT_EQ(json_eval(f, "[s['program_past'] for s in r['generation']['steps']][0::19]"), "[128, 128, 192]");
  // Each step takes its program's simulated latency; the longer context is slower.
  EXPECT_EQ(json_eval(f,
                      "(lambda g: all(s['latency_ms'] == {p['past']: p['latency_ms'] for p in g['programs']}"
                      "[s['program_past']] for s in g['steps']))(r['generation'])"),
            "True");
  EXPECT_EQ(json_eval(f, "r['generation']['decode_ms']['last'] > r['generation']['decode_ms']['first']"),
            "True");
  // Two programs for 39 steps: the first step on each is simulated, the other 37 reuse its timing.
  EXPECT_EQ(json_eval(f, "(r['generation']['steps_simulated'], r['generation']['steps_reused'])"), "(2, 37)");
  // K and V of 2 layers, 2 KV heads of 32 values, fp32, for 100 + 40 - 1 positions.
  EXPECT_EQ(json_eval(f, "r['generation']['kv_cache_bytes']"), std::to_string(2 * 2 * 2 * 32 * 4 * 139));
  EXPECT_EQ(json_eval(f, "0 < r['generation']['weight_streaming_share'] <= 1"), "True");
  // Time to first token: the prefill, as a plain run of the same shape simulates it; the report shows it.
  r = run_command(
      {NPUSIM_BIN, "run", kLlm + ",seq=100", "-q", "--precision", "fp32", "--report", dir + "/p.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json_eval(f, "r['generation']['ttft_ms']"), json_eval(dir + "/p.json", "r['latency_ms']"));
  EXPECT_EQ(json_eval(f, "r['total_cycles']"), json_eval(dir + "/p.json", "r['total_cycles']"));
}

// A reused step's timing is what simulating that step on its own gives: for steps early and late on
// each program (past 100, 128, 129 and 138 cached positions), the decode program of their bucket, compiled
// and simulated by itself in a separate run, takes the step's latency to the last digit.
TEST(Generation, ReusedDecodeStepsTakeTheLatencyOfTheirOwnFullSimulation) {
  const std::string dir = temp_dir("generation-reuse");
  CommandResult r = run_command({NPUSIM_BIN, "run", kLlm, "-q", "--precision", "fp32", "--generate", "100:40",
                                 "--kv-bucket", "64", "--report", dir + "/g.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const auto& [step, bucket] :
       std::vector<std::pair<int, int>>{{0, 128}, {28, 128}, {29, 192}, {38, 192}}) {
    const std::string s = "r['generation']['steps'][" + std::to_string(step) + "]";
    ASSERT_EQ(json_eval(dir + "/g.json", s + "['program_past']"), std::to_string(bucket));
    r = run_command({NPUSIM_BIN, "run", kLlm + ",seq=1,past=" + std::to_string(bucket), "-q", "--precision",
                     "fp32", "--report", dir + "/s.json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(json_eval(dir + "/g.json", s + "['latency_ms']"), json_eval(dir + "/s.json", "r['latency_ms']"))
        << "step " << step;
  }
}

TEST(Generation, StaticKvCapacityRunsEveryStepOnOneProgram) {
  const std::string dir = temp_dir("generation-static");
  const CommandResult r = run_command({NPUSIM_BIN, "run", kLlm, "-q", "--precision", "fp32", "--generate",
                                       "16:8", "--kv-cache", "static:64", "--report", dir + "/g.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json_eval(dir + "/g.json", "[(p['kind'], p['past']) for p in r['generation']['programs']]"),
            "[('prefill', 0), ('decode', 63)]");
  EXPECT_EQ(json_eval(dir + "/g.json", "len({s['latency_ms'] for s in r['generation']['steps']})"), "1");
  EXPECT_EQ(json_eval(dir + "/g.json", "r['generation']['kv_cache_capacity_bytes']"),
            std::to_string(2 * 2 * 2 * 32 * 4 * 64));
}

TEST(Generation, EveryOpOfThePrefillAndOfADecodeStepRunsOnTheNpuInFloatAndInt8) {
  // RMSNorm, rotary embeddings, the GQA broadcast, the KV Concat, the mask, Softmax and SwiGLU: no host call
  // on the edge preset (fp32) nor on tpu-v1 (int8 only).
  const std::string dir = temp_dir("generation-npu");
  for (const char* preset : {"edge", "tpu-v1"}) {
    const std::string f = dir + "/" + preset + ".json";
    const CommandResult r =
        run_command({NPUSIM_BIN, "run", kLlm, "-q", "-c", preset, "--generate", "16:2", "--report", f});
    ASSERT_EQ(r.exit_code, 0) << preset << ": " << r.err;
    EXPECT_EQ(json_eval(f, "r['host']['calls']"), "0") << preset;
    EXPECT_EQ(json_eval(f, "len([l for l in r['layers'] if l['placement'] == 'host'])"), "0") << preset;
  }
  // A decode step (one token over 16 cached positions) too, in fp32 and in int8: its attention MatMuls over
  // the cache inputs run on the array (the KV Concat group is quantized symmetrically).
  for (const char* preset : {"edge", "tpu-v1"}) {
    const std::string f = dir + "/decode-" + preset + ".json";
    const CommandResult d =
        run_command({NPUSIM_BIN, "run", kLlm + ",past=16", "-q", "-c", preset, "--report", f});
    ASSERT_EQ(d.exit_code, 0) << d.err;
    EXPECT_EQ(json_eval(f, "r['host']['calls']"), "0") << preset;
  }
  EXPECT_EQ(json_eval(dir + "/tpu-v1.json", "r['precision']['plan']"), "int8");
  EXPECT_EQ(json_eval(dir + "/decode-tpu-v1.json", "r['precision']['plan']"), "int8");
}

TEST(Generation, BadRequestsExit2) {
  CommandResult r =
      run_command({NPUSIM_BIN, "run", kLlm, "-q", "--generate", "60:10", "--kv-cache", "static:64"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--generate 60:10 needs 69 KV positions; --kv-cache static:64 holds 64"),
            std::string::npos)
      << r.err;
  r = run_command({NPUSIM_BIN, "run", "gemm:M=8,N=8,K=8", "-q", "--generate", "4:4"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--generate runs the built-in decoder llm:"), std::string::npos) << r.err;
  r = run_command({NPUSIM_BIN, "run", kLlm, "-q", "--kv-cache", "growing"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--kv-cache applies to --generate"), std::string::npos) << r.err;
  r = run_command({NPUSIM_BIN, "run", kLlm, "-q", "--generate", "4x4"});
  EXPECT_EQ(r.exit_code, 2);
  r = run_command({NPUSIM_BIN, "run", "llm:layers=1,hidden=30,heads=4,kv_heads=2,ffn=8,vocab=8", "-q"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("hidden (30) is not a multiple of heads (4)"), std::string::npos) << r.err;
}

TEST(Generation, ATimingRunGeneratesNoWeightValuesAndTakesTheCyclesAFunctionalRunTakes) {
  // 63 M parameters, 253 MB as fp32: a timing run leaves every MatMul weight's values out (they change no
  // cycle count), so the process stays far below even one copy of them.
  const std::string dir = temp_dir("generation-shape-only");
  const std::string big = "llm:layers=2,hidden=1024,heads=16,kv_heads=4,ffn=4096,vocab=32000";
  CommandResult r =
      npusim({"run", big, "-q", "--precision", "fp32", "--generate", "16:2", "--report", dir + "/big.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  rusage children{};
  ASSERT_EQ(getrusage(RUSAGE_CHILDREN, &children), 0);
  EXPECT_LT(children.ru_maxrss, 150 * 1024) << "peak RSS in KiB";
  EXPECT_EQ(json_eval(dir + "/big.json", "r['compile']['memory']['weight_bytes'] > 250e6"), "True");
  // The same program as with the values: a functional run (which needs them) takes the same cycles, prefill
  // and decode step alike.
  for (const char* shape : {",seq=6", ",past=5"}) {
    for (const std::string& mode : {std::string("timing"), std::string("functional")}) {
      std::vector<std::string> args = {
          "run", kLlm + shape, "-q", "--precision", "fp32", "--report", dir + "/" + mode + ".json"};
      if (mode == "functional") args.push_back("--functional");
      r = npusim(args);
      ASSERT_EQ(r.exit_code, 0) << r.err;
    }
    for (const char* figure :
         {"r['total_cycles']", "r['compile']['memory']['weight_bytes']", "r['dram']['bytes_read']"}) {
      EXPECT_EQ(json_eval(dir + "/timing.json", figure), json_eval(dir + "/functional.json", figure))
          << shape << figure;
    }
  }
}

}  // namespace
}  // namespace npusim::test
