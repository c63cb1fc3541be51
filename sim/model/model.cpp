#include "sim/model/model.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <map>
#include <optional>
#include <ostream>
#include <utility>

#include "compiler/backend/estimate/bounds.h"
#include "compiler/import/import.h"
#include "compiler/passes/cross_layer_equalization.h"
#include "compiler/passes/lowered.h"
#include "compiler/quant/accuracy.h"
#include "compiler/quant/qdq.h"
#include "compiler/quant/recipe.h"
#include "isa/json_text.h"
#include "sim/model/host_calls.h"
#include "sim/model/layer_shapes.h"
#include "sim/model/tensor_io.h"
#include "traces/report_visitor.h"
#include "traces/sink.h"

namespace npusim::sim {
namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The model's nodes fused into program layers, each right after its layer: 0 cycles, the layer's
// precision and span, its own bound (counted in the layer's efficiency). The fusion totals count them and
// the values program layers kept on chip for the next one (LayerPlan::on_chip_input).
void add_fused_layers(const compiler::CompileResult& result, traces::Report& report) {
  const std::vector<compiler::AbsorbedLayer>& absorbed = result.absorbed;
  traces::Report::Fusion& fusion = report.fusion.emplace();
  std::map<std::string, std::vector<const compiler::AbsorbedLayer*>> by_layer;
  for (const compiler::AbsorbedLayer& a : absorbed) by_layer[a.into].push_back(&a);
  std::vector<traces::LayerReport> layers;
  layers.reserve(report.layers.size() + absorbed.size());
  for (traces::LayerReport& l : report.layers) {
    auto it = by_layer.find(l.name);
    layers.push_back(std::move(l));
    if (it == by_layer.end()) continue;
    traces::LayerReport& host = layers.back();
    std::vector<traces::LayerReport> fused;
    for (const compiler::AbsorbedLayer* a : it->second) {
      traces::LayerReport f;
      f.name = a->name;
      f.op = a->op;
      f.placement = traces::LayerPlacement::kFused;
      f.fused_into = host.name;
      f.precision = host.precision;
      f.start_cycle = f.end_cycle = host.end_cycle;
      if (a->bound_cycles && host.bound_cycles) {
        f.bound_cycles = static_cast<uint64_t>(*a->bound_cycles);
        host.fused_bound_cycles += *f.bound_cycles;
      }
      f.on_chip_inputs = a->on_chip_inputs;
      f.dram_bytes_saved = a->dram_bytes_saved;
      fusion.tensors += a->on_chip_inputs.size();
      fusion.bytes_saved += static_cast<uint64_t>(a->dram_bytes_saved);
      ++fusion.nodes;
      fused.push_back(std::move(f));
    }
    for (traces::LayerReport& f : fused) layers.push_back(std::move(f));
  }
  report.layers = std::move(layers);
  // Program layers whose work another layer's code does (a fused attention block): placement "fused",
  // their bound counted in that layer's efficiency.
  std::map<std::string, traces::LayerReport*> by_name;
  for (traces::LayerReport& l : report.layers) by_name[l.name] = &l;
  for (const compiler::LayerPlan& p : result.layers) {
    auto l = by_name.find(p.name);
    auto host = by_name.find(p.fused_into);
    if (p.fused_into.empty() || l == by_name.end() || host == by_name.end()) continue;
    l->second->placement = traces::LayerPlacement::kFused;
    l->second->fused_into = p.fused_into;
    l->second->start_cycle = l->second->end_cycle = host->second->end_cycle;
    l->second->cycles = 0;
    if (l->second->bound_cycles && host->second->bound_cycles)
      host->second->fused_bound_cycles += *l->second->bound_cycles;
    // The nodes fused into it (a Pad into the pool a conv -> pool fusion takes) belong to the host now.
    host->second->fused_bound_cycles += std::exchange(l->second->fused_bound_cycles, 0);
    // Its compiled bound moves its tensors through DRAM, which the host's code keeps on chip (a conv's
    // pool, an attention block's Softmax): not the host's roof. The host is measured against its own
    // node's; the fused layer's bound counts in the host's fusion_saved_cycles.
    l->second->compiled_bound_cycles.reset();
    for (traces::LayerReport& a : report.layers) {
      if (a.placement != traces::LayerPlacement::kFused || a.fused_into != p.name) continue;
      a.fused_into = p.fused_into;
      a.start_cycle = a.end_cycle = host->second->end_cycle;
    }
    ++fusion.nodes;
  }
  for (const compiler::LayerPlan& p : result.layers) {
    // A layer's on-chip input and the residual it read where a hold kept it (backend/fusion/residency.h).
    fusion.bytes_saved += static_cast<uint64_t>(p.on_chip_bytes_saved);
    // A value that never touches DRAM; an SE block's input read where its pool left it keeps its DRAM
    // copy and counts only its bytes (compiler/backend/fusion/se_fusion.h).
    if (!p.on_chip_input.empty() && !p.on_chip_input_in_dram) ++fusion.tensors;
  }
  report.sections.push_back(traces::make_section("fusion", fusion));
}

// Every value the back end places needs a static shape. One left open after the passes is the model's
// input's doing: a dimension nobody bound, or integers read at run time (TopK's k, Split's sizes, a
// Reshape's target) that size it. Said before the back end, with what fixes it (exit 2).
void check_static_shapes(const compiler::Graph& g) {
  for (const compiler::Node& n : g.nodes) {
    for (const std::string& o : n.outputs) {
      if (o.empty() || g.value(o).fully_known()) continue;
      std::vector<std::string> open, integers;
      for (const std::string& in : g.inputs) {
        const compiler::Value& v = g.value(in);
        if (!v.fully_known()) open.push_back(in);
        if (!compiler::is_float(v.dtype)) integers.push_back(in);
      }
      auto join = [](const std::vector<std::string>& names) {
        std::string s;
        for (const std::string& x : names) s += (s.empty() ? "'" : ", '") + x + "'";
        return s;
      };
      if (!open.empty())
        throw compiler::ModelError(fmt::format(
            "value '{}' ({} '{}') has no static shape: bind the dynamic dimensions of {} with --input-shape "
            "or --dynamic",
            o, n.op_type, n.name, join(open)));
      throw compiler::ModelError(fmt::format(
          "value '{}' ({} '{}') has a shape that depends on values known only at run time{}: fix them with "
          "--input-value NAME=V[,V...]",
          o, n.op_type, n.name, integers.empty() ? "" : " (the integer inputs " + join(integers) + ")"));
    }
  }
}

// The import's warnings, on stderr as the CLI's own.
void print_warning(const std::string& warning) { std::cerr << "npusim: warning: " << warning << '\n'; }

}  // namespace

