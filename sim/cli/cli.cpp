#include "sim/cli/cli.h"

#include <fmt/format.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <boost/program_options.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "arch/simulate.h"
#include "compiler/backend/compile.h"
#include "compiler/import/import.h"
#include "compiler/ir/memory_budget.h"
#include "compiler/ops/op_table.h"
#include "compiler/quant/accuracy.h"
#include "compiler/quant/calibration.h"
#include "isa/assembly.h"
#include "isa/machine/spec_text.h"
#include "isa/program.h"
#include "isa/timing/units.h"
#include "sim/cli/diff.h"
#include "sim/config/config_dump.h"
#include "sim/config/config_loader.h"
#include "sim/dynamic/dynamic_cli.h"
#include "sim/dynamic/generation.h"
#include "sim/e2e/e2e_trace.h"
#include "sim/e2e/pipeline.h"
#include "sim/mapping/mapping_file.h"
#include "sim/model/model.h"
#include "sim/model/tensor_io.h"
#include "sim/multicore/split.h"
#include "sim/report/html_report.h"
#include "sim/serve/scenario.h"
#include "sim/serve/scheduler.h"
#include "sim/io/sha256.h"
#include "sim/sweep/sweep_cli.h"
#include "sim/version/version.h"
#include "traces/layer_tables.h"
#include "traces/report.h"
#include "traces/sink.h"

namespace npusim::sim {
namespace {

namespace po = boost::program_options;

// A mistake in how npusim was called (exit 2).
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
// An input file that cannot be read or understood (exit 2).
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
// A valid input that cannot be compiled or simulated (exit 1).
class RunError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Options every simulating command shares.
struct CommonOptions {
  std::string config;
  std::vector<std::string> sets;
  std::string report;
  std::string html;
  std::string trace;
  std::string trace_csv;
  std::string layers_csv;
  std::string top = "10";  // --top N|all
  bool quiet = false;
  bool functional = false;
};

struct Context {
  std::vector<std::string> args;  // after the command name
  std::ostream& out;
  std::ostream& err;
  std::string command;  // the whole command line, for the report
  // The model files' SHA-256 for the report, each computed on a second thread from the moment the
  // command knows the path (start_model_hash): ResNet-50's 100 MB take about 0.3 s, which the compile
  // hides on a machine with two cores.
  std::map<std::string, std::shared_future<std::string>> model_hashes;
};

struct Command {
  std::string_view name;
  std::string_view synopsis;
  std::string_view summary;
};

po::options_description config_options(CommonOptions& o) {
  po::options_description d("Configuration");
  d.add_options()("config,c", po::value(&o.config)->value_name("FILE.yaml"),
                  "NPU configuration: a YAML file or a preset name from configs/ (default: the built-in edge "
                  "preset)")(
      "set", po::value(&o.sets)->composing()->value_name("KEY=VALUE"),
      "override one parameter, e.g. --set systolic_array.rows=64 (repeatable)");
  return d;
}

po::options_description output_options(CommonOptions& o) {
  po::options_description d("Simulation and output");
  d.add_options()("functional", po::bool_switch(&o.functional), "compute real values, not only timing")(
      "report", po::value(&o.report)->value_name("FILE.json"), "write the full report as JSON")(
      "html", po::value(&o.html)->value_name("FILE.html"),
      "write the report as one self-contained HTML page: summary, sortable layer table, timeline, roofline "
      "(docs/report.md)")(
      "trace", po::value(&o.trace)->value_name("FILE.json"), "write a Chrome/Perfetto trace-event file")(
      "trace-csv", po::value(&o.trace_csv)->value_name("FILE.csv"), "write the trace events as CSV")(
      "layers-csv", po::value(&o.layers_csv)->value_name("FILE.csv"),
      "write one row per layer: cycles, breakdown, MACs, DRAM bytes, bound, efficiency (docs/report.md)")(
      "top", po::value(&o.top)->value_name("N|all"), "layers the summary lists, slowest first (default 10)")(
      "quiet,q", po::bool_switch(&o.quiet), "print nothing but errors");
  return d;
}

// Parses `ctx.args` against `desc` (plus --help). Returns false when help was printed.
bool parse(Context& ctx, const Command& cmd, po::options_description desc,
           const po::positional_options_description& pos) {
  bool help = false;
  desc.add_options()("help,h", po::bool_switch(&help), "show this help");
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(ctx.args).options(desc).positional(pos).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    throw UsageError(fmt::format("{} (see 'npusim {} --help')", e.what(), cmd.name));
  }
  if (help) {
    ctx.out << "usage: npusim " << cmd.synopsis << "\n\n" << cmd.summary << "\n\n" << desc << "\n";
    return false;
  }
  return true;
}

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(fmt::format("cannot open '{}'", path));
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}


bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

isa::NpuConfig resolve_config(const CommonOptions& o) { return load_config(o.config, o.sets); }

// Loads a program from a binary program file or assembly text (by extension).
isa::Program load_program(const std::string& path) {
  try {
    if (ends_with(path, ".s") || ends_with(path, ".asm")) return isa::assemble(read_text_file(path), path);
    return isa::read_program_file(path);
  } catch (const isa::ProgramError& e) {
    throw InputError(e.what());
  }
}

// Opens an output file for a trace, or nothing when no path was given.
std::unique_ptr<std::ofstream> open_output(const std::string& path) {
  if (path.empty()) return nullptr;
  auto f = std::make_unique<std::ofstream>(path, std::ios::binary);
  if (!*f) throw InputError(fmt::format("cannot write '{}'", path));
  return f;
}

// Writes `text` to the file at `path`.
void write_output(const std::string& path, const std::string& text) {
  auto f = open_output(path);
  if (!f->write(text.data(), static_cast<std::streamsize>(text.size())) || !f->flush()) {
    throw InputError(fmt::format("cannot write '{}'", path));
  }
}

// Simulates `program` and writes whatever the options ask for.
// What a run adds to the report beyond the simulation: extra JSON sections and text after the summary.
struct ReportExtras {
  std::vector<std::pair<std::string, std::string>> sections;
  std::string text;
  std::string answer;  // printed even under -q: what an option asked for (--advise-sqnr's override list)
  // A timing-only simulation of the same program already run (--dynamic, --generate): reused unless the
  // run needs its own (--functional, traces), so each shape is simulated once.
  std::optional<traces::Report> simulated;
  // --split batch --pipeline: the NPU's cycles (and of them, host fallbacks') the pipeline's model stage
  // takes: the cores' run, not the report body's run on one core.
  std::optional<std::pair<int64_t, int64_t>> pipeline_npu;
};

// --top N|all: how many layers the summary lists.
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

// Starts hashing the model file at `path` (when it is a file) on a second thread; run_info takes the
// digest.
void start_model_hash(Context& ctx, const std::string& path) {
  std::error_code ec;
  if (ctx.model_hashes.count(path) || !std::filesystem::is_regular_file(path, ec)) return;
  ctx.model_hashes.emplace(path, std::async(std::launch::async, [path] { return sha256_file(path); }).share());
}

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

int simulate_and_report(Context& ctx, const CommonOptions& o, const std::string& model, const isa::Program& program,
                        const isa::NpuConfig& config, const CompiledModel* compiled = nullptr,
                        const FunctionalIo& io = {}, const ReportExtras* extras = nullptr,
                        e2e::E2eResult* pipeline = nullptr) {
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
      ctx.err << "npusim: warning: functional run of a program file: its host ops are timed but not computed\n";
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
    report.sections.emplace_back("e2e", e2e::e2e_json(*pipeline));
    if (e2e_sink) e2e_sink->complete(*pipeline);
  }
  if (sink) sink->finish();
  report.run = std::move(info);
  if (compiled) attach_compile_info(*compiled, report);
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

int cmd_config(Context& ctx, const Command& cmd) {
  CommonOptions o;
  bool dump = false;
  bool markdown = false;
  po::options_description d = config_options(o);
  d.add_options()("dump", po::bool_switch(&dump), "list every parameter: type, unit, default, range, description")(
      "markdown", po::bool_switch(&markdown), "with --dump: as a Markdown table (docs/config.md)");
  if (!parse(ctx, cmd, d, {})) return kExitOk;
  const isa::NpuConfig config = resolve_config(o);
  if (dump) {
    ctx.out << (markdown ? config_reference_markdown() : config_reference());
  } else {
    ctx.out << config_yaml(config);
  }
  return kExitOk;
}

int cmd_asm(Context& ctx, const Command& cmd) {
  std::string input, output;
  po::options_description d("Options");
  d.add_options()("input", po::value(&input)->value_name("FILE.s"), "assembly source")(
      "output,o", po::value(&output)->value_name("PROG.npu"), "program file to write");
  po::positional_options_description pos;
  pos.add("input", 1);
  if (!parse(ctx, cmd, d, pos)) return kExitOk;
  if (input.empty()) throw UsageError("asm needs an assembly file (see 'npusim asm --help')");
  if (output.empty()) throw UsageError("asm needs -o PROG.npu (see 'npusim asm --help')");
  isa::Program p;
  try {
    p = isa::assemble(read_text_file(input), input);
    isa::write_program_file(output, p);
  } catch (const isa::ProgramError& e) {
    throw InputError(e.what());
  }
  return kExitOk;
}

