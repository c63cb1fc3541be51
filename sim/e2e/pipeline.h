#pragma once
// Costing an end-to-end pipeline (docs/e2e.md): every stage of one inference in cycles at the NPU's
// clock (host kernels at host.cpu_gops, copies and link transfers by the host link model of
// isa/timing/units.h, NPU-inserted stages by the vector unit's timing, the model by the simulation),
// the report's `e2e` section and its summary, and a stream of frames through the stages with bounded
// buffers and batching.
#include <cstdint>
#include <string>
#include <vector>

#include "isa/machine/config.h"
#include "isa/program.h"
#include "sim/e2e/pipeline_spec.h"
#include "traces/report_visitor.h"

namespace npusim::sim::e2e {

// The resources a stream's stages occupy; each serves one job at a time, in frame order.
enum class Resource { kHostPre, kLinkIn, kNpu, kLinkOut, kHostPost };
inline constexpr int kNumResources = 5;
// "host_cpu_pre", "host_link_in", "npu", "host_link_out", "host_cpu_post".
std::string_view resource_name(Resource r);

// One stage of one inference (a batch of frames).
struct Stage {
  std::string name;
  std::string kind;  // "pre", "input", "model", "output", "post"
  std::string unit;  // "host_cpu", "host_link", "npu"
  std::string op;    // a kernel name, "copy", "bounce_copy", "transfer", "model"
  Resource resource = Resource::kHostPre;
  bool per_frame =
      true;  // pre/post kernels and copies run once per frame; transfers and the model once per batch
  int64_t elements = 0;         // per frame (kernels)
  int64_t ops = 0;              // host CPU operations per frame (host kernels)
  int64_t bytes = 0;            // bytes moved per run (copies: per frame; transfers: per batch)
  int64_t run_cycles = 0;       // one run: per frame, or per batch
  int64_t cycles = 0;           // in one inference: run_cycles x batch for per-frame stages
  int64_t start_cycle = 0;      // in one inference, stages back to back
  int64_t fallback_cycles = 0;  // the model: its host fallbacks (CPU fallbacks inside the NPU run)
};

// How one direction crossed the host link.
struct TransferInfo {
  bool zero_copy = false;
  int64_t bytes = 0;  // per batch
  int64_t host_alignment_bytes = 0;
  int64_t dma_alignment_bytes = 0;
  bool aligned = true;
  int64_t extra_copy_bytes = 0;  // zero_copy with a misaligned buffer: the bounce copy (per batch)
  int64_t extra_copy_cycles = 0;
};

// The stream's figures (docs/e2e.md "Streams").
struct StreamResult {
  int64_t frames = 0;
  double rate_fps = 0;  // 0: back to back
  int64_t batch = 1;
  int64_t buffers = 2;
  double throughput_fps = 0;
  double bound_fps = 0;        // 1 / the slowest stage's time per frame
  std::string bounding_stage;  // resource_name of that stage
  double latency_p50_ms = 0, latency_p99_ms = 0, latency_max_ms = 0;
  std::vector<double> per_frame_us;  // per resource: busy time per frame
  std::vector<double> utilization;   // per resource: busy / span
  // buffers x (input + output bytes of a batch) in the NPU's DRAM; with NPU-inserted stages the input
  // side holds the larger of what crosses the link and the model's input.
  int64_t npu_buffer_bytes = 0;
  int64_t frames_in_flight_max = 0;     // captured but not yet post-processed
  int64_t host_frame_bytes_max = 0;     // frames_in_flight_max x the frame's bytes
  std::vector<int64_t> latency_cycles;  // per frame, in order
  int64_t span_cycles = 0;              // first capture to last completion
};

struct E2eResult {
  std::string pipeline;  // the file
  double frequency_mhz = 0;
  int64_t batch = 1;
  int64_t frame_bytes = 0;        // one frame as captured
  int64_t model_input_bytes = 0;  // the program's inputs (a batch): what NPU-inserted stages write
  std::vector<Stage> stages;
  size_t model_stage = 0;  // index of the model in `stages`
  TransferInfo input, output;
  std::vector<std::string> notes;
  StreamSpec stream_spec;
  // Filled by add_npu_run():
  int64_t latency_cycles = 0;
  int64_t npu_cycles = 0;  // NPU-inserted stages + the model without its host fallbacks
  bool stream_done = false;
  StreamResult stream;
  // The report's `e2e` section, field by field (traces/report_visitor.h).
  void visit(traces::ReportVisitor& v);
};

// The byte and element counts of the program's inputs and outputs (all of them, summed).
struct ModelIo {
  int64_t input_bytes = 0, output_bytes = 0;
  int64_t input_elements = 0, output_elements = 0;
  int64_t input_dtype_bytes = 4;  // of the first input
};
ModelIo model_io(const isa::Program& program);

// Costs every stage but the model's NPU run (its cycles are 0 until add_npu_run). `batch`: frames per
// inference (the batch the program was compiled for).
E2eResult plan_pipeline(const PipelineSpec& spec, const isa::Program& program, const isa::NpuConfig& config,
                        int64_t batch);

// The model's simulated cycles (and of them, its host fallbacks' time) into `r`: stage start cycles,
// the latency, the NPU's share and, when the pipeline has a stream, the stream.
void add_npu_run(E2eResult& r, int64_t model_cycles, int64_t fallback_cycles);

// Frames through the stages of `r` (model cycles set) as `spec` says: each resource serves one job at
// a time in frame order; `buffers` input and output buffers per direction bound how far a stage runs
// ahead; the NPU and the link take a batch at a time.
StreamResult simulate_stream(const E2eResult& r, const StreamSpec& spec);

// The nearest-rank percentile `p` (0..100] of ascending `sorted` values (0 when empty).
int64_t percentile(const std::vector<int64_t>& sorted, double p);

// The report's `e2e` section (a JSON object) and the summary lines.
std::string e2e_json(const E2eResult& r);
std::string e2e_text(const E2eResult& r);

}  // namespace npusim::sim::e2e