CompiledModel compile_model(const std::string& spec, const isa::NpuConfig& config,
                            const ModelOptions& options, std::ostream* verbose) {
  compiler::ImportOptions import;
  for (const std::string& s : options.input_shapes)
    import.input_shapes.insert(compiler::parse_input_shape(s));
  for (const std::string& s : options.input_values)
    import.input_values.insert(compiler::parse_input_value(s));
  import.batch = options.batch;
  import.dim_params = options.dim_params;
  import.warn = print_warning;
  bool int8 = options.plan.spec.model == compiler::quant::Precision::kInt8;
  for (const compiler::quant::PrecisionOverride& o : options.plan.spec.overrides)
    int8 = int8 || o.precision == compiler::quant::Precision::kInt8 ||
           o.precision == compiler::quant::Precision::kInt16;
  import.weight_values = options.weight_values || int8 || options.plan.quant.cross_layer_equalization ||
                         options.plan.quant.smoothquant_alpha.has_value();
  if (options.on_phase) options.on_phase("import");
  const auto start = std::chrono::steady_clock::now();
  compiler::Graph imported = compiler::load_model(spec, import);
  const double import_seconds = seconds_since(start);
  CompiledModel m = compile_graph(std::move(imported), config, options, verbose);
  m.phases.import_seconds = import_seconds;
  return m;
}

