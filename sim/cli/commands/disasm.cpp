// npusim disasm: print a program file as assembly text.
#include <ostream>
#include <string>

#include "isa/assembly.h"
#include "sim/cli/commands/commands.h"
#include "sim/cli/files.h"

namespace npusim::sim::cli {

namespace po = boost::program_options;

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

}  // namespace npusim::sim::cli
