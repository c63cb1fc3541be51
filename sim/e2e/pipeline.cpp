#include "sim/e2e/pipeline.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "isa/ceil_div.h"
#include "isa/json_text.h"
#include "isa/timing/units.h"
#include "sim/e2e/preprocess_stages.h"

namespace npusim::sim::e2e {
namespace {

constexpr std::array<std::string_view, kNumResources> kResourceNames = {"host_cpu_pre", "host_link_in", "npu",
                                                                        "host_link_out", "host_cpu_post"};

}  // namespace

int64_t percentile(const std::vector<int64_t>& sorted, double p) {
  if (sorted.empty()) return 0;
  size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(sorted.size())));
  rank = std::clamp<size_t>(rank, 1, sorted.size());
  return sorted[rank - 1];
}

std::string_view resource_name(Resource r) { return kResourceNames[static_cast<size_t>(r)]; }

ModelIo model_io(const isa::Program& program) {
  ModelIo io;
  bool first = true;
  for (const isa::TensorBinding& t : program.tensors) {
    int64_t n = 1;
    for (uint64_t d : t.dims) n *= static_cast<int64_t>(d);
    const int64_t bytes = n * isa::dtype_bytes(t.dtype);
    if (t.role == isa::TensorBinding::Role::kInput) {
      io.input_bytes += bytes;
      io.input_elements += n;
      if (first) io.input_dtype_bytes = isa::dtype_bytes(t.dtype);
      first = false;
    } else {
      io.output_bytes += bytes;
      io.output_elements += n;
    }
  }
  return io;
}

namespace {

// The first input binding's dims (logical, batch first).
compiler::Shape model_input_shape(const isa::Program& program) {
  for (const isa::TensorBinding& t : program.tensors)
    if (t.role == isa::TensorBinding::Role::kInput) return compiler::Shape(t.dims.begin(), t.dims.end());
  return {};
}

}  // namespace