CompiledModel compile_graph(compiler::Graph imported, const isa::NpuConfig& config,
                            const ModelOptions& options, std::ostream* verbose) {
  if (options.on_phase) options.on_phase("compile");
  auto start = std::chrono::steady_clock::now();
  CompiledModel m;
  m.imported = std::move(imported);
  if (verbose)
    *verbose << "== imported\n" << compiler::to_string(m.imported, compiler::kGraphTextWidth) << "\n";
  // int16 activations need the array's int16 x int8 MACs: refused before any work when it has none.
  for (const compiler::quant::PrecisionOverride& o : options.plan.spec.overrides)
    if (o.precision == compiler::quant::Precision::kInt16 && config.systolic_array.int16_rate <= 0)
      throw compiler::quant::PrecisionError("precision override '" + o.key +
                                            "=int16': this array has no int16 x int8 MACs "
                                            "(systolic_array.int16_rate is 0)");
  std::optional<compiler::quant::ModelQuant> own;
  if (compiler::quant::is_prequantized(m.imported)) {
    compiler::quant::QdqImport q = compiler::quant::import_qdq(m.imported);
    m.lowered = std::move(q.graph);
    own = std::move(q.quant);
    m.prequantized = true;
    m.quant_notes = std::move(q.notes);
    if (verbose)
      *verbose << "== after qdq import\n"
               << compiler::to_string(m.lowered, compiler::kGraphTextWidth) << "\n";
  } else {
    m.lowered = m.imported;
  }
  compiler::PassManager::Observer observer;
  if (verbose) {
    observer = [verbose](const std::string& pass, const compiler::Graph& g) {
      *verbose << "== after " << pass << "\n" << compiler::to_string(g, compiler::kGraphTextWidth) << "\n";
    };
  }
  compiler::PipelineOptions pipeline;
  pipeline.fuse_epilogues = options.fusion;
  pipeline.whole_row_limit = compiler::rowwise_row_limit(config);
  m.fusion = options.fusion;
  compiler::lower(m.lowered, pipeline, observer);
  check_static_shapes(m.lowered);
  // The precision plan (equalization, smoothing, calibration, the recipe search): the calibration phase.
  m.phases.compile_seconds = seconds_since(start);
  if (options.on_phase) options.on_phase("calibration");
  start = std::chrono::steady_clock::now();
  compiler::passes::Equalization equalization;
  if (options.plan.quant.cross_layer_equalization) {
    // A pre-quantized model's weight codes and activation scales are its own: rescaling its float weights
    // would silently break the match between them.
    if (m.prequantized)
      throw compiler::quant::PrecisionError(
          "--cle rescales a float model's weights; this model is pre-quantized (its own weight codes and "
          "activation scales would no longer match)");
    equalization = compiler::passes::equalize_cross_layer(m.lowered);
    if (observer) observer("cross-layer-equalization", m.lowered);
  }
  if (options.plan.choose_recipe && !m.prequantized) {
    m.plan = compiler::quant::build_plan_choosing_recipe(m.lowered, options.plan, &m.imported);
    if (observer && m.plan.calibration.equalization.applied) observer("cross-layer-equalization", m.lowered);
    if (observer && m.plan.calibration.smoothing.applied) observer("smoothquant", m.lowered);
  } else {
    compiler::passes::Smoothing smoothing;
    if (options.plan.quant.smoothquant_alpha) {
      if (m.prequantized)
        throw compiler::quant::PrecisionError(
            "--smoothquant rescales a float model's weights; this model is pre-quantized (its own weight "
            "codes "
            "and activation scales would no longer match)");
      smoothing =
          compiler::quant::smooth_activations(m.lowered, options.plan, *options.plan.quant.smoothquant_alpha);
      if (observer) observer("smoothquant", m.lowered);
    }
    m.plan = compiler::quant::build_plan(m.lowered, options.plan, &m.imported, own ? &*own : nullptr,
                                         &m.quant_notes, &m.calibration_stats);
    m.plan.calibration.equalization = std::move(equalization);
    m.plan.calibration.smoothing = std::move(smoothing);
  }
  // A float plan calibrates nothing: its few milliseconds count as compiling.
  const bool calibrated =
      m.plan.has_int8() || m.plan.calibration.equalization.applied || m.plan.calibration.smoothing.applied;
  (calibrated ? m.phases.calibration_seconds : m.phases.compile_seconds) += seconds_since(start);
  if (options.on_phase) options.on_phase("compile");
  start = std::chrono::steady_clock::now();
  m.result = compile_with_plan(m.lowered, config, m.plan, options.timer, options.mapping, options.fusion,
                               options.objective, options.energy, options.interleave);
  compiler::bound_as_imported(m.result, m.imported, m.lowered, config, options.mapping);
  m.phases.compile_seconds += seconds_since(start);
  return m;
}

