// End-to-end pipelines (sim/e2e): the pipeline file's validation, the kernel costs, the stages of one
// inference (copies, the misaligned buffer's extra copy, NPU-inserted stages) and the stream model's
// invariants.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "isa/machine/config.h"
#include "isa/program.h"
#include "sim/e2e/kernels.h"
#include "sim/e2e/pipeline.h"
#include "sim/e2e/pipeline_spec.h"
#include "sim/e2e/preprocess_stages.h"

namespace npusim::sim::e2e {
namespace {

// The messages of the PipelineError `text` raises ("" when it parses).
std::string errors_of(const std::string& text) {
  try {
    parse_pipeline_text(text, "p.yaml");
  } catch (const PipelineError& e) {
    return e.what();
  }
  return "";
}

// The kernels and sizes of a --preprocess description's steps (docs/e2e.md, "Pre-processing from
// --preprocess").
std::string stages_of(const compiler::Preprocess& p, const compiler::Shape& input) {
  std::string out;
  for (const StageSpec& s : preprocess_stages(p, input)) {
    out += (out.empty() ? "" : " ") + s.name;
    if (s.kernel == Kernel::kResize)
      out += "(" + std::to_string(s.width) + "x" + std::to_string(s.height) + (s.nearest ? " nearest)" : ")");
  }
  return out;
}

TEST(PreprocessStages, EachStepOfTheDescriptionIsAStage) {
  using compiler::Preprocess;
  // PaddleOCR's recogniser (tests/ocr/rec.yaml): letterbox, BGR, (x / 255 - 0.5) / 0.5, NCHW float32.
  Preprocess rec;
  rec.resize = Preprocess::Resize::kLetterbox;
  rec.channel_order = Preprocess::ChannelOrder::kBgr;
  rec.mean = {0.5, 0.5, 0.5};
  rec.std = {0.5, 0.5, 0.5};
  EXPECT_EQ(stages_of(rec, {1, 3, 48, 320}), "resize(320x48) convert_color normalize layout");
  // With the frame known, a letterbox resizes to the region the frame covers and pads the rest: a 640x480
  // frame into 320x48 scales by min(320/640, 48/480) = 0.1 to 64x48 (compiler::image_region).
  std::string framed;
  for (const StageSpec& st : preprocess_stages(rec, {1, 3, 48, 320}, Placement::kHost, 640, 480))
    framed += st.name + "(" + std::to_string(st.width) + "x" + std::to_string(st.height) + ") ";
  EXPECT_EQ(framed, "resize(64x48) pad(320x48) convert_color(0x0) normalize(0x0) layout(0x0) ");
  // A stretch covers the whole input whatever the frame: no pad.
  EXPECT_EQ(stages_of(Preprocess{}, {1, 3, 224, 224}), "resize(224x224) normalize layout");
  // A batch of 4 is four frames of one image each.
  EXPECT_EQ(stages_of(rec, {4, 3, 48, 320}), "resize(320x48) convert_color normalize layout");
  // RGB with the defaults (x / 255, NCHW float32): no colour stage.
  EXPECT_EQ(stages_of(Preprocess{}, {1, 3, 224, 224}), "resize(224x224) normalize layout");
  // An int8 model that takes the pixels as they are, NHWC, nearest resize: the resize alone.
  Preprocess raw;
  raw.interpolation = Preprocess::Interpolation::kNearest;
  raw.scale = 1;
  raw.layout = Preprocess::Layout::kNhwc;
  raw.dtype = Preprocess::Dtype::kUint8;
  EXPECT_EQ(stages_of(raw, {1, 96, 128, 3}), "resize(128x96 nearest)");
  // The same pixels into a float32 input: a cast; without resizing, no resize stage; one channel: grey.
  raw.dtype = Preprocess::Dtype::kFloat32;
  raw.resize = Preprocess::Resize::kNone;
  EXPECT_EQ(stages_of(raw, {1, 96, 128, 3}), "cast");
  raw.layout = Preprocess::Layout::kNchw;
  EXPECT_EQ(stages_of(raw, {1, 1, 28, 28}), "convert_color cast layout");
  // On the NPU (AIPP): the element-wise steps move, the resize stays on the host.
  std::string where;
  for (const StageSpec& st : preprocess_stages(rec, {1, 3, 48, 320}, Placement::kNpu))
    where += st.name + (st.on == Placement::kNpu ? "@npu " : "@host ");
  EXPECT_EQ(where, "resize@host convert_color@npu normalize@npu layout@npu ");
  where.clear();
  for (const StageSpec& st : preprocess_stages(rec, {1, 3, 48, 320}, Placement::kNpu, 640, 480))
    where += st.name + (st.on == Placement::kNpu ? "@npu " : "@host ");
  EXPECT_EQ(where, "resize@host pad@host convert_color@npu normalize@npu layout@npu ");
  // An input that is not an image.
  EXPECT_THROW(preprocess_stages(rec, {3, 48, 320}), compiler::PreprocessError);
}

TEST(PipelineSpec, ParsesEveryKey) {
  const PipelineSpec p = parse_pipeline_text(R"(
frame: {width: 640, height: 480, channels: 3, bytes_per_element: 1}
pre:
  - {op: resize, width: 224, height: 224, mode: nearest}
  - {op: normalize, on: npu, name: norm}
input: {transfer: zero_copy, host_alignment_bytes: 4}
output: {transfer: copy}
post:
  - {op: nms, boxes: 100}
  - {op: topk, k: 5, elements: 1000}
  - {op: ctc_greedy, timesteps: 32, classes: 37}
  - {op: argmax}
  - {op: fixed, time_us: 12.5}
stream: {frames: 10, rate_fps: 30, buffers: 1, batch: 2}
)",
                                             "p.yaml");
  EXPECT_EQ(p.frame_width, 640);
  ASSERT_EQ(p.pre.size(), 2u);
  EXPECT_TRUE(p.pre[0].nearest);
  EXPECT_EQ(p.pre[1].name, "norm");
  EXPECT_EQ(p.pre[1].on, Placement::kNpu);
  EXPECT_TRUE(p.input.zero_copy);
  EXPECT_EQ(p.input.host_alignment_bytes, 4);
  EXPECT_FALSE(p.output.zero_copy);
  ASSERT_EQ(p.post.size(), 5u);
  EXPECT_EQ(p.post[2].classes, 37);
  EXPECT_DOUBLE_EQ(p.post[4].time_us, 12.5);
  EXPECT_TRUE(p.stream.enabled);
  EXPECT_EQ(p.stream.batch, 2);
  EXPECT_EQ(p.stream.buffers, 1);
}

TEST(PipelineSpec, ErrorsNameFileLineColumnAndKey) {
  EXPECT_EQ(errors_of("fram: {width: 1, height: 1}\n"),
            "p.yaml:1:1: fram: unknown key (did you mean 'frame'?)");
  EXPECT_EQ(errors_of("stream:\n  frames: -3\n"),
            "p.yaml:2:11: stream.frames: -3 is out of range (1..1000000)");
  EXPECT_EQ(errors_of("stream:\n  rate_fps: fast\n"), "p.yaml:2:13: stream.rate_fps: 'fast' is not a number");
  EXPECT_EQ(errors_of("input:\n  transfer: dma\n"),
            "p.yaml:2:13: input.transfer: 'dma' is neither 'copy' nor 'zero_copy'");
  EXPECT_EQ(errors_of("post:\n  - op: nms\n"), "p.yaml:2:5: post[0].boxes: missing (nms needs boxes)");
  EXPECT_EQ(errors_of("post:\n  - {op: nms, boxes: 10, k: 3}\n"),
            "p.yaml:2:26: post[0].k: nms takes no 'k' (its keys: name, op, on, boxes)");
  EXPECT_EQ(errors_of("post:\n  - {op: nsm, boxes: 10}\n"),
            "p.yaml:2:10: post[0].op: 'nsm' is not a kernel (did you mean 'nms'?)");
  EXPECT_EQ(errors_of("pre:\n  - {op: resize, width: 2, height: 2, on: npu}\n"),
            "p.yaml:2:43: pre[0].on: resize cannot run on the NPU's vector unit (normalize, convert_color, "
            "layout and "
            "cast can)");
  EXPECT_EQ(
      errors_of("pre:\n  - {op: cast, on: npu}\n  - {op: layout}\n"),
      "p.yaml:3:5: pre[1].on: a host stage after an NPU stage; the NPU stages run after the input transfer, "
      "so they come last");
  EXPECT_EQ(errors_of("stream:\n  batch: 2.5\n"), "p.yaml:2:10: stream.batch: '2.5' is not an integer");
  EXPECT_EQ(errors_of("pre:\n  - {op: pad, width: 8}\n"),
            "p.yaml:2:5: pre[0].height: missing (pad needs width, height)");
  // Every problem at once.
  const std::string two = errors_of("frame: {width: 0, height: 1}\nstream: {buffer: 2}\n");
  EXPECT_NE(two.find("p.yaml:1:16: frame.width: 0 is out of range"), std::string::npos) << two;
  EXPECT_NE(two.find("p.yaml:2:10: stream.buffer: unknown key (did you mean 'buffers'?)"), std::string::npos)
      << two;
}

TEST(E2eKernels, CostsFollowTheirSize) {
  KernelWork w;
  w.elements = 1000;
  EXPECT_EQ(host_ops(Kernel::kNormalize, w), 2000);
  EXPECT_EQ(host_ops(Kernel::kResize, w), 10000);
  EXPECT_EQ(host_ops(Kernel::kPad, w), 1000);  // one store per padded element
  EXPECT_FALSE(runs_on_npu(Kernel::kPad));
  w.nearest = true;
  EXPECT_EQ(host_ops(Kernel::kResize, w), 2000);
  w.k = 8;  // log2(8) = 3 sift levels
  EXPECT_EQ(host_ops(Kernel::kTopk, w), 4000);
  KernelWork nms;
  nms.boxes = 100;  // 2 * 100 * 7 sort + 4950 pairs * 12
  EXPECT_EQ(host_ops(Kernel::kNms, nms), 1400 + 4950 * 12);
  nms.boxes = 200;  // quadratic in the boxes
  EXPECT_GT(host_ops(Kernel::kNms, nms), 3.9 * (1400 + 4950 * 12));
  KernelWork ctc;
  ctc.timesteps = 32;
  ctc.classes = 37;
  EXPECT_EQ(host_ops(Kernel::kCtcGreedy, ctc), 32 * 37 + 64);
  // On the NPU: the vector unit's timing, normalize twice a copy-like pass.
  isa::VectorConfig v;
  EXPECT_EQ(npu_cycles(Kernel::kCast, 3200, v),
            v.ops[0].latency_cycles + 3200 / v.lanes * v.ops[0].ii_cycles);
  EXPECT_GT(npu_cycles(Kernel::kNormalize, 3200, v), npu_cycles(Kernel::kCast, 3200, v));
}

// A program with one uint8... float input of 1x3x224x224 and a 1x1000 output.
isa::Program toy_program(int64_t batch = 1) {
  isa::Program p;
  isa::TensorBinding in;
  in.name = "x";
  in.dtype = isa::DType::kFp32;
  in.dims = {static_cast<uint64_t>(batch), 3, 224, 224};
  isa::TensorBinding out;
  out.name = "y";
  out.role = isa::TensorBinding::Role::kOutput;
  out.dtype = isa::DType::kFp32;
  out.dims = {static_cast<uint64_t>(batch), 1000};
  p.tensors = {in, out};
  return p;
}

const Stage* find(const E2eResult& r, const std::string& op) {
  for (const Stage& s : r.stages)
    if (s.op == op) return &s;
  return nullptr;
}

TEST(E2ePipeline, MisalignedZeroCopyCostsAnExtraCopy) {
  const isa::NpuConfig config;  // dma.alignment_bytes 64
  const std::string base =
      "frame: {width: 640, height: 480}\npre:\n  - {op: resize, width: 224, height: 224}\n";
  E2eResult aligned = plan_pipeline(
      parse_pipeline_text(base + "input: {transfer: zero_copy, host_alignment_bytes: 128}\n", "p"),
      toy_program(), config, 1);
  E2eResult misaligned = plan_pipeline(
      parse_pipeline_text(base + "input: {transfer: zero_copy, host_alignment_bytes: 16}\n", "p"),
      toy_program(), config, 1);
  add_npu_run(aligned, 100000, 0);
  add_npu_run(misaligned, 100000, 0);
  EXPECT_EQ(find(aligned, "bounce_copy"), nullptr);
  EXPECT_TRUE(aligned.input.aligned);
  EXPECT_EQ(aligned.input.extra_copy_bytes, 0);
  const Stage* bounce = find(misaligned, "bounce_copy");
  ASSERT_NE(bounce, nullptr);
  EXPECT_FALSE(misaligned.input.aligned);
  EXPECT_EQ(misaligned.input.extra_copy_bytes, 3 * 224 * 224 * 4);
  EXPECT_GT(bounce->cycles, 0);
  EXPECT_EQ(misaligned.latency_cycles, aligned.latency_cycles + bounce->cycles);
  // The transfer itself is the link model's: 2 us + 602112 B / 4 GB/s at 1 GHz.
  const Stage* link = find(aligned, "transfer");
  ASSERT_NE(link, nullptr);
  EXPECT_EQ(link->cycles, 2000 + 150528);
}

TEST(E2ePipeline, StagesAddUpAndTheNpuShareLeavesOutFallbacks) {
  const isa::NpuConfig config;
  E2eResult r = plan_pipeline(parse_pipeline_text(R"(
frame: {width: 640, height: 480}
pre:
  - {op: resize, width: 224, height: 224}
  - {op: normalize, on: npu}
post:
  - {op: topk, k: 5}
  - {op: fixed, time_us: 100}
)",
                                                  "p"),
                              toy_program(), config, 1);
  add_npu_run(r, 500000, 100000);
  int64_t sum = 0, npu = 0;
  for (const Stage& s : r.stages) {
    EXPECT_EQ(s.start_cycle, sum) << s.name;
    sum += s.cycles;
    if (s.unit == "npu") npu += s.cycles - s.fallback_cycles;
  }
  EXPECT_EQ(r.latency_cycles, sum);
  EXPECT_EQ(r.npu_cycles, npu);
  EXPECT_EQ(r.stages[r.model_stage].cycles, 500000);
  // The NPU normalises: the link carries the uint8 frame after the resize, not the model's float input.
  const Stage* link = find(r, "transfer");
  ASSERT_NE(link, nullptr);
  EXPECT_EQ(link->bytes, 224 * 224 * 3);
  const Stage* topk = find(r, "topk");
  ASSERT_NE(topk, nullptr);
  EXPECT_EQ(topk->elements, 1000);  // the model's output per frame
  EXPECT_EQ(find(r, "fixed")->cycles, 100000);
  // The NPU's input buffers hold the model's float input the NPU stages write, not the link's uint8 bytes.
  StreamSpec spec;
  spec.enabled = true;
  spec.frames = 4;
  EXPECT_EQ(simulate_stream(r, spec).npu_buffer_bytes, 2 * (3 * 224 * 224 * 4 + 1000 * 4));
  EXPECT_NE(e2e_json(r).find("\"critical_path\": [\"resize\", \"input copy\""), std::string::npos)
      << e2e_json(r);
}

