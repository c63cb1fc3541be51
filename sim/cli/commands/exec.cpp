// npusim exec: simulate a compiled or assembled program.
#include <string>

#include "sim/cli/commands/commands.h"
#include "sim/cli/files.h"
#include "sim/cli/options/groups.h"
#include "sim/cli/simulate.h"

namespace npusim::sim::cli {

namespace po = boost::program_options;

int cmd_exec(Context& ctx, const Command& cmd) {
  Options opts;
  const CommonOptions& o = opts.common;
  std::string input;
  po::options_description d("Options");
  d.add_options()("input", po::value(&input)->value_name("PROG.npu"), "program file (or assembly .s)");
  po::positional_options_description pos;
  pos.add("input", 1);
  if (!parse(ctx, cmd, d, pos, &opts)) return kExitOk;
  if (input.empty()) throw UsageError("exec needs a program file (see 'npusim exec --help')");
  start_model_hash(ctx, input);
  const isa::NpuConfig config = resolve_config(o);
  const isa::Program program = load_program(input);
  check_machine(program, config);
  return simulate_and_report(ctx, o, input, program, config);
}

}  // namespace npusim::sim::cli