compiler::CompileResult compile_with_plan(const compiler::Graph& lowered, const isa::NpuConfig& config,
                                          const compiler::quant::PrecisionPlan& plan, const CodeTimer& timer,
                                          const compiler::MappingOverrides* mapping, bool fold_concats,
                                          compiler::MappingObjective objective,
                                          const compiler::CodeEnergy& energy, bool interleave) {
  using compiler::quant::Precision;
  bool uniform = true;
  for (const auto& [name, np] : plan.nodes) uniform &= np.effective == plan.model;
  compiler::CompileOptions copt;
  copt.mapping = mapping;
  if (uniform && plan.model != Precision::kInt8) {
    copt.precision = compiler::quant::to_dtype(plan.model);
  } else {
    // Mixed or int8: activations between layers take each producer's format; float work that the
    // plan leaves in fp32 runs at the model's float default (fp32 when the array has fp32 MACs).
    copt.precision = isa::DType::kFp32;
    copt.plan = &plan;
  }
  copt.timer = timer;
  copt.objective = objective;
  copt.energy = energy;
  copt.fold_concats = fold_concats;
  copt.keep_on_chip = fold_concats;
  copt.interleave_layers = interleave;
  return compiler::compile(lowered, config, copt);
}

void attach_compile_info(const CompiledModel& compiled, traces::Report& report) {
  const compiler::CompileResult& result = compiled.result;
  std::map<std::string, const compiler::LayerPlan*> plans;
  for (const compiler::LayerPlan& p : result.layers) plans[p.name] = &p;
  for (traces::LayerReport& l : report.layers) {
    auto it = plans.find(l.name);
    if (it == plans.end()) continue;
    const compiler::LayerPlan& p = *it->second;
    if (p.bound_cycles) l.bound_cycles = static_cast<uint64_t>(*p.bound_cycles);
    if (p.compiled_bound_cycles) l.compiled_bound_cycles = static_cast<uint64_t>(*p.compiled_bound_cycles);
    traces::LayerMapping& m = l.mapping.emplace();
    m.placement = compiler::placement_name(p.placement);
    m.description = p.mapping;
    m.int8_scheme = p.int8_scheme;
    m.tile_m = p.tile_m;
    m.tile_k = p.tile_k;
    m.tile_n = p.tile_n;
    m.tile_oh = p.tile_oh;
    m.tile_ow = p.tile_ow;
    m.tile_elems = p.tile_elems;
    m.loop_order = p.loop_order;
    m.sram_input_bytes = p.sram_input_bytes;
    m.sram_weight_bytes = p.sram_weight_bytes;
    m.sram_accumulator_bytes = p.sram_acc_bytes;
    m.estimated_cycles = p.est_cycles;
    m.estimated_compute_cycles = p.est_compute_cycles;
    m.estimated_dma_cycles = p.est_dma_cycles;
    m.candidates = p.candidates;
    m.tile_limit = p.tile_limit;
    l.on_chip_input = p.on_chip_input;
    l.on_chip_bytes_saved = p.on_chip_bytes_saved;
    l.fusion_group = p.fusion_group;
  }
  add_fused_layers(result, report);
  for (traces::LayerReport& l : report.layers) describe_layer_node(compiled.imported, compiled.lowered, l);
  if (result.compiled_bound_cycles)
    report.compiled_bound_cycles = static_cast<uint64_t>(*result.compiled_bound_cycles);
  if (const std::optional<compiler::backend::ModelLimit>& limit = result.model_limit) {
    report.model_limit_cycles = static_cast<uint64_t>(limit->cycles());
    report.model_limit = traces::Report::ModelLimit{limit->array_cycles, limit->vector_cycles,
                                                    limit->dram_cycles, limit->array_fold_cycles};
    for (traces::LayerReport& l : report.layers) {
      if (auto c = limit->node_cycles.find(l.name); c != limit->node_cycles.end())
        l.limit_cycles = static_cast<uint64_t>(std::ceil(c->second));
    }
  }
  const compiler::MemoryPlan& mem = result.memory;
  std::string o;
  JsonWriter w(o);
  w.object()
      .member("seconds", result.compile_seconds)
      .member("fusion", compiled.fusion)
      .key("memory")
      .object();
  w.member("activation_bytes", mem.activation_bytes)
      .member("activation_bytes_no_reuse", mem.activation_bytes_no_reuse);
  w.member("weight_bytes", mem.weight_bytes)
      .member("scratch_bytes", mem.scratch_bytes)
      .end()
      .key("fallbacks")
      .array();
  for (const compiler::Fallback& f : result.fallbacks) {
    w.object().member("node", f.node).member("op", f.op).member("reason", f.reason);
    w.member("estimated_cycles", f.est_cycles).end();
  }
  w.end().key("layout_conversions").array();
  for (const compiler::InsertedTranspose& t : result.transposes) {
    w.object().member("node", t.node).member("value", t.input).key("shape").array();
    for (int64_t d : t.shape) w.value(d);
    w.end().member("reason", t.reason).end();
  }
  w.end();
  const compiler::quant::PrecisionPlan& plan = compiled.plan;
  if (plan.calibration.equalization.applied)
    w.key("cross_layer_equalization").raw(compiler::quant::equalization_json(plan.calibration.equalization));
  if (plan.calibration.smoothing.applied)
    w.key("smoothquant").raw(compiler::quant::smoothing_json(plan.calibration.smoothing));
  if (plan.has_int8()) {
    const compiler::quant::CalibrationInfo& cal = plan.calibration;
    w.key("quantization").object().member("prequantized", compiled.prequantized).key("calibration").object();
    w.member("method", cal.method).member("inputs", cal.inputs).member("synthetic", cal.synthetic);
    w.member("source", cal.source).member("bias_correction", cal.bias_correction);
    if (cal.recipe.chosen) w.key("recipe").raw(compiler::quant::recipe_json(cal.recipe));
    w.end().key("notes").array();
    for (const std::string& note : compiled.quant_notes) w.value(note);
    w.end().end();
  }
  w.end();
  report.sections.push_back(std::make_shared<traces::JsonSection>("compile", o));
}

