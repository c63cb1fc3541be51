// npusim run: compile a model (or load a program) and simulate it; the studies around it (accuracy,
// dynamic shapes, generation, multi-core splits, end-to-end pipelines).
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include "arch/simulate.h"
#include "sim/cli/accuracy_report.h"
#include "sim/cli/commands/commands.h"
#include "sim/cli/compile_model.h"
#include "sim/cli/files.h"
#include "sim/cli/options/groups.h"
#include "sim/cli/phase_status.h"
#include "sim/cli/simulate.h"
#include "sim/dynamic/generation.h"
#include "sim/e2e/pipeline.h"
#include "sim/e2e/pipeline_spec.h"
#include "sim/multicore/split.h"

namespace npusim::sim::cli {
namespace {

namespace po = boost::program_options;

// e2e::plan_pipeline; a --preprocess description the model's input cannot take (not an image input) is a
// usage error naming the file.
e2e::E2eResult plan_pipeline_or_throw(const e2e::PipelineSpec& spec, const isa::Program& program,
                                      const isa::NpuConfig& config, int64_t batch) {
  try {
    return e2e::plan_pipeline(spec, program, config, batch);
  } catch (const compiler::PreprocessError& e) {
    throw UsageError(fmt::format("--preprocess {} with --pipeline: {}", spec.preprocess_source, e.what()));
  }
}

// --dynamic / --requests: every profile compiled and timed, the request policies served; the report
// shows the largest profile with the `profiles` and `requests` sections (sim/dynamic). The profiles compile
// with their layers apart (--no-interleave): the dynamic policy runs a profile layer by layer and adds the
// layers' own cycles (ShapeRun::serial_cycles), which a layer merged into the one before it would count
// twice where they overlap (docs/dynamic.md).
dynamic::DynamicStudy dynamic_study(const dynamic::DynamicCliOptions& dyn, const std::string& model,
                                    const isa::NpuConfig& config, ModelCliOptions& m) {
  m.no_interleave = true;
  try {
    return dynamic::run_dynamic_study(
        dyn, [&](const dynamic::DimBinding& dims) { return compile_or_throw(model, config, m, dims); },
        config);
  } catch (const dynamic::DynamicUsageError& e) {
    throw UsageError(e.what());
  } catch (const dynamic::OverflowError& e) {
    throw RunError(e.what());
  } catch (const arch::SimError& e) {
    throw RunError(e.what());
  }
}

// --generate: the llm: decoder's prefill and decode steps (sim/dynamic/generation.h).
dynamic::GenerationStudy generation_study(const dynamic::GenerateRequest& g, const std::string& model,
                                          const isa::NpuConfig& config, ModelCliOptions& m) {
  try {
    return dynamic::run_generation(
        model, g, [&](const std::string& spec) { return compile_or_throw(spec, config, m); }, config);
  } catch (const dynamic::DynamicUsageError& e) {
    throw UsageError(e.what());
  } catch (const compiler::ModelError& e) {
    throw InputError(e.what());
  } catch (const arch::SimError& e) {
    throw RunError(e.what());
  }
}

// --split: which one, checked against the configuration and the other options.
multicore::Split split_option(const std::string& name, const isa::NpuConfig& config, const CommonOptions& o,
                              bool pipeline) {
  size_t i = 0;
  while (i < std::size(multicore::kSplitNames) && multicore::kSplitNames[i] != name) ++i;
  if (i == std::size(multicore::kSplitNames))
    throw UsageError(fmt::format("--split '{}': expected none, batch or layers", name));
  const auto split = static_cast<multicore::Split>(i);
  if (split == multicore::Split::kNone) return split;
  if (config.cores < 2)
    throw UsageError(
        fmt::format("--split {} needs a multi-core NPU; the configuration has cores = {} (give --set "
                    "cores=N, or -c datacenter-2core)",
                    name, config.cores));
  if (o.functional)
    throw UsageError(
        "--split does not combine with --functional: the cores' runs are timing only (run --functional "
        "without --split for the values, which do not depend on the cores)");
  if (pipeline && split == multicore::Split::kLayers)
    throw UsageError(
        "--split layers does not combine with --pipeline: the pipeline's model stage is one inference, and a "
        "layer pipeline works on several frames at once (use --split batch)");
  return split;
}

// --split: the model over the cores in one simulation; the split goes to the multicore section; --trace
// and --trace-csv get the cores' run (a track per unit of each core). The report's body: with `batch`, the
// run of the slowest core with the others running (its total_cycles the batch's latency; returned with the
// model of its share, which the report describes), with `layers` the run on one core (simulated here once
// and reused).
std::optional<CompiledModel> multicore_study(multicore::Split split, const std::string& model,
                                             const CompiledModel& compiled, const isa::NpuConfig& config,
                                             const CommonOptions& o, const ModelCliOptions& m,
                                             ReportExtras& extras) {
  if (split == multicore::Split::kBatch && m.batch <= 0)
    throw UsageError(fmt::format("--split batch needs --batch N (N >= cores = {})", config.cores));
  try {
    extras.simulated = arch::simulate(compiled.result.program, config, {});
    std::map<int64_t, CompiledModel> shares;  // each distinct share's model
    multicore::SplitResult r = multicore::run_split(
        split, compiled.result.program, *extras.simulated, config, std::max<int64_t>(1, m.batch),
        [&](int64_t batch) {
          ModelCliOptions share = m;
          share.batch = batch;
          // The share's batch replaces the first dimension of inputs --input-shape gave (checked against
          // --batch when the whole batch compiled): not a second batch the user gave.
          share.batch_given = false;
          return shares.emplace(batch, compile_or_throw(model, config, share)).first->second.result.program;
        },
        TraceFiles(o).sink);
    std::optional<CompiledModel> body;
    if (split == multicore::Split::kBatch) {
      extras.pipeline_npu = {static_cast<int64_t>(r.latency_cycles()),
                             static_cast<int64_t>(r.latency_host_cycles())};
      if (auto share = shares.find(r.slowest_batch); share != shares.end() && r.slowest_run) {
        extras.simulated = std::move(r.slowest_run);
        body = std::move(share->second);
      }
    }
    extras.sections.push_back(traces::make_section("multicore", r));
    extras.text += multicore::split_text(r);
    return body;
  } catch (const multicore::SplitError& e) {
    throw UsageError(e.what());
  } catch (const arch::SimError& e) {
    throw RunError(e.what());
  }
}

// A timing run of a model with data-dependent Ifs: each path compiled and simulated, the report's run is
// the path --branch chooses (simulated here once and reused), both paths of each If in the branches
// section and the summary.
void branch_study(const std::string& model, CompiledModel& compiled, const isa::NpuConfig& config,
                  const ModelCliOptions& m, const BranchRequest& request, ReportExtras& extras) {
  std::optional<BranchStudy> study = study_branches(
      compiled, request,
      [&](compiler::Graph g) { return compile_graph_or_throw(std::move(g), model, config, m); },
      [&](const isa::Program& p) {
        try {
          return arch::simulate(p, config, {});
        } catch (const arch::SimError& e) {
          throw RunError(e.what());
        }
      });
  if (!study) return;
  compiled = std::move(study->chosen);
  extras.simulated = std::move(study->chosen_report);
  extras.sections.push_back(traces::make_section("branches", std::move(study->section)));
  extras.text += study->text;
}

}  // namespace

int cmd_run(Context& ctx, const Command& cmd) {
  Options opts;
  const CommonOptions& o = opts.common;
  ModelCliOptions& m = opts.model;
  FunctionalIo& io = opts.io;
  AccuracyCliOptions& acc = opts.accuracy;
  const dynamic::DynamicCliOptions& dyn = opts.dynamic;
  const std::string& pipeline_file = opts.e2e.pipeline_file;
  const std::string& preprocess_on = opts.e2e.preprocess_on;
  const std::string& split_name = opts.split;
  std::string model;
  po::options_description d("Options");
  d.add_options()("model", po::value(&model)->value_name("MODEL"),
                  "ONNX, SCALE-Sim .csv, gemm:/conv:/llm: micro-model, .npu/.s program");
  po::positional_options_description pos;
  pos.add("model", 1);
  if (!parse(ctx, cmd, d, pos, &opts)) return kExitOk;
  if ((!io.inputs_dir.empty() || !io.outputs_dir.empty()) && !o.functional) {
    throw UsageError("--inputs and --outputs need --functional");
  }
  if ((!acc.advise_inputs.empty() || acc.advise_samples || !acc.advise_out.empty()) && !acc.advise_sqnr)
    throw UsageError("--advise-inputs, --advise-samples and --advise-out need --advise-sqnr");
  if (acc.advise_samples && acc.advise_inputs.empty())
    throw UsageError(
        "--advise-samples needs --advise-inputs (without it the advice is fitted on the evaluation inputs)");
  if (acc.advise_samples && *acc.advise_samples < 1) throw UsageError("--advise-samples must be >= 1");
  // A keys file says what the output is: --task ocr-rec, unless another task was asked for.
  if (!acc.keys.empty() && !acc.accuracy && !acc.advise_sqnr)
    throw UsageError("--keys needs --accuracy or --advise-sqnr (it decodes the recogniser's strings there)");
  if (!acc.keys.empty() && acc.task.empty()) acc.task = "ocr-rec";
  // Labels are the classes of the evaluation inputs: --task classify on --accuracy-inputs.
  if (!acc.labels.empty() && !acc.accuracy && !acc.advise_sqnr)
    throw UsageError("--labels needs --accuracy (the evaluation inputs are scored against it there)");
  if (!acc.labels.empty() && acc.inputs_dir.empty())
    throw UsageError("--labels FILE needs --accuracy-inputs DIR, the inputs it labels");
  if (!acc.labels.empty() && acc.task.empty()) acc.task = "classify";
  if (!acc.labels.empty() && acc.task != "classify")
    throw UsageError(
        fmt::format("--labels gives each input's class: it goes with --task classify, not {}", acc.task));
  if ((!acc.inputs_dir.empty() || !acc.task.empty()) && !acc.accuracy && !acc.advise_sqnr) {
    throw UsageError("--accuracy-inputs and --task need --accuracy or --advise-sqnr");
  }
  if (!acc.keys.empty() && acc.task != "ocr-rec")
    throw UsageError(fmt::format(
        "--keys is the recogniser's character list: it goes with --task ocr-rec, not {}", acc.task));
  if (acc.advise_sqnr && !std::isfinite(*acc.advise_sqnr))
    throw UsageError(fmt::format("--advise-sqnr {} is not a number of dB", *acc.advise_sqnr));
  if (!std::isfinite(acc.threshold_db))
    throw UsageError(fmt::format("--accuracy-threshold {} is not a number of dB", acc.threshold_db));
  const isa::NpuConfig config = resolve_config(o);
  const multicore::Split split = split_option(split_name, config, o, !pipeline_file.empty());
  std::optional<e2e::E2eResult> pipeline;
  std::optional<e2e::PipelineSpec> pipeline_spec;
  if (!pipeline_file.empty()) {
    pipeline_spec = e2e::parse_pipeline_file(pipeline_file);
    const e2e::StreamSpec& st = pipeline_spec->stream;
    if (st.batch_line > 0 && m.batch > 0 && m.batch != st.batch) {
      throw UsageError(fmt::format("{}:{}:{}: stream.batch: {} but --batch {}; give one", pipeline_file,
                                   st.batch_line, st.batch_column, st.batch, m.batch));
    }
    if (st.batch_line > 0) m.batch = st.batch;
  }
  load_preprocess(m);
  io.preprocess = m.preprocess ? &*m.preprocess : nullptr;
  if (!preprocess_on.empty()) {
    if (preprocess_on != "host" && preprocess_on != "npu")
      throw UsageError(fmt::format("--preprocess-on '{}' is not one of host, npu", preprocess_on));
    if (!pipeline_spec || !m.preprocess)
      throw UsageError("--preprocess-on places --preprocess's steps in a --pipeline: it needs both");
    pipeline_spec->preprocess_on = preprocess_on == "npu" ? e2e::Placement::kNpu : e2e::Placement::kHost;
  }
  if (m.preprocess && m.calibration_dir.empty() && io.inputs_dir.empty() && acc.inputs_dir.empty() &&
      acc.advise_inputs.empty() && !pipeline_spec)
    throw UsageError(
        "--preprocess says how images become the model's input, but nothing in this run reads images or "
        "costs "
        "a pipeline (--calibration, --inputs, --accuracy-inputs, --advise-inputs or --pipeline)");
  if (pipeline_spec && m.preprocess) {
    // One description of the pre-processing: the pipeline costs the steps calibration and evaluation run.
    if (!pipeline_spec->pre.empty())
      throw UsageError(fmt::format(
          "{} has pre: stages and --preprocess describes the pre-processing too; give one (without pre:, the "
          "pipeline runs --preprocess's steps)",
          pipeline_file));
    pipeline_spec->preprocess = m.preprocess;
    pipeline_spec->preprocess_source = m.preprocess_file;
  }
  if (!m.calibration_samples_given && !o.functional && !acc.accuracy && !acc.advise_sqnr) {
    // Timing only: int8 scales change no cycle count, so one synthetic input is enough to place the
    // layers (calibrating ResNet-50 on 32 inputs costs about a minute of interpreter time).
    m.calibration_samples = 1;
  }
  if (model.empty()) model = "demo";
  // A timing run reads no weight values: built-in models leave them out (docs/performance.md).
  m.timing_only = !o.functional && !acc.accuracy && !acc.advise_sqnr;
  PhaseStatus status(ctx.err, !o.quiet && isatty(STDERR_FILENO));
  m.status = &status;
  start_model_hash(ctx, model);
  if (is_program_file(model)) {
    if (!m.mapping.empty() || !m.mapping_out.empty()) {
      throw UsageError("--mapping and --mapping-out apply to models, not to a compiled program");
    }
    if (dyn.active()) throw UsageError("--dynamic and --requests apply to models, not to a compiled program");
    if (split != multicore::Split::kNone)
      throw UsageError("--split applies to models, not to a compiled program");
    const isa::Program program = load_program(model);
    check_machine(program, config);
    if (pipeline_spec) {
      if (pipeline_spec->stream.batch > 1) {
        throw UsageError(
            "stream.batch applies to models, not to a compiled program (compile it with --batch)");
      }
      pipeline = plan_pipeline_or_throw(*pipeline_spec, program, config, 1);
    }
    return simulate_and_report(ctx, o, model, program, config, nullptr, io, nullptr,
                               pipeline ? &*pipeline : nullptr);
  }
  ReportExtras extras;
  std::optional<dynamic::DynamicStudy> study;
  std::optional<dynamic::GenerationStudy> generation;
  std::optional<dynamic::GenerateRequest> generate;
  try {
    generate = dynamic::generate_request(dyn);
  } catch (const dynamic::DynamicUsageError& e) {
    throw UsageError(e.what());
  }
  if (dyn.active()) {
    study = dynamic_study(dyn, model, config, m);
    extras.sections = std::move(study->sections);
    extras.text = std::move(study->text);
    extras.simulated = std::move(study->main_report);
  } else if (generate) {
    generation = generation_study(*generate, model, config, m);
    extras.sections.push_back(traces::make_section("generation", std::move(generation->section)));
    extras.text = std::move(generation->text);
    extras.simulated = std::move(generation->prefill_report);
  }
  if (opts.branch_given && !m.timing_only)
    throw UsageError(
        "--branch chooses a timing run's path at a data-dependent If; --functional and --accuracy follow the "
        "data");
  if (opts.branch_given && (study || generation || split != multicore::Split::kNone))
    throw UsageError("--branch does not combine with --dynamic, --requests, --generate or --split");
  CompiledModel compiled = study        ? std::move(study->main_model)
                           : generation ? std::move(generation->prefill)
                                        : compile_or_throw(model, config, m);
  if (m.timing_only && !study && !generation && split == multicore::Split::kNone)
    branch_study(model, compiled, config, m, opts.branch, extras);
  check_int8_options_apply(m, compiled, (acc.accuracy || acc.advise_sqnr) && acc.inputs_dir.empty());
  extras.precision_source = precision_source(m, config, o.config);
  extras.objective = m.objective;
  write_mapping_out(ctx, o, m, model, compiled);
  print_mapping(ctx, m, compiled);
  if (acc.accuracy || acc.advise_sqnr) {
    status.phase(acc.advise_sqnr ? "accuracy and advice" : "accuracy");
    const auto start = std::chrono::steady_clock::now();
    accuracy_report(ctx, compiled, config, m, acc, io.seed, extras);
    extras.accuracy_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  status.idle();
  std::optional<CompiledModel> split_body;  // --split batch: the slowest core's share
  if (split != multicore::Split::kNone) {
    if (dyn.active() || generate)
      throw UsageError("--split does not combine with --dynamic, --requests or --generate");
    split_body = multicore_study(split, model, compiled, config, o, m, extras);
  }
  CommonOptions body = o;  // with --split, the traces are the cores' run (multicore_study)
  if (split != multicore::Split::kNone) body.trace = body.trace_csv = "";
  if (pipeline_spec) {
    pipeline = plan_pipeline_or_throw(*pipeline_spec, compiled.result.program, config,
                                      std::max<int64_t>(1, m.batch));
  }
  const CompiledModel& shown = split_body ? *split_body : compiled;
  const int rc = simulate_and_report(ctx, body, model, shown.result.program, config, &shown, io, &extras,
                                     pipeline ? &*pipeline : nullptr);
  print_graphs(ctx, m);
  return rc;
}

}  // namespace npusim::sim::cli
