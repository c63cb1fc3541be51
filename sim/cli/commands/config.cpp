// npusim config: the resolved configuration, or every parameter (--dump).
#include <ostream>

#include "sim/cli/commands/commands.h"
#include "sim/cli/options/groups.h"
#include "sim/config/config_dump.h"

namespace npusim::sim::cli {

namespace po = boost::program_options;

int cmd_config(Context& ctx, const Command& cmd) {
  Options opts;
  bool dump = false;
  bool markdown = false;
  po::options_description d("Options");
  d.add_options()("dump", po::bool_switch(&dump), "every parameter: type, unit, default, range, description")(
      "markdown", po::bool_switch(&markdown), "with --dump: as a Markdown table (docs/config.md)");
  if (!parse(ctx, cmd, d, {}, &opts)) return kExitOk;
  const isa::NpuConfig config = resolve_config(opts.common);
  if (dump) {
    ctx.out << (markdown ? config_reference_markdown() : config_reference());
  } else {
    ctx.out << config_yaml(config);
  }
  return kExitOk;
}

}  // namespace npusim::sim::cli
