#include "sim/cli/compile_model.h"

#include <fmt/format.h>

#include <algorithm>

#include <functional>
#include <ostream>
#include <sstream>
#include <vector>

#include "compiler/import/import.h"
#include "compiler/ir/memory_budget.h"
#include "compiler/quant/calibration.h"
#include "compiler/quant/precision.h"
#include "sim/cli/files.h"
#include "sim/cli/phase_status.h"
#include "sim/mapping/mapping_file.h"

namespace npusim::sim::cli {

namespace {

// `compile` (compile_model or compile_graph) under the CLI's model options, its errors mapped onto the
// CLI's exit codes; `spec` names the model in messages.
CompiledModel compile_mapped(
    const std::string& spec, const isa::NpuConfig& config, ModelCliOptions& m,
    const dynamic::DimBinding& dims,
    const std::function<CompiledModel(const ModelOptions&, std::ostream*)>& compile) {
  load_preprocess(m);
  ModelOptions options = to_model_options(m, config);
  options.dim_params = dims;
  if (m.status) options.on_phase = [status = m.status](std::string_view phase) { status->phase(phase); };
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
    CompiledModel cm = compile(options, m.graphs ? &graphs : nullptr);
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

}  // namespace

CompiledModel compile_or_throw(const std::string& spec, const isa::NpuConfig& config, ModelCliOptions& m,
                               const dynamic::DimBinding& dims) {
  if (!compiler::is_builtin_model_spec(spec)) check_not_directory(spec);
  return compile_mapped(spec, config, m, dims, [&](const ModelOptions& o, std::ostream* verbose) {
    return compile_model(spec, config, o, verbose);
  });
}

CompiledModel compile_graph_or_throw(compiler::Graph imported, const std::string& spec,
                                     const isa::NpuConfig& config, ModelCliOptions m) {
  m.graphs = false;  // --graphs shows the model's own compile
  return compile_mapped(spec, config, m, {}, [&](const ModelOptions& o, std::ostream* verbose) {
    return compile_graph(std::move(imported), config, o, verbose);
  });
}

void print_mapping(Context& ctx, const ModelCliOptions& m, const CompiledModel& cm) {
  if (!m.verbose) return;
  ctx.out << compiler::compile_summary(cm.result) << "\n";
  ctx.out << "precision plan: " << compiler::quant::plan_summary(cm.plan) << "\n\n";
}
void print_graphs(Context& ctx, const ModelCliOptions& m) {
  if (m.graphs) ctx.out << "\ngraphs after import and after each pass (--graphs)\n" << m.graph_dumps << "\n";
}

std::string layer_count_text(const compiler::CompileResult& r) {
  const auto fused = static_cast<size_t>(std::count_if(
      r.layers.begin(), r.layers.end(), [](const compiler::LayerPlan& p) { return !p.fused_into.empty(); }));
  return fmt::format("{} layers{}", r.layers.size() - fused,
                     fused ? fmt::format(" ({} more fused into them)", fused) : std::string());
}

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

}  // namespace npusim::sim::cli