int cmd_disasm(Context& ctx, const Command& cmd) {
  std::string input;
  po::options_description d("Options");
  d.add_options()("input", po::value(&input)->value_name("PROG.npu"), "program file");
  po::positional_options_description pos;
  pos.add("input", 1);
  if (!parse(ctx, cmd, d, pos)) return kExitOk;
  if (input.empty()) throw UsageError("disasm needs a program file (see 'npusim disasm --help')");
  ctx.out << isa::disassemble(load_program(input));
  return kExitOk;
}

// Checks that a program compiled for one machine runs on an array of the same shape (its tiles and
// preloads were chosen for it) and on scratchpads at least as large as it was compiled for (it
// addresses them; more room changes nothing).
void check_machine(const isa::Program& p, const isa::NpuConfig& config) {
  if (p.machine.empty()) return;
  isa::NpuConfig target;
  try {
    target = isa::from_spec_text(p.machine);
  } catch (const std::exception& e) {
    throw InputError(fmt::format("the program's machine spec is unreadable: {}", e.what()));
  }
  auto mismatch = [&](const char* key, int64_t compiled, int64_t have, bool ok) {
    if (!ok) {
      throw UsageError(fmt::format("the program was compiled for {} = {} but the configuration has {}; recompile "
                                   "it or pass a matching --config/--set",
                                   key, compiled, have));
    }
  };
  mismatch("systolic_array.rows", target.systolic_array.rows, config.systolic_array.rows,
           target.systolic_array.rows == config.systolic_array.rows);
  mismatch("systolic_array.cols", target.systolic_array.cols, config.systolic_array.cols,
           target.systolic_array.cols == config.systolic_array.cols);
  for (const auto& [key, compiled, have] :
       {std::tuple{"sram.input.size_kib", target.sram.input.size_kib, config.sram.input.size_kib},
        std::tuple{"sram.weight.size_kib", target.sram.weight.size_kib, config.sram.weight.size_kib},
        std::tuple{"sram.accumulator.size_kib", target.sram.accumulator.size_kib, config.sram.accumulator.size_kib}}) {
    mismatch(key, compiled, have, have >= compiled);
  }
}

int cmd_exec(Context& ctx, const Command& cmd) {
  CommonOptions o;
  std::string input;
  po::options_description d = config_options(o);
  d.add(output_options(o));
  d.add_options()("input", po::value(&input)->value_name("PROG.npu"), "program file (or assembly .s)");
  po::positional_options_description pos;
  pos.add("input", 1);
  if (!parse(ctx, cmd, d, pos)) return kExitOk;
  if (input.empty()) throw UsageError("exec needs a program file (see 'npusim exec --help')");
  start_model_hash(ctx, input);
  const isa::NpuConfig config = resolve_config(o);
  const isa::Program program = load_program(input);
  check_machine(program, config);
  return simulate_and_report(ctx, o, input, program, config);
}

// Options of commands that compile a model.
struct ModelCliOptions {
  std::vector<std::string> input_shapes;
  int64_t batch = 0;  // 0: not given (each input keeps its first dimension)
  bool batch_given = false;
  std::string precision = "auto";
  std::vector<std::string> overrides;  // --precision-override, each "KEY=PREC,KEY=PREC"
  std::string precision_file;
  std::string calibration_dir;
  int calibration_samples = 32;
  bool calibration_samples_given = false;
  std::string calibration_method = "percentile";   // CalibrationOptions' default (calibration.h says why)
  std::optional<double> calibration_percentile;    // --calibration-percentile
  std::string preprocess_file;                     // --preprocess FILE.yaml
  std::optional<compiler::Preprocess> preprocess;  // read from it by load_preprocess()
  std::string weights = "per-channel";
  std::string weight_range = "minmax";  // --weight-range (QuantOptions' default)
  std::string activations = "asymmetric";
  bool bias_correction = false;              // --bias-correction (every layer)
  bool bias_correction_nonnegative = false;  // --bias-correction-nonnegative (the default)
  bool no_bias_correction = false;           // --no-bias-correction
  bool empirical_bias_correction = false;  // --empirical-bias-correction
  bool cle = false;                        // --cle
  std::optional<double> smoothquant;       // --smoothquant [ALPHA]
  std::string ptq_recipe = "none";         // --ptq-recipe
  bool ptq_recipe_given = false;
  int empirical_bias_samples = 8;          // --empirical-bias-samples (QuantOptions' default)
  bool empirical_bias_samples_given = false;
  // String-valued int8 quantization options given on the command line (check_int8_options_apply).
  std::vector<std::string> int8_only_given;
  bool verbose = false;
  bool graphs = false;       // --graphs
  std::string graph_dumps;  // --graphs: what compile_model printed, for print_graphs
  bool no_fusion = false;   // --no-fusion
  std::string mapping;      // --mapping FILE.yaml
  std::string mapping_out;  // --mapping-out FILE.yaml
  double memory_limit_gb = 0;  // --memory-limit-gb (0 = the machine's available memory)
  bool timing_only = false;    // nothing reads the weights' values: ModelOptions::weight_values false
};

po::options_description model_options(ModelCliOptions& m) {
  po::options_description d("Model");
  d.add_options()("input-shape", po::value(&m.input_shapes)->composing()->value_name("NAME=1x3x224x224"),
                  "bind a model input's dynamic dimensions (repeatable)")(
      "batch", po::value<int64_t>()->value_name("N")->notifier([&m](int64_t v) {
        m.batch = v;
        m.batch_given = true;
      }),
      "set the first (batch) dimension of every model input to N; shape inference propagates it")(
      "verbose,v", po::bool_switch(&m.verbose), "print the mapping table and the precision plan")(
      "graphs", po::bool_switch(&m.graphs),
      "print the graph after import and after every pass, last (long: every node with its full ONNX names)")(
      "no-fusion", po::bool_switch(&m.no_fusion),
      "fuse nothing into a layer's epilogue (bias, residual Add, activations run as layers of their own) and fold "
      "no Concat into its producers' stores: what fusion buys")(
      "mapping", po::value(&m.mapping)->value_name("FILE.yaml"),
      "impose per-layer mappings (placement, tiles, loop order) by node name; layers it does not name are "
      "searched (docs/backend.md, \"Mapping files\")")(
      "mapping-out", po::value(&m.mapping_out)->value_name("FILE.yaml"),
      "write every layer's mapping as a mapping file (--mapping reads it back and reproduces the compile)")(
      "memory-limit-gb", po::value(&m.memory_limit_gb)->value_name("GB"),
      "fail with a clear message before an allocation past GB (default: the machine's available memory)");
  return d;
}

