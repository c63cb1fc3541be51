#include "sim/cli/simulate.h"

#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <ostream>

#include "arch/simulate.h"
#include "isa/machine/spec_text.h"
#include "sim/e2e/e2e_trace.h"
#include "sim/io/sha256.h"
#include "sim/model/tensor_io.h"
#include "sim/report/html_report.h"
#include "sim/report/report_file.h"
#include "sim/version/version.h"
#include "traces/layer_tables.h"

namespace npusim::sim::cli {
namespace {

// What the report records about the run: the command, npusim's version, the model (and its file's
// hash) and the configuration, every parameter resolved.
traces::RunInfo run_info(Context& ctx, const CommonOptions& o, const std::string& model,
                         const isa::NpuConfig& config) {
  traces::RunInfo info;
  info.command = ctx.command;
  info.version = npusim_version();
  info.model = model;
  start_model_hash(ctx, model);
  if (auto it = ctx.model_hashes.find(model); it != ctx.model_hashes.end()) {
    try {
      info.model_sha256 = it->second.get();
    } catch (const std::runtime_error& e) {
      throw InputError(e.what());
    }
  }
  info.config = o.config;
  info.sets = o.sets;
  for (const isa::ParamInfo& p : isa::list_params(config)) {
    if (p.kind != isa::ParamInfo::Kind::kGroup) info.parameters.emplace_back(p.path, p.value);
  }
  return info;
}

}  // namespace

size_t top_layers(const std::string& text) {
  if (text == "all") return traces::kAllLayers;
  size_t used = 0;
  long long n = -1;
  try {
    n = std::stoll(text, &used);
  } catch (const std::exception&) {
  }
  if (used != text.size() || n < 0) throw UsageError(fmt::format("--top '{}' is not a count or 'all'", text));
  return static_cast<size_t>(n);
}

void start_model_hash(Context& ctx, const std::string& path) {
  std::error_code ec;
  if (ctx.model_hashes.count(path) || !std::filesystem::is_regular_file(path, ec)) return;
  ctx.model_hashes.emplace(path,
                           std::async(std::launch::async, [path] { return sha256_file(path); }).share());
}

int simulate_and_report(Context& ctx, const CommonOptions& o, const std::string& model,
                        const isa::Program& program, const isa::NpuConfig& config,
                        const CompiledModel* compiled, const FunctionalIo& io, const ReportExtras* extras,
                        e2e::E2eResult* pipeline) {
  const size_t top = top_layers(o.top);
  traces::RunInfo info = run_info(ctx, o, model, config);
  TraceFiles traces(o);
  traces::Sink* sink = traces.sink;
  // --pipeline: the NPU's events move to where the model starts; the host stages get lanes of their own.
  std::unique_ptr<e2e::E2eTraceSink> e2e_sink;
  if (sink && pipeline) sink = (e2e_sink = std::make_unique<e2e::E2eTraceSink>(*sink, *pipeline)).get();
  arch::RunOptions run;
  std::vector<std::string> written;  // --outputs: the files written
  FunctionalIo fio = io;
  fio.written = &written;
  if (o.functional) {
    if (!compiled && !program.host_ops.empty()) {
      ctx.err
          << "npusim: warning: functional run of a program file: its host ops are timed but not computed\n";
    }
    add_functional_hooks(program, compiled, fio, run);
  }
  run.sink = sink;
  const bool bar = !o.quiet && isatty(STDERR_FILENO);
  if (bar) {
    run.progress = [&ctx](double f) {
      ctx.err << fmt::format("\rsimulating {:5.1f}%", 100.0 * f) << std::flush;
    };
  }
  traces::Report report;
  try {
    report = extras && extras->simulated && !o.functional && !sink ? *extras->simulated
                                                                   : arch::simulate(program, config, run);
  } catch (const arch::SimError& e) {
    if (bar) ctx.err << "\r";
    throw RunError(e.what());
  } catch (const TensorIoError& e) {
    if (bar) ctx.err << "\r";
    throw InputError(e.what());
  }
  if (bar) ctx.err << "\r" << std::string(24, ' ') << "\r";
  if (pipeline) {
    if (extras && extras->pipeline_npu) {
      e2e::add_npu_run(*pipeline, extras->pipeline_npu->first, extras->pipeline_npu->second);
    } else {
      e2e::add_npu_run(*pipeline, static_cast<int64_t>(report.total_cycles),
                       static_cast<int64_t>(report.breakdown.host));
    }
    report.sections.push_back(traces::make_section("e2e", *pipeline));
    if (e2e_sink) e2e_sink->complete(*pipeline);
  }
  if (sink) sink->finish();
  if (extras) {
    info.precision_source = extras->precision_source;
    info.objective = extras->objective;
  }
  report.run = std::move(info);
  if (compiled) {
    attach_compile_info(*compiled, report);
    report.phases = compiled->phases;
    if (extras) report.phases->accuracy_seconds = extras->accuracy_seconds;
  }
  if (extras) {
    for (const auto& sec : extras->sections) report.sections.push_back(sec);
  }
  if (!o.report.empty() || !o.html.empty()) {
    // The HTML page is a view of the JSON (the same as `npusim report FILE.json --html`).
    const std::string json = traces::report_json(report);
    if (!o.report.empty()) write_output(o.report, json);
    if (!o.html.empty()) {
      try {
        write_output(o.html, html_report(json, o.html));
      } catch (const ReportReadError& e) {
        throw RunError(fmt::format("the run's own report did not make an HTML page: {}", e.what()));
      }
    }
  }
  if (!o.layers_csv.empty()) {
    auto f = open_output(o.layers_csv);
    traces::write_layers_csv(report, *f);
    if (!f->flush()) throw InputError(fmt::format("cannot write '{}'", o.layers_csv));
  }
  if (!o.quiet) ctx.out << traces::summary_text(report, top);
  if (!o.quiet && extras) ctx.out << extras->text;
  if (!o.quiet && pipeline) ctx.out << e2e::e2e_text(*pipeline);
  // What the user asked for by name is printed even under -q: the advice.
  if (extras) ctx.out << extras->answer;
  if (!o.quiet && !written.empty()) {
    ctx.out << fmt::format("wrote {} output{} to {}:\n", written.size(), written.size() == 1 ? "" : "s",
                           io.outputs_dir);
    for (const std::string& w : written) ctx.out << "  " << w << "\n";
  }
  return kExitOk;
}

}  // namespace npusim::sim::cli