E2eResult plan_pipeline(const PipelineSpec& spec, const isa::Program& program, const isa::NpuConfig& config,
                        int64_t batch) {
  E2eResult r;
  r.pipeline = spec.path;
  r.frequency_mhz = config.frequency_mhz;
  r.batch = std::max<int64_t>(1, batch);
  r.stream_spec = spec.stream;
  const double f = config.frequency_mhz;
  const isa::HostConfig& host = config.host;
  const ModelIo io = model_io(program);
  r.model_input_bytes = io.input_bytes;

  // The data as it flows through the pre-processing stages: elements per frame and their size.
  int64_t elements = io.input_elements / r.batch;
  int64_t bpe = io.input_dtype_bytes;
  int64_t channels = spec.frame_channels;
  if (spec.frame_width > 0) {
    elements = spec.frame_width * spec.frame_height * spec.frame_channels;
    bpe = spec.frame_bytes_per_element;
  }
  r.frame_bytes = elements * bpe;

  auto add_kernel = [&](const StageSpec& s, const std::string& kind, int64_t n) {
    Stage st;
    st.name = s.name;
    st.kind = kind;
    st.op = std::string(kernel_name(s.kernel));
    st.elements = n;
    KernelWork w;
    w.elements = n;
    w.k = s.k;
    w.boxes = s.boxes;
    w.timesteps = s.timesteps;
    w.classes = s.classes;
    w.nearest = s.nearest;
    if (s.kernel == Kernel::kNms) st.elements = s.boxes;
    if (s.kernel == Kernel::kCtcGreedy) st.elements = s.timesteps * s.classes;
    if (s.kernel == Kernel::kFixed) st.elements = 0;
    if (s.on == Placement::kNpu) {
      st.unit = "npu";
      st.resource = Resource::kNpu;
      st.run_cycles = npu_cycles(s.kernel, n, config.vector);
    } else {
      st.unit = "host_cpu";
      st.resource = kind == "pre" ? Resource::kHostPre : Resource::kHostPost;
      st.ops = host_ops(s.kernel, w);
      st.run_cycles = s.kernel == Kernel::kFixed ? isa::timing::us_to_cycles(s.time_us, f)
                                                 : isa::timing::host_cpu_cycles(st.ops, host, f);
    }
    r.stages.push_back(st);
  };

  // Pre-processing on the host; the bytes that cross the link are the data at the first NPU stage.
  std::vector<StageSpec> pre = spec.pre;
  if (spec.preprocess) {
    pre = preprocess_stages(*spec.preprocess, model_input_shape(program), spec.preprocess_on,
                            spec.frame_width, spec.frame_height);
    r.notes.push_back(
        fmt::format("pre-processing: the steps of {} (resize on the host; colour, normalisation "
                    "and layout on the {})",
                    spec.preprocess_source, spec.preprocess_on == Placement::kNpu ? "NPU" : "host"));
  }
  int64_t transfer_bytes = io.input_bytes;
  bool npu_pre = false;
  std::vector<const StageSpec*> npu_stages;
  for (const StageSpec& s : pre) {
    if (s.on == Placement::kNpu && !npu_pre) {
      npu_pre = true;
      transfer_bytes = elements * bpe * r.batch;
    }
    int64_t work = elements;  // what the stage works on: the padded elements of a pad
    if (s.kernel == Kernel::kResize) elements = work = s.width * s.height * channels;
    if (s.kernel == Kernel::kPad) {
      work = std::max<int64_t>(0, s.width * s.height * channels - elements);
      elements = s.width * s.height * channels;
    }
    if (s.on == Placement::kNpu) {
      npu_stages.push_back(&s);
      if (s.kernel == Kernel::kNormalize || s.kernel == Kernel::kCast) bpe = io.input_dtype_bytes;
      continue;
    }
    add_kernel(s, "pre", work);
    if (s.kernel == Kernel::kNormalize || s.kernel == Kernel::kCast) bpe = io.input_dtype_bytes;
  }
  if (spec.frame_width > 0 && elements * r.batch != io.input_elements) {
    r.notes.push_back(
        fmt::format("pre-processing ends at {} elements per frame, but the model's inputs hold {} per frame; "
                    "the transfers use "
                    "the model's input bytes",
                    elements, io.input_elements / r.batch));
  }

  // The input: a host copy (copy mode), or a bounce copy (zero-copy from a misaligned buffer), then the link.
  auto transfer = [&](const TransferSpec& t, int64_t bytes, bool in, TransferInfo& info) {
    info.zero_copy = t.zero_copy;
    info.bytes = bytes;
    info.host_alignment_bytes = t.host_alignment_bytes;
    info.dma_alignment_bytes = config.dma.alignment_bytes;
    info.aligned = t.host_alignment_bytes % config.dma.alignment_bytes == 0;
    const std::string dir = in ? "input" : "output";
    Stage copy;
    copy.kind = dir;
    copy.unit = "host_cpu";
    copy.resource = in ? Resource::kHostPre : Resource::kHostPost;
    copy.bytes = bytes / r.batch;
    copy.run_cycles = isa::timing::host_copy_cycles(copy.bytes, host, f);
    if (!t.zero_copy) {
      copy.name = dir + " copy";
      copy.op = "copy";
    } else if (!info.aligned) {
      copy.name = dir + " bounce copy (misaligned buffer)";
      copy.op = "bounce_copy";
      info.extra_copy_bytes = bytes;
      info.extra_copy_cycles = copy.run_cycles * r.batch;
    }
    Stage link;
    link.name = dir + " transfer";
    link.kind = dir;
    link.unit = "host_link";
    link.op = "transfer";
    link.resource = in ? Resource::kLinkIn : Resource::kLinkOut;
    link.per_frame = false;
    link.bytes = bytes;
    const isa::timing::HostCycles hc = isa::timing::host_cycles(in ? bytes : 0, in ? 0 : bytes, 0, host, f);
    link.run_cycles = in ? hc.link_in : hc.link_out;
    const bool has_copy = !copy.op.empty();
    if (in) {
      if (has_copy) r.stages.push_back(copy);
      r.stages.push_back(link);
    } else {
      r.stages.push_back(link);
      if (has_copy) r.stages.push_back(copy);
    }
  };
  transfer(spec.input, transfer_bytes, true, r.input);

  // Pre-processing inserted on the NPU, then the model.
  for (const StageSpec* s : npu_stages) {
    add_kernel(*s, "pre", s->kernel == Kernel::kResize ? s->width * s->height * channels : elements);
    r.stages.back().per_frame = true;
  }
  Stage model;
  model.name = "model";
  model.kind = "model";
  model.unit = "npu";
  model.op = "model";
  model.resource = Resource::kNpu;
  model.per_frame = false;
  r.model_stage = r.stages.size();
  r.stages.push_back(model);

  transfer(spec.output, io.output_bytes, false, r.output);
  const int64_t out_elements = io.output_elements / r.batch;
  for (const StageSpec& s : spec.post) {
    const int64_t n = s.elements > 0 ? s.elements : out_elements;
    add_kernel(s, "post", n);
  }
  return r;
}