po::options_description precision_options(ModelCliOptions& m) {
  po::options_description d("Precision and quantization (docs/quantization.md)");
  // Records a string-valued int8 option as given (check_int8_options_apply).
  auto given = [&m](const char* name) {
    return [&m, name](const std::string&) { m.int8_only_given.push_back(name); };
  };
  d.add_options()(
      "precision", po::value(&m.precision)->value_name("P"),
      "whole-model precision: fp32, fp16, bf16, int8, or auto (default: fp32 when the array has fp32 "
      "MACs, else bf16, else fp16, else int8)")(
      "precision-override", po::value(&m.overrides)->composing()->value_name("KEY=P,..."),
      "per-layer precision by ONNX node name or op type, e.g. conv1=fp16,Softmax=fp32 (repeatable; later "
      "wins); int16 gives a matrix layer int16 activations (int16 x int8 MACs, systolic_array.int16_rate)")(
      "precision-file", po::value(&m.precision_file)->value_name("FILE.yaml"),
      "per-layer overrides in YAML: a mapping KEY: P, a list of one-key maps, or {overrides: ...}")(
      "calibration", po::value(&m.calibration_dir)->value_name("DIR"),
      "int8 calibration inputs: one image (PNG/JPEG, with --preprocess) or .npy/.pb per sample, or one "
      "folder per "
      "sample (default: synthetic)")(
      "calibration-samples", po::value<int>()->value_name("N")->notifier([&m](int v) {
        m.calibration_samples = v;
        m.calibration_samples_given = true;
      }),
      "calibration samples read from DIR (0 = all) or generated: seeded N(0,1) inputs, flagged in the report "
      "(default 32; a timing-only run, without --functional or --accuracy, calibrates on 1: scales do not "
      "change timing)")(
      "calibration-method",
      po::value(&m.calibration_method)->notifier(given("--calibration-method"))->value_name("M"),
      "minmax, percentile (default), entropy or mse")(
      "calibration-percentile",
      po::value<double>()->value_name("P")->notifier([&m](double v) { m.calibration_percentile = v; }),
      "percentile calibration: keep P % of each tensor's magnitudes inside its int8 range, clipping the rest "
      "(default 99.99)")(
      "preprocess", po::value(&m.preprocess_file)->value_name("FILE.yaml"),
      "how PNG/JPEG images in --calibration, --accuracy-inputs and --inputs become the model's input: resize "
      "or "
      "letterbox, channel order, scale, mean/std, layout, dtype (docs/quantization.md, \"Images as inputs "
      "and task metrics\")")("weights", po::value(&m.weights)->notifier(given("--weights"))->value_name("G"),
                             "int8 weight scales: per-channel (default) or per-tensor")(
      "weight-range", po::value(&m.weight_range)->notifier(given("--weight-range"))->value_name("R"),
      "int8 weight scales' range: minmax (max |w|, default), mse (the clip minimising the weights' squared "
      "rounding and clipping error) or output-mse (the clip minimising the expected output error, from the "
      "calibration inputs' per-channel means and variances; docs/quantization.md)")(
      "activations", po::value(&m.activations)->notifier(given("--activations"))->value_name("S"),
      "int8 activations: asymmetric (uint8 with a zero point, default) or symmetric (int8, zero point 0)")(
      "bias-correction", po::bool_switch(&m.bias_correction),
      "int8: fold the mean shift that rounding the weights causes (from the calibration inputs' per-channel "
      "means) into each layer's int32 bias (docs/quantization.md)")(
      "bias-correction-nonnegative", po::bool_switch(&m.bias_correction_nonnegative),
      "int8: the same, only in the layers whose input is never negative on the calibration inputs (the "
      "default)")("no-bias-correction", po::bool_switch(&m.no_bias_correction),
                  "int8: no bias correction (the default corrects the layers with non-negative inputs)")(
      "empirical-bias-correction", po::bool_switch(&m.empirical_bias_correction),
      "int8: run the quantized model beside fp32 on the first calibration inputs, layer by layer, and fold "
      "each layer's mean output error per channel into its int32 bias (docs/quantization.md)")(
      "empirical-bias-samples", po::value<int>()->value_name("N")->notifier([&m](int v) {
        m.empirical_bias_samples = v;
        m.empirical_bias_samples_given = true;
      }),
      "--empirical-bias-correction: how many calibration inputs it runs, all at once (default 8; memory "
      "grows with N)")(
      "cle", po::bool_switch(&m.cle),
      "cross-layer equalisation: rescale the channels of consecutive convolutions joined by no activation, "
      "Relu or LeakyRelu (pairs with ReLU6 or other activations are skipped and listed) so both have equal "
      "weight ranges; the function is unchanged (docs/quantization.md)")(
      "smoothquant", po::value<double>()->implicit_value(0.5)->value_name("ALPHA")->notifier([&m](double v) {
        m.smoothquant = v;
      }),
      "int8: SmoothQuant: move activation range into the weights of the linear layers that read a "
      "LayerNormalization, per channel s = max|x|^ALPHA / max|w|^(1-ALPHA) folded into the norm's scale and "
      "bias (ALPHA in [0, 1], default 0.5); the function is unchanged (docs/quantization.md)")(
      "ptq-recipe", po::value<std::string>()->value_name("R")->notifier([&m](const std::string& v) {
        m.ptq_recipe = v;
        m.ptq_recipe_given = true;
      }),
      "int8: none (default: choose nothing, the defaults apply: bias correction where the input is "
      "non-negative) or auto (quantize with and without --bias-correction-nonnegative, --bias-correction, "
      "--cle and --smoothquant, and keep the one whose output is closest to fp32 on held-out calibration "
      "inputs; the report lists the candidates; it takes several calibration passes). --bias-correction, "
      "--bias-correction-nonnegative, --no-bias-correction, --cle, --smoothquant and "
      "--empirical-bias-correction impose their recipe instead");
  return d;
}

// --precision-file: YAML mapping KEY: P, a list of one-key maps or of "KEY=P" strings, optionally under
// a top-level `overrides:` key. Everything else is an error naming the file and line.
std::vector<compiler::quant::PrecisionOverride> read_precision_file(const std::string& path) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::BadFile&) {
    throw InputError(fmt::format("cannot open '{}'", path));
  } catch (const YAML::Exception& e) {
    throw InputError(fmt::format("{}:{}:{}: {}", path, e.mark.line + 1, e.mark.column + 1, e.msg));
  }
  if (root.IsMap() && root["overrides"]) root = root["overrides"];
  std::vector<compiler::quant::PrecisionOverride> out;
  auto bad = [&](const YAML::Node& n, const std::string& what) {
    return InputError(fmt::format("{}:{}:{}: {}", path, n.Mark().line + 1, n.Mark().column + 1, what));
  };
  auto add = [&](const YAML::Node& key, const YAML::Node& value) {
    if (!key.IsScalar() || !value.IsScalar()) throw bad(key, "expected KEY: PRECISION");
    try {
      out.push_back({key.as<std::string>(), compiler::quant::parse_precision(value.as<std::string>())});
    } catch (const compiler::quant::PrecisionError& e) {
      throw bad(value, fmt::format("{}: {}", key.as<std::string>(), e.what()));
    }
  };
  if (root.IsNull()) return out;
  if (root.IsMap()) {
    for (const auto& kv : root) add(kv.first, kv.second);
  } else if (root.IsSequence()) {
    for (const auto& e : root) {
      if (e.IsMap() && e.size() == 1) {
        add(e.begin()->first, e.begin()->second);
      } else if (e.IsScalar()) {
        try {
          for (const auto& o : compiler::quant::parse_overrides(e.as<std::string>())) out.push_back(o);
        } catch (const compiler::quant::PrecisionError& err) {
          throw bad(e, err.what());
        }
      } else {
        throw bad(e, "expected KEY: PRECISION or \"KEY=PRECISION\"");
      }
    }
  } else {
    throw bad(root, "expected a mapping of KEY: PRECISION or a list of them");
  }
  return out;
}

compiler::quant::Precision auto_precision(const isa::NpuConfig& config) {
  using compiler::quant::Precision;
  const auto& a = config.systolic_array;
  if (a.rate(isa::DType::kFp32) > 0) return Precision::kFp32;
  if (a.rate(isa::DType::kBf16) > 0) return Precision::kBf16;
  if (a.rate(isa::DType::kFp16) > 0) return Precision::kFp16;
  return Precision::kInt8;
}

