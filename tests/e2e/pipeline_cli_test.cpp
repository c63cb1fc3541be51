// End-to-end pipelines from the command line (issue 13, docs/e2e.md): `npusim run MODEL --pipeline
// PIPE.yaml` adds the report's e2e section around the simulated model, the trace's host lanes, and
// rejects bad pipeline files with exit 2 and the key's position.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/e2e/run_command.h"

namespace npusim::test {
namespace {

const std::string kSource = NPUSIM_SOURCE_DIR;

const std::string kPipeline = R"(frame: {width: 320, height: 240, channels: 3}
pre:
  - {op: resize, width: 32, height: 32}
  - {op: normalize}
input: {transfer: zero_copy, host_alignment_bytes: ALIGN}
output: {transfer: copy}
post:
  - {op: nms, boxes: 1000}
  - {op: fixed, time_us: 40}
stream: {frames: 50, rate_fps: 1000}
)";

std::string pipeline(const std::string& dir, int alignment) {
  std::string text = kPipeline;
  text.replace(text.find("ALIGN"), 5, std::to_string(alignment));
  const std::string path = dir + "/p" + std::to_string(alignment) + ".yaml";
  write_file(path, text);
  return path;
}

TEST(PipelineCli, TheE2eSectionWrapsTheModelsOwnCycles) {
  const std::string dir = temp_dir("pipeline_e2e");
  const CommandResult plain = npusim({"run", "demo", "-q", "--report", dir + "/plain.json"});
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  const CommandResult r = npusim({"run", "demo", "--pipeline", pipeline(dir, 64), "--report", dir + "/r.json",
                                  "--trace", dir + "/t.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("end to end ("), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("stream: 50 frames at 1000 fps"), std::string::npos) << r.out;
  EXPECT_EQ(json_eval(dir + "/plain.json", "'e2e' in r"), "False");
  // The model stage is the simulation's cycles, unchanged by the pipeline; the stages add up.
  EXPECT_EQ(json_eval(dir + "/plain.json", "r['total_cycles']"),
            json_eval(dir + "/r.json", "r['total_cycles']"));
  EXPECT_EQ(json_eval(dir + "/r.json",
                      "[s['cycles'] for s in r['e2e']['stages'] if s['kind'] == 'model'] == "
                      "[r['total_cycles']]"),
            "True");
  EXPECT_EQ(json_eval(dir + "/r.json",
                      "sum(s['cycles'] for s in r['e2e']['stages']) == r['e2e']['latency_cycles']"),
            "True");
  EXPECT_EQ(json_eval(dir + "/r.json", "r['e2e']['slowest_stage']"), "nms");
  EXPECT_EQ(json_eval(dir + "/r.json", "0 < r['e2e']['npu_share'] < 1"), "True");
  EXPECT_EQ(
      json_eval(dir + "/r.json", "r['e2e']['stream']['throughput_fps'] <= r['e2e']['stream']['bound_fps']"),
      "True");
  // The trace: host stages on their own lanes, the NPU's slices after the input transfer.
  EXPECT_EQ(
      json_eval(dir + "/t.json",
                "sorted({e['args']['name'] for e in r['traceEvents'] if e.get('name') == 'thread_name' and "
                "e['args']['name'].startswith('e2e')})"),
      "['e2e: host_cpu_post', 'e2e: host_cpu_pre', 'e2e: host_link_in', 'e2e: host_link_out', 'e2e: npu']");
  const std::string lanes =
      "{e['tid']: e['args']['name'] for e in r['traceEvents'] if e.get('name') == 'thread_name'}";
  EXPECT_EQ(json_eval(dir + "/t.json", "[e['name'] for e in r['traceEvents'] if e.get('ph') == 'X' and (" +
                                           lanes + ")[e['tid']] == 'e2e: host_cpu_post']"),
            "['e2e output copy', 'e2e nms', 'e2e fixed']");
  const std::string npu_start =
      json_eval(dir + "/t.json",
                "min(e['args']['start_cycle'] for e in r['traceEvents'] if e.get('ph') == 'X' and "
                "not (" +
                    lanes + ")[e['tid']].startswith('e2e'))");
  const std::string model_start =
      json_eval(dir + "/r.json", "[s['start_cycle'] for s in r['e2e']['stages'] if s['kind'] == 'model'][0]");
  EXPECT_GE(std::stoll(npu_start), std::stoll(model_start));
}

TEST(PipelineCli, AMisalignedZeroCopyBufferShowsItsExtraCopy) {
  const std::string dir = temp_dir("pipeline_align");
  const CommandResult a =
      npusim({"run", "demo", "-q", "--pipeline", pipeline(dir, 64), "--report", dir + "/a.json"});
  const CommandResult m = npusim({"run", "demo", "--pipeline", pipeline(dir, 4), "--report", dir + "/m.json",
                                  "--html", dir + "/m.html"});
  ASSERT_EQ(a.exit_code, 0) << a.err;
  ASSERT_EQ(m.exit_code, 0) << m.err;
  EXPECT_EQ(json_eval(dir + "/a.json", "[s['op'] for s in r['e2e']['stages'] if s['kind'] == 'input']"),
            "['transfer']");
  EXPECT_EQ(json_eval(dir + "/m.json", "[s['op'] for s in r['e2e']['stages'] if s['kind'] == 'input']"),
            "['bounce_copy', 'transfer']");
  EXPECT_EQ(json_eval(dir + "/a.json", "r['e2e']['input']['extra_copy_bytes']"), "0");
  EXPECT_EQ(
      json_eval(dir + "/m.json", "r['e2e']['input']['extra_copy_bytes'] == r['e2e']['input']['bytes'] > 0"),
      "True");
  const long long extra = std::stoll(json_eval(dir + "/m.json", "r['e2e']['input']['extra_copy_cycles']"));
  EXPECT_GT(extra, 0);
  EXPECT_EQ(std::stoll(json_eval(dir + "/m.json", "r['e2e']['latency_cycles']")),
            std::stoll(json_eval(dir + "/a.json", "r['e2e']['latency_cycles']")) + extra);
  EXPECT_NE(m.out.find("but dma.alignment_bytes is 64: an extra copy of"), std::string::npos) << m.out;
  // The HTML page shows the section, the misaligned buffer and a row per stage.
  const std::string html = read_file(dir + "/m.html");
  for (const char* s : {"id=\"e2e\"", "input buffer misaligned", "id=\"e2e-table\"", "input bounce copy"}) {
    EXPECT_NE(html.find(s), std::string::npos) << s;
  }
}

TEST(PipelineCli, BadPipelineFilesExit2NamingFileLineColumnAndKey) {
  const std::string dir = temp_dir("pipeline_bad");
  write_file(dir + "/bad.yaml", "pre:\n  - {op: resize, width: 32, heigth: 32}\nstream:\n  frames: -1\n");
  const CommandResult r = npusim({"run", "demo", "--pipeline", dir + "/bad.yaml"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find(dir + "/bad.yaml:2:5: pre[0].height: missing (resize needs width, height)"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find(dir + "/bad.yaml:2:29: pre[0].heigth: unknown key (did you mean 'height'?)"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find(dir + "/bad.yaml:4:11: stream.frames: -1 is out of range"), std::string::npos)
      << r.err;
  const CommandResult missing = npusim({"run", "demo", "--pipeline", dir + "/none.yaml"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("--pipeline " + dir + "/none.yaml: no such file"), std::string::npos)
      << missing.err;
  write_file(dir + "/batch.yaml", "stream:\n  batch: 2\n");
  const CommandResult batch = npusim({"run", "demo", "--batch", "4", "--pipeline", dir + "/batch.yaml"});
  EXPECT_EQ(batch.exit_code, 2);
  EXPECT_NE(batch.err.find("batch.yaml:2:3: stream.batch: 2 but --batch 4"), std::string::npos) << batch.err;
}

// --preprocess and a pipeline without pre: -- the pipeline runs the description's steps (the ones
// calibration and evaluation compute), costed exactly as the same steps written as pre: stages.
TEST(PipelineCli, PreprocessDescribesThePipelinesPreProcessing) {
  const std::string dir = temp_dir("pipeline_preprocess");
  const std::string rest = "input: {transfer: copy}\npost:\n  - {op: topk, k: 5}\n";
  write_file(dir + "/bare.yaml", "frame: {width: 640, height: 480}\n" + rest);
  // demo's input is 1x3x32x32: PaddleOCR-style letterbox (the 640x480 frame covers 32x24 of it, the rest is
  // padding), BGR, mean/std, NCHW.
  write_file(dir + "/written.yaml",
             "frame: {width: 640, height: 480}\npre:\n  - {op: resize, width: 32, height: 24}\n"
             "  - {op: pad, width: 32, height: 32}\n  - {op: convert_color}\n  - {op: normalize}\n"
             "  - {op: layout}\n" +
                 rest);
  const std::string pre = kSource + "/tests/ocr/rec.yaml";
  const CommandResult a = npusim({"run", "demo", "--precision", "fp32", "--pipeline", dir + "/bare.yaml",
                                  "--preprocess", pre, "--report", dir + "/a.json"});
  ASSERT_EQ(a.exit_code, 0) << a.err;
  const CommandResult b = npusim({"run", "demo", "-q", "--precision", "fp32", "--pipeline",
                                  dir + "/written.yaml", "--report", dir + "/b.json"});
  ASSERT_EQ(b.exit_code, 0) << b.err;
  const std::string stages =
      "[(s['name'], s['op'], s['unit'], s['elements'], s['cycles']) for s in r['e2e']['stages']]";
  EXPECT_EQ(json_eval(dir + "/a.json", stages), json_eval(dir + "/b.json", stages));
  EXPECT_EQ(json_eval(dir + "/a.json", "[s['op'] for s in r['e2e']['stages'] if s['kind'] == 'pre']"),
            "['resize', 'pad', 'convert_color', 'normalize', 'layout']");
  // The pad stores the 32x8 rows the image does not cover, 3 channels each.
  EXPECT_EQ(json_eval(dir + "/a.json", "[s['elements'] for s in r['e2e']['stages'] if s['op'] == 'pad']"),
            "[768]");
  EXPECT_NE(a.out.find("note: pre-processing: the steps of " + pre), std::string::npos) << a.out;
  // --preprocess-on npu: the element-wise steps run on the NPU after the transfer, which then carries the
  // resized 8-bit pixels (a quarter of the float32 input's bytes), as vendors' AIPP does.
  const CommandResult npu =
      npusim({"run", "demo", "-q", "--precision", "fp32", "--pipeline", dir + "/bare.yaml", "--preprocess",
              pre, "--preprocess-on", "npu", "--report", dir + "/npu.json"});
  ASSERT_EQ(npu.exit_code, 0) << npu.err;
  EXPECT_EQ(json_eval(dir + "/npu.json",
                      "[(s['op'], s['unit']) for s in r['e2e']['stages'] if s['kind'] == 'pre']"),
            "[('resize', 'host_cpu'), ('pad', 'host_cpu'), ('convert_color', 'npu'), ('normalize', 'npu'), "
            "('layout', 'npu')]");
  EXPECT_EQ(json_eval(dir + "/npu.json", "r['e2e']['input']['bytes'] * 4"),
            json_eval(dir + "/a.json", "r['e2e']['input']['bytes']"));
  for (const std::vector<std::string>& bad :
       {std::vector<std::string>{"--preprocess-on", "npu", "--preprocess", pre},
        std::vector<std::string>{"--preprocess-on", "gpu", "--preprocess", pre, "--pipeline",
                                 dir + "/bare.yaml"}}) {
    std::vector<std::string> args = {"run", "demo", "-q"};
    args.insert(args.end(), bad.begin(), bad.end());
    const CommandResult r = npusim(args);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("--preprocess-on"), std::string::npos) << r.err;
  }
  // Both at once: exit 2, give one.
  const CommandResult both =
      npusim({"run", "demo", "--pipeline", dir + "/written.yaml", "--preprocess", pre});
  EXPECT_EQ(both.exit_code, 2);
  EXPECT_NE(both.err.find(
                "written.yaml has pre: stages and --preprocess describes the pre-processing too; give one"),
            std::string::npos)
      << both.err;
}

TEST(PipelineCli, TheShippedPipelinesRun) {
  for (const char* p : {"classifier", "detector"}) {
    const CommandResult r =
        npusim({"run", "demo", "-q", "--pipeline", kSource + "/configs/pipelines/" + p + ".yaml"});
    EXPECT_EQ(r.exit_code, 0) << p << ": " << r.err;
  }
}

}  // namespace
}  // namespace npusim::test
