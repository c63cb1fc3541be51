// npusim compile: a model into a program file (one per profile with --dynamic).
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include "isa/assembly.h"
#include "isa/machine/spec_text.h"
#include "sim/cli/commands/commands.h"
#include "sim/cli/compile_model.h"
#include "sim/cli/files.h"
#include "sim/cli/options/groups.h"
#include "sim/cli/phase_status.h"

namespace npusim::sim::cli {
namespace {

// compile --dynamic: one program file per profile (PROG.npu -> PROG.seq128.npu), the weights in each.
int compile_profiles(Context& ctx, ModelCliOptions& m, const dynamic::DynamicCliOptions& dyn,
                     const std::string& model, const std::string& output, const std::string& asm_out,
                     bool quiet, const isa::NpuConfig& config) {
  if (!m.mapping_out.empty())
    throw UsageError("--mapping-out writes one model's mappings; leave out --dynamic");
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
      if (!asm_out.empty())
        write_output(dynamic::profile_path(asm_out, p), isa::disassemble(compiled.result.program));
    } catch (const isa::ProgramError& e) {
      throw InputError(e.what());
    }
    if (!quiet) {
      ctx.out << fmt::format("profile {}: wrote {} ({} instructions, compiled in {:.3f} s)\n",
                             dynamic::binding_text(p), path, compiled.result.program.instructions.size(),
                             compiled.result.compile_seconds);
    }
  }
  return kExitOk;
}

// What compile prints without -q: the program written, what runs on the host, the time each phase took;
// the mapping table and the precision plan come with -v (print_mapping).
std::string compiled_text(const std::string& path, const CompiledModel& cm,
                          const std::string& precision_source, bool verbose) {
  const compiler::CompileResult& r = cm.result;
  std::string o =
      fmt::format("wrote {}: {}, {} instructions, {:.1f} KiB of weights\n", path, layer_count_text(r),
                  r.program.instructions.size(), static_cast<double>(r.memory.weight_bytes) / 1024.0);
  o += fmt::format("precision         {}: {}\n", compiler::quant::to_string(cm.plan.model), precision_source);
  if (!r.fallbacks.empty()) {
    constexpr size_t kNamed = 5;
    std::string names;
    for (size_t i = 0; i < r.fallbacks.size() && i < kNamed; ++i)
      names += fmt::format("{}{} ({})", i ? ", " : "", r.fallbacks[i].node, r.fallbacks[i].op);
    if (r.fallbacks.size() > kNamed) names += fmt::format(" and {} more", r.fallbacks.size() - kNamed);
    o += fmt::format("on the host       {} layer{}: {}\n", r.fallbacks.size(),
                     r.fallbacks.size() == 1 ? "" : "s", names);
  }
  o += traces::phases_line(cm.phases, 0);
  if (!verbose) o += "(-v prints the mapping table and the precision plan)\n";
  return o;
}

}  // namespace

namespace po = boost::program_options;

int cmd_compile(Context& ctx, const Command& cmd) {
  Options opts;
  const CommonOptions& o = opts.common;
  ModelCliOptions& m = opts.model;
  const dynamic::DynamicCliOptions& dyn = opts.dynamic;
  std::string model, output, asm_out;
  bool quiet = false;
  po::options_description d("Options");
  d.add_options()("model", po::value(&model)->value_name("MODEL"),
                  "ONNX, SCALE-Sim .csv or gemm:/conv:/llm: micro-model")(
      "output,o", po::value(&output)->value_name("PROG.npu"), "program file to write")(
      "asm", po::value(&asm_out)->value_name("PROG.s"), "also write the assembly text")(
      "quiet,q", po::bool_switch(&quiet), "print nothing but errors");
  po::positional_options_description pos;
  pos.add("model", 1);
  if (!parse(ctx, cmd, d, pos, &opts)) return kExitOk;
  if (model.empty()) throw UsageError("compile needs a model (see 'npusim compile --help')");
  if (output.empty()) throw UsageError("compile needs -o PROG.npu (see 'npusim compile --help')");
  const isa::NpuConfig config = resolve_config(o);
  if (dyn.active()) return compile_profiles(ctx, m, dyn, model, output, asm_out, quiet, config);
  CompiledModel compiled;
  {
    PhaseStatus status(ctx.err, !quiet && isatty(STDERR_FILENO));
    m.status = &status;
    compiled = compile_or_throw(model, config, m);
    m.status = nullptr;
  }
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
  print_mapping(ctx, m, compiled);
  if (!quiet) ctx.out << compiled_text(output, compiled, precision_source(m, config, o.config), m.verbose);
  print_graphs(ctx, m);
  return kExitOk;
}

}  // namespace npusim::sim::cli