ModelOptions to_model_options(const ModelCliOptions& m, const isa::NpuConfig& config) {
  namespace q = compiler::quant;
  ModelOptions o;
  o.timer = simulation_timer(config);
  o.fusion = !m.no_fusion;
  o.weight_values = !m.timing_only;
  o.input_shapes = m.input_shapes;
  if (m.batch_given && (m.batch < 1 || m.batch > 65536)) {
    throw UsageError(fmt::format("--batch {} is out of range (1..65536)", m.batch));
  }
  o.batch = m.batch;
  q::PlanRequest& r = o.plan;
  try {
    r.spec.model = m.precision == "auto" ? auto_precision(config) : q::parse_precision(m.precision);
    r.follow_model = m.precision == "auto";
  } catch (const q::PrecisionError&) {
    throw UsageError(fmt::format("--precision '{}' is not one of fp32, fp16, bf16, int8, auto", m.precision));
  }
  if (!m.precision_file.empty()) r.spec.overrides = read_precision_file(m.precision_file);
  for (const std::string& text : m.overrides) {
    try {
      for (const auto& ov : q::parse_overrides(text)) r.spec.overrides.push_back(ov);
    } catch (const q::PrecisionError& e) {
      throw UsageError(fmt::format("--precision-override: {}", e.what()));
    }
  }
  try {
    r.quant.calibration.method = q::parse_calibration_method(m.calibration_method);
  } catch (const std::exception&) {
    throw UsageError(fmt::format("--calibration-method '{}' is not one of minmax, percentile, entropy, mse",
                                 m.calibration_method));
  }
  if (m.calibration_percentile) {
    if (r.quant.calibration.method != q::CalibrationMethod::kPercentile)
      throw UsageError(fmt::format("--calibration-percentile applies to the percentile method, not '{}'",
                                   m.calibration_method));
    if (!(*m.calibration_percentile > 0.0 && *m.calibration_percentile <= 100.0))
      throw UsageError(
          fmt::format("--calibration-percentile {} is out of range (0, 100]", *m.calibration_percentile));
    r.quant.calibration.percentile = *m.calibration_percentile;
  }
  if (m.weights != "per-channel" && m.weights != "per-tensor") {
    throw UsageError(fmt::format("--weights '{}' is not one of per-channel, per-tensor", m.weights));
  }
  r.quant.per_channel = m.weights == "per-channel";
  try {
    r.quant.weight_range = q::parse_weight_range(m.weight_range);
  } catch (const std::exception&) {
    throw UsageError(
        fmt::format("--weight-range '{}' is not one of minmax, mse, output-mse", m.weight_range));
  }
  if (m.activations != "asymmetric" && m.activations != "symmetric") {
    throw UsageError(fmt::format("--activations '{}' is not one of asymmetric, symmetric", m.activations));
  }
  r.quant.symmetric_activations = m.activations == "symmetric";
  if (m.bias_correction + m.bias_correction_nonnegative + m.no_bias_correction > 1)
    throw UsageError(
        "--bias-correction (every layer), --bias-correction-nonnegative and --no-bias-correction exclude "
        "each "
        "other");
  if (m.empirical_bias_correction && (m.bias_correction || m.bias_correction_nonnegative))
    throw UsageError(
        "--empirical-bias-correction replaces the analytic --bias-correction / --bias-correction-nonnegative "
        "(it measures and removes the whole shift); give one of them");
  r.quant.bias_correction = m.bias_correction      ? q::BiasCorrection::kAll
                            : m.no_bias_correction ? q::BiasCorrection::kNone
                                                   : q::BiasCorrection::kNonNegativeInputs;
  r.quant.empirical_bias_correction = m.empirical_bias_correction;
  if (m.empirical_bias_samples_given && !m.empirical_bias_correction)
    throw UsageError("--empirical-bias-samples needs --empirical-bias-correction");
  if (m.empirical_bias_samples < 1) throw UsageError("--empirical-bias-samples must be >= 1");
  r.quant.empirical_bias_samples = m.empirical_bias_samples;
  r.quant.cross_layer_equalization = m.cle;
  if (m.ptq_recipe != "auto" && m.ptq_recipe != "none")
    throw UsageError(fmt::format("--ptq-recipe '{}' is not one of auto, none", m.ptq_recipe));
  if (m.smoothquant && !(*m.smoothquant >= 0.0 && *m.smoothquant <= 1.0))
    throw UsageError(
        fmt::format("--smoothquant {} is out of range (its alpha is in [0, 1])", *m.smoothquant));
  r.quant.smoothquant_alpha = m.smoothquant;
  const bool imposed = m.bias_correction || m.bias_correction_nonnegative || m.no_bias_correction || m.cle ||
                       m.empirical_bias_correction || m.smoothquant.has_value();
  if (imposed && m.ptq_recipe_given)
    throw UsageError(
        "--ptq-recipe and --bias-correction, --bias-correction-nonnegative, --no-bias-correction, --cle, "
        "--smoothquant, --empirical-bias-correction exclude each other (those options impose a recipe)");
  // A timing run's numbers do not matter (scales change no cycle count): nothing to choose.
  r.choose_recipe = m.ptq_recipe == "auto" && !imposed && !m.timing_only;
  if (m.calibration_samples < 0) throw UsageError("--calibration-samples must be >= 0");
  if (m.calibration_samples == 0 && m.calibration_dir.empty()) {
    throw UsageError("--calibration-samples 0 (all) needs --calibration DIR");
  }
  r.calibration_dir = m.calibration_dir;
  r.calibration_count = m.calibration_samples;
  r.preprocess = m.preprocess;
  return o;
}

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

// The int8 quantization options given for a run that quantizes nothing would be silently inert: exit 2 naming
// them. (--cle and --smoothquant rewrite the float graph, which an fp32 run computes: not inert.)
// `calibration_evaluates`: --calibration DIR also feeds the accuracy report's evaluation (no
// --accuracy-inputs), so it is not inert.
void check_int8_options_apply(const ModelCliOptions& m, const CompiledModel& cm, bool calibration_evaluates) {
  if (cm.plan.has_int8() || cm.prequantized) return;
  std::vector<std::string> given = m.int8_only_given;
  const std::pair<bool, const char*> flags[] = {
      {!m.calibration_dir.empty() && !calibration_evaluates, "--calibration"},
      {m.calibration_samples_given, "--calibration-samples"},
      {m.calibration_percentile.has_value(), "--calibration-percentile"},
      {m.bias_correction, "--bias-correction"},
      {m.bias_correction_nonnegative, "--bias-correction-nonnegative"},
      {m.no_bias_correction, "--no-bias-correction"},
      {m.empirical_bias_correction, "--empirical-bias-correction"},
      {m.empirical_bias_samples_given, "--empirical-bias-samples"},
      {m.ptq_recipe_given, "--ptq-recipe"}};
  for (const auto& [on, name] : flags)
    if (on) given.emplace_back(name);
  if (given.empty()) return;
  std::string list;
  for (size_t k = 0; k < given.size(); ++k) list += (k ? ", " : "") + given[k];
  throw UsageError(fmt::format(
      "{} {} int8 quantization, and this run quantizes no layer (--precision {}): add "
      "--precision int8 or an int8 --precision-override, or drop {}",
      list, given.size() == 1 ? "applies to" : "apply to", m.precision, given.size() == 1 ? "it" : "them"));
}

// --preprocess: read once, validated like a configuration file (exit 2 naming file:line:col and key).
void load_preprocess(ModelCliOptions& m) {
  if (m.preprocess_file.empty() || m.preprocess) return;
  compiler::Preprocess p;
  const auto given = load_declared_file(m.preprocess_file, [&p](isa::Visitor& v) { p.visit(v); });
  // Keys that would do nothing under the chosen resize are errors, not silently ignored.
  const std::string resize(compiler::Preprocess::kResizeNames[static_cast<size_t>(p.resize)]);
  std::vector<std::string> errors;
  for (const char* key : {"anchor", "pad_value"}) {
    if (given.count(key) && p.resize != compiler::Preprocess::Resize::kLetterbox)
      errors.push_back(
          fmt::format("{}: {} applies to resize: letterbox only (resize is {})", given.at(key), key, resize));
  }
  if (given.count("interpolation") && p.resize == compiler::Preprocess::Resize::kNone)
    errors.push_back(
        fmt::format("{}: interpolation does nothing with resize: none", given.at("interpolation")));
  if (!errors.empty()) throw ConfigError(std::move(errors));
  m.preprocess = p;
}

// --accuracy and --advise-sqnr.
struct AccuracyCliOptions {
  bool accuracy = false;
  double threshold_db = 20.0;
  std::optional<int> samples;  // default: 4, or every file of --accuracy-inputs
  std::string inputs_dir;      // --accuracy-inputs
  std::string task;            // --task
  std::string keys;            // --keys FILE (ocr-rec)
  std::optional<double> advise_sqnr;
  std::string advise_inputs;  // --advise-inputs: fit the advice here, judge it on the evaluation inputs
  std::optional<int> advise_samples;  // --advise-samples (default: every file of --advise-inputs)
};

po::options_description accuracy_options(AccuracyCliOptions& a) {
  po::options_description d("Accuracy (the quantized reference against the FP32 reference, docs/quantization.md)");
  d.add_options()(
      "accuracy", po::bool_switch(&a.accuracy),
      "add the per-layer accuracy report (SQNR, cosine, max error, first bad layer, weight outliers) to "
      "the report's `accuracy` section and print a summary")(
      "accuracy-threshold", po::value(&a.threshold_db)->value_name("DB"),
      "first_bad_layer: the first layer whose SQNR is below DB (default 20)")(
      "accuracy-samples", po::value<int>()->value_name("N")->notifier([&a](int v) { a.samples = v; }),
      "evaluation inputs: the first N of --accuracy-inputs DIR (default: all), else of --calibration DIR, "
      "else N "
      "seeded synthetic inputs (other seeds than calibration) (default 4)")(
      "accuracy-inputs", po::value(&a.inputs_dir)->value_name("DIR"),
      "held-out evaluation inputs, laid out as --calibration's (images with --preprocess, .npy/.pb)")(
      "task", po::value(&a.task)->value_name("T"),
      "task metrics of the quantized model against fp32 on the first output: classify (top-1/top-5 "
      "agreement), "
      "ocr-rec (CTC greedy-decoded strings, character error rate), ocr-det (F1/IoU of the thresholded text "
      "map), regress (mean and relative error)")(
      "keys", po::value(&a.keys)->value_name("FILE"),
      "ocr-rec: the recogniser's character list, one per line (e.g. PaddleOCR's ppocr_keys_v1.txt); implies "
      "--task ocr-rec")(
      "advise-sqnr", po::value<double>()->value_name("DB")->notifier([&a](double v) { a.advise_sqnr = v; }),
      "find the layers to keep in fp16 so the output SQNR reaches DB at the lowest simulated latency, and "
      "print "
      "them as a --precision-override list")(
      "advise-inputs", po::value(&a.advise_inputs)->value_name("DIR"),
      "--advise-sqnr: fit the advice on these inputs (e.g. the --calibration folder) instead of the "
      "evaluation "
      "inputs, and judge the advised plan on the evaluation inputs (--accuracy-inputs), which the advice "
      "then never saw")("advise-samples",
                        po::value<int>()->value_name("N")->notifier([&a](int v) { a.advise_samples = v; }),
                        "--advise-inputs: fit on the first N of its files (default: all)");
  return d;
}

