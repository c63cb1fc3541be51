// npusim compile: a model into a program file (one per profile with --dynamic).
#include <fmt/format.h>

#include <fstream>
#include <vector>

#include "isa/assembly.h"
#include "isa/machine/spec_text.h"
#include "sim/cli/commands/commands.h"
#include "sim/cli/compile_model.h"
#include "sim/cli/files.h"
#include "sim/cli/options/groups.h"

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

}  // namespace npusim::sim::cli