void add_npu_run(E2eResult& r, int64_t model_cycles, int64_t fallback_cycles) {
  Stage& m = r.stages[r.model_stage];
  m.run_cycles = model_cycles;
  m.fallback_cycles = fallback_cycles;
  int64_t t = 0;
  r.npu_cycles = 0;
  for (Stage& s : r.stages) {
    s.cycles = s.per_frame ? s.run_cycles * r.batch : s.run_cycles;
    s.start_cycle = t;
    t += s.cycles;
    if (s.unit == "npu") r.npu_cycles += s.cycles - s.fallback_cycles;
  }
  r.latency_cycles = t;
  if (r.stream_spec.enabled) {
    r.stream = simulate_stream(r, r.stream_spec);
    r.stream_done = true;
  }
}

StreamResult simulate_stream(const E2eResult& r, const StreamSpec& spec) {
  StreamResult s;
  s.frames = spec.frames;
  s.rate_fps = spec.rate_fps;
  s.batch = r.batch;
  s.buffers = spec.buffers;
  const int64_t n = r.batch, frames = spec.frames, b = spec.buffers;
  // Per resource: cycles per frame (per-frame stages) and per batch (transfers, the model).
  std::array<int64_t, kNumResources> per_frame{}, per_batch{};
  for (const Stage& st : r.stages) {
    (st.per_frame ? per_frame : per_batch)[static_cast<size_t>(st.resource)] += st.run_cycles;
  }
  const int64_t pre = per_frame[0], post = per_frame[4];
  // The NPU's per-frame stages (inserted pre-processing) run on the batch, one frame after another.
  const int64_t link_in = per_batch[1], npu = per_batch[2] + per_frame[2] * n, link_out = per_batch[3];
  const double period = spec.rate_fps > 0 ? r.frequency_mhz * 1e6 / spec.rate_fps : 0;  // cycles

  const int64_t batches = ceil_div(frames, n);
  std::vector<int64_t> arrival(frames), done(frames);
  std::vector<int64_t> li_start(batches), npu_end(batches), lo_end(batches), post_end(batches);
  int64_t pre_free = 0, li_free = 0, npu_free = 0, lo_free = 0, post_free = 0;
  std::array<int64_t, kNumResources> busy{};
  for (int64_t k = 0; k < batches; ++k) {
    const int64_t first = k * n, last = std::min(frames, first + n);
    for (int64_t i = first; i < last; ++i) {
      // A host staging buffer per batch in flight: frame i waits for batch k - buffers to leave.
      int64_t earliest = period > 0 ? static_cast<int64_t>(std::llround(static_cast<double>(i) * period)) : 0;
      if (k >= b) earliest = std::max(earliest, li_start[k - b]);
      const int64_t start = std::max(earliest, pre_free);
      arrival[i] = period > 0 ? static_cast<int64_t>(std::llround(static_cast<double>(i) * period)) : start;
      pre_free = start + pre;
      busy[0] += pre;
    }
    // The input buffer (slot k mod buffers) is free once the NPU finished batch k - buffers.
    li_start[k] = std::max({pre_free, li_free, k >= b ? npu_end[k - b] : int64_t{0}});
    li_free = li_start[k] + link_in;
    busy[1] += link_in;
    // The output buffer is free once batch k - buffers left it.
    const int64_t npu_start = std::max({li_free, npu_free, k >= b ? lo_end[k - b] : int64_t{0}});
    npu_end[k] = npu_free = npu_start + npu;
    busy[2] += npu;
    // The host's output buffer is free once batch k - buffers is post-processed.
    const int64_t lo_start = std::max({npu_end[k], lo_free, k >= b ? post_end[k - b] : int64_t{0}});
    lo_end[k] = lo_free = lo_start + link_out;
    busy[3] += link_out;
    for (int64_t i = first; i < last; ++i) {
      post_free = std::max(lo_end[k], post_free) + post;
      done[i] = post_free;
      busy[4] += post;
    }
    post_end[k] = post_free;
  }

  const int64_t t0 = frames > 0 ? arrival[0] : 0;
  s.span_cycles = frames > 0 ? done[frames - 1] - t0 : 0;
  const double f_hz = r.frequency_mhz * 1e6;
  // Frames over the time they took; a paced stream lasts at least its frames' periods (the camera's time).
  const double duration = std::max(static_cast<double>(s.span_cycles), static_cast<double>(frames) * period);
  s.throughput_fps = duration > 0 ? static_cast<double>(frames) * f_hz / duration : 0;
  s.latency_cycles.resize(frames);
  for (int64_t i = 0; i < frames; ++i) s.latency_cycles[i] = done[i] - arrival[i];
  std::vector<int64_t> sorted = s.latency_cycles;
  std::sort(sorted.begin(), sorted.end());
  const double ms_per_cycle = 1e-3 / r.frequency_mhz;
  s.latency_p50_ms = static_cast<double>(percentile(sorted, 50)) * ms_per_cycle;
  s.latency_p99_ms = static_cast<double>(percentile(sorted, 99)) * ms_per_cycle;
  s.latency_max_ms = sorted.empty() ? 0 : static_cast<double>(sorted.back()) * ms_per_cycle;

  const std::array<double, kNumResources> frame_cycles = {
      static_cast<double>(pre), static_cast<double>(link_in) / static_cast<double>(n),
      static_cast<double>(npu) / static_cast<double>(n),
      static_cast<double>(link_out) / static_cast<double>(n), static_cast<double>(post)};
  size_t slowest = 0;
  for (size_t i = 0; i < frame_cycles.size(); ++i) {
    s.per_frame_us.push_back(frame_cycles[i] / r.frequency_mhz);
    s.utilization.push_back(
        s.span_cycles > 0 ? static_cast<double>(busy[i]) / static_cast<double>(s.span_cycles) : 0);
    if (frame_cycles[i] > frame_cycles[slowest]) slowest = i;
  }
  s.bounding_stage = std::string(kResourceNames[slowest]);
  s.bound_fps = frame_cycles[slowest] > 0 ? f_hz / frame_cycles[slowest] : 0;

  const int64_t in_bytes = r.input.bytes, out_bytes = r.output.bytes;
  s.npu_buffer_bytes = b * (std::max(in_bytes, r.model_input_bytes) + out_bytes);
  // Frames captured but not yet done: +1 at arrival, -1 at completion (completions first on ties).
  std::vector<std::pair<int64_t, int>> ev;
  for (int64_t i = 0; i < frames; ++i) {
    ev.emplace_back(arrival[i], 1);
    ev.emplace_back(done[i], -1);
  }
  std::sort(ev.begin(), ev.end());
  int64_t in_flight = 0;
  for (const auto& e : ev) {
    in_flight += e.second;
    s.frames_in_flight_max = std::max(s.frames_in_flight_max, in_flight);
  }
  s.host_frame_bytes_max = s.frames_in_flight_max * r.frame_bytes;
  return s;
}

