#include "sim/cli/command.h"

#include <fmt/format.h>

#include <ostream>

namespace npusim::sim::cli {

namespace po = boost::program_options;

bool parse(Context& ctx, const Command& cmd, po::options_description desc,
           const po::positional_options_description& pos) {
  bool help = false;
  desc.add_options()("help,h", po::bool_switch(&help), "show this help");
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(ctx.args).options(desc).positional(pos).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    throw UsageError(fmt::format("{} (see 'npusim {} --help')", e.what(), cmd.name));
  }
  if (help) {
    ctx.out << "usage: npusim " << cmd.synopsis << "\n\n" << cmd.summary << "\n\n" << desc << "\n";
    return false;
  }
  return true;
}

}  // namespace npusim::sim::cli
