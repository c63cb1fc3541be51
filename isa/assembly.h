#pragma once
// The assembly text format (docs/isa.md): one instruction per line, `MNEMONIC field=value ...`,
// directives for layers, host ops, tensors and data, `#` comments.
#include <string>

#include "isa/program.h"

namespace npusim::isa {

// Parses assembly text. Throws ProgramError "NAME:LINE: message" on the first error.
Program assemble(const std::string& text, const std::string& source_name = "<input>");

// The canonical text of a program: assemble(disassemble(p)) == p, and disassembling the result again
// gives the same text.
std::string disassemble(const Program& p);

// One instruction in canonical text (used by traces and diagnostics); layer names from `p` if given.
std::string disassemble(const Instruction& ins, const Program* p = nullptr);

}  // namespace npusim::isa