void E2eResult::visit(traces::ReportVisitor& v) {
  using traces::Field;
  const double f = frequency_mhz;
  auto share = [&](int64_t cycles) {
    return latency_cycles > 0 ? static_cast<double>(cycles) / static_cast<double>(latency_cycles) : 0.0;
  };
  const std::vector<std::string_view> lanes(kResourceNames.begin(), kResourceNames.end());
  v.text({"pipeline", "", "the pipeline file"}, pipeline);
  v.integer({"batch", "frames", "frames per inference"}, batch);
  v.integer({"frame_bytes", "bytes", "one frame as captured"}, frame_bytes);
  v.integer({"latency_cycles", "cycles", "one inference end to end"}, latency_cycles);
  v.derived({"latency_ms", "ms", "latency_cycles at the NPU clock", 6}, latency_cycles / f / 1000.0);
  v.integer({"npu_cycles", "cycles", "NPU-inserted stages and the model without its host fallbacks"},
            npu_cycles);
  v.derived({"npu_share", "", "npu_cycles / latency_cycles", 6}, share(npu_cycles));
  v.list({"stages", "", "every stage of one inference, in order"}, stages, [&](Stage& s, size_t) {
    v.object({"", "", "a stage"}, [&] {
      v.text({"name", "", "the stage"}, s.name);
      v.text({"kind", "", "pre, input, model, output or post"}, s.kind);
      v.text({"unit", "", "host_cpu, host_link or npu"}, s.unit);
      v.text({"op", "", "a kernel name, copy, bounce_copy, transfer or model"}, s.op);
      size_t lane = static_cast<size_t>(s.resource);
      v.choice({"lane", "", "the resource the stage occupies in a stream"}, lane, lanes);
      if (v.fills()) s.resource = static_cast<Resource>(lane);
      v.boolean({"per_frame", "", "runs once per frame (else once per batch)"}, s.per_frame);
      v.integer({"elements", "elements", "per frame (kernels)"}, s.elements);
      v.integer({"ops", "operations", "host CPU operations per frame"}, s.ops);
      v.integer({"bytes", "bytes", "bytes moved per run"}, s.bytes);
      v.integer({"start_cycle", "cycle", "in one inference"}, s.start_cycle);
      v.integer({"cycles", "cycles", "in one inference"}, s.cycles);
      v.derived({"us", "us", "cycles at the NPU clock", 3}, s.cycles / f);
      v.derived({"share", "", "cycles / latency_cycles", 6}, share(s.cycles));
      if (s.kind == "model")
        v.integer({"fallback_cycles", "cycles", "the model's host fallbacks"}, s.fallback_cycles);
    });
  });
  if (!v.fills()) {
    std::vector<std::string> critical;
    const Stage* slowest = nullptr;
    for (const Stage& s : stages) {
      if (!slowest || s.cycles > slowest->cycles) slowest = &s;
      if (s.cycles > 0) critical.push_back(s.name);
    }
    v.list({"critical_path", "", "the stages that take time, in order"}, critical,
           [&](std::string& name, size_t) {
             v.derived({"", "", "a stage"}, name);
           });
    v.derived({"slowest_stage", "", "the stage with the most cycles"}, slowest ? slowest->name : "");
  }
  for (auto& [key, t] : {std::pair<const char*, TransferInfo*>{"input", &input}, {"output", &output}}) {
    v.object({key, "", "how this direction crossed the host link"}, [&] {
      if (!v.fills()) v.derived({"transfer", "", "zero_copy or copy"}, t->zero_copy ? "zero_copy" : "copy");
      v.integer({"bytes", "bytes", "per batch"}, t->bytes);
      v.integer({"host_alignment_bytes", "bytes", "the host buffer's alignment"}, t->host_alignment_bytes);
      v.integer({"dma_alignment_bytes", "bytes", "dma.alignment_bytes"}, t->dma_alignment_bytes);
      v.boolean({"aligned", "", "the buffer meets the DMA's alignment"}, t->aligned);
      v.integer({"extra_copy_bytes", "bytes", "zero-copy with a misaligned buffer: the bounce copy"},
                t->extra_copy_bytes);
      v.integer({"extra_copy_cycles", "cycles", "its time"}, t->extra_copy_cycles);
    });
  }
  v.list({"notes", "", "what the costing assumed"}, notes, [&](std::string& note, size_t) {
    v.text({"", "", "a note"}, note);
  });
  v.object(
      {"stream", "", "frames through the stages (docs/e2e.md, Streams)"},
      [&] {
        StreamResult& s = stream;
        v.integer({"frames", "frames", "frames sent"}, s.frames);
        v.real({"rate_fps", "frames/s", "the capture rate; 0: back to back"}, s.rate_fps);
        v.integer({"batch", "frames", "frames per NPU run"}, s.batch);
        v.integer({"buffers", "buffers", "input and output buffers per direction"}, s.buffers);
        v.real({"throughput_fps", "frames/s", "frames completed per second", 6}, s.throughput_fps);
        v.real({"bound_fps", "frames/s", "1 / the slowest stage's time per frame", 6}, s.bound_fps);
        v.text({"bounding_stage", "", "that stage's resource"}, s.bounding_stage);
        v.real({"latency_p50_ms", "ms", "capture to completion, median", 6}, s.latency_p50_ms);
        v.real({"latency_p99_ms", "ms", "capture to completion, 99th percentile", 6}, s.latency_p99_ms);
        v.real({"latency_max_ms", "ms", "capture to completion, the largest", 6}, s.latency_max_ms);
        v.integer({"npu_buffer_bytes", "bytes", "the buffers in the NPU's DRAM"}, s.npu_buffer_bytes);
        v.integer({"frames_in_flight_max", "frames", "captured but not yet post-processed, at most"},
                  s.frames_in_flight_max);
        v.integer({"host_frame_bytes_max", "bytes", "frames_in_flight_max x the frame's bytes"},
                  s.host_frame_bytes_max);
        const size_t n = v.begin_list({"resources", "", "each resource's load"}, s.per_frame_us.size(),
                                      traces::ReportVisitor::Layout::kInline);
        if (v.fills()) {
          s.per_frame_us.resize(n);
          s.utilization.resize(n);
        }
        for (size_t i = 0; i < n && i < s.per_frame_us.size() && i < s.utilization.size(); ++i) {
          v.element(i);
          v.object({"", "", "a resource"}, [&] {
            if (!v.fills()) v.derived({"name", "", "the resource"}, kResourceNames[i]);
            v.real({"us_per_frame", "us", "busy time per frame", 3}, s.per_frame_us[i]);
            v.real({"utilization", "", "busy / span", 6}, s.utilization[i]);
          });
        }
        v.end();
      },
      traces::ReportVisitor::Layout::kInline, stream_done);
}