void accuracy_report(Context& /*ctx*/, const CompiledModel& cm, const isa::NpuConfig& config, const ModelCliOptions& m,
                     const AccuracyCliOptions& a, uint32_t seed, ReportExtras& extras) {
  namespace q = compiler::quant;
  if (a.samples && *a.samples < 1) throw UsageError("--accuracy-samples must be >= 1");
  const compiler::Preprocess* pre = m.preprocess ? &*m.preprocess : nullptr;
  q::AccuracyOptions opt;
  opt.bad_layer_sqnr_db = a.threshold_db;
  if (!a.task.empty()) {
    q::TaskOptions t;
    try {
      t.task = q::parse_task(a.task);
      // Before any evaluation input runs: an output the task cannot read is a usage error.
      if (!cm.lowered.outputs.empty() && cm.lowered.value(cm.lowered.outputs[0]).shape_known)
        q::check_task_output(t.task, cm.lowered.value(cm.lowered.outputs[0]).shape);
      if (!a.keys.empty()) {
        t.keys = q::read_keys_file(a.keys);
        const compiler::Value& out = cm.lowered.value(cm.lowered.outputs.at(0));
        if (out.shape_known && !out.shape.empty()) q::check_keys(t.keys, out.shape.back(), a.keys);
      }
    } catch (const q::TaskError& e) {
      throw UsageError(e.what());
    }
    opt.task = t;
  }
  std::vector<q::Sample> samples;
  try {
    if (!a.inputs_dir.empty())
      samples = q::load_samples(cm.lowered, a.inputs_dir, a.samples.value_or(0), pre);
    else if (!m.calibration_dir.empty())
      samples = q::load_samples(cm.lowered, m.calibration_dir, a.samples.value_or(4), pre);
    else
      samples = q::synthetic_samples(cm.lowered, a.samples.value_or(4), seed + 1000);
  } catch (const q::CalibrationError& e) {
    throw InputError(e.what());
  }
  q::AccuracyReport r;
  try {
    r = q::evaluate_accuracy(cm.lowered, cm.plan, samples, opt);
  } catch (const q::TaskError& e) {
    throw InputError(e.what());
  }
  r.evaluation_synthetic = a.inputs_dir.empty() && m.calibration_dir.empty();
  r.evaluation_source = !a.inputs_dir.empty() ? a.inputs_dir : m.calibration_dir;
  if (a.advise_sqnr) {
    if (!cm.plan.has_int8()) throw UsageError("--advise-sqnr needs int8 layers (--precision int8)");
    // Cost of a plan: compile it and simulate it (timing only).
    q::PlanCost cost = [&](const q::PrecisionPlan& p) {
      const compiler::CompileResult res = compile_with_plan(cm.lowered, config, p, simulation_timer(config), nullptr, cm.fusion);
      return static_cast<double>(arch::simulate(res.program, config, {}).total_cycles);
    };
    // int16 activations as the step before fp16, where the array has int16 x int8 MACs (the plan quantized
    // again from its calibration statistics; not for a model's own scales, an empirically corrected plan or a
    // recipe chosen by measurement, whose statistics are the chosen candidate's).
    q::PlanRequantizer int16;
    const q::QuantOptions quant = to_model_options(m, config).plan.quant;
    if (config.systolic_array.int16_rate > 0 && !cm.prequantized && !quant.empirical_bias_correction &&
        !cm.calibration_stats.empty())
      int16 = [&](const q::PrecisionPlan& p) {
        return q::requantize_plan(cm.lowered, p, cm.calibration_stats, quant);
      };
    std::vector<q::Sample> fit;
    if (!a.advise_inputs.empty()) {
      try {
        fit = q::load_samples(cm.lowered, a.advise_inputs, a.advise_samples.value_or(0), pre);
      } catch (const q::CalibrationError& e) {
        throw InputError(e.what());
      }
    }
    q::PrecisionPlan advised;
    r.advice = q::advise_mixed_precision(cm.lowered, cm.plan, fit.empty() ? samples : fit, *a.advise_sqnr,
                                         cost, int16, &advised);
    r.advice->fitted_source = fit.empty() ? r.evaluation_source : a.advise_inputs;
    if (!fit.empty()) {
      // The advised plan on the evaluation inputs, which the advice did not see.
      q::MixedPrecisionAdvice::Judgement h;
      h.inputs = static_cast<int>(samples.size());
      h.source = r.evaluation_source;
      if (r.advice->layers.empty() && r.advice->int16_layers.empty()) {
        h.sqnr_db = r.output_sqnr_db, h.cosine = r.output_cosine, h.task = r.task;
      } else {
        q::AccuracyOptions output_only = opt;
        output_only.own_error = false;  // only the output figures are kept
        const q::AccuracyReport j = q::evaluate_accuracy(cm.lowered, advised, samples, output_only);
        h.sqnr_db = j.output_sqnr_db, h.cosine = j.output_cosine, h.task = j.task;
      }
      r.advice->held_out = h;
    }
  }
  if (a.accuracy || a.advise_sqnr) extras.sections.emplace_back("accuracy", q::accuracy_json(r));
  extras.text += q::accuracy_summary(r);
  if (r.advice) {
    const q::MixedPrecisionAdvice& adv = *r.advice;
    if (adv.met && adv.layers.empty()) {
      extras.answer += fmt::format(
          "mixed-precision advice (target {:.1f} dB): met by the plan as it is ({:.2f} dB, {:.0f} cycles): no layer "
          "needs fp16\n",
          adv.target_sqnr_db, adv.achieved_sqnr_db, adv.cost_int8);
    } else {
      extras.answer += fmt::format(
          "mixed-precision advice (target {:.1f} dB): {} {:.2f} dB with {} layer(s) in int16 and {} in fp16, "
          "{:.0f} "
          "cycles (int8 as planned: {:.0f})\n",
          adv.target_sqnr_db, adv.met ? "met," : "NOT met, best", adv.achieved_sqnr_db,
          adv.int16_layers.size(), adv.layers.size(), adv.cost, adv.cost_int8);
      extras.answer += fmt::format("  --precision-override '{}'\n", adv.overrides);
      if (adv.fp16_twin_cost)
        extras.answer += fmt::format(
            "  (int16 + fp16 mix: {:.2f} dB, {:.0f} cycles; the same layers all in fp16: {:.2f} dB, {:.0f} "
            "cycles; "
            "{} kept)\n",
            adv.mix_sqnr_db, adv.mix_cost, *adv.fp16_twin_sqnr_db, *adv.fp16_twin_cost,
            adv.took_fp16_twin ? "the fp16 twin" : "the mix");
    }
    if (adv.held_out)
      extras.answer += fmt::format(
          "  fitted on {} input(s) of {}; on the {} evaluation input(s), which it did not see: {:.2f} dB, "
          "cosine "
          "{:.4f}\n{}",
          adv.fitted_inputs, adv.fitted_source, adv.held_out->inputs, adv.held_out->sqnr_db,
          adv.held_out->cosine, adv.held_out->task ? "  " + q::task_summary(*adv.held_out->task) : "");
  }
}

bool is_program_file(const std::string& path) {
  return ends_with(path, ".npu") || ends_with(path, ".s") || ends_with(path, ".asm");
}

// Compiles `spec`, mapping the compiler's errors onto the CLI's exit codes.
CompiledModel compile_or_throw(const std::string& spec, const isa::NpuConfig& config,
                               ModelCliOptions& m, const dynamic::DimBinding& dims = {}) {
  load_preprocess(m);
  ModelOptions options = to_model_options(m, config);
  options.dim_params = dims;
  if (m.memory_limit_gb < 0) throw UsageError("--memory-limit-gb must not be negative");
  if (m.memory_limit_gb > 0) compiler::set_memory_limit_bytes(static_cast<uint64_t>(m.memory_limit_gb * 1e9));
  compiler::MappingOverrides mapping;
  if (!m.mapping.empty()) {
    try {
      mapping = read_mapping_file(m.mapping);
    } catch (const MappingFileError& e) {
      throw InputError(e.what());
    }
    options.mapping = &mapping;
  }
  try {
    // -v: the graph after import and after every pass, kept until the mapping table is printed
    // (print_verbose): the table is what is read first, the graphs run to a thousand lines.
    std::ostringstream graphs;
    CompiledModel cm = compile_model(spec, config, options, m.graphs ? &graphs : nullptr);
    if (m.graphs) m.graph_dumps = graphs.str();
    const std::string too_big = dram_capacity_problem(cm.result.memory, config);
    if (!too_big.empty()) throw UsageError(fmt::format("{}: {}", spec, too_big));
    return cm;
  } catch (const compiler::ModelError& e) {
    throw InputError(e.what());
  } catch (const compiler::quant::PrecisionError& e) {
    throw UsageError(e.what());
  } catch (const compiler::quant::CalibrationError& e) {
    throw InputError(e.what());
  } catch (const compiler::MappingError& e) {
    throw InputError(e.what());
  } catch (const compiler::CompileError& e) {
    throw RunError(e.what());
  }
}

