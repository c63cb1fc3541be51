#pragma once
// Simulating a program and writing what the options ask for: the summary, the JSON and HTML reports, the
// traces, the layer table (run and exec).
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "isa/machine/config.h"
#include "isa/program.h"
#include "sim/cli/command.h"
#include "sim/cli/files.h"
#include "sim/cli/options/common.h"
#include "sim/e2e/pipeline.h"
#include "sim/model/model.h"
#include "traces/report.h"
#include "traces/sink.h"

namespace npusim::sim::cli {

// What a run adds to the report beyond the simulation: its sections and text after the summary.
struct ReportExtras {
  traces::ReportSections sections;
  std::string text;
  std::string answer;  // printed even under -q: what an option asked for (--advise-sqnr's override list)
  std::string precision_source;  // run.precision_source (precision_source in options/model.h)
  std::string objective;         // run.objective (--objective)
  // A timing-only simulation of the same program already run (--dynamic, --generate): reused unless the
  // run needs its own (--functional, traces), so each shape is simulated once.
  std::optional<traces::Report> simulated;
  // --split batch --pipeline: the NPU's cycles (and of them, host fallbacks') the pipeline's model stage
  // takes: the cores' run, not the report body's run on one core.
  std::optional<std::pair<int64_t, int64_t>> pipeline_npu;
  double accuracy_seconds = 0;  // --accuracy, --advise-sqnr: the report's phases.accuracy_seconds
};

// --top N|all: how many layers the summary lists.
size_t top_layers(const std::string& text);

// Starts hashing the model file at `path` (when it is a file) on a second thread; run_info takes the
// digest.
void start_model_hash(Context& ctx, const std::string& path);

// --trace and --trace-csv: the files and the sink that writes both (null when neither was given).
struct TraceFiles {
  explicit TraceFiles(const CommonOptions& o) : json(open_output(o.trace)), csv(open_output(o.trace_csv)) {
    if (json) sink = (json_sink = std::make_unique<traces::ChromeTraceSink>(*json)).get();
    if (csv) {
      csv_sink = std::make_unique<traces::CsvTraceSink>(*csv);
      if (sink) {
        tee = std::make_unique<traces::TeeSink>(std::vector<traces::Sink*>{sink, csv_sink.get()});
        sink = tee.get();
      } else {
        sink = csv_sink.get();
      }
    }
  }
  decltype(open_output(std::string())) json, csv;
  std::unique_ptr<traces::ChromeTraceSink> json_sink;
  std::unique_ptr<traces::CsvTraceSink> csv_sink;
  std::unique_ptr<traces::TeeSink> tee;
  traces::Sink* sink = nullptr;
};

// Simulates `program` and writes whatever the options ask for.
int simulate_and_report(Context& ctx, const CommonOptions& o, const std::string& model,
                        const isa::Program& program, const isa::NpuConfig& config,
                        const CompiledModel* compiled = nullptr, const FunctionalIo& io = {},
                        const ReportExtras* extras = nullptr, e2e::E2eResult* pipeline = nullptr);

}  // namespace npusim::sim::cli
