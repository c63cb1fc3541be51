// npusim asm: assemble a program (docs/isa.md).
#include <string>

#include "isa/assembly.h"
#include "isa/program.h"
#include "sim/cli/commands/commands.h"
#include "sim/cli/files.h"

namespace npusim::sim::cli {

namespace po = boost::program_options;

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

}  // namespace npusim::sim::cli