// -v: the mapping table and the precision plan (print_mapping); --graphs: last, after whatever else the
// command prints, the graph after import and after every pass (print_graphs).
void print_mapping(Context& ctx, const ModelCliOptions& m, const CompiledModel& cm) {
  if (!m.verbose) return;
  ctx.out << compiler::compile_summary(cm.result) << "\n";
  ctx.out << "precision plan: " << compiler::quant::plan_summary(cm.plan) << "\n\n";
}
void print_graphs(Context& ctx, const ModelCliOptions& m) {
  if (m.graphs) ctx.out << "\ngraphs after import and after each pass (--graphs)\n" << m.graph_dumps << "\n";
}

// --mapping-out: every layer's mapping, under a header saying what it was compiled from.
void write_mapping_out(const Context& ctx, const CommonOptions& o, const ModelCliOptions& m,
                       const std::string& spec, const CompiledModel& cm) {
  if (m.mapping_out.empty()) return;
  std::string sets;
  for (const std::string& s : o.sets) sets += " --set " + s;
  std::string args;
  for (const std::string& a : ctx.args) args += (args.empty() ? "" : " ") + a;
  const std::vector<std::string> header = {
      "npusim mapping: every layer of one compiled model, keyed by (lowered) ONNX node name.",
      "`--mapping THIS_FILE` imposes it; keys and entries left out are searched (docs/backend.md).",
      fmt::format("model: {}", spec),
      fmt::format("config: {}{}", o.config.empty() ? "edge (built-in default)" : o.config, sets),
      fmt::format("precision: {}{}", compiler::quant::to_string(cm.plan.model),
                  m.overrides.empty() && m.precision_file.empty() ? "" : " with per-layer overrides"),
      fmt::format("arguments: {}", args),
  };
  try {
    write_mapping_file(m.mapping_out, cm.result.layers, header);
  } catch (const std::runtime_error& e) {
    throw InputError(e.what());
  }
}