// A pipeline whose stages take the given times (cycles), for the stream tests.
E2eResult stages_of(int64_t pre, int64_t link_in, int64_t npu, int64_t link_out, int64_t post,
                    int64_t batch) {
  E2eResult r;
  r.frequency_mhz = 1000;
  r.batch = batch;
  auto add = [&](Resource res, int64_t c, bool per_frame) {
    Stage s;
    s.resource = res;
    s.run_cycles = c;
    s.per_frame = per_frame;
    r.stages.push_back(s);
  };
  add(Resource::kHostPre, pre, true);
  add(Resource::kLinkIn, link_in, false);
  r.model_stage = r.stages.size();
  add(Resource::kNpu, npu, false);
  add(Resource::kLinkOut, link_out, false);
  add(Resource::kHostPost, post, true);
  return r;
}

TEST(E2eStream, ThroughputNeverExceedsTheSlowestStage) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int64_t> cycles(1, 50000);
  for (int trial = 0; trial < 300; ++trial) {
    const int64_t batch = 1 + trial % 4;
    E2eResult r = stages_of(cycles(rng), cycles(rng), cycles(rng) * batch, cycles(rng), cycles(rng), batch);
    StreamSpec spec;
    spec.enabled = true;
    spec.frames = 1 + trial % 37;
    spec.buffers = 1 + trial % 3;
    spec.rate_fps = trial % 2 ? 0 : 1000.0 * (1 + trial % 50);
    const StreamResult s = simulate_stream(r, spec);
    EXPECT_LE(s.throughput_fps, s.bound_fps * (1 + 1e-9)) << "trial " << trial;
    for (int64_t l : s.latency_cycles) EXPECT_GT(l, 0);
  }
}

