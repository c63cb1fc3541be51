#pragma once
// The handlers of the command table (commands/table.cpp), one file each under sim/cli/commands/.
#include "sim/cli/command.h"

namespace npusim::sim::cli {

int cmd_run(Context& ctx, const Command& cmd);
int cmd_compile(Context& ctx, const Command& cmd);
int cmd_exec(Context& ctx, const Command& cmd);
int cmd_asm(Context& ctx, const Command& cmd);
int cmd_disasm(Context& ctx, const Command& cmd);
int cmd_ops(Context& ctx, const Command& cmd);
int cmd_config(Context& ctx, const Command& cmd);
int cmd_diff(Context& ctx, const Command& cmd);
int cmd_report(Context& ctx, const Command& cmd);
int cmd_serve(Context& ctx, const Command& cmd);
int cmd_sweep(Context& ctx, const Command& cmd);
int cmd_calibrate(Context& ctx, const Command& cmd);

}  // namespace npusim::sim::cli