// --dynamic / --requests: every profile compiled and timed, the request policies served; the report
// shows the largest profile with the `profiles` and `requests` sections (sim/dynamic).
dynamic::DynamicStudy dynamic_study(const dynamic::DynamicCliOptions& dyn, const std::string& model,
                                    const isa::NpuConfig& config, ModelCliOptions& m) {
  try {
    return dynamic::run_dynamic_study(
        dyn, [&](const dynamic::DimBinding& dims) { return compile_or_throw(model, config, m, dims); }, config);
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
        fmt::format("--split {} needs a multi-core NPU; the configuration has cores = {} (set cores: N)",
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

// --split: the model over the cores in one simulation; the report's body stays the run on one core
// (simulated here once and reused), the split goes to the multicore section; --trace and --trace-csv get
// the cores' run (a track per unit of each core).
void multicore_study(multicore::Split split, const std::string& model, const CompiledModel& compiled,
                     const isa::NpuConfig& config, const CommonOptions& o, const ModelCliOptions& m,
                     ReportExtras& extras) {
  if (split == multicore::Split::kBatch && m.batch <= 0)
    throw UsageError(fmt::format("--split batch needs --batch N (N >= cores = {})", config.cores));
  try {
    extras.simulated = arch::simulate(compiled.result.program, config, {});
    const multicore::SplitResult r = multicore::run_split(
        split, compiled.result.program, *extras.simulated, config, std::max<int64_t>(1, m.batch),
        [&](int64_t batch) {
          ModelCliOptions share = m;
          share.batch = batch;
          return compile_or_throw(model, config, share).result.program;
        },
        TraceFiles(o).sink);
    if (split == multicore::Split::kBatch) {
      extras.pipeline_npu = {static_cast<int64_t>(r.latency_cycles()),
                             static_cast<int64_t>(r.latency_host_cycles())};
    }
    extras.sections.emplace_back("multicore", multicore::split_json(r));
    extras.text += multicore::split_text(r);
  } catch (const multicore::SplitError& e) {
    throw UsageError(e.what());
  } catch (const arch::SimError& e) {
    throw RunError(e.what());
  }
}

int cmd_run(Context& ctx, const Command& cmd) {
  CommonOptions o;
  ModelCliOptions m;
  FunctionalIo io;
  std::string model, pipeline_file;
  po::options_description d = config_options(o);
  d.add(model_options(m));
  d.add(precision_options(m));
  d.add(output_options(o));
  d.add_options()("pipeline", po::value(&pipeline_file)->value_name("PIPE.yaml"),
                  "end to end: pre-processing, transfers, the model, post-processing and a stream of frames; "
                  "the report's e2e section (docs/e2e.md)");
  std::string preprocess_on;
  d.add_options()(
      "preprocess-on", po::value(&preprocess_on)->value_name("host|npu"),
      "--pipeline with --preprocess: where the description's colour, normalisation and layout steps "
      "run (default host; npu: on the NPU's vector unit after the input transfer, like vendors' "
      "AIPP; the resize stays on the host)");
  std::string split_name = "none";
  d.add_options()("split", po::value(&split_name)->value_name("none|batch|layers"),
                  "on a multi-core NPU (cores > 1 in the config): none = the model on one core; batch = each "
                  "core runs its share of --batch; layers = each core a stage of the layers; the report's "
                  "multicore section (docs/multicore.md)");
  AccuracyCliOptions acc;
  d.add(accuracy_options(acc));
  dynamic::DynamicCliOptions dyn;
  d.add(dynamic::dynamic_options(dyn, true));
  po::options_description f("Functional runs");
  f.add_options()("inputs", po::value(&io.inputs_dir)->value_name("DIR"),
                  "read each model input from DIR/NAME.npy, DIR/NAME.pb or an image DIR/NAME.png/.jpg (with "
                  "--preprocess; one input: the folder's only image) (default: seeded random inputs)")(
      "outputs", po::value(&io.outputs_dir)->value_name("DIR"), "write each model output to DIR/NAME.npy")(
      "seed", po::value(&io.seed)->value_name("N"), "seed of the random inputs");
  d.add(f);
  d.add_options()("model", po::value(&model)->value_name("MODEL"),
                  "an ONNX model, a SCALE-Sim topology (.csv), a micro-model (gemm:M=..,N=..,K=.., "
                  "conv:H=..,W=..,C=..,K=..,R=..,S=..,stride=..,pad=.. or "
                  "llm:layers=..,hidden=..,heads=..,kv_heads=..,ffn=..,vocab=..), a program (.npu or .s); default: "
                  "the built-in demo CNN");
  po::positional_options_description pos;
  pos.add("model", 1);
  if (!parse(ctx, cmd, d, pos)) return kExitOk;
  if ((!io.inputs_dir.empty() || !io.outputs_dir.empty()) && !o.functional) {
    throw UsageError("--inputs and --outputs need --functional");
  }
  if ((!acc.advise_inputs.empty() || acc.advise_samples) && !acc.advise_sqnr)
    throw UsageError("--advise-inputs and --advise-samples need --advise-sqnr");
  if (acc.advise_samples && acc.advise_inputs.empty())
    throw UsageError(
        "--advise-samples needs --advise-inputs (without it the advice is fitted on the evaluation inputs)");
  if (acc.advise_samples && *acc.advise_samples < 1) throw UsageError("--advise-samples must be >= 1");
  // A keys file says what the output is: --task ocr-rec, unless another task was asked for.
  if (!acc.keys.empty() && !acc.accuracy && !acc.advise_sqnr)
    throw UsageError("--keys needs --accuracy or --advise-sqnr (it decodes the recogniser's strings there)");
  if (!acc.keys.empty() && acc.task.empty()) acc.task = "ocr-rec";
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
    extras.sections.emplace_back("generation", std::move(generation->section));
    extras.text = std::move(generation->text);
    extras.simulated = std::move(generation->prefill_report);
  }
  const CompiledModel compiled = study        ? std::move(study->main_model)
                                 : generation ? std::move(generation->prefill)
                                              : compile_or_throw(model, config, m);
  check_int8_options_apply(m, compiled, (acc.accuracy || acc.advise_sqnr) && acc.inputs_dir.empty());
  write_mapping_out(ctx, o, m, model, compiled);
  print_mapping(ctx, m, compiled);
  if (acc.accuracy || acc.advise_sqnr) accuracy_report(ctx, compiled, config, m, acc, io.seed, extras);
  if (split != multicore::Split::kNone) {
    if (dyn.active() || generate)
      throw UsageError("--split does not combine with --dynamic, --requests or --generate");
    multicore_study(split, model, compiled, config, o, m, extras);
  }
  CommonOptions body = o;  // with --split, the traces are the cores' run (multicore_study)
  if (split != multicore::Split::kNone) body.trace = body.trace_csv = "";
  if (pipeline_spec) {
    pipeline = plan_pipeline_or_throw(*pipeline_spec, compiled.result.program, config,
                                      std::max<int64_t>(1, m.batch));
  }
  const int rc = simulate_and_report(ctx, body, model, compiled.result.program, config, &compiled, io,
                                     &extras, pipeline ? &*pipeline : nullptr);
  print_graphs(ctx, m);
  return rc;
}

// npusim serve: every model of the scenario compiled and simulated alone as `npusim run` would, then
// their requests scheduled on one NPU at layer boundaries (sim/serve, docs/scenarios.md).
int cmd_serve(Context& ctx, const Command& cmd) {
  std::string scenario_file, report_file, trace_file;
  bool quiet = false;
  po::options_description d("Serving");
  d.add_options()("scenario", po::value(&scenario_file)->value_name("SCENARIO.yaml"),
                  "models, arrivals, priorities, policy, duration (docs/scenarios.md)")(
      "report", po::value(&report_file)->value_name("FILE.json"), "write the per-model and per-unit figures as JSON")(
      "trace", po::value(&trace_file)->value_name("FILE.json"),
      "write a Chrome/Perfetto trace: one lane per model, one slice per stretch a request ran")(
      "quiet,q", po::bool_switch(&quiet), "print nothing but errors");
  std::string config_arg;
  std::vector<std::string> sets;
  d.add_options()("config,c", po::value(&config_arg)->value_name("FILE.yaml"),
                  "the configuration instead of the scenario's config (a preset name or a file)")(
      "set", po::value(&sets)->composing()->value_name("KEY=VALUE"),
      "override a configuration parameter after the scenario's set (repeatable; sweeps use it)");
  po::positional_options_description pos;
  pos.add("scenario", 1);
  if (!parse(ctx, cmd, d, pos)) return kExitOk;
  if (scenario_file.empty()) throw UsageError("serve needs a scenario file (npusim serve SCENARIO.yaml)");
  serve::Scenario scenario = serve::parse_scenario_file(scenario_file);
  if (!config_arg.empty()) scenario.config = config_arg;
  scenario.sets.insert(scenario.sets.end(), sets.begin(), sets.end());
  const isa::NpuConfig whole = load_config(scenario.config, scenario.sets);
  const std::vector<size_t> sharing = serve::models_per_core(scenario, whole.cores);
  std::vector<serve::ModelProfile> profiles;
  std::vector<isa::NpuConfig> configs;  // per model, for the co-runs below
  std::vector<isa::Program> programs;
  std::vector<traces::Report> alone;
  for (size_t i = 0; i < scenario.models.size(); ++i) {
    const serve::ScenarioModel& sm = scenario.models[i];
    isa::NpuConfig config = whole;
    if (!sm.sets.empty()) {  // its own overrides, after the scenario's
      std::vector<std::string> sets = scenario.sets;
      sets.insert(sets.end(), sm.sets.begin(), sm.sets.end());
      try {
        config = load_config(scenario.config, sets);
      } catch (const ConfigError& e) {
        std::vector<std::string> problems = e.messages();
        for (std::string& p : problems)
          p = fmt::format("{}:{}:{}: models[{}].set: {}", scenario_file, sm.set_line, sm.set_column, i, p);
        throw ConfigError(problems);
      }
    }
    if (scenario.sram_partitioned) {  // among the models of its core: each core has its own SRAM
      config = serve::partitioned_sram(config, sharing[i]);
      std::vector<std::string> problems = check_constraints(config);
      for (std::string& p : problems) p = fmt::format("{}: sram: partitioned: {}", scenario_file, p);
      if (!problems.empty()) throw ConfigError(problems);
    }
    ModelCliOptions m;
    if (!sm.precision.empty()) m.precision = sm.precision;
    if (sm.batch > 0) {
      m.batch = sm.batch;
      m.batch_given = true;
    }
    m.calibration_samples = 1;  // timing only, as `npusim run` without --calibration
    m.timing_only = true;
    CompiledModel compiled = compile_or_throw(sm.model, config, m);
    traces::Report report;
    try {
      report = arch::simulate(compiled.result.program, config, arch::RunOptions{});
    } catch (const arch::SimError& e) {
      throw RunError(fmt::format("{}: {}", sm.name, e.what()));
    }
    serve::ModelProfile p = serve::profile_of(sm.name, report);
    const compiler::MemoryPlan& mem = compiled.result.memory;
    p.weight_bytes = static_cast<int64_t>(mem.weight_bytes);
    p.activation_bytes = static_cast<int64_t>(dram_footprint_bytes(mem) - mem.weight_bytes);
    p.reload_cycles = isa::timing::host_cycles(p.weight_bytes, 0, 0, config.host, config.frequency_mhz).link_in;
    if (sm.pipeline_spec) {
      e2e::E2eResult pipeline =
          e2e::plan_pipeline(*sm.pipeline_spec, compiled.result.program, config, std::max<int64_t>(1, sm.batch));
      e2e::add_npu_run(pipeline, p.total_cycles, static_cast<int64_t>(report.breakdown.host));
      serve::add_pipeline(p, pipeline);
    }
    profiles.push_back(std::move(p));
    configs.push_back(config);
    programs.push_back(std::move(compiled.result.program));
    alone.push_back(std::move(report));
  }
  // Models on different cores slow each other down through the DRAM and the host link they share: each
  // pair's slowdowns come from one simulation of their programs on two cores (docs/scenarios.md).
  serve::Slowdowns slowdown;
  for (size_t i = 0; i < scenario.models.size(); ++i) {
    for (size_t j = i + 1; j < scenario.models.size(); ++j) {
      if (scenario.models[i].core == scenario.models[j].core) continue;
      if (slowdown.empty())
        slowdown.assign(scenario.models.size(), std::vector<double>(scenario.models.size(), 1.0));
      std::vector<traces::Report> both;
      try {
        both = arch::simulate_cores({&programs[i], &programs[j]}, {&configs[i], &configs[j]});
      } catch (const arch::SimError& e) {
        throw RunError(fmt::format("{} with {} on two cores: {}", scenario.models[i].name,
                                   scenario.models[j].name, e.what()));
      }
      std::tie(slowdown[i][j], slowdown[j][i]) =
          serve::co_run_slowdowns(alone[i], both[0], alone[j], both[1]);
    }
  }
  const serve::ServeResult result =
      serve::run_scenario(scenario, profiles, whole.frequency_mhz, whole.dram.capacity_mib << 20, slowdown);
  if (!report_file.empty()) write_output(report_file, serve::serve_json(result, scenario));
  if (!trace_file.empty()) {
    auto f = open_output(trace_file);
    serve::write_serve_trace(result, *f);
    if (!f->flush()) throw InputError(fmt::format("cannot write '{}'", trace_file));
  }
  if (!quiet) ctx.out << serve::serve_text(result);
  return kExitOk;
}

// compile --dynamic: one program file per profile (PROG.npu -> PROG.seq128.npu), the weights in each.
int compile_profiles(Context& ctx, ModelCliOptions& m, const dynamic::DynamicCliOptions& dyn,
                     const std::string& model, const std::string& output, const std::string& asm_out, bool quiet,
                     const isa::NpuConfig& config) {
  if (!m.mapping_out.empty()) throw UsageError("--mapping-out writes one model's mappings; leave out --dynamic");
  std::vector<dynamic::DimBinding> profiles;
  try {
    profiles = dynamic::profiles_of(dyn);
  } catch (const dynamic::DynamicUsageError& e) {
    throw UsageError(e.what());
  }
  for (const dynamic::DimBinding& p : profiles) {
    CompiledModel compiled = compile_or_throw(model, config, m, p);
    compiled.result.program.machine = isa::to_spec_text(config);
    const std::string path = dynamic::profile_path(output, p);
    try {
      isa::write_program_file(path, compiled.result.program);
      if (!asm_out.empty()) write_output(dynamic::profile_path(asm_out, p), isa::disassemble(compiled.result.program));
    } catch (const isa::ProgramError& e) {
      throw InputError(e.what());
    }
    if (!quiet) {
      ctx.out << fmt::format("profile {}: wrote {} ({} instructions, compiled in {:.3f} s)\n", dynamic::binding_text(p),
                             path, compiled.result.program.instructions.size(), compiled.result.compile_seconds);
    }
  }
  return kExitOk;
}

int cmd_compile(Context& ctx, const Command& cmd) {
  CommonOptions o;
  ModelCliOptions m;
  std::string model, output, asm_out;
  bool quiet = false;
  po::options_description d = config_options(o);
  d.add(model_options(m));
  d.add(precision_options(m));
  d.add_options()("model", po::value(&model)->value_name("MODEL"),
                  "an ONNX model, a SCALE-Sim topology (.csv) or a micro-model")(
      "output,o", po::value(&output)->value_name("PROG.npu"), "program file to write")(
      "asm", po::value(&asm_out)->value_name("PROG.s"), "also write the assembly text")(
      "quiet,q", po::bool_switch(&quiet), "print nothing but errors");
  dynamic::DynamicCliOptions dyn;
  d.add(dynamic::dynamic_options(dyn, false));
  po::positional_options_description pos;
  pos.add("model", 1);
  if (!parse(ctx, cmd, d, pos)) return kExitOk;
  if (model.empty()) throw UsageError("compile needs a model (see 'npusim compile --help')");
  if (output.empty()) throw UsageError("compile needs -o PROG.npu (see 'npusim compile --help')");
  const isa::NpuConfig config = resolve_config(o);
  if (dyn.active()) return compile_profiles(ctx, m, dyn, model, output, asm_out, quiet, config);
  CompiledModel compiled = compile_or_throw(model, config, m);
  check_int8_options_apply(m, compiled, false);
  write_mapping_out(ctx, o, m, model, compiled);
  compiled.result.program.machine = isa::to_spec_text(config);
  try {
    isa::write_program_file(output, compiled.result.program);
    if (!asm_out.empty()) {
      std::ofstream a(asm_out, std::ios::binary);
      if (!a || !(a << isa::disassemble(compiled.result.program)) || !a.flush()) {
        throw InputError(fmt::format("cannot write '{}'", asm_out));
      }
    }
  } catch (const isa::ProgramError& e) {
    throw InputError(e.what());
  }
  if (m.verbose) {
    print_mapping(ctx, m, compiled);
  } else if (!quiet) {
    ctx.out << compiler::compile_summary(compiled.result);
  }
  print_graphs(ctx, m);
  return kExitOk;
}

int cmd_diff(Context& ctx, const Command& cmd) {
  std::vector<std::string> files;
  std::string top = "10";
  po::options_description d("Options");
  d.add_options()("reports", po::value(&files)->value_name("A.json B.json"), "two reports (npusim run --report)")(
      "top", po::value(&top)->value_name("N|all"), "layers that changed most to list (default 10)");
  po::positional_options_description pos;
  pos.add("reports", 2);
  if (!parse(ctx, cmd, d, pos)) return kExitOk;
  if (files.size() != 2) throw UsageError("diff needs two reports, A.json and B.json (see 'npusim diff --help')");
  try {
    ctx.out << diff_reports(files[0], files[1], top_layers(top));
  } catch (const ReportReadError& e) {
    throw InputError(e.what());
  }
  return kExitOk;
}

int cmd_report(Context& ctx, const Command& cmd) {
  std::string input, html;
  po::options_description d("Options");
  d.add_options()("input", po::value(&input)->value_name("REPORT.json"), "a report (npusim run --report)")(
      "html", po::value(&html)->value_name("FILE.html"),
      "write it as one self-contained HTML page: summary, sortable layer table, timeline, roofline, energy and "
      "accuracy when the report has them");
  po::positional_options_description pos;
  pos.add("input", 1);
  if (!parse(ctx, cmd, d, pos)) return kExitOk;
  if (input.empty()) throw UsageError("report needs a report file, REPORT.json (see 'npusim report --help')");
  if (html.empty()) throw UsageError("report needs --html FILE.html, the page to write (see 'npusim report --help')");
  try {
    write_output(html, html_report(read_report_text(input), input));
  } catch (const ReportReadError& e) {
    throw InputError(e.what());
  }
  return kExitOk;
}

int cmd_ops(Context& ctx, const Command& cmd) {
  po::options_description d("Options");
  if (!parse(ctx, cmd, d, {})) return kExitOk;
  ctx.out << fmt::format("{:<26} {:<11} {}\n", "op", "runs on", "constraints");
  for (const compiler::OpSupport& row : compiler::op_table()) {
    ctx.out << fmt::format("{:<26} {:<11} {}\n", row.op, compiler::to_string(row.placement), row.constraints);
  }
  ctx.out << "\nAn op not listed, or whose constraints do not hold, runs on the host CPU (HOSTCALL); its transfers and\n"
             "CPU time are counted as host time.\n";
  return kExitOk;
}

const std::vector<Command>& commands() {
  static const std::vector<Command> kCommands = {
      {"run", "run [MODEL] [options]",
       "Compile MODEL (default: the built-in demo CNN) and simulate it; print the report."},
      {"compile", "compile MODEL -o PROG.npu [--asm PROG.s] [options]",
       "Compile an ONNX model, SCALE-Sim topology or micro-model into an NPU program."},
      {"exec", "exec PROG.npu [options]", "Simulate a compiled or assembled program."},
      {"asm", "asm FILE.s -o PROG.npu", "Assemble a program (docs/isa.md)."},
      {"disasm", "disasm PROG.npu", "Print a program file as assembly text."},
      {"ops", "ops", "Print the ONNX operator support table: where each op runs and its constraints."},
      {"config", "config [--config FILE.yaml] [--set KEY=VALUE ...] [--dump [--markdown]]",
       "Print the resolved configuration as YAML, or with --dump every parameter with its type, unit, default, "
       "range and description."},
      {"diff", "diff A.json B.json [--top N|all]",
       "Compare two run reports: model, configuration, precision plan, results, and the layers (matched by name) "
       "that changed most."},
      {"report", "report REPORT.json --html FILE.html",
       "Write a saved run report as one self-contained HTML page (summary, layers, timeline, roofline, energy, "
       "accuracy)."},
      {"serve", "serve SCENARIO.yaml [--report FILE.json] [--trace FILE.json]",
       "Several models sharing one NPU: arrivals, priorities, a scheduling policy; latency percentiles, deadline "
       "misses, throughput, unit utilization (docs/scenarios.md)."},
      {"sweep", "sweep SWEEP.yaml [-j N] [-o DIR] [--dry-run] [--slurm] [--shard I/N] | sweep --merge DIR",
       "Run a design-space sweep over configuration keys and models, locally or on Slurm (docs/sweeps.md)."},
  };
  return kCommands;
}

int dispatch(const Command& cmd, Context& ctx) {
  if (cmd.name == "run") return cmd_run(ctx, cmd);
  if (cmd.name == "compile") return cmd_compile(ctx, cmd);
  if (cmd.name == "exec") return cmd_exec(ctx, cmd);
  if (cmd.name == "asm") return cmd_asm(ctx, cmd);
  if (cmd.name == "disasm") return cmd_disasm(ctx, cmd);
  if (cmd.name == "ops") return cmd_ops(ctx, cmd);
  if (cmd.name == "diff") return cmd_diff(ctx, cmd);
  if (cmd.name == "report") return cmd_report(ctx, cmd);
  if (cmd.name == "sweep") return run_sweep(ctx.args, ctx.out, ctx.err);
  if (cmd.name == "serve") return cmd_serve(ctx, cmd);
  return cmd_config(ctx, cmd);
}

void print_usage(std::ostream& out) {
  out << "usage: npusim COMMAND [options]   (npusim COMMAND --help for its options)\n\n"
         "A cycle-level NPU simulator and the compiler that maps ONNX models onto it.\n\ncommands:\n";
  for (const Command& c : commands()) out << fmt::format("  {:<8} {}\n", c.name, c.summary);
  out << "\nexit codes: 0 success, 1 compile or simulation error, 2 usage or configuration error\n";
}

// The command line as a shell would take it back: arguments with spaces or quotes single-quoted.
std::string command_line(int argc, const char* const* argv) {
  std::string s = "npusim";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool plain = !a.empty() && a.find_first_of(" \t\n'\"\\$`*?;&|<>(){}[]!#~") == std::string::npos;
    s += " ";
    if (plain) {
      s += a;
    } else {
      s += "'";
      for (char c : a) s += c == '\'' ? std::string("'\\''") : std::string(1, c);
      s += "'";
    }
  }
  return s;
}

}  // namespace

