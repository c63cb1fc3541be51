// `npusim serve SCENARIO.yaml` (issue 13, docs/scenarios.md) as a user runs it: a model alone takes
// exactly `npusim run`'s cycles, the trace has a lane per model, bad scenario files exit 2 naming
// file:line:column and the key.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "tests/e2e/run_command.h"

namespace npusim::test {
namespace {

TEST(ServeCli, OneModelAloneTakesExactlyNpusimRunsCycles) {
  const std::string dir = temp_dir("serve_alone");
  const CommandResult run = npusim({"run", "demo", "-q", "--report", dir + "/run.json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  write_file(
      dir + "/s.yaml",
      "duration_ms: 10\nmodels:\n  - {name: only, model: demo, arrival: {type: periodic, period_ms: 100}}\n");
  const CommandResult r = npusim({"serve", dir + "/s.yaml", "--report", dir + "/s.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("only"), std::string::npos) << r.out;
  // The edge preset runs at 1 GHz: a cycle is 1e-6 ms.
  const long long cycles = std::stoll(json_eval(dir + "/run.json", "r['total_cycles']"));
  EXPECT_EQ(std::llround(std::stod(json_eval(dir + "/s.json", "r['models'][0]['latency_max_ms']")) * 1e6),
            cycles);
  EXPECT_EQ(json_eval(dir + "/s.json", "r['models'][0]['requests']"), "1");
}

TEST(ServeCli, PartitionedSramGivesEachModelItsShareOfEveryScratchpad) {
  const std::string dir = temp_dir("serve_sram");
  // Three models: each has a third of the edge preset's 256/128/128 KiB.
  const CommandResult run = npusim({"run", "gemm:M=256,N=256,K=512", "-q", "--set", "sram.input.size_kib=85",
                                    "--set", "sram.weight.size_kib=42", "--set",
                                    "sram.accumulator.size_kib=42", "--report", dir + "/run.json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const CommandResult whole =
      npusim({"run", "gemm:M=256,N=256,K=512", "-q", "--report", dir + "/whole.json"});
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  write_file(dir + "/s.yaml", R"(sram: partitioned
duration_ms: 10
models:
  - {name: big, model: "gemm:M=256,N=256,K=512", arrival: {type: periodic, period_ms: 100}}
  - {name: b, model: demo, arrival: {type: periodic, period_ms: 100, phase_ms: 50}}
  - {name: c, model: demo, arrival: {type: periodic, period_ms: 100, phase_ms: 50}}
)");
  const CommandResult r = npusim({"serve", dir + "/s.yaml", "--report", dir + "/s.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("SRAM partitioned"), std::string::npos) << r.out;
  const long long cycles = std::stoll(json_eval(dir + "/run.json", "r['total_cycles']"));
  EXPECT_EQ(std::llround(std::stod(json_eval(dir + "/s.json", "r['models'][0]['alone_ms']")) * 1e6), cycles);
  EXPECT_EQ(json_eval(dir + "/s.json", "r['sram']"), "partitioned");
  // The slice is smaller than the whole: the GEMM runs in more, smaller tiles.
  EXPECT_NE(json_eval(dir + "/whole.json", "r['total_cycles']"),
            json_eval(dir + "/run.json", "r['total_cycles']"));
}

TEST(ServeCli, AModelWithAPipelineTakesItsEndToEndLatencyAlone) {
  const std::string dir = temp_dir("serve_pipeline");
  write_file(
      dir + "/p.yaml",
      "frame: {width: 64, height: 48}\npre:\n  - {op: resize, width: 32, height: 32}\n  - {op: normalize, "
      "on: npu}\npost:\n  - {op: nms, boxes: 300}\n");
  const CommandResult run =
      npusim({"run", "demo", "-q", "--pipeline", dir + "/p.yaml", "--report", dir + "/run.json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  write_file(dir + "/s.yaml",
             "duration_ms: 10\nmodels:\n  - {name: only, model: demo, pipeline: p.yaml, arrival: "
             "{type: periodic, period_ms: 100}}\n");
  const CommandResult r = npusim({"serve", dir + "/s.yaml", "--report", dir + "/s.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const long long e2e = std::stoll(json_eval(dir + "/run.json", "r['e2e']['latency_cycles']"));
  EXPECT_EQ(std::llround(std::stod(json_eval(dir + "/s.json", "r['models'][0]['latency_max_ms']")) * 1e6),
            e2e);
}

TEST(ServeCli, AModelsOwnSetOverridesTheScenariosConfigForItAlone) {
  const std::string dir = temp_dir("serve_model_set");
  const CommandResult run = npusim({"run", "demo", "-q", "--set", "systolic_array.rows=16", "--set",
                                    "systolic_array.cols=8", "--report", dir + "/run.json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const CommandResult plain = npusim({"run", "demo", "-q", "--report", dir + "/plain.json"});
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  write_file(dir + "/s.yaml", R"(set: [systolic_array.rows=16]
duration_ms: 10
models:
  - {name: narrow, model: demo, set: [systolic_array.cols=8], arrival: {type: periodic, period_ms: 100}}
  - {name: plain, model: demo, set: [systolic_array.rows=32], arrival: {type: periodic, period_ms: 100, phase_ms: 50}}
)");
  const CommandResult r = npusim({"serve", dir + "/s.yaml", "--report", dir + "/s.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // The model's set comes after the scenario's: narrow runs on 16 x 8, plain on the preset's 32 x 32.
  for (const auto& [model, report] : {std::pair{0, "run.json"}, std::pair{1, "plain.json"}}) {
    const long long cycles = std::stoll(json_eval(dir + "/" + report, "r['total_cycles']"));
    EXPECT_EQ(std::llround(std::stod(json_eval(dir + "/s.json",
                                               "r['models'][" + std::to_string(model) + "]['alone_ms']")) *
                           1e6),
              cycles)
        << report;
  }
  write_file(dir + "/bad.yaml", R"(models:
  - {name: a, model: demo, set: [dram.channels=4, systolic_array.rowz=8], arrival: {type: periodic, period_ms: 1}}
)");
  const CommandResult shared = npusim({"serve", dir + "/bad.yaml"});
  EXPECT_EQ(shared.exit_code, 2);
  EXPECT_NE(shared.err.find(dir + "/bad.yaml:2:34: models[0].set: 'dram.channels' is shared by every model"),
            std::string::npos)
      << shared.err;
  write_file(dir + "/bad2.yaml", R"(models:
  - {name: a, model: demo, set: [systolic_array.rowz=8], arrival: {type: periodic, period_ms: 1}}
)");
  const CommandResult unknown = npusim({"serve", dir + "/bad2.yaml"});
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.err.find(dir + "/bad2.yaml:2:33: models[0].set: "), std::string::npos) << unknown.err;
  EXPECT_NE(unknown.err.find("systolic_array.rowz"), std::string::npos) << unknown.err;
}

TEST(ServeCli, TwoModelsShareTheNpuWithALanePerModel) {
  const std::string dir = temp_dir("serve_two");
  write_file(dir + "/s.yaml", R"(policy: priority
duration_ms: 50
models:
  - {name: det, model: demo, priority: 2, deadline_ms: 0.05, arrival: {type: periodic, period_ms: 1}}
  - {name: cls, model: "gemm:M=128,N=128,K=128", priority: 1, arrival: {type: poisson, rate_hz: 1000}}
)");
  const CommandResult r =
      npusim({"serve", dir + "/s.yaml", "--report", dir + "/s.json", "--trace", dir + "/t.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json_eval(dir + "/s.json", "[m['name'] for m in r['models']]"), "['det', 'cls']");
  EXPECT_EQ(json_eval(dir + "/s.json", "r['models'][0]['requests']"), "50");
  EXPECT_EQ(json_eval(dir + "/s.json", "all(m['latency_p50_ms'] >= m['alone_ms'] > 0 for m in r['models'])"),
            "True");
  EXPECT_EQ(json_eval(dir + "/s.json",
                      "any(u['name'] == 'matrix' and 0 < u['utilization'] < 1 for u in r['units'])"),
            "True");
  EXPECT_EQ(json_eval(dir + "/t.json",
                      "sorted(e['args']['name'] for e in r['traceEvents'] if e.get('name') == "
                      "'thread_name')"),
            "['cls', 'det']");
  EXPECT_EQ(json_eval(dir + "/t.json", "len([e for e in r['traceEvents'] if e.get('ph') == 'X']) >= 50"),
            "True");
}

// A model with a dynamic dimension (dyn.onnx: x is 1 x seq x 16) serves once its entry binds it, with
// input_shape: or dynamic: (as run's --input-shape and --dynamic); unbound, the error says how in the
// scenario file's words, naming the file and the model's entry.
TEST(ServeCli, AModelWithADynamicDimensionServesWithItsEntrysInputShapeOrDynamic) {
  const std::string dir = temp_dir("serve_dynamic");
  const CommandResult models = run_command(
      {"/usr/bin/python3", std::string(NPUSIM_SOURCE_DIR) + "/tests/e2e/make_report_models.py", dir});
  ASSERT_EQ(models.exit_code, 0) << models.err;
  const CommandResult run =
      npusim({"run", dir + "/dyn.onnx", "-q", "--input-shape", "x=1x32x16", "--report", dir + "/run.json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const long long cycles = std::stoll(json_eval(dir + "/run.json", "r['total_cycles']"));
  for (const std::string binding : {"input_shape: {x: 1x32x16}", "dynamic: {seq: 32}"}) {
    write_file(dir + "/s.yaml", "duration_ms: 10\nmodels:\n  - {name: rec, model: dyn.onnx, " + binding +
                                    ", arrival: {type: periodic, period_ms: 100}}\n");
    const CommandResult r = npusim({"serve", dir + "/s.yaml", "--report", dir + "/s.json"});
    ASSERT_EQ(r.exit_code, 0) << binding << ": " << r.err;
    EXPECT_EQ(std::llround(std::stod(json_eval(dir + "/s.json", "r['models'][0]['latency_max_ms']")) * 1e6),
              cycles)
        << binding;
  }
  write_file(dir + "/s.yaml",
             "duration_ms: 10\nmodels:\n  - {name: rec, model: dyn.onnx, arrival: {type: periodic, "
             "period_ms: 100}}\n");
  CommandResult r = npusim({"serve", dir + "/s.yaml"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err.rfind("npusim: error: " + dir + "/s.yaml:3:5: models[0] (rec): ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find("(its shape is 1x?x16); bind it with input_shape: {x: 1xNx16}, a size for each N, or "
                       "dynamic: {seq: V}"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("--"), std::string::npos) << r.err;
  // A shape that is not one, and a batch the shape contradicts, name the key.
  write_file(
      dir + "/s.yaml",
      "duration_ms: 10\nmodels:\n  - {name: rec, model: dyn.onnx, batch: 2, input_shape: {x: 1x32x16},\n"
      "     arrival: {type: periodic, period_ms: 100}}\n  - {name: b, model: dyn.onnx, input_shape: {x: "
      "1xax16},"
      " arrival: {type: periodic, period_ms: 100}}\n");
  r = npusim({"serve", dir + "/s.yaml"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(
      r.err.find("s.yaml:3:61: models[0].input_shape.x: first dimension 1 but batch: 2; give the batch once"),
      std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("models[1].input_shape.x: '1xax16' is not a shape D0xD1x... of positive integers"),
            std::string::npos)
      << r.err;
}

// Issue 40, item 4: a camera frame through a detector, then each of its crops through a recogniser. One
// frame with 3 crops, alone on the NPU: the frame takes the detector's cycles plus three recognitions, as
// `npusim run` simulates each model.
TEST(ServeCli, AFrameWithThreeCropsTakesTheDetectorAndThreeRecognitions) {
  const std::string dir = temp_dir("serve_after");
  const std::string rec = "conv:H=32,W=128,C=16,K=32,R=3,S=3,stride=1,pad=1";
  ASSERT_EQ(npusim({"run", "demo", "-q", "--report", dir + "/det.json"}).exit_code, 0);
  ASSERT_EQ(npusim({"run", rec, "-q", "--report", dir + "/rec.json"}).exit_code, 0);
  write_file(dir + "/s.yaml",
             "duration_ms: 10\nmodels:\n"
             "  - {name: det, model: demo, arrival: {type: periodic, period_ms: 100}}\n"
             "  - {name: rec, model: \"" +
                 rec + "\", after: det, fanout: [3]}\n");
  const CommandResult r = npusim({"serve", dir + "/s.yaml", "--report", dir + "/s.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const long long det = std::stoll(json_eval(dir + "/det.json", "r['total_cycles']"));
  const long long one = std::stoll(json_eval(dir + "/rec.json", "r['total_cycles']"));
  EXPECT_EQ(json_eval(dir + "/s.json", "r['models'][1]['requests']"), "3");
  EXPECT_EQ(json_eval(dir + "/s.json", "r['frames'][0]['stages'], r['frames'][0]['frames']"), "det -> rec 1");
  // The edge preset runs at 1 GHz: a cycle is 1e-6 ms.
  EXPECT_EQ(std::llround(std::stod(json_eval(dir + "/s.json", "r['frames'][0]['latency_max_ms']")) * 1e6),
            det + 3 * one);
  EXPECT_NE(r.out.find("frames of det (det -> rec): 1 frame, 3 dependent requests; end to end p50 "),
            std::string::npos)
      << r.out;
  // A stage after a model the scenario does not have: exit 2 naming the key.
  write_file(dir + "/bad.yaml",
             "models:\n"
             "  - {name: det, model: demo, arrival: {type: periodic, period_ms: 100}}\n"
             "  - {name: rec, model: demo, after: detector}\n");
  const CommandResult bad = npusim({"serve", dir + "/bad.yaml"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(
      bad.err.find("bad.yaml:3:37: models[1].after: 'detector' is not a model of the scenario (det, rec)"),
      std::string::npos)
      << bad.err;
}

TEST(ServeCli, BadScenarioFilesExit2NamingFileLineColumnAndKey) {
  const std::string dir = temp_dir("serve_bad");
  write_file(dir + "/bad.yaml", R"(duraton_ms: 5
models:
  - name: a
    model: missing.onnx
    priority: high
    arrival: {type: poisson, rate_hz: -1}
)");
  const CommandResult r = npusim({"serve", dir + "/bad.yaml"});
  EXPECT_EQ(r.exit_code, 2);
  const std::string f = dir + "/bad.yaml";
  for (const std::string& m : {f + ":1:1: duraton_ms: unknown key (did you mean 'duration_ms'?)",
                               f + ":4:12: models[0].model: 'missing.onnx' does not exist",
                               f + ":5:15: models[0].priority: 'high' is not an integer",
                               f + ":6:39: models[0].arrival.rate_hz: -1 is out of range"}) {
    EXPECT_NE(r.err.find(m), std::string::npos) << m << "\n" << r.err;
  }
  const CommandResult none = npusim({"serve"});
  EXPECT_EQ(none.exit_code, 2);
  const CommandResult missing = npusim({"serve", dir + "/none.yaml"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("--scenario " + dir + "/none.yaml: no such file"), std::string::npos)
      << missing.err;
}

}  // namespace
}  // namespace npusim::test
