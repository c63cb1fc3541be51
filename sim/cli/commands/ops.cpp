// npusim ops: the ONNX operator support table.
#include <fmt/format.h>

#include <ostream>

#include "compiler/ops/op_table.h"
#include "sim/cli/commands/commands.h"

namespace npusim::sim::cli {

namespace po = boost::program_options;

int cmd_ops(Context& ctx, const Command& cmd) {
  po::options_description d("Options");
  if (!parse(ctx, cmd, d, {})) return kExitOk;
  ctx.out << fmt::format("{:<26} {:<11} {}\n", "op", "runs on", "constraints");
  for (const compiler::OpSupport& row : compiler::op_table()) {
    ctx.out << fmt::format("{:<26} {:<11} {}\n", row.op, compiler::to_string(row.placement), row.constraints);
  }
  ctx.out << "\nAn op not listed, or whose constraints do not hold, runs on the host CPU (HOSTCALL); its "
             "transfers and\n"
             "CPU time are counted as host time.\n";
  return kExitOk;
}

}  // namespace npusim::sim::cli