int run_cli(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  if (argc < 2) {
    print_usage(err);
    return kExitUsage;
  }
  const std::string name = argv[1];
  if (name == "--help" || name == "-h" || name == "help") {
    print_usage(out);
    return kExitOk;
  }
  if (name == "--version") {
    out << "npusim " << npusim_version() << "\n";
    return kExitOk;
  }
  Context ctx{std::vector<std::string>(argv + 2, argv + argc), out, err, command_line(argc, argv), {}};
  for (const Command& cmd : commands()) {
    if (cmd.name != name) continue;
    try {
      return dispatch(cmd, ctx);
    } catch (const ConfigError& e) {
      for (const std::string& m : e.messages()) err << "npusim: error: " << m << "\n";
      return kExitUsage;
    } catch (const YamlFileError& e) {  // pipeline and scenario files
      for (const std::string& m : e.messages()) err << "npusim: error: " << m << "\n";
      return kExitUsage;
    } catch (const UsageError& e) {
      err << "npusim: error: " << e.what() << "\n";
      return kExitUsage;
    } catch (const InputError& e) {
      err << "npusim: error: " << e.what() << "\n";
      return kExitUsage;
    } catch (const RunError& e) {
      err << "npusim: error: " << e.what() << "\n";
      return kExitFailure;
    } catch (const std::bad_alloc&) {
      // The last resort: the estimates before large allocations (compiler/ir/memory_budget.h) missed one.
      err << "npusim: error: out of memory: an allocation failed after the model's estimated needs were "
             "checked; try a smaller model or --memory-limit-gb to fail earlier with the estimate\n";
      return kExitFailure;
    } catch (const std::exception& e) {
      err << "npusim: error: " << e.what() << "\n";
      return kExitFailure;
    }
  }
  err << fmt::format("npusim: error: unknown command '{}' (see 'npusim --help')\n", name);
  return kExitUsage;
}

}  // namespace npusim::sim
