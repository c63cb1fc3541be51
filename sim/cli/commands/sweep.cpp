#include "sim/cli/commands/commands.h"
#include "sim/sweep/sweep_cli.h"

namespace npusim::sim::cli {

// The sweep's own front (sim/sweep/sweep_cli.h) parses its options and maps its errors onto exit codes.
int cmd_sweep(Context& ctx, const Command& /*cmd*/) { return run_sweep(ctx.args, ctx.out, ctx.err); }

}  // namespace npusim::sim::cli
