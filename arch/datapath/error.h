#pragma once
// The one exception type of the functional datapath: an instruction that cannot execute as written
// (out-of-capacity access, malformed shape, unsupported dtype). The message names the instruction and
// the offending values; callers report it as a simulation failure (exit 1).
#include <stdexcept>
#include <string>

#include "isa/isa.h"

namespace npusim::arch::datapath {

class DatapathError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// "MATMUL (layer 3)" / "VEC relu (layer 0)": how errors name an instruction without needing a Program.
std::string describe(const isa::Instruction& ins);

// Throws DatapathError with `msg` after describe(ins). Cold and out of line, so that the checks made on every
// instruction of a program inline into a few compares.
[[noreturn, gnu::cold, gnu::noinline]] void fail(const isa::Instruction& ins, const std::string& msg);

}  // namespace npusim::arch::datapath