TEST(E2eStream, DoubleBufferingOverlapsTransfersWithTheNpuAndFindsTheBound) {
  E2eResult r = stages_of(1000, 40000, 50000, 10000, 1000, 1);
  StreamSpec spec;
  spec.enabled = true;
  spec.frames = 200;
  spec.buffers = 1;
  const StreamResult single = simulate_stream(r, spec);
  spec.buffers = 2;
  const StreamResult dbl = simulate_stream(r, spec);
  EXPECT_EQ(dbl.bounding_stage, "npu");
  EXPECT_NEAR(dbl.bound_fps, 1e9 / 50000, 1e-6);
  // Single buffering: the next input waits for the NPU, so link in + NPU serialise (~90k cycles a frame).
  EXPECT_LT(single.throughput_fps, 1e9 / 89000);
  // Double buffering approaches the NPU's rate.
  EXPECT_GT(dbl.throughput_fps, 0.97 * dbl.bound_fps);
  // At a rate below the bound every frame takes the same time: p99 = p50 = one frame's path.
  spec.rate_fps = 10000;
  const StreamResult paced = simulate_stream(r, spec);
  EXPECT_EQ(paced.latency_p50_ms, paced.latency_p99_ms);
  EXPECT_NEAR(paced.latency_p50_ms, (1000 + 40000 + 50000 + 10000 + 1000) / 1e6, 1e-9);
  EXPECT_EQ(paced.npu_buffer_bytes, 0);  // the toy stages move no bytes
}

TEST(E2eStream, BatchingTradesLatencyForThroughput) {
  // The NPU takes 60k cycles for one frame and 100k for a batch of four.
  StreamSpec spec;
  spec.enabled = true;
  spec.frames = 400;
  const StreamResult one = simulate_stream(stages_of(1000, 5000, 60000, 1000, 1000, 1), spec);
  const StreamResult four = simulate_stream(stages_of(1000, 5000, 100000, 1000, 1000, 4), spec);
  EXPECT_GT(four.throughput_fps, 2 * one.throughput_fps);
  EXPECT_GT(four.latency_p50_ms, one.latency_p50_ms);
}

}  // namespace
}  // namespace npusim::sim::e2e