void add_functional_hooks(const isa::Program& program, const CompiledModel* compiled, const FunctionalIo& io,
                          arch::RunOptions& run) {
  run.functional = true;
  run.before_run = [&program, compiled, &io](arch::datapath::MachineState& state) {
    const auto inputs = io.inputs_dir.empty() ? random_inputs(program, io.seed)
                                              : read_inputs(program, io.inputs_dir, io.preprocess,
                                                            compiled ? &compiled->lowered : nullptr);
    for (const isa::TensorBinding& b : program.tensors) {
      auto it = inputs.find(b.name);
      if (b.role != isa::TensorBinding::Role::kInput || it == inputs.end()) continue;
      state.write_tensor(b.name, to_device_bytes(it->second, b.dtype));
    }
    if (compiled) state.set_host_op_handler(host_op_handler(compiled->result));
  };
  run.after_run = [&program, &io](arch::datapath::MachineState& state) {
    if (io.outputs_dir.empty()) return;
    std::map<std::string, std::vector<float>> outputs;
    for (const isa::TensorBinding& b : program.tensors) {
      if (b.role != isa::TensorBinding::Role::kOutput) continue;
      const std::vector<uint8_t> raw = state.read_tensor(b.name);
      outputs[b.name] = from_device_bytes(raw, b.dtype);
    }
    const std::vector<std::string> written = write_outputs(io.outputs_dir, outputs, program);
    if (io.written) *io.written = written;
  };
}

uint64_t dram_footprint_bytes(const compiler::MemoryPlan& memory) {
  return memory.weight_bytes + memory.activation_bytes + memory.scratch_bytes;
}

std::string dram_capacity_problem(const compiler::MemoryPlan& memory, const isa::NpuConfig& config) {
  const uint64_t capacity = static_cast<uint64_t>(config.dram.capacity_mib) << 20;
  const uint64_t need = dram_footprint_bytes(memory);
  if (capacity == 0 || need <= capacity) return "";
  constexpr double kMib = 1 << 20;
  return fmt::format(
      "the model needs {:.2f} MiB of DRAM (weights {:.2f}, activations {:.2f}, scratch {:.2f}) but "
      "dram.capacity_mib is {}",
      need / kMib, memory.weight_bytes / kMib, memory.activation_bytes / kMib, memory.scratch_bytes / kMib,
      config.dram.capacity_mib);
}

}  // namespace npusim::sim