std::string e2e_json(const E2eResult& r) {
  E2eResult copy = r;  // the writer only reads; visit() is the declaration every visitor walks
  return traces::section_json([&](traces::ReportVisitor& v) { copy.visit(v); });
}

std::string e2e_text(const E2eResult& r) {
  const double f = r.frequency_mhz;
  std::string t = fmt::format("\nend to end ({}): {:.3f} ms per inference of {} frame{}, NPU {:.1f}%\n",
                              r.pipeline, r.latency_cycles / f / 1000.0, r.batch, r.batch == 1 ? "" : "s",
                              r.latency_cycles > 0 ? 100.0 * r.npu_cycles / r.latency_cycles : 0.0);
  t += fmt::format("  {:<40} {:<10} {:>12} {:>7}\n", "stage", "unit", "time us", "share");
  for (const Stage& s : r.stages) {
    std::string name = s.name;
    if (s.kind == "model" && s.fallback_cycles > 0)
      name += fmt::format(" (CPU fallbacks {:.1f} us)", s.fallback_cycles / f);
    t += fmt::format("  {:<40} {:<10} {:>12.1f} {:>6.1f}%\n", name, s.unit, s.cycles / f,
                     r.latency_cycles > 0 ? 100.0 * s.cycles / r.latency_cycles : 0.0);
  }
  auto align = [&](const char* dir, const TransferInfo& x) {
    if (!x.zero_copy) return std::string();
    if (x.aligned)
      return fmt::format("  {}: zero-copy, buffer aligned to {} B (dma.alignment_bytes {}): no copy\n", dir,
                         x.host_alignment_bytes, x.dma_alignment_bytes);
    return fmt::format(
        "  {}: zero-copy, buffer aligned to {} B but dma.alignment_bytes is {}: an extra copy of {} "
        "bytes, {:.1f} us\n",
        dir, x.host_alignment_bytes, x.dma_alignment_bytes, x.extra_copy_bytes, x.extra_copy_cycles / f);
  };
  t += align("input", r.input) + align("output", r.output);
  for (const std::string& n : r.notes) t += "  note: " + n + "\n";
  if (r.stream_done) {
    const StreamResult& s = r.stream;
    t += fmt::format(
        "stream: {} frames {}, batch {}, {} buffer{}: {:.1f} frames/s (bound {:.1f} by {}), latency p50 "
        "{:.3f} ms "
        "p99 {:.3f} ms, NPU buffers {} KiB, up to {} frames in flight\n",
        s.frames, s.rate_fps > 0 ? fmt::format("at {:g} fps", s.rate_fps) : std::string("back to back"),
        s.batch, s.buffers, s.buffers == 1 ? "" : "s", s.throughput_fps, s.bound_fps, s.bounding_stage,
        s.latency_p50_ms, s.latency_p99_ms, (s.npu_buffer_bytes + 1023) / 1024, s.frames_in_flight_max);
  }
  return t;
}

}  // namespace npusim::sim::e2e
