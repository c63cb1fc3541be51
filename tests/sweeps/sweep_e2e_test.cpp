// `npusim sweep` as a user runs it: dry runs, local runs with -j, resuming after a kill, failed points,
// shards and merge, trends that hold by construction, and the plotting scripts on real outputs.
// Most tests run a fixed program (gemm_layer.s); the dry runs and the plots use the built-in default model.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/e2e/run_command.h"
#include "tests/sweeps/results_table.h"

namespace npusim::test {
namespace {

namespace fs = std::filesystem;

const std::string kNpusim = NPUSIM_BIN;
const std::string kScripts = std::string(NPUSIM_SOURCE_DIR) + "/scripts/";
const std::string kPython = "/usr/bin/python3";
// A fixed GEMM layer program (tests/sweeps/programs/gemm_layer.s): its tiling does not depend on the
// configuration, so what a sweep changes is only the machine.
const std::string kGemmLayer = std::string(NPUSIM_SOURCE_DIR) + "/tests/sweeps/programs/gemm_layer.s";
// The model axis entry that runs it.
const std::string kGemmAxis = "  - model: [{name: gemm_layer, path: '" + kGemmLayer + "'}]\n";

size_t count_lines(const std::string& text) {
  return static_cast<size_t>(std::count(text.begin(), text.end(), '\n'));
}

TEST(SweepCli, DryRunListsTheProductInOrder) {
  const std::string d = temp_dir("sweep-dry");
  const std::string f = write_sweep(d,
                                    "axes:\n"
                                    "  - systolic_array.rows: [8, 16]\n"
                                    "  - dram.model: [ideal, simple, hbm2]\n");
  const CommandResult r = sweep({f, "--dry-run"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> points;
  std::istringstream in(r.out);
  for (std::string line; std::getline(in, line);)
    if (line.find("systolic_array.rows=") != std::string::npos &&
        line.find("npusim run") == std::string::npos)
      points.push_back(line.substr(line.find("systolic_array.rows=")));
  EXPECT_EQ(points,
            (std::vector<std::string>{
                "systolic_array.rows=8 dram.model=ideal", "systolic_array.rows=8 dram.model=simple",
                "systolic_array.rows=8 dram.model=hbm2", "systolic_array.rows=16 dram.model=ideal",
                "systolic_array.rows=16 dram.model=simple", "systolic_array.rows=16 dram.model=hbm2"}));
  EXPECT_FALSE(fs::exists(d + "/sweep-sweep")) << "a dry run must not write results";
}

TEST(SweepCli, DryRunListsZippedPoints) {
  const std::string d = temp_dir("sweep-dry-zip");
  const std::string f = write_sweep(d,
                                    "combine: zip\n"
                                    "axes:\n"
                                    "  - systolic_array.rows: [8, 16, 32]\n"
                                    "    systolic_array.cols: [8, 16, 32]\n"
                                    "  - dram.model: [ideal, simple, hbm2]\n");
  const CommandResult r = sweep({f, "--dry-run"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("3 points"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("systolic_array.rows=16 systolic_array.cols=16 dram.model=simple"), std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("systolic_array.rows=16 systolic_array.cols=16 dram.model=ideal"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("--set systolic_array.rows=32 --set systolic_array.cols=32 --set dram.model=hbm2"),
            std::string::npos)
      << r.out;
}

TEST(SweepCli, UnknownKeyExitsTwoNamingKeyFileAndLine) {
  const std::string d = temp_dir("sweep-badkey");
  const std::string f = write_sweep(d,
                                    "axes:\n"
                                    "  - dram.model: [ideal]\n"
                                    "  - sram.inptu.size_kib: [128]\n");
  const CommandResult r = sweep({f, "-o", d + "/out"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find(f + ":3:5: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("sram.inptu.size_kib"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(d + "/out/results.csv"));
}

// An unknown key on an axis is one error however many values it has; a precision that does not exist
// fails the sweep before any point runs; every line carries npusim's error prefix.
TEST(SweepCli, AxisErrorsAreReportedOnceAndUpFront) {
  const std::string d = temp_dir("sweep-axis-errors");
  const std::string f = write_sweep(d,
                                    "axes:\n"
                                    "  - systolic_array.rowz: [8, 16, 32]\n"
                                    "  - precision: [int8, int9]\n");
  const CommandResult r = sweep({f, "-o", d + "/out"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 2) << r.err;
  EXPECT_NE(r.err.find("npusim: error: " + f + ":2:5: systolic_array.rowz: unknown key"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("npusim: error: " + f +
                       ":3:23: precision: 'int9' is not one of fp32, fp16, bf16, int8, auto"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(d + "/out/results.csv"));
}

// results.csv: non-integer figures to 10 significant digits, not the report's float noise.
TEST(SweepRun, ResultsCsvNumbersHaveNoFloatNoise) {
  const std::string d = temp_dir("sweep-csv-numbers");
  const std::string f =
      write_sweep(d, "axes:\n" + kGemmAxis + "  - dram.model: [ideal, hbm2, lpddr4_4266]\n");
  ASSERT_EQ(sweep({f, "-o", d + "/out"}).exit_code, 0);
  const Table t = read_csv(d + "/out/results.csv");
  ASSERT_EQ(t.rows.size(), 3u);
  for (const auto& row : t.rows) {
    for (const char* k : {"latency_ms", "array_utilization", "dram_bandwidth_gbps"}) {
      const std::string& v = row.at(k);
      ASSERT_FALSE(v.empty()) << k;
      EXPECT_EQ(v, fmt::format("{:.10g}", std::stod(v))) << k;
    }
  }
}

// Runs the sweep `text` (written in `d`) into d/out and returns its results; every point must be "ok".
Table swept(const std::string& d, const std::string& text) {
  const std::string f = write_sweep(d, text);
  EXPECT_EQ(sweep({f, "-o", d + "/out"}).exit_code, 0);
  Table t = read_csv(d + "/out/results.csv");
  for (const auto& row : t.rows) EXPECT_EQ(row.at("status"), "ok") << row.at("error");
  return t;
}

// Each (column, Python path) pair: the row's figure is the report's, to 1e-9.
void expect_columns_match(const std::map<std::string, std::string>& row, const std::string& report,
                          const std::vector<std::pair<std::string, std::string>>& columns) {
  for (const auto& [column, path] : columns) {
    const double want = std::stod(json_eval(report, "repr(" + path + ")"));
    EXPECT_NEAR(std::stod(row.at(column)), want, 1e-9 * want) << column;
  }
}

// The results say which precision each point ran in and how close it came to that plan's peak and to
// its roofline, as its report does.
TEST(SweepRun, ResultsCarryThePrecisionPlanItsUtilizationAndTheRoofline) {
  const std::string d = temp_dir("sweep-precision-columns");
  // With a pipeline (docs/e2e.md), so that the e2e and stream columns are filled too.
  const std::string pipeline = std::string(NPUSIM_SOURCE_DIR) + "/configs/pipelines/classifier.yaml";
  const Table t =
      swept(d, "axes:\n  - model: [default]\n  - precision: [fp32, int8]\nrun_args: [--pipeline, " +
                   pipeline + "]\n");
  ASSERT_EQ(t.rows.size(), 2u);
  for (const auto& row : t.rows) {
    EXPECT_EQ(row.at("precision_plan"), row.at("precision"));
    const std::string report = d + "/out/" + row.at("report");
    expect_columns_match(row, report,
                         {{"plan_utilization", "r['precision']['utilization']"},
                          {"unfused_bound_ratio", "r['unfused_bound_ratio']"},
                          {"compiled_efficiency", "r['compiled_efficiency']"},
                          {"bound_cycles", "r['bound_cycles']"},
                          {"model_limit_cycles", "r['model_limit_cycles']"},
                          {"model_efficiency", "r['model_efficiency']"},
                          {"limit_array_cycles", "r['model_limit']['array_cycles']"},
                          {"limit_dram_cycles", "r['model_limit']['dram_cycles']"},
                          {"e2e_latency_ms", "r['e2e']['latency_ms']"},
                          {"stream_throughput_fps", "r['e2e']['stream']['throughput_fps']"},
                          {"stream_latency_p99_ms", "r['e2e']['stream']['latency_p99_ms']"}});
    // Every figure column (after sram_kib, before report) reads something the report writes: none is
    // empty on a run that has them all (a path to a field no report has would stay empty). The multicore
    // columns need --split, which a pipeline run does not combine with, the serve columns a scenario, the
    // generation and request columns --generate or --requests: the next tests have them.
    const auto first = std::find(t.header.begin(), t.header.end(), "sram_kib");
    const auto last = std::find(t.header.begin(), t.header.end(), "report");
    ASSERT_LT(first, last);
    const std::set<std::string> dynamic = {"ttft_ms", "tpot_ms", "tokens_per_s", "padding_share",
                                           "compile_events"};
    for (auto c = first + 1; c != last; ++c) {
      if (c->rfind("multicore_", 0) == 0 || c->rfind("serve_", 0) == 0 || c->rfind("request_", 0) == 0 ||
          dynamic.count(*c))
        continue;
      EXPECT_FALSE(row.at(*c).empty()) << *c;
    }
    // `layers` counts the program's layers, not the model's nodes fused into them (the demo has six).
    EXPECT_EQ(row.at("layers"), json_eval(report, "sum(l['placement'] != 'fused' for l in r['layers'])"));
    EXPECT_EQ(json_eval(report, "sum(l['placement'] == 'fused' for l in r['layers'])"), "6");
  }
}

// A multi-core split (docs/multicore.md) fills the multicore columns from the report's multicore section.
TEST(SweepRun, MulticoreSplitFillsItsColumns) {
  const std::string d = temp_dir("sweep-multicore-columns");
  // A small CNN with a batch dimension (the built-in models' shapes are fixed).
  const std::string cnn = std::string(NPUSIM_SOURCE_DIR) + "/tests/compiler/passes/data/small_cnn_op13.onnx";
  const Table t = swept(
      d, "set: {cores: 2}\naxes:\n  - model: [" + cnn + "]\n  - batch: [2, 4]\nrun_args: [--split, batch]\n");
  ASSERT_EQ(t.rows.size(), 2u);
  for (const auto& row : t.rows) {
    const std::string report = d + "/out/" + row.at("report");
    expect_columns_match(row, report,
                         {{"multicore_latency_ms", "r['multicore']['latency_ms']"},
                          {"multicore_throughput_per_s", "r['multicore']['throughput_per_s']"},
                          {"multicore_speedup", "r['multicore']['speedup']"}});
  }
}

// Generation and request streams as axes (docs/dynamic.md): time to first token and per output token,
// and one policy's request latency percentiles per row, each the point's report's.
TEST(SweepRun, GenerateAndRequestAxesFillTheirColumns) {
  const std::string d = temp_dir("sweep-dynamic-columns");
  const Table g = swept(d,
                        "axes:\n  - model: ['llm:layers=1,hidden=64,heads=2,kv_heads=1,ffn=128,vocab=100']\n"
                        "  - generate: ['4:3', '96:3']\n");
  ASSERT_EQ(g.rows.size(), 2u);
  for (const auto& row : g.rows) {
    expect_columns_match(row, d + "/out/" + row.at("report"),
                         {{"ttft_ms", "r['generation']['ttft_ms']"},
                          {"tpot_ms", "r['generation']['decode_ms']['mean']"},
                          {"tokens_per_s", "r['generation']['tokens_per_s']"}});
    EXPECT_EQ(row.at("request_latency_p50_ms"), "");
  }
  // A prefill over 96 tokens takes longer than over 4.
  EXPECT_GT(std::stod(g.rows[1].at("ttft_ms")), std::stod(g.rows[0].at("ttft_ms")));

  // A MatMul over a symbolic `seq` (tests/e2e/make_report_models.py); the request of 12 pads to 16.
  const std::string r = d + "/req";
  fs::create_directories(r);
  ASSERT_EQ(run_command({kPython, std::string(NPUSIM_SOURCE_DIR) + "/tests/e2e/make_report_models.py", r})
                .exit_code,
            0);
  write_file(r + "/requests.csv", "arrival_ms,seq\n0,8\n100,12\n200,16\n");
  const Table q =
      swept(r,
            "axes:\n  - model: [dyn.onnx]\n  - dynamic: ['seq=8,16']\n  - requests: [requests.csv]\n"
            "  - shape_policy: [pad, dynamic]\n");
  ASSERT_EQ(q.rows.size(), 2u);
  for (const auto& row : q.rows) {
    const std::string policy = "r['requests']['policies'][0]";
    expect_columns_match(row, r + "/out/" + row.at("report"),
                         {{"request_latency_p50_ms", policy + "['latency_ms']['p50']"},
                          {"request_latency_p95_ms", policy + "['latency_ms']['p95']"},
                          {"request_latency_p99_ms", policy + "['latency_ms']['p99']"},
                          {"request_latency_mean_ms", policy + "['latency_ms']['mean']"},
                          {"request_throughput_rps", policy + "['throughput_rps']"},
                          {"compile_events", policy + "['compile_events']"}});
    EXPECT_EQ(json_eval(r + "/out/" + row.at("report"), policy + "['policy']"), row.at("shape_policy"));
    EXPECT_EQ(row.at("ttft_ms"), "");
  }
  // Under pad the requests run as seq 8, 16 and 16 (40 rows of the MatMul) for 36 rows of their own: a
  // tenth of the MACs is padding; none under dynamic.
  EXPECT_NEAR(std::stod(q.rows[0].at("padding_share")), 4.0 / 40.0, 1e-9);
  EXPECT_EQ(std::stod(q.rows[1].at("padding_share")), 0.0);
}

// A scenario sweep (docs/scenarios.md): every point is `npusim serve` with the point's configuration;
// the serve columns summarise its models.
TEST(SweepRun, AScenarioSweepRunsServeAtEveryPoint) {
  const std::string d = temp_dir("sweep-scenario");
  write_file(d + "/s.yaml", R"(duration_ms: 20
models:
  - {name: a, model: demo, deadline_ms: 0.02, arrival: {type: periodic, period_ms: 1}}
  - {name: b, model: "gemm:M=128,N=128,K=128", arrival: {type: poisson, rate_hz: 500}}
)");
  const Table t = swept(d, "scenario: s.yaml\naxes:\n  - systolic_array.rows: [16, 32]\n");
  ASSERT_EQ(t.rows.size(), 2u);
  for (const auto& row : t.rows) {
    const std::string report = d + "/out/" + row.at("report");
    EXPECT_EQ(std::stod(row.at("serve_latency_p99_ms")),
              std::stod(json_eval(report, "repr(max(m['latency_p99_ms'] for m in r['models']))")));
    EXPECT_NEAR(std::stod(row.at("serve_throughput_per_s")),
                std::stod(json_eval(report, "repr(sum(m['throughput_per_s'] for m in r['models']))")), 1e-6);
    EXPECT_EQ(row.at("serve_deadline_misses"),
              json_eval(report, "sum(m['deadline_misses'] for m in r['models'])"));
    EXPECT_EQ(row.at("serve_npu_busy"), json_eval(report, "r['npu_busy']"));
  }
  // A smaller array is slower: the tail grows.
  EXPECT_GT(std::stod(t.rows[0].at("serve_latency_p99_ms")), std::stod(t.rows[1].at("serve_latency_p99_ms")));
  // The scenario names the models: a model axis is refused.
  const std::string bad = write_sweep(d, "scenario: s.yaml\naxes:\n  - model: [default]\n");
  const CommandResult r = sweep({bad, "-o", d + "/bad"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("model: a scenario sweep takes its models"), std::string::npos) << r.err;
}

TEST(SweepCli, UsageErrorsExitTwo) {
  EXPECT_EQ(sweep({}).exit_code, 2);
  EXPECT_EQ(sweep({"--shard", "3/2", "x.yaml"}).exit_code, 2);
  EXPECT_EQ(sweep({"no-such-sweep.yaml"}).exit_code, 2);
  const CommandResult h = sweep({"--help"});
  EXPECT_EQ(h.exit_code, 0);
  EXPECT_NE(h.out.find("--merge DIR"), std::string::npos);
}

TEST(SweepRun, FailingPointsAreRecordedAndTheSweepGoesOn) {
  const std::string d = temp_dir("sweep-fail");
  // Three ways to fail: a program that deadlocks (the simulation fails: exit 1), a file that is not a
  // program (exit 2), and a 256 x 256 array whose int32 tile (256 KiB) does not fit a 64 KiB
  // accumulator (refused before it runs: exit 2).
  write_file(d + "/deadlock.s", ".layer x Gemm\nNOP layer=x wait=load\nHALT\n");
  write_file(d + "/garbage.s", "FROB 1\n");
  const std::string f = write_sweep(d,
                                    "set: {sram.accumulator.size_kib: 64}\n"
                                    "axes:\n"
                                    "  - model: [{name: gemm_layer, path: '" +
                                        kGemmLayer +
                                        "'}, deadlock.s, garbage.s]\n"
                                        "  - systolic_array.rows: [16, 256]\n"
                                        "    systolic_array.cols: [16, 256]\n");
  const CommandResult r = sweep({f, "-j", "2", "-o", d + "/out"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Table t = read_csv(d + "/out/results.csv");
  ASSERT_EQ(t.rows.size(), 6u);
  for (const auto& row : t.rows) {
    const std::string& model = row.at("model");
    const bool small = row.at("systolic_array.rows") == "16";
    SCOPED_TRACE(row.at("index") + " " + model);
    if (!small) {
      EXPECT_EQ(row.at("status"), "failed");
      EXPECT_EQ(row.at("exit_code"), "2");
      EXPECT_NE(row.at("error").find("sram.accumulator.size_kib"), std::string::npos) << row.at("error");
    } else if (model == "gemm_layer") {
      EXPECT_EQ(row.at("status"), "ok") << row.at("error");
      EXPECT_TRUE(fs::exists(d + "/out/" + row.at("report")));
      EXPECT_FALSE(row.at("total_cycles").empty());
      continue;
    } else if (model == "deadlock") {
      EXPECT_EQ(row.at("status"), "failed");
      EXPECT_EQ(row.at("exit_code"), "1");
      EXPECT_NE(row.at("error").find("deadlock"), std::string::npos) << row.at("error");
    } else {
      EXPECT_EQ(model, "garbage");
      EXPECT_EQ(row.at("status"), "failed");
      EXPECT_EQ(row.at("exit_code"), "2");
      EXPECT_NE(row.at("error").find("FROB"), std::string::npos) << row.at("error");
    }
    EXPECT_TRUE(row.at("total_cycles").empty());
    EXPECT_TRUE(row.at("report").empty());
  }
  EXPECT_NE(r.err.find("failed"), std::string::npos) << r.err;
  // --fail-on-error turns recorded failures into exit 1; the failed points are not re-run.
  const CommandResult again = sweep({f, "-o", d + "/out", "--fail-on-error"});
  EXPECT_EQ(again.exit_code, 1) << again.err;
  EXPECT_NE(again.out.find("0 ok, 0 failed, 6 already done"), std::string::npos) << again.out;
  // --retry-failed runs exactly the five failed points again.
  const CommandResult retry = sweep({f, "-o", d + "/out", "--retry-failed"});
  EXPECT_EQ(retry.exit_code, 0) << retry.err;
  EXPECT_NE(retry.out.find("0 ok, 5 failed, 1 already done"), std::string::npos) << retry.out;
  EXPECT_EQ(read_csv(d + "/out/results.csv").rows.size(), 6u);
}

TEST(SweepRun, OneAndTwoJobsWriteIdenticalResults) {
  const std::string d = temp_dir("sweep-j");
  const std::string f = write_sweep(d, "axes:\n" + kGemmAxis +
                                           "  - systolic_array.rows: [8, 16, 32]\n"
                                           "    systolic_array.cols: [8, 16, 32]\n"
                                           "  - dram.model: [ideal, hbm2]\n");
  const CommandResult a = sweep({f, "-j", "1", "-o", d + "/j1"});
  const CommandResult b = sweep({f, "-j", "2", "-o", d + "/j2"});
  ASSERT_EQ(a.exit_code, 0) << a.err;
  ASSERT_EQ(b.exit_code, 0) << b.err;
  EXPECT_EQ(read_file(d + "/j1/results.csv"), read_file(d + "/j2/results.csv"));
  EXPECT_EQ(read_file(d + "/j1/results.jsonl"), read_file(d + "/j2/results.jsonl"));
  EXPECT_EQ(count_lines(read_file(d + "/j1/results.jsonl")), 6u);
  // Non-terminal stderr gets plain progress lines, ending with the total.
  EXPECT_NE(a.err.find("sweep: 6/6 done, 0 failed"), std::string::npos) << a.err;
}

TEST(SweepRun, ShardsMergedEqualALocalRun) {
  const std::string d = temp_dir("sweep-shards");
  const std::string f = write_sweep(d, "axes:\n" + kGemmAxis +
                                           "  - systolic_array.rows: [8, 16, 32]\n"
                                           "  - dram.model: [ideal, simple]\n");
  ASSERT_EQ(sweep({f, "-o", d + "/local"}).exit_code, 0);
  for (const char* s : {"0/3", "1/3", "2/3"}) {
    const CommandResult r = sweep({f, "-o", d + "/sharded", "--shard", s});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("2 points"), std::string::npos) << r.out;
  }
  // Before the merge one shard is missing nothing of its own, but the merge of two shards is incomplete.
  const CommandResult m = sweep({"--merge", d + "/sharded"});
  ASSERT_EQ(m.exit_code, 0) << m.err;
  EXPECT_EQ(read_file(d + "/local/results.csv"), read_file(d + "/sharded/results.csv"));
  EXPECT_EQ(read_file(d + "/local/results.jsonl"), read_file(d + "/sharded/results.jsonl"));
}

TEST(SweepRun, MergeReportsMissingPoints) {
  const std::string d = temp_dir("sweep-missing");
  const std::string f = write_sweep(d, "axes:\n" + kGemmAxis + "  - systolic_array.rows: [8, 16, 32, 64]\n");
  ASSERT_EQ(sweep({f, "-o", d + "/out", "--shard", "0/2"}).exit_code, 0);
  const CommandResult m = sweep({"--merge", d + "/out"});
  EXPECT_EQ(m.exit_code, 1);
  EXPECT_NE(m.err.find("2 points have no result (indices 1, 3)"), std::string::npos) << m.err;
  EXPECT_EQ(read_csv(d + "/out/results.csv").rows.size(), 2u);
}

// Kills the sweep half-way, re-runs it, and checks from the attempt log that no point that had
// finished ran again, and that every point ends up in the results exactly once.
TEST(SweepRun, ResumesAfterAKillWithoutRerunningFinishedPoints) {
  const std::string d = temp_dir("sweep-resume");
  const std::string f =
      write_sweep(d, "axes:\n" + kGemmAxis +
                         "  - systolic_array.rows: [8, 12, 16, 20, 24, 28, 32, 36, 40, 44]\n"
                         "  - dram.model: [ideal, simple, lpddr4_4266]\n");
  const std::string out = d + "/out";
  const size_t total = 30;
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const std::string log = d + "/first.log";
    freopen(log.c_str(), "w", stdout);
    freopen(log.c_str(), "a", stderr);
    execl(kNpusim.c_str(), kNpusim.c_str(), "sweep", f.c_str(), "-j", "1", "-o", out.c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  // Wait for about a third of the points, then kill the sweep process (its running point dies with it).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  size_t rows = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    rows = fs::exists(out + "/results.jsonl") ? count_lines(read_file(out + "/results.jsonl")) : 0;
    if (rows >= total / 3) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status)) << "the sweep finished before it could be killed";
  // The ids recorded before the kill.
  std::set<std::string> done_before;
  {
    std::istringstream in(read_file(out + "/results.jsonl"));
    for (std::string line; std::getline(in, line);) {
      const size_t at = line.find("\"id\": \"");
      if (at != std::string::npos && line.back() == '}') done_before.insert(line.substr(at + 7, 16));
    }
  }
  ASSERT_GE(done_before.size(), total / 3);
  ASSERT_LT(done_before.size(), total) << "nothing was left to resume";

  const CommandResult again = sweep({f, "-j", "2", "-o", out});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.out.find(fmt::format("{} already done", done_before.size())), std::string::npos)
      << again.out;

  std::map<std::string, int> starts;
  std::istringstream attempts(read_file(out + "/attempts.log"));
  for (std::string line; std::getline(attempts, line);) {
    std::istringstream w(line);
    std::string what, index, id;
    w >> what >> index >> id;
    if (what == "start") ++starts[id];
  }
  for (const std::string& id : done_before) EXPECT_EQ(starts[id], 1) << "point " << id << " ran twice";
  const Table t = read_csv(out + "/results.csv");
  ASSERT_EQ(t.rows.size(), total);
  std::set<std::string> ids;
  for (size_t i = 0; i < t.rows.size(); ++i) {
    EXPECT_EQ(t.rows[i].at("index"), std::to_string(i));
    EXPECT_EQ(t.rows[i].at("status"), "ok") << t.rows[i].at("error");
    ids.insert(t.rows[i].at("id"));
  }
  EXPECT_EQ(ids.size(), total);
  EXPECT_EQ(count_lines(read_file(out + "/results.jsonl")), total);
}

// Models are an axis like any other: the built-in model, a program file, and a file that a `prepare`
// command creates before its points run (once, however many points use it).
TEST(SweepRun, ModelAxisRunsEachModelAndPreparesMissingOnes) {
  const std::string d = temp_dir("sweep-models");
  const std::string& program = kGemmLayer;
  const std::string f =
      write_sweep(d, fmt::format("axes:\n"
                                 "  - model:\n"
                                 "      - default\n"
                                 "      - {{name: gemm_layer, path: '{0}'}}\n"
                                 "      - {{name: copied, path: made/copy.s, prepare: 'mkdir -p made && "
                                 "echo x >> prepared.log && cp {0} made/copy.s'}}\n"
                                 "      - {{name: broken, path: never.s, prepare: 'exit 3'}}\n"
                                 "  - dram.model: [ideal, hbm2]\n",
                                 program));
  const CommandResult r = sweep({f, "-j", "2", "-o", d + "/out"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Table t = read_csv(d + "/out/results.csv");
  ASSERT_EQ(t.rows.size(), 8u);
  std::map<std::string, std::string> cycles;
  for (const auto& row : t.rows) {
    const std::string& m = row.at("model");
    if (m == "broken") {
      EXPECT_EQ(row.at("status"), "failed");
      EXPECT_NE(row.at("error").find("prepare command failed (exit 3)"), std::string::npos)
          << row.at("error");
      continue;
    }
    EXPECT_EQ(row.at("status"), "ok") << m << ": " << row.at("error");
    if (row.at("dram.model") == "hbm2") cycles[m] = row.at("total_cycles");
  }
  EXPECT_EQ(read_file(d + "/prepared.log"), "x\n") << "the prepare command must run once";
  // The copied program is the same program: the same cycles; the built-in model is another one.
  EXPECT_EQ(cycles["copied"], cycles["gemm_layer"]);
  EXPECT_NE(cycles["default"], cycles["gemm_layer"]);
}

// Presets (or configuration files) as an axis: each point runs with its --config, its report records
// it, and a name that is neither a preset nor a file fails the sweep before any point runs.
TEST(SweepRun, ConfigAxisRunsEachPresetOrFile) {
  const std::string d = temp_dir("sweep-config-axis");
  write_file(d + "/mine.yaml", "systolic_array:\n  rows: 8\n  cols: 8\n");
  const std::string f = write_sweep(d, "axes:\n" + kGemmAxis + "  - config: [edge, tpu-v1, mine.yaml]\n");
  const CommandResult r = sweep({f, "-j", "2", "-o", d + "/out"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Table t = read_csv(d + "/out/results.csv");
  ASSERT_EQ(t.rows.size(), 3u);
  std::set<std::string> cycles;
  for (const auto& row : t.rows) {
    ASSERT_EQ(row.at("status"), "ok") << row.at("error");
    cycles.insert(row.at("total_cycles"));
    const std::string report = d + "/out/" + row.at("report");
    const std::string expect = row.at("config") == "mine.yaml" ? d + "/mine.yaml" : row.at("config");
    EXPECT_EQ(json_eval(report, "r['run']['config']"), fs::path(expect).lexically_normal().string());
    if (row.at("config") == "mine.yaml") {
      EXPECT_EQ(json_eval(report, "r['array']['rows']"), "8");
    }
  }
  EXPECT_EQ(cycles.size(), 3u) << "three machines, three cycle counts";
  const std::string g = write_sweep(d, "axes:\n  - config: [edge, tpu-v9]\n");
  const CommandResult bad = sweep({g, "-o", d + "/out2"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find(g + ":2:20: config: --config tpu-v9: no such file, and not a preset"),
            std::string::npos)
      << bad.err;
  EXPECT_FALSE(fs::exists(d + "/out2/results.csv"));
}

double num(const std::map<std::string, std::string>& row, const std::string& key) {
  return std::stod(row.at(key));
}

// Trends that hold by construction, on a fixed GEMM layer program (the same tiling everywhere):
// - an ideal DRAM (fixed latency, unlimited bandwidth) is never slower than a real DRAM model, as long
//   as its fixed latency is no longer than the real part's: dram.latency_ns = 0 here. (With the default
//   100 ns the ideal model is slower than the banked presets, whose unloaded latency tRCD + tCL + burst
//   is about 30-40 ns, because each DMA engine keeps only max_outstanding bursts in flight.)
// - the matrix unit's cycles fall as the square array grows from 8x8 to 64x64 (fewer folds of the
//   same GEMM; each fold's fill and drain grow only linearly);
// - a larger SRAM never moves more bytes between DRAM and the chip for the same tiling.
TEST(SweepRun, TrendsThatHoldByConstruction) {
  const std::string d = temp_dir("sweep-trends");
  const std::string f = write_sweep(d,
                                    "set: {dram.latency_ns: 0}\n"
                                    "axes:\n" +
                                        kGemmAxis +
                                        "  - systolic_array.rows: [8, 16, 32, 64]\n"
                                        "    systolic_array.cols: [8, 16, 32, 64]\n"
                                        "  - dram.model: [ideal, simple, ddr4_3200, lpddr4_4266, hbm2]\n"
                                        "  - sram.input.size_kib: [128, 512, 2048]\n"
                                        "    sram.weight.size_kib: [128, 512, 2048]\n"
                                        "    sram.accumulator.size_kib: [128, 512, 2048]\n");
  const CommandResult r = sweep({f, "-j", "2", "-o", d + "/out"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Table t = read_csv(d + "/out/results.csv");
  ASSERT_EQ(t.rows.size(), 4u * 5u * 3u);
  std::map<std::tuple<std::string, std::string, std::string>, const std::map<std::string, std::string>*> at;
  for (const auto& row : t.rows) {
    ASSERT_EQ(row.at("status"), "ok") << row.at("error");
    at[{row.at("systolic_array.rows"), row.at("dram.model"), row.at("sram.input.size_kib")}] = &row;
  }
  const std::vector<std::string> arrays = {"8", "16", "32", "64"}, srams = {"128", "512", "2048"},
                                 drams = {"simple", "ddr4_3200", "lpddr4_4266", "hbm2"};
  for (const auto& a : arrays)
    for (const auto& s : srams) {
      const double ideal = num(*at[{a, "ideal", s}], "total_cycles");
      for (const auto& m : drams)
        EXPECT_LE(ideal, num(*at[{a, m, s}], "total_cycles"))
            << "array " << a << " sram " << s << " dram " << m;
    }
  for (const auto& m : drams)
    for (const auto& s : srams)
      for (size_t i = 1; i < arrays.size(); ++i)
        EXPECT_LT(num(*at[{arrays[i], m, s}], "matrix_cycles"),
                  num(*at[{arrays[i - 1], m, s}], "matrix_cycles"))
            << arrays[i - 1] << " -> " << arrays[i] << " on " << m << ", sram " << s;
  for (const auto& a : arrays)
    for (const auto& m : drams)
      for (size_t i = 1; i < srams.size(); ++i) {
        auto traffic = [&](const std::string& s) {
          return num(*at[{a, m, s}], "dram_bytes_read") + num(*at[{a, m, s}], "dram_bytes_written");
        };
        EXPECT_LE(traffic(srams[i]), traffic(srams[i - 1])) << a << " " << m << " " << srams[i];
      }
}

// The four plotting scripts on real outputs: a sweep's results, a point's report and trace.
TEST(Plots, RenderNonEmptyImagesFromRealOutputs) {
  const std::string d = temp_dir("sweep-plots");
  const std::string f = write_sweep(d,
                                    "trace_csv: true\n"
                                    "axes:\n"
                                    "  - model: [default]\n"
                                    "  - systolic_array.rows: [8, 16, 32]\n"
                                    "    systolic_array.cols: [8, 16, 32]\n"
                                    "  - sram.input.size_kib: [128, 512]\n"
                                    "    sram.weight.size_kib: [128, 512]\n");
  ASSERT_EQ(sweep({f, "-j", "2", "-o", d + "/out"}).exit_code, 0);
  const Table t = read_csv(d + "/out/results.csv");
  ASSERT_EQ(t.rows.size(), 6u);
  const std::string report = d + "/out/" + t.rows[0].at("report");
  const std::string trace = fs::path(report).parent_path().string() + "/trace.csv";
  ASSERT_TRUE(fs::exists(trace));
  const std::string csv = d + "/out/results.csv";
  const std::vector<std::vector<std::string>> runs = {
      {kScripts + "plot_sweep.py", csv, "-o", d + "/sweep.png"},
      {kScripts + "plot_sweep.py", csv, "--kind", "heatmap", "-o", d + "/heatmap.svg"},
      {kScripts + "plot_sweep.py", csv, "--kind", "line", "--metric", "total_cycles", "-o", d + "/line.png"},
      {kScripts + "plot_sweep.py", csv, "--kind", "pareto", "-o", d + "/pareto.png"},
      {kScripts + "plot_timeline.py", trace, "-o", d + "/timeline.png"},
      {kScripts + "plot_layers.py", report, "--top", "2", "-o", d + "/layers.png"},
      {kScripts + "plot_roofline.py", report, "--trace", trace, "-o", d + "/roofline.svg"},
      {kScripts + "plot_roofline.py", report, "-o", d + "/roofline_from_report.png"},  // the report's bytes
  };
  for (const auto& args : runs) {
    std::vector<std::string> argv = {kPython};
    argv.insert(argv.end(), args.begin(), args.end());
    const CommandResult r = run_command(argv);
    const std::string image = args.back();
    EXPECT_EQ(r.exit_code, 0) << args[0] << ": " << r.err;
    ASSERT_TRUE(fs::exists(image)) << image;
    EXPECT_GT(fs::file_size(image), 1000u) << image;
  }
}

// The plots (plot_sweep.py's ticks, colour bars and cell labels, plot_timeline.py's cycle axis) write
// numbers in one format, npusim_report.human: three significant digits, k/M/G/T above 1000, never
// powers of ten.
TEST(Plots, SweepPlotsUseOneNumberFormat) {
  const CommandResult r = run_command(
      {kPython, "-c",
       "import sys; sys.path.insert(0, sys.argv[1]); import npusim_report as p\n"
       "print(' '.join(p.human(v) for v in (0.25, 37.817, 512, 524288, 67108864, 2.5e9, 1e13, 0, -2048)))",
       kScripts});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "0.25 37.8 512 524k 67.1M 2.5G 10T 0 -2.05k\n");
  // Ticks a narrow range apart get the digits that keep their labels apart (not 2.08 three times).
  const CommandResult narrow =
      run_command({kPython, "-c",
                   "import sys; sys.path.insert(0, sys.argv[1]); import npusim_report as p\n"
                   "t = [2.07, 2.075, 2.08, 2.085]; d = p.distinct_digits(t); print(d, ' '.join(p.human(v, "
                   "d) for v in t))",
                   kScripts});
  ASSERT_EQ(narrow.exit_code, 0) << narrow.err;
  EXPECT_EQ(narrow.out, "4 2.07 2.075 2.08 2.085\n");
  const std::string source = read_file(kScripts + "plot_sweep.py");
  EXPECT_EQ(source.find(":.3g}\", ha="), std::string::npos) << "cell labels go through human()";
}

// Runs `body` with plot_sweep imported as p, matplotlib's pyplot as plt and `csv` read into header,
// axes and rows.
CommandResult plot_python(const std::string& body, const std::string& csv) {
  return run_command({kPython, "-c",
                      "import sys; sys.path.insert(0, sys.argv[1])\n"
                      "import npusim_report, plot_sweep as p\n"
                      "plt = npusim_report.pyplot()\n"
                      "header, axes, rows = p.read_results(sys.argv[2])\n" +
                          body,
                      kScripts, csv});
}

// A sweep over presets (`- config: [...]`) has one axis besides the model: the summary draws the line and
// Pareto panels (not two empty heatmaps), the presets along x in the sweep's order, each at one place for
// every model (a model that lacks a point keeps its others in place).
TEST(Plots, APresetAxisSweepPlotsPresetsInTheSweepsOrderWithoutEmptyPanels) {
  const std::string d = temp_dir("sweep-plot-presets");
  write_file(d + "/results.csv",
             "index,id,model,config,status,exit_code,error,array_pes,sram_kib,latency_ms,report\n"
             "0,a,m1,edge,ok,0,,1024,512,0.9,\n"
             "1,b,m1,tpu-v1,ok,0,,65536,28928,0.5,\n"
             "2,c,m1,gemmini,ok,0,,256,256,3,\n"
             "3,d,m2,edge,ok,0,,1024,512,0.4,\n"
             "4,e,m2,tpu-v1,failed,1,x,,,,\n"
             "5,f,m2,gemmini,ok,0,,256,256,1.5,\n");
  CommandResult r =
      run_command({kPython, kScripts + "plot_sweep.py", d + "/results.csv", "-o", d + "/s.png"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find(": line (config), pareto over 5 points"), std::string::npos) << r.out;
  r = plot_python(
      "fig, ax = plt.subplots()\n"
      "p.line(ax, [d for d in rows if d['status'] == 'ok'], 'config', 'latency_ms', 'model', ['m1', 'm2'], "
      "[], "
      "False)\n"
      "print([t.get_text() for t in ax.get_xticklabels()], [[int(v) for v in l.get_xdata()] for l in "
      "ax.get_lines()])\n",
      d + "/results.csv");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "['edge', 'tpu-v1', 'gemmini'] [[0, 1, 2], [0, 2]]\n");
}

// Every swept axis gets its own line panel (a third axis is never only "best over"), the Pareto cost is
// the design's area where the CSV has it, the title is the sweep's `name:` from plan.json, and a log axis
// spanning less than a decade labels its ticks in the one format (no 2x10^0).
TEST(Plots, SummaryDrawsALinePanelPerAxisAreaAsCostAndTheSweepsNameAsTitle) {
  const std::string d = temp_dir("sweep-plot-axes");
  std::string csv =
      "index,id,model,systolic_array.rows,sram.input.size_kib,vector.lanes,status,exit_code,error,array_pes,"
      "sram_kib,area_mm2,latency_ms,report\n";
  int i = 0;
  for (int rows : {8, 16, 32})
    for (int kib : {128, 512})
      for (int lanes : {16, 64}) {
        const double area = rows * rows * 0.001 + kib * 0.01 + lanes * 0.02;
        csv += std::to_string(i) + ",p" + std::to_string(i) + ",m," + std::to_string(rows) + "," +
               std::to_string(kib) + "," + std::to_string(lanes) + ",ok,0,," + std::to_string(rows * rows) +
               "," + std::to_string(kib) + "," + std::to_string(area) + "," +
               std::to_string(10.0 / rows + 100.0 / kib + 5.0 / lanes) + ",\n";
        ++i;
      }
  write_file(d + "/results.csv", csv);
  write_file(d + "/plan.json", "{\"name\": \"lanes-and-sram\", \"columns\": []}\n");
  CommandResult r =
      run_command({kPython, kScripts + "plot_sweep.py", d + "/results.csv", "-o", d + "/s.png"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(
      r.out.find(": heatmap, line (systolic_array.rows), line (sram.input.size_kib), line (vector.lanes), "
                 "pareto over 12 points"),
      std::string::npos)
      << r.out;
  r = plot_python(
      "cost = p.default_cost(header, rows)\n"
      "fig, ax = plt.subplots()\n"
      "p.pareto(ax, rows, 'latency_ms', cost, None, [None], False)\n"
      "fig.canvas.draw()\n"
      "labels = [t.get_text() for t in ax.get_xticklabels(minor=True) + ax.get_xticklabels()]\n"
      "print(p.sweep_name(sys.argv[2]), cost, any('10^' in t or 'times' in t for t in labels),\n"
      "      any(t for t in labels))\n",
      d + "/results.csv");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "lanes-and-sram area_mm2 False True\n");
  // Without plan.json (a CSV copied elsewhere) the title falls back to the folder's name; without
  // area_mm2, the cost to array PEs x SRAM KiB.
  fs::remove(d + "/plan.json");
  r = plot_python(
      "for d in rows: d['area_mm2'] = ''\n"
      "print(p.sweep_name(sys.argv[2]), p.default_cost(header, rows))\n",
      d + "/results.csv");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, fs::path(d).filename().string() + " array_pes*sram_kib\n");
}

// A log axis labels, in the view, every tick within a decade (with 1.2, 1.5 and 2.5 among them), the 1-2-5
// ticks over up to three decades and the powers of ten beyond: the Pareto plot's area axis from 1.6 to 30 mm2
// had the one label 10 (none below 2), and a latency axis over four decades labelled every minor tick, 6 7 8
// 9 piled together.
TEST(Plots, ALogAxisLabelsOneTwoFiveTicksAndOnlyDecadesOverMoreThanThree) {
  const std::string d = temp_dir("sweep-plot-log-ticks");
  write_file(d + "/results.csv",
             "index,id,model,status,exit_code,error,area_mm2,latency_ms,report\n"
             "0,a,m,ok,0,,1.6,100,\n"
             "1,b,m,ok,0,,4,3,\n"
             "2,c,m,ok,0,,12,0.4,\n"
             "3,e,m,ok,0,,30,0.02,\n");
  const std::string body =
      "fig, ax = plt.subplots()\n"
      "p.pareto(ax, rows, 'latency_ms', 'area_mm2', None, [None], True)\n"
      "fig.canvas.draw()\n"
      "def shown(axis, ticks):\n"
      "    lo, hi = sorted(axis.get_view_interval())\n"
      "    return sorted((t.get_position()[0 if axis is ax.xaxis else 1], t.get_text()) for t in ticks\n"
      "                  if t.get_text() and lo <= t.get_position()[0 if axis is ax.xaxis else 1] <= hi)\n"
      "print([t for _, t in shown(ax.xaxis, ax.get_xticklabels() + ax.get_xticklabels(minor=True))])\n"
      "print([t for _, t in shown(ax.yaxis, ax.get_yticklabels() + ax.get_yticklabels(minor=True))])\n";
  const CommandResult r = plot_python(body, d + "/results.csv");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "['2', '5', '10', '20']\n['0.1', '1', '10', '100']\n");
  // Less than a decade, 1.1 to 5.85 mm2 (the README tour's sweep): 1.2 and 1.5 are ticks too (none was
  // below 2).
  write_file(d + "/results.csv",
             "index,id,model,status,exit_code,error,area_mm2,latency_ms,report\n"
             "0,a,m,ok,0,,1.1,9.3,\n"
             "1,b,m,ok,0,,1.25,3.2,\n"
             "2,c,m,ok,0,,2,2.1,\n"
             "3,e,m,ok,0,,5.85,2.07,\n");
  const CommandResult narrow = plot_python(body, d + "/results.csv");
  ASSERT_EQ(narrow.exit_code, 0) << narrow.err;
  EXPECT_EQ(narrow.out.substr(0, narrow.out.find('\n')), "['1.2', '1.5', '2', '2.5', '3', '4', '5', '6']");
}

TEST(Plots, EachScriptRefusesTheWrongKindOfFile) {
  const std::string d = temp_dir("sweep-plot-errors");
  const std::string f = write_sweep(d, "trace_csv: true\naxes:\n  - systolic_array.rows: [16]\n");
  ASSERT_EQ(sweep({f, "-o", d + "/out"}).exit_code, 0);
  const Table t = read_csv(d + "/out/results.csv");
  ASSERT_EQ(t.rows.size(), 1u);
  const std::string report = d + "/out/" + t.rows[0].at("report");
  const std::string trace = fs::path(report).parent_path().string() + "/trace.csv";
  const std::string csv = d + "/out/results.csv";
  struct Case {
    std::string script, input, expect;
  };
  const std::vector<Case> cases = {
      {"plot_sweep.py", trace, "not an npusim sweep results CSV"},
      {"plot_timeline.py", report, "not an npusim trace CSV"},
      {"plot_timeline.py", csv, "not an npusim trace CSV"},
      {"plot_layers.py", trace, "not JSON"},
      {"plot_roofline.py", csv, "not JSON"},
      {"plot_layers.py", d + "/out/plan.json", "not an npusim report"},
  };
  for (const Case& c : cases) {
    const CommandResult r = run_command({kPython, kScripts + c.script, c.input, "-o", d + "/x.png"});
    EXPECT_EQ(r.exit_code, 2) << c.script << " " << c.input;
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << c.script << ": " << r.err;
    EXPECT_EQ(r.err.find("Traceback"), std::string::npos) << r.err;
  }
  for (const char* s : {"plot_sweep.py", "plot_timeline.py", "plot_layers.py", "plot_roofline.py"}) {
    const CommandResult h = run_command({kPython, kScripts + s, "--help"});
    EXPECT_EQ(h.exit_code, 0) << s;
    EXPECT_NE(h.out.find("-o"), std::string::npos) << s;
  }
}

}  // namespace
}  // namespace npusim::test
